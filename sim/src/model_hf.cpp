// Reading a Hugging Face config.json into a ModelConfig: the spellings of each field, the defaults
// of each model_type's config class for fields a file leaves out, the per-layer patterns (sliding
// window vs global layers, dense vs MoE layers) and multi-head latent attention.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <initializer_list>
#include <set>

#include "inferlab/sim/error.h"
#include "inferlab/sim/model.h"
#include "inferlab/sim/paths.h"

namespace inferlab {
namespace {

// What a model_type's Hugging Face config class assumes when a field is absent (transformers'
// configuration_<type>.py). head_dim 0: hidden / heads; window 0: none.
struct TypeDefaults {
  const char* type;
  bool tied;             // tie_word_embeddings
  int64_t head_dim;
  int64_t window;        // sliding_window
  bool two_matrix_mlp;   // up/down (GELU) instead of gate/up/down
  int64_t norms_per_layer;
};
constexpr TypeDefaults kTypes[] = {
    {"llama", false, 0, 0, false, 2},        {"mistral", false, 0, 4096, false, 2},
    {"mixtral", false, 0, 0, false, 2},      {"qwen2", false, 0, 0, false, 2},
    {"qwen2_moe", false, 0, 0, false, 2},    {"qwen3", false, 0, 0, false, 2},
    {"qwen3_moe", false, 0, 0, false, 2},    {"gemma", true, 256, 0, false, 2},
    {"gemma2", true, 256, 4096, false, 4},   {"gemma3_text", true, 256, 4096, false, 4},
    {"deepseek_v2", false, 0, 0, false, 2},  {"deepseek_v3", false, 0, 0, false, 2},
    {"phi3", false, 0, 0, false, 2},         {"phi", false, 0, 0, true, 2},
    {"gpt2", true, 0, 0, true, 2},           {"gptj", false, 0, 0, true, 2},
    {"gpt_neox", false, 0, 0, true, 2},      {"opt", true, 0, 0, true, 2},
    {"falcon", true, 0, 0, true, 2},         {"bloom", true, 0, 0, true, 2},
    {"gpt_bigcode", true, 0, 0, true, 2},
};

// Architectures whose layers are not attention + MLP: no count here would be right.
const std::set<std::string> kUnsupportedTypes = {"mamba", "mamba2", "falcon_mamba", "jamba", "zamba", "zamba2",
                                                 "rwkv", "recurrent_gemma", "nemotron_h", "qwen3_next", "lfm2",
                                                 "granitemoehybrid", "minimax", "minimax_m1", "bamba"};
const char* const kUnsupportedFields[] = {"attn_layer_period", "hybrid_override_pattern", "layers_block_type",
                                          "ssm_cfg", "mamba_d_ssm", "linear_num_key_heads", "block_types"};
// Fields that change the cost but that no count here follows: a warning names them.
const std::pair<const char*, const char*> kUncountedFields[] = {
    {"interleave_moe_layer_step", "MoE layers interleaved with dense ones are counted as if every layer were MoE"},
    {"attention_chunk_size", "chunked attention is counted as full attention"},
    {"cross_attention_layers", "cross-attention layers are not counted"},
    {"moe_layer_start_index", "every layer is counted as a MoE layer"},
};

const nlohmann::json* first_of(const nlohmann::json& j, std::initializer_list<const char*> keys, std::string* used) {
  for (const char* k : keys) {
    auto it = j.find(k);
    if (it != j.end() && !it->is_null()) {
      if (used) *used = k;
      return &*it;
    }
  }
  return nullptr;
}

int64_t as_positive(const nlohmann::json& v, const std::string& key, const std::string& where) {
  if (v.is_boolean() || !v.is_number() || std::floor(v.get<double>()) != v.get<double>())
    throw Error(where + ": field '" + key + "' must be an integer, got " + v.dump());
  const auto x = v.get<int64_t>();
  if (x <= 0) throw Error(where + ": field '" + key + "' must be positive, got " + std::to_string(x));
  return x;
}

// The first present, non-null spelling of a field (Llama names first, then GPT-2/OPT/Falcon/NeoX ones).
std::optional<int64_t> opt_int(const nlohmann::json& j, std::initializer_list<const char*> keys, const std::string& where) {
  std::string key;
  const auto* v = first_of(j, keys, &key);
  if (!v) return std::nullopt;
  return as_positive(*v, key, where);
}

int64_t req_int(const nlohmann::json& j, std::initializer_list<const char*> keys, const std::string& where) {
  if (auto v = opt_int(j, keys, where)) return *v;
  throw Error(where + ": missing field '" + std::string(*keys.begin()) + "'");
}

// A count that may legitimately be 0 (first_k_dense_replace, n_shared_experts).
int64_t opt_count(const nlohmann::json& j, const char* key, int64_t fallback, const std::string& where) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return fallback;
  if (it->is_boolean() || !it->is_number_integer() || it->get<int64_t>() < 0)
    throw Error(where + ": field '" + std::string(key) + "' must be a non-negative integer, got " + it->dump());
  return it->get<int64_t>();
}

std::optional<double> opt_positive_number(const nlohmann::json& j, const char* key, const std::string& where) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return std::nullopt;
  if (it->is_boolean() || !it->is_number() || !(it->get<double>() > 0))
    throw Error(where + ": field '" + std::string(key) + "' must be a positive number, got " + it->dump());
  return it->get<double>();
}

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

