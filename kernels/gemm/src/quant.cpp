// Host side of the weight formats (quant.h): quantizers, 2:4 pruning, the packing into the device
// layouts and its inverse.
#include "inferlab/kernels/gemm/quant.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "inferlab/sim/error.h"
#include "inferlab/sim/rng.h"

namespace inferlab {
namespace {

constexpr int64_t kTileRows = 16;    // rows of a warp (an m16 tile)
constexpr int64_t kChunkBytes = 512; // 32 lanes x 16 bytes
constexpr int64_t kLanes = 32;

template <class T>
void put(std::vector<uint8_t>& v, int64_t offset, T x) {
  std::memcpy(v.data() + offset, &x, sizeof(T));
}
template <class T>
T get(const std::vector<uint8_t>& v, int64_t offset) {
  T x;
  std::memcpy(&x, v.data() + offset, sizeof(T));
  return x;
}

// The (row, col) of value i (0..7) of lane (g, t) in the k16 step starting at column kk of the row
// tile starting at r0 (PTX m16n8k16 A fragment).
void fragment_position(int64_t r0, int64_t kk, int g, int t, int i, int64_t& row, int64_t& col) {
  row = r0 + g + ((i >> 1) & 1) * 8;
  col = kk + 2 * t + (i & 1) + (i >> 2) * 8;
}

// Visits every (chunk byte offset, lane, k16 step, value index, row, col) of the fragment layout.
template <class F>
void for_each_fragment_value(int64_t n, int64_t k, int64_t cols, F&& f) {
  const int64_t chunks_per_row_tile = k / cols;
  for (int64_t rt = 0; rt < n / kTileRows; ++rt)
    for (int64_t c = 0; c < chunks_per_row_tile; ++c) {
      const int64_t base = (rt * chunks_per_row_tile + c) * kChunkBytes;
      for (int lane = 0; lane < kLanes; ++lane)
        for (int64_t j = 0; j < cols / 16; ++j)
          for (int i = 0; i < 8; ++i) {
            int64_t row = 0, col = 0;
            fragment_position(rt * kTileRows, c * cols + 16 * j, lane / 4, lane % 4, i, row, col);
            f(base + lane * 16, int(j), i, row, col);
          }
    }
}

// int4 nibble slot of A value i within its 32-bit word: a0 a2 a4 a6 a1 a3 a5 a7 (low to high).
int int4_slot(int i) { return (i & 1) * 4 + (i >> 1); }

// int8 byte slot of A value i within its 8 bytes: a0 a2 a1 a3 a4 a6 a5 a7, so that a word's bytes 0, 2 hold the pair
// of its first A register and bytes 1, 3 the second's (word & 0x00FF00FF, (word >> 8) & 0x00FF00FF).
int int8_slot(int i) { return (i & 4) | ((i & 1) << 1) | ((i >> 1) & 1); }

}  // namespace

void check_packable(WeightFormat f, int64_t n, int64_t k) {
  if (n <= 0 || k <= 0)
    throw Error("weight " + weight_format_name(f) + ": sizes must be positive, got n=" + std::to_string(n) +
                " k=" + std::to_string(k));
  weight_format_bytes(f, n, k);  // the format's own constraints (sim), named there
  auto need = [&](bool ok, const std::string& what) {
    if (!ok)
      throw Error("weight " + weight_format_name(f) + " " + std::to_string(n) + "x" + std::to_string(k) + ": " + what);
  };
  switch (f) {
    case WeightFormat::int4:
      need(n % kTileRows == 0, "the kernel needs n a multiple of 16");
      need(k % kInt4GroupSize == 0, "int4 needs k a multiple of the group size 128");
      break;
    case WeightFormat::int8:
    case WeightFormat::sparse24:
      need(n % kTileRows == 0, "the kernel needs n a multiple of 16");
      need(k % 32 == 0, "the kernel needs k a multiple of 32");
      break;
    case WeightFormat::fp8: need(k % 16 == 0 && n % 16 == 0, "cuBLASLt fp8 needs n and k multiples of 16"); break;
    case WeightFormat::bf16:
    case WeightFormat::fp16: need(k % 8 == 0, "the dense kernels need k a multiple of 8 (16-byte rows)"); break;
  }
}

float bf16_value(uint16_t b) {
  const uint32_t u = uint32_t(b) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

float fp16_value(uint16_t h) {
  const int e = (h >> 10) & 0x1f, m = h & 0x3ff;
  const float v = e == 0 ? std::ldexp(float(m), -24) : e == 31 ? INFINITY : std::ldexp(float(m | 0x400), e - 25);
  return (h & 0x8000) ? -v : v;
}

uint16_t bf16_bits(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return uint16_t((u >> 16) | 0x40);  // NaN stays NaN
  u += 0x7fffu + ((u >> 16) & 1u);                                         // round to nearest even
  return uint16_t(u >> 16);
}
float round_bf16(float x) { return bf16_value(bf16_bits(x)); }

uint16_t fp16_bits(float x) {
  // Round to nearest even through the float's bits (normal, subnormal, overflow to inf).
  uint32_t u;
  std::memcpy(&u, &x, 4);
  const uint16_t sign = uint16_t((u >> 16) & 0x8000u);
  u &= 0x7fffffffu;
  if (u > 0x7f800000u) return uint16_t(sign | 0x7e00u);
  if (u >= 0x477ff000u) return uint16_t(sign | 0x7c00u);  // rounds to >= 65520: inf
  if (u < 0x38800000u) {                                  // below the smallest fp16 normal: subnormal
    const float a = std::fabs(x) * 16777216.0f;           // in units of 2^-24
    return uint16_t(sign | uint16_t(std::nearbyint(a)));
  }
  const uint32_t mant = u + 0xfffu + ((u >> 13) & 1u);
  return uint16_t(sign | uint16_t(((mant >> 13) - (112u << 10)) & 0x7fffu));
}
float round_fp16(float x) { return fp16_value(fp16_bits(x)); }

float fp8_e4m3_value(uint8_t b) {
  const int e = (b >> 3) & 0xf, m = b & 7;
  float v;
  if (e == 15 && m == 7) v = NAN;
  else if (e == 0) v = std::ldexp(float(m), -9);  // subnormal: m / 8 * 2^-6
  else v = std::ldexp(float(8 + m), e - 10);      // (1 + m/8) 2^(e-7)
  return (b & 0x80) ? -v : v;
}
uint8_t fp8_e4m3_bits(float x) {
  // Round to nearest even, saturating at ±448 (the OCP "satfinite"): 1 sign, 4 exponent (bias 7),
  // 3 mantissa bits; below 2^-6 the codes are subnormal steps of 2^-9 (code 8 is 2^-6 itself).
  if (std::isnan(x)) return 0x7f;
  const uint8_t sign = std::signbit(x) ? 0x80 : 0;
  const float a = std::min(std::fabs(x), 448.0f);
  if (a < 0.015625f) return uint8_t(sign | uint8_t(std::nearbyint(a * 512.0f)));
  int e = 0;
  const float f = std::frexp(a, &e);  // a = f 2^e, f in [0.5, 1): the code's exponent is e - 1
  int m = int(std::nearbyint((2 * f - 1) * 8));
  if (m == 8) m = 0, ++e;
  return uint8_t(sign | uint8_t(((e - 1 + 7) << 3) | m));
}
float round_fp8_e4m3(float x) { return fp8_e4m3_value(fp8_e4m3_bits(x)); }

void prune_2_4(std::vector<float>& w, int64_t n, int64_t k) {
  if (k % 4 != 0) throw Error("2:4 pruning needs k a multiple of 4, got k=" + std::to_string(k));
  for (int64_t r = 0; r < n; ++r)
    for (int64_t c = 0; c < k; c += 4) {
      float* g = &w[std::size_t(r * k + c)];
      int keep0 = 0, keep1 = 1;  // the two largest |w|, lower index first on ties
      if (std::fabs(g[1]) > std::fabs(g[0])) std::swap(keep0, keep1);
      for (int i = 2; i < 4; ++i) {
        if (std::fabs(g[i]) > std::fabs(g[keep0])) {
          keep1 = keep0;
          keep0 = i;
        } else if (std::fabs(g[i]) > std::fabs(g[keep1])) {
          keep1 = i;
        }
      }
      for (int i = 0; i < 4; ++i)
        if (i != keep0 && i != keep1) g[i] = 0.f;
    }
}

PackedWeight pack_weight(const std::vector<float>& w, int64_t n, int64_t k, WeightFormat f) {
  check_packable(f, n, k);
  if (int64_t(w.size()) != n * k) throw Error("pack_weight: the weight holds " + std::to_string(w.size()) + " values, not n*k");
  PackedWeight p;
  p.format = f;
  p.n = n;
  p.k = k;
  auto at = [&](int64_t r, int64_t c) { return w[std::size_t(r * k + c)]; };
  switch (f) {
    case WeightFormat::bf16:
    case WeightFormat::fp16: {
      p.values.resize(std::size_t(n * k * 2));
      for (int64_t i = 0; i < n * k; ++i)
        put<uint16_t>(p.values, i * 2, f == WeightFormat::bf16 ? bf16_bits(w[std::size_t(i)]) : fp16_bits(w[std::size_t(i)]));
      break;
    }
    case WeightFormat::fp8: {
      Fp8Tensor q = quantize_fp8(w);
      p.values = std::move(q.codes);
      p.scales.resize(4);
      put<float>(p.scales, 0, q.scale);
      break;
    }
    case WeightFormat::int8: {
      p.scales.resize(std::size_t(n * 4));
      std::vector<float> s(static_cast<std::size_t>(n));
      for (int64_t r = 0; r < n; ++r) {
        float amax = 0;
        for (int64_t c = 0; c < k; ++c) amax = std::max(amax, std::fabs(at(r, c)));
        s[std::size_t(r)] = amax > 0 ? amax / 127.0f : 1.0f;
        put<float>(p.scales, r * 4, s[std::size_t(r)]);
      }
      p.values.resize(std::size_t(n * k));
      for_each_fragment_value(n, k, 32, [&](int64_t lane_off, int j, int i, int64_t row, int64_t col) {
        const float q = std::clamp(std::nearbyint(at(row, col) / s[std::size_t(row)]), -127.f, 127.f);
        p.values[std::size_t(lane_off + j * 8 + int8_slot(i))] = uint8_t(int8_t(q));
      });
      break;
    }
    case WeightFormat::int4: {
      const int64_t groups = k / kInt4GroupSize;
      std::vector<float> s(static_cast<std::size_t>(n * groups));
      std::vector<int> z(static_cast<std::size_t>(n * groups));
      p.scales.resize(std::size_t(n * groups * 4));
      for (int64_t r = 0; r < n; ++r)
        for (int64_t gi = 0; gi < groups; ++gi) {
          float lo = INFINITY, hi = -INFINITY;
          for (int64_t c = gi * kInt4GroupSize; c < (gi + 1) * kInt4GroupSize; ++c) {
            lo = std::min(lo, at(r, c));
            hi = std::max(hi, at(r, c));
          }
          lo = std::min(lo, 0.f);  // the range holds 0, so zero stays representable
          hi = std::max(hi, 0.f);
          float scale = round_bf16((hi - lo) / 15.0f);
          if (!(scale > 0)) scale = 1.0f;
          const int zero = int(std::clamp(std::nearbyint(-lo / scale), 0.f, 15.f));
          s[std::size_t(r * groups + gi)] = scale;
          z[std::size_t(r * groups + gi)] = zero;
          put<uint32_t>(p.scales, (gi * n + r) * 4, uint32_t(bf16_bits(scale)) | (uint32_t(bf16_bits(128.f + zero)) << 16));
        }
      p.values.assign(std::size_t(n * k / 2), 0);
      for_each_fragment_value(n, k, 64, [&](int64_t lane_off, int j, int i, int64_t row, int64_t col) {
        const std::size_t gidx = std::size_t(row * groups + col / kInt4GroupSize);
        const int q = int(std::clamp(std::nearbyint(at(row, col) / s[gidx]) + float(z[gidx]), 0.f, 15.f));
        const int64_t byte = lane_off + j * 4 + int4_slot(i) / 2;
        p.values[std::size_t(byte)] |= uint8_t(q << (4 * (int4_slot(i) & 1)));
      });
      break;
    }
    case WeightFormat::sparse24: {
      std::vector<float> pruned = w;
      prune_2_4(pruned, n, k);
      p.values.resize(std::size_t(n * k));              // n·k/2 kept values x 2 bytes
      p.metadata.assign(std::size_t(n * k / 8), 0);     // 2 bits per kept value
      const int64_t steps = k / 32;
      for (int64_t rt = 0; rt < n / kTileRows; ++rt)
        for (int64_t c = 0; c < steps; ++c) {
          const int64_t chunk = rt * steps + c;
          for (int lane = 0; lane < kLanes; ++lane) {
            const int g = lane / 4, t = lane % 4;
            for (int half_row = 0; half_row < 2; ++half_row)   // row g, row g+8
              for (int hi_group = 0; hi_group < 2; ++hi_group) {  // group t, group t+4
                const int64_t row = rt * kTileRows + g + 8 * half_row;
                const int64_t col0 = c * 32 + 4 * (t + 4 * hi_group);
                int kept = 0;
                uint16_t v[2] = {0, 0};
                int idx[2] = {0, 1};
                for (int e = 0; e < 4 && kept < 2; ++e)
                  if (pruned[std::size_t(row * k + col0 + e)] != 0.f) {
                    idx[kept] = e;
                    v[kept++] = bf16_bits(pruned[std::size_t(row * k + col0 + e)]);
                  }
                if (kept == 1 && idx[0] == 3) {  // one non-zero in the last slot: an explicit zero before it
                  idx[1] = 3;
                  v[1] = v[0];
                  idx[0] = 2;
                  v[0] = 0;
                } else if (kept == 1) {
                  idx[1] = 3;  // its partner: an explicit zero at slot 3
                } else if (kept == 0) {
                  idx[0] = 0;
                  idx[1] = 1;
                }
                // values: a0 a1 (row g, group t) a2 a3 (row g+8, group t) a4 a5 (row g, group t+4) a6 a7
                const int slot = 2 * half_row + 4 * hi_group;
                put<uint16_t>(p.values, chunk * kChunkBytes + lane * 16 + slot * 2, v[0]);
                put<uint16_t>(p.values, chunk * kChunkBytes + lane * 16 + slot * 2 + 2, v[1]);
                // metadata: the lanes t and t^1 see the same groups; write each once (from t < 2's view
                // the word layout is [g][h], h = 16-column half, low 16 bits row g, high row g+8).
                const int h = hi_group, j = t;  // group t + 4h is group j of half h
                const int64_t word = chunk * 64 + (g * 2 + h) * 4;
                uint32_t m = get<uint32_t>(p.metadata, word);
                const uint32_t bits = uint32_t(idx[0] | (idx[1] << 2)) << (4 * j + 16 * half_row);
                m = (m & ~(0xfu << (4 * j + 16 * half_row))) | bits;
                put<uint32_t>(p.metadata, word, m);
              }
          }
        }
      break;
    }
  }
  return p;
}

std::vector<float> unpack_weight(const PackedWeight& p) {
  const int64_t n = p.n, k = p.k;
  check_packable(p.format, n, k);
  std::vector<float> w(std::size_t(n * k), 0.f);
  auto at = [&](int64_t r, int64_t c) -> float& { return w[std::size_t(r * k + c)]; };
  switch (p.format) {
    case WeightFormat::bf16:
      for (int64_t i = 0; i < n * k; ++i) w[std::size_t(i)] = bf16_value(get<uint16_t>(p.values, i * 2));
      break;
    case WeightFormat::fp16:
      for (int64_t i = 0; i < n * k; ++i) w[std::size_t(i)] = fp16_value(get<uint16_t>(p.values, i * 2));
      break;
    case WeightFormat::fp8: {
      const float s = get<float>(p.scales, 0);
      for (int64_t i = 0; i < n * k; ++i) w[std::size_t(i)] = fp8_e4m3_value(p.values[std::size_t(i)]) * s;
      break;
    }
    case WeightFormat::int8:
      for_each_fragment_value(n, k, 32, [&](int64_t lane_off, int j, int i, int64_t row, int64_t col) {
        at(row, col) = float(int8_t(p.values[std::size_t(lane_off + j * 8 + int8_slot(i))])) * get<float>(p.scales, row * 4);
      });
      break;
    case WeightFormat::int4: {
      for_each_fragment_value(n, k, 64, [&](int64_t lane_off, int j, int i, int64_t row, int64_t col) {
        const uint8_t b = p.values[std::size_t(lane_off + j * 4 + int4_slot(i) / 2)];
        const int q = (b >> (4 * (int4_slot(i) & 1))) & 0xf;
        const uint32_t sz = get<uint32_t>(p.scales, ((col / kInt4GroupSize) * n + row) * 4);
        const float scale = bf16_value(uint16_t(sz & 0xffff)), zero = bf16_value(uint16_t(sz >> 16)) - 128.f;
        at(row, col) = (float(q) - zero) * scale;
      });
      break;
    }
    case WeightFormat::sparse24: {
      const int64_t steps = k / 32;
      for (int64_t rt = 0; rt < n / kTileRows; ++rt)
        for (int64_t c = 0; c < steps; ++c) {
          const int64_t chunk = rt * steps + c;
          for (int lane = 0; lane < kLanes; lane += 1) {
            const int g = lane / 4, t = lane % 4;
            for (int half_row = 0; half_row < 2; ++half_row)
              for (int hi_group = 0; hi_group < 2; ++hi_group) {
                const int64_t row = rt * kTileRows + g + 8 * half_row;
                const int64_t col0 = c * 32 + 4 * (t + 4 * hi_group);
                const uint32_t m = get<uint32_t>(p.metadata, chunk * 64 + (g * 2 + hi_group) * 4);
                const uint32_t bits = (m >> (4 * t + 16 * half_row)) & 0xf;
                const int slot = 2 * half_row + 4 * hi_group;
                const float v0 = bf16_value(get<uint16_t>(p.values, chunk * kChunkBytes + lane * 16 + slot * 2));
                const float v1 = bf16_value(get<uint16_t>(p.values, chunk * kChunkBytes + lane * 16 + slot * 2 + 2));
                at(row, col0 + (bits & 3)) = v0;
                at(row, col0 + (bits >> 2)) = v1;
              }
          }
        }
      break;
    }
  }
  return w;
}

Fp8Tensor quantize_fp8(const std::vector<float>& x) {
  float amax = 0;
  for (float v : x) amax = std::max(amax, std::fabs(v));
  Fp8Tensor t;
  t.scale = amax > 0 ? amax / 448.f : 1.f;
  t.codes.resize(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) t.codes[i] = fp8_e4m3_bits(x[i] / t.scale);
  return t;
}

std::vector<float> random_weight(int64_t n, int64_t k, uint64_t seed, int64_t outlier_channels, float outlier_scale) {
  Rng rng{seed};
  std::vector<float> w(std::size_t(n * k));
  const double sd = 1.0 / std::sqrt(double(k));
  for (float& x : w) x = float(rng.normal() * sd);
  for (int64_t i = 0; i < outlier_channels && outlier_scale > 0; ++i) {
    const int64_t c = int64_t(rng.next() % uint64_t(k));
    for (int64_t r = 0; r < n; ++r) w[std::size_t(r * k + c)] *= outlier_scale;
  }
  return w;
}

std::vector<float> random_activations(int64_t m, int64_t k, uint64_t seed) {
  Rng rng{seed};
  std::vector<float> x(std::size_t(m * k));
  for (float& v : x) v = round_bf16(float(rng.normal()));
  return x;
}

}  // namespace inferlab
