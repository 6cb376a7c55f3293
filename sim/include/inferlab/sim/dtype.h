#pragma once
// Element types of weights, activations and the KV cache, and the tensor-core table each uses.
#include <string>
#include <string_view>
#include <vector>

namespace inferlab {

enum class DType { fp64, fp32, tf32, fp16, bf16, fp8_e4m3, fp8_e5m2, int8, int4 };

// Storage size in bytes (int4 is packed two per byte: 0.5).
double dtype_bytes(DType t);
// Canonical name: "fp64", "fp32", "tf32", "fp16", "bf16", "fp8_e4m3", "fp8_e5m2", "int8", "int4".
std::string dtype_name(DType t);
// Accepts the canonical names and the usual aliases (float16, half, bfloat16, float32, fp8, e4m3, ...).
// Throws inferlab::Error listing the known names.
DType parse_dtype(std::string_view s);
std::vector<std::string> known_dtypes();

// Key of the peak-rate tables in data/hardware/*.json used when a matrix product runs in this type:
// "fp64", "tf32", "fp16", "bf16", "fp8", "int8", "int4". fp32 has no tensor-core key (see hardware.h).
std::string tensor_peak_key(DType t);

}  // namespace inferlab
