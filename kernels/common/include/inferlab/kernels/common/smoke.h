#pragma once
// The smallest kernel of the lab: z = alpha * x + y. It proves the build-here, run-there path
// (nvcc for sm_90 on the CPU machine, run on the GPU machine) and the checking conventions every
// kernel follows: a params struct, a plain C++ launcher taking a stream, every launch checked.
#include <cstdint>

#include <cuda_runtime.h>

namespace inferlab {

struct AxpyParams {
  int64_t n = 0;
  float alpha = 1.f;
  const float* x = nullptr;  // [n]
  const float* y = nullptr;  // [n]
  float* z = nullptr;        // [n], written
  int block = 256;           // threads per block; > 1024 fails at launch (tests use it to see a launch error)
};

void launch_axpy(const AxpyParams& p, cudaStream_t stream);

}  // namespace inferlab
