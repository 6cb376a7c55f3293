#pragma once
// Device pieces shared by the two Hopper weight-only kernels (weight_only_sm90.cu: every thread copies
// with cp.async; weight_only_sm90_tma.cu: producer warps of one copying thread, TMA and mbarriers), so that the two
// differ only where their pipelines do. A unit is one 128-row tile by one 128-column group; per unit
// each warp turns its 16 rows' packed chunks (quant.h) into the A fragments of 8 wgmma k16 steps, its
// warpgroup multiplies them with X's [N x 128] stage, and the products are scaled into the tile's fp32
// sums; a tile's stretch ends in write_out.
#include <cuda_bf16.h>

#include <algorithm>
#include <cstdint>
#include <string>

#include "dequant.cuh"
#include "inferlab/kernels/common/check.h"
#include "inferlab/kernels/common/sm90_async.cuh"
#include "inferlab/kernels/gemm/linear.h"
#include "inferlab/sim/error.h"
#include "weight_only.h"
#include "wgmma_rs.h"

namespace inferlab {
namespace {

constexpr int kWoGroup = 128;      // columns of a unit (int4's scale group)
constexpr int kWoBlockRows = 128;  // rows of a unit: 8 warps of 16

// Both kernels' parameters (the TMA kernel reads X through its tensor map, not x).
struct WoSm90Params {
  const __nv_bfloat16* x;  // [m, k]
  const uint4* w;          // packed chunks [n/16][k/C] of 512 bytes (quant.h)
  const void* scales;      // int8: float [n]; int4: uint32 [k/128][n]
  const uint32_t* meta;    // sparse24: uint32 [n/16][k/32][16] (quant.h)
  __nv_bfloat16* y;        // [m, n]
  float* partial;          // the shared tiles' fp32 sums in the accumulators' order (wo_partial_index), zero between launches
  int* counters;           // [n/128 rounded up], zero between launches
  int m, n, k;
  int units;               // row tiles x k/128
  int blocks;              // the grid; block b takes units [b·units/blocks, (b+1)·units/blocks)
};

inline WoSm90Params wo_sm90_params(const LinearParams& p, const LinearPlan& plan) {
  WoSm90Params wp{};
  wp.x = static_cast<const __nv_bfloat16*>(p.x);
  wp.w = static_cast<const uint4*>(p.w);
  wp.scales = p.scales;
  wp.meta = static_cast<const uint32_t*>(p.metadata);
  wp.y = static_cast<__nv_bfloat16*>(p.y);
  wp.partial = static_cast<float*>(p.workspace);
  wp.counters = weight_only_counters(p);
  wp.m = int(p.m);
  wp.n = int(p.n);
  wp.k = int(p.k);
  wp.units = int((p.n + kWoBlockRows - 1) / kWoBlockRows * (p.k / kWoGroup));
  wp.blocks = int(plan.ctas);
  return wp;
}

// The persistent grid: no more blocks than the SMs hold (the plan's blocks per SM, as the device
// confirms for this build's registers and the kernel's shared memory).
template <class Kernel>
int persistent_blocks(Kernel kernel, int threads, int smem, int want, const char* who) {
  int device = 0, sms = 0, per_sm = 0;
  INFERLAB_CUDA_CHECK(cudaGetDevice(&device));
  INFERLAB_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  INFERLAB_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, threads, smem));
  if (per_sm < 1) throw Error(std::string(who) + ": no block fits an SM");
  return std::min(want, sms * per_sm);
}

// a + b as bf16x2 (a FMA with 1): exact here, where a = 128 + q and b = −(128 + z).
__device__ __forceinline__ uint32_t bf16x2_add(uint32_t a, uint32_t b) {
  uint32_t d;
  asm("fma.rn.bf16x2 %0, %1, %2, %3;\n" : "=r"(d) : "r"(a), "r"(0x3F803F80u), "r"(b));
  return d;
}

