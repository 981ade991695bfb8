// report.h: what a command reports of its run: the --json object (the writer of core/json.h) and the
// command line that output files record.
// provides: ds_json and the json_* writer (core/json.h), report_cmdline, report_settings
#ifndef DS_REPORT_H
#define DS_REPORT_H

#include <stddef.h>

#include "cli/opts.h"
#include "core/ctx.h"
#include "core/json.h"

// "dsolve COMMAND ARGV[0] ARGV[1] ..." into buf (len bytes), cut short when it does not fit.
void report_cmdline(const char *command, int argc, char **argv, char *buf, size_t len);

// The settings of DS_REPORT_OPTS that live in the context: --quiet, --timeout (when given).
void report_settings(ds_ctx *ctx, const ds_args *args);

#endif