const TypeDefaults* defaults_of(const std::string& type) {
  for (const auto& t : kTypes)
    if (type == t.type) return &t;
  return nullptr;
}

std::vector<std::string> known_types() {
  std::vector<std::string> v;
  for (const auto& t : kTypes) v.push_back(t.type);
  return v;
}

bool opt_bool(const nlohmann::json& j, const char* key, bool fallback, const std::string& where) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return fallback;
  if (!it->is_boolean()) throw Error(where + ": field '" + std::string(key) + "' must be true or false, got " + it->dump());
  return it->get<bool>();
}

// "layer_types" (newer configs): one entry per layer, true for sliding_attention. Any other kind
// of layer (linear attention, ...) is refused.
std::optional<std::vector<bool>> layer_types(const nlohmann::json& j, int64_t layers, const std::string& where) {
  auto it = j.find("layer_types");
  if (it == j.end() || it->is_null()) return std::nullopt;
  if (!it->is_array() || int64_t(it->size()) != layers)
    throw Error(where + ": field 'layer_types' must list one entry per layer (" + std::to_string(layers) + ")");
  std::vector<bool> v;
  for (const auto& t : *it) {
    const std::string s = t.is_string() ? t.get<std::string>() : t.dump();
    if (s != "sliding_attention" && s != "full_attention")
      throw Error(where + ": layer_types entry '" + s +
                  "' is not modelled (only sliding_attention and full_attention layers are)");
    v.push_back(s == "sliding_attention");
  }
  return v;
}

// Per-layer sliding-window flags of a model with a window. Returns an empty list when every layer
// attends within the window.
std::vector<bool> window_pattern(const nlohmann::json& j, const ModelConfig& m, const std::string& where) {
  const int64_t L = m.layers;
  std::vector<bool> v;
  if (auto types = layer_types(j, L, where)) {
    v = *types;
  } else if (m.model_type == "gemma2") {
    for (int64_t i = 0; i < L; ++i) v.push_back(i % 2 == 0);  // even layers local, odd layers global
  } else if (m.model_type == "gemma3_text") {
    const int64_t pattern = opt_int(j, {"sliding_window_pattern"}, where).value_or(6);
    for (int64_t i = 0; i < L; ++i) v.push_back((i + 1) % pattern != 0);  // every pattern-th layer global
  } else if (auto mw = j.find("max_window_layers"); mw != j.end() && mw->is_number_integer()) {
    // Qwen2: the first max_window_layers layers attend globally, the rest within the window.
    for (int64_t i = 0; i < L; ++i) v.push_back(i >= mw->get<int64_t>());
  }
  if (!v.empty() && std::all_of(v.begin(), v.end(), [](bool b) { return b; })) v.clear();
  return v;
}