// A fragments of a unit's 8 k16 steps from this lane's 16 bytes of each of its warp's chunks (wl: the
// lane's first, chunks 32 uint4 apart), and what multiplies the unit's products into the sums (rows g,
// g + 8). int4: (w >> 4i) & 0x000F000F | 0x43004300 is a bf16x2 of 128 + q exactly (weight_only.cu); one
// bf16x2 FMA per register takes the stored 128 + z away (exact: small integers), so the products are
// Σ (q − z)·x and the group's scale (srow: the unit's scales of this warp's 16 rows) multiplies them.
// int8: dequant.cuh's conversion (two lop3 and an FMA a pair, the word's bytes a0 a2 a1 a3); the channel scale comes at
// the write-out.
template <bool kInt4>
__device__ __forceinline__ void dequant_unit(const uint4* wl, const uint32_t* srow, int g, uint32_t (&a)[8][4],
                                             float& sc0, float& sc1) {
  if constexpr (kInt4) {
    const uint32_t sz0 = srow[g], sz1 = srow[g + 8];
    sc0 = __uint_as_float(sz0 << 16);
    sc1 = __uint_as_float(sz1 << 16);
    // −(128 + z) in both halves (registers 0, 2 hold row g, 1, 3 row g + 8).
    const uint32_t z0 = ((sz0 & 0xffff0000u) | (sz0 >> 16)) ^ 0x80008000u;
    const uint32_t z1 = ((sz1 & 0xffff0000u) | (sz1 >> 16)) ^ 0x80008000u;
#pragma unroll
    for (int j = 0; j < 2; ++j) {  // 2 chunks of 64 columns
      const uint4 c = wl[j * 32];
      const uint32_t words[4] = {c.x, c.y, c.z, c.w};
#pragma unroll
      for (int q = 0; q < 4; ++q) {  // k16 step 4j + q
        const uint32_t w = words[q];
        a[4 * j + q][0] = bf16x2_add(lop3_and_or(w, 0x000F000Fu, 0x43004300u), z0);
        a[4 * j + q][1] = bf16x2_add(lop3_and_or(w >> 4, 0x000F000Fu, 0x43004300u), z1);
        a[4 * j + q][2] = bf16x2_add(lop3_and_or(w >> 8, 0x000F000Fu, 0x43004300u), z0);
        a[4 * j + q][3] = bf16x2_add(lop3_and_or(w >> 12, 0x000F000Fu, 0x43004300u), z1);
      }
    }
  } else {
    sc0 = sc1 = 1.f;
#pragma unroll
    for (int j = 0; j < 4; ++j) {  // 4 chunks of 32 columns
      const uint4 c = wl[j * 32];
      const uint32_t words[4] = {c.x, c.y, c.z, c.w};
#pragma unroll
      for (int h = 0; h < 2; ++h) {  // k16 step 2j + h: bytes a0 a2 a1 a3, a4 a6 a5 a7
        const uint32_t lo = words[2 * h], hi = words[2 * h + 1];
        a[2 * j + h][0] = int8x2_to_bf16x2(lo, 0);
        a[2 * j + h][1] = int8x2_to_bf16x2(lo, 1);
        a[2 * j + h][2] = int8x2_to_bf16x2(hi, 0);
        a[2 * j + h][3] = int8x2_to_bf16x2(hi, 1);
      }
    }
  }
}

// A unit's K wgmma steps into grp_acc, B = X's stage (ds: its descriptor, two 64-column atoms of N rows; a step
// covers 128 / K columns, 256 / K bytes of each row, so step ks starts at byte o = ks·256 / K of the group: atom
// o / 128, byte o % 128), issued by `products` (the first overwriting grp_acc) and waited for (wait_group 0: a
// batch kept in flight across the loop serializes every wgmma, kernels/gemm/NOTES.md).
template <int N, int K, class Products>
__device__ __forceinline__ void unit_batch(uint32_t (&a)[K][4], uint64_t ds, float (&grp_acc)[N / 2], Products products) {
  uint64_t bd[K];
#pragma unroll
  for (int ks = 0; ks < K; ++ks) {
    const int o = ks * (256 / K);
    bd[ks] = ds + uint64_t(((o / 128) * (N * 128) + o % 128) / 16);
  }
  wgmma_rs::pin(a, bd);
  wgmma_rs::fence();
  products(bd);
  wgmma_rs::commit();
  wgmma_rs::wait<0>();
  wgmma_rs::keep(a);
  wgmma_rs::fence_operand(grp_acc);
}

