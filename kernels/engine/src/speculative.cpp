// Speculative and plain decoding on the engine: drafters, rounds, rollback, wall-clock timing.
#include "inferlab/kernels/engine/speculative.h"

#include <algorithm>
#include <chrono>
#include <string>

#include "inferlab/kernels/layers/layers_host.h"
#include "inferlab/sim/error.h"

namespace inferlab {
namespace {

using Clock = std::chrono::steady_clock;
double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// Sequence i's sampling: its own seed, so two sequences with the same prompt draw differently.
SamplingParams for_sequence(const SamplingParams& s, std::size_t i, uint64_t salt = 0) {
  SamplingParams r = s;
  r.seed = (s.seed ^ salt) + uint64_t(i) * 0x9E3779B97F4A7C15ull;
  return r;
}

// Runs `tokens[i]` into slot i in as few steps as the engine's limits allow (long texts in chunks); with
// `want` the last token of each gets a logit row, and the sampled token is returned.
std::vector<int32_t> prefill(Engine& e, const std::vector<std::vector<int32_t>>& tokens, bool want,
                             const SamplingParams& sampling, uint64_t salt) {
  const int64_t budget = e.options().max_step_tokens;
  std::vector<int32_t> first(tokens.size(), -1);
  std::vector<std::size_t> done(tokens.size(), 0);
  std::size_t next = 0;
  while (next < tokens.size()) {
    std::vector<SequenceInput> step;
    std::vector<std::size_t> who;
    int64_t used = 0, rows = 0;
    for (std::size_t i = next; i < tokens.size() && used < budget && rows < e.options().max_sequences; ++i) {
      const std::size_t left = tokens[i].size() - done[i];
      if (left == 0) continue;
      const std::size_t n = std::min<std::size_t>(left, std::size_t(budget - used));
      SequenceInput s;
      s.slot = int(i);
      s.tokens.assign(tokens[i].begin() + std::ptrdiff_t(done[i]), tokens[i].begin() + std::ptrdiff_t(done[i] + n));
      s.logits = want && n == left ? 1 : 0;
      s.sampling = for_sequence(sampling, i, salt);
      step.push_back(std::move(s));
      who.push_back(i);
      used += int64_t(n), ++rows;
    }
    if (step.empty()) break;
    const StepOutput out = e.step(step);
    for (std::size_t j = 0; j < who.size(); ++j) {
      done[who[j]] += step[j].tokens.size();
      if (!out.tokens[j].empty()) first[who[j]] = out.tokens[j].back();
    }
    while (next < tokens.size() && done[next] == tokens[next].size()) ++next;
  }
  return first;
}

std::vector<double> distribution(const float* logits, int64_t vocab, const SamplingParams& s) {
  return sample_distribution_reference(logits, vocab, s.temperature, s.top_k, s.top_p);
}

class ModelDrafter final : public SpeculativeDrafter {
 public:
  ModelDrafter(Engine& e, std::string name) : e_(e), name_(std::move(name)) {}
  std::string name() const override { return name_; }
  int64_t max_context() const override { return e_.max_context(); }
  int64_t vocab() const override { return e_.model().model.vocab; }

  void begin(const std::vector<std::vector<int32_t>>& texts) override {
    texts_ = texts;
    std::vector<std::vector<int32_t>> head(texts.size());
    for (std::size_t i = 0; i < texts.size(); ++i) {
      if (texts[i].size() < 2) throw Error("model drafter: a text needs at least 2 tokens");
      head[i].assign(texts[i].begin(), texts[i].end() - 2);  // all but the last two
    }
    prefill(e_, head, false, SamplingParams{}, kDraftSeedSalt);
  }

