// The speculative_engine scenario's plain side: the point's configuration, its prompts, and its rows
// (sim/speculative.h's predictions beside what the engine measured).
#include "inferlab/experiments/speculative_engine.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include "inferlab/experiments/scenarios.h"
#include "inferlab/kernels/engine/engine.h"
#include "inferlab/sim/error.h"
#include "inferlab/sim/io.h"
#include "inferlab/sim/paths.h"
#include "inferlab/sim/rng.h"
#include "inferlab/sim/speculative.h"

namespace inferlab {
namespace fs = std::filesystem;
namespace {

std::string project_path(const std::string& given) { return in_project(given).string(); }

ModelConfig sim_model(const std::string& weights, const std::string& name) {
  return load_model(weights != "random" ? project_path(weights) : project_path(name));
}

}  // namespace

SpecEngineConfig spec_engine_config(const Params& p) {
  SpecEngineConfig c;
  c.model = p.at("model");
  c.weights = p.at("weights");
  if (c.weights != "random") c.weights = project_path(c.weights);
  c.drafter = p.at("drafter");
  if (c.drafter != "model" && c.drafter != "self" && c.drafter != "ngram")
    throw Error("parameter 'drafter': '" + c.drafter + "' is not model, self or ngram");
  c.draft = p.at("draft");
  c.draft_weights = p.at("draft_weights");
  if (c.draft_weights == "auto") {  // a folder drafts with its own weights, a model name with random ones
    std::error_code ec;
    c.draft_weights = c.draft != "none" && fs::is_directory(project_path(c.draft), ec) ? project_path(c.draft) : "random";
  } else if (c.draft_weights != "random") {
    c.draft_weights = project_path(c.draft_weights);
  }
  if (p.at("draft_format") != "none") c.draft_format = parse_weight_format(p.at("draft_format"));
  c.gamma = param_int(p, "gamma", 1);
  if (c.gamma + 1 > kGraphMaxNewTokens)
    throw Error("gamma " + std::to_string(c.gamma) + " is beyond what a round reserves: the engines hold " +
                std::to_string(kGraphMaxNewTokens) + " tokens a sequence for one verification pass (gamma <= " +
                std::to_string(kGraphMaxNewTokens - 1) + ")");
  c.batch = param_int(p, "batch", 1);
  const int64_t sequences = param_int(p, "sequences", 0);
  if (c.batch < 1) throw Error("parameter 'batch' must be at least 1");
  if (sequences > 0 && sequences % c.batch != 0)
    throw Error("parameter 'sequences' (" + std::to_string(sequences) + ") must be a multiple of batch (" +
                std::to_string(c.batch) + ")");
  c.repeats = sequences > 0 ? sequences / c.batch : 1;
  c.prompt_tokens = param_int(p, "prompt_tokens", 2);
  c.new_tokens = param_int(p, "new_tokens", 2);
  c.prompts = p.at("prompts");
  if (c.prompts != "random") c.prompts = project_path(c.prompts);
  c.temperature = param_double(p, "temperature");
  c.seed = uint64_t(param_int(p, "seed", 0));
  c.ngram_min = param_int(p, "ngram_min", 1);
  c.ngram_max = param_int(p, "ngram_max", 1);
  c.graphs = param_bool(p, "graphs");
  c.alpha_prior = param_double(p, "alpha_prior");
  if (!(c.alpha_prior >= 0 && c.alpha_prior <= 1)) throw Error("parameter 'alpha_prior' must be in [0, 1]");
  c.hardware = load_hardware(p.at("hardware"), p.at("ceilings"));
  c.target_config = sim_model(c.weights, c.model);
  if (c.drafter == "model") {
    if (c.draft == "none") throw Error("drafter 'model' needs parameter 'draft' (a draft model or folder)");
    c.draft_config = sim_model(c.draft_weights, c.draft);
    if (c.draft_config.vocab != c.target_config.vocab)
      throw Error("the draft " + c.draft_config.name + " has a vocabulary of " + std::to_string(c.draft_config.vocab) +
                  " tokens, the target " + c.target_config.name + " " + std::to_string(c.target_config.vocab) +
                  ": a draft must share the target's tokenizer");
  } else if (c.drafter == "self") {
    if (!c.draft_format || *c.draft_format == WeightFormat::bf16)
      throw Error("drafter 'self' needs parameter 'draft_format' (int8 or int4: the target's weights quantized)");
    c.draft_config = c.target_config;
  }
  const int64_t longest = c.prompt_tokens + c.new_tokens + c.gamma + 1;
  if (c.target_config.max_positions > 0 && longest > c.target_config.max_positions)
    throw Error("prompt_tokens + new_tokens + gamma + 1 = " + std::to_string(longest) + " exceeds " + c.target_config.name +
                "'s max_position_embeddings " + std::to_string(c.target_config.max_positions));
  return c;
}

std::vector<std::vector<int32_t>> spec_engine_prompts(const SpecEngineConfig& c) {
  const int64_t V = c.target_config.vocab;
  const int64_t count = c.batch * c.repeats;
  std::vector<std::vector<int32_t>> out(static_cast<std::size_t>(count));
  if (c.prompts == "random") {
    Rng rng{c.seed * 7919 + 29};
    for (auto& p : out)
      for (int64_t i = 0; i < c.prompt_tokens; ++i) p.push_back(int32_t(rng.next() % uint64_t(V)));
    return out;
  }
  if (c.weights == "random") throw Error("prompts from a text file need a model folder with byte_tokenizer.json (weights)");
  const fs::path tok = fs::path(c.weights) / "byte_tokenizer.json";
  std::error_code ec;
  if (!fs::is_regular_file(tok, ec))
    throw Error(c.prompts + " is text, but " + c.weights + " has no byte_tokenizer.json (text is read as bytes)");
  const nlohmann::json t = read_json_file(tok);
  const int32_t bos = t.value("bos_token_id", -1);
  if (bos >= V || 256 > V)
    throw Error("vocabulary mismatch: " + tok.string() + " needs ids up to " + std::to_string(std::max(bos, 255)) + " but " +
                c.weights + " has vocab_size " + std::to_string(V));
  std::ifstream f(c.prompts, std::ios::binary);
  if (!f) throw Error("cannot read the prompts' text file " + c.prompts);
  std::stringstream ss;
  ss << f.rdbuf();
  const std::string text = ss.str();
  const int64_t body = c.prompt_tokens - (bos >= 0 ? 1 : 0);
  if (int64_t(text.size()) < body * 2)
    throw Error(c.prompts + " holds " + std::to_string(text.size()) + " bytes: too short for prompts of " +
                std::to_string(c.prompt_tokens) + " tokens");
  // Evenly spaced places, each moved to the start of the next line (an article's head).
  const int64_t span = int64_t(text.size()) - body;
  for (int64_t b = 0; b < count; ++b) {
    int64_t at = span * b / count;
    const std::size_t nl = text.find('\n', std::size_t(at));
    if (nl != std::string::npos && int64_t(nl) + 1 <= span) at = int64_t(nl) + 1;
    auto& p = out[std::size_t(b)];
    if (bos >= 0) p.push_back(bos);
    for (int64_t i = 0; i < body; ++i) p.push_back(int32_t(static_cast<unsigned char>(text[std::size_t(at + i)])));
  }
  return out;
}

std::vector<Row> speculative_engine_rows(const SpecEngineConfig& c, const std::optional<SpecEngineMeasurement>& m) {
  auto v = [&](double x) { return m ? num(x) : std::string(); };
  // sim/'s roofline at the measured alpha (alpha_prior without one). A quantized self-draft has no
  // roofline here (the cost model prices one precision for target and draft).
  std::string roofline;
  const double alpha = m ? m->alpha : c.alpha_prior;
  if (c.drafter != "self") {
    SpeculativeSetup s;
    s.target = c.target_config;
    s.drafter = c.drafter == "ngram" ? Drafter::ngram : Drafter::model;
    if (c.drafter == "model") s.draft = c.draft_config;
    s.hardware = c.hardware;
    s.options = OpOptions{Precision{DType::bf16, DType::bf16, DType::bf16}, AttentionVariant::flash, true, std::nullopt};
    s.batch = c.batch;
    s.context = c.prompt_tokens + c.new_tokens / 2;
    roofline = num(SpeculativeModel(s).speedup(alpha, c.gamma));
  }
  const double e = m ? expected_tokens(m->alpha, c.gamma) : 0;
  const double predicted = m && m->t_round_s > 0 ? e * m->t_decode_s / m->t_round_s : 0;
  const double measured = m && m->plain_tokens_per_s > 0 ? m->spec_tokens_per_s / m->plain_tokens_per_s : 0;
  Row r;
  r.emplace_back("draft_name", c.drafter == "model" ? c.draft_config.name
                          : c.drafter == "self" ? c.target_config.name + " " + weight_format_name(*c.draft_format)
                                                : "prompt lookup " + std::to_string(c.ngram_min) + "-" + std::to_string(c.ngram_max));
  r.emplace_back("target_name", c.target_config.name);
  r.emplace_back("alpha_measured", v(m ? m->alpha : 0));
  r.emplace_back("tokens_per_pass", v(m ? m->tokens_per_pass : 0));
  r.emplace_back("tokens_per_pass_predicted", v(e));
  r.emplace_back("speedup_measured", v(measured));
  r.emplace_back("speedup_predicted", v(predicted));
  r.emplace_back("speedup_error", m && measured > 0 ? num(predicted / measured - 1) : "");
  // What the measured costs would give at alpha_prior: the acceptance a drafter must reach to pay.
  const double at_prior =
      m && m->t_round_s > 0 ? expected_tokens(c.alpha_prior, c.gamma) * m->t_decode_s / m->t_round_s : 0;
  r.emplace_back("speedup_at_alpha_prior", v(at_prior));
  r.emplace_back("speedup_roofline", roofline);
  r.emplace_back("roofline_alpha", roofline.empty() ? "" : num(alpha));
  r.emplace_back("t_decode_s", v(m ? m->t_decode_s : 0));
  r.emplace_back("t_round_s", v(m ? m->t_round_s : 0));
  r.emplace_back("t_draft_s", v(m ? m->t_draft_s : 0));
  r.emplace_back("t_verify_s", v(m ? m->t_verify_s : 0));
  r.emplace_back("t_host_s", v(m ? m->t_host_s : 0));
  r.emplace_back("plain_tokens_per_s", v(m ? m->plain_tokens_per_s : 0));
  r.emplace_back("spec_tokens_per_s", v(m ? m->spec_tokens_per_s : 0));
  r.emplace_back("rounds", m ? num(m->rounds) : "");
  r.emplace_back("greedy_identical", m && m->greedy_identical >= 0 ? num(m->greedy_identical) : "");
  r.emplace_back("ceilings", c.hardware.ceilings_source);
  r.emplace_back("device", m ? m->device : "");
  return {r};
}

}  // namespace inferlab
