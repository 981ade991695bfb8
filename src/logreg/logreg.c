// logreg.c: training logistic regression with gradient descent, Nesterov's method or L-BFGS, written
// against lr_ops (logreg_cpu.c, logreg_cuda.c) and the backend's memory, marks and allreduce.
// gd and Nesterov queue every iteration without waiting on the device (the objective's history stays
// in backend memory until the end); L-BFGS downloads four doubles a trial step for its line search.
// Failure inside the loop: the other ranks are inside allreduces that cannot be rejoined, so the job
// ends with the message (MPI_Abort), as in solve_sweeps.c; set-up failures are agreed on first.
// Rank-count independence (logreg.h): the blocks and the partition are here, the fixed point of the
// gradient's sums (lr_fix) too; the ops compute and add each block's partial sums.
#include "logreg/logreg.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/data.h"
#include "core/exactsum.h"

int64_t logreg_block_rows(int64_t rows_global)
{
    return data_block_rows(rows_global, 16, 1024);
}

void logreg_partition(int64_t rows_global, int nranks, int rank, int64_t *row0, int64_t *rows)
{
    data_partition_blocks(rows_global, logreg_block_rows(rows_global), nranks, rank, row0, rows);
}

int64_t logreg_gbuf_len(const lr_work *w)
{
    return 2 * w->cols * w->classes + w->blocks + 1;
}

int logreg_set_alloc(ds_ctx *ctx, lr_set *s, int64_t rows, int64_t cols, int f32)
{
    memset(s, 0, sizeof *s);
    s->rows = rows;
    s->cols = cols;
    s->f32 = f32;
    size_t bytes = (size_t)(rows > 0 ? rows : 1) * (size_t)cols * (f32 ? 4 : 8);
    DS_CHECK(ctx->be->alloc(ctx, &s->X, bytes));
    return ctx->be->alloc(ctx, (void **)&s->labels, (size_t)(rows > 0 ? rows : 1) * sizeof(int32_t));
}

void logreg_set_free(ds_ctx *ctx, lr_set *s)
{
    if (ctx->be) {
        ctx->be->free(ctx, s->X);
        ctx->be->free(ctx, s->labels);
        if (s->src)
            rows_close(ctx, s->src);
        if (s->host_x)
            ctx->be->host_free(ctx, s->host_x);
        if (s->host_y)
            ctx->be->host_free(ctx, s->host_y);
    }
    free(s->src);
    s->X = s->host_x = NULL;
    s->labels = NULL;
    s->host_y = NULL;
    s->src = NULL;
}

void logreg_result_free(lr_result *res)
{
    free(res->W);
    free(res->loss);
    res->W = res->loss = NULL;
}

// A checkpoint's loop counters (lr_checkpoint).
enum { LR_CK_IT, LR_CK_COUNT, LR_CK_NEWEST, LR_CK_F, LR_CK_LEN };

// The training state in backend memory, one allocation.
enum { OUT_F, OUT_ACC, OUT_FT, OUT_ACCT, OUT_GTD, OUT_T, OUT_LEN };
// The training state in backend memory, one allocation (mem, what a checkpoint holds), and the
// scratch of the sums (gbuf and acc, logreg_gbuf_len each, and the fixed point's scales fix, 2·cols),
// another.
typedef struct lr_state {
    int64_t dk;
    double *mem, *scratch;
    double *W, *g, *x, *d, *Wt, *gt, *S, *Y, *out, *rho, *hist, *gbuf, *acc, *fix;
    double *resume, resume_ck[LR_CK_LEN];  // --restart: the checkpoint (host) and its counters, else NULL
    double last_log;                       // a streamed set: the time of the last progress line
} lr_state;

static int64_t lr_state_len(const lr_state *st, int iters)
{
    const int m = LR_LBFGS_MEMORY;
    return 6 * st->dk + 2 * m * st->dk + OUT_LEN + m + (iters + 1);
}

