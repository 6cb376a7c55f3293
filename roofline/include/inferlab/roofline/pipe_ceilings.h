#pragma once
// Per-pipe ceilings of the GPU this process runs on, as the refined model (sim/hardware.h
// PipeCeilings) reads them: each pipe's results per SM per clock, the SM clock under load (FMA and
// tensor-core loads), the warp's dependent issue interval, the HBM bandwidth N SMs reach (N = 1 ...
// all), the DRAM latency of a pointer chase (idle and while the other SMs stream), and the launch
// floor of an event-timed launch, eager and as a CUDA graph node. `inferlab ceilings` writes them
// under "ceilings": {"pipes": {...}} of the measured hardware file, each with its method.
//
// The arithmetic from raw counts to ceilings is plain C++ here (tested without a GPU); the kernels
// are in src/pipe_ceilings.cu.
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace inferlab {

// One throughput kernel: `ops` results of one pipe over `seconds` on `sms` SMs, whose SM clock ran
// `clock_hz` meanwhile (clock64 ticks over globaltimer nanoseconds of its first block).
struct PipeRun {
  double ops = 0, seconds = 0, clock_hz = 0;
  int sms = 0;
  double per_sm_per_clock() const;  // ops / (seconds * sms * clock_hz); 0 if any is 0
};

struct PipeMeasurements {
  PipeRun fp32, alu, mufu, cvt, tensor_mma;  // tensor_mma: FLOPs of mma.sync m16n8k16 bf16
  // FLOPs of wgmma.m64n128k16 bf16 on random operands, the flash kernels' S = Q K^T and P V groups back to back (two
  // warpgroups an SM); not measured (0) without sm_90a code or off compute capability 9.0.
  PipeRun tensor_wgmma;
  double fma_clock_hz = 0;      // SM clock during the FP32 run
  double tensor_clock_hz = 0;   // SM clock during the tensor run
  double wgmma_clock_hz = 0;    // SM clock during the wgmma run (the power limit's)
  // The SM clock against the share of the time the tensor pipe is busy: the wgmma run with softmax-like CUDA-core work
  // between its groups, (duty, Hz) a point, duty = the run's FLOP an SM a clock over the back-to-back run's.
  std::vector<std::pair<double, double>> wgmma_clock_by_duty;
  double dependent_issue_cycles = 0;  // one warp, a chain of dependent FFMAs: clock64 ticks per instruction
  double issue_per_clk = 0;     // independent instructions of many warps: warp instructions per SM per clock
  double dram_latency_idle_s = 0, dram_latency_loaded_s = 0;  // pointer chase, seconds per hop
  double l2_latency_cycles = 0;   // pointer chase within L2: SM clock cycles per hop
  double l2_red_coalesced_per_clk = 0;  // fp32 reductions, a warp's 32 consecutive words: per SM clock, whole GPU
  double l2_atomics_per_clk = 0;        // the same in the split-k kernels' fragment pattern (4 lines x 8 words a warp)
  double l2_red_vector_per_clk = 0;     // red.global.add.v4.f32 (four words each) in the Hopper weight-only kernels' layout:
                                        // vector operations per SM clock, whole GPU (0: not measured: no sm_90 code)
  std::vector<std::pair<int, double>> l2_atomics_split;  // (blocks adding into the same words, reductions per clock)
  std::vector<std::pair<int, double>> sm_bandwidth;  // (SMs reading, bytes/s)
  double launch_floor_eager_s = 0, launch_floor_graph_s = 0;
  double launch_floor_library_s = 0, launch_floor_library_fp8_s = 0;  // a tiny library GEMM in L2 (fp8: 0 before sm_89)
};

// The bandwidth one SM reaches: the largest bytes/s per SM over the sweep's points with at most 8 SMs
// (before the HBM itself limits); 0 without such points.
double single_sm_bandwidth(const std::vector<std::pair<int, double>>& sweep);

// The "pipes" object of the measured file (sim/hardware.h field names and units), with "sources"
// naming each method, and the raw sweep under "sm_bandwidth_sweep".
nlohmann::json pipes_json(const PipeMeasurements& m);

// Runs every pipe microbenchmark on the current device (CUDA builds only; throws otherwise).
PipeMeasurements measure_pipes(bool quick);

}  // namespace inferlab
