#pragma once
// The engine's state (engine.h's Engine::Impl), shared by its three source files:
//   device_weights.cpp  the weights on the GPU (random or from a folder, quantized at load)
//   forward.cpp         the launches of one forward pass over a step's metadata
//   engine.cpp          memory plan, step metadata, KV blocks, CUDA graphs, timing
#include <cstdint>
#include <map>
#include <tuple>
#include <memory>
#include <utility>
#include <vector>

#include <cuda_runtime.h>

#include "inferlab/kernels/common/device_buffer.h"
#include "inferlab/kernels/engine/engine.h"

namespace inferlab {

// One layer GEMM's weight on the device, in its format (kernels/gemm/quant.h layouts): bf16 [n, k]
// row-major, or the packed values with their scales / metadata.
struct LinearWeight {
  WeightFormat format = WeightFormat::bf16;
  int64_t n = 0, k = 0;
  DeviceBuffer<uint8_t> values, scales, metadata;
  std::size_t bytes() const { return values.bytes() + scales.bytes() + metadata.bytes(); }
};

struct LayerWeights {
  DeviceBuffer<uint16_t> attn_norm, ffn_norm;  // [hidden] bf16
  DeviceBuffer<uint16_t> qkv_bias;             // [(heads + 2 kv_heads) head_dim] bf16, Qwen2 only
  LinearWeight qkv;                            // [q | k | v rows, hidden]: q_proj, k_proj, v_proj stacked
  LinearWeight o;                              // [hidden, heads head_dim]
  LinearWeight gate_up;                        // [gate | up rows, hidden]: gate_proj, up_proj stacked
  LinearWeight down;                           // [hidden, intermediate]
};

struct DeviceWeights {
  DeviceBuffer<uint16_t> embed;       // [vocab, hidden] bf16
  DeviceBuffer<uint16_t> final_norm;  // [hidden]
  DeviceBuffer<uint16_t> lm_head;     // [vocab, hidden]; empty when tied to the embedding
  std::vector<LayerWeights> layers;
  std::size_t bytes = 0;
  const uint16_t* lm_head_ptr() const { return lm_head.size() ? lm_head.get() : embed.get(); }
};

// The device bytes the weights will take in a format (planned before anything is allocated).
// `m` is what one device holds (weights.h shard_config); the embedding and the lm_head (with the final norm)
// counted only where held.
std::size_t planned_weight_bytes(const ModelConfig& m, const ArchConfig& a, std::optional<WeightFormat> f,
                                 bool embedding = true, bool head = true);
// The whole model's weights, or the slice o.parallel.shard holds (weights.h shard_slice).
DeviceWeights load_device_weights(const EngineModel& em, const EngineOptions& o, cudaStream_t stream);
HostWeights download_device_weights(const EngineModel& em, const EngineOptions& o, const DeviceWeights& w);

// Where each array of a step's metadata lives (byte offsets into one buffer, host and device alike);
// CUDA graphs capture the device addresses, so a graph's shape fixes its layout.
struct MetaLayout {
  std::size_t tokens, positions, slots, context_lens, block_table, q_start, logit_rows;
  std::size_t temperature, top_k, top_p, seed, offset, total;
  int64_t table_width = 0;
};
MetaLayout meta_layout(int64_t tokens, int64_t sequences, int64_t table_width, int64_t prefill_sequences, int64_t rows);

// One step's shape as the forward pass needs it (sequences ordered decode rows first).
struct StepShape {
  int64_t tokens = 0, sequences = 0, decode_sequences = 0, logit_rows = 0;
  int64_t prefill_max_q = 0, prefill_max_context = 0;
  int64_t decode_context_bucket = 0;  // DecodeParams::max_context of the decode rows
  MetaLayout layout;
};

// A CUDA graph's shape: padded batch, new tokens and logit rows per sequence, context bucket.
struct GraphKey {
  int64_t batch, tokens, logits, bucket;
  bool operator<(const GraphKey& o) const {
    return std::tie(batch, tokens, logits, bucket) < std::tie(o.batch, o.tokens, o.logits, o.bucket);
  }
};

struct Engine::Impl {
  EngineModel em;     // the whole model
  ModelConfig local;  // what this device holds and runs (weights.h shard_config; em.model when not sharded)
  EngineOptions opt;
  int64_t first_token = 0;  // the vocabulary slice's first id (tensor parallelism)
  EngineMemory mem;
  int64_t max_context = 0, table_width = 0, max_logit_rows = 0;
  int sm_count = 0;
  cudaStream_t stream = nullptr;
  cudaEvent_t start = nullptr, stop = nullptr;
  DeviceWeights w;
  DeviceBuffer<float> inv_freq;        // [head_dim / 2]
  DeviceBuffer<uint8_t> kv;            // [layers][k | v][blocks][block_size][kv_heads][head_dim] bf16
  std::unique_ptr<PagedKvManager> blocks;
  // Activations, sized for max_step_tokens (T) and max_logit_rows (R).
  DeviceBuffer<uint16_t> h, x, y, qkv, q, attn, gate_up, act, x_final;
  DeviceBuffer<float> logits, lse;    // logits [R, whole vocabulary]
  DeviceBuffer<float> logits_slice, logits_gathered;  // tp > 1, last stage: [R, slice], [tp, R, slice]
  DeviceBuffer<uint16_t> ones;        // [hidden] 1.0: the norm weight of a stage's closing residual add (pp > 1)
  DeviceBuffer<int32_t> sampled;
  DeviceBuffer<uint8_t> meta, decode_ws, prefill_ws, linear_ws, sample_ws, cublas_ws;
  uint8_t* meta_host = nullptr;        // pinned mirror of `meta`
  std::size_t meta_bytes = 0, linear_ws_bytes = 0;
  std::map<GraphKey, cudaGraphExec_t> graphs;

  void forward(const StepShape& s);  // forward.cpp: every launch of one step on `stream`
  bool sharded() const { return !opt.parallel.shard.whole(); }
};

}  // namespace inferlab
