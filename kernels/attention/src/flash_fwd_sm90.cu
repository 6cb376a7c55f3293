// Flash attention forward on Hopper's warpgroup tensor-core instruction (wgmma, sm_90a).
//
// The same algorithm as flash_fwd.cu (tiles of Q, K, V in shared memory, online softmax, scores in
// registers), with the one idea that changes: the matrix products are issued per warpgroup (4
// warps, 64 query rows) as asynchronous wgmma instructions that read their operands straight from
// shared memory through matrix descriptors, instead of ldmatrix + mma.sync per warp. On the H100
// this is the path cuBLAS and cuDNN use; mma.sync tops out well below it.
//   - Block: 2 consumer warpgroups (128 query rows) + 1 producer warpgroup. The producers copy Q
//     and K/V tiles of BN rows into a 2-stage ring with cp.async, signalling "full" mbarriers; each
//     consumer warpgroup waits only for the tile it needs and releases it on an "empty" mbarrier.
//     No block-wide barrier in the loop: the two warpgroups drift apart, so one's softmax runs
//     while the other's matrix products occupy the tensor cores.
//   - Persistent: one block per SM; the producers take work items (query block, batch x head)
//     from a global counter, publish each to the consumers through a shared-memory slot, and fetch
//     the next item's Q (double-buffered) and first K/V tile while the consumers finish the current
//     one, so no item starts from an empty pipeline and causal items of unequal cost balance.
//   - S = Q K^T: wgmma m64nBNk16, A = Q and B = K from shared memory (both K-major).
//   - O += P V: wgmma m64nDk16, A = P from registers (the S accumulator re-packed to 16 bits:
//     its layout is the A-fragment layout), B = V from shared memory, MN-major (transposed).
//   - Shared tiles use the 128-byte swizzle the descriptors name: a [rows x D] tile is stored as
//     D/64 atoms of [rows x 64 elements]; 16-byte chunk c of row r sits at chunk c ^ (r % 8).
// Masking, the -inf handling, zero-filled out-of-range K/V rows and the causal schedule are those of
// flash_fwd.cu. Compiled only for sm_90a; the launcher uses it on compute capability 9.0.
//
// Varlen (prefill.h, FlashMode varlen_*): the same pipeline; what differs is compile-time and sits
// in the producers and at item boundaries, never in the consumers' loop over key tiles:
//   - the producers first build the prefix of query tiles per sequence in shared memory from
//     q_start; the leader maps an item (head slowest, then the sequences' tiles, each sequence's
//     from its last) to (sequence, tile, head) by a binary search over it and publishes the
//     sequence's first row and lengths with the item;
//   - K/V rows come through the cache view (load_kv_rows_pair: a stage's K and V rows in one loop, one
//     block-table read per thread and block per tile for both; two loops, one for K and one for V, each reading
//     the table, were 1.24-1.33x the contiguous cache's time at head dim 128 on the H200, NOTES.md);
//   - the work counters live in the caller's workspace and the last block resets them, so a
//     launch needs no memset.
// The pipeline's invariants (what every change here must keep) are written in NOTES.md.
#include <algorithm>
#include <atomic>
#include <cfloat>
#include <cstdlib>
#include <map>
#include <mutex>
#include <string>

#include "flash_fwd.h"
#include "flash_sm90_common.cuh"
#include "inferlab/kernels/common/check.h"
#include "inferlab/kernels/common/kernel_attributes.h"
#include "inferlab/sim/error.h"

