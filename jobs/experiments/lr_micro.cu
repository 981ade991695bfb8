// lr_micro.cu: times the options for logreg's two products on 60 000 x 785 f32 X and 10 classes: cuBLAS
// SGEMM (both layouts), cublasLt's heuristic algorithms, padded row strides, two plain kernels, and
// DGEMM. Build: nvcc -O3 -arch=sm_90 lr_micro.cu -lcublasLt -lcublas. Not part of dsolve.
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define CK(x) do { auto e_ = (x); if (e_ != 0) { printf("FAIL %s:%d %s -> %d\n", __FILE__, __LINE__, #x, (int)e_); exit(1);} } while (0)

static cudaStream_t st;
template <typename F> static float timeit(F f, int reps = 30)
{
    for (int i = 0; i < 3; i++) f();
    cudaEvent_t a, b; cudaEventCreate(&a); cudaEventCreate(&b);
    std::vector<float> t;
    for (int r = 0; r < reps; r++) {
        cudaEventRecord(a, st); f(); cudaEventRecord(b, st); cudaEventSynchronize(b);
        float ms; cudaEventElapsedTime(&ms, a, b); t.push_back(ms * 1000);
    }
    std::sort(t.begin(), t.end());
    CK(cudaGetLastError());
    return t[t.size() / 2];
}

__global__ void k_fill(float *x, size_t n, unsigned seed)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        unsigned h = (unsigned)i * 2654435761u ^ seed; h ^= h >> 15; h *= 2246822519u; h ^= h >> 13;
        x[i] = (h & 0xffff) / 65536.0f;
    }
}

// Z[i][k] = sum_j X[i][j] W[j][k]  (W: D x K row-major), warp per row.
template <int K>
__global__ void k_fwd(const float *X, int n, int D, int ldx, const float *W, float *Z)
{
    extern __shared__ float sW[];
    for (int i = threadIdx.x; i < D * K; i += blockDim.x) sW[i] = W[i];
    __syncthreads();
    int lane = threadIdx.x & 31, warp = (blockIdx.x * blockDim.x + threadIdx.x) >> 5, nw = (gridDim.x * blockDim.x) >> 5;
    for (int i = warp; i < n; i += nw) {
        const float *x = X + (size_t)i * ldx;
        float acc[K];
        for (int k = 0; k < K; k++) acc[k] = 0;
        for (int j = lane; j < D; j += 32) {
            float v = x[j];
            for (int k = 0; k < K; k++) acc[k] += v * sW[j * K + k];
        }
        for (int k = 0; k < K; k++)
            for (int o = 16; o; o >>= 1) acc[k] += __shfl_xor_sync(0xffffffffu, acc[k], o);
        if (lane < K) { float r = 0; for (int k = 0; k < K; k++) r = lane == k ? acc[k] : r; Z[(size_t)i * K + lane] = r; }
    }
}

// Partial G over row blocks: thread owns columns j = t + c*blockDim; part[b][j][k].
template <int K, int C>
__global__ void k_grad(const float *X, int n, int D, int ldx, const float *R, int rows_per, float *part)
{
    __shared__ float sR[64 * K];
    float acc[C][K];
    for (int c = 0; c < C; c++) for (int k = 0; k < K; k++) acc[c][k] = 0;
    int r0 = blockIdx.x * rows_per, r1 = min(n, r0 + rows_per);
    for (int t0 = r0; t0 < r1; t0 += 64) {
        int tn = min(64, r1 - t0);
        __syncthreads();
        for (int i = threadIdx.x; i < tn * K; i += blockDim.x) sR[i] = R[(size_t)t0 * K + i];
        __syncthreads();
        for (int i = 0; i < tn; i++) {
            const float *x = X + (size_t)(t0 + i) * ldx;
            for (int c = 0; c < C; c++) {
                int j = threadIdx.x + c * blockDim.x;
                float v = j < D ? x[j] : 0.f;
                for (int k = 0; k < K; k++) acc[c][k] += v * sR[i * K + k];
            }
        }
    }
    for (int c = 0; c < C; c++) {
        int j = threadIdx.x + c * blockDim.x;
        if (j < D) for (int k = 0; k < K; k++) part[((size_t)blockIdx.x * D + j) * K + k] = acc[c][k];
    }
}
__global__ void k_sum(const float *part, int nb, int dk, float *G)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < dk) { float s = 0; for (int b = 0; b < nb; b++) s += part[(size_t)b * dk + i]; G[i] = s; }
}
__global__ void k_tiny(float *x) { if (threadIdx.x == 0) x[0] += 1; }

