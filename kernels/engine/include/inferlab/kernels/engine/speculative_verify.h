#pragma once
// The host half of speculative decoding on the engine (plain C++, built with or without CUDA): checking a
// round's drafted tokens against the target, and the n-gram prompt-lookup drafter.
//
// A round (speculative.h): the drafter proposes gamma tokens d1..dg after the sequence's last token; the
// target runs ONE pass over [last, d1..dg] with logits at every position, giving its distributions
// p0..pg (p_i: the next token after d_i, d_0 = last).
//   Greedy (temperature <= 0): accept d_i while it equals argmax p_(i-1); then emit argmax p_a, a the
//     accepted count (the correction, or the bonus token when all g were accepted). The output is the
//     target's own greedy continuation whatever the drafter proposes.
//   Sampled (Leviathan et al. 2023, Thm 3.5; Chen et al. 2023): d_i drawn from the drafter's q_i is
//     accepted with probability min(1, p(d_i) / q(d_i)); at the first rejection one token is drawn from
//     norm(max(0, p - q)); after g acceptances a bonus token from p_g. Every emitted token is then
//     distributed exactly as the target's sampler would draw it. A deterministic drafter (n-gram lookup,
//     a greedy draft model) has q = the one-hot of its proposal: accept with p(d), else draw from p with
//     d removed, renormalised.
// The uniform draws come from Philox4x32-10 keyed by (seed, position, purpose): reproducible in any batch.
#include <cstdint>
#include <unordered_map>
#include <vector>

namespace inferlab {

struct VerifyResult {
  int64_t accepted = 0;          // drafted tokens kept, 0 .. gamma
  std::vector<int32_t> emitted;  // the accepted drafts, then the target's token: accepted + 1 tokens
};

// target_argmax: gamma + 1 greedy tokens of the target's pass over [last, d1..dg].
VerifyResult verify_greedy(const std::vector<int32_t>& draft, const std::vector<int32_t>& target_argmax);

// p: (gamma + 1) x vocab target probabilities (rows summing to 1); q: gamma x vocab drafter probabilities,
// or empty for a deterministic drafter (q_i = one-hot of d_i). The draws of the round are keyed by
// (seed, position), position = the absolute position of d1 in the sequence. Throws inferlab::Error on sizes
// that do not match or a drafted token outside the vocabulary.
VerifyResult verify_sampled(const std::vector<int32_t>& draft, const std::vector<double>& p, const std::vector<double>& q,
                            int64_t vocab, uint64_t seed, int64_t position);

// A uniform double in [0, 1) from Philox keyed by (seed, offset): 53 random bits.
double philox_uniform(uint64_t seed, uint64_t offset);
// One draw from a distribution (weights summing to ~1) with the uniform u; the last index of positive weight
// when rounding leaves u beyond the sum.
int32_t draw_from(const double* weights, int64_t vocab, double u);

// Prompt lookup (n-gram drafting, as vLLM's and llama.cpp's "prompt lookup decoding"): the continuation of
// the most recent earlier occurrence of the sequence's last n tokens, n from max_n down to min_n, is the
// proposal. An index from every n-gram to the position after its latest occurrence keeps a lookup O(1) per
// n; appending tokens indexes the n-grams they complete.
class NgramIndex {
 public:
  NgramIndex(int64_t min_n, int64_t max_n);  // 1 <= min_n <= max_n <= 8
  void append(const std::vector<int32_t>& tokens);
  void append(int32_t token);
  // Exactly gamma tokens: matched continuations (a proposal that reaches the end of the text is extended
  // by a new lookup on the text and the proposal so far), then, when nothing matches, the last token repeated.
  // `matched` (optional) gets the number of proposed tokens that came from a match.
  std::vector<int32_t> propose(int64_t gamma, int64_t* matched = nullptr) const;
  const std::vector<int32_t>& tokens() const { return text_; }

 private:
  uint64_t key(const int32_t* first, int64_t n) const;
  int64_t lookup(const std::vector<int32_t>& text, int64_t n) const;  // continuation start, or -1
  int64_t min_n_, max_n_;
  std::vector<int32_t> text_;
  std::vector<std::unordered_map<uint64_t, int64_t>> index_;  // per n - min_n: n-gram -> position after it
};

}  // namespace inferlab
