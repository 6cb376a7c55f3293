#pragma once
// Device pieces shared by the two Hopper flash kernels (flash_fwd_sm90.cu: cp.async producers, one
// softmax between two matrix products; flash_fwd_sm90_overlap.cu: TMA producer, the softmax of tile
// j overlapped with the P V product of tile j - 1): wgmma wrappers (descriptors, mbarriers: common/sm90_async.cuh), the
// work items of the persistent schedule, and the consumers' per-tile steps (mask, online softmax,
// P packing, epilogue), so that the two kernels differ only where their pipelines do.
#include <cfloat>
#include <cstdint>

#include "flash_common.cuh"
#include "inferlab/kernels/common/sm90_async.cuh"
#include "wgmma.h"

namespace inferlab {
namespace {

using sm90::fence_proxy_async;
using sm90::mbar_arrive;
using sm90::mbar_init;
using sm90::mbar_wait;
using sm90::desc_sw128;

// Arrives on `bar` once all of this thread's earlier cp.async copies have landed.
__device__ __forceinline__ void mbar_arrive_cp_async(uint64_t* bar) {
  asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" ::"r"(smem_addr(bar)) : "memory");
}

template <class T, int N>
__device__ __forceinline__ void mma_ss(float (&d)[N / 2], uint64_t a, uint64_t b, int scale_d) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    if constexpr (N == 64) wgmma::ss_Bf16_n64(d, a, b, scale_d); else wgmma::ss_Bf16_n128(d, a, b, scale_d);
  } else {
    if constexpr (N == 64) wgmma::ss_F16_n64(d, a, b, scale_d); else wgmma::ss_F16_n128(d, a, b, scale_d);
  }
}
template <class T, int N>
__device__ __forceinline__ void mma_rs(float (&d)[N / 2], const uint32_t (&a)[4], uint64_t b) {
  constexpr bool bf16 = std::is_same_v<T, __nv_bfloat16>;
  static_assert(N == 32 || N == 64 || N == 128 || N == 256, "wgmma.h has the register-A forms of N 32, 64, 128, 256");
  if constexpr (N == 32) bf16 ? wgmma::rs_Bf16_n32_tb(d, a, b) : wgmma::rs_F16_n32_tb(d, a, b);
  else if constexpr (N == 64) bf16 ? wgmma::rs_Bf16_n64_tb(d, a, b) : wgmma::rs_F16_n64_tb(d, a, b);
  else if constexpr (N == 128) bf16 ? wgmma::rs_Bf16_n128_tb(d, a, b) : wgmma::rs_F16_n128_tb(d, a, b);
  else bf16 ? wgmma::rs_Bf16_n256_tb(d, a, b) : wgmma::rs_F16_n256_tb(d, a, b);
}

// Dense: work item w (in the order items are taken) -> (query block, batch x head): batch x head
// runs slowest and, within it, query blocks from the last (longest causal rows) to the first, so
// items that share K/V run at the same time (L2 reuse) and the long ones start first.
struct WorkItem {
  int m_block, bh;
};
__device__ __forceinline__ WorkItem work_item(int w, int m_blocks) { return {m_blocks - 1 - w % m_blocks, w / m_blocks}; }

// A work item as the leading producer publishes it in shared memory: query tile m_block of
// sequence seq (dense: the batch index) for query head h, and (varlen) that sequence's first q/o
// row and lengths. seq < 0: no more work.
struct Item {
  int seq, h, m_block, seq_q, seq_k, unused;
  int64_t q_row;
};
static_assert(sizeof(Item) == 32, "two slots in the 128 bytes after the mbarriers");

template <FlashMode kMode>
__device__ __forceinline__ SeqSpan item_span(const Item& it, const FlashParams& p) {
  if constexpr (kMode == FlashMode::dense) return {int64_t(it.seq) * p.seq_q, p.seq_q, p.seq_k};
  else return {it.q_row, it.seq_q, it.seq_k};
}

// K/V tiles an item reads: causal ones stop at the diagonal of its last query row.
template <class Cfg, bool kCausal, FlashMode kMode>
__device__ __forceinline__ int kv_tiles(const FlashParams& p, const SeqSpan& sp, int m_block) {
  const int seq_q = queries<kMode>(p, sp), seq_k = keys<kMode>(p, sp);
  int n_end = seq_k;
  if (kCausal) n_end = min(seq_k, (m_block + 1) * Cfg::BM + seq_k - seq_q);
  return n_end > 0 ? (n_end + Cfg::BN - 1) / Cfg::BN : 0;
}

