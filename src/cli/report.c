// report.c: the command line that output files record (report.h).
#include "cli/report.h"

#include <stdio.h>

void report_cmdline(const char *command, int argc, char **argv, char *buf, size_t len)
{
    size_t at = (size_t)snprintf(buf, len, "dsolve %s", command);
    for (int i = 0; i < argc && at < len; i++)
        at += (size_t)snprintf(buf + at, len - at, " %s", argv[i]);
}

void report_settings(ds_ctx *ctx, const ds_args *args)
{
    ctx->quiet = opts_flag(args, "quiet");
    if (opts_given(args, "timeout"))
        ctx_set_timeout(ctx, opts_double(args, "timeout"));
}
