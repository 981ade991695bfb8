// syrk_dmma.cu: XᵀX of a row-major m × n f64 X (the Gram route's setup, issue 14) by our own FP64
// tensor-core kernel (mma.sync m16n8k4 / k8 / k16 .f64, cp.async pipeline, 128 × 128 tiles of G's lower
// triangle, split over row ranges into partials summed by a second kernel), against cuBLAS in the same
// run: the batched 128 × 128 GEMMs of dsolve's uniform tiled plan (16 row chunks), one DGEMM of the whole
// n × n, DSYRK, and DGEMM 8192³ as the ceiling. Checks every G against the whole DGEMM's. Times by
// events, median of REPS after 3 warm-ups. Not part of dsolve.
// Build: nvcc -O3 -std=c++17 -arch=sm_90 syrk_dmma.cu -lcublas -o syrk_dmma
// Run:   ./syrk_dmma [M [N [REPS]]]   (default 100000 1000 20; N even)
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "exp_util.cuh"

static cudaStream_t st;

template <typename F> static double timeit(F f, int reps) { return time_median(st, f, reps, 3); }

constexpr int BT = 128;       // G's tile
constexpr int LDS = BT + 4;   // a shared row: 4 doubles of padding make the fragment loads conflict-free
constexpr int THREADS = 256;  // 8 warps, 2 × 4, each 64 × 32 of the tile

__device__ __forceinline__ void cp16(double *dst, const double *src, int bytes)
{
    unsigned s = (unsigned)__cvta_generic_to_shared(dst);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(s), "l"(src), "r"(bytes));
}

template <int KM> __device__ __forceinline__ void dmma(double (&c)[4], const double *a, const double *b);
template <> __device__ __forceinline__ void dmma<4>(double (&c)[4], const double *a, const double *b)
{
    asm volatile("mma.sync.aligned.m16n8k4.row.col.f64.f64.f64.f64 {%0,%1,%2,%3}, {%4,%5}, {%6}, {%0,%1,%2,%3};\n"
                 : "+d"(c[0]), "+d"(c[1]), "+d"(c[2]), "+d"(c[3])
                 : "d"(a[0]), "d"(a[1]), "d"(b[0]));
}
template <> __device__ __forceinline__ void dmma<8>(double (&c)[4], const double *a, const double *b)
{
    asm volatile("mma.sync.aligned.m16n8k8.row.col.f64.f64.f64.f64 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                 "{%0,%1,%2,%3};\n"
                 : "+d"(c[0]), "+d"(c[1]), "+d"(c[2]), "+d"(c[3])
                 : "d"(a[0]), "d"(a[1]), "d"(a[2]), "d"(a[3]), "d"(b[0]), "d"(b[1]));
}
template <> __device__ __forceinline__ void dmma<16>(double (&c)[4], const double *a, const double *b)
{
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f64.f64.f64.f64 {%0,%1,%2,%3}, {%4,%5,%6,%7,%8,%9,%10,%11}, "
                 "{%12,%13,%14,%15}, {%0,%1,%2,%3};\n"
                 : "+d"(c[0]), "+d"(c[1]), "+d"(c[2]), "+d"(c[3])
                 : "d"(a[0]), "d"(a[1]), "d"(a[2]), "d"(a[3]), "d"(a[4]), "d"(a[5]), "d"(a[6]), "d"(a[7]),
                   "d"(b[0]), "d"(b[1]), "d"(b[2]), "d"(b[3]));
}

