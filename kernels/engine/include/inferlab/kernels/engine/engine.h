#pragma once
// The GPU engine: a Llama-family decoder (Llama, Mistral, Qwen2) built from the lab's kernels, executing
// one step at a time. A step is sim/ops.h's Batch seen from the GPU: each sequence brings `new` tokens
// after the `past` tokens its KV cache holds (decode: 1; prefill chunk: many; speculative verification:
// γ + 1), all in ONE forward pass:
//   embedding → per layer [attn_norm, qkv_proj, rope (+ the new K/V into the paged cache), attention
//   (decode rows: split-KV kernel; rows with new > 1: varlen flash attention over the paged cache),
//   o_proj, attn_residual + ffn_norm (one fused kernel), gate_up_proj, act (SwiGLU), down_proj] →
//   ffn_residual + final_norm over the rows that need logits → lm_head (fp32 logits) → sampling on the GPU.
// Linear layers: bf16 weights through the streaming GEMV (kernels/gemm/gemv.h) for at most
// kEngineGemvMaxTokens (sim/engine_step.h) tokens and cuBLAS above; int8 / int4 / 2:4 weights (quantized at load) through the weight-only kernels (kernels/gemm).
// KV cache: paged blocks from the one block manager (sim/kv_blocks.h PagedKvManager), one block table for
// every layer. Uniform steps (every sequence brings the same k new tokens with the same number of logit rows:
// decode steps, speculative verification passes) run as CUDA graphs, one per padded batch size, k, logit rows
// and context bucket (captured on first use, after an eager run of that shape), unless `graphs` is off.
// Plain C++ header.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "inferlab/kernels/engine/arch.h"
#include "inferlab/kernels/engine/communicator.h"
#include "inferlab/kernels/engine/weights.h"
#include "inferlab/sim/kv_blocks.h"
#include "inferlab/sim/linear.h"
#include "inferlab/sim/ops.h"

