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
#include <optional>
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

// One device's part of the checkpoint under tensor and pipeline parallelism, with sim/parallel.h's rules
// (Megatron-LM's layout): q_proj, k_proj, v_proj (and their biases), gate_proj and up_proj keep the rows of
// the rank's heads / KV heads / MLP columns (column-parallel); o_proj and down_proj keep the matching
// columns (row-parallel, their outputs summed over the ranks); the embedding and the lm_head keep the rank's
// slice of ceil(vocab / tp) rows, the last rank's padded with zero rows. KV heads are split when tp <= KV
// heads, else rank r holds KV head r / (tp / kv_heads) (replicated). Stage s holds its layers
// (sim/parallel.h stage_layers), the embedding when it is the first (or the last, for a tied lm_head),
// the final norm and the lm_head when it is the last. Norms are replicated.
struct WeightShard {
  int64_t tp = 1, tp_rank = 0;  // tensor-parallel degree, this device's rank among the stage's devices
  int64_t pp = 1, stage = 0;    // pipeline stages, this device's stage
  bool first() const { return stage == 0; }
  bool last() const { return stage == pp - 1; }
  bool whole() const { return tp == 1 && pp == 1; }
};
// Throws inferlab::Error when the degrees do not divide the model (sim/parallel.h check_parallelism) or
// the ranks lie outside them.
void check_shard(const ModelConfig& full, const WeightShard& s);
// The model one device runs: stage_model(full, {tp, pp}, stage) — its heads, KV heads, MLP width,
// vocabulary slice (ceil(vocab / tp)) and layers.
ModelConfig shard_config(const ModelConfig& full, const WeightShard& s);
int64_t shard_first_layer(const ModelConfig& full, const WeightShard& s);  // the stage's first layer
int64_t shard_first_token(const ModelConfig& full, const WeightShard& s);  // the vocabulary slice's first id

// The part of one full-model tensor a shard holds.
struct TensorSlice {
  enum class Cut { whole, rows, columns } cut = Cut::whole;
  int64_t offset = 0, count = 0;  // the rows (or columns) taken
  std::vector<int64_t> shape;     // as held: rows padded with zeros past `count` (the vocabulary slice)
  int64_t elements() const;
};
// nullopt: the shard does not hold the tensor.
std::optional<TensorSlice> shard_slice(const WeightSpec& full_spec, const ModelConfig& full, const WeightShard& s);
// A held tensor's values cut from the full tensor's (zero rows as padding).
std::vector<float> slice_values(const std::vector<float>& full, const WeightSpec& full_spec, const TensorSlice& t);
// The full model's tensor behind a shard's tensor (local layer l is full layer shard_first_layer + l).
std::string full_tensor_name(const std::string& local_name, const ModelConfig& full, const WeightShard& s);
// What the shard holds, under its own names (weight_specs(shard_config(...)), layers from 0); a tensor
// the stage does not need (the embedding past the first stage, the lm_head before the last) is absent.
HostWeights shard_host_weights(const HostWeights& full, const ModelConfig& m, const ArchConfig& a, const WeightShard& s);

// Checks a folder against the list: every tensor present with its shape and a float dtype (BF16, F16, F32);
// an error names the tensor. Extra tensors are ignored (rotary caches of old checkpoints).
void check_checkpoint(const SafetensorsFolder& folder, const ModelConfig& m, const ArchConfig& a);
HostWeights load_host_weights(const SafetensorsFolder& folder, const ModelConfig& m, const ArchConfig& a);
// Writes a Hugging Face folder: config.json (the given JSON) and model.safetensors in bf16.
void write_model_folder(const std::filesystem::path& dir, const nlohmann::json& config, const ModelConfig& m,
                        const ArchConfig& a, const HostWeights& w);

}  // namespace inferlab
