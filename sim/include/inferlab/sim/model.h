#pragma once
// A decoder-only transformer as read from a Hugging Face style config.json (data/models/*.json,
// or any config.json a user gives by path). Covers Llama/Mistral/Mixtral/Qwen2(-MoE)/Gemma(-2)/
// DeepSeek-V2/V3 configs and the GPT-2/OPT/Falcon/NeoX spellings of the same fields; nested
// "text_config" is followed. Fields a config leaves out take the default of its model_type's
// Hugging Face config class (Gemma ties its embeddings, Mistral's window is 4096, ...).
//
// Layers need not be alike: Gemma-2 alternates sliding-window and global attention layers,
// DeepSeek keeps its first layers dense before the MoE ones, Qwen2-MoE may list dense layers.
// Such a model carries one flag per layer (window_layers, moe_layers); an empty list means every
// layer is the same. DeepSeek's multi-head latent attention (MLA) is described by `mla`.
//
// A field that changes the cost and that the model does not represent is never ignored in silence:
// it becomes an entry of `warnings` (shown by every verb and kept in a run's provenance) or, when
// no sensible count is possible (state-space or linear-attention layers), an error naming it.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "inferlab/sim/dtype.h"

namespace inferlab {

// Multi-head latent attention (DeepSeek-V2 §2.1): each token caches one latent c_KV of
// kv_lora_rank values and one shared RoPE key of qk_rope_head_dim values, for all heads; the
// per-head keys (qk_nope_head_dim) and values (v_head_dim) are rebuilt from the latent by kv_b_proj.
struct LatentAttention {
  int64_t kv_lora_rank = 0;      // latent width (512)
  int64_t q_lora_rank = 0;       // low-rank query width (1536); 0: a plain q_proj
  int64_t qk_nope_head_dim = 0;  // per-head key/query width without RoPE (128)
  int64_t qk_rope_head_dim = 0;  // the RoPE part, shared by the heads for keys (64)
  int64_t v_head_dim = 0;        // per-head value width (128)
  int64_t qk_head_dim() const { return qk_nope_head_dim + qk_rope_head_dim; }
  int64_t cached_width() const { return kv_lora_rank + qk_rope_head_dim; }  // values cached per token and layer
};

struct ModelConfig {
  std::string name;        // "llama-2-7b"
  std::string model_type;  // "llama", "mistral", "mixtral", ...
  std::string origin;      // file it came from
  int64_t hidden = 0;          // d_model
  int64_t intermediate = 0;    // FFN width of a dense layer (Mixtral: of each expert)
  int64_t layers = 0;
  int64_t heads = 0;           // query heads
  int64_t kv_heads = 0;        // key/value heads: == heads MHA, 1 MQA, otherwise GQA
  int64_t config_kv_heads = 0; // the config's KV heads when with_kv_heads changed them (the K/V projections follow); else 0
  int64_t head_dim = 0;
  int64_t vocab = 0;
  int64_t max_positions = 0;   // max_position_embeddings; 0 when the config states none
  std::optional<int64_t> sliding_window;  // attention span in tokens (Mistral-7B v0.1: 4096)
  std::vector<bool> window_layers;  // per layer: uses sliding_window; empty: every layer does (when set)
  int64_t experts = 1;             // routed MoE experts per MoE layer (1: dense)
  int64_t experts_per_token = 1;   // top-k routing
  int64_t moe_intermediate = 0;    // one routed expert's width (moe_intermediate_size); 0: intermediate
  int64_t shared_intermediate = 0; // width of the always-active shared expert(s) of a MoE layer; 0: none
  bool shared_expert_gate = false; // Qwen2-MoE: a sigmoid gate (hidden -> 1) on the shared expert
  std::vector<bool> moe_layers;    // per layer: MoE (true) or dense MLP; empty: all MoE when experts > 1
  bool gated_mlp = true;           // SwiGLU/GeGLU (gate, up, down) vs two-matrix MLP
  bool tied_embeddings = false;
  int64_t norms_per_layer = 2;     // 4: Gemma-2's norms before and after attention and MLP
  std::optional<LatentAttention> mla;
  std::optional<double> attn_logit_softcap, final_logit_softcap;  // Gemma-2: tanh soft-capping
  DType dtype = DType::bf16;       // torch_dtype of the checkpoint
  std::vector<std::string> warnings;  // fields read with an assumption or not counted (see above)

