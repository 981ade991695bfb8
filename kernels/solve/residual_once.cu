// residual_once.cu: the pass that updates the residual with a wide slab of X and forms the slab's
// gradient, e −= X[:, c0 .. c0+nc)·coef and g = X[:, c0 .. c0+nc)ᵀe (the certificate of every method and
// the refinement of cholesky: the slab is all of X), reading X once from memory where update_rows and
// grad_cols (residual.cu) read it twice. Each CTA writes a partial row of nc + 1 sums (g, then eᵀe) that
// residual.cu adds in a fixed order, so results are bit-identical run to run on the same device.
//   rows in registers (f64, nc ≤ 1 024): a warp holds a whole row, K doubles a lane, so one set of loads
//          serves both products; the warp's column sums stay in registers until the end;
//   rows a CTA (f64, 1 024 < nc ≤ 4 096): the same with the CTA's 4 warps sharing a row (on an H100,
//          2026-11-26: the check of 200 000 × 1 500 in 0.96 ms against the chunks' 1.78, of 200 000 × 3 000
//          in 1.78 against 3.66 ms, docs/performance.md);
//   row chunks (f32, and wider, up to what 48 KB of shared memory holds): a CTA updates e on 8 rows, then its
//          threads add their columns over those rows while they are still in L1 or L2.
// provides: ds_k_grad_once_parts, ds_k_grad_once
#include "solve/solve_kernels.h"
#include "common/reduce.cuh"

