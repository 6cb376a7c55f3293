// kernels/attention against the CPU reference. GPU tests skip without a device.
//
// Tolerance, per dtype, derived rather than picked (attention_testing.h): a plain same-precision
// implementation (scores rounded to the dtype, softmax in fp32, P rounded to the dtype, O rounded to
// the dtype) is run on the CPU on the same inputs, and its error against the double-precision
// reference is the baseline. A kernel passes if its error is at most 2x that baseline
// (FlashAttention's rule), plus a floor of half an ulp of the output dtype at the output's scale for
// shapes where the baseline is exact by luck. The log-sum-exp gets the same treatment.
#include <gtest/gtest.h>

#include "attention_testing.h"
#include "gpu_test.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <random>
#include <vector>

#include "inferlab/kernels/attention/attention.h"
#include "error_of.h"
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
  FlashOptions flash{};  // the flash rung (the naive variant ignores it)
  // > 0: key j scaled by 1 + j * ramp and odd query rows zero, so that along the keys the even rows' scores grow
  // (their running maximum moves, tile after tile at a fast ramp, after several tiles at a slow one) and the odd
  // rows' stay 0 (theirs never moves): the lazy maximum's rescale, with rows of one warp that move and rows that do
  // not. Random N(0, 1) inputs never move it past tile 0.
  float ramp = 0.f;
  // Elements O starts past its buffer's (16-byte aligned) start: 2 puts it 4 bytes in, where the Hopper kernels store
  // O four bytes at a time instead of sixteen (flash_sm90_common.cuh store_rows).
  int64_t o_offset = 0;
};

std::string describe(const Case& c) {
  return dtype_name(c.dtype) + " b" + std::to_string(c.batch) + " h" + std::to_string(c.heads) + "/kv" +
         std::to_string(c.kv_heads) + " sq" + std::to_string(c.seq_q) + " sk" + std::to_string(c.seq_k) + " d" +
         std::to_string(c.head_dim) + (c.causal ? " causal" : "") + " flash " + flash_kernel_name(c.flash.kernel) +
         (c.flash.mma_tile == MmaTile::planned ? "" : std::string(" tile ") + mma_tile_name(c.flash.mma_tile)) +
         (c.flash.max_ctas ? " max_ctas " + std::to_string(c.flash.max_ctas) : "") +
         (c.o_offset ? " O offset " + std::to_string(c.o_offset) : "");
}

// The plain same-precision implementation (attention_testing.h) over every row: O and LSE laid out
// as the kernels write them.
void plain_low_precision(const AttentionParams& p, const std::vector<float>& q, const std::vector<float>& k,
                         const std::vector<float>& v, std::vector<float>& o, std::vector<float>& lse) {
  const int64_t H = p.heads, KH = p.kv_heads, D = p.head_dim, G = H / KH;
  for (int64_t b = 0; b < p.batch; ++b)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t i = 0; i < p.seq_q; ++i) {
        const int64_t last = p.causal ? std::min(p.seq_k - 1, i + p.seq_k - p.seq_q) : p.seq_k - 1;
        auto row = [&](const std::vector<float>& x) {
          return [&, b, h](int64_t j) { return &x[std::size_t(((b * p.seq_k + j) * KH + h / G) * D)]; };
        };
        testing::plain_attention_row(p.dtype, &q[std::size_t(((b * p.seq_q + i) * H + h) * D)], D, last,
                                     p.softmax_scale(), row(k), row(v), &o[std::size_t(((b * p.seq_q + i) * H + h) * D)],
                                     &lse[std::size_t((b * H + h) * p.seq_q + i)]);
      }
}

struct Errors {
  testing::WorstError o, lse;
};

Errors compare(const std::vector<float>& o, const std::vector<float>& ref, const std::vector<float>& lse,
               const std::vector<float>& ref_lse) {
  Errors e;
  for (std::size_t i = 0; i < o.size(); ++i) e.o.add(i, o[i], ref[i]);
  for (std::size_t i = 0; i < lse.size(); ++i) e.lse.add(i, lse[i], ref_lse[i]);
  return e;
}

