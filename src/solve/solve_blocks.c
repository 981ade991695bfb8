// solve_blocks.c: SolveBak's block solve (sb_opts.block_solve), written once against backend.h: its
// buffers, its setup on either route, and the coarse correction's steps that sb_residual_sweeps takes
// (solve_sweeps.c). The Gram route's sweeps take it inside gram_sweeps (ds_gram_args).
//
// The block solve is block Gauss–Seidel on the normal equations: for column block b, da = G_bb⁺·g_b with
// alpha = 1 in place of the diagonal step, G_bb⁺ the pseudo-inverse that block_pinv precomputes from the
// equilibrated block (a zero column, or one dependent on the block's earlier columns, is skipped: its
// da_j is 0). The coarse correction (sb_opts.coarse) then solves, after every sweep, the problem
// restricted to block-constant changes of a: with P the n × k indicator of the k blocks' nonzero columns
// (a zero column's coefficient stays 0), C = PᵀGP and t = Pᵀg, δ = C⁺·t and a += P·δ. Block Gauss–Seidel
// alone barely reduces the smooth, block-constant part of the error on equicorrelated columns, which the
// coarse step removes: on ρ = 0.5, 20 000 × 1 000, batch 100, the block solve alone is at 6.2e-2 after 30
// sweeps (the seed's step with line search at 1.4e-1); with the correction 1e-10 takes 12 sweeps, and
// 8 on 100 000 × 1 000.
// Residual route: Z = X·P (local rows), Wt_0 = (XᵀZ)ᵀ for block 0's columns and C = ZᵀZ, reduced once.
// Gram route: Wt = (G·P)ᵀ and C = PᵀWtᵀ from G on every rank.
#include "solve/solve_work.h"

// One CTA inverts each block and C on the GPU (and plain loops factor them on the CPU), so the block
// 0: no block solve (it is not asked for, the method is direct, or there are no columns); 1: the block
// solve; 2: with the coarse correction (which needs two blocks or more: for one it is the block solve).
int sb_blocks_wanted(const sb_opts *o, int64_t n)
{
    if (!o->block_solve || o->method == SB_METHOD_CHOLESKY || o->method == SB_METHOD_QR || n == 0)
        return 0;
    return o->coarse && (n + o->batch - 1) / o->batch > 1 ? 2 : 1;
}

int sb_blocks_alloc(ds_ctx *ctx, const ds_mat *X, const sb_opts *o, int gram, sb_work *w)
{
    const int64_t n = X->cols, B = o->batch, k = (n + B - 1) / B;
    const int want = sb_blocks_wanted(o, n);
    if (want == 0)
        return DS_OK;
    if (B > SB_BS_MAX)
        return ds_fail(&ctx->msg, DS_ERR_USAGE, "solve: the block solve takes batches of at most %d columns (batch %lld)",
                       SB_BS_MAX, (long long)B);
    if (want == 2 && k > SB_BS_MAX)
        return ds_fail(&ctx->msg, DS_ERR_USAGE,
                       "solve: the coarse correction takes at most %d blocks (%lld columns in batches of %lld): "
                       "a larger batch, or --no-coarse",
                       SB_BS_MAX, (long long)n, (long long)B);
    DS_CHECK(sb_alloc(ctx, &w->bs[SB_BS_BINV], k * B * B));
    if (want == 1)
        return DS_OK;
    if (!gram)
        DS_CHECK(sb_alloc(ctx, &w->bs[SB_BS_Z], X->rows * k));
    DS_CHECK(sb_alloc(ctx, &w->bs[SB_BS_WC], k * (gram ? n : B) + k * k));
    DS_CHECK(sb_alloc(ctx, &w->bs[SB_BS_DELTA], k));
    return sb_alloc(ctx, &w->bs[SB_BS_CINV], k * k);
}

