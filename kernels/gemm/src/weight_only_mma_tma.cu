// Weight-only linear layers at one token on Hopper (WeightOnlyKernel::mma_tma, sm_90a, int8 and int4, m = 1). Diff it
// against weight_only.cu's shared tiles: the chunks' dequantization and mma.sync products are the same; what changes
// is how the weight reaches the warps and how the grid is cut.
//
// weight_only.cu streams the weight into registers, 6 chunks in flight a warp, each refill issued after the chunk in
// its slot has been multiplied: its loads wait for its math, a block's prologue (X, scales, group sums, one barrier)
// waits behind its first loads, and 448 blocks over 132 SMs end unevenly (kernels/gemm/NOTES.md w4-w5: int4 on
// 14336 x 4096 runs 17.5 us where a pure read of its bytes in the same geometry takes 13.0-13.4). Here:
//   - one block an SM (a persistent grid of min(SMs, n / 16) blocks), block b taking the 16-row tiles b, b + blocks,
//     b + 2 blocks, ... (so the grid's copies sweep the weight together, as a grid-stride read does; contiguous
//     shares measured 0.3-0.6 us slower, NOTES.md r9). quant.h stores a tile's chunks contiguously ([n/16][k/C]
//     chunks of 512 bytes), so a tile is one run of bytes, cut into stages of 32 chunks (16 KB: int4 2048 columns,
//     int8 1024);
//   - one producer thread copies them through a ring of weight_only_mma_tma_stages stages (int4 3, int8 4: more
//     bytes in flight measured slower; cp.async.bulk, L2 evict-first, completing on the stage's `full` mbarrier)
//     and int4's scales of the stage (16 rows x 16 groups) as one box of a
//     2-d tensor map over [k/128][n]; X's row is one bulk copy at the start. Nothing the consumers compute delays a
//     copy: the producer waits only for a stage to be released (`empty`, one arrival a consumer warp; int4 releases
//     a stage once its reads are issued, before the math);
//   - 16 consumer warps take two chunks each of every stage (an int4 group or 64 int8 columns) from shared memory
//     (one lds.128 a chunk and lane: a chunk is one lane's A fragments), dequantize and multiply them against X's
//     row (ldmatrix, every column of B reading it: a column reaches only its own column of the products; int4 where a
//     tile is one or two stages, k = 2048 or 4096, holds those B fragments in registers from the start, and sums a
//     group's two chunks in two chains), and fold int4's group scales in as the mma kernel does (the 128 and the zero
//     point leave with the group's sum of X); int8 in fp16 (int8x2_to_f16x2) against X's row converted once to
//     fp16 x 2^e, e from the row's largest |x|;
//   - at a tile's last stage the warps leave their 16 sums in shared memory, meet at one named barrier, and one warp
//     (tile by tile in turn) adds them in a fixed order, scales (int8: the channel scale, 2^-e) and stores: no split-k,
//     no atomics, no workspace.
// The model of its cost is sim/kernels.h linear_kernels (WeightOnlyKernel::mma_tma).
#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <string>

#include "dequant.cuh"
#include "mma_sync.cuh"
#include "inferlab/kernels/common/check.h"
#include "inferlab/kernels/common/kernel_attributes.h"
#include "inferlab/kernels/common/sm90_async.cuh"
#include "inferlab/kernels/common/tensor_map.h"
#include "inferlab/kernels/gemm/linear.h"
#include "inferlab/sim/error.h"
#include "inferlab/sim/kernels.h"
#include "weight_only.h"

namespace inferlab {
namespace {

using sm90::bulk_load;
using sm90::evict_first_policy;
using sm90::evict_last_policy;
using sm90::mbar_arrive;
using sm90::mbar_expect_tx;
using sm90::mbar_init;
using sm90::mbar_wait;
using sm90::shared_addr;
using sm90::tma_load_2d;

constexpr int kWarps = kMmaTmaConsumerWarps, kConsumers = kWarps * 32, kThreads = kConsumers + 32;
constexpr int kStageChunks = kMmaTmaStageChunks, kStageBytes = kStageChunks * 512;
constexpr int kS4 = weight_only_mma_tma_stages(WeightFormat::int4), kS8 = weight_only_mma_tma_stages(WeightFormat::int8);
constexpr int kWarpChunks = kStageChunks / kWarps;  // 2: an int4 group, 64 int8 columns
constexpr int kSideBytes = 16 * 16 * 4;             // int4: the stage's scales, [16 groups][16 rows] uint32
static_assert(kWarpChunks == 2, "a warp's two chunks of a stage are one int4 group");

struct RingParams {
  const __nv_bfloat16* x;  // [m, k]
  const uint4* w;          // packed chunks [n/16][k/C] of 512 bytes (quant.h)
  const float* channel;    // int8: the channel scales [n]
  __nv_bfloat16* y;        // [m, n]
  int m, n, k;
  int tiles, blocks;       // 16-row tiles; block b takes tiles b, b + blocks, b + 2·blocks, ...
  int split;               // 2 to 16 tokens: blocks a cluster along k (the cluster c of blocks / split takes tiles c,
                           // c + clusters, ...)
};

// The block's shared memory, one layout for the kernel and the launcher (its size is sim/kernels.h
// weight_only_mma_tma_smem_bytes): [ring: S x 16 KB][int4: S x the stage's scales][X's row, bf16 (int8: fp16 x
// 2^e) k][int4: X's group sums k/128; int8: the block's channel scales][the warps' tile sums [2][warps][16]]
// [full S, empty S, X's mbarrier].
struct Layout {
  int side, x, aux, red, bars, bytes;
  __host__ __device__ Layout(bool int4, int k, int max_tiles) {
    const int kS = int4 ? kS4 : kS8;
    side = kS * kStageBytes;
    x = side + (int4 ? kS * kSideBytes : 0);
    aux = x + k * 2;
    red = aux + (int4 ? k / 128 : max_tiles * 16) * 4;
    bars = red + 2 * kWarps * 16 * 4;
    bytes = bars + (2 * kS + 2) * 8;
  }
};

__device__ __forceinline__ void consumers_sync() { asm volatile("bar.sync 1, %0;\n" ::"n"(kConsumers) : "memory"); }

template <WeightFormat F, int XR>
__global__ void __launch_bounds__(kThreads, 1)
    weight_only_mma_tma_kernel(const __grid_constant__ RingParams p, const __grid_constant__ CUtensorMap map_s) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  constexpr bool kInt4 = F == WeightFormat::int4;
  constexpr int C = kInt4 ? 64 : 32;  // weight columns a chunk
  constexpr int kS = kInt4 ? kS4 : kS8;
  extern __shared__ __align__(128) unsigned char smem[];
  // The block's tiles interleaved with the other blocks' (b, b + blocks, ...): the grid's copies sweep the weight
  // together, as a grid-stride read does (scripts/probes/ring_stream.cu, NOTES.md r9).
  const int tiles = (p.tiles - int(blockIdx.x) + p.blocks - 1) / p.blocks;
  auto tile_of = [&](int j) { return int(blockIdx.x) + j * p.blocks; };  // the block's j-th tile
  const int max_tiles = (p.tiles + p.blocks - 1) / p.blocks;
  const Layout L(kInt4, p.k, max_tiles);
  const uint4* ws = reinterpret_cast<const uint4*>(smem);
  const uint32_t* side = reinterpret_cast<const uint32_t*>(smem + L.side);
  __nv_bfloat16* xs = reinterpret_cast<__nv_bfloat16*>(smem + L.x);
  float* aux = reinterpret_cast<float*>(smem + L.aux);
  float* red = reinterpret_cast<float*>(smem + L.red);
  uint64_t* full = reinterpret_cast<uint64_t*>(smem + L.bars);
  uint64_t* empty = full + kS;
  uint64_t* xbar = empty + kS;

  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32, g = lane / 4;
  const int per_tile = p.k / C / kStageChunks;  // stages a tile
  const int stages = tiles * per_tile;
  if (tid == 0) {
    for (int s = 0; s < kS; ++s) {
      mbar_init(&full[s], 1);         // the producer's arrive.expect_tx, then the stage's bytes
      mbar_init(&empty[s], kWarps);  // every consumer warp has read the stage
    }
    mbar_init(xbar, 1);
    sm90::fence_mbar_init();
  }
  __syncthreads();  // the only block-wide barrier

