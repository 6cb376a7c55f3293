#pragma once
// The measured ceilings of the GPU this process runs on: memory bandwidth (copy, read, L2), FP32
// and tensor-core throughput, and kernel launch overhead. Each comes from a small kernel or a
// cuBLAS call timed with time_cuda(); sizes come from the device (SM count, L2 size), never from a
// table. These are what the sim/ peaks are checked against and what "% of ceiling" divides by.
// Plain C++ (no CUDA syntax): include from g++ or nvcc.
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <cuda_runtime.h>

#include "inferlab/kernels/gemm/linear.h"
#include "inferlab/roofline/timing.h"
#include "inferlab/sim/dtype.h"

namespace inferlab {

struct CeilingOptions {
  bool quick = false;  // small sizes & few repeats, for tests
};

struct CeilingMeasurement {
  std::string key;     // "copy_bandwidth.kernel", "tensor_flops.bf16", ...
  double value = 0;    // in `unit`; 0 when skipped
  std::string unit;    // "B/s", "FLOP/s", "s"
  std::string method;  // what ran and how it was counted; "skipped: <reason>" when it did not run
  Timing timing;       // of one timed region (see method for what the region holds)
};

struct Ceilings {
  double copy_bandwidth = 0;  // bytes/s, read+write counted; the larger of our 16 B/thread kernel and cudaMemcpyAsync D2D
  double read_bandwidth = 0;  // bytes/s, read-only kernel over a buffer >> L2
  double l2_bandwidth = 0;    // bytes/s, repeated reads of a buffer of ~1/4 of L2
  double fp32_flops = 0;      // FLOP/s, FMA chains on every SM, 2 FLOP per FMA
  std::map<std::string, double> tensor_flops;  // FLOP/s by sim tensor_peak_key: "bf16", "fp16", "fp8" (cc >= 8.9)
  double launch_overhead_s = 0;  // seconds per empty kernel, launched back to back on one stream
  std::vector<CeilingMeasurement> details;  // every measurement, including the ones not kept
};

// Runs every measurement on the current device. Throws inferlab::CudaError on any CUDA/cuBLAS error.
Ceilings measure_ceilings(const CeilingOptions& options = {});

// One pass of the HBM read kernel of read_bandwidth over `bytes` (rounded down to 16 B), timed as
// every kernel is (timing.h): the bound for any kernel that must read those bytes once, at that
// size (launch and ramp-up included). The decode benchmark's upper bound.
Timing time_hbm_read(std::size_t bytes, const TimingOptions& timing = {});

// The tensor-core GEMM timed for Ceilings::tensor_flops is kernels/gemm's DenseGemm (linear.h).

}  // namespace inferlab
