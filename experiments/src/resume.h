#pragma once
// Internal to the runner: what an earlier run left in the output folder, and which of its
// measurements a new run of (a version of) the same spec keeps.
//
// A point's measurement is kept when the point is the same measurement: every parameter of its
// scenario but those that only change the prediction (hardware, ceilings), completed with the
// scenario's defaults (a spec that spells a default out and one that leaves it out agree; a
// parameter added to the scenario since reads as its default), kv_heads by its count (2, not its
// spelling); measured on the same GPU. Predictions are never kept: every run computes them again
// from the current code, hardware and model files, so an edited ceilings or hardware file never
// leaves a stale prediction. The code a measurement was taken with is recorded in its row
// (measured_commit) and in the provenance; a changed kernel is re-measured with --fresh.
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "inferlab/experiments/results.h"
#include "inferlab/experiments/scenarios.h"

namespace inferlab::detail {

using CsvRow = std::map<std::string, std::string>;

// The identity of a point's measurement, from a results row or the point's parameters.
std::string measurement_key(const Scenario& s, const CsvRow& row);
CsvRow as_map(const Row& row);

struct EarlierRuns {
  // Measured rows by measurement key, in file order; measured_on and measured_commit filled in
  // (from the provenance for rows written before those columns existed).
  std::map<std::string, std::vector<CsvRow>> measured;
  std::string description_of(const std::string& key) const;  // "variant=flash seq=512 ..." for messages
};

// Reads the results and provenance at csv (nothing when there are none). A results file without
// its provenance is an error: what it holds cannot be told.
EarlierRuns read_earlier(const Scenario& s, const std::filesystem::path& csv, const std::filesystem::path& provenance);

// Copies the raw measured cells of `from` into `to` and derives the rest; false when the point's
// rows do not line up (a different number of rows: the scenario's rows changed since).
bool keep_measured(std::vector<Row>& to, const std::vector<CsvRow>& from);

}  // namespace inferlab::detail
