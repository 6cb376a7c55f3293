#include "inferlab/sim/speculative.h"

#include <cmath>

#include "inferlab/sim/error.h"
#include "inferlab/sim/memory.h"
#include "inferlab/sim/parallel.h"
#include "inferlab/sim/roofline.h"

namespace inferlab {
namespace {

void check_alpha_gamma(double alpha, int64_t gamma) {
  if (!(alpha >= 0 && alpha <= 1)) throw Error("acceptance rate alpha must be in [0, 1], got " + std::to_string(alpha));
  if (gamma < 0) throw Error("draft length gamma must not be negative, got " + std::to_string(gamma));
}

}  // namespace

std::string drafter_name(Drafter d) {
  switch (d) {
    case Drafter::model: return "model";
    case Drafter::medusa: return "medusa";
    case Drafter::ngram: return "ngram";
  }
  return "?";
}
Drafter parse_drafter(const std::string& s) {
  if (s == "model" || s == "draft") return Drafter::model;
  if (s == "medusa") return Drafter::medusa;
  if (s == "ngram" || s == "lookahead" || s == "prompt-lookup") return Drafter::ngram;
  throw Error("unknown drafter '" + s + "' (known: model, medusa, ngram)");
}

double expected_tokens(double alpha, int64_t gamma) {
  check_alpha_gamma(alpha, gamma);
  if (alpha == 1) return double(gamma + 1);  // the limit of the geometric sum
  return (1 - std::pow(alpha, double(gamma + 1))) / (1 - alpha);
}

double closed_form_speedup(double alpha, int64_t gamma, double c) {
  if (!(c >= 0)) throw Error("draft cost ratio c must not be negative");
  return expected_tokens(alpha, gamma) / (double(gamma) * c + 1);
}

SpeculativeModel::SpeculativeModel(SpeculativeSetup s) : s_(std::move(s)) {
  if (s_.batch < 1 || s_.context < 1) throw Error("speculative decoding: batch and context must be positive");
  if (s_.drafter == Drafter::model) {
    if (!s_.draft) throw Error("speculative decoding with a draft model needs the draft model");
    if (s_.draft->vocab != s_.target.vocab)
      throw Error("draft model " + s_.draft->name + " has a vocabulary of " + std::to_string(s_.draft->vocab) +
                  " tokens, the target " + s_.target.name + " " + std::to_string(s_.target.vocab) +
                  ": a drafter must share the target's tokenizer");
  }
  target_decode_s_ = pass_s(s_.target, s_.tp, 1, s_.context, 1);
  draft_steps_.push_back(0);
}

double SpeculativeModel::pass_s(const ModelConfig& m, int64_t tp, int64_t new_tokens, int64_t past, int64_t logits) const {
  const Batch b{{SequenceWork{new_tokens, past, s_.batch, logits}}, 0};
  return predict_parallel(m, b, s_.options, s_.hardware, Parallelism{tp, 1, 1}).time_s;
}

SpeculativeRound SpeculativeModel::round(int64_t gamma) const {
  check_alpha_gamma(0, gamma);
  SpeculativeRound r;
  r.gamma = gamma;
  r.target_decode_s = target_decode_s_;
  if (gamma == 0) {
    r.verify_s = target_decode_s_;
    return r;
  }
  r.verify_s = pass_s(s_.target, s_.tp, gamma + 1, s_.context, gamma + 1);
  switch (s_.drafter) {
    case Drafter::model: {
      for (int64_t i = int64_t(draft_steps_.size()) - 1; i < gamma; ++i)  // draft token i at context + i
        draft_steps_.push_back(draft_steps_.back() + pass_s(*s_.draft, s_.draft_tp, 1, s_.context + i, 1));
      r.draft_s = draft_steps_[std::size_t(gamma)];
      break;
    }
    case Drafter::medusa:
      r.draft_s = predict_step(medusa_head_ops(s_.target, gamma, s_.batch, s_.options), s_.hardware).time_s;
      break;
    case Drafter::ngram:
      r.draft_s = 0;
      break;
  }
  r.c = r.draft_s / double(gamma) / target_decode_s_;
  return r;
}

double SpeculativeModel::speedup(double alpha, int64_t gamma) const {
  const SpeculativeRound r = round(gamma);
  return expected_tokens(alpha, gamma) * r.target_decode_s / (r.draft_s + r.verify_s);
}

int64_t SpeculativeModel::optimal_gamma(double alpha, int64_t max_gamma) const {
  int64_t best = 0;
  double best_speedup = 1;
  for (int64_t g = 1; g <= max_gamma; ++g) {
    const double s = speedup(alpha, g);
    if (s > best_speedup) {
      best = g;
      best_speedup = s;
    }
  }
  return best;
}

double SpeculativeModel::extra_memory_bytes(int64_t gamma) const {
  switch (s_.drafter) {
    case Drafter::model:
      return weight_bytes(*s_.draft, s_.options.precision.weight) +
             kv_cache_bytes(*s_.draft, s_.batch, s_.context, s_.options.precision.kv);
    case Drafter::medusa: return double(gamma) * medusa_head_params(s_.target) * dtype_bytes(s_.options.precision.weight);
    case Drafter::ngram: return 0;
  }
  return 0;
}

}  // namespace inferlab