static int lr_state_alloc(ds_ctx *ctx, const lr_work *w, int iters, lr_state *st)
{
    const int m = LR_LBFGS_MEMORY;
    const int64_t dk = w->cols * w->classes, total = lr_state_len(&(lr_state){.dk = dk}, iters);
    const int64_t nscratch = 2 * logreg_gbuf_len(w) + 2 * w->cols;
    st->dk = dk;
    DS_CHECK(ctx->be->alloc(ctx, (void **)&st->mem, (size_t)total * sizeof(double)));
    DS_CHECK(ctx->be->alloc(ctx, (void **)&st->scratch, (size_t)nscratch * sizeof(double)));
    double *p = st->mem;
    double **vec[] = {&st->W, &st->g, &st->x, &st->d, &st->Wt, &st->gt};
    for (size_t i = 0; i < sizeof vec / sizeof vec[0]; i++, p += dk)
        *vec[i] = p;
    st->S = p, p += m * dk;
    st->Y = p, p += m * dk;
    st->out = p, p += OUT_LEN;
    st->rho = p, p += m;
    st->hist = p;
    st->gbuf = st->scratch;
    st->acc = st->gbuf + logreg_gbuf_len(w);
    st->fix = st->acc + logreg_gbuf_len(w);
    DS_CHECK(ctx->be->fill(ctx, st->scratch, nscratch, 0.0));
    return ctx->be->fill(ctx, st->mem, total, 0.0);
}

static void lr_state_free(ds_ctx *ctx, lr_state *st)
{
    if (st->mem)
        ctx->be->free(ctx, st->mem);
    if (st->scratch)
        ctx->be->free(ctx, st->scratch);
    st->mem = st->scratch = NULL;
}

// Column j's partial sums Σ_i x_ij·(P − Y)_ik add up in absolute value to at most Σ_i |x_ij| ≤
// n·max_i |x_ij| (|P − Y| ≤ 1); the bound is twice that, for the rounding of the partials themselves.
// The terms (the partials) are at most as many as rows.
double logreg_fix_scales(const double *xmax, int64_t cols, int64_t rows_global, double *fix)
{
    for (int64_t j = 0; j < cols; j++) {
        fix[j] = exactsum_scale(2.0 * (double)rows_global * xmax[j]);
        fix[cols + j] = 1.0 / fix[j];
    }
    return exactsum_lo(rows_global);
}

// w->fix and w->fix_lo for the set s (into st->fix): the max over ranks is exact, so the scales are the
// same bits on any rank count. Collective; set-up (agreed on).
static int lr_fix(ds_ctx *ctx, lr_work *w, const lr_set *s, lr_state *st)
{
    const int64_t cols = w->cols;
    double *host = malloc((size_t)(2 * cols) * sizeof(double));
    int rc = host ? logreg_colmax(ctx, w, s, host) : ds_fail(&ctx->msg, DS_ERR_RUNTIME, "out of host memory");
    rc = ctx_agree(ctx, rc);
    if (rc == DS_OK && ctx->nranks > 1)
        MPI_Allreduce(MPI_IN_PLACE, host, (int)cols, MPI_DOUBLE, MPI_MAX, ctx->comm);
    if (rc == DS_OK) {
        w->fix_lo = logreg_fix_scales(host, cols, s->rows_global, host);
        rc = ctx->be->upload(ctx, st->fix, host, (size_t)(2 * cols) * sizeof(double));
    }
    free(host);
    w->fix = st->fix;
    return ctx_agree(ctx, rc);
}

// Checkpoints: the whole training state (one allocation, W, the L-BFGS pairs, the history, Nesterov's t)
// and the host losses, with the loop's counters [it, count, newest, f]. Taken at the top of an iteration,
// where the state is whole; a restart continues from there as if never stopped, on any rank count (the
// sums do not depend on it: bitwise).

