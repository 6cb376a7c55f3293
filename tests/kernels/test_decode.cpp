// kernels/kvcache and decode attention: view checks on the CPU (the block manager: tests/sim/test_kv_blocks.cpp); append and decode
// (plain and split, contiguous and paged) against the CPU reference on the GPU.
//
// Every slot of the K/V pools that no sequence owns is NaN, so a stray read poisons the output.
// Tolerance as in test_attention.cpp (attention_testing.h): 2x the error of a plain same-precision
// implementation (scores, P and O rounded to the dtype), plus half an ulp of the output.
#include <gtest/gtest.h>

#include "gpu_test.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

#include "inferlab/kernels/attention/decode.h"
#include "inferlab/kernels/common/check.h"
#include "inferlab/kernels/common/device_buffer.h"
#include "inferlab/kernels/common/dtype_traits.h"
#include "inferlab/kernels/kvcache/kvcache.h"
#include "inferlab/sim/error.h"

#include "attention_testing.h"
#include "error_of.h"

namespace inferlab {
namespace {

TEST(KvCache, ViewChecksCatchBadTablesAndContexts) {
  int dummy = 0;
  KvCacheView v;
  v.layout = KvLayout::paged;
  v.batch = 2;
  v.kv_heads = 2;
  v.head_dim = 64;
  v.k = v.v = &dummy;
  v.context_lens = reinterpret_cast<int32_t*>(&dummy);
  v.block_table = reinterpret_cast<int32_t*>(&dummy);
  v.num_blocks = 4;
  v.block_size = 8;
  v.max_blocks_per_seq = 2;
  EXPECT_NO_THROW(validate_kv_view(v, {9, 3}, {0, 1, 2, -1}));
  EXPECT_NE(error_of([&] { validate_kv_view(v, {9, 9}, {0, 1, 2, -1}); }).find("not allocated"), std::string::npos);
  EXPECT_NE(error_of([&] { validate_kv_view(v, {9, 3}, {0, 7, 2, -1}); }).find("outside the pool"), std::string::npos);
  EXPECT_NE(error_of([&] { validate_kv_view(v, {17, 3}, {0, 1, 2, -1}); }).find("beyond"), std::string::npos);
  v.layout = KvLayout::contiguous;
  v.max_len = 10;
  EXPECT_NE(error_of([&] { validate_kv_view(v, {11, 3}, {}); }).find("beyond its reserved 10"), std::string::npos);
}

// ---------------------------------------------------------------- GPU
struct DecodeCase {
  DType dtype;
  int64_t heads, kv_heads, head_dim;
  KvLayout layout;
  int64_t block_size;  // paged
  std::vector<int32_t> lens;
  int splits;          // 0: heuristic
  DecodeBlock block = DecodeBlock::planned;
};

std::string describe(const DecodeCase& c) {
  std::string s = dtype_name(c.dtype) + " h" + std::to_string(c.heads) + "/kv" + std::to_string(c.kv_heads) + " d" +
                  std::to_string(c.head_dim) + " " + kv_layout_name(c.layout);
  if (c.layout == KvLayout::paged) s += " block " + std::to_string(c.block_size);
  s += " splits " + std::to_string(c.splits) + " block " + decode_block_name(c.block) + " lens";
  for (auto l : c.lens) s += " " + std::to_string(l);
  return s;
}

template <DType DT>
void run_decode(const DecodeCase& c, std::mt19937_64& rng) {
  using Tr = DTypeTraits<DT>;
  using T = typename Tr::type;
  const int64_t B = int64_t(c.lens.size()), D = c.head_dim, KH = c.kv_heads, H = c.heads;
  const int64_t max_ctx = *std::max_element(c.lens.begin(), c.lens.end());
  const auto tk = testing::random_tokens<DT>(c.lens, KH, D, rng), tv = testing::random_tokens<DT>(c.lens, KH, D, rng);
  const testing::TestKvCache<DT> cache = testing::make_kv_cache<DT>(c.layout, c.block_size, KH, D, tk, tv, rng);
  const auto q = testing::random_values<DT>(std::size_t(B * H * D), rng);
  DeviceBuffer<T> dq(q.dev);

  DecodeParams p;
  p.dtype = DT;
  p.batch = B;
  p.heads = H;
  p.head_dim = D;
  p.q = dq.get();
  p.cache = cache.view;
  p.max_context = max_ctx;
  p.splits = c.splits;
  p.block = c.block;
  std::vector<float> ref(std::size_t(B * H * D)), ref_lse(std::size_t(B * H));
  decode_attention_reference(p, q.f.data(), cache.fk.data(), cache.fv.data(), c.lens, cache.table, ref.data(),
                             ref_lse.data());

  // The plain same-precision implementation sets the tolerance.
  double base_err = 0, base_lse_err = 0, out_scale = 0;
  std::vector<float> base(static_cast<std::size_t>(D));
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h) {
      const int64_t kh = h / (H / KH);
      float lse = 0;
      testing::plain_attention_row(
          DT, &q.f[std::size_t((b * H + h) * D)], D, c.lens[std::size_t(b)] - 1, p.softmax_scale(),
          [&](int64_t j) { return cache.k_row(b, j, kh); }, [&](int64_t j) { return cache.v_row(b, j, kh); },
          base.data(), &lse);
      if (c.lens[std::size_t(b)] > 0) base_lse_err = std::max(base_lse_err, double(std::fabs(lse - ref_lse[std::size_t(b * H + h)])));
      for (int64_t d = 0; d < D; ++d) {
        const float r = ref[std::size_t((b * H + h) * D + d)];
        base_err = std::max(base_err, double(std::fabs(base[std::size_t(d)] - r)));
        out_scale = std::max(out_scale, double(std::fabs(r)));
      }
    }
  const double tol = 2 * base_err + testing::half_ulp(DT, out_scale);
  const double lse_tol = 2 * base_lse_err + 1e-4;

