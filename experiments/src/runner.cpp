#include "inferlab/experiments/runner.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <map>
#include <set>
#include <unistd.h>

#include "inferlab/experiments/plots.h"
#include "inferlab/experiments/provenance.h"
#include "inferlab/experiments/results.h"
#include "inferlab/experiments/scenarios.h"
#include "inferlab/sim/error.h"
#include "inferlab/sim/io.h"
#include "inferlab/sim/paths.h"
#include "inferlab/sim/warnings.h"
#include "resume.h"

namespace inferlab {
namespace fs = std::filesystem;
namespace {

std::atomic<bool> g_stop{false};

extern "C" void on_signal(int) { g_stop.store(true); }

struct SignalGuard {
  using Handler = void (*)(int);
  Handler old_int, old_term;
  SignalGuard() {
    g_stop.store(false);
    old_int = std::signal(SIGINT, on_signal);
    old_term = std::signal(SIGTERM, on_signal);
  }
  ~SignalGuard() {
    std::signal(SIGINT, old_int);
    std::signal(SIGTERM, old_term);
  }
};

std::string describe(const Params& given) {
  std::string s;
  for (const auto& [k, v] : given) s += (s.empty() ? "" : " ") + k + "=" + v;
  return s;
}

// A row as the results file holds it: the point's key, its parameters, the scenario's columns.
Row result_row(const std::string& key, const Params& params, const Row& r) {
  Row full{{"point", key}};
  for (const auto& [k, v] : params) full.emplace_back(k, v);
  full.insert(full.end(), r.begin(), r.end());
  return full;
}

// True when `dir` is data/results/ of the project or below it.
bool inside_committed_results(const fs::path& dir) {
  const fs::path results = fs::weakly_canonical(data_dir() / "results");
  const fs::path d = fs::weakly_canonical(fs::absolute(dir));
  auto r = results.begin(), x = d.begin();
  for (; r != results.end(); ++r, ++x)
    if (x == d.end() || *x != *r) return false;
  return true;
}

// One progress line per point: rewritten in place on a terminal, at most one a second in a log.
class Progress {
 public:
  Progress(bool on, std::size_t total, const char* verb)
      : on_(on), total_(total), verb_(verb), width_(int(std::to_string(total).size())),
        tty_(::isatty(::fileno(stderr)) != 0) {}
  void point(std::size_t i, const Params& p, double seconds, bool always) {
    if (!on_) return;
    const bool last = i + 1 == total_;
    if (tty_) {
      std::fprintf(stderr, "\r\033[K  %s [%*zu/%zu] %s%s", verb_, width_, i + 1, total_,
                   describe(p).substr(0, 100).c_str(), last ? "\n" : "");
    } else if (last || always || clock::now() - last_ > std::chrono::seconds(1)) {
      std::fprintf(stderr, "  %s [%*zu/%zu] %s%s\n", verb_, width_, i + 1, total_, describe(p).c_str(),
                   always ? (" (" + std::to_string(int(seconds * 1000)) + " ms)").c_str() : "");
      last_ = clock::now();
    }
  }
  void stopped() {
    if (on_ && tty_) std::fprintf(stderr, "\n");
  }

