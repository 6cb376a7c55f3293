// Speculative decoding's host half: greedy and rejection-sampling verification, prompt lookup.
#include "inferlab/kernels/engine/speculative_verify.h"

#include <algorithm>
#include <string>

#include "inferlab/kernels/layers/philox.h"
#include "inferlab/sim/error.h"

namespace inferlab {

VerifyResult verify_greedy(const std::vector<int32_t>& draft, const std::vector<int32_t>& target_argmax) {
  if (target_argmax.size() != draft.size() + 1)
    throw Error("verify: " + std::to_string(target_argmax.size()) + " target tokens for " + std::to_string(draft.size()) +
                " drafted (need gamma + 1)");
  VerifyResult r;
  while (r.accepted < int64_t(draft.size()) && draft[std::size_t(r.accepted)] == target_argmax[std::size_t(r.accepted)]) {
    r.emitted.push_back(draft[std::size_t(r.accepted)]);
    ++r.accepted;
  }
  r.emitted.push_back(target_argmax[std::size_t(r.accepted)]);
  return r;
}

double philox_uniform(uint64_t seed, uint64_t offset) {
  return double(philox_draw64(seed, offset) >> 11) * (1.0 / 9007199254740992.0);  // 2^-53
}

int32_t draw_from(const double* w, int64_t vocab, double u) {
  double acc = 0;
  int32_t last = -1;
  for (int64_t i = 0; i < vocab; ++i) {
    if (!(w[i] > 0)) continue;
    acc += w[i];
    last = int32_t(i);
    if (u < acc) return last;
  }
  return last;
}

namespace {
// The draws of one round never share an offset with another round's: offset = position * 4 + purpose.
constexpr uint64_t kAccept = 0, kResidual = 1, kBonus = 2;
uint64_t draw_offset(int64_t position, uint64_t purpose) { return uint64_t(position) * 4 + purpose; }
}  // namespace

VerifyResult verify_sampled(const std::vector<int32_t>& draft, const std::vector<double>& p, const std::vector<double>& q,
                            int64_t vocab, uint64_t seed, int64_t position) {
  const std::size_t g = draft.size(), V = std::size_t(vocab);
  if (vocab <= 0) throw Error("verify: vocabulary must be positive");
  if (p.size() != (g + 1) * V)
    throw Error("verify: target probabilities hold " + std::to_string(p.size()) + " values, need (gamma + 1) x vocab = " +
                std::to_string((g + 1) * V));
  if (!q.empty() && q.size() != g * V)
    throw Error("verify: drafter probabilities hold " + std::to_string(q.size()) + " values, need gamma x vocab = " +
                std::to_string(g * V));
  for (int32_t d : draft)
    if (d < 0 || d >= vocab) throw Error("verify: drafted token " + std::to_string(d) + " outside the vocabulary of " + std::to_string(vocab));
  VerifyResult r;
  std::vector<double> residual(V);
  for (std::size_t i = 0; i < g; ++i) {
    const double* pi = p.data() + i * V;
    const int32_t d = draft[i];
    const double pd = pi[d], qd = q.empty() ? 1.0 : q[i * V + std::size_t(d)];
    const int64_t pos = position + int64_t(i);
    // q(d) > 0 always holds for a token the drafter drew; a zero is treated as "accept iff p(d) > 0".
    const double ratio = qd > 0 ? pd / qd : (pd > 0 ? 1.0 : 0.0);
    if (philox_uniform(seed, draw_offset(pos, kAccept)) < std::min(1.0, ratio)) {
      r.emitted.push_back(d);
      ++r.accepted;
      continue;
    }
    // Rejected: draw from norm(max(0, p - q)).
    double sum = 0;
    for (std::size_t v = 0; v < V; ++v) {
      const double qv = q.empty() ? (int32_t(v) == d ? 1.0 : 0.0) : q[i * V + v];
      residual[v] = std::max(0.0, pi[v] - qv);
      sum += residual[v];
    }
    if (!(sum > 0)) {  // p == q up to rounding: the rejection had probability ~0; draw from p
      std::copy(pi, pi + V, residual.begin());
      sum = 1;
    }
    r.emitted.push_back(draw_from(residual.data(), vocab, philox_uniform(seed, draw_offset(pos, kResidual)) * sum));
    return r;
  }
  const double* pg = p.data() + g * V;
  r.emitted.push_back(draw_from(pg, vocab, philox_uniform(seed, draw_offset(position + int64_t(g), kBonus))));
  return r;
}

NgramIndex::NgramIndex(int64_t min_n, int64_t max_n) : min_n_(min_n), max_n_(max_n) {
  if (min_n < 1 || max_n < min_n || max_n > 8)
    throw Error("n-gram drafter: need 1 <= min_n <= max_n <= 8 (got " + std::to_string(min_n) + ", " + std::to_string(max_n) + ")");
  index_.resize(std::size_t(max_n - min_n + 1));
}

uint64_t NgramIndex::key(const int32_t* first, int64_t n) const {
  uint64_t h = 1469598103934665603ull ^ uint64_t(n);
  for (int64_t i = 0; i < n; ++i) h = (h ^ uint64_t(uint32_t(first[i]))) * 1099511628211ull;
  return h;
}

void NgramIndex::append(int32_t token) {
  // The n-grams ending just before the new token now have a continuation: the new token's position.
  const int64_t at = int64_t(text_.size());
  for (int64_t n = min_n_; n <= max_n_ && n <= at; ++n)
    index_[std::size_t(n - min_n_)][key(text_.data() + at - n, n)] = at;
  text_.push_back(token);
}

void NgramIndex::append(const std::vector<int32_t>& tokens) {
  for (int32_t t : tokens) append(t);
}

int64_t NgramIndex::lookup(const std::vector<int32_t>& text, int64_t n) const {
  const int64_t len = int64_t(text.size());
  if (n > len) return -1;
  const auto& idx = index_[std::size_t(n - min_n_)];
  const auto it = idx.find(key(text.data() + len - n, n));
  if (it == idx.end()) return -1;
  const int64_t at = it->second;  // text_[at - n, at) should equal the suffix: check (hash collisions)
  if (!std::equal(text.begin() + (len - n), text.end(), text_.begin() + (at - n))) return -1;
  return at;
}

std::vector<int32_t> NgramIndex::propose(int64_t gamma, int64_t* matched) const {
  if (gamma < 1) throw Error("n-gram drafter: gamma must be at least 1 (got " + std::to_string(gamma) + ")");
  std::vector<int32_t> out;
  // The lookups read only the last max_n tokens of the text and the proposal so far.
  std::vector<int32_t> text(text_.end() - std::min<int64_t>(max_n_, int64_t(text_.size())), text_.end());
  int64_t from_match = 0;
  while (int64_t(out.size()) < gamma) {
    int64_t at = -1;
    for (int64_t n = max_n_; n >= min_n_ && at < 0; --n) at = lookup(text, n);
    if (at < 0) break;
    for (; at < int64_t(text_.size()) && int64_t(out.size()) < gamma; ++at) {
      out.push_back(text_[std::size_t(at)]);
      text.push_back(text_[std::size_t(at)]);
      ++from_match;
    }
  }
  const int32_t fill = out.empty() ? (text_.empty() ? 0 : text_.back()) : out.back();
  while (int64_t(out.size()) < gamma) out.push_back(fill);
  if (matched) *matched = from_match;
  return out;
}

}  // namespace inferlab
