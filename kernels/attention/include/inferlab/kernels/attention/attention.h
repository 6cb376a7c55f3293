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

// The flash rungs, side by side in one process (no environment switches): each is a named kernel with
// its own test over the same shapes (tests/kernels/test_attention.cpp, test_prefill.cpp).
//   automatic  on compute capability 9.0 (built for sm_90a) the overlapped kernel for dense attention
//              (measured 1.35-1.6x the wgmma kernel, kernels/attention/NOTES.md) and the wgmma kernel
//              for the varlen prefill; the mma.sync kernel elsewhere
//   mma        the mma.sync m16n8k16 kernel (flash_fwd.cu), any GPU from compute capability 8.0
//   wgmma      the persistent wgmma kernel; an inferlab::Error on a GPU (or a build) without it
//   overlapped the wgmma kernel with TMA copies and the softmax of key tile j overlapped with the
//              P V product of tile j - 1 (flash_fwd_sm90_overlap.cu); dense attention only (the
//              varlen prefill refuses it), compute capability 9.0 as wgmma
enum class FlashKernel { automatic, mma, wgmma, overlapped };
// The mma.sync kernel's tile at head dim 128 (BM x BN x warps): planned is the measured choice
// (DefaultTile, flash_fwd.cu, kernels/attention/NOTES.md); the others are the candidates it was chosen
// from, kept so that a benchmark times them side by side.
enum class MmaTile { planned, bm128_bn32_w4, bm64_bn64_w4, bm128_bn64_w8 };
const char* flash_kernel_name(FlashKernel k);
const char* mma_tile_name(MmaTile t);

struct FlashOptions {
  FlashKernel kernel = FlashKernel::automatic;
  MmaTile mma_tile = MmaTile::planned;  // mma at head dim 128 only (validate says so otherwise)
  // The wgmma kernel's persistent grid: at most this many CTAs (0: one per SM). Small tests set it so
  // that every CTA takes several work items from the counter.
  int max_ctas = 0;
};

// The kernel a launch with these options runs on the current device (varlen: the prefill of prefill.h):
// automatic resolved; wgmma or overlapped where it is not available throws inferlab::Error naming why.
FlashKernel resolve_flash_kernel(const FlashOptions& o, bool varlen = false);

struct AttentionParams {
  DType dtype = DType::bf16;  // bf16 or fp16 for Q, K, V, O (and the naive scores)
  int64_t batch = 1;
  int64_t heads = 1;          // query heads
  int64_t kv_heads = 1;       // must divide heads
  int64_t seq_q = 1;
  int64_t seq_k = 1;
  int64_t head_dim = 128;     // 64, 96, 128 or 256; 96 and 256 on the overlapped rung only (another rung refuses
                              // them at launch, before any kernel runs)
  bool causal = false;        // bottom-right aligned: query i sees keys j <= i + seq_k - seq_q
  float scale = 0.f;          // 0: 1 / sqrt(head_dim); else positive and finite

  const void* q = nullptr;    // [batch, seq_q, heads, head_dim]
  const void* k = nullptr;    // [batch, seq_k, kv_heads, head_dim]
  const void* v = nullptr;    // [batch, seq_k, kv_heads, head_dim]
  void* o = nullptr;          // [batch, seq_q, heads, head_dim]
  float* lse = nullptr;       // [batch, heads, seq_q]: log(sum_j exp(scale * q.k_j)) (natural log); -inf for a row with no key
  void* workspace = nullptr;  // naive only: attention_workspace_bytes()
  std::size_t workspace_bytes = 0;
  FlashOptions flash;         // flash only: which rung runs

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
