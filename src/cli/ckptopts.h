// ckptopts.h: the checkpoint options of the long commands (solve, ann, logreg), as option rows and as the
// ds_ckpt a run takes (core/ckpt.h).
// provides: DS_CHECKPOINT_OPTS, cli_checkpoint
#ifndef DS_CKPTOPTS_H
#define DS_CKPTOPTS_H

#include "cli/opts.h"
#include "core/ckpt.h"

// The three option rows. STATE: what a checkpoint holds ("the training state"); DETAIL: more of the same
// sentence, from ": " or ""; AT_ZERO: when --checkpoint-every 0 writes one; RUN: what a restart resumes.
#define DS_CHECKPOINT_OPTS(STATE, DETAIL, AT_ZERO, RUN)                                                       \
    {"checkpoint", OPT_STRING, NULL, "F.h5", 0, 0,                                                          \
     "write " STATE " to F.h5 (atomically) every --checkpoint-every seconds and on SIGTERM or SIGUSR1, "     \
     "after which the run stops with exit 5" DETAIL},                                                       \
        {"checkpoint-every", OPT_DOUBLE, "600", "SECONDS", 0, 1e9,                                          \
         "seconds between checkpoints (0: " AT_ZERO ")"},                                                   \
        {"restart", OPT_STRING, NULL, "F.h5", 0, 0,                                                         \
         "resume from a checkpoint of the same " RUN " (the same data and settings, on any number of ranks)"}

// The checkpoint settings the options of a give a command called what, whose checkpoints are in format.
static inline ds_ckpt cli_checkpoint(const ds_args *a, const char *what, int format)
{
    return (ds_ckpt){.path = opts_str(a, "checkpoint"), .restart = opts_str(a, "restart"),
                     .every = opts_double(a, "checkpoint-every"), .format = format, .what = what};
}

#endif
