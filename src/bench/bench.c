// bench.c: `dsolve bench CASE`: the options, the case table, opening the CPU and GPU contexts side by
// side, the memory plan checked before anything is allocated, and the loop over sizes that samples
// resources, prints rows and gives the verdict.
// provides: cmd_bench, bench_cpu_wanted
#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench/bench.h"
#include "cli/cmds.h"
#include "cli/report.h"

// The cases, in the order `all` runs them. A new case is one line here (and its declaration in bench.h).
static const bench_case *const bench_cases[] = {
    &bench_case_matmul,
    &bench_case_add,
    &bench_case_solve,
    &bench_case_ann,
    &bench_case_sort,
    &bench_case_logreg,
};
enum { N_CASES = sizeof bench_cases / sizeof bench_cases[0] };

static const ds_opt bench_table[] = {
    {"sizes", OPT_STRING, NULL, "LIST", 0, 0,
     "sizes to sweep: 10,100,1000 or FROM:TO:xFACTOR or FROM:TO:+STEP (1e3:1e9:x10); "
     "per case CASE=LIST;CASE=LIST (default: each case's own)"},
    {"dtype", OPT_CHOICE, "f64", "f64|f32", 0, 0,
     "element type of matmul and add (solve: storage of X; logreg: storage of X and its GEMMs; ann: f64 only; sort: int32 keys)"},
    {"m", OPT_INT, NULL, "M", 1, 2147483647, "matmul: one M x N x K shape (rows of A and C) instead of square sizes"},
    {"n", OPT_INT, NULL, "N", 1, 2147483647, "matmul: columns of B and C"},
    {"k", OPT_INT, NULL, "K", 1, 2147483647, "matmul: columns of A, rows of B"},
    {"scaling", OPT_CHOICE, "strong", "strong|weak", 0, 0,
     "strong: a size is split over the ranks; weak: every rank gets the whole size"},
    {"include-transfer", OPT_FLAG, NULL, NULL, 0, 0, "the GPU time includes copying inputs to the device and the result back"},
    {"repeat", OPT_INT, "5", "R", 1, 1000, "timed calls per size (the median is reported)"},
    {"warmup", OPT_INT, "1", "W", 0, 100, "untimed calls before them"},
    {"cpu-budget", OPT_DOUBLE, "10", "SECONDS", 0, 1e9,
     "with a GPU, the CPU is not timed where a call is predicted to take longer (the check then samples rows)"},
    {"cols", OPT_INT, "1000", "N", 1, 1e6, "solve: columns of X"},
    {"iters", OPT_INT, "10", "K", 1, 1e6, "solve: sweeps; logreg: gradient-descent iterations"},
    {"batch", OPT_INT, "100", "B", 1, 1e6, "solve: columns per block"},
    {"method", OPT_STRING, "solvebak", "LIST", 0, 0,
     "solve: methods, comma-separated, from solvebak, residual, gram, block (gram with --block-solve), cholesky, qr, "
     "auto; or all. Peers: the seed's CuPy for solvebak, torch's normal equations for cholesky, torch.linalg.lstsq "
     "for qr and auto (torch_peers.py beside --peer)"},
    {"peer", OPT_STRING, NULL, "FILE.py", 0, 0, "also run the seed's code (seed_peers.py) from rank 0 and report the ratio"},
    {"csv", OPT_FLAG, NULL, NULL, 0, 0, "CSV on stdout instead of the table"},
    {"plot", OPT_STRING, NULL, "FILE.svg", 0, 0, "time against size, CPU and GPU, log-log (FILE-CASE.svg for several cases)"},
    DS_COMMON_OPTS,
    {NULL, 0, NULL, NULL, 0, 0, NULL},
};

static const char bench_usage[] = "dsolve bench CASE [--sizes LIST] [--dtype f64|f32] [--repeat R] [options]";

static void bench_help(const ds_args *args)
{
    char about[2048] = "Times the CPU (OpenBLAS on the rank's cores) and the GPU on the same inputs, checks the GPU's\n"
                       "result against the CPU's, and tabulates time, rate, speedup and resources per size.\nCASE:";
    for (int i = 0; i < N_CASES; i++) {
        size_t used = strlen(about);
        snprintf(about + used, sizeof about - used, "\n  %-8s %s", bench_cases[i]->name, bench_cases[i]->about);
    }
    strncat(about, "\n  all      every case above", sizeof about - strlen(about) - 1);
    opts_help(stdout, args, bench_usage, about);
}

// ---------------------------------------------------------------------------------------------------
// Choosing cases and sizes

