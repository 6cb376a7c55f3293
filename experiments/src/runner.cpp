#include "inferlab/experiments/runner.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
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

}  // namespace

void request_stop() { g_stop.store(true); }

fs::path default_out_dir(const GpuInfo& gpu, bool predict_only) {
  return fs::current_path() / "out" / (predict_only || !gpu.present ? std::string("model") : gpu.slug());
}

namespace {
// True when `dir` is data/results/ of the project or below it.
bool inside_committed_results(const fs::path& dir) {
  const fs::path results = fs::weakly_canonical(data_dir() / "results");
  const fs::path d = fs::weakly_canonical(fs::absolute(dir));
  auto r = results.begin(), x = d.begin();
  for (; r != results.end(); ++r, ++x)
    if (x == d.end() || *x != *r) return false;
  return true;
}
}  // namespace

RunResult run_spec(const Spec& spec, const RunOptions& opt, const GpuInfo& gpu) {
  SignalGuard guard;
  const fs::path out = opt.out_dir.empty() ? default_out_dir(gpu, opt.predict_only) : opt.out_dir;
  if (!opt.allow_dirty && inside_committed_results(out)) {
    const std::string commit = git_commit();
    if (commit.size() > 6 && commit.compare(commit.size() - 6, 6, "+dirty") == 0)
      throw Error(out.string() + " holds committed results, and the tree has uncommitted changes (git status): their "
                  "provenance would record " + commit + ". Commit first, write elsewhere (--out), or pass --allow-dirty");
  }
  const Scenario* scenario = nullptr;
  try {
    scenario = &find_scenario(spec.scenario);
  } catch (const Error& e) {
    throw Error(spec.location("scenario") + ": " + e.what());
  }

  // 1. Every point is checked and predicted before anything is written.
  std::vector<Point> points = spec.points();
  std::vector<Params> completed;
  std::vector<std::vector<Row>> predicted;
  const bool takes_ceilings = std::any_of(scenario->params.begin(), scenario->params.end(),
                                          [](const ParamInfo& pi) { return pi.name == "ceilings"; });
  for (Point& pt : points) {
    Params& given = pt.params;
    if (!opt.ceilings.empty() && takes_ceilings) {
      if (given.count("ceilings"))
        throw Error(spec.location("ceilings") + ": the spec sets ceilings (" + given.at("ceilings") +
                    ") and --ceilings " + opt.ceilings + " was given: drop one of them");
      given["ceilings"] = opt.ceilings;
    }
    try {
      completed.push_back(complete_params(*scenario, given));
      predicted.push_back(scenario->predict(completed.back()));
    } catch (const Error& e) {
      // Name the line of the first parameter the message mentions, else the spec file.
      std::string where = spec.path.string();
      const std::string msg = e.what();
      for (const auto& [k, _] : pt.params)
        if (msg.find("'" + k + "'") != std::string::npos) {
          where = spec.location(k);
          break;
        }
      throw Error(where + ": point {" + describe(pt.params) + "}: " + msg);
    }
  }

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

  // The plot entries against the rows about to be written, before anything is.
  if (!spec.plots.empty()) {
    ResultTable preview;
    for (std::size_t i = 0; i < points.size(); ++i)
      for (const Row& r : predicted[i]) preview.add(result_row(points[i].key(), completed[i], r));
    check_plots(preview.to_csv(), spec.plots);
  }

  // Warnings of the inputs (a model config read with an assumption): kept in the provenance, and
  // noted again for the caller to show.
  const std::vector<std::string> warnings = drain_warnings();
  for (const auto& w : warnings) note_warning(w);

  RunResult res;
  res.points = int64_t(points.size());
  res.measured = !opt.predict_only && gpu.present && scenario->measure;
  if (opt.predict_only)
    res.mode_reason = "predict-only requested";
  else if (!gpu.present)
    res.mode_reason = "no GPU (" + gpu.reason + "): predictions only";
  else if (!scenario->measure)
    res.mode_reason = "scenario '" + spec.scenario + "' has no kernel to measure: predictions only";
  else
    res.mode_reason = "measured on " + gpu.name;

  res.csv = out / (spec.name + ".csv");
  res.provenance = out / (spec.name + ".json");
  const std::string spec_hash = fnv1a_hex(spec.text);

  // 2. Resume: keep the rows of points an earlier run of the same spec finished.
  ResultTable table;
  std::set<std::string> done;
  std::error_code ec;
  if (fs::exists(res.csv, ec) && !opt.fresh) {
    if (!fs::exists(res.provenance, ec))
      throw Error(res.csv.string() + " exists without its provenance " + res.provenance.filename().string() +
                  "; move it away or rerun with --fresh to replace it");
    const auto old = read_json_file(res.provenance);
    if (old.value("spec_hash", std::string()) != spec_hash)
      throw Error(res.csv.string() + " was written by a different version of " + spec.path.string() +
                  "; rerun with --fresh to replace it, or give another --out");
    table = read_csv(res.csv);
    for (const auto& r : table.rows)
      if (auto it = r.find("point"); it != r.end()) done.insert(it->second);
  }

  // Measuring: every pending point passes its preflight (GPU, memory) before the first launch.
  if (res.measured && scenario->preflight) {
    for (std::size_t i = 0; i < points.size(); ++i) {
      if (done.count(points[i].key())) continue;
      try {
        scenario->preflight(completed[i]);
      } catch (const Error& e) {
        throw Error(spec.path.string() + ": point {" + describe(points[i].params) + "}: " + e.what());
      }
    }
  }

  nlohmann::json prov = provenance_json(gpu);
  prov["spec"] = spec.path.string();
  prov["spec_name"] = spec.name;
  prov["spec_hash"] = spec_hash;
  prov["scenario"] = spec.scenario;
  prov["description"] = spec.description;
  prov["mode"] = res.measured ? "measured" : "predicted";
  prov["mode_reason"] = res.mode_reason;
  prov["points_total"] = res.points;
  prov["plots"] = spec.plots;
  prov["warnings"] = warnings;
  prov["ceilings"] = sources;
  prov["started"] = utc_now_iso8601();

  auto flush = [&](bool complete) {
    write_file_atomic(res.csv, table.to_csv());
    prov["points_done"] = res.ran + res.resumed;
    prov["complete"] = complete;
    prov["updated"] = utc_now_iso8601();
    write_file_atomic(res.provenance, prov.dump(2) + "\n");
  };

  // 3. Run the missing points in spec order, writing as we go.
  using clock = std::chrono::steady_clock;
  auto last_flush = clock::now();
  auto last_progress = clock::now() - std::chrono::seconds(2);
  const bool tty = ::isatty(::fileno(stderr)) != 0;
  const int width = int(std::to_string(points.size()).size());
  bool interrupted = false;
  for (std::size_t i = 0; i < points.size(); ++i) {
    const std::string key = points[i].key();
    if (done.count(key)) {
      ++res.resumed;
      continue;
    }
    if (g_stop.load() || (opt.stop_after >= 0 && res.ran >= opt.stop_after)) {
      interrupted = true;
      break;
    }
    const auto point_start = clock::now();
    if (res.measured) {
      try {
        scenario->measure(completed[i], predicted[i]);
      } catch (const std::exception& e) {
        flush(false);  // keep what was measured; a rerun resumes here
        throw Error(spec.path.string() + ": point {" + describe(points[i].params) + "}: measurement failed: " +
                    e.what());
      }
    }
    for (const Row& r : predicted[i]) table.add(result_row(key, completed[i], r));
    ++res.ran;
    if (opt.progress) {
      // On a terminal one line is rewritten; in a log at most one line a second, and the last point.
      const bool last = i + 1 == points.size();
      if (tty) {
        std::fprintf(stderr, "\r\033[K  [%*zu/%zu] %s%s", width, i + 1, points.size(),
                     describe(points[i].params).substr(0, 110).c_str(), last ? "\n" : "");
      } else if (last || res.measured || clock::now() - last_progress > std::chrono::seconds(1)) {
        const double secs = std::chrono::duration<double>(clock::now() - point_start).count();
        std::fprintf(stderr, "  [%*zu/%zu] %s%s\n", width, i + 1, points.size(), describe(points[i].params).c_str(),
                     res.measured ? (" (" + std::to_string(int(secs * 1000)) + " ms)").c_str() : "");
        last_progress = clock::now();
      }
    }
    if (res.measured || clock::now() - last_flush > std::chrono::seconds(1)) {
      flush(false);
      last_flush = clock::now();
    }
  }
  if (interrupted) {
    flush(false);
    return res;
  }
  prov["finished"] = utc_now_iso8601();
  flush(true);
  res.complete = true;
  if (opt.progress && res.resumed > 0)
    std::fprintf(stderr, "  resumed: %lld points kept from the earlier run\n", static_cast<long long>(res.resumed));

  // 4. Figures.
  if (opt.plots && !spec.plots.empty()) res.figures = draw_plots(res.csv, spec.plots, out / "figures", spec.name);
  return res;
}

}  // namespace inferlab
