// test_units.c: the small pieces on their own: the option parser (the same table makes --help), the
// generator (the same rows however they are split over threads or ranks), the JSON writer, and the
// vectorised tanh of the network's CPU path against libm; the probe worker's verdicts when a check
// answers, crashes or exits; a crash inside a read's crash scope (exit 3 and one line) and outside it; a
// message stays one line whatever a file put in it.
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/cleanup.h"
#include "core/gen.h"
#include "core/probe.h"
#include <sys/wait.h>
#include "harness.h"
#include "cli/opts.h"
#include "cli/report.h"
#include "core/rng.h"
#include "ann/vtanh.h"

static const ds_opt table[] = {
    {"n", OPT_INT, "5", "N", 1, 100, "a count"},
    {"x", OPT_DOUBLE, "0.5", "X", 0, 1, "a fraction"},
    {"mode", OPT_CHOICE, "a", "a|bb|c", 0, 0, "a choice"},
    {"name", OPT_STRING, NULL, "S", 0, 0, "a name"},
    {"flag", OPT_FLAG, NULL, NULL, 0, 0, "a flag"},
    {NULL, 0, NULL, NULL, 0, 0, NULL},
};

static int parse(const char *line, ds_args *a, ds_msg *msg)
{
    static char buf[256];  // the parsed values point into it
    char *argv[16];
    int argc = 0;
    snprintf(buf, sizeof buf, "%s", line);
    for (char *t = strtok(buf, " "); t && argc < 16; t = strtok(NULL, " "))
        argv[argc++] = t;
    memset(msg, 0, sizeof *msg);
    return opts_parse(table, argc, argv, a, msg);
}

static void test_opts(void)
{
    ds_args a;
    ds_msg m;
    CHECK_EQ_INT(parse("", &a, &m), DS_OK, "no options");
    CHECK_EQ_INT(opts_int(&a, "n"), 5, "default int");
    CHECK_NEAR(opts_double(&a, "x"), 0.5, 0, "default double");
    CHECK(opts_str(&a, "name") == NULL && !opts_flag(&a, "flag") && !opts_given(&a, "n"), "unset options");
    CHECK_EQ_INT(parse("--n 7 --x=0.25 --mode bb --name q --flag", &a, &m), DS_OK, "all options");
    CHECK(opts_int(&a, "n") == 7 && opts_double(&a, "x") == 0.25 && strcmp(opts_str(&a, "mode"), "bb") == 0 &&
              strcmp(opts_str(&a, "name"), "q") == 0 && opts_flag(&a, "flag") && opts_given(&a, "n"),
          "values as given");
    const char *bad[] = {"--n 0", "--n 101", "--n 7x", "--n 99999999999999999999", "--x 2", "--x nan", "--x 1e999",
                         "--mode b", "--bogus 1", "--flag=1", "--n", "n 5", "--name="};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int rc = parse(bad[i], &a, &m);
        CHECK(rc == DS_ERR_USAGE && m.text[0], "'%s' should be a usage error, got %d (%s)", bad[i], rc, m.text);
    }
    CHECK_EQ_INT(parse("--x 1e-320", &a, &m), DS_OK, "a subnormal number is a number");
}

static void test_gen(void)
{
    gen_lsq p = {.rows = 997, .cols = 13, .seed = 42, .noise = 0.1, .corr = 0.4};
    double a[13], *X1 = malloc(997 * 13 * sizeof(double)), *X2 = malloc(997 * 13 * sizeof(double));
    double *y1 = malloc(997 * sizeof(double)), *y2 = malloc(997 * sizeof(double));
    gen_a_true(&p, a);
    gen_lsq_rows(&p, a, 0, 997, 0, X1, y1);
    gen_lsq_rows_parallel(&p, a, 0, 500, 0, X2, y2, 7);  // split by threads and in two pieces
    gen_lsq_rows_parallel(&p, a, 500, 497, 0, X2 + 500 * 13, y2 + 500, 3);
    CHECK(memcmp(X1, X2, 997 * 13 * sizeof(double)) == 0 && memcmp(y1, y2, 997 * sizeof(double)) == 0,
          "generated rows depend on how they are split");
    double lo = 1, hi = -1;
    for (int i = 0; i < 997 * 13; i++)
        lo = X1[i] < lo ? X1[i] : lo, hi = X1[i] > hi ? X1[i] : hi;
    CHECK(lo > -1 && hi < 1 && lo < -0.3 && hi > 0.3, "X range [%g, %g]", lo, hi);
    free(X1), free(X2), free(y1), free(y2);
}