  void propose(int64_t gamma, const SamplingParams& sampling, std::vector<std::vector<int32_t>>& drafts,
               std::vector<std::vector<double>>& q) override {
    const std::size_t B = texts_.size();
    const bool sampled = sampling.temperature > 0;
    const int64_t V = vocab();
    drafts.assign(B, {});
    q.assign(sampled ? B : 0, {});
    std::vector<SequenceInput> in(B);
    for (std::size_t i = 0; i < B; ++i) {
      in[i].slot = int(i);
      in[i].tokens = {texts_[i][texts_[i].size() - 2], texts_[i].back()};
      in[i].logits = 1;
      in[i].sampling = for_sequence(sampling, i, kDraftSeedSalt);
    }
    for (int64_t j = 0; j < gamma; ++j) {
      const StepOutput out = e_.step(in, sampled);
      for (std::size_t i = 0; i < B; ++i) {
        const int32_t d = out.tokens[i].back();
        drafts[i].push_back(d);
        if (sampled) {
          const std::vector<double> qi = distribution(out.logits.data() + std::ptrdiff_t(i) * V, V, in[i].sampling);
          q[i].insert(q[i].end(), qi.begin(), qi.end());
        }
        in[i].tokens = {d};
      }
    }
  }

  void commit(const std::vector<std::vector<int32_t>>& emitted) override {
    for (std::size_t i = 0; i < texts_.size(); ++i) {
      texts_[i].insert(texts_[i].end(), emitted[i].begin(), emitted[i].end());
      e_.truncate(int(i), int64_t(texts_[i].size()) - 2);
    }
  }

  void end() override {
    for (std::size_t i = 0; i < texts_.size(); ++i) e_.release(int(i));
    texts_.clear();
  }

 private:
  Engine& e_;
  std::string name_;
  std::vector<std::vector<int32_t>> texts_;
};

class NgramDrafter final : public SpeculativeDrafter {
 public:
  NgramDrafter(int64_t min_n, int64_t max_n) : min_n_(min_n), max_n_(max_n) { NgramIndex check(min_n, max_n); }
  std::string name() const override { return "ngram"; }
  void begin(const std::vector<std::vector<int32_t>>& texts) override {
    index_.clear();
    for (const auto& t : texts) {
      index_.emplace_back(min_n_, max_n_);
      index_.back().append(t);
    }
  }
  void propose(int64_t gamma, const SamplingParams&, std::vector<std::vector<int32_t>>& drafts,
               std::vector<std::vector<double>>& q) override {
    drafts.resize(index_.size());
    q.clear();
    for (std::size_t i = 0; i < index_.size(); ++i) drafts[i] = index_[i].propose(gamma);
  }
  void commit(const std::vector<std::vector<int32_t>>& emitted) override {
    for (std::size_t i = 0; i < index_.size(); ++i) index_[i].append(emitted[i]);
  }
  void end() override { index_.clear(); }