  if (warp == kWarps) {  // the producer: one copying thread
    if (lane != 0) return;
    mbar_expect_tx(xbar, uint32_t(p.k) * 2);
    bulk_load(xs, p.x, uint32_t(p.k) * 2, xbar, evict_last_policy());  // every block reads X
    const uint64_t policy = evict_first_policy();                      // the weight, once
#pragma unroll 1
    for (int s = 0, slot = 0; s < stages; ++s) {
      if (s >= kS) mbar_wait(&empty[slot], (s / kS - 1) & 1);
      const int tile = tile_of(s / per_tile), j = s % per_tile;
      mbar_expect_tx(&full[slot], uint32_t(kStageBytes + (kInt4 ? kSideBytes : 0)));
      bulk_load(smem + slot * kStageBytes, p.w + (int64_t(tile) * (p.k / C) + j * kStageChunks) * 32, kStageBytes,
                &full[slot], policy);
      if constexpr (kInt4) tma_load_2d(smem + L.side + slot * kSideBytes, &map_s, tile * 16, j * 16, &full[slot]);
      if (++slot == kS) slot = 0;
    }
    return;
  }

  // The consumers. int8: the block's channel scales first (their loads beside the ring's fill).
  if constexpr (!kInt4)
    for (int i = tid; i < tiles * 16; i += kConsumers) aux[i] = __ldg(p.channel + tile_of(i / 16) * 16 + i % 16);
  mbar_wait(xbar, 0);
  float x_inv = 1.f;  // int8: 2^-e
  if constexpr (kInt4) {
    // Each group's sum of X: eight threads a group, 16 columns each, summed by shuffles.
    for (int i = tid; i < p.k / 128 * 8; i += kConsumers) {
      float sum = bf16x16_sum(reinterpret_cast<const uint4*>(xs + (i / 8) * 128 + (i % 8) * 16));
      const unsigned eight = 0xffu << (tid & 24);  // the bound is a multiple of 8: all eight run
#pragma unroll
      for (int o = 1; o < 8; o *= 2) sum += __shfl_xor_sync(eight, sum, o);
      if (i % 8 == 0) aux[i / 8] = sum;
    }
  } else {
    // X's row to fp16 x 2^e, e from the row's largest |x| (mma_sync.cuh; weight_only.cu takes e per slice of k).
    uint32_t mx = 0;
    for (int i = tid; i < p.k / 8; i += kConsumers) mx = bf16x8_max_bits(reinterpret_cast<const uint4*>(xs)[i], mx);
#pragma unroll
    for (int o = 16; o > 0; o /= 2) mx = max(mx, __shfl_xor_sync(0xffffffffu, mx, o));
    uint32_t* maxima = reinterpret_cast<uint32_t*>(red);
    if (lane == 0) maxima[warp] = mx;
    consumers_sync();
    for (int w = 0; w < kWarps; ++w) mx = max(mx, maxima[w]);
    float sc;
    fp16_range_scale(mx, sc, x_inv);
    consumers_sync();  // every warp has read the maxima before the tile sums reuse the space
    for (int i = tid; i < p.k / 8; i += kConsumers) {
      uint4* pv = reinterpret_cast<uint4*>(xs) + i;
      const uint4 v = *pv;
      *pv = bf16x8_to_f16x8(v, sc);
    }
  }
  consumers_sync();  // X (converted), its group sums and the channel scales are the block's