  int64_t q_dim() const { return heads * head_dim; }
  int64_t kv_dim() const { return kv_heads * head_dim; }
  int64_t group_size() const { return heads / kv_heads; }  // query heads per KV head
  bool is_moe() const { return experts > 1; }
  bool is_mla() const { return mla.has_value(); }
  int64_t expert_intermediate() const { return moe_intermediate > 0 ? moe_intermediate : intermediate; }
  int64_t moe_layer_count() const;     // layers with routed experts
  int64_t dense_layer_count() const { return layers - moe_layer_count(); }
  int64_t window_layer_count() const;  // layers attending within sliding_window
  int64_t global_layer_count() const { return layers - window_layer_count(); }
  // Elements one token leaves in the KV cache of one layer: 2 x kv_heads x head_dim (K and V), or
  // MLA's latent + RoPE key (kv_lora_rank + qk_rope_head_dim).
  int64_t kv_elements_per_token_per_layer() const;
  // The literature's names: "MHA", "MQA", "GQA-8" (8 KV-head groups, Ainslie et al. 2023: each
  // group of query heads shares one KV head), "MLA".
  std::string attention_kind() const;

  // Parameter counts (biases are not counted: under 0.1% for every shipped model).
  double embedding_params() const;      // vocab x hidden
  double lm_head_params() const;        // 0 extra when tied: see total_params
  double attention_params_per_layer() const;  // projections (MLA: with its two low-rank norms)
  double expert_params() const;         // one routed expert's MLP
  double dense_mlp_params() const;      // the MLP of a dense layer
  double moe_mlp_params() const;        // all routed experts + shared expert(s) + router of a MoE layer
  double norm_params_per_layer() const;
  double layers_params() const;         // every decoder layer
  double total_params() const;          // embedding + layers + final norm + untied lm_head
  // Weights one token touches: every MoE layer's top-k experts instead of all, embedding and lm_head
  // included (Mixtral's 12.9 B, Qwen's 2.7 B are counted so; DeepSeek's leave the embedding out).
  double active_params_per_token() const;
};

// Validates positive sizes, heads % kv_heads == 0, top-k <= experts. `where` prefixes errors.
ModelConfig model_from_hf_json(const nlohmann::json& config, const std::string& name, const std::string& where);
// By name (case-insensitive stem under data/models), a path to a .json file, or a folder holding
// config.json. An unknown name throws inferlab::Error listing the known models. The model's
// warnings are also reported through note_warning (sim/warnings.h).
ModelConfig load_model(const std::string& name_or_path);
std::vector<std::string> known_models();

// The same model with another number of KV heads, to compare MHA/GQA/MQA on one model: "config"
// (unchanged), "mha" (= heads), "mqa" (= 1) or the number of KV heads (8: GQA-8). The spelling
// "gqa-N" is refused with a message: earlier versions read it as N query heads per KV head, the
// opposite of the literature's GQA-N. MLA models take only "config".
ModelConfig with_kv_heads(ModelConfig m, const std::string& kv_heads);
// "MHA", "MQA" or "GQA-<kv_heads>" for a bare attention shape.
std::string attention_kind_of(int64_t heads, int64_t kv_heads);

// The layers [first, first + count) of m as a model of their own (a pipeline stage): the per-layer
// lists are cut to match. Throws inferlab::Error when the range is outside the model.
ModelConfig layer_range(const ModelConfig& m, int64_t first, int64_t count);

}  // namespace inferlab