// The item taken w-th (the leading producer only). Varlen: head slowest, then the launch's query
// tiles in sequence order, each sequence's from its last (longest causal rows) to its first.
template <FlashMode kMode>
__device__ __forceinline__ Item take_item(const FlashParams& p, int w, int m_blocks, int items, const int* tile_end) {
  Item it{};
  if (w >= items) {
    it.seq = -1;
    return it;
  }
  if constexpr (kMode == FlashMode::dense) {
    const WorkItem wi = work_item(w, m_blocks);
    it.seq = wi.bh / p.heads;
    it.h = wi.bh % p.heads;
    it.m_block = wi.m_block;
  } else {
    const int tiles = tile_end[p.sequences - 1];  // > 0: items = tiles x heads > w
    it.h = w / tiles;
    const int t = w - it.h * tiles;
    int lo = 0, hi = p.sequences - 1;  // the first sequence whose tiles end past t
    while (lo < hi) {
      const int mid = (lo + hi) >> 1;
      if (tile_end[mid] > t) hi = mid;
      else lo = mid + 1;
    }
    it.seq = lo;
    it.m_block = tile_end[lo] - 1 - t;  // the sequence's tiles counted from its last
    const SeqSpan sp = seq_span<kMode>(p, lo);
    it.q_row = sp.q_row;
    it.seq_q = sp.seq_q;
    it.seq_k = sp.seq_k;
  }
  return it;
}


// Scores of one warpgroup's 64 rows x BN keys in wgmma's accumulator layout: element 4i + e of a
// thread is row (warp * 16 + g + 8 * (e >> 1)), column (8i + 2t + (e & 1)) of the tile.
// Keys at or past seq_k and (causal) past the diagonal become -inf; rows are the item's (row0 + row).
template <int BN, bool kCausal>
__device__ __forceinline__ void mask_scores(float (&s)[BN / 2], int col0, int row, int seq_k, int offset, int t) {
  if (col0 + BN > seq_k || (kCausal && col0 + BN - 1 > row + offset)) {
#pragma unroll
    for (int i = 0; i < BN / 8; ++i)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int col = col0 + i * 8 + 2 * t + (e & 1);
        const int r = row + 8 * (e >> 1);
        if (col >= seq_k || (kCausal && col > r + offset)) s[4 * i + e] = -INFINITY;
      }
  }
}

// S = Q K^T for one warpgroup's 64 rows, issued and committed as one group (not waited for): q_addr
// is the warpgroup's rows of a [BM x D] swizzled Q tile, k_addr a [BN x D] K tile.
template <class T, int D, int BM, int BN>
__device__ __forceinline__ void issue_qk(float (&s)[BN / 2], uint32_t q_addr, uint32_t k_addr) {
  wgmma::fence();
#pragma unroll
  for (int ks = 0; ks < D / 16; ++ks) {
    const uint32_t a = q_addr + uint32_t((ks * 16 / 64) * BM * 128 + (ks * 16 % 64) * 2);
    const uint32_t bk = k_addr + uint32_t((ks * 16 / 64) * BN * 128 + (ks * 16 % 64) * 2);
    mma_ss<T, BN>(s, desc_sw128(a, 16, 1024), desc_sw128(bk, 16, 1024), ks > 0);
  }
  wgmma::commit();
}

// O += P V, P from registers (pack_p), V a [BN x D] swizzled tile read transposed; one committed group.
// V's columns are 64-column atoms BN * 128 bytes apart. D = 96 is an n64 product on the first atom and an
// n32 on the second's first half, each starting at its atom: their accumulators, O[0..31] and O[32..47],
// are the flat n96 layout (element 4i + e: n-tile i).
template <class T, int D, int BN>
__device__ __forceinline__ void issue_pv(float (&acc_o)[D / 2], const uint32_t (&pa)[BN / 16][4], uint32_t v_addr) {
  wgmma::fence();
#pragma unroll
  for (int kk = 0; kk < BN / 16; ++kk) {
    const uint32_t v = v_addr + uint32_t(kk * 16 * 128);
    if constexpr (D == 96) {
      mma_rs<T, 64>(*reinterpret_cast<float(*)[32]>(&acc_o[0]), pa[kk], desc_sw128(v, uint32_t(BN * 128), 1024));
      mma_rs<T, 32>(*reinterpret_cast<float(*)[16]>(&acc_o[32]), pa[kk],
                    desc_sw128(v + uint32_t(BN * 128), uint32_t(BN * 128), 1024));
    } else {
      mma_rs<T, D>(acc_o, pa[kk], desc_sw128(v, uint32_t(BN * 128), 1024));
    }
  }
  wgmma::commit();
}

