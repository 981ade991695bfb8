// exp_util.cuh: what the CUDA experiments here share: CK (a failed call prints where and exits),
// time_median (the median time of a callable's work on a stream by events, after warm-ups) and k_fill
// (uniform values in [-1, 1) from a hash of the index and a seed). Not part of dsolve.
#pragma once
#include <cuda_runtime.h>
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define CK(x) do { auto e_ = (x); if ((int)e_ != 0) { printf("FAIL %s:%d %s -> %d\n", __FILE__, __LINE__, #x, (int)e_); exit(1); } } while (0)

// Seconds: the median of reps runs of f, each timed by events on s, after warm runs.
template <typename F> static double time_median(cudaStream_t s, F f, int reps, int warm)
{
    for (int i = 0; i < warm; i++)
        f();
    cudaEvent_t a, b;
    CK(cudaEventCreate(&a));
    CK(cudaEventCreate(&b));
    std::vector<float> t;
    for (int r = 0; r < reps; r++) {
        CK(cudaEventRecord(a, s));
        f();
        CK(cudaEventRecord(b, s));
        CK(cudaEventSynchronize(b));
        float ms;
        CK(cudaEventElapsedTime(&ms, a, b));
        t.push_back(ms);
    }
    CK(cudaGetLastError());
    CK(cudaEventDestroy(a));
    CK(cudaEventDestroy(b));
    std::sort(t.begin(), t.end());
    return t[t.size() / 2] * 1e-3;
}

__global__ void k_fill(double *x, size_t len, unsigned seed)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < len; i += (size_t)gridDim.x * blockDim.x) {
        unsigned long long h = (i + 1) * 0x9E3779B97F4A7C15ull ^ seed;
        h ^= h >> 31; h *= 0xBF58476D1CE4E5B9ull; h ^= h >> 29;
        x[i] = (double)(h >> 11) * 0x1.0p-53 * 2.0 - 1.0;
    }
}