typedef struct bench_plan {
    const bench_case *c[N_CASES];
    int64_t sizes[N_CASES][BENCH_MAX_SIZES];
    int nsizes[N_CASES];
    int ncases;
    char skipped[512];  // the cases `all` left out, and why ("" when none)
} bench_plan;

// The part of --sizes for case name: "CASE=LIST" items separated by ';', or a LIST for every case.
static int sizes_for(const char *text, const char *name, char *out, size_t len)
{
    for (const char *s = text; *s;) {
        const char *semi = strchr(s, ';'), *end = semi ? semi : s + strlen(s);
        const char *eq = memchr(s, '=', (size_t)(end - s));
        if (!eq || ((size_t)(eq - s) == strlen(name) && strncmp(s, name, (size_t)(eq - s)) == 0)) {
            const char *v = eq ? eq + 1 : s;
            snprintf(out, len, "%.*s", (int)(end - v), v);
            return 1;
        }
        s = semi ? semi + 1 : end;
    }
    return 0;
}

// Whether `all` runs case c; a case that cannot run here is noted in p->skipped.
static int plan_takes(const bench_run *b, const bench_case *c, bench_plan *p)
{
    char why[256];
    if (!c->available || c->available(b, why, sizeof why))
        return 1;
    size_t used = strlen(p->skipped);
    snprintf(p->skipped + used, sizeof p->skipped - used, "%s%s skipped (%s)", used ? "; " : "", c->name, why);
    return 0;
}

static int bench_plan_make(const bench_run *b, const char *name, bench_plan *p, ds_msg *msg)
{
    const ds_args *a = &b->args;
    memset(p, 0, sizeof *p);
    for (int i = 0; i < N_CASES; i++)
        if (strcmp(name, bench_cases[i]->name) == 0 || (strcmp(name, "all") == 0 && plan_takes(b, bench_cases[i], p)))
            p->c[p->ncases++] = bench_cases[i];
    if (p->ncases == 0 && strcmp(name, "all") != 0) {
        char names[256] = "";
        for (int i = 0; i < N_CASES; i++)
            snprintf(names + strlen(names), sizeof names - strlen(names), "%s, ", bench_cases[i]->name);
        return ds_fail(msg, DS_ERR_USAGE, "bench: unknown case '%s' (cases: %sall)", name, names);
    }
    const char *given = opts_str(a, "sizes");
    const int shape = opts_given(a, "m") || opts_given(a, "n") || opts_given(a, "k");
    if (shape && !(opts_given(a, "m") && opts_given(a, "n") && opts_given(a, "k")))
        return ds_fail(msg, DS_ERR_USAGE, "bench: --m, --n and --k go together (one M x N x K matmul shape)");
    for (int i = 0; i < p->ncases; i++) {
        const bench_case *c = p->c[i];
        char text[1024];
        int mm_shape = shape && c == &bench_case_matmul;
        if (given && sizes_for(given, c->name, text, sizeof text) && mm_shape)
            return ds_fail(msg, DS_ERR_USAGE, "bench: matmul takes --sizes or --m/--n/--k, not both");
        if (mm_shape)
            snprintf(text, sizeof text, "%s", opts_str(a, "m"));  // the shape's M stands for the size
        else if (!given || !sizes_for(given, c->name, text, sizeof text))
            snprintf(text, sizeof text, "%s", c->default_sizes);
        DS_CHECK(bench_parse_sizes(text, p->sizes[i], &p->nsizes[i], msg));
    }
    return DS_OK;
}

// ---------------------------------------------------------------------------------------------------
// Opening the run

// The rank's host threads: OPENBLAS_NUM_THREADS when set, else the node's cores shared among its ranks.
static int bench_threads(const ds_ctx *ctx)
{
    const char *env = getenv("OPENBLAS_NUM_THREADS");
    return env && atoi(env) > 0 ? atoi(env) : ctx_cores(ctx);
}

