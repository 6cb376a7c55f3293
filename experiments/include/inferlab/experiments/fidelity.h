#pragma once
// The model against the kernels it stands beside: every committed measured point re-predicted with
// the model of this build (the row's parameters through its scenario), and the symmetric error
// max(p/m, m/p) - 1 per point, per kernel family and over all points. `inferlab fidelity` prints it
// (and with --write refreshes the predicted columns of the committed CSVs); the fidelity test
// asserts it, so a kernel or model change that breaks the model's fidelity fails CI.
#include <filesystem>
#include <string>
#include <vector>

#include "inferlab/experiments/spec.h"

namespace inferlab {

struct FidelityPoint {
  std::string file;      // the CSV's stem: attention_prefill, decode_attention, compression
  std::string family;    // the kernel family: "flash prefill", "naive prefill", "decode plain", "linear int4", ...
  std::string point;     // the row's parameters
  double predicted_s = 0, measured_s = 0;
  std::string dominant;  // the refined model's largest term
  std::string measured_commit;  // the commit whose build measured the point (the row's measured_commit, its hash only)
  double error() const;  // max(p/m, m/p) - 1
};

struct FidelitySummary {
  size_t points = 0;
  double median = 0, worst = 0, mean = 0;
};
FidelitySummary summarize(const std::vector<FidelityPoint>& pts);

// A row's `point` ("k=v;k=v;...") as its parameters.
Params point_params(const std::string& point);

// Every row with a measured time in the CSVs of `dir` whose provenance names the attention, decode
// or linear scenario. With `write`, the CSVs' predicted columns are replaced by this model's (the
// measured columns and the provenance are kept; the file is rewritten atomically).
std::vector<FidelityPoint> repredict_results(const std::filesystem::path& dir, bool write = false);

// The per-family table (markdown): points, median, worst, the dominant terms.
std::string fidelity_table(const std::vector<FidelityPoint>& pts);

}  // namespace inferlab