// Where element i of O ([batch, seq_q, heads, head_dim]) or of the LSE ([batch, heads, seq_q]) is.
std::string o_at(const AttentionParams& p, std::size_t i) {
  const int64_t d = int64_t(i) % p.head_dim, h = int64_t(i) / p.head_dim % p.heads;
  const int64_t row = int64_t(i) / p.head_dim / p.heads;
  return "batch " + std::to_string(row / p.seq_q) + " query " + std::to_string(row % p.seq_q) + " head " +
         std::to_string(h) + " dim " + std::to_string(d);
}
std::string lse_at(const AttentionParams& p, std::size_t i) {
  const int64_t q = int64_t(i) % p.seq_q, bh = int64_t(i) / p.seq_q;
  return "batch " + std::to_string(bh / p.heads) + " query " + std::to_string(q) + " head " + std::to_string(bh % p.heads);
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
  p.flash = c.flash;
  const std::size_t nq = std::size_t(c.batch * c.seq_q * c.heads * c.head_dim);
  const std::size_t nkv = std::size_t(c.batch * c.seq_k * c.kv_heads * c.head_dim);
  const std::size_t nl = std::size_t(c.batch * c.heads * c.seq_q);
  auto q = testing::random_values<DT>(nq, rng), k = testing::random_values<DT>(nkv, rng);
  const auto v = testing::random_values<DT>(nkv, rng);
  if (c.ramp > 0) {
    for (std::size_t i = 0; i < nkv; ++i) {
      const int64_t key = int64_t(i) / (c.kv_heads * c.head_dim) % c.seq_k;
      k.dev[i] = Tr::from_float(k.f[i] * (1.f + float(key) * c.ramp));
      k.f[i] = Tr::to_float(k.dev[i]);
    }
    for (std::size_t i = 0; i < nq; ++i)
      if (int64_t(i) / (c.heads * c.head_dim) % c.seq_q % 2 == 1) {
        q.dev[i] = Tr::from_float(0.f);
        q.f[i] = 0.f;
      }
  }

  std::vector<float> ref(nq), ref_lse(nl), base(nq), base_lse(nl);
  attention_reference(p, q.f.data(), k.f.data(), v.f.data(), ref.data(), ref_lse.data());
  plain_low_precision(p, q.f, k.f, v.f, base, base_lse);
  const Errors be = compare(base, ref, base_lse, ref_lse);
  ASSERT_EQ(be.o.non_finite + be.lse.non_finite, 0);
  double out_scale = 0;
  for (float x : ref) out_scale = std::max(out_scale, double(std::fabs(x)));
  const double tol = 2 * be.o.value + testing::half_ulp(DT, out_scale);
  const double lse_tol = 2 * be.lse.value + 1e-4;

  DeviceBuffer<T> dq(q.dev), dk(k.dev), dv(v.dev);
  constexpr std::size_t kGuard = 512;  // elements after O that must stay untouched
  for (AttentionVariant variant : {AttentionVariant::naive, AttentionVariant::flash}) {
    SCOPED_TRACE(attention_variant_name(variant) + " " + describe(c));
    if (variant == AttentionVariant::naive && c.o_offset % 8 != 0) {  // an o not 16-byte aligned: refused
      AttentionParams bad = p;
      DeviceBuffer<T> d_o(std::size_t(c.o_offset) + nq);
      DeviceBuffer<float> d_lse(nl);
      bad.q = dq.get(), bad.k = dk.get(), bad.v = dv.get(), bad.o = d_o.get() + c.o_offset, bad.lse = d_lse.get();
      DeviceBuffer<char> ws(attention_workspace_bytes(bad, variant));  // the workspace given: only o is wrong
      bad.workspace = ws.get();
      bad.workspace_bytes = ws.size();
      try {
        attention_forward(bad, variant, nullptr);
        ADD_FAILURE() << "the naive variant accepted an o not 16-byte aligned";
      } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("o must be 16-byte aligned"), std::string::npos) << e.what();
      }
      continue;
    }
    DeviceBuffer<T> d_o(std::size_t(c.o_offset) + nq + kGuard);
    DeviceBuffer<float> d_lse(nl);
    d_o.fill(Tr::nan());  // poison: every element must be written, the guard and the offset before O never
    d_lse.fill(std::nanf(""));
    p.q = dq.get();
    p.k = dk.get();
    p.v = dv.get();
    p.o = d_o.get() + c.o_offset;
    p.lse = d_lse.get();
    DeviceBuffer<char> ws(attention_workspace_bytes(p, variant));
    p.workspace = ws.get();
    p.workspace_bytes = ws.size();
    attention_forward(p, variant, nullptr);
    INFERLAB_CUDA_CHECK(cudaDeviceSynchronize());
    const auto all = d_o.download();
    for (int64_t i = 0; i < c.o_offset; ++i) ASSERT_TRUE(std::isnan(Tr::to_float(all[std::size_t(i)]))) << "wrote before O at " << i;
    const std::vector<T> raw(all.begin() + c.o_offset, all.end());
    std::vector<float> o(nq);
    for (std::size_t i = 0; i < nq; ++i) o[i] = Tr::to_float(raw[i]);
    for (std::size_t i = nq; i < nq + kGuard; ++i) ASSERT_TRUE(std::isnan(Tr::to_float(raw[i]))) << "wrote past O at " << i;
    const Errors e = compare(o, ref, d_lse.download(), ref_lse);
    EXPECT_EQ(e.o.non_finite, 0) << "unwritten (NaN) or non-finite O, first at " << o_at(p, e.o.first_non_finite);
    EXPECT_EQ(e.lse.non_finite, 0) << "unwritten (NaN) or non-finite LSE, first at " << lse_at(p, e.lse.first_non_finite);
    EXPECT_LE(e.o.value, tol) << "worst O at " << o_at(p, e.o.where) << ": " << e.o.got << " vs " << e.o.want
                              << " (baseline max error " << be.o.value << ")";
    EXPECT_LE(e.lse.value, lse_tol) << "worst LSE at " << lse_at(p, e.lse.where) << ": " << e.lse.got << " vs "
                                    << e.lse.want << " (baseline " << be.lse.value << ")";
  }
}