// The CPU context always; the GPU context when --backend allows and every rank has a GPU of its own.
static int bench_open(bench_run *b, MPI_Comm comm, ds_msg *msg)
{
    int rc = ctx_open(&b->cpu, comm, "cpu");
    if (rc != DS_OK) {
        *msg = b->cpu.msg;
        return rc;
    }
    report_settings(&b->cpu, &b->args);
    b->threads = bench_threads(&b->cpu);
    openblas_set_num_threads(b->threads);
    const char *backend = opts_str(&b->args, "backend");
    if (strcmp(backend, "cpu") == 0) {
        snprintf(b->gpu_note, sizeof b->gpu_note, "--backend cpu");
        return DS_OK;
    }
    rc = ctx_open(&b->gpu, comm, backend);
    if (rc == DS_OK && b->gpu.device < 0) {  // auto fell back to the host backend
        snprintf(b->gpu_note, sizeof b->gpu_note, "%s", b->gpu.backend_note[0] ? b->gpu.backend_note : "no GPU");
        ctx_close(&b->gpu);
        return DS_OK;
    }
    if (rc != DS_OK) {
        *msg = b->gpu.msg;
        return rc;
    }
    b->have_gpu = 1;
    b->gpu.quiet = b->cpu.quiet;
    ds_device_info dev;
    if (b->gpu.be->device_info(b->gpu.device, &dev) && dev.bus[0])
        b->nvml = sys_nvml_find(dev.bus, -1);
    return DS_OK;
}

// The host memory this node's ranks may use: DSOLVE_HOST_MEMORY (GB) where set, since on machines whose
// RAM grows as it is used MemAvailable starts far below the real limit; else MemAvailable (0: unknown).
static int bench_host_limit(bench_run *b, double *bytes)
{
    const char *env = getenv("DSOLVE_HOST_MEMORY");
    if (env && *env) {
        char *end = NULL;
        double gb = strtod(env, &end);
        if (end == env || *end != '\0' || !(gb > 0 && gb < 1e9))
            return ds_fail(&b->cpu.msg, DS_ERR_USAGE, "DSOLVE_HOST_MEMORY must be gigabytes (> 0), not \"%s\"", env);
        *bytes = gb * 1e9;
        return DS_OK;
    }
    sys_host h;
    sys_host_info(&h);
    *bytes = (double)h.ram_available;
    return DS_OK;
}

// Every size of every case fits in this rank's share of host memory and in its GPU's free memory.
static int bench_check_memory(bench_run *b, const bench_plan *p)
{
    double host_free = 0;
    DS_CHECK(bench_host_limit(b, &host_free));
    host_free = host_free > 0 ? 0.9 * host_free / b->cpu.local_size : INFINITY;
    double dev_free = INFINITY, dev_total = 0;
    if (b->have_gpu) {
        ds_device_info dev;
        if (!b->gpu.be->device_info(b->gpu.device, &dev))
            return ds_fail(&b->cpu.msg, DS_ERR_RUNTIME, "bench: the memory of GPU %d could not be read (rank %d)",
                           b->gpu.device, b->cpu.rank);
        dev_free = 0.95 * dev.free_b;
        dev_total = dev.total;
    }
    for (int i = 0; i < p->ncases; i++)
        for (int s = 0; s < p->nsizes[i]; s++) {
            const bench_case *c = p->c[i];
            const int64_t n = p->sizes[i][s];
            double host = 0, dev = 0;
            DS_CHECK(c->need(b, n, &host, &dev, &b->cpu.msg));
            if (host > host_free)
                return ds_fail(&b->cpu.msg, DS_ERR_INPUT,
                               "bench %s %s=%lld: needs %.2f GB of host memory on rank %d, %.2f GB available to it "
                               "(%d ranks on %s; DSOLVE_HOST_MEMORY=GB sets the node's figure)", c->name, c->size_label, (long long)n, host / 1e9, b->cpu.rank,
                               host_free / 1e9, b->cpu.local_size, b->cpu.host);
            if (b->have_gpu && dev > dev_free)
                return ds_fail(&b->cpu.msg, DS_ERR_INPUT,
                               "bench %s %s=%lld: needs %.2f GB of GPU memory on rank %d, %.2f GB free of %.2f",
                               c->name, c->size_label, (long long)n, dev / 1e9, b->cpu.rank, dev_free / 1e9,
                               dev_total / 1e9);
        }
    return DS_OK;
}

int bench_cpu_wanted(const bench_run *b, double work, double guess_rate)
{
    if (!b->have_gpu)
        return 1;
    double rate = b->cpu_rate_seen > 0 ? b->cpu_rate_seen : guess_rate;
    return work / rate <= b->cpu_budget;
}

// ---------------------------------------------------------------------------------------------------
// The loop over sizes

static void row_init(bench_row *r, int64_t size)
{
    memset(r, 0, sizeof *r);
    r->size = size;
    r->cpu_s = r->gpu_s = r->ref_s = r->ref_rate = r->bcast_s = r->peer_s = NAN;
    r->err = r->tol = NAN;
}

