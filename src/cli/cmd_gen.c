// cmd_gen.c: `dsolve gen`: writes the seed's least-squares problem to HDF5. Ranks generate their own
// row blocks and write them in turns (serial HDF5 suffices) to a temporary file that rank 0 renames
// once every rank has succeeded. The contents do not depend on the number of ranks.
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cmds.h"
#include "core/cleanup.h"
#include "core/ctx.h"
#include "core/data.h"
#include "core/gen.h"
#include "h5io.h"
#include "cli/opts.h"
#include "cli/report.h"

static const ds_opt gen_table[] = {
    {"kind", OPT_CHOICE, "lsq", "lsq|ann", 0, 0, "lsq: y = X a_true + noise; ann: the network's problem, y = sin(sum x)/2 + noise"},
    {"rows", OPT_INT, NULL, "M", 1, 1e15, "rows (required)"},
    {"cols", OPT_INT, NULL, "N", 1, 1e6, "columns (required)"},
    {"seed", OPT_INT, "0", "S", 0, 9e18, "generator seed"},
    {"noise", OPT_DOUBLE, "0", "SIGMA", 0, 1e300, "standard deviation of Gaussian noise added to y"},
    {"corr", OPT_DOUBLE, "0", "RHO", 0, 0.999, "pairwise correlation of the columns"},
    {"dtype", OPT_CHOICE, "f64", "f64|f32", 0, 0, "stored type of X and y"},
    {"x-dataset", OPT_STRING, "X", "NAME", 0, 0, "dataset for X"},
    {"y-dataset", OPT_STRING, "y", "NAME", 0, 0, "dataset for y"},
    {"output", OPT_STRING, NULL, "F.h5", 0, 0, "file to write (required)"},
    DS_REPORT_OPTS,
    {NULL, 0, NULL, NULL, 0, 0, NULL},
};

static const char gen_usage[] =
    "dsolve gen [--kind lsq|ann] --rows M --cols N [--seed S] [--noise SIGMA] [--corr RHO] [--dtype f64|f32] --output F.h5";
static const char gen_about[] =
    "Writes X uniform in [-0.5, 0.5) (columns correlated by --corr) to F.h5 as /X, and /y: with --kind lsq,\n"
    "y = X a_true + noise and /a_true (uniform in [-0.5, 0.5)); with --kind ann, y = sin(sum x)/2 + noise.";

enum { GEN_CHUNK_BYTES = 64 << 20 };

// This rank's rows, generated and written chunk by chunk.
static int gen_write_block(const gen_lsq *p, const double *a_true, int f32, const char *tmp, const char *xname,
                           const char *yname, int64_t row0, int64_t rows, ds_msg *msg)
{
    const size_t row_bytes = (size_t)p->cols * (f32 ? 4 : 8);
    const int threads = (int)sysconf(_SC_NPROCESSORS_ONLN);
    int64_t chunk = GEN_CHUNK_BYTES / (int64_t)row_bytes;
    chunk = chunk < 1 ? 1 : chunk > rows ? (rows > 0 ? rows : 1) : chunk;
    void *X = malloc((size_t)chunk * row_bytes);
    double *y = malloc((size_t)chunk * sizeof(double));
    int rc = X && y ? DS_OK : ds_fail(msg, DS_ERR_RUNTIME, "out of host memory");
    for (int64_t r = 0; rc == DS_OK && r < rows; r += chunk) {
        int64_t nr = rows - r < chunk ? rows - r : chunk;
        gen_lsq_rows_parallel(p, a_true, row0 + r, nr, f32, X, y, threads);  // ranks take turns: all cores
        rc = h5io_write_rows(tmp, xname, row0 + r, nr, p->cols, f32, X, msg);
        if (rc == DS_OK)
            rc = h5io_write_rows(tmp, yname, row0 + r, nr, 0, 0, y, msg);
    }
    free(X);
    free(y);
    return rc;
}

static int gen_create(ds_ctx *ctx, const gen_lsq *p, const double *a_true, int f32, const char *tmp,
                      const char *xname, const char *yname)
{
    if (ctx->rank != 0)
        return DS_OK;
    h5io_attr attrs[] = {
        {.name = "seed", .kind = H5IO_INT, .i = (int64_t)p->seed},
        {.name = "noise", .kind = H5IO_DOUBLE, .d = p->noise},
        {.name = "corr", .kind = H5IO_DOUBLE, .d = p->corr},
        {.name = "generator", .kind = H5IO_STRING, .s = "dsolve gen " DSOLVE_VERSION},
    };
    DS_CHECK(h5io_create_lsq(tmp, xname, yname, p->rows, p->cols, f32, 4096, &ctx->msg));
    if (p->kind == GEN_ANN)
        return DS_OK;
    DS_CHECK(h5io_write_vector(tmp, 0, "a_true", a_true, p->cols, &ctx->msg));
    return h5io_write_attrs(tmp, "a_true", attrs, 4, &ctx->msg);
}

