#pragma once
// The weight-only / 2:4 kernel family (weight_only.cu), called by linear() for int8, int4, sparse24.
#include <cstddef>

#include <cuda_runtime.h>

#include "inferlab/kernels/gemm/linear.h"

namespace inferlab {

LinearPlan plan_weight_only(const LinearParams& p, int sm_count);
std::size_t weight_only_workspace_bytes(const LinearParams& p, const LinearPlan& plan);
void weight_only_linear(const LinearParams& p, const LinearPlan& plan, cudaStream_t stream);

}  // namespace inferlab
