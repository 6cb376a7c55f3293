// A step cost from engine timings (measured_step_cost.h).
#include "inferlab/sim/measured_step_cost.h"

#include <algorithm>
#include <cmath>

#include <nlohmann/json.hpp>

#include "inferlab/sim/error.h"
#include "inferlab/sim/io.h"

namespace inferlab {
namespace {

// The segment of an ascending grid that x falls in (the first or last one outside it) and the
// weight of its upper end: linear interpolation inside, linear extrapolation outside.
std::pair<std::size_t, double> segment(const std::vector<int64_t>& g, double x) {
  std::size_t i = 0;
  while (i + 2 < g.size() && x > double(g[i + 1])) ++i;
  return {i, (x - double(g[i])) / double(g[i + 1] - g[i])};
}

double lerp(double a, double b, double w) { return a + (b - a) * w; }

void check_grid(const std::vector<int64_t>& g, const std::string& what, const std::string& origin) {
  if (g.size() < 2 || g[0] != 0) throw Error(origin + ": '" + what + "' must start at 0 and hold at least two points");
  for (std::size_t i = 1; i < g.size(); ++i)
    if (g[i] <= g[i - 1]) throw Error(origin + ": '" + what + "' must be strictly ascending");
}

}  // namespace

void check_step_timing(const StepTimingTable& t, const std::string& origin) {
  check_grid(t.decode, "decode", origin);
  check_grid(t.prefill, "prefill", origin);
  if (t.base.size() != t.decode.size()) throw Error(origin + ": 'base' needs a row per decode grid point");
  if (t.per_context.size() != t.decode.size()) throw Error(origin + ": 'per_context' needs a value per decode grid point");
  if (t.base_context < 0) throw Error(origin + ": 'base_context' must not be negative");
  for (std::size_t d = 0; d < t.base.size(); ++d) {
    if (t.base[d].size() != t.prefill.size()) throw Error(origin + ": 'base' row " + std::to_string(d) + " needs a value per prefill grid point");
    for (std::size_t p = 0; p < t.base[d].size(); ++p)
      if ((d > 0 || p > 0) && !(t.base[d][p] > 0 && std::isfinite(t.base[d][p])))
        throw Error(origin + ": 'base' [" + std::to_string(d) + "][" + std::to_string(p) + "] must be a positive time");
    if (d > 0 && !(t.per_context[d] >= 0 && std::isfinite(t.per_context[d])))
      throw Error(origin + ": 'per_context' [" + std::to_string(d) + "] must be a non-negative time");
  }
}

StepTimingTable parse_step_timing(const std::string& text, const std::string& origin) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw Error(origin + ": malformed JSON: " + e.what());
  }
  StepTimingTable t;
  try {
    t.model = j.value("model", "");
    t.device = j.value("device", "");
    t.provenance = j.value("provenance", "");
    t.decode = j.at("decode").get<std::vector<int64_t>>();
    t.prefill = j.at("prefill").get<std::vector<int64_t>>();
    t.base_context = j.at("base_context").get<int64_t>();
    t.base = j.at("base_seconds").get<std::vector<std::vector<double>>>();
    t.per_context = j.at("per_context_seconds").get<std::vector<double>>();
  } catch (const nlohmann::json::exception& e) {
    throw Error(origin + ": not a step timing table: " + e.what());
  }
  check_step_timing(t, origin);
  return t;
}

StepTimingTable read_step_timing(const std::filesystem::path& path) {
  return parse_step_timing(read_text_file(path), path.string());
}

std::string step_timing_json(const StepTimingTable& t) {
  nlohmann::json j{{"model", t.model},
                   {"device", t.device},
                   {"provenance", t.provenance},
                   {"what", "engine pass seconds: base_seconds[decode][prefill] at base_context tokens of context per "
                            "decode sequence; per_context_seconds[decode]: seconds per extra context token"},
                   {"decode", t.decode},
                   {"prefill", t.prefill},
                   {"base_context", t.base_context},
                   {"base_seconds", t.base},
                   {"per_context_seconds", t.per_context}};
  return j.dump(1) + "\n";
}

MeasuredStepCost::MeasuredStepCost(StepTimingTable table, std::string source) : t_(std::move(table)), source_(std::move(source)) {
  check_step_timing(t_, source_.empty() ? "step timing table" : source_);
}

double MeasuredStepCost::step_time(const Batch& batch) {
  double d = 0, p = 0, context = 0;
  for (const auto& s : batch.sequences) {
    if (s.new_tokens == 1 && s.past_tokens > 0) {
      d += double(s.count);
      context += double(s.count) * double(s.past_tokens);
    } else {
      p += double(s.count * s.new_tokens);
    }
  }
  const auto [i, wd] = segment(t_.decode, d);
  const auto [k, wp] = segment(t_.prefill, p);
  // base[0][0] is no pass; a one-token pass is a decode of one, so the grid's corner is base[1][0].
  auto at = [&](std::size_t a, std::size_t b) { return a == 0 && b == 0 ? t_.base[1][0] : t_.base[a][b]; };
  const double lo = lerp(at(i, k), at(i, k + 1), wp), hi = lerp(at(i + 1, k), at(i + 1, k + 1), wp);
  double t = lerp(lo, hi, wd);
  if (d > 0) {
    // per_context[0] is unused: below the first decode point the slope is that of one sequence.
    const double slope = i == 0 ? t_.per_context[1] : lerp(t_.per_context[i], t_.per_context[i + 1], wd);
    t += std::max(slope, 0.0) * (context - d * double(t_.base_context));
  }
  return std::max(t, 1e-6);
}

std::string MeasuredStepCost::describe() const {
  return "measured engine passes (" + t_.model + " on " + t_.device + (source_.empty() ? "" : ", " + source_) + ")";
}

}  // namespace inferlab