static void test_json(void)
{
    FILE *f = tmpfile();
    ds_json j;
    json_begin(&j);
    json_str(&j, "s", "a\"b\\c\n");
    json_num(&j, "nan", 0.0 / 0.0);
    json_int(&j, "i", -3);
    double v[2] = {1.5, 1.0 / 0.0};
    json_nums(&j, "v", v, 2);
    json_bool(&j, "b", 1);
    json_end(&j, f);
    rewind(f);
    char line[256] = {0};
    CHECK(fgets(line, sizeof line, f) != NULL, "json written");
    fclose(f);
    CHECK(strcmp(line, "{\"s\":\"a\\\"b\\\\c\\u000a\",\"nan\":null,\"i\":-3,\"v\":[1.5,null],\"b\":true}\n") == 0,
          "json: %s", line);
}

// ds_tanh_shift and ds_tanh_affine against tanh from libm: absolute error ≤ 4e-16 over random values
// in [−30, 30] and the edges (0, ±tiny, the cap at 20, ±inf), NaN kept; layer widths that fill the
// 64-wide blocks and that leave a tail.
static void test_vtanh(void)
{
    const int64_t widths[] = {1, 63, 64, 65, 200, 1000};
    const double edges[] = {0.0, -0.0, 1e-300, -1e-300, 1e-9, -1e-9, 0.5, -0.5, 19.99, 20.0, 20.01, -20.0, 40.0,
                            -700.0, 1e300, INFINITY, -INFINITY};
    const int ne = (int)(sizeof edges / sizeof edges[0]);
    double worst = 0;
    for (size_t w = 0; w < sizeof widths / sizeof widths[0]; w++) {
        const int64_t K = widths[w];
        double *h = malloc((size_t)K * sizeof(double)), *b = calloc((size_t)K, sizeof(double));
        double *wt = malloc((size_t)(3 * K) * sizeof(double)), x[2] = {0.75, -1.25}, *ref = malloc((size_t)K * 8);
        for (int rep = 0; rep < 50; rep++) {
            for (int64_t k = 0; k < K; k++) {
                const uint64_t i = (uint64_t)(rep * 100000 + w * 10000 + k);
                h[k] = rep == 0 && k < ne ? edges[k] : 60.0 * rng_uniform(7, 1, i) - 30.0;
                ref[k] = tanh(h[k]);
            }
            ds_tanh_shift(h, b, K);
            for (int64_t k = 0; k < K; k++) {
                const double d = fabs(h[k] - ref[k]);
                worst = d > worst ? d : worst;
            }
            for (int64_t k = 0; k < K; k++) {  // the affine form: two inputs and a bias
                for (int c = 0; c < 3; c++)
                    wt[c * K + k] = 8.0 * rng_uniform(7, 2 + c, (uint64_t)(rep * K + k)) - 4.0;
                ref[k] = tanh(wt[2 * K + k] + x[0] * wt[k] + x[1] * wt[K + k]);
            }
            ds_tanh_affine(x, 2, wt, K, h);
            for (int64_t k = 0; k < K; k++) {
                const double d = fabs(h[k] - ref[k]);
                worst = d > worst ? d : worst;
            }
        }
        h[0] = NAN;
        ds_tanh_shift(h, b, 1);
        CHECK(isnan(h[0]), "vtanh: tanh(NaN) is %g, not NaN", h[0]);
        free(h), free(b), free(wt), free(ref);
    }
    CHECK(worst <= 4e-16, "vtanh: largest absolute error against libm's tanh %.3e (> 4e-16)", worst);
}