// At the top of iteration ck[LR_CK_IT]: a checkpoint when due; DS_STOPPED after it on a signal.
static int lr_checkpoint(ds_ctx *ctx, const lr_opts *o, lr_state *st, const lr_result *res, const double *ck)
{
    const int due = ckpt_due(ctx, o->ckpt);
    if (!due)
        return DS_OK;
    const int64_t ns = lr_state_len(st, o->iters), n = ns + o->iters + 1;
    double *host = malloc((size_t)n * sizeof(double));
    int rc = host ? ctx->be->download(ctx, host, st->mem, (size_t)ns * sizeof(double))
                  : ds_fail(&ctx->msg, DS_ERR_RUNTIME, "out of host memory");
    if (rc == DS_OK) {
        memcpy(host + ns, res->loss, (size_t)(o->iters + 1) * sizeof(double));
        rc = ckpt_write(ctx, o->ckpt, host, n, ck, LR_CK_LEN);
    }
    free(host);
    DS_CHECK(rc);
    ctx_log(ctx, "logreg: checkpoint after %d iterations written to %s", (int)ck[LR_CK_IT], o->ckpt->path);
    if (due == 2)
        return ds_fail(&ctx->msg, DS_STOPPED, "logreg: stopped on a signal after %d iterations; resume with --restart %s",
                       (int)ck[LR_CK_IT], o->ckpt->path);
    return DS_OK;
}

// --restart, before the training (a bad file is a failure all ranks agree on): the checkpoint's state
// and the host losses in *host (ns + iters + 1 values), its counters in ck.
static int lr_resume_read(ds_ctx *ctx, const lr_opts *o, const lr_state *st, double **host, double *ck)
{
    const int64_t n = lr_state_len(st, o->iters) + o->iters + 1;
    *host = malloc((size_t)n * sizeof(double));
    int rc = *host ? ckpt_read(ctx, o->ckpt, *host, n, ck, LR_CK_LEN) : ds_fail(&ctx->msg, DS_ERR_RUNTIME, "out of host memory");
    if (rc == DS_OK && !(ck[LR_CK_IT] >= 0 && ck[LR_CK_IT] <= o->iters && ck[LR_CK_COUNT] >= 0 &&
                         ck[LR_CK_COUNT] <= LR_LBFGS_MEMORY && ck[LR_CK_NEWEST] >= 0 && ck[LR_CK_NEWEST] < LR_LBFGS_MEMORY))
        rc = ds_fail(&ctx->msg, DS_ERR_INPUT, "%s: /counters out of range", o->ckpt->restart);
    return ctx_agree(ctx, rc);
}

// In the loop, before its first iteration: the state read by lr_resume_read replaces the fresh one.
static int lr_resume(ds_ctx *ctx, const lr_opts *o, lr_state *st, lr_result *res, const double *host)
{
    const int64_t ns = lr_state_len(st, o->iters);
    memcpy(res->loss, host + ns, (size_t)(o->iters + 1) * sizeof(double));
    return ctx->be->upload(ctx, st->mem, host, (size_t)ns * sizeof(double));
}

// A streamed set: a line every 5 s at the top of an iteration (rank 0's, silenced by --quiet), for runs
// whose passes are each too short for the row source's own lines.
static void lr_progress(ds_ctx *ctx, const lr_set *s, lr_state *st, int it, int iters)
{
    const double now = MPI_Wtime();
    if (!s->src || now - st->last_log < 5.0)
        return;
    ctx_log(ctx, "logreg: iteration %d of %d; X streamed at %.2f GB/s a rank over %d passes", it, iters,
            s->src->seconds > 0 ? s->src->bytes / s->src->seconds / 1e9 : 0.0, s->src->passes);
    st->last_log = now;
}

