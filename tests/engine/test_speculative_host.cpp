// Speculative decoding's host half (speculative_verify.h): greedy verification, the rejection sampler
// reproducing the target's distribution, prompt lookup.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "inferlab/kernels/engine/speculative_verify.h"

#include "error_of.h"

namespace inferlab {
namespace {

TEST(SpeculativeVerify, GreedyKeepsTheAgreeingPrefixAndAddsTheTargetsToken) {
  auto r = verify_greedy({5, 6, 7}, {5, 6, 9, 1});
  EXPECT_EQ(r.accepted, 2);
  EXPECT_EQ(r.emitted, (std::vector<int32_t>{5, 6, 9}));
  r = verify_greedy({5, 6, 7}, {5, 6, 7, 1});  // all accepted: the bonus token
  EXPECT_EQ(r.accepted, 3);
  EXPECT_EQ(r.emitted, (std::vector<int32_t>{5, 6, 7, 1}));
  r = verify_greedy({4}, {3, 8});
  EXPECT_EQ(r.accepted, 0);
  EXPECT_EQ(r.emitted, (std::vector<int32_t>{3}));
  EXPECT_NE(error_of([] { verify_greedy({1, 2}, {1, 2}); }).find("need gamma + 1"), std::string::npos);
}

// A context-dependent toy "language": the next token's distribution depends on the previous token
// (a V x V transition table), for the target (p) and the drafter (q). Speculative rounds of gamma drafts
// generate tokens; the joint distribution of the first `len` generated tokens must equal the target's
// own chain's, whatever q is (Leviathan et al., Thm 3.5).
struct Chain {
  int64_t V;
  std::vector<double> t;  // [V][V]
  const double* row(int32_t prev) const { return t.data() + std::size_t(prev) * std::size_t(V); }
};

Chain random_chain(std::mt19937_64& g, int64_t V, double peak) {
  Chain c{V, std::vector<double>(std::size_t(V * V))};
  std::uniform_real_distribution<double> u(0.05, 1.0);
  for (int64_t a = 0; a < V; ++a) {
    double sum = 0;
    for (int64_t b = 0; b < V; ++b) {
      double w = u(g);
      if ((a + 3 * b) % V == 0) w *= peak;  // a preferred successor: the drafter and target overlap unevenly
      c.t[std::size_t(a * V + b)] = w;
      sum += w;
    }
    for (int64_t b = 0; b < V; ++b) c.t[std::size_t(a * V + b)] /= sum;
  }
  return c;
}

// The total variation between the sampled joint of `len` tokens after `start` and the chain's exact one.
// deterministic: the drafter proposes its argmax (q one-hot); accept_all: a broken verifier (the test's power).
double speculative_tv(const Chain& p, const Chain& q, int64_t gamma, int64_t len, int64_t draws, bool deterministic,
                      bool accept_all) {
  const int64_t V = p.V;
  const int32_t start = 1;
  std::mt19937_64 g(1234);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  std::vector<double> hist(std::size_t(std::pow(V, len)), 0.0);
  for (int64_t n = 0; n < draws; ++n) {
    std::vector<int32_t> out;
    int32_t last = start;
    int64_t position = 0;
    while (int64_t(out.size()) < len) {
      std::vector<int32_t> d;
      std::vector<double> qs, ps;
      int32_t prev = last;
      for (int64_t i = 0; i < gamma; ++i) {
        const double* qi = q.row(prev);
        int32_t x;
        if (deterministic) {
          x = int32_t(std::max_element(qi, qi + V) - qi);
        } else {
          x = draw_from(qi, V, u(g));
          qs.insert(qs.end(), qi, qi + V);
        }
        d.push_back(x);
        prev = x;
      }
      ps.insert(ps.end(), p.row(last), p.row(last) + V);
      for (int32_t x : d) ps.insert(ps.end(), p.row(x), p.row(x) + V);
      VerifyResult r = verify_sampled(d, ps, qs, V, uint64_t(n), position);
      if (accept_all) r.emitted.assign(d.begin(), d.end());
      for (int32_t x : r.emitted) out.push_back(x);
      position += int64_t(r.emitted.size());
      last = out.back();
    }
    std::size_t cell = 0;
    for (int64_t i = 0; i < len; ++i) cell = cell * std::size_t(V) + std::size_t(out[std::size_t(i)]);
    hist[cell] += 1;
  }
  double tv = 0;
  for (std::size_t cell = 0; cell < hist.size(); ++cell) {
    double exact = 1;
    std::size_t c = cell;
    std::vector<int32_t> xs(static_cast<std::size_t>(len));
    for (int64_t i = len - 1; i >= 0; --i) xs[std::size_t(i)] = int32_t(c % std::size_t(V)), c /= std::size_t(V);
    int32_t prev = start;
    for (int32_t x : xs) exact *= p.row(prev)[x], prev = x;
    tv += std::abs(hist[cell] / double(draws) - exact);
  }
  return tv / 2;
}

// Over 1e6 draws of two tokens on a vocabulary of 6 (36 cells), sampling noise alone gives a total variation
// of about 0.5 * sum sqrt(p (1 - p) / N) * sqrt(2 / pi) ~ 0.002; the bound is 1e-2.
TEST(SpeculativeVerify, RejectionSamplingReproducesTheTargetDistribution) {
  std::mt19937_64 g(7);
  const Chain p = random_chain(g, 6, 6.0), q = random_chain(g, 6, 0.2);
  for (int64_t gamma : {1, 3}) {
    SCOPED_TRACE("gamma " + std::to_string(gamma));
    EXPECT_LE(speculative_tv(p, q, gamma, 2, 1000000, false, false), 1e-2) << "drafts sampled from q";
  }
  EXPECT_LE(speculative_tv(p, q, 2, 2, 1000000, true, false), 1e-2) << "deterministic drafts (q one-hot)";
  EXPECT_GT(speculative_tv(p, q, 2, 2, 200000, false, true), 0.05) << "accepting every draft must be caught";
}

TEST(SpeculativeVerify, SampledVerificationChecksItsInput) {
  const std::vector<double> p(3 * 4, 0.25), q(2 * 4, 0.25);
  EXPECT_NE(error_of([&] { verify_sampled({1, 2}, std::vector<double>(8, 0.25), q, 4, 0, 0); }).find("target probabilities"),
            std::string::npos);
  EXPECT_NE(error_of([&] { verify_sampled({1, 2}, p, std::vector<double>(4, 0.25), 4, 0, 0); }).find("drafter probabilities"),
            std::string::npos);
  EXPECT_NE(error_of([&] { verify_sampled({1, 9}, p, q, 4, 0, 0); }).find("outside the vocabulary"), std::string::npos);
  // Identical p and q: every draft accepted, and the bonus drawn from p.
  const VerifyResult r = verify_sampled({1, 2}, p, q, 4, 5, 10);
  EXPECT_EQ(r.accepted, 2);
  EXPECT_EQ(r.emitted.size(), 3u);
}

TEST(SpeculativeVerify, PhiloxUniformsAreReproducibleAndUniform) {
  EXPECT_EQ(philox_uniform(3, 17), philox_uniform(3, 17));
  EXPECT_NE(philox_uniform(3, 17), philox_uniform(3, 18));
  double mean = 0;
  const int n = 100000;
  for (int i = 0; i < n; ++i) {
    const double x = philox_uniform(11, uint64_t(i));
    ASSERT_GE(x, 0.0);
    ASSERT_LT(x, 1.0);
    mean += x / n;
  }
  EXPECT_NEAR(mean, 0.5, 5 * std::sqrt(1.0 / 12 / n));
}

TEST(NgramDrafter, ProposesTheContinuationOfTheLatestMatch) {
  NgramIndex ix(1, 3);
  ix.append({1, 2, 3, 4, 5, 9, 2, 3, 4, 7, 8, 1, 2, 3});
  int64_t matched = 0;
  // Suffix (1 2 3): its latest earlier occurrence is at 0, followed by 4 5 9 ...
  EXPECT_EQ(ix.propose(3, &matched), (std::vector<int32_t>{4, 5, 9}));
  EXPECT_EQ(matched, 3);
  ix.append(6);  // suffix (3 6), (6): no match at any n -> the last token repeated
  EXPECT_EQ(ix.propose(2, &matched), (std::vector<int32_t>{6, 6}));
  EXPECT_EQ(matched, 0);
  // A match running into the end of the text continues by a new lookup on text + proposal.
  NgramIndex cyc(2, 2);
  cyc.append({5, 6, 7, 5, 6});
  EXPECT_EQ(cyc.propose(6, &matched), (std::vector<int32_t>{7, 5, 6, 7, 5, 6}));
  EXPECT_EQ(matched, 6);
  EXPECT_NE(error_of([] { NgramIndex bad(0, 2); }).find("1 <= min_n <= max_n <= 8"), std::string::npos);
  EXPECT_NE(error_of([&] { cyc.propose(0); }).find("gamma must be at least 1"), std::string::npos);
}

}  // namespace
}  // namespace inferlab