 private:
  int64_t min_n_, max_n_;
  std::vector<NgramIndex> index_;
};

// Releases the slots (and the drafter's) when a run ends by an exception, so the engines stay usable.
struct ReleaseOnThrow {
  Engine& e;
  std::size_t n;
  SpeculativeDrafter* d = nullptr;
  bool armed = true;
  ~ReleaseOnThrow() {
    if (!armed) return;
    for (std::size_t i = 0; i < n; ++i) e.release(int(i));
    if (d) d->end();
  }
};

void check_prompts(const Engine& target, const std::vector<std::vector<int32_t>>& prompts, int64_t new_tokens,
                   int64_t extra, int64_t drafter_context) {
  if (prompts.empty()) throw Error("generate: no prompts");
  if (int64_t(prompts.size()) > target.options().max_sequences)
    throw Error("generate: " + std::to_string(prompts.size()) + " prompts exceed the engine's " +
                std::to_string(target.options().max_sequences) + " slots");
  if (new_tokens < 2) throw Error("generate: new_tokens must be at least 2");
  for (std::size_t i = 0; i < prompts.size(); ++i) {
    if (target.held_tokens(int(i)) != 0)
      throw Error("generate: the target's slot " + std::to_string(i) + " already holds tokens");
    if (prompts[i].size() < 2) throw Error("generate: prompt " + std::to_string(i) + " holds fewer than 2 tokens");
    const int64_t need = int64_t(prompts[i].size()) + new_tokens + extra;
    if (need > target.max_context())
      throw Error("generate: prompt " + std::to_string(i) + " needs a context of " + std::to_string(need) +
                  " tokens (prompt + new tokens + gamma + 1), the target engine holds " + std::to_string(target.max_context()));
    if (drafter_context > 0 && need > drafter_context)
      throw Error("generate: prompt " + std::to_string(i) + " needs a context of " + std::to_string(need) +
                  " tokens, the draft engine holds " + std::to_string(drafter_context));
  }
}

}  // namespace

std::unique_ptr<SpeculativeDrafter> make_model_drafter(Engine& draft, std::string name) {
  return std::make_unique<ModelDrafter>(draft, std::move(name));
}
std::unique_ptr<SpeculativeDrafter> make_ngram_drafter(int64_t min_n, int64_t max_n) {
  return std::make_unique<NgramDrafter>(min_n, max_n);
}

double SpeculativeStats::alpha() const {
  return accepted + rejections > 0 ? double(accepted) / double(accepted + rejections) : 0;
}
double SpeculativeStats::tokens_per_pass() const {
  return sequence_rounds > 0 ? double(emitted) / double(sequence_rounds) : 0;
}

GenerationResult plain_generate(Engine& target, const std::vector<std::vector<int32_t>>& prompts, int64_t new_tokens,
                                const SamplingParams& sampling, bool release) {
  check_prompts(target, prompts, new_tokens, 0, 0);
  GenerationResult r;
  const std::size_t B = prompts.size();
  ReleaseOnThrow guard{target, B};
  auto t0 = Clock::now();
  const std::vector<int32_t> first = prefill(target, prompts, true, sampling, 0);
  r.prefill_s = since(t0);
  r.tokens.assign(B, {});
  std::vector<SequenceInput> in(B);
  for (std::size_t i = 0; i < B; ++i) {
    r.tokens[i].push_back(first[i]);
    in[i].slot = int(i);
    in[i].tokens = {first[i]};
    in[i].sampling = for_sequence(sampling, i);
  }
  t0 = Clock::now();
  for (int64_t s = 1; s < new_tokens; ++s) {
    const StepOutput out = target.step(in);
    for (std::size_t i = 0; i < B; ++i) {
      r.tokens[i].push_back(out.tokens[i].back());
      in[i].tokens = {out.tokens[i].back()};
    }
    ++r.decode_steps;
  }
  r.decode_s = since(t0);
  r.generated = r.decode_steps * int64_t(B);
  guard.armed = false;
  if (release)
    for (std::size_t i = 0; i < B; ++i) target.release(int(i));
  return r;
}

GenerationResult speculative_generate(Engine& target, SpeculativeDrafter& drafter,
                                      const std::vector<std::vector<int32_t>>& prompts, int64_t new_tokens,
                                      int64_t gamma, const SamplingParams& sampling, bool release) {
  if (gamma < 1) throw Error("speculative: gamma must be at least 1 (got " + std::to_string(gamma) + ")");
  const int64_t V = target.model().model.vocab;
  if (drafter.vocab() != 0 && drafter.vocab() != V)
    throw Error("speculative: the " + drafter.name() + " drafter's vocabulary of " + std::to_string(drafter.vocab()) +
                " tokens differs from the target's " + std::to_string(V));
  check_prompts(target, prompts, new_tokens, gamma + 1, drafter.max_context());
  if (int64_t(prompts.size()) * (gamma + 1) > target.options().max_step_tokens)
    throw Error("speculative: a verification pass of " + std::to_string(prompts.size()) + " x (gamma + 1) = " +
                std::to_string(int64_t(prompts.size()) * (gamma + 1)) + " tokens exceeds the target's max_step_tokens " +
                std::to_string(target.options().max_step_tokens));
  const bool sampled = sampling.temperature > 0;
  GenerationResult r;
  SpeculativeStats& st = r.spec;
  const std::size_t B = prompts.size();
  ReleaseOnThrow guard{target, B, &drafter};
  auto t0 = Clock::now();
  const std::vector<int32_t> first = prefill(target, prompts, true, sampling, 0);
  std::vector<std::vector<int32_t>> texts = prompts;
  r.tokens.assign(B, {});
  for (std::size_t i = 0; i < B; ++i) texts[i].push_back(first[i]), r.tokens[i].push_back(first[i]);
  drafter.begin(texts);
  r.prefill_s = since(t0);

  std::vector<std::vector<int32_t>> drafts, emitted(B);
  std::vector<std::vector<double>> q;
  std::vector<SequenceInput> in(B);
  for (std::size_t i = 0; i < B; ++i) {
    in[i].slot = int(i);
    in[i].logits = gamma + 1;
    in[i].sampling = for_sequence(sampling, i);
  }
  auto done = [&] {
    for (const auto& t : r.tokens)
      if (int64_t(t.size()) < new_tokens) return false;
    return true;
  };
  const auto start = Clock::now();
  while (!done()) {
    t0 = Clock::now();
    drafter.propose(gamma, sampling, drafts, q);
    const auto t1 = Clock::now();
    st.draft_s += std::chrono::duration<double>(t1 - t0).count();
    for (std::size_t i = 0; i < B; ++i) {
      in[i].tokens.assign(1, texts[i].back());
      in[i].tokens.insert(in[i].tokens.end(), drafts[i].begin(), drafts[i].end());
    }
    const StepOutput out = target.step(in, sampled);
    const auto t2 = Clock::now();
    st.verify_s += std::chrono::duration<double>(t2 - t1).count();
    for (std::size_t i = 0; i < B; ++i) {
      VerifyResult v;
      if (!sampled) {
        v = verify_greedy(drafts[i], out.tokens[i]);
      } else {
        std::vector<double> p;
        p.reserve(std::size_t((gamma + 1) * V));
        for (int64_t j = 0; j <= gamma; ++j) {
          const std::vector<double> pj =
              distribution(out.logits.data() + (std::ptrdiff_t(i) * (gamma + 1) + j) * V, V, in[i].sampling);
          p.insert(p.end(), pj.begin(), pj.end());
        }
        v = verify_sampled(drafts[i], p, q.empty() ? std::vector<double>{} : q[i], V, in[i].sampling.seed,
                           int64_t(texts[i].size()));
      }
      st.drafted += gamma;
      st.accepted += v.accepted;
      st.rejections += v.accepted < gamma;
      st.emitted += int64_t(v.emitted.size());
      texts[i].insert(texts[i].end(), v.emitted.begin(), v.emitted.end());
      r.tokens[i].insert(r.tokens[i].end(), v.emitted.begin(), v.emitted.end());
      target.truncate(int(i), int64_t(texts[i].size()) - 1);  // rollback: the rejected drafts' KV
      emitted[i] = std::move(v.emitted);
    }
    drafter.commit(emitted);
    st.host_s += since(t2);
    ++st.rounds;
    st.sequence_rounds += int64_t(B);
    // The next round's context must fit (a sequence far past new_tokens while another catches up).
    if (!done())
      for (std::size_t i = 0; i < B; ++i)
        if (int64_t(texts[i].size()) + gamma + 1 > target.max_context() ||
            (drafter.max_context() > 0 && int64_t(texts[i].size()) + gamma + 1 > drafter.max_context()))
          throw Error("speculative: sequence " + std::to_string(i) + " reached the engines' context before every "
                      "sequence had its " + std::to_string(new_tokens) + " tokens");
  }
  r.decode_s = since(start);
  r.generated = st.emitted;
  guard.armed = false;
  drafter.end();
  if (release)
    for (std::size_t i = 0; i < B; ++i) target.release(int(i));
  return r;
}

}  // namespace inferlab
