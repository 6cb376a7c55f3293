// Weight-only linear layers on Hopper's warpgroup tensor-core instruction (wgmma, sm_90a): the "wgmma"
// kernel of sim/kernels.h WeightOnlyKernel, for int8 and int4 as the tokens grow (m = 9..64).
//
// The idea of weight_only.cu (the packed weight streamed once and dequantized in registers into the
// tensor cores as their A operand, in the A-fragment order quant.h lays out), with what changes when
// there are more tokens than a few:
//   - the product is wgmma m64nNk16 per warpgroup (4 warps, 64 weight rows), A from registers: its
//     per-warp fragment is mma.sync m16n8k16's, so the packed layout serves unchanged; N = the tokens
//     padded to 16, 32 or 64. X is the B operand, which the tensor cores read straight from shared
//     memory (K-major, 128-byte swizzle) once per warpgroup instead of once per warp (ldmatrix);
//   - a block is 2 warpgroups (128 rows). A "unit" is one 128-row tile by one 128-column group:
//     X [N x 128], the weight's 128 x 128 values and int4's scales of the group fill one shared-memory
//     stage by cp.async (each lane copies, and later reads back, its own 16 bytes of each weight
//     chunk), a ring of up to 8 stages, 6 units in flight;
//   - a persistent grid (sm_count x blocks per SM) walks the units in equal contiguous shares (a
//     tile's groups in k order, then the next tile's): no wave tail, no split-k choice. A tile whose
//     units two blocks share is summed in fp32 by atomics into the workspace; the last of its blocks
//     (a counter) converts it to bf16 and leaves workspace and counter zeroed;
//   - int4: (w >> 4i) & 0x000F000F | 0x43004300 is a bf16x2 of 128 + q exactly (weight_only.cu); one
//     bf16x2 FMA per register takes the stored 128 + z away (exact: small integers), so a unit's
//     products are Σ (q − z)·x in a group accumulator that the unit's first wgmma starts from zero,
//     and the group's scale multiplies it into the fp32 result once its products are done. (The mma
//     kernel folds the zero point into each group's Σx instead; here X streams through the ring a
//     group at a time, and summing it would be one more pass over every stage.) int8: the
//     byte-permute conversion of weight_only.cu, products straight into the result, the channel
//     scale at the end;
//   - the A registers and int4's group accumulators are double-buffered by unit parity: one unit's
//     products run while the next unit is dequantized and the previous one's are scaled in
//     (wgmma.wait_group 1); the stage a unit used is refilled two units later.
// The model of its cost is sim/kernels.h linear_kernels (WeightOnlyKernel::wgmma).
#include <cuda_bf16.h>

#include <algorithm>
#include <string>
#include <type_traits>

#include "inferlab/kernels/common/check.h"
#include "inferlab/kernels/common/kernel_attributes.h"
#include "inferlab/kernels/gemm/linear.h"
#include "inferlab/sim/error.h"
#include "inferlab/sim/kernels.h"
#include "dequant.cuh"
#include "weight_only.h"
#include "wgmma_rs.h"

namespace inferlab {
namespace {

constexpr int kWarps = 8, kThreads = kWarps * 32, kBlockRows = kWarps * 16, kGroup = 128;

// The tile choices (sim/kernels.h, one place): stages, blocks per SM, shared memory.
template <WeightFormat F, int N>
struct WgTile {
  static constexpr bool kInt4 = F == WeightFormat::int4;
  static constexpr int kCols = kInt4 ? 64 : 32;   // weight columns per 512-byte chunk (quant.h)
  static constexpr int kChunks = kGroup / kCols;  // one warp's chunks per unit
  static constexpr int kStages = weight_only_wgmma_stages(kInt4, N);
  static constexpr int kAhead = kStages - 1;      // units in flight (the stage in use holds the other)
  static constexpr int kXBytes = N * kGroup * 2;
  static constexpr int kWBytes = kWarps * kChunks * 512;
  static constexpr int kSBytes = kInt4 ? kBlockRows * 4 : 0;
  static constexpr int kSmem = int(weight_only_wgmma_smem_bytes(kInt4, N));
  static constexpr int kMinBlocks = weight_only_wgmma_blocks_per_sm(N);
  static_assert(kStages * (kXBytes + kWBytes + kSBytes) + 1024 == kSmem, "sim/kernels.h's tile table and the kernel agree");
  static_assert(kStages >= 2, "one stage in use, one at least in flight");
  static_assert(N * 16 % kThreads == 0, "X's 16-byte pieces divide among the threads");
};

struct WgParams {
  const __nv_bfloat16* x;  // [m, k]
  const uint4* w;          // packed chunks [n/16][k/C] of 512 bytes (quant.h)
  const void* scales;      // int8: float [n]; int4: uint32 [k/128][n]
  __nv_bfloat16* y;        // [m, n]
  float* partial;          // [m, n] fp32, zero between launches (tiles two blocks share)
  int* counters;           // [n/128 rounded up], zero between launches
  int m, n, k;
  int units;               // row tiles x k/128
  int blocks;              // the grid; block b takes units [b·units/blocks, (b+1)·units/blocks)
};

__device__ __forceinline__ uint32_t smem_u32(const void* p) { return uint32_t(__cvta_generic_to_shared(p)); }

__device__ __forceinline__ void cp_async_16(void* smem, const void* gmem, bool valid) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_u32(smem)), "l"(gmem), "r"(valid ? 16 : 0));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void cp_async_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory"); }
__device__ __forceinline__ void fence_proxy_async() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }

