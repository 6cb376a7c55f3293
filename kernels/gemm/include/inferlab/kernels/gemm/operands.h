#pragma once
// Device copies of one linear layer's inputs, ready for linear(): the packed weight, the activations
// in the format's input type (bf16; fp16 for fp16; fp8 e4m3 quantized per tensor for fp8), the
// output and a zeroed split-k workspace. Used by the GPU tests and the measurements alike.
#include <cstdint>
#include <vector>

#include "inferlab/kernels/common/device_buffer.h"
#include "inferlab/kernels/gemm/linear.h"

namespace inferlab {

class LinearOperands {
 public:
  // x: [m, k] activations (float; rounded or quantized here to the format's input type). split_k: 0 the
  // plan's, else LinearParams::split_k; kernel, reduce: LinearParams::kernel, ::split_reduce (weight-only formats).
  LinearOperands(const PackedWeight& w, const std::vector<float>& x, int64_t m, int sm_count, int64_t split_k = 0,
                 WeightOnlyKernel kernel = WeightOnlyKernel::automatic, SplitReduce reduce = SplitReduce::automatic);
  LinearOperands(const LinearOperands&) = delete;
  LinearOperands& operator=(const LinearOperands&) = delete;

  const LinearParams& params() const { return params_; }
  // The activations as the kernel sees them (for a reference): rounded to bf16/fp16, or fp8-dequantized.
  const std::vector<float>& x_seen() const { return x_seen_; }
  void poison_output();              // NaN in every output element
  std::vector<float> output() const;  // y [m, n] as floats
  std::vector<uint8_t> workspace() const;  // its bytes (all zero between launches)

 private:
  LinearParams params_;
  std::vector<float> x_seen_;
  DeviceBuffer<uint8_t> values_, scales_, metadata_, x_, workspace_;
  DeviceBuffer<float> x_scale_;
  DeviceBuffer<uint16_t> y_;
};

}  // namespace inferlab