  // acc: rows (g, g + 8) of the tile; every column of B is X's row, so every lane of a quad holds the same sums.
  float acc[4] = {0.f, 0.f, 0.f, 0.f};
  int slot = 0, phase = 0;  // the ring's slot
  // int4, XR > 0: a tile is XR stages, so the warp meets the same XR stretches of X in every tile: their B fragments
  // ([h][two k16 steps]) are loaded once, and the stage's only shared loads are its chunks and scales.
  uint32_t xr[XR > 0 ? XR : 1][2][2][4];
  auto x_frags = [&](int j, int h, int jj2, uint32_t (&b)[4]) {
    ldmatrix_x4(b, xs + (j * kStageChunks + warp * kWarpChunks) * C + h * 64 + 32 * jj2 + 8 * (lane >> 3));
  };
  if constexpr (XR > 0)
#pragma unroll
    for (int j = 0; j < XR; ++j)
#pragma unroll
      for (int h = 0; h < 2; ++h)
#pragma unroll
        for (int jj2 = 0; jj2 < 2; ++jj2) x_frags(j, h, jj2, xr[j][h][jj2]);
  // One stage at place j of its tile (XR > 0: j a constant).
  auto stage = [&](int j) {
    mbar_wait(&full[slot], phase);
    const uint4* wl = ws + (slot * kStageChunks + warp * kWarpChunks) * 32 + lane;
    const uint4 cur[2] = {wl[0], wl[32]};
    const int kc = (j * kStageChunks + warp * kWarpChunks) * C;  // the warp's first column in the tile
    if constexpr (kInt4) {
      const uint32_t sz0 = side[slot * 256 + warp * 16 + g], sz1 = side[slot * 256 + warp * 16 + g + 8];
      // The stage's reads are issued: release it before the math (the arrive orders them before the slot's refill;
      // ptxas may still hoist products that need no later register above it).
      __syncwarp();
      if (lane == 0) mbar_arrive(&empty[slot]);
      // The group's sums of (128 + q) x, its two chunks in two chains.
      float ga[2][4] = {{0.f, 0.f, 0.f, 0.f}, {0.f, 0.f, 0.f, 0.f}};
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const uint32_t words[4] = {cur[h].x, cur[h].y, cur[h].z, cur[h].w};
#pragma unroll
        for (int jj2 = 0; jj2 < 2; ++jj2) {
          uint32_t b[4];
          if constexpr (XR > 0) {
#pragma unroll
            for (int i = 0; i < 4; ++i) b[i] = xr[XR > 1 ? j : 0][h][jj2][i];
          } else {
            x_frags(j, h, jj2, b);
          }
#pragma unroll
          for (int jj = 0; jj < 2; ++jj) {
            const uint32_t w = words[2 * jj2 + jj];
            const uint32_t a[4] = {lop3_and_or(w, 0x000F000Fu, 0x43004300u), lop3_and_or(w >> 4, 0x000F000Fu, 0x43004300u),
                                   lop3_and_or(w >> 8, 0x000F000Fu, 0x43004300u), lop3_and_or(w >> 12, 0x000F000Fu, 0x43004300u)};
            mma_bf16(ga[h], a, b[2 * jj], b[2 * jj + 1]);
          }
        }
      }
      // s sum (q - z) x = s acc - s (128 + z) X over the group (z stored as 128 + z).
      const float xg = aux[kc / 128];
      const float s0 = __uint_as_float(sz0 << 16), s1 = __uint_as_float(sz1 << 16);
      acc[0] += s0 * (ga[0][0] + ga[1][0]) - s0 * __uint_as_float(sz0 & 0xffff0000u) * xg;
      acc[2] += s1 * (ga[0][2] + ga[1][2]) - s1 * __uint_as_float(sz1 & 0xffff0000u) * xg;
    } else {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        uint32_t b[4];
        ldmatrix_x4(b, xs + kc + h * 32 + 8 * (lane >> 3));
        const uint32_t words[4] = {cur[h].x, cur[h].y, cur[h].z, cur[h].w};
#pragma unroll
        for (int jj = 0; jj < 2; ++jj) {
          const uint32_t lo = words[2 * jj], hi = words[2 * jj + 1];
          const uint32_t a[4] = {int8x2_to_f16x2(lo, 0), int8x2_to_f16x2(lo, 1), int8x2_to_f16x2(hi, 0),
                                 int8x2_to_f16x2(hi, 1)};
          mma_f16(acc, a, b[2 * jj], b[2 * jj + 1]);
        }
      }
      __syncwarp();
      if (lane == 0) mbar_arrive(&empty[slot]);  // this warp's reads of the stage are done
    }
    if (++slot == kS) slot = 0, phase ^= 1;
  };
#pragma unroll 1
  for (int tile = 0; tile < tiles; ++tile) {
    if constexpr (XR > 0) {
#pragma unroll
      for (int j = 0; j < XR; ++j) stage(j);
    } else {
#pragma unroll 1
      for (int j = 0; j < per_tile; ++j) stage(j);
    }
    // The tile's last stage is in: its warps' sums, added by one warp in a fixed order.
    float* r = red + (tile & 1) * kWarps * 16;
    if (lane % 4 == 0) r[warp * 16 + g] = acc[0], r[warp * 16 + g + 8] = acc[2];
    consumers_sync();  // (the other buffer's reader, two tiles back, passed the barrier before this one)
    if (warp == tile % kWarps && lane < 16) {
      float v = 0.f;
      for (int w = 0; w < kWarps; ++w) v += r[w * 16 + lane];
      if constexpr (!kInt4) v *= aux[tile * 16 + lane] * x_inv;
      p.y[tile_of(tile) * 16 + lane] = __float2bfloat16_rn(v);
    }
    acc[0] = acc[1] = acc[2] = acc[3] = 0.f;
  }
#else
  __trap();  // built for a GPU without sm_90a: the plan never selects this kernel there
#endif
}

// 2 to 16 tokens, int4 (weight_only_mma_tma_tokens_kernel): the ring, the producer and the grid above; X's fragments in
// registers instead of shared memory. A warp takes chunks 2w and 2w + 1 of every stage, and a block's stages of a tile
// are whole (PT of them), so a warp meets the same PT int4 groups of X in every tile: their B fragments (the tokens the
// n8 tiles' columns: lane (g, t) holds token g's columns 2t, 2t + 1, 2t + 8, 2t + 9 of each k16 step) are loaded once,
// PT x 32 x NT registers, with each group's sum of X per token (the zero point's term: tokens_zero_mma). A piece of X
// (8 tokens x a group) comes in by coalesced 16-byte loads into the warp's own 2 KB of shared memory (XOR-swizzled
// rows) and out by ldmatrix. Where k / 2048 x NT exceeds what the registers hold (sim/kernels.h
// weight_only_mma_tma_split), k is split over a cluster of `split` blocks that take the same tiles, each its 1/split of
// every tile's stages and of X: after the last tile each block adds its share of the tiles from every block's shared
// memory in rank order. Where the grid is long (9-16 tokens, k = 4096, at least 4 tiles a block: sim/kernels.h
// weight_only_mma_tma_wide) the wide kernel runs unsplit instead, two groups a warp (64 registers of X, its producer's
// registers given over), one tile's sums every two stages and no cluster's end. At 9-16 tokens on k = 14336 (the down
// projection: 7 stages of 2048, split over clusters of 7) the narrow kernel cuts a tile into 8 stages of 14 groups
// (1792 columns) for 14 consumer warps, two a block over clusters of 4 (sim/kernels.h weight_only_mma_tma_narrow): two
// groups a warp as the wide kernel's, a tile's sums every two stages, 9 tiles a block instead of 18 one-stage ones.
// A tile's sums: every warp leaves its 16 rows x 8NT tokens in shared memory, one barrier, and 16 x 8NT consumer threads
// add the W warps' values in a fixed order. A warp's sums are in its fragments' order: the value of lane (g, t) for
// tokens nt·8 + 2t + e, row g + 8h at 32 (4 nt + 2 e + h) + 8 t + g, so each of a warp's 4 NT stores (one (nt, e, h))
// is 32 consecutive words (32 banks) at an offset known at compile time, and adder thread i reads the i-th word of
// every warp (32 consecutive a warp of adders).
struct TokensLayout {
  int side, red, xsum, part, xdef, bars, bytes;
  __host__ __device__ TokensLayout(int nt, int max_tiles, int split, bool defer, int warps, int kS) {
    side = kS * warps * 1024;  // a stage: two chunks of 512 bytes a warp
    red = side + kS * kSideBytes;
    xsum = red + 2 * warps * 16 * 16 * 4;  // the warps' tile sums, two buffers (also X's staging, 2 KB a warp)
    part = xsum + warps * 4 * 16 * 4;       // [warp][4 groups][16 tokens]
    xdef = part + (split > 1 ? max_tiles * 16 * 8 * nt * 4 : 0);
    bars = xdef + (defer ? warps * nt * 2048 : 0);  // a deferred second group of X: [warp][nt] 8 rows x 256 B
    bytes = bars + 2 * kS * 8;
  }
};

