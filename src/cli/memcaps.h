// memcaps.h: the memory caps every streaming command takes (--device-memory, --host-memory), as option
// rows and as the rows_caps a rank works under (core/rows.h).
// provides: DS_MEMORY_OPTS, cli_memory_caps
#ifndef DS_MEMCAPS_H
#define DS_MEMCAPS_H

#include "cli/opts.h"
#include "core/rows.h"

// The two option rows; WHAT names what streams when it does not fit ("an --input X").
#define DS_MEMORY_OPTS(WHAT)                                                                              \
    {"device-memory", OPT_SIZE, NULL, "SIZE", 1, 1e18,                                                   \
     "device memory a rank may use (64M, 8G): " WHAT " that does not fit it with the working buffers is "  \
     "streamed by chunks (default: the device's free memory less max(512 MiB, 5 % of the device))"},      \
        {"host-memory", OPT_SIZE, NULL, "SIZE", 1, 1e18,                                                  \
         "host memory a rank may use; on the CPU backend it plays the device's role (default: the rank's " \
         "share of MemAvailable)"}

// Fills caps from the defaults and the options a gives; returns the name of the cap the rank's data must
// fit in backend memory, for messages ("--device-memory", or what the default stands for).
const char *cli_memory_caps(ds_ctx *ctx, const ds_args *a, rows_caps *caps);

#endif
