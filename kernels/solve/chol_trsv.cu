// chol_trsv.cu: the two triangular solves of --method cholesky's refinement, x = S·(L·Lᵀ)⁻¹·S·b, in one
// launch a triangle. The factor (column-major, lower, as potrf leaves it) is cut into blocks of 64 rows;
// a CTA a block row takes its block by an atomic ticket (so it waits only on CTAs that started before
// it), adds the products of the blocks before it as their values land (their tiles fetched while it
// waits), and ends with z_i = c_i − M_i·x_last, where c_i = D_i·(b_i − the other blocks' products), D_i its
// diagonal block's inverse and M_i = D_i·T_i,last, both made once a factor. The chain a block is then one
// 64 × 64 product after the last value lands. A value is its own flag: the solution vectors hold a
// signalling NaN that no arithmetic yields until a block writes its part, and are set back to it at the
// end of the second triangle. cuBLAS's TRSV took 75 µs a triangle at n = 1 000 on an H100.
// provides: ds_k_trsv_inverse_len, ds_k_trsv_work_len, ds_k_trsv_work_init, ds_k_trsv_prepare, ds_k_chol_trsv
#include "backend/backend_kernels.h"
#include "solve/solve_kernels.h"

namespace {

constexpr int kB = 64;         // rows a block
constexpr int kThreads = 256;  // a thread: row r = tid % 64 of its block, columns 16·q .. 16·q + 15 (q = tid / 64)
constexpr int kQ = kThreads / kB;
constexpr int kCols = kB / kQ;
constexpr int kLd = kB + 1;  // shared matrices' row pitch
constexpr unsigned long long kUnset = 0x7FF4D50E00000000ull;  // a signalling NaN: "not written yet"
constexpr int64_t kPerBlock = 4 * kB * kB;                     // D and M of each triangle

__device__ __forceinline__ double load_relaxed(const double *p)
{
    unsigned long long v;
    asm volatile("ld.relaxed.gpu.global.b64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
    return __longlong_as_double((long long)v);
}

__device__ __forceinline__ void store_relaxed(double *p, double x)
{
    asm volatile("st.relaxed.gpu.global.b64 [%0], %1;" ::"l"(p), "l"(__double_as_longlong(x)) : "memory");
}

__device__ __forceinline__ bool unset(double v)
{
    return (unsigned long long)__double_as_longlong(v) == kUnset;
}

// The kCols values of block j's solution this thread reads (columns 16·q ..), once all have landed.
__device__ __forceinline__ void await_block(const double *val, int64_t n, int64_t j, int q, double *xv)
{
    const int64_t c0 = j * kB + q * kCols;
#pragma unroll
    for (int k = 0; k < kCols; k++)
        xv[k] = c0 + k < n ? load_relaxed(&val[c0 + k]) : 0.0;
    for (;;) {
        bool pending = false;
#pragma unroll
        for (int k = 0; k < kCols; k++)
            if (unset(xv[k])) {
                xv[k] = load_relaxed(&val[c0 + k]);
                pending = true;
            }
        if (!pending)
            return;
    }
}

// Ts ← the 64 × 64 tile of L at block (bi, bj), zero outside n (shared, pitch kLd).
__device__ void load_tile(const double *F, int64_t n, int64_t bi, int64_t bj, double *Ts)
{
    for (int e = threadIdx.x; e < kB * kB; e += blockDim.x) {
        const int r = e % kB, c = e / kB;
        const int64_t row = bi * kB + r, col = bj * kB + c;
        Ts[r * kLd + c] = row < n && col < n ? F[col * n + row] : 0.0;
    }
}

// Block i's matrices (column-major 64 × 64 each, zero outside the block's rows): D = L_ii⁻¹ and
// M = D·L_i,i−1 for the forward triangle, then Dᵀ = (L_iiᵀ)⁻¹ and Dᵀ·L_i+1,iᵀ for the backward one; the
// products a 4 × 4 block of M a thread.
__global__ void __launch_bounds__(kThreads) prepare_kernel(const double *F, int64_t n, double *out)
{
    extern __shared__ double sh[];
    double *Ls = sh, *Is = sh + kB * kLd, *rdiag = Is + kB * kLd;
    const int64_t i = blockIdx.x, nb = (n + kB - 1) / kB;
    const int bi = (int)(n - i * kB < kB ? n - i * kB : kB), tid = threadIdx.x;
    load_tile(F, n, i, i, Ls);
    __syncthreads();
    if (tid < kB)
        rdiag[tid] = tid < bi ? 1.0 / Ls[tid * kLd + tid] : 0.0;
    // [L | I] reduced column by column: at step k, row k of the inverse is scaled and handed out through
    // shared memory (two buffers, one barrier a step), every row below takes its multiple away. A thread
    // holds column c of rows q, q + 4, … (q = tid / 64) in registers.
    const int c = tid % kB, q = tid / kB;
    double w[kB / kQ];
#pragma unroll
    for (int m = 0; m < kB / kQ; m++)
        w[m] = q + kQ * m == c ? 1.0 : 0.0;
    double *row = Is;  // the hand-out buffers, Is's first two rows until the end
    __syncthreads();
#pragma unroll
    for (int k = 0; k < kB; k++) {
        double *buf = row + (k % 2) * kLd;
        if (q == k % kQ) {
            w[k / kQ] *= rdiag[k];
            buf[c] = w[k / kQ];
        }
        __syncthreads();
        const double v = buf[c];
#pragma unroll
        for (int m = 0; m < kB / kQ; m++)
            if (q + kQ * m > k)
                w[m] -= Ls[(q + kQ * m) * kLd + k] * v;
    }
    __syncthreads();
#pragma unroll
    for (int m = 0; m < kB / kQ; m++)
        Is[(q + kQ * m) * kLd + c] = c < bi && q + kQ * m < bi ? w[m] : 0.0;
    __syncthreads();
    double *D = out + i * kPerBlock, *Dt = D + 2 * kB * kB;
    for (int e = tid; e < kB * kB; e += kThreads) {
        const int r = e % kB, cc = e / kB;
        D[cc * kB + r] = Is[r * kLd + cc];   // L_ii⁻¹ (r, cc)
        Dt[cc * kB + r] = Is[cc * kLd + r];  // (L_ii⁻¹)ᵀ (r, cc)
    }
    const int r0 = (tid % 16) * 4, c0 = (tid / 16) * 4;  // this thread's block of M
    for (int side = 0; side < 2; side++) {  // the forward M from L_i,i−1; the backward one from L_i+1,i
        const int64_t other = side == 0 ? i - 1 : i + 1;
        if (other < 0 || other >= nb)
            continue;
        __syncthreads();
        if (side == 0)
            load_tile(F, n, i, other, Ls);  // L_i,i−1 (r, k)
        else
            load_tile(F, n, other, i, Ls);  // L_i+1,i (k, r): M_b(r, cc) = Σ_k Linv(k, r)·L_i+1,i(cc, k)
        __syncthreads();
        double m[4][4] = {};
        for (int k = 0; k < kB; k++) {
            double a[4], b[4];
#pragma unroll
            for (int u = 0; u < 4; u++) {
                a[u] = side == 0 ? Is[(r0 + u) * kLd + k] : Is[k * kLd + r0 + u];
                b[u] = side == 0 ? Ls[k * kLd + c0 + u] : Ls[(c0 + u) * kLd + k];
            }
#pragma unroll
            for (int u = 0; u < 4; u++)
#pragma unroll
                for (int v = 0; v < 4; v++)
                    m[u][v] += a[u] * b[v];
        }
        double *M = side == 0 ? D + kB * kB : Dt + kB * kB;
#pragma unroll
        for (int u = 0; u < 4; u++)
#pragma unroll
            for (int v = 0; v < 4; v++)
                M[(c0 + v) * kB + r0 + u] = m[u][v];
    }
}

// The solution vectors' initial state: ticket and done counts zero, z and t unset.
__global__ void work_init_kernel(double *work, int64_t len)
{
    for (int64_t k = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; k < len; k += (int64_t)gridDim.x * blockDim.x)
        work[k] = k == 0 ? 0.0 : __longlong_as_double((long long)kUnset);
}

// One triangle. upper 0: L·z = S·b (in = b, val = z). upper 1: Lᵀ·t = z (in = z, val = t), then
// x = S·t or x += S·t, and z and t set back to unset. T(r, c) = F[c·n + r] is L below the diagonal and,
// mirrored, Lᵀ above it: block row i reads its tiles the same way in both directions. count: [ticket,
// done], zero at the start, left so. One long function: the chain of a block, ticket to hand-over.
__global__ void __launch_bounds__(kThreads) trsv_kernel(const double *F, int64_t n, const double *DM, const double *s,
                                                        const double *in, double *val, double *reset, double *x,
                                                        int upper, int add, unsigned *count)
{
    __shared__ double red[kQ][kB], red2[kQ][kB];
    __shared__ double rhs[kB];
    __shared__ int ticket;
    const int tid = threadIdx.x, r = tid % kB, q = tid / kB;
    const int64_t nb = (n + kB - 1) / kB;
    if (tid == 0)
        ticket = (int)atomicAdd(&count[0], 1u);
    __syncthreads();
    const int64_t i = upper ? nb - 1 - ticket : ticket, row = i * kB + r;
    const int64_t deps = upper ? nb - 1 - i : i;  // blocks before this one; the last of them through M
    const double *Di = DM + i * kPerBlock + (upper ? 2 * kB * kB : 0), *Mi = Di + kB * kB;
    double dv[kCols], mv[kCols];  // row r of D and M, the columns of quarter q
#pragma unroll
    for (int k = 0; k < kCols; k++) {
        dv[k] = Di[(q * kCols + k) * kB + r];
        mv[k] = deps > 0 ? Mi[(q * kCols + k) * kB + r] : 0.0;
    }
    double v[kCols], acc = 0;
    auto fetch = [&](int64_t d) {  // tile (i, j) of the d-th block this one waits on
        const int64_t j = upper ? nb - 1 - d : d;
#pragma unroll
        for (int k = 0; k < kCols; k++) {
            const int64_t col = j * kB + q * kCols + k;
            v[k] = row < n && col < n ? __ldg(&F[col * n + row]) : 0.0;
        }
    };
    if (deps > 1)
        fetch(0);
    for (int64_t d = 0; d + 1 < deps; d++) {
        double w[kCols], xv[kCols];
#pragma unroll
        for (int k = 0; k < kCols; k++)
            w[k] = v[k];
        if (d + 2 < deps)
            fetch(d + 1);  // the next tile in flight while this one waits
        await_block(val, n, upper ? nb - 1 - d : d, q, xv);
#pragma unroll
        for (int k = 0; k < kCols; k++)
            acc += w[k] * xv[k];
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
    if (deps > 0) {
        double xv[kCols];
        await_block(val, n, upper ? i + 1 : i - 1, q, xv);
#pragma unroll
        for (int k = 0; k < kCols; k++)
            p -= mv[k] * xv[k];
    }
    red2[q][r] = p;
    __syncthreads();
    if (tid < kB && row < n) {
        const double t = red2[0][r] + red2[1][r] + red2[2][r] + red2[3][r];
        store_relaxed(&val[row], t);
        if (upper)
            x[row] = add ? x[row] + s[row] * t : s[row] * t;
    }
    __syncthreads();  // this CTA's reads of val and in are done
    __shared__ int last;
    if (tid == 0) {
        __threadfence();
        last = atomicAdd(&count[1], 1u) == (unsigned)nb - 1;  // every ticket is taken, every block written
    }
    __syncthreads();
    if (last) {
        __threadfence();
        if (reset)
            for (int64_t k = tid; k < 2 * nb * kB; k += kThreads)
                reset[k] = __longlong_as_double((long long)kUnset);
        if (tid == 0) {
            count[0] = 0;
            count[1] = 0;
        }
    }
}

}  // namespace

extern "C" size_t ds_k_trsv_inverse_len(int64_t n)
{
    return (size_t)((n + kB - 1) / kB) * kPerBlock;
}

extern "C" size_t ds_k_trsv_work_len(int64_t n)
{
    return 1 + 2 * (size_t)((n + kB - 1) / kB) * kB;
}

extern "C" cudaError_t ds_k_trsv_work_init(double *work, int64_t n, cudaStream_t stream)
{
    const int64_t len = (int64_t)ds_k_trsv_work_len(n);
    work_init_kernel<<<(unsigned)((len + 255) / 256), 256, 0, stream>>>(work, len);
    return cudaGetLastError();
}

extern "C" cudaError_t ds_k_trsv_prepare(double *F, int64_t n, double *D, cudaStream_t stream)
{
    if (n == 0)
        return cudaSuccess;
    const int64_t nb = (n + kB - 1) / kB;
    cudaError_t e = ds_k_mirror_upper(F, n, stream);  // row-major upper (L, column-major lower) onto the other
    if (e != cudaSuccess)
        return e;
    const int shmem = (2 * kB * kLd + kB) * (int)sizeof(double);
    e = cudaFuncSetAttribute(prepare_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, shmem);
    if (e != cudaSuccess)
        return e;
    prepare_kernel<<<(unsigned)nb, kThreads, shmem, stream>>>(F, n, D);
    return cudaGetLastError();
}

extern "C" cudaError_t ds_k_chol_trsv(const double *F, int64_t n, const double *D, const double *s, const double *b,
                                      double *x, int add, double *work, cudaStream_t stream)
{
    if (n == 0)
        return cudaSuccess;
    const int64_t nb = (n + kB - 1) / kB;
    unsigned *count = (unsigned *)work;
    double *z = work + 1, *t = z + nb * kB;
    trsv_kernel<<<(unsigned)nb, kThreads, 0, stream>>>(F, n, D, s, b, z, NULL, NULL, 0, 0, count);
    trsv_kernel<<<(unsigned)nb, kThreads, 0, stream>>>(F, n, D, s, z, t, z, x, 1, add, count);
    return cudaGetLastError();
}
