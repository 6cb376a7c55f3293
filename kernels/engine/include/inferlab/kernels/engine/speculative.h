#pragma once
// Speculative decoding on the engine (draft and verify, Leviathan et al. 2023; Chen et al. 2023), beside
// plain decoding over the same prompts, both timed on the wall clock.
//
// State of a sequence between rounds: its text x_0 .. x_(L-1) (prompt and generated tokens); the target's
// KV cache holds x_0 .. x_(L-2) (all but the last token). A round:
//   1. the drafter proposes gamma tokens d1..dg after x_(L-1);
//   2. the target runs ONE pass over [x_(L-1), d1..dg] (gamma + 1 new tokens, logits at each: a uniform
//      step, replayed as a CUDA graph), then verify_greedy / verify_sampled (speculative_verify.h) keep
//      a drafts and add one token of the target's: the text grows by a + 1;
//   3. rollback: the target's cache is cut back to the new L - 1 tokens (PagedKvManager::truncate: a length
//      decrement that frees whole trailing blocks; the stale rows are overwritten by later steps).
// Drafters behind one interface:
//   model   another engine (a small model of the same vocabulary, or the target's own weights quantized
//           to int8 / int4: a self-draft, as gpt-fast does). Its cache holds all but the last TWO tokens
//           of the text, so every round starts with one uniform 2-token step [x_(L-2), x_(L-1)] (1 logit
//           row) whether or not the last round accepted every draft (the token the draft never saw is
//           caught up inside that step), then gamma - 1 decode steps; afterwards its cache is cut back.
//           Sampled decoding draws the drafts with the draft's own sampler and reads q from its logits.
//   ngram   prompt lookup over the sequence's own text (NgramIndex): no model, no device work.
// Greedy output equals plain greedy decoding's, token for token, up to the rounding differences between a
// multi-token pass and a decode step (a near-tie of the target's two best logits can flip).
// Plain C++ header.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "inferlab/kernels/engine/engine.h"
#include "inferlab/kernels/engine/speculative_verify.h"

namespace inferlab {

class SpeculativeDrafter {
 public:
  virtual ~SpeculativeDrafter() = default;
  virtual std::string name() const = 0;
  // The sequences (slot i of the drafter = sequence i) begin with their texts: prompt and first token.
  virtual void begin(const std::vector<std::vector<int32_t>>& texts) = 0;
  // gamma tokens for each sequence. With sampling (temperature > 0) a drafter that samples fills q with
  // gamma x vocab probabilities per sequence; a deterministic one leaves q empty.
  virtual void propose(int64_t gamma, const SamplingParams& sampling, std::vector<std::vector<int32_t>>& drafts,
                       std::vector<std::vector<double>>& q) = 0;
  // The round's outcome: `emitted[i]` is appended to sequence i's text.
  virtual void commit(const std::vector<std::vector<int32_t>>& emitted) = 0;
  virtual void end() = 0;  // the sequences are done: their state (and KV blocks) released
  // The longest text a round may reach with this gamma (the draft engine's context): 0 = no limit.
  virtual int64_t max_context() const { return 0; }
  virtual int64_t vocab() const { return 0; }  // 0: any
};

// The drafting engine's sampler is keyed by (sampling.seed ^ kDraftSeedSalt, position): its draws are not
// the target's.
inline constexpr uint64_t kDraftSeedSalt = 0x5DEECE66Dull;

std::unique_ptr<SpeculativeDrafter> make_model_drafter(Engine& draft, std::string name = "model");
std::unique_ptr<SpeculativeDrafter> make_ngram_drafter(int64_t min_n = 1, int64_t max_n = 3);

struct SpeculativeStats {
  int64_t rounds = 0;           // verification passes of the batch
  int64_t sequence_rounds = 0;  // rounds x sequences
  int64_t drafted = 0, accepted = 0;
  int64_t rejections = 0;       // sequence-rounds that ended at a rejected draft
  int64_t emitted = 0;          // tokens the rounds added (accepted + 1 per sequence-round)
  double draft_s = 0, verify_s = 0, host_s = 0;  // wall clock of the rounds' three parts
  // Per-draft acceptance, the estimate that makes E(alpha, gamma) of sim/speculative.h hold for a
  // geometric run of acceptances truncated at gamma: accepted / (accepted + rejections).
  double alpha() const;
  double tokens_per_pass() const;  // emitted / sequence_rounds
};

struct GenerationResult {
  std::vector<std::vector<int32_t>> tokens;  // per sequence: the generated tokens (at least new_tokens)
  double prefill_s = 0;                      // wall clock of the prompts' prefill (and the drafter's)
  double decode_s = 0;                       // wall clock after it: decode steps, or rounds
  int64_t decode_steps = 0;                  // plain: decode steps after the prefill
  int64_t generated = 0;                     // tokens generated after the prefill's first ones
  SpeculativeStats spec;
  double tokens_per_s() const { return decode_s > 0 ? double(generated) / decode_s : 0; }
};

// Slots 0 .. batch - 1 of the engines are used and released at the end. Prompts hold at least 2 tokens;
// every sequence generates at least new_tokens (>= 2) tokens (speculative: the batch runs rounds until
// every sequence has them). Errors (inferlab::Error) before any step: gamma < 1, a drafter's vocabulary
// not the target's, a prompt too short, contexts beyond the engines' (prompt + new_tokens + gamma + 1).
// release = false keeps the target's slots (the text but its last token in the cache: tests).
GenerationResult plain_generate(Engine& target, const std::vector<std::vector<int32_t>>& prompts, int64_t new_tokens,
                                const SamplingParams& sampling, bool release = true);
GenerationResult speculative_generate(Engine& target, SpeculativeDrafter& drafter,
                                      const std::vector<std::vector<int32_t>>& prompts, int64_t new_tokens,
                                      int64_t gamma, const SamplingParams& sampling, bool release = true);

}  // namespace inferlab
