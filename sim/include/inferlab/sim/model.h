#pragma once
// A decoder-only transformer as read from a Hugging Face style config.json (data/models/*.json,
// or any config.json a user gives by path). Covers Llama/Mistral/Mixtral/Qwen-style configs and the
// GPT-2/OPT/Falcon/NeoX spellings of the same fields; nested "text_config" is followed.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "inferlab/sim/dtype.h"

namespace inferlab {

struct ModelConfig {
  std::string name;        // "llama-2-7b"
  std::string model_type;  // "llama", "mistral", "mixtral", ...
  std::string origin;      // file it came from
  int64_t hidden = 0;          // d_model
  int64_t intermediate = 0;    // FFN width (per expert for MoE)
  int64_t layers = 0;
  int64_t heads = 0;           // query heads
  int64_t kv_heads = 0;        // key/value heads: == heads MHA, 1 MQA, otherwise GQA
  int64_t head_dim = 0;
  int64_t vocab = 0;
  int64_t max_positions = 0;
  std::optional<int64_t> sliding_window;  // attention span in tokens (Mistral-7B v0.1: 4096)
  int64_t experts = 1;             // MoE experts per layer (1: dense)
  int64_t experts_per_token = 1;   // top-k routing
  bool gated_mlp = true;           // SwiGLU (gate, up, down) vs two-matrix MLP
  bool tied_embeddings = false;
  DType dtype = DType::bf16;       // torch_dtype of the checkpoint

  int64_t q_dim() const { return heads * head_dim; }
  int64_t kv_dim() const { return kv_heads * head_dim; }
  int64_t group_size() const { return heads / kv_heads; }  // query heads per KV head
  bool is_moe() const { return experts > 1; }
  // "MHA", "MQA" or "GQA-8" (8 query heads share each KV head).
  std::string attention_kind() const;

  // Parameter counts (biases are not counted: under 0.1% for every shipped model).
  double embedding_params() const;      // vocab x hidden
  double lm_head_params() const;        // 0 extra when tied: see total_params
  double attention_params_per_layer() const;
  double expert_params() const;         // one expert's MLP
  double mlp_params_per_layer() const;  // all experts + router
  double norm_params_per_layer() const;
  double layer_params() const;
  double total_params() const;          // embedding + layers + final norm + untied lm_head
  double active_params_per_token() const;  // MoE: only top-k experts
};

// Validates positive sizes, heads % kv_heads == 0, top-k <= experts. `where` prefixes errors.
ModelConfig model_from_hf_json(const nlohmann::json& config, const std::string& name, const std::string& where);
// By name (case-insensitive stem under data/models), a path to a .json file, or a folder holding
// config.json. An unknown name throws inferlab::Error listing the known models.
ModelConfig load_model(const std::string& name_or_path);
std::vector<std::string> known_models();

// The same model with another number of KV heads: "mha" (= heads), "mqa" (= 1), "config" (unchanged),
// "gqa-N" (N query heads per KV head) or a number dividing the query heads. Used to compare MHA/GQA/MQA on one model.
ModelConfig with_kv_heads(ModelConfig m, const std::string& kv_heads);

}  // namespace inferlab
