#pragma once
// Device helpers shared by the two flash forward kernels: the launch parameters and the modes that
// say where each sequence's rows live, cp.async and the K/V row loader, and the mma.sync m16n8k16
// instruction with its fp32 -> 16-bit packing (the packing is also how both kernels turn score
// accumulators into the A operand of P V).
#include <cstdint>
#include <cstring>
#include <type_traits>

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "inferlab/kernels/attention/attention.h"
#include "inferlab/kernels/attention/prefill.h"

namespace inferlab {
namespace {

// Where a launch's sequences live: one compile-time property of a kernel instantiation, so the
// dense kernel's code is what it was and only the varlen instantiations pay for lookups.
//   dense              attention.h: every sequence has seq_q queries (q/o rows b * seq_q + i) and
//                      seq_k keys (k/v rows b * seq_k + j); lse [batch, heads, seq_q].
//   varlen_contiguous  prefill.h on a contiguous cache: sequence s has q_start[s + 1] - q_start[s]
//                      queries from row q_start[s] and context_lens[s] keys at cache rows
//                      s * max_len + j; lse [total_q, heads] or none.
//   varlen_paged       the same on a paged cache: key j in slot table[s][j >> shift] * block + (j & mask).
enum class FlashMode { dense, varlen_contiguous, varlen_paged };

struct FlashParams {
  const void* q;
  const void* k;
  const void* v;
  void* o;
  float* lse;
  int seq_q, seq_k, heads, kv_heads, group, batch_heads;  // varlen: seq_q, seq_k unused; batch = sequences
  float scale_log2;  // softmax scale * log2(e)
  // varlen modes only
  const int32_t* q_start;       // [sequences + 1]
  const int32_t* context_lens;  // [sequences]
  const int32_t* block_table;   // paged: [sequences, max_blocks_per_seq]
  int64_t seq_slots;            // contiguous: rows reserved per sequence (max_len)
  int max_blocks_per_seq, block_shift, sequences;
};

// One sequence as a kernel sees it: the q/o row of its first query, its queries and its keys
// (causal: query i sees keys j <= i + seq_k - seq_q).
struct SeqSpan {
  int64_t q_row;
  int seq_q, seq_k;
};
template <FlashMode kMode>
__device__ __forceinline__ SeqSpan seq_span(const FlashParams& p, int s) {
  if constexpr (kMode == FlashMode::dense) {
    return {int64_t(s) * p.seq_q, p.seq_q, p.seq_k};
  } else {
    const int first = __ldg(p.q_start + s), end = __ldg(p.q_start + s + 1);
    return {first, end - first, __ldg(p.context_lens + s)};
  }
}

// A sequence's queries and keys where a kernel uses them: dense reads the launch constants at each
// use (constant-bank operands; holding them in registers across the key loop measured 20 more
// bytes of spills in the head-dim-128 mma.sync kernel), varlen the span loaded once.
template <FlashMode kMode>
__device__ __forceinline__ int queries(const FlashParams& p, const SeqSpan& s) {
  if constexpr (kMode == FlashMode::dense) return p.seq_q;
  else return s.seq_q;
}
template <FlashMode kMode>
__device__ __forceinline__ int keys(const FlashParams& p, const SeqSpan& s) {
  if constexpr (kMode == FlashMode::dense) return p.seq_k;
  else return s.seq_k;
}

// Element offset (into k or v) of key j of one (sequence, KV head) in a varlen mode.
template <FlashMode kMode>
struct KvRows {
  int64_t base;          // kh * D, plus (contiguous) the sequence's first row
  int64_t stride;        // elements per key row of the pool (kv_heads * D)
  const int32_t* table;  // paged: the sequence's block-table row
  int shift;             // paged: log2(block size)
  __device__ __forceinline__ int64_t offset(int j) const {
    if constexpr (kMode == FlashMode::varlen_paged)
      return base + ((int64_t(__ldg(table + (j >> shift))) << shift) + (j & ((1 << shift) - 1))) * stride;
    else
      return base + int64_t(j) * stride;
  }
  // Whether key j starts a new run of consecutive slots (paged: a block boundary).
  __device__ __forceinline__ bool starts_block(int j) const {
    if constexpr (kMode == FlashMode::varlen_paged) return (j & ((1 << shift) - 1)) == 0;
    else return false;
  }
};
template <FlashMode kMode>
__device__ __forceinline__ KvRows<kMode> kv_rows(const FlashParams& p, int s, int kh, int D) {
  const int64_t stride = int64_t(p.kv_heads) * D;
  if constexpr (kMode == FlashMode::varlen_paged)
    return {int64_t(kh) * D, stride, p.block_table + int64_t(s) * p.max_blocks_per_seq, p.block_shift};
  else
    return {int64_t(s) * p.seq_slots * stride + int64_t(kh) * D, stride, nullptr, 0};
}

__device__ __forceinline__ uint32_t smem_addr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

__device__ __forceinline__ void cp_async_16(void* smem, const void* gmem, bool valid) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_addr(smem)), "l"(gmem),
               "r"(valid ? 16 : 0));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
