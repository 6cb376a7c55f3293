// Weight-only linear layers on Hopper, the pipelined rung (WeightOnlyKernel::wgmma_tma, sm_90a, int8, int4
// and sparse24, m = 1..64). Diff it against weight_only_sm90.cu: the units, the ring of shared-memory stages,
// the dequantization into wgmma's A registers, the persistent stream-k grid and its write-out are the same;
// what changes is who fills the ring and how a consumer learns that a stage has landed. 2:4 is this rung's
// alone: its compressed values are already the A fragments of wgmma.sp m64nNk32 (quant.h stores them in
// mma.sp's order, which is the warp's share of wgmma's), so a unit is 4 sparse products on the stage's
// values and metadata words, with no conversion.
//
// weight_only_sm90.cu has every thread copy its own 16-byte pieces with cp.async and, per unit, wait for
// its copies, fence them to the tensor cores' (async) proxy and meet the block at a barrier. ptxas
// compiles that fence to MEMBAR.ALL.CTA, which waits for every copy the thread has in flight, the next
// units' included: each unit waits one DRAM latency however deep the ring is (kernels/gemm/NOTES.md:
// ~1.6 us a unit at every N, 27 units a block on the 14336 x 4096 layer: 43 us, 0.93x cuBLAS at m = 64).
// Here:
//   - producer warps (one copying thread each, taking the units in turn: sim/kernels.h
//     weight_only_tma_producers) fill the ring for the whole block: X's [N x 128] tile by TMA (a 2-d
//     tensor map over X [m, k], two 64-column boxes that land 128-byte swizzled as wgmma reads them,
//     tokens past m zero-filled by the hardware), the unit's weight by one bulk copy per consumer warp
//     (its chunks of the group are contiguous: quant.h) or, for 2:4, by ONE box of a 3-d tensor map over
//     the packed chunks ([n/16 row tiles][k/C chunks][512 bytes]: the box is the 8 row tiles' chunks of
//     the group, landing warp after warp as the consumers read them, row tiles past n zero-filled) and its
//     metadata by one more of the same shape over its words, int4's scales of the 128 rows by one bulk
//     copy; all of them complete on the stage's `full` mbarrier. A thread's copies are processed one
//     after another (NOTES.md tma2: a stage of eight 1 KB copies from one thread a block streams 2.0 TB/s
//     over the GPU, one 8 KB copy 3.07); which layout of copies is faster is measured per format (tma3:
//     the box took 2:4 from 18 copies a unit to 4 and 10% off its time; int4 at m = 16 was 17% slower
//     with it). The weight is read once: its copies carry an L2 evict-first hint;
//   - the copies land through the async proxy the tensor cores read from, so no proxy fence is needed
//     before a wgmma reads X; a consumer waits on `full` and on nothing else;
//   - each consumer warp releases the stage (`empty`, 8 arrivals) once its wgmma batch, which reads X
//     there, has completed; the producer refills it S units later. S - 1 units are in flight beside
//     the one being consumed whatever the consumers do;
//   - the two consumer warpgroups meet only where a tile shared with another block is written out
//     (named barrier 1, their 256 threads), not once per unit.
// The model of its cost is sim/kernels.h linear_kernels (WeightOnlyKernel::wgmma_tma).
#include <cuda.h>
#include <cuda_bf16.h>

#include <algorithm>
#include <string>

#include "inferlab/kernels/common/check.h"
#include "inferlab/kernels/common/kernel_attributes.h"
#include "inferlab/kernels/common/tensor_map.h"
#include "inferlab/kernels/gemm/linear.h"
#include "inferlab/sim/error.h"
#include "inferlab/sim/kernels.h"
#include "weight_only.h"
#include "weight_only_sm90_unit.cuh"