// Four fp32 of another block's shared memory (a shared::cluster address from sm90::cluster_addr, 16-byte aligned).
__device__ __forceinline__ float4 ld_cluster_f32x4(uint32_t addr) {
  float4 v;
  asm volatile("ld.shared::cluster.v4.f32 {%0, %1, %2, %3}, [%4];\n"
               : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w)
               : "r"(addr)
               : "memory");
  return v;
}

// The wide kernel (NT = PT = 2, unsplit: sim/kernels.h weight_only_mma_tma_wide): X's fragments take 64 registers a
// thread, where 17 warps leave ptxas 96 (5 warps share an SMSP's 16 K registers; the 16-token loop spilled, NOTES.md
// r3). So its producer is a warpgroup of its own, one thread copying, that gives its registers to the consumers
// (setmaxnreg: 4 warps at 24, 16 at 112, within the 640 x 96 the block was launched with).
// The narrow kernel (NT = PT = 2 over W = 14 consumer warps: stages of 14 groups, 1792 columns; sim/kernels.h
// weight_only_mma_tma_narrow) needs no such exchange: 15 warps leave ptxas 128 registers a thread. Both defer X's
// second group (tokens_defer).
constexpr bool tokens_defer(int nt, int pt) { return nt * pt > kMmaTmaMaxGroupTiles; }
constexpr bool tokens_wide(int nt, int pt, int w) { return tokens_defer(nt, pt) && w == kWarps; }
constexpr int tokens_threads(int nt, int pt, int w) { return 32 * w + 32 * (tokens_wide(nt, pt, w) ? 4 : 1); }
constexpr int tokens_stages(int nt, int pt, int w) { return weight_only_mma_tma_token_stages(pt, tokens_wide(nt, pt, w)); }
// The zero point's -(128 + z) X by one m16n8k8 a stage and n8 tile at the head of the group's chain, X's sums in B
// fragments (4 registers at two groups of two n8 tiles), instead of 2 FMUL, 8 FMUL, 8 FFMA and two loads of the sums
// (NOTES.md r22). Not the wide kernel: its consumers hold 64 registers of X within setmaxnreg's 112, and there it ran
// 16.0-16.1 -> 16.4-16.5 us on 14336 x 4096 at 16 tokens.
constexpr bool tokens_zero_mma(int nt, int pt, int w) { return !tokens_wide(nt, pt, w); }
// X's first group loaded before the block's barrier (the barriers' initialization), so its loads leave ahead of the
// deferred group's copies (ptxas issues those ahead of the loads where both follow the barrier, NOTES.md r24). The wide
// kernel only: H200, bench_gemm, three rounds, us, before -> after: 14336 x 4096 at 16 tokens 16.0-16.4 -> 15.4-15.6
// (two sessions); the same order in every other tokens kernel was mixed (the narrow kernel 17.3-17.5 -> 17.7-17.9,
// 4096 x 4096 at 8 tokens 8.54-8.58 -> 8.13-8.18, 14336 x 4096 at 4 tokens 12.8-12.9 -> 13.0, 4096 x 14336 at 4
// tokens 16.0-16.1 -> 16.1-16.4, the rest within +-0.2; NOTES.md r25).
constexpr bool tokens_x_first(int nt, int pt, int w) { return tokens_wide(nt, pt, w); }
constexpr int kWideLaunchRegs = 96, kWideProducerRegs = 24, kWideConsumerRegs = 112;
static_assert(kConsumers * kWideConsumerRegs + 128 * kWideProducerRegs <= (kConsumers + 128) * kWideLaunchRegs,
              "the wide kernel's setmaxnreg exceeds the registers it was launched with");

