// cmd_solve_out.c: `dsolve solve`'s outputs: the coefficients file, the plot, the JSON object and the
// summary (cmd_solve.h).
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cmd_solve.h"
#include "cli/plot.h"
#include "cli/report.h"
#include "core/cleanup.h"
#include "h5io.h"

// Rank 0 writes /a with the run's attributes to a temporary file and renames it when complete.
int solve_write(ds_ctx *ctx, const solve_run *r, const ds_data *d, const sb_result *res, const char *cmdline)
{
    const char *out = opts_str(&r->args, "output");
    if (!out || ctx->rank != 0)
        return DS_OK;
    char tmp[4200];
    h5io_part_name(out, ctx->job_tag, tmp, sizeof tmp);
    cleanup_add(tmp);
    h5io_attr attrs[] = {
        {.name = "sweeps", .kind = H5IO_INT, .i = res->sweeps},
        {.name = "residuals", .kind = H5IO_DOUBLES, .v = res->history, .len = res->sweeps + 1},
        {.name = "rel_residual", .kind = H5IO_DOUBLE, .d = res->rel_residual},
        {.name = "normal_residual", .kind = H5IO_DOUBLE, .d = res->normal_residual},
        {.name = "stop_reason", .kind = H5IO_STRING, .s = res->stop_reason},
        {.name = "method", .kind = H5IO_STRING, .s = res->method},
        {.name = "batch", .kind = H5IO_INT, .i = r->so.batch < d->X.cols ? r->so.batch : d->X.cols},
        {.name = "line_search", .kind = H5IO_INT, .i = res->line_search},
        {.name = "block_solve", .kind = H5IO_INT, .i = res->block_solve},
        {.name = "method_reason", .kind = H5IO_STRING, .s = res->method_reason},
        {.name = "source", .kind = H5IO_STRING, .s = d->source},
        {.name = "options", .kind = H5IO_STRING, .s = cmdline},
    };
    int rc = h5io_write_vector(tmp, 1, "a", res->a, d->X.cols, &ctx->msg);
    if (rc == DS_OK)
        rc = h5io_write_attrs(tmp, "a", attrs, (int)(sizeof attrs / sizeof attrs[0]), &ctx->msg);
    if (rc == DS_OK)
        rc = h5io_commit(tmp, out, &ctx->msg);
    if (rc != DS_OK)
        h5io_discard(tmp);
    cleanup_remove(tmp);
    return rc;
}

// Rank 0 draws the residual history: relative residual against sweep, on a log axis.
int solve_plot(ds_ctx *ctx, const solve_run *r, const ds_data *d, const sb_result *res)
{
    const char *path = opts_str(&r->args, "plot");
    if (!path || ctx->rank != 0)
        return DS_OK;
    double *sweep = malloc((size_t)(res->sweeps + 1) * sizeof(double));
    if (!sweep)
        return ds_fail(&ctx->msg, DS_ERR_RUNTIME, "out of host memory");
    for (int s = 0; s <= res->sweeps; s++)
        sweep[s] = s;
    const int swept = strcmp(res->method, "residual") == 0 || strcmp(res->method, "gram") == 0;
    const char *step = !swept                                       ? ""
                       : res->block_solve                           ? ", block solve"
                       : res->line_search || r->so.batch == 1       ? ""
                                                                    : ", raw block update";
    char title[400], label[96];
    snprintf(title, sizeof title, "SolveBak: %lld x %lld from %s%s", (long long)d->rows_global, (long long)d->X.cols,
             d->source, step);
    snprintf(label, sizeof label, "%s, batch %d", res->method, r->so.batch > d->X.cols ? (int)d->X.cols : r->so.batch);
    ds_series ser = {label, sweep, res->history, res->sweeps + 1, 0};
    int rc = plot_svg(path, title, "sweep", "relative residual ||y - Xa|| / ||y||", 0, 1, &ser, 1, &ctx->msg);
    free(sweep);
    return rc;
}

static int solve_devices(const ds_ctx *ctx)
{
    return ctx->device >= 0 ? ctx->nranks : 0;
}

// How many of X's columns were divided by a power of two as read, and the least and largest of those
// powers (0 when none).
static void solve_scales(const ds_data *d, int64_t *scaled, int *lo, int *hi)
{
    for (int64_t j = 0; d->x_exps && j < d->X.cols; j++) {
        const int e = d->x_exps[j];
        if (!e)
            continue;
        *lo = *scaled ? (e < *lo ? e : *lo) : e;
        *hi = *scaled ? (e > *hi ? e : *hi) : e;
        ++*scaled;
    }
}