namespace inferlab {
namespace {

constexpr int kConsumerWarps = 8, kConsumers = kConsumerWarps * 32;
constexpr int kBlockRows = kWoBlockRows, kGroup = kWoGroup;

// The tile choices (sim/kernels.h, one place).
template <WeightFormat F, int N>
struct TmaTile {
  static constexpr bool kInt4 = F == WeightFormat::int4;
  static constexpr bool kSparse = F == WeightFormat::sparse24;
  static constexpr int kCols = kInt4 ? 64 : 32;   // weight columns per 512-byte chunk (quant.h)
  static constexpr int kChunks = kGroup / kCols;  // one warp's chunks per unit (2:4: one a k32 step)
  static constexpr int kStages = weight_only_tma_stages(F, N);
  static constexpr int kXBytes = N * kGroup * 2;
  static constexpr int kWBytes = kConsumerWarps * kChunks * 512;
  static constexpr int kMetaWarpBytes = kSparse ? kChunks * 64 : 0;  // 2:4: a warp's 16 words a k32 step
  static constexpr int kSBytes = int(weight_only_side_bytes(F));  // int4's scales or 2:4's metadata
  static constexpr int kBarrierOffset = kStages * (kXBytes + kWBytes + kSBytes);
  static constexpr int kSmem = int(weight_only_tma_smem_bytes(F, N));
  static constexpr int kMinBlocks = weight_only_tma_blocks_per_sm(N);
  static constexpr int kProducers = weight_only_tma_producers(F, N);  // producer warps, one copying thread each
  static constexpr int kThreads = kConsumers + 32 * kProducers;
  static_assert(!kSparse || kSBytes == kConsumerWarps * kMetaWarpBytes, "2:4's side data is its warps' metadata");
  // The bytes every unit's boxes land (boxes count whole, past-the-end rows included); int4's scales add theirs.
  // The weight as one box of the 3-d map (2:4), or a bulk copy per warp (int4, int8: measured faster, tma3).
  static constexpr bool kWeightBox = weight_only_tma_weight_box(F);
  static constexpr uint32_t kStageTx = uint32_t(kXBytes + (kWeightBox ? kWBytes : 0) + (kSparse ? kSBytes : 0));
  static_assert(kBarrierOffset + 1024 + 256 == kSmem, "sim/kernels.h's tile table and the kernel agree");
  static_assert(kStages >= 2 && kStages <= 8, "a stage in use, at least one in flight; 2 x 8 mbarriers in 128 bytes");
  // Producer p takes units p, p + P, ...: round i / S of a slot is one producer's only while P <= S.
  static_assert(kProducers <= kStages, "more producers than ring slots: two could wait on one slot's phases");
  static_assert(kXBytes % 1024 == 0, "every stage's X starts on the 1024-byte boundary the 128-byte swizzle needs");
};

using sm90::mbar_arrive;
using sm90::mbar_expect_tx;
using sm90::mbar_init;
using sm90::mbar_wait;
using sm90::bulk_load;
using sm90::evict_first_policy;
using sm90::shared_addr;
using sm90::tma_load_2d;

// One box of a 3-d tensor map at (c0, c1, c2), unswizzled, completing on `bar`, with an L2 eviction policy.
__device__ __forceinline__ void tma_load_3d(void* dst, const CUtensorMap* map, int c0, int c1, int c2, uint64_t* bar,
                                            uint64_t policy) {
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint [%0], [%1, {%2, %3, %4}], "
      "[%5], %6;\n" ::"r"(shared_addr(dst)),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(c1), "r"(c2), "r"(shared_addr(bar)), "l"(policy)
      : "memory");
}

__device__ __forceinline__ void consumers_sync() { asm volatile("bar.sync 1, %0;\n" ::"n"(kConsumers) : "memory"); }

template <WeightFormat F, int N>
__global__ void __launch_bounds__(TmaTile<F, N>::kThreads, TmaTile<F, N>::kMinBlocks)
    weight_only_tma_kernel(const __grid_constant__ WoSm90Params p, const __grid_constant__ CUtensorMap map_x,
                           const __grid_constant__ CUtensorMap map_w, const __grid_constant__ CUtensorMap map_m) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  using T = TmaTile<F, N>;
  constexpr int S = T::kStages;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  // [X stages | weight stages | side stages (int4's scales, 2:4's metadata) | full[S] | empty[S] | flag], X
  // 1024-byte aligned
  // (by hand: no static shared memory, the whole 227 KB a block may hold is the kernel's to plan).
  unsigned char* smem = smem_raw + ((1024 - (shared_addr(smem_raw) & 1023)) & 1023);
  unsigned char* xs = smem;
  uint4* ws = reinterpret_cast<uint4*>(smem + S * T::kXBytes);
  uint32_t* ss = reinterpret_cast<uint32_t*>(smem + S * (T::kXBytes + T::kWBytes));  // side data
  uint64_t* full = reinterpret_cast<uint64_t*>(smem + T::kBarrierOffset);
  uint64_t* empty = full + S;
  int& last_flag = *reinterpret_cast<int*>(smem + T::kBarrierOffset + 128);

  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32, g = lane / 4;
  const int groups = p.k / kGroup;
  const int u_begin = int(int64_t(blockIdx.x) * p.units / p.blocks);
  const int count = int(int64_t(blockIdx.x + 1) * p.units / p.blocks) - u_begin;

  if (tid == 0) {
    for (int s = 0; s < S; ++s) {
      mbar_init(&full[s], 1);                // the producer's arrive.expect_tx, then the unit's bytes
      mbar_init(&empty[s], kConsumerWarps);  // every consumer warp's batch that read the stage is done
    }
    sm90::fence_mbar_init();
  }
  __syncthreads();  // the last block-wide barrier

