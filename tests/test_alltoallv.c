// test_alltoallv.c: the backends' personalized all-to-all (ds_backend.alltoallv). Random per-pair byte
// counts (zeros included), displacements with gaps whose guard bytes must stay untouched, and a byte
// pattern that names sender, receiver and offset. Mode "cpu": the CPU backend, by default and with
// 7-, 64- and 4096-byte MPI pieces (DSOLVE_TEST_A2A_CHUNK), the path a count beyond int takes.
// Mode "gpu": the CUDA backend on the same cases, checked byte for byte, plus a pair of more than
// 2^31 bytes; exits 77 where the ranks have no GPU of their own.
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/ctx.h"
#include "harness.h"
#include "core/rng.h"

#define GUARD 0xA5
#define GAP 3  // guard bytes after every block

static uint8_t pattern(int src, int dst, int64_t i)
{
    return (uint8_t)(src * 131 + dst * 31 + i * 7 + (i >> 8) * 13 + (i >> 16));
}

typedef struct plan {
    int p;
    int64_t *scount, *sdispl, *rcount, *rdispl;
    int64_t sbytes, rbytes;
} plan;

// count(src → dst): the same on every rank; about a third of the pairs are empty.
static int64_t pair_count(uint64_t seed, int p, int src, int dst, int64_t maxc)
{
    double u = rng_uniform(seed, 7, (uint64_t)(src * p + dst));
    return u < 0.3 ? 0 : (int64_t)(u * (double)maxc);
}

static void plan_make(plan *pl, int p, int me, uint64_t seed, int64_t maxc, int64_t big)
{
    pl->p = p;
    pl->scount = calloc((size_t)p * 4, sizeof(int64_t));
    pl->sdispl = pl->scount + p;
    pl->rcount = pl->sdispl + p;
    pl->rdispl = pl->rcount + p;
    pl->sbytes = pl->rbytes = 0;
    for (int r = 0; r < p; r++) {
        // big > 0: rank r sends big bytes to rank r + 1 (to itself with one rank), on top of the rest.
        pl->scount[r] = big > 0 ? (r == (me + 1) % p ? big : 0) : pair_count(seed, p, me, r, maxc);
        pl->rcount[r] = big > 0 ? (me == (r + 1) % p ? big : 0) : pair_count(seed, p, r, me, maxc);
    }
    // Send blocks in reverse rank order, receive blocks in rank order, GAP bytes after each.
    for (int r = p - 1; r >= 0; r--) {
        pl->sdispl[r] = pl->sbytes;
        pl->sbytes += pl->scount[r] + GAP;
    }
    for (int r = 0; r < p; r++) {
        pl->rdispl[r] = pl->rbytes;
        pl->rbytes += pl->rcount[r] + GAP;
    }
}

static int64_t check_recv(const uint8_t *recv, const plan *pl, int me)
{
    int64_t bad = 0;
    for (int r = 0; r < pl->p; r++) {
        const uint8_t *b = recv + pl->rdispl[r];
        for (int64_t i = 0; i < pl->rcount[r]; i++)
            bad += b[i] != pattern(r, me, i);
        for (int64_t i = 0; i < GAP; i++)
            bad += b[pl->rcount[r] + i] != GUARD;
    }
    return bad;
}