// wgmma shared-memory matrix descriptor, 128-byte swizzle (flash_fwd_sm90.cu's).
__device__ __forceinline__ uint64_t desc(uint32_t addr, uint32_t lbo, uint32_t sbo) {
  return uint64_t((addr & 0x3FFFF) >> 4) | (uint64_t(lbo >> 4) << 16) | (uint64_t(sbo >> 4) << 32) | (1ull << 62);
}

// a + b as bf16x2 (a FMA with 1): exact here, where a = 128 + q and b = −(128 + z).
__device__ __forceinline__ uint32_t bf16x2_add(uint32_t a, uint32_t b) {
  uint32_t d;
  asm("fma.rn.bf16x2 %0, %1, %2, %3;\n" : "=r"(d) : "r"(a), "r"(0x3F803F80u), "r"(b));
  return d;
}

template <WeightFormat F, int N>
__global__ void __launch_bounds__(kThreads, WgTile<F, N>::kMinBlocks)
    weight_only_wgmma_kernel(const __grid_constant__ WgParams p) {
  using T = WgTile<F, N>;
  constexpr int S = T::kStages, P = T::kAhead;
  extern __shared__ unsigned char smem_raw[];
  // Stages: X [S][N x 128] bf16 (two 128-byte-swizzled atoms of 64 columns each: the 1024-byte
  // alignment the swizzle needs), then the weight [S][warp][chunk][lane] (16 bytes each), then int4's
  // scales [S][128 rows].
  unsigned char* smem = reinterpret_cast<unsigned char*>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~uintptr_t(1023));
  unsigned char* xs = smem;
  uint4* ws = reinterpret_cast<uint4*>(smem + S * T::kXBytes);
  uint32_t* ss = reinterpret_cast<uint32_t*>(smem + S * (T::kXBytes + T::kWBytes));
  __shared__ int last_flag;

  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32, g = lane / 4, t = lane % 4;
  const int groups = p.k / kGroup;
  const int u_begin = int(int64_t(blockIdx.x) * p.units / p.blocks);
  const int count = int(int64_t(blockIdx.x + 1) * p.units / p.blocks) - u_begin;

  // Unit u_begin + i into stage i % S; one commit group per call (empty past the block's share).
  auto load = [&](int i) {
    if (i < count) {
      const int u = u_begin + i, tile = u / groups, grp = u % groups, slot = i % S;
      // X[0:N, group]: 16 pieces of 16 bytes a token; piece j of row r at atom j / 8, chunk (j % 8) ^ (r % 8).
      unsigned char* xd = xs + slot * T::kXBytes;
#pragma unroll
      for (int it = 0; it < N * 16 / kThreads; ++it) {
        const int c = tid + it * kThreads, r = c / 16, j = c % 16;
        const bool ok = r < p.m;  // tokens past m: zeros
        cp_async_16(xd + (j / 8) * (N * 128) + r * 128 + (((j % 8) ^ (r % 8)) << 4),
                    p.x + int64_t(ok ? r : 0) * p.k + grp * kGroup + j * 8, ok);
      }
      // The weight: this warp's 16-row tile, the group's chunks (contiguous); rows past n: zeros.
      const int rt = tile * kWarps + warp;
      const bool rows_ok = rt * 16 < p.n;
      const uint4* src = p.w + (int64_t(rows_ok ? rt : 0) * (p.k / T::kCols) + grp * T::kChunks) * 32 + lane;
      uint4* dst = ws + (slot * kWarps + warp) * T::kChunks * 32 + lane;
#pragma unroll
      for (int j = 0; j < T::kChunks; ++j) cp_async_16(dst + j * 32, src + j * 32, rows_ok);
      if constexpr (T::kInt4) {
        if (lane < 4)
          cp_async_16(ss + slot * kBlockRows + warp * 16 + lane * 4,
                      static_cast<const uint32_t*>(p.scales) + int64_t(grp) * p.n + (rows_ok ? rt * 16 : 0) + lane * 4,
                      rows_ok);
      }
    }
    cp_async_commit();
  };