namespace inferlab {
namespace {

template <int D_, int BN_>
struct Sm90Tile {
  static constexpr int D = D_, BN = BN_, BM = 128;
  static constexpr int CONSUMERS = 256, PRODUCERS = 128, THREADS = CONSUMERS + PRODUCERS;  // 3 warpgroups
  // 384 threads allow 168 registers each, too few to keep the consumers' wgmma asynchronous (ptxas
  // C7512 serializes them). setmaxnreg moves registers: producers 56, consumers 224
  // (128 * 56 + 256 * 224 <= 64K); the producers' copy loop is unrolled 2x to fit in 56.
  static constexpr int PRODUCER_REGS = 56, CONSUMER_REGS = 224;
  static constexpr int Q_BYTES = BM * D * 2, KV_BYTES = BN * D * 2;
  static constexpr int TILES = 2 * Q_BYTES + 4 * KV_BYTES;
  // 2 Q buffers, 2 stages of K and V, alignment slack, mbarriers (128 bytes) and work-item slots
  // (128); varlen launches add the tile prefix, 4 bytes per sequence, after them.
  static constexpr int SMEM = TILES + 1024 + 256;
  static_assert(D % 64 == 0 && BN % 64 == 0, "128-byte swizzle atoms are 64 elements wide");
};

// Byte offset of element (r, c) in a [rows x D] tile stored as 128-byte-swizzled atoms of 64 columns.
__device__ __forceinline__ uint32_t sw128(int r, int c, int rows) {
  return uint32_t((c >> 6) * rows * 128 + r * 128 + ((((c & 63) >> 3) ^ (r & 7)) << 4) + ((c & 7) << 1));
}

// Copies a [ROWS x D] tile into 128-byte-swizzled shared memory; the producer warpgroup's threads
// share the work; rows at or past rows_valid are zero-filled.
template <class Cfg, int ROWS, class T>
__device__ __forceinline__ void load_tile_sw128(uint8_t* smem, const T* g, int64_t stride, int rows_valid) {
  constexpr int kChunks = Cfg::D / 8;
  const int lane = int(threadIdx.x) - Cfg::CONSUMERS;
#pragma unroll 2
  for (int c = lane; c < ROWS * kChunks; c += Cfg::PRODUCERS) {
    const int r = c / kChunks, col = (c % kChunks) * 8;
    const bool ok = r < rows_valid;
    cp_async_16(smem + sw128(r, col, ROWS), ok ? g + r * stride + col : g, ok);
  }
}

__device__ __forceinline__ void producer_sync() { asm volatile("bar.sync 1, %0;\n" ::"n"(128) : "memory"); }

// Varlen: the producer warpgroup (pt = 0..127) writes tile_end[s] = query tiles of sequences
// 0..s (an inclusive prefix sum) from q_start. Ends with the producers synchronized.
template <class Cfg>
__device__ __forceinline__ void build_tile_prefix(const FlashParams& p, int* tile_end, int pt) {
  static_assert(Cfg::PRODUCERS == 128, "producer_sync counts 128 threads");
  for (int s = pt; s < p.sequences; s += Cfg::PRODUCERS) {
    const int n = __ldg(p.q_start + s + 1) - __ldg(p.q_start + s);
    tile_end[s] = n > 0 ? (n + Cfg::BM - 1) / Cfg::BM : 0;
  }
  producer_sync();
  if (pt < 32) {  // one warp scans, 32 sequences at a time
    int carry = 0;
    for (int base = 0; base < p.sequences; base += 32) {
      const int s = base + pt;
      int x = s < p.sequences ? tile_end[s] : 0;
#pragma unroll
      for (int o = 1; o < 32; o <<= 1) {
        const int y = __shfl_up_sync(~0u, x, o);
        if (pt >= o) x += y;
      }
      x += carry;
      if (s < p.sequences) tile_end[s] = x;
      carry = __shfl_sync(~0u, x, 31);
    }
  }
  producer_sync();
}

// counters[0]: the next item to take, less gridDim.x (every block's first item is its index).
// Varlen: counters[1] counts the blocks done; the last resets both, so the workspace stays zeroed.
template <class Cfg, bool kCausal, class T, FlashMode kMode>
__global__ void __launch_bounds__(Cfg::THREADS, 1)
    flash_fwd_sm90_kernel(const __grid_constant__ FlashParams p, int m_blocks, int items, int* counters) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  constexpr int D = Cfg::D, BM = Cfg::BM, BN = Cfg::BN;
  constexpr bool kVarlen = kMode != FlashMode::dense;
  extern __shared__ __align__(1024) uint8_t smem_raw[];
  // Swizzle atoms repeat every 1024 bytes: align the tiles to that.
  uint8_t* smem = smem_raw + ((1024 - (smem_addr(smem_raw) & 1023)) & 1023);
  // [Q 0 | Q 1 | K stage 0 | K stage 1 | V stage 0 | V stage 1 | mbarriers | work-item slots | varlen: tile prefix]
  auto sQ = [&](int k) { return smem + (k & 1) * Cfg::Q_BYTES; };  // Q of this block's k-th item
  auto sK = [&](int stage) { return smem + 2 * Cfg::Q_BYTES + stage * Cfg::KV_BYTES; };
  auto sV = [&](int stage) { return smem + 2 * Cfg::Q_BYTES + (2 + stage) * Cfg::KV_BYTES; };
  uint64_t* bars = reinterpret_cast<uint64_t*>(smem + Cfg::TILES);
  uint64_t* full = bars;            // [2] a K/V stage holds its tile (and the item's Q, with its first tile)
  uint64_t* empty = bars + 2;       // [2] the consumers are done with a K/V stage
  uint64_t* q_empty = bars + 4;     // [2] the consumers are done with a Q buffer
  uint64_t* item_full = bars + 6;   // [2] a work-item slot holds the next item
  uint64_t* item_empty = bars + 8;  // [2] the consumers have read the slot
  Item* item_slot = reinterpret_cast<Item*>(smem + Cfg::TILES + 128);   // [2]
  int* tile_end = reinterpret_cast<int*>(smem + Cfg::TILES + 256);      // varlen: [sequences]