// wgmma's flat accumulator (element 4i + e: n-tile i) seen as the n-tiles of 4 the softmax takes.
template <int N>
__device__ __forceinline__ float (&tiles_of(float (&a)[N]))[N / 4][4] {
  return *reinterpret_cast<float(*)[N / 4][4]>(&a);
}

// P as wgmma's A operand from registers: k-step kk of P V is the accumulator of S's n-tiles 2kk and
// 2kk + 1, packed to 16 bits.
template <class T, int BN>
__device__ __forceinline__ void pack_p(uint32_t (&pa)[BN / 16][4], const float (&s)[BN / 2]) {
#pragma unroll
  for (int kk = 0; kk < BN / 16; ++kk)
#pragma unroll
    for (int r = 0; r < 4; ++r) pa[kk][r] = Mma<T>::pack(s[8 * kk + 2 * r], s[8 * kk + 2 * r + 1]);
}

// A quad's 4 x 4 transpose of 32-bit values: lane t of the quad (t = lane % 4) holds a[j] = M[t][j] and gets back
// out[k] = M[k][t], by two exchanges of two values (xor 2 swaps the off-diagonal 2 x 2 blocks, xor 1 the off-diagonal
// elements inside them). Every lane of the warp takes part.
__device__ __forceinline__ void quad_transpose(const uint32_t (&a)[4], uint32_t (&out)[4], int t) {
  const bool hi = t & 2, lo = t & 1;
  // After xor 2 the lane holds columns c0 = (hi ? 2 : 0) and c0 + 1 of its row t (m) and of row t ^ 2 (r).
  const uint32_t r0 = __shfl_xor_sync(~0u, hi ? a[0] : a[2], 2), r1 = __shfl_xor_sync(~0u, hi ? a[1] : a[3], 2);
  const uint32_t m0 = hi ? a[2] : a[0], m1 = hi ? a[3] : a[1];
  // After xor 1 it holds column t of rows t (k[0]), t ^ 1 (k[1]), t ^ 2 (k[2]) and t ^ 3 (k[3]).
  const uint32_t v0 = __shfl_xor_sync(~0u, lo ? m0 : m1, 1), v1 = __shfl_xor_sync(~0u, lo ? r0 : r1, 1);
  const uint32_t k[4] = {lo ? m1 : m0, v0, lo ? r1 : r0, v1};
#pragma unroll
  for (int j = 0; j < 4; ++j) {  // row j is row t ^ (j ^ t): k[j ^ t], picked by its two bits
    const bool b0 = bool(j & 1) != lo, b1 = bool(j & 2) != hi;
    out[j] = b0 ? (b1 ? k[3] : k[1]) : (b1 ? k[2] : k[0]);
  }
}

