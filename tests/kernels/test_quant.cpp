// The weight formats' host side (kernels/gemm/quant.h), no GPU needed: number formats, quantizers
// with their inverse, 2:4 pruning, and the packed layouts round-trip exactly.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>

#include "inferlab/kernels/gemm/quant.h"
#include "inferlab/sim/error.h"
#include "inferlab/sim/rng.h"

#include "error_of.h"

namespace inferlab {
namespace {

TEST(Quant, Bf16AndFp16RoundToNearestEven) {
  EXPECT_EQ(round_bf16(1.0f), 1.0f);
  EXPECT_EQ(round_bf16(3.14159265f), 3.140625f);
  EXPECT_EQ(round_bf16(1.0f + 1.0f / 256), 1.0f);              // a tie, to the even mantissa
  EXPECT_EQ(round_bf16(1.0f + 3.0f / 256), 1.0f + 4.0f / 256);  // a tie, up to the even one
  EXPECT_EQ(round_fp16(65504.f), 65504.f);
  EXPECT_TRUE(std::isinf(round_fp16(65520.f)));
  EXPECT_EQ(round_fp16(1.0f + 1.0f / 2048), 1.0f);
  EXPECT_EQ(round_fp16(std::ldexp(3.0f, -24)), std::ldexp(3.0f, -24));  // a subnormal, exactly
  EXPECT_EQ(round_fp16(-2.5f), -2.5f);
}

TEST(Quant, Fp8E4m3EveryFiniteCodeRoundTripsAndLargeValuesSaturate) {
  for (int c = 0; c < 256; ++c) {
    if ((c & 0x7f) == 0x7f) continue;  // NaN
    const float v = fp8_e4m3_value(uint8_t(c));
    if (v == 0.f) continue;  // +0 and -0 share a value
    EXPECT_EQ(fp8_e4m3_bits(v), uint8_t(c)) << c;
  }
  EXPECT_EQ(fp8_e4m3_value(fp8_e4m3_bits(1e6f)), 448.f);
  EXPECT_EQ(fp8_e4m3_value(fp8_e4m3_bits(-1e6f)), -448.f);
  EXPECT_EQ(round_fp8_e4m3(1.0f + 1.0f / 16), 1.0f);  // halfway between 1 and 1.125: to the even code
  // Against a search over every code (the nearest; on a tie the even code) at all scales.
  Rng rng{3};
  for (int i = 0; i < 20000; ++i) {
    const float x = float(rng.normal() * std::ldexp(1.0, int(rng.next() % 24) - 12));
    const float a = std::min(std::fabs(x), 448.f);
    uint8_t best = 0;
    float best_err = INFINITY;
    for (int c = 0; c < 0x7f; ++c) {
      const float err = std::fabs(fp8_e4m3_value(uint8_t(c)) - a);
      if (err < best_err || (err == best_err && (c & 1) == 0)) best_err = err, best = uint8_t(c);
    }
    ASSERT_EQ(fp8_e4m3_bits(x), uint8_t(best | (std::signbit(x) ? 0x80 : 0))) << x;
  }
  for (int c = 0; c < 0x7e; ++c) {  // the midpoints between neighbouring codes go to the even one
    const float mid = (fp8_e4m3_value(uint8_t(c)) + fp8_e4m3_value(uint8_t(c + 1))) / 2;
    EXPECT_EQ(fp8_e4m3_bits(mid), (c & 1) ? c + 1 : c) << mid;
  }
}

// A weight that each format stores exactly: per row (int8) or per group (int4) integer levels times
// a bf16 scale, spanning the full code range so the quantizer's scale comes out the same.
std::vector<float> exact_int_weight(WeightFormat f, int64_t n, int64_t k, uint64_t seed) {
  Rng rng{seed};
  std::vector<float> w(std::size_t(n * k));
  for (int64_t r = 0; r < n; ++r) {
    if (f == WeightFormat::int8) {
      const float s = round_bf16(float(0.001 + rng.uniform() * 0.01));
      for (int64_t c = 0; c < k; ++c) w[std::size_t(r * k + c)] = float(int64_t(rng.next() % 255) - 127) * s;
      w[std::size_t(r * k)] = 127 * s;  // the row's largest magnitude sets s = absmax / 127
    } else {
      for (int64_t g0 = 0; g0 < k; g0 += 128) {
        const float s = round_bf16(float(0.001 + rng.uniform() * 0.01));
        const int z = int(rng.next() % 16);
        for (int64_t c = g0; c < g0 + 128; ++c) w[std::size_t(r * k + c)] = float(int(rng.next() % 16) - z) * s;
        w[std::size_t(r * k + g0)] = float(0 - z) * s;   // the codes 0 and 15 both occur:
        w[std::size_t(r * k + g0 + 1)] = float(15 - z) * s;  // (max - min) / 15 = s
      }
    }
  }
  return w;
}

TEST(Quant, Int8AndInt4StoreTheirOwnGridExactly) {
  for (WeightFormat f : {WeightFormat::int8, WeightFormat::int4}) {
    const int64_t n = 48, k = 256;
    const std::vector<float> w = exact_int_weight(f, n, k, 11);
    const PackedWeight p = pack_weight(w, n, k, f);
    EXPECT_EQ(double(p.values.size() + p.scales.size() + p.metadata.size()), weight_format_bytes(f, n, k).total());
    const std::vector<float> back = unpack_weight(p);
    for (std::size_t i = 0; i < w.size(); ++i) ASSERT_EQ(back[i], w[i]) << weight_format_name(f) << " at " << i;
  }
}

TEST(Quant, QuantizationErrorIsWithinHalfAStep) {
  const int64_t n = 32, k = 384;
  const std::vector<float> w = random_weight(n, k, 5);
  float amax = 0;
  for (float v : w) amax = std::max(amax, std::fabs(v));
  const float fp8_subnormal_half_step = amax / 448 * std::ldexp(1.f, -10);  // the scale times half of 2^-9
  for (WeightFormat f : {WeightFormat::int8, WeightFormat::int4, WeightFormat::fp8}) {
    const PackedWeight p = pack_weight(w, n, k, f);
    const std::vector<float> back = unpack_weight(p);
    for (int64_t r = 0; r < n; ++r)
      for (int64_t g0 = 0; g0 < k; g0 += 128) {
        float lo = 0, hi = 0, amax_row = 0;
        for (int64_t c = g0; c < g0 + 128; ++c) {
          lo = std::min(lo, w[std::size_t(r * k + c)]);
          hi = std::max(hi, w[std::size_t(r * k + c)]);
        }
        for (int64_t c = 0; c < k; ++c) amax_row = std::max(amax_row, std::fabs(w[std::size_t(r * k + c)]));
        for (int64_t c = g0; c < g0 + 128; ++c) {
          const float x = w[std::size_t(r * k + c)], e = std::fabs(back[std::size_t(r * k + c)] - x);
          if (f == WeightFormat::int8) {
            ASSERT_LE(e, amax_row / 127 * 0.5f * 1.0001f);
          }
          if (f == WeightFormat::int4) {
            ASSERT_LE(e, round_bf16((hi - lo) / 15) * 0.5f * 1.02f + 1e-7f);
          }
          if (f == WeightFormat::fp8) {  // 3 mantissa bits: half a step, or half the subnormal step
            ASSERT_LE(e, std::max(std::fabs(x) / 16, fp8_subnormal_half_step) * 1.0001f);
          }
        }
      }
  }
}

TEST(Quant, PruningKeepsTheTwoLargestOfEveryFour) {
  std::vector<float> w = {1, -5, 3, 2, /**/ 0, 0, 7, 0, /**/ 4, 4, 4, 4, /**/ -1, 0.5f, -2, 3};
  prune_2_4(w, 1, 16);
  const std::vector<float> want = {0, -5, 3, 0, /**/ 0, 0, 7, 0, /**/ 4, 4, 0, 0, /**/ 0, 0, -2, 3};
  EXPECT_EQ(w, want);
  EXPECT_NE(error_of([] {
              std::vector<float> v(6);
              prune_2_4(v, 1, 6);
            }),
            "");
}

TEST(Quant, Sparse24RoundTripsThePrunedWeight) {
  const int64_t n = 32, k = 128;
  std::vector<float> w = random_weight(n, k, 9, 2, 10.f);
  w[5] = 0.f;  // groups with fewer than two non-zeros: an explicit zero is stored
  w[40 * 1 + 3] = 0.f;
  for (int c = 64; c < 68; ++c) w[std::size_t(3 * k + c)] = 0.f;
  w[std::size_t(7 * k + 11)] = 2.f, w[std::size_t(7 * k + 8)] = w[std::size_t(7 * k + 9)] = w[std::size_t(7 * k + 10)] = 0.f;
  const PackedWeight p = pack_weight(w, n, k, WeightFormat::sparse24);
  EXPECT_EQ(double(p.values.size() + p.metadata.size()), weight_format_bytes(WeightFormat::sparse24, n, k).total());
  std::vector<float> want = w;
  prune_2_4(want, n, k);
  for (float& x : want) x = round_bf16(x);
  EXPECT_EQ(unpack_weight(p), want);
  // Every group's two indices are distinct and ascending (the ordered-metadata contract).
  for (std::size_t i = 0; i < p.metadata.size(); i += 4) {
    uint32_t m;
    std::memcpy(&m, &p.metadata[i], 4);
    for (int j = 0; j < 8; ++j) {
      const uint32_t bits = (m >> (4 * j)) & 0xf;
      ASSERT_LT(bits & 3, bits >> 2);
    }
  }
}

TEST(Quant, FragmentLayoutPutsEachValueWhereTheTensorCoreWantsIt) {
  // int8: lane L = 4g + t, k16 step j, value i: (row g + 8·((i>>1)&1), col 16j + 2t + (i&1) + 8·(i>>2)).
  const int64_t n = 16, k = 32;
  std::vector<float> w(std::size_t(n * k));
  for (int64_t r = 0; r < n; ++r)
    for (int64_t c = 0; c < k; ++c) w[std::size_t(r * k + c)] = float((r * 7 + c) % 127);
  const PackedWeight p = pack_weight(w, n, k, WeightFormat::int8);
  float s;
  std::memcpy(&s, p.scales.data() + 5 * 4, 4);  // row 5's scale
  // lane 21 = (g 5, t 1), step 1, value 4: row 5, col 16 + 2 + 8 = 26
  EXPECT_NEAR(float(int8_t(p.values[21 * 16 + 8 + 4])) * s, w[std::size_t(5 * k + 26)], 0.5f * s);
  // A word's bytes are a0 a2 a1 a3 (dequant.cuh's pairs: bytes 0 and 2, 1 and 3): value 1 (row 5, col 16 + 2 + 1 = 19)
  // in byte 2, value 2 (row 13, col 18) in byte 1; value 5 (row 5, col 27) in byte 6.
  float s13;
  std::memcpy(&s13, p.scales.data() + 13 * 4, 4);
  EXPECT_NEAR(float(int8_t(p.values[21 * 16 + 8 + 2])) * s, w[std::size_t(5 * k + 19)], 0.5f * s);
  EXPECT_NEAR(float(int8_t(p.values[21 * 16 + 8 + 1])) * s13, w[std::size_t(13 * k + 18)], 0.5f * s13);
  EXPECT_NEAR(float(int8_t(p.values[21 * 16 + 8 + 6])) * s, w[std::size_t(5 * k + 27)], 0.5f * s);
  EXPECT_GT(std::fabs(w[std::size_t(5 * k + 19)] - w[std::size_t(13 * k + 18)]), 1.f);  // the two places differ
  // int4: the nibble of value 1 of step 0 of lane 0 is slot 4 (the word's high half): row 0, col 1.
  std::vector<float> w4(std::size_t(16 * 128), 0.f);
  for (int64_t r = 0; r < 16; ++r) w4[std::size_t(r * 128)] = -1.f, w4[std::size_t(r * 128 + 127)] = 14.f;  // s = 1, z = 1
  w4[1] = 5.f;  // q = 6
  const PackedWeight p4 = pack_weight(w4, 16, 128, WeightFormat::int4);
  EXPECT_EQ((p4.values[2] & 0xf), 6);
}

TEST(Quant, UnsupportedShapesNameTheirConstraint) {
  EXPECT_NE(error_of([] { check_packable(WeightFormat::int4, 64, 100); }).find("128"), std::string::npos);
  EXPECT_NE(error_of([] { check_packable(WeightFormat::sparse24, 64, 30); }).find("multiple of 4"), std::string::npos);
  EXPECT_NE(error_of([] { check_packable(WeightFormat::int8, 10, 64); }).find("16"), std::string::npos);
  EXPECT_NE(error_of([] { pack_weight(std::vector<float>(10), 16, 32, WeightFormat::int8); }), "");
  EXPECT_EQ(error_of([] { check_packable(WeightFormat::bf16, 3, 8); }), "");
}

}  // namespace
}  // namespace inferlab
