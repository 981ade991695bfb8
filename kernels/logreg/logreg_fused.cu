// logreg_fused.cu: logistic regression's pass for f32 X in one read of X: each CTA walks a contiguous
// range of rows in tiles of kTile rows kept in shared memory; per tile it forms the logits X_t·W (a
// warp per kRowsPerWarp rows, W in shared memory), P − Y for those rows, and adds X_tᵀ·(P − Y) to the
// CTA's share of the gradient (a thread per column, all classes in registers). The two products of the
// unfused pass are thus computed tile by tile from one copy of the tile. A CTA takes one unit of rows
// (lrk_unit_rows: a fixed part of a global row block), so that each unit's partials are the same bits
// whichever launch or rank computes it; logreg.cu's lrk_fix_add then adds the units' gradient shares
// exactly and lrk_losses their losses in unit order: the result does not depend on the rank count.
// provides: lrk_fused_plan, lrk_fused_pass
#include "logreg/logreg_kernels.h"
#include "common/reduce.cuh"

namespace {

constexpr int kThreads = 256, kWarps = kThreads / 32, kRowsPerWarp = 2, kTile = kWarps * kRowsPerWarp;
constexpr int kColsPerThread = 4, kMaxCols = kThreads * kColsPerThread, kMaxK = 16;

size_t smem_bytes(int D, int K) { return ((size_t)kTile * D + (size_t)D * K + (size_t)kTile * K) * sizeof(float); }

// The tile's rows [t0, t0 + rows) into sX (rows × D, contiguous as in X). X + t0·D is 16-byte aligned
// whenever X is and t0 is a multiple of 4 (the callers' tiles start at multiples of kTile).
__device__ void load_tile(float *sX, const float *X, int64_t t0, int rows, int D, bool vec)
{
    const int64_t count = (int64_t)rows * D;
    const float *src = X + t0 * D;
    int64_t done = 0;
    if (vec) {
        // Every copy of the tile is issued before any is waited for, so its bytes are in flight at once:
        // asynchronous copies into shared memory (no registers held) where the GPU has them.
        const int n4 = (int)(count / 4);
        const float4 *s4 = reinterpret_cast<const float4 *>(src);
        float4 *d4 = reinterpret_cast<float4 *>(sX);
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
        for (int i = threadIdx.x; i < n4; i += kThreads) {
            const unsigned dst = (unsigned)__cvta_generic_to_shared(d4 + i);
            asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(dst), "l"(s4 + i));
        }
        asm volatile("cp.async.commit_group;\n" ::);
        asm volatile("cp.async.wait_group 0;\n" ::: "memory");
#else
        for (int i = threadIdx.x; i < n4; i += kThreads)
            d4[i] = __ldg(s4 + i);
#endif
        done = (int64_t)n4 * 4;
    }
    for (int64_t i = done + threadIdx.x; i < count; i += kThreads)
        sX[i] = __ldg(src + i);
}

// One row's P − Y into r[0 .. K) (by lanes k < K) and its loss and argmax test (every lane the same).
// logit: every lane holds the row's K logits.
template <int K>
__device__ double row_softmax(const float *logit, int label, int model, float *r, int *correct)
{
    const int lane = threadIdx.x % 32;
    // Register arrays are indexed by loop counters only (a runtime index would put them in local memory).
    int best = 0;
    float mxf = logit[0], at_label = logit[0];
#pragma unroll
    for (int k = 1; k < K; k++) {
        best = logit[k] > mxf ? k : best;
        mxf = logit[k] > mxf ? logit[k] : mxf;
        at_label = k == label ? logit[k] : at_label;
    }
    *correct = best == label;
    double loss = 0;
    if (model == 0) {
        // Lane k < K takes class k's exponential; the sum goes round the warp.
        double v = 0;
#pragma unroll
        for (int k = 0; k < K; k++)
            v = k == lane ? (double)logit[k] : v;
        const double e = lane < K ? exp(v - (double)mxf) : 0.0, sum = warp_sum(e);
        loss = (double)mxf + log(sum) - (double)at_label;
        if (lane < K)
            r[lane] = (float)(e / sum - (lane == label));
    } else {
        double v = 0, term = 0;
#pragma unroll
        for (int k = 0; k < K; k++)
            v = k == lane ? (double)logit[k] : v;
        if (lane < K) {
            const double y = lane == label;
            term = fmax(v, 0.0) + log1p(exp(-fabs(v))) - y * v;
            r[lane] = (float)(1.0 / (1.0 + exp(-v)) - y);
        }
        loss = warp_sum(term);
    }
    return loss;
}

