#pragma once
// Shared by the attention suites (test_attention, test_decode, test_prefill):
//   - the plain same-precision implementation of one query row (scores, P and O rounded to the
//     dtype, the softmax in float), whose error against the double-precision reference sets the
//     tolerance: a kernel passes at <= 2x that error (FlashAttention's rule) plus half an ulp of
//     the output dtype at the output's scale (for shapes where the baseline is exact by luck);
//   - random inputs exact in the dtype, and seeds that are printed and can be replayed
//     (INFERLAB_TEST_SEED);
//   - a KV cache (paged or contiguous) holding given tokens, with every slot no sequence owns NaN
//     so that a stray read poisons the output, and paged blocks handed out in shuffled order;
//   - the worst error of a comparison together with where it is, so that a failure names it.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "inferlab/kernels/attention/attention.h"
#include "inferlab/kernels/common/device_buffer.h"
#include "inferlab/kernels/common/dtype_traits.h"
#include "inferlab/kernels/kvcache/kvcache.h"

namespace inferlab::testing {

inline float round_to(DType t, float x) {
  if (t == DType::bf16) return DTypeTraits<DType::bf16>::to_float(DTypeTraits<DType::bf16>::from_float(x));
  return DTypeTraits<DType::fp16>::to_float(DTypeTraits<DType::fp16>::from_float(x));
}

// Half an ulp of a bf16/fp16 value of magnitude `scale` (at least 1e-3).
inline double half_ulp(DType t, double scale) {
  return (t == DType::bf16 ? std::ldexp(1.0, -8) : std::ldexp(1.0, -11)) * std::max(scale, 1e-3);
}

// A fresh seed per run, printed; INFERLAB_TEST_SEED=<n> replays one.
inline std::mt19937_64 seeded_rng(const char* suite) {
  const char* env = std::getenv("INFERLAB_TEST_SEED");
  const uint64_t seed = env ? std::strtoull(env, nullptr, 10) : std::random_device{}();
  std::printf("%s test seed %llu (replay: INFERLAB_TEST_SEED=%llu)\n", suite, static_cast<unsigned long long>(seed),
              static_cast<unsigned long long>(seed));
  return std::mt19937_64(seed);
}

// n normal(0, 1) values rounded to DT: the device copy and its exact float image.
template <DType DT>
struct Values {
  std::vector<typename DTypeTraits<DT>::type> dev;
  std::vector<float> f;
};
template <DType DT>
Values<DT> random_values(std::size_t n, std::mt19937_64& rng) {
  using Tr = DTypeTraits<DT>;
  std::normal_distribution<float> dist(0.f, 1.f);
  Values<DT> v;
  v.dev.resize(n);
  v.f.resize(n);
  for (std::size_t i = 0; i < n; ++i) {
    v.dev[i] = Tr::from_float(dist(rng));
    v.f[i] = Tr::to_float(v.dev[i]);
  }
  return v;
}

// The plain same-precision attention of query q (D floats) over keys 0..last (none when last < 0):
// key(j) and value(j) give the float rows. Writes o (D floats) and the log-sum-exp.
template <class KeyRow, class ValueRow>
void plain_attention_row(DType dt, const float* q, int64_t D, int64_t last, float scale, KeyRow key, ValueRow value,
                         float* o, float* lse) {
  if (last < 0) {
    std::fill(o, o + D, 0.f);
    *lse = -INFINITY;
    return;
  }
  std::vector<float> s(std::size_t(last + 1));
  float mx = -INFINITY;
  for (int64_t j = 0; j <= last; ++j) {
    const float* k = key(j);
    float dot = 0;
    for (int64_t d = 0; d < D; ++d) dot += q[d] * k[d];
    s[std::size_t(j)] = round_to(dt, dot * scale);
    mx = std::max(mx, s[std::size_t(j)]);
  }
  float sum = 0;
  for (float x : s) sum += std::exp(x - mx);
  *lse = mx + std::log(sum);
  for (float& x : s) x = round_to(dt, std::exp(x - mx) / sum);  // P in the dtype
  std::vector<float> acc(std::size_t(D), 0.f);
  for (int64_t j = 0; j <= last; ++j) {
    const float* v = value(j);
    for (int64_t d = 0; d < D; ++d) acc[std::size_t(d)] += s[std::size_t(j)] * v[d];
  }
  for (int64_t d = 0; d < D; ++d) o[d] = round_to(dt, acc[std::size_t(d)]);
}

// The largest |got - want| over a comparison and where it is; non-finite values counted apart
// (an unwritten, NaN-poisoned output or a NaN slot that was read). Matching infinities (a row with
// no key: lse -inf) are equal.
struct WorstError {
  double value = 0;
  std::size_t where = 0;
  float got = 0, want = 0;
  int64_t non_finite = 0;
  std::size_t first_non_finite = 0;
  void add(std::size_t i, float g, float w) {
    if (std::isinf(w) && g == w) return;
    if (!std::isfinite(g)) {
      if (non_finite++ == 0) first_non_finite = i;
      return;
    }
    const double e = std::fabs(double(g) - double(w));
    if (e > value) {
      value = e;
      where = i;
      got = g;
      want = w;
    }
  }
};

// A KV cache (kernels/kvcache) holding each sequence's tokens; every other slot of the pools NaN.
//   paged: blocks of block_size tokens from a pool with 3 spare blocks, handed out in shuffled
//          order; table rows one block longer than the longest sequence needs (-1 there);
//   contiguous: 5 spare rows after the longest sequence.
// tokens_k/v[s]: [lens[s], kv_heads, head_dim], exact in DT.
template <DType DT>
struct TestKvCache {
  using T = typename DTypeTraits<DT>::type;
  KvCacheView view;
  std::vector<int32_t> lens, table;
  std::vector<float> fk, fv;  // host images of the pools (NaN where no sequence owns the slot)
  DeviceBuffer<T> dk, dv;
  DeviceBuffer<int32_t> dlens, dtable;

