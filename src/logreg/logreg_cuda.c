// logreg_cuda.c: the CUDA lr_ops. f32 X of up to 1024 columns and 16 classes: one pass of
// kernels/logreg_fused.cu that forms both products tile by tile from one read of X (X is read once per
// iteration instead of twice). Otherwise cuBLAS GEMMs (DGEMM, or SGEMM on f32 X) for the logits and the
// gradient around kernels/logreg.cu's row pass. kernels/logreg.cu also has the optimisers. Everything
// is queued on the backend's stream; nothing here waits on the device or allocates after open.
// Rank-count independence (logreg.h): the fused pass cuts its partial sums at units of a block
// (lrk_unit_rows), the GEMMs run one block at a time (a GEMM of the block's shape gives the same bits
// on any rank: cuBLAS picks its kernel by shape), and lrk_fix_add adds the partials exactly.
// provides: lr_ops_cuda
#include "backend/backend_cuda.h"
#include "logreg/logreg.h"
#include "logreg/logreg_kernels.h"

typedef struct gpu_work {
    void *Z;          // rows_max × classes (float or double): logits, then P − Y
    double *partials; // 2 × the units of rows_max rows: their Σ loss, Σ correct
    double *G;        // cols × classes: a block's Xᵀ(P − Y) (the GEMM route), or the column maxima
    float *Wf, *Gf;   // cols × classes, f32 only
    int fused_blocks; // > 0: the fused pass, that many units a launch, with partG (fused_blocks × cols × classes)
    float *partG;
} gpu_work;

static int64_t gpu_units(const lr_work *w, int64_t rows)
{
    const int64_t unit = lrk_unit_rows(w->block_rows);
    return (rows + unit - 1) / unit;
}

static int gpu_open(ds_ctx *ctx, lr_work *w)
{
    gpu_work *c = calloc(1, sizeof *c);
    w->impl = c;
    if (!c)
        return ds_fail(&ctx->msg, DS_ERR_RUNTIME, "out of host memory");
    const size_t sz = w->f32 ? sizeof(float) : sizeof(double), dk = (size_t)(w->cols * w->classes);
    const size_t rows = (size_t)(w->rows_max > 0 ? w->rows_max : 1);
    DS_CHECK(cuda_alloc(ctx, &c->Z, rows * (size_t)w->classes * sz));
    DS_CHECK(cuda_alloc(ctx, (void **)&c->partials, 2 * (size_t)(gpu_units(w, w->rows_max) + 1) * sizeof(double)));
    DS_CHECK(cuda_alloc(ctx, (void **)&c->G, dk * sizeof(double)));
    if (w->f32 && getenv("DSOLVE_LOGREG_UNFUSED") == NULL)
        c->fused_blocks = lrk_fused_plan(w->cols, (int)w->classes);
    if (c->fused_blocks > 0)
        DS_CHECK(cuda_alloc(ctx, (void **)&c->partG, (size_t)c->fused_blocks * dk * sizeof(float)));
    if (w->f32) {
        DS_CHECK(cuda_alloc(ctx, (void **)&c->Wf, dk * sizeof(float)));
        DS_CHECK(cuda_alloc(ctx, (void **)&c->Gf, dk * sizeof(float)));
    }
    return DS_OK;
}

static void gpu_close(ds_ctx *ctx, lr_work *w)
{
    gpu_work *c = w->impl;
    if (c) {
        void *ptrs[] = {c->Z, c->partials, c->G, c->Wf, c->Gf, c->partG};
        for (size_t i = 0; i < sizeof ptrs / sizeof ptrs[0]; i++)
            ctx->be->free(ctx, ptrs[i]);
    }
    free(c);
    w->impl = NULL;
}

static int gpu_colmax(ds_ctx *ctx, lr_work *w, const lr_set *s, double *xmax)
{
    gpu_work *c = w->impl;
    DS_ASSERT(s->cols <= w->cols * w->classes);
    CUDA_CHECK(ctx, lrk_colmax(s->X, s->f32, s->rows, s->cols, c->G, state(ctx)->stream));
    return ctx->be->download(ctx, xmax, c->G, (size_t)s->cols * sizeof(double));
}

