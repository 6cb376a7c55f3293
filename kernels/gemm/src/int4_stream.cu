// int4 weight-only linear for the decode regime (m <= 8 tokens), streamed like gemv.cu: the "stream"
// variant of the weight-only family (weight_only.cu holds the "tiles" one; LinearPlan::kernel picks).
// The packed layout is quant.h's (16 rows x 64 columns per 512-byte chunk, in mma.sync A-fragment order,
// chunks [row tile n/16][k/64]); what changes is how the work is cut:
//   - a warp owns one 16-row tile over a range of whole 128-column groups, so its chunks are contiguous:
//     each lane keeps 8 chunks (16 bytes each) in flight, with the group scales they need loaded beside
//     them (a scale word is read once by one warp: it must be in flight too, not fetched when needed);
//   - X needs no shared memory: the mma B fragments (token = lane / 4, columns 2t, 2t+1 and 2t+8, 2t+9 of
//     each k16 step) are read straight from global memory (every warp reads X: it stays in L1/L2);
//   - the warps of a tile (1, 2, 4 or 8: enough warps in all to keep ~16 per SM streaming) add their partial
//     sums through shared memory, and one writes Y: no atomics, no workspace, no second pass.
// Dequantization as the tiles kernel: (w >> 4i) & 0x000F000F | 0x43004300 is a bf16x2 of 128 + q exactly;
// per group, s * sum (128 + q) x - s (128 + z) sum x takes the 128 and the zero point out, with the group's
// sum of x per token reduced across the 4 lanes that loaded it.
#include <cuda_bf16.h>

#include <algorithm>

#include "inferlab/kernels/common/check.h"
#include "inferlab/sim/error.h"
#include "inferlab/sim/kernels.h"
#include "weight_only.h"

namespace inferlab {
namespace {

constexpr int kWarps = 8, kThreads = kWarps * 32;
constexpr int kDepth = 8;           // chunks in flight per lane
constexpr int kChunkUint4 = 32;     // 512 bytes
constexpr int kGroupChunks = 2;     // 128 columns = 2 chunks of 64

__device__ __forceinline__ uint4 load_stream(const uint4* p) {
  uint4 v;
  asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p));
  return v;
}

__device__ __forceinline__ uint32_t lop3_and_or(uint32_t a, uint32_t b, uint32_t c) {  // (a & b) | c
  uint32_t d;
  asm("lop3.b32 %0, %1, %2, %3, 0xEA;\n" : "=r"(d) : "r"(a), "r"(b), "r"(c));
  return d;
}

