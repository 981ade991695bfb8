// gram_emu.cu: does cuBLAS's FP64 emulation on integer tensor cores (CUBLAS_COMPUTE_64F_EMULATED_FIXEDPOINT,
// CUDA 13) run on this GPU, and would it make XᵀX of a row-major m × n f64 X (the Gram route's setup,
// issue 14) faster than native DGEMM at the same accuracy? Times, by events (median of REPS after 3
// warm-ups), on one stream: DGEMM 8192³ native and emulated; XᵀX as one GEMM of the whole n × n, native
// and emulated (eager strategy, dynamic mantissa), on X with columns of one scale and of six scales
// (1e-3 .. 1e2). Each emulated G is compared with the native one: max |ΔG_ij| / √(G_ii·G_jj).
// Not part of dsolve.
// Build: nvcc -O3 -std=c++17 -arch=sm_90 gram_emu.cu -lcublas -o gram_emu
// Run:   ./gram_emu [M [N [REPS]]]   (default 100000 1000 10)
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "exp_util.cuh"

static cudaStream_t st;

template <typename F> static double timeit(F f, int reps) { return time_median(st, f, reps, 3); }

// Column j of the row-major X (stride n) times 10^(j % 6 − 3).
__global__ void k_scale_cols(double *x, size_t len, int n)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < len; i += (size_t)gridDim.x * blockDim.x)
        x[i] *= pow(10.0, (double)((int)(i % n) % 6 - 3));
}

// C = op(A)·op(B) in column-major, the compute type given (the handle's math mode set for emulation).
static cublasStatus_t gemm(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int M, int N, int K,
                           const double *A, int lda, const double *B, int ldb, double *C, int ldc,
                           cublasComputeType_t ct)
{
    const double one = 1, zero = 0;
    return cublasGemmEx(h, ta, tb, M, N, K, &one, A, CUDA_R_64F, lda, B, CUDA_R_64F, ldb, &zero, C, CUDA_R_64F,
                        ldc, ct, CUBLAS_GEMM_DEFAULT);
}

// max |A_ij − B_ij| / √(B_ii·B_jj) over an n × n symmetric pair (host copies)
static double sym_err(const std::vector<double> &a, const std::vector<double> &b, int n)
{
    double e = 0;
    for (int j = 0; j < n; j++)
        for (int i = 0; i < n; i++) {
            const double s = std::sqrt(b[(size_t)i * n + i] * b[(size_t)j * n + j]);
            e = std::fmax(e, std::fabs(a[(size_t)j * n + i] - b[(size_t)j * n + i]) / s);
        }
    return e;
}

