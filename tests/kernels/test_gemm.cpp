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
#include <cstdio>
#include <map>
#include <cstring>
#include <iterator>
#include <utility>
#include <vector>

#include "inferlab/kernels/common/check.h"
#include "inferlab/kernels/common/device_buffer.h"
#include "inferlab/kernels/gemm/gemv.h"
#include "inferlab/kernels/gemm/linear.h"
#include "inferlab/kernels/gemm/operands.h"
#include "inferlab/sim/error.h"
#include "inferlab/sim/rng.h"

#include "error_of.h"

namespace inferlab {
namespace {

int device_sms() {
  int device = 0, sms = 0;
  INFERLAB_CUDA_CHECK(cudaGetDevice(&device));
  INFERLAB_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  return sms;
}

// Runs one (format, m, n, k) case twice (the second run checks the workspace was left clean) and
// compares with the reference.
// An output against the CPU reference in double: every element written and finite, the relative RMS error within
// twice the RMS of rounding the reference itself to the output's dtype (the one rounding a correct kernel adds).
class ReferenceCheck {
 public:
  ReferenceCheck(const LinearOperands& op, const PackedWeight& pw, int64_t m, WeightFormat f)
      : ref_(linear_reference(op.x_seen(), m, pw)) {
    double round_err = 0;
    for (double v : ref_) {
      ref_norm_ += v * v;
      const double r = double(f == WeightFormat::fp16 ? round_fp16(float(v)) : round_bf16(float(v)));
      round_err += (r - v) * (r - v);
    }
    tol_ = 2 * std::sqrt(round_err / ref_norm_) + 1e-5;
  }
  void expect_close(const std::vector<float>& y, int run) const {
    double err = 0;
    std::size_t unwritten = 0;
    for (std::size_t i = 0; i < y.size(); ++i) {
      if (!std::isfinite(y[i])) ++unwritten;
      else err += (y[i] - ref_[i]) * (y[i] - ref_[i]);
    }
    ASSERT_EQ(unwritten, 0u) << "outputs not written (or not finite), run " << run;
    EXPECT_LE(std::sqrt(err / ref_norm_), tol_) << "run " << run;
  }

