// harness.h: the shared test harness. Each CHECK prints the numbers behind a failure; test_finish
// combines the verdict over all ranks of MPI_COMM_WORLD (when MPI is initialized) and returns the
// process exit code (0 pass, 1 fail). GPU tests return 77 (ctest's skip code) when there is no GPU:
// test_open_pair is their start (the skip and the contexts). Files a test writes live in a directory
// of its own (test_tmp_open .. test_tmp_remove).
// provides: CHECK, CHECK_NEAR, CHECK_EQ_INT, test_failures, test_finish, test_rel_diff, test_devices_for_all,
//           test_gpus_for_all, test_open_pair, test_seed, test_tmp_open, test_tmp_dir, test_tmp_path,
//           test_tmp_remove
#ifndef DS_TEST_HARNESS_H
#define DS_TEST_HARNESS_H

#include <dirent.h>
#include <math.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "backend/backend.h"
#include "core/ctx.h"

static int test_failures_ = 0;
static int test_checks_ = 0;

#define CHECK(cond, ...)                                                  \
    do {                                                                  \
        test_checks_++;                                                   \
        if (!(cond)) {                                                    \
            test_failures_++;                                             \
            fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond); \
            fprintf(stderr, __VA_ARGS__);                                 \
            fprintf(stderr, "\n");                                        \
        }                                                                 \
    } while (0)

// |got − want| ≤ tol, printing both.
#define CHECK_NEAR(got, want, tol, what)                                                   \
    CHECK(fabs((double)(got) - (double)(want)) <= (tol), "%s: got %.17g want %.17g (tol %g)", \
          (what), (double)(got), (double)(want), (double)(tol))

#define CHECK_EQ_INT(got, want, what) \
    CHECK((long long)(got) == (long long)(want), "%s: got %lld want %lld", (what), (long long)(got), (long long)(want))

// ‖x − y‖ / ‖y‖ (‖x − y‖ when ‖y‖ is 0).
static inline double test_rel_diff(const double *x, const double *y, int64_t n)
{
    double d = 0, r = 0;
    for (int64_t i = 0; i < n; i++) {
        d += (x[i] - y[i]) * (x[i] - y[i]);
        r += y[i] * y[i];
    }
    return r > 0 ? sqrt(d / r) : sqrt(d);
}

// Collective over MPI_COMM_WORLD: 1 when every rank has a device of backend be of its own (a node has
// at least as many of its devices as ranks), else 0 on every rank (always 0 for a NULL be or a host one).
static inline int test_devices_for_all(const ds_backend *be)
{
    int rank = 0, local = 0, have = 0, all = 0;
    MPI_Comm node;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node);
    MPI_Comm_size(node, &local);
    MPI_Comm_free(&node);
    have = be && be->device_count && be->device_count() >= local;
    MPI_Allreduce(&have, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    return all;
}

// test_devices_for_all for the first device backend of the registry (0 in a build without one).
static inline int test_gpus_for_all(void)
{
    const char *why = NULL;
    return test_devices_for_all(ds_backend_device(&why));
}

// The start of a test over MPI_COMM_WORLD. With gpu given, the test needs a GPU on every rank: where a
// rank lacks one, rank 0 prints "NAME: skipped: ..." and 77 is returned with nothing opened. Otherwise
// cpu (when given) is opened on the CPU backend and gpu on the first device backend. Returns 0, or 1
// when an open failed (CHECKed, so test_finish fails). Either way both may be passed to ctx_close.
// Collective.
static inline int test_open_pair(const char *name, ds_ctx *cpu, ds_ctx *gpu)
{
    ds_ctx *ctx[2] = {cpu, gpu};
    for (int i = 0; i < 2; i++)
        if (ctx[i])
            memset(ctx[i], 0, sizeof *ctx[i]);
    if (gpu && !test_gpus_for_all()) {
        int rank = 0;
        MPI_Comm_rank(MPI_COMM_WORLD, &rank);
        if (rank == 0)
            printf("%s: skipped: not every rank has a GPU of its own\n", name);
        return 77;
    }
    const char *why = NULL;
    const char *names[2] = {"cpu", gpu ? ds_backend_device(&why)->name : NULL};
    int failed = 0;
    for (int i = 0; i < 2; i++) {
        if (!ctx[i])
            continue;
        int rc = ctx_open(ctx[i], MPI_COMM_WORLD, names[i]);
        CHECK(rc == DS_OK, "%s: %s context: %s", name, names[i], ctx[i]->msg.text);
        failed |= rc != DS_OK;
    }
    return failed;
}

// Collective: the seed of a test's fresh random inputs, DSOLVE_TEST_SEED or the clock, the same on
// every rank; rank 0 prints it under name so that a failure can be replayed.
static inline uint64_t test_seed(const char *name)
{
    const char *env = getenv("DSOLVE_TEST_SEED");
    uint64_t seed = env ? strtoull(env, NULL, 10) : (uint64_t)time(NULL);
    int rank = 0;
    MPI_Bcast(&seed, 1, MPI_UINT64_T, 0, MPI_COMM_WORLD);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (rank == 0)
        printf("%s: seed %llu (DSOLVE_TEST_SEED replays it)\n", name, (unsigned long long)seed);
    return seed;
}

// Combines the verdict over all ranks; rank 0 prints "N passed, N failed".
static inline int test_finish(const char *name)
{
    int init = 0, rank = 0;
    int counts[2] = {test_checks_ - test_failures_, test_failures_};
    MPI_Initialized(&init);
    if (init) {
        int fin = 0;
        MPI_Finalized(&fin);
        if (!fin) {
            MPI_Comm_rank(MPI_COMM_WORLD, &rank);
            MPI_Allreduce(MPI_IN_PLACE, counts, 2, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
        }
    }
    if (rank == 0)
        printf("%s: %d passed, %d failed\n", name, counts[0], counts[1]);
    return counts[1] == 0 && counts[0] > 0 ? 0 : 1;
}

// A test's own directory of files: test_tmp_open makes $TMPDIR/dsolve-NAME-XXXXXX (/tmp without
// TMPDIR; unique, so ranks and concurrent tests never share one) and returns its path (NULL, CHECKed,
// when it cannot); test_tmp_dir is that path; test_tmp_path(file) names a file in it (from a rotating set
// of 8 buffers: valid for the next 7 calls); test_tmp_remove deletes the files in it and the directory.
static inline char *test_tmp_dir_buf(void)
{
    static char dir[512];
    return dir;
}

static inline const char *test_tmp_dir(void)
{
    return test_tmp_dir_buf();
}

static inline const char *test_tmp_open(const char *name)
{
    const char *base = getenv("TMPDIR");
    char *dir = test_tmp_dir_buf();
    snprintf(dir, 512, "%s/dsolve-%s-XXXXXX", base && *base ? base : "/tmp", name);
    const int made = mkdtemp(dir) != NULL;
    CHECK(made, "cannot make a directory like %s", dir);
    return made ? dir : NULL;
}

static inline const char *test_tmp_path(const char *file)
{
    static char buf[8][600];
    static int k = 0;
    k = (k + 1) % 8;
    snprintf(buf[k], sizeof buf[k], "%s/%s", test_tmp_dir(), file);
    return buf[k];
}

static inline void test_tmp_remove(void)
{
    DIR *d = opendir(test_tmp_dir());
    for (struct dirent *e; d && (e = readdir(d)) != NULL;)
        if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0)
            unlink(test_tmp_path(e->d_name));
    if (d)
        closedir(d);
    rmdir(test_tmp_dir());
}

#endif
