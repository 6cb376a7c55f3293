// Prefill attention (prefill.h) against the CPU reference on the GPU; its host checks on the CPU.
//
// Every GPU case is a mix of sequences, each with `past` tokens already in the KV cache and `new`
// tokens now (the cache holds all past + new keys). The cache's unowned slots are NaN (paged blocks
// handed out shuffled), Q has NaN rows after the last sequence, O and the LSE are NaN-poisoned with
// padding rows after them: every row must be written, the padding never. Each case launches twice
// on one workspace, zeroed once, and the two results must be bitwise equal (the persistent
// kernel's counters reset themselves). Tolerance as in test_attention.cpp (attention_testing.h).
// A failure names the sequence (past, new), the query row within it, the head and dim, the values,
// the tolerance and the baseline's error.
#include <gtest/gtest.h>

#include "attention_testing.h"
#include "gpu_test.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "inferlab/kernels/attention/attention.h"
#include "inferlab/kernels/attention/prefill.h"
#include "inferlab/kernels/common/check.h"
#include "inferlab/kernels/common/device_buffer.h"
#include "inferlab/kernels/common/dtype_traits.h"
#include "inferlab/kernels/kvcache/kvcache.h"
#include "inferlab/sim/error.h"

#include "error_of.h"

namespace inferlab {
namespace {

constexpr int64_t kPadRows = 3;  // NaN rows after Q, O and the LSE

struct Seq {
  int64_t past, fresh;  // tokens in the cache before this step; new tokens now
};

struct PrefillCase {
  DType dtype;
  int64_t heads, kv_heads, head_dim;
  KvLayout layout;
  int64_t block_size;  // paged
  bool causal;
  std::vector<Seq> seqs;
  FlashOptions flash{};  // the flash rung
};

std::string describe(const PrefillCase& c) {
  std::string s = dtype_name(c.dtype) + " h" + std::to_string(c.heads) + "/kv" + std::to_string(c.kv_heads) + " d" +
                  std::to_string(c.head_dim) + " " + kv_layout_name(c.layout) +
                  (c.layout == KvLayout::paged ? " block " + std::to_string(c.block_size) : "") +
                  (c.causal ? " causal" : " full") + " flash " + flash_kernel_name(c.flash.kernel) +
                  (c.flash.mma_tile == MmaTile::planned ? "" : std::string(" tile ") + mma_tile_name(c.flash.mma_tile)) +
                  (c.flash.max_ctas ? " max_ctas " + std::to_string(c.flash.max_ctas) : "") + " (past+new):";
  for (const auto& q : c.seqs) s += " " + std::to_string(q.past) + "+" + std::to_string(q.fresh);
  return s;
}

// A case's inputs on the host and the device.
template <DType DT>
struct Inputs {
  using T = typename DTypeTraits<DT>::type;
  PrefillCase c;
  std::vector<int32_t> q_start;
  int64_t total_q = 0, max_q = 0, max_context = 0;
  testing::Values<DT> q;  // [total_q, heads, head_dim]
  DeviceBuffer<T> dq;     // the same, then kPadRows NaN rows
  DeviceBuffer<int32_t> dq_start;
  testing::TestKvCache<DT> cache;

