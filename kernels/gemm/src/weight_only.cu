// Weight-only and 2:4 linear layers for the decode regime (m = 1..64 tokens), one kernel family:
// Y[m, n] = X[m, k] · W[n, k]ᵀ with W packed as quant.h lays it out.
//
// The weight is the A operand of the tensor cores (16 output rows per warp), the tokens the B
// operand (n8 tiles: m padded to 8·MT). A block is 8 warps over a range of k: 128 / S rows, S warps
// (k_warps, 1..8) sharing each 16-row tile, each over its 1/S of the block's range:
//   1. each warp issues the 16-byte loads of its first kDepth chunks (512 B per warp per chunk)
//      straight into registers; the packed weight never goes through shared memory, and a chunk
//      is exactly one lane's A fragments (quant.h), so no shuffle is needed;
//   2. the block's X[0:8·MT, k range] (rows past m zero) and int4's scales of the range go to shared
//      memory with cp.async (rows padded by 16 bytes: conflict-free ldmatrix), one barrier; with shared
//      tiles (m = 1) X's one row, every column of B reading it (a column of B reaches only its own
//      column of the products, whose outputs past m are not stored); with one tile a block each warp
//      stages its own slice of that row and its scales ahead of its weight (Share::warp);
//   3. per chunk: dequantize in registers — int4: (w >> 4i) & 0x000F000F | 0x43004300 is a bf16x2
//      of 128 + q exactly (the 128 and the zero point leave at the group's end with the group's sum
//      of X); int8 on shared tiles (m = 1): 1024 + q + 128 built as an fp16's bits, minus the constant,
//      against X's row converted to fp16 (scaled per slice) once in shared memory; else a pair's bytes
//      (quant.h's order a0 a2 a1 a3) as bf16x2 halves 0x4300 | (b & 0x7F) less 0x4300 | (b & 0x80), two
//      lop3 and one FMA (dequant.cuh) — then mma.sync m16n8k16; sparse24: the compressed
//      values and their metadata go to mma.sp m16n8k32 as they are. int4's group scale and int8's channel scale multiply the fp32 accumulators (per group
//      and at the end), so the tensor cores see small integers (int4: 128 + q), exactly;
//      the chunk kDepth ahead is loaded as soon as a register slot frees;
//   4. the S warps of a tile sum their partial sums in shared memory (one barrier); split-k: the
//      block's sums are added (fp32 atomics) into the workspace; the last block of a row tile to finish
//      (a counter, one thread's acquire-release atomic) converts to bf16 and leaves the workspace zeroed;
//      or, named (SplitReduce::cluster), the row tile's split blocks sum in one cluster's shared memory.
// The model of its cost is sim/linear.h linear_cost (the packed bytes, once).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <string>

#include "inferlab/kernels/common/check.h"
#include "inferlab/kernels/common/kernel_attributes.h"
#include "inferlab/kernels/common/sm90_async.cuh"
#include "inferlab/kernels/gemm/linear.h"
#include "inferlab/sim/error.h"
#include "inferlab/sim/kernels.h"
#include "dequant.cuh"
#include "mma_sync.cuh"
#include "weight_only.h"

namespace inferlab {
namespace {

constexpr int kWarps = 8, kThreads = kWarps * 32, kBlockRows = kWarps * 16;
constexpr int kUint4PerChunk = 32;  // 512 bytes

template <WeightFormat F>
struct Format;
template <>
struct Format<WeightFormat::int4> {
  static constexpr int kCols = 64;  // weight columns per chunk
};
template <>
struct Format<WeightFormat::int8> {
  static constexpr int kCols = 32;
};
template <>
struct Format<WeightFormat::sparse24> {
  static constexpr int kCols = 32;
};

struct WoParams {
  const __nv_bfloat16* x;   // [m, k]
  const uint4* w;           // packed chunks
  const void* scales;       // int8: float [n]; int4: uint32 [k/128][n]
  const uint32_t* meta;     // sparse24: uint32 [n/16][k/32][16]
  __nv_bfloat16* y;         // [m, n]
  float* partial;           // split-k: [m, n] fp32, zero between launches
  int* counters;            // split-k: [row tiles]
  int m, n, k, k_per_block, split_k, k_warps;
  int received_offset;      // split-k in a cluster: the received sums' byte offset in dynamic shared memory
};

__device__ __forceinline__ uint32_t smem_u32(const void* p) { return uint32_t(__cvta_generic_to_shared(p)); }

__device__ __forceinline__ uint4 load_stream(const uint4* p) {  // read once: keep it out of L1
  uint4 v;
  asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p));
  return v;
}

