#pragma once
// The weight storage formats of a linear layer (their bytes and kernels: sim/linear.h). Apart so that the
// kernels' tile table (sim/kernels.h) can compare them in constant expressions without linear.h's ops.
namespace inferlab {

enum class WeightFormat { bf16, fp16, int8, int4, fp8, sparse24 };

}  // namespace inferlab
