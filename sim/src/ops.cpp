#include "inferlab/sim/ops.h"

#include <algorithm>
#include <cmath>

#include "inferlab/sim/error.h"
#include "inferlab/sim/linear.h"
#include "op_builder.h"

namespace inferlab {
namespace {

using detail::check_positive;
using detail::kRopeFlopsPerElement;
using detail::OpBuilder;

// More FLOPs per element of non-matmul operators (see op_builder.h).
constexpr double kResidualFlopsPerElement = 1;
constexpr double kSiluMulFlopsPerElement = 5;   // x / (1 + exp(-x)), then * up
constexpr double kGeluFlopsPerElement = 8;      // tanh approximation

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

namespace {

void check_attention_heads(int64_t heads, int64_t kv_heads, int64_t head_dim) {
  if (heads <= 0 || kv_heads <= 0 || head_dim <= 0) throw Error("attention shape: sizes must be positive");
  if (heads % kv_heads != 0)
    throw Error("attention shape: kv_heads " + std::to_string(kv_heads) + " does not divide heads " +
                std::to_string(heads));
}

}  // namespace

void detail::add_sequences(AttentionWork& w, int64_t count, int64_t new_tokens, int64_t past, AttentionVariant variant,
                           bool causal, std::optional<int64_t> window, int64_t block_size, int64_t splits) {
  const double b = double(count), n = double(new_tokens);
  // flash reads each key once (only those some query can see); naive reads and scores them all.
  const double keys = variant == AttentionVariant::flash ? double(attention_keys(new_tokens, past, window))
                                                         : double(past + new_tokens);
  w.queries += b * n;
  w.new_keys += b * n;
  w.cached_keys += b * (keys - n);  // rows of K/V that come from the cache; the new ones from the QKV output
  w.pairs += b * attention_pairs(new_tokens, past, causal, window);
  w.scored += b * n * keys;
  if (block_size > 0) w.table_entries += b * std::ceil(double(past + new_tokens) / double(block_size));
  w.partial_rows += b * n * double(splits);
}

Op detail::attention_from_work(const AttentionWork& w, const AttentionGeometry& g, AttentionVariant variant, bool split,
                               DType act_dtype, DType kv_dtype) {
  const double act = dtype_bytes(act_dtype), kvb = dtype_bytes(kv_dtype);
  const double h = double(g.heads), qk = double(g.qk_dim), v = double(g.v_dim), kvh = double(g.kv_heads);
  OpBuilder ob("attention", OpClass::attention, 1);
  ob.variant(attention_variant_name(variant));
  ob.read("Q", TensorRole::activation, w.queries * h * qk * act);
  const std::pair<const char*, double> kv[] = {{g.shared_kv ? "KV" : "K", qk}, {"V", v}};
  for (const auto& [t, width] : kv) {
    if (g.shared_kv && std::string(t) == "V") break;  // V is part of each cached K row
    if (w.cached_keys > 0) ob.read(std::string(t) + "_cache", TensorRole::kv_cache, w.cached_keys * kvh * width * kvb);
    if (w.new_keys > 0) ob.read(std::string(t) + "_new", TensorRole::activation, w.new_keys * kvh * width * act);
  }
  if (w.table_entries > 0) ob.read("block_table", TensorRole::activation, w.table_entries * 4.0);
  if (split) {
    const double partial = w.partial_rows * h * (v + 2.0) * 4.0;  // O in fp32, max and sum
    ob.write("partial_o", TensorRole::activation, partial);
    ob.read("partial_o", TensorRole::activation, partial);
  }
  if (variant == AttentionVariant::flash) {
    ob.write("O", TensorRole::activation, w.queries * h * v * act);
    ob.write("lse", TensorRole::activation, w.queries * h * detail::kLseBytes);
    ob.matmul(2.0 * h * (qk + v) * w.pairs, act_dtype);
  } else {
    const double scores = w.scored * h * act;
    ob.write("S", TensorRole::scores, scores);  // QK^T GEMM
    ob.read("S", TensorRole::scores, scores);   // softmax
    ob.write("P", TensorRole::scores, scores);
    ob.read("P", TensorRole::scores, scores);   // PV GEMM
    ob.write("O", TensorRole::activation, w.queries * h * v * act);
    ob.write("lse", TensorRole::activation, w.queries * h * detail::kLseBytes);
    ob.matmul(2.0 * h * (qk + v) * w.scored, act_dtype);  // the full rectangle, masked afterwards
    ob.op.launches = 3;
  }
  return ob.op;
}

Op attention_cost(const AttentionShape& a, AttentionVariant variant, DType act_dtype, DType kv_dtype) {
  if (a.batch <= 0 || a.new_tokens <= 0 || a.past_tokens < 0 || a.block_size < 0 || a.splits <= 0)
    throw Error("attention shape: sizes must be positive");
  check_attention_heads(a.heads, a.kv_heads, a.head_dim);
  detail::AttentionWork w;
  detail::add_sequences(w, a.batch, a.new_tokens, a.past_tokens, variant, a.causal, a.window, a.block_size, a.splits);
  return detail::attention_from_work(w, {a.heads, a.kv_heads, a.head_dim, a.head_dim, false}, variant, a.splits > 1,
                                     act_dtype, kv_dtype);
}

double medusa_head_params(const ModelConfig& m) {
  return double(m.hidden) * double(m.hidden) + double(m.hidden) * double(m.vocab);
}

std::vector<Op> medusa_head_ops(const ModelConfig& m, int64_t heads, int64_t rows, const OpOptions& o) {
  check_positive(heads, "Medusa heads");
  check_positive(rows, "rows");
  const double wb = dtype_bytes(o.precision.weight), act = dtype_bytes(o.precision.act);
  const double R = double(rows), H = double(m.hidden), V = double(m.vocab);
  const DType mm = o.precision.act;
  std::vector<Op> ops;
  ops.push_back(OpBuilder("medusa_block", OpClass::gemm, heads)
                    .read("h", TensorRole::activation, R * H * act)
                    .read("W_medusa", TensorRole::weight, H * H * wb)
                    .write("y", TensorRole::activation, R * H * act)
                    .matmul(2.0 * R * H * H, mm)
                    .scope(OpScope::after_layers)
                    .variant("medusa")
                    .op);
  ops.push_back(OpBuilder("medusa_act", OpClass::elementwise, heads)
                    .read("y", TensorRole::activation, R * H * act)
                    .read("h", TensorRole::activation, R * H * act)
                    .write("h_head", TensorRole::activation, R * H * act)
                    .vector(kSiluMulFlopsPerElement * R * H)  // SiLU, and the residual add where SwiGLU multiplies
                    .scope(OpScope::after_layers)
                    .variant("medusa")
                    .op);
  ops.push_back(OpBuilder("medusa_lm_head", OpClass::gemm, heads)
                    .read("h_head", TensorRole::activation, R * H * act)
                    .read("W_medusa_lm_head", TensorRole::weight, V * H * wb)
                    .write("logits", TensorRole::activation, R * V * kLogitBytes)
                    .matmul(2.0 * R * H * V, mm)
                    .scope(OpScope::after_layers)
                    .variant("medusa")
                    .op);
  return ops;
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

int64_t Batch::tokens() const {
  int64_t t = 0;
  for (const auto& q : sequences) t += q.count * q.new_tokens;
  return t;
}
int64_t Batch::logit_rows() const {
  int64_t n = 0;
  for (const auto& q : sequences) n += q.count * q.logits;
  return n;
}
Batch Batch::of(const Step& s) { return Batch{{SequenceWork{s.new_tokens, s.past_tokens, s.batch, 1}}, 0}; }

std::vector<Op> batch_attention_ops(const ModelConfig& m, const Batch& batch, const OpOptions& o) {
  if (batch.kv_block_size < 0) throw Error("KV block size must not be negative");
  if (m.mla) return {detail::mla_attention_op(m, batch, o)};
  check_attention_heads(m.heads, m.kv_heads, m.head_dim);
  // One op per kind of layer: those attending within the sliding window, and the global ones.
  const int64_t windowed = m.window_layer_count(), global = m.layers - windowed;
  std::vector<Op> ops;
  for (const bool local : {false, true}) {
    const int64_t count = local ? windowed : global;
    if (count == 0) continue;
    detail::AttentionWork w;
    for (const auto& q : batch.sequences)
      detail::add_sequences(w, q.count, q.new_tokens, q.past_tokens, o.attention, o.causal,
                            local ? m.sliding_window : std::nullopt, batch.kv_block_size, 1);
    Op op = detail::attention_from_work(w, {m.heads, m.kv_heads, m.head_dim, m.head_dim, false}, o.attention, false,
                                        o.precision.act, o.precision.kv);
    op.count = count;
    if (local && global > 0) op.name = "attention_window";
    ops.push_back(std::move(op));
  }
  return ops;
}

Op batch_attention_op(const ModelConfig& m, const Batch& batch, const OpOptions& o) {
  std::vector<Op> ops = batch_attention_ops(m, batch, o);
  if (ops.size() != 1)
    throw Error(m.name + " has sliding-window and global attention layers: its attention is " +
                std::to_string(ops.size()) + " ops (batch_attention_ops)");
  return ops.front();
}

Op attention_op(const ModelConfig& m, const Step& s, const OpOptions& o) {
  return batch_attention_op(m, Batch::of(s), o);
}

std::vector<Op> step_ops(const ModelConfig& m, const Step& s, const OpOptions& o) {
  check_positive(s.batch, "batch");
  check_positive(s.new_tokens, "new tokens");
  if (s.past_tokens < 0) throw Error("past tokens must not be negative");
  return batch_ops(m, Batch::of(s), o);
}

std::vector<Op> batch_ops(const ModelConfig& m, const Batch& batch, const OpOptions& o) {
  if (batch.sequences.empty()) throw Error("a batch needs at least one sequence");
  for (const auto& q : batch.sequences) {
    check_positive(q.count, "sequences of a shape");
    check_positive(q.new_tokens, "new tokens");
    if (q.past_tokens < 0) throw Error("past tokens must not be negative");
    if (q.logits < 0 || q.logits > q.new_tokens) throw Error("logit rows of a sequence must be in 0..new tokens");
  }
  const double wb = dtype_bytes(o.precision.weight), act = dtype_bytes(o.precision.act);
  const double kvb = dtype_bytes(o.precision.kv);
  const DType mm = o.precision.act;  // matmuls run in the activation type; weight-only formats dequantize to it
  const double T = double(batch.tokens()), H = double(m.hidden);
  const double qd = double(m.q_dim()), kvd = double(m.kv_dim());
  const double V = double(m.vocab), B = double(batch.logit_rows());
  const int64_t L = m.layers;
  std::vector<Op> ops;

  ops.push_back(OpBuilder("embedding", OpClass::memory, 1)
                    .read("W_embed_rows", TensorRole::weight, T * H * wb)
                    .write("x", TensorRole::activation, T * H * act)
                    .scope(OpScope::before_layers)
                    .op);
  auto norm = [&](const char* name, double rows, int64_t count) {
    return detail::norm_op(name, rows, H, count, act, wb);
  };
  auto residual = [&](const char* name, double branch_rows, int64_t count) {
    return OpBuilder(name, OpClass::elementwise, count)
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
  // A layer GEMM of `count` layers: its weight (`copies` matrices of out x in: the experts a MoE step
  // reaches) in the weight format when one is set, else as any other.
  auto layer_gemm_n = [&](const char* name, int64_t count, double rows, int64_t in, int64_t out, double copies,
                          const char* w) {
    if (!o.weight_format) return gemm(name, count, rows, double(in), double(out), copies * double(out), w);
    OpBuilder ob(name, OpClass::gemm, count);
    detail::add_linear(ob, *o.weight_format, o.precision.act, rows, out, in, copies, w);
    return ob.op;
  };
  auto layer_gemm = [&](const char* name, int64_t in, int64_t out, const char* w) {
    return layer_gemm_n(name, L, T, in, out, 1, w);
  };
  // The MLP of `count` layers over `rows` token-rows, weights `copies` times (MoE: the experts reached).
  auto mlp = [&](const char* prefix, const std::string& variant, int64_t count, double rows, int64_t width,
                 double copies, const std::string& weights) {
    const double F = double(width), up = m.gated_mlp ? 2 * F : F;
    const std::string p(prefix);
    std::vector<Op> out;
    out.push_back(layer_gemm_n((p + (m.gated_mlp ? "gate_up_proj" : "up_proj")).c_str(), count, rows, m.hidden,
                               int64_t(up), copies, ("W_up" + weights).c_str()));
    out.push_back(OpBuilder(p + "act", OpClass::elementwise, count)
                      .read("h", TensorRole::activation, rows * up * act)
                      .write("a", TensorRole::activation, rows * F * act)
                      .vector((m.gated_mlp ? kSiluMulFlopsPerElement : kGeluFlopsPerElement) * rows * F)
                      .op);
    out.push_back(layer_gemm_n((p + "down_proj").c_str(), count, rows, width, m.hidden, copies,
                               ("W_down" + weights).c_str()));
    for (Op& op : out) op.variant = variant;
    return out;
  };

  ops.push_back(norm("attn_norm", T, L));
  int64_t attn_out = m.q_dim();  // width o_proj reads
  if (m.mla) {
    for (Op& op : detail::mla_projection_ops(m, batch, o, [&](const char* name, int64_t in, int64_t out, const char* w) {
           return layer_gemm(name, in, out, w);
         }))
      ops.push_back(std::move(op));
    attn_out = m.heads * m.mla->v_head_dim;
  } else {
    ops.push_back(layer_gemm("qkv_proj", m.hidden, m.q_dim() + 2 * m.kv_dim(), "W_qkv"));
    ops.push_back(OpBuilder("rope", OpClass::elementwise, L)
                      .read("qk", TensorRole::activation, T * (qd + kvd) * act)
                      .write("qk", TensorRole::activation, T * (qd + kvd) * act)
                      .vector(kRopeFlopsPerElement * T * (qd + kvd))
                      .op);
    ops.push_back(OpBuilder("kv_cache_write", OpClass::memory, L)
                      .read("kv_new", TensorRole::activation, T * 2 * kvd * act)
                      .write("kv_cache", TensorRole::kv_cache, T * 2 * kvd * kvb)
                      .op);
  }
  for (Op& op : batch_attention_ops(m, batch, o)) ops.push_back(std::move(op));
  ops.push_back(layer_gemm("o_proj", attn_out, m.hidden, "W_o"));
  if (m.norms_per_layer == 4) ops.push_back(norm("attn_post_norm", T, L));
  ops.push_back(residual("attn_residual", T, L));
  ops.push_back(norm("ffn_norm", T, L));

  const int64_t moe = m.moe_layer_count(), dense = L - moe;
  if (dense > 0)
    for (Op& op : mlp("", "", dense, T, m.intermediate, 1, "")) ops.push_back(std::move(op));
  if (moe > 0) {
    // Each token goes to k experts; the weights read are those of the experts the step reaches.
    // A shared expert (Qwen2-MoE, DeepSeek) runs on every token beside them.
    const double E = double(m.experts), k = double(m.experts_per_token);
    const double touched = expected_experts_touched(m.experts, m.experts_per_token, batch.tokens());
    ops.push_back(gemm("router", moe, T, H, E, E, "W_router"));
    for (Op& op : mlp("", "moe", moe, T * k, m.expert_intermediate(), touched, "_experts")) ops.push_back(std::move(op));
    if (m.shared_intermediate > 0) {
      for (Op& op : mlp("shared_", "shared", moe, T, m.shared_intermediate, 1, "_shared")) ops.push_back(std::move(op));
      if (m.shared_expert_gate) {
        Op g = gemm("shared_gate", moe, T, H, 1, 1, "W_shared_gate");
        g.variant = "shared";
        ops.push_back(g);
      }
    }
  }
  if (m.norms_per_layer == 4) ops.push_back(norm("ffn_post_norm", T, L));
  if (dense > 0) ops.push_back(residual("ffn_residual", T, dense));
  if (moe > 0) {
    // The top-k weighted sum (and the shared expert's output) folds into the residual add.
    Op r = residual("ffn_residual", T * double(m.experts_per_token) + (m.shared_intermediate > 0 ? T : 0.0), moe);
    if (dense > 0) r.variant = "moe";
    ops.push_back(r);
  }

  if (B > 0) {  // no logits needed: the pass ends with the last layer
    Op fn = norm("final_norm", B, 1);
    fn.scope = OpScope::after_layers;
    ops.push_back(fn);
    ops.push_back(OpBuilder("lm_head", OpClass::gemm, 1)
                      .read("x", TensorRole::activation, B * H * act)
                      .read("W_lm_head", TensorRole::weight, V * H * wb)
                      .write("logits", TensorRole::activation, B * V * kLogitBytes)
                      .matmul(2.0 * B * H * V, mm)
                      .scope(OpScope::after_layers)
                      .op);
  }
  return ops;
}

}  // namespace inferlab
