// kernels/layers on the GPU against the CPU references (layers_host.h): fresh random shapes (odd sizes, one and
// many rows, bf16 and fp16, aligned and misaligned pointers), outputs NaN-filled before every launch, cache rows
// no token owns NaN and checked untouched. Tolerances:
//   embedding, the residual add, V into the cache   exact (the kernel's arithmetic is the reference's)
//   swiglu                                           1 ulp of the reference rounded the same way (the one inexact
//                                                    step is an fp32 evaluation of what the reference does in double)
//   rope                                             the same, plus the fp32 evaluation's absolute error where
//                                                    x1 cos - x2 sin cancels (8 x 2^-24 x (|x1| + |x2|))
//   rmsnorm                                          1 ulp of the normalised value (fp32 sum of squares) carried
//                                                    through the weight, plus 1 ulp of the output
// Bad input is checked without a GPU. Sampling: test_sampling.cpp.
#include <gtest/gtest.h>

#include "gpu_test.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <random>

#include "inferlab/kernels/common/check.h"
#include "inferlab/kernels/common/device_buffer.h"
#include "inferlab/kernels/common/dtype_traits.h"
#include "inferlab/kernels/layers/layers.h"

#include "error_of.h"

namespace inferlab {
namespace {

std::mt19937_64 seeded_rng() {
  const uint64_t seed = std::random_device{}();
  std::printf("layers test seed %llu\n", static_cast<unsigned long long>(seed));
  return std::mt19937_64(seed);
}

// The spacing of `dtype`'s values at |x| (subnormal spacing below the smallest normal).
double ulp(DType dtype, double x) {
  const int mant = dtype == DType::bf16 ? 7 : 10, emin = dtype == DType::bf16 ? -126 : -14;
  const double a = std::fabs(x);
  const int e = a > 0 ? std::max(int(std::floor(std::log2(a))), emin) : emin;
  return std::ldexp(1.0, e - mant);
}

// Host data in a dtype: the stored values and the same values as floats.
template <DType DT>
struct Data {
  using Tr = DTypeTraits<DT>;
  using T = typename Tr::type;
  std::vector<T> raw;
  std::vector<float> f;
  static Data normal(std::size_t n, std::mt19937_64& rng, float mean = 0.f, float stddev = 1.f) {
    std::normal_distribution<float> dist(mean, stddev);
    Data d;
    for (std::size_t i = 0; i < n; ++i) {
      d.raw.push_back(Tr::from_float(dist(rng)));
      d.f.push_back(Tr::to_float(d.raw.back()));
    }
    return d;
  }
};
template <class T>
std::vector<float> floats(const std::vector<T>& v) {
  std::vector<float> f(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) f[i] = DTypeTraits<DTypeOf<T>::value>::to_float(v[i]);
  return f;
}

// A device copy of `host` starting `shift` elements into its allocation (shift 1: a pointer that is not 16-byte
// aligned, so the launcher takes the element-wise path); the rest of the allocation holds `pad`.
template <class T>
struct Shifted {
  DeviceBuffer<T> buf;
  int shift;
  Shifted(const std::vector<T>& host, int s, T pad) : buf(host.size() + 8), shift(s) {
    std::vector<T> h(host.size() + 8, pad);
    std::copy(host.begin(), host.end(), h.begin() + s);
    buf.upload(h);
  }
  T* get() { return buf.get() + shift; }
  std::vector<T> download() const {
    const auto h = buf.download();
    return std::vector<T>(h.begin() + shift, h.begin() + shift + long(buf.size() - 8));
  }
};

// ---------------------------------------------------------------- bad input, no GPU needed
TEST(LayersValidation, LaunchersNameTheProblem) {
  int dummy[64] = {};
  void* d = dummy;
  auto* di = reinterpret_cast<int32_t*>(dummy);
  EmbeddingParams e{DType::fp32, 2, 8, 10, di, d, d};
  EXPECT_NE(error_of([&] { embedding(e, nullptr); }).find("unsupported dtype fp32"), std::string::npos);
  e.dtype = DType::bf16;
  e.hidden = 0;
  EXPECT_NE(error_of([&] { embedding(e, nullptr); }).find("hidden"), std::string::npos);
  e.hidden = 8;
  e.table = nullptr;
  EXPECT_NE(error_of([&] { embedding(e, nullptr); }).find("must be given"), std::string::npos);

  RmsNormParams n;
  n.rows = 2;
  n.hidden = 40000;
  n.residual = n.out = d;
  n.weight = d;
  EXPECT_NE(error_of([&] { rmsnorm(n, nullptr); }).find("beyond the supported 32768"), std::string::npos);
  n.hidden = 20001;
  EXPECT_NE(error_of([&] { rmsnorm(n, nullptr); }).find("16384 when hidden % 8 != 0"), std::string::npos);
  n.hidden = 64;
  n.row_index = di;
  EXPECT_NE(error_of([&] { rmsnorm(n, nullptr); }).find("source_rows"), std::string::npos);
  n.source_rows = 4;
  n.eps = NAN;
  EXPECT_NE(error_of([&] { rmsnorm(n, nullptr); }).find("eps"), std::string::npos);

  RopeParams r;
  r.tokens = 1;
  r.heads = 4;
  r.kv_heads = 2;
  r.head_dim = 7;
  r.qkv = r.q_out = d;
  r.positions = r.slots = di;
  r.inv_freq = reinterpret_cast<float*>(dummy);
  r.cache.kv_heads = 2;
  r.cache.head_dim = 7;
  r.cache.k = r.cache.v = d;
  EXPECT_NE(error_of([&] { rope(r, nullptr); }).find("even"), std::string::npos);
  r.head_dim = r.cache.head_dim = 512;
  EXPECT_NE(error_of([&] { rope(r, nullptr); }).find("at most 256"), std::string::npos);
  r.head_dim = r.cache.head_dim = 64;
  r.cache.dtype = DType::fp16;
  EXPECT_NE(error_of([&] { rope(r, nullptr); }).find("KV cache holds fp16 but the activations are bf16"), std::string::npos);
  r.cache.dtype = DType::bf16;
  r.cache.kv_heads = 4;
  EXPECT_NE(error_of([&] { rope(r, nullptr); }).find("4 KV heads"), std::string::npos);
  r.cache.kv_heads = 2;
  EXPECT_NE(error_of([&] { rope(r, nullptr); }).find("no rows"), std::string::npos);  // batch x max_len = 0

  SwiGluParams s{DType::bf16, 3, 0, d, d};
  EXPECT_NE(error_of([&] { swiglu(s, nullptr); }).find("intermediate"), std::string::npos);

  SampleParams sp;
  sp.rows = 2;
  sp.vocab = (int64_t(1) << 21) + 1;
  sp.logits = sp.temperature = sp.top_p = reinterpret_cast<float*>(dummy);
  sp.top_k = sp.out = di;
  sp.seed = sp.offset = reinterpret_cast<uint64_t*>(dummy);
  EXPECT_NE(error_of([&] { sample(sp, nullptr); }).find("beyond the supported"), std::string::npos);
  sp.vocab = 1000;
  sp.workspace = d;
  sp.workspace_bytes = 4;
  EXPECT_NE(error_of([&] { sample(sp, nullptr); }).find("sample_workspace_bytes(2, 1000)"), std::string::npos);
  sp.rows = 70000;
  EXPECT_NE(error_of([&] { sample(sp, nullptr); }).find("65535"), std::string::npos);
  sp.rows = 2;
  sp.workspace_bytes = sample_workspace_bytes(2, 1000);
  sp.seed = nullptr;
  EXPECT_NE(error_of([&] { sample(sp, nullptr); }).find("must be given"), std::string::npos);
}

// ---------------------------------------------------------------- embedding
template <DType DT>
void run_embedding(int64_t tokens, int64_t hidden, int64_t vocab, int shift, std::mt19937_64& rng, int32_t first_id = 0) {
  SCOPED_TRACE(dtype_name(DT) + " tokens " + std::to_string(tokens) + " hidden " + std::to_string(hidden) + " vocab " +
               std::to_string(vocab) + " shift " + std::to_string(shift) + " first id " + std::to_string(first_id));
  using Tr = DTypeTraits<DT>;
  auto table = Data<DT>::normal(std::size_t(vocab * hidden), rng);
  // some ids outside the table (below and above the slice [first_id, first_id + vocab))
  std::uniform_int_distribution<int32_t> id(first_id - 3, first_id + int32_t(vocab) + 2);
  std::vector<int32_t> ids(static_cast<std::size_t>(tokens));
  for (auto& i : ids) i = id(rng);
  ids[0] = first_id + int32_t(vocab) - 1;
  std::vector<int32_t> local(ids);
  for (auto& i : local) i -= first_id;
  std::vector<float> ref(std::size_t(tokens * hidden));
  embedding_reference(tokens, hidden, vocab, local.data(), table.f.data(), ref.data());
  Shifted<typename Tr::type> dt(table.raw, shift, Tr::nan());
  Shifted<typename Tr::type> dout(std::vector<typename Tr::type>(std::size_t(tokens * hidden), Tr::nan()), shift, Tr::nan());
  DeviceBuffer<int32_t> dids(ids);
  embedding(EmbeddingParams{DT, tokens, hidden, vocab, dids.get(), dt.get(), dout.get(), first_id}, nullptr);
  INFERLAB_CUDA_CHECK(cudaDeviceSynchronize());
  const auto out = floats(dout.download());
  for (std::size_t i = 0; i < out.size(); ++i) ASSERT_EQ(out[i], ref[i]) << "element " << i;
}

TEST(LayersGpu, EmbeddingGathersRowsExactly) {
  REQUIRE_GPU();
  auto rng = seeded_rng();
  run_embedding<DType::bf16>(1, 4096, 100, 0, rng);
  run_embedding<DType::fp16>(37, 4096, 50, 0, rng);
  run_embedding<DType::bf16>(5, 4096, 20, 1, rng);  // misaligned: element-wise path
  run_embedding<DType::bf16>(64, 256, 150, 0, rng, 450);  // a vocabulary-parallel slice (ids 450 .. 599)
  std::uniform_int_distribution<int64_t> hid(1, 3000), tok(1, 300);
  for (int trial = 0; trial < 6; ++trial) {
    run_embedding<DType::bf16>(tok(rng), hid(rng) | 1, 61, 0, rng);
    run_embedding<DType::fp16>(tok(rng), hid(rng) * 8, 33, 0, rng);
  }
}

// ---------------------------------------------------------------- rmsnorm
template <DType DT>
void run_rmsnorm(int64_t rows, int64_t hidden, bool with_add, bool with_index, int shift, std::mt19937_64& rng) {
  SCOPED_TRACE(dtype_name(DT) + " rows " + std::to_string(rows) + " hidden " + std::to_string(hidden) + (with_add ? " add" : "") +
               (with_index ? " row_index" : "") + " shift " + std::to_string(shift));
  using Tr = DTypeTraits<DT>;
  using T = typename Tr::type;
  const int64_t src_rows = with_index ? rows + 3 : rows;
  auto res = Data<DT>::normal(std::size_t(src_rows * hidden), rng, 0.f, 2.f);
  auto add = Data<DT>::normal(std::size_t(src_rows * hidden), rng);
  auto w = Data<DT>::normal(std::size_t(hidden), rng, 1.f, 0.3f);
  std::vector<int32_t> index;
  if (with_index) {
    std::uniform_int_distribution<int32_t> pick(-1, int32_t(src_rows));  // -1 and src_rows: zero rows
    for (int64_t i = 0; i < rows; ++i) index.push_back(pick(rng));
    index[0] = int32_t(src_rows) - 1;
  }
  const float eps = 1e-5f;
  std::vector<float> ref_res = res.f, ref(std::size_t(rows * hidden)), ones(std::size_t(hidden), 1.f), ref_n(ref.size());
  std::vector<float> ref_res2 = res.f;
  rmsnorm_reference(DT, rows, hidden, eps, ref_res.data(), with_add ? add.f.data() : nullptr, w.f.data(),
                    with_index ? index.data() : nullptr, src_rows, ref.data());
  rmsnorm_reference(DT, rows, hidden, eps, ref_res2.data(), with_add ? add.f.data() : nullptr, ones.data(),
                    with_index ? index.data() : nullptr, src_rows, ref_n.data());  // the normalised values

  Shifted<T> dres(res.raw, shift, Tr::nan()), dadd(add.raw, shift, Tr::nan()), dw(w.raw, shift, Tr::nan());
  Shifted<T> dout(std::vector<T>(std::size_t(rows * hidden), Tr::nan()), shift, Tr::nan());
  DeviceBuffer<int32_t> didx(index.empty() ? std::vector<int32_t>{0} : index);
  RmsNormParams p;
  p.dtype = DT;
  p.rows = rows;
  p.hidden = hidden;
  p.eps = eps;
  p.residual = dres.get();
  p.add = with_add ? dadd.get() : nullptr;
  p.weight = dw.get();
  p.out = dout.get();
  p.row_index = with_index ? didx.get() : nullptr;
  p.source_rows = src_rows;
  p.name = with_index ? "final_norm" : "ffn_norm";
  rmsnorm(p, nullptr);
  INFERLAB_CUDA_CHECK(cudaDeviceSynchronize());
  const auto out = floats(dout.download()), res_after = floats(dres.download());
  for (std::size_t i = 0; i < res_after.size(); ++i) ASSERT_EQ(res_after[i], ref_res[i]) << "residual " << i;
  double worst = 0;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < hidden; ++j) {
      const std::size_t i = std::size_t(r * hidden + j);
      const double tol = std::fabs(w.f[std::size_t(j)]) * ulp(DT, ref_n[i]) + ulp(DT, ref[i]);
      ASSERT_LE(std::fabs(double(out[i]) - ref[i]), tol) << "row " << r << " element " << j << " got " << out[i]
                                                         << " want " << ref[i];
      worst = std::max(worst, std::fabs(double(out[i]) - ref[i]) / ulp(DT, ref[i]));
    }
  ::testing::Test::RecordProperty("worst_ulp_" + dtype_name(DT), std::to_string(worst));
}

TEST(LayersGpu, RmsNormMatchesHfRounding) {
  REQUIRE_GPU();
  auto rng = seeded_rng();
  for (bool add : {false, true})
    for (int64_t rows : {1, 64}) {
      run_rmsnorm<DType::bf16>(rows, 4096, add, false, 0, rng);
      run_rmsnorm<DType::fp16>(rows, 4096, add, false, 0, rng);
    }
  run_rmsnorm<DType::bf16>(7, 4096, true, true, 0, rng);   // final norm over selected rows
  run_rmsnorm<DType::bf16>(3, 4096, true, false, 1, rng);  // misaligned: element-wise
  run_rmsnorm<DType::bf16>(2, 32768, true, false, 0, rng);
  run_rmsnorm<DType::fp16>(2, 16383, true, false, 0, rng);
  run_rmsnorm<DType::bf16>(5, 1, true, false, 0, rng);
  std::uniform_int_distribution<int64_t> hid(1, 9000), rows(1, 200);
  std::uniform_int_distribution<int> coin(0, 1);
  for (int trial = 0; trial < 8; ++trial) {
    const int64_t h = coin(rng) ? hid(rng) | 1 : (hid(rng) % 2048 + 1) * 8;  // odd, or a multiple of 8
    if (coin(rng))
      run_rmsnorm<DType::bf16>(rows(rng), h, coin(rng), coin(rng), 0, rng);
    else
      run_rmsnorm<DType::fp16>(rows(rng), h, coin(rng), coin(rng), 0, rng);
  }
}

// ---------------------------------------------------------------- rope + KV write
struct RopeCase {
  int64_t tokens, heads, kv_heads, head_dim;
  KvLayout layout;
  bool bias, llama3;
};

template <DType DT>
void run_rope(const RopeCase& c, std::mt19937_64& rng) {
  SCOPED_TRACE(dtype_name(DT) + " tokens " + std::to_string(c.tokens) + " heads " + std::to_string(c.heads) + "/" +
               std::to_string(c.kv_heads) + " d " + std::to_string(c.head_dim) + " " + kv_layout_name(c.layout) +
               (c.bias ? " bias" : "") + (c.llama3 ? " llama3" : ""));
  using Tr = DTypeTraits<DT>;
  using T = typename Tr::type;
  const int64_t T_ = c.tokens, H = c.heads, KH = c.kv_heads, D = c.head_dim, width = (H + 2 * KH) * D;
  auto qkv = Data<DT>::normal(std::size_t(T_ * width), rng);
  auto bias = Data<DT>::normal(std::size_t(width), rng, 0.f, 0.5f);
  RopeScaling sc;
  if (c.llama3) sc = RopeScaling{"llama3", 8, 1, 4, 8192};
  const auto inv = rope_inv_freq(D, c.llama3 ? 500000.0 : 10000.0, sc);
  // Cache rows: the pool has spare rows; tokens take distinct random rows, some are padding (-1) or beyond the pool.
  KvCacheView view;
  view.layout = c.layout;
  view.dtype = DT;
  view.kv_heads = KH;
  view.head_dim = D;
  if (c.layout == KvLayout::paged) {
    view.block_size = 16;
    view.num_blocks = (T_ + 15) / 16 + 2;
    view.batch = 1;
    view.max_blocks_per_seq = view.num_blocks;
  } else {
    view.batch = 3;
    view.max_len = (T_ + 2) / 3 + 4;
  }
  const int64_t pool_rows = int64_t(view.pool_bytes() / std::size_t(KH * D * 2));
  std::vector<int32_t> rows(static_cast<std::size_t>(pool_rows));
  std::iota(rows.begin(), rows.end(), 0);
  std::shuffle(rows.begin(), rows.end(), rng);
  std::vector<int32_t> slots(static_cast<std::size_t>(T_)), pos(static_cast<std::size_t>(T_));
  std::uniform_int_distribution<int32_t> position(0, 131072), kind(0, 9);
  for (int64_t t = 0; t < T_; ++t) {
    slots[std::size_t(t)] = rows[std::size_t(t)];
    const int k = kind(rng);
    if (k == 0) slots[std::size_t(t)] = -1;
    if (k == 1) slots[std::size_t(t)] = int32_t(pool_rows + t);  // beyond the pool: not written
    pos[std::size_t(t)] = position(rng);
  }
  pos[0] = 0;
  std::vector<float> q_ref(std::size_t(T_ * H * D)), k_ref(std::size_t(T_ * KH * D)), v_ref(k_ref.size());
  rope_reference(DT, T_, H, KH, D, qkv.f.data(), c.bias ? bias.f.data() : nullptr, pos.data(), inv.data(), q_ref.data(),
                 k_ref.data(), v_ref.data());

  DeviceBuffer<T> dqkv(qkv.raw), dbias(bias.raw), dq(std::size_t(T_ * H * D));
  DeviceBuffer<T> dk(std::size_t(pool_rows * KH * D)), dv(std::size_t(pool_rows * KH * D));
  dq.fill(Tr::nan());
  dk.fill(Tr::nan());
  dv.fill(Tr::nan());
  DeviceBuffer<float> dinv(inv);
  DeviceBuffer<int32_t> dpos(pos), dslots(slots);
  view.k = dk.get();
  view.v = dv.get();
  RopeParams p;
  p.dtype = DT;
  p.tokens = T_;
  p.heads = H;
  p.kv_heads = KH;
  p.head_dim = D;
  p.qkv = dqkv.get();
  p.bias = c.bias ? dbias.get() : nullptr;
  p.positions = dpos.get();
  p.inv_freq = dinv.get();
  p.q_out = dq.get();
  p.cache = view;
  p.slots = dslots.get();
  rope(p, nullptr);
  INFERLAB_CUDA_CHECK(cudaDeviceSynchronize());
  const auto q = floats(dq.download()), k = floats(dk.download()), v = floats(dv.download());
  // 1 ulp of the result, plus the fp32 evaluation's error: x1 c - x2 s cancels when the result is much smaller
  // than its inputs, and each of sin/cos (2 ulp), the products and the difference adds at most 2^-24 relative to
  // |x1| + |x2| (8 such terms, generously).
  auto tol = [&](int64_t t, int64_t head, int64_t i, double got, double want) {
    const int64_t half = D / 2, a = head * D + i, b = head * D + (i < half ? i + half : i - half);
    double mag = std::fabs(qkv.f[std::size_t(t * width + a)]) + std::fabs(qkv.f[std::size_t(t * width + b)]);
    if (c.bias) mag += std::fabs(bias.f[std::size_t(a)]) + std::fabs(bias.f[std::size_t(b)]);
    return ulp(DT, std::max(std::fabs(got), std::fabs(want))) + 8 * 0x1p-24 * mag;
  };
  for (int64_t t = 0; t < T_; ++t)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t i = 0; i < D; ++i) {
        const std::size_t j = std::size_t((t * H + h) * D + i);
        ASSERT_LE(std::fabs(double(q[j]) - q_ref[j]), tol(t, h, i, q[j], q_ref[j]))
            << "q of token " << t << " head " << h << " element " << i << " got " << q[j] << " want " << q_ref[j];
      }
  std::vector<int64_t> owner(static_cast<std::size_t>(pool_rows), -1);
  for (int64_t t = 0; t < T_; ++t)
    if (slots[std::size_t(t)] >= 0 && slots[std::size_t(t)] < pool_rows) owner[std::size_t(slots[std::size_t(t)])] = t;
  for (int64_t row = 0; row < pool_rows; ++row)
    for (int64_t e = 0; e < KH * D; ++e) {
      const std::size_t i = std::size_t(row * KH * D + e);
      const int64_t t = owner[std::size_t(row)];
      if (t < 0) {
        ASSERT_TRUE(std::isnan(k[i]) && std::isnan(v[i])) << "cache row " << row << " has no token but was written";
        continue;
      }
      const std::size_t r = std::size_t(t * KH * D + e);
      ASSERT_LE(std::fabs(double(k[i]) - k_ref[r]), tol(t, H + e / D, e % D, k[i], k_ref[r]))
          << "k of token " << t << " element " << e << " got " << k[i] << " want " << k_ref[r];
      ASSERT_EQ(v[i], v_ref[r]) << "v of token " << t << " element " << e;
    }
}

