// Flash attention forward on Hopper, the overlapped rung (FlashKernel::overlapped, sm_90a, dense
// attention). Diff it against flash_fwd_sm90.cu: the tiles, the persistent schedule, the wgmma
// instructions and the per-tile softmax are the same; three things change, each aimed at a cost that
// kernel pays on every tile.
//   1. The copies are issued by the tensor memory accelerator (TMA), one thread of the producer
//      warpgroup for the whole block: a 4-d tensor map per operand ([batch, seq, heads, D], 64-column
//      boxes that land 128-byte swizzled, rows past the sequence zero-filled by the hardware) and
//      one cp.async.bulk.tensor per box, completing on an mbarrier with the tile's byte count. The
//      cp.async kernel spends 128 threads' issue slots on 4096 16-byte copies per tile (plus their
//      addresses) on the SM sub-partitions the consumers issue from; here that is 4 instructions.
//   2. The two consumer warpgroups take turns issuing their matrix products (FlashAttention-3's
//      ping-pong, turn_wait below), so one's softmax runs while the other's products occupy the
//      tensor cores; in flash_fwd_sm90.cu both wait on the same tile and their softmaxes coincide.
//      Within a warpgroup the code is FlashAttention-3's intra-warpgroup pipelining: per key tile
//      j >= 1 it issues S_j = Q K_j^T and O += P_{j-1} V_{j-1} together, waits for S_j only
//      (wait_group 1), masks and exponentiates S_j, waits for P V, then rescales O by alpha_j and
//      packs P_j (O = alpha_j (O + P_{j-1} V_{j-1}): the order of the rounding steps changes, not
//      the result's precision). The second wait sits in a basic block of its own (see the loop): ptxas
//      hoists a wait to the top of its block, and beside the softmax it would order every exponential
//      after the wait for P V.
//   3. The softmax keeps a lazy reference maximum (lazy_softmax_rows): O is rescaled only on the tiles
//      where a row's maximum grew past 256x its reference, not on every tile.
//   K and V have separate ring barriers (2 stages each): at step j a warpgroup reads K_j and V_{j-1}
//   at once, so K's stage is released as soon as S_j has been computed and V's after P V.
// Q is double-buffered across items as in flash_fwd_sm90.cu (single at head dim 256, where two Q tiles
// and the K/V stages do not fit: sim/kernels.h); its buffer is counted over the items
// that load it (items with at least one key tile), on both sides, so an item with no key tile
// (causal, seq_q > seq_k) needs no special case. The output is written from registers.
#include <algorithm>
#include <cfloat>
#include <string>

#include <cuda.h>

#include "flash_fwd.h"
#include "flash_sm90_common.cuh"
#include "inferlab/kernels/common/check.h"
#include "inferlab/kernels/common/kernel_attributes.h"
#include "inferlab/kernels/common/tensor_map.h"
#include "inferlab/sim/error.h"
#include "inferlab/sim/kernels.h"