struct Lt { cublasLtHandle_t h; void *ws; size_t wsb; };

// D = op(A) op(B), column-major, all f32.
static void lt_search(Lt &lt, const char *name, cublasOperation_t ta, cublasOperation_t tb, int m, int nn, int k,
                      const float *A, int lda, const float *B, int ldb, float *C, int ldc)
{
    cublasLtMatmulDesc_t d; CK(cublasLtMatmulDescCreate(&d, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    CK(cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta));
    CK(cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb));
    cublasLtMatrixLayout_t la, lb, lc;
    CK(cublasLtMatrixLayoutCreate(&la, CUDA_R_32F, ta == CUBLAS_OP_N ? m : k, ta == CUBLAS_OP_N ? k : m, lda));
    CK(cublasLtMatrixLayoutCreate(&lb, CUDA_R_32F, tb == CUBLAS_OP_N ? k : nn, tb == CUBLAS_OP_N ? nn : k, ldb));
    CK(cublasLtMatrixLayoutCreate(&lc, CUDA_R_32F, m, nn, ldc));
    cublasLtMatmulPreference_t p; CK(cublasLtMatmulPreferenceCreate(&p));
    CK(cublasLtMatmulPreferenceSetAttribute(p, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &lt.wsb, sizeof lt.wsb));
    cublasLtMatmulHeuristicResult_t res[64]; int got = 0;
    CK(cublasLtMatmulAlgoGetHeuristic(lt.h, d, la, lb, lc, lc, p, 64, res, &got));
    float one = 1, zero = 0, best = 1e30; int bi = -1;
    for (int i = 0; i < got; i++) {
        if (res[i].state != CUBLAS_STATUS_SUCCESS) continue;
        float us = timeit([&] { CK(cublasLtMatmul(lt.h, d, &one, A, la, B, lb, &zero, C, lc, C, lc, &res[i].algo, lt.ws, lt.wsb, st)); }, 15);
        if (i == 0) printf("  %-34s lt heuristic[0] %8.1f us\n", name, us);
        if (us < best) best = us, bi = i;
    }
    printf("  %-34s lt best of %2d     %8.1f us (index %d, ws %zu)\n", name, got, best, bi, bi >= 0 ? res[bi].workspaceSize : 0);
}

