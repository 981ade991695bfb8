// cmd_ann_stream.c: the streaming plan of `dsolve ann` and `dsolve predict` (cmd_ann_stream.h): the
// caps, the working memory of the network, the chunk and the budget every rank takes.
#include "cli/cmd_ann_stream.h"

#include <math.h>
#include <string.h>

#include "cli/memcaps.h"
#include "h5io.h"

// The budget of rounds and H chunks when streaming: the option's, else the default cut to half of what
// the cap leaves besides the fixed bytes (never below the least useful).
static double plan_budget(const rows_caps *caps, const ann_weights *w)
{
    if (w->budget > 0)
        return (double)w->budget;
    return fmin((double)w->budget0, fmax(w->least, 0.5 * (caps->backend - w->fixed)));
}

static int plan_fail(ds_ctx *ctx, const rows_caps *caps, const char *cap_name, const ds_data *d, const ann_weights *w)
{
    double least[2];  // with --memory-mb's budget when given, else the least one; chunks of 8 rows
    rows_chunk_for(ctx, caps, d->X.rows, d->X.cols, 0, w->fixed + (w->budget > 0 ? (double)w->budget : w->least), 0,
                   least);
    const int64_t rows = w->block > 0 ? w->block : ROWS_MIN_CHUNK;
    const double more = (double)rows / ROWS_MIN_CHUNK;  // the chunks' share of the minimum, for rows rows
    least[0] = least[0] + (more - 1) * (least[0] - w->fixed - (w->budget > 0 ? (double)w->budget : w->least));
    least[1] *= more;
    const int host = least[1] > caps->host;
    return ds_fail(&ctx->msg, DS_ERR_USAGE, "%s %.4g MB is below the working minimum of %.4g MB for %s (%s%lld rows)",
                   host ? "--host-memory" : cap_name, (host ? caps->host : caps->backend) / 1e6,
                   (host ? least[1] : least[0]) / 1e6 + 0.0005, w->what,
                   host ? "two pinned chunks of " : "the network's buffers and two chunks of ", (long long)rows);
}

int ann_cli_plan(ds_ctx *ctx, const ds_args *a, const ds_data *d, const ann_weights *w, ann_plan *p)
{
    rows_caps caps;
    const char *cap_name = cli_memory_caps(ctx, a, &caps);
    const double row = (double)d->X.cols * 8 + 8;
    const double in_memory = (double)d->X.rows * (row + w->row_extra) + (double)(w->budget > 0 ? w->budget : w->budget0) +
                             w->fixed;
    int64_t chunk = 0, budget = 0, hidden = 0;
    int rc = DS_OK;
    if (in_memory > caps.backend) {
        budget = (int64_t)plan_budget(&caps, w);
        double least[2];
        const int64_t b = w->block > 0 ? w->block : 1, rows = (d->X.rows + b - 1) / b * b;  // whole blocks
        chunk = rows_chunk_for(ctx, &caps, rows > b ? rows : b, d->X.cols, 0, w->fixed + (double)budget, 0, least);
        const int64_t h = budget / (w->ld * (int64_t)sizeof(double));  // ann_chunk_rows' H chunk
        const int64_t fewest = w->block > 0 ? w->block : ROWS_MIN_CHUNK;
        chunk = chunk < h ? chunk : h > fewest ? h : fewest;
        if (w->block > 0)  // whole blocks, for the Gram's exact sums (ann_gram.h)
            chunk = chunk / w->block * w->block;
        if (chunk < fewest)
            rc = plan_fail(ctx, &caps, cap_name, d, w);
        // The rounds of hidden fits come before the Gram's buffers: all that the chunks leave, less a margin
        // for the gathers' row lists (a sixth of a round's rows).
        hidden = (int64_t)fmax((double)budget, 0.8 * (caps.backend - w->fixed - 2.0 * (double)chunk * row));
    }
    DS_CHECK(ctx_agree(ctx, rc));
    // X and y kept in host memory when they fit the host cap with room to spare (a device backend only),
    // so that the passes cross the bus instead of reading the file again.
    const int64_t host = !ctx->be->host_memory && (double)d->X.rows * (row + 16) <= 0.8 * caps.host;
    // MAX of: any streams, the least chunk, budget and rounds' bound (the rounds must match), all fit the host.
    int64_t v[5] = {chunk > 0, chunk > 0 ? -chunk : INT64_MIN, budget > 0 ? -budget : INT64_MIN,
                    hidden > 0 ? -hidden : INT64_MIN, -host};
    MPI_Allreduce(MPI_IN_PLACE, v, 5, MPI_INT64_T, MPI_MAX, ctx->comm);
    *p = (ann_plan){.stream = v[0] > 0, .chunk = v[0] > 0 ? -v[1] : 0, .block = w->block,
                    .budget = v[0] > 0 ? -v[2] : 0, .hidden = v[0] > 0 ? -v[3] : 0, .fixed = w->fixed};
    p->from_memory = p->stream && v[4] == -1;
    return DS_OK;
}

