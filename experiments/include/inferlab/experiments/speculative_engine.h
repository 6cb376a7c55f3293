#pragma once
// The speculative_engine scenario: speculative vs plain decoding measured on the GPU engine
// (kernels/engine speculative.h) for one (drafter, gamma, batch) point, beside sim/speculative.h's
// prediction from the measured acceptance and the measured step costs:
//   speedup_predicted = E(alpha, gamma) x t_decode / t_round
// E the expected tokens per target pass at the measured alpha (speculative.h), t_decode the wall time of a
// plain decode step at the batch, t_round the wall time of a round (drafting, the verification pass, the
// host's verification and rollback). The measured speedup is the ratio of generated tokens per second,
// speculative over plain, on the same prompts. Its miss is the acceptance model's: E(alpha, gamma) against
// the tokens a pass really yields (acceptance that is not independent from draft to draft, nor the same for
// every sequence). Beside it, the roofline's speedup at the same alpha (sim/ alone), and the measured costs'
// speedup at alpha_prior (what the drafter would give if it were accepted that often: the random-weight
// Llama-2-7B's near-uniform logits leave its int4 self-draft almost never accepted, so this is the number a
// quantized self-draft of real weights would reach).
// Drafters: model (a draft model of the same vocabulary: `draft`), self (the target's own weights
// quantized to draft_format), ngram (prompt lookup). Without a GPU only the roofline's speedup at
// alpha_prior is written.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "inferlab/experiments/results.h"
#include "inferlab/experiments/spec.h"
#include "inferlab/sim/hardware.h"
#include "inferlab/sim/linear.h"
#include "inferlab/sim/model.h"

namespace inferlab {

struct SpecEngineConfig {
  std::string model, weights = "random";        // the target: a model name / config (random weights) or a folder
  std::string drafter = "model";                // model, self or ngram
  std::string draft = "none", draft_weights = "auto";
  std::optional<WeightFormat> draft_format;     // self: int8 or int4; model: the draft's own format (optional)
  int64_t gamma = 4, batch = 1, prompt_tokens = 128, new_tokens = 128;
  int64_t repeats = 1;                          // batches of other prompts run one after another, summed (sequences / batch)
  std::string prompts = "random";               // a text file (byte models: its bytes) or random token ids
  double temperature = 0;
  uint64_t seed = 1;
  int64_t ngram_min = 1, ngram_max = 3;
  bool graphs = true;
  double alpha_prior = 0.8;                     // the roofline's alpha without a measurement; speedup_at_alpha_prior
  ModelConfig target_config, draft_config;      // sim/'s view (draft_config: model and self drafters)
  Hardware hardware;
};

struct SpecEngineMeasurement {
  double alpha = 0, tokens_per_pass = 0;
  double plain_tokens_per_s = 0, spec_tokens_per_s = 0;
  double t_decode_s = 0;                        // a plain decode step (wall)
  double t_draft_s = 0, t_verify_s = 0, t_host_s = 0, t_round_s = 0;  // per round (wall)
  int64_t rounds = 0;
  double greedy_identical = -1;                 // share of sequences whose tokens equal plain decoding's (greedy)
  std::string device;
};

SpecEngineConfig spec_engine_config(const Params& p);
std::vector<Row> speculative_engine_rows(const SpecEngineConfig& c, const std::optional<SpecEngineMeasurement>& m);
// The prompts of a point: batch x repeats pieces of prompt_tokens tokens (a byte text: BOS + bytes from evenly
// spaced places of the file, checked against the model's vocabulary; random: seeded ids); batch r holds
// pieces r * batch .. r * batch + batch - 1.
std::vector<std::vector<int32_t>> spec_engine_prompts(const SpecEngineConfig& c);
// CUDA builds (speculative_engine_cuda.cpp); others throw.
SpecEngineMeasurement measure_speculative_engine(const SpecEngineConfig& c);

}  // namespace inferlab