// CTA b: the rows of unit u = u0 + b, [u·unit, min(n, (u + 1)·unit)). partG[b·D·K + j·K + k] =
// Σ_i X[i][j]·R[i][k] (grad only); partials[2u], [2u + 1] = Σ loss, Σ correct.
// Long: one tile loop whose steps (load, logits, P − Y, X_tᵀ·R_t) share the tile in shared memory and
// keep the CTA's gradient share in registers across all its tiles; a launch per step would read X again,
// which is what the fused pass exists to avoid.
template <int K>
__global__ void __launch_bounds__(kThreads, 2) k_fused(const float *X, int64_t n, int D, const double *W,
                                                       const int32_t *labels, int model, int grad, int64_t u0,
                                                       int64_t unit, bool vec, float *partG, double *partials)
{
    extern __shared__ float smem[];
    float *sX = smem, *sW = sX + (size_t)kTile * D, *sR = sW + (size_t)D * K;
    __shared__ double s_red[32];
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    for (int i = threadIdx.x; i < D * K; i += kThreads)
        sW[i] = (float)W[i];
    float acc[kColsPerThread][K];
    #pragma unroll
    for (int c = 0; c < kColsPerThread; c++)
        for (int k = 0; k < K; k++)
            acc[c][k] = 0.f;
    double loss = 0, correct = 0;
    const int64_t r0 = (u0 + blockIdx.x) * unit, r1 = r0 + unit < n ? r0 + unit : n;
    for (int64_t t0 = r0; t0 < r1; t0 += kTile) {
        const int rows = r1 - t0 < kTile ? (int)(r1 - t0) : kTile;
        __syncthreads();  // the previous tile's sX and sR are no longer read (and sW is written)
        load_tile(sX, X, t0, rows, D, vec);
        __syncthreads();
        // Logits and P − Y: warp w takes rows w·kRowsPerWarp + q.
        float a[kRowsPerWarp][K];
        #pragma unroll
        for (int q = 0; q < kRowsPerWarp; q++)
            for (int k = 0; k < K; k++)
                a[q][k] = 0.f;
        const int tr = warp * kRowsPerWarp;
        for (int j = lane; j < D; j += 32) {
            float x[kRowsPerWarp];
#pragma unroll
            for (int q = 0; q < kRowsPerWarp; q++)
                x[q] = tr + q < rows ? sX[(tr + q) * D + j] : 0.f;
#pragma unroll
            for (int k = 0; k < K; k++) {
                const float w = sW[j * K + k];
#pragma unroll
                for (int q = 0; q < kRowsPerWarp; q++)
                    a[q][k] = fmaf(x[q], w, a[q][k]);
            }
        }
#pragma unroll
        for (int q = 0; q < kRowsPerWarp; q++) {
#pragma unroll
            for (int k = 0; k < K; k++)
#pragma unroll
                for (int off = 16; off > 0; off /= 2)
                    a[q][k] += __shfl_xor_sync(kFullMask, a[q][k], off);
            if (tr + q < rows) {
                int ok = 0;
                const double l = row_softmax<K>(a[q], labels[t0 + tr + q], model, sR + (tr + q) * K, &ok);
                if (lane == 0) {
                    loss += l;
                    correct += ok;
                }
            } else if (lane < K) {
                sR[(tr + q) * K + lane] = 0.f;
            }
        }
        if (!grad)
            continue;
        __syncthreads();
        // X_tᵀ·R_t into the thread's columns j = threadIdx.x + c·kThreads.
        for (int t = 0; t < rows; t++) {
            float rr[K];
#pragma unroll
            for (int k = 0; k < K; k++)
                rr[k] = sR[t * K + k];
#pragma unroll
            for (int c = 0; c < kColsPerThread; c++) {
                const int j = threadIdx.x + c * kThreads;
                if (j < D) {
                    const float x = sX[t * D + j];
#pragma unroll
                    for (int k = 0; k < K; k++)
                        acc[c][k] = fmaf(x, rr[k], acc[c][k]);
                }
            }
        }
    }
    if (grad)
#pragma unroll
        for (int c = 0; c < kColsPerThread; c++) {
            const int j = threadIdx.x + c * kThreads;
            if (j < D)
                for (int k = 0; k < K; k++)
                    partG[((size_t)blockIdx.x * D + j) * K + k] = acc[c][k];
        }
    loss = block_sum(loss, s_red);
    correct = block_sum(correct, s_red);
    if (threadIdx.x == 0) {
        partials[2 * (u0 + blockIdx.x)] = loss;
        partials[2 * (u0 + blockIdx.x) + 1] = correct;
    }
}