  PrefillParams params() const {
    PrefillParams p;
    p.dtype = DT;
    p.sequences = int64_t(c.seqs.size());
    p.heads = c.heads;
    p.head_dim = c.head_dim;
    p.total_q = total_q;
    p.max_q = max_q;
    p.max_context = max_context;
    p.causal = c.causal;
    p.q = dq.get();
    p.q_start = dq_start.get();
    p.cache = cache.view;
    p.flash = c.flash;
    return p;
  }
  int sequence_of(int64_t row) const {
    return int(std::upper_bound(q_start.begin(), q_start.end(), int32_t(row)) - q_start.begin()) - 1;
  }
  // Element i of O ([total_q, heads, head_dim]; per_head = head_dim) or of the LSE ([total_q,
  // heads]; per_head = 1), in words.
  std::string where(std::size_t i, int64_t per_head) const {
    const int64_t row = int64_t(i) / per_head / c.heads, h = int64_t(i) / per_head % c.heads;
    const int s = sequence_of(row);
    std::string w = "sequence " + std::to_string(s) + " (past " + std::to_string(c.seqs[std::size_t(s)].past) +
                    ", new " + std::to_string(c.seqs[std::size_t(s)].fresh) + ") query " +
                    std::to_string(row - q_start[std::size_t(s)]) + " head " + std::to_string(h);
    if (per_head > 1) w += " dim " + std::to_string(int64_t(i) % per_head);
    return w;
  }
};

// Inputs of case c from given Q rows and K/V tokens (so that one set of values can be laid out twice).
template <DType DT>
Inputs<DT> make_inputs(const PrefillCase& c, const testing::Values<DT>& q, const std::vector<testing::Values<DT>>& tk,
                       const std::vector<testing::Values<DT>>& tv, std::mt19937_64& rng) {
  using Tr = DTypeTraits<DT>;
  Inputs<DT> in;
  in.c = c;
  in.q_start.push_back(0);
  for (const auto& s : c.seqs) {
    in.q_start.push_back(in.q_start.back() + int32_t(s.fresh));
    in.max_q = std::max(in.max_q, s.fresh);
    in.max_context = std::max(in.max_context, s.past + s.fresh);
  }
  in.total_q = in.q_start.back();
  in.q = q;
  auto padded = q.dev;
  padded.resize(padded.size() + std::size_t(kPadRows * c.heads * c.head_dim), Tr::nan());
  in.dq = DeviceBuffer<typename Tr::type>(padded);
  in.dq_start = DeviceBuffer<int32_t>(in.q_start);
  in.cache = testing::make_kv_cache<DT>(c.layout, c.block_size, c.kv_heads, c.head_dim, tk, tv, rng);
  return in;
}

template <DType DT>
Inputs<DT> make_inputs(const PrefillCase& c, std::mt19937_64& rng) {
  std::vector<int32_t> lens;
  int64_t total_q = 0;
  for (const auto& s : c.seqs) {
    lens.push_back(int32_t(s.past + s.fresh));
    total_q += s.fresh;
  }
  const auto q = testing::random_values<DT>(std::size_t(total_q * c.heads * c.head_dim), rng);
  const auto tk = testing::random_tokens<DT>(lens, c.kv_heads, c.head_dim, rng);
  const auto tv = testing::random_tokens<DT>(lens, c.kv_heads, c.head_dim, rng);
  return make_inputs<DT>(c, q, tk, tv, rng);
}

template <DType DT>
struct Output {
  std::vector<typename DTypeTraits<DT>::type> o;  // [total_q, heads, head_dim]
  std::vector<float> lse;                         // [total_q, heads]
};

// Launches p twice on one workspace (zeroed once) into NaN-poisoned O and LSE with padding rows;
// checks the padding untouched and the two launches bitwise equal; returns the first.
template <DType DT>
void launch(PrefillParams p, bool with_lse, Output<DT>& out) {
  using Tr = DTypeTraits<DT>;
  const std::size_t row_o = std::size_t(p.heads * p.head_dim), rows = std::size_t(p.total_q);
  DeviceBuffer<typename Tr::type> d_o((rows + kPadRows) * row_o);
  DeviceBuffer<float> d_lse((rows + kPadRows) * std::size_t(p.heads));
  DeviceBuffer<char> ws(prefill_workspace_bytes(p));
  INFERLAB_CUDA_CHECK(cudaMemset(ws.get(), 0, ws.size()));
  p.o = d_o.get();
  p.lse = with_lse ? d_lse.get() : nullptr;
  p.workspace = ws.get();
  p.workspace_bytes = ws.size();
  for (int rep = 0; rep < 2; ++rep) {
    d_o.fill(Tr::nan());
    d_lse.fill(NAN);
    prefill_attention(p, nullptr);
    INFERLAB_CUDA_CHECK(cudaDeviceSynchronize());
    auto o = d_o.download();
    auto lse = d_lse.download();
    for (std::size_t i = rows * row_o; i < o.size(); ++i)
      ASSERT_TRUE(std::isnan(Tr::to_float(o[i]))) << "wrote O padding row " << i / row_o;
    for (std::size_t i = with_lse ? rows * std::size_t(p.heads) : 0; i < lse.size(); ++i)
      ASSERT_TRUE(std::isnan(lse[i])) << (with_lse ? "wrote LSE padding" : "wrote the LSE though it was not asked for");
    o.resize(rows * row_o);
    lse.resize(rows * std::size_t(p.heads));
    if (rep == 0) {
      out.o = std::move(o);
      out.lse = std::move(lse);
    } else {
      ASSERT_EQ(std::memcmp(o.data(), out.o.data(), o.size() * sizeof(o[0])), 0)
          << "a second launch on the same workspace gave another O (counters not reset?)";
    }
  }
}

// Checks out against the double-precision reference with the tolerance the plain same-precision
// implementation sets.
template <DType DT>
void check(const Inputs<DT>& in, const Output<DT>& out, bool with_lse) {
  using Tr = DTypeTraits<DT>;
  const PrefillParams p = in.params();
  const int64_t H = p.heads, D = p.head_dim, G = H / p.cache.kv_heads;
  const std::size_t n_o = std::size_t(in.total_q * H * D), n_l = std::size_t(in.total_q * H);
  std::vector<float> ref(n_o), ref_lse(n_l), base(n_o), base_lse(n_l);
  prefill_attention_reference(p, in.q.f.data(), in.cache.fk.data(), in.cache.fv.data(), in.q_start, in.cache.lens,
                              in.cache.table, ref.data(), ref_lse.data());
  for (int64_t s = 0; s < p.sequences; ++s) {
    const int64_t n = in.c.seqs[std::size_t(s)].fresh, keys = in.c.seqs[std::size_t(s)].past + n;
    for (int64_t i = 0; i < n; ++i)
      for (int64_t h = 0; h < H; ++h) {
        const int64_t row = in.q_start[std::size_t(s)] + i;
        const std::size_t at = std::size_t((row * H + h) * D);
        testing::plain_attention_row(
            DT, &in.q.f[at], D, p.causal ? keys - n + i : keys - 1, p.softmax_scale(),
            [&](int64_t j) { return in.cache.k_row(s, j, h / G); }, [&](int64_t j) { return in.cache.v_row(s, j, h / G); },
            &base[at], &base_lse[std::size_t(row * H + h)]);
      }
  }
  testing::WorstError be, ble;
  double out_scale = 0;
  for (std::size_t i = 0; i < n_o; ++i) {
    be.add(i, base[i], ref[i]);
    out_scale = std::max(out_scale, double(std::fabs(ref[i])));
  }
  for (std::size_t i = 0; i < n_l; ++i) ble.add(i, base_lse[i], ref_lse[i]);
  ASSERT_EQ(be.non_finite + ble.non_finite, 0) << "the baseline itself is not finite";
  const double tol = 2 * be.value + testing::half_ulp(DT, out_scale), lse_tol = 2 * ble.value + 1e-4;

  // The worst element of every sequence, so that a failure lists each sequence that fails.
  std::vector<testing::WorstError> per_seq(std::size_t(p.sequences)), per_seq_lse(std::size_t(p.sequences));
  testing::WorstError all, all_lse;
  for (std::size_t i = 0; i < n_o; ++i) {
    const float got = Tr::to_float(out.o[i]);
    all.add(i, got, ref[i]);
    per_seq[std::size_t(in.sequence_of(int64_t(i) / (H * D)))].add(i, got, ref[i]);
  }
  if (with_lse)
    for (std::size_t i = 0; i < n_l; ++i) {
      all_lse.add(i, out.lse[i], ref_lse[i]);
      per_seq_lse[std::size_t(in.sequence_of(int64_t(i) / H))].add(i, out.lse[i], ref_lse[i]);
    }
  EXPECT_EQ(all.non_finite, 0) << all.non_finite << " non-finite O elements (unwritten, or a NaN slot read), first at "
                               << in.where(all.first_non_finite, D);
  EXPECT_EQ(all_lse.non_finite, 0) << all_lse.non_finite << " non-finite LSE entries, first at "
                                   << in.where(all_lse.first_non_finite, 1);
  std::string failing;
  int listed = 0;
  for (std::size_t s = 0; s < per_seq.size(); ++s) {
    const auto& e = per_seq[s];
    const auto& el = per_seq_lse[s];
    if ((e.value > tol || el.value > lse_tol) && listed++ < 6) {
      failing += "\n  O error " + std::to_string(e.value) + " at " + in.where(e.where, D) + ": " + std::to_string(e.got) +
                 " vs " + std::to_string(e.want);
      if (with_lse)
        failing += "; LSE error " + std::to_string(el.value) + " at " + in.where(el.where, 1) + ": " +
                   std::to_string(el.got) + " vs " + std::to_string(el.want);
    }
  }
  EXPECT_LE(all.value, tol) << "O tolerance " << tol << " (baseline max error " << be.value << "); failing sequences:"
                            << failing;
  EXPECT_LE(all_lse.value, lse_tol) << "LSE tolerance " << lse_tol << " (baseline " << ble.value << "); failing sequences:"
                                    << failing;
}

template <DType DT>
void run_case(const PrefillCase& c, std::mt19937_64& rng, bool with_lse) {
  SCOPED_TRACE(describe(c) + (with_lse ? "" : " (no LSE)"));
  const Inputs<DT> in = make_inputs<DT>(c, rng);
  Output<DT> out;
  launch<DT>(in.params(), with_lse, out);
  if (::testing::Test::HasFatalFailure()) return;
  check<DT>(in, out, with_lse);
}

void run(const PrefillCase& c, std::mt19937_64& rng, bool with_lse = true) {
  if (c.dtype == DType::bf16)
    run_case<DType::bf16>(c, rng, with_lse);
  else
    run_case<DType::fp16>(c, rng, with_lse);
}

std::mt19937_64 seeded_rng() { return testing::seeded_rng("prefill"); }

int sm_count() {
  int device = 0, sms = 0;
  INFERLAB_CUDA_CHECK(cudaGetDevice(&device));
  INFERLAB_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  return sms;
}

TEST(PrefillGpu, EdgeMixes) {
  REQUIRE_GPU();
  auto rng = seeded_rng();
  const auto bf = DType::bf16, fp = DType::fp16;
  const auto paged = KvLayout::paged, contiguous = KvLayout::contiguous;
  // Two new tokens and nothing cached; one past a 128-row tile; decode rows (new 1) among prefill
  // rows; new > past; a row ending exactly on a tile and on a block.
  run({bf, 8, 2, 128, paged, 16, true, {{0, 2}}}, rng);
  run({bf, 8, 2, 128, paged, 16, true, {{0, 129}, {5, 1}, {300, 2}, {7, 300}, {112, 128}}}, rng);
  run({fp, 4, 4, 64, contiguous, 0, true, {{0, 129}, {5, 1}, {300, 2}, {7, 300}}}, rng);
  // Block sizes from one token to more than a 128-key tile.
  run({bf, 4, 1, 128, paged, 1, true, {{33, 40}, {0, 17}}}, rng);
  run({fp, 4, 2, 128, paged, 4, true, {{130, 9}, {3, 130}}}, rng);
  run({bf, 8, 8, 64, paged, 256, true, {{300, 200}, {0, 3}}}, rng);
  // Not causal: every query sees every key.
  run({bf, 8, 2, 128, paged, 16, false, {{250, 70}, {0, 5}, {1, 1}}}, rng);
  run({fp, 8, 1, 64, contiguous, 0, false, {{128, 128}, {3, 300}}}, rng);
  // No LSE asked for: not written, O the same.
  run({bf, 8, 2, 128, paged, 16, true, {{40, 150}, {0, 2}}}, rng, /*with_lse=*/false);
}

// Every flash rung on the same varlen mixes, side by side in one process: the mma.sync kernel with each
// tile, the wgmma kernel where the GPU has it, and the wgmma kernel's persistent grid squeezed to 2 CTAs.
TEST(PrefillGpu, EveryFlashRungMatchesTheReference) {
  REQUIRE_GPU();
  auto rng = seeded_rng();
  for (const FlashOptions& f : testing::flash_rungs(2, /*varlen=*/true)) {
    run({DType::bf16, 8, 2, 128, KvLayout::paged, 16, true, {{0, 129}, {5, 1}, {300, 2}, {7, 300}}, f}, rng);
    run({DType::fp16, 4, 4, 128, KvLayout::contiguous, 0, false, {{128, 128}, {3, 77}}, f}, rng);
    if (f.mma_tile == MmaTile::planned)
      run({DType::bf16, 8, 1, 64, KvLayout::paged, 8, true, {{33, 40}, {0, 17}, {200, 9}}, f}, rng);
  }
}

TEST(PrefillGpu, FreshRandomMixes) {
  REQUIRE_GPU();
  auto rng = seeded_rng();
  std::uniform_int_distribution<int> coin(0, 1), pick(0, 3), tenth(0, 9), past(0, 3000), fresh(2, 700), count(1, 5);
  for (int trial = 0; trial < 14; ++trial) {
    PrefillCase c;
    c.dtype = coin(rng) ? DType::bf16 : DType::fp16;
    c.head_dim = coin(rng) ? 128 : 64;
    const int64_t shapes[][2] = {{8, 8}, {8, 2}, {8, 1}, {16, 4}};  // MHA, GQA-4, MQA, GQA-4
    const auto shape = shapes[pick(rng)];
    c.heads = shape[0];
    c.kv_heads = shape[1];
    c.layout = tenth(rng) < 7 ? KvLayout::paged : KvLayout::contiguous;
    const int64_t blocks[] = {16, 16, 8, 32};
    c.block_size = blocks[pick(rng)];
    c.causal = tenth(rng) < 7;
    const int n = count(rng);
    for (int i = 0; i < n; ++i) {
      Seq s{tenth(rng) < 3 ? 0 : past(rng), tenth(rng) < 1 ? 1 : fresh(rng)};
      if (tenth(rng) < 5) s.fresh |= 1;  // odd lengths
      c.seqs.push_back(s);
    }
    // Keep the CPU reference near 1e9 multiply-adds: halve the longest context until it fits.
    auto cost = [&] {
      double pairs = 0;
      for (const auto& s : c.seqs) pairs += double(s.fresh) * double(s.past + s.fresh);
      return pairs * double(c.heads * c.head_dim);
    };
    while (cost() > 4e8) {
      auto& s = *std::max_element(c.seqs.begin(), c.seqs.end(),
                                  [](const Seq& a, const Seq& b) { return a.past + a.fresh < b.past + b.fresh; });
      if (s.past > s.fresh) s.past /= 2;
      else s.fresh = std::max<int64_t>(2, s.fresh / 2);
    }
    run(c, rng);
  }
}

// Enough work items (query tiles of 128 rows x heads, > 4x the SM count) that the persistent
// Hopper kernel hands every block several from its counter: a few long sequences among many short
// ones, so items of very unequal cost are taken in turn. The engine's shape: 32 heads, 8 KV heads,
// head dim 128, paged blocks of 16.
TEST(PrefillGpu, PersistentSchedulerHandsBlocksSeveralItems) {
  REQUIRE_GPU();
  auto rng = seeded_rng();
  const int64_t heads = 32, sms = sm_count();
  for (DType dt : {DType::bf16, DType::fp16}) {
    PrefillCase c{dt, heads, 8, 128, KvLayout::paged, 16, true, {{100, 200}, {0, 257}}};
    std::uniform_int_distribution<int> past(0, 600), fresh(2, 9);
    int64_t tiles = 2 + 3;
    while (tiles * heads <= 4 * sms) {
      c.seqs.push_back({past(rng), fresh(rng)});
      ++tiles;
    }
    run(c, rng);
  }
}

// The kernel's result for a row does not depend on its neighbours: each sequence launched alone
// (the same device buffers, seen through a one-sequence view) is bitwise equal to its rows of the
// mixed launch; and the same values in a paged and a contiguous cache give bitwise equal results.
template <DType DT>
void alone_equals_mixed(KvLayout layout, std::mt19937_64& rng) {
  using T = typename DTypeTraits<DT>::type;
  const PrefillCase c{DT, 16, 4, 128, layout, 16, true, {{1000, 300}, {0, 2}, {37, 129}, {5, 1}, {2000, 64}}};
  SCOPED_TRACE(describe(c));
  const Inputs<DT> in = make_inputs<DT>(c, rng);
  Output<DT> mixed;
  launch<DT>(in.params(), true, mixed);
  if (::testing::Test::HasFatalFailure()) return;
  const int64_t row_o = c.heads * c.head_dim, row_kv = c.kv_heads * c.head_dim;
  for (int64_t s = 0; s < int64_t(c.seqs.size()); ++s) {
    const int64_t first = in.q_start[std::size_t(s)], n = c.seqs[std::size_t(s)].fresh;
    DeviceBuffer<int32_t> q_start(std::vector<int32_t>{0, int32_t(n)});
    PrefillParams p = in.params();
    p.sequences = 1;
    p.total_q = p.max_q = n;
    p.max_context = c.seqs[std::size_t(s)].past + n;
    p.q = in.dq.get() + first * row_o;
    p.q_start = q_start.get();
    p.cache.batch = 1;
    p.cache.context_lens = in.cache.dlens.get() + s;
    if (layout == KvLayout::paged) {
      p.cache.block_table = in.cache.dtable.get() + s * p.cache.max_blocks_per_seq;
    } else {
      p.cache.k = static_cast<T*>(in.cache.view.k) + s * p.cache.max_len * row_kv;
      p.cache.v = static_cast<T*>(in.cache.view.v) + s * p.cache.max_len * row_kv;
    }
    Output<DT> alone;
    launch<DT>(p, true, alone);
    if (::testing::Test::HasFatalFailure()) return;
    EXPECT_EQ(std::memcmp(alone.o.data(), mixed.o.data() + first * row_o, alone.o.size() * sizeof(T)), 0)
        << "sequence " << s << " alone differs from its rows in the mix (O)";
    EXPECT_EQ(std::memcmp(alone.lse.data(), mixed.lse.data() + first * c.heads, alone.lse.size() * sizeof(float)), 0)
        << "sequence " << s << " alone differs from its rows in the mix (LSE)";
  }
}

TEST(PrefillGpu, SequenceAloneIsBitwiseItsRowsInTheMix) {
  REQUIRE_GPU();
  auto rng = seeded_rng();
  alone_equals_mixed<DType::bf16>(KvLayout::paged, rng);
  alone_equals_mixed<DType::fp16>(KvLayout::contiguous, rng);
}

TEST(PrefillGpu, PagedIsBitwiseContiguous) {
  REQUIRE_GPU();
  auto rng = seeded_rng();
  using DT = std::integral_constant<DType, DType::bf16>;
  PrefillCase c{DT::value, 8, 2, 128, KvLayout::paged, 16, true, {{700, 90}, {0, 300}, {33, 1}}};
  SCOPED_TRACE(describe(c));
  std::vector<int32_t> lens;
  int64_t total_q = 0;
  for (const auto& s : c.seqs) {
    lens.push_back(int32_t(s.past + s.fresh));
    total_q += s.fresh;
  }
  const auto q = testing::random_values<DT::value>(std::size_t(total_q * c.heads * c.head_dim), rng);
  const auto tk = testing::random_tokens<DT::value>(lens, c.kv_heads, c.head_dim, rng);
  const auto tv = testing::random_tokens<DT::value>(lens, c.kv_heads, c.head_dim, rng);
  Output<DT::value> out[2];
  for (int i = 0; i < 2; ++i) {
    c.layout = i == 0 ? KvLayout::paged : KvLayout::contiguous;
    const Inputs<DT::value> in = make_inputs<DT::value>(c, q, tk, tv, rng);
    launch<DT::value>(in.params(), true, out[i]);
    if (HasFatalFailure()) return;
    if (i == 0) check<DT::value>(in, out[0], true);
  }
  EXPECT_EQ(std::memcmp(out[0].o.data(), out[1].o.data(), out[0].o.size() * sizeof(out[0].o[0])), 0)
      << "paged and contiguous caches of the same values differ (O)";
  EXPECT_EQ(std::memcmp(out[0].lse.data(), out[1].lse.data(), out[0].lse.size() * sizeof(float)), 0)
      << "paged and contiguous caches of the same values differ (LSE)";
}

// Uniform sequences on a contiguous cache of exactly their length are attention_forward's flash
// shape: the varlen mode must give the dense kernel's bits (O, and the LSE transposed).
TEST(PrefillGpu, UniformBatchIsBitwiseTheDenseFlashKernel) {
  REQUIRE_GPU();
  auto rng = seeded_rng();
  using Tr = DTypeTraits<DType::bf16>;
  for (bool causal : {true, false}) {
    const int64_t B = 3, H = 8, KH = 2, D = 128, n = 200, L = 333;
    SCOPED_TRACE(std::string("b3 h8/kv2 d128 sq200 sk333") + (causal ? " causal" : " full"));
    const auto q = testing::random_values<DType::bf16>(std::size_t(B * n * H * D), rng);
    const auto k = testing::random_values<DType::bf16>(std::size_t(B * L * KH * D), rng);
    const auto v = testing::random_values<DType::bf16>(std::size_t(B * L * KH * D), rng);
    DeviceBuffer<Tr::type> dq(q.dev), dk(k.dev), dv(v.dev), d_o(q.dev.size()), p_o(q.dev.size());
    DeviceBuffer<float> d_lse(std::size_t(B * H * n)), p_lse(std::size_t(B * H * n));
    AttentionParams a;
    a.batch = B;
    a.heads = H;
    a.kv_heads = KH;
    a.seq_q = n;
    a.seq_k = L;
    a.head_dim = D;
    a.causal = causal;
    a.q = dq.get();
    a.k = dk.get();
    a.v = dv.get();
    a.o = d_o.get();
    a.lse = d_lse.get();
    // The kernel the varlen prefill runs (it has no overlapped mode), forced on the dense side too.
    a.flash.kernel = resolve_flash_kernel(FlashOptions{}) == FlashKernel::mma ? FlashKernel::mma : FlashKernel::wgmma;
    attention_forward(a, AttentionVariant::flash, nullptr);

    std::vector<int32_t> q_start, lens(static_cast<std::size_t>(B), static_cast<int32_t>(L));
    for (int64_t b = 0; b <= B; ++b) q_start.push_back(int32_t(b * n));
    DeviceBuffer<int32_t> dq_start(q_start), dlens(lens);
    DeviceBuffer<char> ws(256);
    INFERLAB_CUDA_CHECK(cudaMemset(ws.get(), 0, ws.size()));
    PrefillParams p;
    p.sequences = B;
    p.heads = H;
    p.head_dim = D;
    p.total_q = B * n;
    p.max_q = n;
    p.max_context = L;
    p.causal = causal;
    p.q = dq.get();
    p.q_start = dq_start.get();
    p.cache.layout = KvLayout::contiguous;
    p.cache.dtype = DType::bf16;
    p.cache.batch = B;
    p.cache.kv_heads = KH;
    p.cache.head_dim = D;
    p.cache.max_len = L;
    p.cache.k = dk.get();
    p.cache.v = dv.get();
    p.cache.context_lens = dlens.get();
    p.o = p_o.get();
    p.lse = p_lse.get();
    p.workspace = ws.get();
    p.workspace_bytes = ws.size();
    ASSERT_GE(p.workspace_bytes, prefill_workspace_bytes(p));
    prefill_attention(p, nullptr);
    INFERLAB_CUDA_CHECK(cudaDeviceSynchronize());
    const auto dense_o = d_o.download(), varlen_o = p_o.download();
    const auto dense_lse = d_lse.download(), varlen_lse = p_lse.download();
    EXPECT_EQ(std::memcmp(dense_o.data(), varlen_o.data(), dense_o.size() * sizeof(Tr::type)), 0) << "O differs";
    int64_t lse_diff = 0;
    for (int64_t b = 0; b < B; ++b)
      for (int64_t h = 0; h < H; ++h)
        for (int64_t i = 0; i < n; ++i)
          lse_diff += std::memcmp(&dense_lse[std::size_t((b * H + h) * n + i)], &varlen_lse[std::size_t((b * n + i) * H + h)],
                                  sizeof(float)) != 0;
    EXPECT_EQ(lse_diff, 0) << "LSE entries differ";
    if (a.flash.kernel == FlashKernel::wgmma) {
      p.flash.kernel = FlashKernel::overlapped;
      EXPECT_NE(error_of([&] { prefill_attention(p, nullptr); }).find("dense attention only"), std::string::npos);
    }
  }
}

// ---------------------------------------------------------------- CPU
TEST(Prefill, BadParamsAreRejectedBeforeLaunch) {
  int dummy = 0;
  auto* ptr = reinterpret_cast<int32_t*>(&dummy);
  PrefillParams p;
  p.sequences = 2;
  p.heads = 8;
  p.head_dim = 128;
  p.total_q = 40;
  p.max_q = 30;
  p.max_context = 100;
  p.q = p.o = &dummy;
  p.q_start = ptr;
  p.cache.layout = KvLayout::paged;
  p.cache.batch = 2;
  p.cache.kv_heads = 2;
  p.cache.head_dim = 128;
  p.cache.k = p.cache.v = &dummy;
  p.cache.context_lens = ptr;
  p.cache.block_table = ptr;
  p.cache.num_blocks = 16;
  p.cache.block_size = 16;
  p.cache.max_blocks_per_seq = 8;
  p.workspace = &dummy;
  p.workspace_bytes = prefill_workspace_bytes(p);
  EXPECT_EQ(error_of([&] { validate_prefill(p); }), "");
  auto expect = [&](const char* needle, auto&& mutate) {
    PrefillParams bad = p;
    mutate(bad);
    const std::string e = error_of([&] { validate_prefill(bad); });
    EXPECT_NE(e.find(needle), std::string::npos) << "expected an error naming '" << needle << "', got '" << e << "'";
  };
  expect("unsupported dtype fp32", [](PrefillParams& b) { b.dtype = b.cache.dtype = DType::fp32; });
  expect("unsupported head dim 96", [](PrefillParams& b) { b.head_dim = b.cache.head_dim = 96; });
  expect("must be positive", [](PrefillParams& b) { b.sequences = b.cache.batch = 0; });
  expect("at most 4096", [](PrefillParams& b) { b.sequences = b.cache.batch = 5000; });
  expect("does not divide heads 8", [](PrefillParams& b) { b.cache.kv_heads = 3; });
  expect("holds 3 sequences, the launch 2", [](PrefillParams& b) { b.cache.batch = 3; });
  expect("differs from the query's", [](PrefillParams& b) { b.cache.dtype = DType::fp16; });
  expect("differs from the query's", [](PrefillParams& b) { b.cache.head_dim = 64; });
  expect("total_q and max_q must be positive", [](PrefillParams& b) { b.total_q = 0; });
  expect("max_q 50 exceeds total_q 40", [](PrefillParams& b) { b.max_q = 50; });
  expect("context_lens count the new tokens", [](PrefillParams& b) { b.max_context = 20; });
  expect("block size 12 must be a power of two", [](PrefillParams& b) { b.cache.block_size = 12; });
  expect("without a block table", [](PrefillParams& b) { b.cache.block_table = nullptr; });
  expect("beyond the 128 tokens a block table row maps", [](PrefillParams& b) { b.max_context = 129; });
  expect("positive max_len", [](PrefillParams& b) { b.cache.layout = KvLayout::contiguous; });
  expect("beyond the cache's max_len 64", [](PrefillParams& b) {
    b.cache.layout = KvLayout::contiguous;
    b.cache.max_len = 64;
  });
  expect("q_start", [](PrefillParams& b) { b.q_start = nullptr; });
  expect("context_lens must be given", [](PrefillParams& b) { b.cache.context_lens = nullptr; });
  expect("zero-filled workspace of 256 bytes", [](PrefillParams& b) { b.workspace = nullptr; });
  expect("zero-filled workspace of 256 bytes", [](PrefillParams& b) { b.workspace_bytes = 8; });
}

// The cost the benchmarks charge a launch is batch_attention_op's for the same sequences.
TEST(Prefill, CostIsTheBatchAttentionOpOfItsSequences) {
  PrefillParams p;
  p.sequences = 2;
  p.heads = 32;
  p.head_dim = 128;
  p.cache.kv_heads = 8;
  p.cache.layout = KvLayout::paged;
  p.cache.block_size = 16;
  const Op op = prefill_cost(p, {0, 512, 1024}, {1536, 600});
  ModelConfig m;
  m.layers = 1;
  m.heads = 32;
  m.kv_heads = 8;
  m.head_dim = 128;
  Batch batch{{SequenceWork{512, 1024, 1, 0}, SequenceWork{512, 88, 1, 0}}, 16};
  OpOptions o;
  o.precision.act = o.precision.kv = DType::bf16;
  const Op want = batch_attention_op(m, batch, o);
  EXPECT_EQ(op.flops, want.flops);
  EXPECT_EQ(op.bytes(), want.bytes());
  EXPECT_GT(op.bytes(TensorRole::kv_cache), 0);
  EXPECT_NE(error_of([&] { prefill_cost(p, {0, 512}, {1536, 600}); }).find("q_start needs"), std::string::npos);
}

}  // namespace
}  // namespace inferlab