  const int64_t q_stride = int64_t(p.heads) * D, kv_stride = int64_t(p.kv_heads) * D;

  if (threadIdx.x == 0) {
    for (int i = 0; i < 2; ++i) {
      mbar_init(&full[i], Cfg::PRODUCERS);   // every producer thread, once its copies land
      mbar_init(&empty[i], Cfg::CONSUMERS);  // every consumer thread, once done with the tile
      mbar_init(&q_empty[i], Cfg::CONSUMERS);
      mbar_init(&item_full[i], 1);
      mbar_init(&item_empty[i], Cfg::CONSUMERS);
    }
  }
  __syncthreads();  // the last block-wide barrier: from here the roles run on their own

  if (threadIdx.x >= Cfg::CONSUMERS) {
    // Producers: take the next work item (dynamically: a global counter), publish it to the
    // consumers, then copy its Q with its first tile and K_j, V_j into the next stage of the ring
    // once the consumers have released it. `it` counts K/V tiles across items.
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(Cfg::PRODUCER_REGS));
    const int pt = int(threadIdx.x) - Cfg::CONSUMERS;
    const bool leader = pt == 0;
    if constexpr (kVarlen) {
      build_tile_prefix<Cfg>(p, tile_end, pt);
      items = tile_end[p.sequences - 1] * p.heads;
    }
    int it = 0;
    for (int k = 0;; ++k) {
      const int slot = k & 1;
      if (leader) {
        if (k >= 2) mbar_wait(&item_empty[slot], ((k >> 1) - 1) & 1);
        const int w = k == 0 ? int(blockIdx.x) : int(gridDim.x) + atomicAdd(counters, 1);
        item_slot[slot] = take_item<kMode>(p, w, m_blocks, items, tile_end);
        mbar_arrive(&item_full[slot]);
      }
      producer_sync();  // the producers see the slot
      const Item wi = item_slot[slot];
      if (wi.seq < 0) break;
      const SeqSpan sp = item_span<kMode>(wi, p);
      const int kh = wi.h / p.group, row0 = wi.m_block * BM;
      const T* qg = static_cast<const T*>(p.q) + (sp.q_row + row0) * q_stride + int64_t(wi.h) * D;
      const T* kg = static_cast<const T*>(p.k) + int64_t(wi.seq) * p.seq_k * kv_stride + int64_t(kh) * D;  // dense
      const T* vg = static_cast<const T*>(p.v) + int64_t(wi.seq) * p.seq_k * kv_stride + int64_t(kh) * D;
      const KvRows<kMode> src = kv_rows<kMode>(p, wi.seq, kh, D);  // varlen
      const int n = kv_tiles<Cfg, kCausal, kMode>(p, sp, wi.m_block);
      for (int j = 0; j < n; ++j, ++it) {
        const int stage = it & 1;
        if (it >= 2) mbar_wait(&empty[stage], ((it >> 1) - 1) & 1);
        if (j == 0) {
          if (k >= 2) mbar_wait(&q_empty[slot], ((k >> 1) - 1) & 1);
          load_tile_sw128<Cfg, BM>(sQ(k), qg, q_stride, min(BM, queries<kMode>(p, sp) - row0));
        }
        if constexpr (kMode == FlashMode::dense) {
          const int rows = min(BN, p.seq_k - j * BN);
          load_tile_sw128<Cfg, BN>(sK(stage), kg + int64_t(j) * BN * kv_stride, kv_stride, rows);
          load_tile_sw128<Cfg, BN>(sV(stage), vg + int64_t(j) * BN * kv_stride, kv_stride, rows);
        } else {
          load_kv_rows_pair<D, BN, Cfg::PRODUCERS, 2>(
              static_cast<const T*>(p.k), static_cast<const T*>(p.v), src, j * BN, keys<kMode>(p, sp), pt,
              [&](int r, int c) { return sK(stage) + sw128(r, c, BN); },
              [&](int r, int c) { return sV(stage) + sw128(r, c, BN); });
        }
        mbar_arrive_cp_async(&full[stage]);
      }
    }
    if constexpr (kVarlen) {
      if (leader) {  // this block takes no more items; the last block to finish resets the counters
        __threadfence();
        if (atomicAdd(counters + 1, 1) == int(gridDim.x) - 1) {
          __threadfence();
          atomicExch(counters, 0);
          atomicExch(counters + 1, 0);
        }
      }
    }
    return;
  }

  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(Cfg::CONSUMER_REGS));
  const int wg = threadIdx.x / 128, warp = (threadIdx.x % 128) / 32, lane = threadIdx.x % 32;
  const int g = lane / 4, t = lane % 4;
  const int my_row = wg * 64 + warp * 16 + g;  // + 8 * half
  int it = 0;
  for (int k = 0;; ++k) {
    const int slot = k & 1;
    mbar_wait(&item_full[slot], (k >> 1) & 1);
    const Item wi = item_slot[slot];
    mbar_arrive(&item_empty[slot]);
    if (wi.seq < 0) break;
    const SeqSpan sp = item_span<kMode>(wi, p);
    const int h = wi.h, row0 = wi.m_block * BM;
    const int offset = keys<kMode>(p, sp) - queries<kMode>(p, sp);  // causal: query i sees keys j <= i + offset
    const int n = kv_tiles<Cfg, kCausal, kMode>(p, sp, wi.m_block);
    const uint32_t q_addr = smem_addr(sQ(k)) + uint32_t(wg * 64 * 128);  // this warpgroup's 64 rows
    float acc_o[D / 2];
#pragma unroll
    for (int i = 0; i < D / 2; ++i) acc_o[i] = 0.f;
    float m_i[2] = {-INFINITY, -INFINITY}, l_i[2] = {0.f, 0.f};

    for (int j = 0; j < n; ++j, ++it) {
      const int stage = it & 1;
      mbar_wait(&full[stage], (it >> 1) & 1);
      fence_proxy_async();  // the copies' writes, now visible to this thread, ordered before wgmma's reads

      // S = Q K_j^T for this warpgroup's 64 rows.
      float s[BN / 2];
      issue_qk<T, D, BM, BN>(s, q_addr, smem_addr(sK(stage)));
      wgmma::wait<0>();
      wgmma::fence_operand(s);
      if (j + 1 == n) mbar_arrive(&q_empty[slot]);  // Q is not read again for this item

      mask_scores<BN, kCausal>(s, j * BN, row0 + my_row, keys<kMode>(p, sp), offset, t);
      float alpha[2];
      online_softmax_rows(tiles_of(s), m_i, l_i, alpha, p.scale_log2);
      rescale_rows(tiles_of(acc_o), alpha);

      // O += P V_j: P's k-step kk is the accumulator of S's n-tiles 2kk and 2kk+1.
      uint32_t pa[BN / 16][4];
      pack_p<T, BN>(pa, s);
      issue_pv<T, D, BN>(acc_o, pa, smem_addr(sV(stage)));
      wgmma::wait<0>();
      wgmma::fence_operand(acc_o);
      mbar_arrive(&empty[stage]);  // this thread is done with tile j's buffers
    }
    if (n == 0) mbar_arrive(&q_empty[slot]);  // one release per item, as the producers count them

    // Epilogue: finish the row sums, normalize, write O and the log-sum-exp (from registers: the
    // producers may already be filling shared memory for the next item).
    const int64_t q_row = item_span<kMode>(wi, p).q_row;  // dense: recomputed, not held across the loop
    T* og = static_cast<T*>(p.o) + (q_row + row0) * q_stride + int64_t(h) * D;
    float* lse = lse_at<kMode>(p, wi.seq * p.heads + h, h, q_row, row0);
    store_rows<T, D>(acc_o, m_i, l_i, og, q_stride, lse, lse_step<kMode>(p), my_row,
                     queries<kMode>(p, sp) - row0, t);
  }