template <int K>
cudaError_t launch(const float *X, int64_t n, int D, const double *W, const int32_t *labels, int model, int grad,
                   int64_t u0, int units, int64_t unit, float *partG, double *partials, cudaStream_t stream)
{
    const size_t smem = smem_bytes(D, K);  // allowed once by lrk_fused_plan (occupancy)
    const bool vec = ((uintptr_t)X & 15) == 0;
    k_fused<K><<<units, kThreads, smem, stream>>>(X, n, D, W, labels, model, grad, u0, unit, vec, partG, partials);
    return cudaGetLastError();
}

template <int K>
int occupancy(int D)
{
    // The kernel may take the shared memory of the widest X it serves, so that any later pass of any
    // width is allowed; the occupancy is that of this width.
    const size_t smem = smem_bytes(D, K);
    int per_sm = 0;
    if (cudaFuncSetAttribute(k_fused<K>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem_bytes(kMaxCols, K)) !=
            cudaSuccess ||
        cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, k_fused<K>, kThreads, smem) != cudaSuccess) {
        (void)cudaGetLastError();
        return 0;
    }
    return per_sm;
}

#define DS_FUSED_CASES(X) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11) X(12) X(13) X(14) X(15) X(16)

}  // namespace

extern "C" int lrk_fused_plan(int64_t D, int K)
{
    if (D < 1 || D > kMaxCols || K < 1 || K > kMaxK)
        return 0;
    int dev = 0, sms = 0, per_sm = 0;
    if (cudaGetDevice(&dev) != cudaSuccess || cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess) {
        (void)cudaGetLastError();
        return 0;
    }
    switch (K) {
#define DS_OCC(k) \
    case k: per_sm = occupancy<k>((int)D); break;
        DS_FUSED_CASES(DS_OCC)
#undef DS_OCC
    }
    return per_sm > 0 ? sms * per_sm : 0;
}

extern "C" cudaError_t lrk_fused_pass(const float *X, int64_t n, int64_t D, const double *W, const int32_t *labels,
                                      int K, int model, int grad, int64_t u0, int units, int64_t unit, float *partG,
                                      double *partials, cudaStream_t stream)
{
    // Units start at multiples of kTile rows (aligned loads), as the tiles inside them do.
    if (D < 1 || D > kMaxCols || K < 1 || K > kMaxK || units < 1 || unit < 1 || unit % kTile != 0 || n < 0)
        return cudaErrorInvalidValue;
    switch (K) {
#define DS_LAUNCH(k) \
    case k: return launch<k>(X, n, (int)D, W, labels, model, grad, u0, units, unit, partG, partials, stream);
        DS_FUSED_CASES(DS_LAUNCH)
#undef DS_LAUNCH
    }
    return cudaErrorInvalidValue;
}
