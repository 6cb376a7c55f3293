// The CPU reference forward (reference.h). Row-major Eigen matrices: activations [tokens, features],
// weights [out, in] as Hugging Face stores them, so a linear layer is X * W^T.
#include "inferlab/kernels/engine/reference.h"

#include <cmath>

#include <Eigen/Dense>

#include "inferlab/kernels/gemm/quant.h"
#include "inferlab/sim/error.h"

namespace inferlab {
namespace {

using Mat = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

struct Ctx {
  const HostWeights& w;
  bool round;
  Mat weight(const std::string& name, int64_t rows, int64_t cols) const {
    auto it = w.find(name);
    if (it == w.end()) throw Error("reference forward: missing tensor '" + name + "'");
    if (int64_t(it->second.size()) != rows * cols) throw Error("reference forward: tensor '" + name + "' has the wrong size");
    Mat m(rows, cols);
    for (int64_t i = 0; i < rows * cols; ++i) m.data()[i] = it->second[std::size_t(i)];
    return m;
  }
  void r(Mat& x) const {
    if (round)
      for (Eigen::Index i = 0; i < x.size(); ++i) x.data()[i] = round_bf16(float(x.data()[i]));
  }
  double r(double x) const { return round ? round_bf16(float(x)) : x; }
};

// HF LlamaRMSNorm: the variance in fp32 of the (bf16) input, the normalized value rounded to bf16, then
// multiplied by the weight and rounded.
Mat rmsnorm(const Ctx& c, const Mat& h, const Mat& weight, double eps) {
  Mat out(h.rows(), h.cols());
  for (Eigen::Index t = 0; t < h.rows(); ++t) {
    const double ms = h.row(t).squaredNorm() / double(h.cols());
    const double inv = 1.0 / std::sqrt(ms + eps);
    for (Eigen::Index i = 0; i < h.cols(); ++i) out(t, i) = c.r(weight(0, i) * c.r(h(t, i) * inv));
  }
  return out;
}

Mat linear(const Ctx& c, const Mat& x, const Mat& w) {
  Mat y = x * w.transpose();
  c.r(y);
  return y;
}

void add_bias(const Ctx& c, Mat& y, const Mat& b) {
  for (Eigen::Index t = 0; t < y.rows(); ++t)
    for (Eigen::Index i = 0; i < y.cols(); ++i) y(t, i) = c.r(y(t, i) + b(0, i));
}

// rotate_half convention: element i < D/2 pairs with i + D/2. Bf16 rounding as HF: cos and sin rounded,
// each product rounded, the sum rounded.
void rope(const Ctx& c, Mat& x, int64_t heads, int64_t d, const std::vector<float>& inv_freq) {
  for (Eigen::Index t = 0; t < x.rows(); ++t)
    for (int64_t h = 0; h < heads; ++h)
      for (int64_t i = 0; i < d / 2; ++i) {
        const double angle = double(float(t) * inv_freq[std::size_t(i)]);
        const double cs = c.r(std::cos(angle)), sn = c.r(std::sin(angle));
        const double a = x(t, h * d + i), b = x(t, h * d + i + d / 2);
        x(t, h * d + i) = c.r(c.r(a * cs) + c.r(-b * sn));
        x(t, h * d + i + d / 2) = c.r(c.r(b * cs) + c.r(a * sn));
      }
}

}  // namespace

std::vector<double> reference_forward(const ModelConfig& m, const ArchConfig& a, const HostWeights& w,
                                      const std::vector<int32_t>& tokens, bool round_bf16) {
  const Ctx c{w, round_bf16};
  const int64_t T = int64_t(tokens.size()), H = m.hidden, d = m.head_dim, nh = m.heads, nkv = m.kv_heads;
  if (T == 0) throw Error("reference forward: no tokens");
  const Mat embed = c.weight("model.embed_tokens.weight", m.vocab, H);
  Mat h(T, H);
  for (int64_t t = 0; t < T; ++t) {
    const int32_t id = tokens[std::size_t(t)];
    if (id < 0 || id >= m.vocab) throw Error("reference forward: token " + std::to_string(id) + " outside the vocabulary");
    h.row(t) = embed.row(id);
  }
  const std::vector<float> inv_freq = rope_inv_freq(d, a.rope);
  const double scale = 1.0 / std::sqrt(double(d));
  for (int64_t l = 0; l < m.layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    Mat x = rmsnorm(c, h, c.weight(p + "input_layernorm.weight", 1, H), a.rms_norm_eps);
    Mat q = linear(c, x, c.weight(p + "self_attn.q_proj.weight", nh * d, H));
    Mat k = linear(c, x, c.weight(p + "self_attn.k_proj.weight", nkv * d, H));
    Mat v = linear(c, x, c.weight(p + "self_attn.v_proj.weight", nkv * d, H));
    if (a.qkv_bias) {
      add_bias(c, q, c.weight(p + "self_attn.q_proj.bias", 1, nh * d));
      add_bias(c, k, c.weight(p + "self_attn.k_proj.bias", 1, nkv * d));
      add_bias(c, v, c.weight(p + "self_attn.v_proj.bias", 1, nkv * d));
    }
    rope(c, q, nh, d, inv_freq);
    rope(c, k, nkv, d, inv_freq);
    Mat o(T, nh * d);
    for (int64_t hh = 0; hh < nh; ++hh) {
      const int64_t kh = hh / (nh / nkv);
      for (int64_t t = 0; t < T; ++t) {
        std::vector<double> s(std::size_t(t + 1));
        double mx = -INFINITY;
        for (int64_t j = 0; j <= t; ++j) {
          s[j] = scale * q.row(t).segment(hh * d, d).dot(k.row(j).segment(kh * d, d));
          mx = std::max(mx, s[j]);
        }
        double sum = 0;
        for (double& e : s) sum += (e = std::exp(e - mx));
        for (int64_t i = 0; i < d; ++i) {
          double acc = 0;
          for (int64_t j = 0; j <= t; ++j) acc += s[j] * v(j, kh * d + i);
          o(t, hh * d + i) = c.r(acc / sum);
        }
      }
    }
    Mat y = linear(c, o, c.weight(p + "self_attn.o_proj.weight", H, nh * d));
    h += y;
    c.r(h);
    x = rmsnorm(c, h, c.weight(p + "post_attention_layernorm.weight", 1, H), a.rms_norm_eps);
    const Mat g = linear(c, x, c.weight(p + "mlp.gate_proj.weight", m.intermediate, H));
    const Mat u = linear(c, x, c.weight(p + "mlp.up_proj.weight", m.intermediate, H));
    Mat act(T, m.intermediate);
    for (Eigen::Index i = 0; i < act.size(); ++i) {
      const double gv = g.data()[i];
      act.data()[i] = c.r(c.r(gv / (1.0 + std::exp(-gv))) * u.data()[i]);
    }
    y = linear(c, act, c.weight(p + "mlp.down_proj.weight", H, m.intermediate));
    h += y;
    c.r(h);
  }
  const Mat x = rmsnorm(c, h, c.weight("model.norm.weight", 1, H), a.rms_norm_eps);
  const Mat lm = m.tied_embeddings ? embed : c.weight("lm_head.weight", m.vocab, H);
  const Mat logits = linear(c, x, lm);
  return std::vector<double>(logits.data(), logits.data() + logits.size());
}

}  // namespace inferlab
