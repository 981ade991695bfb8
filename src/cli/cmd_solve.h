// cmd_solve.h: what `dsolve solve`'s two files share (internal to src/cli): the run's settings and
// state (cmd_solve.c), and its outputs (cmd_solve_out.c).
// provides: solve_run, solve_write, solve_plot, solve_json, solve_summary
#ifndef DS_CMD_SOLVE_H
#define DS_CMD_SOLVE_H

#include "cli/opts.h"
#include "core/ckpt.h"
#include "core/data.h"
#include "core/rows.h"
#include "solve/solvebak.h"

typedef struct solve_run {
    ds_args args;
    sb_opts so;
    int f32;
    double t_start, *times;  // see solve_timed
    double coef_error;  // ‖a − a_true‖ / ‖a_true‖, or NaN
    int stream;         // 1: X is streamed from src (it does not fit the memory caps)
    int stream_host;    // with stream: from the rank's rows kept in (pinned) host memory, not the file
    ds_rows src;
    ds_ckpt ck;         // --checkpoint, --restart
} solve_run;

// Rank 0 writes /a with the run's attributes (atomically) to --output, when given.
int solve_write(ds_ctx *ctx, const solve_run *r, const ds_data *d, const sb_result *res, const char *cmdline);
// Rank 0 draws the residual history to --plot, when given.
int solve_plot(ds_ctx *ctx, const solve_run *r, const ds_data *d, const sb_result *res);
// Rank 0's report on stdout: one JSON object, or the summary; total: the command's seconds.
void solve_json(const ds_ctx *ctx, const solve_run *r, const ds_data *d, const sb_result *res, double total);
void solve_summary(const ds_ctx *ctx, const solve_run *r, const ds_data *d, const sb_result *res, double total);

#endif
