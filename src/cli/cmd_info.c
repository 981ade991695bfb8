// cmd_info.c: `dsolve info`: the cluster a run sees: ranks and hosts, each rank's GPU (name, memory,
// compute capability), each host's RAM and cores, and the versions of the libraries. Works without a
// GPU, without a driver and in a CPU-only build (it opens no backend and no NCCL).
// provides: cmd_info
#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend/backend.h"
#include "cli/cmds.h"
#include "cli/opts.h"
#include "cli/report.h"
#include "core/sysinfo.h"
#include "h5io.h"

extern void ilaver_(int *major, int *minor, int *patch);  // LAPACK's version, from OpenBLAS

static const ds_opt info_table[] = {
    DS_REPORT_OPTS,
    {NULL, 0, NULL, NULL, 0, 0, NULL},
};

// What one rank reports; gathered to rank 0 as bytes.
typedef struct info_rank {
    char host[64];
    int local_rank, local_size, cores;
    double ram_total, ram_available;
    int device;         // the GPU this rank would use, −1 when none
    char source[8];     // "cuda" or "nvml" (a CPU-only build reading the driver)
    char note[96];      // why there is none
    ds_device_info gpu;
} info_rank;

static void info_local_rank(MPI_Comm comm, info_rank *r)
{
    MPI_Comm node;
    int rank;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node);
    MPI_Comm_rank(node, &r->local_rank);
    MPI_Comm_size(node, &r->local_size);
    MPI_Comm_free(&node);
}

// The GPU of node-local rank i is device i, as a device backend takes it.
static void info_gpu_from(const ds_backend *dev, info_rank *r)
{
    int count = dev->device_count();
    snprintf(r->source, sizeof r->source, "%s", dev->name);
    if (count == 0)
        snprintf(r->note, sizeof r->note, "no usable GPU (no device or no driver)");
    else if (r->local_rank >= count)
        snprintf(r->note, sizeof r->note, "more ranks than GPUs on this host (%d GPUs)", count);
    else if (!dev->device_info(r->local_rank, &r->gpu))
        snprintf(r->note, sizeof r->note, "GPU %d could not be read", r->local_rank);
    else
        r->device = r->local_rank;
}

// Without a device backend in the build, the driver (NVML) may still show the GPU.
static void info_gpu_from_driver(info_rank *r, const char *why)
{
    snprintf(r->source, sizeof r->source, "nvml");
    int64_t total = 0, free_b = 0;
    sys_nvml_gpu g = sys_nvml_find(NULL, r->local_rank);
    if (g && sys_nvml_gpu_info(g, r->gpu.name, sizeof r->gpu.name, &total, &free_b, &r->gpu.cc_major, &r->gpu.cc_minor)) {
        r->device = r->local_rank;
        r->gpu.total = (double)total;
        r->gpu.free_b = (double)free_b;
    }
    snprintf(r->note, sizeof r->note, "%s%s", why, r->device >= 0 ? " (seen through the driver)" : "");
}

static void info_gpu_of(info_rank *r)
{
    const char *why = NULL;
    const ds_backend *dev = ds_backend_device(&why);
    r->device = -1;
    if (dev)
        info_gpu_from(dev, r);
    else
        info_gpu_from_driver(r, why);
}

static void info_collect(MPI_Comm comm, info_rank *r)
{
    memset(r, 0, sizeof *r);
    gethostname(r->host, sizeof r->host - 1);
    info_local_rank(comm, r);
    sys_host h;
    sys_host_info(&h);
    r->cores = h.cores;
    r->ram_total = (double)h.ram_total;
    r->ram_available = (double)h.ram_available;
    info_gpu_of(r);
}

typedef struct info_lib {
    char mpi[128], hdf5[64], openblas[256], lapack[32], driver[32];
    char cuda_runtime[16], cuda_driver[16], cublas[24], cusolver[24], nccl[24];
} info_lib;

static void cuda_ver(char *buf, size_t len, int v)
{
    if (v > 0)
        snprintf(buf, len, "%d.%d", v / 1000, (v % 1000) / 10);
    else
        snprintf(buf, len, "-");
}