// cuBLAS is column-major: X (n × D row-major) is a D × n matrix with ld D, W (D × K) a K × D one with
// ld K, Z (n × K) a K × n one. Z = X·W is then Zᶜ = Wᶜ·Xᶜ, and G = Xᵀ·R is Gᶜ = Rᶜ·Xᶜᵀ.
// The n rows of a block from row r: its logits into Z's rows from r.
static int gpu_logits(ds_ctx *ctx, lr_work *w, const lr_set *s, const double *W, int64_t r, int n)
{
    cuda_state *st = state(ctx);
    gpu_work *c = w->impl;
    const int D = (int)w->cols, K = (int)w->classes;
    if (w->f32) {
        const float one = 1.0f, zero = 0.0f;
        CUBLAS_CHECK(ctx, cublasSgemm(st->blas, CUBLAS_OP_N, CUBLAS_OP_N, K, n, D, &one, c->Wf, K,
                                      (const float *)s->X + r * D, D, &zero, (float *)c->Z + r * K, K));
    } else {
        const double one = 1.0, zero = 0.0;
        CUBLAS_CHECK(ctx, cublasDgemm(st->blas, CUBLAS_OP_N, CUBLAS_OP_N, K, n, D, &one, W, K,
                                      (const double *)s->X + r * D, D, &zero, (double *)c->Z + r * K, K));
    }
    return DS_OK;
}

// The block's partial Xᵀ(P − Y) (into Gf or G), its digits added to gbuf's.
static int gpu_block_grad(ds_ctx *ctx, lr_work *w, const lr_set *s, int64_t r, int n, double *gbuf)
{
    cuda_state *st = state(ctx);
    gpu_work *c = w->impl;
    const int D = (int)w->cols, K = (int)w->classes;
    if (w->f32) {
        const float one = 1.0f, zero = 0.0f;
        CUBLAS_CHECK(ctx, cublasSgemm(st->blas, CUBLAS_OP_N, CUBLAS_OP_T, K, D, n, &one, (const float *)c->Z + r * K, K,
                                      (const float *)s->X + r * D, D, &zero, c->Gf, K));
    } else {
        const double one = 1.0, zero = 0.0;
        CUBLAS_CHECK(ctx, cublasDgemm(st->blas, CUBLAS_OP_N, CUBLAS_OP_T, K, D, n, &one, (const double *)c->Z + r * K,
                                      K, (const double *)s->X + r * D, D, &zero, c->G, K));
    }
    CUDA_CHECK(ctx, lrk_fix_add(w->f32 ? (const void *)c->Gf : c->G, w->f32, 1, w->cols, K, w->fix, w->fix_lo, gbuf,
                                st->stream));
    return DS_OK;
}

// The GEMM route, a block at a time: logits, the rows by units, the gradient.
static int gpu_pass_gemm(ds_ctx *ctx, lr_work *w, const lr_set *s, const double *W, int grad, double *gbuf)
{
    cuda_state *st = state(ctx);
    gpu_work *c = w->impl;
    const int64_t rb = w->block_rows;
    if (w->f32)
        CUDA_CHECK(ctx, lrk_to_f32(c->Wf, W, w->cols * w->classes, st->stream));
    for (int64_t r = 0; r < s->rows; r += rb)
        DS_CHECK(gpu_logits(ctx, w, s, W, r, (int)(s->rows - r < rb ? s->rows - r : rb)));
    CUDA_CHECK(ctx, lrk_rows(c->Z, w->f32, s->labels, s->rows, (int)w->classes, w->model == LR_OVR,
                             lrk_unit_rows(rb), c->partials, st->stream));
    for (int64_t r = 0; grad && r < s->rows; r += rb)
        DS_CHECK(gpu_block_grad(ctx, w, s, r, (int)(s->rows - r < rb ? s->rows - r : rb), gbuf));
    return DS_OK;
}

// The fused route: launches of at most fused_blocks units, each launch's gradient shares added exactly.
static int gpu_pass_fused(ds_ctx *ctx, lr_work *w, const lr_set *s, const double *W, int grad, double *gbuf)
{
    cuda_state *st = state(ctx);
    gpu_work *c = w->impl;
    const int64_t unit = lrk_unit_rows(w->block_rows), units = gpu_units(w, s->rows);
    for (int64_t u0 = 0; u0 < units; u0 += c->fused_blocks) {
        const int n = (int)(units - u0 < c->fused_blocks ? units - u0 : c->fused_blocks);
        CUDA_CHECK(ctx, lrk_fused_pass((const float *)s->X, s->rows, w->cols, W, s->labels, (int)w->classes,
                                       w->model == LR_OVR, grad, u0, n, unit, c->partG, c->partials, st->stream));
        if (grad)
            CUDA_CHECK(ctx, lrk_fix_add(c->partG, 1, n, w->cols, (int)w->classes, w->fix, w->fix_lo, gbuf, st->stream));
    }
    return DS_OK;
}

