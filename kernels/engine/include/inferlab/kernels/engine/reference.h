#pragma once
// The CPU reference forward of a Llama-family decoder (Eigen, double precision): the logits of every
// position of one token sequence, teacher-forced (causal, positions 0..T-1), from host weights. Tiny
// configs only (tests). With `round_bf16` the activations are rounded to bf16 where Hugging Face's bf16
// forward rounds them (after every linear, norm, RoPE, attention, activation and residual add): that
// "plain bf16 implementation" is what the engine's tolerances are derived from (its error against the
// double reference, doubled), as FlashAttention's tests do. Plain C++.
#include <cstdint>
#include <vector>

#include "inferlab/kernels/engine/arch.h"
#include "inferlab/kernels/engine/weights.h"

namespace inferlab {

// logits [tokens.size(), vocab], row-major.
std::vector<double> reference_forward(const ModelConfig& m, const ArchConfig& a, const HostWeights& w,
                                      const std::vector<int32_t>& tokens, bool round_bf16 = false);

}  // namespace inferlab