namespace inferlab {

// One device of a sharded engine (Megatron-LM's tensor and pipeline parallelism, weights.h WeightShard's
// rules): it holds shard_config(model, shard) and, per step,
//   first stage:      the vocabulary-parallel embedding (ids outside its slice give zero rows), all-reduced;
//   later stages:     the residual stream received from the previous stage instead;
//   every layer:      the all-reduce of o_proj's and of down_proj's partial sums over the stage's ranks
//                     (before the residual add that follows);
//   not the last:     the pending residual add, then the residual stream sent to the next stage;
//   the last stage:   final norm, lm_head over its vocabulary slice, the slices all-gathered (fp32), the
//                     sampler over the whole vocabulary (every rank of the stage draws the same tokens).
// Every device of the group runs the same steps with the same inputs (each keeps its own KV blocks: the
// same decisions); only the last stage returns tokens and logits. A micro-batched pipeline is the caller
// running a step per micro-batch on every stage (GPipe): stage s's step for micro-batch i overlaps stage
// s + 1's for micro-batch i - 1.
struct EngineParallel {
  WeightShard shard;
  Communicator* tp = nullptr;  // the stage's ranks (size shard.tp, rank shard.tp_rank); needed when tp > 1
  Communicator* pp = nullptr;  // the stages (size shard.pp, rank shard.stage); needed when pp > 1
};

struct EngineOptions {
  std::string weights = "random";  // "random" (seeded, Hugging Face's init) or a Hugging Face model folder
  uint64_t seed = 0;               // random weights
  bool perturb = false;            // random weights: norms and biases away from 1 and 0 (tests)
  std::optional<WeightFormat> weight_format;  // the layer GEMMs (qkv, o, gate_up, down) quantized at load
  int64_t block_size = 16;         // tokens per KV block (a power of two)
  int64_t max_sequences = 256;     // KV slots: rows of the block table
  int64_t max_context = 0;         // tokens one sequence may hold (0: the model's max_position_embeddings)
  int64_t max_step_tokens = 8192;  // new tokens of one step (activation buffers)
  int64_t max_logit_rows = 0;      // positions whose logits one step computes (0: max_sequences)
  int64_t kv_blocks = 0;           // 0: as many as fit in kv_memory_fraction of the memory left
  double kv_memory_fraction = 0.9;
  bool graphs = true;              // CUDA graphs for uniform steps (off when a communicator is not capturable)
  EngineParallel parallel;         // one device of a sharded engine (default: the whole model)
};

struct SamplingParams {
  float temperature = 0.f;  // <= 0: greedy
  int32_t top_k = 0;        // 0: all
  float top_p = 1.f;
  uint64_t seed = 0;        // the draw for a position uses (seed, position): reproducible in any batch
};

struct SequenceInput {
  int slot = 0;                  // KV slot, 0 .. max_sequences - 1; its held tokens are the past
  std::vector<int32_t> tokens;   // the new tokens (at least one)
  int64_t logits = 1;            // how many of the last new tokens get logits (and a sampled token): 0 .. tokens
  SamplingParams sampling;
};

struct StepOutput {
  std::vector<std::vector<int32_t>> tokens;  // per input sequence: one sampled token per logit position (sharded:
                                             // the last stage only; empty rows elsewhere)
  std::vector<float> logits;                 // return_logits: [logit rows, vocab], input order
  double gpu_s = 0;                          // CUDA events around the step (metadata copy included)
  bool graph = false;                        // replayed as a CUDA graph
  Batch batch;                               // the step as sim/ sees it (its predicted twin)
};

struct EngineMemory {
  double weight_bytes = 0, kv_bytes = 0, activation_bytes = 0, free_before = 0, total = 0;
  int64_t kv_blocks = 0;
};

class Engine {
 public:
  // Loads the weights (random or a folder, checked against the config: a missing tensor, a wrong shape or
  // dtype is an error naming the tensor), plans memory (a model that does not fit: how much it needs and
  // how much there is) and allocates everything. Throws inferlab::Error / CudaError.
  Engine(const EngineModel& model, const EngineOptions& options);
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Runs one step. Every check (slots, sizes, context within max_context and the sliding window, KV blocks
  // available) is made before anything changes: a rejected step throws inferlab::Error naming the sequence
  // and the reason, and leaves the engine as it was.
  StepOutput step(const std::vector<SequenceInput>& sequences, bool return_logits = false);

  int64_t held_tokens(int slot) const;      // tokens in the slot's KV cache
  void release(int slot);                   // the sequence ended: its blocks return to the pool
  void truncate(int slot, int64_t tokens);  // keep the first `tokens` (speculative rollback); whole blocks freed
  const PagedKvManager& kv() const;
  // The block manager itself, for a scheduler that drives the engine's KV (sim/scheduler.h): it reserves
  // a sequence's blocks ahead of its tokens; a step then only stores into blocks already held.
  PagedKvManager& kv_blocks();
  const EngineModel& model() const;
  const EngineOptions& options() const;
  const EngineMemory& memory() const;
  int64_t max_context() const;
  // The weights as the engine holds them (bf16 values as floats; quantized formats: what the packed bytes
  // encode), under their Hugging Face names: tests and the CPU reference.
  HostWeights download_weights() const;
  // The number of CUDA graphs captured so far; graphs on or off from the next step on (captured ones are kept).
  int graphs_captured() const;
  void set_graphs(bool on);

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

// The most new tokens per sequence of a step run as a CUDA graph (speculative verification takes gamma + 1).
inline constexpr int64_t kGraphMaxNewTokens = 16;
// The padded batch sizes decode graphs are captured for: 1, 2, 4, 8, then every 8 to 64, every 16 above.
int64_t graph_batch_size(int64_t batch);
// The context bucket a decode step is planned for (the split-KV kernel's pieces): sim/engine_step.h's
// decode_context_bucket, the plan the model charges too.
int64_t context_bucket(int64_t max_context);

}  // namespace inferlab
