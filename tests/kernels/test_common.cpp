// kernels/common: dtype traits on the host, and the GPU smoke test (skipped without a device).
#include <gtest/gtest.h>

#include "gpu_test.h"

#include <cmath>
#include <random>

#include "inferlab/kernels/common/check.h"
#include "inferlab/kernels/common/device_buffer.h"
#include "inferlab/kernels/common/dtype_traits.h"
#include "inferlab/kernels/common/smoke.h"

namespace inferlab {
namespace {

TEST(DTypeTraits, RoundTripsAndPoison) {
  using BF = DTypeTraits<DType::bf16>;
  using H = DTypeTraits<DType::fp16>;
  EXPECT_EQ(BF::to_float(BF::from_float(1.5f)), 1.5f);
  EXPECT_EQ(H::to_float(H::from_float(-3.25f)), -3.25f);
  // bf16 keeps 8 significant bits: 1 + 2^-9 rounds to 1 (ties to even), 1 + 2^-7 survives.
  EXPECT_EQ(BF::to_float(BF::from_float(1.0f + 1.0f / 512)), 1.0f);
  EXPECT_EQ(BF::to_float(BF::from_float(1.0f + 1.0f / 128)), 1.0f + 1.0f / 128);
  EXPECT_TRUE(std::isnan(BF::to_float(BF::nan())));
  EXPECT_TRUE(std::isnan(H::to_float(H::nan())));
  EXPECT_TRUE(std::isnan(DTypeTraits<DType::fp8_e4m3>::to_float(DTypeTraits<DType::fp8_e4m3>::nan())));
  EXPECT_EQ(DTypeTraits<DType::fp8_e4m3>::to_float(DTypeTraits<DType::fp8_e4m3>::from_float(448.f)), 448.f);
  EXPECT_EQ(DTypeOf<__nv_bfloat16>::value, DType::bf16);
}

TEST(GpuSmoke, AxpyMatchesTheReferenceExactly) {
  REQUIRE_GPU();
  std::mt19937_64 rng(std::random_device{}());
  // An odd size that is no multiple of the block, so the tail is exercised.
  const int64_t n = 1000003 + int64_t(rng() % 4096) * 2;
  std::uniform_int_distribution<int> small(-1000, 1000);
  std::vector<float> x(n), y(n);
  for (int64_t i = 0; i < n; ++i) {
    x[i] = float(small(rng));
    y[i] = float(small(rng));
  }
  const float alpha = float(small(rng) | 1);
  DeviceBuffer<float> dx(x), dy(y), dz(n);
  dz.fill(std::nanf(""));  // poison: every element must be written
  AxpyParams p;
  p.n = n;
  p.alpha = alpha;
  p.x = dx.get();
  p.y = dy.get();
  p.z = dz.get();
  launch_axpy(p, nullptr);
  INFERLAB_CUDA_CHECK(cudaDeviceSynchronize());
  const auto z = dz.download();
  int64_t bad = 0;
  for (int64_t i = 0; i < n; ++i) {
    // Integer-valued inputs below 2^24: the result is exact, so demand equality.
    const float expect = alpha * x[i] + y[i];
    if (!(z[i] == expect)) ++bad;
  }
  EXPECT_EQ(bad, 0) << "of " << n << " elements";
}

TEST(GpuSmoke, ALaunchErrorIsReported) {
  REQUIRE_GPU();
  DeviceBuffer<float> a(16), b(16), c(16);
  AxpyParams p;
  p.n = 16;
  p.x = a.get();
  p.y = b.get();
  p.z = c.get();
  p.block = 4096;  // over the 1024-thread limit: the launch must fail and be caught
  EXPECT_THROW(launch_axpy(p, nullptr), CudaError);
}

TEST(GpuSmoke, DeviceBufferRoundTripsBf16) {
  REQUIRE_GPU();
  using BF = DTypeTraits<DType::bf16>;
  std::mt19937 rng(std::random_device{}());
  std::normal_distribution<float> dist(0.f, 10.f);
  std::vector<BF::type> h(777);
  for (auto& v : h) v = BF::from_float(dist(rng));
  DeviceBuffer<BF::type> d(h);
  const auto back = d.download();
  for (std::size_t i = 0; i < h.size(); ++i) ASSERT_EQ(BF::to_float(back[i]), BF::to_float(h[i])) << i;
}

}  // namespace
}  // namespace inferlab