 private:
  std::vector<double> ref_;
  double ref_norm_ = 0, tol_ = 0;
};

void run_case(WeightFormat f, int64_t m, int64_t n, int64_t k, uint64_t seed, int64_t split_k = 0,
              WeightOnlyKernel kernel = WeightOnlyKernel::automatic, SplitReduce reduce = SplitReduce::automatic) {
  SCOPED_TRACE(weight_format_name(f) + " m=" + std::to_string(m) + " n=" + std::to_string(n) + " k=" + std::to_string(k) +
               " split_k=" + std::to_string(split_k) + " kernel=" + weight_only_kernel_name(kernel) +
               " reduce=" + split_reduce_name(reduce));
  const PackedWeight pw = pack_weight(random_weight(n, k, seed, 4, 8.f), n, k, f);
  LinearOperands op(pw, random_activations(m, k, seed + 1), m, device_sms(), split_k, kernel, reduce);
  std::vector<float> first;
  const ReferenceCheck check(op, pw, m, f);
  for (int run = 0; run < 2; ++run) {
    op.poison_output();
    linear(op.params(), nullptr);
    INFERLAB_CUDA_CHECK(cudaDeviceSynchronize());
    const std::vector<float> y = op.output();
    check.expect_close(y, run);
    if (::testing::Test::HasFatalFailure()) return;
    // Summed in a cluster, the splits add in one order (mma_tma: a tile's warps, in shared memory): the second launch
    // repeats the first bit for bit.
    if (run == 0) {
      first = y;
    } else if (reduce == SplitReduce::cluster || kernel == WeightOnlyKernel::mma_tma) {
      EXPECT_EQ(std::memcmp(first.data(), y.data(), y.size() * sizeof(float)), 0) << "cluster sums differ between launches";
    }
    std::size_t dirty = 0;
    for (uint8_t b : op.workspace()) dirty += b != 0;
    EXPECT_EQ(dirty, 0u) << "workspace bytes left dirty after run " << run;
  }
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
  // One token: the warps of a tile share the block's k range (sim/kernels.h weight_only_k_warps), 4 and 2 of
  // them a tile, the last tile cut by n.
  run_case(WeightFormat::int8, 1, 1040, 512, 8);
  run_case(WeightFormat::sparse24, 1, 528, 768, 9);
  run_case(WeightFormat::int4, 1, 1040, 512, 10);
  // One tile a block (8 warps a tile: each stages its own slice of X and its scales): 6 int4 groups a warp (the
  // second pass of the group sums half used), one, and 2:4's slices.
  run_case(WeightFormat::int4, 1, 528, 6144, 21);
  run_case(WeightFormat::int8, 1, 528, 1024, 22);
  run_case(WeightFormat::sparse24, 1, 528, 2048, 23);
  run_case(WeightFormat::int4, 1, 528, 1024, 24);
  // int8 at one token with shared tiles and split-k (4 warps a tile, the plain kernel's splits / 4): 14 splits of
  // 17 tiles (the last cut by n), 8 splits of 33.
  run_case(WeightFormat::int8, 1, 528, 14336, 25, 0, WeightOnlyKernel::mma);
  run_case(WeightFormat::int8, 1, 1040, 8192, 26, 0, WeightOnlyKernel::mma);  // (automatic: mma_tma since r1)
  run_case(WeightFormat::int8, 16, 1024, 4096, 6);
  run_case(WeightFormat::sparse24, 64, 4096, 1536, 7);
}

// int8 on shared tiles (m = 1) runs its tensor cores in fp16: X's row is scaled by a power of two per slice of k so
// that its largest |x| lands in [2^14, 2^15) (weight_only.cu). One token far outside fp16's range each way, and zero,
// with 128-column groups whose magnitudes differ by 2^12, on one tile a block, two and four, and shared tiles with
// split-k (4096 x 14336; an unscaled row would overflow or flush to zero); and the plain kernel (bf16: split-k,
// several tokens) at the same magnitudes, each token's outputs held to their own norm. The mma kernel named at one
// token, and the mma_tma kernel (one 2^e for the whole row) again on every one-token case it runs.
TEST(LinearGpu, Int8ActivationsOutsideFp16RangeKeepTheirPrecision) {
  REQUIRE_GPU();
  const struct {
    int64_t m, n, k;
    float scale;  // at m = 1
  } cases[] = {{1, 528, 1024, 0x1p100f},  {1, 528, 1024, 0x1p-60f}, {1, 528, 2048, 0.f},     {1, 1040, 512, 0x1p40f},
               {1, 1040, 512, 0x1p-40f}, {1, 4096, 4096, 0x1p20f}, {1, 4096, 14336, 0x1p40f}, {5, 1040, 2048, 1.f},
               {8, 256, 4096, 1.f}};
  std::vector<std::pair<std::size_t, WeightOnlyKernel>> runs;
  for (std::size_t i = 0; i < std::size(cases); ++i) {
    runs.push_back({i, cases[i].m == 1 ? WeightOnlyKernel::mma : WeightOnlyKernel::automatic});
    LinearParams probe;
    probe.format = WeightFormat::int8, probe.m = cases[i].m, probe.n = cases[i].n, probe.k = cases[i].k;
    probe.kernel = WeightOnlyKernel::mma_tma;
    if (error_of([&] { plan_linear(probe, device_sms()); }).empty()) runs.push_back({i, WeightOnlyKernel::mma_tma});
  }
  for (const auto& [ci, kernel] : runs) {
    const auto& c = cases[ci];
    SCOPED_TRACE("m=" + std::to_string(c.m) + " n=" + std::to_string(c.n) + " k=" + std::to_string(c.k) +
                 " scale=" + std::to_string(c.scale) + " kernel=" + weight_only_kernel_name(kernel));
    const PackedWeight pw = pack_weight(random_weight(c.n, c.k, 31, 4, 8.f), c.n, c.k, WeightFormat::int8);
    std::vector<float> x = random_activations(c.m, c.k, 32);
    const float token_scale[] = {0x1p40f, 0x1p-40f, 0.f, 1.f, 0x1p20f, 0x1p-20f, 3.f, 0x1p100f};
    for (int64_t r = 0; r < c.m; ++r)
      for (int64_t j = 0; j < c.k; ++j)
        x[r * c.k + j] *= (c.m == 1 ? c.scale : token_scale[r]) * ((j / 128) % 3 == 1 ? 0x1p-12f : 1.f);
    LinearOperands op(pw, x, c.m, device_sms(), 0, kernel);
    const std::vector<double> ref = linear_reference(op.x_seen(), c.m, pw);
    op.poison_output();
    linear(op.params(), nullptr);
    INFERLAB_CUDA_CHECK(cudaDeviceSynchronize());
    const std::vector<float> y = op.output();
    for (int64_t r = 0; r < c.m; ++r) {
      double norm = 0, round_err = 0, err = 0;
      std::size_t bad = 0;
      for (int64_t i = r * c.n; i < (r + 1) * c.n; ++i) {
        norm += ref[i] * ref[i];
        const double rb = double(round_bf16(float(ref[i])));
        round_err += (rb - ref[i]) * (rb - ref[i]);
        if (!std::isfinite(y[i])) ++bad;
        else err += (y[i] - ref[i]) * (y[i] - ref[i]);
      }
      ASSERT_EQ(bad, 0u) << "token " << r << ": outputs not finite";
      if (norm == 0) {
        EXPECT_EQ(err, 0.0) << "token " << r << " is zero";
        continue;
      }
      EXPECT_LE(std::sqrt(err / norm), 2 * std::sqrt(round_err / norm) + 1e-5) << "token " << r;
    }
  }
}

// The split-k candidates the plan was measured against (LinearParams::split_k), side by side in one
// process over the same shapes; a split that does not divide k / 128 is refused by name.
TEST(LinearGpu, EverySplitOfTheWeightOnlyKernelsMatchesTheReference) {
  REQUIRE_GPU();
  // k = 1024: 8 tiles of 128, split 1..8. One block's X slice must fit its shared memory, so the longest
  // slices are refused at the larger m (plan_linear says so by name): each split runs wherever it fits, and
  // every split must fit somewhere, every (format, m) at least two.
  std::map<int64_t, int> ran;
  for (WeightFormat f : {WeightFormat::int4, WeightFormat::int8, WeightFormat::sparse24})
    for (int64_t m : {1, 16, 64}) {
      int fits = 0;
      for (int64_t split : {1, 2, 4, 8}) {
        LinearParams p;
        p.format = f, p.m = m, p.n = 1024, p.k = 1024, p.split_k = split;
        const std::string why = error_of([&] { plan_linear(p, device_sms()); });
        if (!why.empty()) {
          EXPECT_NE(why.find("columns per block"), std::string::npos) << why;
          continue;
        }
        run_case(f, m, 1024, 1024, 40 + uint64_t(split) + uint64_t(m), split);
        ++fits, ++ran[split];
      }
      EXPECT_GE(fits, 2) << weight_format_name(f) << " m=" << m;
    }
  for (int64_t split : {1, 2, 4, 8}) EXPECT_GT(ran[split], 0) << "split " << split << " never fits";
  const PackedWeight pw = pack_weight(random_weight(256, 384, 3, 4, 8.f), 256, 384, WeightFormat::int4);
  EXPECT_NE(error_of([&] {
              LinearOperands op(pw, random_activations(1, 384, 4), 1, device_sms(), 2);
              linear(op.params(), nullptr);
            }).find("split_k 2 must divide k/128 = 3"),
            std::string::npos);
}

// Split-k summed in a thread-block cluster (LinearParams::split_reduce, Hopper) beside the atomics, over the same fresh
// shapes: splits of 2, 4, 8 and 16 blocks (16: a non-portable cluster), tokens over the n8 paddings, n not a multiple of 128 (a row tile's last
// owners receive nothing, or part of their share), shared tiles at one token (int8: 4 warps a tile, a block's 32 rows
// owned 4 or 8 apiece), and the refusals by name: more splits than a cluster holds, a wgmma kernel.
TEST(LinearGpu, SplitKSummedInAClusterMatchesTheReference) {
  REQUIRE_GPU();
  LinearParams probe;
  probe.format = WeightFormat::int8, probe.m = 1, probe.n = 128, probe.k = 1024, probe.split_k = 2;
  probe.split_reduce = SplitReduce::cluster;
  const std::string missing = error_of([&] { plan_linear(probe, device_sms()); });
  if (!missing.empty()) {
    EXPECT_NE(missing.find("needs a Hopper GPU"), std::string::npos) << missing;
    GTEST_SKIP() << "split-k in a cluster not run here: " << missing;
  }
  Rng rng{uint64_t(::testing::UnitTest::GetInstance()->random_seed()) + 123};
  for (WeightFormat f : {WeightFormat::int4, WeightFormat::int8, WeightFormat::sparse24})
    for (int64_t m : {1, 3, 8, 16})
      for (int64_t split : {2, 4, 8, 16}) {
        const int64_t n = 16 * (1 + int64_t(rng.next() % 40)), k = 128 * split * (1 + int64_t(rng.next() % 3));
        for (SplitReduce reduce : {SplitReduce::atomics, SplitReduce::cluster})
          run_case(f, m, n, k, 300 + uint64_t(split) + uint64_t(m), split, WeightOnlyKernel::mma, reduce);
      }
  // Splits that do not divide the tile's 128 rows: 12 owners of 11 rows (the last 7), 6 of 22 (the last 18).
  run_case(WeightFormat::int8, 3, 400, 1536, 28, 12, WeightOnlyKernel::mma, SplitReduce::cluster);
  run_case(WeightFormat::int4, 9, 656, 768, 29, 6, WeightOnlyKernel::mma, SplitReduce::cluster);
  // int8 at one token on shared tiles with split-k (the plan's 4 warps a tile over a quarter of 16 splits), and the
  // layer shape the experiment runs.
  run_case(WeightFormat::int8, 1, 528, 14336, 25, 0, WeightOnlyKernel::automatic, SplitReduce::cluster);
  run_case(WeightFormat::int8, 1, 1040, 8192, 26, 0, WeightOnlyKernel::automatic, SplitReduce::cluster);
  run_case(WeightFormat::int4, 1, 4096, 14336, 27, 0, WeightOnlyKernel::mma, SplitReduce::cluster);  // 16 splits
  const PackedWeight pw = pack_weight(random_weight(256, 4096, 3, 4, 8.f), 256, 4096, WeightFormat::int4);
  EXPECT_NE(error_of([&] {
              LinearOperands op(pw, random_activations(1, 4096, 4), 1, device_sms(), 32, WeightOnlyKernel::mma,
                                SplitReduce::cluster);
              linear(op.params(), nullptr);
            }).find("a cluster holds at most 16 blocks"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              LinearOperands op(pw, random_activations(32, 4096, 4), 32, device_sms(), 0, WeightOnlyKernel::wgmma_tma,
                                SplitReduce::cluster);
              linear(op.params(), nullptr);
            }).find("split_reduce applies to the mma weight-only kernel"),
            std::string::npos);
}

// The weight-only kernels (LinearParams::kernel: mma.sync and, on Hopper, wgmma and wgmma_tma) side by side in one
// process over the same fresh shapes, each named explicitly whatever the plan would choose: every m the
// tile paddings distinguish, n a multiple of 16 (not always of 128), k a multiple of 128; and the
// wgmma kernel's persistent grid where blocks share a tile (stream-k: a tile cut into up to 40 pieces,
// the last block converting) as well as where one block owns several tiles.
TEST(LinearGpu, EveryWeightOnlyKernelMatchesTheReference) {
  REQUIRE_GPU();
  LinearParams probe;
  probe.format = WeightFormat::int4, probe.m = 16, probe.n = 128, probe.k = 128, probe.kernel = WeightOnlyKernel::wgmma;
  const std::string wgmma_missing = error_of([&] { plan_linear(probe, device_sms()); });
  Rng rng{uint64_t(::testing::UnitTest::GetInstance()->random_seed()) + 91};
  const int64_t ms[] = {1, 8, 16, 17, 33, 64};
  for (WeightOnlyKernel kernel : {WeightOnlyKernel::mma, WeightOnlyKernel::wgmma, WeightOnlyKernel::wgmma_tma}) {
    const bool hopper = kernel != WeightOnlyKernel::mma;
    if (hopper && !wgmma_missing.empty()) {
      std::printf("%s weight-only kernel not run here: %s\n", weight_only_kernel_name(kernel).c_str(), wgmma_missing.c_str());
      continue;
    }
    for (WeightFormat f : {WeightFormat::int4, WeightFormat::int8, WeightFormat::sparse24}) {
      if (f == WeightFormat::sparse24 && kernel == WeightOnlyKernel::wgmma) continue;  // 2:4: mma and wgmma_tma
      for (int64_t m : ms) {
        const int64_t n = 16 * (1 + int64_t(rng.next() % 48)), k = 128 * (1 + int64_t(rng.next() % 24));
        run_case(f, m, n, k, rng.next(), 0, kernel);
      }
    }
    if (kernel == WeightOnlyKernel::mma) continue;
    for (WeightFormat f : {WeightFormat::int4, WeightFormat::int8}) {
      run_case(f, 17, 256, 128 * 40, 11, 0, kernel);   // 80 units: wgmma a block each (every tile in 40
                                                         // pieces), wgmma_tma 4 a block (10 pieces)
      run_case(f, 64, 4096, 512, 12, 0, kernel);       // 128 units over fewer blocks: whole tiles and cut ones
      run_case(f, 33, 2048, 1024, 13, 0, kernel);
    }
    run_case(WeightFormat::int4, 16, 4096, 4096, 14, 0, kernel);  // the layer shapes of the experiment
    run_case(WeightFormat::int8, 64, 1024, 4096, 15, 0, kernel);
    if (kernel == WeightOnlyKernel::wgmma_tma) {
      // More units a block than ring stages (the producer waits on `empty`, the parities wrap), a tile's
      // last warps past n (their copies skipped, their rows never stored), every token count padded.
      run_case(WeightFormat::int4, 1, 14336, 4096, 16, 0, kernel);
      run_case(WeightFormat::int8, 5, 1200, 4096, 17, 0, kernel);
      run_case(WeightFormat::int4, 40, 2000, 2048, 18, 0, kernel);
      // 2:4 (wgmma.sp on the stored fragments, the metadata copied beside them): tiles cut among blocks and
      // whole, a tile's last warps past n (the metadata they use is not theirs), every token count.
      run_case(WeightFormat::sparse24, 17, 256, 128 * 40, 19, 0, kernel);
      run_case(WeightFormat::sparse24, 64, 4096, 512, 20, 0, kernel);
      run_case(WeightFormat::sparse24, 5, 1200, 4096, 21, 0, kernel);
      run_case(WeightFormat::sparse24, 40, 2000, 2048, 22, 0, kernel);
      run_case(WeightFormat::sparse24, 64, 1024, 4096, 23, 0, kernel);
    }
  }
}

// The Hopper kernels on ONE workspace across changing shapes, as the engine runs its layers (one workspace sized for
// 64 tokens and the widest n, kernels/engine/src/engine.cpp): a call's shared tiles' sums and counters lie at offsets of
// its own shape (the sums in the accumulators' order, [row tiles][128][N], kernels/gemm/NOTES.md r27), and every call
// leaves the bytes it touched zero, so the next one, of another n, m and format, starts on zeros: n not a multiple of
// 128 after a larger n, tokens padded to 16, 32 and 64, both rungs, int4, int8 and 2:4.
TEST(LinearGpu, HopperKernelsShareOneWorkspaceAcrossShapes) {
  REQUIRE_GPU();
  LinearParams probe;
  probe.format = WeightFormat::int4, probe.m = 64, probe.n = 128, probe.k = 128, probe.kernel = WeightOnlyKernel::wgmma_tma;
  const std::string missing = error_of([&] { plan_linear(probe, device_sms()); });
  if (!missing.empty()) GTEST_SKIP() << "the Hopper weight-only kernels not run here: " << missing;
  struct Shape {
    WeightFormat f;
    int64_t m, n, k;
    WeightOnlyKernel kernel;
  };
  const Shape shapes[] = {
      {WeightFormat::int4, 64, 4096, 4096, WeightOnlyKernel::wgmma_tma},  // 1024 units over the grid: tiles cut
      {WeightFormat::int8, 17, 2000, 2048, WeightOnlyKernel::wgmma_tma},  // n cut inside a tile, after a larger n
      {WeightFormat::int4, 40, 1200, 4096, WeightOnlyKernel::wgmma},
      {WeightFormat::sparse24, 64, 2096, 1024, WeightOnlyKernel::wgmma_tma},
      {WeightFormat::int4, 33, 656, 5120, WeightOnlyKernel::wgmma_tma},
      {WeightFormat::int8, 64, 4096, 4096, WeightOnlyKernel::wgmma},
      {WeightFormat::int4, 16, 3088, 4096, WeightOnlyKernel::wgmma_tma},
  };
  LinearParams widest;  // as the engine sizes it
  widest.format = WeightFormat::int4, widest.m = 64, widest.n = 4096, widest.k = 5120;
  DeviceBuffer<uint8_t> ws(linear_workspace_bytes(widest, device_sms()));
  INFERLAB_CUDA_CHECK(cudaMemset(ws.get(), 0, ws.bytes()));
  Rng rng{uint64_t(::testing::UnitTest::GetInstance()->random_seed()) + 97};
  for (int round = 0; round < 2; ++round)
    for (const Shape& s : shapes) {
      SCOPED_TRACE(weight_format_name(s.f) + " m=" + std::to_string(s.m) + " n=" + std::to_string(s.n) +
                   " k=" + std::to_string(s.k) + " kernel=" + weight_only_kernel_name(s.kernel));
      const uint64_t seed = rng.next();
      const PackedWeight pw = pack_weight(random_weight(s.n, s.k, seed, 4, 8.f), s.n, s.k, s.f);
      LinearOperands op(pw, random_activations(s.m, s.k, seed + 1), s.m, device_sms(), 0, s.kernel);
      LinearParams p = op.params();
      ASSERT_LE(linear_workspace_bytes(p, device_sms()), ws.bytes());
      p.workspace = ws.get(), p.workspace_bytes = ws.bytes();
      op.poison_output();
      linear(p, nullptr);
      INFERLAB_CUDA_CHECK(cudaDeviceSynchronize());
      ReferenceCheck(op, pw, s.m, s.f).expect_close(op.output(), round);
      if (HasFatalFailure()) return;
      std::size_t dirty = 0;
      for (uint8_t b : ws.download()) dirty += b != 0;
      ASSERT_EQ(dirty, 0u) << "the shared workspace left dirty";
    }
}

// The mma_tma kernel (one token, Hopper): fresh shapes whose stages it takes (n a multiple of 16, k of 2048 for int4
// and 1024 for int8), from fewer tiles than SMs (a block a tile, fewer stages than the ring) to more (blocks of
// unequal shares, the ring's parities wrapping many times), and the layer shapes of the experiment; where it cannot
// run, its refusal names why.
TEST(LinearGpu, TheMmaTmaKernelMatchesTheReference) {
  REQUIRE_GPU();
  LinearParams probe;
  probe.format = WeightFormat::int4, probe.m = 1, probe.n = 128, probe.k = 2048, probe.kernel = WeightOnlyKernel::mma_tma;
  const std::string missing = error_of([&] { plan_linear(probe, device_sms()); });
  if (!missing.empty()) {
    std::printf("mma_tma weight-only kernel not run here: %s\n", missing.c_str());
    GTEST_SKIP() << missing;
  }
  Rng rng{uint64_t(::testing::UnitTest::GetInstance()->random_seed()) + 93};
  for (WeightFormat f : {WeightFormat::int4, WeightFormat::int8}) {
    const int64_t stage_cols = f == WeightFormat::int4 ? 2048 : 1024;
    for (int i = 0; i < 4; ++i) {
      const int64_t n = 16 * (1 + int64_t(rng.next() % (i < 2 ? 40 : 700))), k = stage_cols * (1 + int64_t(rng.next() % 7));
      run_case(f, 1, n, k, rng.next(), 0, WeightOnlyKernel::mma_tma);
    }
    run_case(f, 1, 16, 16384, 31, 0, WeightOnlyKernel::mma_tma);  // one block, its tile longer than the ring
    // int4 at k = 2048 and 4096 (a tile of one and two stages) holds X's fragments in registers: one-stage tiles on
    // uneven shares of 6-7 stages a block (the ring of 3 wraps twice; 14336 x 4096 below: two-stage tiles)
    run_case(f, 1, 16 * 803, 2048, 41, 0, WeightOnlyKernel::mma_tma);
    run_case(f, 1, 14336, 4096, 32, 0, WeightOnlyKernel::mma_tma);
    run_case(f, 1, 4096, 14336, 33, 0, WeightOnlyKernel::mma_tma);
  }
  // int4 at 2 to 16 tokens (X's fragments in registers, k split over a cluster where they exceed two groups a warp):
  // fresh token counts over one and two n8 tiles, k of 2048 to 8192 (splits of 1, 2 and 4), tokens past m in a tile,
  // clusters of 8 (16384 at 16 tokens), one tile, the layer shapes.
  for (int i = 0; i < 6; ++i) {
    const int64_t m = 2 + int64_t(rng.next() % (i < 3 ? 7 : 15));
    const int64_t k = int64_t(2048) << (rng.next() % 3);
    const int64_t n = 16 * (1 + int64_t(rng.next() % (i % 2 == 0 ? 40 : 700)));
    run_case(WeightFormat::int4, m, n, k, rng.next(), 0, WeightOnlyKernel::mma_tma);
  }
  run_case(WeightFormat::int4, 3, 1040, 16384, 34, 0, WeightOnlyKernel::mma_tma);  // a cluster of 4
  run_case(WeightFormat::int4, 12, 4096, 16384, 38, 0, WeightOnlyKernel::mma_tma);  // a cluster of 8
  run_case(WeightFormat::int4, 16, 16, 4096, 39, 0, WeightOnlyKernel::mma_tma);      // one tile, a cluster of 2
  run_case(WeightFormat::int4, 16, 14336, 4096, 35, 0, WeightOnlyKernel::mma_tma);  // the wide kernel (the plan's)
  // The wide kernel (9-16 tokens, k = 4096 unsplit; X's second group copied in during the first stage), by name on
  // fresh token counts and row counts down to one tile (a block a tile where the tiles are fewer than the SMs), and the
  // plan's at 11 tokens; the split kernel by name on the MLP shape.
  for (int i = 0; i < 3; ++i) {
    const int64_t m = 9 + int64_t(rng.next() % 8), n = 16 * (1 + int64_t(rng.next() % (i == 0 ? 8 : 900)));
    run_case(WeightFormat::int4, m, n, 4096, rng.next(), 1, WeightOnlyKernel::mma_tma);
  }
  run_case(WeightFormat::int4, 11, 16 * 600, 4096, 47, 0, WeightOnlyKernel::mma_tma);
  run_case(WeightFormat::int4, 16, 14336, 4096, 48, 2, WeightOnlyKernel::mma_tma);
  run_case(WeightFormat::int4, 9, 4096, 4096, 36, 0, WeightOnlyKernel::mma_tma);
  run_case(WeightFormat::int4, 8, 14336, 4096, 40, 0, WeightOnlyKernel::mma_tma);
  run_case(WeightFormat::int4, 2, 1024, 4096, 37, 0, WeightOnlyKernel::mma_tma);
  probe.m = 17;
  EXPECT_NE(error_of([&] { plan_linear(probe, device_sms()); }).find("serves 1 to 16 tokens"), std::string::npos);
  // clusters of 3 and 7 (k / 2048 divided by no power of two): 6144 and 14336 (the down projection, named: the plan's
  // at 9-16 tokens is the narrow kernel's) at 9-16 and 2-8
  run_case(WeightFormat::int4, 9, 4096, 6144, 44, 0, WeightOnlyKernel::mma_tma);
  run_case(WeightFormat::int4, 16, 4096, 14336, 45, 7, WeightOnlyKernel::mma_tma);
  run_case(WeightFormat::int4, 5, 16 * 301, 14336, 46, 0, WeightOnlyKernel::mma_tma);
  // The narrow kernel (9-16 tokens, k = 14336 over clusters of 4: stages of 14 groups, two a warp, X's second group
  // copied in during the first stage): fresh token counts and row counts down to fewer tiles than clusters, the MLP
  // shape.
  for (int i = 0; i < 3; ++i) {
    const int64_t m = 9 + int64_t(rng.next() % 8), n = 16 * (1 + int64_t(rng.next() % (i == 0 ? 20 : 900)));
    run_case(WeightFormat::int4, m, n, 14336, rng.next(), 4, WeightOnlyKernel::mma_tma);
  }
  run_case(WeightFormat::int4, 16, 4096, 14336, 49, 4, WeightOnlyKernel::mma_tma);
  run_case(WeightFormat::int4, 11, 16 * 300, 14336, 51);  // the automatic plan's at 11 tokens
  // where a cluster's owned tiles' sums exceed the deferred group's place (over 56 tiles a cluster: 1800 tiles over the
  // H100's and H200's 30 clusters of 4 are 60), the narrow kernel pulls them as the other split kernels do (NOTES.md r24)
  run_case(WeightFormat::int4, 13, 16 * 1800, 14336, 52, 4, WeightOnlyKernel::mma_tma);
  probe.m = 2, probe.k = 2048, probe.format = WeightFormat::int8;
  EXPECT_NE(error_of([&] { plan_linear(probe, device_sms()); }).find("int8 at one token"), std::string::npos);
  probe.format = WeightFormat::int4;
  probe.m = 1, probe.k = 1024;
  EXPECT_NE(error_of([&] { plan_linear(probe, device_sms()); }).find("multiple of"), std::string::npos);
  probe.k = 2048, probe.format = WeightFormat::sparse24;
  EXPECT_NE(error_of([&] { plan_linear(probe, device_sms()); }).find("serves int8 and int4"), std::string::npos);
}

// The int4 zero point's term, s (128 + z) X over a group, exact: in every (row, group) the weight is -8/64 at one column,
// +7/64 at another and 0 elsewhere (scale 1/64, zero point 8: q = 0, 15, 8), and every token's group of X is 1/16 at
// both of those columns, 64, 1/8 and 2^-11 at three others, 0 elsewhere. Each group then adds exactly
// (1/64)(-8 + 7)/16 = -2^-10, and every partial sum on the way (136 X = 8738.06640625, the sums of (128 + q) x, the
// groups' and the cluster's sums) is a multiple of 2^-8 below 2^14, exact in fp32: every output must be -G 2^-10 (G
// groups) bit for bit. A zero point's term that lost X's low bits (X = 64.25048828125 needs three bf16: -64.5, 0.25,
// -2^-11, tokens_zero_mma) would be off by 136 (1/64) 2^-11 a group, and the norm-wise tolerance of run_case (the
// bf16 output's rounding) would not see it. Every mma_tma instance: one token; 2-16 tokens over one and two n8 tiles
// at k = 2048 to 8192 (the plan's splits); the wide kernel; the down projection at 5 tokens (clusters of 7) and the
// narrow kernel at 9 and 16.
TEST(LinearGpu, TheInt4ZeroPointTermIsExact) {
  REQUIRE_GPU();
  LinearParams probe;
  probe.format = WeightFormat::int4, probe.m = 1, probe.n = 128, probe.k = 2048, probe.kernel = WeightOnlyKernel::mma_tma;
  const std::string missing = error_of([&] { plan_linear(probe, device_sms()); });
  if (!missing.empty()) GTEST_SKIP() << missing;
  struct Case {
    int64_t m, n, k, split;
  };
  for (const Case c : {Case{1, 4096, 4096, 0}, Case{2, 1024, 2048, 0}, Case{8, 4096, 4096, 0}, Case{4, 4096, 8192, 0},
                       Case{16, 4096, 2048, 0}, Case{9, 14336, 4096, 1}, Case{16, 14336, 4096, 1},
                       Case{5, 4096, 14336, 0}, Case{9, 4096, 14336, 4}, Case{16, 4096, 14336, 4}}) {
    SCOPED_TRACE("m=" + std::to_string(c.m) + " n=" + std::to_string(c.n) + " k=" + std::to_string(c.k) +
                 " split=" + std::to_string(c.split));
    const int64_t groups = c.k / 128;
    std::vector<float> w(std::size_t(c.n * c.k), 0.f), x(std::size_t(c.m * c.k), 0.f);
    // group g's columns a (-8/64) and b (+7/64) of every row; token t's 64 at a + 1 + t, 1/8 at b + 1 + t and 2^-11 at
    // b + 32 + t (within the group's halves, never a or b at m <= 16)
    auto a_of = [](int64_t g) { return (3 * g) % 64; };
    auto b_of = [](int64_t g) { return 64 + (5 * g) % 64; };
    for (int64_t r = 0; r < c.n; ++r)
      for (int64_t g = 0; g < groups; ++g) {
        float* wg = &w[std::size_t(r * c.k + g * 128)];
        wg[a_of(g)] = -8.f / 64, wg[b_of(g)] = 7.f / 64;
      }
    for (int64_t t = 0; t < c.m; ++t)
      for (int64_t g = 0; g < groups; ++g) {
        float* xg = &x[std::size_t(t * c.k + g * 128)];
        const int64_t a = a_of(g), b = b_of(g);
        xg[a] = xg[b] = 1.f / 16;
        xg[(a + 1 + t) % 64] = 64.f;
        xg[64 + (b + 1 + t) % 64] = 1.f / 8;
        xg[64 + (b + 32 + t) % 64] = std::ldexp(1.f, -11);
      }
    const PackedWeight pw = pack_weight(w, c.n, c.k, WeightFormat::int4);
    const float want = -float(groups) * std::ldexp(1.f, -10);
    std::size_t ref_off = 0;  // what the packed weight encodes (scale 1/64, zero point 8), in double
    for (double v : linear_reference(x, c.m, pw)) ref_off += v != double(want);
    ASSERT_EQ(ref_off, 0u) << "the reference is not " << want << " everywhere";
    LinearOperands op(pw, x, c.m, device_sms(), c.split, WeightOnlyKernel::mma_tma);
    ASSERT_EQ(op.x_seen(), x);  // every value exact in bf16
    op.poison_output();
    linear(op.params(), nullptr);
    INFERLAB_CUDA_CHECK(cudaDeviceSynchronize());
    const std::vector<float> y = op.output();
    std::size_t off = 0;
    for (float v : y) off += v != want;
    EXPECT_EQ(off, 0u) << "of " << y.size() << " outputs differ from " << want << " (y[0] = " << y[0] << ")";
  }
}

TEST(LinearGpu, DenseAndFp8MatchTheReference) {
  REQUIRE_GPU();
  for (WeightFormat f : {WeightFormat::bf16, WeightFormat::fp16, WeightFormat::fp8})
    for (int64_t m : {1, 5, 64, 200}) run_case(f, m, 256, 512, 20 + m);
}

// The streaming GEMV (m <= 8): the same norm-wise tolerance as above, against the double product of the
// bf16/fp16-rounded inputs; fp32 output: the rounding term is that of fp32 (the summation order term).
TEST(GemvGpu, MatchesTheReferenceForEveryTokenCountAndOutputType) {
  REQUIRE_GPU();
  Rng rng{uint64_t(::testing::UnitTest::GetInstance()->random_seed()) + 91};
  for (DType dt : {DType::bf16, DType::fp16})
    for (DType out : {dt, DType::fp32})
      for (int64_t m = 1; m <= kGemvMaxTokens; ++m) {
        // Odd n (a warp pair's second row missing), k a multiple of 8 not of the 256-element unrolled step.
        const int64_t n = m == 8 ? 4096 : 1 + int64_t(rng.next() % 700), k = 8 * (1 + int64_t(rng.next() % 700));
        SCOPED_TRACE(dtype_name(dt) + "->" + dtype_name(out) + " m=" + std::to_string(m) + " n=" + std::to_string(n) +
                     " k=" + std::to_string(k));
        const auto round = [&](float v) { return dt == DType::bf16 ? round_bf16(v) : round_fp16(v); };
        std::vector<float> w = random_weight(n, k, rng.next(), 4, 8.f), x = random_activations(m, k, rng.next());
        for (float& v : w) v = round(v);
        for (float& v : x) v = round(v);
        auto bits = [&](const std::vector<float>& v) {
          std::vector<uint16_t> b(v.size());
          for (std::size_t i = 0; i < v.size(); ++i) b[i] = dt == DType::bf16 ? bf16_bits(v[i]) : fp16_bits(v[i]);
          return b;
        };
        DeviceBuffer<uint16_t> dw(bits(w)), dx(bits(x));
        DeviceBuffer<float> dy(std::size_t(m * n));
        float poison;  // all-ones bits: NaN as fp32 and as each 16-bit half (bf16, fp16)
        const uint32_t ones = ~0u;
        std::memcpy(&poison, &ones, 4);
        dy.fill(poison);
        GemvParams p;
        p.dtype = dt, p.out_dtype = out, p.m = m, p.n = n, p.k = k;
        p.x = dx.get(), p.w = dw.get(), p.y = dy.get();
        gemv(p, nullptr);
        INFERLAB_CUDA_CHECK(cudaDeviceSynchronize());
        const std::vector<float> raw = dy.download();
        std::vector<double> y(std::size_t(m * n));
        for (int64_t i = 0; i < m * n; ++i) {
          if (out == DType::fp32) {
            y[i] = raw[i];
          } else {
            uint16_t b;
            std::memcpy(&b, reinterpret_cast<const uint8_t*>(raw.data()) + 2 * i, 2);
            y[i] = dt == DType::bf16 ? bf16_value(b) : fp16_value(b);
          }
        }
        double ref_norm = 0, round_err = 0, err = 0;
        std::size_t bad = 0;
        for (int64_t i = 0; i < m; ++i)
          for (int64_t j = 0; j < n; ++j) {
            double r = 0;
            for (int64_t c = 0; c < k; ++c) r += double(x[i * k + c]) * double(w[j * k + c]);
            const double rr = out == DType::fp32 ? double(float(r)) : double(round(float(r)));
            ref_norm += r * r;
            round_err += (rr - r) * (rr - r);
            const double v = y[std::size_t(i * n + j)];
            if (!std::isfinite(v)) ++bad;
            else err += (v - r) * (v - r);
          }
        ASSERT_EQ(bad, 0u) << "outputs not written";
        EXPECT_LE(std::sqrt(err / ref_norm), 2 * std::sqrt(round_err / ref_norm) + 1e-5);
      }
}

TEST(GemvGpu, BadInputIsRejectedBeforeAnyLaunch) {
  alignas(16) static uint8_t buf[64];
  GemvParams p;
  p.x = p.w = p.y = buf;
  p.m = 9, p.n = 16, p.k = 64;
  EXPECT_NE(error_of([&] { validate_gemv(p); }).find("m must be in 1..8"), std::string::npos);
  p.m = 1, p.k = 12;
  EXPECT_NE(error_of([&] { validate_gemv(p); }).find("multiple of 8"), std::string::npos);
  p.k = 64, p.x = buf + 2;
  EXPECT_NE(error_of([&] { validate_gemv(p); }).find("aligned"), std::string::npos);
  p.x = buf, p.out_dtype = DType::fp16;
  EXPECT_NE(error_of([&] { validate_gemv(p); }).find("output"), std::string::npos);
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
  p.workspace = buf + 4;  // the Hopper kernels reduce 16 bytes at a time into it
  EXPECT_NE(err().find("aligned"), std::string::npos);
  p.workspace = nullptr;
  p.scales = nullptr;
  EXPECT_NE(err().find("scales"), std::string::npos);
  // The wgmma weight-only kernel: int8 and int4 on compute capability 9.0, no split_k.
  p.scales = buf;
  p.kernel = WeightOnlyKernel::wgmma;
  EXPECT_NE(err(80).find("wgmma"), std::string::npos);
  p.split_k = 2;
  EXPECT_NE(err().find("split_k applies to the mma"), std::string::npos);
  p.split_k = 0, p.format = WeightFormat::sparse24;
  EXPECT_NE(err().find("the wgmma weight-only kernel serves int8 and int4"), std::string::npos);
  p.kernel = WeightOnlyKernel::wgmma_tma;  // 2:4 has the TMA rung; the same refusals name it
  EXPECT_EQ(err().find("weight-only kernel"), std::string::npos) << err();
  p.format = WeightFormat::int4;
  EXPECT_NE(err(80).find("wgmma_tma weight-only kernel"), std::string::npos);
  p.split_k = 2;
  EXPECT_NE(err().find("split_k applies to the mma"), std::string::npos);
  p.split_k = 0, p.kernel = WeightOnlyKernel::wgmma;
  p.format = WeightFormat::bf16;
  EXPECT_NE(err().find("names a weight-only kernel"), std::string::npos);
}

}  // namespace
}  // namespace inferlab