int main(int argc, char **argv)
{
    const int m = argc > 1 ? atoi(argv[1]) : 100000, n = argc > 2 ? atoi(argv[2]) : 1000;
    const int reps = argc > 3 ? atoi(argv[3]) : 10;
    cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, 0));
    int rt = 0, blas_ver = 0;
    CK(cudaRuntimeGetVersion(&rt));
    CK(cudaStreamCreate(&st));
    cublasHandle_t nat, emu;
    CK(cublasCreate(&nat));
    CK(cublasCreate(&emu));
    CK(cublasGetVersion(nat, &blas_ver));
    CK(cublasSetStream(nat, st));
    CK(cublasSetStream(emu, st));
    printf("gram_emu: %s (sm_%d%d), runtime %d, cuBLAS %d; X %d x %d\n", prop.name, prop.major, prop.minor, rt,
           blas_ver, m, n);
    const cublasStatus_t sm = cublasSetMathMode(emu, CUBLAS_FP64_EMULATED_FIXEDPOINT_MATH);
    const cublasStatus_t ss = cublasSetEmulationStrategy(emu, CUBLAS_EMULATION_STRATEGY_EAGER);
    printf("set math mode: %d, set eager strategy: %d\n", (int)sm, (int)ss);

    {  // the ceiling and the emulated 8192³
        const int N = 8192;
        double *A, *B, *C, *D;
        CK(cudaMalloc(&A, (size_t)N * N * 8));
        CK(cudaMalloc(&B, (size_t)N * N * 8));
        CK(cudaMalloc(&C, (size_t)N * N * 8));
        CK(cudaMalloc(&D, (size_t)N * N * 8));
        k_fill<<<1024, 256, 0, st>>>(A, (size_t)N * N, 1);
        k_fill<<<1024, 256, 0, st>>>(B, (size_t)N * N, 2);
        const double fl = 2.0 * N * N * (double)N;
        const double tn = timeit([&] { CK(gemm(nat, CUBLAS_OP_N, CUBLAS_OP_N, N, N, N, A, N, B, N, C, N,
                                               CUBLAS_COMPUTE_64F)); }, 5);
        const cublasStatus_t e = gemm(emu, CUBLAS_OP_N, CUBLAS_OP_N, N, N, N, A, N, B, N, D, N,
                                      CUBLAS_COMPUTE_64F_EMULATED_FIXEDPOINT);
        printf("DGEMM 8192^3 native: %.3f ms, %.1f TFLOP/s; emulated call status %d\n", tn * 1e3, fl / tn * 1e-12,
               (int)e);
        if (e == CUBLAS_STATUS_SUCCESS) {
            const double te = timeit([&] { CK(gemm(emu, CUBLAS_OP_N, CUBLAS_OP_N, N, N, N, A, N, B, N, D, N,
                                                   CUBLAS_COMPUTE_64F_EMULATED_FIXEDPOINT)); }, 5);
            std::vector<double> c((size_t)N * 64), d((size_t)N * 64);
            CK(cudaMemcpy(c.data(), C, c.size() * 8, cudaMemcpyDeviceToHost));
            CK(cudaMemcpy(d.data(), D, d.size() * 8, cudaMemcpyDeviceToHost));
            double err = 0, mx = 0;
            for (size_t i = 0; i < c.size(); i++) {
                err = std::fmax(err, std::fabs(c[i] - d[i]));
                mx = std::fmax(mx, std::fabs(c[i]));
            }
            printf("DGEMM 8192^3 emulated: %.3f ms, %.1f TFLOP/s; max |diff| %.3g (max |C| %.3g, first 64 cols)\n",
                   te * 1e3, fl / te * 1e-12, err, mx);
        }
        CK(cudaFree(A)); CK(cudaFree(B)); CK(cudaFree(C)); CK(cudaFree(D));
    }

    double *X, *Gn, *Ge;
    CK(cudaMalloc(&X, (size_t)m * n * 8));
    CK(cudaMalloc(&Gn, (size_t)n * n * 8));
    CK(cudaMalloc(&Ge, (size_t)n * n * 8));
    const double useful = (double)m * n * (n + 1);
    for (int scaled = 0; scaled < 2; scaled++) {
        k_fill<<<1024, 256, 0, st>>>(X, (size_t)m * n, 7);
        if (scaled)
            k_scale_cols<<<1024, 256, 0, st>>>(X, (size_t)m * n, n);
        // row-major X is the column-major n × m matrix A = Xᵀ: XᵀX = A·Aᵀ
        auto run = [&](cublasHandle_t h, double *G, cublasComputeType_t ct) {
            return gemm(h, CUBLAS_OP_N, CUBLAS_OP_T, n, n, m, X, n, X, n, G, n, ct);
        };
        const double tn = timeit([&] { CK(run(nat, Gn, CUBLAS_COMPUTE_64F)); }, reps);
        printf("X'X %s columns, whole GEMM native: %.3f ms (useful %.1f TFLOP/s)\n", scaled ? "six-scale" : "uniform",
               tn * 1e3, useful / tn * 1e-12);
        const cublasStatus_t e = run(emu, Ge, CUBLAS_COMPUTE_64F_EMULATED_FIXEDPOINT);
        if (e != CUBLAS_STATUS_SUCCESS) {
            printf("  emulated: status %d\n", (int)e);
            continue;
        }
        const double te = timeit([&] { CK(run(emu, Ge, CUBLAS_COMPUTE_64F_EMULATED_FIXEDPOINT)); }, reps);
        std::vector<double> gn((size_t)n * n), ge((size_t)n * n);
        CK(cudaMemcpy(gn.data(), Gn, gn.size() * 8, cudaMemcpyDeviceToHost));
        CK(cudaMemcpy(ge.data(), Ge, ge.size() * 8, cudaMemcpyDeviceToHost));
        printf("  emulated: %.3f ms (useful %.1f TFLOP/s), max |dG|/sqrt(Gii Gjj) %.3g\n", te * 1e3,
               useful / te * 1e-12, sym_err(ge, gn, n));
    }
    CK(cudaFree(X)); CK(cudaFree(Gn)); CK(cudaFree(Ge));
    CK(cublasDestroy(nat)); CK(cublasDestroy(emu));
    return 0;
}
