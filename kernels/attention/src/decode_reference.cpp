// CPU reference for decode attention: double accumulation over the tokens gathered through the
// block table (paged) or the sequence's reserved rows (contiguous).
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "inferlab/kernels/attention/decode.h"

namespace inferlab {

void decode_attention_reference(const DecodeParams& p, const float* q, const float* k_pool, const float* v_pool,
                                const std::vector<int32_t>& lens, const std::vector<int32_t>& table, float* o,
                                float* lse) {
  const KvCacheView& c = p.cache;
  const int64_t D = p.head_dim, KH = c.kv_heads, G = p.heads / KH;
  const double scale = p.softmax_scale();
  auto slot_of = [&](int64_t b, int64_t tok) { return kv_slot(c, table, b, tok); };
  for (int64_t b = 0; b < p.batch; ++b) {
    const int64_t n = lens[std::size_t(b)];
    std::vector<double> s(static_cast<std::size_t>(n));
    for (int64_t h = 0; h < p.heads; ++h) {
      const int64_t kh = h / G;
      const float* qh = q + (b * p.heads + h) * D;
      double mx = -std::numeric_limits<double>::infinity();
      for (int64_t j = 0; j < n; ++j) {
        const float* kj = k_pool + (slot_of(b, j) * KH + kh) * D;
        double dot = 0;
        for (int64_t d = 0; d < D; ++d) dot += double(qh[d]) * double(kj[d]);
        s[std::size_t(j)] = dot * scale;
        mx = std::max(mx, s[std::size_t(j)]);
      }
      std::vector<double> acc(std::size_t(D), 0.0);
      double sum = 0;
      for (int64_t j = 0; j < n; ++j) {
        const double e = std::exp(s[std::size_t(j)] - mx);
        sum += e;
        const float* vj = v_pool + (slot_of(b, j) * KH + kh) * D;
        for (int64_t d = 0; d < D; ++d) acc[std::size_t(d)] += e * double(vj[d]);
      }
      for (int64_t d = 0; d < D; ++d) o[(b * p.heads + h) * D + d] = sum > 0 ? float(acc[std::size_t(d)] / sum) : 0.f;
      lse[b * p.heads + h] = sum > 0 ? float(mx + std::log(sum)) : -std::numeric_limits<float>::infinity();
    }
  }
}

}  // namespace inferlab
