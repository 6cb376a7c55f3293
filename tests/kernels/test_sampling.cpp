// sample() on the GPU: greedy equals the CPU argmax exactly (ties, NaN, -inf, +inf, all-NaN rows; one block and
// many blocks a row); seeded sampling reproduces sample_distribution_reference: total variation <= 1e-2 over
// >= 1e6 draws of a 50-token row (the expected TV of an exact sampler is <= sqrt(50 / 1e6) / 2 = 3.5e-3), and no
// token outside the kept set is ever drawn; rows built so that the candidate list overflows run the whole-row
// path under the same checks; the same (seed, offset) gives the same token wherever the row sits in any batch.
#include <gtest/gtest.h>

#include "gpu_test.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <random>

#include "inferlab/kernels/common/check.h"
#include "inferlab/kernels/common/device_buffer.h"
#include "inferlab/kernels/layers/layers.h"

namespace inferlab {
namespace {

std::mt19937_64 seeded_rng() {
  const uint64_t seed = std::random_device{}();
  std::printf("sampling test seed %llu\n", static_cast<unsigned long long>(seed));
  return std::mt19937_64(seed);
}

struct RowSpec {
  float temperature = 0;
  int32_t top_k = 0;
  float top_p = 1;
  uint64_t seed = 0, offset = 0;
};

// Device buffers for a batch; the workspace is zeroed once and reused by every launch (as the engine does).
class Sampler {
 public:
  Sampler(int64_t rows, int64_t vocab, int shift = 0)
      : rows_(rows), vocab_(vocab), shift_(shift), logits_(std::size_t(rows * vocab) + 4), temp_(std::size_t(rows)),
        k_(std::size_t(rows)), p_(std::size_t(rows)), seed_(std::size_t(rows)), offset_(std::size_t(rows)),
        out_(std::size_t(rows)), ws_(sample_workspace_bytes(rows, vocab)) {
    INFERLAB_CUDA_CHECK(cudaMemset(ws_.get(), 0, ws_.size()));
  }
  void set_logits(const std::vector<float>& l) {
    INFERLAB_CUDA_CHECK(cudaMemcpy(logits_.get() + shift_, l.data(), l.size() * 4, cudaMemcpyHostToDevice));
  }
  std::vector<int32_t> draw(const std::vector<RowSpec>& rows) {
    std::vector<float> t, p;
    std::vector<int32_t> k;
    std::vector<uint64_t> s, o;
    for (const auto& r : rows) {
      t.push_back(r.temperature);
      k.push_back(r.top_k);
      p.push_back(r.top_p);
      s.push_back(r.seed);
      o.push_back(r.offset);
    }
    temp_.upload(t);
    k_.upload(k);
    p_.upload(p);
    seed_.upload(s);
    offset_.upload(o);
    out_.fill(-7);
    SampleParams sp;
    sp.rows = rows_;
    sp.vocab = vocab_;
    sp.logits = logits_.get() + shift_;
    sp.temperature = temp_.get();
    sp.top_k = k_.get();
    sp.top_p = p_.get();
    sp.seed = seed_.get();
    sp.offset = offset_.get();
    sp.out = out_.get();
    sp.workspace = ws_.get();
    sp.workspace_bytes = ws_.size();
    sample(sp, nullptr);
    INFERLAB_CUDA_CHECK(cudaDeviceSynchronize());
    return out_.download();
  }

