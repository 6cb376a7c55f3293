// CPU references of kernels/layers (layers_host.h): double precision, rounding to the dtype at the kernels'
// rounding points.
#include <algorithm>
#include <cfloat>
#include <cmath>

#include "inferlab/kernels/gemm/quant.h"
#include "inferlab/kernels/layers/layers_host.h"
#include "inferlab/sim/error.h"

namespace inferlab {
namespace {

// The value stored in `round`'s type (through float, as the kernels round an fp32 result).
float stored(DType round, double x) {
  const float f = float(x);
  switch (round) {
    case DType::bf16: return round_bf16(f);
    case DType::fp16: return round_fp16(f);
    case DType::fp32: return f;
    default: throw Error("layers reference: unsupported rounding type " + dtype_name(round) + " (bf16, fp16, fp32)");
  }
}

}  // namespace

void embedding_reference(int64_t tokens, int64_t hidden, int64_t vocab, const int32_t* ids, const float* table,
                         float* out) {
  for (int64_t t = 0; t < tokens; ++t) {
    const int64_t id = ids[t];
    for (int64_t j = 0; j < hidden; ++j)
      out[t * hidden + j] = (id >= 0 && id < vocab) ? table[id * hidden + j] : 0.0f;
  }
}

void rmsnorm_reference(DType round, int64_t rows, int64_t hidden, double eps, float* residual, const float* add,
                       const float* weight, const int32_t* row_index, int64_t source_rows, float* out) {
  std::vector<float> x(static_cast<std::size_t>(hidden));
  for (int64_t i = 0; i < rows; ++i) {
    const int64_t src = row_index ? int64_t(row_index[i]) : i;
    float* o = out + i * hidden;
    if (row_index && (src < 0 || src >= source_rows)) {
      std::fill(o, o + hidden, 0.0f);
      continue;
    }
    double ss = 0;
    for (int64_t j = 0; j < hidden; ++j) {
      float v = residual[src * hidden + j];
      if (add) v = stored(round, double(v + add[src * hidden + j]));  // one fp32 add, then the dtype
      x[std::size_t(j)] = v;
      ss += double(v) * double(v);
    }
    if (add && !row_index) std::copy(x.begin(), x.end(), residual + src * hidden);
    const double r = 1.0 / std::sqrt(ss / double(hidden) + eps);
    for (int64_t j = 0; j < hidden; ++j) {
      const float n = stored(round, double(x[std::size_t(j)]) * r);
      o[j] = stored(round, double(weight[j]) * double(n));
    }
  }
}

void rope_reference(DType round, int64_t tokens, int64_t heads, int64_t kv_heads, int64_t head_dim, const float* qkv,
                    const float* bias, const int32_t* positions, const float* inv_freq, float* q_out, float* k_out,
                    float* v_out) {
  const int64_t half = head_dim / 2, width = (heads + 2 * kv_heads) * head_dim;
  auto input = [&](int64_t t, int64_t col) {
    const float v = qkv[t * width + col];
    return bias ? stored(round, double(v + bias[col])) : v;
  };
  for (int64_t t = 0; t < tokens; ++t) {
    for (int64_t h = 0; h < heads + kv_heads; ++h) {
      float* dst = h < heads ? q_out + (t * heads + h) * head_dim : k_out + (t * kv_heads + h - heads) * head_dim;
      for (int64_t i = 0; i < half; ++i) {
        const float angle = float(positions[t]) * inv_freq[i];  // fp32, as HF's inv_freq @ position_ids
        const double c = std::cos(double(angle)), s = std::sin(double(angle));
        const double x1 = input(t, h * head_dim + i), x2 = input(t, h * head_dim + half + i);
        dst[i] = stored(round, x1 * c - x2 * s);
        dst[half + i] = stored(round, x2 * c + x1 * s);
      }
    }
    for (int64_t j = 0; j < kv_heads * head_dim; ++j)
      v_out[t * kv_heads * head_dim + j] = input(t, (heads + kv_heads) * head_dim + j);
  }
}

void swiglu_reference(DType round, int64_t tokens, int64_t intermediate, const float* gate_up, float* out) {
  for (int64_t t = 0; t < tokens; ++t)
    for (int64_t j = 0; j < intermediate; ++j) {
      const double g = gate_up[t * 2 * intermediate + j], u = gate_up[t * 2 * intermediate + intermediate + j];
      out[t * intermediate + j] = stored(round, g / (1.0 + std::exp(-g)) * u);
    }
}

int32_t argmax_reference(const float* logits, int64_t vocab) {
  int32_t best = -1;
  for (int64_t i = 0; i < vocab; ++i) {
    if (std::isnan(logits[i])) continue;
    if (best < 0 || logits[i] > logits[best]) best = int32_t(i);
  }
  return best;
}

std::vector<double> sample_distribution_reference(const float* logits, int64_t vocab, float temperature, int32_t top_k,
                                                  float top_p) {
  std::vector<double> prob(static_cast<std::size_t>(vocab), 0.0);
  std::vector<std::pair<float, int64_t>> valid;  // (value, index) of the drawable values
  for (int64_t i = 0; i < vocab; ++i) {
    const float l = logits[i];
    if (std::isnan(l) || l == -INFINITY) continue;
    valid.emplace_back(std::min(l, FLT_MAX), i);
  }
  if (!(temperature > 0) || valid.empty()) {
    const int32_t g = argmax_reference(logits, vocab);
    if (g >= 0) prob[std::size_t(g)] = 1.0;
    return prob;
  }
  std::stable_sort(valid.begin(), valid.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  const double top = valid.front().first, T = temperature;
  auto weight = [&](float l) { return std::exp((double(l) - top) / T); };
  // Top-k: the values >= the k-th largest.
  std::size_t kept = valid.size();
  if (top_k > 0 && std::size_t(top_k) < valid.size()) {
    const float kth = valid[std::size_t(top_k) - 1].first;
    kept = std::size_t(top_k);
    while (kept < valid.size() && valid[kept].first == kth) ++kept;
  }
  // Top-p: the values >= the m-th largest, m the smallest count whose mass reaches top_p of the top-k mass.
  if (top_p < 1) {
    double z = 0;
    for (std::size_t j = 0; j < kept; ++j) z += weight(valid[j].first);
    const double target = std::max(double(top_p), 0.0) * z;
    double cum = 0;
    std::size_t m = 0;
    while (m < kept) {
      cum += weight(valid[m].first);
      ++m;
      if (cum >= target) break;
    }
    const float boundary = valid[m - 1].first;
    while (m < kept && valid[m].first == boundary) ++m;
    kept = m;
  }
  double z = 0;
  for (std::size_t j = 0; j < kept; ++j) z += weight(valid[j].first);
  for (std::size_t j = 0; j < kept; ++j) prob[std::size_t(valid[j].second)] = weight(valid[j].first) / z;
  return prob;
}

}  // namespace inferlab
