#pragma once
// Random device data for measurements: never time on zeros (they hide unwritten outputs and can
// run faster than real data). Counter-based (a hash of seed and index), so any size fills in one
// launch and the same seed gives the same values.
#include <cstdint>

#include <cuda_runtime.h>

#include "inferlab/sim/dtype.h"

namespace inferlab {

// dst[i] = N(0, stddev) rounded to `dtype` (fp32, fp16, bf16, fp8_e4m3), for i < count.
void fill_normal(void* dst, int64_t count, DType dtype, uint64_t seed, float stddev, cudaStream_t stream);

}  // namespace inferlab
