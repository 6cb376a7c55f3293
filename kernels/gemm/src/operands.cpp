#include "inferlab/kernels/gemm/operands.h"

#include <cstring>

#include "inferlab/kernels/common/check.h"

namespace inferlab {
namespace {

std::vector<uint8_t> or_placeholder(const std::vector<uint8_t>& v) { return v.empty() ? std::vector<uint8_t>(16, 0) : v; }

}  // namespace

LinearOperands::LinearOperands(const PackedWeight& w, const std::vector<float>& x, int64_t m, int sm_count,
                               int64_t split_k, WeightOnlyKernel kernel, SplitReduce reduce)
    : values_(w.values), scales_(or_placeholder(w.scales)), metadata_(or_placeholder(w.metadata)), x_scale_(1),
      y_(std::size_t(m * w.n)) {
  const WeightFormat f = w.format;
  x_seen_.resize(x.size());
  if (f == WeightFormat::fp8) {
    const Fp8Tensor q = quantize_fp8(x);
    for (std::size_t i = 0; i < x.size(); ++i) x_seen_[i] = fp8_e4m3_value(q.codes[i]) * q.scale;
    x_ = DeviceBuffer<uint8_t>(q.codes);
    x_scale_.upload({q.scale});
  } else {
    std::vector<uint8_t> raw(x.size() * 2);
    for (std::size_t i = 0; i < x.size(); ++i) {
      const uint16_t b = f == WeightFormat::fp16 ? fp16_bits(x[i]) : bf16_bits(x[i]);
      x_seen_[i] = f == WeightFormat::fp16 ? fp16_value(b) : bf16_value(b);
      std::memcpy(&raw[i * 2], &b, 2);
    }
    x_ = DeviceBuffer<uint8_t>(raw);
  }
  params_.format = f;
  params_.m = m, params_.n = w.n, params_.k = w.k;
  params_.x = x_.get();
  params_.w = values_.get();
  params_.scales = w.scales.empty() ? nullptr : scales_.get();
  params_.metadata = w.metadata.empty() ? nullptr : metadata_.get();
  params_.x_scale = f == WeightFormat::fp8 ? x_scale_.get() : nullptr;
  params_.y = y_.get();
  params_.split_k = split_k;
  params_.kernel = kernel;
  params_.split_reduce = reduce;
  workspace_ = DeviceBuffer<uint8_t>(std::max<std::size_t>(linear_workspace_bytes(params_, sm_count), 16));
  INFERLAB_CUDA_CHECK(cudaMemset(workspace_.get(), 0, workspace_.bytes()));
  params_.workspace = workspace_.get();
  params_.workspace_bytes = workspace_.bytes();
}

void LinearOperands::poison_output() { y_.fill(0x7fc0); }  // NaN in bf16 and in fp16

std::vector<float> LinearOperands::output() const {
  const std::vector<uint16_t> y = y_.download();
  std::vector<float> out(y.size());
  for (std::size_t i = 0; i < y.size(); ++i)
    out[i] = params_.format == WeightFormat::fp16 ? fp16_value(y[i]) : bf16_value(y[i]);
  return out;
}

std::vector<uint8_t> LinearOperands::workspace() const { return workspace_.download(); }

}  // namespace inferlab