__device__ __forceinline__ void mma_sp_bf16(float (&c)[4], const uint4& a, const uint32_t (&b)[4], uint32_t meta) {
  asm volatile(
      "mma.sp.sync.aligned.m16n8k32.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9,%10,%11}, "
      "{%0,%1,%2,%3}, %12, 0x0;\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a.x), "r"(a.y), "r"(a.z), "r"(a.w), "r"(b[0]), "r"(b[1]), "r"(b[2]), "r"(b[3]), "r"(meta));
}

// Split-k in a cluster (Hopper): the blocks of a row tile's k splits are one cluster along y.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#define INFERLAB_WO_CLUSTER 1
using sm90::cluster_addr;  // a shared::cta address as the shared::cluster address of the same variable in block `rank`
__device__ __forceinline__ void cluster_arrive_relaxed() { asm volatile("barrier.cluster.arrive.relaxed.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void cluster_wait() { asm volatile("barrier.cluster.wait.aligned;\n" ::: "memory"); }
// One fp32 into another block's shared memory, its 4 bytes completing on that block's mbarrier.
__device__ __forceinline__ void st_async_f32(uint32_t addr, float v, uint32_t bar) {
  asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.f32 [%0], %1, [%2];\n" ::"r"(addr), "f"(v), "r"(bar)
               : "memory");
}
__device__ __forceinline__ void received_init(uint64_t* bar, uint32_t bytes) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;\n"
               "mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n"
               "fence.mbarrier_init.release.cluster;\n" ::"r"(smem_u32(bar)), "r"(bytes)
               : "memory");
}
__device__ __forceinline__ void received_wait(uint64_t* bar) { sm90::mbar_wait_cluster(bar, 0); }
#endif

// X tile element (row, col) in shared memory: rows of KB columns padded by 16 bytes, so that the 8
// rows one ldmatrix reads at one column fall in distinct banks.
__device__ __forceinline__ int xs_index(int row, int col, int kb) { return row * (kb + 8) + col; }

// Blocks per SM the register budget must allow (B: sim/kernels.h weight_only_mma_blocks_per_sm), and the weight
// chunks each warp keeps in flight: m <= 8: 4 blocks of 8 warps x 6 chunks (96 KB in flight per SM, 64
// registers); up to 32 tokens: 2 blocks x 8 chunks (x 4 at 64 tokens, whose accumulators need the registers), or at
// 16 tokens 4 blocks x 4 chunks (64 registers: int4 spills 8 bytes; at 6 chunks 80).
template <int MT, int B>
constexpr int depth() { return MT == 1 ? 6 : MT == 2 ? (B == 4 ? 4 : 8) : MT == 8 ? 4 : 8; }

