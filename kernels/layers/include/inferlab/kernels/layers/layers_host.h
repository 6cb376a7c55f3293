#pragma once
// The host half of kernels/layers (plain C++, built with or without CUDA): the RoPE frequencies and
// the CPU references of every operator in layers.h. layers.h includes this header.
#include <cstdint>
#include <string>
#include <vector>

#include "inferlab/sim/dtype.h"

namespace inferlab {

// The RoPE frequencies inv_freq[i], i < head_dim / 2, computed on the host in fp32 exactly as Hugging Face
// transformers computes them (modeling_rope_utils, on the CPU, every operation an fp32 tensor operation):
//   default  inv = 1 / theta^(2i/d)                      (the power correctly rounded to fp32)
//   linear   inv / factor
//   llama3   Llama-3.1's wavelength-dependent scaling: wavelen = 2π / inv; wavelen > original / low_freq_factor:
//            inv / factor; wavelen < original / high_freq_factor: inv; between: (1 - s) inv / factor + s inv
//            with s = (original / wavelen - low_freq_factor) / (high_freq_factor - low_freq_factor)
// Any other rope_type throws inferlab::Error naming it; so do an odd or non-positive head_dim, theta <= 0,
// factor <= 0 and (llama3) high_freq_factor <= low_freq_factor or original_max_positions <= 0.
struct RopeScaling {
  std::string type = "default";  // "default", "linear", "llama3"
  double factor = 1.0;
  double low_freq_factor = 1.0, high_freq_factor = 4.0;
  int64_t original_max_positions = 8192;
};
std::vector<float> rope_inv_freq(int64_t head_dim, double theta, const RopeScaling& scaling);

// ---------------------------------------------------------------- CPU references
// Double precision on float inputs (already rounded to the dtype by the caller), the layouts of layers.h.
// `round` (bf16 or fp16) rounds at exactly the points where the kernel rounds, named in each comment, so a
// kernel is compared with "the reference rounded the same way"; fp32 rounds nowhere but the float output.

// out[t] = table[ids[t]]; an id outside [0, vocab) gives a zero row.
void embedding_reference(int64_t tokens, int64_t hidden, int64_t vocab, const int32_t* ids, const float* table,
                         float* out);

// Rounds: residual[t] = round(float(residual[t]) + float(add[t])) (as the kernel and HF's bf16 add: one fp32 add,
// then the dtype), n = round(x * rsqrt(mean(x^2) + eps)) (the variance and rsqrt in double), out = round(weight * n).
// row_index (or nullptr) and source_rows as in RmsNormParams; with row_index the residual is not written.
void rmsnorm_reference(DType round, int64_t rows, int64_t hidden, double eps, float* residual, const float* add,
                       const float* weight, const int32_t* row_index, int64_t source_rows, float* out);

// q_out [tokens, heads, head_dim]; k_out, v_out [tokens, kv_heads, head_dim]: what the kernel writes to the cache
// rows of each token. Rounds: x = round(qkv + bias) (when bias is given), then the rotated value once; the angle is
// the fp32 product float(position) * inv_freq[i], its sin and cos in double.
void rope_reference(DType round, int64_t tokens, int64_t heads, int64_t kv_heads, int64_t head_dim, const float* qkv,
                    const float* bias, const int32_t* positions, const float* inv_freq, float* q_out, float* k_out,
                    float* v_out);

// out [tokens, intermediate] = round(silu(gate) * up), gate_up [tokens, 2 * intermediate].
void swiglu_reference(DType round, int64_t tokens, int64_t intermediate, const float* gate_up, float* out);

// The greedy token of a row: the largest value, the lowest index on ties, NaN never chosen; -1 when every
// value is NaN.
int32_t argmax_reference(const float* logits, int64_t vocab);

// The exact distribution a row samples from (sample() in layers.h), probabilities [vocab]:
//   temperature <= 0: all mass on argmax_reference (all zero when it is -1);
//   else over the values that are neither NaN nor -inf (+inf counts as the largest finite float):
//   w_i = exp((l_i - max) / temperature); top_k > 0 keeps the values >= the top_k-th largest (ties at the
//   boundary kept); top_p < 1 then keeps the values >= l_(m), m the smallest count of largest values whose w
//   sum reaches top_p times the sum over the top-k set (ties kept); renormalised. No finite value: as greedy.
std::vector<double> sample_distribution_reference(const float* logits, int64_t vocab, float temperature, int32_t top_k,
                                                  float top_p);

}  // namespace inferlab