// The summary's line on the powers of two X's columns and y were divided by, when any was.
static void solve_print_scales(const ds_data *d)
{
    int64_t scaled = 0;
    int lo = 0, hi = 0;
    solve_scales(d, &scaled, &lo, &hi);
    if (scaled && lo == hi)
        printf("  solved with %lld column%s of X / 2^%d", (long long)scaled, scaled == 1 ? "" : "s", lo);
    else if (scaled)
        printf("  solved with %lld columns of X / 2^%d to 2^%d", (long long)scaled, lo, hi);
    if (d->y_exp)
        printf("%s y / 2^%d", scaled ? " and" : "  solved with", d->y_exp);
    if (scaled || d->y_exp)
        printf(" (values near the limits of double precision; exact)\n");
}

void solve_json(const ds_ctx *ctx, const solve_run *r, const ds_data *d, const sb_result *res, double total)
{
    ds_json j;
    json_begin(&j);
    json_int(&j, "rows", d->rows_global);
    json_int(&j, "cols", d->X.cols);
    json_int(&j, "ranks", ctx->nranks);
    json_str(&j, "backend", ctx->be->name);
    json_str(&j, "backend_note", ctx->backend_note);
    json_int(&j, "devices", solve_devices(ctx));
    json_str(&j, "device_name", ctx->device_name);
    json_str(&j, "source", d->source);
    json_str(&j, "precision", r->f32 ? "f32" : "f64");
    json_str(&j, "method", res->method);
    json_int(&j, "batch", r->so.batch > d->X.cols ? d->X.cols : r->so.batch);
    json_bool(&j, "line_search", res->line_search);
    json_bool(&j, "block_solve", res->block_solve);
    json_bool(&j, "coarse", res->coarse);
    if (res->method_reason[0])
        json_str(&j, "method_reason", res->method_reason);
    if (res->cond_estimate > 0)
        json_num(&j, "cond_estimate", res->cond_estimate);
    if (res->tried_seconds > 0)
        json_num(&j, "tried_seconds", res->tried_seconds);
    json_int(&j, "sweeps", res->sweeps);
    json_str(&j, "stop_reason", res->stop_reason);
    json_num(&j, "solve_seconds", res->solve_seconds);
    json_num(&j, "setup_seconds", res->setup_seconds);
    json_num(&j, "sweep_seconds", res->sweep_seconds);
    json_num(&j, "check_seconds", res->check_seconds);
    if (strcmp(res->method, "cholesky") == 0) {
        json_bool(&j, "refined", res->refined > 0);
        json_int(&j, "refine_steps", res->refined);
        json_num(&j, "refine_seconds", res->refine_seconds);
        json_str(&j, "gram_precision", res->gram_precision);
        json_int(&j, "passes", res->passes);
        if (res->gram_fallback[0]) {
            json_str(&j, "gram_fallback", res->gram_fallback);
            json_num(&j, "fallback_seconds", res->fallback_seconds);
        }
    }
    if (strcmp(res->method, "qr") == 0) {  // setup_seconds split: the slowest rank's own R, then the combine
        json_num(&j, "qr_local_seconds", res->qr_local_seconds);
        json_num(&j, "qr_combine_seconds", res->qr_combine_seconds);
    }
    json_num(&j, "total_seconds", total);
    json_int(&j, "repeat", opts_int(&r->args, "repeat"));
    json_nums(&j, "solve_seconds_all", r->times, opts_int(&r->args, "repeat"));
    json_num(&j, "rel_residual", res->rel_residual);
    json_num(&j, "normal_residual", res->normal_residual);
    json_nums(&j, "residual_history", res->history, res->sweeps + 1);
    // (the coarse correction's ‖e‖² is the pass's less a computed decrease: not the pass's own sum)
    json_bool(&j, "residual_history_exact", strcmp(res->method, "residual") == 0 && !res->coarse);
    if (res->history_floor > 0)
        json_num(&j, "residual_history_floor", res->history_floor);
    json_num(&j, "coef_error", r->coef_error);
    char digest[24];  // the coefficients' bits, to compare runs (a restart with the uninterrupted run)
    snprintf(digest, sizeof digest, "%016llx", (unsigned long long)ckpt_hash(0, res->a, (size_t)d->X.cols * sizeof(double)));
    json_str(&j, "coef_digest", digest);
    json_int(&j, "zero_columns", res->zero_columns);
    int64_t scaled = 0;
    int lo = 0, hi = 0;
    solve_scales(d, &scaled, &lo, &hi);
    json_int(&j, "x_scaled_columns", scaled);
    json_int(&j, "x_scale_exp_min", lo);
    json_int(&j, "x_scale_exp_max", hi);
    json_int(&j, "y_scale_exp", d->y_exp);
    json_num(&j, "gbps", res->bytes / res->solve_seconds / 1e9);
    json_bool(&j, "streamed", res->streamed);
    json_str(&j, "stream_source", !res->streamed ? "" : r->stream_host ? "host memory" : "file");
    json_int(&j, "chunk_rows", res->chunk_rows);
    json_int(&j, "bytes_moved", (int64_t)res->bytes_moved);  // a count: every digit
    json_num(&j, "stream_rate_gbps", res->streamed ? res->bytes_moved / res->stream_seconds / 1e9 : NAN);
    json_str(&j, "stream_note", res->stream_note);
    json_end(&j, stdout);
}