  if (warp >= kConsumerWarps) {  // the producers: one copying thread a warp, unit i to producer i mod P
    if (lane != 0) return;
    const int pr = warp - kConsumerWarps;
    const uint64_t policy = evict_first_policy();
#pragma unroll 1
    for (int i = pr; i < count; i += T::kProducers) {
      const int slot = i % S, u = u_begin + i, tile = u / groups, grp = u % groups;
      // (Round i / S of this slot is this producer's: no other can wait on the same phase.)
      if (i >= S) mbar_wait(&empty[slot], (i / S - 1) & 1);
      const int rows = min(kBlockRows, p.n - tile * kBlockRows);  // a multiple of 16: whole warps
      mbar_expect_tx(&full[slot], T::kStageTx + (T::kWeightBox ? 0u : uint32_t(rows / 16) * uint32_t(T::kChunks) * 512) +
                                      (T::kInt4 ? uint32_t(rows) * 4 : 0u));
      unsigned char* xd = xs + slot * T::kXBytes;
      tma_load_2d(xd, &map_x, grp * kGroup, 0, &full[slot]);
      tma_load_2d(xd + N * 128, &map_x, grp * kGroup + 64, 0, &full[slot]);
      if constexpr (T::kWeightBox) {
        tma_load_3d(ws + slot * (T::kWBytes / 16), &map_w, 0, grp * T::kChunks, tile * kConsumerWarps, &full[slot], policy);
      } else {  // each warp's chunks of the group (contiguous) by one bulk copy; only the warps within n
        for (int w = 0; w < rows / 16; ++w)
          bulk_load(ws + (slot * kConsumerWarps + w) * T::kChunks * 32,
                    p.w + (int64_t(tile * kConsumerWarps + w) * (p.k / T::kCols) + grp * T::kChunks) * 32,
                    uint32_t(T::kChunks) * 512, &full[slot], policy);
      }
      if constexpr (T::kSparse)
        tma_load_3d(ss + slot * (T::kSBytes / 4), &map_m, 0, grp * T::kChunks, tile * kConsumerWarps, &full[slot], policy);
      if constexpr (T::kInt4)
        bulk_load(ss + slot * kBlockRows, static_cast<const uint32_t*>(p.scales) + int64_t(grp) * p.n + tile * kBlockRows,
                  uint32_t(rows) * 4, &full[slot], policy);
    }
    return;
  }

  // The consumers: warpgroups 0 and 1, each 64 rows of the unit's 128. Rows past n (a tile's last
  // warps) compute on whatever their stage holds and are never stored.
  float acc[N / 2];
  float grp_acc[N / 2];
  uint32_t a[8][4];
#pragma unroll
  for (int e = 0; e < N / 2; ++e) acc[e] = 0.f;
  // The unit's tile and group, the ring's slot and phase, carried from unit to unit (no division in
  // the loop); a stage's descriptors are the first stage's plus its offset in 16-byte units.
  int tile = u_begin / groups, grp = u_begin % groups, slot = 0, phase = 0;
  bool whole = grp == 0;  // the block holds the tile's stretch from its first group
  const uint64_t desc0 = sm90::desc_sw128(shared_addr(xs), 16, 1024);
  // 2:4: a warp past n (a tile's last rows) finds no metadata of its own in the stage; it multiplies with
  // a valid pattern (indices 0 and 1 in every group) instead, its rows never stored.
  bool live = warp * 16 < p.n - tile * kBlockRows;

#pragma unroll 1
  for (int i = 0; i < count; ++i) {
    mbar_wait(&full[slot], phase);
    float sc0 = 1.f, sc1 = 1.f;
    const uint4* wl = ws + (slot * kConsumerWarps + warp) * T::kChunks * 32 + lane;
    if constexpr (T::kSparse) {
      // This lane's fragment of each k32 step as stored; threads 0 and 1 of a quad pass metadata word
      // 2g + t of the step (2 and 3 the same: only the selector's pair is read).
      uint32_t as[4][4], e[4];
      const uint32_t* ml = ss + (slot * kConsumerWarps + warp) * T::kChunks * 16 + 2 * g + (lane & 1);
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const uint4 c = wl[j * 32];
        as[j][0] = c.x, as[j][1] = c.y, as[j][2] = c.z, as[j][3] = c.w;
        e[j] = live ? ml[j * 16] : 0x44444444u;
      }
      mma_unit_sparse<N>(as, e, desc0 + uint64_t(slot * (T::kXBytes / 16)), grp_acc);
    } else {
      dequant_unit<T::kInt4>(wl, ss + slot * kBlockRows + warp * 16, g, a, sc0, sc1);
      mma_unit<N>(a, desc0 + uint64_t(slot * (T::kXBytes / 16)), grp_acc);
    }
    __syncwarp();
    if (lane == 0) mbar_arrive(&empty[slot]);  // this warp's reads of the stage (weight, scales, X) are done
    scale_in<N>(acc, grp_acc, sc0, sc1);
    if (++slot == S) slot = 0, phase ^= 1;
    if (++grp == groups || i + 1 == count) {  // the tile's stretch ends here
      write_out<F, N>(p, acc, tile, whole && grp == groups, warp, lane, tid == 0, last_flag, [] { consumers_sync(); });
      grp = 0, ++tile, whole = true;
      live = warp * 16 < p.n - tile * kBlockRows;
    }
  }
