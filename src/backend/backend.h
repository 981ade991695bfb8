// backend.h: the small interface every algorithm is written against. A backend owns its memory
// ("backend memory": host memory for the CPU backend, device memory for CUDA), its queue of work and
// its collectives; it answers what its devices are and what they cost, and reaches one table of
// operations per workload (solve, ann, sort, logreg, bench), each defined beside its workload.
// CPU backend: OpenBLAS and MPI. CUDA backend: cuBLAS, cuSOLVER, kernels/ and NCCL.
// registry.c lists the backends; ctx_open picks one of them.
// provides: ds_mat, ds_device_info, ds_versions, ds_costs, ds_backend, ds_backends, ds_nbackends,
//           ds_backend_choices, ds_backend_find, ds_backend_host, ds_backend_device
#ifndef DS_BACKEND_H
#define DS_BACKEND_H

#include <stddef.h>
#include <stdint.h>

typedef struct ds_ctx ds_ctx;

// A row block of X in backend memory: rows × cols, row-major (leading dimension cols), float or double.
// Rows are the rank's own (a later chunk of them, once inputs are streamed); columns are always all n.
typedef struct ds_mat {
    const void *data;
    int64_t rows, cols;
    int f32;  // 1: float elements, 0: double
} ds_mat;

// What a backend reports of one of its devices.
typedef struct ds_device_info {
    char name[128], bus[32];  // model; PCI bus id ("" when unknown)
    double total, free_b;     // bytes
    int cc_major, cc_minor;   // compute capability
} ds_device_info;

// The versions of a device backend's runtime and libraries; 0 where absent.
typedef struct ds_versions {
    int runtime, driver;       // 1000·major + 10·minor
    int blas[3], solver[3];    // major, minor, patch (cuBLAS, cuSOLVER)
    int comm;                  // the collectives library's code (NCCL: 22803 for 2.28.3)
} ds_versions;

// A backend's rough cost figures, which the methods' choosers and progress decisions use.
typedef struct ds_costs {
    double flops;            // matrix-product rate, flop/s
    double bandwidth;        // memory bandwidth, bytes/s
    double sweep_bandwidth;  // bytes/s of a Gram sweep's reads of G
    double latency;          // seconds of one block step (its allreduce included)
} ds_costs;

// The workload tables (defined in each workload's folder: solve/solvebak.h, ann/ann.h, sort/sort.h,
// logreg/logreg.h, bench/bench.h).
typedef struct solve_ops solve_ops;
typedef struct ann_ops ann_ops;
typedef struct sort_ops sort_ops;
typedef struct lr_ops lr_ops;
typedef struct bench_ops bench_ops;

