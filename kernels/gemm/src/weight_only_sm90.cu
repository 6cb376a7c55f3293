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
//     conversion of weight_only.cu (two lop3 and an FMA a pair, dequant.cuh), products straight into the result, the channel
//     scale at the end;
//   - per unit every thread waits for its own copies, fences them to the tensor cores' proxy and meets
//     the block at a barrier; then dequantization, the 8 products (waited for: wait_group 0) and the
//     scale-in (weight_only_sm90_unit.cuh, shared with weight_only_sm90_tma.cu, which changes only the
//     pipeline: a producer thread, TMA and mbarriers instead of this per-unit fence and barrier).
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
#include "mma_sync.cuh"
#include "weight_only.h"
#include "weight_only_sm90_unit.cuh"

namespace inferlab {
namespace {

constexpr int kWarps = 8, kThreads = kWarps * 32, kBlockRows = kWoBlockRows, kGroup = kWoGroup;

// The tile choices (sim/kernels.h, one place): stages, blocks per SM, shared memory.
template <WeightFormat F, int N>
struct WgTile {
  static constexpr bool kInt4 = F == WeightFormat::int4;
  static constexpr int kCols = kInt4 ? 64 : 32;   // weight columns per 512-byte chunk (quant.h)
  static constexpr int kChunks = kGroup / kCols;  // one warp's chunks per unit
  static constexpr int kStages = weight_only_wgmma_stages(F, N);
  static constexpr int kAhead = kStages - 1;      // units in flight (the stage in use holds the other)
  static constexpr int kXBytes = N * kGroup * 2;
  static constexpr int kWBytes = kWarps * kChunks * 512;
  static constexpr int kSBytes = kInt4 ? kBlockRows * 4 : 0;
  static constexpr int kSmem = int(weight_only_wgmma_smem_bytes(F, N));
  static constexpr int kMinBlocks = weight_only_wgmma_blocks_per_sm(N);
  static_assert(kStages * (kXBytes + kWBytes + kSBytes) + 1024 == kSmem, "sim/kernels.h's tile table and the kernel agree");
  static_assert(kStages >= 2, "one stage in use, one at least in flight");
  static_assert(N * 16 % kThreads == 0, "X's 16-byte pieces divide among the threads");
};

__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void cp_async_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory"); }

template <WeightFormat F, int N>
__global__ void __launch_bounds__(kThreads, WgTile<F, N>::kMinBlocks)
    weight_only_wgmma_kernel(const __grid_constant__ WoSm90Params p) {
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

  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32, g = lane / 4;
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

  float acc[N / 2];       // the tile's stretch so far (scale_in's layout)
  float grp_acc[N / 2];   // a unit's products: int4 Σ (q − z)·x, int8 Σ q·x (only wgmma writes them)
  uint32_t a[8][4];       // A fragments of a unit's 8 k16 steps
#pragma unroll
  for (int e = 0; e < N / 2; ++e) acc[e] = 0.f;
  int seg_first = u_begin;  // the first unit of the tile's stretch in progress
  const uint64_t desc0 = sm90::desc_sw128(sm90::shared_addr(xs), 16, 1024);

#pragma unroll 1
  for (int i = 0; i < count; ++i) {
    cp_async_wait<P - 1>();  // unit i's copies (this thread's) have landed
    sm90::fence_proxy_async();  // ... ordered before the tensor cores' reads of X
    __syncthreads();         // every thread's; and every warpgroup is done with unit i - 1's stage
    const int u = u_begin + i, slot = i % S;
    float sc0, sc1;
    dequant_unit<T::kInt4>(ws + (slot * kWarps + warp) * T::kChunks * 32 + lane, ss + slot * kBlockRows + warp * 16, g, a,
                           sc0, sc1);
    load(i + P);  // the copies of the unit P ahead, in flight while this one's products run
    mma_unit<N>(a, desc0 + uint64_t(slot * (T::kXBytes / 16)), grp_acc);
    scale_in<N>(acc, grp_acc, sc0, sc1);
    const int tile = u / groups;
    if ((u + 1) % groups == 0 || i + 1 == count) {  // the tile's stretch ends here
      write_out<F, N>(p, acc, tile, seg_first == tile * groups && (u + 1) % groups == 0, warp, lane, tid == 0,
                             last_flag, [] { __syncthreads(); });
      seg_first = u + 1;
    }
  }
}

template <WeightFormat F, int N>
void launch(WoSm90Params wp, cudaStream_t stream) {
  using T = WgTile<F, N>;
  auto kernel = weight_only_wgmma_kernel<F, N>;
  static KernelSmem attr;
  attr.ensure(kernel, T::kSmem, "linear (weight-only wgmma)");
  wp.blocks = persistent_blocks(kernel, kThreads, T::kSmem, wp.blocks, "linear (weight-only wgmma)");
  kernel<<<unsigned(wp.blocks), kThreads, T::kSmem, stream>>>(wp);
  INFERLAB_CHECK_LAUNCH();
}

template <WeightFormat F>
void launch_tokens(const WoSm90Params& wp, int tokens, cudaStream_t stream) {
  switch (tokens) {
    case 16: return launch<F, 16>(wp, stream);
    case 32: return launch<F, 32>(wp, stream);
    case 64: return launch<F, 64>(wp, stream);
    default: throw Error("linear (weight-only wgmma): no tile for " + std::to_string(tokens) + " tokens");
  }
}

}  // namespace

void weight_only_linear_sm90(const LinearParams& p, const LinearPlan& plan, cudaStream_t stream) {
  const WoSm90Params wp = wo_sm90_params(p, plan);
  switch (p.format) {
    case WeightFormat::int4: return launch_tokens<WeightFormat::int4>(wp, plan.tokens, stream);
    case WeightFormat::int8: return launch_tokens<WeightFormat::int8>(wp, plan.tokens, stream);
    default: throw Error("linear (weight-only wgmma): format " + weight_format_name(p.format) + " has no wgmma kernel");
  }
}

}  // namespace inferlab
