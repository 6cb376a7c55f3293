#include "inferlab/sim/roofline.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

namespace inferlab {

std::string bound_name(Bound b) {
  switch (b) {
    case Bound::compute: return "compute";
    case Bound::memory: return "memory";
    case Bound::launch: return "launch";
    case Bound::latency: return "latency";
  }
  return "?";
}

namespace {

// One tensor-core instruction (or more) per this many other warp instructions puts a launch at the tensor clock
// (predict_launch).
constexpr double kTensorClockedInstructions = 2500.0;

struct Term {
  const char* name;
  double s;
};

// One launch of the refined model (see roofline.h); adds its terms to p.
void predict_launch(const KernelLaunch& k, const Hardware& hw, Prediction& p, std::vector<Term>& terms) {
  const PipeCeilings& c = hw.pipes;
  const double sms = double(hw.sm_count);
  const double active = std::max(1.0, std::min(sms, double(k.ctas)));
  const double waves = std::ceil(double(k.ctas) / (sms * std::max(1, k.ctas_per_sm)));
  // The clock a launch runs at: the tensor clock wherever it issues tensor-core instructions at least once per
  // kTensorClockedInstructions other warp instructions, whatever its busiest pipe; the SM clock otherwise.
  // scripts/probes/tensor_clock.cu (H200, kernels/gemm/NOTES.md r19), integer work with one mma.sync per N warp
  // instructions: N = 40-320 and 2500: 1.79-1.82 GHz, as back-to-back mma.sync; 600-1300: 1.55-1.68 GHz (none of the
  // kernels declared here issues at that rate); 5000: 1.88-1.90; 10 000: 1.93; 40 000 or none: 1.97-1.98. The int4
  // weight-only kernels, integer-bound with one mma per 10-20 instructions, ran at 1.77-1.81 GHz, and at 1.95-1.97 with
  // their products knocked out. The tensor instructions are the SASS counts' (PipeWork::tensor_ops), else the
  // launch's FLOPs in mma.sync m16n8k16 (4096 FLOP; 8192 at fp8).
  const bool fp8_tensor = k.work.tensor_dtype == DType::fp8_e4m3 || k.work.tensor_dtype == DType::fp8_e5m2;
  const double fp8 = fp8_tensor ? 2.0 : 1.0;
  const bool on_sm = k.tensor == TensorPath::sm || k.tensor == TensorPath::wgmma;
  const double mmas = !on_sm                    ? 0.0
                      : k.work.tensor_ops > 0 ? k.work.tensor_ops / 32.0
                                              : k.work.tensor_flops / (4096.0 * fp8);
  const bool tensor_clocked = mmas > 0 && mmas * kTensorClockedInstructions >= k.work.warp_instructions();
  // A launch whose wgmma keep the tensor pipe busy runs at the clock the power limit holds under sustained wgmma
  // (scripts/probes/wgmma_rate.cu, the H200: 1.58-1.62 GHz on random operands, 1.71-1.80 on zeros).
  const double clock = k.wgmma_clocked ? c.wgmma_clock_hz : tensor_clocked ? c.tensor_clock_hz : c.sm_clock_hz;
  const double per = active * clock;
  const double tensor =
      k.tensor == TensorPath::sm        ? k.work.tensor_flops / (active * c.tensor_flops_per_clk * fp8 * clock)
      : k.tensor == TensorPath::wgmma   ? k.work.tensor_flops / (active * c.wgmma_flops_per_clk * fp8 * clock)
      : k.tensor == TensorPath::library ? k.work.tensor_flops / (hw.matmul_peak(k.work.tensor_dtype) * active / sms)
                                        : 0.0;
  const double mufu = k.work.mufu / (c.mufu_lanes * per), fp32 = k.work.fp32 / (c.fp32_lanes * per);
  const double alu = k.work.alu / (c.alu_lanes * per), cvt = k.work.cvt / (c.cvt_lanes * per);
  const double issue = k.work.warp_instructions() / (c.issue_per_clk * per);
  const double pipes = k.composition == Composition::serialized
                           ? std::max(tensor + mufu + fp32 + alu + cvt, issue)
                           : std::max({tensor, mufu, fp32, alu, cvt, issue});
  const double hbm = k.write_share < 0.1 && c.read_bandwidth > 0 ? std::max(c.read_bandwidth, hw.memory_bandwidth)
                                                                  : hw.memory_bandwidth;
  const double reach = std::min(hbm, active * c.sm_bandwidth);
  const double epilogue = k.epilogue_cycles / clock + k.epilogue_l2_round_trips * c.l2_latency_cycles / c.sm_clock_hz;
  const double l2_stream = k.l2_bytes > 0 ? k.l2_bytes / c.l2_bandwidth : 0.0;
  const double memory =
      k.bytes > 0 ? k.bytes / reach + l2_stream + (k.startup_round_trips + waves * k.wave_round_trips) * c.dram_latency_s + epilogue
                  : 0.0;
  const double latency = waves * (k.cta_cycles / clock + k.cta_round_trips * c.dram_latency_s + epilogue);
  const double exposed = k.sm_round_trips * c.dram_latency_s;  // persistent kernels: per SM, added
  // A library launch (cuBLAS, cuBLASLt) costs at least the library's own floor: its call on a tiny problem, measured
  // (`inferlab ceilings`), which holds what the library does beyond its kernel's work (the H200: its nvjet kernels take
  // 3.5 us or more however little they do, about 2 us beyond the eager floor, kernels/gemm/NOTES.md r30).
  const double library_floor = fp8_tensor ? c.launch_floor_library_fp8_s : c.launch_floor_library_s;
  const double floor = k.launch == LaunchMode::graph   ? c.launch_floor_graph_s
                       : k.tensor == TensorPath::library ? std::max(c.launch_floor_eager_s, library_floor)
                                                         : c.launch_floor_eager_s;
  const double core = k.memory_overlapped ? std::max({pipes, memory, latency}) : std::max(pipes + memory, latency);
  const double atomics = (k.atomics > 0 ? k.atomics / (c.l2_atomics_per_clk * c.sm_clock_hz) : 0.0) +
                        (k.vector_reductions > 0 ? k.vector_reductions / (c.l2_red_vector_per_clk * c.sm_clock_hz) : 0.0);
  const double tail_port = k.tail_bytes / (std::max(1.0, std::min(sms, double(k.tail_ctas))) * c.sm_bandwidth);
  const double tail = k.tail_l2_round_trips * c.l2_latency_cycles / c.sm_clock_hz +
                      std::max(tail_port, k.tail_cycles / c.sm_clock_hz);
  // A wave's atomics add to that wave (sim/kernels.h KernelLaunch::atomics).
  const double body = core + atomics + tail + exposed;

  p.tensor_s += tensor;
  p.mufu_s += mufu;
  p.fp32_s += fp32;
  p.alu_s += alu;
  p.cvt_s += cvt;
  p.issue_s += issue;
  p.pipes_s += pipes;
  p.memory_s += memory;
  p.latency_s += latency;
  p.atomics_s += atomics;
  p.tail_s += tail;
  p.floor_s += floor;
  p.compute_s += pipes;
  p.time_s += body + floor;
  p.reachable_bandwidth = p.reachable_bandwidth > 0 ? std::min(p.reachable_bandwidth, reach) : reach;
  p.waves = std::max(p.waves, waves);
  // The launch's dominant term, weighted by its share of the op's time.
  if (atomics > core)
    terms.push_back({"atomics", body});
  else if (tail > core)
    terms.push_back({"tail", body});
  else if (core == memory || (!k.memory_overlapped && memory > pipes && core != latency))
    terms.push_back({reach < hbm ? "parallelism" : "memory", body});
  else if (core == latency)
    terms.push_back({"latency", body});
  else {
    const Term pipe_terms[] = {{"tensor", tensor}, {"mufu", mufu}, {"fp32", fp32}, {"alu", alu}, {"cvt", cvt}, {"issue", issue}};
    const Term* best = &pipe_terms[0];
    for (const auto& t : pipe_terms)
      if (t.s > best->s) best = &t;
    terms.push_back({best->name, body});
  }
  terms.push_back({"launch", floor});
}

Prediction predict_refined(const Op& op, const Hardware& hw) {
  Prediction p;
  p.refined = true;
  p.peak_flops = op.tensor_core ? hw.matmul_peak(op.compute_dtype) : hw.vector_peak();
  p.bandwidth = hw.memory_bandwidth;
  std::vector<Term> terms;
  for (const auto& k : op.kernels) predict_launch(k, hw, p, terms);
  p.launch_s = p.floor_s;
  p.total_s = p.time_s * double(op.count);
  // The dominant term: the kind of time that adds up to the most over the launches.
  std::vector<Term> sums;
  for (const auto& t : terms) {
    auto it = std::find_if(sums.begin(), sums.end(), [&](const Term& s) { return std::string(s.name) == t.name; });
    if (it == sums.end()) sums.push_back(t);
    else it->s += t.s;
  }
  const Term* best = &sums.front();
  for (const auto& t : sums)
    if (t.s > best->s) best = &t;
  p.dominant = best->name;
  const std::string d = p.dominant;
  p.bound = d == "launch" ? Bound::launch : d == "latency" ? Bound::latency
          : (d == "memory" || d == "parallelism" || d == "atomics") ? Bound::memory : Bound::compute;
  return p;
}

}  // namespace

Prediction predict(const Op& op, const Hardware& hw) {
  if (!op.kernels.empty()) return predict_refined(op, hw);
  Prediction p;
  p.peak_flops = op.tensor_core ? hw.matmul_peak(op.compute_dtype) : hw.vector_peak();
  p.bandwidth = hw.memory_bandwidth;
  p.compute_s = op.flops / p.peak_flops;
  p.memory_s = op.bytes() / p.bandwidth;
  p.launch_s = double(op.launches) * hw.launch_overhead_s;
  p.time_s = std::max(p.compute_s, p.memory_s) + p.launch_s;
  p.total_s = p.time_s * double(op.count);
  if (p.launch_s > std::max(p.compute_s, p.memory_s))
    p.bound = Bound::launch;
  else
    p.bound = p.compute_s > p.memory_s ? Bound::compute : Bound::memory;
  p.dominant = bound_name(p.bound);
  return p;
}

Bound StepPrediction::bound() const {
  // Attribute each op's time to its own bound and see which kind of time dominates the step.
  double c = 0, m = 0, l = 0;
  for (std::size_t i = 0; i < ops.size(); ++i) {
    const auto& p = predictions[i];
    (p.bound == Bound::compute || p.bound == Bound::latency ? c : p.bound == Bound::memory ? m : l) += p.total_s;
  }
  if (c >= m && c >= l) return Bound::compute;
  return m >= l ? Bound::memory : Bound::launch;
}

StepPrediction predict_step(const std::vector<Op>& ops, const Hardware& hw) {
  StepPrediction s;
  s.ops = ops;
  for (const auto& op : ops) {
    const Prediction p = predict(op, hw);
    s.predictions.push_back(p);
    const double n = double(op.count);
    s.flops += op.total_flops();
    s.bytes += op.total_bytes();
    s.time_s += p.total_s;
    s.compute_s += p.compute_s * n;
    s.memory_s += p.memory_s * n;
    s.launch_s += p.launch_s * n;
  }
  return s;
}

}  // namespace inferlab
