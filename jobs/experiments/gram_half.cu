// gram_half.cu: the cholesky's low-precision Gram [X y]ᵀ[X y] (issue 14) with [X y] rounded to TF32
// (dsolve's plan: 128 × 128 tile pairs I ≤ J over ks row chunks, one batched GEMM) against the same
// plan with [X y] rounded to FP16 (as many mantissa bits as TF32, twice the tensor-core rate, half the
// bytes), each column scaled by a power of two; and cuSOLVER's spotrf of the equilibrated n × n G,
// called directly and replayed from a CUDA graph. Checks each G against DGEMM's in double (the error of
// G_ij relative to sqrt(G_ii G_jj)). Times by events, median of REPS after 3 warm-ups. Not part of dsolve.
// Build: nvcc -O3 -std=c++17 -arch=sm_90 gram_half.cu -lcublas -lcusolver -o gram_half
// Run:   ./gram_half [M [N [REPS]]]   (default 100000 1000 20)
#include <cublas_v2.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <cusolverDn.h>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "exp_util.cuh"

static cudaStream_t st;

template <typename F> static double timeit(F f, int reps) { return time_median(st, f, reps, 3); }

// Normal-ish values (a sum of four uniforms), scaled per column by 2^(j % 7 − 3) so that the FP16 scales matter.
__global__ void k_fill_cols(double *x, size_t len, int64_t n, unsigned seed)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < len; i += (size_t)gridDim.x * blockDim.x) {
        double s = 0;
        for (int q = 0; q < 4; q++) {
            unsigned long long h = (4 * i + q + 1) * 0x9E3779B97F4A7C15ull ^ seed;
            h ^= h >> 31; h *= 0xBF58476D1CE4E5B9ull; h ^= h >> 29;
            s += (double)(h >> 11) * 0x1.0p-53 - 0.5;
        }
        x[i] = s * 1.7320508 * ldexp(1.0, (int)(i % n % 7) - 3);
    }
}

__device__ __forceinline__ float to_tf32(float x)
{
    uint32_t u;
    asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(u) : "f"(x));
    return __uint_as_float(u);
}

// A[r·ld + j] = X[r, j] (j < n), y[r] (j = n), 0 beyond, rounded; rows m .. rows − 1 zero. FP16: times sc[j].
template <typename TA>
__global__ void k_round(const double *X, const double *y, int64_t m, int64_t n, int64_t rows, int64_t ld,
                        const float *sc, TA *A)
{
    for (int64_t r = blockIdx.x; r < rows; r += gridDim.x)
        for (int64_t j = threadIdx.x; j < ld; j += blockDim.x) {
            const double v = r >= m || j > n ? 0.0 : j < n ? X[r * n + j] : y[r];
            if constexpr (sizeof(TA) == 4)
                A[r * ld + j] = to_tf32((float)v);
            else
                A[r * ld + j] = __float2half_rn((float)v * sc[j]);
        }
}

// The same, two columns a thread (half2 stores).
__global__ void k_round_h2(const double *X, const double *y, int64_t m, int64_t n, int64_t rows, int64_t ld,
                           const float *sc, __half2 *A)
{
    const int64_t ld2 = ld / 2;
    for (int64_t r = blockIdx.x; r < rows; r += gridDim.x)
        for (int64_t j2 = threadIdx.x; j2 < ld2; j2 += blockDim.x) {
            float v[2];
            for (int q = 0; q < 2; q++) {
                const int64_t j = 2 * j2 + q;
                v[q] = r >= m || j > n ? 0.f : (float)(j < n ? X[r * n + j] : y[r]) * sc[j];
            }
            A[r * ld2 + j2] = __floats2half2_rn(v[0], v[1]);
        }
}

// G[i·ld + j] (double) = Σ_c P_c's (i, j) with i ≤ j taken from the upper tiles, divided by sc_i·sc_j.
__global__ void k_reduce(const float *P, int ks, int64_t ld, const float *sc, double *G)
{
    const int64_t i = blockIdx.y, j = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (j >= ld)
        return;
    const int64_t a = i < j ? i : j, b = i < j ? j : i;  // column-major tiles: row a, column b
    double s = 0;
    for (int c = 0; c < ks; c++)
        s += P[c * ld * ld + b * ld + a];
    G[i * ld + j] = s / ((double)sc[a] * sc[b]);
}

struct plan {
    int64_t t, T, ks, kc, pairs;
};

static plan make_plan(int64_t m, int64_t ld, int64_t t, int64_t ks)
{
    plan p{t, ld / t, ks, (m + ks - 1) / ks, 0};
    p.pairs = p.T * (p.T + 1) / 2 * ks;
    return p;
}

template <typename TA>
static void pointers(const plan &p, int64_t ld, TA *A, float *P, void **dev)
{
    std::vector<void *> h(3 * p.pairs);
    int64_t at = 0;
    for (int64_t c = 0; c < p.ks; c++)
        for (int64_t I = 0; I < p.T; I++)
            for (int64_t J = I; J < p.T; J++, at++) {
                h[at] = A + c * p.kc * ld + I * p.t;
                h[p.pairs + at] = A + c * p.kc * ld + J * p.t;
                h[2 * p.pairs + at] = P + c * ld * ld + I * p.t + J * p.t * ld;
            }
    CK(cudaMemcpy(dev, h.data(), h.size() * sizeof(void *), cudaMemcpyHostToDevice));
}

