#pragma once
// The small operators of a Llama-family decoder layer (names = the sim/ops.h op names, also their NVTX
// ranges), each beside a CPU reference (layers_host.h, layers_reference.cpp, double precision):
//   embedding        out[t] = table[ids[t]]
//   rmsnorm          fused residual add + RMSNorm (HF LlamaRMSNorm semantics, rounding as HF bf16 does):
//                      residual[t] = dtype(residual[t] + add[t])            (when add is given)
//                      out[t]      = dtype(dtype(residual[t] * rsqrt(mean(residual[t]^2) + eps)) * weight)
//                    (attn_norm + attn_residual / ffn_norm + ffn_residual / final_norm of sim/ops.h)
//   rope             rotary embedding of Q and K (rotate_half convention: pairs (i, i + D/2)), the new K and
//                    V written into the KV cache in the same kernel (the sim/ops.h ops rope + kv_cache_write)
//   act              SwiGLU: out = silu(gate) * up
//   sample           greedy argmax or seeded sampling (temperature, top-k, top-p) of fp32 logits
// Plain C++ header: launchers take a params struct, device pointers and a stream, validate on the host and
// throw inferlab::Error naming the problem before any launch. Design and measurements: kernels/layers/NOTES.md.
#include <cstddef>
#include <cstdint>

#include <cuda_runtime.h>

#include "inferlab/kernels/kvcache/kvcache.h"
#include "inferlab/kernels/layers/layers_host.h"
#include "inferlab/sim/dtype.h"

namespace inferlab {

struct EmbeddingParams {
  DType dtype = DType::bf16;  // bf16 or fp16 (table and out)
  int64_t tokens = 0, hidden = 0, vocab = 0;
  const int32_t* ids = nullptr;  // [tokens]; an id outside [first_id, first_id + vocab) writes a zero row (and
                                 // never reads outside)
  const void* table = nullptr;   // [vocab, hidden]: the rows of ids first_id .. first_id + vocab - 1
  void* out = nullptr;           // [tokens, hidden]
  int64_t first_id = 0;          // a vocabulary-parallel slice's first id (tensor parallelism; else 0)
};
void embedding(const EmbeddingParams& p, cudaStream_t stream);

struct RmsNormParams {
  DType dtype = DType::bf16;  // bf16 or fp16 (residual, add, weight, out)
  int64_t rows = 0;           // rows processed (see row_index)
  int64_t hidden = 0;         // 1 .. 32768 (vectorized when hidden % 8 == 0 and the pointers are 16-byte aligned)
  float eps = 1e-5f;
  void* residual = nullptr;       // [*, hidden] the residual stream: read, and written back when add is given
  const void* add = nullptr;      // [*, hidden] or nullptr: added into residual first (attention / MLP output)
  const void* weight = nullptr;   // [hidden]
  void* out = nullptr;            // [rows, hidden] normalized; may be `add` itself when row_index is nullptr (a row
                                  // is read whole before it is written)
  // nullptr: row i of out is row i of residual/add. Otherwise row i of out is row row_index[i] of residual/add
  // (device int32 [rows]); this is the final norm over only the rows whose logits are needed. With row_index the
  // residual is not written back, and an index outside [0, source_rows) gives a zero row (nothing is read).
  const int32_t* row_index = nullptr;
  int64_t source_rows = 0;        // rows of residual/add; required (> 0) with row_index
  const char* name = "rmsnorm";   // the NVTX range: the sim/ops.h op, "attn_norm", "ffn_norm" or "final_norm"
};
void rmsnorm(const RmsNormParams& p, cudaStream_t stream);

struct RopeParams {
  DType dtype = DType::bf16;  // bf16 or fp16 (qkv, bias, q_out and the cache)
  int64_t tokens = 0, heads = 0, kv_heads = 0, head_dim = 0;  // head_dim even, <= 256 (vectorized when % 16 == 0)
  const void* qkv = nullptr;        // [tokens, (heads + 2 * kv_heads) * head_dim]: q | k | v of each token
  const void* bias = nullptr;       // [(heads + 2 * kv_heads) * head_dim] or nullptr (Qwen2's q/k/v biases), added
                                    // (rounded to dtype, as nn.Linear's output is) before rotating
  const int32_t* positions = nullptr;  // [tokens] absolute position of each token
  const float* inv_freq = nullptr;     // [head_dim / 2] from rope_inv_freq
  void* q_out = nullptr;               // [tokens, heads, head_dim] rotated queries
  // K (rotated) and V (as is) of token t go to row slots[t] of the cache's pools (paged: block * block_size +
  // offset; contiguous: sequence * max_len + position); slots[t] < 0: not written (padding rows of a graph), nor is
  // a slot beyond the pool.
  KvCacheView cache;                   // only k, v, kv_heads, head_dim, dtype (and the pool size) are used
  const int32_t* slots = nullptr;      // [tokens]
};
// Angle = float(position) * inv_freq[i] in fp32 (as HF computes it), then accurate sin/cos (not the fast
// intrinsics): the rotation itself in fp32, rounded once to dtype.
void rope(const RopeParams& p, cudaStream_t stream);

struct SwiGluParams {
  DType dtype = DType::bf16;
  int64_t tokens = 0, intermediate = 0;
  const void* gate_up = nullptr;  // [tokens, 2 * intermediate]: gate columns [0, I), up columns [I, 2I)
  void* out = nullptr;            // [tokens, intermediate] = silu(gate) * up, computed in fp32, rounded once
};
void swiglu(const SwiGluParams& p, cudaStream_t stream);

// Sampling, one row of logits per sequence. Row r: temperature[r] <= 0 -> greedy (argmax, lowest index on
// ties, NaN never chosen; -1 when the whole row is NaN); else softmax(logits / temperature) restricted to the
// top_k[r] largest (0 = all; ties with the top_k-th value kept, as HF's TopKLogitsWarper) and then to the
// smallest set of largest-probability tokens whose mass reaches top_p[r] (1 = all; ties kept), renormalised,
// and one token drawn with a counter-based generator (Philox4x32-10) keyed by (seed[r], offset[r]): the same row
// gives the same token whatever batch it is in, and a new draw needs a new offset (e.g. the sequence's position).
// NaN and -inf logits are never drawn; +inf counts as the largest finite float; a row with nothing else is
// greedy. top_p >= 1 (or NaN) keeps all, <= 0 only the largest value. The exact distribution is
// sample_distribution_reference (layers_host.h); the weights are exp2 in fp32 summed in 2^-40 fixed point.
struct SampleParams {
  int64_t rows = 0, vocab = 0;          // rows <= 65535, vocab <= 2^21
  const float* logits = nullptr;        // [rows, vocab] fp32
  const float* temperature = nullptr;   // [rows]
  const int32_t* top_k = nullptr;       // [rows]
  const float* top_p = nullptr;         // [rows], in (0, 1]
  const uint64_t* seed = nullptr;       // [rows]
  const uint64_t* offset = nullptr;     // [rows]
  int32_t* out = nullptr;               // [rows] token ids
  // sample_workspace_bytes(rows, vocab): zero-filled once before its first use (cudaMemset); every launch leaves
  // it zeroed (the block that merges a row's pieces resets the row's counter), so it is reused without clearing.
  void* workspace = nullptr;
  std::size_t workspace_bytes = 0;
};
std::size_t sample_workspace_bytes(int64_t rows, int64_t vocab);
void sample(const SampleParams& p, cudaStream_t stream);

}  // namespace inferlab