#pragma unroll 1
  for (int i = 0; i < P; ++i) load(i);

  // acc[4i + e] = rows (g, g + 8) of this warp's 16 (e / 2) x tokens 8i + 2t + e % 2 (the wgmma
  // accumulator layout, per warp that of mma.sync m16n8): the tile's stretch so far, in fp32.
  float acc[N / 2];
  float grp_acc[N / 2];  // a unit's products: int4 Σ (q − z)·x, int8 Σ q·x (only wgmma writes them)
  uint32_t a[8][4];      // A fragments of a unit's 8 k16 steps
#pragma unroll
  for (int e = 0; e < N / 2; ++e) acc[e] = 0.f;
  int seg_first = u_begin;  // the first unit of the tile's stretch in progress
  const uint32_t xs_addr = smem_u32(xs);

  // A tile's stretch ends: store it (whole: this block summed every group of the tile), or add it
  // into the workspace, the last block of the tile converting. acc is zero afterwards.
  auto flush = [&](int tile, bool whole) {
    const int r0 = tile * kBlockRows + warp * 16 + g;
    if constexpr (!T::kInt4) {  // the channel scales
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
      each([&](int64_t o, float v) { atomicAdd(p.partial + o, v); });
      __threadfence();
      __syncthreads();
      if (tid == 0) {
        // Unit u lies in block floor(((u + 1)·blocks − 1) / units): the blocks that share the tile.
        auto block_of = [&](int u) { return int((int64_t(u + 1) * p.blocks - 1) / p.units); };
        const int segments = block_of((tile + 1) * groups - 1) - block_of(tile * groups) + 1;
        last_flag = atomicAdd(p.counters + tile, 1) == segments - 1;
      }
      __syncthreads();
      if (last_flag) {
        __threadfence();
        each([&](int64_t o, float) {
          p.y[o] = __float2bfloat16_rn(__ldcg(p.partial + o));
          p.partial[o] = 0.f;
        });
        if (tid == 0) p.counters[tile] = 0;
      }
    }
#pragma unroll
    for (int e = 0; e < N / 2; ++e) acc[e] = 0.f;
  };

#pragma unroll 1
  for (int i = 0; i < count; ++i) {
    cp_async_wait<P - 1>();  // unit i's copies (this thread's) have landed
    fence_proxy_async();     // ... ordered before the tensor cores' reads of X
    __syncthreads();         // every thread's; and every warpgroup is done with unit i - 1's stage
    const int u = u_begin + i, slot = i % S;

    // A fragments: this lane's 16 bytes of each of its warp's chunks of the unit.
    const uint4* wl = ws + (slot * kWarps + warp) * T::kChunks * 32 + lane;
    float sc0 = 1.f, sc1 = 1.f;  // what multiplies the unit's products into acc (rows g, g + 8)
    if constexpr (T::kInt4) {
      const uint32_t sz0 = ss[slot * kBlockRows + warp * 16 + g], sz1 = ss[slot * kBlockRows + warp * 16 + g + 8];
      sc0 = __uint_as_float(sz0 << 16);
      sc1 = __uint_as_float(sz1 << 16);
      // −(128 + z) in both halves (registers 0, 2 hold row g, 1, 3 row g + 8).
      const uint32_t z0 = ((sz0 & 0xffff0000u) | (sz0 >> 16)) ^ 0x80008000u;
      const uint32_t z1 = ((sz1 & 0xffff0000u) | (sz1 >> 16)) ^ 0x80008000u;
#pragma unroll
      for (int j = 0; j < T::kChunks; ++j) {
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
#pragma unroll
      for (int j = 0; j < T::kChunks; ++j) {
        const uint4 c = wl[j * 32];
        const uint32_t words[4] = {c.x, c.y, c.z, c.w};
#pragma unroll
        for (int h = 0; h < 2; ++h) {  // k16 step 2j + h: bytes a0..a3, a4..a7
          const uint32_t lo = words[2 * h], hi = words[2 * h + 1];
          a[2 * j + h][0] = int8x2_to_bf16x2(lo, 0);
          a[2 * j + h][1] = int8x2_to_bf16x2(lo, 2);
          a[2 * j + h][2] = int8x2_to_bf16x2(hi, 0);
          a[2 * j + h][3] = int8x2_to_bf16x2(hi, 2);
        }
      }
    }

    // The unit's 8 k16 steps into grp_acc (the first overwrites it); B = X's stage, step ks at atom
    // ks / 4, byte 32 (ks % 4) of each row. The next unit's copies are issued while they run.
    const uint32_t xb = xs_addr + uint32_t(slot * T::kXBytes);
    uint64_t bd[8];
#pragma unroll
    for (int ks = 0; ks < 8; ++ks) bd[ks] = desc(xb + uint32_t((ks / 4) * (N * 128) + (ks % 4) * 32), 16, 1024);
    wgmma_rs::pin(a, bd);
    wgmma_rs::fence();
    wgmma_rs::bf16<N, 0>(grp_acc, a[0], bd[0]);
#pragma unroll
    for (int ks = 1; ks < 8; ++ks) wgmma_rs::bf16<N, 1>(grp_acc, a[ks], bd[ks]);
    wgmma_rs::commit();
    load(i + P);
    wgmma_rs::wait<0>();
    wgmma_rs::keep(a);
    wgmma_rs::fence_operand(grp_acc);
#pragma unroll
    for (int e = 0; e < N / 8; ++e) {
      acc[4 * e + 0] = fmaf(sc0, grp_acc[4 * e + 0], acc[4 * e + 0]);
      acc[4 * e + 1] = fmaf(sc0, grp_acc[4 * e + 1], acc[4 * e + 1]);
      acc[4 * e + 2] = fmaf(sc1, grp_acc[4 * e + 2], acc[4 * e + 2]);
      acc[4 * e + 3] = fmaf(sc1, grp_acc[4 * e + 3], acc[4 * e + 3]);
    }
    const int tile = u / groups;
    if ((u + 1) % groups == 0 || i + 1 == count) {  // the tile's stretch ends here
      flush(tile, seg_first == tile * groups && (u + 1) % groups == 0);
      seg_first = u + 1;
    }
  }
}

