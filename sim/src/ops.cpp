#include "inferlab/sim/ops.h"

#include <algorithm>
#include <cmath>

#include "inferlab/sim/error.h"
#include "inferlab/sim/linear.h"
#include "op_builder.h"

namespace inferlab {
namespace {

using detail::check_positive;
using detail::OpBuilder;

// FLOPs per element of the non-matmul operators (FP32 vector units). Rough by nature; they only
// matter when such an op is compute-bound, which none is on any GPU we model.
constexpr double kNormFlopsPerElement = 4;      // square, sum, scale by rsqrt, scale by weight
constexpr double kRopeFlopsPerElement = 3;      // (x cos - y sin, x sin + y cos): 6 per pair
constexpr double kResidualFlopsPerElement = 1;
constexpr double kSiluMulFlopsPerElement = 5;   // x / (1 + exp(-x)), then * up
constexpr double kGeluFlopsPerElement = 8;      // tanh approximation
constexpr double kLseBytes = 4;                 // the log-sum-exp is kept in fp32
constexpr double kLogitBytes = 4;               // logits are produced in fp32 for sampling

}  // namespace

std::string phase_name(Phase p) { return p == Phase::prefill ? "prefill" : "decode"; }
Phase parse_phase(const std::string& s) {
  if (s == "prefill") return Phase::prefill;
  if (s == "decode") return Phase::decode;
  throw Error("unknown phase '" + s + "' (known: prefill, decode)");
}
std::string attention_variant_name(AttentionVariant v) { return v == AttentionVariant::naive ? "naive" : "flash"; }
AttentionVariant parse_attention_variant(const std::string& s) {
  if (s == "naive") return AttentionVariant::naive;
  if (s == "flash") return AttentionVariant::flash;
  throw Error("unknown attention variant '" + s + "' (known: naive, flash)");
}
std::string op_class_name(OpClass c) {
  switch (c) {
    case OpClass::gemm: return "gemm";
    case OpClass::attention: return "attention";
    case OpClass::elementwise: return "elementwise";
    case OpClass::memory: return "memory";
  }
  return "?";
}
std::string tensor_role_name(TensorRole r) {
  switch (r) {
    case TensorRole::weight: return "weight";
    case TensorRole::activation: return "activation";
    case TensorRole::kv_cache: return "kv_cache";
    case TensorRole::scores: return "scores";
  }
  return "?";
}

double Op::bytes() const {
  double b = 0;
  for (const auto& t : traffic) b += t.bytes;
  return b;
}
double Op::bytes(TensorRole role) const {
  double b = 0;
  for (const auto& t : traffic)
    if (t.role == role) b += t.bytes;
  return b;
}
double Op::ai() const {
  const double b = bytes();
  return b > 0 ? flops / b : 0.0;
}

Step prefill_step(int64_t batch, int64_t prompt_tokens) {
  check_positive(batch, "batch");
  check_positive(prompt_tokens, "prompt length");
  return Step{Phase::prefill, batch, prompt_tokens, 0};
}
Step decode_step(int64_t batch, int64_t context_tokens) {
  check_positive(batch, "batch");
  check_positive(context_tokens, "context");
  return Step{Phase::decode, batch, 1, context_tokens - 1};
}
Step make_step(Phase phase, int64_t batch, int64_t context_tokens) {
  return phase == Phase::prefill ? prefill_step(batch, context_tokens) : decode_step(batch, context_tokens);
}

double attention_pairs(int64_t new_tokens, int64_t past, bool causal, std::optional<int64_t> window) {
  const double n = double(new_tokens), p = double(past);
  const double w = window ? double(*window) : INFINITY;
  if (!causal) return n * std::min(p + n, w);
  // Query i (0-based) sees min(past + i + 1, w) keys: sum of min(k, w) for k = past+1 .. past+n.
  const double a = p + 1, b = p + n;
  if (b <= w) return (a + b) * n / 2;
  if (a > w) return n * w;
  return (a + w) * (w - a + 1) / 2 + (b - w) * w;
}

int64_t attention_keys(int64_t new_tokens, int64_t past, std::optional<int64_t> window) {
  const int64_t context = past + new_tokens;
  return window ? std::min(context, *window + new_tokens - 1) : context;
}

double expected_experts_touched(int64_t experts, int64_t top_k, int64_t tokens) {
  if (experts <= 1) return 1.0;
  const double miss = std::pow(1.0 - double(top_k) / double(experts), double(tokens));
  return double(experts) * (1.0 - miss);
}

Op attention_cost(const AttentionShape& a, AttentionVariant variant, DType act_dtype, DType kv_dtype) {
  if (a.batch <= 0 || a.heads <= 0 || a.kv_heads <= 0 || a.head_dim <= 0 || a.new_tokens <= 0 || a.past_tokens < 0 ||
      a.block_size < 0 || a.splits <= 0)
    throw Error("attention shape: sizes must be positive");
  if (a.heads % a.kv_heads != 0)
    throw Error("attention shape: kv_heads " + std::to_string(a.kv_heads) + " does not divide heads " +
                std::to_string(a.heads));
  const double act = dtype_bytes(act_dtype), kvb = dtype_bytes(kv_dtype);
  const double b = double(a.batch), n = double(a.new_tokens), h = double(a.heads), d = double(a.head_dim);
  const double q_dim = h * d, kv_dim = double(a.kv_heads) * d;
  OpBuilder ob("attention", OpClass::attention, 1);
  ob.variant(attention_variant_name(variant));
  ob.read("Q", TensorRole::activation, b * n * q_dim * act);
  // flash reads each key once (only those some query can see); naive reads and scores them all.
  const double keys = variant == AttentionVariant::flash ? double(attention_keys(a.new_tokens, a.past_tokens, a.window))
                                                         : double(a.past_tokens + a.new_tokens);
  const double cached = keys - n;  // rows of K/V that come from the cache; the new ones from the QKV output
  for (const char* t : {"K", "V"}) {
    if (cached > 0) ob.read(std::string(t) + "_cache", TensorRole::kv_cache, b * cached * kv_dim * kvb);
    ob.read(std::string(t) + "_new", TensorRole::activation, b * n * kv_dim * act);
  }
  if (a.block_size > 0) {
    const double blocks = std::ceil(double(a.past_tokens + a.new_tokens) / double(a.block_size));
    ob.read("block_table", TensorRole::activation, b * blocks * 4.0);
  }
  if (a.splits > 1) {
    const double partial = b * h * n * double(a.splits) * (d + 2.0) * 4.0;  // O in fp32, max and sum
    ob.write("partial_o", TensorRole::activation, partial);
    ob.read("partial_o", TensorRole::activation, partial);
  }
  if (variant == AttentionVariant::flash) {
    ob.write("O", TensorRole::activation, b * n * q_dim * act);
    ob.write("lse", TensorRole::activation, b * h * n * kLseBytes);
    ob.matmul(4.0 * b * h * d * attention_pairs(a.new_tokens, a.past_tokens, a.causal, a.window), act_dtype);
  } else {
    const double scores = b * h * n * keys * act;
    ob.write("S", TensorRole::scores, scores);  // QK^T GEMM
    ob.read("S", TensorRole::scores, scores);   // softmax
    ob.write("P", TensorRole::scores, scores);
    ob.read("P", TensorRole::scores, scores);   // PV GEMM
    ob.write("O", TensorRole::activation, b * n * q_dim * act);
    ob.write("lse", TensorRole::activation, b * h * n * kLseBytes);
    ob.matmul(4.0 * b * h * d * n * keys, act_dtype);  // the full rectangle, masked afterwards
    ob.op.launches = 3;
  }
  return ob.op;
}

int64_t plan_decode_splits(int64_t units, int64_t max_context, int64_t sm_count) {
  // Measured on the H100 (kernels/attention/NOTES.md, d7, L2 flushed by a read): at 1 x 32768,
  // GQA 32/8 (8 units), paged-16 streams 1903 GB/s with 8 pieces, 2293 with 12, 2404 with 16 (one
  // block per SM), 2165 with 24: every extra piece adds fixed work (its start, two merges, a partial
  // output), which outweighs the latency a second block per SM would hide.
  if (units <= 0 || sm_count <= 0) return 1;
  const int64_t want = sm_count / units;
  const int64_t most = (max_context + 255) / 256;
  return std::max<int64_t>(1, std::min(want, most));
}

Op attention_op(const ModelConfig& m, const Step& s, const OpOptions& o) {
  AttentionShape a;
  a.batch = s.batch;
  a.heads = m.heads;
  a.kv_heads = m.kv_heads;
  a.head_dim = m.head_dim;
  a.new_tokens = s.new_tokens;
  a.past_tokens = s.past_tokens;
  a.causal = o.causal;
  a.window = m.sliding_window;
  Op op = attention_cost(a, o.attention, o.precision.act, o.precision.kv);
  op.count = m.layers;
  return op;
}

std::vector<Op> step_ops(const ModelConfig& m, const Step& s, const OpOptions& o) {
  check_positive(s.batch, "batch");
  check_positive(s.new_tokens, "new tokens");
  if (s.past_tokens < 0) throw Error("past tokens must not be negative");
  const double wb = dtype_bytes(o.precision.weight), act = dtype_bytes(o.precision.act);
  const double kvb = dtype_bytes(o.precision.kv);
  const DType mm = o.precision.act;  // matmuls run in the activation type; weight-only formats dequantize to it
  const double T = double(s.tokens()), H = double(m.hidden), F = double(m.intermediate);
  const double qd = double(m.q_dim()), kvd = double(m.kv_dim());
  const double V = double(m.vocab), B = double(s.batch);
  const int64_t L = m.layers;
  std::vector<Op> ops;

  ops.push_back(OpBuilder("embedding", OpClass::memory, 1)
                    .read("W_embed_rows", TensorRole::weight, T * H * wb)
                    .write("x", TensorRole::activation, T * H * act)
                    .op);
  auto norm = [&](const char* name, double rows, int64_t count) {
    return OpBuilder(name, OpClass::elementwise, count)
        .read("x", TensorRole::activation, rows * H * act)
        .read("w_norm", TensorRole::weight, H * wb)
        .write("x_norm", TensorRole::activation, rows * H * act)
        .vector(kNormFlopsPerElement * rows * H)
        .op;
  };
  auto residual = [&](const char* name, double branch_rows) {
    return OpBuilder(name, OpClass::elementwise, L)
        .read("x", TensorRole::activation, T * H * act)
        .read("branch", TensorRole::activation, branch_rows * H * act)
        .write("x", TensorRole::activation, T * H * act)
        .vector(kResidualFlopsPerElement * branch_rows * H)
        .op;
  };
  auto gemm = [&](const char* name, int64_t count, double rows, double in, double out, double weight_rows_of_out,
                  const char* w) {
    // rows x in activations times a weight of weight_rows_of_out x in  ->  rows x out
    return OpBuilder(name, OpClass::gemm, count)
        .read("x", TensorRole::activation, rows * in * act)
        .read(w, TensorRole::weight, weight_rows_of_out * in * wb)
        .write("y", TensorRole::activation, rows * out * act)
        .matmul(2.0 * rows * in * out, mm)
        .op;
  };
  // A layer GEMM: its weight (`copies` matrices of out x in: the experts a MoE step reaches) in the
  // weight format when one is set, else as any other.
  auto layer_gemm = [&](const char* name, double rows, int64_t in, int64_t out, double copies, const char* w) {
    if (!o.weight_format) return gemm(name, L, rows, double(in), double(out), copies * double(out), w);
    OpBuilder ob(name, OpClass::gemm, L);
    detail::add_linear(ob, *o.weight_format, o.precision.act, rows, out, in, copies, w);
    return ob.op;
  };

  ops.push_back(norm("attn_norm", T, L));
  ops.push_back(layer_gemm("qkv_proj", T, m.hidden, m.q_dim() + 2 * m.kv_dim(), 1, "W_qkv"));
  ops.push_back(OpBuilder("rope", OpClass::elementwise, L)
                    .read("qk", TensorRole::activation, T * (qd + kvd) * act)
                    .write("qk", TensorRole::activation, T * (qd + kvd) * act)
                    .vector(kRopeFlopsPerElement * T * (qd + kvd))
                    .op);
  ops.push_back(OpBuilder("kv_cache_write", OpClass::memory, L)
                    .read("kv_new", TensorRole::activation, T * 2 * kvd * act)
                    .write("kv_cache", TensorRole::kv_cache, T * 2 * kvd * kvb)
                    .op);
  ops.push_back(attention_op(m, s, o));
  ops.push_back(layer_gemm("o_proj", T, m.q_dim(), m.hidden, 1, "W_o"));
  ops.push_back(residual("attn_residual", T));
  ops.push_back(norm("ffn_norm", T, L));

  if (!m.is_moe()) {
    const double up = m.gated_mlp ? 2 * F : F;
    ops.push_back(layer_gemm(m.gated_mlp ? "gate_up_proj" : "up_proj", T, m.hidden, int64_t(up), 1, "W_up"));
    ops.push_back(OpBuilder("act", OpClass::elementwise, L)
                      .read("h", TensorRole::activation, T * up * act)
                      .write("a", TensorRole::activation, T * F * act)
                      .vector((m.gated_mlp ? kSiluMulFlopsPerElement : kGeluFlopsPerElement) * T * F)
                      .op);
    ops.push_back(layer_gemm("down_proj", T, m.intermediate, m.hidden, 1, "W_down"));
    ops.push_back(residual("ffn_residual", T));
  } else {
    // Each token goes to k experts; the weights read are those of the experts the step reaches.
    const double E = double(m.experts), k = double(m.experts_per_token);
    const double touched = expected_experts_touched(m.experts, m.experts_per_token, s.tokens());
    const double up = m.gated_mlp ? 2 * F : F;
    ops.push_back(gemm("router", L, T, H, E, E, "W_router"));
    Op gu = layer_gemm(m.gated_mlp ? "gate_up_proj" : "up_proj", T * k, m.hidden, int64_t(up), touched, "W_up_experts");
    gu.variant = "moe";
    ops.push_back(gu);
    Op a = OpBuilder("act", OpClass::elementwise, L)
               .read("h", TensorRole::activation, T * k * up * act)
               .write("a", TensorRole::activation, T * k * F * act)
               .vector((m.gated_mlp ? kSiluMulFlopsPerElement : kGeluFlopsPerElement) * T * k * F)
               .variant("moe")
               .op;
    ops.push_back(a);
    Op dn = layer_gemm("down_proj", T * k, m.intermediate, m.hidden, touched, "W_down_experts");
    dn.variant = "moe";
    ops.push_back(dn);
    ops.push_back(residual("ffn_residual", T * k));  // the top-k weighted sum folds into the residual add
  }

  ops.push_back(norm("final_norm", B, 1));
  ops.push_back(OpBuilder("lm_head", OpClass::gemm, 1)
                    .read("x", TensorRole::activation, B * H * act)
                    .read("W_lm_head", TensorRole::weight, V * H * wb)
                    .write("logits", TensorRole::activation, B * V * kLogitBytes)
                    .matmul(2.0 * B * H * V, mm)
                    .op);
  return ops;
}

}  // namespace inferlab
