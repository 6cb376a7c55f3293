#include "inferlab/sim/linear.h"

#include "inferlab/sim/error.h"
#include "inferlab/sim/paths.h"
#include "op_builder.h"

namespace inferlab {
namespace {

struct FormatInfo {
  WeightFormat format;
  const char* name;
};
constexpr FormatInfo kFormats[] = {{WeightFormat::bf16, "bf16"}, {WeightFormat::fp16, "fp16"},
                                   {WeightFormat::int8, "int8"}, {WeightFormat::int4, "int4"},
                                   {WeightFormat::fp8, "fp8"},   {WeightFormat::sparse24, "sparse24"}};

constexpr double kFp32Bytes = 4;          // int8 per-channel scale, fp8 per-tensor scales
constexpr double kInt4GroupBytes = 2 + 2;  // bf16 scale + bf16 zero point per group and output channel
constexpr double kSparseKept = 0.5;       // 2 of every 4 values along k
constexpr double kSparseIndexBits = 2;    // position of a kept value within its group of 4

}  // namespace

std::string weight_format_name(WeightFormat f) {
  for (const auto& e : kFormats)
    if (e.format == f) return e.name;
  return "?";
}

std::vector<std::string> known_weight_formats() {
  std::vector<std::string> names;
  for (const auto& e : kFormats) names.emplace_back(e.name);
  return names;
}

WeightFormat parse_weight_format(const std::string& s) {
  for (const auto& e : kFormats)
    if (s == e.name) return e.format;
  throw Error("unknown weight format '" + s + "' (known: " + join(known_weight_formats(), ", ") + ")");
}

bool is_dense(WeightFormat f) { return f == WeightFormat::bf16 || f == WeightFormat::fp16; }

DType activation_dtype(WeightFormat f) {
  switch (f) {
    case WeightFormat::fp16: return DType::fp16;
    case WeightFormat::fp8: return DType::fp8_e4m3;
    default: return DType::bf16;
  }
}

DType output_dtype(WeightFormat f) { return f == WeightFormat::fp16 ? DType::fp16 : DType::bf16; }

WeightBytes weight_format_bytes(WeightFormat f, int64_t n, int64_t k) {
  detail::check_positive(n, "linear layer: n (output features)");
  detail::check_positive(k, "linear layer: k (input features)");
  const double values = double(n) * double(k);
  WeightBytes b;
  switch (f) {
    case WeightFormat::bf16:
    case WeightFormat::fp16:
      b.values = values * dtype_bytes(activation_dtype(f));
      break;
    case WeightFormat::int8:
      b.values = values * dtype_bytes(DType::int8);
      b.scales = double(n) * kFp32Bytes;
      break;
    case WeightFormat::int4:
      if (k % kInt4GroupSize != 0)
        throw Error("int4 needs k a multiple of the group size " + std::to_string(kInt4GroupSize) +
                    ", got k=" + std::to_string(k));
      b.values = values * dtype_bytes(DType::int4);
      b.scales = double(n) * double(k / kInt4GroupSize) * kInt4GroupBytes;
      break;
    case WeightFormat::fp8:
      b.values = values * dtype_bytes(DType::fp8_e4m3);
      b.scales = kFp32Bytes;
      break;
    case WeightFormat::sparse24:
      if (k % 4 != 0)
        throw Error("sparse24 (2:4 structured sparsity) needs k a multiple of 4, got k=" + std::to_string(k));
      b.values = values * kSparseKept * dtype_bytes(DType::bf16);
      b.metadata = values * kSparseKept * kSparseIndexBits / 8;
      break;
  }
  return b;
}

void detail::add_linear(OpBuilder& ob, WeightFormat f, DType act, double rows, int64_t n, int64_t k, double copies,
                        const std::string& weight) {
  const WeightBytes w = weight_format_bytes(f, n, k);
  const DType in = f == WeightFormat::fp8 ? DType::fp8_e4m3 : act;
  ob.read("x", TensorRole::activation, rows * double(k) * dtype_bytes(in));
  if (f == WeightFormat::fp8) ob.read("x_scale", TensorRole::activation, kFp32Bytes);
  ob.read(weight, TensorRole::weight, w.values * copies);
  if (w.scales > 0)
    ob.read(weight + (f == WeightFormat::int4 ? "_scales_zeros" : "_scales"), TensorRole::weight, w.scales * copies);
  if (w.metadata > 0) ob.read(weight + "_meta", TensorRole::weight, w.metadata * copies);
  ob.write("y", TensorRole::activation, rows * double(n) * dtype_bytes(act));
  ob.matmul(2.0 * rows * double(n) * double(k), in);
}

Op linear_cost(const LinearShape& s, WeightFormat f) {
  detail::check_positive(s.m, "linear layer: m (tokens)");
  detail::OpBuilder ob("linear", OpClass::gemm, 1);
  ob.variant(weight_format_name(f));
  detail::add_linear(ob, f, output_dtype(f), double(s.m), s.n, s.k, 1.0, "W");
  return ob.op;
}

}  // namespace inferlab