__device__ __forceinline__ void cp_async_wait_all() { asm volatile("cp.async.wait_group 0;\n" ::); }

// Copies keys [tile0, tile0 + ROWS) of one (sequence, KV head) of k or v (g) into a shared tile
// (place(r, col): the shared address of row r, column col); keys at or past `keys` are zero-filled
// and their addresses never formed. Each of THREADS threads (tid) copies one 16-byte column chunk
// of RUN consecutive rows, so that a paged cache costs one block-table read per thread and block
// of the run (one per tile when blocks hold >= RUN tokens): within a block the run's keys sit in
// consecutive slots. The table reads hit L1 after the first of a tile. walk_kv_rows is the thread's walk (each row's
// offset, `issue(r, col, off, ok)` at each), load_kv_rows and load_kv_rows_pair what they issue.
template <int D, int ROWS, int THREADS, int UNROLL, FlashMode kMode, class Issue>
__device__ __forceinline__ void walk_kv_rows(const KvRows<kMode>& src, int tile0, int keys, int tid, Issue issue) {
  constexpr int kChunks = D / 8, kGroups = THREADS / kChunks, RUN = ROWS / kGroups;
  static_assert(THREADS % kChunks == 0 && ROWS % kGroups == 0, "thread -> (row run, chunk) map");
  const int col = (tid % kChunks) * 8, r0 = (tid / kChunks) * RUN;
  int64_t off = 0;
#pragma unroll UNROLL
  for (int i = 0; i < RUN; ++i) {
    const int r = r0 + i, j = tile0 + r;
    const bool ok = j < keys;
    if (ok && (i == 0 || src.starts_block(j))) off = src.offset(j);  // later rows of the run: + stride
    issue(r, col, off, ok);
    off += src.stride;
  }
}
template <int D, int ROWS, int THREADS, int UNROLL, FlashMode kMode, class T, class Place>
__device__ __forceinline__ void load_kv_rows(const T* g, const KvRows<kMode>& src, int tile0, int keys, int tid,
                                             Place place) {
  walk_kv_rows<D, ROWS, THREADS, UNROLL>(src, tile0, keys, tid, [&](int r, int col, int64_t off, bool ok) {
    cp_async_16(place(r, col), ok ? g + off + col : g, ok);
  });
}

// The same for the K and the V tile of one key range at once (the wgmma rung's producers load both for a stage): K and
// V share the cache's layout, so each row's offset, and a paged cache's block-table read, is formed once for both.
// Measured (H200, bench_attention's prefill rows, two rounds against two loops each reading the table): paged 0.77-0.82x
// the time at head dim 128 and 0.87x at 64, contiguous 0.95-0.98x; paged over contiguous 1.24-1.33x -> 1.07-1.10x.
template <int D, int ROWS, int THREADS, int UNROLL, FlashMode kMode, class T, class PlaceK, class PlaceV>
__device__ __forceinline__ void load_kv_rows_pair(const T* gk, const T* gv, const KvRows<kMode>& src, int tile0, int keys,
                                                  int tid, PlaceK place_k, PlaceV place_v) {
  walk_kv_rows<D, ROWS, THREADS, UNROLL>(src, tile0, keys, tid, [&](int r, int col, int64_t off, bool ok) {
    cp_async_16(place_k(r, col), ok ? gk + off + col : gk, ok);
    cp_async_16(place_v(r, col), ok ? gv + off + col : gv, ok);
  });
}

