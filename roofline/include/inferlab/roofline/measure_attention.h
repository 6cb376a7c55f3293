#pragma once
// Measuring one attention launch the way every kernel of the lab is measured: random inputs on the
// device (never zeros), one checked run, then CUDA-event timing with warm-up, L2 flushed before
// every repeat, the median of many; optionally one more run under CUPTI for the per-kernel split.
#include <cstddef>
#include <string>

#include "inferlab/kernels/attention/attention.h"
#include "inferlab/roofline/timing.h"

namespace inferlab {

struct AttentionMeasurement {
  Timing timing;
  std::string kernels;  // CUPTI per-kernel durations of one run ("gemm 1.2 ms; softmax_rows 3.4 ms; ...")
};

// Checks the device memory the measurement allocates (attention_device_bytes) against the device's
// free memory: throws inferlab::Error ("needs 41.2 GiB, 37.0 GiB free ...") before any launch.
void check_attention_fits(const AttentionParams& shape, AttentionVariant variant);

// `shape` gives dtype, sizes, causal and scale; its pointers are ignored (the measurement owns them).
AttentionMeasurement measure_attention(const AttentionParams& shape, AttentionVariant variant,
                                       const TimingOptions& timing = {}, bool trace_kernels = true);

}  // namespace inferlab