// One CTA: tile t of G's lower triangle (blockIdx.x, tiles numbered row by row) over rows
// [split·rps, (split+1)·rps) (blockIdx.y) into P[split][t] (128 × 128, row-major, tile-local). A diagonal
// tile loads X's block once, and its warps wholly above the diagonal skip their products (the reduction
// reads a diagonal tile's lower half only).
template <int BK, int STAGES, int KM>
__global__ __launch_bounds__(THREADS, 1) void syrk_kernel(const double *__restrict__ X, int64_t m, int n,
                                                           int64_t rps, double *__restrict__ P, int ntiles)
{
    extern __shared__ __align__(16) double sm[];
    const int t = blockIdx.x, split = blockIdx.y;
    int bi = 0;
    while ((bi + 1) * (bi + 2) / 2 <= t)
        bi++;
    const int bj = t - bi * (bi + 1) / 2;
    const bool diag = bi == bj;
    const int i0 = bi * BT, j0 = bj * BT;
    const int64_t r0 = split * rps, r1 = min(m, r0 + rps);
    const int kt_n = r0 < r1 ? (int)((r1 - r0 + BK - 1) / BK) : 0;
    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, gid = lane >> 2, tig = lane & 3;
    const int wm = warp >> 2, wn = warp & 3;
    const bool idle = diag && wn * 32 >= wm * 64 + 64;  // wholly above the diagonal

    auto As = [&](int s) { return sm + (size_t)s * 2 * BK * LDS; };
    auto Bs = [&](int s) { return diag ? As(s) : As(s) + BK * LDS; };
    auto load = [&](int s, int kt) {
        const int64_t rb = r0 + (int64_t)kt * BK;
        double *a = As(s), *b = As(s) + BK * LDS;
        for (int c = tid; c < BK * (BT / 2); c += THREADS) {
            const int lr = c / (BT / 2), lc = (c % (BT / 2)) * 2;
            const int64_t row = rb + lr;
            const bool rok = row < r1;
            const int ca = i0 + lc, cb = j0 + lc;
            cp16(a + lr * LDS + lc, rok && ca < n ? X + row * n + ca : X, rok && ca < n ? 16 : 0);
            if (!diag)
                cp16(b + lr * LDS + lc, rok && cb < n ? X + row * n + cb : X, rok && cb < n ? 16 : 0);
        }
    };

    double acc[4][4][4];
#pragma unroll
    for (int i = 0; i < 4; i++)
#pragma unroll
        for (int j = 0; j < 4; j++)
#pragma unroll
            for (int k = 0; k < 4; k++)
                acc[i][j][k] = 0.0;

#pragma unroll
    for (int s = 0; s < STAGES - 1; s++) {
        if (s < kt_n)
            load(s, s);
        asm volatile("cp.async.commit_group;\n" ::);
    }
    for (int kt = 0; kt < kt_n; kt++) {
        asm volatile("cp.async.wait_group %0;\n" ::"n"(STAGES - 2));
        __syncthreads();
        const int nk = kt + STAGES - 1;
        if (nk < kt_n)
            load(nk % STAGES, nk);
        asm volatile("cp.async.commit_group;\n" ::);
        if (idle)
            continue;
        const double *a = As(kt % STAGES) + wm * 64 + gid, *b = Bs(kt % STAGES) + wn * 32 + gid;
#pragma unroll
        for (int kk = 0; kk < BK; kk += KM) {
            // A's fragments one 16-row slice at a time (k16's 8 a thread for all four would not fit the
            // registers beside the 64 accumulators)
            double af[KM / 2], bf[4][KM / 4];
#pragma unroll
            for (int ni = 0; ni < 4; ni++)
#pragma unroll
                for (int v = 0; v < KM / 4; v++)  // row tig + 4·v, column gid
                    bf[ni][v] = b[(kk + tig + 4 * v) * LDS + ni * 8];
#pragma unroll
            for (int mi = 0; mi < 4; mi++) {
#pragma unroll
                for (int v = 0; v < KM / 2; v++)  // row gid + 8·(v % 2), column tig + 4·(v / 2)
                    af[v] = a[(kk + tig + 4 * (v / 2)) * LDS + mi * 16 + 8 * (v % 2)];
#pragma unroll
                for (int ni = 0; ni < 4; ni++)
                    dmma<KM>(acc[mi][ni], af, bf[ni]);
            }
        }
    }
    asm volatile("cp.async.wait_group 0;\n" ::);
    if (idle)
        return;
    double *out = P + ((size_t)split * ntiles + t) * BT * BT;
#pragma unroll
    for (int mi = 0; mi < 4; mi++)
#pragma unroll
        for (int ni = 0; ni < 4; ni++)
#pragma unroll
            for (int h = 0; h < 2; h++) {
                const int row = wm * 64 + mi * 16 + gid + 8 * h, col = wn * 32 + ni * 8 + 2 * tig;
                *reinterpret_cast<double2 *>(out + row * BT + col) = make_double2(acc[mi][ni][2 * h], acc[mi][ni][2 * h + 1]);
            }
}

// G (n × n, row-major, full) = Σ over the splits of the lower tiles' partials.
__global__ void reduce_kernel(const double *__restrict__ P, int ks, int ntiles, int n, double *__restrict__ G)
{
    const int j = blockIdx.x * 32 + threadIdx.x, i = blockIdx.y * 8 + threadIdx.y;
    if (i >= n || j >= n)
        return;
    const int I = max(i, j), J = min(i, j), bi = I / BT, bj = J / BT;
    const size_t off = ((size_t)(bi * (bi + 1) / 2 + bj) * BT + I % BT) * BT + J % BT;
    double s = 0.0;
    for (int p = 0; p < ks; p++)
        s += P[(size_t)p * ntiles * BT * BT + off];
    G[(size_t)i * n + j] = s;
}