typedef struct ds_backend {
    const char *name;  // what --backend calls it: "cpu", "cuda"
    int host_memory;   // 1 when backend memory is host memory (data can be read straight into it)

    // Devices; all NULL for a backend that runs on the host. device_count: the devices this process
    // sees (0 without a driver; safe to call before open). device_info: 1 when device's properties
    // and free memory could be read. device_name: the run's device (ctx->device) for summaries.
    int (*device_count)(void);
    int (*device_info)(int device, ds_device_info *info);
    void (*device_name)(ds_ctx *ctx, char *buf, size_t len);
    void (*versions)(ds_versions *v);
    // The cost figures of this backend as ctx runs it.
    void (*costs)(const ds_ctx *ctx, ds_costs *c);

    // Collective over ctx->comm. Takes the device ctx->device (CUDA), creates the queue, the library
    // handles and the NCCL communicator. close releases all of it and may be called after a failed open.
    int (*open)(ds_ctx *ctx);
    void (*close)(ds_ctx *ctx);

    // Memory. alloc returns DS_ERR_RUNTIME with a message naming the size when memory is short.
    int (*alloc)(ds_ctx *ctx, void **ptr, size_t bytes);
    void (*free)(ds_ctx *ctx, void *ptr);
    int (*upload)(ds_ctx *ctx, void *dst, const void *src, size_t bytes);    // returns when src may be reused
    int (*download)(ds_ctx *ctx, void *dst, const void *src, size_t bytes);  // waits for queued work
    int (*copy)(ds_ctx *ctx, void *dst, const void *src, size_t bytes);      // queued; no overlap
    int (*fill)(ds_ctx *ctx, double *x, int64_t n, double value);            // queued
    int (*gather)(ds_ctx *ctx, double *dst, const double *src, int64_t n, int64_t stride);  // dst[i] = src[i·stride], queued
    int (*sync)(ds_ctx *ctx);
    // y[0 .. n) += alpha·x[0 .. n) (backend memory). Queued.
    int (*axpy)(ds_ctx *ctx, double *y, const double *x, int64_t n, double alpha);

    // Staging of streamed inputs (core/rows.c). host_alloc: host memory that the backend copies from
    // fastest (pinned on CUDA, aligned on the CPU; DS_ERR_RUNTIME naming the size when short); host_free
    // releases it. stage: copies bytes from such memory (from other host memory it works, but the copy may
    // hold the host until done, and at a fraction of the rate) to backend memory as slot (0 .. DS_STAGES−1), on
    // the backend's copy queue, after the work queued before slot's last stage_release, and before the
    // work queued after it (the copy overlaps the work queued before). stage_wait: returns when slot's
    // copy is done, so its host memory may be refilled. stage_release: marks the end of the work that
    // reads slot's backend memory (the next stage into that slot waits for it). stage_2d: stage of height
    // rows of width bytes, row i from src + i·spitch to dst + i·dpitch (a few columns of a row-major
    // matrix: only those cross the bus), ordered as stage is.
    int (*host_alloc)(ds_ctx *ctx, void **ptr, size_t bytes);
    void (*host_free)(ds_ctx *ctx, void *ptr);
    int (*stage)(ds_ctx *ctx, int slot, void *dst, const void *src, size_t bytes);
    int (*stage_2d)(ds_ctx *ctx, int slot, void *dst, size_t dpitch, const void *src, size_t spitch, size_t width,
                    size_t height);
    int (*stage_wait)(ds_ctx *ctx, int slot);
    int (*stage_release)(ds_ctx *ctx, int slot);

    // Timing: mark records a point in the queue (a device event on CUDA) in slot 0 .. DS_MARKS−1;
    // elapsed waits for the later mark and gives the seconds between the two.
    int (*mark)(ds_ctx *ctx, int slot);
    int (*elapsed)(ds_ctx *ctx, int from, int to, double *seconds);

    // In-place sum over ctx->comm of count doubles in backend memory (NCCL on CUDA, MPI on CPU). Queued.
    int (*allreduce_sum)(ds_ctx *ctx, double *buf, int64_t count);

    // Personalized all-to-all of bytes in backend memory: send[sdispl[r] .. sdispl[r]+scount[r]) goes to
    // rank r; recv[rdispl[r] .. rdispl[r]+rcount[r]) arrives from rank r. Counts and displacements are
    // bytes (int64, any size: beyond 2^31 works). Every rank passes counts that match its peers' (exchange
    // them first with MPI_Alltoall). Queued. The send and receive ranges must not overlap.
    // CUDA: NCCL grouped ncclSend/ncclRecv (ncclChar) on the backend stream, zero-count pairs skipped,
    // the self part by cudaMemcpyAsync. CPU: MPI on host memory, in pieces so int counts never overflow.
    int (*alltoallv)(ds_ctx *ctx, const void *send, const int64_t *scount, const int64_t *sdispl, void *recv,
                     const int64_t *rcount, const int64_t *rdispl);

    // The workloads' operations on this backend.
    const solve_ops *solve;
    const ann_ops *ann;
    const sort_ops *sort;
    const lr_ops *logreg;
    const bench_ops *bench;
} ds_backend;

#define DS_MARKS 16
#define DS_STAGES 4

// The CPU backend's alltoallv moves at most this many bytes per rank pair in one MPI message. Tests
// make it small (environment DSOLVE_TEST_A2A_CHUNK, bytes, read when the backend opens) to exercise the
// path that a count beyond int takes.
#define DS_CPU_A2A_CHUNK ((int64_t)1 << 30)

// The registry (registry.c): every backend built in, device backends first in order of preference,
// the host backend last.
extern const ds_backend *const ds_backends[];
extern const int ds_nbackends;
// What --backend accepts: "auto" and every name the registry knows, built or not ("auto|cpu|cuda").
extern const char ds_backend_choices[];

// The backend --backend NAME means, or NULL with *why saying why ("this dsolve was built without
// CUDA (DSOLVE_CUDA=OFF)", or that the name is unknown).
const ds_backend *ds_backend_find(const char *name, const char **why);
// The host backend (the last entry).
const ds_backend *ds_backend_host(void);
// The first device backend built in, or NULL with *why ("built without CUDA").
const ds_backend *ds_backend_device(const char **why);

#endif