// Reductions over ranks and the derived figures.
static void row_finish(bench_run *b, bench_row *r, const sys_sampler *s)
{
    MPI_Comm comm = b->cpu.comm;
    double mx[4] = {(double)s->rss_peak, (double)s->gpu_mem_peak, s->wall_s, isnan(r->err) ? INFINITY : r->err};
    MPI_Allreduce(MPI_IN_PLACE, mx, 4, MPI_DOUBLE, MPI_MAX, comm);
    double sum[4] = {s->cpu_use_pct, isnan(s->gpu_use_pct) ? 0 : s->gpu_use_pct, isnan(s->gpu_use_pct) ? 0 : 1,
                     (double)r->wrong};
    MPI_Allreduce(MPI_IN_PLACE, sum, 4, MPI_DOUBLE, MPI_SUM, comm);
    MPI_Bcast(&r->peer_s, 1, MPI_DOUBLE, 0, comm);
    r->rss_peak = mx[0];
    r->gpu_mem_peak = mx[1] >= 0 ? mx[1] : NAN;
    r->wall_s = mx[2];
    r->err = mx[3];
    r->cpu_use = sum[0] / b->cpu.nranks;
    r->gpu_use = sum[2] > 0 ? sum[1] / sum[2] : NAN;
    r->wrong = (int64_t)sum[3];
    r->cpu_rate = r->work / r->cpu_s / 1e9;
    r->gpu_rate = r->work / r->gpu_s / 1e9;
    r->speedup = r->cpu_s / r->gpu_s;
    r->of_ref = r->gpu_rate / r->ref_rate;
    r->peer_ratio = r->peer_s / (b->have_gpu ? r->gpu_s : r->cpu_s);
    if (isfinite(r->cpu_s))
        b->cpu_rate_seen = r->work / r->cpu_s;
}

static int row_failed(const bench_row *r)
{
    return r->wrong > 0 || !(r->err <= r->tol);
}

static int bench_variants(const bench_run *b, const bench_case *c)
{
    int nv = 0;
    while (c->variant && c->variant(b, nv))
        nv++;
    return nv > 0 ? nv : 1;
}

// Long: one row per size and variant, each sampled, agreed on, finished and printed as it completes, so
// that a long sweep shows its rows as they come.
static int bench_case_run(bench_run *b, const bench_case *c, const int64_t *sizes, int ns, bench_result *res, FILE *table)
{
    memset(res, 0, sizeof *res);
    res->c = c;
    const int nv = bench_variants(b, c);
    res->rows = calloc((size_t)ns * nv, sizeof(bench_row));
    DS_CHECK(bench_agree(b, &b->cpu, res->rows ? DS_OK : ds_fail(&b->cpu.msg, DS_ERR_RUNTIME, "out of host memory")));
    b->cpu_rate_seen = 0;
    if (table)
        bench_out_header(b, c, table);
    for (int i = 0; i < ns * nv; i++) {
        bench_row *r = &res->rows[i];
        row_init(r, sizes[i / nv]);
        b->variant = i % nv;
        if (nv > 1)
            b->cpu_rate_seen = 0;  // variants run at different rates
        sys_sampler s;
        sys_sampler_start(&s, b->nvml, 10);
        int rc = c->run(b, sizes[i / nv], r);
        sys_sampler_stop(&s);
        DS_CHECK(bench_agree(b, &b->cpu, rc));
        row_finish(b, r, &s);
        res->nrows++;
        res->failed += row_failed(r);
        if (table)
            bench_out_row(b, c, r, table);
    }
    res->crossover = nv == 1 ? bench_crossover(res->rows, res->nrows) : NAN;  // across variants it means nothing
    if (table)
        bench_out_footer(b, res, table);
    return DS_OK;
}

// ---------------------------------------------------------------------------------------------------
// The subcommand

static int bench_parse(int argc, char **argv, bench_run *b, const char **name, ds_msg *msg)
{
    *name = argc > 0 && strncmp(argv[0], "--", 2) != 0 ? argv[0] : NULL;
    DS_CHECK(opts_parse(bench_table, argc - (*name != NULL), argv + (*name != NULL), &b->args, msg));
    const ds_args *a = &b->args;
    if (opts_flag(a, "help"))
        return DS_OK;
    if (!*name)
        return ds_fail(msg, DS_ERR_USAGE, "bench needs a CASE (see dsolve bench --help)");
    if (opts_flag(a, "json") && opts_flag(a, "csv"))
        return ds_fail(msg, DS_ERR_USAGE, "bench: --json or --csv, not both");
    b->f32 = strcmp(opts_str(a, "dtype"), "f32") == 0;
    b->repeat = (int)opts_int(a, "repeat");
    b->warmup = (int)opts_int(a, "warmup");
    b->include_transfer = opts_flag(a, "include-transfer");
    b->weak = strcmp(opts_str(a, "scaling"), "weak") == 0;
    b->cpu_budget = opts_double(a, "cpu-budget");
    b->peer = opts_str(a, "peer");
    const char *corrupt = getenv("DSOLVE_BENCH_CORRUPT");  // fault injection for the tests
    b->corrupt = corrupt && strcmp(corrupt, "1") == 0;
    if (b->peer && strchr(b->peer, '\''))
        return ds_fail(msg, DS_ERR_USAGE, "--peer: a path with a quote (') is not supported");
    if (b->peer && access(b->peer, R_OK) != 0)
        return ds_fail(msg, DS_ERR_INPUT, "--peer %s: no such readable file", b->peer);
    return DS_OK;
}