#else
  __trap();  // built for a GPU without wgmma: the launcher never selects this kernel there
#endif
}

template <class Cfg, bool kCausal, class T>
void launch(const AttentionParams& a, cudaStream_t stream) {
  const FlashParams p = make_flash_params(a);
  auto kernel = flash_fwd_sm90_kernel<Cfg, kCausal, T, FlashMode::dense>;
  static KernelSmem attr;
  attr.ensure(kernel, Cfg::SMEM, "attention/flash");
  const FlashGrid g = flash_dense_grid(a, Cfg::BM, stream);
  kernel<<<g.grid, Cfg::THREADS, Cfg::SMEM, stream>>>(p, g.m_blocks, g.items, g.counter);
  INFERLAB_CHECK_LAUNCH();
}

// Varlen: the same persistent grid; the exact item count is known only on the device (from
// q_start), so the grid is sized by an upper bound on the query tiles (each sequence adds at most
// one partial tile) and blocks left without an item exit at once. No memset: the kernel leaves
// the workspace's counters zeroed.
template <class Cfg, bool kCausal, class T, FlashMode kMode>
void launch_varlen(const PrefillParams& a, cudaStream_t stream) {
  const FlashParams p = make_flash_params(a);
  auto kernel = flash_fwd_sm90_kernel<Cfg, kCausal, T, kMode>;
  const int smem = Cfg::SMEM + int(4 * a.sequences);
  int device = 0, sms = 0;
  INFERLAB_CUDA_CHECK(cudaGetDevice(&device));
  INFERLAB_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  // The query-tile prefix of every sequence sits in shared memory: checked against the device.
  static KernelSmem attr;
  attr.ensure(kernel, smem, "attention/prefill");
  const int64_t tiles = std::min(a.sequences * ((a.max_q + Cfg::BM - 1) / Cfg::BM), (a.total_q + Cfg::BM - 1) / Cfg::BM + a.sequences);
  const int64_t items = tiles * a.heads;
  if (items > INT32_MAX / 2) throw Error("attention/prefill: too many query tiles for 32-bit work indices");
  const int grid = int(std::min<int64_t>(items, a.flash.max_ctas > 0 ? std::min(sms, a.flash.max_ctas) : sms));
  kernel<<<grid, Cfg::THREADS, smem, stream>>>(p, 0, 0, static_cast<int*>(a.workspace));
  INFERLAB_CHECK_LAUNCH();
}

