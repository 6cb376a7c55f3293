#pragma once
// Device memory of a served model: weights, KV cache, activations; what fits on a GPU; and the KV
// memory that contiguous max-length reservation and paged blocks set aside for a set of sequences.
//
// KV cache: batch * tokens * layers * (2 * kv_heads * head_dim) * bytes(kv dtype); MLA caches
// kv_lora_rank + qk_rope_head_dim values per token and layer instead (DeepSeek-V3: 576 in place of
// 2 * 128 * 128 = 32768). For Llama-2-7B in fp16, batch 1 x 4096 tokens:
// 4096 * 32 * 2 * 32 * 128 * 2 = 2 GiB exactly.
// A layer with a sliding window keeps only the last `window` tokens (rolling buffer, as Mistral's
// reference implementation; vLLM frees the blocks that leave the window) unless rolling_window is
// off; Gemma-2's global layers keep every token. The reservations (contiguous, paged) follow the same
// rule, so the KV cache, the paged blocks and the largest batch or context that fits agree.
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
double kv_bytes_per_token(const ModelConfig& m, DType kv);  // all layers, K and V (or MLA's latent)
// Tokens a sequence of `tokens` tokens keeps in its most-holding layer: all of them, or the window
// when every layer is windowed and rolling_window is on.
int64_t kv_tokens_stored(const ModelConfig& m, int64_t tokens, bool rolling_window = true);
// Tokens held summed over the layers (windowed layers hold at most the window when rolling).
int64_t kv_layer_tokens(const ModelConfig& m, int64_t tokens, bool rolling_window = true);
double kv_cache_bytes(const ModelConfig& m, int64_t batch, int64_t tokens, DType kv, bool rolling_window = true);
// Peak live activation bytes of one forward step (see above).
double step_activation_bytes(const ModelConfig& m, const Step& s, const OpOptions& o);

struct MemoryBreakdown {
  double weights = 0, kv_cache = 0, activations = 0, reserve = 0;
  int64_t kv_tokens_per_sequence = 0;  // kv_tokens_stored
  int64_t kv_layer_tokens = 0;         // per sequence, summed over the layers
  double total() const { return weights + kv_cache + activations + reserve; }
};
MemoryBreakdown memory_breakdown(const ModelConfig& m, int64_t batch, int64_t context, const MemoryOptions& o);

// Largest batch (at `context` tokens each) or context (at `batch` sequences) whose total fits in
// `capacity` bytes; 0 when even the smallest does not fit. max_context searches up to `limit` tokens
// (give the model's max positions: a rolling window would let memory fit any context).
int64_t max_batch(const ModelConfig& m, int64_t context, const MemoryOptions& o, double capacity);
int64_t max_context(const ModelConfig& m, int64_t batch, const MemoryOptions& o, double capacity,
                    int64_t limit = int64_t(1) << 24);

// KV memory set aside for sequences holding seq_tokens[i] tokens each (or `count` sequences of
// `tokens` each, in closed form). With rolling_window a windowed layer holds at most its window.
struct KvReservation {
  std::string scheme;       // "contiguous" or "paged"
  int64_t block_size = 0;   // tokens per block (paged); max length (contiguous)
  int64_t blocks = 0;       // paged: blocks allocated
  double reserved = 0;      // bytes set aside
  double used = 0;          // bytes holding tokens
  double wasted() const { return reserved - used; }
  double waste_fraction() const { return reserved > 0 ? wasted() / reserved : 0; }
};
// Each sequence reserves max_len tokens up front (what a server without paging must do); a windowed
// layer's rolling buffer reserves min(max_len, window).
KvReservation contiguous_kv(const ModelConfig& m, DType kv, const std::vector<int64_t>& seq_tokens, int64_t max_len,
                            bool rolling_window = false);
KvReservation contiguous_kv(const ModelConfig& m, DType kv, int64_t count, int64_t tokens, int64_t max_len,
                            bool rolling_window = false);
// Each sequence holds ceil(tokens / block) blocks; the waste is the unfilled tail of the last block.
// (A model with windowed and global layers has a pool of blocks per kind of layer, as vLLM's hybrid
// allocator: `blocks` counts those of every pool.)
KvReservation paged_kv(const ModelConfig& m, DType kv, const std::vector<int64_t>& seq_tokens, int64_t block_size,
                       bool rolling_window = false);
KvReservation paged_kv(const ModelConfig& m, DType kv, int64_t count, int64_t tokens, int64_t block_size,
                       bool rolling_window = false);

}  // namespace inferlab