static void bench_outputs(bench_run *b, const bench_result *res, int nres)
{
    if (b->cpu.rank != 0)
        return;
    if (opts_flag(&b->args, "json"))
        bench_out_json(b, res, nres, stdout);
    else if (opts_flag(&b->args, "csv"))
        bench_out_csv(b, res, nres, stdout);
}

static int bench_plots(bench_run *b, const bench_result *res, int nres)
{
    const char *path = opts_str(&b->args, "plot");
    int rc = DS_OK;
    for (int i = 0; path && b->cpu.rank == 0 && rc == DS_OK && i < nres; i++)
        rc = bench_out_svg(b, &res[i], path, nres > 1, &b->cpu.msg);
    return bench_agree(b, &b->cpu, rc);
}

static int bench_verdict(bench_run *b, const bench_result *res, int nres)
{
    int failed = 0;
    for (int i = 0; i < nres; i++)
        failed += res[i].failed;
    if (!failed)
        return DS_OK;
    for (int i = 0; i < nres; i++)
        for (int k = 0; k < res[i].nrows; k++)
            if (row_failed(&res[i].rows[k]))
                return ds_fail(&b->cpu.msg, DS_ERR_NUMERIC,
                               "bench: %d size(s) failed the check; first: %s %s=%lld: max error %.3g > tolerance %.3g, "
                               "%lld wrong (%s)", failed, res[i].c->name, res[i].c->size_label,
                               (long long)res[i].rows[k].size, res[i].rows[k].err, res[i].rows[k].tol,
                               (long long)res[i].rows[k].wrong, res[i].rows[k].check);
    return DS_ERR_NUMERIC;
}

static int bench_all(bench_run *b, const bench_plan *p, bench_result *res, int *nres)
{
    FILE *table = b->cpu.rank == 0 && !opts_flag(&b->args, "json") && !opts_flag(&b->args, "csv") ? stdout : NULL;
    if (p->skipped[0])
        ctx_log(&b->cpu, "bench: %s", p->skipped);
    DS_CHECK(bench_agree(b, &b->cpu, bench_check_memory(b, p)));
    for (int i = 0; i < p->ncases; i++) {
        DS_CHECK(bench_case_run(b, p->c[i], p->sizes[i], p->nsizes[i], &res[i], table));
        (*nres)++;
    }
    bench_outputs(b, res, *nres);
    DS_CHECK(bench_plots(b, res, *nres));
    return bench_verdict(b, res, *nres);
}

int cmd_bench(MPI_Comm comm, int argc, char **argv, ds_msg *msg)
{
    static bench_run b;  // large (the option values): kept off the stack
    static bench_plan plan;
    memset(&b, 0, sizeof b);
    const char *name = NULL;
    DS_CHECK(bench_parse(argc, argv, &b, &name, msg));
    if (opts_flag(&b.args, "help")) {
        int rank = 0;
        MPI_Comm_rank(comm, &rank);
        if (rank == 0)
            bench_help(&b.args);
        return DS_OK;
    }
    DS_CHECK(bench_plan_make(&b, name, &plan, msg));
    int rc = bench_open(&b, comm, msg);
    if (rc != DS_OK) {
        ctx_close(&b.cpu);
        return rc;
    }
    bench_result res[N_CASES];
    memset(res, 0, sizeof res);
    int nres = 0;
    rc = bench_all(&b, &plan, res, &nres);
    *msg = b.cpu.msg;
    for (int i = 0; i < nres; i++)
        free(res[i].rows);
    if (nres < N_CASES && res[nres].rows)  // a case that failed part-way
        free(res[nres].rows);
    if (b.have_gpu)
        ctx_close(&b.gpu);
    ctx_close(&b.cpu);
    return rc;
}