static void info_libs(info_lib *l)
{
    memset(l, 0, sizeof *l);
    int len = 0, maj = 0, min = 0, pat = 0;
    char mpi[MPI_MAX_LIBRARY_VERSION_STRING];
    MPI_Get_library_version(mpi, &len);
    mpi[strcspn(mpi, ",\n")] = '\0';
    snprintf(l->mpi, sizeof l->mpi, "%.127s", mpi);
    h5io_version(l->hdf5, sizeof l->hdf5);
    snprintf(l->openblas, sizeof l->openblas, "%s", openblas_get_config());
    ilaver_(&maj, &min, &pat);
    snprintf(l->lapack, sizeof l->lapack, "%d.%d.%d", maj, min, pat);
    sys_nvml_driver(l->driver, (int)sizeof l->driver);
    ds_versions v;
    memset(&v, 0, sizeof v);
    const char *why = NULL;
    const ds_backend *dev = ds_backend_device(&why);
    if (dev)
        dev->versions(&v);
    cuda_ver(l->cuda_runtime, sizeof l->cuda_runtime, v.runtime);
    cuda_ver(l->cuda_driver, sizeof l->cuda_driver, v.driver);
    snprintf(l->cublas, sizeof l->cublas, v.blas[0] ? "%d.%d.%d" : "-", v.blas[0], v.blas[1], v.blas[2]);
    snprintf(l->cusolver, sizeof l->cusolver, v.solver[0] ? "%d.%d.%d" : "-", v.solver[0], v.solver[1],
             v.solver[2]);
    if (v.comm >= 10000)
        snprintf(l->nccl, sizeof l->nccl, "%d.%d.%d", v.comm / 10000, (v.comm % 10000) / 100, v.comm % 100);
    else
        snprintf(l->nccl, sizeof l->nccl, "-");
}

static int info_nhosts(const info_rank *all, int n)
{
    int hosts = 0;
    for (int i = 0; i < n; i++)
        hosts += all[i].local_rank == 0;
    return hosts;
}

static void info_text(const info_rank *all, int n, const info_lib *l)
{
    const double gib = 1024.0 * 1024.0 * 1024.0;
    printf("dsolve info: %d rank%s on %d host%s\n", n, n > 1 ? "s" : "", info_nhosts(all, n),
           info_nhosts(all, n) > 1 ? "s" : "");
    printf("  dsolve %s; MPI: %s; %s; LAPACK %s\n  OpenBLAS: %s\n", DSOLVE_VERSION, l->mpi, l->hdf5, l->lapack,
           l->openblas);
    const char *why = NULL;
    if (ds_backend_device(&why))
        printf("  CUDA runtime %s, driver API %s%s%s; cuBLAS %s; cuSOLVER %s; NCCL %s\n", l->cuda_runtime,
               l->cuda_driver, l->driver[0] ? ", driver " : "", l->driver, l->cublas, l->cusolver, l->nccl);
    else
        printf("  CUDA: not built (DSOLVE_CUDA=OFF)%s%s\n", l->driver[0] ? "; NVIDIA driver " : "", l->driver);
    for (int i = 0; i < n; i++)
        if (all[i].local_rank == 0)
            printf("  host %s: %d cores, %.1f GiB RAM (%.1f GiB available), %d rank%s\n", all[i].host, all[i].cores,
                   all[i].ram_total / gib, all[i].ram_available / gib, all[i].local_size, all[i].local_size > 1 ? "s" : "");
    printf("  %4s  %-20s %5s  %-28s %16s  %4s  %s\n", "rank", "host", "local", "GPU", "free/total GiB", "cc", "PCI");
    for (int i = 0; i < n; i++) {
        const info_rank *r = &all[i];
        if (r->device < 0) {
            printf("  %4d  %-20s %5d  none: %s\n", i, r->host, r->local_rank, r->note);
            continue;
        }
        printf("  %4d  %-20s %5d  %-28s %7.1f / %6.1f  %d.%d  %s\n", i, r->host, r->local_rank, r->gpu.name,
               r->gpu.free_b / gib, r->gpu.total / gib, r->gpu.cc_major, r->gpu.cc_minor, r->gpu.bus);
    }
}