namespace inferlab {
namespace {

// The tile by head dim: sim/kernels.h's table (flash_overlap_*), the measured or forced reason beside it.
template <int D_>
struct OverlapTile {
  static constexpr int D = D_, BM = 128;
  static constexpr int BN = flash_overlap_block_n(D);           // keys a tile
  static constexpr int DS = flash_overlap_stored_columns(D);    // columns stored: whole 64-column atoms
  static constexpr int Q_BUFS = flash_overlap_q_buffers(D);     // Q buffers across items
  static constexpr int CONSUMERS = 256, THREADS = CONSUMERS + 128;  // 2 consumer warpgroups + 1 producer
  static constexpr int CONSUMER_WARPS = CONSUMERS / 32;
  // Ping-pong (turn_wait): measured on the H100 against the same kernel without it, MHA d128 16k tokens,
  // causal 4k/16k 0.518-0.522 / 1.69-1.79 ms vs 0.534-0.537 / 1.92-1.94; non-causal within noise.
  static constexpr bool PING_PONG = true;
  // Registers as flash_fwd_sm90.cu splits them (128 * 56 + 256 * 224 <= 64K): S (BN/2), P (BN/4),
  // O (D/2) and addresses fit in 224 without spills; the producer thread's item and tile bookkeeping
  // spills at 40 (ptxas, head dim 128), so 24/240 as FlashAttention-3 splits them is not open here. Since O leaves
  // 16 bytes at a time (store_rows) the head-dim-256 causal kernel spills one wgmma descriptor (ptxas: 8 bytes) that
  // its tile loop reloads from L1 each tile: measured no slower at seq 16384 (0.994x, H200). 48/232 would make room
  // (6144 + 59392 = 64K) but hangs: the block holds 384 x 168 registers (ptxas REG:168, 64512), and setmaxnreg.inc
  // to 232 waits for registers it does not have; 40/232 spills the producer.
  static constexpr int PRODUCER_REGS = 56, CONSUMER_REGS = 224;
  static constexpr int Q_BYTES = BM * DS * 2, KV_BYTES = BN * DS * 2;
  static constexpr int TILES = Q_BUFS * Q_BYTES + 4 * KV_BYTES;
  static constexpr int SMEM = TILES + 1024 + 256;  // + alignment slack, mbarriers (128 B), item slots (64 B)
  static_assert(SMEM == flash_overlap_smem_bytes(D), "the tile is the table's");
  static_assert(DS % 64 == 0 && BN % 64 == 0 && BM <= 256 && BN <= 256, "64-column TMA boxes of at most 256 rows");
};

using sm90::mbar_expect_tx;

// One box of a 4-d tensor map (coordinates innermost first: column, head, row, batch) into shared
// memory, completing on `bar` with the box's bytes.
__device__ __forceinline__ void tma_load_4d(void* dst, const CUtensorMap* map, int c0, int c1, int c2, int c3,
                                            uint64_t* bar) {
  asm volatile(
      "cp.async.bulk.tensor.4d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4, %5}], "
      "[%6];\n" ::"r"(smem_addr(dst)),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(smem_addr(bar))
      : "memory");
}

// A [ROWS x DS] tile (rows row0.. of one head of one sequence) as DS/64 boxes of [ROWS x 64]: the
// layout flash_fwd_sm90.cu's sw128 writes by hand. Columns past the head dim (96 stored as 128) are
// outside the tensor map: the TMA fills them with zeros, and they count in the box's bytes.
template <int DS, int ROWS>
__device__ __forceinline__ void tma_tile(uint8_t* dst, const CUtensorMap* map, int head, int row0, int batch,
                                         uint64_t* bar) {
#pragma unroll
  for (int a = 0; a < DS / 64; ++a) tma_load_4d(dst + a * ROWS * 128, map, a * 64, head, row0, batch, bar);
}

// Ping-pong between the two consumer warpgroups (FlashAttention-3): they take turns issuing their matrix
// products. Named barrier 1 + wg is warpgroup wg's turn: it waits there (bar.sync, its 128 threads) for
// the other's 128 arrivals (bar.arrive), issues, then passes the turn. One warpgroup's exponentials then
// run while the other's products occupy the tensor cores, instead of both softmaxes at once.
__device__ __forceinline__ void turn_wait(int wg) { asm volatile("bar.sync %0, 256;\n" ::"r"(1 + wg) : "memory"); }
__device__ __forceinline__ void turn_pass(int wg) { asm volatile("bar.arrive %0, 256;\n" ::"r"(2 - wg) : "memory"); }

__device__ __forceinline__ void warp_release(uint64_t* bar, int lane) {
  __syncwarp();
  if (lane == 0) mbar_arrive(bar);
}

// The online softmax with a lazy reference maximum (FlashAttention-4's conditional rescaling): a row's
// exponentials are taken against m, the largest score seen when m last moved, and m moves only when the
// tile's maximum exceeds it by more than kRescaleLog2 (log2 units), so P <= 2^kRescaleLog2 = 256 (exact in
// fp32 sums, the same relative rounding in 16-bit P). The softmax is the same function of any reference: O and
// l share it and the epilogue divides one by the other; the log-sum-exp is m + log2(l) as before. Returns
// whether any of this thread's rows moved its reference: where any row of the warp did, O is rescaled by alpha (1
// in rows that did not move). After a row's first tiles its maximum rarely grows by 256x, so most tiles skip the
// head_dim / 2 multiplies per thread that flash_fwd_sm90.cu spends on every tile.
constexpr float kRescaleLog2 = 8.f;
template <int NS>
__device__ __forceinline__ bool lazy_softmax_rows(float (&s)[NS][4], float (&m)[2], float (&l)[2], float (&alpha)[2],
                                                  float scale_log2) {
  bool moved = false;
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    // The row's maximum over 4 independent partial maxima (a dependency chain a quarter as long as one running
    // maximum), scaled once: the scale is positive, so max(s) * scale = max(s * scale).
    float part[4] = {-INFINITY, -INFINITY, -INFINITY, -INFINITY};
#pragma unroll
    for (int n = 0; n < NS; ++n) part[n % 4] = fmaxf(part[n % 4], fmaxf(s[n][2 * half], s[n][2 * half + 1]));
    float mx = fmaxf(fmaxf(part[0], part[1]), fmaxf(part[2], part[3])) * scale_log2;
    mx = fmaxf(mx, __shfl_xor_sync(~0u, mx, 1));
    mx = fmaxf(mx, __shfl_xor_sync(~0u, mx, 2));
    alpha[half] = 1.f;
    if (mx > m[half] + kRescaleLog2) {  // also the first tile with a key: m = -inf
      alpha[half] = fast_exp2(m[half] - mx);
      m[half] = mx;
      moved = true;
    }
    const float base = m[half] == -INFINITY ? 0.f : m[half];  // a row with no key yet: every score is -inf
    l[half] = l[half] * alpha[half] + exp_row<4>(s, half, scale_log2, base);
  }
  return moved;
}

template <class Cfg, bool kCausal, class T>
__global__ void __launch_bounds__(Cfg::THREADS, 1)
    flash_fwd_overlap_kernel(const __grid_constant__ FlashParams p, const __grid_constant__ CUtensorMap map_q,
                             const __grid_constant__ CUtensorMap map_k, const __grid_constant__ CUtensorMap map_v,
                             int m_blocks, int items, int* counter) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  constexpr int D = Cfg::D, BM = Cfg::BM, BN = Cfg::BN;
  constexpr FlashMode kMode = FlashMode::dense;
  extern __shared__ __align__(1024) uint8_t smem_raw[];
  uint8_t* smem = smem_raw + ((1024 - (smem_addr(smem_raw) & 1023)) & 1023);
  // [Q 0 (| Q 1) | K stage 0 | K stage 1 | V stage 0 | V stage 1 | mbarriers | work-item slots]
  constexpr int QB = Cfg::Q_BUFS;
  static_assert(QB == 1 || QB == 2, "one or two Q buffers");
  // The buffer of the qi-th Q-loading item and how many times it was filled before (the parity's count).
  auto q_buf = [](int qi) { return QB == 2 ? qi & 1 : 0; };
  auto q_round = [](int qi) { return QB == 2 ? qi >> 1 : qi; };
  auto sQ = [&](int b) { return smem + b * Cfg::Q_BYTES; };
  auto sK = [&](int stage) { return smem + QB * Cfg::Q_BYTES + stage * Cfg::KV_BYTES; };
  auto sV = [&](int stage) { return smem + QB * Cfg::Q_BYTES + (2 + stage) * Cfg::KV_BYTES; };
  uint64_t* bars = reinterpret_cast<uint64_t*>(smem + Cfg::TILES);
  uint64_t* full_k = bars;            // [2] TMA landed K_j (count 1 + bytes)
  uint64_t* full_v = bars + 2;        // [2] V_j
  uint64_t* empty_k = bars + 4;       // [2] every consumer warp is done with K's stage
  uint64_t* empty_v = bars + 6;       // [2] ... with V's stage
  uint64_t* q_full = bars + 8;        // [QB] Q of the buffer's item landed
  uint64_t* q_empty = bars + 10;      // [QB] every consumer warp is done with the Q buffer
  uint64_t* item_full = bars + 12;    // [2] a work-item slot holds the next item
  uint64_t* item_empty = bars + 14;   // [2] every consumer warp has read the slot
  Item* item_slot = reinterpret_cast<Item*>(smem + Cfg::TILES + 128);  // [2]

