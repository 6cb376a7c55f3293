#include "inferlab/roofline/measure_linear.h"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <tuple>

#include "inferlab/kernels/common/check.h"
#include "inferlab/kernels/common/device_buffer.h"
#include "inferlab/kernels/gemm/linear.h"
#include "inferlab/kernels/gemm/operands.h"
#include "inferlab/kernels/gemm/quant.h"
#include "inferlab/sim/error.h"

namespace inferlab {
namespace {

constexpr uint64_t kWeightSeed = 1234;  // one weight per (n, k): every format quantizes the same one
constexpr int64_t kOutlierChannels = 8;
constexpr float kOutlierScale = 20.f;

struct Device {
  int sms = 0, cc = 0;
};
Device device() {
  Device d;
  int dev = 0, major = 0, minor = 0;
  INFERLAB_CUDA_CHECK(cudaGetDevice(&dev));
  INFERLAB_CUDA_CHECK(cudaDeviceGetAttribute(&d.sms, cudaDevAttrMultiProcessorCount, dev));
  INFERLAB_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev));
  INFERLAB_CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev));
  d.cc = major * 10 + minor;
  return d;
}

// The packed weights of the last (n, k) measured, by format: a sweep over m reuses them (packing
// 58 M values on the host takes a second).
struct WeightCache {
  int64_t n = 0, k = 0;
  std::vector<float> dense;
  std::map<int, PackedWeight> packed;
  const PackedWeight& get(int64_t n_, int64_t k_, WeightFormat f) {
    if (n_ != n || k_ != k) {
      n = n_, k = k_;
      packed.clear();
      dense = random_weight(n, k, kWeightSeed, kOutlierChannels, kOutlierScale);
    }
    auto it = packed.find(int(f));
    if (it == packed.end()) it = packed.emplace(int(f), pack_weight(dense, n, k, f)).first;
    return it->second;
  }
};

}  // namespace

void check_linear_supported(const LinearShape& s, WeightFormat f) {
  const Device d = device();
  LinearParams p;
  static uint4 dummy;  // 16-byte aligned stand-in pointers: only the shape and format are checked here
  p.format = f;
  p.m = s.m, p.n = s.n, p.k = s.k;
  p.x = p.w = p.scales = p.metadata = &dummy;
  p.y = &dummy;
  p.workspace = &dummy;
  p.workspace_bytes = SIZE_MAX;
  validate_linear(p, d.sms, d.cc);
  const double need = double(s.n * s.k) * (2 + 2) + double(s.m * (s.k + s.n)) * 8 + double(s.m * s.n) * 4;
  std::size_t free_b = 0, total_b = 0;
  INFERLAB_CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
  if (need + double(1u << 30) > double(free_b)) {
    char buf[160];
    std::snprintf(buf, sizeof buf, "linear %s: needs %.1f GiB of device memory, %.1f GiB free",
                  weight_format_name(f).c_str(), need / (1u << 30), double(free_b) / (1u << 30));
    throw Error(buf);
  }
}

LinearMeasurement measure_linear(const LinearShape& s, WeightFormat f, const TimingOptions& timing, int64_t split_k,
                                 WeightOnlyKernel kernel, SplitReduce reduce) {
  check_linear_supported(s, f);
  static std::mutex mu;
  static WeightCache cache;
  std::lock_guard<std::mutex> lock(mu);
  const Device d = device();
  const std::vector<float> x = random_activations(s.m, s.k, uint64_t(s.m * 7919 + s.k));

  // The baseline: cuBLAS bf16 on the unquantized (bf16-rounded) weight; its output is the reference.
  LinearOperands base(cache.get(s.n, s.k, WeightFormat::bf16), x, s.m, d.sms);
  linear(base.params(), timing.stream);
  INFERLAB_CUDA_CHECK(cudaStreamSynchronize(timing.stream));
  const std::vector<float> yb = base.output();
  LinearMeasurement m;
  m.baseline = time_cuda([&] { linear(base.params(), timing.stream); }, timing);
  if (f == WeightFormat::bf16) {
    m.timing = m.baseline;
    return m;
  }

  // The format: its packed weight, and its own activations where they differ (fp16, fp8).
  LinearOperands op(cache.get(s.n, s.k, f), x, s.m, d.sms, split_k, kernel, reduce);
  op.poison_output();
  linear(op.params(), timing.stream);
  INFERLAB_CUDA_CHECK(cudaStreamSynchronize(timing.stream));
  const std::vector<float> y = op.output();
  double err = 0, ref = 0;
  for (std::size_t i = 0; i < y.size(); ++i) {
    if (!std::isfinite(y[i])) throw Error("linear " + weight_format_name(f) + ": output " + std::to_string(i) + " not written");
    err += (double(y[i]) - yb[i]) * (double(y[i]) - yb[i]);
    ref += double(yb[i]) * yb[i];
  }
  m.rel_error = ref > 0 ? std::sqrt(err / ref) : 0;
  m.timing = time_cuda([&] { linear(op.params(), timing.stream); }, timing);
  return m;
}

}  // namespace inferlab
