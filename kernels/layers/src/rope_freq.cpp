// rope_inv_freq: Hugging Face transformers' RoPE frequencies (modeling_rope_utils: _compute_default_rope_parameters,
// _compute_linear_scaling_rope_parameters, _compute_llama3_parameters), operation by operation in fp32 as torch
// computes them on the CPU: each tensor operation rounds to fp32, a Python scalar operand is first cast to fp32,
// `scalar / tensor` is `tensor.reciprocal() * scalar`. The one operation that is not correctly rounded in torch is
// the power (SLEEF's powf, within 1 ulp); here it is the correctly rounded fp32 power (through double), so an
// element may differ from torch's by 1 ulp where SLEEF's result does.
#include <cmath>

#include "inferlab/kernels/layers/layers_host.h"
#include "inferlab/sim/error.h"

namespace inferlab {
namespace {

// Each call is one fp32 tensor operation: exact result rounded once.
float f32_div(float a, float b) { return a / b; }
float f32_mul(float a, float b) { return a * b; }
float f32_sub(float a, float b) { return a - b; }
float f32_add(float a, float b) { return a + b; }
float f32_reciprocal(float a) { return 1.0f / a; }

}  // namespace

std::vector<float> rope_inv_freq(int64_t head_dim, double theta, const RopeScaling& s) {
  if (head_dim <= 0 || head_dim % 2 != 0)
    throw Error("rope_inv_freq: head_dim must be positive and even, got " + std::to_string(head_dim));
  if (!(theta > 0) || !std::isfinite(theta)) throw Error("rope_inv_freq: rope_theta must be positive, got " + std::to_string(theta));
  const bool linear = s.type == "linear", llama3 = s.type == "llama3";
  if (!linear && !llama3 && s.type != "default")
    throw Error("rope_inv_freq: unsupported rope_type '" + s.type + "' (supported: default, linear, llama3)");
  if ((linear || llama3) && !(s.factor > 0))
    throw Error("rope_inv_freq: rope_scaling factor must be positive, got " + std::to_string(s.factor));
  if (llama3 && !(s.high_freq_factor > s.low_freq_factor && s.low_freq_factor > 0))
    throw Error("rope_inv_freq: llama3 rope_scaling needs 0 < low_freq_factor < high_freq_factor, got " +
                std::to_string(s.low_freq_factor) + " and " + std::to_string(s.high_freq_factor));
  if (llama3 && s.original_max_positions <= 0)
    throw Error("rope_inv_freq: llama3 rope_scaling needs original_max_position_embeddings > 0, got " +
                std::to_string(s.original_max_positions));

  const int64_t half = head_dim / 2;
  const float base = float(theta), dim = float(head_dim);
  std::vector<float> inv(static_cast<std::size_t>(half));
  for (int64_t i = 0; i < half; ++i) {
    // 1.0 / (base ** (arange(0, dim, 2).float() / dim))
    const float exponent = f32_div(float(2 * i), dim);
    const float power = float(std::pow(double(base), double(exponent)));
    inv[std::size_t(i)] = f32_reciprocal(power);
  }
  if (linear) {
    for (float& f : inv) f = f32_div(f, float(s.factor));  // inv_freq /= factor
  } else if (llama3) {
    const float factor = float(s.factor), low = float(s.low_freq_factor);
    const float old_len = float(s.original_max_positions);
    const float low_wavelen = float(double(s.original_max_positions) / s.low_freq_factor);
    const float high_wavelen = float(double(s.original_max_positions) / s.high_freq_factor);
    const float two_pi = float(2 * 3.141592653589793);  // 2 * math.pi, cast to fp32 as a scalar operand
    const float span = float(s.high_freq_factor - s.low_freq_factor);
    for (float& f : inv) {
      const float wavelen = f32_mul(f32_reciprocal(f), two_pi);                 // 2 * math.pi / inv_freq
      const float scaled = wavelen > low_wavelen ? f32_div(f, factor) : f;      // torch.where(wavelen > low, inv / factor, inv)
      const float smooth = f32_div(f32_sub(f32_mul(f32_reciprocal(wavelen), old_len), low), span);
      const float smoothed = f32_add(f32_div(f32_mul(f32_sub(1.0f, smooth), scaled), factor), f32_mul(smooth, scaled));
      const bool medium = !(wavelen < high_wavelen) && !(wavelen > low_wavelen);
      f = medium ? smoothed : scaled;
    }
  }
  return inv;
}

}  // namespace inferlab
