// gram_lt.c: the panel plan of XᵀX for f64 X on the CUDA backend (gram_cuda.c's default below 2 000
// columns). G's rows in panels of t (LT_PANEL): panel I is the product of X's columns [I·t, I·t + t) with
// columns [I·t, n), so that what is computed is the upper triangle to within t (for n = 1 000 and t = 64,
// 557 056 entries for 500 500 useful, against 589 824 for the tiles of 128). Each panel is one cuBLASLt
// matmul strided-batched over ks row chunks of kc rows (kc a multiple of 32, so that every chunk starts
// 256-byte aligned), into ks partials of n × n (column-major, the upper triangle) that ds_k_gram_reduce
// sums; the rows after ks·kc (fewer than 32·ks) are one DSYRK into one partial more. The panels are dealt
// widest first to the streams the caller gives. Each matmul's algorithm is the heuristic's first with its
// CTA tile set to 64 × 64 and its stages to 16 × 4, where cublasLtMatmulAlgoCheck accepts that (else the
// heuristic's first as it is): a fixed choice, so G has the same bits on every run.
// Why that tile: on an H200 (2026-11-28, jobs/experiments/gram_lt.cu, 100 000 × 1 000, tiles of 128),
// the heuristic's first algorithms (64 × 32 and 32 × 64 tiles) ran the tiles in 2.61-2.80 ms and the
// 64 × 64 one, offered last, in 2.36 ms (8 chunks, 8 streams), against 2.70 ms for the batched DGEMMs
// of gram_cuda.c's tiled plan (DSOLVE_GRAM_LT=0).
// The plan (layouts and algorithms) is made for a shape and kept in the CUDA state for the next product.
// provides: gram_lt_xtx, gram_lt_free
#include <cublasLt.h>
#include <stdint.h>
#include <stdlib.h>

#include "backend/backend_cuda.h"
#include "solve/gram_lt.h"
#include "solve/solve_kernels.h"

enum { LT_PANEL = 64, LT_KSPLIT = 8, LT_MAX_PANELS = 64, LT_ALIGN = 256 };

typedef struct lt_panel {
    cublasLtMatrixLayout_t a, b, c;
    cublasLtMatmulAlgo_t algo;
    int64_t r0, h, w;  // G's rows [r0, r0 + h), columns [r0, r0 + w)
} lt_panel;

typedef struct gram_lt {
    cublasLtHandle_t lt;
    cublasLtMatmulDesc_t desc;
    int64_t m, n, t, ks, kc;  // the shape the panels were made for
    int np;
    lt_panel p[LT_MAX_PANELS];
} gram_lt;

static int64_t env_count(const char *name, int64_t fallback)
{
    const char *v = getenv(name);
    char *end = NULL;
    long long x = v ? strtoll(v, &end, 10) : 0;
    return v && end != v && *end == '\0' && x >= 0 ? (int64_t)x : fallback;
}

static void panels_free(gram_lt *g)
{
    for (int i = 0; i < g->np; i++) {
        cublasLtMatrixLayout_t l[3] = {g->p[i].a, g->p[i].b, g->p[i].c};
        for (int k = 0; k < 3; k++)
            if (l[k])
                cublasLtMatrixLayoutDestroy(l[k]);
    }
    g->np = 0;
    g->m = g->n = 0;
}

void gram_lt_free(void *plan)
{
    gram_lt *g = plan;
    if (!g)
        return;
    panels_free(g);
    if (g->desc)
        cublasLtMatmulDescDestroy(g->desc);
    if (g->lt)
        cublasLtDestroy(g->lt);
    free(g);
}

static int layout(ds_ctx *ctx, cublasLtMatrixLayout_t *l, int64_t rows, int64_t cols, int64_t ld, int32_t batch,
                  int64_t stride)
{
    CUBLAS_CHECK(ctx, cublasLtMatrixLayoutCreate(l, CUDA_R_64F, (uint64_t)rows, (uint64_t)cols, ld));
    CUBLAS_CHECK(ctx, cublasLtMatrixLayoutSetAttribute(*l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &batch, sizeof batch));
    CUBLAS_CHECK(ctx, cublasLtMatrixLayoutSetAttribute(*l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride,
                                                       sizeof stride));
    return DS_OK;
}

// The panel's algorithm: the heuristic's first (no workspace), with a 64 × 64 tile and 16 × 4 stages
// where cuBLASLt accepts them.
static int panel_algo(ds_ctx *ctx, gram_lt *g, lt_panel *p)
{
    cublasLtMatmulPreference_t pref;
    CUBLAS_CHECK(ctx, cublasLtMatmulPreferenceCreate(&pref));
    const size_t none = 0;
    cublasLtMatmulHeuristicResult_t res;
    int got = 0;
    cublasStatus_t rc = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &none,
                                                             sizeof none);
    if (rc == CUBLAS_STATUS_SUCCESS)
        rc = cublasLtMatmulAlgoGetHeuristic(g->lt, g->desc, p->a, p->b, p->c, p->c, pref, 1, &res, &got);
    cublasLtMatmulPreferenceDestroy(pref);
    CUBLAS_CHECK(ctx, rc);
    if (got < 1)
        return ds_fail(&ctx->msg, DS_ERR_RUNTIME, "X'X: cuBLASLt offers no algorithm for a %lld x %lld panel",
                       (long long)p->h, (long long)p->w);
    p->algo = res.algo;
    cublasLtMatmulAlgo_t tuned = res.algo;
    const uint32_t tile = CUBLASLT_MATMUL_TILE_64x64, stages = CUBLASLT_MATMUL_STAGES_16x4, split = 1;
    cublasLtMatmulHeuristicResult_t check;
    if (cublasLtMatmulAlgoConfigSetAttribute(&tuned, CUBLASLT_ALGO_CONFIG_TILE_ID, &tile, sizeof tile) ==
            CUBLAS_STATUS_SUCCESS &&
        cublasLtMatmulAlgoConfigSetAttribute(&tuned, CUBLASLT_ALGO_CONFIG_STAGES_ID, &stages, sizeof stages) ==
            CUBLAS_STATUS_SUCCESS &&
        cublasLtMatmulAlgoConfigSetAttribute(&tuned, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &split, sizeof split) ==
            CUBLAS_STATUS_SUCCESS &&
        cublasLtMatmulAlgoCheck(g->lt, g->desc, p->a, p->b, p->c, p->c, &tuned, &check) == CUBLAS_STATUS_SUCCESS &&
        check.workspaceSize == 0)
        p->algo = tuned;
    return DS_OK;
}

