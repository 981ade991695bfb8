// gram_sweeps.cuh: what the two halves of the Gram route's sweeps share: the cluster's shape (which also
// sizes the scratch) and the cluster launch, which ds_k_gram_sweeps (gram_sweeps.cu) tries first for
// batches and which lives with its kernel in gram_sweeps_cluster.cu.
// provides: kClMax, kClThreads, gram_sweeps_launch_cluster
#ifndef DS_GRAM_SWEEPS_CUH
#define DS_GRAM_SWEEPS_CUH

#include <cuda_runtime.h>
#include <stdint.h>

constexpr int kClMax = 16;
constexpr int kClThreads = 512;  // ≤ 128 registers per thread (1024 threads spill at KT = 1)

// Launches sweeps_cluster with the largest cluster the device runs (16, 8, 4, 2 CTAs).
// Returns cudaErrorNotSupported where it cannot run (no clusters, too many rows): the caller falls back.
// force_c, force_global, NT and force_pf pin the cluster size, the exchange in global memory, the CTA
// size and the prefetch depth (experiments; the defaults choose); tx exchanges by st.async on mbarriers
// instead of a cluster barrier a step (with the exchange in shared memory; dsolve passes 1).
cudaError_t gram_sweeps_launch_cluster(const double *G, const double *diag, double *g, double *a, double *ee,
                                       double *ee_hist, int64_t n, int batch, int line_search, int sweeps,
                                       double *scratch, cudaStream_t stream, int force_c = 0, int force_global = 0,
                                       int NT = kClThreads, int force_pf = -1, int tx = 0);

#endif