// int4, int8: the unit's 8 k16 steps of wgmma on the dequantized fragments.
template <int N>
__device__ __forceinline__ void mma_unit(uint32_t (&a)[8][4], uint64_t ds, float (&grp_acc)[N / 2]) {
  unit_batch<N>(a, ds, grp_acc, [&](const uint64_t (&bd)[8]) {
    wgmma_rs::bf16<N, 0>(grp_acc, a[0], bd[0]);
#pragma unroll
    for (int ks = 1; ks < 8; ++ks) wgmma_rs::bf16<N, 1>(grp_acc, a[ks], bd[ks]);
  });
}

// 2:4 (wgmma_tma only): the unit's 4 k32 steps of wgmma.sp, A the compressed fragments as stored (quant.h:
// this lane's 16 bytes of each of its warp's 4 chunks, no conversion), e the metadata word of each step, pinned
// before the batch and kept to its wait as the fragments are.
template <int N>
__device__ __forceinline__ void mma_unit_sparse(uint32_t (&a)[4][4], uint32_t (&e)[4], uint64_t ds,
                                                float (&grp_acc)[N / 2]) {
#pragma unroll
  for (int j = 0; j < 4; ++j) asm volatile("" : "+r"(e[j])::"memory");
  unit_batch<N>(a, ds, grp_acc, [&](const uint64_t (&bd)[4]) {
    wgmma_rs::sp_bf16<N, 0>(grp_acc, a[0], bd[0], e[0]);
#pragma unroll
    for (int j = 1; j < 4; ++j) wgmma_rs::sp_bf16<N, 1>(grp_acc, a[j], bd[j], e[j]);
  });
#pragma unroll
  for (int j = 0; j < 4; ++j) asm volatile("" ::"r"(e[j]) : "memory");
}

// acc[4i + e] = rows (g, g + 8) (e / 2) x tokens 8i + 2t + e % 2 (the wgmma accumulator layout).
template <int N>
__device__ __forceinline__ void scale_in(float (&acc)[N / 2], const float (&grp_acc)[N / 2], float sc0, float sc1) {
#pragma unroll
  for (int e = 0; e < N / 8; ++e) {
    acc[4 * e + 0] = fmaf(sc0, grp_acc[4 * e + 0], acc[4 * e + 0]);
    acc[4 * e + 1] = fmaf(sc0, grp_acc[4 * e + 1], acc[4 * e + 1]);
    acc[4 * e + 2] = fmaf(sc1, grp_acc[4 * e + 2], acc[4 * e + 2]);
    acc[4 * e + 3] = fmaf(sc1, grp_acc[4 * e + 3], acc[4 * e + 3]);
  }
}

// A shared tile's partial sums in the workspace, in the accumulators' order: [tile][warp][n8 tile i][lane][4], so a
// warp's reduction of one n8 tile is 512 contiguous bytes (weight_only_workspace_bytes sizes it: row tiles x 128 x N).
// n8 tile i of this thread's four sums lies kWoPartialN8 · i floats on.
constexpr int kWoPartialN8 = 32 * 4;
__device__ __forceinline__ int64_t wo_partial_index(int tile, int warp, int lane, int n_tokens) {
  return (int64_t(tile) * (kWoBlockRows / 16) + warp) * (n_tokens / 8) * kWoPartialN8 + lane * 4;
}