// Makes g's panels for X of m × n in ks chunks of kc rows.
static int panels_make(ds_ctx *ctx, gram_lt *g, int64_t m, int64_t n, int64_t t, int64_t ks, int64_t kc)
{
    panels_free(g);
    for (int64_t r0 = 0; r0 < n; r0 += t) {
        lt_panel *p = &g->p[g->np++];
        *p = (lt_panel){.r0 = r0};
        p->h = n - r0 < t ? n - r0 : t;
        p->w = n - r0;
        DS_CHECK(layout(ctx, &p->a, p->h, kc, n, (int32_t)ks, kc * n));
        DS_CHECK(layout(ctx, &p->b, p->w, kc, n, (int32_t)ks, kc * n));
        DS_CHECK(layout(ctx, &p->c, p->h, p->w, n, (int32_t)ks, n * n));
        DS_CHECK(panel_algo(ctx, g, p));
    }
    g->m = m, g->n = n, g->t = t, g->ks = ks, g->kc = kc;
    return DS_OK;
}

static int plan_get(ds_ctx *ctx, gram_lt **out)
{
    cuda_state *st = state(ctx);
    if (!st->gram_lt) {
        gram_lt *g = calloc(1, sizeof *g);
        if (!g)
            return ds_fail(&ctx->msg, DS_ERR_RUNTIME, "out of host memory");
        st->gram_lt = g;
        st->gram_lt_free = gram_lt_free;
        CUBLAS_CHECK(ctx, cublasLtCreate(&g->lt));
        CUBLAS_CHECK(ctx, cublasLtMatmulDescCreate(&g->desc, CUBLAS_COMPUTE_64F, CUDA_R_64F));
        const cublasOperation_t opn = CUBLAS_OP_N, opt = CUBLAS_OP_T;
        CUBLAS_CHECK(ctx, cublasLtMatmulDescSetAttribute(g->desc, CUBLASLT_MATMUL_DESC_TRANSA, &opn, sizeof opn));
        CUBLAS_CHECK(ctx, cublasLtMatmulDescSetAttribute(g->desc, CUBLASLT_MATMUL_DESC_TRANSB, &opt, sizeof opt));
    }
    *out = st->gram_lt;
    return DS_OK;
}

int gram_lt_xtx(ds_ctx *ctx, const double *X, int64_t m, int64_t n, const cudaStream_t *streams, int ns,
                double **P, int *parts)
{
    *parts = 0;
    int64_t t = env_count("DSOLVE_GRAM_TILE", LT_PANEL), ks = env_count("DSOLVE_GRAM_KSPLIT", LT_KSPLIT);
    t = t < 32 ? 32 : (t + 31) / 32 * 32;
    ks = ks < 1 ? 1 : ks;
    if (ks > m / 1024)  // chunks of at least 1 024 rows
        ks = m / 1024 > 0 ? m / 1024 : 1;
    while (ks > 1 && (double)(ks + 1) * n * n * 8 > 2e9)  // partials stay under 2 GB
        ks--;
    const int64_t kc = m / ks / 32 * 32, rest = m - ks * kc;
    if (env_count("DSOLVE_GRAM_LT", 1) == 0 || kc < 32 || (n + t - 1) / t > LT_MAX_PANELS ||
        (uintptr_t)X % LT_ALIGN != 0)
        return DS_OK;  // the tiled plan instead
    gram_lt *g = NULL;
    DS_CHECK(plan_get(ctx, &g));
    if (g->m != m || g->n != n || g->t != t || g->ks != ks)
        DS_CHECK(panels_make(ctx, g, m, n, t, ks, kc));
    DS_CHECK(scratch_reserve(ctx, (size_t)((ks + (rest > 0)) * n * n), P));
    const double one = 1.0, zero = 0.0;
    for (int i = 0; i < g->np; i++) {
        const lt_panel *p = &g->p[i];
        double *C = *P + p->r0 + p->r0 * n;
        CUBLAS_CHECK(ctx, cublasLtMatmul(g->lt, g->desc, &one, X + p->r0, p->a, X + p->r0, p->b, &zero, C, p->c, C,
                                         p->c, &p->algo, NULL, 0, streams[i % ns]));
    }
    if (rest > 0)  // the last rows, on the main stream
        CUBLAS_CHECK(ctx, cublasDsyrk_64(state(ctx)->blas, CUBLAS_FILL_MODE_UPPER, CUBLAS_OP_N, n, rest, &one,
                                         X + ks * kc * n, n, &zero, *P + ks * n * n, n));
    *parts = (int)(ks + (rest > 0));
    return DS_OK;
}
