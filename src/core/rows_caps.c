// rows_caps.c: the memory caps a row source plans its chunks by (rows.h: rows_caps_default, rows_chunk_for).
#include "core/rows.h"

#include <math.h>

#include "core/sysinfo.h"

void rows_caps_default(ds_ctx *ctx, rows_caps *c)
{
    sys_host h;
    sys_host_info(&h);
    c->host = (double)h.ram_available / (ctx->local_size > 0 ? ctx->local_size : 1);
    c->backend = c->host;
    ds_device_info info;
    if (!ctx->be->host_memory && ctx->be->device_info && ctx->be->device_info(ctx->device, &info)) {
        const double margin = fmax(512.0 * (1 << 20), 0.05 * info.total);
        c->backend = fmax(info.free_b - margin, 0.0);
    }
}

int64_t rows_chunk_for(const ds_ctx *ctx, const rows_caps *c, int64_t rows, int64_t cols, int f32, double fixed,
                       double extra, double min_bytes[2])
{
    const double row = (double)cols * (f32 ? 4 : 8) + sizeof(double);
    double r = floor((c->backend - fixed) / (2.0 * row + extra));
    min_bytes[0] = fixed + ROWS_MIN_CHUNK * (2.0 * row + extra);
    min_bytes[1] = 0;
    if (!ctx->be->host_memory) {  // the pinned staging buffers live in host memory
        r = fmin(r, floor(c->host / (2.0 * row)));
        min_bytes[1] = ROWS_MIN_CHUNK * 2.0 * row;
    }
    r = fmin(r, floor((double)ROWS_CHUNK_MAX_BYTES / row));
    if (r < ROWS_MIN_CHUNK)
        return 0;
    return (int64_t)fmax(fmin(r, (double)rows), 1.0);
}
