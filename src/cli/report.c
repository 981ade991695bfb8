// report.c: the command line that output files record (report.h).
#include "cli/report.h"

#include <stdio.h>

void report_cmdline(const char *command, int argc, char **argv, char *buf, size_t len)
{
    size_t at = (size_t)snprintf(buf, len, "dsolve %s", command);
    for (int i = 0; i < argc && at < len; i++)
        at += (size_t)snprintf(buf + at, len - at, " %s", argv[i]);
}