static void info_json_rank(ds_json *j, int i, const info_rank *r)
{
    json_object(j, NULL);
    json_num(j, "rank", i);
    json_str(j, "host", r->host);
    json_num(j, "local_rank", r->local_rank);
    json_num(j, "device", r->device);
    if (r->device >= 0) {
        char cc[16];
        snprintf(cc, sizeof cc, "%d.%d", r->gpu.cc_major, r->gpu.cc_minor);
        json_object(j, "gpu");
        json_str(j, "name", r->gpu.name);
        json_num(j, "memory_total_bytes", r->gpu.total);
        json_num(j, "memory_free_bytes", r->gpu.free_b);
        json_str(j, "compute_capability", cc);
        json_str(j, "pci_bus_id", r->gpu.bus);
        json_str(j, "source", r->source);
        json_close(j);
    } else {
        json_null(j, "gpu");
    }
    json_str(j, "gpu_note", r->device >= 0 ? "" : r->note);
    json_close(j);
}

static void info_json(const info_rank *all, int n, const info_lib *l)
{
    ds_json j;
    json_begin(&j);
    json_str(&j, "command", "info");
    json_num(&j, "ranks", n);
    json_array(&j, "hosts");
    for (int i = 0; i < n; i++) {
        if (all[i].local_rank != 0)
            continue;
        json_object(&j, NULL);
        json_str(&j, "host", all[i].host);
        json_num(&j, "cores", all[i].cores);
        json_num(&j, "ram_total_bytes", all[i].ram_total);
        json_num(&j, "ram_available_bytes", all[i].ram_available);
        json_num(&j, "ranks", all[i].local_size);
        json_close(&j);
    }
    json_close(&j);
    json_array(&j, "rank_info");
    for (int i = 0; i < n; i++)
        info_json_rank(&j, i, &all[i]);
    json_close(&j);
    json_object(&j, "versions");
    const char *pairs[][2] = {{"dsolve", DSOLVE_VERSION},       {"mpi", l->mpi},
                              {"hdf5", l->hdf5},                {"openblas", l->openblas},
                              {"lapack", l->lapack},            {"nvidia_driver", l->driver},
                              {"cuda_runtime", l->cuda_runtime}, {"cuda_driver_api", l->cuda_driver},
                              {"cublas", l->cublas},            {"cusolver", l->cusolver},
                              {"nccl", l->nccl}};
    for (size_t i = 0; i < sizeof pairs / sizeof pairs[0]; i++)
        json_str(&j, pairs[i][0], pairs[i][1]);
    json_close(&j);
    json_end(&j, stdout);
}

int cmd_info(MPI_Comm comm, int argc, char **argv, ds_msg *msg)
{
    ds_args args;
    DS_CHECK(opts_parse(info_table, argc, argv, &args, msg));
    int rank = 0, n = 1;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &n);
    if (opts_flag(&args, "help")) {
        if (rank == 0)
            opts_help(stdout, &args, "dsolve info [--json]",
                      "Ranks and hosts, each rank's GPU, each host's RAM and cores, and library versions.");
        return DS_OK;
    }
    info_rank mine;
    info_collect(comm, &mine);
    info_rank *all = rank == 0 ? calloc((size_t)n, sizeof *all) : NULL;
    int ok = rank != 0 || all, all_ok = 0;
    MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, comm);
    if (!all_ok)
        return ds_fail(msg, DS_ERR_RUNTIME, "out of host memory");
    MPI_Gather(&mine, (int)sizeof mine, MPI_BYTE, all, (int)sizeof mine, MPI_BYTE, 0, comm);
    if (rank == 0) {
        info_lib l;
        info_libs(&l);
        if (opts_flag(&args, "json"))
            info_json(all, n, &l);
        else
            info_text(all, n, &l);
    }
    free(all);
    return DS_OK;
}