// One exchange on ctx; the received bytes are checked on the host.
static void run_case(ds_ctx *ctx, uint64_t seed, int64_t maxc, int64_t big, const char *what)
{
    plan pl;
    plan_make(&pl, ctx->nranks, ctx->rank, seed, maxc, big);
    uint8_t *hs = malloc((size_t)pl.sbytes), *hr = malloc((size_t)pl.rbytes);
    CHECK(hs && hr, "host memory for %s", what);
    if (!hs || !hr)
        return;
    memset(hs, 0x11, (size_t)pl.sbytes);
    for (int r = 0; r < pl.p; r++)
        for (int64_t i = 0; i < pl.scount[r]; i++)
            hs[pl.sdispl[r] + i] = pattern(ctx->rank, r, i);
    memset(hr, GUARD, (size_t)pl.rbytes);
    void *ds = NULL, *dr = NULL;
    int rc = ctx->be->alloc(ctx, &ds, (size_t)pl.sbytes);
    if (rc == DS_OK)
        rc = ctx->be->alloc(ctx, &dr, (size_t)pl.rbytes);
    if (rc == DS_OK)
        rc = ctx->be->upload(ctx, ds, hs, (size_t)pl.sbytes);
    if (rc == DS_OK)
        rc = ctx->be->upload(ctx, dr, hr, (size_t)pl.rbytes);
    rc = ctx_agree(ctx, rc);
    if (rc == DS_OK)
        rc = ctx->be->alltoallv(ctx, ds, pl.scount, pl.sdispl, dr, pl.rcount, pl.rdispl);
    if (rc == DS_OK)
        rc = ctx->be->download(ctx, hr, dr, (size_t)pl.rbytes);
    CHECK(rc == DS_OK, "%s on %s: %s", what, ctx->be->name, ctx->msg.text);
    if (rc == DS_OK) {
        int64_t bad = check_recv(hr, &pl, ctx->rank);
        CHECK(bad == 0, "%s on %s rank %d: %lld wrong bytes of %lld", what, ctx->be->name, ctx->rank,
              (long long)bad, (long long)pl.rbytes);
    }
    ctx->be->free(ctx, ds);
    ctx->be->free(ctx, dr);
    free(hs);
    free(hr);
    free(pl.scount);
}

static void run_cases(ds_ctx *ctx, uint64_t seed)
{
    run_case(ctx, seed, 0, 0, "all counts zero");
    run_case(ctx, seed + 1, 1, 0, "counts 0 or 1");
    run_case(ctx, seed + 2, 100, 0, "counts < 100");
    run_case(ctx, seed + 3, 70000, 0, "counts < 70000");
    run_case(ctx, seed + 4, 0, 1 << 20, "one 1 MiB pair per rank");
}

// The CPU backend with the default piece and with forced small ones.
static void test_cpu(uint64_t seed)
{
    const char *chunks[] = {NULL, "7", "64", "4096"};
    for (int c = 0; c < 4; c++) {
        if (chunks[c])
            setenv("DSOLVE_TEST_A2A_CHUNK", chunks[c], 1);
        else
            unsetenv("DSOLVE_TEST_A2A_CHUNK");
        ds_ctx ctx;
        int rc = ctx_open(&ctx, MPI_COMM_WORLD, "cpu");
        CHECK(rc == DS_OK, "cpu ctx (piece %s): %s", chunks[c] ? chunks[c] : "default", ctx.msg.text);
        if (rc == DS_OK)
            run_cases(&ctx, seed + 10 * (uint64_t)c);
        ctx_close(&ctx);
    }
    unsetenv("DSOLVE_TEST_A2A_CHUNK");
    setenv("DSOLVE_TEST_A2A_CHUNK", "0", 1);
    ds_ctx bad;
    CHECK(ctx_open(&bad, MPI_COMM_WORLD, "cpu") == DS_ERR_USAGE, "a piece of 0 bytes is refused: %s", bad.msg.text);
    ctx_close(&bad);
    unsetenv("DSOLVE_TEST_A2A_CHUNK");
}

static void test_gpu(ds_ctx *ctx, uint64_t seed)
{
    run_cases(ctx, seed);
    // ncclSend/Recv and the self copy with a size_t count beyond 2^31.
    run_case(ctx, seed, 0, ((int64_t)1 << 31) + 4099, "one pair of 2^31 + 4099 bytes per rank");
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    const int gpu = argc > 1 && strcmp(argv[1], "gpu") == 0;
    const char *name = gpu ? "test_alltoallv gpu" : "test_alltoallv cpu";
    ds_ctx ctx;
    int rc = gpu ? test_open_pair(name, NULL, &ctx) : 0;
    if (rc == 77) {
        MPI_Finalize();
        return 77;
    }
    uint64_t seed = test_seed(name);
    if (gpu && rc == 0)
        test_gpu(&ctx, seed);
    else if (!gpu)
        test_cpu(seed);
    if (gpu)
        ctx_close(&ctx);
    rc = test_finish(name);
    MPI_Finalize();
    return rc;
}
