// backend.h: the small interface every algorithm is written against. A backend owns its memory
// ("backend memory": host memory for the CPU backend, device memory for CUDA), its queue of work and
// its collectives. CPU backend: OpenBLAS and MPI. CUDA backend: cuBLAS, kernels/ and NCCL.
// provides: ds_mat, ds_step_args, ds_gram_args, ds_backend, ds_backend_cpu, ds_backend_cuda
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

// One block step of batched SolveBak, from the block's reduced gradient. All pointers are backend memory.
//   da_j  = g_j / diag_j            (0 where diag_j == 0: a zero column is skipped)
//   alpha = (da·g) / (daᵀ G_bb da)  with line_search and nb > 1, 0 when that denominator is 0;
//           else alpha = 1 (for one column the exact line search is 1: the Gauss–Seidel step)
//   coef  = alpha·da;  a += coef
typedef struct ds_step_args {
    const double *gbuf;  // [nb + 1]: the global X_bᵀe, then the global ‖e‖²
    const double *diag;  // [nb]: the block's global column norms²
    const double *gbb;   // [nb × ld]: the block's global Gram X_bᵀX_b, row-major
    int nb, ld;
    int line_search;
    double *a;        // [nb]: the block's coefficients, updated
    double *coef;     // [nb]: written, the step the next grad_update applies to e
    double *ee_slot;  // [1] or NULL: receives gbuf[nb]
} ds_step_args;

// Sweeps of SolveBak on the Gram system (G = XᵀX, c = Xᵀy), which gives the residual form's iterates
// in exact arithmetic. g = c − G·a is maintained. Per block b (columns b0 .. b0+nb−1, nb ≤ batch):
//   da = g_b / diag_b (0 where diag is 0); num = da·g_b; den = daᵀ G_bb da;
//   alpha = line_search && nb > 1 ? (den > 0 ? num/den : 0) : 1;
//   a_b += alpha·da;  g −= alpha·G[:, b]·da;  ee −= 2·alpha·num − alpha²·den.
// batch 1 is the sequential algorithm.
typedef struct ds_gram_args {
    const double *G;     // [n × n]: full symmetric, row-major
    const double *diag;  // [n]: the diagonal of G
    double *g;           // [n]: c − G·a, updated
    double *a;           // [n]: updated
    double *ee;          // [1]: ‖y − X·a‖², updated by the formula above
    double *ee_hist;     // [sweeps] or NULL: ee after each sweep
    int64_t n;
    int batch, line_search, sweeps;
} ds_gram_args;

typedef struct ds_backend {
    const char *name;  // "cpu" or "cuda"
    int host_memory;   // 1 when backend memory is host memory (data can be read straight into it)

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

    // out[b·batch² ...] = X_bᵀX_b for each column block b (columns b·batch .. min(n, (b+1)·batch) − 1),
    // an nb × nb block stored row-major with leading dimension batch. Local rows only (a partial sum).
    int (*block_grams)(ds_ctx *ctx, const ds_mat *X, int batch, double *out);

    // The fused pass of the residual form, over the local rows:
    //   e −= X[:, up_col0 .. up_col0+up_n−1] · coef            (skipped when up_n == 0)
    //   gout[0 .. gr_n−1] = X[:, gr_col0 .. gr_col0+gr_n−1]ᵀ · e   (after the update)
    //   gout[gr_n] = eᵀe                                           (after the update)
    // gout is overwritten with these local partial sums. up_n and gr_n may be anything up to n.
    int (*grad_update)(ds_ctx *ctx, const ds_mat *X, double *e, int64_t up_col0, int64_t up_n,
                       const double *coef, int64_t gr_col0, int64_t gr_n, double *gout);

    int (*block_step)(ds_ctx *ctx, const ds_step_args *args);

    // out = [G (n × n, full, row-major) | c (n) | yy (1)] with G = XᵀX, c = Xᵀy, yy = yᵀy over the
    // local rows (a partial sum); y is double.
    int (*gram)(ds_ctx *ctx, const ds_mat *X, const double *y, double *out);

    int (*gram_sweeps)(ds_ctx *ctx, const ds_gram_args *args);
} ds_backend;

#define DS_MARKS 16

// The CPU backend's alltoallv moves at most this many bytes per rank pair in one MPI message. Tests
// make it small (environment DSOLVE_TEST_A2A_CHUNK, bytes, read when the backend opens) to exercise the
// path that a count beyond int takes.
#define DS_CPU_A2A_CHUNK ((int64_t)1 << 30)

extern const ds_backend ds_backend_cpu;
#ifdef DSOLVE_HAVE_CUDA
extern const ds_backend ds_backend_cuda;
int ds_cuda_device_count(void);                      // 0 when there is no usable GPU or driver
void ds_cuda_versions(char *buf, size_t len);        // runtime, driver, cuBLAS, cuSOLVER, NCCL
void ds_cuda_device_name(ds_ctx *ctx, char *buf, size_t len);
#endif

#endif