  int device = 0, sms = 0;
  INFERLAB_CUDA_CHECK(cudaGetDevice(&device));
  INFERLAB_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  for (DecodeVariant v : {DecodeVariant::plain, DecodeVariant::split}) {
    SCOPED_TRACE(decode_variant_name(v) + " " + describe(c));
    DeviceBuffer<T> d_o(std::size_t(B * H * D));
    DeviceBuffer<float> d_lse(std::size_t(B * H));
    d_o.fill(Tr::nan());
    d_lse.fill(NAN);
    DeviceBuffer<char> ws(std::max<std::size_t>(1, decode_workspace_bytes(p, v, sms)));
    INFERLAB_CUDA_CHECK(cudaMemset(ws.get(), 0, ws.size()));
    p.o = d_o.get();
    p.lse = d_lse.get();
    p.workspace = ws.get();
    p.workspace_bytes = ws.size();
    for (int rep = 0; rep < 3; ++rep) {  // again and again: each launch must leave the counters at zero
      decode_attention(p, v, nullptr);
      INFERLAB_CUDA_CHECK(cudaDeviceSynchronize());
    }
    const auto o = d_o.download();
    const auto lse = d_lse.download();
    testing::WorstError eo, el;
    for (std::size_t i = 0; i < o.size(); ++i) eo.add(i, Tr::to_float(o[i]), ref[i]);
    for (std::size_t i = 0; i < lse.size(); ++i) el.add(i, lse[i], ref_lse[i]);
    auto at = [&](std::size_t i, int64_t per_head) {  // O [batch, heads, D], LSE [batch, heads]
      const int64_t bh = int64_t(i) / per_head;
      return "sequence " + std::to_string(bh / H) + " (context " + std::to_string(c.lens[std::size_t(bh / H)]) +
             ") head " + std::to_string(bh % H) + (per_head > 1 ? " dim " + std::to_string(int64_t(i) % per_head) : "");
    };
    EXPECT_EQ(eo.non_finite + el.non_finite, 0) << "non-finite outputs (unwritten, or a NaN slot was read), first O at "
                                                << at(eo.first_non_finite, D) << ", first LSE at " << at(el.first_non_finite, 1);
    EXPECT_LE(eo.value, tol) << "worst O at " << at(eo.where, D) << ": " << eo.got << " vs " << eo.want << " (baseline "
                             << base_err << ")";
    EXPECT_LE(el.value, lse_tol) << "worst LSE at " << at(el.where, 1) << ": " << el.got << " vs " << el.want
                                 << " (baseline " << base_lse_err << ")";
  }
}

void run(const DecodeCase& c, std::mt19937_64& rng) {
  if (c.dtype == DType::bf16)
    run_decode<DType::bf16>(c, rng);
  else
    run_decode<DType::fp16>(c, rng);
}

std::mt19937_64 seeded_rng() { return testing::seeded_rng("decode"); }

TEST(DecodeGpu, EdgeShapes) {
  REQUIRE_GPU();
  auto rng = seeded_rng();
  run({DType::bf16, 8, 8, 128, KvLayout::contiguous, 0, {1}, 0}, rng);
  run({DType::bf16, 32, 8, 128, KvLayout::paged, 16, {1, 17, 16, 33}, 0}, rng);
  run({DType::fp16, 32, 1, 64, KvLayout::paged, 8, {5, 300, 129}, 3}, rng);   // MQA: 32 query heads on one KV head
  run({DType::bf16, 64, 1, 128, KvLayout::paged, 32, {77, 1000}, 5}, rng);   // 64 heads: two blocks per KV head
  run({DType::bf16, 4, 2, 64, KvLayout::contiguous, 0, {0, 9}, 2}, rng);     // an empty context
}

// Every block shape the plan was measured against, side by side in one process, over the same shapes
// (head dim 128, groups of at most 16 query heads), plain and split; others are refused by name.
TEST(DecodeGpu, EveryBlockShapeMatchesTheReference) {
  REQUIRE_GPU();
  auto rng = seeded_rng();
  for (DecodeBlock b : {DecodeBlock::planned, DecodeBlock::w4s3, DecodeBlock::w8s3, DecodeBlock::w8s2, DecodeBlock::w4s5}) {
    run({DType::bf16, 32, 8, 128, KvLayout::paged, 16, {1, 700, 2049}, 0, b}, rng);
    run({DType::fp16, 16, 4, 128, KvLayout::contiguous, 0, {333, 64}, 3, b}, rng);
  }
  // A 64-head group at head dim 64 has no candidate block shape: refused before any launch.
  auto rng2 = seeded_rng();
  EXPECT_NE(error_of([&] { run({DType::bf16, 64, 1, 64, KvLayout::paged, 16, {40}, 0, DecodeBlock::w8s3}, rng2); })
                .find("block w8s3 is a choice for head dim 128"),
            std::string::npos);
}

TEST(DecodeGpu, FreshRandomBatches) {
  REQUIRE_GPU();
  auto rng = seeded_rng();
  std::uniform_int_distribution<int> coin(0, 1), pick(0, 3), len(1, 4000), splits(0, 7);
  for (int trial = 0; trial < 16; ++trial) {
    DecodeCase c;
    c.dtype = coin(rng) ? DType::bf16 : DType::fp16;
    c.head_dim = coin(rng) ? 128 : 64;
    const int64_t shapes[][2] = {{8, 8}, {32, 8}, {32, 1}, {16, 4}};
    const auto sh = shapes[pick(rng)];
    c.heads = sh[0];
    c.kv_heads = sh[1];
    c.layout = coin(rng) ? KvLayout::paged : KvLayout::contiguous;
    const int64_t blocks[] = {8, 16, 32, 16};
    c.block_size = blocks[pick(rng)];
    const int b = 1 + pick(rng) + pick(rng);
    for (int i = 0; i < b; ++i) c.lens.push_back(len(rng) | 1);  // odd lengths
    c.splits = splits(rng);
    run(c, rng);
  }
}

TEST(DecodeGpu, LongContext) {
  REQUIRE_GPU();
  auto rng = seeded_rng();
  run({DType::bf16, 32, 8, 128, KvLayout::paged, 16, {32767}, 0}, rng);
}

TEST(DecodeGpu, AppendWritesTheRightSlots) {
  REQUIRE_GPU();
  using Tr = DTypeTraits<DType::bf16>;
  std::mt19937_64 rng(std::random_device{}());
  const int64_t B = 3, KH = 2, D = 64, BS = 8;
  PagedKvManager m(16, BS, 4);
  const std::vector<int32_t> pos = {0, 9, 30};  // token index each sequence writes
  for (int b = 0; b < B; ++b) m.grow(b, pos[std::size_t(b)] + 1);
  const auto table = m.block_table({0, 1, 2});
  const std::size_t pool = std::size_t(16 * BS * KH * D);
  DeviceBuffer<Tr::type> k(pool), v(pool);
  k.fill(Tr::nan());
  v.fill(Tr::nan());
  std::vector<Tr::type> kn(std::size_t(B * KH * D)), vn(kn.size());
  std::normal_distribution<float> dist;
  for (std::size_t i = 0; i < kn.size(); ++i) {
    kn[i] = Tr::from_float(dist(rng));
    vn[i] = Tr::from_float(dist(rng));
  }
  DeviceBuffer<Tr::type> dkn(kn), dvn(vn);
  DeviceBuffer<int32_t> dpos(pos), dtable(table);
  KvCacheView view;
  view.layout = KvLayout::paged;
  view.batch = B;
  view.kv_heads = KH;
  view.head_dim = D;
  view.k = k.get();
  view.v = v.get();
  view.context_lens = dpos.get();
  view.block_table = dtable.get();
  view.num_blocks = 16;
  view.block_size = BS;
  view.max_blocks_per_seq = 4;
  append_kv(view, dkn.get(), dvn.get(), dpos.get(), nullptr);
  INFERLAB_CUDA_CHECK(cudaDeviceSynchronize());
  const auto hk = k.download();
  const auto hv = v.download();
  int64_t written = 0;
  for (std::size_t i = 0; i < hk.size(); ++i) written += !std::isnan(Tr::to_float(hk[i]));
  EXPECT_EQ(written, B * KH * D);  // nothing else touched
  for (int64_t b = 0; b < B; ++b) {
    const int64_t p = pos[std::size_t(b)];
    const int64_t slot = int64_t(table[std::size_t(b * 4 + p / BS)]) * BS + p % BS;
    for (int64_t e = 0; e < KH * D; ++e) {
      ASSERT_EQ(Tr::to_float(hk[std::size_t(slot * KH * D + e)]), Tr::to_float(kn[std::size_t(b * KH * D + e)]));
      ASSERT_EQ(Tr::to_float(hv[std::size_t(slot * KH * D + e)]), Tr::to_float(vn[std::size_t(b * KH * D + e)]));
    }
  }
}

}  // namespace
}  // namespace inferlab