namespace {

constexpr int kRrThreads = 128;    // 4 warps, each a row at a time
constexpr int kRrBlocksPerSm = 3;  // ≤ 170 registers a thread: a row (K doubles) and its sums (K)
constexpr int kRrMaxCols = 1024;

// The kernels' common start: coef, zero-padded to len, into shared memory for the whole CTA; the
// column sums zeroed.
template <int K>
__device__ __forceinline__ void stage_coef(const double *coef, int nc, double *s_c, int len, double (&acc)[K])
{
    for (int j = threadIdx.x; j < len; j += blockDim.x)
        s_c[j] = j < nc ? coef[j] : 0.0;
    __syncthreads();
#pragma unroll
    for (int k = 0; k < K; k++)
        acc[k] = 0.0;
}

template <typename T, int K>
__global__ void __launch_bounds__(kRrThreads, kRrBlocksPerSm)
    rows_regs(const T *__restrict__ X, int64_t rows, int64_t cols, double *__restrict__ e, int64_t c0, int nc,
              const double *__restrict__ coef, double *__restrict__ partial)
{
    extern __shared__ double s_mem[];  // coef (32·K), then each warp's sums (nc + 1 a warp)
    double *s_c = s_mem, *s_red = s_mem + 32 * K;
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, nwarps = blockDim.x / 32;
    double acc[K];
    stage_coef<K>(coef, nc, s_c, 32 * K, acc);
    double ee = 0.0;
    const int64_t stride = (int64_t)gridDim.x * nwarps;
    for (int64_t i = (int64_t)blockIdx.x * nwarps + warp; i < rows; i += stride) {
        const T *row = X + i * cols + c0;
        double x[K];
#pragma unroll
        for (int k = 0; k < K; k++) {
            const int j = lane + 32 * k;
            x[k] = j < nc ? ldx(row + j) : 0.0;
        }
        double ei = e[i], s = 0.0;
#pragma unroll
        for (int k = 0; k < K; k++)
            s = fma(x[k], s_c[lane + 32 * k], s);
        ei -= warp_sum(s);  // every lane gets the same bits
        __syncwarp();       // every lane's read of e[i] is ordered before lane 0 writes it
        if (lane == 0)
            e[i] = ei;
#pragma unroll
        for (int k = 0; k < K; k++)
            acc[k] = fma(x[k], ei, acc[k]);
        ee = fma(ei, ei, ee);
    }

    double *mine = s_red + warp * (nc + 1);
#pragma unroll
    for (int k = 0; k < K; k++) {
        const int j = lane + 32 * k;
        if (j < nc)
            mine[j] = acc[k];
    }
    if (lane == 0)
        mine[nc] = ee;
    __syncthreads();
    for (int j = threadIdx.x; j <= nc; j += blockDim.x) {
        double t = 0.0;
        for (int w = 0; w < nwarps; w++)
            t += s_red[w * (nc + 1) + j];
        partial[(int64_t)blockIdx.x * (nc + 1) + j] = t;
    }
}

// Wider rows (1 024 < nc ≤ 4 096, f64): the CTA's 4 warps share a row, K doubles a thread, the row's
// sum over the warps in shared memory (two slots, by row parity: one barrier a row); a thread's column
// sums stay in registers and it writes them itself. Every thread reads the row's e before the barrier,
// thread 0 alone writes it after.
constexpr int kRwMaxCols = 4096;

template <typename T, int K>
__global__ void __launch_bounds__(kRrThreads, kRrBlocksPerSm)
    rows_cta(const T *__restrict__ X, int64_t rows, int64_t cols, double *__restrict__ e, int64_t c0, int nc,
             const double *__restrict__ coef, double *__restrict__ partial)
{
    extern __shared__ double s_mem[];  // coef (kRrThreads·K), then 2 × the warps' sums of a row
    double *s_c = s_mem, *s_part = s_mem + kRrThreads * K;
    const int t = threadIdx.x, lane = t % 32, warp = t / 32, nwarps = blockDim.x / 32;
    double acc[K];
    stage_coef<K>(coef, nc, s_c, kRrThreads * K, acc);
    double ee = 0.0;
    int parity = 0;
    for (int64_t i = blockIdx.x; i < rows; i += gridDim.x, parity ^= 1) {
        const T *row = X + i * cols + c0;
        // e[i] read by every thread before the barrier: thread 0 writes it after the barrier, and a warp
        // reading it there could see the new value (a race that corrupted g on 150 000 × 4 000, H100)
        double x[K], s = 0.0, ei = e[i];
#pragma unroll
        for (int k = 0; k < K; k++) {
            const int j = t + kRrThreads * k;
            x[k] = j < nc ? ldx(row + j) : 0.0;
        }
#pragma unroll
        for (int k = 0; k < K; k++)
            s = fma(x[k], s_c[t + kRrThreads * k], s);
        s = warp_sum(s);
        if (lane == 0)
            s_part[parity * nwarps + warp] = s;
        __syncthreads();  // (the other slot was last read before the previous row's barrier)
        for (int w = 0; w < nwarps; w++)
            ei -= s_part[parity * nwarps + w];
        if (t == 0) {
            e[i] = ei;
            ee = fma(ei, ei, ee);
        }
#pragma unroll
        for (int k = 0; k < K; k++)
            acc[k] = fma(x[k], ei, acc[k]);
    }
#pragma unroll
    for (int k = 0; k < K; k++) {
        const int j = t + kRrThreads * k;
        if (j < nc)
            partial[(int64_t)blockIdx.x * (nc + 1) + j] = acc[k];
    }
    if (t == 0)
        partial[(int64_t)blockIdx.x * (nc + 1) + nc] = ee;
}

constexpr int kRcThreads = 256;
constexpr int kRcRows = 8;         // 4 CTAs of 8 rows of 1 000 doubles: 256 KB a multiprocessor, L1's size
constexpr int kRcBlocksPerSm = 4;
constexpr int64_t kRcMaxCols = 48 * 1024 / 8 - kRcRows - 1;  // the sums in the default 48 KB

template <typename T>
__global__ void __launch_bounds__(kRcThreads)
    row_chunks(const T *__restrict__ X, int64_t rows, int64_t cols, double *__restrict__ e, int64_t c0,
               int64_t nc, const double *__restrict__ coef, double *__restrict__ partial)
{
    extern __shared__ double s_acc[];  // nc + 1 sums (a thread owns columns t, t + blockDim, ..), then e
    double *s_e = s_acc + nc + 1;
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, nwarps = blockDim.x / 32;
    for (int64_t j = threadIdx.x; j <= nc; j += blockDim.x)
        s_acc[j] = 0.0;
    for (int64_t r0 = (int64_t)blockIdx.x * kRcRows; r0 < rows; r0 += (int64_t)gridDim.x * kRcRows) {
        const int nr = rows - r0 < kRcRows ? (int)(rows - r0) : kRcRows;
        __syncthreads();  // the previous chunk's s_e has been read
        for (int q = warp; q < nr; q += nwarps) {
            const T *row = X + (r0 + q) * cols + c0;
            double s = 0.0;
#pragma unroll 8
            for (int64_t j = lane; j < nc; j += 32)
                s = fma(ldx(row + j), coef[j], s);
            s = warp_sum(s);
            if (lane == 0) {
                const double v = e[r0 + q] - s;
                e[r0 + q] = v;
                s_e[q] = v;
            }
        }
        __syncthreads();
        const T *chunk = X + r0 * cols + c0;
        for (int64_t j = threadIdx.x; j <= nc; j += blockDim.x) {
            double acc = s_acc[j];
            if (j < nc && nr == kRcRows) {
#pragma unroll
                for (int q = 0; q < kRcRows; q++)
                    acc = fma(ldx(chunk + q * cols + j), s_e[q], acc);
            } else if (j < nc) {
                for (int q = 0; q < nr; q++)
                    acc = fma(ldx(chunk + q * cols + j), s_e[q], acc);
            } else {
                for (int q = 0; q < nr; q++)
                    acc = fma(s_e[q], s_e[q], acc);
            }
            s_acc[j] = acc;
        }
    }
    __syncthreads();
    for (int64_t j = threadIdx.x; j <= nc; j += blockDim.x)
        partial[(int64_t)blockIdx.x * (nc + 1) + j] = s_acc[j];
}

// Rows in registers for f64 only: for f32 X (half the bytes a row in flight) the row chunks measured
// faster on an H100 (0.33 against 0.60 ms for 100 000 × 1 000), for f64 the registers (0.33 against 0.55).
bool use_regs(int64_t nc, int f32, int plan)
{
    return !f32 && (plan == DS_CERT_AUTO || plan == DS_CERT_CTA) && nc <= kRwMaxCols;
}

template <typename T, int K>
cudaError_t launch_regs(const void *X, int64_t rows, int64_t cols, double *e, int64_t c0, int64_t nc,
                        const double *coef, double *partial, int64_t grid, cudaStream_t stream)
{
    const size_t smem = (size_t)(32 * K + (kRrThreads / 32) * (nc + 1)) * sizeof(double);  // ≤ 41 KB
    rows_regs<T, K><<<(unsigned)grid, kRrThreads, smem, stream>>>((const T *)X, rows, cols, e, c0, (int)nc, coef,
                                                                  partial);
    return cudaGetLastError();
}

template <typename T>
cudaError_t launch_once(const void *X, int64_t rows, int64_t cols, double *e, int64_t c0, int64_t nc,
                        const double *coef, double *partial, int64_t grid, int plan, cudaStream_t stream)
{
    if (!use_regs(nc, sizeof(T) == 4, plan)) {
        const size_t smem = (size_t)(nc + 1 + kRcRows) * sizeof(double);
        row_chunks<T><<<(unsigned)grid, kRcThreads, smem, stream>>>((const T *)X, rows, cols, e, c0, nc, coef,
                                                                    partial);
        return cudaGetLastError();
    }
    if (nc > kRrMaxCols) {  // a row a CTA
        const int64_t K = ceil_div(nc, kRrThreads);
        const size_t smem = (size_t)(kRrThreads * (K <= 16 ? 16 : K <= 24 ? 24 : 32) + 8) * sizeof(double);
#define DS_ROWS_CTA(K_) \
    rows_cta<T, K_><<<(unsigned)grid, kRrThreads, smem, stream>>>((const T *)X, rows, cols, e, c0, (int)nc, coef, partial)
        if (K <= 16)
            DS_ROWS_CTA(16);
        else if (K <= 24)
            DS_ROWS_CTA(24);
        else
            DS_ROWS_CTA(32);
#undef DS_ROWS_CTA
        return cudaGetLastError();
    }
    const int64_t K = ceil_div(nc, 32);
    if (K <= 8)
        return launch_regs<T, 8>(X, rows, cols, e, c0, nc, coef, partial, grid, stream);
    if (K <= 16)
        return launch_regs<T, 16>(X, rows, cols, e, c0, nc, coef, partial, grid, stream);
    if (K <= 24)
        return launch_regs<T, 24>(X, rows, cols, e, c0, nc, coef, partial, grid, stream);
    return launch_regs<T, 32>(X, rows, cols, e, c0, nc, coef, partial, grid, stream);
}

}  // namespace

