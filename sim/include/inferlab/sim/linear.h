#pragma once
// A linear layer Y[m, n] = X[m, k] · W[n, k]ᵀ (nn.Linear: n outputs, k inputs, m tokens) with its
// weight stored in one of the lab's formats, as the model sees it: the bytes of every tensor it
// moves (the weight's values with their scales, zero points and sparsity metadata listed apart)
// and its FLOPs. kernels/gemm implements each format with exactly this storage; its benchmarks and
// the compression experiment are charged with this cost (no other place computes it).
//
//   format    weight storage (n × k)                                   activations   kernel
//   bf16      2 B per value                                            bf16          cuBLAS
//   fp16      2 B per value                                            fp16          cuBLAS
//   int8      1 B per value + fp32 scale per output channel (4n B)      bf16          weight-only: dequantized in registers
//   int4      ½ B per value + per group of 128 along k: bf16 scale and  bf16          weight-only: dequantized in registers
//             bf16 zero point (4 B per group and output channel)
//   fp8       1 B per value (e4m3) + fp32 per-tensor scale             fp8 e4m3      cuBLASLt W8A8 (X quantized beforehand,
//                                                                     (+ its scale)  not counted here)
//   sparse24  2:4 structured: the 2 kept bf16 values of every 4 along   bf16          kept values expanded in registers
//             k (n·k B) + a 2-bit index per kept value (n·k/8 B)
//
// FLOPs are 2·m·n·k for every format (dense-equivalent: the 2:4 kernel multiplies the zeros it
// re-inserts), run on the tensor cores in the activation type (fp8 at the fp8 rate). X is read once
// and Y written once (bf16, fp16 for fp16).
#include <cstdint>
#include <string>
#include <vector>

#include "inferlab/sim/dtype.h"
#include "inferlab/sim/ops.h"
#include "inferlab/sim/weight_format.h"

namespace inferlab {

constexpr int64_t kInt4GroupSize = 128;  // values along k sharing one int4 scale and zero point

std::string weight_format_name(WeightFormat f);  // "bf16", "fp16", "int8", "int4", "fp8", "sparse24"
WeightFormat parse_weight_format(const std::string& s);  // unknown: inferlab::Error listing the known names
std::vector<std::string> known_weight_formats();
bool is_dense(WeightFormat f);  // bf16, fp16: the baselines the others are compared with

struct LinearShape {
  int64_t m = 1;  // tokens (batch x new tokens)
  int64_t n = 1;  // output features (rows of W)
  int64_t k = 1;  // input features
};

// The storage of an n × k weight in format f, by part.
struct WeightBytes {
  double values = 0;    // the (packed) weight values
  double scales = 0;    // scales and zero points
  double metadata = 0;  // 2:4 indices
  double total() const { return values + scales + metadata; }
};
// Throws inferlab::Error on non-positive sizes or a shape the format cannot store (int4: k a
// multiple of 128; sparse24: k a multiple of 4), naming the constraint.
WeightBytes weight_format_bytes(WeightFormat f, int64_t n, int64_t k);

DType activation_dtype(WeightFormat f);  // bf16; fp16 for fp16; fp8_e4m3 for fp8
DType output_dtype(WeightFormat f);      // fp16 for fp16, else bf16

// The cost of one launch of the layer (count 1), op_class gemm, variant = the format's name.
Op linear_cost(const LinearShape& s, WeightFormat f);

}  // namespace inferlab