  if (threadIdx.x == 0) {
    for (int i = 0; i < 2; ++i) {
      mbar_init(&full_k[i], 1);
      mbar_init(&full_v[i], 1);
      mbar_init(&q_full[i], 1);
      mbar_init(&item_full[i], 1);
      mbar_init(&empty_k[i], Cfg::CONSUMER_WARPS);
      mbar_init(&empty_v[i], Cfg::CONSUMER_WARPS);
      mbar_init(&q_empty[i], Cfg::CONSUMER_WARPS);
      mbar_init(&item_empty[i], Cfg::CONSUMER_WARPS);
    }
    sm90::fence_mbar_init();
  }
  __syncthreads();  // the last block-wide barrier

  if (threadIdx.x >= Cfg::CONSUMERS) {
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(Cfg::PRODUCER_REGS));
    if (threadIdx.x != Cfg::CONSUMERS) return;  // one thread takes the items and issues every copy
    // Both sides walk the same items with the same tile counts: kt counts K/V tiles across items,
    // qi the items that load a Q (n > 0); stage kt & 1, Q buffer q_buf(qi), parities from their rounds.
    int kt = 0, qi = 0;
    for (int k = 0;; ++k) {
      const int slot = k & 1;
      if (k >= 2) mbar_wait(&item_empty[slot], ((k >> 1) - 1) & 1);
      const int w = k == 0 ? int(blockIdx.x) : int(gridDim.x) + atomicAdd(counter, 1);
      const Item wi = take_item<kMode>(p, w, m_blocks, items, nullptr);
      item_slot[slot] = wi;
      mbar_arrive(&item_full[slot]);
      if (wi.seq < 0) break;
      const SeqSpan sp = item_span<kMode>(wi, p);
      const int n = kv_tiles<Cfg, kCausal, kMode>(p, sp, wi.m_block);
      if (n == 0) continue;
      const int kh = wi.h / p.group, qb = q_buf(qi);
      if (qi >= QB) mbar_wait(&q_empty[qb], (q_round(qi) - 1) & 1);
      mbar_expect_tx(&q_full[qb], Cfg::Q_BYTES);
      tma_tile<Cfg::DS, BM>(sQ(qb), &map_q, wi.h, wi.m_block * BM, wi.seq, &q_full[qb]);
      ++qi;
      for (int j = 0; j < n; ++j, ++kt) {
        const int stage = kt & 1;
        if (kt >= 2) mbar_wait(&empty_k[stage], ((kt >> 1) - 1) & 1);
        mbar_expect_tx(&full_k[stage], Cfg::KV_BYTES);
        tma_tile<Cfg::DS, BN>(sK(stage), &map_k, kh, j * BN, wi.seq, &full_k[stage]);
        if (kt >= 2) mbar_wait(&empty_v[stage], ((kt >> 1) - 1) & 1);
        mbar_expect_tx(&full_v[stage], Cfg::KV_BYTES);
        tma_tile<Cfg::DS, BN>(sV(stage), &map_v, kh, j * BN, wi.seq, &full_v[stage]);
      }
    }
    return;
  }

  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(Cfg::CONSUMER_REGS));
  const int wg = threadIdx.x / 128, warp = (threadIdx.x % 128) / 32, lane = threadIdx.x % 32;
  const int g = lane / 4, t = lane % 4;
  const int my_row = wg * 64 + warp * 16 + g;  // + 8 * half
  const int64_t q_stride = int64_t(p.heads) * D;
  // Both warpgroups issue at the same points (n + 1 per item, same items): turns pair up. Warpgroup 0
  // goes first; the last pass of warpgroup 1 is left pending at exit.
  if (Cfg::PING_PONG && wg == 1) turn_pass(1);
  int kt = 0, qi = 0;
  for (int k = 0;; ++k) {
    const int slot = k & 1;
    mbar_wait(&item_full[slot], (k >> 1) & 1);
    const Item wi = item_slot[slot];
    warp_release(&item_empty[slot], lane);
    if (wi.seq < 0) break;
    const SeqSpan sp = item_span<kMode>(wi, p);
    const int row0 = wi.m_block * BM;
    const int offset = p.seq_k - p.seq_q;  // causal: query i sees keys j <= i + offset
    const int n = kv_tiles<Cfg, kCausal, kMode>(p, sp, wi.m_block);
    float acc_o[D / 2];
#pragma unroll
    for (int i = 0; i < D / 2; ++i) acc_o[i] = 0.f;
    float m_i[2] = {-INFINITY, -INFINITY}, l_i[2] = {0.f, 0.f};

    if (n > 0) {
      const int qb = q_buf(qi);
      mbar_wait(&q_full[qb], q_round(qi) & 1);
      ++qi;
      const uint32_t q_addr = smem_addr(sQ(qb)) + uint32_t(wg * 64 * 128);  // this warpgroup's 64 rows
      // Tile 0: S_0, its softmax (O is still zero: nothing to rescale), P_0.
      float s[BN / 2];
      uint32_t pa[BN / 16][4];
      float alpha[2];
      int stage = kt & 1;
      mbar_wait(&full_k[stage], (kt >> 1) & 1);
      if (Cfg::PING_PONG) turn_wait(wg);
      issue_qk<T, D, BM, BN>(s, q_addr, smem_addr(sK(stage)));
      if (Cfg::PING_PONG) turn_pass(wg);
      wgmma::wait<0>();
      wgmma::fence_operand(s);
      warp_release(&empty_k[stage], lane);
      if (n == 1) warp_release(&q_empty[qb], lane);
      mask_scores<BN, kCausal>(s, 0, row0 + my_row, p.seq_k, offset, t);
      lazy_softmax_rows(tiles_of(s), m_i, l_i, alpha, p.scale_log2);  // O is zero: nothing to rescale
      pack_p<T, BN>(pa, s);

      for (int j = 1; j < n; ++j) {
        const int prev = kt & 1;
        ++kt;
        stage = kt & 1;
        mbar_wait(&full_k[stage], (kt >> 1) & 1);
        if (Cfg::PING_PONG) turn_wait(wg);
        issue_qk<T, D, BM, BN>(s, q_addr, smem_addr(sK(stage)));
        mbar_wait(&full_v[prev], ((kt - 1) >> 1) & 1);
        issue_pv<T, D, BN>(acc_o, pa, smem_addr(sV(prev)));
        if (Cfg::PING_PONG) turn_pass(wg);
        wgmma::wait<1>();  // S_j is done; P_{j-1} V_{j-1} may still run
        wgmma::fence_operand(s);
        warp_release(&empty_k[stage], lane);
        if (j + 1 == n) warp_release(&q_empty[qb], lane);
        mask_scores<BN, kCausal>(s, j * BN, row0 + my_row, p.seq_k, offset, t);
        const bool moved = lazy_softmax_rows(tiles_of(s), m_i, l_i, alpha, p.scale_log2);
        // The wait for P V, in a basic block of its own: ptxas (nvcc 13.0) hoists WARPGROUP.DEPBAR to the top of
        // the block that holds it, so with the wait beside the softmax every exponential landed after it (NOTES.md
        // v7, v7d). The branch that makes the block is on the tile's parity, the same in every thread of the
        // warpgroup, so the whole warpgroup executes the same wgmma.wait_group as PTX requires (.aligned); its two
        // arms are different statements (wait_in_branch) so that the compiler does not hoist them above it as
        // common code. The rescale after it is per warp (`moved` is the warp's vote), with no wgmma in it.
        if (j & 1) wgmma::wait_in_branch<0>();
        else wgmma::wait<0>();
        wgmma::fence_operand(acc_o);
        if (__any_sync(~0u, moved)) rescale_rows(tiles_of(acc_o), alpha);
        warp_release(&empty_v[prev], lane);
        pack_p<T, BN>(pa, s);
      }
      // The last P V.
      mbar_wait(&full_v[stage], (kt >> 1) & 1);
      if (Cfg::PING_PONG) turn_wait(wg);
      issue_pv<T, D, BN>(acc_o, pa, smem_addr(sV(stage)));
      if (Cfg::PING_PONG) turn_pass(wg);
      wgmma::wait<0>();
      wgmma::fence_operand(acc_o);
      warp_release(&empty_v[stage], lane);
      ++kt;
    }

    T* og = static_cast<T*>(p.o) + (sp.q_row + row0) * q_stride + int64_t(wi.h) * D;
    float* lse = lse_at<kMode>(p, wi.seq * p.heads + wi.h, wi.h, sp.q_row, row0);
    store_rows<T, D>(acc_o, m_i, l_i, og, q_stride, lse, 1, my_row, p.seq_q - row0, t);
  }