// Epilogue of one warpgroup's rows: the row sums finished across the quad, O normalized and written
// from registers (the producers may already be filling shared memory for the next item), and the
// log-sum-exp (natural log; -inf and O = 0 for a row that saw no key). og/lse point at row 0 of the
// item; my_row is the thread's first row in it, rows at or past `rows` are not written.
// A thread holds two columns of every 8-column n-tile of its row. From head dim 128 O leaves as 16-byte stores: O
// is normalized and packed first (half the registers of the fp32 sums), then a quad transposes each group of 4
// n-tiles (quad_transpose), after which lane t holds n-tile 4g + t whole, and a warp's store writes 8 rows x 64
// contiguous bytes (whole sectors). Storing the pairs as they sit takes D / 4 four-byte stores a thread, each a
// warp's 8 half sectors: at head dim 256 and seq 512 they held the global store queue in 10% of all warp samples
// (ncu stall_lg, H200), at 128 in 5%, at 64 in none. Measured on the H200 (MHA, old -> new, two rounds;
// kernels/attention/NOTES.md): head dim 256 5-12% faster at seq 512-2048, 128 4-8%, both within +-1% at 16384 but
// d128 non-causal 4% faster; at 64 the same change made the kernel 1-5% slower at every seq, the tile loop's code
// included, so head dims below 128 keep the four-byte stores (96 not measured). Where O is not 16-byte aligned the
// pairs are stored as they sit. Written in C++, nvcc 13.0 split each row's first 16-byte store (g = 0) into four
// four-byte ones in its PTX already (6 of the 8 stores at head dim 128 and 14 of the 16 at 256 were STG.E.128, which
// is what the numbers above measured); the stores are inline PTX st.global.v4 now, every one STG.E.128.
template <class T, int D>
__device__ __forceinline__ void store_rows(const float (&acc_o)[D / 2], const float (&m)[2], const float (&l_part)[2],
                                           T* og, int64_t o_stride, float* lse, int lse_step, int my_row, int rows,
                                           int t) {
  constexpr float kLn2 = 0.6931471805599453f;
  if constexpr (D < 128) {
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      float l = l_part[half];
      l += __shfl_xor_sync(~0u, l, 1);
      l += __shfl_xor_sync(~0u, l, 2);
      const int r = my_row + 8 * half;
      if (r >= rows) continue;
      const float inv = l > 0.f ? 1.f / l : 0.f;
#pragma unroll
      for (int i = 0; i < D / 8; ++i) {
        const uint32_t packed = Mma<T>::pack(acc_o[4 * i + 2 * half] * inv, acc_o[4 * i + 2 * half + 1] * inv);
        *reinterpret_cast<uint32_t*>(og + int64_t(r) * o_stride + i * 8 + 2 * t) = packed;
      }
      if (t == 0 && lse) lse[int64_t(r) * lse_step] = l > 0.f ? (m[half] + log2f(l)) * kLn2 : -INFINITY;
    }
  } else {
    static_assert(D % 32 == 0, "16-byte stores take n-tiles four at a time");
    float l[2];
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      l[half] = l_part[half];
      l[half] += __shfl_xor_sync(~0u, l[half], 1);
      l[half] += __shfl_xor_sync(~0u, l[half], 2);
    }
    uint32_t packed[2][D / 8];
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const float inv = l[half] > 0.f ? 1.f / l[half] : 0.f;
#pragma unroll
      for (int i = 0; i < D / 8; ++i)
        packed[half][i] = Mma<T>::pack(acc_o[4 * i + 2 * half] * inv, acc_o[4 * i + 2 * half + 1] * inv);
    }
    const bool wide = (reinterpret_cast<uintptr_t>(og) & 15) == 0 && (o_stride & 7) == 0;  // the same in every thread
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int r = my_row + 8 * half;
      const bool in = r < rows;
      T* row = og + int64_t(r) * o_stride;
      if (wide) {
#pragma unroll
        for (int g = 0; g < D / 32; ++g) {
          const uint32_t a[4] = {packed[half][4 * g], packed[half][4 * g + 1], packed[half][4 * g + 2],
                                 packed[half][4 * g + 3]};
          uint32_t out[4];
          quad_transpose(a, out, t);
          // Inline PTX: from C++ nvcc splits each row's first 16-byte store into four 4-byte ones (6 of 8 stores
          // wide at d128, 14 of 16 at d256, read off the SASS); the asm keeps every store one STG.E.128.
          if (in)
            asm volatile("st.global.v4.b32 [%0], {%1, %2, %3, %4};" ::"l"(__cvta_generic_to_global(row + (4 * g + t) * 8)),
                         "r"(out[0]), "r"(out[1]), "r"(out[2]), "r"(out[3])
                         : "memory");
        }
      } else if (in) {
#pragma unroll
        for (int i = 0; i < D / 8; ++i) *reinterpret_cast<uint32_t*>(row + i * 8 + 2 * t) = packed[half][i];
      }
      if (in && t == 0 && lse)
        lse[int64_t(r) * lse_step] = l[half] > 0.f ? (m[half] + log2f(l[half])) * kLn2 : -INFINITY;
    }
  }
}

}  // namespace
}  // namespace inferlab
