// CPU reference for prefill attention: each sequence's keys and values gathered through the cache
// view (kv_slot) into a contiguous copy, then attention_reference (double accumulation, the same
// bottom-right causal convention) on that one sequence; its log-sum-exp moved to [row, head].
#include <cstring>
#include <vector>

#include "inferlab/kernels/attention/attention.h"
#include "inferlab/kernels/attention/prefill.h"

namespace inferlab {

void prefill_attention_reference(const PrefillParams& p, const float* q, const float* k_pool, const float* v_pool,
                                 const std::vector<int32_t>& q_start, const std::vector<int32_t>& context_lens,
                                 const std::vector<int32_t>& block_table, float* o, float* lse) {
  const KvCacheView& c = p.cache;
  const int64_t H = p.heads, D = p.head_dim, row = c.kv_heads * D;  // elements per token of q/o and of the pools
  for (int64_t s = 0; s < p.sequences; ++s) {
    const int64_t first = q_start[std::size_t(s)], n = q_start[std::size_t(s) + 1] - first;
    const int64_t keys = context_lens[std::size_t(s)];
    if (n <= 0) continue;
    std::vector<float> k(std::size_t(keys * row)), v(k.size());
    for (int64_t j = 0; j < keys; ++j) {
      const int64_t slot = kv_slot(c, block_table, s, j);
      std::memcpy(&k[std::size_t(j * row)], k_pool + slot * row, std::size_t(row) * sizeof(float));
      std::memcpy(&v[std::size_t(j * row)], v_pool + slot * row, std::size_t(row) * sizeof(float));
    }
    AttentionParams a;
    a.batch = 1;
    a.heads = H;
    a.kv_heads = c.kv_heads;
    a.head_dim = D;
    a.seq_q = n;
    a.seq_k = keys;
    a.causal = p.causal;
    a.scale = p.softmax_scale();
    std::vector<float> seq_lse(std::size_t(H * n));  // [heads, n]
    attention_reference(a, q + first * H * D, k.data(), v.data(), o + first * H * D, seq_lse.data());
    for (int64_t h = 0; h < H; ++h)
      for (int64_t i = 0; i < n; ++i) lse[(first + i) * H + h] = seq_lse[std::size_t(h * n + i)];
  }
}

}  // namespace inferlab