int ann_cli_probe(ds_ctx *ctx, const char *path, const char *xname, const char *yname, int classes, ds_data *d)
{
    if (!classes || !yname)
        return data_probe_lsq(ctx, path, xname, yname, 0, d);
    int64_t (*block_rows)(int64_t) = d->block_rows;
    memset(d, 0, sizeof *d);
    d->block_rows = block_rows;
    h5io_lsq_info info = {0};
    int rc = h5io_probe_labelled(path, xname, yname, &info, &ctx->msg);
    if (rc == DS_OK && info.rows < ctx->nranks)
        rc = ds_fail(&ctx->msg, DS_ERR_INPUT, "%s: dataset /%s has %lld rows, fewer than the %d ranks", path, xname,
                     (long long)info.rows, ctx->nranks);
    DS_CHECK(ctx_agree(ctx, rc));
    d->X.cols = info.cols;
    data_place(ctx, d, info.rows);
    snprintf(d->source, sizeof d->source, "%s", path);
    return DS_OK;
}

// Short pinned memory may have halved a source's chunks (rows_open): whole blocks again, as the plan made
// them (the buffers hold more).
static int open_blocks(ds_ctx *ctx, const ann_plan *p, ann_source *src, int rc)
{
    if (rc != DS_OK || p->block == 0)
        return rc;
    src->rows.chunk_rows = src->rows.chunk_rows / p->block * p->block;
    if (src->rows.chunk_rows == 0)
        return ds_fail(&ctx->msg, DS_ERR_RUNTIME, "pinned host memory too short for two chunks of a row block (%lld "
                       "rows)", (long long)p->block);
    return DS_OK;
}

int ann_cli_open(ds_ctx *ctx, const ann_plan *p, const char *path, const char *xname, const char *yname, int classes,
                 ds_data *d, ann_source *src, const char *phase)
{
    int rc;
    if (p->from_memory && !classes) {
        d->host = 1;
        DS_CHECK(data_load_lsq(ctx, path, xname, yname, 0, d));
        rc = ann_source_open_memory(ctx, src, d, p->chunk, phase);
    } else {
        rc = ann_source_open_file(ctx, src, path, xname, yname, classes, d->row0, d->X.rows, d->X.cols, p->chunk,
                                  phase);
    }
    return ctx_agree(ctx, open_blocks(ctx, p, src, rc));
}

void ann_cli_stats(ds_ctx *ctx, const ann_source *a, const ann_source *b, double *bytes, double *seconds)
{
    double v[2] = {0, 0};
    const ann_source *s[2] = {a, b};
    for (int i = 0; i < 2; i++)
        if (s[i] && s[i]->open)
            v[0] += s[i]->rows.bytes, v[1] += s[i]->rows.seconds;
    MPI_Allreduce(MPI_IN_PLACE, &v[0], 1, MPI_DOUBLE, MPI_SUM, ctx->comm);
    MPI_Allreduce(MPI_IN_PLACE, &v[1], 1, MPI_DOUBLE, MPI_MAX, ctx->comm);
    *bytes = v[0], *seconds = v[1];
}
