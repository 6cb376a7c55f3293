#pragma once
// What the engine needs of a Hugging Face config beyond sim/'s cost view (ModelConfig): the family,
// RoPE, the norm epsilon, biases, the init range. The engine runs the Llama family — Llama, Mistral,
// Qwen2 — and refuses anything else with an error naming the field that rules it out.
//   Llama    LlamaForCausalLM:   RMSNorm, RoPE (rope_theta; rope_scaling linear or llama3), GQA, SwiGLU
//   Mistral  MistralForCausalLM: the same; sliding_window limits the context (the kernels attend over
//            the whole context, so a sequence longer than the window is rejected rather than run wrongly)
//   Qwen2    Qwen2ForCausalLM:   the same with biases on q, k and v
// Plain C++: built without CUDA, so configs are checked (and the CPU reference runs) anywhere.
#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "inferlab/sim/model.h"

namespace inferlab {

struct RopeConfig {
  double theta = 10000.0;
  std::string type = "default";  // "default", "linear", "llama3"
  double factor = 1.0;
  double low_freq_factor = 1.0, high_freq_factor = 4.0;  // llama3
  int64_t original_max_positions = 8192;                 // llama3
};

struct ArchConfig {
  std::string family;          // "llama", "mistral", "qwen2"
  std::string architecture;    // "LlamaForCausalLM", ...
  RopeConfig rope;
  double rms_norm_eps = 1e-6;
  bool qkv_bias = false;       // Qwen2
  double initializer_range = 0.02;
  std::optional<int64_t> sliding_window;  // Mistral: the longest context the engine accepts
};

// Reads and checks the fields of a config.json (the same object model_from_hf_json reads; `where` names
// the file in errors). Throws inferlab::Error naming the field for: another model_type or architecture,
// an activation other than silu, MoE fields, attention or MLP biases the family does not have, an
// unknown rope_scaling type, a head dim the kernels do not run (64 or 128).
ArchConfig arch_from_hf_json(const nlohmann::json& config, const ModelConfig& model, const std::string& where);
// By name (data/models) or path, as load_model: the ModelConfig and the ArchConfig of one config.json.
struct EngineModel {
  ModelConfig model;
  ArchConfig arch;
};
EngineModel load_engine_model(const std::string& name_or_path);

// The RoPE frequencies of a config: kernels/layers' rope_inv_freq (fp32, as transformers computes them).
std::vector<float> rope_inv_freq(int64_t head_dim, const RopeConfig& rope);

}  // namespace inferlab
