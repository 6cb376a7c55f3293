#pragma once
// The GPU engine's step (kernels/engine) as its kernels run it, for the refined model (sim/kernels.h):
// batch_ops with the ops the engine fuses folded together and every op carrying the launches of the
// engine's kernel for it, launched eagerly or as nodes of a CUDA graph:
//   attn_norm (+ the previous layer's ffn_residual), ffn_norm (+ attn_residual), final_norm (+ the last
//   ffn_residual): one rmsnorm launch each, the residual add fused;
//   rope + kv_cache_write: one launch;
//   qkv_proj, o_proj, gate_up_proj, down_proj, lm_head: bf16 at <= kEngineGemvMaxTokens the streaming GEMV,
//   above it cuBLAS; int8 / int4 / 2:4 the weight-only kernels, in
//   launches of <= 64 tokens;
//   attention: the split-KV decode kernel over the decode rows (new = 1; pieces planned on the context
//   bucket, as the engine does), the paged prefill kernel over the rest (the wgmma rung in varlen mode: each
//   sequence's tiles and work items, sim/kernels.h varlen_prefill_kernels; until 2026-11-29 the flash kernel over
//   the longest of them, which charged a staggered batch of 16 x 128 new tokens after 0..4096 past 46-60% long);
//   embedding, act: one streaming launch each.
// Not counted: the sampler, the host's metadata copy, graph launch itself.
#include <cstdint>
#include <vector>

#include "inferlab/sim/hardware.h"
#include "inferlab/sim/kernels.h"
#include "inferlab/sim/model.h"
#include "inferlab/sim/ops.h"

namespace inferlab {

// The most tokens the engine's dense linear layers run on the streaming GEMV (gemm/gemv.h) rather than cuBLAS.
// Measured on the H100 (experiments/engine_decode.yaml, Llama-2-7B): a decode step takes 5.14 ms at batch 1,
// 5.63 at 4 on the GEMV, but 6.91 ms at 8 on the GEMV against 6.21 at 16 on cuBLAS: from ~5 tokens the GEMV's
// CUDA-core products and X reloads cost more than cuBLAS's tensor cores lose on a thin matrix.
constexpr int64_t kEngineGemvMaxTokens = 4;

// The context a decode step's split-KV kernel is planned for: the next power of two at or above the
// longest context, at least 256 (the engine captures one CUDA graph per bucket).
int64_t decode_context_bucket(int64_t max_context);

std::vector<Op> engine_step_ops(const ModelConfig& model, const Batch& batch, const OpOptions& options,
                                const Hardware& hw, LaunchMode launch);

}  // namespace inferlab