 private:
  int64_t rows_, vocab_;
  int shift_;
  DeviceBuffer<float> logits_, temp_;
  DeviceBuffer<int32_t> k_;
  DeviceBuffer<float> p_;
  DeviceBuffer<uint64_t> seed_, offset_;
  DeviceBuffer<int32_t> out_;
  DeviceBuffer<char> ws_;
};

void run_greedy(int64_t rows, int64_t vocab, int shift, std::mt19937_64& rng) {
  SCOPED_TRACE("rows " + std::to_string(rows) + " vocab " + std::to_string(vocab) + " shift " + std::to_string(shift));
  const float nan = NAN, inf = INFINITY;
  std::normal_distribution<float> dist(0.f, 3.f);
  std::uniform_int_distribution<int64_t> at(0, vocab - 1);
  std::uniform_int_distribution<int> kind(0, 7);
  std::vector<float> l(std::size_t(rows * vocab));
  for (int64_t r = 0; r < rows; ++r) {
    float* row = l.data() + r * vocab;
    for (int64_t i = 0; i < vocab; ++i) row[i] = dist(rng);
    switch (kind(rng)) {
      case 0: std::fill(row, row + vocab, nan); break;    // nothing to choose: -1
      case 1: std::fill(row, row + vocab, -inf); break;   // all equal: the first
      case 2: for (int64_t i = 0; i < vocab; i += 3) row[i] = nan; break;
      case 3: row[at(rng)] = inf; row[at(rng)] = nan; break;
      default: {  // a tie for the largest value: the lower index wins
        const float top = *std::max_element(row, row + vocab) + 1;
        row[at(rng)] = top;
        row[at(rng)] = top;
      }
    }
  }
  Sampler s(rows, vocab, shift);
  s.set_logits(l);
  std::vector<RowSpec> spec(static_cast<std::size_t>(rows));
  for (int64_t r = 0; r < rows; ++r) spec[std::size_t(r)].temperature = r % 2 ? 0.f : -1.f;
  for (int rep = 0; rep < 3; ++rep) {  // the workspace counters must come back to zero every time
    const auto got = s.draw(spec);
    for (int64_t r = 0; r < rows; ++r) ASSERT_EQ(got[std::size_t(r)], argmax_reference(l.data() + r * vocab, vocab)) << "row " << r;
  }
}

TEST(SamplingGpu, GreedyEqualsCpuArgmax) {
  REQUIRE_GPU();
  auto rng = seeded_rng();
  run_greedy(1, 128256, 0, rng);  // many blocks merge one row
  run_greedy(1, 32000, 0, rng);
  run_greedy(3, 50, 0, rng);
  run_greedy(64, 32000, 0, rng);
  run_greedy(300, 4097, 0, rng);  // one block a row; vocab not a multiple of 4
  run_greedy(2, 1, 0, rng);
  run_greedy(5, 40000, 1, rng);   // misaligned rows: scalar loads
  std::uniform_int_distribution<int64_t> rows(1, 40), vocab(1, 70000);
  for (int trial = 0; trial < 6; ++trial) run_greedy(rows(rng), vocab(rng), 0, rng);
}

// Whether every cumulative mass of the kept top-k set, in descending order, is at least `margin` (relative) away
// from top_p: decisions that close are a matter of rounding, not of the algorithm.
bool top_p_clear(const std::vector<float>& l, const RowSpec& s, double margin) {
  if (s.top_p >= 1) return true;
  std::vector<float> v(l);
  std::sort(v.begin(), v.end(), std::greater<float>());
  std::size_t kept = v.size();
  if (s.top_k > 0 && std::size_t(s.top_k) < v.size()) {
    kept = std::size_t(s.top_k);
    while (kept < v.size() && v[kept] == v[kept - 1]) ++kept;
  }
  double z = 0;
  for (std::size_t j = 0; j < kept; ++j) z += std::exp((double(v[j]) - v[0]) / s.temperature);
  double cum = 0;
  for (std::size_t j = 0; j < kept; ++j) {
    cum += std::exp((double(v[j]) - v[0]) / s.temperature);
    if (std::fabs(cum / z - double(s.top_p)) < margin) return false;
  }
  return true;
}

// Draws `draws` tokens from one row (copied into every row of the batch, each row its own offset) and compares the
// frequencies with the reference distribution.
void check_distribution(const std::vector<float>& row, RowSpec spec, int64_t batch, int64_t draws, double tv_limit,
                        std::mt19937_64& rng) {
  const int64_t V = int64_t(row.size());
  SCOPED_TRACE("vocab " + std::to_string(V) + " T " + std::to_string(spec.temperature) + " top_k " +
               std::to_string(spec.top_k) + " top_p " + std::to_string(spec.top_p));
  const auto want = sample_distribution_reference(row.data(), V, spec.temperature, spec.top_k, spec.top_p);
  std::vector<float> l(std::size_t(batch * V));
  for (int64_t r = 0; r < batch; ++r) std::copy(row.begin(), row.end(), l.begin() + r * V);
  Sampler s(batch, V);
  s.set_logits(l);
  spec.seed = rng();
  std::vector<int64_t> count(std::size_t(V), 0);
  int64_t n = 0;
  for (int64_t launch = 0; n < draws; ++launch) {
    std::vector<RowSpec> specs(static_cast<std::size_t>(batch), spec);
    for (int64_t r = 0; r < batch; ++r) specs[std::size_t(r)].offset = uint64_t(launch * batch + r);
    for (int32_t t : s.draw(specs)) {
      ASSERT_GE(t, 0);
      ASSERT_LT(t, V);
      ++count[std::size_t(t)];
      ++n;
    }
  }
  double tv = 0;
  for (int64_t i = 0; i < V; ++i) {
    if (want[std::size_t(i)] == 0) {
      EXPECT_EQ(count[std::size_t(i)], 0) << "token " << i << " is outside the kept set";
    }
    tv += std::fabs(double(count[std::size_t(i)]) / double(n) - want[std::size_t(i)]);
  }
  tv /= 2;
  EXPECT_LE(tv, tv_limit) << n << " draws";
  std::printf("  TV %.5f over %lld draws (limit %.4f)\n", tv, static_cast<long long>(n), tv_limit);
}

TEST(SamplingGpu, ReproducesTheTargetDistribution) {
  REQUIRE_GPU();
  auto rng = seeded_rng();
  std::normal_distribution<float> dist(0.f, 2.f);
  std::vector<float> row(50);
  for (auto& x : row) x = dist(rng);
  const RowSpec specs[] = {
      {1.0f, 0, 1.0f},    // temperature only: the whole-row draw
      {0.7f, 10, 1.0f},   // top-k cuts (fast path: the 10th largest per-thread maximum)
      {1.3f, 20, 1.0f},   // top-k beyond the per-thread maxima (every value a candidate)
      {1.0f, 0, 0.8f},    // top-p cuts
      {0.8f, 20, 0.9f},   // both
  };
  for (RowSpec s : specs) {
    while (!top_p_clear(row, s, 1e-3)) s.top_p -= 0.01f;
    check_distribution(row, s, 8192, 1000000, 1e-2, rng);
  }
}

TEST(SamplingGpu, WholeRowPathWhenCandidatesOverflow) {
  REQUIRE_GPU();
  auto rng = seeded_rng();
  const int64_t V = 20000;
  std::vector<int64_t> perm(static_cast<std::size_t>(V));
  std::iota(perm.begin(), perm.end(), 0);
  std::shuffle(perm.begin(), perm.end(), rng);
  std::normal_distribution<float> high(3.f, 0.5f), low(-6.f, 0.3f);
  // top-k 600 (more than the 512 per-thread maxima, so every value is a candidate): 45 high values, 655 low ones
  // (the 100 lowest of them cut, ~1.5e-4 of the mass: ~150 draws of 1e6 if they were not), the rest far below.
  {
    std::vector<float> row(static_cast<std::size_t>(V), -40.f);
    for (int i = 0; i < 45; ++i) row[std::size_t(perm[std::size_t(i)])] = high(rng);
    for (int i = 45; i < 700; ++i) row[std::size_t(perm[std::size_t(i)])] = low(rng);
    check_distribution(row, RowSpec{1.0f, 600, 1.0f}, 1024, 1000000, 1e-2, rng);
  }
  // top-p where every value weighs enough to be a candidate: 45 high values and 19955 tied at -1 (most of the
  // mass); top_p is half the high values' share, so the kept set is a part of them.
  {
    std::vector<float> row(static_cast<std::size_t>(V), -1.f);
    for (int i = 0; i < 45; ++i) row[std::size_t(perm[std::size_t(i)])] = high(rng);
    double z_high = 0, z = 0;
    for (float x : row) (x > -1.f ? z_high : z) += std::exp(double(x));
    RowSpec s{1.0f, 0, float(0.5 * z_high / (z + z_high))};
    while (!top_p_clear(row, s, 1e-3)) s.top_p -= 0.002f;
    check_distribution(row, s, 1024, 1000000, 1e-2, rng);
  }
}

TEST(SamplingGpu, RealVocabularyDrawsOnlyFromTheKeptSet) {
  REQUIRE_GPU();
  auto rng = seeded_rng();
  const int64_t V = 128256, batch = 128, draws = 128 * 40;
  std::normal_distribution<float> dist(0.f, 2.5f);
  std::vector<float> row(static_cast<std::size_t>(V));
  for (auto& x : row) x = dist(rng);
  for (RowSpec s : {RowSpec{0.8f, 50, 1.0f}, RowSpec{1.0f, 0, 0.9f}, RowSpec{1.0f, 40, 0.95f}}) {
    while (!top_p_clear(row, s, 1e-3)) s.top_p -= 0.01f;
    const auto want = sample_distribution_reference(row.data(), V, s.temperature, s.top_k, s.top_p);
    const double kept = double(std::count_if(want.begin(), want.end(), [](double p) { return p > 0; }));
    // 3x the bound on an exact sampler's expected TV, sqrt(kept / draws) / 2.
    check_distribution(row, s, batch, draws, 1.5 * std::sqrt(kept / double(draws)), rng);
  }
}

TEST(SamplingGpu, SameSeedAndOffsetGiveTheSameTokenInAnyBatch) {
  REQUIRE_GPU();
  auto rng = seeded_rng();
  const int64_t V = 1000, B = 37;
  std::normal_distribution<float> dist(0.f, 1.f);
  std::uniform_int_distribution<int> kind(0, 4), k(1, 60);
  std::vector<float> l(std::size_t(B * V));
  for (auto& x : l) x = dist(rng);
  std::vector<RowSpec> spec(static_cast<std::size_t>(B));
  for (auto& s : spec) {
    const int c = kind(rng);
    s.temperature = c == 0 ? 0.f : 0.5f + float(c) * 0.2f;
    s.top_k = c == 2 || c == 4 ? k(rng) : 0;
    s.top_p = c >= 3 ? 0.85f : 1.f;
    s.seed = rng();
    s.offset = rng();
  }
  Sampler whole(B, V);
  whole.set_logits(l);
  const auto first = whole.draw(spec);
  EXPECT_EQ(whole.draw(spec), first);  // again: the same
  // The rows in reverse order, in a batch of 37, then rows 3..7 alone in a batch of 5.
  std::vector<float> rev(l.size());
  std::vector<RowSpec> rspec(spec.rbegin(), spec.rend());
  for (int64_t r = 0; r < B; ++r) std::copy(l.begin() + r * V, l.begin() + (r + 1) * V, rev.begin() + (B - 1 - r) * V);
  whole.set_logits(rev);
  const auto reversed = whole.draw(rspec);
  for (int64_t r = 0; r < B; ++r) EXPECT_EQ(reversed[std::size_t(B - 1 - r)], first[std::size_t(r)]) << "row " << r;
  Sampler part(5, V);
  part.set_logits(std::vector<float>(l.begin() + 3 * V, l.begin() + 8 * V));
  const auto some = part.draw(std::vector<RowSpec>(spec.begin() + 3, spec.begin() + 8));
  for (int64_t r = 0; r < 5; ++r) EXPECT_EQ(some[std::size_t(r)], first[std::size_t(r + 3)]) << "row " << r + 3;
  // A new offset is a new draw: a flat row gives several tokens over 64 offsets.
  Sampler one(64, V);
  std::vector<float> flat(std::size_t(64 * V), 0.f);
  one.set_logits(flat);
  std::vector<RowSpec> offs(64, RowSpec{1.f, 0, 1.f, 42, 0});
  for (int i = 0; i < 64; ++i) offs[std::size_t(i)].offset = uint64_t(i);
  auto toks = one.draw(offs);
  std::sort(toks.begin(), toks.end());
  EXPECT_GT(std::unique(toks.begin(), toks.end()) - toks.begin(), 32);
}

}  // namespace
}  // namespace inferlab
