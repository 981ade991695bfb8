// async_copy.cuh: Hopper's asynchronous copies into shared memory for the Gram sweeps' cluster kernel:
// cp.async of 8 bytes a thread (grouped, each thread waiting for its own groups), and st.async stores
// into another CTA's shared memory that complete on its mbarrier (TX: every reader waits on the phase).
// provides: cp_async8, cp_async_commit, cp_async_wait1, smem_addr, cluster_addr, mbar_init, mbar_expect,
// mbar_wait, st_async
#ifndef DS_ASYNC_COPY_CUH
#define DS_ASYNC_COPY_CUH

#include <stdint.h>

namespace {

__device__ __forceinline__ void cp_async8(double *smem, const double *gmem)
{
    const unsigned s = (unsigned)__cvta_generic_to_shared(smem);
    asm volatile("cp.async.ca.shared.global [%0], [%1], 8;\n" ::"r"(s), "l"(gmem) : "memory");
}

__device__ __forceinline__ void cp_async_commit()
{
    asm volatile("cp.async.commit_group;\n" ::: "memory");
}

__device__ __forceinline__ void cp_async_wait1()
{
    asm volatile("cp.async.wait_group 1;\n" ::: "memory");
}

// TX's exchange: mbarriers in shared memory, addressed across the cluster by 32-bit shared::cluster
// addresses (mapa of this CTA's address for the CTA of that rank).
__device__ __forceinline__ unsigned smem_addr(const void *p)
{
    return (unsigned)__cvta_generic_to_shared(p);
}

__device__ __forceinline__ unsigned cluster_addr(unsigned a, int rank)
{
    unsigned r;
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(r) : "r"(a), "r"(rank));
    return r;
}

__device__ __forceinline__ void mbar_init(uint64_t *bar)
{
    asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;\n" ::"r"(smem_addr(bar)) : "memory");
}

__device__ __forceinline__ void mbar_expect(uint64_t *bar, unsigned bytes)
{
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(smem_addr(bar)), "r"(bytes)
                 : "memory");
}

// Waits for the phase of that parity. The acquire is at cluster scope, as PTX's memory model asks to
// synchronise with st.async's complete_tx (a release at cluster scope by another CTA's thread); on sm_90
// it compiles to an L1 invalidation that the bytes in shared memory do not need (lease AF measured the
// CTA-scope wait 1-4 µs faster a solve; CUTLASS waits at CTA scope for other CTAs' bulk copies), but the
// sweeps' TX path is kept to what the model guarantees.
__device__ __forceinline__ void mbar_wait(uint64_t *bar, unsigned parity)
{
    asm volatile("{\n"
                 ".reg .pred done;\n"
                 "TXWAIT:\n"
                 "mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 done, [%0], %1;\n"
                 "@!done bra TXWAIT;\n"
                 "}\n" ::"r"(smem_addr(bar)),
                 "r"(parity)
                 : "memory");
}

__device__ __forceinline__ void st_async(unsigned dst, double v, unsigned bar)
{
    asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.f64 [%0], %1, [%2];\n" ::"r"(dst), "d"(v),
                 "r"(bar)
                 : "memory");
}

__device__ __forceinline__ void st_async(unsigned dst, double2 v, unsigned bar)
{
    asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.v2.f64 [%0], {%1, %2}, [%3];\n" ::"r"(dst),
                 "d"(v.x), "d"(v.y), "r"(bar)
                 : "memory");
}

}  // namespace

#endif
