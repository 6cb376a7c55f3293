#pragma once
// Attention forward, the ladder (variant names match sim/ops.h's AttentionVariant):
//   naive  S = scale * Q K^T materialized in HBM (cuBLAS batched GEMM), a softmax kernel that
//          writes P over S and the log-sum-exp, O = P V (cuBLAS) — the memory-bound baseline
//          whose bytes the model counts (4 passes over b*h*s_q*s_k scores).
//   flash  one tiled kernel: Q tile in shared memory, K/V tiles streamed through it, scores kept
//          in registers, online softmax, tensor cores (mma.sync m16n8k16); O and the log-sum-exp
//          written once.
// MHA, GQA and MQA through kv_heads: query head h reads KV head h / (heads / kv_heads); K and V
// are never copied per query head. Head dim 64 or 128; bf16 or fp16; causal or not.
//
// Plain C++ header: launchers take the params, device pointers and a stream.
#include <cstddef>
#include <cstdint>

#include <cuda_runtime.h>

#include "inferlab/sim/dtype.h"
#include "inferlab/sim/ops.h"

namespace inferlab {

struct AttentionParams {
  DType dtype = DType::bf16;  // bf16 or fp16 for Q, K, V, O (and the naive scores)
  int64_t batch = 1;
  int64_t heads = 1;          // query heads
  int64_t kv_heads = 1;       // must divide heads
  int64_t seq_q = 1;
  int64_t seq_k = 1;
  int64_t head_dim = 128;     // 64 or 128
  bool causal = false;        // bottom-right aligned: query i sees keys j <= i + seq_k - seq_q
  float scale = 0.f;          // 0: 1 / sqrt(head_dim)

  const void* q = nullptr;    // [batch, seq_q, heads, head_dim]
  const void* k = nullptr;    // [batch, seq_k, kv_heads, head_dim]
  const void* v = nullptr;    // [batch, seq_k, kv_heads, head_dim]
  void* o = nullptr;          // [batch, seq_q, heads, head_dim]
  float* lse = nullptr;       // [batch, heads, seq_q]: log(sum_j exp(scale * q.k_j)) (natural log); -inf for a row with no key
  void* workspace = nullptr;  // naive only: attention_workspace_bytes()
  std::size_t workspace_bytes = 0;

  float softmax_scale() const;
};

// The kernel's shape and the sim/ cost shape (ops.h) are one description seen from two sides:
// seq_q = new tokens, seq_k = past + new; window none. Benchmarks and experiments convert with
// these, so the cost charged to a launch is always attention_cost(cost_shape(launch)).
AttentionShape cost_shape(const AttentionParams& p);
AttentionParams params_for(const AttentionShape& shape, DType dtype);  // pointers left empty

// Throws inferlab::Error naming the problem (dtype, head dim, heads, sizes, missing pointers or
// workspace) before anything is launched. validate_shape checks all but the pointers.
void validate_shape(const AttentionParams& p, AttentionVariant variant);
void validate(const AttentionParams& p, AttentionVariant variant);
std::size_t attention_workspace_bytes(const AttentionParams& p, AttentionVariant variant);
// Device memory the whole call needs: Q, K, V, O, LSE and the workspace.
std::size_t attention_device_bytes(const AttentionParams& p, AttentionVariant variant);

// The one entry point. Every launch is checked and wrapped in an NVTX range "attention/<variant>".
void attention_forward(const AttentionParams& p, AttentionVariant variant, cudaStream_t stream);

// CPU reference in double precision on float inputs laid out as above; o and lse are written.
void attention_reference(const AttentionParams& shape, const float* q, const float* k, const float* v, float* o,
                         float* lse);

}  // namespace inferlab
