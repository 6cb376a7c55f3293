#pragma once
// The weight-only / 2:4 kernels (weight_only.cu: mma; weight_only_sm90.cu: wgmma;
// weight_only_sm90_tma.cu: wgmma_tma; weight_only_mma_tma.cu: mma_tma), called by linear()
// for int8, int4, sparse24.
#include <cstddef>

#include <cuda_runtime.h>

#include "inferlab/kernels/gemm/linear.h"

namespace inferlab {

// compute_capability: the device's (major x 10 + minor); the wgmma kernel runs on 90 only.
LinearPlan plan_weight_only(const LinearParams& p, int sm_count, int compute_capability);
// Every weight-only kernel's: fp32 partial sums (the mma kernel's [m, n]; the Hopper kernels' [row tiles][128][N] in
// their accumulators' order) and a counter per 16-row tile, zero between launches.
std::size_t weight_only_workspace_bytes(const LinearParams& p);
// The counters' place in that workspace (after the partial sums).
int* weight_only_counters(const LinearParams& p);
void weight_only_linear(const LinearParams& p, const LinearPlan& plan, cudaStream_t stream);

#ifdef INFERLAB_HAVE_SM90A
// weight_only_sm90.cu and weight_only_sm90_tma.cu (built for sm_90a): the wgmma and wgmma_tma kernels.
void weight_only_linear_sm90(const LinearParams& p, const LinearPlan& plan, cudaStream_t stream);
void weight_only_linear_sm90_tma(const LinearParams& p, const LinearPlan& plan, cudaStream_t stream);
// weight_only_mma_tma.cu (built for sm_90a): the mma_tma kernel (m = 1).
void weight_only_linear_mma_tma(const LinearParams& p, const LinearPlan& plan, cudaStream_t stream);
#endif

}  // namespace inferlab