// Share::none: every warp has its own 16 rows (the kernel before shared tiles, w3: its SASS unchanged). Share::block:
// the warps of a tile share the block's k range (p.k_warps of them, m = 1: sim/kernels.h weight_only_k_warps), X and
// int4's scales staged by the block. Share::warp: one tile a block (k_warps = 8), each warp stages its own slice of X
// and its scales ahead of its weight and waits for them alone (no block barrier before the loop: int4 4096 x 4096
// 9.47 -> 8.93 us, 2:4 11.4 -> 11.0 in the compression runs, 1024 x 4096 unchanged; the same staging with two tiles a block,
// 14336 x 4096, measured 15-20% slower without a block barrier before the loop, and no faster than Share::block with
// one: kernels/gemm/NOTES.md w5).
enum class Share { none, block, warp };
// kCluster: split-k summed in a cluster (SplitReduce::cluster) instead of by atomics; its own instantiations, so that
// the atomics kernels' SASS stays as it was (with the cluster's code as a branch on a parameter, the plain kernel's
// m = 1 loop took 387-390 instructions against 349-351 at its 64 registers).
template <WeightFormat F, int MT, int B, Share kShare, bool kCluster = false>
__global__ void __launch_bounds__(kThreads, B) weight_only_kernel(const __grid_constant__ WoParams p) {
  constexpr bool kShared = kShare != Share::none, kWarpStaged = kShare == Share::warp;
  static_assert(!kShared || MT == 1, "shared tiles run at m = 1");
  constexpr int C = Format<F>::kCols, MP = 8 * MT, kDepth = depth<MT, B>();
  constexpr int XR = kShared ? 1 : MP;  // X's rows staged (past m zero)
  // int8 on shared tiles (m = 1): the weight as fp16 (int8x2_to_f16x2: two instructions a value pair against three for
  // bf16) and X's row converted to fp16 in shared memory before the loop, scaled per slice (below). Not on the plain
  // kernel: with up to 8 token rows to convert the prologue cost more than the loop saved (int8 4096 x 4096 at m = 8
  // 14.0 -> 20.5 us), and at m = 1 on 4096 x 14336 (split-k 16) it measured the same (26.2 -> 26.1 us), while shared
  // tiles over a quarter of the splits gained 0.4-0.6 us there: the plan gives int8 at m = 1 shared tiles wherever the
  // plain kernel would split k four ways or more (sim/src/kernels.cpp plan_weight_only; NOTES.md w9).
  constexpr bool kF16 = F == WeightFormat::int8 && kShared;
  extern __shared__ __align__(128) unsigned char smem[];
  // [X: XR rows of KB + 8][int4: scales [KB/128][BR], group sums [KB/128][MP]; int8, shared: |X| maxima [8]]
  // [sums [8][4 MT][32]]
  const int KB = p.k_per_block, S = kShared ? p.k_warps : 1, BR = kShared ? kBlockRows / S : kBlockRows;
  __nv_bfloat16* xs = reinterpret_cast<__nv_bfloat16*>(smem);
  uint32_t* ssz = reinterpret_cast<uint32_t*>(smem + XR * (KB + 8) * 2);
  float* xsum = reinterpret_cast<float*>(ssz + (KB / 128) * BR);
  uint32_t* xmax = ssz;  // kF16: [warp] the largest |x| of the columns the warp converts, as bf16 bits
  float* sums = F == WeightFormat::int4 ? xsum + (KB / 128) * MP : reinterpret_cast<float*>(ssz + (kF16 ? 8 : 0));

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const int tile = warp / S, slice = warp % S;  // this warp's 16-row tile in the block, its share of k
  const int row_tile = blockIdx.x, row0 = row_tile * BR + tile * 16;
  const int k0 = blockIdx.y * KB, kw0 = slice * (KB / S), chunks = KB / S / C;  // kw0: from k0
  const bool active = row0 < p.n;

  // Split-k in a cluster (p.cluster): this block owns rows [own0, own0 + share) of the row tile and receives every
  // split's sums of them (split x m x its rows past n excluded, in fp32) on `received`; the cluster's barrier is
  // arrived at here and waited for before the first send (every block's mbarrier initialized), long after.
  __shared__ __align__(8) uint64_t received;
  auto owned = [&](int& own0, int& share) {  // this block's rows, those past the tile or n excluded
    share = (BR + p.split_k - 1) / p.split_k, own0 = row_tile * BR + int(blockIdx.y) * share;
    return min(max(min(p.n, (row_tile + 1) * BR) - own0, 0), share);
  };
#ifdef INFERLAB_WO_CLUSTER
  if constexpr (kCluster) {
    if (threadIdx.x == 0) {
      int own0, share;
      received_init(&received, uint32_t(p.split_k * p.m * owned(own0, share) * 4));
    }
    cluster_arrive_relaxed();
  }
#endif

  // 0. Share::warp (S = 8, one tile, every warp active): this warp's slice of X and its groups' scales, ahead of
  // its weight (a few hundred bytes, not queued behind the block's first chunks).
  if constexpr (kWarpStaged) {
    for (int i = lane; i < KB / S / 8; i += 32) cp_async_16(xs + kw0 + i * 8, p.x + k0 + kw0 + i * 8, true);
    if constexpr (F == WeightFormat::int4) {
      const uint32_t* sg = static_cast<const uint32_t*>(p.scales);
      for (int i = lane; i < KB / S / 128 * 4; i += 32) {  // 16 rows x its groups: 4 copies a group
        const int grp = kw0 / 128 + i / 4, r4 = (i % 4) * 4, row = row0 + r4;
        cp_async_16(ssz + grp * BR + r4, sg + int64_t(k0 / 128 + grp) * p.n + min(row, p.n - 4), row < p.n);
      }
    }
    asm volatile("cp.async.commit_group;\n" ::: "memory");
  }

  // 1. The weight: this warp's chunks are contiguous from (row0 / 16, (k0 + kw0) / C).
  const uint4* wp = p.w + (int64_t(row0 / 16) * (p.k / C) + (k0 + kw0) / C) * kUint4PerChunk + lane;
  const uint32_t* mp = nullptr;
  if constexpr (F == WeightFormat::sparse24)
    mp = p.meta + (int64_t(row0 / 16) * (p.k / 32) + (k0 + kw0) / 32) * 16 + g * 2 + (t & 1);
  uint4 ring[kDepth];
  uint32_t mring[kDepth];
#pragma unroll
  for (int i = 0; i < kDepth; ++i) {
    if (active && i < chunks) {
      ring[i] = load_stream(wp + i * kUint4PerChunk);
      if constexpr (F == WeightFormat::sparse24) mring[i] = t < 2 ? __ldg(mp + i * 16) : 0u;
    }
  }

  // int8's channel scales of the warp's rows: on shared tiles requested with the first chunks (loaded after the loop they
  // are one more dependent DRAM round trip at every block's end); the plain kernel loads them after its loop, where
  // holding them through it cost its 64 registers 11% more loop instructions (390 against 351, sass-counts.py).
  float c0s = 1.f, c1s = 1.f;
  auto channel_scales = [&] {
    const float* sc = static_cast<const float*>(p.scales);
    c0s = __ldg(sc + row0 + g), c1s = __ldg(sc + row0 + g + 8);
  };
  if constexpr (kF16) {
    if (active) channel_scales();
  }

  // 2. X[0:m, k0:k0+KB] and int4's scales of the range into shared memory (requested after the weight's first
  // chunks: before them measured the same for int4 and 8% slower for int8 at m = 1, NOTES.md w4).
  if constexpr (!kWarpStaged) {
    for (int i = threadIdx.x; i < XR * (KB / 8); i += kThreads) {  // rows past m zero
      const int r = i / (KB / 8), c8 = i % (KB / 8);
      const bool ok = r < p.m;
      cp_async_16(xs + xs_index(r, c8 * 8, KB), p.x + int64_t(ok ? r : 0) * p.k + k0 + c8 * 8, ok);
    }
    if constexpr (F == WeightFormat::int4) {
      const uint32_t* sg = static_cast<const uint32_t*>(p.scales);
      for (int i = threadIdx.x; i < (KB / 128) * (BR / 4); i += kThreads) {
        const int grp = i / (BR / 4), r4 = (i % (BR / 4)) * 4;
        const int row = row_tile * BR + r4;
        cp_async_16(ssz + grp * BR + r4, sg + int64_t(k0 / 128 + grp) * p.n + min(row, p.n - 4), row < p.n);
      }
    }
    asm volatile("cp.async.commit_group;\ncp.async.wait_group 0;\n" ::: "memory");
    __syncthreads();
  } else {
    asm volatile("cp.async.wait_group 0;\n" ::: "memory");
    __syncwarp();
  }
  // int8 on shared tiles (m = 1): X's row to fp16 times 2^e, e per slice (the block's 1/S share of k that a warp's
  // chunks cover), so that the slice's largest |x| lies in [2^14, 2^15): bf16's 8 significant bits fit fp16's 11,
  // values below 2^-14 of the scaled range become fp16 subnormals (an error below 2^-39 of the largest), none
  // overflows. The products q x 2^e are exact in the fp32 accumulators; 2^-e leaves with the channel scale, per slice
  // (before the slices' sums). Each warp converts 1/8 of the row: its slice's (8/S warps a slice).
  float x_inv = 1.f;  // 2^-e of this warp's slice
  if constexpr (kF16) {
    const int cv0 = (warp % S) * (KB / S) + (warp / S) * (KB / 8);
    uint32_t mx = 0;  // the magnitude bits of bf16 compare as integers
    for (int i = lane; i < KB / 64; i += 32) mx = bf16x8_max_bits(*reinterpret_cast<const uint4*>(xs + cv0 + i * 8), mx);
#pragma unroll
    for (int o = 16; o > 0; o /= 2) mx = max(mx, __shfl_xor_sync(0xffffffffu, mx, o));
    if constexpr (!kWarpStaged) {  // the slice's other warps' maxima
      if (lane == 0) xmax[warp] = mx;
      __syncthreads();
      for (int w2 = warp % S; w2 < kWarps; w2 += S) mx = max(mx, xmax[w2]);
    }
    float sc;
    fp16_range_scale(mx, sc, x_inv);
    for (int i = lane; i < KB / 64; i += 32) {
      uint4* pv = reinterpret_cast<uint4*>(xs + cv0 + i * 8);
      const uint4 v = *pv;
      *pv = bf16x8_to_f16x8(v, sc);
    }
    if constexpr (kWarpStaged) __syncwarp(); else __syncthreads();
  }

  if constexpr (F == WeightFormat::int4 && !kShared) {  // each group's sum of X per token (see the group's end)
    for (int i = threadIdx.x; i < (KB / 128) * MP; i += kThreads) {
      const int grp = i / MP, r = i % MP;
      const uint4* src = reinterpret_cast<const uint4*>(xs + xs_index(r, grp * 128, KB));
      float sum = 0.f;
#pragma unroll 4
      for (int j = 0; j < 16; ++j) {
        const uint4 v = src[j];
        for (uint32_t w : {v.x, v.y, v.z, v.w}) sum += __uint_as_float(w << 16) + __uint_as_float(w & 0xffff0000u);
      }
      xsum[i] = sum;
    }
    __syncthreads();
  }

  if constexpr (F == WeightFormat::int4 && kWarpStaged) {  // the warp's groups' sums of X (see the group's end)
    // Eight lanes a group (16 columns each, summed by shuffles), four groups a pass; all eight lanes write the sum to
    // the group's 8 token entries (every column of B is X's one row).
    for (int g0 = 0; g0 < KB / S / 128; g0 += 4) {
      const int grp = kw0 / 128 + g0 + lane / 8;
      const bool mine = g0 + lane / 8 < KB / S / 128;
      float sum = mine ? bf16x16_sum(reinterpret_cast<const uint4*>(xs + grp * 128 + (lane % 8) * 16)) : 0.f;
#pragma unroll
      for (int o = 1; o < 8; o *= 2) sum += __shfl_xor_sync(0xffffffffu, sum, o);
      if (mine) xsum[grp * MP + lane % 8] = sum;
    }
    __syncwarp();
  }
  if constexpr (F == WeightFormat::int4 && kShare == Share::block) {  // each group's sum of X (see the group's end)
    // Eight threads a (group, token): 16 columns each, summed across the eight by shuffles (a block's whole k
    // range of groups is summed before its loop: one thread a group was a 128-add chain, 0.9 us at k = 14336).
    const int groups = KB / 128;
    for (int i = threadIdx.x; i < groups * p.m * 8; i += kThreads) {
      const int part = i % 8, item = i / 8, grp = item / p.m, r = item % p.m;
      float sum = bf16x16_sum(reinterpret_cast<const uint4*>(xs + xs_index(r, grp * 128 + part * 16, KB)));
      const unsigned eight = 0xffu << (threadIdx.x & 24);  // the loop's bound is a multiple of 8: all eight run
#pragma unroll
      for (int o = 1; o < 8; o *= 2) sum += __shfl_xor_sync(eight, sum, o);
      if (part == 0) xsum[grp * MP + r] = sum;
    }
    for (int i = threadIdx.x; i < groups * (MP - p.m); i += kThreads)
      xsum[(i / (MP - p.m)) * MP + p.m + i % (MP - p.m)] = 0.f;
    __syncthreads();
  }

  // 3. The chunks.
  float acc[MT][4];
#pragma unroll
  for (int nt = 0; nt < MT; ++nt) acc[nt][0] = acc[nt][1] = acc[nt][2] = acc[nt][3] = 0.f;
  float grp_acc[MT][4];  // int4: the current group's sums of (128 + q) x
  // ldmatrix address of this lane: row 8·nt + lane % 8, columns 8 · (lane / 8) on from the step's k. With one
  // row staged (shared tiles, m = 1) every lane reads row 0: a column of B reaches only its own column of
  // the products, and the columns past m are not stored.
  const int lane_row = kShared ? 0 : (lane & 7);
  auto b_frag = [&](uint32_t (&b)[4], int nt, int kc) {
    ldmatrix_x4(b, xs + xs_index(8 * nt + lane_row, kc + 8 * (lane >> 3), KB));
  };

  if (active) {
    for (int c0 = 0; c0 < chunks; c0 += kDepth) {
#pragma unroll
      for (int i = 0; i < kDepth; ++i) {
        const int c = c0 + i;
        if (c >= chunks) break;
        const uint4 cur = ring[i];
        const int kc = kw0 + c * C;  // first column of the chunk in the block's range
        if constexpr (F == WeightFormat::int4) {
          if ((c & 1) == 0) {  // a group of 128 columns starts
#pragma unroll
            for (int nt = 0; nt < MT; ++nt) grp_acc[nt][0] = grp_acc[nt][1] = grp_acc[nt][2] = grp_acc[nt][3] = 0.f;
          }
          // (w >> 4i) & 0x000F000F | 0x43004300 is a bf16x2 of 128 + q (bf16 has 7 mantissa bits: a
          // nibble fits below the exponent only at bits 0-3 of each half); the group's end takes the
          // 128 and the zero point out with the group's sum of X.
          const uint32_t words[4] = {cur.x, cur.y, cur.z, cur.w};
#pragma unroll
          for (int j = 0; j < 4; j += 2) {
            uint32_t b[MT][4];
#pragma unroll
            for (int nt = 0; nt < MT; ++nt) b_frag(b[nt], nt, kc + 16 * j);
#pragma unroll
            for (int jj = 0; jj < 2; ++jj) {
              const uint32_t w = words[j + jj];
              const uint32_t a[4] = {lop3_and_or(w, 0x000F000Fu, 0x43004300u), lop3_and_or(w >> 4, 0x000F000Fu, 0x43004300u),
                                     lop3_and_or(w >> 8, 0x000F000Fu, 0x43004300u), lop3_and_or(w >> 12, 0x000F000Fu, 0x43004300u)};
#pragma unroll
              for (int nt = 0; nt < MT; ++nt) mma_bf16(grp_acc[nt], a, b[nt][2 * jj], b[nt][2 * jj + 1]);
            }
          }
          if ((c & 1) == 1) {  // the group ends: its sums are sum (128 + q) x; with X = sum x over the
            // group, s sum (q - z) x = s acc - s (128 + z) X (z is stored as 128 + z).
            const int grp = kc / 128;
            const uint32_t sz0 = ssz[grp * BR + tile * 16 + g], sz1 = ssz[grp * BR + tile * 16 + g + 8];
            const float s0 = __uint_as_float(sz0 << 16), s1 = __uint_as_float(sz1 << 16);
            const float c0 = s0 * __uint_as_float(sz0 & 0xffff0000u);
            const float c1 = s1 * __uint_as_float(sz1 & 0xffff0000u);
#pragma unroll
            for (int nt = 0; nt < MT; ++nt) {
              const float2 xs2 = *reinterpret_cast<const float2*>(xsum + grp * MP + 8 * nt + 2 * t);
              acc[nt][0] += s0 * grp_acc[nt][0] - c0 * xs2.x;
              acc[nt][1] += s0 * grp_acc[nt][1] - c0 * xs2.y;
              acc[nt][2] += s1 * grp_acc[nt][2] - c1 * xs2.x;
              acc[nt][3] += s1 * grp_acc[nt][3] - c1 * xs2.y;
            }
          }
        } else if constexpr (F == WeightFormat::int8) {
          uint32_t b[MT][4];
#pragma unroll
          for (int nt = 0; nt < MT; ++nt) b_frag(b[nt], nt, kc);
          const uint32_t words[4] = {cur.x, cur.y, cur.z, cur.w};
#pragma unroll
          for (int jj = 0; jj < 2; ++jj) {
            const uint32_t lo = words[2 * jj], hi = words[2 * jj + 1];  // bytes a0 a2 a1 a3, a4 a6 a5 a7
            if constexpr (kF16) {
              const uint32_t a[4] = {int8x2_to_f16x2(lo, 0), int8x2_to_f16x2(lo, 1), int8x2_to_f16x2(hi, 0),
                                     int8x2_to_f16x2(hi, 1)};
              mma_f16(acc[0], a, b[0][2 * jj], b[0][2 * jj + 1]);
            } else {
              const uint32_t a[4] = {int8x2_to_bf16x2(lo, 0), int8x2_to_bf16x2(lo, 1), int8x2_to_bf16x2(hi, 0),
                                     int8x2_to_bf16x2(hi, 1)};
#pragma unroll
              for (int nt = 0; nt < MT; ++nt) mma_bf16(acc[nt], a, b[nt][2 * jj], b[nt][2 * jj + 1]);
            }
          }
        } else {  // sparse24: one k32 step per chunk
          uint32_t b[MT][4];
#pragma unroll
          for (int nt = 0; nt < MT; ++nt) b_frag(b[nt], nt, kc);
#pragma unroll
          for (int nt = 0; nt < MT; ++nt) mma_sp_bf16(acc[nt], cur, b[nt], mring[i]);
        }
        if (c + kDepth < chunks) {  // refill the slot just used
          ring[i] = load_stream(wp + (c + kDepth) * kUint4PerChunk);
          if constexpr (F == WeightFormat::sparse24) mring[i] = t < 2 ? __ldg(mp + (c + kDepth) * 16) : 0u;
        }
      }
    }
    if constexpr (F == WeightFormat::int8) {  // the channel scales (and X's 2^-e, kF16)
      if constexpr (!kF16) channel_scales();
      const float r0 = c0s * x_inv, r1 = c1s * x_inv;
#pragma unroll
      for (int nt = 0; nt < MT; ++nt) {
        acc[nt][0] *= r0;
        acc[nt][1] *= r0;
        acc[nt][2] *= r1;
        acc[nt][3] *= r1;
      }
    }
  }

  // 4. The S warps of a tile: slices 1..S-1 leave their sums in shared memory, slice 0 adds them.
  if (kShared && S > 1) {
    if (slice > 0)
#pragma unroll
      for (int nt = 0; nt < MT; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) sums[(warp * 4 * MT + 4 * nt + e) * 32 + lane] = acc[nt][e];
    __syncthreads();
    if (slice == 0)
      for (int s = 1; s < S; ++s)
#pragma unroll
        for (int nt = 0; nt < MT; ++nt)
#pragma unroll
          for (int e = 0; e < 4; ++e) acc[nt][e] += sums[((warp + s) * 4 * MT + 4 * nt + e) * 32 + lane];
  }
  // Out: acc[nt] = rows (g, g+8) x tokens (8 nt + 2t, + 1).
  auto for_outputs = [&](auto&& f) {
#pragma unroll
    for (int nt = 0; nt < MT; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int mi = 8 * nt + 2 * t + (e & 1), row = row0 + g + 8 * (e >> 1);
        if (active && slice == 0 && mi < p.m) f(mi, row, acc[nt][e]);
      }
  };
  if (p.split_k == 1) {
    for_outputs([&](int mi, int row, float v) { p.y[int64_t(mi) * p.n + row] = __float2bfloat16_rn(v); });
    return;
  }
#ifdef INFERLAB_WO_CLUSTER
  if constexpr (kCluster) {
    // Every split's sums go to their row's owner (the cluster's rank = blockIdx.y: the cluster spans the grid's y),
    // at [split][token][row within the share]; the owner sums the splits in order (the same order every launch) and
    // converts. A block leaves once its own rows have arrived: the sums it sent are the receivers' to wait for.
    float* got = reinterpret_cast<float*>(smem + p.received_offset);
    int own0, share;
    const int own_rows = owned(own0, share), me = int(blockIdx.y);
    cluster_wait();
    for_outputs([&](int mi, int row, float v) {
      const int local = row - row_tile * BR;
      const uint32_t owner = uint32_t(local / share);
      st_async_f32(cluster_addr(got + (me * p.m + mi) * share + local % share, owner), v,
                   cluster_addr(&received, owner));
    });
    if (own_rows > 0) {
      received_wait(&received);
      for (int i = threadIdx.x; i < p.m * own_rows; i += kThreads) {
        const int mi = i / own_rows, j = i % own_rows;
        float sum = 0.f;
        for (int s2 = 0; s2 < p.split_k; ++s2) sum += got[(s2 * p.m + mi) * share + j];
        p.y[int64_t(mi) * p.n + own0 + j] = __float2bfloat16_rn(sum);
      }
    }
    return;
  }
#else
  if constexpr (kCluster) __trap();  // built without clusters (below sm_90): the plan never launches it here
#endif
  for_outputs([&](int mi, int row, float v) { atomicAdd(p.partial + int64_t(mi) * p.n + row, v); });
  // The tile's counter, by one thread after the block's barrier, acquire-release at GPU scope: the barrier orders the
  // block's atomics before it and the release is cumulative, so the sums are performed before the count; the last
  // block's acquire (and the barrier after it) orders its read-back after every block's sums. Before w10 every thread
  // fenced its own atomics (MEMBAR.SC.GPU) before the count and again in the last block: every split-k launch 2-9%
  // slower (kernels/gemm/NOTES.md w10; SASS now MEMBAR.ALL.GPU, ATOMG, CCTL.IVALL in one thread).
  __shared__ int last;
  __syncthreads();
  if (threadIdx.x == 0) {
    int before;
    asm volatile("atom.acq_rel.gpu.global.add.s32 %0, [%1], 1;\n" : "=r"(before) : "l"(p.counters + row_tile) : "memory");
    last = before == p.split_k - 1;
  }
  __syncthreads();
  if (!last) return;
  const int rows = min(BR, p.n - row_tile * BR);
  for (int i = threadIdx.x; i < p.m * rows; i += kThreads) {
    const int mi = i / rows, row = row_tile * BR + i % rows;
    float* cell = p.partial + int64_t(mi) * p.n + row;
    p.y[int64_t(mi) * p.n + row] = __float2bfloat16_rn(__ldcg(cell));
    *cell = 0.f;
  }
  if (threadIdx.x == 0) p.counters[row_tile] = 0;
}