static int lr_abort(ds_ctx *ctx, int rc)
{
    // Nothing to end when every rank already knows (a stop after a checkpoint, a checkpoint not written).
    if (rc == DS_OK || rc == DS_STOPPED || ctx->nranks == 1 || ctx->agreed_failure == rc)
        return rc;
    fprintf(stderr, "dsolve: %s (rank %d; ending the job)\n", ctx->msg.text[0] ? ctx->msg.text : "failed", ctx->rank);
    fflush(stderr);
    MPI_Abort(ctx->comm, rc);
    return rc;
}

// The objective and gradient at E: local pass, allreduce, finish (out[0..1] at slot).
static int lr_eval(ds_ctx *ctx, const lr_ops *ops, lr_work *w, const lr_set *s, lr_state *st, const double *E,
                   double *g, double *out, double *hist)
{
    DS_CHECK(logreg_pass(ctx, w, s, E, 1, st->gbuf, st->acc));
    DS_CHECK(ctx->be->allreduce_sum(ctx, st->gbuf, logreg_gbuf_len(w)));
    return ops->finish(ctx, w, st->gbuf, E, g, out, hist);
}

// gd and Nesterov: no host wait inside the loop.
static int lr_first_order(ds_ctx *ctx, const lr_ops *ops, lr_work *w, const lr_set *s, const lr_opts *o,
                          lr_state *st, lr_result *res)
{
    const int nesterov = o->optimizer == LR_NESTEROV;
    if (nesterov)  // x: the iterate; W: the point where the gradient is taken
        DS_CHECK(ctx->be->fill(ctx, st->out + OUT_T, 1, 1.0));
    double ck[LR_CK_LEN] = {0};
    if (st->resume) {
        DS_CHECK(lr_resume(ctx, o, st, res, st->resume));
        memcpy(ck, st->resume_ck, sizeof ck);
    }
    for (int it = (int)ck[LR_CK_IT]; it < o->iters; it++) {
        ctx_beat(ctx, "logreg: iterations");
        lr_progress(ctx, s, st, it, o->iters);
        ck[LR_CK_IT] = it;
        DS_CHECK(lr_checkpoint(ctx, o, st, res, ck));
        DS_CHECK(lr_eval(ctx, ops, w, s, st, st->W, st->g, st->out + OUT_F, st->hist + it));
        if (nesterov)
            DS_CHECK(ops->nesterov(ctx, w, st->x, st->W, st->g, o->lr, st->out + OUT_T));
        else
            DS_CHECK(ops->gd(ctx, w, st->W, st->g, o->lr));
    }
    if (nesterov)
        DS_CHECK(ctx->be->copy(ctx, st->W, st->x, (size_t)st->dk * sizeof(double)));
    DS_CHECK(lr_eval(ctx, ops, w, s, st, st->W, st->g, st->out + OUT_F, st->hist + o->iters));
    res->iters = o->iters;
    snprintf(res->stop_reason, sizeof res->stop_reason, "iterations");
    return DS_OK;
}

// Every rank takes rank 0's decision (their objective values agree, but a decision must never split).
static int lr_decide(ds_ctx *ctx, int accept)
{
    if (ctx->nranks > 1)
        MPI_Bcast(&accept, 1, MPI_INT, 0, ctx->comm);
    return accept;
}

// One L-BFGS iteration: direction, then backtracking from step 1 until the Armijo condition holds.
// *f is the objective at W (host copy); 0 in *accepted when no step of 2⁻³⁰ or more decreases it.
static int lr_lbfgs_step(ds_ctx *ctx, const lr_ops *ops, lr_work *w, const lr_set *s, lr_state *st, int count,
                         int newest, double *f, int *accepted)
{
    DS_CHECK(ops->lbfgs_dir(ctx, w, st->g, st->S, st->Y, st->rho, count, newest, st->d, st->out + OUT_GTD));
    *accepted = 0;
    for (double alpha = 1.0; alpha >= 0x1p-30; alpha *= 0.5) {
        DS_CHECK(ops->axpy(ctx, w, st->Wt, st->W, alpha, st->d));
        DS_CHECK(lr_eval(ctx, ops, w, s, st, st->Wt, st->gt, st->out + OUT_FT, NULL));
        double out[OUT_LEN];
        DS_CHECK(ctx->be->download(ctx, out, st->out, sizeof out));
        const double ft = out[OUT_FT], gtd = out[OUT_GTD];
        if (lr_decide(ctx, isfinite(ft) && ft <= *f + 1e-4 * alpha * gtd)) {
            *f = ft;
            *accepted = 1;
            return DS_OK;
        }
    }
    return DS_OK;
}

