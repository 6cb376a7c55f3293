#include "inferlab/sim/model.h"

#include <algorithm>
#include <cctype>
#include <filesystem>

#include "inferlab/sim/error.h"
#include "inferlab/sim/io.h"
#include "inferlab/sim/paths.h"
#include "inferlab/sim/warnings.h"

namespace inferlab {
namespace fs = std::filesystem;
namespace {

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

int64_t count_true(const std::vector<bool>& v) { return int64_t(std::count(v.begin(), v.end(), true)); }

// The whole of `s` as a positive integer, or 0.
int64_t positive_integer(const std::string& s) {
  const auto v = parse_integer(s);
  return v && *v > 0 ? *v : 0;
}

}  // namespace

int64_t ModelConfig::moe_layer_count() const {
  if (!is_moe()) return 0;
  return moe_layers.empty() ? layers : count_true(moe_layers);
}

int64_t ModelConfig::window_layer_count() const {
  if (!sliding_window) return 0;
  return window_layers.empty() ? layers : count_true(window_layers);
}

int64_t ModelConfig::kv_elements_per_token_per_layer() const {
  return mla ? mla->cached_width() : 2 * kv_heads * head_dim;
}

std::string attention_kind_of(int64_t heads, int64_t kv_heads) {
  if (kv_heads == heads) return "MHA";
  if (kv_heads == 1) return "MQA";
  return "GQA-" + std::to_string(kv_heads);
}

std::string ModelConfig::attention_kind() const { return mla ? "MLA" : attention_kind_of(heads, kv_heads); }

double ModelConfig::embedding_params() const { return double(vocab) * double(hidden); }
double ModelConfig::lm_head_params() const { return double(vocab) * double(hidden); }

double ModelConfig::attention_params_per_layer() const {
  const double H = double(hidden), h = double(heads);
  if (!mla) return H * double(q_dim() + 2 * kv_dim()) + double(q_dim()) * H;
  const LatentAttention& a = *mla;
  const double ql = double(a.q_lora_rank), r = double(a.kv_lora_rank);
  const double q = a.q_lora_rank > 0 ? H * ql + ql + ql * h * double(a.qk_head_dim())  // q_a_proj, q_a_norm, q_b_proj
                                     : H * h * double(a.qk_head_dim());                // q_proj
  const double kv = H * double(a.cached_width()) + r +                                 // kv_a_proj, kv_a_norm
                    r * h * double(a.qk_nope_head_dim + a.v_head_dim);                 // kv_b_proj
  return q + kv + h * double(a.v_head_dim) * H;                                        // o_proj
}

double ModelConfig::expert_params() const {
  return (gated_mlp ? 3.0 : 2.0) * double(hidden) * double(expert_intermediate());
}
double ModelConfig::dense_mlp_params() const { return (gated_mlp ? 3.0 : 2.0) * double(hidden) * double(intermediate); }
double ModelConfig::moe_mlp_params() const {
  const double H = double(hidden);
  const double shared = (gated_mlp ? 3.0 : 2.0) * H * double(shared_intermediate) + (shared_expert_gate ? H : 0.0);
  return double(experts) * expert_params() + shared + H * double(experts);
}
double ModelConfig::norm_params_per_layer() const { return double(norms_per_layer) * double(hidden); }

double ModelConfig::layers_params() const {
  return double(layers) * (attention_params_per_layer() + norm_params_per_layer()) +
         double(dense_layer_count()) * dense_mlp_params() + double(moe_layer_count()) * moe_mlp_params();
}

double ModelConfig::total_params() const {
  return embedding_params() + layers_params() + double(hidden) + (tied_embeddings ? 0.0 : lm_head_params());
}

double ModelConfig::active_params_per_token() const {
  return total_params() - double(moe_layer_count()) * double(experts - experts_per_token) * expert_params();
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
  ModelConfig m = model_from_hf_json(read_json_file(path), name, path.string());
  for (const auto& w : m.warnings) note_warning(m.name + ": " + w);
  return m;
}

ModelConfig with_kv_heads(ModelConfig m, const std::string& kv_heads) {
  const std::string k = lower(kv_heads);
  if (k.empty() || k == "config") return m;
  if (m.mla)
    throw Error("kv_heads '" + kv_heads + "': " + m.name +
                " uses multi-head latent attention (one cached latent per token for all heads); only 'config' applies");
  if (k.rfind("gqa", 0) == 0)
    throw Error("kv_heads '" + kv_heads +
                "' is ambiguous: earlier inferlab versions read gqa-N as N query heads per KV head, while the "
                "literature's GQA-N (Ainslie et al. 2023) has N KV-head groups. Give the number of KV heads instead "
                "(GQA-8 = 8), or mha / mqa");
  int64_t n = 0;
  if (k == "mha") {
    n = m.heads;
  } else if (k == "mqa") {
    n = 1;
  } else {
    n = positive_integer(k);
    if (n <= 0)
      throw Error("kv_heads must be 'config', 'mha', 'mqa' or the number of KV heads (GQA-8: 8), got '" + kv_heads +
                  "'");
  }
  if (m.heads % n != 0)
    throw Error("kv_heads " + std::to_string(n) + " does not divide the " + std::to_string(m.heads) +
                " query heads of " + m.name);
  if (n != m.kv_heads && m.config_kv_heads == 0) m.config_kv_heads = m.kv_heads;
  m.kv_heads = n;
  return m;
}

ModelConfig layer_range(const ModelConfig& m, int64_t first, int64_t count) {
  if (first < 0 || count < 1 || first + count > m.layers)
    throw Error("layers " + std::to_string(first) + ".." + std::to_string(first + count - 1) + " are outside the " +
                std::to_string(m.layers) + " layers of " + m.name);
  ModelConfig s = m;
  s.layers = count;
  auto cut = [&](std::vector<bool>& v) {
    if (!v.empty()) v = std::vector<bool>(v.begin() + first, v.begin() + first + count);
  };
  cut(s.window_layers);
  cut(s.moe_layers);
  return s;
}

}  // namespace inferlab
