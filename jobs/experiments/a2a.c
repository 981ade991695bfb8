// a2a.c: NCCL grouped send/recv all-to-all of B bytes per peer (default 10^9), one rank per GPU: with
// cudaMalloc buffers (aligned, and 4 to 12 bytes off alignment), and with ncclMemAlloc buffers
// registered by ncclCommRegister. Build: mpicc -O2 a2a.c -lnccl -lcudart (CUDA include/lib paths);
// run: mpirun -np 4 -x NCCL_NVLS_ENABLE=0 ./a2a [B]. Not part of dsolve: a measurement of the ceiling.
#include <cuda_runtime.h>
#include <mpi.h>
#include <nccl.h>
#include <stdio.h>
#include <stdlib.h>

#define CK(x) do { int e_ = (int)(x); if (e_) { printf("FAIL %s:%d %s -> %d\n", __FILE__, __LINE__, #x, e_); MPI_Abort(MPI_COMM_WORLD, 1);} } while (0)

static int cmpf(const void *a, const void *b) { float x = *(const float *)a, y = *(const float *)b; return (x > y) - (x < y); }

static size_t shift_ = 0;
static float run(ncclComm_t comm, cudaStream_t st, char *s, char *r, size_t B, int me, int np, int self)
{
    cudaEvent_t a, b; cudaEventCreate(&a); cudaEventCreate(&b);
    float t[7];
    for (int rep = 0; rep < 7; rep++) {
        MPI_Barrier(MPI_COMM_WORLD);
        cudaEventRecord(a, st);
        CK(ncclGroupStart());
        for (int p = 0; p < np; p++) {
            if (p == me) continue;
            CK(ncclSend(s + (size_t)p * B + shift_ * (size_t)(p + 1), B - 64, ncclChar, p, comm, st));
            CK(ncclRecv(r + (size_t)p * B + shift_ * (size_t)(me + 1), B - 64, ncclChar, p, comm, st));
        }
        CK(ncclGroupEnd());
        if (self) CK(cudaMemcpyAsync(r + (size_t)me * B, s + (size_t)me * B, B, cudaMemcpyDeviceToDevice, st));
        cudaEventRecord(b, st);
        CK(cudaEventSynchronize(b));
        cudaEventElapsedTime(&t[rep], a, b);
    }
    qsort(t + 1, 6, sizeof(float), cmpf);
    return t[4];
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int me, np; MPI_Comm_rank(MPI_COMM_WORLD, &me); MPI_Comm_size(MPI_COMM_WORLD, &np);
    CK(cudaSetDevice(me));
    ncclUniqueId id; if (me == 0) ncclGetUniqueId(&id);
    MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD);
    ncclComm_t comm; CK(ncclCommInitRank(&comm, np, id, me));
    cudaStream_t st; CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    const size_t B = argc > 1 ? strtoull(argv[1], 0, 10) : 1000000000ull;
    char *s, *r;
    CK(cudaMalloc((void **)&s, B * np)); CK(cudaMalloc((void **)&r, B * np));
    CK(cudaMemset(s, 1, B * np));
    float t0 = run(comm, st, s, r, B, me, np, 0), t0s = run(comm, st, s, r, B, me, np, 1);
    shift_ = 4;
    float tm = run(comm, st, s, r, B, me, np, 0);
    shift_ = 0;
    if (me == 0) printf("misaligned by 4/8/12 bytes: %.2f ms (aligned %.2f)\n", tm, t0);
    CK(cudaFree(s)); CK(cudaFree(r));
    CK(ncclMemAlloc((void **)&s, B * np)); CK(ncclMemAlloc((void **)&r, B * np));
    CK(cudaMemset(s, 1, B * np));
    float t1 = run(comm, st, s, r, B, me, np, 0);
    void *hs, *hr;
    CK(ncclCommRegister(comm, s, B * np, &hs)); CK(ncclCommRegister(comm, r, B * np, &hr));
    float t2 = run(comm, st, s, r, B, me, np, 0), t2s = run(comm, st, s, r, B, me, np, 1);
    double off = (double)B * (np - 1);
    if (me == 0)
        printf("a2a %zu B/peer, %d ranks: cudaMalloc %.2f ms (%.0f GB/s off-rank), +self copy %.2f ms; ncclMemAlloc %.2f ms; registered %.2f ms (%.0f GB/s), +self %.2f ms\n",
               B, np, t0, off / t0 / 1e6, t0s, t1, t2, off / t2 / 1e6, t2s);
    ncclCommDeregister(comm, hs); ncclCommDeregister(comm, hr);
    ncclMemFree(s); ncclMemFree(r);
    ncclCommDestroy(comm);
    MPI_Finalize();
    return 0;
}