__device__ __forceinline__ void mma_bf16(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

__device__ __forceinline__ float lo_f(uint32_t u) { return __uint_as_float(u << 16); }
__device__ __forceinline__ float hi_f(uint32_t u) { return __uint_as_float(u & 0xffff0000u); }

struct StreamParams {
  const __nv_bfloat16* x;  // [m, k]
  const uint4* w;          // packed chunks
  const uint32_t* sz;      // [k/128][n]: bf16 scale (low) | bf16 128 + z (high)
  __nv_bfloat16* y;        // [m, n]
  int m, n, k;
  int warps_per_tile;      // W: warps sharing a row tile's k range
  int groups_per_warp;
};

__global__ void __launch_bounds__(kThreads) int4_stream_kernel(const __grid_constant__ StreamParams p) {
  __shared__ float partial[kWarps][32][4];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const int W = p.warps_per_tile;
  const int tile = blockIdx.x * (kWarps / W) + warp / W, part = warp % W;
  const int row0 = tile * 16;
  const int groups = p.k / 128;
  const int g0 = min(groups, part * p.groups_per_warp), g1 = min(groups, g0 + p.groups_per_warp);
  const int chunks = (g1 - g0) * kGroupChunks;
  const bool active = row0 < p.n && chunks > 0;

  // The weight: this warp's chunks are contiguous from (tile, 2 g0); each lane's 16 bytes of each.
  const uint4* wp = p.w + (int64_t(tile) * (p.k / 64) + int64_t(g0) * kGroupChunks) * kChunkUint4 + lane;
  const uint32_t* sp = p.sz + int64_t(g0) * p.n + row0 + g;  // rows g and g + 8 of group g0
  uint4 ring[kDepth];
  uint2 sring[kDepth / kGroupChunks];
#pragma unroll
  for (int i = 0; i < kDepth; ++i)
    if (active && i < chunks) {
      ring[i] = load_stream(wp + i * kChunkUint4);
      if (i % kGroupChunks == 0) {
        const uint32_t* s = sp + int64_t(i / kGroupChunks) * p.n;
        sring[i / kGroupChunks] = make_uint2(__ldg(s), __ldg(s + 8));
      }
    }

  float acc[4] = {0.f, 0.f, 0.f, 0.f};  // rows (g, g + 8) x tokens (2t, 2t + 1)
  if (active) {
    const bool has_token = g < p.m;  // this lane loads X of token g
    const __nv_bfloat16* xr = p.x + int64_t(has_token ? g : 0) * p.k + int64_t(g0) * 128 + 2 * t;
    float grp[4], xsum = 0.f;
    for (int c0 = 0; c0 < chunks; c0 += kDepth) {
#pragma unroll
      for (int i = 0; i < kDepth; ++i) {
        const int c = c0 + i;
        if (c >= chunks) break;
        const uint4 cur = ring[i];
        if (i % kGroupChunks == 0) grp[0] = grp[1] = grp[2] = grp[3] = 0.f, xsum = 0.f;
        // X fragments of the chunk's 4 k16 steps (token g, zero for padding tokens).
        uint32_t b[4][2];
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          const __nv_bfloat16* xp = xr + c * 64 + 16 * j;
          b[j][0] = has_token ? __ldg(reinterpret_cast<const unsigned int*>(xp)) : 0u;
          b[j][1] = has_token ? __ldg(reinterpret_cast<const unsigned int*>(xp + 8)) : 0u;
          xsum += lo_f(b[j][0]) + hi_f(b[j][0]) + lo_f(b[j][1]) + hi_f(b[j][1]);
        }
        const uint32_t words[4] = {cur.x, cur.y, cur.z, cur.w};
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          const uint32_t w = words[j];
          const uint32_t a[4] = {lop3_and_or(w, 0x000F000Fu, 0x43004300u), lop3_and_or(w >> 4, 0x000F000Fu, 0x43004300u),
                                 lop3_and_or(w >> 8, 0x000F000Fu, 0x43004300u), lop3_and_or(w >> 12, 0x000F000Fu, 0x43004300u)};
          mma_bf16(grp, a, b[j][0], b[j][1]);
        }
        if (i % kGroupChunks == kGroupChunks - 1) {
          // The group ends: sum x over its 128 columns per token (the quad of lanes that loaded token g),
          // then each lane takes the sums of its tokens 2t and 2t + 1.
          float xs = xsum;
          xs += __shfl_xor_sync(~0u, xs, 1);
          xs += __shfl_xor_sync(~0u, xs, 2);
          const float x0 = __shfl_sync(~0u, xs, 4 * (2 * t)), x1 = __shfl_sync(~0u, xs, 4 * (2 * t + 1));
          const uint2 sz = sring[i / kGroupChunks];
          const float s0 = lo_f(sz.x), s1 = lo_f(sz.y);
          const float c0v = s0 * hi_f(sz.x), c1v = s1 * hi_f(sz.y);
          acc[0] += s0 * grp[0] - c0v * x0;
          acc[1] += s0 * grp[1] - c0v * x1;
          acc[2] += s1 * grp[2] - c1v * x0;
          acc[3] += s1 * grp[3] - c1v * x1;
        }
        if (c + kDepth < chunks) {  // refill the slot just used; a group's scale slot once its group has ended
          ring[i] = load_stream(wp + (c + kDepth) * kChunkUint4);
          if (i % kGroupChunks == kGroupChunks - 1) {
            const uint32_t* s = sp + int64_t((c + kDepth) / kGroupChunks) * p.n;
            sring[i / kGroupChunks] = make_uint2(__ldg(s), __ldg(s + 8));
          }
        }
      }
    }
  }
  // The tile's warps add their sums; the first writes rows (g, g + 8) x tokens (2t, 2t + 1).
  if (W > 1) {
#pragma unroll
    for (int e = 0; e < 4; ++e) partial[warp][lane][e] = acc[e];
    __syncthreads();
    if (part != 0) return;
    for (int w = 1; w < W; ++w)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[e] += partial[warp + w][lane][e];
  }
  if (row0 >= p.n) return;
#pragma unroll
  for (int e = 0; e < 4; ++e) {
    const int mi = 2 * t + (e & 1), row = row0 + g + 8 * (e >> 1);
    if (mi < p.m) p.y[int64_t(mi) * p.n + row] = __float2bfloat16_rn(acc[e]);
  }
}

}  // namespace

void int4_stream_linear(const LinearParams& p, int sm_count, cudaStream_t stream) {
  StreamParams sp{};
  sp.x = static_cast<const __nv_bfloat16*>(p.x);
  sp.w = static_cast<const uint4*>(p.w);
  sp.sz = static_cast<const uint32_t*>(p.scales);
  sp.y = static_cast<__nv_bfloat16*>(p.y);
  sp.m = int(p.m), sp.n = int(p.n), sp.k = int(p.k);
  const Int4StreamPlan plan = plan_int4_stream(p.n, p.k, sm_count);  // sim/kernels.h: the model's grid too
  sp.warps_per_tile = plan.warps_per_tile;
  sp.groups_per_warp = int(plan.groups_per_warp);
  int4_stream_kernel<<<unsigned(plan.blocks), kThreads, 0, stream>>>(sp);
  INFERLAB_CHECK_LAUNCH();
}

}  // namespace inferlab
