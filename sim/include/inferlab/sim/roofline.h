#pragma once
// Roofline prediction of an operator on a GPU:
//   compute = FLOPs / peak (tensor-core peak of the op's dtype, or the FP32 vector peak)
//   memory  = bytes / HBM bandwidth
//   time    = max(compute, memory) + launches * launch overhead
// bound = whichever of the three terms is largest. Attainable FLOP/s = min(peak, AI * bandwidth).
//
// An op that carries its kernel launches (Op::kernels, sim/kernels.h) is predicted by the refined
// model of ../shared/FIDELITY.md instead, launch by launch, summed:
//   pipes     per SM: tensor FLOPs / (tensor FLOP per clock x clock: mma.sync's or wgmma's rate),
//             exponentials / MUFU lanes, FP32 / FP32 lanes, integer / ALU lanes, conversions / conversion
//             lanes, warp instructions / issue slots; over the SMs the grid occupies, at the clock of the
//             load (the clock of sustained wgmma for a launch whose products keep the tensor pipe busy,
//             scripts/probes/wgmma_rate.cu; else the tensor clock wherever tensor-core instructions are
//             issued at least once per 2500 instructions, whatever the busiest pipe:
//             scripts/probes/tensor_clock.cu); library kernels (cuBLAS) run their FLOPs at the measured
//             matmul ceiling instead
//   compose   serialized: the sum of the pipes; overlapped: their maximum (issue included)
//   memory    bytes / the bandwidth the grid reaches: min(HBM, SMs occupied x one SM's bandwidth),
//             the read bandwidth for read-only streams; after the round trips before the first byte,
//             and before the epilogue of the CTAs whose data arrive last (KernelLaunch::epilogue_*)
//   latency   waves x one CTA's critical path (dependent cycles + dependent round trips + epilogue),
//             waves = ceil(CTAs / (SMs x CTAs per SM)); persistent kernels: round trips exposed per SM
//   tail      after the last wave: dependent L2 round trips, and the L2 bytes a few CTAs read through
//             their SMs' ports (or their dependent cycles, whichever is longer): the split-k read-back,
//             the split-KV merge of the last piece
//   floor     the launch floor of the mode (eager, or a node of a CUDA graph)
//   time      max(compose, memory, latency) + tail + floor; `dominant` names the largest term.
#include <string>
#include <vector>

#include "inferlab/sim/hardware.h"
#include "inferlab/sim/ops.h"

namespace inferlab {

enum class Bound { compute, memory, launch, latency };
std::string bound_name(Bound b);

struct Prediction {
  double peak_flops = 0;   // FLOP/s ceiling the op runs against
  double bandwidth = 0;    // bytes/s
  double compute_s = 0;    // per instance
  double memory_s = 0;
  double launch_s = 0;
  double time_s = 0;       // per instance
  double total_s = 0;      // time_s * count
  Bound bound = Bound::memory;
  // Refined model (ops with kernel launches): each term summed over the op's launches.
  bool refined = false;
  double tensor_s = 0, mufu_s = 0, fp32_s = 0, alu_s = 0, cvt_s = 0, issue_s = 0;
  double pipes_s = 0;       // the pipes composed
  double latency_s = 0;     // waves x critical path
  double atomics_s = 0;     // L2 atomics (split-k partial sums) at the L2's atomic rate
  double tail_s = 0;        // after the last wave: L2 round trips, a few CTAs' L2 reads (split-k, split-KV merge)
  double floor_s = 0;       // launch floors
  double reachable_bandwidth = 0;  // bytes/s the grid reaches (the smallest over launches)
  double waves = 0;         // the largest over launches
  std::string dominant;     // tensor, mufu, fp32, alu, cvt, issue, memory, parallelism, latency, atomics, tail, launch
  double ridge() const { return peak_flops / bandwidth; }  // FLOP/byte where the op would turn compute-bound
};

Prediction predict(const Op& op, const Hardware& hw);

struct StepPrediction {
  std::vector<Op> ops;
  std::vector<Prediction> predictions;  // one per op
  double flops = 0, bytes = 0, time_s = 0;
  double compute_s = 0, memory_s = 0, launch_s = 0;  // sums of the per-op terms (x count)
  double ai() const { return bytes > 0 ? flops / bytes : 0; }
  // The step's bound: the term that dominates the sum over ops.
  Bound bound() const;
};

StepPrediction predict_step(const std::vector<Op>& ops, const Hardware& hw);

}  // namespace inferlab
