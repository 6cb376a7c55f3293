#pragma once
// A step cost measured on the GPU engine: the serving simulator's clock from engine step timings
// instead of the roofline (step_cost.h). A short calibration sweep (experiments: `inferlab
// calibrate-engine`) times engine passes of the serving loop's kind and stores them as data:
//   base[d][p]   a pass of d decode sequences (one token each, a short context) and p prefill tokens
//                (one prompt from position 0), on the grids `decode` x `prefill`; (0, 0) is unused
//   per_context[d]  seconds per token of decode context (the split-KV kernel reads it), the slope
//                between a short and a long context at d decode sequences (d > 0)
// A pass's time: base interpolated bilinearly in (d, p) (linear extrapolation past the last grid
// point) + per_context(d) x (the decode sequences' summed context - d x base_context). Decode-only
// passes are the engine's CUDA-graph replays, the rest eager, as in the measured passes.
// Not resolved: the attention of a prompt chunk over its own earlier chunks (a chunk's past), which
// the sweep measures only at past 0 (at 2k tokens of a 7B model it is < 10% of the pass).
#include <filesystem>
#include <string>
#include <vector>

#include "inferlab/sim/step_cost.h"

namespace inferlab {

struct StepTimingTable {
  std::string model, device, provenance;  // what was measured, where, how (commit, date, clocks)
  std::vector<int64_t> decode;            // ascending, starting at 0
  std::vector<int64_t> prefill;           // ascending, starting at 0
  int64_t base_context = 0;               // context of each decode sequence in `base`
  std::vector<std::vector<double>> base;  // [decode][prefill] seconds; base[0][0] unused (0)
  std::vector<double> per_context;        // [decode] seconds per context token; [0] unused
};

// Throws inferlab::Error naming the file and the field on a malformed table (grids not ascending from
// 0, sizes that disagree, a non-positive time).
StepTimingTable read_step_timing(const std::filesystem::path& path);
StepTimingTable parse_step_timing(const std::string& json_text, const std::string& origin);
std::string step_timing_json(const StepTimingTable& t);
void check_step_timing(const StepTimingTable& t, const std::string& origin);

class MeasuredStepCost : public StepCostModel {
 public:
  explicit MeasuredStepCost(StepTimingTable table, std::string source = "");
  double step_time(const Batch& batch) override;
  std::string describe() const override;
  const StepTimingTable& table() const { return t_; }

 private:
  StepTimingTable t_;
  std::string source_;
};

}  // namespace inferlab