static int gpu_pass(ds_ctx *ctx, lr_work *w, const lr_set *s, const double *W, int grad, double *gbuf)
{
    cuda_state *st = state(ctx);
    gpu_work *c = w->impl;
    const int64_t dk = w->cols * w->classes, rb = w->block_rows;
    DS_ASSERT(s->row0 % rb == 0 && s->rows <= w->rows_max && s->rows < INT32_MAX && s->f32 == w->f32);
    if (grad)
        DS_CHECK(ctx->be->fill(ctx, gbuf, 2 * dk, 0.0));
    if (c->fused_blocks > 0)
        DS_CHECK(gpu_pass_fused(ctx, w, s, W, grad, gbuf));
    else
        DS_CHECK(gpu_pass_gemm(ctx, w, s, W, grad, gbuf));
    const int64_t nb = (s->rows + rb - 1) / rb, units_per = rb / lrk_unit_rows(rb);
    CUDA_CHECK(ctx, lrk_losses(c->partials, gpu_units(w, s->rows), units_per, s->row0 / rb, nb, w->blocks,
                               gbuf + 2 * dk, st->stream));
    return DS_OK;
}

static int gpu_finish(ds_ctx *ctx, lr_work *w, const double *gbuf, const double *W, double *g, double *out,
                      double *hist)
{
    CUDA_CHECK(ctx, lrk_finish(gbuf, W, g, w->cols * w->classes, (w->cols - 1) * w->classes, (int)w->classes, w->fix,
                               w->fix_lo, w->blocks, w->inv_n, w->l2, out, hist, state(ctx)->stream));
    return DS_OK;
}

static int gpu_gd(ds_ctx *ctx, lr_work *w, double *W, const double *g, double lr)
{
    CUDA_CHECK(ctx, lrk_gd(W, g, w->cols * w->classes, lr, state(ctx)->stream));
    return DS_OK;
}

static int gpu_nesterov(ds_ctx *ctx, lr_work *w, double *x, double *y, const double *g, double lr, double *t)
{
    CUDA_CHECK(ctx, lrk_nesterov(x, y, g, w->cols * w->classes, lr, t, state(ctx)->stream));
    return DS_OK;
}

static int gpu_lbfgs_dir(ds_ctx *ctx, lr_work *w, const double *g, const double *S, const double *Y, const double *rho,
                         int count, int newest, double *d, double *gtd)
{
    CUDA_CHECK(ctx, lrk_lbfgs_dir(g, S, Y, rho, w->cols * w->classes, LR_LBFGS_MEMORY, count, newest, d, gtd,
                                  state(ctx)->stream));
    return DS_OK;
}

static int gpu_axpy(ds_ctx *ctx, lr_work *w, double *out, const double *W, double alpha, const double *d)
{
    CUDA_CHECK(ctx, lrk_axpy(out, W, alpha, d, w->cols * w->classes, state(ctx)->stream));
    return DS_OK;
}

static int gpu_lbfgs_accept(ds_ctx *ctx, lr_work *w, double *W, double *g, const double *Wt, const double *gt,
                            double *s, double *y, double *rho)
{
    CUDA_CHECK(ctx, lrk_lbfgs_accept(W, g, Wt, gt, s, y, rho, w->cols * w->classes, state(ctx)->stream));
    return DS_OK;
}

const lr_ops lr_ops_cuda = {
    .open = gpu_open,
    .close = gpu_close,
    .colmax = gpu_colmax,
    .pass = gpu_pass,
    .finish = gpu_finish,
    .gd = gpu_gd,
    .nesterov = gpu_nesterov,
    .lbfgs_dir = gpu_lbfgs_dir,
    .axpy = gpu_axpy,
    .lbfgs_accept = gpu_lbfgs_accept,
};
