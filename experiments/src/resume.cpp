#include "resume.h"

#include <algorithm>

#include "inferlab/sim/error.h"
#include "inferlab/sim/io.h"

namespace inferlab::detail {
namespace {

// Parameters that change the prediction only: a measurement does not depend on them.
bool prediction_only(const std::string& param) { return param == "hardware" || param == "ceilings"; }

std::string cell(const CsvRow& r, const std::string& column) {
  auto it = r.find(column);
  return it == r.end() ? std::string() : it->second;
}

}  // namespace

CsvRow as_map(const Row& row) {
  CsvRow m;
  for (const auto& [k, v] : row) m[k] = v;
  return m;
}

std::string measurement_key(const Scenario& s, const CsvRow& row) {
  std::string key;
  for (const auto& pi : s.params) {
    if (prediction_only(pi.name)) continue;
    std::string v = cell(row, pi.name);
    if (pi.name == "kv_heads" && !cell(row, "kv_heads_count").empty()) v = cell(row, "kv_heads_count");
    if (!row.count(pi.name)) v = pi.fallback;
    key += (key.empty() ? "" : ";") + pi.name + "=" + v;
  }
  return key;
}

std::string EarlierRuns::description_of(const std::string& key) const {
  std::string s = key;
  std::replace(s.begin(), s.end(), ';', ' ');
  return s;
}

EarlierRuns read_earlier(const Scenario& s, const std::filesystem::path& csv, const std::filesystem::path& provenance) {
  EarlierRuns e;
  std::error_code ec;
  if (!std::filesystem::exists(csv, ec)) return e;
  if (!std::filesystem::exists(provenance, ec))
    throw Error(csv.string() + " exists without its provenance " + provenance.filename().string() +
                "; move it away or rerun with --fresh to replace it");
  const auto prov = read_json_file(provenance);
  const std::string gpu = prov.contains("gpu") ? prov["gpu"].value("name", std::string()) : std::string();
  const std::string commit = prov.value("commit", std::string());
  for (CsvRow r : read_csv(csv).rows) {
    if (cell(r, "measured_s").empty()) continue;
    if (cell(r, "measured_on").empty()) r["measured_on"] = gpu;
    if (cell(r, "measured_commit").empty()) r["measured_commit"] = commit;
    e.measured[measurement_key(s, r)].push_back(std::move(r));
  }
  return e;
}

bool keep_measured(std::vector<Row>& to, const std::vector<CsvRow>& from) {
  if (to.size() != from.size()) return false;
  for (std::size_t i = 0; i < to.size(); ++i) {
    for (const auto& c : raw_measured_columns())
      if (from[i].count(c)) set_cell(to[i], c, from[i].at(c));
    derive_measured(to[i]);
  }
  return true;
}

}  // namespace inferlab::detail
