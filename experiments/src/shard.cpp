#include "inferlab/experiments/shard.h"

#include <algorithm>
#include <map>
#include <regex>
#include <set>
#include <tuple>

#include "inferlab/experiments/plots.h"
#include "inferlab/experiments/provenance.h"
#include "inferlab/experiments/results.h"
#include "inferlab/experiments/runner.h"
#include "inferlab/sim/error.h"
#include "inferlab/sim/io.h"
#include "inferlab/sim/paths.h"

namespace inferlab {
namespace fs = std::filesystem;

std::string Shard::suffix() const {
  return whole() ? std::string() : ".shard-" + std::to_string(index) + "-of-" + std::to_string(count);
}

Shard parse_shard(const std::string& text) {
  const std::string what = "--shard '" + text + "'";
  const auto slash = text.find('/');
  if (slash == std::string::npos || text.find('/', slash + 1) != std::string::npos)
    throw Error(what + ": expected I/N, shard I of N shards (I from 0 to N-1), e.g. 0/4");
  const auto i = parse_integer(text.substr(0, slash)), n = parse_integer(text.substr(slash + 1));
  if (!i || !n) throw Error(what + ": I and N must be whole numbers (shard I of N, I from 0 to N-1)");
  if (*n < 1) throw Error(what + ": N, the number of shards, must be at least 1");
  if (*i < 0 || *i >= *n)
    throw Error(what + ": shard index " + std::to_string(*i) + " is out of range: the " + std::to_string(*n) +
                " shards are numbered 0 to " + std::to_string(*n - 1));
  return Shard{*i, *n};
}

namespace {

const std::regex kShardName(R"((.+)\.shard-([0-9]+)-of-([0-9]+)\.(json|csv))");

struct ShardFile {
  fs::path json, csv;
  std::string name;
  nlohmann::json prov;
  int64_t index = 0, count = 0;
  ResultTable table;
};

ShardFile open_shard(const fs::path& file) {
  std::smatch m;
  const std::string base = file.filename().string();
  if (!std::regex_match(base, m, kShardName))
    throw Error(file.string() + " is not a shard's results (NAME.shard-I-of-N.csv or .json, written by `inferlab run "
                "SPEC --shard I/N`)");
  ShardFile s;
  s.name = m[1];
  s.json = file.parent_path() / (s.name + ".shard-" + std::string(m[2]) + "-of-" + std::string(m[3]) + ".json");
  s.csv = s.json;
  s.csv.replace_extension(".csv");
  for (const fs::path& f : {s.json, s.csv})
    if (!fs::is_regular_file(f)) throw Error(f.string() + " not found: a shard is its CSV and its provenance JSON");
  s.prov = read_json_file(s.json);
  const auto& sh = s.prov.value("shard", nlohmann::json());
  if (!sh.is_object() || !sh.contains("index") || !sh.contains("count") || !sh.contains("points") || !sh.contains("rows"))
    throw Error(s.json.string() + ": no shard record in this provenance (it was not written by `inferlab run --shard`)");
  s.index = sh["index"].get<int64_t>();
  s.count = sh["count"].get<int64_t>();
  if (std::to_string(s.index) != std::string(m[2]) || std::to_string(s.count) != std::string(m[3]))
    throw Error(s.json.string() + ": its provenance records shard " + std::to_string(s.index) + " of " +
                std::to_string(s.count) + ", not the one its name says");
  s.table = read_csv(s.csv);
  int64_t rows = 0;
  for (const auto& r : sh["rows"]) rows += r.get<int64_t>();
  if (rows != int64_t(s.table.rows.size()))
    throw Error(s.csv.string() + ": " + std::to_string(s.table.rows.size()) + " rows where its provenance lists " +
                std::to_string(rows) + " (a file edited or cut short)");
  return s;
}

// Every shard file named by the inputs: a folder stands for the shards in it.
std::vector<fs::path> shard_files(const std::vector<fs::path>& inputs) {
  std::vector<fs::path> files;
  for (const fs::path& in : inputs) {
    if (fs::is_directory(in)) {
      std::vector<fs::path> here;
      bool any_csv = false;
      for (const auto& e : fs::directory_iterator(in)) {
        const std::string n = e.path().filename().string();
        any_csv = any_csv || e.path().extension() == ".csv";
        std::smatch m;
        if (e.is_regular_file() && std::regex_match(n, m, kShardName) && m[4] == "json") here.push_back(e.path());
      }
      if (here.empty())
        throw Error(any_csv ? in.string() + " holds no shard results (NAME.shard-I-of-N.json, written by `inferlab run "
                                            "SPEC --shard I/N`): nothing to merge"
                            : in.string() + " holds no results CSV: nothing to merge");
      std::sort(here.begin(), here.end());
      files.insert(files.end(), here.begin(), here.end());
    } else if (fs::exists(in)) {
      files.push_back(in);
    } else {
      throw Error(in.string() + " not found");
    }
  }
  return files;
}

std::string same_code(const std::string& commit) { return commit.substr(0, commit.find(' ')); }

std::string label(const ShardFile& s) { return "shard " + std::to_string(s.index) + " (" + s.json.string() + ")"; }

// The shards of one spec must agree on what they ran.
void check_agree(const std::string& name, const std::vector<ShardFile>& shards) {
  const ShardFile& a = shards.front();
  const std::vector<std::pair<std::string, std::string>> fields = {
      {"spec_hash", "different specs (the spec's text differs): run every shard from one spec"},
      {"commit", "different code: run every shard from one commit"},
      {"ceilings", "different ceilings: give every shard the same ceilings files"},
      {"scenario", "different scenarios"},
      {"mode", "predicted and measured shards: run every shard the same way (--predict-only on all, or none)"}};
  for (const ShardFile& b : shards) {
    if (b.count != a.count)
      throw Error(name + ": shards of different splits: " + label(a) + " is one of " + std::to_string(a.count) + ", " +
                  label(b) + " one of " + std::to_string(b.count));
    for (const auto& [field, why] : fields) {
      auto va = a.prov.value(field, nlohmann::json()), vb = b.prov.value(field, nlohmann::json());
      if (field == "ceilings" && (a.prov["shard"]["points"].empty() || b.prov["shard"]["points"].empty()))
        continue;  // a shard without a point used no ceilings
      if (field == "commit" && va.is_string() && vb.is_string()) {
        // "C (built from)" on a machine without the tree's .git is the same code as "C".
        va = same_code(va.get<std::string>());
        vb = same_code(vb.get<std::string>());
      }
      if (va != vb)
        throw Error(name + ": the shards come from " + why + ": " + label(a) + " has " + field + " " + va.dump() + ", " +
                    label(b) + " has " + vb.dump());
    }
    if (!b.prov.value("complete", false))
      throw Error(name + ": " + label(b) + " is incomplete (interrupted): the same `inferlab run ... --shard " +
                  std::to_string(b.index) + "/" + std::to_string(b.count) + "` command finishes it");
  }
}

struct Merged {
  MergedSpec spec;
  ResultTable table;
  nlohmann::json prov;
  std::vector<nlohmann::json> plots;
};

Merged merge_one(const std::string& name, std::vector<ShardFile>& shards, const fs::path& out) {
  std::sort(shards.begin(), shards.end(), [](const ShardFile& x, const ShardFile& y) { return x.index < y.index; });
  for (std::size_t i = 1; i < shards.size(); ++i)
    if (shards[i].index == shards[i - 1].index)
      throw Error(name + ": shard " + std::to_string(shards[i].index) + " given twice: " + shards[i - 1].json.string() +
                  " and " + shards[i].json.string());
  check_agree(name, shards);
  const int64_t n = shards.front().count;
  std::vector<std::string> missing;
  for (int64_t i = 0, k = 0; i < n; ++i) {
    if (k < int64_t(shards.size()) && shards[k].index == i)
      ++k;
    else
      missing.push_back(std::to_string(i));
  }
  if (!missing.empty())
    throw Error(name + ": shard" + (missing.size() > 1 ? "s " : " ") + join(missing, ", ") + " of " + std::to_string(n) +
                " missing: run `inferlab run SPEC --shard I/" + std::to_string(n) + "` for " +
                (missing.size() > 1 ? "them" : "it") + " first");

  // Where every point of the spec is: (shard, first row, rows), by its index in the spec.
  struct Place {
    std::size_t shard;
    int64_t first, rows, first_global = 0;
  };
  std::map<int64_t, Place> places;
  for (std::size_t s = 0; s < shards.size(); ++s) {
    const auto& sh = shards[s].prov["shard"];
    int64_t row = 0;
    for (std::size_t k = 0; k < sh["points"].size(); ++k) {
      const int64_t idx = sh["points"][k].get<int64_t>(), rows = sh["rows"][k].get<int64_t>();
      if (!places.emplace(idx, Place{s, row, rows}).second)
        throw Error(name + ": point " + std::to_string(idx) + " of the spec is in two shards (" + label(shards[s]) +
                    " and " + label(shards[places.at(idx).shard]) + ")");
      row += rows;
    }
  }
  const int64_t total = int64_t(places.size());
  if (total == 0 || places.rbegin()->first != total - 1)
    throw Error(name + ": the shards' points are not the spec's points 0 to " + std::to_string(total - 1));

  // The rows in spec order, and each shard row's place in the merged file.
  Merged m;
  std::vector<std::vector<int64_t>> global_row(shards.size());
  for (std::size_t s = 0; s < shards.size(); ++s) global_row[s].resize(shards[s].table.rows.size());
  for (auto& [idx, p] : places) {
    p.first_global = int64_t(m.table.rows.size());
    for (int64_t r = 0; r < p.rows; ++r) {
      global_row[p.shard][p.first + r] = int64_t(m.table.rows.size());
      m.table.rows.push_back(shards[p.shard].table.rows[p.first + r]);
    }
  }
  // The columns in order of first appearance over the merged rows, as one run of the whole spec writes them.
  std::vector<std::tuple<int64_t, std::size_t, std::size_t, std::string>> first;  // (merged row, shard, order, column)
  std::set<std::string> named;
  for (std::size_t s = 0; s < shards.size(); ++s) {
    const auto& cols = shards[s].prov["shard"].value("columns", nlohmann::json::array());
    for (std::size_t c = 0; c < cols.size(); ++c)
      first.emplace_back(global_row[s].at(cols[c][1].get<int64_t>()), s, c, cols[c][0].get<std::string>());
  }
  std::sort(first.begin(), first.end());
  for (const auto& f : first)
    if (named.insert(std::get<3>(f)).second) m.table.columns.push_back(std::get<3>(f));
  for (const ShardFile& s : shards)
    for (const auto& c : s.table.columns)
      if (!c.empty() && named.insert(c).second) m.table.columns.push_back(c);  // a provenance without the column record

  // One provenance: the first shard's, with the counts of all and where each shard ran.
  m.prov = shards.front().prov;
  m.prov.erase("shard");
  int64_t points = 0, measured = 0;
  std::map<std::string, int64_t> by_commit, by_gpu;
  nlohmann::json from = nlohmann::json::array(), warnings = nlohmann::json::array();
  std::set<std::string> ceilings;
  std::string started = m.prov.value("started", ""), finished = m.prov.value("finished", "");
  for (const ShardFile& s : shards) {
    points += s.prov.value("points_total", int64_t(0));
    measured += s.prov.value("points_measured", int64_t(0));
    for (const auto& [k, v] : s.prov.value("measured_commits", nlohmann::json::object()).items()) by_commit[k] += v.get<int64_t>();
    for (const auto& [k, v] : s.prov.value("measured_on", nlohmann::json::object()).items()) by_gpu[k] += v.get<int64_t>();
    for (const auto& c : s.prov.value("ceilings", nlohmann::json::array())) ceilings.insert(c.get<std::string>());
    for (const auto& w : s.prov.value("warnings", nlohmann::json::array()))
      if (std::find(warnings.begin(), warnings.end(), w) == warnings.end()) warnings.push_back(w);
    started = std::min(started, s.prov.value("started", started));
    finished = std::max(finished, s.prov.value("finished", finished));
    from.push_back({{"shard", s.index},
                    {"file", s.json.filename().string()},
                    {"host", s.prov.value("host", "")},
                    {"gpu", s.prov.value("gpu", nlohmann::json::object()).value("name", "")},
                    {"started", s.prov.value("started", "")},
                    {"finished", s.prov.value("finished", "")}});
  }
  m.prov["points_total"] = points;
  m.prov["points_measured"] = measured;
  m.prov["measured_commits"] = by_commit;
  m.prov["measured_on"] = by_gpu;
  m.prov["warnings"] = warnings;
  m.prov["ceilings"] = ceilings;
  m.prov["started"] = started;
  m.prov["finished"] = finished;
  m.prov["updated"] = utc_now_iso8601();
  m.prov["complete"] = true;
  m.prov["merged"] = {{"shards", n}, {"from", from}};
  for (const auto& p : m.prov.value("plots", nlohmann::json::array())) m.plots.push_back(p);

  m.spec.spec_name = name;
  m.spec.csv = out / (name + ".csv");
  m.spec.provenance = out / (name + ".json");
  for (const ShardFile& s : shards) m.spec.shards.push_back(s.json);
  m.spec.points = points;
  m.spec.rows = int64_t(m.table.rows.size());
  return m;
}

}  // namespace

std::vector<MergedSpec> merge_shards(const std::vector<fs::path>& inputs, const MergeOptions& opt) {
  if (inputs.empty()) throw Error("merge: name the shards' folder or files");
  std::map<std::string, std::vector<ShardFile>> by_spec;
  for (const fs::path& f : shard_files(inputs)) {
    ShardFile s = open_shard(f);
    const std::string spec = s.prov.value("spec_name", s.name);
    if (spec != s.name)
      throw Error(s.json.string() + ": its provenance names spec '" + spec + "', its file name '" + s.name + "'");
    auto& group = by_spec[s.name];
    if (std::any_of(group.begin(), group.end(), [&](const ShardFile& g) { return fs::equivalent(g.json, s.json); }))
      continue;  // named twice (a folder and a file in it)
    group.push_back(std::move(s));
  }
  const fs::path out = opt.out_dir.empty() ? by_spec.begin()->second.front().json.parent_path() : opt.out_dir;
  if (!fs::is_directory(out)) throw Error("merge: output folder " + out.string() + " does not exist");

  // Every spec is merged in memory and checked before the first file is written.
  std::vector<Merged> merged;
  for (auto& [name, shards] : by_spec) merged.push_back(merge_one(name, shards, out));
  for (const Merged& m : merged)
    if (!m.plots.empty()) check_plots(m.table.to_csv(), m.plots);
  std::vector<MergedSpec> result;
  for (Merged& m : merged) {
    write_file_atomic(m.spec.csv, m.table.to_csv());
    write_file_atomic(m.spec.provenance, m.prov.dump(2) + "\n");
  }
  for (Merged& m : merged) {
    if (opt.plots && !m.plots.empty()) m.spec.figures = draw_plots(m.spec.csv, m.plots, out / "figures", m.spec.spec_name);
    result.push_back(m.spec);
  }
  return result;
}

}  // namespace inferlab
