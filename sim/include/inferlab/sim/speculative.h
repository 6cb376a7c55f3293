#pragma once
// Speculative decoding (Leviathan et al. 2023, Chen et al. 2023): a cheap drafter proposes gamma
// tokens; the target model checks them in ONE pass over gamma + 1 positions and keeps the accepted
// prefix plus one token of its own. If each drafted token is accepted with probability alpha,
// independently (the papers' analysis), a round yields on average
//   E(alpha, gamma) = (1 - alpha^(gamma+1)) / (1 - alpha)   tokens   (1 at alpha = 0, gamma + 1 at alpha = 1)
// and costs one verification pass plus the drafting. Speedup over plain decoding, two ways:
//   closed form   E / (gamma c + 1), c = one draft step / one target decode step (Leviathan's Thm 3.8,
//                 which takes the verification pass to cost a decode step);
//   cost model    E x t(target decode) / (drafting + t(target verify)), every term from the sim/
//                 roofline: the verification pass is gamma + 1 new tokens per sequence with logits for
//                 each (ops.h Batch), so its cost departs from a decode step once the batch grows
//                 compute-bound.
// Drafters, each a cost and an acceptance input:
//   model    a smaller model of the same tokenizer (e.g. Llama-2-7B for Llama-2-70B): gamma sequential
//            decode passes per round; memory: its weights and its KV cache.
//   medusa   gamma = number of Medusa-1 heads on the target's last hidden state (ops.h
//            medusa_head_ops), evaluated in the verification pass itself: no separate draft pass;
//            memory: the heads' weights. (Top-1 chain per head; tree attention is not modelled.)
//   ngram    prompt lookup / lookahead: candidates matched against the context on the host: no
//            draft cost, no memory; its acceptance is usually lower and workload dependent.
// Not modelled: the drafter catching up on the bonus token, rejection sampling, the host.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "inferlab/sim/hardware.h"
#include "inferlab/sim/model.h"
#include "inferlab/sim/ops.h"

namespace inferlab {

enum class Drafter { model, medusa, ngram };
std::string drafter_name(Drafter d);
Drafter parse_drafter(const std::string& s);

// Expected tokens per target pass; alpha in [0, 1], gamma >= 0.
double expected_tokens(double alpha, int64_t gamma);
// E / (gamma c + 1).
double closed_form_speedup(double alpha, int64_t gamma, double c);

struct SpeculativeSetup {
  ModelConfig target;
  std::optional<ModelConfig> draft;  // Drafter::model only
  Drafter drafter = Drafter::model;
  Hardware hardware;
  OpOptions options;
  int64_t batch = 1;
  int64_t context = 1024;  // tokens each sequence holds before the round
  int64_t tp = 1;          // the target's tensor-parallel degree (sim/parallel.h)
  int64_t draft_tp = 1;    // the draft model's
};

struct SpeculativeRound {
  int64_t gamma = 0;
  double target_decode_s = 0;  // one plain decode pass of the target
  double verify_s = 0;         // the target's pass over gamma + 1 tokens
  double draft_s = 0;          // drafting gamma tokens (model: gamma passes; medusa: the heads)
  double c = 0;                // one draft step / target decode (draft_s / gamma / target_decode_s)
};

class SpeculativeModel {
 public:
  explicit SpeculativeModel(SpeculativeSetup setup);  // checks the setup: Error on a bad one
  SpeculativeRound round(int64_t gamma) const;
  // Cost-model speedup; gamma = 0 is plain decoding (1).
  double speedup(double alpha, int64_t gamma) const;
  // The gamma in 0..max_gamma with the highest speedup (0: speculation does not pay); the lowest on ties.
  int64_t optimal_gamma(double alpha, int64_t max_gamma) const;
  // What the drafter adds to device memory: a draft model's weights and KV cache (any gamma), gamma
  // Medusa heads' weights, nothing for n-gram lookup.
  double extra_memory_bytes(int64_t gamma) const;
  const SpeculativeSetup& setup() const { return s_; }

 private:
  double pass_s(const ModelConfig& m, int64_t tp, int64_t new_tokens, int64_t past, int64_t logits) const;
  SpeculativeSetup s_;
  double target_decode_s_ = 0;
  mutable std::vector<double> draft_steps_;  // cumulative draft time of 0, 1, 2, ... tokens (a cache)
};

}  // namespace inferlab
