#include "inferlab/experiments/fidelity.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>

#include "inferlab/experiments/results.h"
#include "inferlab/experiments/scenarios.h"
#include "inferlab/sim/error.h"
#include "inferlab/sim/io.h"

namespace inferlab {
namespace fs = std::filesystem;
namespace {

std::string family_of(const std::string& scenario, const std::map<std::string, std::string>& row) {
  auto cell = [&](const char* c) {
    auto it = row.find(c);
    return it == row.end() ? std::string() : it->second;
  };
  if (scenario == "attention") return cell("variant") + " prefill";
  if (scenario == "decode") return "decode " + cell("variant");
  return "linear " + cell("format");
}

std::string cell_of(const Row& r, const std::string& column) {
  for (const auto& [k, v] : r)
    if (k == column) return v;
  return "";
}

}  // namespace

Params point_params(const std::string& key) {
  Params p;
  size_t start = 0;
  while (start <= key.size()) {
    size_t end = key.find(';', start);
    if (end == std::string::npos) end = key.size();
    const std::string kv = key.substr(start, end - start);
    const size_t eq = kv.find('=');
    if (eq != std::string::npos) p[kv.substr(0, eq)] = kv.substr(eq + 1);
    start = end + 1;
  }
  return p;
}

double FidelityPoint::error() const { return std::max(predicted_s / measured_s, measured_s / predicted_s) - 1.0; }

FidelitySummary summarize(const std::vector<FidelityPoint>& pts) {
  FidelitySummary s;
  std::vector<double> e;
  for (const auto& p : pts) e.push_back(p.error());
  s.points = e.size();
  if (e.empty()) return s;
  std::sort(e.begin(), e.end());
  s.median = e.size() % 2 ? e[e.size() / 2] : 0.5 * (e[e.size() / 2 - 1] + e[e.size() / 2]);
  s.worst = e.back();
  for (double x : e) s.mean += x / double(e.size());
  return s;
}

std::vector<FidelityPoint> repredict_results(const fs::path& dir, bool write) {
  std::vector<FidelityPoint> out;
  std::vector<fs::path> csvs;
  for (const auto& f : fs::directory_iterator(dir))
    if (f.path().extension() == ".csv") csvs.push_back(f.path());
  std::sort(csvs.begin(), csvs.end());
  for (const auto& csv : csvs) {
    fs::path prov = csv;
    prov.replace_extension(".json");
    if (!fs::exists(prov)) continue;
    const std::string scenario = read_json_file(prov).value("scenario", std::string());
    if (scenario != "attention" && scenario != "decode" && scenario != "linear") continue;
    const Scenario& sc = find_scenario(scenario);
    ResultTable table = read_csv(csv);
    for (auto& row : table.rows) {
      const auto m = row.find("measured_s");
      if (m == row.end() || m->second.empty()) continue;
      Params p = point_params(row.at("point"));
      // Committed rows spell kv_heads as they were measured ("gqa-8" in the old query-heads-per-group
      // sense); the row's kv_heads_count says what it meant.
      if (p.count("kv_heads") && row.count("kv_heads_count") && !row.at("kv_heads_count").empty())
        p["kv_heads"] = row.at("kv_heads_count");
      // Measured points are predicted with the ceilings measured on their GPU (where a file exists).
      p["ceilings"] = "auto";
      const std::vector<Row> rows = sc.predict(complete_params(sc, p));
      const Row& r = rows.at(0);
      FidelityPoint fp;
      fp.file = csv.stem().string();
      fp.family = family_of(scenario, row);
      fp.point = row.at("point");
      fp.predicted_s = std::stod(cell_of(r, "predicted_s"));
      fp.measured_s = std::stod(m->second);
      fp.dominant = cell_of(r, "dominant");
      if (const auto c = row.find("measured_commit"); c != row.end())
        fp.measured_commit = c->second.substr(0, c->second.find(' '));
      if (!(fp.measured_s > 0)) throw Error(csv.string() + ": point " + fp.point + " has a non-positive measured_s");
      out.push_back(fp);
      if (write) {
        for (const auto& [k, v] : r) {
          if (k == "ceilings" || k.rfind("measured", 0) == 0 || k == "kernels" || k == "rel_error") continue;
          row[k] = v;
        }
        row["model_error"] = num((fp.predicted_s - fp.measured_s) / fp.measured_s);
        if (row.count("measured_bf16_s") && !row["measured_bf16_s"].empty())
          row["predicted_speedup"] = cell_of(r, "predicted_speedup");
        for (const auto& [k, _] : r)
          if (std::find(table.columns.begin(), table.columns.end(), k) == table.columns.end()) table.columns.push_back(k);
      }
    }
    if (write) write_file_atomic(csv, table.to_csv());
  }
  return out;
}

std::string fidelity_table(const std::vector<FidelityPoint>& pts) {
  std::map<std::string, std::vector<FidelityPoint>> by;
  for (const auto& p : pts) by[p.family].push_back(p);
  std::string s = "| kernel family | points | median error | worst error | dominant terms (points) |\n|---|---|---|---|---|\n";
  char buf[256];
  for (const auto& [fam, v] : by) {
    const FidelitySummary f = summarize(v);
    std::map<std::string, int> dom;
    for (const auto& p : v) ++dom[p.dominant];
    std::string d;
    for (const auto& [k, n] : dom) d += (d.empty() ? "" : ", ") + k + " (" + std::to_string(n) + ")";
    std::snprintf(buf, sizeof buf, "| %s | %zu | %.1f%% | %.1f%% | ", fam.c_str(), f.points, 100 * f.median, 100 * f.worst);
    s += buf + d + " |\n";
  }
  const FidelitySummary all = summarize(pts);
  std::snprintf(buf, sizeof buf, "| **all** | %zu | %.1f%% | %.1f%% | |\n", all.points, 100 * all.median, 100 * all.worst);
  return s + buf;
}

}  // namespace inferlab