TEST(LayersGpu, RopeRotatesAndWritesTheCache) {
  REQUIRE_GPU();
  auto rng = seeded_rng();
  run_rope<DType::bf16>({1, 32, 8, 128, KvLayout::paged, false, true}, rng);
  run_rope<DType::bf16>({64, 32, 8, 128, KvLayout::paged, false, true}, rng);
  run_rope<DType::fp16>({17, 8, 8, 128, KvLayout::contiguous, true, false}, rng);
  run_rope<DType::bf16>({9, 4, 1, 64, KvLayout::paged, true, false}, rng);
  run_rope<DType::fp16>({5, 6, 2, 6, KvLayout::contiguous, true, false}, rng);  // head_dim 6: element-wise
  run_rope<DType::bf16>({3, 2, 1, 256, KvLayout::paged, false, true}, rng);
  run_rope<DType::bf16>({4, 3, 3, 2, KvLayout::contiguous, false, false}, rng);
  std::uniform_int_distribution<int64_t> tok(1, 300), dims(1, 16), pick(0, 3);
  std::uniform_int_distribution<int> coin(0, 1);
  for (int trial = 0; trial < 6; ++trial) {
    const int64_t heads[][2] = {{32, 8}, {8, 8}, {12, 4}, {7, 1}};
    const auto hh = heads[pick(rng)];
    const RopeCase c{tok(rng), hh[0], hh[1], coin(rng) ? 128 : 2 * dims(rng),
                     coin(rng) ? KvLayout::paged : KvLayout::contiguous, bool(coin(rng)), bool(coin(rng))};
    if (coin(rng))
      run_rope<DType::bf16>(c, rng);
    else
      run_rope<DType::fp16>(c, rng);
  }
}