static double gerr(const std::vector<double> &G, const std::vector<double> &R, int64_t ld, int64_t n1, double *fro)
{
    double mx = 0, f = 0;
    for (int64_t i = 0; i < n1; i++)
        for (int64_t j = 0; j < n1; j++) {
            const double e = fabs(G[i * ld + j] - R[i * ld + j]) / sqrt(R[i * ld + i] * R[j * ld + j]);
            mx = std::max(mx, e);
            f += e * e;
        }
    *fro = sqrt(f);
    return mx;
}

int main(int argc, char **argv)
{
    const int64_t m = argc > 1 ? atoll(argv[1]) : 100000, n = argc > 2 ? atoll(argv[2]) : 1000;
    const int reps = argc > 3 ? atoi(argv[3]) : 20;
    const int64_t n1 = n + 1, ld = (n1 + 127) / 128 * 128;
    cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, 0));
    printf("device %s, %d SMs; X %lld x %lld, ld %lld\n", prop.name, prop.multiProcessorCount, (long long)m,
           (long long)n, (long long)ld);
    CK(cudaStreamCreate(&st));
    cublasHandle_t h;
    CK(cublasCreate(&h));
    CK(cublasSetStream(h, st));
    double *X, *y, *Gd, *G;
    CK(cudaMalloc(&X, m * n * 8));
    CK(cudaMalloc(&y, m * 8));
    CK(cudaMalloc(&Gd, ld * ld * 8));
    CK(cudaMalloc(&G, ld * ld * 8));
    k_fill_cols<<<4096, 256, 0, st>>>(X, m * n, n, 1);
    k_fill_cols<<<256, 256, 0, st>>>(y, m, 1, 2);
    const int64_t maxks = 24, rows = m + 64 * maxks;
    float *A32, *P, *sc, *one_sc;
    __half *A16;
    CK(cudaMalloc(&A32, rows * ld * 4));
    CK(cudaMalloc(&A16, rows * ld * 2));
    CK(cudaMalloc(&P, maxks * ld * ld * 4));
    CK(cudaMalloc(&sc, ld * 4));
    CK(cudaMalloc(&one_sc, ld * 4));
    void **ptr;
    CK(cudaMalloc(&ptr, 3 * 36 * 4 * maxks * sizeof(void *) * 4));
    // reference: [X y]ᵀ[X y] in double by DGEMM (X augmented in an f64 copy)
    double *Ad;
    CK(cudaMalloc(&Ad, m * ld * 8));
    std::vector<float> ones(ld, 1.f), scales(ld, 1.f);
    for (int64_t j = 0; j < ld; j++)
        scales[j] = j < n ? ldexpf(1.f, 3 - (int)(j % 7)) : 1.f;  // the fill's column scales undone
    CK(cudaMemcpy(one_sc, ones.data(), ld * 4, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(sc, scales.data(), ld * 4, cudaMemcpyHostToDevice));
    std::vector<double> hx(m * n), hy(m), had(m * ld, 0.0);
    CK(cudaMemcpy(hx.data(), X, m * n * 8, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(hy.data(), y, m * 8, cudaMemcpyDeviceToHost));
    for (int64_t r = 0; r < m; r++) {
        for (int64_t j = 0; j < n; j++)
            had[r * ld + j] = hx[r * n + j];
        had[r * ld + n] = hy[r];
    }
    CK(cudaMemcpy(Ad, had.data(), m * ld * 8, cudaMemcpyHostToDevice));
    const double d1 = 1, d0 = 0;
    CK(cublasDgemm(h, CUBLAS_OP_N, CUBLAS_OP_T, (int)ld, (int)ld, (int)m, &d1, Ad, (int)ld, Ad, (int)ld, &d0, Gd,
                   (int)ld));
    std::vector<double> R(ld * ld), Gh(ld * ld);
    CK(cudaMemcpy(R.data(), Gd, ld * ld * 8, cudaMemcpyDeviceToHost));
    const float f1 = 1, f0 = 0;
    const double flops = 2.0 * m * n1 * n1 / 2;
    struct cfg {
        const char *name;
        int half;
        int64_t t, ks;
    } cfgs[] = {{"tf32 t128 ks11", 0, 128, 11}, {"tf32 t128 ks16", 0, 128, 16}, {"fp16 t128 ks11", 1, 128, 11},
                {"fp16 t128 ks16", 1, 128, 16}, {"fp16 t256 ks11", 1, 256, 11}, {"fp16 t256 ks16", 1, 256, 16},
                {"fp16 t256 ks22", 1, 256, 22}, {"fp16 t128 ks8", 1, 128, 8},   {"fp16 t512 ks16", 1, 512, 16}};
    for (const cfg &c : cfgs) {
        const plan p = make_plan(m, ld, c.t, c.ks);
        const int64_t rr = p.ks * p.kc;
        if (c.half)
            pointers(p, ld, A16, P, ptr);
        else
            pointers(p, ld, A32, P, ptr);
        const float *s = c.half ? sc : one_sc;
        auto round = [&] {
            if (c.half)
                k_round_h2<<<65535, 256, 0, st>>>(X, y, m, n, rr, ld, s, (__half2 *)A16);
            else
                k_round<float><<<65535, 256, 0, st>>>(X, y, m, n, rr, ld, s, A32);
        };
        auto gemm = [&] {
            CK(cublasGemmBatchedEx(h, CUBLAS_OP_N, CUBLAS_OP_T, (int)p.t, (int)p.t, (int)p.kc, &f1, ptr,
                                   c.half ? CUDA_R_16F : CUDA_R_32F, (int)ld, ptr + p.pairs,
                                   c.half ? CUDA_R_16F : CUDA_R_32F, (int)ld, &f0, ptr + 2 * p.pairs, CUDA_R_32F,
                                   (int)ld, (int)p.pairs, c.half ? CUBLAS_COMPUTE_32F : CUBLAS_COMPUTE_32F_FAST_TF32,
                                   CUBLAS_GEMM_DEFAULT));
        };
        auto reduce = [&] { k_reduce<<<dim3((unsigned)(ld / 128), (unsigned)ld), 128, 0, st>>>(P, (int)p.ks, ld, s, G); };
        const double tr = timeit(round, reps), tg = timeit(gemm, reps), tred = timeit(reduce, reps);
        const double tall = timeit([&] { round(); gemm(); reduce(); }, reps);
        CK(cudaStreamSynchronize(st));
        CK(cudaMemcpy(Gh.data(), G, ld * ld * 8, cudaMemcpyDeviceToHost));
        double fro, mx = gerr(Gh, R, ld, n1, &fro);
        printf("%-16s round %7.1f us  gemm %7.1f us (%5.1f TFLOP/s useful)  reduce %5.1f us  all %7.1f us  "
               "err max %.2e fro %.2e\n",
               c.name, tr * 1e6, tg * 1e6, flops / tg * 1e-12, tred * 1e6, tall * 1e6, mx, fro);
    }
    // spotrf of the equilibrated G (float), direct and from a graph; the copy of G before each in both
    cusolverDnHandle_t sh;
    CK(cusolverDnCreate(&sh));
    CK(cusolverDnSetStream(sh, st));
    for (int64_t nn : {n, (int64_t)500, (int64_t)2000}) {
        if (nn > n)
            continue;
        std::vector<float> S(nn * nn);
        for (int64_t i = 0; i < nn; i++)
            for (int64_t j = 0; j < nn; j++)
                S[i * nn + j] = (float)(R[i * ld + j] / sqrt(R[i * ld + i] * R[j * ld + j]));
        float *Sd, *F, *work;
        int *info, lwork = 0;
        CK(cudaMalloc(&Sd, nn * nn * 4));
        CK(cudaMalloc(&F, nn * nn * 4));
        CK(cudaMalloc(&info, 4));
        CK(cudaMemcpy(Sd, S.data(), nn * nn * 4, cudaMemcpyHostToDevice));
        CK(cusolverDnSpotrf_bufferSize(sh, CUBLAS_FILL_MODE_LOWER, (int)nn, F, (int)nn, &lwork));
        CK(cudaMalloc(&work, (size_t)lwork * 4));
        auto fact = [&] {
            CK(cudaMemcpyAsync(F, Sd, nn * nn * 4, cudaMemcpyDeviceToDevice, st));
            CK(cusolverDnSpotrf(sh, CUBLAS_FILL_MODE_LOWER, (int)nn, F, (int)nn, work, lwork, info));
        };
        const double td = timeit(fact, reps);
        const double tc = timeit([&] { CK(cudaMemcpyAsync(F, Sd, nn * nn * 4, cudaMemcpyDeviceToDevice, st)); }, reps);
        cudaGraph_t g;
        cudaGraphExec_t ge;
        CK(cudaStreamBeginCapture(st, cudaStreamCaptureModeGlobal));
        fact();
        CK(cudaStreamEndCapture(st, &g));
        CK(cudaGraphInstantiate(&ge, g, 0));
        size_t nodes = 0;
        CK(cudaGraphGetNodes(g, NULL, &nodes));
        const double tg = timeit([&] { CK(cudaGraphLaunch(ge, st)); }, reps);
        int hinfo = -1;
        CK(cudaMemcpy(&hinfo, info, 4, cudaMemcpyDeviceToHost));
        printf("spotrf n=%lld: direct %.1f us, graph (%zu nodes) %.1f us, the copy alone %.1f us, info %d\n",
               (long long)nn, td * 1e6, nodes, tg * 1e6, tc * 1e6, hinfo);
        cudaFree(Sd);
        cudaFree(F);
        cudaFree(work);
        cudaFree(info);
    }
    return 0;
}