  int64_t slot(int64_t seq, int64_t token) const { return kv_slot(view, table, seq, token); }
  const float* k_row(int64_t seq, int64_t token, int64_t kv_head) const {
    return fk.data() + (slot(seq, token) * view.kv_heads + kv_head) * view.head_dim;
  }
  const float* v_row(int64_t seq, int64_t token, int64_t kv_head) const {
    return fv.data() + (slot(seq, token) * view.kv_heads + kv_head) * view.head_dim;
  }
};

template <DType DT>
TestKvCache<DT> make_kv_cache(KvLayout layout, int64_t block_size, int64_t kv_heads, int64_t head_dim,
                              const std::vector<Values<DT>>& tokens_k, const std::vector<Values<DT>>& tokens_v,
                              std::mt19937_64& rng) {
  using Tr = DTypeTraits<DT>;
  TestKvCache<DT> c;
  const int64_t B = int64_t(tokens_k.size()), row = kv_heads * head_dim;
  for (const auto& t : tokens_k) c.lens.push_back(int32_t(t.f.size() / std::size_t(row)));
  const int64_t max_ctx = *std::max_element(c.lens.begin(), c.lens.end());
  KvCacheView& v = c.view;
  v.layout = layout;
  v.dtype = DT;
  v.batch = B;
  v.kv_heads = kv_heads;
  v.head_dim = head_dim;
  int64_t slots = 0;
  if (layout == KvLayout::paged) {
    v.block_size = block_size;
    v.max_blocks_per_seq = (max_ctx + block_size - 1) / block_size + 1;
    int64_t used = 0;
    for (auto l : c.lens) used += (l + block_size - 1) / block_size;
    v.num_blocks = used + 3;
    std::vector<int32_t> perm(std::size_t(v.num_blocks));
    std::iota(perm.begin(), perm.end(), 0);
    std::shuffle(perm.begin(), perm.end(), rng);
    c.table.assign(std::size_t(B * v.max_blocks_per_seq), -1);
    std::size_t next = 0;
    for (int64_t b = 0; b < B; ++b)
      for (int64_t i = 0; i < (c.lens[std::size_t(b)] + block_size - 1) / block_size; ++i)
        c.table[std::size_t(b * v.max_blocks_per_seq + i)] = perm[next++];
    slots = v.num_blocks * block_size;
  } else {
    v.max_len = max_ctx + 5;
    slots = B * v.max_len;
  }
  const std::size_t pool = std::size_t(slots * row);
  std::vector<typename Tr::type> hk(pool, Tr::nan()), hv(pool, Tr::nan());
  c.fk.assign(pool, NAN);
  c.fv.assign(pool, NAN);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t j = 0; j < c.lens[std::size_t(b)]; ++j)
      for (int64_t e = 0; e < row; ++e) {
        const std::size_t dst = std::size_t(c.slot(b, j) * row + e), src = std::size_t(j * row + e);
        hk[dst] = tokens_k[std::size_t(b)].dev[src];
        hv[dst] = tokens_v[std::size_t(b)].dev[src];
        c.fk[dst] = tokens_k[std::size_t(b)].f[src];
        c.fv[dst] = tokens_v[std::size_t(b)].f[src];
      }
  c.dk = DeviceBuffer<typename Tr::type>(hk);
  c.dv = DeviceBuffer<typename Tr::type>(hv);
  c.dlens = DeviceBuffer<int32_t>(c.lens);
  c.dtable = DeviceBuffer<int32_t>(c.table.empty() ? std::vector<int32_t>{-1} : c.table);
  v.k = c.dk.get();
  v.v = c.dv.get();
  v.context_lens = c.dlens.get();
  v.block_table = layout == KvLayout::paged ? c.dtable.get() : nullptr;
  validate_kv_view(v, c.lens, c.table);
  return c;
}