void run(const Case& c, std::mt19937_64& rng) {
  if (c.dtype == DType::bf16)
    run_case<DType::bf16>(c, rng);
  else
    run_case<DType::fp16>(c, rng);
}

std::mt19937_64 seeded_rng() { return testing::seeded_rng("attention"); }

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

// Whether this GPU's automatic flash rung is the overlapped kernel (the one with head dims 96 and 256).
bool automatic_is_overlapped() { return resolve_flash_kernel(FlashOptions{}) == FlashKernel::overlapped; }

TEST(AttentionGpu, FreshRandomShapes) {
  REQUIRE_GPU();
  auto rng = seeded_rng();
  std::uniform_int_distribution<int> len(1, 400), coin(0, 1), pick(0, 3);
  // Head dims the automatic rung runs here: 96 and 256 on the overlapped kernel only.
  const std::vector<int64_t> dims =
      automatic_is_overlapped() ? std::vector<int64_t>{64, 96, 128, 256} : std::vector<int64_t>{64, 128};
  std::uniform_int_distribution<std::size_t> dim(0, dims.size() - 1);
  for (int trial = 0; trial < 24; ++trial) {
    Case c;
    c.dtype = coin(rng) ? DType::bf16 : DType::fp16;
    c.head_dim = dims[dim(rng)];
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

// Enough work items (query blocks of 128 rows x batch x heads) that the persistent Hopper kernel
// hands every block several, taken from its work counter (> 4x the SM count), with causal items of
// unequal cost; the mma.sync kernel runs the same shape elsewhere.
TEST(AttentionGpu, PersistentSchedulerHandsBlocksSeveralItems) {
  REQUIRE_GPU();
  auto rng = seeded_rng();
  int device = 0, sms = 0;
  INFERLAB_CUDA_CHECK(cudaGetDevice(&device));
  INFERLAB_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  const int64_t heads = 32;
  auto batch_for = [&](int64_t seq_q) {  // the smallest batch with more than 4 items per SM
    const int64_t blocks = (seq_q + 127) / 128, batch = (4 * sms) / (heads * blocks) + 1;
    EXPECT_GT(batch * heads * blocks, 4 * sms);
    return batch;
  };
  run({DType::bf16, batch_for(300), heads, 8, 300, 300, 64, true}, rng);     // 3 blocks a sequence, GQA
  run({DType::fp16, batch_for(130), heads, 32, 130, 147, 64, false}, rng);   // 2 blocks, MHA, sq != sk
}

// Every rung of the flash ladder, side by side in one process, over the same shapes: the mma.sync kernel
// with its planned tile and each candidate tile (head dim 128), the wgmma kernel where the GPU has it, and
// the wgmma kernel's persistent scheduler squeezed to 3 CTAs (every CTA takes many work items), and the
// overlapped kernel (TMA, softmax beside P V) the same two ways. The shapes: partial tiles, s_q < s_k,
// s_q > s_k causal (query tiles that see no key: work items with no key tile), many key tiles (the
// overlapped kernel's steady state), MQA.
TEST(AttentionGpu, EveryFlashRungMatchesTheReference) {
  REQUIRE_GPU();
  auto rng = seeded_rng();
  for (const FlashOptions& f : testing::flash_rungs(3))
    for (Case c : {Case{DType::bf16, 2, 8, 2, 200, 200, 128, true}, Case{DType::fp16, 1, 4, 4, 77, 301, 128, false},
                   Case{DType::bf16, 1, 8, 1, 129, 129, 64, true}, Case{DType::bf16, 1, 4, 2, 300, 100, 128, true},
                   Case{DType::fp16, 1, 4, 1, 1031, 1031, 128, false}, Case{DType::bf16, 2, 2, 1, 700, 700, 64, true}}) {
      if (f.mma_tile != MmaTile::planned && c.head_dim != 128) continue;
      c.flash = f;
      run(c, rng);
    }
}

// Head dims 96 and 256 on the overlapped kernel (its own tiles: 96 stored as two 64-column atoms, the second
// half zero-filled by the TMA; 256 with 64-key tiles and one Q buffer), whole grid and squeezed to 3 CTAs
// (every CTA takes many items, so the single Q buffer is refilled across items): partial tiles, s_q < s_k,
// s_q > s_k causal (items with no key tile), many key tiles, MQA and GQA, both dtypes. The naive variant runs
// the same cases (run_case), so its cuBLAS path is checked at these head dims too.
TEST(AttentionGpu, OverlappedKernelHeadDims96And256) {
  REQUIRE_GPU();
  if (!automatic_is_overlapped()) GTEST_SKIP() << "the overlapped flash kernel needs compute capability 9.0";
  auto rng = seeded_rng();
  for (int64_t d : {96, 256})
    for (int ctas : {0, 3})
      for (Case c : {Case{DType::bf16, 2, 8, 2, 200, 200, d, true}, Case{DType::fp16, 1, 4, 4, 77, 301, d, false},
                     Case{DType::bf16, 1, 4, 2, 300, 100, d, true}, Case{DType::fp16, 1, 4, 1, 1031, 1031, d, true},
                     Case{DType::bf16, 1, 2, 1, 1, 1, d, false}}) {
        c.flash = FlashOptions{FlashKernel::overlapped, MmaTile::planned, ctas};
        run(c, rng);
      }
}

// O where the Hopper kernels cannot store it 16 bytes at a time (4 bytes past an aligned start): they store it as the
// accumulators hold it, four bytes at a time; every rung and head dim, partial tiles and rows, both dtypes. The naive
// variant refuses such an O (cuBLAS's batched GEMM wrote the two elements before it).
TEST(AttentionGpu, AnOutputNotSixteenByteAlignedIsStoredNarrow) {
  REQUIRE_GPU();
  auto rng = seeded_rng();
  for (const FlashOptions& f : testing::flash_rungs(3))
    for (int64_t d : {64, 96, 128, 256}) {
      if (f.mma_tile != MmaTile::planned && d != 128) continue;
      if (d % 64 != 0 && f.kernel != FlashKernel::overlapped) continue;  // 96 and 256: the overlapped kernel's
      if (d == 256 && f.kernel != FlashKernel::overlapped) continue;
      for (Case c : {Case{DType::bf16, 1, 4, 2, 200, 200, d, true}, Case{DType::fp16, 1, 2, 1, 77, 301, d, false}}) {
        c.flash = f;
        c.o_offset = 2;
        run(c, rng);
      }
    }
}

// The lazy maximum's rescale (flash_fwd_sm90_overlap.cu lazy_softmax_rows): inputs whose scores grow along the keys
// in even rows and stay 0 in odd ones (Case::ramp), so that within a warpgroup some rows move their reference and
// others keep it (alpha 1), fast (every tile) and slow (P up to 256 between moves); every head dim, both dtypes,
// causal and not, every flash rung (the naive variant too).
TEST(AttentionGpu, LazyMaximumMovesAndStays) {
  REQUIRE_GPU();
  auto rng = seeded_rng();
  const std::vector<int64_t> dims =
      automatic_is_overlapped() ? std::vector<int64_t>{64, 96, 128, 256} : std::vector<int64_t>{64, 128};
  for (int64_t d : dims)
    for (float ramp : {1.f / 16, 1.f / 256})
      for (Case c : {Case{DType::bf16, 1, 4, 2, 1031, 1031, d, true}, Case{DType::fp16, 1, 2, 2, 700, 700, d, false}}) {
        c.ramp = ramp;
        for (const FlashOptions& f : testing::flash_rungs(3)) {
          if (f.mma_tile != MmaTile::planned) continue;
          if ((d == 96 || d == 256) && f.kernel != FlashKernel::overlapped) continue;
          c.flash = f;
          run(c, rng);
        }
      }
}

// Two streams launching the persistent kernel at once: each launch has its own work counter, so both
// outputs equal what each gives alone (the kernel is deterministic: bit for bit).
TEST(AttentionGpu, ConcurrentStreamsDoNotShareTheWorkCounter) {
  REQUIRE_GPU();
  using Tr = DTypeTraits<DType::bf16>;
  using T = Tr::type;
  auto rng = seeded_rng();
  const int64_t B = 4, H = 16, S = 512, D = 128, n = B * S * H * D;
  struct Run {
    DeviceBuffer<T> q, k, v, o;
    DeviceBuffer<float> lse;
    AttentionParams p;
  };
  std::vector<std::unique_ptr<Run>> runs;
  for (int i = 0; i < 2; ++i) {
    auto r = std::make_unique<Run>();
    r->q = DeviceBuffer<T>(testing::random_values<DType::bf16>(std::size_t(n), rng).dev);
    r->k = DeviceBuffer<T>(testing::random_values<DType::bf16>(std::size_t(n), rng).dev);
    r->v = DeviceBuffer<T>(testing::random_values<DType::bf16>(std::size_t(n), rng).dev);
    r->o = DeviceBuffer<T>(std::size_t(n));
    r->lse = DeviceBuffer<float>(std::size_t(B * H * S));
    AttentionParams& p = r->p;
    p.batch = B, p.heads = H, p.kv_heads = H, p.seq_q = S, p.seq_k = S, p.head_dim = D, p.causal = i == 1;
    p.q = r->q.get(), p.k = r->k.get(), p.v = r->v.get(), p.o = r->o.get(), p.lse = r->lse.get();
    runs.push_back(std::move(r));
  }
  auto bytes = [](const std::vector<T>& x) {
    std::vector<uint16_t> b(x.size());
    std::memcpy(b.data(), x.data(), x.size() * sizeof(T));
    return b;
  };
  std::vector<std::vector<uint16_t>> alone;
  for (auto& r : runs) {
    attention_forward(r->p, AttentionVariant::flash, nullptr);
    INFERLAB_CUDA_CHECK(cudaDeviceSynchronize());
    alone.push_back(bytes(r->o.download()));
  }
  cudaStream_t s[2];
  for (auto& x : s) INFERLAB_CUDA_CHECK(cudaStreamCreateWithFlags(&x, cudaStreamNonBlocking));
  for (int rep = 0; rep < 20; ++rep) {
    for (auto& r : runs) r->o.fill(Tr::nan());
    INFERLAB_CUDA_CHECK(cudaDeviceSynchronize());
    for (int i = 0; i < 2; ++i) attention_forward(runs[std::size_t(i)]->p, AttentionVariant::flash, s[i]);
    for (auto& x : s) INFERLAB_CUDA_CHECK(cudaStreamSynchronize(x));
    for (int i = 0; i < 2; ++i)
      ASSERT_EQ(bytes(runs[std::size_t(i)]->o.download()), alone[std::size_t(i)]) << "stream " << i << ", repeat " << rep;
  }
  for (auto& x : s) INFERLAB_CUDA_CHECK(cudaStreamDestroy(x));
}

TEST(AttentionGpu, FlashRungsRefuseWhatTheyCannotRun) {
  REQUIRE_GPU();
  DeviceBuffer<uint16_t> buf(1 << 16);
  DeviceBuffer<float> lse(1 << 10);
  AttentionParams p;
  p.batch = 1, p.heads = 2, p.kv_heads = 2, p.seq_q = 16, p.seq_k = 16, p.head_dim = 64;
  p.q = p.k = p.v = buf.get();
  p.o = buf.get();
  p.lse = lse.get();
  p.flash = FlashOptions{FlashKernel::mma, MmaTile::bm128_bn32_w4, 0};
  EXPECT_NE(error_of([&] { attention_forward(p, AttentionVariant::flash, nullptr); }).find("head-dim-128 tile"),
            std::string::npos);
  p.head_dim = 128;
  p.flash = FlashOptions{FlashKernel::mma, MmaTile::planned, -1};
  EXPECT_NE(error_of([&] { attention_forward(p, AttentionVariant::flash, nullptr); }).find("max_ctas"), std::string::npos);
  if (resolve_flash_kernel(FlashOptions{}) != FlashKernel::mma) {
    p.flash = FlashOptions{FlashKernel::automatic, MmaTile::bm64_bn64_w4, 0};
    EXPECT_NE(error_of([&] { attention_forward(p, AttentionVariant::flash, nullptr); }).find("needs the mma kernel"),
              std::string::npos);
    p.head_dim = 96;  // the overlapped kernel's head dim only
    for (FlashKernel k : {FlashKernel::mma, FlashKernel::wgmma}) {
      p.flash = FlashOptions{k, MmaTile::planned, 0};
      EXPECT_NE(error_of([&] { attention_forward(p, AttentionVariant::flash, nullptr); }).find("overlapped kernel only"),
                std::string::npos);
    }
    p.head_dim = 128;
    p.flash = FlashOptions{FlashKernel::overlapped, MmaTile::planned, 0};
    p.q = static_cast<const char*>(p.q) + 2;  // TMA reads 16-byte aligned rows only
    EXPECT_NE(error_of([&] { attention_forward(p, AttentionVariant::flash, nullptr); }).find("16-byte aligned"),
              std::string::npos);
  }
}

TEST(Attention, BadShapesAreRejectedBeforeLaunch) {
  AttentionParams p;
  alignas(16) int dummy[4] = {};  // 16-byte aligned: the naive variant refuses an o that is not
  p.q = p.k = p.v = dummy;
  p.o = dummy;
  p.lse = reinterpret_cast<float*>(dummy);
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
  p.head_dim = 80;
  expect("unsupported head dim 80");
  p.head_dim = 128;
  p.scale = -1.f;
  expect("scale must be positive");
  p.scale = 0.f;
  p.head_dim = 192;
  expect("unsupported head dim 192");
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
  p.o = reinterpret_cast<char*>(dummy) + 4;
  expect("o must be 16-byte aligned", AttentionVariant::naive);
  p.o = reinterpret_cast<char*>(dummy) + 2;
  expect("o must be 4-byte aligned");
  p.o = nullptr;
  expect("must all be given");
}

}  // namespace
}  // namespace inferlab