// A cluster of plan.cluster blocks along y; its dynamic shared memory the kernel's own (base bytes) with the received
// sums after it (at a 16-byte boundary).
template <auto kernel>
void launch_cluster(const WoParams& wp, const LinearPlan& plan, dim3 grid, int base, int with_received, cudaStream_t stream) {
  static KernelSmem attr;
  const int cluster_smem = with_received + 16;
  attr.ensure(kernel, cluster_smem, "linear (weight-only, split-k in a cluster)");  // also refuses a device past 63
  static std::atomic<bool> large_cluster_allowed[KernelSmem::kMaxDevices];  // beyond 8 blocks, per device
  if (plan.cluster > 8) {
    int device = 0;
    INFERLAB_CUDA_CHECK(cudaGetDevice(&device));
    if (!large_cluster_allowed[device].load()) {
      INFERLAB_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
      large_cluster_allowed[device].store(true);
    }
  }
  WoParams cp = wp;
  cp.received_offset = (base + 15) / 16 * 16;
  cudaLaunchConfig_t config{};
  config.gridDim = grid;
  config.blockDim = dim3(kThreads);
  config.dynamicSmemBytes = std::size_t(cluster_smem);
  config.stream = stream;
  cudaLaunchAttribute cluster_dim{};
  cluster_dim.id = cudaLaunchAttributeClusterDimension;
  cluster_dim.val.clusterDim.x = 1;
  cluster_dim.val.clusterDim.y = unsigned(plan.cluster);
  cluster_dim.val.clusterDim.z = 1;
  config.attrs = &cluster_dim;
  config.numAttrs = 1;
  INFERLAB_CUDA_CHECK(cudaLaunchKernelEx(&config, kernel, cp));
  INFERLAB_CHECK_LAUNCH();
}

