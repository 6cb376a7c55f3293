#pragma once
// Device memory of a served model: weights, KV cache, activations; what fits on a GPU; and the KV
// memory that contiguous max-length reservation and paged blocks set aside for a set of sequences.
//
// KV cache: batch * tokens * 2 (K and V) * layers * kv_heads * head_dim * bytes(kv dtype).
// For Llama-2-7B in fp16, batch 1 x 4096 tokens: 4096 * 2 * 32 * 32 * 128 * 2 = 2 GiB exactly.
// A model with a sliding window keeps only the last `window` tokens (rolling buffer, as Mistral's
// reference implementation) unless rolling_window is off.
//
// Activations: the peak live activation memory of the largest forward pass the server runs: either
// the decode step of the whole batch, or one prefill chunk of `prefill_chunk` tokens (0: the whole
// prompt in one pass) against the rest of the context. Per pass: the largest working set of a single
// operator (its distinct activation and score tensors, from ops.h) plus the residual stream.
// Framework workspaces and allocator fragmentation are not counted.
#include <cstdint>
#include <string>
#include <vector>

#include "inferlab/sim/hardware.h"
#include "inferlab/sim/model.h"
#include "inferlab/sim/ops.h"

namespace inferlab {

struct MemoryOptions {
  Precision precision;
  AttentionVariant attention = AttentionVariant::flash;
  int64_t prefill_chunk = 8192;  // tokens per prefill pass; 0 = whole prompt at once
  bool rolling_window = true;
  double reserve_bytes = 0;      // set aside on the device (CUDA context, framework workspace)
};

double weight_bytes(const ModelConfig& m, DType weight);
double kv_bytes_per_token(const ModelConfig& m, DType kv);  // all layers, K and V
int64_t kv_tokens_stored(const ModelConfig& m, int64_t tokens, bool rolling_window = true);
double kv_cache_bytes(const ModelConfig& m, int64_t batch, int64_t tokens, DType kv, bool rolling_window = true);
// Peak live activation bytes of one forward step (see above).
double step_activation_bytes(const ModelConfig& m, const Step& s, const OpOptions& o);

struct MemoryBreakdown {
  double weights = 0, kv_cache = 0, activations = 0, reserve = 0;
  int64_t kv_tokens_per_sequence = 0;
  double total() const { return weights + kv_cache + activations + reserve; }
};
MemoryBreakdown memory_breakdown(const ModelConfig& m, int64_t batch, int64_t context, const MemoryOptions& o);

// Largest batch (at `context` tokens each) or context (at `batch` sequences) whose total fits in
// `capacity` bytes; 0 when even the smallest does not fit. max_context searches up to `limit` tokens.
int64_t max_batch(const ModelConfig& m, int64_t context, const MemoryOptions& o, double capacity);
int64_t max_context(const ModelConfig& m, int64_t batch, const MemoryOptions& o, double capacity,
                    int64_t limit = int64_t(1) << 24);

// KV memory set aside for sequences holding seq_tokens[i] tokens each.
struct KvReservation {
  std::string scheme;       // "contiguous" or "paged"
  int64_t block_size = 0;   // tokens per block (paged); max length (contiguous)
  int64_t blocks = 0;       // paged: blocks allocated
  double reserved = 0;      // bytes set aside
  double used = 0;          // bytes holding tokens
  double wasted() const { return reserved - used; }
  double waste_fraction() const { return reserved > 0 ? wasted() / reserved : 0; }
};
// Each sequence reserves max_len tokens up front (what a server without paging must do).
KvReservation contiguous_kv(const ModelConfig& m, DType kv, const std::vector<int64_t>& seq_tokens, int64_t max_len);
// Each sequence holds ceil(tokens / block) blocks; the waste is the unfilled tail of the last block.
KvReservation paged_kv(const ModelConfig& m, DType kv, const std::vector<int64_t>& seq_tokens, int64_t block_size);

}  // namespace inferlab
