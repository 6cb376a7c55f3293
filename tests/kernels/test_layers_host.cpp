// kernels/layers, host side (no GPU): the RoPE frequencies against hand-computed values (Llama-3.1's scaling),
// the CPU references on cases worked by hand, and the sampler's generator against Random123's known answers.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "inferlab/kernels/layers/layers_host.h"
#include "inferlab/kernels/layers/philox.h"
#include "inferlab/sim/error.h"

#include "error_of.h"

namespace inferlab {
namespace {

TEST(LayersHost, PhiloxMatchesRandom123KnownAnswers) {
  // Random123 kat_vectors: philox4x32 10 <counter x4> <key x2> -> <output x4>.
  struct Kat {
    uint32_t ctr[4], key[2], out[4];
  };
  const Kat kats[] = {
      {{0, 0, 0, 0}, {0, 0}, {0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}},
      {{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff}, {0xffffffff, 0xffffffff}, {0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}},
      {{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}, {0xa4093822, 0x299f31d0}, {0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}},
  };
  for (const Kat& k : kats) {
    const Philox4x32 r = philox4x32_10(Philox4x32{{k.ctr[0], k.ctr[1], k.ctr[2], k.ctr[3]}}, k.key[0], k.key[1]);
    for (int i = 0; i < 4; ++i) EXPECT_EQ(r.v[i], k.out[i]) << "word " << i;
  }
  // A draw is (counter = offset, key = seed): the first two words of that block.
  const uint64_t seed = 0x299f31d0a4093822ull, offset = 0x85a308d3243f6a88ull;
  const Philox4x32 r = philox4x32_10(Philox4x32{{0x243f6a88, 0x85a308d3, 0, 0}}, 0xa4093822, 0x299f31d0);
  EXPECT_EQ(philox_draw64(seed, offset), (uint64_t(r.v[0]) << 32) | r.v[1]);
}

// Relative difference.
double rel(double a, double b) { return std::fabs(a - b) / std::fabs(b); }

TEST(LayersHost, RopeFrequenciesDefault) {
  const auto inv = rope_inv_freq(128, 10000.0, {});
  ASSERT_EQ(inv.size(), 64u);
  EXPECT_EQ(inv[0], 1.0f);
  for (int i = 0; i < 64; ++i) EXPECT_LT(rel(inv[std::size_t(i)], std::pow(10000.0, -2.0 * i / 128)), 3e-7) << i;
  EXPECT_NEAR(inv[1], 0.8659643233600653, 1e-7);  // 10000^(-1/64)
}

TEST(LayersHost, RopeFrequenciesLlama31) {
  // Llama-3.1: theta 500000, factor 8, low 1, high 4, original 8192, head_dim 128. Wavelength 2 pi / inv:
  // below 8192 / 4 = 2048 (i <= 28) unchanged, above 8192 (i >= 35) divided by 8, between smoothed.
  RopeScaling s;
  s.type = "llama3";
  s.factor = 8;
  s.low_freq_factor = 1;
  s.high_freq_factor = 4;
  s.original_max_positions = 8192;
  const auto inv = rope_inv_freq(128, 500000.0, s);
  const auto plain = rope_inv_freq(128, 500000.0, {});
  ASSERT_EQ(inv.size(), 64u);
  for (int i = 0; i <= 28; ++i) EXPECT_EQ(inv[std::size_t(i)], plain[std::size_t(i)]) << i;
  for (int i = 35; i < 64; ++i) EXPECT_EQ(inv[std::size_t(i)], plain[std::size_t(i)] / 8) << i;
  // Worked in double: inv = 500000^(-i/64); mid band: s = (8192 / wavelen - 1) / 3, (1 - s) inv / 8 + s inv.
  const std::pair<int, double> hand[] = {
      {0, 1.0},
      {1, 0.8146172338565447},
      {10, 0.12868737343265052},
      {28, 0.003211445994752591},
      {29, 0.002166570763503359},
      {30, 0.0013718935677611381},
      {31, 0.0008567514129196321},
      {32, 0.0005248461609929547},
      {33, 0.00031269375038406517},
      {34, 0.0001785078127679964},
      {35, 9.556212353964683e-05},
      {40, 3.428102195952591e-05},
      {63, 3.068925988914511e-07},
  };
  // Each value is a chain of at most 8 fp32 operations.
  for (const auto& [i, want] : hand) EXPECT_LT(rel(inv[std::size_t(i)], want), 8 * 0x1p-24) << i;
  // Smoothed strictly between the unscaled and the fully scaled value, decreasing.
  for (int i = 29; i <= 34; ++i) {
    EXPECT_LT(inv[std::size_t(i)], plain[std::size_t(i)]) << i;
    EXPECT_GT(inv[std::size_t(i)], plain[std::size_t(i)] / 8) << i;
    EXPECT_LT(inv[std::size_t(i)], inv[std::size_t(i - 1)]) << i;
  }
}

TEST(LayersHost, RopeFrequenciesLinearAndBadInput) {
  RopeScaling lin;
  lin.type = "linear";
  lin.factor = 4;
  const auto a = rope_inv_freq(64, 10000.0, lin), b = rope_inv_freq(64, 10000.0, {});
  for (std::size_t i = 0; i < a.size(); ++i) EXPECT_EQ(a[i], b[i] / 4) << i;

  RopeScaling yarn;
  yarn.type = "yarn";
  EXPECT_NE(error_of([&] { rope_inv_freq(128, 1e4, yarn); }).find("unsupported rope_type 'yarn'"), std::string::npos);
  EXPECT_NE(error_of([&] { rope_inv_freq(127, 1e4, {}); }).find("even"), std::string::npos);
  EXPECT_NE(error_of([&] { rope_inv_freq(128, 0, {}); }).find("rope_theta"), std::string::npos);
  RopeScaling bad = lin;
  bad.factor = 0;
  EXPECT_NE(error_of([&] { rope_inv_freq(128, 1e4, bad); }).find("factor"), std::string::npos);
  RopeScaling l3;
  l3.type = "llama3";
  l3.factor = 8;
  l3.low_freq_factor = 4;
  l3.high_freq_factor = 1;
  EXPECT_NE(error_of([&] { rope_inv_freq(128, 1e4, l3); }).find("low_freq_factor < high_freq_factor"), std::string::npos);
}

TEST(LayersHost, ReferencesOnHandWorkedCases) {
  // embedding: ids outside the table give zero rows.
  const float table[] = {1, 2, 3, 4, 5, 6};  // [3, 2]
  const int32_t ids[] = {2, -1, 0, 3};
  float emb[8];
  embedding_reference(4, 2, 3, ids, table, emb);
  EXPECT_EQ(std::vector<float>(emb, emb + 8), (std::vector<float>{5, 6, 0, 0, 1, 2, 0, 0}));

  // rmsnorm: row (3, 4) + (0, 0): rms = sqrt(12.5); weight (1, 2).
  float res[] = {3, 4, 1, 1};
  const float add[] = {0, 0, 1, -3};
  const float w[] = {1, 2};
  float out[4];
  rmsnorm_reference(DType::fp32, 2, 2, 0.0, res, add, w, nullptr, 0, out);
  EXPECT_FLOAT_EQ(out[0], float(3 / std::sqrt(12.5)));
  EXPECT_FLOAT_EQ(out[1], float(2 * 4 / std::sqrt(12.5)));
  EXPECT_EQ(res[2], 2.0f);  // the residual takes the sum
  EXPECT_EQ(res[3], -2.0f);
  EXPECT_FLOAT_EQ(out[2], 1.0f);  // (2, -2) / 2
  EXPECT_FLOAT_EQ(out[3], -2.0f);
  // row_index: row 1 of the source, then an index outside it (zero row); the residual is not written.
  const int32_t pick[] = {1, 5};
  float res2[] = {3, 4, 2, -2};
  rmsnorm_reference(DType::bf16, 2, 2, 0.0, res2, add, w, pick, 2, out);
  EXPECT_EQ(res2[2], 2.0f);
  // (3, -5) / sqrt(17) = (0.727607, -1.212678) -> bf16 (0.7265625, -1.2109375), times the weight (1, 2).
  EXPECT_EQ(out[0], 0.7265625f);
  EXPECT_EQ(out[1], -2.421875f);
  EXPECT_EQ(out[2], 0.0f);
  EXPECT_EQ(out[3], 0.0f);

  // swiglu: silu(1) * 2 = 2 / (1 + e^-1).
  const float gu[] = {1, 2};
  float sw;
  swiglu_reference(DType::fp32, 1, 1, gu, &sw);
  EXPECT_FLOAT_EQ(sw, float(2 / (1 + std::exp(-1.0))));

  // rope, head_dim 2, one q, one k, one v head: position 3 with inv_freq 0.5 rotates (1, 0) by 1.5 rad.
  const float qkv[] = {1, 0, 0, 2, 7, 8};
  const int32_t pos[] = {3};
  const float invf[] = {0.5f};
  float q[2], k[2], v[2];
  rope_reference(DType::fp32, 1, 1, 1, 2, qkv, nullptr, pos, invf, q, k, v);
  EXPECT_FLOAT_EQ(q[0], float(std::cos(1.5)));
  EXPECT_FLOAT_EQ(q[1], float(std::sin(1.5)));
  EXPECT_FLOAT_EQ(k[0], float(-2 * std::sin(1.5)));
  EXPECT_FLOAT_EQ(k[1], float(2 * std::cos(1.5)));
  EXPECT_EQ(v[0], 7.0f);
  EXPECT_EQ(v[1], 8.0f);
}

TEST(LayersHost, ArgmaxAndSampleDistributionReference) {
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  const float ties[] = {nan, 2, 5, nan, 5, -inf};
  EXPECT_EQ(argmax_reference(ties, 6), 2);
  const float all_nan[] = {nan, nan};
  EXPECT_EQ(argmax_reference(all_nan, 2), -1);
  const float all_ninf[] = {-inf, -inf};
  EXPECT_EQ(argmax_reference(all_ninf, 2), 0);

  const float l[] = {0, float(std::log(2.0)), float(std::log(4.0)), nan, -inf};
  auto near = [](const std::vector<double>& got, const std::vector<double>& want) {
    ASSERT_EQ(got.size(), want.size());
    for (std::size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-6) << i;
  };
  near(sample_distribution_reference(l, 5, 1.f, 0, 1.f), {1 / 7., 2 / 7., 4 / 7., 0, 0});
  near(sample_distribution_reference(l, 5, 1.f, 2, 1.f), {0, 1 / 3., 2 / 3., 0, 0});
  near(sample_distribution_reference(l, 5, 1.f, 0, 0.5f), {0, 0, 1, 0, 0});         // 4/7 reaches 0.5
  near(sample_distribution_reference(l, 5, 1.f, 0, 0.6f), {0, 1 / 3., 2 / 3., 0, 0});  // 4/7 < 0.6 <= 6/7
  near(sample_distribution_reference(l, 5, 1.f, 2, 0.6f), {0, 0, 1, 0, 0});         // 4/6 of the top-2 mass reaches 0.6
  near(sample_distribution_reference(l, 5, 1.f, 2, 0.7f), {0, 1 / 3., 2 / 3., 0, 0});  // 4/6 does not reach 0.7
  near(sample_distribution_reference(l, 5, 0.5f, 0, 1.f), {1 / 21., 4 / 21., 16 / 21., 0, 0});
  near(sample_distribution_reference(l, 5, 0.f, 0, 1.f), {0, 0, 1, 0, 0});          // greedy
  near(sample_distribution_reference(l, 5, 1.f, 0, 0.f), {0, 0, 1, 0, 0});          // top_p <= 0: the largest only
  // Ties at the top-k and top-p boundaries are kept.
  const float t[] = {1, 1, 0};
  near(sample_distribution_reference(t, 3, 1.f, 1, 1.f), {0.5, 0.5, 0});
  near(sample_distribution_reference(t, 3, 1.f, 0, 0.1f), {0.5, 0.5, 0});
  // +inf counts as the largest finite float: two of them share the draw.
  const float pinf[] = {inf, 3, inf};
  near(sample_distribution_reference(pinf, 3, 1.f, 0, 1.f), {0.5, 0, 0.5});
  // Nothing drawable: greedy (all -inf: the first; all NaN: nothing).
  near(sample_distribution_reference(all_ninf, 2, 1.f, 0, 1.f), {1, 0});
  near(sample_distribution_reference(all_nan, 2, 1.f, 0, 1.f), {0, 0});
}

}  // namespace
}  // namespace inferlab