template <int NT, int PT, int W>
__global__ void __launch_bounds__(tokens_threads(NT, PT, W), 1)
    weight_only_mma_tma_tokens_kernel(const __grid_constant__ RingParams p, const __grid_constant__ CUtensorMap map_s) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  constexpr int T = 8 * NT;  // token columns
  constexpr int kS = tokens_stages(NT, PT, W);
  constexpr bool kStatic = kS == 2 * PT;  // tile pairs fill the ring: a stage's slot known at compile time
  constexpr int kChunks = 2 * W, kBytes = kChunks * 512, kCols = kChunks * 64;  // a stage: W groups
  constexpr int kThreadsW = tokens_threads(NT, PT, W);
  constexpr bool kWide = tokens_wide(NT, PT, W), kDefer = tokens_defer(NT, PT);
  constexpr bool kZeroMma = tokens_zero_mma(NT, PT, W), kXFirst = tokens_x_first(NT, PT, W);
  static_assert(16 * T <= 32 * W, "a tile's 16 x T outputs, one an adder thread, among the consumers");
  extern __shared__ __align__(128) unsigned char smem[];
  const int split = p.split, rank = split > 1 ? int(sm90::cluster_rank()) : 0;
  const int clusters = p.blocks / split, cluster = blockIdx.x / split;
  // The cluster's tiles interleaved with the other clusters' (c, c + clusters, ...), as the one-token kernel's
  const int tiles = (p.tiles - cluster + clusters - 1) / clusters;
  auto tile_of = [&](int j) { return cluster + j * clusters; };  // the cluster's j-th tile
  const int max_tiles = (p.tiles + clusters - 1) / clusters;
  const TokensLayout L(NT, max_tiles, split, kDefer, W, kS);
  const uint4* ws = reinterpret_cast<const uint4*>(smem);
  const uint32_t* side = reinterpret_cast<const uint32_t*>(smem + L.side);
  float* red = reinterpret_cast<float*>(smem + L.red);
  float* xsum = reinterpret_cast<float*>(smem + L.xsum);  // !kZeroMma: [warp][group j][token]
  float* part = reinterpret_cast<float*>(smem + L.part);  // split > 1: [tile][token][row], the block's share of k
  uint64_t* full = reinterpret_cast<uint64_t*>(smem + L.bars);
  uint64_t* empty = full + kS;
  // The narrow kernel's cluster end: after its loop each block pushes its share of k of the tiles it does not own into
  // the owner's shared memory (st.async, completing on the owner's parts_in), in the place of X's deferred second group
  // (read by the first tile's second stage, before the block's threads arrive at the cluster's barrier):
  // [owned][rank][token][row]. No block reads another's shared memory, so none waits for the others to leave. Where the
  // owned tiles' sums do not fit there (over 56 tiles a cluster: T = 16 at NT = 2), and in the other split kernels, the
  // owners pull them after a cluster barrier and hold the others with a second (the other kernels' SASS unchanged:
  // NOTES.md r24).
  constexpr bool kPush = kDefer && !kWide;
  const bool push = kPush && split > 1 && (max_tiles + split - 1) / split * split * 16 * T * 4 <= W * NT * 2048;
  static_assert(!kPush || kZeroMma, "the narrow kernel's parts_in takes the place of X's group sums");
  uint64_t* parts_in = reinterpret_cast<uint64_t*>(smem + L.xsum);  // (unused where the zero point is on the MMA)
  float* recv = reinterpret_cast<float*>(smem + L.xdef);

  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32, g = lane / 4, t = lane % 4;
  constexpr int kNow = kDefer ? 1 : PT;  // groups staged before the loop
  uint4 xv[kNow][NT][4];  // their loads: lane l takes 16-byte chunks l + 32i, row (l + 32i) / 16; tokens past m zero
  auto load_x = [&] {
#pragma unroll
    for (int j = 0; j < kNow; ++j)
#pragma unroll
      for (int nt = 0; nt < NT; ++nt)
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          const int q = lane + 32 * i, tok = nt * 8 + q / 16;
          xv[j][nt][i] = tok < p.m ? __ldg(reinterpret_cast<const uint4*>(p.x + int64_t(tok) * p.k +
                                                                          (rank * PT + j) * kCols + warp * 128) +
                                           q % 16)
                                   : make_uint4(0, 0, 0, 0);
        }
  };
  // The deferred second group's copies into xdef (below). (Written here, as a lambda, rather than in place: ptxas then
  // keeps the narrow kernel's address arithmetic off the uniform datapath, and it ran 17.4-17.5 -> 17.2 us on 4096 x
  // 14336 at 16 tokens, NOTES.md r25.)
  auto defer_x = [&] {
    unsigned char* xd = smem + L.xdef + warp * NT * 2048;
#pragma unroll
    for (int nt = 0; nt < NT; ++nt)
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const int q = lane + 32 * i, r = q / 16, tok = nt * 8 + r;
        const __nv_bfloat16* src = p.x + int64_t(tok < p.m ? tok : 0) * p.k + (rank * PT + 1) * kCols + warp * 128;
        cp_async_16(xd + nt * 2048 + r * 256 + ((q % 16) ^ r) * 16, src + (q % 16) * 8, tok < p.m);
      }
    asm volatile("cp.async.commit_group;\n" ::: "memory");
  };
  if constexpr (kXFirst)
    if (warp < W) load_x();  // (tokens_x_first)
  if (tid == 0) {
    for (int s = 0; s < kS; ++s) {
      mbar_init(&full[s], 1);
      mbar_init(&empty[s], W);
    }
    if (push) mbar_init(parts_in, 1);
    sm90::fence_mbar_init();
    if (push) mbar_expect_tx(parts_in, uint32_t((tiles - rank + split - 1) / split * (split - 1) * 16 * T * 4));
  }
  __syncthreads();

  if (warp >= W) {  // the producer: the weight and its scales only (then on to the cluster's barriers)
    if constexpr (kWide) asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(kWideProducerRegs) : "memory");
    // (It never reads xdef. Relaxed, this arrive left out the release's memory barriers ahead of the ring's first
    // copies, and the narrow kernel ran 17.4-17.5 -> 17.9-18.0 us: the first copies' head start costs X's first
    // group, NOTES.md r24.)
    if (push) sm90::cluster_arrive_release();
    if (warp == W && lane == 0) {
      const uint64_t policy = evict_first_policy();
      const int64_t tile_chunks = p.k / 64;  // a tile's chunks; this block takes [rank·PT·2W, (rank + 1)·PT·2W)
      const int stages = tiles * PT;
#pragma unroll 1
      for (int s = 0, slot = 0; s < stages; ++s) {
        if (s >= kS) mbar_wait(&empty[slot], (s / kS - 1) & 1);
        const int tile = tile_of(s / PT), j = rank * PT + s % PT;
        mbar_expect_tx(&full[slot], uint32_t(kBytes + W * 16 * 4));
        bulk_load(smem + slot * kBytes, p.w + (tile * tile_chunks + j * kChunks) * 32, kBytes, &full[slot], policy);
        tma_load_2d(smem + L.side + slot * kSideBytes, &map_s, tile * 16, j * W, &full[slot]);
        if (++slot == kS) slot = 0;
      }
    }
    __syncwarp();
  } else {
    if constexpr (kWide) asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(kWideConsumerRegs) : "memory");
    // X's B fragments for the warp's PT groups: [group j][chunk h][k16 step][n8 tile][b0, b1]; tokens past m are zero.
    uint32_t xf[PT][2][4][NT][2];
    // The wide kernel reads twice the X of the split one (every block all of k): its second group's pieces go to
    // shared memory by cp.async (rows past m zero-filled), waited for before the first tile's second stage, so that
    // they land while the first stage computes (staged with the first before the loop: 0.5-0.7 us slower, NOTES.md
    // r14).
    unsigned char* xdef = smem + L.xdef + warp * NT * 2048;
    if constexpr (kDefer) defer_x();
    auto frags = [&](const unsigned char* stage, int j, int nt) {  // a staged piece's B fragments (ldmatrix)
#pragma unroll
      for (int h = 0; h < 2; ++h)
#pragma unroll
        for (int kk = 0; kk < 4; kk += 2) {
          const int r = lane & 7, c = h * 8 + kk * 2 + (lane >> 3);
          uint32_t b[4];
          ldmatrix_x4(b, stage + r * 256 + (c ^ r) * 16);
          xf[j][h][kk][nt][0] = b[0], xf[j][h][kk][nt][1] = b[1];
          xf[j][h][kk + 1][nt][0] = b[2], xf[j][h][kk + 1][nt][1] = b[3];
        }
    };
    uint32_t xz[PT][NT];  // kZeroMma: the zero point's B fragment of group j, n8 tile nt: -X (group_sums)
    auto group_sums = [&](int j) {
#pragma unroll
      for (int nt = 0; nt < NT; ++nt) {
        float lo = 0.f, hi = 0.f;
#pragma unroll
        for (int h = 0; h < 2; ++h)
#pragma unroll
          for (int ks = 0; ks < 4; ++ks)
#pragma unroll
            for (int e = 0; e < 2; ++e) {
              const uint32_t w = xf[j][h][ks][nt][e];
              lo += __uint_as_float(w << 16), hi += __uint_as_float(w & 0xffff0000u);
            }
        float sum = lo + hi;  // token nt·8 + g's columns in lane (g, t); the quad's four hold the group
        sum += __shfl_xor_sync(0xffffffffu, sum, 1);
        sum += __shfl_xor_sync(0xffffffffu, sum, 2);
        if constexpr (!kZeroMma) {
          if (t == 0) xsum[(warp * 4 + j) * 16 + nt * 8 + g] = sum;
          continue;
        }
        // -X as three bf16 (exact: 8 + 8 + 8 significant bits) in B's rows k = 0, 1, 2 of token g: lane t = 0 holds
        // rows 0 and 1 of b0, lane t = 1 row 2; every other row is zero.
        const float nx = -sum;
        const __nv_bfloat16 x0 = __float2bfloat16_rn(nx);
        const float r1 = nx - __bfloat162float(x0);
        const __nv_bfloat16 x1 = __float2bfloat16_rn(r1);
        const __nv_bfloat16 x2 = __float2bfloat16_rn(r1 - __bfloat162float(x1));
        const uint32_t p01 = uint32_t(__bfloat16_as_ushort(x0)) | uint32_t(__bfloat16_as_ushort(x1)) << 16;
        const uint32_t p2 = uint32_t(__bfloat16_as_ushort(x2));
        xz[j][nt] = t == 0 ? p01 : t == 1 ? p2 : 0u;
      }
    };
    {
      if constexpr (!kXFirst) load_x();  // every piece's loads first
      unsigned char* stage = reinterpret_cast<unsigned char*>(red) + warp * 2048;  // 8 rows of 256 bytes
#pragma unroll
      for (int j = 0; j < kNow; ++j)
#pragma unroll
        for (int nt = 0; nt < NT; ++nt) {
#pragma unroll
          for (int i = 0; i < 4; ++i) {
            const int q = lane + 32 * i, r = q / 16;
            *reinterpret_cast<uint4*>(stage + r * 256 + ((q % 16) ^ r) * 16) = xv[j][nt][i];
          }
          __syncwarp();
          frags(stage, j, nt);
          __syncwarp();  // the next piece overwrites the rows
        }
    }