// Per-layer MoE flags (DeepSeek: first_k_dense_replace, moe_layer_freq; Qwen-MoE: decoder_sparse_step,
// mlp_only_layers). Empty when every layer is a MoE layer.
std::vector<bool> moe_pattern(const nlohmann::json& j, int64_t layers, const std::string& where) {
  const int64_t first_dense = opt_count(j, "first_k_dense_replace", 0, where);
  const int64_t freq = opt_int(j, {"moe_layer_freq"}, where).value_or(1);
  const int64_t step = opt_int(j, {"decoder_sparse_step"}, where).value_or(1);
  std::set<int64_t> dense_only;
  if (auto it = j.find("mlp_only_layers"); it != j.end() && !it->is_null()) {
    if (!it->is_array()) throw Error(where + ": field 'mlp_only_layers' must be a list of layer indices");
    for (const auto& x : *it) {
      if (!x.is_number_integer() || x.get<int64_t>() < 0 || x.get<int64_t>() >= layers)
        throw Error(where + ": mlp_only_layers entry " + x.dump() + " is not a layer index");
      dense_only.insert(x.get<int64_t>());
    }
  }
  std::vector<bool> v;
  for (int64_t i = 0; i < layers; ++i)
    v.push_back(i >= first_dense && i % freq == 0 && (i + 1) % step == 0 && !dense_only.count(i));
  if (std::all_of(v.begin(), v.end(), [](bool b) { return b; })) v.clear();
  else if (std::none_of(v.begin(), v.end(), [](bool b) { return b; }))
    throw Error(where + ": the MoE fields leave no layer with experts");
  return v;
}

std::optional<LatentAttention> latent_attention(const nlohmann::json& j, const std::string& where) {
  const auto r = opt_int(j, {"kv_lora_rank"}, where);
  if (!r) return std::nullopt;
  LatentAttention a;
  a.kv_lora_rank = *r;
  // DeepseekV2Config's defaults for what a file leaves out; "q_lora_rank": null means no low-rank query.
  auto q = j.find("q_lora_rank");
  a.q_lora_rank = q == j.end() ? 1536 : q->is_null() ? 0 : as_positive(*q, "q_lora_rank", where);
  a.qk_nope_head_dim = opt_int(j, {"qk_nope_head_dim"}, where).value_or(128);
  a.qk_rope_head_dim = opt_int(j, {"qk_rope_head_dim"}, where).value_or(64);
  a.v_head_dim = opt_int(j, {"v_head_dim"}, where).value_or(128);
  return a;
}

}  // namespace