template <WeightFormat F, int MT, int B, Share kShare = Share::none>
void launch(const WoParams& wp, const LinearPlan& plan, cudaStream_t stream) {
  const int smem = int(weight_only_smem_bytes(F, wp.m, MT, plan.k_per_block, plan.k_warps));
  const int block_rows = kBlockRows / plan.k_warps;
  const dim3 grid(unsigned((wp.n + block_rows - 1) / block_rows), unsigned(plan.split_k));
  if (plan.cluster <= 1) {
    auto kernel = weight_only_kernel<F, MT, B, kShare>;
    static KernelSmem attr;
    attr.ensure(kernel, smem, "linear (weight-only)");
    kernel<<<grid, kThreads, smem, stream>>>(wp);
    INFERLAB_CHECK_LAUNCH();
    return;
  }
  // The split_k blocks of a row tile as one cluster; the sums they receive after X and the rest. (The plan names a
  // cluster at 1 to 16 tokens on split tiles only: weight_only_cluster_blocks.)
  if constexpr (kShare == Share::warp || MT > 2) {
    throw Error("linear: split-k in a cluster runs at 1 to 16 tokens with a row tile's warps on their own k or sharing it");
  } else {
    launch_cluster<weight_only_kernel<F, MT, B, kShare, true>>(wp, plan, grid, smem,
                                                                int(weight_only_smem_bytes(F, wp.m, MT, plan.k_per_block,
                                                                                           plan.k_warps, plan.cluster)),
                                                                stream);
  }
}

