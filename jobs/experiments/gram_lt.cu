// gram_lt.cu: can a cuBLASLt algorithm run the Gram route's tile GEMMs (XᵀX of a row-major m × n f64 X,
// 128 × 128 tiles on and above the diagonal, the last tile starting at n − 128) faster than the
// cublasGemmBatchedEx call dsolve makes (issue 14: XᵀX at 62 % of the DGEMM rate on an H200)?
// Times, in one run: dsolve's plan (one pointer-array batched GEMM of every tile and row chunk) for ks
// row chunks; cuBLASLt, one strided-batched matmul a tile (its ks row chunks the batch) spread over S
// streams, for each algorithm its heuristic offers (tile, stages, split-K and cluster shape printed); the
// same with cuBLASLt's split-K alone on whole columns (ks = 1); the heuristic's first algorithm with a
// 64 × 64 CTA tile and 16 × 4 stages set by hand; cuBLAS DGEMM 8192³ as the ceiling. Every
// plan's G (the partials summed by a small kernel) is checked against dsolve's plan's.
// Times by events, median of REPS after 2 warm-ups. Not part of dsolve.
// Build: nvcc -O3 -std=c++17 -arch=sm_90 gram_lt.cu -lcublasLt -lcublas -o gram_lt
// Run:   ./gram_lt [M [N [REPS]]]   (default 100000 1000 10)
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "exp_util.cuh"

constexpr int T = 128;
constexpr int NS = 8;
static cudaStream_t st[NS];
static cudaEvent_t fork_ev, join_ev[NS];

template <typename F> static double timeit(F f, int reps) { return time_median(st[0], f, reps, 2) * 1e3; }  // ms

// out[p][e] = Σ_c P[(p·ks + c)][e] over tiles p, elements e of a tile
__global__ void k_sum(const double *P, double *out, int tiles, int ks)
{
    const size_t len = (size_t)tiles * T * T;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < len; i += (size_t)gridDim.x * blockDim.x) {
        const size_t p = i / (T * T), e = i % (T * T);
        double s = 0;
        for (int c = 0; c < ks; c++)
            s += P[(p * ks + c) * T * T + e];
        out[i] = s;
    }
}