// Element offset of (row, col) in a [rows x D] tile stored with 16-byte chunks XOR-swizzled.
template <int D>
__device__ __forceinline__ int swz(int row, int col) {
  return row * D + ((((col >> 3) ^ (row & 7))) << 3) + (col & 7);
}

__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr(p)));
}
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr(p)));
}

template <class T>
struct Mma;
template <>
struct Mma<__nv_bfloat16> {
  static __device__ __forceinline__ void run(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
  static __device__ __forceinline__ uint32_t pack(float lo, float hi) {
    __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
    uint32_t u;
    memcpy(&u, &v, 4);
    return u;
  }
};
template <>
struct Mma<__half> {
  static __device__ __forceinline__ void run(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
  static __device__ __forceinline__ uint32_t pack(float lo, float hi) {
    __half2 v = __floats2half2_rn(lo, hi);
    uint32_t u;
    memcpy(&u, &v, 4);
    return u;
  }
};

// 2^x on the SFU, flushing denormals (exp2f without fast-math adds a range fix-up per call). The
// softmax feeds it x <= 0 (x <= 8 with the overlapped kernel's lazy maximum) and needs no denormal results.
__device__ __forceinline__ float fast_exp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

// This lane's scores of row `half` (s[n][2 half], s[n][2 half + 1]) turned in place into
// P = 2^(s * scale_log2 - base); returns their sum, taken as kSums independent partial sums (a dependency
// chain of adds kSums times shorter; the order of the fp32 additions changes, not their precision).
template <int kSums = 1, int NS>
__device__ __forceinline__ float exp_row(float (&s)[NS][4], int half, float scale_log2, float base) {
  static_assert(kSums == 1 || kSums == 4, "one or four partial sums");
  float sum[kSums] = {};
#pragma unroll
  for (int n = 0; n < NS; ++n)
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      const float pv = fast_exp2(s[n][2 * half + e] * scale_log2 - base);
      s[n][2 * half + e] = pv;
      sum[(2 * n + e) % kSums] += pv;
    }
  if constexpr (kSums == 4) return (sum[0] + sum[1]) + (sum[2] + sum[3]);
  else return sum[0];
}

// One online-softmax step over the score accumulators of one m16 tile (mma.sync's rows g and g + 8,
// or wgmma's rows of a warp's 16; a quad of lanes shares a row): s[n][4] holds this lane's scores of
// NS n-tiles (raw Q K^T; turned into P = 2^(s * scale_log2 - m) in place), m[2] the running row
// maxima (log2 units), l[2] this lane's partial row sums (the quad is summed at the end), alpha[2]
// = 2^(m_old - m_new), the factor by which O accumulated so far must shrink.
template <int NS>
__device__ __forceinline__ void online_softmax_rows(float (&s)[NS][4], float (&m)[2], float (&l)[2], float (&alpha)[2],
                                                    float scale_log2) {
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    float mx = m[half];
#pragma unroll
    for (int n = 0; n < NS; ++n) mx = fmaxf(mx, fmaxf(s[n][2 * half], s[n][2 * half + 1]) * scale_log2);
    mx = fmaxf(mx, __shfl_xor_sync(~0u, mx, 1));
    mx = fmaxf(mx, __shfl_xor_sync(~0u, mx, 2));
    const float base = mx == -INFINITY ? 0.f : mx;
    alpha[half] = fast_exp2(m[half] - base);
    m[half] = mx;
    l[half] = l[half] * alpha[half] + exp_row(s, half, scale_log2, base);
  }
}

// O accumulators in the same layout (NO n-tiles of 4) scaled by alpha of their row.
template <int NO>
__device__ __forceinline__ void rescale_rows(float (&acc)[NO][4], const float (&alpha)[2]) {
#pragma unroll
  for (int n = 0; n < NO; ++n)
#pragma unroll
    for (int e = 0; e < 4; ++e) acc[n][e] *= alpha[e >> 1];
}

