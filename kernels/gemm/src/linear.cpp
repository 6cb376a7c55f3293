// linear(): the one entry point of kernels/gemm (linear.h): host checks, the plan, the dispatch to
// cuBLAS(Lt) for the dense and fp8 formats or to the weight-only kernel family, and the CPU reference.
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <tuple>

#include "inferlab/kernels/common/check.h"
#include "inferlab/kernels/common/nvtx.h"
#include "inferlab/kernels/gemm/linear.h"
#include "inferlab/sim/error.h"
#include "weight_only.h"

namespace inferlab {
namespace {

bool weight_only(WeightFormat f) {
  return f == WeightFormat::int4 || f == WeightFormat::int8 || f == WeightFormat::sparse24;
}

DType dense_dtype(WeightFormat f) {
  return f == WeightFormat::fp16 ? DType::fp16 : f == WeightFormat::fp8 ? DType::fp8_e4m3 : DType::bf16;
}

// cuBLAS(Lt) plans, one per (format, m, n, k), made on first use.
const DenseGemm& dense_plan(WeightFormat f, int64_t m, int64_t n, int64_t k) {
  static std::mutex mu;
  static std::map<std::tuple<int, int64_t, int64_t, int64_t>, std::unique_ptr<DenseGemm>> plans;
  std::lock_guard<std::mutex> lock(mu);
  auto& slot = plans[{int(f), m, n, k}];
  if (!slot) slot = std::make_unique<DenseGemm>(dense_dtype(f), int(m), int(n), int(k));
  return *slot;
}

void device_facts(int& sms, int& cc) {
  int device = 0, major = 0, minor = 0;
  INFERLAB_CUDA_CHECK(cudaGetDevice(&device));
  INFERLAB_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  INFERLAB_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  INFERLAB_CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device));
  cc = major * 10 + minor;
}

}  // namespace

LinearPlan plan_linear(const LinearParams& p, int sm_count, int compute_capability) {
  if (!weight_only(p.format)) return LinearPlan{};
  if (compute_capability == 0) {
    int sms = 0;
    device_facts(sms, compute_capability);
  }
  return plan_weight_only(p, sm_count, compute_capability);
}

std::size_t linear_workspace_bytes(const LinearParams& p, int sm_count) {
  (void)sm_count;
  if (!weight_only(p.format)) return 0;
  return weight_only_workspace_bytes(p);
}

void validate_linear(const LinearParams& p, int sm_count, int compute_capability) {
  const std::string what = "linear " + weight_format_name(p.format) + " m=" + std::to_string(p.m) + " n=" +
                           std::to_string(p.n) + " k=" + std::to_string(p.k) + ": ";
  if (p.m <= 0) throw Error(what + "m must be positive");
  check_packable(p.format, p.n, p.k);
  if (p.format == WeightFormat::fp8 && compute_capability < 89)
    throw Error(what + "fp8 e4m3 needs tensor cores of compute capability 8.9 or later (this GPU: " +
                std::to_string(compute_capability / 10) + "." + std::to_string(compute_capability % 10) + ")");
  if (weight_only(p.format)) {
    if (p.m > 64) throw Error(what + "the weight-only kernels serve m <= 64 tokens (the decode regime)");
    if (p.k % 128 != 0) throw Error(what + "the weight-only kernels tile k by 128: k must be a multiple of 128");
    if (p.n > INT32_MAX / 64 || p.k > INT32_MAX / 64) throw Error(what + "too large for the kernel's 32-bit indices");
    if ((p.kernel == WeightOnlyKernel::wgmma || p.kernel == WeightOnlyKernel::wgmma_tma) &&
        (p.split_k != 0 || p.split_reduce != SplitReduce::automatic))
      throw Error(what + (p.split_k != 0 ? "split_k" : "split_reduce") + " applies to the mma weight-only kernel (the " +
                  weight_only_kernel_name(p.kernel) + " kernel plans its own grid)");
    if (p.kernel == WeightOnlyKernel::mma_tma && p.split_reduce != SplitReduce::automatic)
      throw Error(what + "split_reduce applies to the mma weight-only kernel (the mma_tma kernel sums in its cluster)");
    plan_weight_only(p, sm_count, compute_capability);  // its refusals (wgmma unavailable, a split that does not fit)
  } else if (p.split_k != 0 || p.split_reduce != SplitReduce::automatic) {
    throw Error(what + (p.split_k != 0 ? "split_k" : "split_reduce") +
                " applies to the weight-only formats (int8, int4, sparse24) only");
  } else if (p.kernel != WeightOnlyKernel::automatic) {
    throw Error(what + "kernel " + weight_only_kernel_name(p.kernel) + " names a weight-only kernel (int8, int4, sparse24)");
  }
  if (!p.x || !p.w || !p.y) throw Error(what + "x, w and y must be given");
  if ((p.format == WeightFormat::int4 || p.format == WeightFormat::int8 || p.format == WeightFormat::fp8) && !p.scales)
    throw Error(what + "the format's scales must be given");
  if (p.format == WeightFormat::sparse24 && !p.metadata) throw Error(what + "the 2:4 metadata must be given");
  for (const void* ptr : {p.x, p.w, p.scales, p.metadata, static_cast<const void*>(p.y), static_cast<const void*>(p.workspace)})
    if (ptr && reinterpret_cast<uintptr_t>(ptr) % 16 != 0)
      throw Error(what + "every pointer must be 16-byte aligned (the kernels load and reduce 16 bytes at a time)");
  const std::size_t need = linear_workspace_bytes(p, sm_count);
  if (need > 0 && (!p.workspace || p.workspace_bytes < need))
    throw Error(what + "needs a workspace of " + std::to_string(need) + " bytes, zeroed once");
}

void linear(const LinearParams& p, cudaStream_t stream) {
  int sms = 0, cc = 0;
  device_facts(sms, cc);
  validate_linear(p, sms, cc);
  const std::string label = "linear/" + weight_format_name(p.format);
  NvtxRange range(label.c_str());
  if (weight_only(p.format)) {
    weight_only_linear(p, plan_weight_only(p, sms, cc), stream);
    return;
  }
  const float* w_scale = p.format == WeightFormat::fp8 ? static_cast<const float*>(p.scales) : nullptr;
  dense_plan(p.format, p.m, p.n, p.k).run(p.x, p.w, p.y, stream, p.format == WeightFormat::fp8 ? p.x_scale : nullptr,
                                          w_scale);
}

std::vector<double> linear_reference(const std::vector<float>& x, int64_t m, const PackedWeight& w) {
  if (int64_t(x.size()) != m * w.k) throw Error("linear_reference: x holds " + std::to_string(x.size()) + " values, not m*k");
  const std::vector<float> wd = unpack_weight(w);
  std::vector<double> y(std::size_t(m * w.n), 0.0);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t r = 0; r < w.n; ++r) {
      double s = 0;
      const float* xr = &x[std::size_t(i * w.k)];
      const float* wr = &wd[std::size_t(r * w.k)];
      for (int64_t c = 0; c < w.k; ++c) s += double(xr[c]) * double(wr[c]);
      y[std::size_t(i * w.n + r)] = s;
    }
  return y;
}

}  // namespace inferlab