void solve_summary(const ds_ctx *ctx, const solve_run *r, const ds_data *d, const sb_result *res, double total)
{
    printf("dsolve solve: %lld x %lld %s from %s\n", (long long)d->rows_global, (long long)d->X.cols,
           r->f32 ? "f32" : "f64", d->source);
    printf("  ranks %d, backend %s", ctx->nranks, ctx->be->name);
    if (solve_devices(ctx))
        printf(" (%d x %s)", solve_devices(ctx), ctx->device_name);
    printf("%s%s%s\n", ctx->backend_note[0] ? " — " : "", ctx->backend_note, "");
    const int chol = strcmp(res->method, "cholesky") == 0, qr = strcmp(res->method, "qr") == 0;
    if (chol && strcmp(res->gram_precision, "double") != 0)
        printf("  method cholesky (equilibrated normal equations, cond(X) about %.2g), X'X in %s, "
               "%d refinement step%s in double (%d passes over X)\n", res->cond_estimate,
               strcmp(res->gram_precision, "fp16") == 0 ? "FP16 on the tensor cores" : "single precision",
               res->refined, res->refined == 1 ? "" : "s", res->passes);
    else if (chol)
        printf("  method cholesky (equilibrated normal equations, cond(X) about %.2g), refinement step %s\n",
               res->cond_estimate, res->refined ? "kept" : "not kept (it did not lower the normal residual)");
    else if (qr)
        printf("  method qr (TSQR over %d rank%s)\n", ctx->nranks, ctx->nranks > 1 ? "s" : "");
    else
        printf("  method %s, batch %d, %s, %d sweeps (%s)\n", res->method,
               r->so.batch > d->X.cols ? (int)d->X.cols : r->so.batch,
               !res->block_solve   ? (res->line_search ? "line search on" : "line search off")
               : res->coarse       ? "block solve with the coarse correction"
                                    : "block solve",
               res->sweeps, res->stop_reason);
    if (chol && res->gram_fallback[0])
        printf("  X'X in double: the single-precision attempt (%.4g s, in the solve's time) was set aside: %s\n",
               res->fallback_seconds, res->gram_fallback);
    if (res->method_reason[0])
        printf("  auto: %s\n", res->method_reason);
    printf("  relative residual %.3e   normal residual %.3e", res->rel_residual, res->normal_residual);
    if (isfinite(r->coef_error))
        printf("   coefficient error %.3e", r->coef_error);
    printf("\n");
    if (res->zero_columns)
        printf("  %lld zero columns skipped (their coefficients are 0)\n", (long long)res->zero_columns);
    solve_print_scales(d);
    if (res->streamed)
        printf("  streamed: X did not fit the memory caps; chunks of %lld rows, %.3g GB read from %s at %.2f "
               "GB/s\n", (long long)res->chunk_rows, res->bytes_moved / 1e9,
               r->stream_host ? "host memory (pinned)" : "the file", res->bytes_moved / res->stream_seconds / 1e9);
    if (res->stream_note[0])
        printf("  streamed: %s\n", res->stream_note);
    const char *med = opts_int(&r->args, "repeat") > 1 ? " median" : "";
    const double gbs = res->bytes / res->solve_seconds / 1e9;
    if (chol)
        printf("  solve %.4g s (X'X %.4g s, factor and solve %.4g s, refinement %.4g s)%s, %.1f GB/s effective; "
               "total %.3g s with I/O\n",
               res->solve_seconds, res->setup_seconds, res->sweep_seconds, res->refine_seconds, med, gbs, total);
    else if (qr) {
        char tried[64] = "";
        if (res->tried_seconds > 0)
            snprintf(tried, sizeof tried, ", cholesky attempt %.4g s", res->tried_seconds);
        printf("  solve %.4g s (QR %.4g s: the rank's rows %.4g s, combining the ranks' R %.4g s; triangular solve "
               "%.4g s%s)%s; total %.3g s with I/O\n",
               res->solve_seconds, res->setup_seconds, res->qr_local_seconds, res->qr_combine_seconds,
               res->sweep_seconds, tried, med, total);
    }
    else
        printf("  solve %.4g s (setup %.4g s, sweeps %.4g s)%s, %.1f GB/s effective; total %.3g s with I/O\n",
               res->solve_seconds, res->setup_seconds, res->sweep_seconds, med, gbs, total);
    if (chol || qr)
        return;
    printf("  relative residual by sweep:");
    int step = res->sweeps > 12 ? res->sweeps / 12 : 1;
    for (int s = 0; s <= res->sweeps; s += step) {
        const int floor = s < res->sweeps && res->history_floor > 0 && res->history[s] <= res->history_floor;
        printf(" %d:%s%.2e", s, floor ? "<" : "", res->history[s]);
    }
    printf("\n");
}