// Random tokens (lens[s] of them per sequence) for make_kv_cache.
template <DType DT>
std::vector<Values<DT>> random_tokens(const std::vector<int32_t>& lens, int64_t kv_heads, int64_t head_dim,
                                      std::mt19937_64& rng) {
  std::vector<Values<DT>> t;
  for (auto l : lens) t.push_back(random_values<DT>(std::size_t(l * kv_heads * head_dim), rng));
  return t;
}

// The flash ladder's rungs (attention.h FlashOptions): the mma.sync kernel with its planned tile and each
// head-dim-128 candidate, then, where this GPU runs it, the wgmma kernel and the same with its persistent
// grid squeezed to `squeezed_ctas` CTAs (every CTA takes many work items). Says which rung was left out.
// varlen: the rungs that run the varlen prefill (the overlapped kernel is dense only).
inline std::vector<FlashOptions> flash_rungs(int squeezed_ctas, bool varlen = false) {
  std::vector<FlashOptions> rungs;
  for (MmaTile t : {MmaTile::planned, MmaTile::bm128_bn32_w4, MmaTile::bm64_bn64_w4, MmaTile::bm128_bn64_w8})
    rungs.push_back(FlashOptions{FlashKernel::mma, t, 0});
  try {
    resolve_flash_kernel(FlashOptions{FlashKernel::wgmma, MmaTile::planned, 0});
    rungs.push_back(FlashOptions{FlashKernel::wgmma, MmaTile::planned, 0});
    rungs.push_back(FlashOptions{FlashKernel::wgmma, MmaTile::planned, squeezed_ctas});
    if (!varlen) {
      rungs.push_back(FlashOptions{FlashKernel::overlapped, MmaTile::planned, 0});
      rungs.push_back(FlashOptions{FlashKernel::overlapped, MmaTile::planned, squeezed_ctas});
    }
  } catch (const std::exception& e) {
    std::printf("[ flash    ] the wgmma rung is not run here: %s\n", e.what());
  }
  return rungs;
}

}  // namespace inferlab::testing