static int lr_lbfgs(ds_ctx *ctx, const lr_ops *ops, lr_work *w, const lr_set *s, const lr_opts *o, lr_state *st,
                    lr_result *res)
{
    DS_CHECK(lr_eval(ctx, ops, w, s, st, st->W, st->g, st->out + OUT_F, st->hist));
    double out[OUT_LEN];
    DS_CHECK(ctx->be->download(ctx, out, st->out, sizeof out));
    double f = out[OUT_F];
    int count = 0, newest = LR_LBFGS_MEMORY - 1, it = 0;
    if (st->resume) {
        DS_CHECK(lr_resume(ctx, o, st, res, st->resume));
        const double *ck = st->resume_ck;
        it = (int)ck[LR_CK_IT], count = (int)ck[LR_CK_COUNT], newest = (int)ck[LR_CK_NEWEST], f = ck[LR_CK_F];
    }
    snprintf(res->stop_reason, sizeof res->stop_reason, "iterations");
    for (; it < o->iters; it++) {
        int accepted = 0;
        ctx_beat(ctx, "logreg: L-BFGS iterations");
        lr_progress(ctx, s, st, it, o->iters);
        const double now[LR_CK_LEN] = {it, count, newest, f};
        DS_CHECK(lr_checkpoint(ctx, o, st, res, now));
        DS_CHECK(lr_lbfgs_step(ctx, ops, w, s, st, count, newest, &f, &accepted));
        if (!accepted) {
            snprintf(res->stop_reason, sizeof res->stop_reason, "line search: no step decreases the objective");
            break;
        }
        newest = (newest + 1) % LR_LBFGS_MEMORY;
        count += count < LR_LBFGS_MEMORY;
        DS_CHECK(ops->lbfgs_accept(ctx, w, st->W, st->g, st->Wt, st->gt, st->S + newest * st->dk,
                                   st->Y + newest * st->dk, st->rho + newest));
        res->loss[it + 1] = f;
    }
    res->iters = it;
    res->loss[0] = out[OUT_F];
    return DS_OK;
}

static int lr_run(ds_ctx *ctx, const lr_ops *ops, lr_work *w, const lr_set *s, const lr_opts *o, lr_state *st,
                  lr_result *res)
{
    const ds_backend *be = ctx->be;
    if (o->ckpt)
        ckpt_start(ctx, o->ckpt);
    st->last_log = MPI_Wtime();
    DS_CHECK(be->mark(ctx, 0));
    if (o->optimizer == LR_LBFGS)
        DS_CHECK(lr_lbfgs(ctx, ops, w, s, o, st, res));
    else
        DS_CHECK(lr_first_order(ctx, ops, w, s, o, st, res));
    DS_CHECK(be->mark(ctx, 1));
    DS_CHECK(be->elapsed(ctx, 0, 1, &res->seconds));
    if (o->optimizer != LR_LBFGS)
        DS_CHECK(be->download(ctx, res->loss, st->hist, (size_t)(res->iters + 1) * sizeof(double)));
    DS_CHECK(be->download(ctx, res->W, st->W, (size_t)st->dk * sizeof(double)));
    // The final accuracy and objective at W (for L-BFGS the last accepted trial point).
    DS_CHECK(lr_eval(ctx, ops, w, s, st, st->W, st->g, st->out + OUT_F, NULL));
    double out[OUT_LEN];
    DS_CHECK(be->download(ctx, out, st->out, sizeof out));
    res->train_loss = out[OUT_F];
    res->train_accuracy = out[OUT_ACC];
    res->loss[res->iters] = out[OUT_F];
    return DS_OK;
}