// A tile's stretch ends: store it (whole: this block summed every group of the tile), or add it into
// the workspace, the last block of the tile converting it and leaving workspace and counter zeroed. acc
// is zero afterwards. int8's channel scales multiply here (int4's group scales came in with each unit,
// 2:4 has none). sync(): a barrier of every thread that calls this (the block's consumers); thread
// `leader` among them counts; last_flag: a shared int.
template <WeightFormat F, int N, class Sync>
__device__ __forceinline__ void write_out(const WoSm90Params& p, float (&acc)[N / 2], int tile, bool whole, int warp,
                                          int lane, bool leader, int& last_flag, Sync sync) {
  const int g = lane / 4, t = lane % 4, r0 = tile * kWoBlockRows + warp * 16 + g, groups = p.k / kWoGroup;
  if constexpr (F == WeightFormat::int8) {  // the channel scales
    const float* sc = static_cast<const float*>(p.scales);
    const float c0 = r0 < p.n ? __ldg(sc + r0) : 0.f, c1 = r0 + 8 < p.n ? __ldg(sc + r0 + 8) : 0.f;
#pragma unroll
    for (int i = 0; i < N / 8; ++i) {
      acc[4 * i + 0] *= c0;
      acc[4 * i + 1] *= c0;
      acc[4 * i + 2] *= c1;
      acc[4 * i + 3] *= c1;
    }
  }
  auto each = [&](auto&& f) {
#pragma unroll
    for (int i = 0; i < N / 8; ++i)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int token = 8 * i + 2 * t + (e & 1), row = r0 + 8 * (e >> 1);
        if (token < p.m && row < p.n) f(int64_t(token) * p.n + row, acc[4 * i + e]);
      }
  };
  if (whole) {
    each([&](int64_t o, float v) { p.y[o] = __float2bfloat16_rn(v); });
  } else {
    // The sums go to L2 as vector reductions (red.add.v4.f32: nothing waits for them) in the accumulators' own order
    // (wo_partial_index: a warp's 32 lanes' four sums of one n8 tile side by side, 512 bytes), a quarter of
    // the operations of one fp32 atomic per sum; the barrier orders every thread's before the leader's fence, which
    // is cumulative: one fence a block, not one a thread.
    float* part = p.partial + wo_partial_index(tile, warp, lane, N);
#pragma unroll
    for (int i = 0; i < N / 8; ++i)
      asm volatile("red.global.add.v4.f32 [%0], {%1, %2, %3, %4};\n" ::"l"(part + i * kWoPartialN8), "f"(acc[4 * i + 0]),
                   "f"(acc[4 * i + 1]), "f"(acc[4 * i + 2]), "f"(acc[4 * i + 3])
                   : "memory");
    sync();
    if (leader) {
      // Unit u lies in block floor(((u + 1)·blocks − 1) / units): the blocks that share the tile.
      auto block_of = [&](int u) { return int((int64_t(u + 1) * p.blocks - 1) / p.units); };
      const int segments = block_of((tile + 1) * groups - 1) - block_of(tile * groups) + 1;
      __threadfence();
      last_flag = atomicAdd(p.counters + tile, 1) == segments - 1;
      __threadfence();
    }
    sync();
    if (last_flag) {
      // Every sum is loaded before any is stored (one L2 round trip), then converted; the workspace is left zero.
#pragma unroll
      for (int i = 0; i < N / 8; ++i) {
        const float4 v = __ldcg(reinterpret_cast<const float4*>(part + i * kWoPartialN8));
        acc[4 * i + 0] = v.x, acc[4 * i + 1] = v.y, acc[4 * i + 2] = v.z, acc[4 * i + 3] = v.w;
      }
      each([&](int64_t o, float v) { p.y[o] = __float2bfloat16_rn(v); });
#pragma unroll
      for (int i = 0; i < N / 8; ++i) __stcg(reinterpret_cast<float4*>(part + i * kWoPartialN8), make_float4(0.f, 0.f, 0.f, 0.f));
      if (leader) p.counters[tile] = 0;
    }
  }
#pragma unroll
  for (int e = 0; e < N / 2; ++e) acc[e] = 0.f;
}

}  // namespace
}  // namespace inferlab