static int gen_run(ds_ctx *ctx, const ds_args *a, double *seconds)
{
    gen_lsq p = {.kind = strcmp(opts_str(a, "kind"), "ann") == 0 ? GEN_ANN : GEN_LSQ, .rows = opts_int(a, "rows"), .cols = opts_int(a, "cols"), .seed = (uint64_t)opts_int(a, "seed"),
                 .noise = opts_double(a, "noise"), .corr = opts_double(a, "corr")};
    const int f32 = strcmp(opts_str(a, "dtype"), "f32") == 0;
    const char *out = opts_str(a, "output"), *xname = opts_str(a, "x-dataset"), *yname = opts_str(a, "y-dataset");
    if (p.rows < ctx->nranks)
        return ds_fail(&ctx->msg, DS_ERR_USAGE, "--rows %lld is fewer than the %d ranks", (long long)p.rows, ctx->nranks);
    char tmp[4200];
    h5io_part_name(out, ctx->job_tag, tmp, sizeof tmp);
    cleanup_add(tmp);
    double t0 = MPI_Wtime(), *a_true = malloc((size_t)p.cols * sizeof(double));
    int rc = a_true ? DS_OK : ds_fail(&ctx->msg, DS_ERR_RUNTIME, "out of host memory");
    if (rc == DS_OK) {
        gen_a_true(&p, a_true);
        rc = gen_create(ctx, &p, a_true, f32, tmp, xname, yname);
    }
    rc = ctx_agree(ctx, rc);
    int64_t row0, rows;
    data_partition(p.rows, ctx->nranks, ctx->rank, &row0, &rows);
    for (int turn = 0; rc == DS_OK && turn < ctx->nranks; turn++) {
        ctx_beat(ctx, "gen: writing, a rank at a time");
        int mine = turn == ctx->rank ? gen_write_block(&p, a_true, f32, tmp, xname, yname, row0, rows, &ctx->msg) : DS_OK;
        rc = ctx_agree(ctx, mine);
    }
    if (rc == DS_OK && ctx->rank == 0)
        rc = h5io_commit(tmp, out, &ctx->msg);
    rc = ctx_agree(ctx, rc);
    if (rc != DS_OK && ctx->rank == 0)
        h5io_discard(tmp);
    cleanup_remove(tmp);
    free(a_true);
    *seconds = MPI_Wtime() - t0;
    return rc;
}

int cmd_gen(MPI_Comm comm, int argc, char **argv, ds_msg *msg)
{
    ds_args a;
    DS_CHECK(opts_parse(gen_table, argc, argv, &a, msg));
    int rank;
    MPI_Comm_rank(comm, &rank);
    if (opts_flag(&a, "help")) {
        if (rank == 0)
            opts_help(stdout, &a, gen_usage, gen_about);
        return DS_OK;
    }
    if (!opts_given(&a, "rows") || !opts_given(&a, "cols") || !opts_given(&a, "output"))
        return ds_fail(msg, DS_ERR_USAGE, "gen needs --rows, --cols and --output (see dsolve gen --help)");
    ds_ctx ctx;
    int rc = ctx_open(&ctx, comm, "cpu");  // generation and HDF5 writing are host work
    report_settings(&ctx, &a);
    double seconds = 0;
    if (rc == DS_OK)
        rc = gen_run(&ctx, &a, &seconds);
    if (rc == DS_OK && rank == 0) {
        int64_t m = opts_int(&a, "rows"), n = opts_int(&a, "cols");
        if (opts_flag(&a, "json")) {
            ds_json j;
            json_begin(&j);
            json_str(&j, "output", opts_str(&a, "output"));
            json_str(&j, "kind", opts_str(&a, "kind"));
            json_int(&j, "rows", m);
            json_int(&j, "cols", n);
            json_str(&j, "dtype", opts_str(&a, "dtype"));
            json_int(&j, "ranks", ctx.nranks);
            json_num(&j, "seconds", seconds);
            json_end(&j, stdout);
        } else {
            printf("dsolve gen: wrote %s: /%s %lld x %lld %s, /%s%s (%d ranks, %.2f s)\n", opts_str(&a, "output"),
                   opts_str(&a, "x-dataset"), (long long)m, (long long)n, opts_str(&a, "dtype"), opts_str(&a, "y-dataset"),
                   strcmp(opts_str(&a, "kind"), "ann") == 0 ? "" : ", /a_true", ctx.nranks, seconds);
        }
    }
    *msg = ctx.msg;
    ctx_close(&ctx);
    return rc;
}
