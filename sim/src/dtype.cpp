#include "inferlab/sim/dtype.h"

#include <algorithm>
#include <cctype>
#include <utility>

#include "inferlab/sim/error.h"

namespace inferlab {
namespace {

struct Entry {
  DType type;
  const char* name;
  double bytes;
  const char* peak_key;
};

constexpr Entry kTable[] = {
    {DType::fp64, "fp64", 8.0, "fp64"},         {DType::fp32, "fp32", 4.0, ""},
    {DType::tf32, "tf32", 4.0, "tf32"},         {DType::fp16, "fp16", 2.0, "fp16"},
    {DType::bf16, "bf16", 2.0, "bf16"},         {DType::fp8_e4m3, "fp8_e4m3", 1.0, "fp8"},
    {DType::fp8_e5m2, "fp8_e5m2", 1.0, "fp8"},  {DType::int8, "int8", 1.0, "int8"},
    {DType::int4, "int4", 0.5, "int4"},
};

const Entry& entry(DType t) {
  for (const auto& e : kTable)
    if (e.type == t) return e;
  throw Error("internal: dtype without a table entry");
}

}  // namespace

double dtype_bytes(DType t) { return entry(t).bytes; }
std::string dtype_name(DType t) { return entry(t).name; }
std::string tensor_peak_key(DType t) { return entry(t).peak_key; }

std::vector<std::string> known_dtypes() {
  std::vector<std::string> names;
  for (const auto& e : kTable) names.emplace_back(e.name);
  return names;
}

DType parse_dtype(std::string_view s) {
  std::string k(s);
  std::transform(k.begin(), k.end(), k.begin(), [](unsigned char c) { return std::tolower(c); });
  static const std::pair<const char*, DType> aliases[] = {
      {"float64", DType::fp64},   {"double", DType::fp64},      {"float32", DType::fp32},
      {"float", DType::fp32},     {"float16", DType::fp16},     {"half", DType::fp16},
      {"bfloat16", DType::bf16},  {"fp8", DType::fp8_e4m3},     {"e4m3", DType::fp8_e4m3},
      {"float8_e4m3fn", DType::fp8_e4m3}, {"e5m2", DType::fp8_e5m2}, {"float8_e5m2", DType::fp8_e5m2},
  };
  for (const auto& e : kTable)
    if (k == e.name) return e.type;
  for (const auto& [alias, type] : aliases)
    if (k == alias) return type;
  std::string known;
  for (const auto& e : kTable) known += std::string(known.empty() ? "" : ", ") + e.name;
  throw Error("unknown dtype '" + std::string(s) + "' (known: " + known + ")");
}

}  // namespace inferlab
