#pragma once
// Runs a spec: every point is predicted (and measured, when a GPU and a kernel for the scenario
// are present and --predict-only is not given), one CSV row per point (per operator for the
// `model` scenario), a provenance JSON beside it, then the spec's plots.
//
// Guarantees:
// - Bad input (unknown scenario, parameter, model, hardware, dtype, size) is found for every point
//   before anything is written: the error names the spec file and line.
// - Ceilings: a point with `ceilings: auto` takes the measured file where one exists; a spec whose
//   auto points would mix measured and datasheet figures is refused (set datasheet or measured).
// - Files are replaced atomically (temporary file + rename), never half-written.
// - A run interrupted (Ctrl-C, a killed process) resumes: rerunning the same command keeps the rows
//   already written and runs only the missing points. A results file written by a different spec
//   is never overwritten unless `fresh` is set.
#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "inferlab/experiments/spec.h"
#include "inferlab/roofline/gpu_info.h"

namespace inferlab {

struct RunOptions {
  bool predict_only = false;
  bool allow_dirty = false; // write into data/results/ from a tree with uncommitted changes
  bool fresh = false;       // replace results written by another version of the spec
  bool plots = true;
  bool progress = true;     // progress lines on stderr
  std::filesystem::path out_dir;
  std::string ceilings;     // set `ceilings` on every point whose scenario takes it (a spec setting it too is an error)
  int64_t stop_after = -1;  // tests: behave as if interrupted after this many new points
};

struct RunResult {
  std::filesystem::path csv, provenance;
  std::vector<std::filesystem::path> figures;
  int64_t points = 0;      // in the spec
  int64_t ran = 0;         // evaluated in this run
  int64_t resumed = 0;     // kept from an earlier run
  bool complete = false;
  bool measured = false;
  std::string mode_reason; // why measured columns are empty, when they are
};

// The default output folder: out/<gpu slug>, or out/model when predicting only, under the current
// folder. Committed results are written on purpose with --out data/results/...: from a clean tree
// only (the provenance would record a +dirty commit), unless allow_dirty.
std::filesystem::path default_out_dir(const GpuInfo& gpu, bool predict_only);

RunResult run_spec(const Spec& spec, const RunOptions& options, const GpuInfo& gpu);

// Set by SIGINT/SIGTERM while run_spec runs; checked between points.
void request_stop();

}  // namespace inferlab