// The step as the mma.sync kernel takes it: softmax, then O rescaled at once.
template <int NS, int NO>
__device__ __forceinline__ void online_softmax_step(float (&s)[NS][4], float (&m)[2], float (&l)[2],
                                                    float (&acc)[NO][4], float scale_log2) {
  float alpha[2];
  online_softmax_rows(s, m, l, alpha, scale_log2);
  rescale_rows(acc, alpha);
}

// The log-sum-exp of (sequence s, head h), bh = s * heads + h: dense [batch, heads, seq_q], varlen
// [total_q, heads] or none (p.lse null). lse_at(p, bh, h, q_row, row0) is where query row0 of the
// sequence goes (null: nowhere), lse_step(p) the distance between consecutive queries.
template <FlashMode kMode>
__device__ __forceinline__ float* lse_at(const FlashParams& p, int bh, int h, int64_t q_row, int row0) {
  if constexpr (kMode == FlashMode::dense) return p.lse + int64_t(bh) * p.seq_q + row0;
  else return p.lse ? p.lse + (q_row + row0) * p.heads + h : nullptr;
}
template <FlashMode kMode>
__device__ __forceinline__ int lse_step(const FlashParams& p) {
  if constexpr (kMode == FlashMode::dense) return 1;
  else return p.heads;
}

// Runtime (dtype, causal, mode) -> compile time, in one place for both kernels:
//   dispatch_dtype_causal(a.dtype, a.causal, [&](auto causal, auto element) {
//     launch<Cfg, decltype(causal)::value, typename decltype(element)::type>(a, stream); });
template <class T>
struct Element {
  using type = T;
};
template <class F>
void dispatch_dtype_causal(DType dtype, bool causal, F&& f) {
  if (dtype == DType::bf16) {
    if (causal) f(std::true_type{}, Element<__nv_bfloat16>{}); else f(std::false_type{}, Element<__nv_bfloat16>{});
  } else {
    if (causal) f(std::true_type{}, Element<__half>{}); else f(std::false_type{}, Element<__half>{});
  }
}
template <FlashMode kMode>
using Mode = std::integral_constant<FlashMode, kMode>;
// A prefill's mode from its cache layout: f(Mode<...>{}).
template <class F>
void dispatch_varlen_mode(const PrefillParams& a, F&& f) {
  if (a.cache.layout == KvLayout::paged) f(Mode<FlashMode::varlen_paged>{}); else f(Mode<FlashMode::varlen_contiguous>{});
}

inline FlashParams make_flash_params(const AttentionParams& a) {
  FlashParams p{};
  p.q = a.q;
  p.k = a.k;
  p.v = a.v;
  p.o = a.o;
  p.lse = a.lse;
  p.seq_q = int(a.seq_q);
  p.seq_k = int(a.seq_k);
  p.heads = int(a.heads);
  p.kv_heads = int(a.kv_heads);
  p.group = int(a.heads / a.kv_heads);
  p.batch_heads = int(a.batch * a.heads);
  p.scale_log2 = a.softmax_scale() * 1.4426950408889634f;
  return p;
}

inline FlashParams make_flash_params(const PrefillParams& a) {
  FlashParams p{};
  p.q = a.q;
  p.k = a.cache.k;
  p.v = a.cache.v;
  p.o = a.o;
  p.lse = a.lse;
  p.heads = int(a.heads);
  p.kv_heads = int(a.cache.kv_heads);
  p.group = int(a.heads / a.cache.kv_heads);
  p.batch_heads = int(a.sequences * a.heads);
  p.scale_log2 = a.softmax_scale() * 1.4426950408889634f;
  p.q_start = a.q_start;
  p.context_lens = a.cache.context_lens;
  p.sequences = int(a.sequences);
  if (a.cache.layout == KvLayout::paged) {
    p.block_table = a.cache.block_table;
    p.max_blocks_per_seq = int(a.cache.max_blocks_per_seq);
    while ((int64_t(1) << p.block_shift) < a.cache.block_size) ++p.block_shift;
  } else {
    p.seq_slots = a.cache.max_len;
  }
  return p;
}

}  // namespace
}  // namespace inferlab
