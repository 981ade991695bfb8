// memcaps.c: --device-memory and --host-memory as the caps a rank works under.
#include "cli/memcaps.h"

const char *cli_memory_caps(ds_ctx *ctx, const ds_args *a, rows_caps *caps)
{
    rows_caps_default(ctx, caps);
    if (opts_given(a, "host-memory"))
        caps->host = opts_size(a, "host-memory");
    if (ctx->be->host_memory) {
        caps->backend = caps->host;
        return opts_given(a, "host-memory") ? "--host-memory" : "the rank's share of MemAvailable (--host-memory)";
    }
    if (opts_given(a, "device-memory"))
        caps->backend = opts_size(a, "device-memory");
    return opts_given(a, "device-memory") ? "--device-memory" : "the device's free memory (--device-memory)";
}