#pragma unroll
    for (int j = 0; j < kNow; ++j) group_sums(j);
    // every warp's staging of X is done before the tile sums reuse the space; the sums are written
    asm volatile("bar.sync 1, %0;\n" ::"n"(32 * W) : "memory");

    // acc[nt]: rows (g, g + 8) x tokens (nt·8 + 2t, + 1) of the tile.
    float acc[NT][4];  // set by a tile's first stage (j == 0)
    int slot = 0, phase = 0;
    // One tile: its PT stages, then its sums. kStatic: tile pairs take slots 0 to PT - 1 and PT to 2 PT - 1 (sb), the
    // phase ph flipping once a pair, so every slot's address is a constant; else the slot counts round the ring.
    auto run_tile = [&](int tile, int sb, int ph) {
#pragma unroll
      for (int j = 0; j < PT; ++j) {
        const int slot_j = kStatic ? sb + j : slot, phase_j = kStatic ? ph : phase;
        if constexpr (kDefer) {
          if (j == 1 && tile == 0) {  // the second group's pieces, copied in during the first stage
            asm volatile("cp.async.wait_group 0;\n" ::: "memory");
            __syncwarp();
#pragma unroll
            for (int nt = 0; nt < NT; ++nt) frags(xdef + nt * 2048, 1, nt);
            group_sums(1);
            __syncwarp();
            if (push) sm90::cluster_arrive_release();  // xdef free for the pushes
          }
        }
        mbar_wait(&full[slot_j], phase_j);
        const uint4* wl = ws + (slot_j * kChunks + warp * kWarpChunks) * 32 + lane;
        const uint32_t sz0 = side[slot_j * 256 + warp * 16 + g], sz1 = side[slot_j * 256 + warp * 16 + g + 8];
        float ga[NT][4];  // the group's sums of (128 + q) x, kZeroMma: of (128 + q - (128 + z)) x
#pragma unroll
        for (int nt = 0; nt < NT; ++nt) ga[nt][0] = ga[nt][1] = ga[nt][2] = ga[nt][3] = 0.f;
        if constexpr (kZeroMma) {
          // The zero point on the tensor cores (m16n8k8): A holds 128 + z (bf16, exact) of rows g and g + 8 in every
          // column, B -X in rows 0-2, so the chain starts at -(128 + z) X.
          const uint32_t zg = __byte_perm(sz0, 0, 0x3232), zg8 = __byte_perm(sz1, 0, 0x3232);
#pragma unroll
          for (int nt = 0; nt < NT; ++nt) mma_bf16_k8(ga[nt], zg, zg8, xz[j][nt]);
        }
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const uint4 cur = wl[32 * h];
          const uint32_t words[4] = {cur.x, cur.y, cur.z, cur.w};
#pragma unroll
          for (int ks = 0; ks < 4; ++ks) {
            const uint32_t w = words[ks];
            const uint32_t a[4] = {lop3_and_or(w, 0x000F000Fu, 0x43004300u), lop3_and_or(w >> 4, 0x000F000Fu, 0x43004300u),
                                   lop3_and_or(w >> 8, 0x000F000Fu, 0x43004300u), lop3_and_or(w >> 12, 0x000F000Fu, 0x43004300u)};
#pragma unroll
            for (int nt = 0; nt < NT; ++nt) mma_bf16(ga[nt], a, xf[j][h][ks][nt][0], xf[j][h][ks][nt][1]);
          }
        }
        // s sum (q - z) x over the group (z stored as 128 + z); a tile's first stage sets acc.
        const float s0 = __uint_as_float(sz0 << 16), s1 = __uint_as_float(sz1 << 16);
        if constexpr (kZeroMma) {
#pragma unroll
          for (int nt = 0; nt < NT; ++nt)
#pragma unroll
            for (int e = 0; e < 4; ++e) {
              const float s = e < 2 ? s0 : s1;
              acc[nt][e] = j == 0 ? s * ga[nt][e] : fmaf(s, ga[nt][e], acc[nt][e]);
            }
        } else {  // s acc - s (128 + z) X
          const float z0 = s0 * __uint_as_float(sz0 & 0xffff0000u), z1 = s1 * __uint_as_float(sz1 & 0xffff0000u);
#pragma unroll
          for (int nt = 0; nt < NT; ++nt) {
            const float2 xg = *reinterpret_cast<const float2*>(xsum + (warp * 4 + j) * 16 + nt * 8 + 2 * t);
            const float f[4] = {s0 * ga[nt][0] - z0 * xg.x, s0 * ga[nt][1] - z0 * xg.y, s1 * ga[nt][2] - z1 * xg.x,
                                s1 * ga[nt][3] - z1 * xg.y};
#pragma unroll
            for (int e = 0; e < 4; ++e) acc[nt][e] = j == 0 ? f[e] : acc[nt][e] + f[e];
          }
        }
        __syncwarp();
        if (lane == 0) mbar_arrive(&empty[slot_j]);  // this warp's reads of the stage are done
        if constexpr (!kStatic)
          if (++slot == kS) slot = 0, phase ^= 1;
      }
      // The tile's sums in one of two buffers (the other's readers, two tiles back, passed the barrier before this
      // one): acc[nt][2h + e] (tokens nt·8 + 2t + e, row g + 8h) at 32 (4 nt + 2 e + h) past the lane's 8t + g.
      float* r = red + (kStatic ? sb / PT : tile & 1) * W * 16 * T;
      float* rw = r + warp * 16 * T + 8 * t + g;