// ---------------------------------------------------------------- swiglu
template <DType DT>
void run_swiglu(int64_t tokens, int64_t inter, int shift, std::mt19937_64& rng) {
  SCOPED_TRACE(dtype_name(DT) + " tokens " + std::to_string(tokens) + " intermediate " + std::to_string(inter) +
               " shift " + std::to_string(shift));
  using Tr = DTypeTraits<DT>;
  using T = typename Tr::type;
  auto in = Data<DT>::normal(std::size_t(tokens * 2 * inter), rng, 0.f, 3.f);
  std::vector<float> ref(std::size_t(tokens * inter));
  swiglu_reference(DT, tokens, inter, in.f.data(), ref.data());
  Shifted<T> din(in.raw, shift, Tr::nan()), dout(std::vector<T>(ref.size(), Tr::nan()), shift, Tr::nan());
  swiglu(SwiGluParams{DT, tokens, inter, din.get(), dout.get()}, nullptr);
  INFERLAB_CUDA_CHECK(cudaDeviceSynchronize());
  const auto out = floats(dout.download());
  for (std::size_t i = 0; i < out.size(); ++i)
    ASSERT_LE(std::fabs(double(out[i]) - ref[i]), ulp(DT, std::max(std::fabs(out[i]), std::fabs(ref[i]))))
        << "element " << i << " got " << out[i] << " want " << ref[i];
}

TEST(LayersGpu, SwiGluWithinOneUlp) {
  REQUIRE_GPU();
  auto rng = seeded_rng();
  run_swiglu<DType::bf16>(1, 14336, 0, rng);
  run_swiglu<DType::fp16>(64, 11008, 0, rng);
  run_swiglu<DType::bf16>(3, 4096, 1, rng);
  std::uniform_int_distribution<int64_t> inter(1, 5000), tok(1, 100);
  for (int trial = 0; trial < 6; ++trial) {
    run_swiglu<DType::bf16>(tok(rng), inter(rng), 0, rng);
    run_swiglu<DType::fp16>(tok(rng), inter(rng) * 8, 0, rng);
  }
}

}  // namespace
}  // namespace inferlab
