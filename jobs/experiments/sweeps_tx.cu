// sweeps_tx.cu: the Gram sweeps' cluster kernel with its exchange by st.async on mbarriers (TX,
// kernels/solve/gram_sweeps_cluster.cu; dsolve's default) against the cluster barrier a step (DSOLVE_SWEEPS_TX=0),
// on one GPU. For each shape (n, batch, prefetch depth, cluster size; 1, 2 or 4 rows a thread), both run
// from the same g, a and ‖e‖² and are compared bit for bit (they sum the same products in the same order),
// then each is timed by events (median of REPS after 3 warm-ups; 10 sweeps with line search). G is
// symmetric with a dominant diagonal, drawn from a hash. Exits 1 when a pair differs or a launch fails.
// Not part of dsolve.
// Build (from the repository root): nvcc -O3 -std=c++17 -arch=sm_90 -Ikernels -Isrc
//        jobs/experiments/sweeps_tx.cu -o sweeps_tx
// Run:   ./sweeps_tx [REPS]   (default 20)
#include "solve/gram_sweeps_cluster.cu"

#include <cstring>

#include "exp_util.cuh"

// G[i][j] = G[j][i]: a hash of (min, max) in [-0.5, 0.5), the diagonal n/8 + 1.
__global__ void k_spd(double *G, int64_t n)
{
    const size_t len = (size_t)n * n;
    for (size_t e = blockIdx.x * (size_t)blockDim.x + threadIdx.x; e < len; e += (size_t)gridDim.x * blockDim.x) {
        const uint64_t i = e / n, j = e % n, lo = i < j ? i : j, hi = i < j ? j : i;
        uint64_t h = lo * 0x9E3779B97F4A7C15ull ^ (hi + 0x632BE59BD9B4E019ull);
        h ^= h >> 31;
        h *= 0xBF58476D1CE4E5B9ull;
        h ^= h >> 29;
        G[e] = i == j ? (double)n / 8.0 + 1.0 : (double)(h >> 11) * 0x1.0p-53 - 0.5;
    }
}

__global__ void k_diag(const double *G, double *d, int64_t n)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        d[i] = G[i * n + i];
}

struct Run {
    double *g, *a, *ee, *hist;
};

int main(int argc, char **argv)
{
    const int reps = argc > 1 ? atoi(argv[1]) : 20, sweeps = 10;
    // n, batch, prefetch depth (-1: as many as fit), cluster size (0: the largest)
    const int cases[][4] = {{1000, 100, -1, 0}, {1000, 64, -1, 0},  {1000, 63, 1, 0},   {998, 998, -1, 0},
                            {3000, 100, -1, 0}, {3000, 37, 2, 4},   {3000, 100, -1, 2}, {12000, 200, -1, 0},
                            {20000, 511, 3, 0}, {4000, 100, -1, 2}, {200, 16, -1, 0},  {64, 8, -1, 2},
                            {4096, 2048, -1, 0}};
    cudaStream_t st;
    CK(cudaStreamCreate(&st));
    int bad = 0;
    printf("%6s %6s %4s %3s  %-9s %12s %12s %7s\n", "n", "batch", "pf", "C", "bits", "default ms", "tx ms",
           "ratio");
    for (const auto &c : cases) {
        const int64_t n = c[0];
        const int batch = c[1], pf = c[2], fc = c[3];
        const int64_t nb = batch < n ? batch : n;
        double *G, *diag, *g0, *scratch;
        CK(cudaMalloc(&G, (size_t)(n * n) * 8));
        CK(cudaMalloc(&diag, (size_t)n * 8));
        CK(cudaMalloc(&g0, (size_t)n * 8));
        CK(cudaMalloc(&scratch, (size_t)(n + (4 + 3 * (int64_t)kClMax) * nb) * 8));
        k_spd<<<1024, 256, 0, st>>>(G, n);
        k_diag<<<64, 256, 0, st>>>(G, diag, n);
        k_fill<<<64, 256, 0, st>>>(g0, (size_t)n, 7u);
        Run r[2];
        for (auto &x : r) {
            CK(cudaMalloc(&x.g, (size_t)n * 8));
            CK(cudaMalloc(&x.a, (size_t)n * 8));
            CK(cudaMalloc(&x.ee, 8));
            CK(cudaMalloc(&x.hist, (size_t)sweeps * 8));
        }
        const double ee0 = 10.0 * (double)n;
        auto start = [&](Run &x) {
            CK(cudaMemcpyAsync(x.g, g0, (size_t)n * 8, cudaMemcpyDeviceToDevice, st));
            CK(cudaMemsetAsync(x.a, 0, (size_t)n * 8, st));
            CK(cudaMemcpyAsync(x.ee, &ee0, 8, cudaMemcpyHostToDevice, st));
        };
        auto launch = [&](Run &x, int tx) {
            CK(gram_sweeps_launch_cluster(G, diag, x.g, x.a, x.ee, x.hist, n, batch, 1, sweeps, scratch, st, fc, 0,
                                          kClThreads, pf, tx));
        };
        for (int b = 0; b < 2; b++) {
            start(r[b]);
            launch(r[b], b);
        }
        CK(cudaStreamSynchronize(st));
        bool same = true;
        std::vector<double> h0(n), h1(n);
        for (double *Run::*f : {&Run::g, &Run::a}) {
            CK(cudaMemcpy(h0.data(), r[0].*f, (size_t)n * 8, cudaMemcpyDeviceToHost));
            CK(cudaMemcpy(h1.data(), r[1].*f, (size_t)n * 8, cudaMemcpyDeviceToHost));
            same = same && memcmp(h0.data(), h1.data(), (size_t)n * 8) == 0;
        }
        for (double *Run::*f : {&Run::ee, &Run::hist}) {
            const size_t len = f == &Run::ee ? 1 : (size_t)sweeps;
            CK(cudaMemcpy(h0.data(), r[0].*f, len * 8, cudaMemcpyDeviceToHost));
            CK(cudaMemcpy(h1.data(), r[1].*f, len * 8, cudaMemcpyDeviceToHost));
            same = same && memcmp(h0.data(), h1.data(), len * 8) == 0;
        }
        bad += !same;
        const double t0 = time_median(st, [&] { launch(r[0], 0); }, reps, 3);
        const double t1 = time_median(st, [&] { launch(r[1], 1); }, reps, 3);
        printf("%6lld %6d %4d %3d  %-9s %12.4f %12.4f %7.3f\n", (long long)n, batch, pf, fc,
               same ? "same" : "DIFFER", t0 * 1e3, t1 * 1e3, t0 / t1);
        for (auto &x : r) {
            CK(cudaFree(x.g));
            CK(cudaFree(x.a));
            CK(cudaFree(x.ee));
            CK(cudaFree(x.hist));
        }
        CK(cudaFree(G));
        CK(cudaFree(diag));
        CK(cudaFree(g0));
        CK(cudaFree(scratch));
    }
    printf("%s\n", bad ? "FAIL: a pair differs" : "every pair bit for bit the same");
    return bad ? 1 : 0;
}
