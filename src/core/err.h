// err.h: status codes (they are the process exit codes) and the one-line message that travels with them.
// provides: ds_status, ds_msg, ds_fail, DS_CHECK, DS_ASSERT
#ifndef DS_ERR_H
#define DS_ERR_H

#include <stdio.h>
#include <stdlib.h>

enum ds_status {
    DS_OK = 0,
    DS_ERR_RUNTIME = 1,  // a library or system call failed, out of memory, a peer rank failed
    DS_ERR_USAGE = 2,    // bad command line
    DS_ERR_INPUT = 3,    // bad input file or data
    DS_ERR_NUMERIC = 4,  // NaN, divergence, a singular system
    DS_STOPPED = 5,      // stopped on SIGTERM or SIGUSR1 after writing a checkpoint: resume with --restart
};

// The message of the first failure, one line, without a trailing newline.
typedef struct ds_msg {
    char text[512];
} ds_msg;

// Formats the message into msg (when msg is non-NULL and still empty) and returns status.
int ds_fail(ds_msg *msg, int status, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

// Propagates a non-zero status to the caller.
#define DS_CHECK(expr)            \
    do {                          \
        int ds_rc_ = (expr);      \
        if (ds_rc_ != DS_OK)      \
            return ds_rc_;        \
    } while (0)

// Always-on invariant check: a broken invariant is a bug in dsolve, not bad input.
#define DS_ASSERT(cond)                                                                     \
    do {                                                                                    \
        if (!(cond)) {                                                                      \
            fprintf(stderr, "dsolve: internal error: %s (%s:%d)\n", #cond, __FILE__, __LINE__); \
            abort();                                                                        \
        }                                                                                   \
    } while (0)

#endif