template <WeightFormat F>
void launch_mt(const WoParams& wp, const LinearPlan& plan, cudaStream_t stream) {
  switch (plan.m_tiles) {
    case 1:
      if (plan.k_warps == kWarps) return launch<F, 1, 4, Share::warp>(wp, plan, stream);
      return plan.k_warps > 1 ? launch<F, 1, 4, Share::block>(wp, plan, stream) : launch<F, 1, 4>(wp, plan, stream);
    case 2: return plan.blocks_per_sm == 4 ? launch<F, 2, 4>(wp, plan, stream) : launch<F, 2, 2>(wp, plan, stream);
    case 4: return launch<F, 4, 2>(wp, plan, stream);
    default: return launch<F, 8, 2>(wp, plan, stream);
  }
}

}  // namespace

LinearPlan plan_weight_only(const LinearParams& p, int sm_count, int compute_capability) {
  // The plan is sim/kernels.h plan_weight_only (the model charges the same grid): the kernel by m, and
  // for mma m_tiles and the split_k that keeps the grid in one wave (measured reasons:
  // kernels/gemm/NOTES.md); LinearParams::split_k picks another (the candidates of that measurement).
#ifdef INFERLAB_HAVE_SM90A
  constexpr bool kWgmmaBuilt = true;
#else
  constexpr bool kWgmmaBuilt = false;
#endif
  const bool wgmma_here = kWgmmaBuilt && compute_capability == 90;
  const bool hopper_kernel = p.kernel == WeightOnlyKernel::wgmma || p.kernel == WeightOnlyKernel::wgmma_tma ||
                             p.kernel == WeightOnlyKernel::mma_tma;
  const std::string name = weight_only_kernel_name(p.kernel);
  if (hopper_kernel && !wgmma_here)
    throw Error(kWgmmaBuilt ? "linear: the " + name + " weight-only kernel needs compute capability 9.0 (this GPU: " +
                                  std::to_string(compute_capability / 10) + "." + std::to_string(compute_capability % 10) + ")"
                            : "linear: the " + name + " weight-only kernel was not built (CMAKE_CUDA_ARCHITECTURES without 90)");
  // The plan's grid, or a candidate split's (LinearParams::split_k), and how its blocks sum: one function for the kernel
  // and the model (sim/kernels.h plan_weight_only, which also refuses a split that does not fit and a named reduce that
  // cannot run).
  const WeightOnlyPlan wp = inferlab::plan_weight_only(p.format, p.m, p.n, p.k, sm_count, p.kernel, wgmma_here,
                                                       p.split_reduce, p.split_k);
  LinearPlan plan;
  plan.kernel = wp.kernel;
  plan.m_tiles = wp.m_tiles;
  plan.blocks_per_sm = wp.blocks_per_sm;
  plan.k_per_block = wp.k_per_block;
  if (wp.kernel == WeightOnlyKernel::wgmma || wp.kernel == WeightOnlyKernel::wgmma_tma) {
    plan.tokens = wp.tokens;
    plan.ctas = wp.ctas;
    return plan;
  }
  if (wp.kernel == WeightOnlyKernel::mma_tma) {
    plan.k_warps = wp.k_warps;
    plan.ctas = wp.ctas;
    plan.cluster = wp.cluster;  // 2 to 16 tokens: blocks a cluster along k
    return plan;
  }
  plan.split_k = wp.split_k;
  plan.k_warps = wp.k_warps;
  plan.ctas = wp.ctas;
  plan.cluster = wp.cluster;
  return plan;
}