template <class Cfg>
void dispatch_dtype(const AttentionParams& a, cudaStream_t stream) {
  dispatch_dtype_causal(a.dtype, a.causal, [&](auto causal, auto element) {
    launch<Cfg, decltype(causal)::value, typename decltype(element)::type>(a, stream);
  });
}

template <class Cfg>
void dispatch_prefill(const PrefillParams& a, cudaStream_t stream) {
  dispatch_dtype_causal(a.dtype, a.causal, [&](auto causal, auto element) {
    dispatch_varlen_mode(a, [&](auto mode) {
      launch_varlen<Cfg, decltype(causal)::value, typename decltype(element)::type, decltype(mode)::value>(a, stream);
    });
  });
}

}  // namespace

// One persistent block per SM (at most max_ctas); each takes its next item from a global counter when
// it finishes one, so items of unequal cost (causal) balance across SMs, longest first.
FlashGrid flash_dense_grid(const AttentionParams& a, int bm, cudaStream_t stream) {
  int device = 0, sms = 0;
  INFERLAB_CUDA_CHECK(cudaGetDevice(&device));
  INFERLAB_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  const int64_t m_blocks = (a.seq_q + bm - 1) / bm;
  const int64_t items = m_blocks * a.batch * a.heads;
  if (items > INT32_MAX / 2) throw Error("attention/flash: too many query blocks for 32-bit work indices");
  FlashGrid g;
  g.m_blocks = int(m_blocks);
  g.items = int(items);
  g.grid = int(std::min<int64_t>(items, a.flash.max_ctas > 0 ? std::min(sms, a.flash.max_ctas) : sms));
  g.counter = flash_work_counter(device, stream);
  INFERLAB_CUDA_CHECK(cudaMemsetAsync(g.counter, 0, sizeof(int), stream));
  return g;
}

// The work-item counter of the persistent kernel: one int per (device, stream), allocated once, so
// launches on two streams run concurrently without sharing a counter (a stream's launches are ordered).
int* flash_work_counter(int device, cudaStream_t stream) {
  static std::mutex mutex;
  static std::map<std::pair<int, cudaStream_t>, int*> counters;
  std::lock_guard<std::mutex> lock(mutex);
  int*& c = counters[{device, stream}];
  if (!c) INFERLAB_CUDA_CHECK(cudaMalloc(&c, sizeof(int)));
  return c;
}

void launch_flash_forward_sm90(const AttentionParams& a, cudaStream_t stream) {
  with_sm90_head_dim<Sm90Tile>(a.head_dim, "attention/flash", [&](auto tile) { dispatch_dtype<decltype(tile)>(a, stream); });
}

void launch_flash_prefill_sm90(const PrefillParams& a, cudaStream_t stream) {
  with_sm90_head_dim<Sm90Tile>(a.head_dim, "attention/prefill",
                               [&](auto tile) { dispatch_prefill<decltype(tile)>(a, stream); });
}

}  // namespace inferlab
