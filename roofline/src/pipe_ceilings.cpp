#include "inferlab/roofline/pipe_ceilings.h"

#include <algorithm>

namespace inferlab {

double PipeRun::per_sm_per_clock() const {
  if (!(seconds > 0) || sms <= 0 || !(clock_hz > 0)) return 0;
  return ops / (seconds * double(sms) * clock_hz);
}

double single_sm_bandwidth(const std::vector<std::pair<int, double>>& sweep) {
  double best = 0;
  for (const auto& [n, bw] : sweep)
    if (n > 0 && n <= 8) best = std::max(best, bw / double(n));
  return best;
}

nlohmann::json pipes_json(const PipeMeasurements& m) {
  nlohmann::json p = nlohmann::json::object(), src = nlohmann::json::object();
  auto put = [&](const char* key, double v, const std::string& how) {
    if (!(v > 0)) return;  // not measured: the datasheet/derived value stays
    p[key] = v;
    src[key] = "measured: " + how;
  };
  put("sm_clock_mhz", m.fma_clock_hz / 1e6, "clock64 ticks / globaltimer ns of the FP32 FMA kernel's first block");
  put("tensor_clock_mhz", m.tensor_clock_hz / 1e6, "clock64 ticks / globaltimer ns during the mma.sync loop");
  put("fp32_lanes", m.fp32.per_sm_per_clock(), "independent FFMA chains on every SM, results per SM per clock");
  put("alu_lanes", m.alu.per_sm_per_clock(), "independent LOP3/IADD3 chains on every SM");
  put("mufu_lanes", m.mufu.per_sm_per_clock(), "independent ex2.approx chains on every SM");
  put("cvt_lanes", m.cvt.per_sm_per_clock(), "independent cvt.rn.bf16x2.f32 (F2FP) chains on every SM");
  put("tensor_flops_per_clk", m.tensor_mma.per_sm_per_clock(),
      "mma.sync m16n8k16 bf16, independent accumulators on every SM (wgmma: wgmma_flops_per_clk)");
  put("wgmma_flops_per_clk", m.tensor_wgmma.per_sm_per_clock(),
      "wgmma.m64n128k16 bf16 on random operands, one block of two warpgroups an SM, each issuing the flash kernels' "
      "S = Q K^T (shared-memory operands) and P V (A from registers) groups of 8 back to back");
  put("wgmma_clock_mhz", m.wgmma_clock_hz / 1e6, "clock64 ticks / globaltimer ns during the wgmma loop");
  {  // by rising duty, each duty once (sim/hardware.h PipeCeilings::wgmma_clock_by_duty)
    auto pts = m.wgmma_clock_by_duty;
    std::sort(pts.begin(), pts.end());
    nlohmann::json t = nlohmann::json::array();
    double last = -1;
    for (const auto& [measured, hz] : pts) {
      const double duty = std::min(measured, 1.0);  // a little over 1 is the runs' noise against the back-to-back run
      if (duty > last + 1e-9 && duty > 0 && hz > 0) {
        t.push_back({duty, hz / 1e6});
        last = duty;
      }
    }
    if (!t.empty()) {
      p["wgmma_clock_by_duty"] = t;
      src["wgmma_clock_by_duty"] =
          "measured: the wgmma loop with softmax-like CUDA-core work between its groups (a unit: 8 FFMA + MUFU.EX2 "
          "chains a thread summed and maximized into one running FADD sum and FMNMX maximum, 4..96 units), [duty, "
          "MHz]: duty = its FLOP an SM a clock over the back-to-back loop's, the clock clock64 ticks / globaltimer ns";
    }
  }
  put("issue_per_clk", m.issue_per_clk, "independent FADD/LOP3 mix of 32 warps per SM: warp instructions per SM per clock");
  put("dependent_issue_cycles", m.dependent_issue_cycles, "one warp, a chain of dependent FFMAs: clock64 ticks per FFMA");
  put("dram_latency_us", m.dram_latency_loaded_s * 1e6,
      "pointer chase (random 4 KiB-strided hops over 1 GiB) on one SM while the others stream HBM");
  put("l2_latency_cycles", m.l2_latency_cycles,
      "pointer chase over random 128-byte lines of 4 MiB (L2-resident, ld.global.cg): clock64 ticks per hop");
  // The model's l2_atomics_per_clk (sim/hardware.h) is the rate in the split-k kernels' own pattern (since 4636b12),
  // written under both names; the H200's file of 2026-11-24 held only the second, so the model charged the 80-a-clock
  // estimate there until 2026-11-29.
  put("l2_atomics_per_clk", m.l2_atomics_per_clk,
      "the split-k kernels' own reduction pattern (l2_red_fragment_per_clk, this run)");
  put("l2_red_fragment_per_clk", m.l2_atomics_per_clk,
      "fp32 atomicAdd without return (RED) in the split-k kernels' pattern: a warp's 32 lanes into 4 token rows "
      "x 8 consecutive words (4 lines, a sector each), 64 tokens x 16384 rows in L2, 128-row tiles of 8 warps, "
      "one block a tile: reductions per SM clock, whole GPU (several blocks into the same words: l2_atomics_split_sweep)");
  put("l2_red_vector_per_clk", m.l2_red_vector_per_clk,
      "red.global.add.v4.f32 in the Hopper weight-only kernels' layout: 8 warps a 128-row tile, each warp's 8 n8 tiles "
      "of 64 tokens as 512 contiguous bytes (4 words a lane), 4 MiB in L2, one block a tile: vector operations per SM "
      "clock, whole GPU");
  put("l2_red_coalesced_per_clk", m.l2_red_coalesced_per_clk,
      "fp32 atomicAdd without return (RED) by 1024 threads on every SM into their own consecutive words of "
      "16 MiB in L2: reductions per SM clock, whole GPU");
  put("sm_bandwidth_gb_s", single_sm_bandwidth(m.sm_bandwidth) / 1e9, "read kernel on 1..8 SMs (1024 threads each), the best per SM");
  put("launch_floor_eager_us", m.launch_floor_eager_s * 1e6, "one empty kernel of one block between CUDA events, median");
  put("launch_floor_graph_us", m.launch_floor_graph_s * 1e6, "a CUDA graph of 100 empty kernels between events, per node");
  put("launch_floor_library_us", m.launch_floor_library_s * 1e6,
      "cublasGemmEx bf16 (DenseGemm) of 1 x 256 x 256 between CUDA events, its operands in L2, median");
  put("launch_floor_library_fp8_us", m.launch_floor_library_fp8_s * 1e6,
      "cuBLASLt e4m3 (DenseGemm) of 16 x 256 x 256 between CUDA events, its operands in L2, median");
  p["sources"] = src;
  nlohmann::json sweep = nlohmann::json::array();
  for (const auto& [n, bw] : m.sm_bandwidth) sweep.push_back({{"sms", n}, {"gb_s", bw / 1e9}});
  p["sm_bandwidth_sweep"] = sweep;
  nlohmann::json red = nlohmann::json::array();
  for (const auto& [split, rate] : m.l2_atomics_split) red.push_back({{"blocks_per_word", split}, {"per_clk", rate}});
  if (!red.empty()) p["l2_atomics_split_sweep"] = red;
  if (m.dram_latency_idle_s > 0) p["dram_latency_idle_us"] = m.dram_latency_idle_s * 1e6;
  return p;
}

}  // namespace inferlab