#else
  __trap();  // built for a GPU without wgmma: the launcher never selects this kernel there
#endif
}

// [batch, seq, heads, D] (row-major, D innermost) as a 4-d tensor map of [rows x 64] boxes, 128-byte
// swizzle; coordinates past seq read as zeros.
CUtensorMap tensor_map(const void* base, DType dtype, int64_t batch, int64_t seq, int64_t heads, int64_t d, int rows) {
  const uint64_t dims[4] = {uint64_t(d), uint64_t(heads), uint64_t(seq), uint64_t(batch)};
  const uint64_t strides[3] = {uint64_t(d * 2), uint64_t(heads * d * 2), uint64_t(seq * heads * d * 2)};
  const uint32_t box[4] = {64, 1, uint32_t(rows), 1};
  return make_tensor_map("attention/flash", base,
                         dtype == DType::bf16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 : CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 4, dims,
                         strides, box, CU_TENSOR_MAP_SWIZZLE_128B);
}

template <class Cfg, bool kCausal, class T>
void launch(const AttentionParams& a, cudaStream_t stream) {
  const FlashParams p = make_flash_params(a);
  auto kernel = flash_fwd_overlap_kernel<Cfg, kCausal, T>;
  static KernelSmem attr;
  attr.ensure(kernel, Cfg::SMEM, "attention/flash");
  const CUtensorMap mq = tensor_map(a.q, a.dtype, a.batch, a.seq_q, a.heads, Cfg::D, Cfg::BM);
  const CUtensorMap mk = tensor_map(a.k, a.dtype, a.batch, a.seq_k, a.kv_heads, Cfg::D, Cfg::BN);
  const CUtensorMap mv = tensor_map(a.v, a.dtype, a.batch, a.seq_k, a.kv_heads, Cfg::D, Cfg::BN);
  const FlashGrid g = flash_dense_grid(a, Cfg::BM, stream);
  kernel<<<g.grid, Cfg::THREADS, Cfg::SMEM, stream>>>(p, mq, mk, mv, g.m_blocks, g.items, g.counter);
  INFERLAB_CHECK_LAUNCH();
}

template <class Cfg>
void dispatch_dtype(const AttentionParams& a, cudaStream_t stream) {
  dispatch_dtype_causal(a.dtype, a.causal, [&](auto causal, auto element) {
    launch<Cfg, decltype(causal)::value, typename decltype(element)::type>(a, stream);
  });
}

}  // namespace

void launch_flash_forward_overlap(const AttentionParams& a, cudaStream_t stream) {
  for (const void* ptr : {a.q, a.k, a.v})
    if (reinterpret_cast<uintptr_t>(ptr) % 16 != 0)
      throw Error("attention/flash: the overlapped kernel's TMA needs q, k and v 16-byte aligned");
  switch (a.head_dim) {
    case 64: return dispatch_dtype<OverlapTile<64>>(a, stream);
    case 96: return dispatch_dtype<OverlapTile<96>>(a, stream);
    case 128: return dispatch_dtype<OverlapTile<128>>(a, stream);
    case 256: return dispatch_dtype<OverlapTile<256>>(a, stream);
    default:
      throw Error("attention/flash: the overlapped kernel has no head dim " + std::to_string(a.head_dim) +
                  " (supported: 64, 96, 128, 256)");
  }
}

}  // namespace inferlab
