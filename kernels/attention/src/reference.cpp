// CPU reference for attention forward: double accumulation, the same causal convention and the
// same log-sum-exp definition as the kernels.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "inferlab/kernels/attention/attention.h"

namespace inferlab {

float AttentionParams::softmax_scale() const {
  return scale != 0.f ? scale : float(1.0 / std::sqrt(double(head_dim)));
}

AttentionShape cost_shape(const AttentionParams& p) {
  AttentionShape s;
  s.batch = p.batch;
  s.heads = p.heads;
  s.kv_heads = p.kv_heads;
  s.head_dim = p.head_dim;
  s.new_tokens = p.seq_q;
  s.past_tokens = p.seq_k - p.seq_q;
  s.causal = p.causal;
  return s;
}

AttentionParams params_for(const AttentionShape& s, DType dtype) {
  AttentionParams p;
  p.dtype = dtype;
  p.batch = s.batch;
  p.heads = s.heads;
  p.kv_heads = s.kv_heads;
  p.head_dim = s.head_dim;
  p.seq_q = s.new_tokens;
  p.seq_k = s.new_tokens + s.past_tokens;
  p.causal = s.causal;
  return p;
}

void attention_reference(const AttentionParams& p, const float* q, const float* k, const float* v, float* o,
                         float* lse) {
  const int64_t H = p.heads, KH = p.kv_heads, D = p.head_dim, group = H / KH;
  const double scale = p.softmax_scale();
  std::vector<double> s(static_cast<std::size_t>(p.seq_k)), acc(static_cast<std::size_t>(D));
  for (int64_t b = 0; b < p.batch; ++b)
    for (int64_t h = 0; h < H; ++h) {
      const int64_t kh = h / group;
      for (int64_t i = 0; i < p.seq_q; ++i) {
        const float* qi = q + ((b * p.seq_q + i) * H + h) * D;
        const int64_t last = p.causal ? std::min(p.seq_k - 1, i + p.seq_k - p.seq_q) : p.seq_k - 1;
        double mx = -std::numeric_limits<double>::infinity();
        for (int64_t j = 0; j <= last; ++j) {
          const float* kj = k + ((b * p.seq_k + j) * KH + kh) * D;
          double dot = 0;
          for (int64_t d = 0; d < D; ++d) dot += double(qi[d]) * double(kj[d]);
          s[std::size_t(j)] = dot * scale;
          mx = std::max(mx, s[std::size_t(j)]);
        }
        std::fill(acc.begin(), acc.end(), 0.0);
        double sum = 0;
        for (int64_t j = 0; j <= last; ++j) {
          const double e = std::exp(s[std::size_t(j)] - mx);
          sum += e;
          const float* vj = v + ((b * p.seq_k + j) * KH + kh) * D;
          for (int64_t d = 0; d < D; ++d) acc[std::size_t(d)] += e * double(vj[d]);
        }
        float* oi = o + ((b * p.seq_q + i) * H + h) * D;
        for (int64_t d = 0; d < D; ++d) oi[d] = sum > 0 ? float(acc[std::size_t(d)] / sum) : 0.f;
        lse[(b * H + h) * p.seq_q + i] =
            sum > 0 ? float(mx + std::log(sum)) : -std::numeric_limits<float>::infinity();
      }
    }
}

}  // namespace inferlab