 private:
  using clock = std::chrono::steady_clock;
  bool on_;
  std::size_t total_;
  const char* verb_;
  int width_;
  bool tty_;
  clock::time_point last_ = clock::now() - std::chrono::seconds(2);
};

}  // namespace

void request_stop() { g_stop.store(true); }

fs::path default_out_dir(const GpuInfo& gpu, bool predict_only) {
  return fs::current_path() / "out" / (predict_only || !gpu.present ? std::string("model") : gpu.slug());
}

PredictedSpec predict_spec(const Spec& spec, const RunOptions& opt) {
  using clock = std::chrono::steady_clock;
  PredictedSpec ps;
  try {
    ps.scenario = &find_scenario(spec.scenario);
  } catch (const Error& e) {
    throw Error(spec.location("scenario") + ": " + e.what());
  }
  const Scenario& scenario = *ps.scenario;
  const std::vector<Point> all = spec.points();
  for (std::size_t i = 0; i < all.size(); ++i)
    if (int64_t(i) % opt.shard.count == opt.shard.index) {
      ps.index.push_back(int64_t(i));
      ps.given.push_back(all[i].params);
    }
  const bool takes_ceilings = std::any_of(scenario.params.begin(), scenario.params.end(),
                                          [](const ParamInfo& pi) { return pi.name == "ceilings"; });
  Progress predicting(opt.progress, ps.given.size(), "predicting");
  for (Params& given : ps.given) {
    if (g_stop.load() || (opt.stop_after >= 0 && int64_t(ps.completed.size()) >= opt.stop_after)) {
      predicting.stopped();
      return ps;  // interrupted while predicting
    }
    const Params as_given = given;
    if (!opt.ceilings.empty() && takes_ceilings) {
      if (given.count("ceilings"))
        throw Error(spec.location("ceilings") + ": the spec sets ceilings (" + given.at("ceilings") +
                    ") and --ceilings " + opt.ceilings + " was given: drop one of them");
      given["ceilings"] = opt.ceilings;
    }
    const auto start = clock::now();
    try {
      ps.completed.push_back(complete_params(scenario, given));
      ps.predicted.push_back(scenario.predict(ps.completed.back()));
    } catch (const Error& e) {
      // Name the line of the first parameter the message mentions, else the spec file.
      std::string where = spec.path.string();
      const std::string msg = e.what();
      for (const auto& [k, _] : as_given)
        if (msg.find("'" + k + "'") != std::string::npos) {
          where = spec.location(k);
          break;
        }
      throw Error(where + ": point {" + describe(as_given) + "}: " + msg);
    }
    predicting.point(ps.completed.size() - 1, given, std::chrono::duration<double>(clock::now() - start).count(), false);
  }
  // The point's key in the file: its parameters, completed with the scenario's defaults.
  for (const auto& c : ps.completed) {
    std::string k;
    for (const auto& [name, value] : c) k += (k.empty() ? "" : ";") + name + "=" + value;
    ps.keys.push_back(k);
  }
  ps.complete = true;
  return ps;
}

ResultTable PredictedSpec::table() const {
  ResultTable t;
  for (std::size_t i = 0; i < predicted.size(); ++i)
    for (const Row& r : predicted[i]) t.add(result_row(keys[i], completed[i], r));
  return t;
}

RunResult run_spec(const Spec& spec, const RunOptions& opt, const GpuInfo& gpu) {
  SignalGuard guard;
  using clock = std::chrono::steady_clock;
  const fs::path out = opt.out_dir.empty() ? default_out_dir(gpu, opt.predict_only) : opt.out_dir;
  if (!opt.allow_dirty && inside_committed_results(out)) {
    const std::string commit = git_commit();
    if (tree_has_changes())
      throw Error(out.string() + " holds committed results, and the tree has uncommitted changes (git status): their "
                  "provenance would record " + commit + ". Commit first, write elsewhere (--out), or pass --allow-dirty");
  }
  const Scenario* scenario = nullptr;
  try {
    scenario = &find_scenario(spec.scenario);
  } catch (const Error& e) {
    throw Error(spec.location("scenario") + ": " + e.what());
  }

  RunResult res;
  const auto measure = opt.measure ? opt.measure : scenario->measure;
  res.measured = !opt.predict_only && measure && (opt.measure || gpu.present);
  res.csv = out / (spec.name + opt.shard.suffix() + ".csv");
  res.provenance = out / (spec.name + opt.shard.suffix() + ".json");

  // 1. Every point is checked and predicted before anything is written.
  RunOptions popt = opt;
  if (res.measured) popt.stop_after = -1;  // a test's stop_after counts measured points then
  PredictedSpec ps = predict_spec(spec, popt);
  res.points = int64_t(ps.given.size());
  if (!ps.complete) {
    res.ran = int64_t(ps.completed.size());
    return res;  // interrupted while predicting: nothing written
  }
  const std::vector<Params>& points = ps.given;
  const std::vector<Params>& completed = ps.completed;
  std::vector<std::vector<Row>>& predicted = ps.predicted;

  // Ceilings: points left to `auto` must not mix measured and datasheet figures.
  std::set<std::string> sources, auto_sources;
  for (std::size_t i = 0; i < points.size(); ++i)
    for (const Row& r : predicted[i]) {
      const std::string c = get_cell(r, "ceilings");
      if (c.empty()) continue;
      sources.insert(c);
      if (completed[i].count("ceilings") && completed[i].at("ceilings") == "auto") auto_sources.insert(c);
    }
  if (auto_sources.count("datasheet") && auto_sources.size() > 1)
    throw Error(spec.location("ceilings") + ": ceilings 'auto' would mix datasheet figures with " +
                *std::find_if(auto_sources.begin(), auto_sources.end(), [](const std::string& c) { return c != "datasheet"; }) +
                " across the points (only some GPUs have a measured file): set ceilings: datasheet to compare GPUs on the "
                "same footing, or measured");

  auto table_of = [&] { return ps.table(); };
  // The rows about to be written. A shard holds only some of them, so a figure may have none of its rows
  // there: the figures are checked when `merge` has joined the shards.
  if (!spec.plots.empty() && opt.shard.whole()) check_plots(table_of().to_csv(), spec.plots);

  // Warnings of the inputs (a model config read with an assumption): kept in the provenance, and
  // noted again for the caller to show.
  const std::vector<std::string> warnings = drain_warnings();
  for (const auto& w : warnings) note_warning(w);

  if (opt.predict_only)
    res.mode_reason = "predict-only requested";
  else if (!measure)
    res.mode_reason = "scenario '" + spec.scenario + "' has no kernel to measure: predictions only";
  else if (!res.measured)
    res.mode_reason = "no GPU (" + gpu.reason + "): predictions only";
  else
    res.mode_reason = "measured on " + gpu.name;

  // 2. Measurements of an earlier run of these points are kept (src/resume.h).
  const detail::EarlierRuns earlier =
      opt.fresh ? detail::EarlierRuns{} : detail::read_earlier(*scenario, res.csv, res.provenance);
  std::vector<bool> done(points.size(), false);
  std::set<std::string> measurement_keys;
  std::map<std::string, int64_t> commits;  // measured_commit -> points kept
  for (std::size_t i = 0; i < points.size(); ++i) {
    detail::CsvRow id(completed[i].begin(), completed[i].end());
    if (!predicted[i].empty() && !get_cell(predicted[i][0], "kv_heads_count").empty())
      id["kv_heads_count"] = get_cell(predicted[i][0], "kv_heads_count");
    const std::string mk = detail::measurement_key(*scenario, id);
    measurement_keys.insert(mk);
    auto it = earlier.measured.find(mk);
    if (it == earlier.measured.end()) continue;
    const bool same_gpu = std::all_of(it->second.begin(), it->second.end(),
                                      [&](const detail::CsvRow& r) { return r.at("measured_on") == gpu.name; });
    if ((res.measured && !same_gpu) || !detail::keep_measured(predicted[i], it->second)) continue;
    done[i] = true;
    ++res.resumed;
    ++commits[it->second.front().at("measured_commit")];
  }
  std::vector<std::string> orphans;
  for (const auto& [mk, _] : earlier.measured)
    if (!measurement_keys.count(mk)) orphans.push_back(mk);
  if (!orphans.empty() && !opt.prune)
    throw Error(res.csv.string() + " holds " + std::to_string(orphans.size()) +
                " measured point(s) the spec no longer has (e.g. {" + earlier.description_of(orphans.front()) +
                "}): --prune drops them, --fresh measures every point again, or give another --out");
  res.pruned = int64_t(orphans.size());

  // Measuring: every pending point passes its preflight (GPU, memory) before the first launch.
  if (res.measured && scenario->preflight && !opt.measure) {
    for (std::size_t i = 0; i < points.size(); ++i) {
      if (done[i]) continue;
      try {
        scenario->preflight(completed[i]);
      } catch (const Error& e) {
        throw Error(spec.path.string() + ": point {" + describe(points[i]) + "}: " + e.what());
      }
    }
  }

  nlohmann::json prov = provenance_json(gpu);
  prov["spec"] = spec.path.string();
  prov["spec_name"] = spec.name;
  prov["spec_hash"] = fnv1a_hex(spec.text);
  prov["scenario"] = spec.scenario;
  prov["description"] = spec.description;
  prov["mode"] = res.measured ? "measured" : "predicted";
  prov["mode_reason"] = res.mode_reason;
  prov["points_total"] = res.points;
  prov["plots"] = spec.plots;
  prov["warnings"] = warnings;
  prov["ceilings"] = sources;
  prov["started"] = utc_now_iso8601();
  if (!opt.shard.whole()) {
    // What `merge` needs to put the rows back in spec order: each point's index in the spec and its rows.
    nlohmann::json rows = nlohmann::json::array();
    for (const auto& p : predicted) rows.push_back(p.size());
    // and the row where each column first appears, for the merged columns to stand in a whole run's order.
    nlohmann::json columns = nlohmann::json::array();
    std::set<std::string> seen;
    int64_t row = 0;
    for (std::size_t i = 0; i < predicted.size(); ++i)
      for (const Row& r : predicted[i]) {
        for (const auto& [k, _] : result_row(ps.keys[i], completed[i], r))
          if (seen.insert(k).second) columns.push_back({k, row});
        ++row;
      }
    prov["shard"] = {{"index", opt.shard.index}, {"count", opt.shard.count}, {"points", ps.index}, {"rows", rows},
                     {"columns", columns}};
  }

  const std::string commit = git_commit();
  auto flush = [&](bool complete) {
    int64_t measured_points = 0;
    std::map<std::string, int64_t> by_commit, by_gpu;
    for (std::size_t i = 0; i < points.size(); ++i)
      if (!predicted[i].empty() && !get_cell(predicted[i][0], "measured_s").empty()) {
        ++measured_points;
        ++by_commit[get_cell(predicted[i][0], "measured_commit")];
        ++by_gpu[get_cell(predicted[i][0], "measured_on")];
      }
    prov["points_measured"] = measured_points;
    prov["measured_commits"] = by_commit;  // the code each measurement was taken with
    prov["measured_on"] = by_gpu;
    prov["complete"] = complete;
    prov["updated"] = utc_now_iso8601();
    write_file_atomic(res.csv, table_of().to_csv());
    write_file_atomic(res.provenance, prov.dump(2) + "\n");
    res.written = true;
  };

  // 3. Predicting only: the file at once. Measuring: the pending points in spec order, the file
  //    written after each, so that an interrupted run keeps every point it finished.
  if (!res.measured) {
    res.ran = res.points;
  } else {
    flush(false);
    if (opt.progress && res.resumed > 0) {
      std::fprintf(stderr, "  %lld measured point(s) kept from the earlier run", static_cast<long long>(res.resumed));
      for (const auto& [c, n] : commits)
        if (c != commit) std::fprintf(stderr, " (%lld measured at %s)", static_cast<long long>(n), c.c_str());
      std::fprintf(stderr, "; --fresh measures them again\n");
    }
    Progress measuring(opt.progress, points.size(), "measuring");
    for (std::size_t i = 0; i < points.size(); ++i) {
      if (done[i]) continue;
      if (g_stop.load() || (opt.stop_after >= 0 && res.ran >= opt.stop_after)) {
        measuring.stopped();
        return res;  // every finished point is in the file already
      }
      const auto start = clock::now();
      try {
        measure(completed[i], predicted[i]);
      } catch (const std::exception& e) {
        throw Error(spec.path.string() + ": point {" + describe(points[i]) + "}: measurement failed: " +
                    e.what() + " (the points measured before it are kept; rerun to go on)");
      }
      for (Row& r : predicted[i]) {
        set_cell(r, "measured_on", gpu.name);
        set_cell(r, "measured_commit", commit);
      }
      ++res.ran;
      flush(false);
      measuring.point(i, points[i], std::chrono::duration<double>(clock::now() - start).count(), true);
    }
  }
  prov["finished"] = utc_now_iso8601();
  flush(true);
  res.complete = true;

  // 4. Figures (a shard's are drawn by `merge`, from every shard's rows).
  if (opt.plots && !spec.plots.empty() && opt.shard.whole()) res.figures = draw_plots(res.csv, spec.plots, out / "figures", spec.name);
  return res;
}

}  // namespace inferlab
