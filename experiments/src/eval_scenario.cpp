// The `eval` scenario's host side (evaluate.h): parameters, and the row of one point.
#include <cmath>

#include "inferlab/experiments/evaluate.h"
#include "inferlab/experiments/scenarios.h"

namespace inferlab {

EvalConfig eval_config(const Params& p) {
  EvalConfig c;
  c.model = p.at("model");
  c.data = p.at("data");
  c.weight_format = param_weight_format(p);
  c.window = param_int(p, "window", 0);
  c.max_tokens = param_int(p, "max_tokens", 0);
  c.agree_with = p.at("agree_with") == "none" ? "" : p.at("agree_with");
  return c;
}

std::optional<GenerateConfig> eval_speed_config(const Params& p) {
  if (param_int(p, "new_tokens", 0) == 0) return std::nullopt;
  GenerateConfig g;
  g.model = g.weights = p.at("model");
  g.hardware = p.at("hardware");
  g.ceilings = p.at("ceilings");
  g.batch = param_int(p, "batch");
  g.prompt_tokens = param_int(p, "prompt_tokens");
  g.new_tokens = param_int(p, "new_tokens");
  g.weight_format = param_weight_format(p);
  return g;
}

std::vector<Row> eval_rows(const EvalRun& e, const GenerateRun* speed, const Hardware& hw) {
  int64_t tokens = 0;
  for (const auto& w : e.windows) tokens += int64_t(w.target.size());
  auto measured = [&](double v) { return e.measured ? num(v) : std::string(); };
  Row row{{"eval_tokens", num(tokens)},
          {"windows", num(int64_t(e.windows.size()))},
          {"perplexity", measured(e.score.perplexity())},
          {"nll_per_token", measured(e.score.nll_per_token())},
          {"bits_per_token", measured(e.score.nll_per_token() / std::log(2.0))},
          {"top1_accuracy", measured(e.score.accuracy())},
          {"agreement", e.measured && e.agreement >= 0 ? num(e.agreement) : ""},
          {"predicted_eval_s", num(predict_eval_seconds(e, hw))},
          {"eval_s", e.measured && e.gpu_s > 0 ? num(e.gpu_s) : ""},
          {"engine_weight_bytes", e.measured && e.weight_bytes > 0 ? num(e.weight_bytes) : ""}};
  if (speed) {
    const GenerateSummary s = summarize(*speed);
    row.emplace_back("predicted_tokens_per_s", num(s.predicted_tokens_per_s));
    row.emplace_back("limit_tokens_per_s", num(s.limit_tokens_per_s));
    row.emplace_back("tokens_per_s", speed->measured ? num(s.tokens_per_s) : "");
    row.emplace_back("gpu_tokens_per_s", speed->measured ? num(s.gpu_tokens_per_s) : "");
    row.emplace_back("median_step_measured_s", speed->measured ? num(s.median_decode_measured_s) : "");
  }
  row.emplace_back("device", e.device);
  return {row};
}

}  // namespace inferlab
