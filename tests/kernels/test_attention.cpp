// kernels/attention against the CPU reference. GPU tests skip without a device.
//
// Tolerance, per dtype, derived rather than picked: a plain same-precision implementation (scores
// rounded to the dtype, softmax in fp32, P rounded to the dtype, O rounded to the dtype) is run on
// the CPU on the same inputs, and its error against the double-precision reference is the
// baseline. A kernel passes if its error is at most 2x that baseline (FlashAttention's rule), plus
// a floor of half an ulp of the output dtype at the output's scale for shapes where the baseline is
// exact by luck. The log-sum-exp gets the same treatment.
#include <gtest/gtest.h>

#include "gpu_test.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "inferlab/kernels/attention/attention.h"
#include "inferlab/kernels/common/check.h"
#include "inferlab/kernels/common/device_buffer.h"
#include "inferlab/kernels/common/dtype_traits.h"
#include "inferlab/sim/error.h"

namespace inferlab {
namespace {

struct Case {
  DType dtype;
  int64_t batch, heads, kv_heads, seq_q, seq_k, head_dim;
  bool causal;
};

std::string describe(const Case& c) {
  return dtype_name(c.dtype) + " b" + std::to_string(c.batch) + " h" + std::to_string(c.heads) + "/kv" +
         std::to_string(c.kv_heads) + " sq" + std::to_string(c.seq_q) + " sk" + std::to_string(c.seq_k) + " d" +
         std::to_string(c.head_dim) + (c.causal ? " causal" : "");
}

float round_to(DType t, float x) {
  if (t == DType::bf16) return DTypeTraits<DType::bf16>::to_float(DTypeTraits<DType::bf16>::from_float(x));
  return DTypeTraits<DType::fp16>::to_float(DTypeTraits<DType::fp16>::from_float(x));
}

// The plain low-precision implementation whose error sets the tolerance.
void plain_low_precision(const AttentionParams& p, const std::vector<float>& q, const std::vector<float>& k,
                         const std::vector<float>& v, std::vector<float>& o, std::vector<float>& lse) {
  const int64_t H = p.heads, KH = p.kv_heads, D = p.head_dim, G = H / KH;
  const float scale = p.softmax_scale();
  std::vector<float> s(std::size_t(p.seq_k));
  for (int64_t b = 0; b < p.batch; ++b)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t i = 0; i < p.seq_q; ++i) {
        const int64_t last = p.causal ? std::min(p.seq_k - 1, i + p.seq_k - p.seq_q) : p.seq_k - 1;
        float mx = -INFINITY;
        for (int64_t j = 0; j <= last; ++j) {
          float dot = 0;
          for (int64_t d = 0; d < D; ++d)
            dot += q[((b * p.seq_q + i) * H + h) * D + d] * k[((b * p.seq_k + j) * KH + h / G) * D + d];
          s[j] = round_to(p.dtype, dot * scale);
          mx = std::max(mx, s[j]);
        }
        float sum = 0;
        for (int64_t j = 0; j <= last; ++j) sum += std::exp(s[j] - mx);
        lse[(b * H + h) * p.seq_q + i] = last >= 0 ? mx + std::log(sum) : -INFINITY;
        for (int64_t d = 0; d < D; ++d) {
          float acc = 0;
          for (int64_t j = 0; j <= last; ++j)
            acc += round_to(p.dtype, std::exp(s[j] - mx) / sum) * v[((b * p.seq_k + j) * KH + h / G) * D + d];
          o[((b * p.seq_q + i) * H + h) * D + d] = last >= 0 ? round_to(p.dtype, acc) : 0.f;
        }
      }
}

struct Errors {
  double max_abs = 0, lse_max_abs = 0;
  int64_t non_finite = 0;
};

Errors compare(const std::vector<float>& o, const std::vector<float>& ref, const std::vector<float>& lse,
               const std::vector<float>& ref_lse) {
  Errors e;
  for (std::size_t i = 0; i < o.size(); ++i) {
    if (!std::isfinite(o[i])) {
      ++e.non_finite;
      continue;
    }
    e.max_abs = std::max(e.max_abs, double(std::fabs(o[i] - ref[i])));
  }
  for (std::size_t i = 0; i < lse.size(); ++i) {
    if (std::isinf(ref_lse[i]) && lse[i] == ref_lse[i]) continue;
    if (!std::isfinite(lse[i])) {
      ++e.non_finite;
      continue;
    }
    e.lse_max_abs = std::max(e.lse_max_abs, double(std::fabs(lse[i] - ref_lse[i])));
  }
  return e;
}

template <DType DT>
void run_case(const Case& c, std::mt19937_64& rng) {
  using Tr = DTypeTraits<DT>;
  using T = typename Tr::type;
  AttentionParams p;
  p.dtype = DT;
  p.batch = c.batch;
  p.heads = c.heads;
  p.kv_heads = c.kv_heads;
  p.seq_q = c.seq_q;
  p.seq_k = c.seq_k;
  p.head_dim = c.head_dim;
  p.causal = c.causal;
  const std::size_t nq = std::size_t(c.batch * c.seq_q * c.heads * c.head_dim);
  const std::size_t nkv = std::size_t(c.batch * c.seq_k * c.kv_heads * c.head_dim);
  const std::size_t nl = std::size_t(c.batch * c.heads * c.seq_q);
  std::normal_distribution<float> dist(0.f, 1.f);
  auto make = [&](std::size_t n, std::vector<T>& dev, std::vector<float>& host) {
    dev.resize(n);
    host.resize(n);
    for (std::size_t i = 0; i < n; ++i) {
      dev[i] = Tr::from_float(dist(rng));
      host[i] = Tr::to_float(dev[i]);
    }
  };
  std::vector<T> hq, hk, hv;
  std::vector<float> fq, fk, fv;
  make(nq, hq, fq);
  make(nkv, hk, fk);
  make(nkv, hv, fv);

  std::vector<float> ref(nq), ref_lse(nl), base(nq), base_lse(nl);
  attention_reference(p, fq.data(), fk.data(), fv.data(), ref.data(), ref_lse.data());
  plain_low_precision(p, fq, fk, fv, base, base_lse);
  const Errors be = compare(base, ref, base_lse, ref_lse);
  ASSERT_EQ(be.non_finite, 0);
  double out_scale = 0;
  for (float x : ref) out_scale = std::max(out_scale, double(std::fabs(x)));
  const double half_ulp = (DT == DType::bf16 ? std::ldexp(1.0, -8) : std::ldexp(1.0, -11)) * std::max(out_scale, 1e-3);
  const double tol = 2 * be.max_abs + half_ulp;
  const double lse_tol = 2 * be.lse_max_abs + 1e-4;

  DeviceBuffer<T> dq(hq), dk(hk), dv(hv);
  constexpr std::size_t kGuard = 512;  // elements after O that must stay untouched
  for (AttentionVariant variant : {AttentionVariant::naive, AttentionVariant::flash}) {
    SCOPED_TRACE(attention_variant_name(variant) + " " + describe(c));
    DeviceBuffer<T> d_o(nq + kGuard);
    DeviceBuffer<float> d_lse(nl);
    d_o.fill(Tr::nan());  // poison: every element must be written, the guard never
    d_lse.fill(std::nanf(""));
    p.q = dq.get();
    p.k = dk.get();
    p.v = dv.get();
    p.o = d_o.get();
    p.lse = d_lse.get();
    DeviceBuffer<char> ws(attention_workspace_bytes(p, variant));
    p.workspace = ws.get();
    p.workspace_bytes = ws.size();
    attention_forward(p, variant, nullptr);
    INFERLAB_CUDA_CHECK(cudaDeviceSynchronize());
    const auto raw = d_o.download();
    std::vector<float> o(nq);
    for (std::size_t i = 0; i < nq; ++i) o[i] = Tr::to_float(raw[i]);
    for (std::size_t i = nq; i < nq + kGuard; ++i) ASSERT_TRUE(std::isnan(Tr::to_float(raw[i]))) << "wrote past O at " << i;
    const Errors e = compare(o, ref, d_lse.download(), ref_lse);
    EXPECT_EQ(e.non_finite, 0) << "unwritten (NaN) or non-finite outputs";
    EXPECT_LE(e.max_abs, tol) << "baseline max abs error " << be.max_abs;
    EXPECT_LE(e.lse_max_abs, lse_tol) << "baseline lse error " << be.lse_max_abs;
  }
}

void run(const Case& c, std::mt19937_64& rng) {
  if (c.dtype == DType::bf16)
    run_case<DType::bf16>(c, rng);
  else
    run_case<DType::fp16>(c, rng);
}

std::mt19937_64 seeded_rng() {
  const uint64_t seed = std::random_device{}();
  std::printf("attention test seed %llu\n", static_cast<unsigned long long>(seed));
  return std::mt19937_64(seed);
}

TEST(AttentionGpu, FixedEdgeShapes) {
  REQUIRE_GPU();
  auto rng = seeded_rng();
  // One row, one key; a length one past the tile; a query block with no key (causal, sq > sk).
  const Case cases[] = {
      {DType::bf16, 1, 2, 2, 1, 1, 128, false},   {DType::bf16, 1, 4, 1, 129, 129, 128, true},
      {DType::fp16, 2, 8, 2, 65, 65, 64, true},   {DType::bf16, 1, 2, 1, 200, 70, 128, true},
      {DType::fp16, 1, 4, 4, 37, 301, 128, true}, {DType::bf16, 1, 8, 8, 300, 300, 128, false},
  };
  for (const auto& c : cases) run(c, rng);
}

TEST(AttentionGpu, FreshRandomShapes) {
  REQUIRE_GPU();
  auto rng = seeded_rng();
  std::uniform_int_distribution<int> len(1, 400), coin(0, 1), pick(0, 3);
  for (int trial = 0; trial < 24; ++trial) {
    Case c;
    c.dtype = coin(rng) ? DType::bf16 : DType::fp16;
    c.head_dim = coin(rng) ? 128 : 64;
    c.heads = 8;
    const int64_t ratios[] = {1, 4, 8, 2};  // query heads per KV head: MHA, GQA-2, MQA, GQA-4
    c.kv_heads = c.heads / ratios[pick(rng)];
    c.batch = 1 + pick(rng) % 2;
    c.seq_k = len(rng);
    c.seq_q = trial % 4 == 0 ? len(rng) : c.seq_k;  // mostly self-attention; some sq != sk
    c.causal = coin(rng);
    run(c, rng);
  }
}

TEST(AttentionGpu, LongerSequenceManyKeyBlocks) {
  REQUIRE_GPU();
  auto rng = seeded_rng();
  run({DType::bf16, 1, 4, 1, 1031, 1031, 128, true}, rng);
  run({DType::fp16, 1, 2, 2, 777, 777, 64, false}, rng);
}

TEST(Attention, BadShapesAreRejectedBeforeLaunch) {
  AttentionParams p;
  int dummy = 0;
  p.q = p.k = p.v = &dummy;
  p.o = &dummy;
  p.lse = reinterpret_cast<float*>(&dummy);
  p.heads = 8;
  p.kv_heads = 8;
  auto expect = [&](const std::string& needle, AttentionVariant v = AttentionVariant::flash) {
    try {
      validate(p, v);
      ADD_FAILURE() << "accepted; expected: " << needle;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  p.head_dim = 96;
  expect("unsupported head dim 96");
  p.head_dim = 128;
  p.dtype = DType::fp32;
  expect("unsupported dtype fp32");
  p.dtype = DType::bf16;
  p.kv_heads = 3;
  expect("does not divide");
  p.kv_heads = 8;
  p.seq_q = 0;
  expect("must be positive");
  p.seq_q = 16;
  expect("workspace", AttentionVariant::naive);
  p.o = nullptr;
  expect("must all be given");
}

}  // namespace
}  // namespace inferlab
