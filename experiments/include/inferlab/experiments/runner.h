#pragma once
// Runs a spec: every point is predicted (and measured, when a GPU and a kernel for the scenario
// are present and --predict-only is not given), one CSV row per point (per operator for the
// `model` scenario), a provenance JSON beside it, then the spec's plots.
//
// Guarantees:
// - Bad input (unknown scenario, parameter, model, hardware, dtype, size, plot entry) is found for
//   every point before anything is written: the error names the spec file and line.
// - Ceilings: a point with `ceilings: auto` takes the measured file where one exists; a spec whose
//   auto points would mix measured and datasheet figures is refused (set datasheet or measured).
// - Files are replaced atomically (temporary file + rename), never half-written; a run that has
//   nothing to write writes nothing.
// - Predictions are computed anew by every run (they are cheap, and always those of the current
//   code, model, hardware and ceilings files). Measurements are kept per point: a point of the
//   spec that an earlier run in the same folder measured on this GPU keeps its measurement
//   (src/resume.h says what makes two points the same), so an extended sweep measures only its
//   new points and an edited comment measures nothing again. A measured point the spec no longer
//   has is not dropped silently: `prune` drops it, `fresh` measures every point again.
// - Ctrl-C (SIGINT/SIGTERM) stops between points: while predicting, nothing is written; while
//   measuring, the file holds every point's prediction and the measurements finished so far, and
//   the same command measures the rest.
#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "inferlab/experiments/results.h"
#include "inferlab/experiments/spec.h"
#include "inferlab/roofline/gpu_info.h"

namespace inferlab {

struct Scenario;

// One shard of a spec's points for a run spread over processes or machines (src/shard.cpp): the
// points whose index in the spec is index, index + count, index + 2 count, ... (index 0-based, below
// count). count 1 is the whole spec.
struct Shard {
  int64_t index = 0, count = 1;
  bool whole() const { return count == 1; }
  std::string suffix() const;  // ".shard-2-of-8" (empty for the whole spec): the results file's name is NAME+suffix
};
// "I/N" as given to --shard: 0 <= I < N. Anything else throws inferlab::Error naming the problem.
Shard parse_shard(const std::string& text);

struct RunOptions {
  bool predict_only = false;
  bool allow_dirty = false; // write into data/results/ from a tree with uncommitted changes
  bool fresh = false;       // keep nothing of an earlier run: every point is measured again
  bool prune = false;       // drop the measured points of an earlier run that the spec no longer has
  bool plots = true;
  bool progress = true;     // progress lines on stderr
  std::filesystem::path out_dir;
  std::string ceilings;     // set `ceilings` on every point whose scenario takes it (a spec setting it too is an error)
  Shard shard;              // run these points only, into NAME.shard-I-of-N.{csv,json}, without figures (`merge` joins them)
  int64_t stop_after = -1;  // tests: behave as if interrupted after this many points (measured, or predicted)
  // Tests: measure with this in place of the scenario's kernels, as on the GPU `gpu` names.
  std::function<void(const Params&, std::vector<Row>&)> measure;
};

struct RunResult {
  std::filesystem::path csv, provenance;
  std::vector<std::filesystem::path> figures;
  int64_t points = 0;      // in the spec
  int64_t ran = 0;         // points predicted (predicting) or measured (measuring) by this run
  int64_t resumed = 0;     // points whose measurement was kept from an earlier run
  int64_t pruned = 0;      // measured points of an earlier run dropped (prune)
  bool complete = false;   // every point predicted, and measured when measuring
  bool written = false;    // the results file was written
  bool measured = false;
  std::string mode_reason; // why measured columns are empty, when they are
};

// The default output folder: out/<gpu slug>, or out/model when predicting only, under the current
// folder. Committed results are written on purpose with --out data/results/...: from a clean tree
// only (the provenance would record a +dirty commit), unless allow_dirty.
std::filesystem::path default_out_dir(const GpuInfo& gpu, bool predict_only);

RunResult run_spec(const Spec& spec, const RunOptions& options, const GpuInfo& gpu);

// The points of a spec (of options.shard), each checked, completed with its scenario's defaults and
// predicted, in spec order; nothing written. Bad input throws inferlab::Error naming the spec line.
// `complete` is false when a stop was requested (or options.stop_after reached) before the last point.
struct PredictedSpec {
  const Scenario* scenario = nullptr;
  std::vector<int64_t> index;             // each point's index among the spec's points
  std::vector<Params> given, completed;   // as the spec gives them (with --ceilings), and completed
  std::vector<std::string> keys;          // the `point` column: the completed parameters
  std::vector<std::vector<Row>> predicted;
  bool complete = false;
  ResultTable table() const;              // the rows as a results file holds them
};
PredictedSpec predict_spec(const Spec& spec, const RunOptions& options);

// Set by SIGINT/SIGTERM while run_spec runs; checked between points.
void request_stop();

}  // namespace inferlab
