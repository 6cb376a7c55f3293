#include "inferlab/experiments/compare.h"

#include <algorithm>
#include <cmath>
#include <set>

#include <fmt/core.h>

#include "inferlab/experiments/scenarios.h"
#include "inferlab/sim/error.h"
#include "inferlab/sim/io.h"
#include "inferlab/sim/paths.h"

namespace inferlab {
namespace {

bool takes(const Scenario& s, const std::string& param) {
  for (const auto& p : s.params)
    if (p.name == param) return true;
  return false;
}

Row total_row(const std::vector<Row>& rows) {
  for (const Row& r : rows)
    if (get_cell(r, "op") == "total") return r;
  throw Error("compare: the step has no total row");
}

std::string cell(const Row& r, const std::string& c) { return get_cell(r, c); }

double value(const Row& r, const std::string& c) { return parse_number(cell(r, c)).value_or(std::nan("")); }

// The columns of the table for people: header, the row's column, how a value reads.
struct Shown {
  const char* header;
  const char* column;
  std::string (*text)(double);
};

std::string gb_text(double v) { return fmt::format("{:.2f} GB", v / 1e9); }
std::string kib_text(double v) { return fmt::format("{:.1f} KiB", v / 1024); }
std::string ms_text(double v) { return v < 1e-3 ? fmt::format("{:.1f} us", v * 1e6) : fmt::format("{:.2f} ms", v * 1e3); }
std::string count_text(double v) { return std::isnan(v) ? "-" : fmt::format("{:.0f}", v); }
std::string rate_text(double v) { return fmt::format("{:.0f}", v); }

const std::vector<Shown>& shown() {
  static const std::vector<Shown> s = {{"weights", "weights_bytes", gb_text},
                                       {"KV/token", "kv_bytes_per_token", kib_text},
                                       {"max batch", "max_batch", count_text},
                                       {"prefill step", "prefill_s", ms_text},
                                       {"prefill tok/s", "prefill_tokens_per_s", rate_text},
                                       {"decode step", "decode_s", ms_text},
                                       {"decode tok/s", "decode_tokens_per_s", rate_text}};
  return s;
}

}  // namespace

std::vector<std::string> compare_parameters() {
  std::vector<std::string> out;
  for (const auto& p : find_scenario("memory").params)
    if (p.name != "model" && p.name != "hardware" && takes(find_scenario("model"), p.name)) out.push_back(p.name);
  return out;
}

std::vector<CompareEntry> compare_entries(const std::vector<std::string>& models, const std::vector<std::string>& hardware,
                                          const Params& common) {
  if (models.empty() || hardware.empty()) throw Error("compare: name at least one model and one hardware");
  if (models.size() * hardware.size() < 2)
    throw Error("compare: two or more models or GPUs to compare (got " + models.front() + " on " + hardware.front() +
                "): give --model A,B or --hardware G,H");
  const Scenario& mem = find_scenario("memory");
  const Scenario& step = find_scenario("model");
  Params base = common;
  if (!base.count("context")) base["context"] = "4096";
  const std::vector<std::string> known = compare_parameters();
  for (const auto& [k, v] : base)
    if (std::find(known.begin(), known.end(), k) == known.end())
      throw Error("compare: unknown parameter '" + k + "': compare sets model and hardware itself and takes what both "
                  "`memory` and `model` take (" + join(known, ", ") + ")");
  std::vector<CompareEntry> out;
  for (const auto& m : models)
    for (const auto& h : hardware) {
      CompareEntry e{m, h, {}, {}, {}, {}};
      Params p = base;
      p["model"] = m;
      p["hardware"] = h;
      e.point = complete_params(mem, p);
      e.memory = mem.predict(e.point).at(0);
      for (const char* phase : {"prefill", "decode"}) {
        Params q = p;
        q["phase"] = phase;
        (std::string(phase) == "prefill" ? e.prefill : e.decode) = total_row(step.predict(complete_params(step, q)));
      }
      out.push_back(std::move(e));
    }
  return out;
}

std::vector<Row> compare_rows(const std::vector<CompareEntry>& entries) {
  std::vector<Row> rows;
  for (const auto& e : entries) {
    const Row& m = e.memory;
    Row r{{"model", e.model},
          {"hardware", e.hardware},
          {"ceilings", cell(e.decode, "ceilings")},
          {"batch", e.point.at("batch")},
          {"context", e.point.at("context")},
          {"params", cell(m, "params")},
          {"weights_bytes", cell(m, "weights_bytes")},
          {"kv_bytes_per_token", cell(m, "kv_bytes_per_token")},
          {"kv_cache_bytes", cell(m, "kv_cache_bytes")},
          {"total_bytes", cell(m, "total_bytes")},
          {"capacity_bytes", cell(m, "capacity_bytes")},
          {"fits", cell(m, "fits")},
          {"max_batch", cell(m, "max_batch")},
          {"prefill_s", cell(e.prefill, "predicted_s")},
          {"prefill_tokens_per_s", cell(e.prefill, "tokens_per_s")},
          {"prefill_bound", cell(e.prefill, "bound")},
          {"decode_s", cell(e.decode, "predicted_s")},
          {"decode_tokens_per_s", cell(e.decode, "tokens_per_s")},
          {"decode_bound", cell(e.decode, "bound")}};
    rows.push_back(std::move(r));
  }
  return rows;
}

std::string compare_table(const std::vector<Row>& rows, bool markdown) {
  std::vector<std::string> header = {"model", "hardware"};
  for (const auto& s : shown()) header.push_back(s.header);
  header.push_back("fits");
  std::vector<std::vector<std::string>> cells;
  for (const Row& r : rows) {
    std::vector<std::string> line = {cell(r, "model"), cell(r, "hardware")};
    for (const auto& s : shown()) line.push_back(s.text(value(r, s.column)));
    line.push_back(cell(r, "fits") == "true" ? "yes" : "NO");
    cells.push_back(line);
  }
  std::vector<std::size_t> w(header.size());
  for (std::size_t c = 0; c < header.size(); ++c) {
    w[c] = header[c].size();
    for (const auto& line : cells) w[c] = std::max(w[c], line[c].size());
  }
  auto format_line = [&](const std::vector<std::string>& line) {
    std::string s = markdown ? "|" : "";
    for (std::size_t c = 0; c < line.size(); ++c) {
      const bool left = c < 2;
      const std::string padded = left ? fmt::format("{:<{}}", line[c], w[c]) : fmt::format("{:>{}}", line[c], w[c]);
      s += markdown ? " " + padded + " |" : (c ? "  " : "") + padded;
    }
    return s + "\n";
  };
  std::string out = format_line(header);
  if (markdown) {
    std::string rule = "|";
    for (std::size_t c = 0; c < header.size(); ++c) rule += (c < 2 ? std::string(" :") : std::string(" ")) +
                                                            std::string(w[c] - 1, '-') + (c < 2 ? " |" : ": |");
    out += rule + "\n";
  }
  for (const auto& line : cells) out += format_line(line);
  return out;
}

nlohmann::json compare_plot(const std::vector<Row>& rows) {
  std::set<std::string> models, hardware;
  for (const Row& r : rows) models.insert(cell(r, "model")), hardware.insert(cell(r, "hardware"));
  // The names of the more numerous kind along x, the other as the bars of each group.
  const bool by_model = models.size() >= hardware.size();
  nlohmann::json y = nlohmann::json::array();
  for (const auto& s : shown()) y.push_back(s.column);
  const Row& first = rows.front();
  return {{"name", "compare"},
          {"kind", "grouped_bars"},
          {"x", by_model ? "model" : "hardware"},
          {"series", nlohmann::json::array({by_model ? "hardware" : "model"})},
          {"y", y},
          {"wrap", 4},
          {"title", fmt::format("batch {}, context {} tokens: prefill of batch x context tokens, decode of batch "
                                "tokens; max batch at the context", cell(first, "batch"), cell(first, "context"))}};
}

}  // namespace inferlab