static double maxdiff(const double *a, const double *b, size_t len)
{
    std::vector<double> x(len), y(len);
    CK(cudaMemcpy(x.data(), a, len * 8, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(y.data(), b, len * 8, cudaMemcpyDeviceToHost));
    double d = 0, s = 0;
    for (size_t i = 0; i < len; i++) {
        d = std::max(d, std::fabs(x[i] - y[i]));
        s = std::max(s, std::fabs(y[i]));
    }
    return d / s;
}

static void fork(int S)
{
    CK(cudaEventRecord(fork_ev, st[0]));
    for (int s = 1; s < S; s++)
        CK(cudaStreamWaitEvent(st[s], fork_ev, 0));
}

static void join(int S)
{
    for (int s = 1; s < S; s++) {
        CK(cudaEventRecord(join_ev[s], st[s]));
        CK(cudaStreamWaitEvent(st[0], join_ev[s], 0));
    }
}

// An algorithm's configuration attribute, whatever its width (-1 where cuBLASLt does not give it).
static long attr_int(const cublasLtMatmulAlgo_t *algo, cublasLtMatmulAlgoConfigAttributes_t a)
{
    size_t need = 0;
    if (cublasLtMatmulAlgoConfigGetAttribute(algo, a, nullptr, 0, &need) != CUBLAS_STATUS_SUCCESS || need == 0 ||
        need > 8)
        return -1;
    unsigned char b[8] = {0};
    size_t w;
    if (cublasLtMatmulAlgoConfigGetAttribute(algo, a, b, need, &w) != CUBLAS_STATUS_SUCCESS)
        return -1;
    uint64_t v = 0;
    for (size_t i = 0; i < need; i++)
        v |= (uint64_t)b[i] << (8 * i);
    return (long)v;
}

int main(int argc, char **argv)
{
    const int64_t m = argc > 1 ? atoll(argv[1]) : 100000, n = argc > 2 ? atoll(argv[2]) : 1000;
    const int reps = argc > 3 ? atoi(argv[3]) : 10;
    const int64_t Tn = (n + T - 1) / T, tiles = Tn * (Tn + 1) / 2, last = n - T;
    const double useful = (double)m * n * (n + 1);
    cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, 0));
    printf("gram_lt: %s, %d SMs; X %lld x %lld, %lld tiles of %d\n", prop.name, prop.multiProcessorCount,
           (long long)m, (long long)n, (long long)tiles, T);
    for (int s = 0; s < NS; s++) {
        CK(cudaStreamCreateWithFlags(&st[s], cudaStreamNonBlocking));
        CK(cudaEventCreateWithFlags(&join_ev[s], cudaEventDisableTiming));
    }
    CK(cudaEventCreateWithFlags(&fork_ev, cudaEventDisableTiming));
    double *X, *P, *Gref, *G, *W;
    const int ksmax = 22;
    const size_t wsbytes = (size_t)256 << 20;
    CK(cudaMalloc(&X, (size_t)m * n * 8));
    CK(cudaMalloc(&P, (size_t)tiles * ksmax * T * T * 8));
    CK(cudaMalloc(&Gref, (size_t)tiles * T * T * 8));
    CK(cudaMalloc(&G, (size_t)tiles * T * T * 8));
    CK(cudaMalloc(&W, wsbytes * NS));
    k_fill<<<1024, 256, 0, st[0]>>>(X, (size_t)m * n, 7);
    std::vector<int64_t> ti, tj;
    for (int64_t I = 0; I < Tn; I++)
        for (int64_t J = I; J < Tn; J++) {
            ti.push_back(I == Tn - 1 ? last : I * T);
            tj.push_back(J == Tn - 1 ? last : J * T);
        }
    cublasHandle_t blas;
    CK(cublasCreate(&blas));
    CK(cublasSetStream(blas, st[0]));
    cublasLtHandle_t lt;
    CK(cublasLtCreate(&lt));
    const double one = 1, zero = 0;

    // the ceiling: DGEMM 8192³
    {
        const int N = 8192;
        double *A, *B, *C;
        CK(cudaMalloc(&A, (size_t)N * N * 8));
        CK(cudaMalloc(&B, (size_t)N * N * 8));
        CK(cudaMalloc(&C, (size_t)N * N * 8));
        k_fill<<<1024, 256, 0, st[0]>>>(A, (size_t)N * N, 1);
        k_fill<<<1024, 256, 0, st[0]>>>(B, (size_t)N * N, 2);
        const double ms = timeit([&] { CK(cublasDgemm(blas, CUBLAS_OP_N, CUBLAS_OP_N, N, N, N, &one, A, N, B, N,
                                                      &zero, C, N)); }, 5);
        printf("ceiling: DGEMM 8192^3 %.3f ms, %.1f TFLOP/s\n", ms, 2.0 * N * N * (double)N / ms * 1e-9);
        CK(cudaFree(A)); CK(cudaFree(B)); CK(cudaFree(C));
    }

    // dsolve's plan: one pointer-array batched GEMM of every (chunk, tile)
    double best_ref = 1e30;
    for (int ks : {11, 16, 22}) {
        const int64_t kc = (m + ks - 1) / ks;
        std::vector<const double *> h(3 * tiles * ks);
        for (int64_t p = 0; p < tiles; p++)
            for (int c = 0; c < ks; c++) {
                const int64_t q = p * ks + c;
                h[q] = X + ti[p] + c * kc * n;
                h[tiles * ks + q] = X + tj[p] + c * kc * n;
                h[2 * tiles * ks + q] = P + q * T * T;
            }
        if (m % ks != 0) {
            printf("skip ks=%d (m not a multiple)\n", ks);
            continue;
        }
        const double **d;
        CK(cudaMalloc(&d, h.size() * sizeof(double *)));
        CK(cudaMemcpy(d, h.data(), h.size() * sizeof(double *), cudaMemcpyHostToDevice));
        const int cnt = (int)(tiles * ks);
        auto run = [&] {
            CK(cublasGemmBatchedEx(blas, CUBLAS_OP_N, CUBLAS_OP_T, T, T, (int)kc, &one, (const void **)d, CUDA_R_64F,
                                   (int)n, (const void **)(d + cnt), CUDA_R_64F, (int)n, &zero, (void **)(d + 2 * cnt),
                                   CUDA_R_64F, T, cnt, CUBLAS_COMPUTE_64F, CUBLAS_GEMM_DEFAULT));
        };
        const double ms = timeit(run, reps);
        k_sum<<<1024, 256, 0, st[0]>>>(P, ks == 16 ? Gref : G, (int)tiles, ks);
        CK(cudaStreamSynchronize(st[0]));
        printf("dsolve plan ks=%2d: %.3f ms, %.1f useful TFLOP/s, %.1f in area%s\n", ks, ms, useful / ms * 1e-9,
               2.0 * tiles * T * T * m / ms * 1e-9, ks == 16 ? " (reference G)" : "");
        if (ks == 16)
            best_ref = ms;
        CK(cudaFree(d));
    }

    // cuBLASLt: one strided-batched matmul a tile, the batch over row chunks, tiles over S streams
    cublasLtMatmulDesc_t desc;
    CK(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_64F, CUDA_R_64F));
    cublasOperation_t opn = CUBLAS_OP_N, opt = CUBLAS_OP_T;
    CK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &opn, sizeof opn));
    CK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &opt, sizeof opt));
    double best = 1e30;
    for (int ks : {1, 2, 4, 8, 11, 16, 22}) {
        if (m % ks != 0)
            continue;
        const int64_t kc = m / ks;
        cublasLtMatrixLayout_t la, lc;
        CK(cublasLtMatrixLayoutCreate(&la, CUDA_R_64F, T, kc, n));
        CK(cublasLtMatrixLayoutCreate(&lc, CUDA_R_64F, T, T, T));
        const int32_t bc = ks;
        const int64_t sa = kc * n, sc = (int64_t)T * T;
        CK(cublasLtMatrixLayoutSetAttribute(la, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &bc, sizeof bc));
        CK(cublasLtMatrixLayoutSetAttribute(la, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &sa, sizeof sa));
        CK(cublasLtMatrixLayoutSetAttribute(lc, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &bc, sizeof bc));
        CK(cublasLtMatrixLayoutSetAttribute(lc, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &sc, sizeof sc));
        cublasLtMatmulPreference_t pref;
        CK(cublasLtMatmulPreferenceCreate(&pref));
        CK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &wsbytes,
                                                sizeof wsbytes));
        cublasLtMatmulHeuristicResult_t res[25];
        int nres = 0;
        if (cublasLtMatmulAlgoGetHeuristic(lt, desc, la, la, lc, lc, pref, 24, res, &nres) != CUBLAS_STATUS_SUCCESS)
            nres = 0;
        printf("lt ks=%d: %d algorithms\n", ks, nres);
        // One more candidate: the heuristic's first with its CTA tile set to 64 × 64 and its stages to 16 × 4
        // by hand (as dsolve's reverted panel plan did), where cuBLASLt accepts it.
        if (nres > 0 && nres < 25) {
            cublasLtMatmulAlgo_t forced = res[0].algo;
            const uint32_t tile = CUBLASLT_MATMUL_TILE_64x64, stages = CUBLASLT_MATMUL_STAGES_16x4;
            cublasLtMatmulHeuristicResult_t chk;
            if (cublasLtMatmulAlgoConfigSetAttribute(&forced, CUBLASLT_ALGO_CONFIG_TILE_ID, &tile, sizeof tile) == 0 &&
                cublasLtMatmulAlgoConfigSetAttribute(&forced, CUBLASLT_ALGO_CONFIG_STAGES_ID, &stages,
                                                     sizeof stages) == 0 &&
                cublasLtMatmulAlgoCheck(lt, desc, la, la, lc, lc, &forced, &chk) == CUBLAS_STATUS_SUCCESS) {
                chk.algo = forced;
                res[nres++] = chk;
                printf("lt ks=%d: candidate %d is the first with tile and stages set by hand\n", ks, nres - 1);
            } else
                printf("lt ks=%d: the first with tile and stages set by hand is refused\n", ks);
        }
        for (int r = 0; r < nres; r++)
            for (int S : {1, 4, 8}) {
                const cublasLtMatmulAlgo_t *algo = &res[r].algo;
                if (res[r].workspaceSize > wsbytes)
                    continue;
                bool ok = true;
                auto run = [&] {
                    fork(S);
                    for (int64_t p = 0; p < tiles; p++) {
                        const int s = (int)(p % S);
                        if (cublasLtMatmul(lt, desc, &one, X + ti[p], la, X + tj[p], la, &zero, P + p * ks * T * T,
                                           lc, P + p * ks * T * T, lc, algo, (char *)W + s * wsbytes, wsbytes,
                                           st[s]) != CUBLAS_STATUS_SUCCESS)
                            ok = false;
                    }
                    join(S);
                };
                const double ms = timeit(run, reps);
                k_sum<<<1024, 256, 0, st[0]>>>(P, G, (int)tiles, ks);
                CK(cudaStreamSynchronize(st[0]));
                const double err = ok ? maxdiff(G, Gref, (size_t)tiles * T * T) : -1;
                printf("lt ks=%2d algo %2d (id %ld tile %ld stages %ld splitk %ld cluster %ld swizzle %ld custom %ld "
                       "inner %ld reduction %ld) streams %d: %.3f ms, %.1f useful TFLOP/s, err %.1e%s\n",
                       ks, r, attr_int(algo, CUBLASLT_ALGO_CONFIG_ID), attr_int(algo, CUBLASLT_ALGO_CONFIG_TILE_ID),
                       attr_int(algo, CUBLASLT_ALGO_CONFIG_STAGES_ID), attr_int(algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM),
                       attr_int(algo, CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID),
                       attr_int(algo, CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING), attr_int(algo, CUBLASLT_ALGO_CONFIG_CUSTOM_OPTION),
                       attr_int(algo, CUBLASLT_ALGO_CONFIG_INNER_SHAPE_ID),
                       attr_int(algo, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME), S, ms, useful / ms * 1e-9, err,
                       ok ? "" : " (a call failed)");
                if (ok && err < 1e-12)
                    best = std::min(best, ms);
            }
        CK(cublasLtMatmulPreferenceDestroy(pref));
        CK(cublasLtMatrixLayoutDestroy(la));
        CK(cublasLtMatrixLayoutDestroy(lc));
    }
    printf("best cuBLASLt %.3f ms against dsolve's plan (16 chunks) %.3f ms: %.2fx\n", best, best_ref, best_ref / best);
    return 0;
}