#pragma unroll
      for (int nt = 0; nt < NT; ++nt) {
        rw[32 * (4 * nt)] = acc[nt][0], rw[32 * (4 * nt + 2)] = acc[nt][1];
        rw[32 * (4 * nt + 1)] = acc[nt][2], rw[32 * (4 * nt + 3)] = acc[nt][3];
      }
      asm volatile("bar.sync 1, %0;\n" ::"n"(32 * W) : "memory");  // the consumers
      if (tid < 16 * T) {  // word tid of every warp's sums: (nt, e, h) = tid / 32, (t, g) of its lane
        float v = r[tid];
        for (int w = 1; w < W; ++w) v += r[w * 16 * T + tid];
        const int c = tid / 32, tok = (c >> 2) * 8 + 2 * (lane >> 3) + ((c >> 1) & 1), row = (lane & 7) + 8 * (c & 1);
        if (!kWide && split > 1) part[tile * 16 * T + tok * 16 + row] = v;  // (the wide kernel: unsplit, xdef here)
        else if (tok < p.m) p.y[int64_t(tok) * p.n + tile_of(tile) * 16 + row] = __float2bfloat16_rn(v);
      }
    };
    if constexpr (kStatic) {
#pragma unroll 1
      for (int tile = 0; tile < tiles; tile += 2, phase ^= 1) {
        run_tile(tile, 0, phase);
        if (tile + 1 < tiles) run_tile(tile + 1, PT, phase);
      }
    } else {
#pragma unroll 1
      for (int tile = 0; tile < tiles; ++tile) run_tile(tile, 0, 0);
    }
    if (push && tiles == 0) sm90::cluster_arrive_release();  // (owns no tile)
  }
  // Every block's share of k of the cluster's tiles, added in rank order: tile i by block i % split. (Not compiled into
  // the wide kernel, which is unsplit: with it, where the producer's and consumers' paths meet after setmaxnreg, ptxas
  // spilled 176-244 bytes.)
  if (!kWide && split > 1) {
    constexpr int kQuads = 16 * T / 4;  // a tile's outputs in fours
    if (push) {
      // Every block of the cluster has read its xdef and initialized its parts_in; this block's last tile's sums are in.
      sm90::cluster_wait_acquire();
      __syncthreads();
      for (int i = tid; i < tiles * kQuads; i += kThreadsW) {
        const int tile = i / kQuads, o = (i % kQuads) * 4, owner = tile % split;
        if (owner == rank) continue;
        const float4 v = *reinterpret_cast<const float4*>(part + tile * 16 * T + o);
        sm90::st_async_v4(sm90::cluster_addr(recv + ((tile / split) * split + rank) * 16 * T + o, uint32_t(owner)), v,
                          sm90::cluster_addr(parts_in, uint32_t(owner)));
      }
      sm90::mbar_wait_cluster(parts_in, 0);
    } else {
      sm90::cluster_sync();
    }
    // Four outputs (rows) a thread: every block's four first (independent loads in flight), then the adds in rank order.
    const int mine = (tiles - rank + split - 1) / split;
    for (int i = tid; i < mine * kQuads; i += kThreadsW) {
      const int tile = rank + split * (i / kQuads), o = (i % kQuads) * 4;
      if (o / 16 >= p.m) continue;
      float4 q[8];
#pragma unroll
      for (int r = 0; r < 8; ++r)
        if (r < split)
          q[r] = !push       ? ld_cluster_f32x4(sm90::cluster_addr(part + tile * 16 * T + o, uint32_t(r)))
                 : r == rank ? *reinterpret_cast<const float4*>(part + tile * 16 * T + o)
                             : *reinterpret_cast<const float4*>(recv + ((i / kQuads) * split + r) * 16 * T + o);
      float4 v = q[0];
#pragma unroll
      for (int r = 1; r < 8; ++r)
        if (r < split) v.x += q[r].x, v.y += q[r].y, v.z += q[r].z, v.w += q[r].w;
      __nv_bfloat162* out =
          reinterpret_cast<__nv_bfloat162*>(p.y + int64_t(o / 16) * p.n + tile_of(tile) * 16 + o % 16);
      out[0] = __floats2bfloat162_rn(v.x, v.y);
      out[1] = __floats2bfloat162_rn(v.z, v.w);
    }
    if (!push) sm90::cluster_sync();  // no block leaves while another reads its shared memory
  }
#else
  __trap();  // built for a GPU without sm_90a: the plan never selects this kernel there
#endif
}

template <WeightFormat F, int XR = 0>
void launch(RingParams rp, const void* scales, cudaStream_t stream) {
  constexpr bool kInt4 = F == WeightFormat::int4;
  auto kernel = weight_only_mma_tma_kernel<F, XR>;
  const int max_tiles = (rp.tiles + rp.blocks - 1) / rp.blocks;
  const Layout L(kInt4, rp.k, max_tiles);
  if (XR > 0 && rp.k != XR * 2048)  // the kernel takes a tile as XR stages without counting them
    throw Error("linear (weight-only mma_tma): X's fragments held for " + std::to_string(XR) + " stages a tile, k = " +
                std::to_string(rp.k));
  if (int64_t(L.bytes) != weight_only_mma_tma_smem_bytes(F, rp.k, max_tiles, 1))
    throw Error("linear (weight-only mma_tma): the kernel's shared memory and sim/kernels.h's disagree");
  static KernelSmem attr;
  attr.ensure(kernel, L.bytes, "linear (weight-only mma_tma)");
  // int4's scales uint32 [k/128][n] as boxes of 16 rows x 16 groups; int8 passes an unused map.
  CUtensorMap map_s{};
  if constexpr (kInt4) {
    const uint64_t dims[2] = {uint64_t(rp.n), uint64_t(rp.k / 128)};
    const uint64_t strides[1] = {uint64_t(rp.n) * 4};
    const uint32_t box[2] = {16, 16};
    map_s = make_tensor_map("linear (weight-only mma_tma)", scales, CU_TENSOR_MAP_DATA_TYPE_UINT32, 2, dims, strides, box,
                            CU_TENSOR_MAP_SWIZZLE_NONE);
  } else {
    rp.channel = static_cast<const float*>(scales);
  }
  kernel<<<unsigned(rp.blocks), kThreads, L.bytes, stream>>>(rp, map_s);
  INFERLAB_CHECK_LAUNCH();
}