extern "C" int64_t ds_k_grad_once_parts(int64_t rows, int64_t nc, int f32, int nsm, int plan)
{
    if (plan == DS_CERT_TWO_PASS || nc < 1 || nc > kRcMaxCols || rows < 1)
        return 0;
    const bool regs = use_regs(nc, f32, plan);
    int64_t grid = (int64_t)(nsm > 0 ? nsm : 1) * (regs ? kRrBlocksPerSm : kRcBlocksPerSm);
    const int64_t want = !regs ? ceil_div(rows, kRcRows) : nc > kRrMaxCols ? rows : ceil_div(rows, kRrThreads / 32);
    return want < grid ? want : grid;
}

extern "C" cudaError_t ds_k_grad_once(const void *X, int f32, int64_t rows, int64_t cols, double *e, int64_t c0,
                                      int64_t nc, const double *coef, double *partial, int64_t parts, int plan,
                                      cudaStream_t stream)
{
    if (parts < 1 || parts > 0x7fffffff || nc < 1 || nc > kRcMaxCols || c0 < 0 || c0 + nc > cols ||
        plan == DS_CERT_TWO_PASS)
        return cudaErrorInvalidValue;
    return f32 ? launch_once<float>(X, rows, cols, e, c0, nc, coef, partial, parts, plan, stream)
               : launch_once<double>(X, rows, cols, e, c0, nc, coef, partial, parts, plan, stream);
}
