// The speculative_engine scenario's measured side: the target and the draft engines kept on the GPU across
// points, plain and speculative decoding of the same prompts, each run once to warm (cuBLAS plans, the CUDA
// graphs of every shape and context bucket) and once timed.
#include <algorithm>
#include <map>
#include <memory>

#include "inferlab/experiments/scenarios.h"
#include "inferlab/experiments/speculative_engine.h"
#include "inferlab/kernels/engine/speculative.h"
#include "inferlab/roofline/gpu_info.h"
#include "inferlab/sim/error.h"
#include "measurers.h"

namespace inferlab {
namespace {

// Every engine of the scenario holds 64 sequences (more when a point asks) of up to 640 tokens on average
// (the prompt, the new tokens and what a sequence runs ahead while the batch's slowest catches up), and a
// verification pass of up to kGraphMaxNewTokens tokens each.
constexpr int64_t kSlots = 64, kTokensPerSlot = 640;

struct Engines {
  std::string target_key, draft_key;
  std::unique_ptr<Engine> target, draft;
  std::map<std::string, std::vector<GenerationResult>> plain;  // plain runs by prompts, batch, tokens, sampling
};
Engines& engines() {
  static Engines e;
  return e;
}

std::unique_ptr<Engine> build(const std::string& name, const std::string& weights, std::optional<WeightFormat> format,
                              int64_t slots, uint64_t seed) {
  EngineModel em = load_engine_model(weights == "random" ? name : weights);
  EngineOptions o;
  o.weights = weights;
  o.seed = seed;
  o.weight_format = format;
  o.max_sequences = slots;
  o.max_step_tokens = std::max<int64_t>(8192, slots * kGraphMaxNewTokens);
  o.max_logit_rows = slots * kGraphMaxNewTokens;
  o.max_context = em.model.max_positions > 0 ? std::min<int64_t>(em.model.max_positions, 4096) : 4096;
  o.kv_blocks = slots * kTokensPerSlot / o.block_size;
  return std::make_unique<Engine>(em, o);
}

}  // namespace

SpecEngineMeasurement measure_speculative_engine(const SpecEngineConfig& c) {
  check_same_gpu(c.hardware);
  Engines& E = engines();
  const int64_t slots = std::max(kSlots, c.batch);
  const std::string tkey = c.model + "|" + c.weights + "|" + std::to_string(c.seed) + "|" + std::to_string(slots);
  std::string dkey;
  if (c.drafter == "model")
    dkey = c.draft + "|" + c.draft_weights + "|" + (c.draft_format ? weight_format_name(*c.draft_format) : "bf16");
  else if (c.drafter == "self")
    dkey = tkey + "|" + weight_format_name(*c.draft_format);
  if (dkey.empty() || E.draft_key != dkey || E.target_key != tkey) E.draft.reset(), E.draft_key.clear();
  if (E.target_key != tkey) {
    E.target.reset();  // free the old one's memory first
    E.plain.clear();
    E.target = build(c.model, c.weights, std::nullopt, slots, c.seed);
    E.target_key = tkey;
  }
  if (!dkey.empty() && !E.draft) {
    E.draft = c.drafter == "self" ? build(c.model, c.weights, c.draft_format, slots, c.seed)
                                  : build(c.draft, c.draft_weights, c.draft_format, slots, c.seed + 1);
    E.draft_key = dkey;
  }
  Engine& target = *E.target;
  target.set_graphs(c.graphs);
  if (E.draft) E.draft->set_graphs(c.graphs);

  const std::vector<std::vector<int32_t>> all = spec_engine_prompts(c);
  std::vector<std::vector<std::vector<int32_t>>> sets;
  for (int64_t r = 0; r < c.repeats; ++r)
    sets.emplace_back(all.begin() + r * c.batch, all.begin() + (r + 1) * c.batch);
  SamplingParams sampling;
  sampling.temperature = float(c.temperature);
  sampling.seed = c.seed;
  // Plain decoding of every batch (the first once more before, to warm), kept across the points that share it.
  const std::string pkey = c.prompts + "|" + std::to_string(c.batch) + "|" + std::to_string(c.repeats) + "|" +
                           std::to_string(c.prompt_tokens) + "|" + std::to_string(c.new_tokens) + "|" +
                           num(c.temperature) + "|" + (c.graphs ? "g" : "e");
  auto found = E.plain.find(pkey);
  if (found == E.plain.end()) {
    plain_generate(target, sets[0], c.new_tokens, sampling);  // warm
    std::vector<GenerationResult> runs;
    for (const auto& set : sets) runs.push_back(plain_generate(target, set, c.new_tokens, sampling));
    found = E.plain.emplace(pkey, std::move(runs)).first;
  }
  const std::vector<GenerationResult>& plain = found->second;

  std::unique_ptr<SpeculativeDrafter> drafter =
      E.draft ? make_model_drafter(*E.draft, c.drafter) : make_ngram_drafter(c.ngram_min, c.ngram_max);
  speculative_generate(target, *drafter, sets[0], c.new_tokens, c.gamma, sampling);  // warm
  SpeculativeStats s;
  double plain_s = 0, spec_s = 0;
  int64_t plain_tokens = 0, plain_steps = 0, spec_tokens = 0, same = 0;
  for (std::size_t r = 0; r < sets.size(); ++r) {
    const GenerationResult spec = speculative_generate(target, *drafter, sets[r], c.new_tokens, c.gamma, sampling);
    const SpeculativeStats& t = spec.spec;
    s.rounds += t.rounds, s.sequence_rounds += t.sequence_rounds, s.drafted += t.drafted, s.accepted += t.accepted;
    s.rejections += t.rejections, s.emitted += t.emitted;
    s.draft_s += t.draft_s, s.verify_s += t.verify_s, s.host_s += t.host_s;
    spec_s += spec.decode_s, spec_tokens += spec.generated;
    plain_s += plain[r].decode_s, plain_tokens += plain[r].generated, plain_steps += plain[r].decode_steps;
    for (std::size_t i = 0; i < sets[r].size(); ++i)
      same += std::equal(plain[r].tokens[i].begin(), plain[r].tokens[i].end(), spec.tokens[i].begin());
  }

  SpecEngineMeasurement m;
  m.alpha = s.alpha();
  m.tokens_per_pass = s.tokens_per_pass();
  m.plain_tokens_per_s = plain_s > 0 ? double(plain_tokens) / plain_s : 0;
  m.spec_tokens_per_s = spec_s > 0 ? double(spec_tokens) / spec_s : 0;
  m.t_decode_s = plain_steps > 0 ? plain_s / double(plain_steps) : 0;
  m.rounds = s.rounds;
  if (s.rounds > 0) {
    m.t_draft_s = s.draft_s / double(s.rounds);
    m.t_verify_s = s.verify_s / double(s.rounds);
    m.t_host_s = s.host_s / double(s.rounds);
    m.t_round_s = m.t_draft_s + m.t_verify_s + m.t_host_s;
  }
  if (c.temperature <= 0) m.greedy_identical = double(same) / double(all.size());
  m.device = detect_gpu().name;
  return m;
}

std::function<void(const Params&)> speculative_engine_preflight() {
  return [](const Params& p) { check_same_gpu(spec_engine_config(p).hardware); };
}

std::function<void(const Params&, std::vector<Row>&)> speculative_engine_measure() {
  return [](const Params& p, std::vector<Row>& rows) {
    const SpecEngineConfig c = spec_engine_config(p);
    rows = speculative_engine_rows(c, measure_speculative_engine(c));
  };
}

}  // namespace inferlab
