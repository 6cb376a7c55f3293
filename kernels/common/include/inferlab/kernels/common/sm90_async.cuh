#pragma once
// Hopper's asynchronous pieces shared by the wgmma kernels (attention/flash_fwd_sm90*.cu,
// gemm/weight_only_sm90*.cu): the wgmma shared-memory descriptor of a 128-byte-swizzled operand, the
// async-proxy fence, the mbarriers their rings of stages complete on, and the bulk and tensor copies that fill
// them (built for sm_90a only), and the thread-block cluster's rank, addresses and barrier (sm_90).
#include <cstdint>

#include <cuda.h>  // CUtensorMap

namespace inferlab {
namespace sm90 {

__device__ __forceinline__ uint32_t shared_addr(const void* p) { return uint32_t(__cvta_generic_to_shared(p)); }

// wgmma shared-memory matrix descriptor, 128-byte swizzle: start address, leading and stride byte offsets.
__device__ __forceinline__ uint64_t desc_sw128(uint32_t addr, uint32_t lbo, uint32_t sbo) {
  return uint64_t((addr & 0x3FFFF) >> 4) | (uint64_t(lbo >> 4) << 16) | (uint64_t(sbo >> 4) << 32) | (1ull << 62);
}

// This thread's earlier shared-memory writes (generic proxy) ordered before the tensor cores' reads.
__device__ __forceinline__ void fence_proxy_async() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }

__device__ __forceinline__ void mbar_init(uint64_t* bar, int count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(shared_addr(bar)), "r"(count) : "memory");
}
// The barriers' initialization visible to the async proxy (TMA's complete_tx) before any copy.
__device__ __forceinline__ void fence_mbar_init() { asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory"); }
__device__ __forceinline__ void mbar_arrive(uint64_t* bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(shared_addr(bar)) : "memory");
}
// Arrives and expects `bytes` more of copies completing on `bar` in this phase.
__device__ __forceinline__ void mbar_expect_tx(uint64_t* bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(shared_addr(bar)), "r"(bytes) : "memory");
}
// Spins on try_wait until phase `parity` of `bar` has completed; SEM the wait's semantics ("" or ".acquire.cluster").
#define INFERLAB_MBAR_WAIT_PTX(SEM)                                              \
  "{\n.reg .pred done;\nWAIT_%=:\n"                                              \
  "mbarrier.try_wait.parity" SEM ".shared::cta.b64 done, [%0], %1;\n"            \
  "@!done bra WAIT_%=;\n}\n"
__device__ __forceinline__ void mbar_wait(uint64_t* bar, int parity) {
  asm volatile(INFERLAB_MBAR_WAIT_PTX("") ::"r"(shared_addr(bar)), "r"(parity) : "memory");
}

// One box of a 2-d tensor map at (c0, c1), landing as the map's swizzle lays it; completes on `bar`.
__device__ __forceinline__ void tma_load_2d(void* dst, const CUtensorMap* map, int c0, int c1, uint64_t* bar) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];\n" ::"r"(
          shared_addr(dst)),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(c1), "r"(shared_addr(bar))
      : "memory");
}

// `bytes` contiguous bytes (a multiple of 16, both ends 16-byte aligned), completing on `bar`, with an
// L2 eviction policy.
__device__ __forceinline__ void bulk_load(void* dst, const void* src, uint32_t bytes, uint64_t* bar, uint64_t policy) {
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint [%0], [%1], %2, [%3], %4;\n" ::"r"(
          shared_addr(dst)),
      "l"(src), "r"(bytes), "r"(shared_addr(bar)), "l"(policy)
      : "memory");
}

// Thread-block clusters (sm_90; gemm/weight_only.cu's split-k in a cluster uses cluster_addr too): this block's rank,
// a shared::cta address as the shared::cluster address of the same variable in block `rank`, and the cluster-wide
// barrier (release / acquire: every block's writes before it are visible to every block after it).
__device__ __forceinline__ uint32_t cluster_rank() {
  uint32_t r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(r));
  return r;
}
__device__ __forceinline__ uint32_t cluster_addr(const void* p, uint32_t rank) {
  uint32_t a;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(a) : "r"(shared_addr(p)), "r"(rank));
  return a;
}
__device__ __forceinline__ void cluster_sync() {
  asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;\n" ::: "memory");
}
// The cluster barrier's halves, for threads that arrive and wait at different places (not .aligned: a warp's threads
// may reach them apart).
__device__ __forceinline__ void cluster_arrive_release() { asm volatile("barrier.cluster.arrive.release;\n" ::: "memory"); }
__device__ __forceinline__ void cluster_wait_acquire() { asm volatile("barrier.cluster.wait.acquire;\n" ::: "memory"); }
// Waits for phase `parity` of this block's mbarrier `bar` where other blocks of the cluster complete it (st.async
// into this block's shared memory): acquire at cluster scope, so their bytes are visible after it.
__device__ __forceinline__ void mbar_wait_cluster(uint64_t* bar, int parity) {
  asm volatile(INFERLAB_MBAR_WAIT_PTX(".acquire.cluster") ::"r"(shared_addr(bar)), "r"(parity) : "memory");
}
// 16 bytes into another block's shared memory (addr and bar shared::cluster addresses from cluster_addr, addr 16-byte
// aligned), completing on that block's mbarrier `bar`.
__device__ __forceinline__ void st_async_v4(uint32_t addr, float4 v, uint32_t bar) {
  asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.v4.b32 [%0], {%1, %2, %3, %4}, [%5];\n" ::"r"(addr),
               "r"(__float_as_uint(v.x)), "r"(__float_as_uint(v.y)), "r"(__float_as_uint(v.z)),
               "r"(__float_as_uint(v.w)), "r"(bar)
               : "memory");
}

// An L2 policy for data read once (evict first) or by every block (evict last).
__device__ __forceinline__ uint64_t evict_first_policy() {
  uint64_t policy;
  asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;\n" : "=l"(policy));
  return policy;
}

__device__ __forceinline__ uint64_t evict_last_policy() {
  uint64_t policy;
  asm volatile("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;\n" : "=l"(policy));
  return policy;
}

}  // namespace sm90
}  // namespace inferlab