namespace {
// [m, n] fp32 (the mma kernel's split-k), or the Hopper kernels' [row tiles of 128][128 rows][N] in their
// accumulators' order (weight_only_sm90_unit.cuh wo_partial_index: N the tokens padded to 16, 32 or 64), whichever is larger.
std::size_t partial_bytes(const LinearParams& p) {
  std::size_t floats = std::size_t(p.m * p.n);
  if (p.m <= 64)
    floats = std::max(floats, std::size_t((p.n + 127) / 128 * 128) * std::size_t(weight_only_wgmma_tokens(p.m)));
  return (floats * 4 + 255) / 256 * 256;
}
}  // namespace

std::size_t weight_only_workspace_bytes(const LinearParams& p) {
  const std::size_t row_tiles = std::size_t((p.n + 15) / 16);  // a counter per row tile, at most 16 rows each
  return partial_bytes(p) + row_tiles * 4;
}

int* weight_only_counters(const LinearParams& p) {
  return reinterpret_cast<int*>(static_cast<char*>(p.workspace) + partial_bytes(p));
}

void weight_only_linear(const LinearParams& p, const LinearPlan& plan, cudaStream_t stream) {
#ifdef INFERLAB_HAVE_SM90A
  if (plan.kernel == WeightOnlyKernel::wgmma) return weight_only_linear_sm90(p, plan, stream);
  if (plan.kernel == WeightOnlyKernel::wgmma_tma) return weight_only_linear_sm90_tma(p, plan, stream);
  if (plan.kernel == WeightOnlyKernel::mma_tma) return weight_only_linear_mma_tma(p, plan, stream);
#endif
  if (plan.kernel != WeightOnlyKernel::mma) throw Error("weight_only_linear: the plan names a kernel this build lacks");
  WoParams wp{};
  wp.x = static_cast<const __nv_bfloat16*>(p.x);
  wp.w = static_cast<const uint4*>(p.w);
  wp.scales = p.scales;
  wp.meta = static_cast<const uint32_t*>(p.metadata);
  wp.y = static_cast<__nv_bfloat16*>(p.y);
  if (plan.split_k > 1) {
    wp.partial = static_cast<float*>(p.workspace);
    wp.counters = weight_only_counters(p);
  }
  wp.m = int(p.m);
  wp.n = int(p.n);
  wp.k = int(p.k);
  wp.k_per_block = int(plan.k_per_block);
  wp.split_k = plan.split_k;
  wp.k_warps = plan.k_warps;
  switch (p.format) {
    case WeightFormat::int4: return launch_mt<WeightFormat::int4>(wp, plan, stream);
    case WeightFormat::int8: return launch_mt<WeightFormat::int8>(wp, plan, stream);
    case WeightFormat::sparse24: return launch_mt<WeightFormat::sparse24>(wp, plan, stream);
    default: throw Error("weight_only_linear: format " + weight_format_name(p.format) + " has no weight-only kernel");
  }
}

}  // namespace inferlab
