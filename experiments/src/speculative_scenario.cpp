// The speculative scenario: one (drafter, alpha, gamma) point of speculative decoding.
#include "inferlab/experiments/scenarios.h"
#include "inferlab/sim/error.h"
#include "inferlab/sim/memory.h"
#include "inferlab/sim/speculative.h"

namespace inferlab {

std::vector<Row> speculative_rows(const Params& p) {
  SpeculativeSetup s;
  s.target = load_model(p.at("target"));
  s.drafter = parse_drafter(p.at("drafter"));
  if (s.drafter == Drafter::model) {
    if (p.at("draft") == "none") throw Error("drafter 'model' needs parameter 'draft' (a draft model)");
    s.draft = load_model(p.at("draft"));
  }
  s.hardware = load_hardware(p.at("hardware"), p.at("ceilings"));
  s.options = OpOptions{param_precision(p, s.target), AttentionVariant::flash, true, std::nullopt};
  s.batch = param_int(p, "batch");
  s.context = param_int(p, "context");
  const int64_t longest = s.context + param_int(p, "max_gamma", 1) + 1;  // the longest verification pass
  check_context(p, s.target, longest, "context + max_gamma + 1");
  if (s.draft) check_context(p, *s.draft, longest, "context + max_gamma + 1");
  s.tp = param_int(p, "tp");
  s.draft_tp = param_int(p, "draft_tp");
  const double alpha = param_double(p, "alpha");
  const int64_t gamma = param_int(p, "gamma", 0), max_gamma = param_int(p, "max_gamma", 1);
  const SpeculativeModel m(s);
  const SpeculativeRound r = m.round(gamma);
  const int64_t best = m.optimal_gamma(alpha, max_gamma);
  const double e = expected_tokens(alpha, gamma);
  return {Row{{"draft_model", s.drafter == Drafter::model ? s.draft->name : ""},
              {"expected_tokens", num(e)},
              {"c", num(r.c)},
              {"target_decode_s", num(r.target_decode_s)},
              {"verify_s", num(r.verify_s)},
              {"draft_s", num(r.draft_s)},
              {"round_s", num(r.verify_s + r.draft_s)},
              {"speedup", num(m.speedup(alpha, gamma))},
              {"closed_form_speedup", num(closed_form_speedup(alpha, gamma, r.c))},
              {"optimal_gamma", num(best)},
              {"optimal_gamma_at_cap", best == max_gamma ? "true" : "false"},  // the optimum may lie beyond the search
              {"optimal_speedup", num(m.speedup(alpha, best))},
              {"tokens_per_s", num(double(s.batch) * e / (r.verify_s + r.draft_s))},
              {"target_weights_bytes", num(weight_bytes(s.target, s.options.precision.weight))},
              {"extra_memory_bytes", num(m.extra_memory_bytes(gamma))},
              {"ceilings", s.hardware.ceilings_source}}};
}

}  // namespace inferlab