template <WeightFormat F, int N>
void launch(WgParams wp, cudaStream_t stream) {
  using T = WgTile<F, N>;
  auto kernel = weight_only_wgmma_kernel<F, N>;
  static KernelSmem attr;
  attr.ensure(kernel, T::kSmem, "linear (weight-only wgmma)");
  // The grid is one persistent wave: no more blocks than the SMs hold (the plan's blocks per SM, as
  // the device confirms for this build's registers).
  int device = 0, sms = 0, per_sm = 0;
  INFERLAB_CUDA_CHECK(cudaGetDevice(&device));
  INFERLAB_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  INFERLAB_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, kThreads, T::kSmem));
  if (per_sm < 1) throw Error("linear (weight-only wgmma): no block fits an SM");
  wp.blocks = std::min(wp.blocks, sms * per_sm);
  kernel<<<unsigned(wp.blocks), kThreads, T::kSmem, stream>>>(wp);
  INFERLAB_CHECK_LAUNCH();
}

template <WeightFormat F>
void launch_tokens(const WgParams& wp, int tokens, cudaStream_t stream) {
  switch (tokens) {
    case 16: return launch<F, 16>(wp, stream);
    case 32: return launch<F, 32>(wp, stream);
    case 64: return launch<F, 64>(wp, stream);
    default: throw Error("linear (weight-only wgmma): no tile for " + std::to_string(tokens) + " tokens");
  }
}

}  // namespace

void weight_only_linear_sm90(const LinearParams& p, const LinearPlan& plan, cudaStream_t stream) {
  WgParams wp{};
  wp.x = static_cast<const __nv_bfloat16*>(p.x);
  wp.w = static_cast<const uint4*>(p.w);
  wp.scales = p.scales;
  wp.y = static_cast<__nv_bfloat16*>(p.y);
  wp.partial = static_cast<float*>(p.workspace);
  wp.counters = reinterpret_cast<int*>(static_cast<char*>(p.workspace) + (std::size_t(p.m * p.n) * 4 + 255) / 256 * 256);
  wp.m = int(p.m);
  wp.n = int(p.n);
  wp.k = int(p.k);
  wp.units = int((p.n + kBlockRows - 1) / kBlockRows * (p.k / kGroup));
  wp.blocks = int(plan.ctas);
  switch (p.format) {
    case WeightFormat::int4: return launch_tokens<WeightFormat::int4>(wp, plan.tokens, stream);
    case WeightFormat::int8: return launch_tokens<WeightFormat::int8>(wp, plan.tokens, stream);
    default: throw Error("linear (weight-only wgmma): format " + weight_format_name(p.format) + " has no wgmma kernel");
  }
}

}  // namespace inferlab