// After sb_residual_setup (grams reduced, e = y): Z, [Wt_0 | C] reduced, the pseudo-inverses, and one
// pass of each kind over Z with δ = 0 (e unchanged), so that the backend's scratch has its size for them
// before the sweeps: none of them allocates inside the loop.
static int blocks_setup_residual(ds_ctx *ctx, const ds_mat *X, int B, sb_work *w)
{
    const ds_backend *be = ctx->be;
    const int64_t n = X->cols, k = (n + B - 1) / B;
    double *Z = w->bs[SB_BS_Z], *wc = w->bs[SB_BS_WC], *cinv = w->bs[SB_BS_CINV];
    if (cinv) {
        DS_CHECK(be->solve->block_sums(ctx, X, B, Z, k, 1));
        DS_CHECK(be->solve->coarse_products(ctx, X, Z, k, B, wc));
        DS_CHECK(ctx_agree(ctx, DS_OK));
        DS_CHECK(be->allreduce_sum(ctx, wc, k * B + k * k));
    }
    DS_CHECK(be->solve->block_pinv(ctx, w->grams, n, B, (int64_t)B * B, B, w->bs[SB_BS_BINV]));
    if (!cinv)
        return DS_OK;
    DS_CHECK(be->solve->block_pinv(ctx, wc + k * B, k, (int)k, 0, k, cinv));
    const ds_mat Zm = {.data = Z, .rows = X->rows, .cols = k, .f32 = 0};
    DS_CHECK(be->fill(ctx, w->bs[SB_BS_DELTA], k, 0.0));
    return be->solve->grad_update(ctx, &Zm, w->e, 0, k, w->bs[SB_BS_DELTA], 0, k, w->gout);
}

// After sb_gram_setup (G reduced in w->sys): the pseudo-inverses of G's diagonal blocks, and with the
// coarse correction Wt[c, i] = Σ_{j in block c} G[i, j] (G symmetric: row c of (G·P)ᵀ) and
// C[c, d] = Σ_{i in block c} Wt[d, i] = (PᵀGP)[c, d], then C's pseudo-inverse. Every rank alike.
static int blocks_setup_gram(ds_ctx *ctx, int64_t n, int B, sb_work *w)
{
    const ds_backend *be = ctx->be;
    const int64_t k = (n + B - 1) / B;
    DS_CHECK(be->solve->block_pinv(ctx, w->sys, n, B, (int64_t)B * (n + 1), n, w->bs[SB_BS_BINV]));
    if (!w->bs[SB_BS_CINV])
        return DS_OK;
    double *wt = w->bs[SB_BS_WC], *C = wt + k * n;
    const ds_mat G = {.data = w->sys, .rows = n, .cols = n, .f32 = 0}, W = {.data = wt, .rows = k, .cols = n, .f32 = 0};
    DS_CHECK(be->solve->block_sums(ctx, &G, B, wt, 1, n));
    DS_CHECK(be->solve->block_sums(ctx, &W, B, C, 1, k));
    return be->solve->block_pinv(ctx, C, k, (int)k, 0, k, w->bs[SB_BS_CINV]);
}

int sb_blocks_setup(ds_ctx *ctx, const ds_mat *X, const sb_opts *o, int gram, sb_work *w)
{
    if (!w->bs[SB_BS_BINV])
        return DS_OK;
    return gram ? blocks_setup_gram(ctx, X->cols, o->batch, w) : blocks_setup_residual(ctx, X, o->batch, w);
}

// Block 0 of a sweep on the residual route (k ≥ 2 blocks, so block 0 has B columns): apply 0 puts the
// local t = Zᵀe at gbuf[B + 1 ..] (and an ‖e‖² after it, unused); apply 1 takes e −= Z·δ.
int sb_coarse_pass(ds_ctx *ctx, const ds_mat *X, int B, sb_work *w, int apply)
{
    const int64_t k = (X->cols + B - 1) / B;
    const ds_mat Zm = {.data = w->bs[SB_BS_Z], .rows = X->rows, .cols = k, .f32 = 0};
    if (apply)
        return ctx->be->solve->grad_update(ctx, &Zm, w->e, 0, k, w->bs[SB_BS_DELTA], 0, 0, w->gout);
    return ctx->be->solve->grad_update(ctx, &Zm, w->e, 0, 0, NULL, 0, k, w->gbuf + B + 1);
}

// The correction from the reduced gbuf = [g_0 | ‖e‖² | t]: δ, a, g_0 and ‖e‖² (solve_ops.h, ds_coarse_args).
int sb_coarse_step(ds_ctx *ctx, int64_t n, int B, sb_work *w)
{
    const int64_t k = (n + B - 1) / B;
    const ds_coarse_args c = {.cinv = w->bs[SB_BS_CINV], .cmat = w->bs[SB_BS_WC] + k * B, .wt = w->bs[SB_BS_WC],
                              .t = w->gbuf + B + 1, .diag = w->diag, .g = w->gbuf, .a = w->a, .ee = w->gbuf + B,
                              .delta = w->bs[SB_BS_DELTA], .n = n, .gn = B, .ldw = B, .k = k, .batch = B};
    return ctx->be->solve->coarse_step(ctx, &c);
}
