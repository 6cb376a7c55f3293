// The host side of the per-pipe microbenchmarks (roofline/pipe_ceilings.h): from raw counts to
// ceilings, and the measured file's "pipes" object read back by sim/hardware.h. No GPU needed.
#include <gtest/gtest.h>

#include "inferlab/roofline/pipe_ceilings.h"
#include "inferlab/sim/hardware.h"

namespace inferlab {
namespace {

TEST(PipeCeilings, ResultsPerSmPerClock) {
  // 132 SMs at 1.98 GHz doing 16 ex2 per SM per clock for 1 ms.
  const PipeRun r{16.0 * 132 * 1.98e9 * 1e-3, 1e-3, 1.98e9, 132};
  EXPECT_NEAR(r.per_sm_per_clock(), 16.0, 1e-9);
  EXPECT_EQ((PipeRun{1, 0, 1e9, 1}).per_sm_per_clock(), 0.0);  // not measured
}

TEST(PipeCeilings, SingleSmBandwidthIsTheBestPerSmBeforeHbmLimits) {
  EXPECT_DOUBLE_EQ(single_sm_bandwidth({{1, 60e9}, {2, 130e9}, {8, 480e9}, {132, 3000e9}}), 65e9);
  EXPECT_EQ(single_sm_bandwidth({{132, 3000e9}}), 0.0);
}

TEST(PipeCeilings, MeasuredPipesOverrideTheDerivedOnesWithTheirSource) {
  PipeMeasurements m;
  m.mufu = PipeRun{16.0 * 132 * 1.8e9 * 1e-3, 1e-3, 1.8e9, 132};
  m.fma_clock_hz = 1.8e9;
  m.dram_latency_loaded_s = 1.1e-6;
  m.sm_bandwidth = {{1, 70e9}, {132, 3000e9}};
  m.launch_floor_eager_s = 2.5e-6;
  m.launch_floor_library_s = 5.5e-6;  // fp8's not measured (launch_floor_library_fp8_s 0)
  m.tensor_wgmma = PipeRun{4000.0 * 132 * 1.6e9 * 5e-3, 5e-3, 1.6e9, 132};  // not the H100 file's 4096
  m.wgmma_clock_hz = 1.6e9;
  // measured by falling duty (more CUDA-core work each point), one duty twice: written by rising duty, each once
  m.wgmma_clock_by_duty = {{0.9, 1.55e9}, {0.6, 1.75e9}, {0.6, 1.76e9}, {0.3, 1.8e9}};
  const nlohmann::json pj = pipes_json(m);
  EXPECT_EQ(pj.at("wgmma_clock_by_duty"), nlohmann::json::parse("[[0.3, 1800.0], [0.6, 1750.0], [0.9, 1550.0]]"));
  EXPECT_FALSE(pj.contains("launch_floor_library_fp8_us"));
  EXPECT_NEAR(pj.at("wgmma_flops_per_clk").get<double>(), 4000.0, 1e-9);
  EXPECT_NEAR(pj.at("wgmma_clock_mhz").get<double>(), 1600.0, 1e-9);
  EXPECT_FALSE(pj.contains("tensor_flops_per_clk"));  // mma.sync's not measured
  EXPECT_NEAR(pj.at("mufu_lanes").get<double>(), 16.0, 1e-9);
  EXPECT_FALSE(pj.contains("alu_lanes"));  // not measured: the derived value stays
  EXPECT_EQ(pj.at("sm_bandwidth_sweep").size(), 2u);

  Hardware h = load_hardware("h100-sxm-80gb", CeilingsMode::datasheet);
  EXPECT_EQ(h.pipes.sources.at("alu_lanes").rfind("derived", 0), 0u);
  const nlohmann::json measured = {{"date", "2026-01-01"}, {"ceilings", {{"memory_bandwidth_gb_s", 3000}, {"pipes", pj}}}};
  apply_measured(h, measured, "h100-sxm-80gb.measured.json");
  EXPECT_DOUBLE_EQ(h.pipes.sm_clock_hz, 1.8e9);
  EXPECT_DOUBLE_EQ(h.pipes.dram_latency_s, 1.1e-6);
  EXPECT_DOUBLE_EQ(h.pipes.sm_bandwidth, 70e9);
  EXPECT_DOUBLE_EQ(h.pipes.launch_floor_eager_s, 2.5e-6);
  EXPECT_DOUBLE_EQ(h.pipes.launch_floor_library_s, 5.5e-6);
  EXPECT_DOUBLE_EQ(h.pipes.launch_floor_library_fp8_s, 5.5e-6);  // derived from the bf16 one
  EXPECT_DOUBLE_EQ(h.pipes.wgmma_clock_hz, 1.6e9);
  const std::vector<std::pair<double, double>> by_duty = {{0.3, 1.8e9}, {0.6, 1.75e9}, {0.9, 1.55e9}};
  EXPECT_EQ(h.pipes.wgmma_clock_by_duty, by_duty);  // read back
  EXPECT_EQ(h.pipes.sources.at("wgmma_clock_by_duty").rfind("measured", 0), 0u);
  EXPECT_NEAR(h.pipes.wgmma_flops_per_clk, 4000.0, 1e-9);
  EXPECT_EQ(h.pipes.sources.at("wgmma_flops_per_clk").rfind("measured", 0), 0u);
  EXPECT_EQ(h.pipes.sources.at("wgmma_clock_mhz").rfind("measured", 0), 0u);
  EXPECT_EQ(h.pipes.sources.at("mufu_lanes").rfind("measured", 0), 0u);
  EXPECT_EQ(h.pipes.sources.at("alu_lanes").rfind("derived", 0), 0u);
}

TEST(PipeCeilings, EveryHardwareFileHasLabelledPipes) {
  for (const auto& id : known_hardware()) {
    const Hardware h = load_hardware(id, CeilingsMode::datasheet);
    EXPECT_GT(h.pipes.tensor_flops_per_clk, 0) << id;
    EXPECT_GT(h.pipes.mufu_lanes, 0) << id;
    EXPECT_GT(h.pipes.wgmma_flops_per_clk, 0) << id;
    EXPECT_GT(h.pipes.wgmma_clock_hz, 0) << id;
    for (const char* k : {"sm_clock_mhz", "tensor_flops_per_clk", "wgmma_flops_per_clk", "wgmma_clock_mhz", "mufu_lanes", "cvt_lanes", "dram_latency_us",
                          "launch_floor_eager_us", "launch_floor_library_us", "launch_floor_library_fp8_us"})
      EXPECT_TRUE(h.pipes.sources.count(k)) << id << " " << k;
  }
}

}  // namespace
}  // namespace inferlab
