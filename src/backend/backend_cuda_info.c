// backend_cuda_info.c: what the CUDA backend answers about its devices without running anything on
// them: how many there are, their properties and free memory, the run's device name, the versions of
// the runtime and libraries, and the cost figures the methods' choosers use. Safe without a driver.
// provides: cuda_device_count, cuda_device_info, cuda_device_name, cuda_versions, cuda_costs
#include <cusolverDn.h>

#include "backend/backend_cuda.h"

int cuda_device_count(void)
{
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        (void)cudaGetLastError();
        return 0;
    }
    return n;
}

int cuda_device_info(int device, ds_device_info *d)
{
    struct cudaDeviceProp p;
    size_t f = 0, t = 0;
    memset(d, 0, sizeof *d);
    if (cudaGetDeviceProperties(&p, device) != cudaSuccess || cudaSetDevice(device) != cudaSuccess ||
        cudaMemGetInfo(&f, &t) != cudaSuccess) {
        (void)cudaGetLastError();
        return 0;
    }
    snprintf(d->name, sizeof d->name, "%.127s", p.name);
    if (cudaDeviceGetPCIBusId(d->bus, (int)sizeof d->bus, device) != cudaSuccess) {
        (void)cudaGetLastError();
        d->bus[0] = '\0';
    }
    d->total = (double)t;
    d->free_b = (double)f;
    d->cc_major = p.major;
    d->cc_minor = p.minor;
    return 1;
}

void cuda_device_name(ds_ctx *ctx, char *buf, size_t len)
{
    struct cudaDeviceProp p;
    if (cudaGetDeviceProperties(&p, ctx->device) != cudaSuccess) {
        (void)cudaGetLastError();
        snprintf(buf, len, "unknown GPU %d", ctx->device);
        return;
    }
    snprintf(buf, len, "%s, %.0f GiB", p.name, (double)p.totalGlobalMem / GIB);
}

void cuda_versions(ds_versions *v)
{
    memset(v, 0, sizeof *v);
    const libraryPropertyType parts[3] = {MAJOR_VERSION, MINOR_VERSION, PATCH_LEVEL};
    if (cudaRuntimeGetVersion(&v->runtime) != cudaSuccess)
        v->runtime = 0;
    if (cudaDriverGetVersion(&v->driver) != cudaSuccess)
        v->driver = 0;
    for (int i = 0; i < 3; i++) {
        if (cublasGetProperty(parts[i], &v->blas[i]) != CUBLAS_STATUS_SUCCESS)
            v->blas[i] = 0;
        if (cusolverGetProperty(parts[i], &v->solver[i]) != CUSOLVER_STATUS_SUCCESS)
            v->solver[i] = 0;
    }
    if (ncclGetVersion(&v->comm) != ncclSuccess)
        v->comm = 0;
    (void)cudaGetLastError();
}

// Rough rates of one H100/H200-class GPU: FP64 matrix product, HBM bandwidth, the Gram sweeps' reads
// of G (one kernel, mostly from L2), and one block step (an NCCL allreduce when there are several ranks).
void cuda_costs(const ds_ctx *ctx, ds_costs *c)
{
    c->flops = 40e12;
    c->bandwidth = 3.0e12;
    c->sweep_bandwidth = 10e12;
    c->latency = ctx->nranks > 1 ? 30e-6 : 10e-6;
}
