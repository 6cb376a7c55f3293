#include "inferlab/roofline/measure_attention.h"

#include <cstdio>

#include "inferlab/kernels/common/check.h"
#include "inferlab/kernels/common/device_buffer.h"
#include "inferlab/kernels/common/random.h"
#include "inferlab/roofline/kernel_trace.h"
#include "inferlab/sim/error.h"

namespace inferlab {

void check_attention_fits(const AttentionParams& s, AttentionVariant variant) {
  std::size_t free_b = 0, total_b = 0;
  INFERLAB_CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
  const std::size_t need = attention_device_bytes(s, variant);
  // Keep 1 GiB for cuBLAS workspaces, the L2 flush buffer and the CUDA context's growth.
  const std::size_t slack = std::size_t(1) << 30;
  if (need + slack > free_b) {
    char buf[256];
    std::snprintf(buf, sizeof buf, "attention/%s: shape needs %.1f GiB of device memory, %.1f GiB free of %.1f GiB",
                  attention_variant_name(variant).c_str(), double(need) / (1 << 30), double(free_b) / (1 << 30),
                  double(total_b) / (1 << 30));
    throw Error(buf);
  }
}

AttentionMeasurement measure_attention(const AttentionParams& shape, AttentionVariant variant,
                                       const TimingOptions& timing, bool trace_kernels) {
  AttentionParams p = shape;
  validate_shape(p, variant);
  check_attention_fits(p, variant);
  const std::size_t nq = std::size_t(p.batch * p.seq_q * p.heads * p.head_dim);
  const std::size_t nkv = std::size_t(p.batch * p.seq_k * p.kv_heads * p.head_dim);
  DeviceBuffer<char> q(nq * 2), k(nkv * 2), v(nkv * 2), o(nq * 2);
  DeviceBuffer<float> lse(std::size_t(p.batch * p.heads * p.seq_q));
  DeviceBuffer<char> ws(attention_workspace_bytes(p, variant));
  fill_normal(q.get(), int64_t(nq), p.dtype, 1, 1.f, timing.stream);
  fill_normal(k.get(), int64_t(nkv), p.dtype, 2, 1.f, timing.stream);
  fill_normal(v.get(), int64_t(nkv), p.dtype, 3, 1.f, timing.stream);
  p.q = q.get();
  p.k = k.get();
  p.v = v.get();
  p.o = o.get();
  p.lse = lse.get();
  p.workspace = ws.get();
  p.workspace_bytes = ws.size();
  attention_forward(p, variant, timing.stream);  // validates and runs once, checked
  INFERLAB_CUDA_CHECK(cudaStreamSynchronize(timing.stream));
  AttentionMeasurement m;
  m.timing = time_cuda([&] { attention_forward(p, variant, timing.stream); }, timing);
  if (trace_kernels) {
    KernelTrace trace;
    attention_forward(p, variant, timing.stream);
    m.kernels = summarize_kernels(trace.collect());
  }
  return m;
}

}  // namespace inferlab
