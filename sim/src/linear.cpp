#include "inferlab/sim/linear.h"

#include "inferlab/sim/error.h"

namespace inferlab {
namespace {

struct FormatInfo {
  WeightFormat format;
  const char* name;
};
constexpr FormatInfo kFormats[] = {{WeightFormat::bf16, "bf16"}, {WeightFormat::fp16, "fp16"},
                                   {WeightFormat::int8, "int8"}, {WeightFormat::int4, "int4"},
                                   {WeightFormat::fp8, "fp8"},   {WeightFormat::sparse24, "sparse24"}};

}  // namespace

std::string weight_format_name(WeightFormat f) {
  for (const auto& i : kFormats)
    if (i.format == f) return i.name;
  return "?";
}

WeightFormat parse_weight_format(const std::string& s) {
  for (const auto& i : kFormats)
    if (s == i.name) return i.format;
  std::string known;
  for (const auto& i : kFormats) known += std::string(known.empty() ? "" : ", ") + i.name;
  throw Error("unknown weight format '" + s + "' (known: " + known + ")");
}

std::vector<std::string> known_weight_formats() {
  std::vector<std::string> v;
  for (const auto& i : kFormats) v.push_back(i.name);
  return v;
}

bool is_dense(WeightFormat f) { return f == WeightFormat::bf16 || f == WeightFormat::fp16; }

WeightBytes weight_format_bytes(WeightFormat f, int64_t n, int64_t k) {
  if (n <= 0 || k <= 0)
    throw Error("weight " + weight_format_name(f) + ": n and k must be positive, got n=" + std::to_string(n) +
                " k=" + std::to_string(k));
  const double N = double(n), K = double(k);
  WeightBytes b;
  switch (f) {
    case WeightFormat::bf16:
    case WeightFormat::fp16: b.values = 2 * N * K; break;
    case WeightFormat::int8:
      b.values = N * K;
      b.scales = 4 * N;
      break;
    case WeightFormat::int4:
      if (k % kInt4GroupSize != 0)
        throw Error("int4 needs k a multiple of the group size " + std::to_string(kInt4GroupSize) + ", got k=" +
                    std::to_string(k));
      b.values = N * K / 2;
      b.scales = 4 * N * (K / double(kInt4GroupSize));
      break;
    case WeightFormat::fp8:
      b.values = N * K;
      b.scales = 4;
      break;
    case WeightFormat::sparse24:
      if (k % 4 != 0) throw Error("2:4 sparsity needs k a multiple of 4, got k=" + std::to_string(k));
      b.values = N * K;       // half the values, 2 bytes each
      b.metadata = N * K / 8;  // 2 bits per kept value
      break;
  }
  return b;
}

DType activation_dtype(WeightFormat f) {
  return f == WeightFormat::fp16 ? DType::fp16 : f == WeightFormat::fp8 ? DType::fp8_e4m3 : DType::bf16;
}
DType output_dtype(WeightFormat f) { return f == WeightFormat::fp16 ? DType::fp16 : DType::bf16; }

Op linear_cost(const LinearShape& s, WeightFormat f) {
  if (s.m <= 0) throw Error("linear: m must be positive, got " + std::to_string(s.m));
  const WeightBytes w = weight_format_bytes(f, s.n, s.k);
  const double M = double(s.m), N = double(s.n), K = double(s.k);
  Op op;
  op.name = "linear";
  op.op_class = OpClass::gemm;
  op.variant = weight_format_name(f);
  op.flops = 2 * M * N * K;
  op.tensor_core = true;
  op.compute_dtype = activation_dtype(f);
  op.traffic.push_back({"x", TensorRole::activation, false, M * K * dtype_bytes(activation_dtype(f))});
  op.traffic.push_back({"W", TensorRole::weight, false, w.values});
  if (w.scales > 0) op.traffic.push_back({"W_scales", TensorRole::weight, false, w.scales});
  if (w.metadata > 0) op.traffic.push_back({"W_metadata", TensorRole::weight, false, w.metadata});
  op.traffic.push_back({"y", TensorRole::activation, true, M * N * dtype_bytes(output_dtype(f))});
  return op;
}

}  // namespace inferlab
