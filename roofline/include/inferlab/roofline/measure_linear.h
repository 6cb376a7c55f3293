#pragma once
// Measuring a linear layer (kernels/gemm) in one weight format as every kernel of the lab is
// measured: random activations, a random weight with realistic outliers quantized to the format,
// one checked run, then event timing with warm-up, L2 flushed before every repeat, the median.
// The same activations also run through the dense bf16 weight with cuBLAS (the baseline): its time
// and its output, against which the format's error is reported.
#include <cstdint>

#include "inferlab/roofline/timing.h"
#include "inferlab/sim/kernels.h"
#include "inferlab/sim/linear.h"

namespace inferlab {

struct LinearMeasurement {
  Timing timing;           // the format's kernel (for bf16: cuBLAS itself)
  Timing baseline;         // cuBLAS bf16 on the same shape and activations
  double rel_error = 0;    // ||Y_format - Y_bf16|| / ||Y_bf16|| (Frobenius), Y_bf16 = cuBLAS on the unquantized weight
};

// Throws inferlab::Error naming the problem (unsupported format on this GPU, a shape the format
// cannot store, not enough device memory) before anything is launched.
void check_linear_supported(const LinearShape& s, WeightFormat f);
// split_k: 0 the weight-only kernels' plan, else LinearParams::split_k (a candidate the plan was measured against);
// kernel: LinearParams::kernel (automatic: the plan's by m); reduce: LinearParams::split_reduce.
LinearMeasurement measure_linear(const LinearShape& s, WeightFormat f, const TimingOptions& timing = {}, int64_t split_k = 0,
                                 WeightOnlyKernel kernel = WeightOnlyKernel::automatic,
                                 SplitReduce reduce = SplitReduce::automatic);

}  // namespace inferlab
