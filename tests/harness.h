// harness.h: the shared test harness. Each CHECK prints the numbers behind a failure; test_finish
// combines the verdict over all ranks of MPI_COMM_WORLD (when MPI is initialized) and returns the
// process exit code (0 pass, 1 fail). GPU tests return 77 (ctest's skip code) when there is no GPU.
// provides: CHECK, CHECK_NEAR, CHECK_EQ_INT, test_failures, test_finish, test_rel_diff, test_gpus_for_all,
//           test_seed
#ifndef DS_TEST_HARNESS_H
#define DS_TEST_HARNESS_H

#include <math.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "backend/backend.h"

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

// Collective over MPI_COMM_WORLD: 1 when every rank has a GPU of its own (a node has at least as
// many GPUs as ranks), else 0 on every rank (and always 0 in a build without CUDA).
static inline int test_gpus_for_all(void)
{
    int rank = 0, local = 0, have = 0, all = 0;
    MPI_Comm node;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node);
    MPI_Comm_size(node, &local);
    MPI_Comm_free(&node);
    const char *why = NULL;
    const ds_backend *dev = ds_backend_device(&why);
    have = dev && dev->device_count() >= local;
    MPI_Allreduce(&have, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    return all;
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

#endif
