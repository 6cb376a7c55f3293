#pragma once
// The tensors of a Llama-family checkpoint, by their Hugging Face names and shapes, and a host copy of
// them (float) for tiny models: the CPU reference forward and the tests use it; the GPU engine streams
// the same list tensor by tensor (a 7B model never exists as floats on the host). Plain C++.
//   model.embed_tokens.weight                 [vocab, hidden]
//   model.layers.{i}.input_layernorm.weight   [hidden]
//   model.layers.{i}.self_attn.q_proj.weight  [heads * head_dim, hidden]     (+ .bias [heads * head_dim], Qwen2)
//   model.layers.{i}.self_attn.k_proj.weight  [kv_heads * head_dim, hidden]  (+ .bias, Qwen2)
//   model.layers.{i}.self_attn.v_proj.weight  [kv_heads * head_dim, hidden]  (+ .bias, Qwen2)
//   model.layers.{i}.self_attn.o_proj.weight  [hidden, heads * head_dim]
//   model.layers.{i}.post_attention_layernorm.weight [hidden]
//   model.layers.{i}.mlp.gate_proj.weight     [intermediate, hidden]
//   model.layers.{i}.mlp.up_proj.weight       [intermediate, hidden]
//   model.layers.{i}.mlp.down_proj.weight     [hidden, intermediate]
//   model.norm.weight                         [hidden]
//   lm_head.weight                            [vocab, hidden]  (absent when tie_word_embeddings)
#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "inferlab/kernels/engine/arch.h"
#include "inferlab/kernels/engine/safetensors.h"

namespace inferlab {

enum class WeightKind { embedding, norm, linear, bias, lm_head };
// How Hugging Face initializes it: linear and embedding weights normal(0, initializer_range), norms 1, biases 0.
struct WeightSpec {
  std::string name;
  std::vector<int64_t> shape;
  WeightKind kind = WeightKind::linear;
  int layer = -1;  // -1: not in a layer
  int64_t elements() const;
};
std::vector<WeightSpec> weight_specs(const ModelConfig& m, const ArchConfig& a);

// Every tensor of the list, as floats (the values the engine holds: bf16-representable when they came
// from a bf16 engine). Keyed by name.
using HostWeights = std::map<std::string, std::vector<float>>;

// Seeded random weights with Hugging Face's init; `perturb` also moves norms to 1 + N(0, 0.1) and
// biases to N(0, initializer_range), so that the tests exercise them. Rounded to bf16.
HostWeights random_host_weights(const ModelConfig& m, const ArchConfig& a, uint64_t seed, bool perturb = false);
// Checks a folder against the list: every tensor present with its shape and a float dtype (BF16, F16, F32);
// an error names the tensor. Extra tensors are ignored (rotary caches of old checkpoints).
void check_checkpoint(const SafetensorsFolder& folder, const ModelConfig& m, const ArchConfig& a);
HostWeights load_host_weights(const SafetensorsFolder& folder, const ModelConfig& m, const ArchConfig& a);
// Writes a Hugging Face folder: config.json (the given JSON) and model.safetensors in bf16.
void write_model_folder(const std::filesystem::path& dir, const nlohmann::json& config, const ModelConfig& m,
                        const ArchConfig& a, const HostWeights& w);

}  // namespace inferlab
