// Multi-head latent attention (DeepSeek-V2 §2.1, DeepSeek-V3): the cost of its projections and of
// its attention in the two forms engines run it in (vLLM's MLA backends, FlashMLA):
//   absorbed (decode): W_UK is folded into the query (q_nope [h, nope] -> q_latent [h, r]) and W_UV
//     applied after attention (o_latent [h, r] -> o [h, v]), so attention runs on the cached latent
//     itself: one "KV head" of r + rope values per token, read once for all heads, scores over
//     r + rope and values over r. FLOPs 2·h·pairs·(2r + rope) + 2·n·h·r·(nope + v).
//   expanded (prefill): kv_b_proj rebuilds per-head K (nope, plus the shared RoPE key) and V from
//     the latent of every key, then plain multi-head attention with qk 192 / v 128.
//     FLOPs 2·keys·r·h·(nope + v) + 2·h·pairs·(nope + rope + v).
// Each sequence of a batch takes the form with fewer FLOPs: one token against a long context is
// absorbed, a long prompt expanded. Both are one op (count = layers), whose traffic lists the latent
// cache, W_kv_b (as W_UK/W_UV), the rebuilt K/V and the queries and outputs.
#include <cmath>

#include "inferlab/sim/error.h"
#include "op_builder.h"

namespace inferlab::detail {

std::vector<Op> mla_projection_ops(const ModelConfig& m, const Batch& batch, const OpOptions& o,
                                   const std::function<Op(const char*, int64_t, int64_t, const char*)>& layer_gemm) {
  const LatentAttention& a = *m.mla;
  const double T = double(batch.tokens()), act = dtype_bytes(o.precision.act), kvb = dtype_bytes(o.precision.kv);
  const double wb = dtype_bytes(o.precision.weight);
  const int64_t h = m.heads, L = m.layers;
  auto norm = [&](const char* name, int64_t width) { return norm_op(name, T, double(width), L, act, wb); };
  std::vector<Op> ops;
  if (a.q_lora_rank > 0) {
    ops.push_back(layer_gemm("q_a_proj", m.hidden, a.q_lora_rank, "W_q_a"));
    ops.push_back(norm("q_a_norm", a.q_lora_rank));
    ops.push_back(layer_gemm("q_b_proj", a.q_lora_rank, h * a.qk_head_dim(), "W_q_b"));
  } else {
    ops.push_back(layer_gemm("q_proj", m.hidden, h * a.qk_head_dim(), "W_q"));
  }
  ops.push_back(layer_gemm("kv_a_proj", m.hidden, a.cached_width(), "W_kv_a"));
  ops.push_back(norm("kv_a_norm", a.kv_lora_rank));
  const double roped = T * double(h * a.qk_rope_head_dim + a.qk_rope_head_dim);  // every query head, one shared key
  ops.push_back(OpBuilder("rope", OpClass::elementwise, L)
                    .read("qk_rope", TensorRole::activation, roped * act)
                    .write("qk_rope", TensorRole::activation, roped * act)
                    .vector(kRopeFlopsPerElement * roped)
                    .op);
  const double cached = T * double(a.cached_width());
  ops.push_back(OpBuilder("kv_cache_write", OpClass::memory, L)
                    .read("latent_new", TensorRole::activation, cached * act)
                    .write("latent_cache", TensorRole::kv_cache, cached * kvb)
                    .op);
  return ops;
}

namespace {

void append(Op& into, const Op& from) {
  into.flops += from.flops;
  into.launches += from.launches;
  into.traffic.insert(into.traffic.end(), from.traffic.begin(), from.traffic.end());
}

}  // namespace

Op mla_attention_op(const ModelConfig& m, const Batch& batch, const OpOptions& o) {
  const LatentAttention& a = *m.mla;
  const double act = dtype_bytes(o.precision.act), kvb = dtype_bytes(o.precision.kv);
  const double wb = dtype_bytes(o.precision.weight);
  const double h = double(m.heads), r = double(a.kv_lora_rank), rope = double(a.qk_rope_head_dim);
  const double nope = double(a.qk_nope_head_dim), v = double(a.v_head_dim);
  const bool flash = o.attention == AttentionVariant::flash;

  AttentionWork absorbed, expanded;
  for (const auto& q : batch.sequences) {
    const double n = double(q.new_tokens);
    const double keys = double(q.past_tokens + q.new_tokens);
    const double pairs = flash ? attention_pairs(q.new_tokens, q.past_tokens, o.causal, std::nullopt) : n * keys;
    const double absorbed_flops = 2 * n * h * r * (nope + v) + 2 * h * pairs * (2 * r + rope);
    const double expanded_flops = 2 * keys * r * h * (nope + v) + 2 * h * pairs * (nope + rope + v);
    add_sequences(absorbed_flops <= expanded_flops ? absorbed : expanded, q.count, q.new_tokens, q.past_tokens,
                  o.attention, o.causal, std::nullopt, batch.kv_block_size, 1);
  }

  Op op;
  std::string form;
  if (absorbed.queries > 0) {
    op = attention_from_work(absorbed, {m.heads, 1, a.kv_lora_rank + a.qk_rope_head_dim, a.kv_lora_rank, true},
                             o.attention, false, o.precision.act, o.precision.kv);
    const double nq = absorbed.queries;
    OpBuilder up("absorb", OpClass::attention, 1);
    up.read("q_nope", TensorRole::activation, nq * h * nope * act)
        .read("W_UK", TensorRole::weight, h * nope * r * wb)
        .write("q_latent", TensorRole::activation, nq * h * r * act)
        .read("o_latent", TensorRole::activation, nq * h * r * act)
        .read("W_UV", TensorRole::weight, h * r * v * wb)
        .write("o", TensorRole::activation, nq * h * v * act)
        .matmul(2 * nq * h * r * (nope + v), o.precision.act);
    up.op.launches = 2;
    append(op, up.op);
    form = "absorbed";
  }
  if (expanded.queries > 0) {
    // kv_b_proj rebuilds K_nope and V for every key, cached or new; attention then reads them all.
    const double cached = expanded.cached_keys, total = expanded.cached_keys + expanded.new_keys;
    OpBuilder kvb_proj("kv_b_proj", OpClass::attention, 1);
    if (cached > 0) kvb_proj.read("latent_cache", TensorRole::kv_cache, cached * double(a.cached_width()) * kvb);
    kvb_proj.read("latent_new", TensorRole::activation, expanded.new_keys * double(a.cached_width()) * act)
        .read("W_kv_b", TensorRole::weight, r * h * (nope + v) * wb)
        .write("KV_rebuilt", TensorRole::activation, total * h * (nope + v) * act)
        .matmul(2 * total * r * h * (nope + v), o.precision.act);
    expanded.new_keys = total;
    expanded.cached_keys = 0;
    Op core = attention_from_work(expanded, {m.heads, m.heads, a.qk_head_dim(), a.v_head_dim, false}, o.attention,
                                  false, o.precision.act, o.precision.kv);
    if (form.empty()) {
      op = kvb_proj.op;
    } else {
      append(op, kvb_proj.op);
    }
    append(op, core);
    form += form.empty() ? "expanded" : "+expanded";
  }
  op.name = "attention";
  op.op_class = OpClass::attention;
  op.tensor_core = true;
  op.compute_dtype = o.precision.act;
  op.variant = (flash ? "mla-" : "naive-mla-") + form;
  op.count = m.layers;
  return op;
}

}  // namespace inferlab::detail
