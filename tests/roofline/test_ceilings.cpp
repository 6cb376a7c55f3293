// roofline/ceilings: the measured ceilings are plausible (quick mode), and the tensor-core GEMM they
// time computes the right product. GPU tests skip without a device.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "inferlab/kernels/common/check.h"
#include "inferlab/kernels/common/device_buffer.h"
#include "inferlab/kernels/common/dtype_traits.h"
#include "inferlab/roofline/ceilings.h"
#include "inferlab/roofline/pipe_ceilings.h"

namespace inferlab {
namespace {

// One quick measurement shared by the plausibility tests (a few seconds of GPU time).
const Ceilings& quick_ceilings() {
  static const Ceilings c = [] {
    CeilingOptions o;
    o.quick = true;
    return measure_ceilings(o);
  }();
  return c;
}

int compute_capability() {
  int dev = 0, major = 0, minor = 0;
  INFERLAB_CUDA_CHECK(cudaGetDevice(&dev));
  INFERLAB_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev));
  INFERLAB_CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev));
  return major * 10 + minor;
}

bool positive_finite(double v) { return std::isfinite(v) && v > 0; }

TEST(Ceilings, EveryCeilingIsPositiveAndFinite) {
  std::string why;
  if (!gpu_available(&why)) GTEST_SKIP() << why;
  const Ceilings& c = quick_ceilings();
  EXPECT_PRED1(positive_finite, c.copy_bandwidth);
  EXPECT_PRED1(positive_finite, c.read_bandwidth);
  EXPECT_PRED1(positive_finite, c.l2_bandwidth);
  EXPECT_PRED1(positive_finite, c.fp32_flops);
  EXPECT_PRED1(positive_finite, c.launch_overhead_s);
  ASSERT_EQ(c.tensor_flops.count("bf16"), 1u);
  ASSERT_EQ(c.tensor_flops.count("fp16"), 1u);
  EXPECT_EQ(c.tensor_flops.count("fp8"), compute_capability() >= 89 ? 1u : 0u);
  for (const auto& [key, value] : c.tensor_flops) EXPECT_PRED1(positive_finite, value) << key;
  // Every measurement is recorded: the kept ones and the ones not kept (memcpy vs kernel, ...).
  EXPECT_GE(c.details.size(), 8u);
  for (const CeilingMeasurement& m : c.details) {
    EXPECT_FALSE(m.unit.empty()) << m.key;
    EXPECT_FALSE(m.method.empty()) << m.key;
    if (m.method.rfind("skipped:", 0) == 0) continue;
    EXPECT_PRED1(positive_finite, m.value) << m.key;
    EXPECT_GT(m.timing.repeats, 0) << m.key;
  }
}

// The L2's reduction rates (quick mode: a few passes, so rates read low): the scalar fragment pattern everywhere, the
// Hopper kernels' vector reductions where sm_90 code runs (95 a clock and 224 on the H200 in full mode), and a vector
// operation never faster per operation than the coalesced scalar reductions (it carries four sums).
TEST(Ceilings, TheL2ReductionRatesArePlausible) {
  std::string why;
  if (!gpu_available(&why)) GTEST_SKIP() << why;
  const PipeMeasurements m = measure_pipes(true);
  EXPECT_GT(m.l2_atomics_per_clk, 20);
  EXPECT_LT(m.l2_atomics_per_clk, 2000);
  EXPECT_GT(m.l2_red_coalesced_per_clk, 20);
  if (compute_capability() >= 90) {
    EXPECT_GT(m.l2_red_vector_per_clk, 10);
    EXPECT_LT(m.l2_red_vector_per_clk, m.l2_red_coalesced_per_clk);
  } else {
    EXPECT_EQ(m.l2_red_vector_per_clk, 0);
  }
}