static double max_rel(const std::vector<double> &a, const std::vector<double> &b, int n)
{
    double worst = 0.0;
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++) {
            const double scale = std::sqrt(std::fabs(b[(size_t)i * n + i]) * std::fabs(b[(size_t)j * n + j]));
            worst = std::max(worst, std::fabs(a[(size_t)i * n + j] - b[(size_t)i * n + j]) / (scale > 0 ? scale : 1.0));
        }
    return worst;
}

template <int BK, int STAGES, int KM>
static void run_ours(const double *dX, int64_t m, int n, int ks, double *dP, double *dG, int reps, double useful,
                     const std::vector<double> &ref)
{
    const int T = (n + BT - 1) / BT, ntiles = T * (T + 1) / 2;
    const int64_t rps = ((m + ks - 1) / ks + BK - 1) / BK * BK;
    const size_t smem = (size_t)STAGES * 2 * BK * LDS * sizeof(double);
    auto kern = syrk_kernel<BK, STAGES, KM>;
    CK(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
    dim3 grid(ntiles, ks), rgrid((n + 31) / 32, (n + 7) / 8), rblk(32, 8);
    auto go = [&] {
        kern<<<grid, THREADS, smem, st>>>(dX, m, n, rps, dP, ntiles);
        reduce_kernel<<<rgrid, rblk, 0, st>>>(dP, ks, ntiles, n, dG);
    };
    const double t = timeit(go, reps);
    const double tk = timeit([&] { kern<<<grid, THREADS, smem, st>>>(dX, m, n, rps, dP, ntiles); }, reps);
    std::vector<double> g((size_t)n * n);
    CK(cudaMemcpy(g.data(), dG, g.size() * sizeof(double), cudaMemcpyDeviceToHost));
    const double computed = 2.0 * ntiles * BT * BT * (double)m;
    printf("{\"what\":\"dmma\",\"bk\":%d,\"stages\":%d,\"km\":%d,\"ks\":%d,\"ctas\":%d,\"seconds\":%.6e,\"kernel_seconds\":%.6e,"
           "\"useful_tflops\":%.2f,\"kernel_tflops\":%.2f,\"max_rel_err\":%.2e}\n",
           BK, STAGES, KM, ks, ntiles * ks, t, tk, useful / t * 1e-12, computed / tk * 1e-12, max_rel(g, ref, n));
    fflush(stdout);
}

int main(int argc, char **argv)
{
    const int64_t m = argc > 1 ? atoll(argv[1]) : 100000;
    const int n = argc > 2 ? atoi(argv[2]) : 1000;
    const int reps = argc > 3 ? atoi(argv[3]) : 20;
    if (n % 2 || n < BT || m < 1) {
        printf("syrk_dmma: N even and at least %d, M positive\n", BT);
        return 2;
    }
    CK(cudaStreamCreate(&st));
    cublasHandle_t h;
    CK(cublasCreate(&h));
    CK(cublasSetStream(h, st));
    double *dX, *dG, *dR, *dP;
    const int T = (n + BT - 1) / BT, ntiles = T * (T + 1) / 2, ks_max = 48;
    CK(cudaMalloc(&dX, (size_t)m * n * sizeof(double)));
    CK(cudaMalloc(&dG, (size_t)n * n * sizeof(double)));
    CK(cudaMalloc(&dR, (size_t)n * n * sizeof(double)));
    CK(cudaMalloc(&dP, (size_t)ks_max * ntiles * BT * BT * sizeof(double)));
    k_fill<<<1024, 256, 0, st>>>(dX, (size_t)m * n, 12345u);
    CK(cudaStreamSynchronize(st));
    const double one = 1.0, zero = 0.0, useful = (double)n * (n + 1) * (double)m;

    // The reference: one DGEMM of the whole G (X row-major is Xᵀ column-major, ld n).
    const double tg = timeit([&] { CK(cublasDgemm(h, CUBLAS_OP_N, CUBLAS_OP_T, n, n, (int)m, &one, dX, n, dX, n, &zero, dR, n)); }, reps);
    std::vector<double> ref((size_t)n * n);
    CK(cudaMemcpy(ref.data(), dR, ref.size() * sizeof(double), cudaMemcpyDeviceToHost));
    printf("{\"what\":\"cublas_dgemm_full\",\"m\":%lld,\"n\":%d,\"seconds\":%.6e,\"tflops\":%.2f,\"useful_tflops\":%.2f}\n",
           (long long)m, n, tg, 2.0 * n * n * m / tg * 1e-12, useful / tg * 1e-12);

    const double ts = timeit([&] { CK(cublasDsyrk(h, CUBLAS_FILL_MODE_LOWER, CUBLAS_OP_N, n, (int)m, &one, dX, n, &zero, dG, n)); }, reps);
    printf("{\"what\":\"cublas_dsyrk\",\"seconds\":%.6e,\"useful_tflops\":%.2f}\n", ts, useful / ts * 1e-12);

    // dsolve's uniform tiled plan: every tile 128 × 128 (the last starts at n − 128), 16 row chunks, one
    // batched GEMM, then the same reduction (it reads overlapping tiles as if they did not overlap: timed, not checked).
    {
        const int ks = 16;
        const int64_t chunk = (m + ks - 1) / ks;
        std::vector<const double *> A, B;
        std::vector<double *> C;
        for (int p = 0; p < ks; p++) {
            const int64_t r0 = p * chunk;
            for (int bi = 0; bi < T; bi++)
                for (int bj = 0; bj <= bi; bj++) {
                    const int ci = std::min(bi * BT, n - BT), cj = std::min(bj * BT, n - BT);
                    A.push_back(dX + r0 * n + cj);
                    B.push_back(dX + r0 * n + ci);
                    C.push_back(dP + ((size_t)p * ntiles + bi * (bi + 1) / 2 + bj) * BT * BT);
                }
        }
        const int cnt = (int)A.size();
        const int64_t kc = std::min<int64_t>(chunk, m - (ks - 1) * chunk);  // every chunk as long as the last
        void *dptr;
        CK(cudaMalloc(&dptr, 3 * sizeof(void *) * cnt));
        CK(cudaMemcpy(dptr, A.data(), sizeof(void *) * cnt, cudaMemcpyHostToDevice));
        CK(cudaMemcpy((void **)dptr + cnt, B.data(), sizeof(void *) * cnt, cudaMemcpyHostToDevice));
        CK(cudaMemcpy((void **)dptr + 2 * cnt, C.data(), sizeof(void *) * cnt, cudaMemcpyHostToDevice));
        const double **dA = (const double **)dptr, **dB = dA + cnt;
        double **dC = (double **)dptr + 2 * cnt;
        dim3 rgrid((n + 31) / 32, (n + 7) / 8), rblk(32, 8);
        const double tb = timeit([&] {
            CK(cublasDgemmBatched(h, CUBLAS_OP_N, CUBLAS_OP_T, BT, BT, (int)kc, &one, dA, n, dB, n, &zero, dC, BT, cnt));
            reduce_kernel<<<rgrid, rblk, 0, st>>>(dP, ks, ntiles, n, dG);
        }, reps);
        printf("{\"what\":\"cublas_batched_tiles\",\"gemms\":%d,\"k\":%lld,\"seconds\":%.6e,\"useful_tflops\":%.2f,\"kernel_tflops\":%.2f}\n",
               cnt, (long long)kc, tb, useful / tb * 1e-12, 2.0 * cnt * BT * BT * (double)kc / tb * 1e-12);
        CK(cudaFree(dptr));
    }

    for (int ks : {11, 22, 33})
        run_ours<16, 4, 4>(dX, m, n, ks, dP, dG, reps, useful, ref);
    for (int ks : {11, 22})
        run_ours<16, 4, 8>(dX, m, n, ks, dP, dG, reps, useful, ref);
    for (int ks : {11, 22})
        run_ours<32, 3, 8>(dX, m, n, ks, dP, dG, reps, useful, ref);
    for (int ks : {11, 22})
        run_ours<8, 6, 8>(dX, m, n, ks, dP, dG, reps, useful, ref);
    for (int ks : {11, 22})
        run_ours<16, 4, 16>(dX, m, n, ks, dP, dG, reps, useful, ref);
    for (int ks : {11, 22})
        run_ours<32, 3, 16>(dX, m, n, ks, dP, dG, reps, useful, ref);

    {  // the ceiling
        const int N = 8192;
        double *a, *c;
        CK(cudaMalloc(&a, (size_t)N * N * sizeof(double)));
        CK(cudaMalloc(&c, (size_t)N * N * sizeof(double)));
        k_fill<<<1024, 256, 0, st>>>(a, (size_t)N * N, 7u);
        const double t8 = timeit([&] { CK(cublasDgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, N, N, N, &one, a, N, a, N, &zero, c, N)); }, 5);
        printf("{\"what\":\"cublas_dgemm_8192\",\"seconds\":%.6e,\"tflops\":%.2f}\n", t8, 2.0 * N * N * (double)N / t8 * 1e-12);
        CK(cudaFree(a));
        CK(cudaFree(c));
    }
    return 0;
}