#else
  __trap();  // built for a GPU without wgmma: the launcher never selects this kernel there
#endif
}

template <WeightFormat F, int N>
void launch(WoSm90Params tp, cudaStream_t stream) {
  using T = TmaTile<F, N>;
  auto kernel = weight_only_tma_kernel<F, N>;
  static KernelSmem attr;
  attr.ensure(kernel, T::kSmem, "linear (weight-only wgmma_tma)");
  tp.blocks = persistent_blocks(kernel, T::kThreads, T::kSmem, tp.blocks, "linear (weight-only wgmma_tma)");
  // X [m, k] bf16 as [N x 64] boxes (tokens past m read as zeros).
  const uint64_t dims[2] = {uint64_t(tp.k), uint64_t(tp.m)};
  const uint64_t strides[1] = {uint64_t(tp.k) * 2};
  const uint32_t box[2] = {64, uint32_t(N)};
  const CUtensorMap map_x = make_tensor_map("linear (weight-only wgmma_tma)", tp.x, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2,
                                            dims, strides, box, CU_TENSOR_MAP_SWIZZLE_128B);
  // The packed weight as [n/16 row tiles][k/C chunks][128 words]: a unit is the box of its 8 row tiles' chunks of
  // the group (row tiles past n zero-filled); 2:4's metadata as [n/16][k/32][16 words], the same box.
  // (Formats that copy per warp pass X's map in their place, unread.)
  auto chunk_map = [&](const void* base, uint32_t words) {  // words per chunk: 128 (values), 16 (metadata)
    const uint64_t chunks = uint64_t(tp.k / T::kCols), row_tiles = uint64_t(tp.n / 16);
    const uint64_t d[3] = {words, chunks, row_tiles}, st[2] = {words * 4ull, chunks * words * 4ull};
    const uint32_t b[3] = {words, uint32_t(T::kChunks), uint32_t(kConsumerWarps)};
    return make_tensor_map("linear (weight-only wgmma_tma)", base, CU_TENSOR_MAP_DATA_TYPE_UINT32, 3, d, st, b,
                           CU_TENSOR_MAP_SWIZZLE_NONE);
  };
  CUtensorMap map_w = map_x, map_m = map_x;
  if constexpr (T::kWeightBox) map_w = chunk_map(tp.w, 128);
  if constexpr (T::kSparse) map_m = chunk_map(tp.meta, 16);
  kernel<<<unsigned(tp.blocks), T::kThreads, T::kSmem, stream>>>(tp, map_x, map_w, map_m);
  INFERLAB_CHECK_LAUNCH();
}

template <WeightFormat F>
void launch_tokens(const WoSm90Params& tp, int tokens, cudaStream_t stream) {
  switch (tokens) {
    case 16: return launch<F, 16>(tp, stream);
    case 32: return launch<F, 32>(tp, stream);
    case 64: return launch<F, 64>(tp, stream);
    default: throw Error("linear (weight-only wgmma_tma): no tile for " + std::to_string(tokens) + " tokens");
  }
}

}  // namespace

void weight_only_linear_sm90_tma(const LinearParams& p, const LinearPlan& plan, cudaStream_t stream) {
  const WoSm90Params tp = wo_sm90_params(p, plan);
  switch (p.format) {
    case WeightFormat::int4: return launch_tokens<WeightFormat::int4>(tp, plan.tokens, stream);
    case WeightFormat::int8: return launch_tokens<WeightFormat::int8>(tp, plan.tokens, stream);
    case WeightFormat::sparse24: return launch_tokens<WeightFormat::sparse24>(tp, plan.tokens, stream);
    default: throw Error("linear (weight-only wgmma_tma): format " + weight_format_name(p.format) + " has no wgmma kernel");
  }
}

}  // namespace inferlab
