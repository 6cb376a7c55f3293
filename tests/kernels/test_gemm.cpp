// kernels/gemm: every weight format through linear() against the CPU reference on the GPU.
//
// The reference multiplies the same activations with unpack_weight() (exactly what the packed bytes
// encode) in double, so these tests check the kernels, not the formats' quantization error (that is
// the compression experiment's column). Tolerance, norm-wise: 2x the error of rounding the exact
// result to the output's bf16/fp16 (what any kernel with an fp32 accumulator must at least incur),
// plus 1e-5 for fp32 summation order; cuBLASLt's fp8 kernel accumulates in fp32 too.
// The output is poisoned with NaN before each launch; the split-k workspace must come back zeroed.
#include <gtest/gtest.h>

#include "gpu_test.h"

#include <cmath>
#include <cstring>

#include "inferlab/kernels/common/check.h"
#include "inferlab/kernels/common/device_buffer.h"
#include "inferlab/kernels/gemm/linear.h"
#include "inferlab/sim/error.h"
#include "inferlab/sim/rng.h"

namespace inferlab {
namespace {

int device_sms() {
  int device = 0, sms = 0;
  INFERLAB_CUDA_CHECK(cudaGetDevice(&device));
  INFERLAB_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  return sms;
}

std::vector<uint16_t> to_bits(const std::vector<float>& x, WeightFormat f) {
  std::vector<uint16_t> b(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) b[i] = f == WeightFormat::fp16 ? fp16_bits(x[i]) : bf16_bits(x[i]);
  return b;
}

float out_value(uint16_t b, WeightFormat f) { return f == WeightFormat::fp16 ? fp16_value(b) : bf16_value(b); }

// Runs one (format, m, n, k) case twice (the second run checks the workspace was left clean) and
// compares with the reference. Returns the relative error.
double run_case(WeightFormat f, int64_t m, int64_t n, int64_t k, uint64_t seed) {
  SCOPED_TRACE(weight_format_name(f) + " m=" + std::to_string(m) + " n=" + std::to_string(n) + " k=" + std::to_string(k));
  const std::vector<float> w = random_weight(n, k, seed, 4, 8.f);
  std::vector<float> x = random_activations(m, k, seed + 1);
  const PackedWeight pw = pack_weight(w, n, k, f);
  DeviceBuffer<uint8_t> dw(pw.values), ds(pw.scales.empty() ? std::vector<uint8_t>(16) : pw.scales),
      dm(pw.metadata.empty() ? std::vector<uint8_t>(16) : pw.metadata);
  DeviceBuffer<uint8_t> dx(std::size_t(m * k) * (f == WeightFormat::fp8 ? 1 : 2));
  DeviceBuffer<float> dxs(1);
  if (f == WeightFormat::fp8) {  // X quantized per tensor; the reference sees the dequantized X
    const Fp8Tensor q = quantize_fp8(x);
    for (std::size_t i = 0; i < x.size(); ++i) x[i] = fp8_e4m3_value(q.codes[i]) * q.scale;
    dx.upload(q.codes);
    dxs.upload({q.scale});
  } else {
    const std::vector<uint16_t> b = to_bits(x, f);
    INFERLAB_CUDA_CHECK(cudaMemcpy(dx.get(), b.data(), b.size() * 2, cudaMemcpyHostToDevice));
  }
  DeviceBuffer<uint16_t> dy(std::size_t(m * n));
  LinearParams p;
  p.format = f;
  p.m = m, p.n = n, p.k = k;
  p.x = dx.get();
  p.w = dw.get();
  p.scales = pw.scales.empty() ? nullptr : ds.get();
  p.metadata = pw.metadata.empty() ? nullptr : dm.get();
  p.x_scale = f == WeightFormat::fp8 ? dxs.get() : nullptr;
  p.y = dy.get();
  const std::size_t ws_bytes = linear_workspace_bytes(p, device_sms());
  DeviceBuffer<uint8_t> ws(std::max<std::size_t>(ws_bytes, 16));
  INFERLAB_CUDA_CHECK(cudaMemset(ws.get(), 0, ws.bytes()));
  p.workspace = ws.get();
  p.workspace_bytes = ws.bytes();

  const std::vector<double> ref = linear_reference(x, m, pw);
  double ref_norm = 0, round_err = 0;
  for (double v : ref) {
    ref_norm += v * v;
    const double r = double(f == WeightFormat::fp16 ? round_fp16(float(v)) : round_bf16(float(v)));
    round_err += (r - v) * (r - v);
  }
  const double tol = 2 * std::sqrt(round_err / ref_norm) + 1e-5;
  double rel = 0;
  for (int run = 0; run < 2; ++run) {
    dy.fill(0x7fc0);  // NaN in bf16 and fp16 alike
    linear(p, nullptr);
    INFERLAB_CUDA_CHECK(cudaDeviceSynchronize());
    const std::vector<uint16_t> y = dy.download();
    double err = 0;
    for (std::size_t i = 0; i < y.size(); ++i) {
      const double v = out_value(y[i], f);
      EXPECT_TRUE(std::isfinite(v)) << "output " << i << " not written (or not finite)";
      if (!std::isfinite(v)) return INFINITY;
      err += (v - ref[i]) * (v - ref[i]);
    }
    rel = std::sqrt(err / ref_norm);
    EXPECT_LE(rel, tol) << "run " << run;
    if (ws_bytes > 0) {
      const std::vector<uint8_t> left = ws.download();
      std::size_t dirty = 0;
      for (std::size_t i = 0; i < ws_bytes; ++i) dirty += left[i] != 0;
      EXPECT_EQ(dirty, 0u) << "workspace bytes left dirty after run " << run;
    }
  }
  return rel;
}

TEST(LinearGpu, WeightOnlyFormatsMatchTheReference) {
  REQUIRE_GPU();
  // Fresh shapes each run: m over every tile padding (1..64), n a multiple of 16 (not always of 128),
  // k a multiple of 128 (from one k-tile to many, with split-k and without).
  Rng rng{uint64_t(::testing::UnitTest::GetInstance()->random_seed()) + 77};
  const int64_t ms[] = {1, 3, 8, 9, 16, 17, 33, 64};
  for (WeightFormat f : {WeightFormat::int4, WeightFormat::int8, WeightFormat::sparse24})
    for (int64_t m : ms) {
      const int64_t n = 16 * (1 + int64_t(rng.next() % 40)), k = 128 * (1 + int64_t(rng.next() % 24));
      run_case(f, m, n, k, rng.next());
    }
  run_case(WeightFormat::int4, 1, 4096, 4096, 5);  // the layer shapes of the experiment
  run_case(WeightFormat::int8, 16, 1024, 4096, 6);
  run_case(WeightFormat::sparse24, 64, 4096, 1536, 7);
}

TEST(LinearGpu, DenseAndFp8MatchTheReference) {
  REQUIRE_GPU();
  for (WeightFormat f : {WeightFormat::bf16, WeightFormat::fp16, WeightFormat::fp8})
    for (int64_t m : {1, 5, 64, 200}) run_case(f, m, 256, 512, 20 + m);
}

TEST(LinearGpu, BadInputIsRejectedBeforeAnyLaunch) {
  // validate_linear needs no GPU: the compute capability is given.
  LinearParams p;
  alignas(16) static uint8_t buf[64];
  p.x = p.w = p.scales = p.metadata = buf;
  p.y = buf;
  p.format = WeightFormat::int4;
  p.m = 1, p.n = 64, p.k = 100;
  auto err = [&](int cc = 90) {
    try {
      validate_linear(p, 132, cc);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_NE(err().find("128"), std::string::npos);
  p.k = 256, p.m = 65;
  EXPECT_NE(err().find("m <= 64"), std::string::npos);
  p.m = 1, p.format = WeightFormat::sparse24, p.k = 250;
  EXPECT_NE(err().find("multiple of 4"), std::string::npos);
  p.format = WeightFormat::fp8, p.k = 256;
  EXPECT_NE(err(80).find("8.9"), std::string::npos);
  p.format = WeightFormat::int8;
  p.x = buf + 4;
  EXPECT_NE(err().find("aligned"), std::string::npos);
  p.x = buf;
  p.scales = nullptr;
  EXPECT_NE(err().find("scales"), std::string::npos);
}

}  // namespace
}  // namespace inferlab