// wgmma's rate and clock (Hopper only, compute capability 9.0): at most the architecture's 4096 FLOP an SM a clock and
// at least 80% of it (the H200: 4090-4100, full mode), faster per clock than mma.sync (2727 there), and a clock the
// power limit holds no higher than the tensor clock of mma.sync (1.58-1.62 against 1.81 GHz on the H200).
TEST(Ceilings, TheWgmmaRateAndClockArePlausible) {
  std::string why;
  if (!gpu_available(&why)) GTEST_SKIP() << why;
  const PipeMeasurements m = measure_pipes(true);
  if (compute_capability() != 90) {
    EXPECT_EQ(m.tensor_wgmma.per_sm_per_clock(), 0);
    GTEST_SKIP() << "wgmma needs compute capability 9.0";
  }
  const double rate = m.tensor_wgmma.per_sm_per_clock();
  EXPECT_GT(rate, 0.8 * 4096);
  EXPECT_LT(rate, 1.02 * 4096);
  EXPECT_GT(rate, 1.2 * m.tensor_mma.per_sm_per_clock());
  EXPECT_GT(m.wgmma_clock_hz, 0.5e9);
  EXPECT_LT(m.wgmma_clock_hz, 1.03 * m.tensor_clock_hz);
  // With CUDA-core work between the groups the tensor pipe is busy less of the time (quick: 8, 16, 32 units) and the
  // clock is no lower than under the products back to back (the H200: ~1.8 GHz at a duty of 0.36, 1.55 at 0.94).
  ASSERT_EQ(m.wgmma_clock_by_duty.size(), 3u);
  for (const auto& [duty, hz] : m.wgmma_clock_by_duty) {
    EXPECT_GT(duty, 0.05);
    EXPECT_LT(duty, 1.02);
    EXPECT_GT(hz, 0.97 * m.wgmma_clock_hz);
    EXPECT_LT(hz, 1.03 * m.tensor_clock_hz * 1.1);
  }
  EXPECT_LT(m.wgmma_clock_by_duty.back().first, m.wgmma_clock_by_duty.front().first);  // 32 units: the least busy
}

TEST(Ceilings, BandwidthsArePlausible) {
  std::string why;
  if (!gpu_available(&why)) GTEST_SKIP() << why;
  const Ceilings& c = quick_ceilings();
  EXPECT_GT(c.copy_bandwidth, 50e9);
  EXPECT_LT(c.copy_bandwidth, 20e12);
  EXPECT_GT(c.read_bandwidth, 50e9);
  EXPECT_LT(c.read_bandwidth, 20e12);
  EXPECT_GT(c.l2_bandwidth, c.read_bandwidth);
}

TEST(Ceilings, ComputeIsPlausible) {
  std::string why;
  if (!gpu_available(&why)) GTEST_SKIP() << why;
  const Ceilings& c = quick_ceilings();
  EXPECT_GT(c.fp32_flops, 1e12);
  EXPECT_GT(c.tensor_flops.at("bf16"), c.fp32_flops);
}

TEST(Ceilings, LaunchOverheadIsPlausible) {
  std::string why;
  if (!gpu_available(&why)) GTEST_SKIP() << why;
  const Ceilings& c = quick_ceilings();
  EXPECT_GT(c.launch_overhead_s, 0.5e-6);
  EXPECT_LT(c.launch_overhead_s, 50e-6);
}

TEST(DenseGemm, RejectsWhatItCannotRun) {  // no GPU needed: checked before any CUDA call
  EXPECT_THROW(DenseGemm(DType::fp32, 64, 64, 64), std::invalid_argument);
  EXPECT_THROW(DenseGemm(DType::bf16, 0, 64, 64), std::invalid_argument);
  EXPECT_THROW(DenseGemm(DType::bf16, 64, 64, 64, /*fast_accum=*/true), std::invalid_argument);
  EXPECT_THROW(DenseGemm(DType::fp8_e4m3, 64, 64, 40), std::invalid_argument);  // k % 16 != 0
}

struct GemmError {
  double error = 0;     // ‖Y − ref‖_F / ‖ref‖_F
  double baseline = 0;  // the same for ref merely rounded to the output type
};

