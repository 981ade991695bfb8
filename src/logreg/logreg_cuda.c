// logreg_cuda.c: the CUDA lr_ops. f32 X of up to 1024 columns and 16 classes: one pass of
// kernels/logreg_fused.cu that forms both products tile by tile from one read of X (X is read once per
// iteration instead of twice). Otherwise cuBLAS GEMMs (DGEMM, or SGEMM on f32 X) for the logits and the
// gradient around kernels/logreg.cu's row pass. kernels/logreg.cu also has the optimisers. Everything
// is queued on the backend's stream; nothing here waits on the device or allocates after open.
// provides: lr_ops_cuda
#include "backend/backend_cuda.h"
#include "logreg/logreg.h"
#include "logreg/logreg_kernels.h"

typedef struct gpu_work {
    void *Z;          // rows_max × classes (float or double): logits, then P − Y
    double *partials; // 2 × lrk_row_blocks(rows_max)
    float *Wf, *Gf;   // cols × classes, f32 only
    int fused_blocks; // > 0: the fused pass, with partG (fused_blocks × cols × classes) and fpartials
    float *partG;
    double *fpartials;
} gpu_work;

static int gpu_open(ds_ctx *ctx, lr_work *w)
{
    gpu_work *c = calloc(1, sizeof *c);
    w->impl = c;
    if (!c)
        return ds_fail(&ctx->msg, DS_ERR_RUNTIME, "out of host memory");
    const size_t sz = w->f32 ? sizeof(float) : sizeof(double), dk = (size_t)(w->cols * w->classes);
    const size_t rows = (size_t)(w->rows_max > 0 ? w->rows_max : 1);
    DS_CHECK(cuda_alloc(ctx, &c->Z, rows * (size_t)w->classes * sz));
    DS_CHECK(cuda_alloc(ctx, (void **)&c->partials, 2 * (size_t)lrk_row_blocks(w->rows_max) * sizeof(double)));
    if (w->f32 && getenv("DSOLVE_LOGREG_UNFUSED") == NULL)
        c->fused_blocks = lrk_fused_plan(w->cols, (int)w->classes);
    if (c->fused_blocks > 0) {
        DS_CHECK(cuda_alloc(ctx, (void **)&c->partG, (size_t)c->fused_blocks * dk * sizeof(float)));
        DS_CHECK(cuda_alloc(ctx, (void **)&c->fpartials, 2 * (size_t)c->fused_blocks * sizeof(double)));
    }
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
        void *ptrs[] = {c->Z, c->partials, c->Wf, c->Gf, c->partG, c->fpartials};
        for (size_t i = 0; i < sizeof ptrs / sizeof ptrs[0]; i++)
            ctx->be->free(ctx, ptrs[i]);
    }
    free(c);
    w->impl = NULL;
}

// cuBLAS is column-major: X (n × D row-major) is a D × n matrix with ld D, W (D × K) a K × D one with
// ld K, Z (n × K) a K × n one. Z = X·W is then Zᶜ = Wᶜ·Xᶜ, and G = Xᵀ·R is Gᶜ = Rᶜ·Xᶜᵀ.
static int gpu_logits(ds_ctx *ctx, lr_work *w, const lr_set *s, const double *W)
{
    cuda_state *st = state(ctx);
    gpu_work *c = w->impl;
    const int n = (int)s->rows, D = (int)w->cols, K = (int)w->classes;
    if (w->f32) {
        const float one = 1.0f, zero = 0.0f;
        CUDA_CHECK(ctx, lrk_to_f32(c->Wf, W, w->cols * w->classes, st->stream));
        CUBLAS_CHECK(ctx, cublasSgemm(st->blas, CUBLAS_OP_N, CUBLAS_OP_N, K, n, D, &one, c->Wf, K, (const float *)s->X,
                                      D, &zero, (float *)c->Z, K));
    } else {
        const double one = 1.0, zero = 0.0;
        CUBLAS_CHECK(ctx, cublasDgemm(st->blas, CUBLAS_OP_N, CUBLAS_OP_N, K, n, D, &one, W, K, (const double *)s->X, D,
                                      &zero, (double *)c->Z, K));
    }
    return DS_OK;
}

static int gpu_gradient(ds_ctx *ctx, lr_work *w, const lr_set *s, double *gbuf)
{
    cuda_state *st = state(ctx);
    gpu_work *c = w->impl;
    const int n = (int)s->rows, D = (int)w->cols, K = (int)w->classes;
    if (w->f32) {
        const float one = 1.0f, zero = 0.0f;
        CUBLAS_CHECK(ctx, cublasSgemm(st->blas, CUBLAS_OP_N, CUBLAS_OP_T, K, D, n, &one, (const float *)c->Z, K,
                                      (const float *)s->X, D, &zero, c->Gf, K));
    } else {
        const double one = 1.0, zero = 0.0;
        CUBLAS_CHECK(ctx, cublasDgemm(st->blas, CUBLAS_OP_N, CUBLAS_OP_T, K, D, n, &one, (const double *)c->Z, K,
                                      (const double *)s->X, D, &zero, gbuf, K));
    }
    return DS_OK;
}

static int gpu_pass(ds_ctx *ctx, lr_work *w, const lr_set *s, const double *W, int grad, double *gbuf)
{
    cuda_state *st = state(ctx);
    gpu_work *c = w->impl;
    DS_ASSERT(s->rows <= w->rows_max && s->rows < INT32_MAX && s->f32 == w->f32);
    if (c->fused_blocks > 0) {
        int blocks = 0;
        CUDA_CHECK(ctx, lrk_fused_pass((const float *)s->X, s->rows, w->cols, W, s->labels, (int)w->classes,
                                       w->model == LR_OVR, grad, c->fused_blocks, c->partG, c->fpartials, &blocks,
                                       st->stream));
        CUDA_CHECK(ctx, lrk_fused_reduce(c->partG, c->fpartials, blocks, w->cols * w->classes, grad, gbuf, st->stream));
        return DS_OK;
    }
    DS_CHECK(gpu_logits(ctx, w, s, W));
    CUDA_CHECK(ctx, lrk_rows(c->Z, w->f32, s->labels, s->rows, (int)w->classes, w->model == LR_OVR, c->partials,
                             st->stream));
    if (grad)
        DS_CHECK(gpu_gradient(ctx, w, s, gbuf));
    CUDA_CHECK(ctx, lrk_reduce(c->partials, lrk_row_blocks(s->rows), grad && w->f32 ? c->Gf : NULL,
                               w->cols * w->classes, gbuf, st->stream));
    return DS_OK;
}

static int gpu_finish(ds_ctx *ctx, lr_work *w, const double *gbuf, const double *W, double *g, double *out,
                      double *hist)
{
    CUDA_CHECK(ctx, lrk_finish(gbuf, W, g, w->cols * w->classes, (w->cols - 1) * w->classes, w->inv_n, w->l2, out,
                               hist, state(ctx)->stream));
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
    .pass = gpu_pass,
    .finish = gpu_finish,
    .gd = gpu_gd,
    .nesterov = gpu_nesterov,
    .lbfgs_dir = gpu_lbfgs_dir,
    .axpy = gpu_axpy,
    .lbfgs_accept = gpu_lbfgs_accept,
};