// int4 at 2 to 16 tokens: NT n8 tiles of tokens, PT stages (W groups, 128 W columns) a tile a block, rp.split blocks a
// cluster.
template <int NT, int PT, int W = kWarps>
void launch_tokens(const RingParams& rp, const void* scales, cudaStream_t stream) {
  auto kernel = weight_only_mma_tma_tokens_kernel<NT, PT, W>;
  const int clusters = rp.blocks / rp.split, max_tiles = (rp.tiles + clusters - 1) / clusters;
  const TokensLayout L(NT, max_tiles, rp.split, tokens_defer(NT, PT), W, tokens_stages(NT, PT, W));
  if (int64_t(L.bytes) != weight_only_mma_tma_smem_bytes(WeightFormat::int4, rp.k, max_tiles, rp.m, rp.split))
    throw Error("linear (weight-only mma_tma): the kernel's shared memory and sim/kernels.h's disagree");
  static KernelSmem attr;
  attr.ensure(kernel, L.bytes, "linear (weight-only mma_tma)");
  if constexpr (tokens_wide(NT, PT, W)) {
    // setmaxnreg moves registers within the block's launch allotment: the consumers' raise to 112 would wait forever
    // if ptxas had built the kernel with fewer than the 96 it is given at 640 threads (-maxrregcount, a debug build).
    static const int regs = [&] {
      cudaFuncAttributes fa{};
      INFERLAB_CUDA_CHECK(cudaFuncGetAttributes(&fa, kernel));
      return fa.numRegs;
    }();
    if (regs != kWideLaunchRegs)
      throw Error("linear (weight-only mma_tma): the wide kernel was built with " + std::to_string(regs) +
                  " registers a thread; its setmaxnreg (" + std::to_string(kWideProducerRegs) + " / " +
                  std::to_string(kWideConsumerRegs) + ") needs the " + std::to_string(kWideLaunchRegs) + " of a " +
                  std::to_string(tokens_threads(NT, PT, W)) + "-thread block");
  }
  const uint64_t dims[2] = {uint64_t(rp.n), uint64_t(rp.k / 128)};
  const uint64_t strides[1] = {uint64_t(rp.n) * 4};
  const uint32_t box[2] = {16, uint32_t(W)};  // a stage's scales: 16 rows x W groups
  const CUtensorMap map_s = make_tensor_map("linear (weight-only mma_tma)", scales, CU_TENSOR_MAP_DATA_TYPE_UINT32, 2,
                                            dims, strides, box, CU_TENSOR_MAP_SWIZZLE_NONE);
  cudaLaunchConfig_t config{};
  config.gridDim = dim3(unsigned(rp.blocks));
  config.blockDim = dim3(unsigned(tokens_threads(NT, PT, W)));
  config.dynamicSmemBytes = std::size_t(L.bytes);
  config.stream = stream;
  cudaLaunchAttribute cluster_dim{};
  cluster_dim.id = cudaLaunchAttributeClusterDimension;
  cluster_dim.val.clusterDim.x = unsigned(rp.split);
  cluster_dim.val.clusterDim.y = 1;
  cluster_dim.val.clusterDim.z = 1;
  config.attrs = &cluster_dim;
  config.numAttrs = 1;
  INFERLAB_CUDA_CHECK(cudaLaunchKernelEx(&config, kernel, rp, map_s));
  INFERLAB_CHECK_LAUNCH();
}

}  // namespace

void weight_only_linear_mma_tma(const LinearParams& p, const LinearPlan& plan, cudaStream_t stream) {
  RingParams rp{};
  rp.x = static_cast<const __nv_bfloat16*>(p.x);
  rp.w = static_cast<const uint4*>(p.w);
  rp.y = static_cast<__nv_bfloat16*>(p.y);
  rp.m = int(p.m);
  rp.n = int(p.n);
  rp.k = int(p.k);
  rp.tiles = int(p.n / 16);
  rp.blocks = int(plan.ctas);
  rp.split = 1;
  if (p.m > 1) {  // int4 (sim/kernels.h weight_only_mma_tma_refusal): the tiles of tokens, the split, the stages a tile
    const int nt = int(weight_only_mma_tma_token_tiles(p.m));
    rp.split = plan.cluster;
    const bool wide = weight_only_mma_tma_wide(p.m, p.k, rp.split);
    const bool narrow = weight_only_mma_tma_narrow(p.m, p.k, rp.split);
    const int cols = 128 * weight_only_mma_tma_warps(p.m, p.k, rp.split), pt = int(p.k / cols) / rp.split;
    if (p.format != WeightFormat::int4 || (nt * pt > kMmaTmaMaxGroupTiles && !wide && !narrow) ||
        pt * rp.split * cols != p.k || rp.blocks % rp.split != 0)
      throw Error("linear (weight-only mma_tma): the plan passed a shape the kernel does not take");
    if (narrow) return launch_tokens<2, 2, kMmaTmaNarrowWarps>(rp, p.scales, stream);
    if (nt == 1 && pt == 1) return launch_tokens<1, 1>(rp, p.scales, stream);
    if (nt == 1 && pt == 2) return launch_tokens<1, 2>(rp, p.scales, stream);
    if (wide) return launch_tokens<2, 2>(rp, p.scales, stream);
    return launch_tokens<2, 1>(rp, p.scales, stream);
  }
  switch (p.format) {
    case WeightFormat::int4:  // X's fragments in registers where a tile is one or two stages (k = 2048, 4096)
      if (p.k == 2048) return launch<WeightFormat::int4, 1>(rp, p.scales, stream);
      if (p.k == 4096) return launch<WeightFormat::int4, 2>(rp, p.scales, stream);
      return launch<WeightFormat::int4>(rp, p.scales, stream);
    case WeightFormat::int8: return launch<WeightFormat::int8>(rp, p.scales, stream);
    default: throw Error("linear (weight-only mma_tma): format " + weight_format_name(p.format) + " has no kernel here");
  }
}

}  // namespace inferlab