// Y = X · Wᵀ through DenseGemm on random inputs in [-1, 1), against a double reference computed
// from the inputs as stored (already rounded to In).
template <DType In, DType Out>
GemmError gemm_error(int m, int n, int k, bool fast_accum, std::mt19937_64& rng) {
  using TI = typename DTypeTraits<In>::type;
  using TO = typename DTypeTraits<Out>::type;
  std::uniform_real_distribution<float> uni(-1.f, 1.f);
  std::vector<TI> x(std::size_t(m) * k), w(std::size_t(n) * k);
  for (TI& v : x) v = DTypeTraits<In>::from_float(uni(rng));
  for (TI& v : w) v = DTypeTraits<In>::from_float(uni(rng));
  DeviceBuffer<TI> dx(x), dw(w);
  DeviceBuffer<TO> dy(std::size_t(m) * n);
  dy.fill(DTypeTraits<Out>::nan());  // an element the GEMM does not write fails the comparison

  const DenseGemm gemm(In, m, n, k, fast_accum);
  EXPECT_EQ(gemm.output_dtype(), Out);
  gemm.run(dx.get(), dw.get(), dy.get());
  INFERLAB_CUDA_CHECK(cudaDeviceSynchronize());
  const std::vector<TO> y = dy.download();

  double err2 = 0, base2 = 0, ref2 = 0;
  for (int i = 0; i < m; ++i) {
    for (int j = 0; j < n; ++j) {
      double ref = 0;
      for (int l = 0; l < k; ++l)
        ref += double(DTypeTraits<In>::to_float(x[std::size_t(i) * k + l])) *
               double(DTypeTraits<In>::to_float(w[std::size_t(j) * k + l]));
      const double got = DTypeTraits<Out>::to_float(y[std::size_t(i) * n + j]);
      const double rounded = DTypeTraits<Out>::to_float(DTypeTraits<Out>::from_float(float(ref)));
      err2 += (got - ref) * (got - ref);  // NaN stays NaN
      base2 += (rounded - ref) * (rounded - ref);
      ref2 += ref * ref;
    }
  }
  return {std::sqrt(err2 / ref2), std::sqrt(base2 / ref2)};
}

TEST(DenseGemm, Bf16AndFp16MatchTheCpuReference) {
  std::string why;
  if (!gpu_available(&why)) GTEST_SKIP() << why;
  std::mt19937_64 rng(std::random_device{}());
  // The shape of the brief, and one with odd sizes that no tile divides.
  const int shapes[][3] = {{256, 192, 320}, {131 + int(rng() % 8) * 2, 77, 203}};
  for (const auto& s : shapes) {
    SCOPED_TRACE("m=" + std::to_string(s[0]) + " n=" + std::to_string(s[1]) + " k=" + std::to_string(s[2]));
    const GemmError bf = gemm_error<DType::bf16, DType::bf16>(s[0], s[1], s[2], false, rng);
    const GemmError h = gemm_error<DType::fp16, DType::fp16>(s[0], s[1], s[2], false, rng);
    // fp32 accumulation leaves the output rounding as the only sizeable error: demand at most twice
    // the error of rounding the exact product, and the brief's absolute bound.
    EXPECT_LT(bf.error, 1e-2);
    EXPECT_LE(bf.error, 2 * bf.baseline + 1e-6);
    EXPECT_LT(h.error, 1e-2);
    EXPECT_LE(h.error, 2 * h.baseline + 1e-6);
  }
}

TEST(DenseGemm, Fp8MatchesTheCpuReference) {
  std::string why;
  if (!gpu_available(&why)) GTEST_SKIP() << why;
  if (compute_capability() < 89) GTEST_SKIP() << "fp8 tensor cores need compute capability >= 8.9";
  std::mt19937_64 rng(std::random_device{}());
  for (bool fast_accum : {false, true}) {
    SCOPED_TRACE(fast_accum ? "fast_accum on" : "fast_accum off");
    const GemmError e = gemm_error<DType::fp8_e4m3, DType::bf16>(256, 192, 320, fast_accum, rng);
    EXPECT_LT(e.error, 5e-2) << "baseline (bf16 rounding) " << e.baseline;
  }
}

}  // namespace
}  // namespace inferlab