ModelConfig model_from_hf_json(const nlohmann::json& config, const std::string& name, const std::string& where) {
  if (!config.is_object()) throw Error(where + ": a model config must be a JSON object");
  const bool nested =
      !config.contains("hidden_size") && config.contains("text_config") && config["text_config"].is_object();
  const nlohmann::json& j = nested ? config["text_config"] : config;
  ModelConfig m;
  m.name = name;
  m.origin = where;
  m.model_type = lower(j.value("model_type", config.value("model_type", std::string("unknown"))));
  if (kUnsupportedTypes.count(m.model_type))
    throw Error(where + ": model_type '" + m.model_type +
                "' has state-space or linear-attention layers, which inferlab does not model");
  for (const char* f : kUnsupportedFields)
    if (j.contains(f) && !j[f].is_null())
      throw Error(where + ": field '" + std::string(f) +
                  "' describes state-space or linear-attention layers, which inferlab does not model");
  const TypeDefaults* td = defaults_of(m.model_type);
  if (!td)
    m.warnings.push_back("model_type '" + m.model_type + "' is not one whose defaults inferlab knows (" +
                         join(known_types(), ", ") + "): fields it leaves out are read as Llama's (gated MLP, " +
                         "untied embeddings, head_dim = hidden / heads, no sliding window)");
  if (nested && config.contains("vision_config"))
    m.warnings.push_back("the vision encoder (vision_config) is not counted: the numbers are the language model's");

  m.hidden = req_int(j, {"hidden_size", "n_embd", "d_model"}, where);
  m.layers = req_int(j, {"num_hidden_layers", "n_layer", "num_layers"}, where);
  m.heads = req_int(j, {"num_attention_heads", "n_head", "num_heads"}, where);
  m.vocab = req_int(j, {"vocab_size"}, where);
  m.kv_heads = opt_int(j, {"num_key_value_heads", "num_kv_heads", "n_head_kv"}, where).value_or(0);
  if (m.kv_heads == 0) m.kv_heads = opt_bool(j, "multi_query", false, where) ? 1 : m.heads;  // Falcon: multi_query
  m.mla = latent_attention(j, where);
  if (auto hd = opt_int(j, {"head_dim"}, where); hd && !m.mla) {
    m.head_dim = *hd;
  } else if (m.mla) {
    m.head_dim = m.mla->qk_head_dim();
  } else if (td && td->head_dim) {
    m.head_dim = td->head_dim;
  } else {
    if (m.hidden % m.heads != 0)
      throw Error(where + ": hidden_size " + std::to_string(m.hidden) + " is not divisible by num_attention_heads " +
                  std::to_string(m.heads) + " and no head_dim is given");
    m.head_dim = m.hidden / m.heads;
  }
  if (m.heads % m.kv_heads != 0)
    throw Error(where + ": num_key_value_heads " + std::to_string(m.kv_heads) + " does not divide num_attention_heads " +
                std::to_string(m.heads));
  m.gated_mlp = !(td && td->two_matrix_mlp);
  m.norms_per_layer = td ? td->norms_per_layer : 2;
  if (auto ffn = opt_int(j, {"intermediate_size", "n_inner", "ffn_dim", "ffn_hidden_size"}, where)) {
    m.intermediate = *ffn;
  } else if (!m.gated_mlp) {
    m.intermediate = 4 * m.hidden;
  } else {
    throw Error(where + ": missing field 'intermediate_size'");
  }
  m.max_positions = opt_int(j, {"max_position_embeddings", "n_positions", "max_sequence_length", "seq_length"}, where)
                        .value_or(0);

  // Sliding window: an explicit null means none; an absent field takes the type's default.
  if (auto it = j.find("sliding_window"); it != j.end()) {
    if (!it->is_null()) m.sliding_window = as_positive(*it, "sliding_window", where);
  } else if (td && td->window) {
    m.sliding_window = td->window;
  }
  const bool qwen = m.model_type.rfind("qwen", 0) == 0;
  if (qwen && !opt_bool(j, "use_sliding_window", false, where)) m.sliding_window.reset();  // listed, not used
  layer_types(j, m.layers, where);  // refuses layer kinds other than (sliding) attention, window or not
  if (m.sliding_window) m.window_layers = window_pattern(j, m, where);

  // Experts: routed (num_local_experts / num_experts / n_routed_experts), their width, shared experts.
  m.experts = opt_int(j, {"num_local_experts", "num_experts", "n_routed_experts"}, where).value_or(1);
  m.experts_per_token = opt_int(j, {"num_experts_per_tok", "moe_top_k"}, where).value_or(1);
  if (m.experts_per_token > m.experts)
    throw Error(where + ": num_experts_per_tok " + std::to_string(m.experts_per_token) + " exceeds the " +
                std::to_string(m.experts) + " experts");
  if (m.is_moe()) {
    m.moe_intermediate = opt_int(j, {"moe_intermediate_size"}, where).value_or(0);
    if (auto s = opt_int(j, {"shared_expert_intermediate_size"}, where)) {
      m.shared_intermediate = *s;
      m.shared_expert_gate = m.model_type == "qwen2_moe";  // Qwen2MoeSparseMoeBlock.shared_expert_gate
    } else {
      m.shared_intermediate = opt_count(j, "n_shared_experts", 0, where) * m.expert_intermediate();
    }
    m.moe_layers = moe_pattern(j, m.layers, where);
  }
  m.tied_embeddings = opt_bool(j, "tie_word_embeddings", td && td->tied, where);
  m.attn_logit_softcap = opt_positive_number(j, "attn_logit_softcapping", where);
  m.final_logit_softcap = opt_positive_number(j, "final_logit_softcapping", where);
  if (auto it = j.find("torch_dtype"); it != j.end() && it->is_string()) {
    try {
      m.dtype = parse_dtype(it->get<std::string>());
    } catch (const Error& e) {
      throw Error(where + ": torch_dtype: " + e.what());
    }
  }

  for (const auto& [field, what] : kUncountedFields)
    if (j.contains(field) && !j[field].is_null()) m.warnings.push_back("'" + std::string(field) + "': " + what);
  if (auto it = j.find("num_nextn_predict_layers"); it != j.end() && it->is_number_integer() && it->get<int64_t>() > 0)
    m.warnings.push_back("the " + it->dump() +
                         " multi-token-prediction layer(s) (num_nextn_predict_layers) are not counted, as in the "
                         "published parameter count");
  if (auto it = j.find("quantization_config"); it != j.end() && it->is_object())
    m.warnings.push_back("the checkpoint stores its weights quantized (quantization_config: " +
                         it->value("quant_method", std::string("?")) + "); they are counted in " + dtype_name(m.dtype) +
                         " unless --weight-dtype / --weight-format (spec: weight_dtype / weight_format) says otherwise");
  return m;
}

}  // namespace inferlab
