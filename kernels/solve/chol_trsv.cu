// chol_trsv.cu: the two triangular solves of --method cholesky's refinement, x = S·(L·Lᵀ)⁻¹·S·b, in one
// launch a triangle. The factor (column-major, lower, as potrf leaves it) is cut into blocks of 64 rows;
// a CTA a block row takes its block by an atomic ticket (so it waits only on CTAs that started before
// it), adds the products of the blocks before it as their flags land (their tiles fetched while it
// waits), and ends with a 64 × 64 product by its diagonal block's inverse, made once a factor. The chain
// a block is then a flag, a tile's product and that inverse's, instead of a substitution of 64 steps:
// cuBLAS's TRSV took 75 µs a triangle at n = 1 000 on an H100, the length of its chain.
// provides: ds_k_trsv_inverse_len, ds_k_trsv_sync_len, ds_k_trsv_prepare, ds_k_chol_trsv
#include "solve/solve_kernels.h"

namespace {

constexpr int kB = 64;         // rows a block
constexpr int kThreads = 256;  // a thread: row r = tid % 64 of its block, columns 16·q .. 16·q + 15 (q = tid / 64)
constexpr int kQ = kThreads / kB;
constexpr int kCols = kB / kQ;
constexpr int kInvThreads = kB;

__device__ __forceinline__ unsigned load_acquire(const unsigned *p)
{
    unsigned v;
    asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
    return v;
}

__device__ __forceinline__ void store_release(unsigned *p, unsigned v)
{
    asm volatile("st.release.gpu.global.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}

// F's upper triangle ← its lower one transposed (U = Lᵀ where the backward solve reads it row-wise).
// 32 × 32 tiles through shared memory; only tiles on or below the diagonal.
__global__ void mirror_kernel(double *F, int64_t n)
{
    __shared__ double t[32][33];
    const int64_t bi = blockIdx.y, bj = blockIdx.x;  // tile (row block bi, column block bj) of the lower
    if (bj > bi)
        return;
    const int64_t r0 = bi * 32, c0 = bj * 32;
    for (int k = threadIdx.y; k < 32; k += blockDim.y) {
        const int64_t r = r0 + threadIdx.x, c = c0 + k;
        if (r < n && c < n)
            t[threadIdx.x][k] = F[c * n + r];  // L(r, c), column c read along r
    }
    __syncthreads();
    for (int k = threadIdx.y; k < 32; k += blockDim.y) {
        const int64_t c = c0 + threadIdx.x, r = r0 + k;  // U(c, r) = L(r, c) at column r, row c
        if (r < n && c < n && r > c)
            F[r * n + c] = t[k][threadIdx.x];
    }
}

// Block i's diagonal L_ii inverted: a thread a column c, forward substitution down it in shared memory.
// D: per block two 64 × 64 column-major matrices, L_ii⁻¹ then (L_iiᵀ)⁻¹, zero outside the block's rows.
__global__ void __launch_bounds__(kInvThreads) invert_kernel(const double *F, int64_t n, double *D)
{
    extern __shared__ double sh[];
    double *Ls = sh, *Is = sh + kB * (kB + 1);  // [row·65 + col]
    const int64_t i = blockIdx.x, r0 = i * kB;
    const int bi = (int)(n - r0 < kB ? n - r0 : kB), c = threadIdx.x;
    for (int r = 0; r < kB; r++)
        Ls[r * (kB + 1) + c] = r < bi && c < bi && c <= r ? F[(r0 + c) * n + r0 + r] : 0.0;
    __syncthreads();
    for (int r = 0; r < kB; r++) {
        double v = 0;
        if (c < bi && r >= c && r < bi) {
            double sum = r == c ? 1.0 : 0.0;
            for (int k = c; k < r; k++)
                sum -= Ls[r * (kB + 1) + k] * Is[k * (kB + 1) + c];
            v = sum / Ls[r * (kB + 1) + r];
        }
        Is[r * (kB + 1) + c] = v;
    }
    __syncthreads();
    double *lo = D + i * 2 * kB * kB, *up = lo + kB * kB;
    for (int r = 0; r < kB; r++) {
        lo[c * kB + r] = Is[r * (kB + 1) + c];  // (L⁻¹)(r, c)
        up[c * kB + r] = Is[c * (kB + 1) + r];  // (L⁻ᵀ)(r, c) = (L⁻¹)(c, r)
    }
}

// One triangle. upper 0: L·z = S·b (in = b, val = z). upper 1: Lᵀ·t = z (in = z, val = t), then
// x = S·t or x += S·t. sync: [ticket, done, flag a block …], zero before the first launch and left so.
// T(r, c) = F[c·n + r] is L below the diagonal and, mirrored, Lᵀ above it: block row i reads its tiles
// the same way in both directions.
__global__ void __launch_bounds__(kThreads) trsv_kernel(const double *F, int64_t n, const double *D,
                                                        const double *s, const double *in, double *val, double *x,
                                                        int upper, int add, unsigned *sync, unsigned epoch)
{
    __shared__ double red[kQ][kB];
    __shared__ double rhs[kB];
    __shared__ int ticket;
    const int tid = threadIdx.x, r = tid % kB, q = tid / kB;
    const int64_t nb = (n + kB - 1) / kB;
    unsigned *flags = sync + 2;
    if (tid == 0)
        ticket = (int)atomicAdd(&sync[0], 1u);
    __syncthreads();
    const int64_t i = upper ? nb - 1 - ticket : ticket, r0 = i * kB, row = r0 + r;
    double dv[kCols];  // this block's inverse, row r, columns of quarter q
    const double *Di = D + i * 2 * kB * kB + (upper ? kB * kB : 0);
#pragma unroll
    for (int k = 0; k < kCols; k++)
        dv[k] = Di[(q * kCols + k) * kB + r];
    const int64_t deps = upper ? nb - 1 - i : i;
    double v[kCols], acc = 0;
    auto fetch = [&](int64_t d) {  // tile (i, j) of the d-th block this one waits on
        const int64_t j = upper ? nb - 1 - d : d;
#pragma unroll
        for (int k = 0; k < kCols; k++) {
            const int64_t col = j * kB + q * kCols + k;
            v[k] = row < n && col < n ? __ldg(&F[col * n + row]) : 0.0;
        }
    };
    if (deps > 0)
        fetch(0);
    for (int64_t d = 0; d < deps; d++) {
        const int64_t j = upper ? nb - 1 - d : d;
        double w[kCols];
#pragma unroll
        for (int k = 0; k < kCols; k++)
            w[k] = v[k];
        if (d + 1 < deps)
            fetch(d + 1);  // the next tile in flight while this one waits
        if (tid == 0)
            while (load_acquire(&flags[j]) != epoch) {
            }
        __syncthreads();
#pragma unroll
        for (int k = 0; k < kCols; k++) {
            const int64_t col = j * kB + q * kCols + k;
            acc += w[k] * (col < n ? __ldcg(&val[col]) : 0.0);
        }
    }
    red[q][r] = acc;
    __syncthreads();
    if (tid < kB) {
        const double b = row < n ? (upper ? in[row] : s[row] * in[row]) : 0.0;
        rhs[r] = b - (red[0][r] + red[1][r] + red[2][r] + red[3][r]);
    }
    __syncthreads();
    double p = 0;
#pragma unroll
    for (int k = 0; k < kCols; k++)
        p += dv[k] * rhs[q * kCols + k];
    red[q][r] = p;  // every read of red above is behind the barrier before rhs
    __syncthreads();
    if (tid < kB && row < n) {
        const double t = red[0][r] + red[1][r] + red[2][r] + red[3][r];
        __stcg(&val[row], t);
        if (upper)
            x[row] = add ? x[row] + s[row] * t : s[row] * t;
        __threadfence();
    }
    __syncthreads();
    if (tid == 0) {
        store_release(&flags[i], epoch);
        if (atomicAdd(&sync[1], 1u) == (unsigned)nb - 1) {  // the last CTA: every ticket is taken
            sync[0] = 0;
            sync[1] = 0;
        }
    }
}

}  // namespace

extern "C" size_t ds_k_trsv_sync_len(int64_t n)
{
    return (size_t)((n + kB - 1) / kB) + 2;
}

extern "C" size_t ds_k_trsv_inverse_len(int64_t n)
{
    return (size_t)((n + kB - 1) / kB) * 2 * kB * kB;
}

extern "C" cudaError_t ds_k_trsv_prepare(double *F, int64_t n, double *D, cudaStream_t stream)
{
    if (n == 0)
        return cudaSuccess;
    const int64_t nb = (n + kB - 1) / kB, nt = (n + 31) / 32;
    mirror_kernel<<<dim3((unsigned)nt, (unsigned)nt), dim3(32, 8), 0, stream>>>(F, n);
    const int shmem = 2 * kB * (kB + 1) * (int)sizeof(double);
    cudaError_t e = cudaFuncSetAttribute(invert_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, shmem);
    if (e != cudaSuccess)
        return e;
    invert_kernel<<<(unsigned)nb, kInvThreads, shmem, stream>>>(F, n, D);
    return cudaGetLastError();
}

extern "C" cudaError_t ds_k_chol_trsv(const double *F, int64_t n, const double *D, const double *s, const double *b,
                                      double *z, double *t, double *x, int add, unsigned *sync, unsigned epoch[2],
                                      cudaStream_t stream)
{
    if (n == 0)
        return cudaSuccess;
    const unsigned nb = (unsigned)((n + kB - 1) / kB);
    trsv_kernel<<<nb, kThreads, 0, stream>>>(F, n, D, s, b, z, NULL, 0, 0, sync, epoch[0]);
    trsv_kernel<<<nb, kThreads, 0, stream>>>(F, n, D, s, z, t, x, 1, add, sync, epoch[1]);
    return cudaGetLastError();
}
