#include "describe.h"

#include <cmath>

#include <fmt/core.h>

namespace inferlab::cli {


std::string si(double v, const char* unit) {
  const char* prefixes[] = {"", "k", "M", "G", "T", "P", "E"};
  int i = 0;
  while (std::abs(v) >= 1000 && i < 6) {
    v /= 1000;
    ++i;
  }
  return fmt::format("{:.3g} {}{}", v, prefixes[i], unit);
}

std::string seconds(double s) {
  if (s >= 1) return fmt::format("{:.3g} s", s);
  if (s >= 1e-3) return fmt::format("{:.3g} ms", s * 1e3);
  return fmt::format("{:.3g} us", s * 1e6);
}

std::string gb(double bytes) { return fmt::format("{:.2f} GB ({:.2f} GiB)", bytes / kGB, bytes / kGiB); }

void print_json(const nlohmann::json& j) { fmt::print("{}\n", j.dump(2)); }

std::string precision_text(const Precision& p, std::optional<WeightFormat> layer_weights) {
  return fmt::format("weights {}{} · activations {} · KV {}", dtype_name(p.weight),
                     layer_weights ? " (layer GEMMs " + weight_format_name(*layer_weights) + ")" : "",
                     dtype_name(p.act), dtype_name(p.kv));
}

nlohmann::json model_json(const ModelConfig& m) {
  return {{"name", m.name},
          {"origin", m.origin},
          {"model_type", m.model_type},
          {"params", m.total_params()},
          {"active_params_per_token", m.active_params_per_token()},
          {"layers", m.layers},
          {"hidden", m.hidden},
          {"intermediate", m.intermediate},
          {"heads", m.heads},
          {"kv_heads", m.kv_heads},
          {"head_dim", m.head_dim},
          {"vocab", m.vocab},
          {"attention_kind", m.attention_kind()},
          {"experts", m.experts},
          {"experts_per_token", m.experts_per_token},
          {"sliding_window", m.sliding_window ? nlohmann::json(*m.sliding_window) : nlohmann::json(nullptr)},
          {"window_layers", m.window_layer_count()},
          {"moe_layers", m.moe_layer_count()},
          {"expert_intermediate", m.is_moe() ? m.expert_intermediate() : 0},
          {"shared_expert_intermediate", m.shared_intermediate},
          {"mla", m.mla ? nlohmann::json{{"kv_lora_rank", m.mla->kv_lora_rank},
                                         {"q_lora_rank", m.mla->q_lora_rank},
                                         {"qk_nope_head_dim", m.mla->qk_nope_head_dim},
                                         {"qk_rope_head_dim", m.mla->qk_rope_head_dim},
                                         {"v_head_dim", m.mla->v_head_dim}}
                        : nlohmann::json(nullptr)},
          {"kv_elements_per_token_per_layer", m.kv_elements_per_token_per_layer()},
          {"tied_embeddings", m.tied_embeddings},
          {"max_positions", m.max_positions},
          {"dtype", dtype_name(m.dtype)},
          {"warnings", m.warnings}};
}

nlohmann::json hardware_json(const Hardware& h) {
  return {{"id", h.id},
          {"name", h.name},
          {"origin", h.origin},
          {"ceilings", h.ceilings_source},
          {"memory_bytes", h.memory_bytes},
          {"memory_bandwidth", h.memory_bandwidth},
          {"tensor_dense_flops", h.tensor_dense},
          {"tensor_sparse_2_4_flops", h.tensor_sparse},
          {"vector_flops", h.vector},
          {"launch_overhead_s", h.launch_overhead_s}};
}

std::string model_summary(const ModelConfig& m) {
  std::string s = fmt::format("{}: {:.2f} B params, {} layers, {} ({} query heads", m.name, m.total_params() / 1e9,
                              m.layers, m.attention_kind(), m.heads);
  if (m.mla)
    s += fmt::format("; a cached latent of {} + RoPE key of {} per token)", m.mla->kv_lora_rank,
                     m.mla->qk_rope_head_dim);
  else
    s += fmt::format(" / {} KV heads), head dim {}", m.kv_heads, m.head_dim);
  if (m.config_kv_heads)
    s += fmt::format(" [KV heads set to {} in place of the config's {}: the K/V projections, and the parameters, "
                     "change with them]", m.kv_heads, m.config_kv_heads);
  if (m.is_moe()) {
    s += fmt::format(", {} experts top-{}", m.experts, m.experts_per_token);
    if (m.shared_intermediate) s += fmt::format(" + shared {}", m.shared_intermediate);
    if (m.dense_layer_count()) s += fmt::format(" in {} of the layers", m.moe_layer_count());
    s += fmt::format(" ({:.2f} B active)", m.active_params_per_token() / 1e9);
  }
  if (m.sliding_window) {
    s += fmt::format(", sliding window {}", *m.sliding_window);
    if (m.global_layer_count()) s += fmt::format(" on {} of the layers", m.window_layer_count());
  }
  return s;
}

}  // namespace inferlab::cli