// A check that answers ('a': 3 with a message), crashes ('s'), or exits with status 7 ('x') on request.
static int probe_check(const void *req, size_t len, ds_msg *msg)
{
    const char op = len ? *(const char *)req : 'a';
    if (op == 's')
        raise(SIGSEGV);
    if (op == 'x')
        _exit(7);  // as a sanitizer's report ends a process
    return ds_fail(msg, DS_ERR_INPUT, "checked");
}

static void test_probe(void)
{
    int signo = 0;
    ds_msg msg = {{0}};
    int rc = probe_run("a", 1, &signo, &msg);
    CHECK(rc == DS_ERR_INPUT && signo == 0 && strcmp(msg.text, "checked") == 0, "probe answer: rc %d signo %d '%s'",
          rc, signo, msg.text);
    rc = probe_run("s", 1, &signo, &msg);
    CHECK(rc == DS_ERR_INPUT && signo == SIGSEGV, "probe crash: rc %d signo %d", rc, signo);
    rc = probe_run("x", 1, &signo, &msg);
    CHECK(rc == DS_ERR_INPUT && signo == -7 && strcmp(probe_signal_name(signo), "its process exited with status 7") == 0,
          "probe exit: rc %d signo %d (%s)", rc, signo, probe_signal_name(signo));
    rc = probe_run("a", 1, &signo, &msg);  // a fresh worker after the two that ended
    CHECK(rc == DS_ERR_INPUT && signo == 0, "probe after a crash: rc %d signo %d", rc, signo);
}

// A crash inside a crash scope is exit 3 with the file's line; after the scope, the signal as before it.
static void test_crash_scope(void)
{
    for (int inside = 1; inside >= 0; inside--) {
        int fd[2];
        CHECK(pipe(fd) == 0, "pipe");
        const pid_t pid = fork();
        if (pid == 0) {
            dup2(fd[1], STDERR_FILENO);
            cleanup_crash_scope("crafted.h5");
            if (!inside)
                cleanup_crash_scope(NULL);
            raise(SIGSEGV);
            _exit(0);
        }
        close(fd[1]);
        char line[256] = "";
        size_t len = 0;
        for (ssize_t n; len < sizeof line - 1 && (n = read(fd[0], line + len, sizeof line - 1 - len)) > 0;)
            len += (size_t)n;
        line[len] = 0;
        close(fd[0]);
        int st = 0;
        waitpid(pid, &st, 0);
        if (inside)
            CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 3 &&
                      strcmp(line, "dsolve: crafted.h5: the HDF5 library crashed reading its data (SIGSEGV): a damaged "
                                   "or crafted file\n") == 0,
                  "crash inside the scope: status %d, '%s'", st, line);
        else  // the handler from before: the default action, or a sanitizer's report and its exit status
            CHECK((WIFSIGNALED(st) && WTERMSIG(st) == SIGSEGV) ||
                      (WIFEXITED(st) && WEXITSTATUS(st) != 0 && WEXITSTATUS(st) != 3),
                  "crash after the scope: status %d", st);
    }
}

// ds_fail's message is one line: control characters from a file (a filter's name "g\nffle", found by
// fuzzing) become '?'; the first failure's message is kept.
static void test_one_line(void)
{
    ds_msg m = {{0}};
    CHECK(ds_fail(&m, DS_ERR_INPUT, "filter %d (%s)", 258, "\tg\nffle\r\x7f") == DS_ERR_INPUT, "status");
    CHECK(strcmp(m.text, "filter 258 (?g?ffle?\?)") == 0, "one line: '%s'", m.text);
    ds_fail(&m, DS_ERR_RUNTIME, "second");
    CHECK(strcmp(m.text, "filter 258 (?g?ffle?\?)") == 0, "the first message kept: '%s'", m.text);
}

int main(int argc, char **argv)
{
    test_crash_scope();        // forks: before MPI_Init
    probe_start(probe_check);  // before MPI_Init, as dsolve's main does
    MPI_Init(&argc, &argv);
    test_probe();
    test_opts();
    test_gen();
    test_json();
    test_vtanh();
    test_one_line();
    int rc = test_finish("test_units");
    MPI_Finalize();
    return rc;
}