void logreg_work_init(lr_work *w, const lr_set *s, const lr_opts *o)
{
    const int64_t rb = logreg_block_rows(s->rows_global);
    const int64_t rows_max = !s->src ? s->rows : s->resident > s->src->chunk_rows ? s->resident : s->src->chunk_rows;
    *w = (lr_work){.rows_max = rows_max, .cols = s->cols, .classes = o->classes, .model = o->model, .f32 = s->f32,
                   .l2 = o->l2, .inv_n = 1.0 / (double)s->rows_global, .block_rows = rb,
                   .blocks = (s->rows_global + rb - 1) / rb};
}

int logreg_train(ds_ctx *ctx, const lr_set *train, const lr_opts *o, lr_result *res)
{
    DS_ASSERT(o->classes >= 2 && o->classes <= LR_MAX_CLASSES && o->iters >= 0);
    memset(res, 0, sizeof *res);
    const lr_ops *ops = ctx->be->logreg;
    lr_work w;
    logreg_work_init(&w, train, o);
    lr_state st = {0};
    const int64_t dk = train->cols * o->classes;
    res->W = calloc((size_t)dk, sizeof(double));
    res->loss = calloc((size_t)o->iters + 1, sizeof(double));
    int rc = res->W && res->loss ? DS_OK : ds_fail(&ctx->msg, DS_ERR_RUNTIME, "out of host memory");
    if (rc == DS_OK)
        rc = ops->open(ctx, &w);
    if (rc == DS_OK)
        rc = lr_state_alloc(ctx, &w, o->iters, &st);
    rc = ctx_agree(ctx, rc);
    if (rc == DS_OK)
        rc = lr_fix(ctx, &w, train, &st);
    if (rc == DS_OK && o->ckpt && o->ckpt->restart)
        rc = lr_resume_read(ctx, o, &st, &st.resume, st.resume_ck);
    if (rc == DS_OK)
        rc = lr_abort(ctx, lr_run(ctx, ops, &w, train, o, &st, res));
    free(st.resume);
    lr_state_free(ctx, &st);
    ops->close(ctx, &w);
    return rc;
}

int logreg_evaluate(ds_ctx *ctx, const lr_set *s, const lr_opts *o, const double *W, double *accuracy, double *loss)
{
    const lr_ops *ops = ctx->be->logreg;
    lr_work w;
    logreg_work_init(&w, s, o);
    lr_state st = {0};
    const int64_t dk = s->cols * o->classes;
    int rc = ops->open(ctx, &w);
    if (rc == DS_OK)
        rc = lr_state_alloc(ctx, &w, 0, &st);
    if (rc == DS_OK)
        rc = ctx->be->upload(ctx, st.W, W, (size_t)dk * sizeof(double));
    rc = ctx_agree(ctx, rc);
    if (rc == DS_OK)
        rc = lr_fix(ctx, &w, s, &st);
    double out[OUT_LEN] = {0};
    if (rc == DS_OK) {
        rc = logreg_pass(ctx, &w, s, st.W, 0, st.gbuf, st.acc);
        if (rc == DS_OK)
            rc = ctx->be->allreduce_sum(ctx, st.gbuf, logreg_gbuf_len(&w));
        if (rc == DS_OK)
            rc = ops->finish(ctx, &w, st.gbuf, st.W, st.g, st.out, NULL);
        if (rc == DS_OK)
            rc = ctx->be->download(ctx, out, st.out, sizeof out);
        rc = lr_abort(ctx, rc);
    }
    *accuracy = out[OUT_ACC];
    *loss = out[OUT_F];
    lr_state_free(ctx, &st);
    ops->close(ctx, &w);
    return rc;
}