int main(int argc, char **argv)
{
    const int n = 60000, D = 785, K = 10;
    CK(cudaStreamCreate(&st));
    cublasHandle_t h; CK(cublasCreate(&h)); CK(cublasSetStream(h, st));
    Lt lt; CK(cublasLtCreate(&lt.h)); lt.wsb = 64 << 20; CK(cudaMalloc(&lt.ws, lt.wsb));
    const int lds[] = {785, 788, 800};
    float *X, *W, *Z, *G, *Rt, *part;
    CK(cudaMalloc(&X, (size_t)n * 800 * 4)); CK(cudaMalloc(&W, D * K * 4)); CK(cudaMalloc(&Z, (size_t)n * K * 4));
    CK(cudaMalloc(&G, D * K * 4)); CK(cudaMalloc(&Rt, (size_t)n * K * 4)); CK(cudaMalloc(&part, (size_t)1024 * D * K * 4));
    k_fill<<<1024, 256, 0, st>>>(X, (size_t)n * 800, 1); k_fill<<<64, 256, 0, st>>>(W, D * K, 2);
    k_fill<<<256, 256, 0, st>>>(Z, (size_t)n * K, 3); k_fill<<<256, 256, 0, st>>>(Rt, (size_t)n * K, 4);
    const float one = 1, zero = 0;
    double bytes = (double)n * D * 4;
    printf("X %d x %d f32 = %.1f MB; us at 4.0 TB/s read: %.1f\n", n, D, bytes / 1e6, bytes / 4.0e12 * 1e6);
    printf("tiny kernel chain of 6: %.1f us\n", timeit([&] { for (int i = 0; i < 6; i++) k_tiny<<<1, 32, 0, st>>>(G); }));
    for (int ld : lds) {
        printf("ld %d\n", ld);
        float f = timeit([&] { CK(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, K, n, D, &one, W, K, X, ld, &zero, Z, K)); });
        float g = timeit([&] { CK(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_T, K, D, n, &one, Z, K, X, ld, &zero, G, K)); });
        // gradient with R class-major (n x K col-major, ld n): G' (D x K col-major) = Xc (D x n) * R'
        float g2 = timeit([&] { CK(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, D, K, n, &one, X, ld, Rt, n, &zero, G, D)); });
        // forward giving Z class-major: Z' (n x K col-major) = Xc^T (n x D) * W' (D x K col-major)
        float f2 = timeit([&] { CK(cublasSgemm(h, CUBLAS_OP_T, CUBLAS_OP_N, n, K, D, &one, X, ld, W, D, &zero, Rt, n)); });
        printf("  sgemm fwd NN %.1f us (%.0f GB/s)  fwd TN(class-major out) %.1f us\n", f, bytes / f / 1e3, f2);
        printf("  sgemm grad NT %.1f us (%.0f GB/s)  grad NN(class-major R) %.1f us\n", g, bytes / g / 1e3, g2);
        lt_search(lt, "fwd NN", CUBLAS_OP_N, CUBLAS_OP_N, K, n, D, W, K, X, ld, Z, K);
        lt_search(lt, "grad NT", CUBLAS_OP_N, CUBLAS_OP_T, K, D, n, Z, K, X, ld, G, K);
        lt_search(lt, "grad NN class-major", CUBLAS_OP_N, CUBLAS_OP_N, D, K, n, X, ld, Rt, n, G, D);
        lt_search(lt, "fwd TN class-major", CUBLAS_OP_T, CUBLAS_OP_N, n, K, D, X, ld, W, D, Rt, n);
        int sms; cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
        for (int blocks : {sms * 2, sms * 4, sms * 8}) {
            float cf = timeit([&] { k_fwd<10><<<blocks, 256, D * K * 4, st>>>(X, n, D, ld, W, Z); });
            int rp = (n + blocks - 1) / blocks;
            float cg = timeit([&] { k_grad<10, 4><<<blocks, 256, 0, st>>>(X, n, D, ld, Z, rp, part);
                                    k_sum<<<(D * K + 255) / 256, 256, 0, st>>>(part, blocks, D * K, G); });
            printf("  custom blocks %4d: fwd %.1f us (%.0f GB/s)  grad+sum %.1f us (%.0f GB/s)\n", blocks, cf, bytes / cf / 1e3, cg, bytes / cg / 1e3);
        }
    }
    // double
    {
        double *Xd, *Wd, *Zd, *Gd; const double o1 = 1, z0 = 0;
        CK(cudaMalloc(&Xd, (size_t)n * D * 8)); CK(cudaMalloc(&Wd, D * K * 8)); CK(cudaMalloc(&Zd, (size_t)n * K * 8)); CK(cudaMalloc(&Gd, D * K * 8));
        CK(cudaMemset(Xd, 0, (size_t)n * D * 8)); CK(cudaMemset(Wd, 0, D * K * 8)); CK(cudaMemset(Zd, 0, (size_t)n * K * 8));
        float f = timeit([&] { CK(cublasDgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, K, n, D, &o1, Wd, K, Xd, D, &z0, Zd, K)); });
        float g = timeit([&] { CK(cublasDgemm(h, CUBLAS_OP_N, CUBLAS_OP_T, K, D, n, &o1, Zd, K, Xd, D, &z0, Gd, K)); });
        printf("f64 ld 785: dgemm fwd %.1f us, grad %.1f us (%.0f / %.0f GB/s)\n", f, g, 2 * bytes / f / 1e3, 2 * bytes / g / 1e3);
    }
    printf("done\n");
    return 0;
}
