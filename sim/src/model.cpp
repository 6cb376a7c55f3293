#include "inferlab/sim/model.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <filesystem>
#include <initializer_list>

#include "inferlab/sim/error.h"
#include "inferlab/sim/io.h"
#include "inferlab/sim/paths.h"

namespace inferlab {
namespace fs = std::filesystem;
namespace {

// First of several spellings of one field (Llama names first, then GPT-2/OPT/Falcon/NeoX ones).
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

std::optional<int64_t> opt_int(const nlohmann::json& j, std::initializer_list<const char*> keys, const std::string& where) {
  std::string key;
  const auto* v = first_of(j, keys, &key);
  if (!v) return std::nullopt;
  if (v->is_boolean() || !v->is_number() || std::floor(v->get<double>()) != v->get<double>())
    throw Error(where + ": field '" + key + "' must be an integer, got " + v->dump());
  const auto x = v->get<int64_t>();
  if (x <= 0) throw Error(where + ": field '" + key + "' must be positive, got " + std::to_string(x));
  return x;
}

int64_t req_int(const nlohmann::json& j, std::initializer_list<const char*> keys, const std::string& where) {
  if (auto v = opt_int(j, keys, where)) return *v;
  throw Error(where + ": missing field '" + std::string(*keys.begin()) + "'");
}

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

}  // namespace

std::string ModelConfig::attention_kind() const {
  if (kv_heads == heads) return "MHA";
  if (kv_heads == 1) return "MQA";
  return "GQA-" + std::to_string(group_size());
}

double ModelConfig::embedding_params() const { return double(vocab) * double(hidden); }
double ModelConfig::lm_head_params() const { return double(vocab) * double(hidden); }
double ModelConfig::attention_params_per_layer() const {
  return double(hidden) * double(q_dim() + 2 * kv_dim()) + double(q_dim()) * double(hidden);
}
double ModelConfig::expert_params() const { return (gated_mlp ? 3.0 : 2.0) * double(hidden) * double(intermediate); }
double ModelConfig::mlp_params_per_layer() const {
  return double(experts) * expert_params() + (is_moe() ? double(hidden) * double(experts) : 0.0);
}
double ModelConfig::norm_params_per_layer() const { return 2.0 * double(hidden); }
double ModelConfig::layer_params() const {
  return attention_params_per_layer() + mlp_params_per_layer() + norm_params_per_layer();
}
double ModelConfig::total_params() const {
  return embedding_params() + double(layers) * layer_params() + double(hidden) +
         (tied_embeddings ? 0.0 : lm_head_params());
}
double ModelConfig::active_params_per_token() const {
  return total_params() - double(layers) * double(experts - experts_per_token) * expert_params();
}

ModelConfig model_from_hf_json(const nlohmann::json& config, const std::string& name, const std::string& where) {
  if (!config.is_object()) throw Error(where + ": a model config must be a JSON object");
  const nlohmann::json& j =
      (!config.contains("hidden_size") && config.contains("text_config") && config["text_config"].is_object())
          ? config["text_config"]
          : config;
  ModelConfig m;
  m.name = name;
  m.origin = where;
  m.model_type = lower(j.value("model_type", config.value("model_type", std::string("unknown"))));
  m.hidden = req_int(j, {"hidden_size", "n_embd", "d_model"}, where);
  m.layers = req_int(j, {"num_hidden_layers", "n_layer", "num_layers"}, where);
  m.heads = req_int(j, {"num_attention_heads", "n_head", "num_heads"}, where);
  m.vocab = req_int(j, {"vocab_size"}, where);
  m.kv_heads = opt_int(j, {"num_key_value_heads", "num_kv_heads", "n_head_kv"}, where).value_or(0);
  if (m.kv_heads == 0) {
    // Falcon spells MQA as multi_query: true.
    const bool multi_query = j.value("multi_query", false);
    m.kv_heads = multi_query ? 1 : m.heads;
  }
  if (auto hd = opt_int(j, {"head_dim"}, where)) {
    m.head_dim = *hd;
  } else {
    if (m.hidden % m.heads != 0)
      throw Error(where + ": hidden_size " + std::to_string(m.hidden) + " is not divisible by num_attention_heads " +
                  std::to_string(m.heads) + " and no head_dim is given");
    m.head_dim = m.hidden / m.heads;
  }
  if (m.heads % m.kv_heads != 0)
    throw Error(where + ": num_key_value_heads " + std::to_string(m.kv_heads) + " does not divide num_attention_heads " +
                std::to_string(m.heads));
  // Two-matrix MLPs default to 4x hidden; gated ones must say their width.
  static const char* kTwoMatrix[] = {"gpt2", "gptj", "gpt_neox", "opt", "falcon", "bloom", "gpt_bigcode", "phi"};
  m.gated_mlp = std::none_of(std::begin(kTwoMatrix), std::end(kTwoMatrix), [&](const char* t) { return m.model_type == t; });
  if (auto ffn = opt_int(j, {"intermediate_size", "n_inner", "ffn_dim", "ffn_hidden_size"}, where)) {
    m.intermediate = *ffn;
  } else if (!m.gated_mlp) {
    m.intermediate = 4 * m.hidden;
  } else {
    throw Error(where + ": missing field 'intermediate_size'");
  }
  m.max_positions = opt_int(j, {"max_position_embeddings", "n_positions", "max_sequence_length", "seq_length"}, where)
                        .value_or(0);
  m.sliding_window = opt_int(j, {"sliding_window"}, where);
  if (j.contains("use_sliding_window") && j["use_sliding_window"].is_boolean() && !j["use_sliding_window"].get<bool>())
    m.sliding_window.reset();  // Qwen2 lists a window it does not use
  m.experts = opt_int(j, {"num_local_experts", "num_experts", "n_routed_experts"}, where).value_or(1);
  m.experts_per_token = opt_int(j, {"num_experts_per_tok", "moe_top_k"}, where).value_or(1);
  if (m.experts_per_token > m.experts)
    throw Error(where + ": num_experts_per_tok " + std::to_string(m.experts_per_token) + " exceeds the " +
                std::to_string(m.experts) + " experts");
  m.tied_embeddings = j.value("tie_word_embeddings", m.model_type == "gpt2");
  if (auto it = j.find("torch_dtype"); it != j.end() && it->is_string()) {
    try {
      m.dtype = parse_dtype(it->get<std::string>());
    } catch (const Error& e) {
      throw Error(where + ": torch_dtype: " + e.what());
    }
  }
  return m;
}

std::vector<std::string> known_models() { return list_stems(data_dir() / "models", ".json"); }

ModelConfig load_model(const std::string& name_or_path) {
  fs::path path(name_or_path);
  std::error_code ec;
  std::string name;
  if (fs::is_directory(path, ec) && fs::is_regular_file(path / "config.json", ec)) {
    name = path.filename().string();
    path /= "config.json";
  } else if (path.extension() == ".json" && fs::is_regular_file(path, ec)) {
    name = path.stem().string();
  } else {
    name = lower(name_or_path);
    path = data_dir() / "models" / (name + ".json");
    if (!fs::is_regular_file(path, ec))
      throw Error("unknown model '" + name_or_path + "' (known: " + join(known_models(), ", ") +
                  "; or give the path to a Hugging Face config.json)");
  }
  return model_from_hf_json(read_json_file(path), name, path.string());
}

ModelConfig with_kv_heads(ModelConfig m, const std::string& kv_heads) {
  const std::string k = lower(kv_heads);
  if (k.empty() || k == "config") return m;
  int64_t n = 0;
  if (k == "mha") {
    n = m.heads;
  } else if (k == "mqa") {
    n = 1;
  } else if (k.rfind("gqa-", 0) == 0) {
    // gqa-N: N query heads share each KV head.
    int64_t group = 0;
    try {
      std::size_t used = 0;
      group = std::stoll(k.substr(4), &used);
      if (used != k.size() - 4) group = 0;
    } catch (...) {
      group = 0;
    }
    if (group <= 0 || m.heads % group != 0)
      throw Error("kv_heads '" + kv_heads + "': the group size must divide the " + std::to_string(m.heads) +
                  " query heads of " + m.name);
    n = m.heads / group;
  } else {
    try {
      std::size_t used = 0;
      n = std::stoll(k, &used);
      if (used != k.size()) n = 0;
    } catch (...) {
      n = 0;
    }
    if (n <= 0)
      throw Error("kv_heads must be 'config', 'mha', 'mqa', 'gqa-N' or a positive integer, got '" + kv_heads + "'");
  }
  if (m.heads % n != 0)
    throw Error("kv_heads " + std::to_string(n) + " does not divide the " + std::to_string(m.heads) +
                " query heads of " + m.name);
  m.kv_heads = n;
  return m;
}

}  // namespace inferlab
