#include <gtest/gtest.h>

#include <unistd.h>

#include "inferlab/sim/dtype.h"
#include "inferlab/sim/error.h"
#include "inferlab/sim/hardware.h"
#include "inferlab/sim/io.h"
#include "inferlab/sim/paths.h"

#include <filesystem>
#include <fstream>

#include "error_of.h"

namespace inferlab {
namespace {

TEST(DType, BytesAndAliases) {
  EXPECT_EQ(dtype_bytes(parse_dtype("float16")), 2.0);
  EXPECT_EQ(dtype_bytes(parse_dtype("bfloat16")), 2.0);
  EXPECT_EQ(parse_dtype("fp8"), DType::fp8_e4m3);
  EXPECT_EQ(dtype_bytes(DType::int4), 0.5);
  EXPECT_EQ(dtype_bytes(DType::fp32), 4.0);
}

TEST(DType, UnknownListsKnownNames) {
  try {
    parse_dtype("fp12");
    FAIL() << "fp12 accepted";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("fp12"), std::string::npos);
    EXPECT_NE(msg.find("bf16"), std::string::npos);
  }
}

TEST(Hardware, A100RidgeIs153FlopPerByte) {
  const Hardware a100 = load_hardware("a100-sxm-80gb");
  // 312 TFLOP/s dense fp16 over 2.039 TB/s.
  EXPECT_NEAR(a100.ridge(DType::fp16), 312.0 / 2.039, 1e-9);
  EXPECT_NEAR(a100.ridge(DType::fp16), 153.0, 0.1);
}

TEST(Hardware, DenseFiguresAreUsedNotSparse) {
  const Hardware h100 = load_hardware("h100-sxm-80gb", CeilingsMode::datasheet);
  EXPECT_DOUBLE_EQ(h100.matmul_peak(DType::bf16), 989.4e12);
  EXPECT_DOUBLE_EQ(h100.matmul_peak(DType::fp8_e4m3), 1978.9e12);
  EXPECT_DOUBLE_EQ(h100.sparse_matmul_peak(DType::bf16), 1978.9e12);
  EXPECT_DOUBLE_EQ(h100.matmul_peak(DType::fp32), 66.9e12);  // FP32 runs on the vector units
}

TEST(Hardware, EveryShippedFileLoadsWithSparseTwiceDense) {
  const auto names = known_hardware();
  ASSERT_GE(names.size(), 6u);
  for (const auto& n : names) {
    SCOPED_TRACE(n);
    const Hardware h = load_hardware(n, CeilingsMode::datasheet);
    EXPECT_EQ(h.id, n);
    EXPECT_GT(h.memory_bandwidth, 1e11);
    EXPECT_GT(h.memory_bytes, 16e9);
    EXPECT_GT(h.sm_count, 0);
    EXPECT_FALSE(h.sources.empty());
    ASSERT_TRUE(h.tensor_dense.count("bf16"));
    // NVIDIA's 2:4 figures are exactly twice the dense ones: a mixed-up table would show here.
    for (const auto& [k, sparse] : h.tensor_sparse) {
      ASSERT_TRUE(h.tensor_dense.count(k)) << k;
      EXPECT_NEAR(sparse / h.tensor_dense.at(k), 2.0, 0.01) << k;
    }
  }
}

TEST(Hardware, UnknownNameListsKnownOnes) {
  try {
    load_hardware("b200");
    FAIL();
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("unknown hardware 'b200'"), std::string::npos);
    EXPECT_NE(msg.find("h100-sxm-80gb"), std::string::npos);
    EXPECT_NE(msg.find("a100-40gb"), std::string::npos);
  }
}

TEST(Hardware, RejectsSwappedDenseAndSparseTables) {
  nlohmann::json j = {{"id", "x"},
                      {"sm_count", 1},
                      {"boost_clock_mhz", 1},
                      {"memory", {{"capacity_mib", 1024}, {"bandwidth_gb_s", 100}}},
                      {"l2_cache_mib", 1},
                      {"smem_per_sm_kib", 1},
                      {"tensor_tflops_dense", {{"bf16", 200}}},
                      {"tensor_tflops_sparse_2_4", {{"bf16", 100}}},
                      {"vector_tflops", {{"fp32", 10}}},
                      {"launch_overhead_us", 0}};
  EXPECT_THROW(hardware_from_json(j, "x.json"), Error);
  j["tensor_tflops_sparse_2_4"]["bf16"] = 400;
  EXPECT_NO_THROW(hardware_from_json(j, "x.json"));
  j["memory"]["bandwidth_gb_s"] = -1;
  EXPECT_THROW(hardware_from_json(j, "x.json"), Error);
}

TEST(Hardware, MissingDtypeRateIsAnError) {
  const Hardware a100 = load_hardware("a100-sxm-80gb");
  EXPECT_THROW(a100.matmul_peak(DType::fp8_e4m3), Error);  // Ampere has no FP8 tensor cores
}

}  // namespace
}  // namespace inferlab

namespace inferlab {
namespace {

TEST(Hardware, MeasuredCeilingsOverlayTheDatasheet) {
  Hardware h = load_hardware("a100-sxm-80gb", CeilingsMode::datasheet);
  EXPECT_EQ(h.ceilings_source, "datasheet");
  const nlohmann::json m = {{"date", "2026-01-01"},
                            {"ceilings",
                             {{"memory_bandwidth_gb_s", 1800.0},
                              {"tensor_tflops_dense", {{"bf16", 280.0}}},
                              {"vector_tflops", {{"fp32", 18.0}}},
                              {"launch_overhead_us", 3.5}}}};
  apply_measured(h, m, "a100-sxm-80gb.measured.json");
  EXPECT_DOUBLE_EQ(h.memory_bandwidth, 1800e9);
  EXPECT_DOUBLE_EQ(h.matmul_peak(DType::bf16), 280e12);
  EXPECT_DOUBLE_EQ(h.matmul_peak(DType::fp16), 312e12);  // not measured: the datasheet stays
  EXPECT_DOUBLE_EQ(h.vector_peak(), 18e12);
  EXPECT_DOUBLE_EQ(h.launch_overhead_s, 3.5e-6);
  EXPECT_NE(h.ceilings_source.find("measured"), std::string::npos);
  EXPECT_THROW(apply_measured(h, nlohmann::json::object(), "x.json"), Error);
}

// The L2's vector reduction rate: measured where `inferlab ceilings` measured it, else derived from the scalar rate
// (measured or not) by the H200's measured ratio, after the measured file is applied: a file that measures the
// scalar rate alone moves the derived vector rate with it.
TEST(Hardware, TheVectorReductionRateFollowsTheScalarOneWhereNotMeasured) {
  Hardware h = load_hardware("h100-sxm-80gb", CeilingsMode::datasheet);
  const double ratio = h.pipes.l2_red_vector_per_clk / h.pipes.l2_atomics_per_clk;
  EXPECT_GT(ratio, 0.3);
  EXPECT_LT(ratio, 0.6);
  EXPECT_EQ(h.pipes.sources.at("l2_red_vector_per_clk").rfind("derived", 0), 0u);
  const nlohmann::json m = {{"date", "2026-01-01"},
                            {"ceilings", {{"memory_bandwidth_gb_s", 3000.0}, {"pipes", {{"l2_atomics_per_clk", 200.0}}}}}};
  apply_measured(h, m, "h100-sxm-80gb.measured.json");
  EXPECT_DOUBLE_EQ(h.pipes.l2_atomics_per_clk, 200.0);
  EXPECT_DOUBLE_EQ(h.pipes.l2_red_vector_per_clk, 200.0 * ratio);
  const nlohmann::json v = {{"date", "2026-01-01"},
                            {"ceilings", {{"memory_bandwidth_gb_s", 3000.0}, {"pipes", {{"l2_red_vector_per_clk", 90.0}}}}}};
  apply_measured(h, v, "h100-sxm-80gb.measured.json");
  EXPECT_DOUBLE_EQ(h.pipes.l2_red_vector_per_clk, 90.0);  // measured: kept
  const Hardware h200 = load_hardware("h200-sxm", CeilingsMode::measured);
  EXPECT_EQ(h200.pipes.sources.at("l2_red_vector_per_clk").rfind("measured", 0), 0u);
  EXPECT_EQ(h200.pipes.sources.at("l2_atomics_per_clk").rfind("measured", 0), 0u);
}

// The library's launch floor: the eager floor until `inferlab ceilings` measures a tiny library GEMM; fp8's follows
// the bf16 one until measured itself; both follow a measured eager floor where they are derived.
TEST(Hardware, TheLibraryFloorIsTheEagerOneWhereNotMeasured) {
  Hardware h = load_hardware("h100-sxm-80gb", CeilingsMode::datasheet);
  EXPECT_DOUBLE_EQ(h.pipes.launch_floor_library_s, h.pipes.launch_floor_eager_s);
  EXPECT_DOUBLE_EQ(h.pipes.launch_floor_library_fp8_s, h.pipes.launch_floor_eager_s);
  EXPECT_EQ(h.pipes.sources.at("launch_floor_library_us").rfind("derived", 0), 0u);
  const nlohmann::json e = {{"date", "2026-01-01"},
                            {"ceilings", {{"memory_bandwidth_gb_s", 3000.0}, {"pipes", {{"launch_floor_eager_us", 3.5}}}}}};
  apply_measured(h, e, "h100-sxm-80gb.measured.json");
  EXPECT_DOUBLE_EQ(h.pipes.launch_floor_library_s, 3.5e-6);
  EXPECT_DOUBLE_EQ(h.pipes.launch_floor_library_fp8_s, 3.5e-6);
  const nlohmann::json l = {{"date", "2026-01-01"},
                            {"ceilings",
                             {{"memory_bandwidth_gb_s", 3000.0},
                              {"pipes", {{"launch_floor_library_us", 5.25}, {"launch_floor_eager_us", 3.5}}}}}};
  apply_measured(h, l, "h100-sxm-80gb.measured.json");
  EXPECT_DOUBLE_EQ(h.pipes.launch_floor_library_s, 5.25e-6);
  EXPECT_DOUBLE_EQ(h.pipes.launch_floor_library_fp8_s, 5.25e-6);  // derived from the measured bf16 floor
  EXPECT_EQ(h.pipes.sources.at("launch_floor_library_us").rfind("measured", 0), 0u);
}

// wgmma's rate and clock: the rate from the datasheet's peak at its tensor clock (an estimate, not derived again from
// a measured file, whose tensor rate is the library GEMM's; 4096 FLOP an SM a clock where the file gives the tensor
// clock the peak is quoted at, as the H100's does, 3786 for the H200's, which gives none: its boost clock); the clock
// the tensor clock (mma.sync's) until measured, following a measured tensor clock.
TEST(Hardware, WgmmaRateIsTheDatasheetsAndItsClockTheTensorClockWhereNotMeasured) {
  Hardware h = load_hardware("a100-sxm-80gb", CeilingsMode::datasheet);
  EXPECT_NEAR(h.pipes.wgmma_flops_per_clk, h.tensor_dense.at("bf16") / (h.sm_count * h.pipes.tensor_clock_hz), 1e-6);
  EXPECT_EQ(h.pipes.sources.at("wgmma_flops_per_clk").rfind("estimate", 0), 0u);
  EXPECT_DOUBLE_EQ(h.pipes.wgmma_clock_hz, h.pipes.tensor_clock_hz);
  const double rate = h.pipes.wgmma_flops_per_clk;
  const nlohmann::json t = {{"date", "2026-01-01"},
                            {"ceilings",
                             {{"memory_bandwidth_gb_s", 1800.0},
                              {"tensor_tflops_dense", {{"bf16", 250.0}}},
                              {"pipes", {{"tensor_clock_mhz", 1300.0}}}}}};
  apply_measured(h, t, "a100-sxm-80gb.measured.json");
  EXPECT_DOUBLE_EQ(h.pipes.wgmma_clock_hz, 1.3e9);      // follows the measured tensor clock
  EXPECT_DOUBLE_EQ(h.pipes.wgmma_flops_per_clk, rate);  // not the library GEMM's measured rate
  const nlohmann::json w = {{"date", "2026-01-01"},
                            {"ceilings",
                             {{"memory_bandwidth_gb_s", 1800.0},
                              {"pipes", {{"tensor_clock_mhz", 1300.0}, {"wgmma_clock_mhz", 1200.0},
                                         {"wgmma_flops_per_clk", 4000.0}}}}}};
  apply_measured(h, w, "a100-sxm-80gb.measured.json");
  EXPECT_DOUBLE_EQ(h.pipes.wgmma_clock_hz, 1.2e9);
  EXPECT_DOUBLE_EQ(h.pipes.wgmma_flops_per_clk, 4000.0);
  EXPECT_EQ(h.pipes.sources.at("wgmma_clock_mhz").rfind("measured", 0), 0u);
  const Hardware h100 = load_hardware("h100-sxm-80gb", CeilingsMode::datasheet);
  EXPECT_DOUBLE_EQ(h100.pipes.wgmma_flops_per_clk, 4096.0);
}

// The wgmma clock against the tensor pipe's duty (`inferlab ceilings`): read by rising duty with its source; bad
// tables refused by name; the shipped Hopper files hold the H200's measured points, falling from ~1.8 GHz.
TEST(Hardware, TheWgmmaClockByDutyIsReadWhereMeasured) {
  const Hardware h = load_hardware("a100-sxm-80gb", CeilingsMode::datasheet);
  EXPECT_TRUE(h.pipes.wgmma_clock_by_duty.empty());
  auto with = [&](const nlohmann::json& table) {
    Hardware x = h;
    apply_measured(x, {{"date", "2026-01-01"},
                       {"ceilings", {{"memory_bandwidth_gb_s", 1800.0}, {"pipes", {{"wgmma_clock_by_duty", table}}}}}},
                   "a100-sxm-80gb.measured.json");
    return x;
  };
  const Hardware m = with(nlohmann::json::parse("[[0.2, 1800], [0.6, 1790], [1.0, 1500]]"));
  const std::vector<std::pair<double, double>> want = {{0.2, 1.8e9}, {0.6, 1.79e9}, {1.0, 1.5e9}};
  EXPECT_EQ(m.pipes.wgmma_clock_by_duty, want);
  EXPECT_EQ(m.pipes.sources.at("wgmma_clock_by_duty").rfind("measured", 0), 0u);
  for (const char* bad : {"[]", "[[0.5]]", "[[0.5, 1800], [0.4, 1700]]", "[[1.5, 1800]]", "[[0.5, 0]]", "{}"}) {
    SCOPED_TRACE(bad);
    const std::string e = error_of([&] { with(nlohmann::json::parse(bad)); });
    EXPECT_NE(e.find("wgmma_clock_by_duty"), std::string::npos) << e;
  }
  for (const char* id : {"h100-sxm-80gb", "h200-sxm"}) {
    SCOPED_TRACE(id);
    const auto& t = load_hardware(id, CeilingsMode::measured).pipes.wgmma_clock_by_duty;
    ASSERT_GE(t.size(), 3u);
    EXPECT_GT(t.front().second, 1.7e9);
    EXPECT_LT(t.back().second, 1.6e9);
  }
}

TEST(Hardware, ShippedMeasuredFilesAreUsedWhenAsked) {
  for (const auto& id : known_hardware()) {
    SCOPED_TRACE(id);
    // A measured file may hold the interconnect alone (AMeasuredInterconnectAloneReplacesOnlyTheLink).
    const bool has = std::filesystem::exists(measured_ceilings_path(id)) &&
                     read_json_file(measured_ceilings_path(id)).contains("ceilings");
    EXPECT_EQ(load_hardware(id).ceilings_source, "datasheet");  // the default, for every GPU
    const Hardware h = load_hardware(id, CeilingsMode::automatic);
    EXPECT_EQ(h.ceilings_source != "datasheet", has);
    if (has) {
      const Hardware d = load_hardware(id, CeilingsMode::datasheet);
      // Measured ceilings sit below the datasheet's, but not absurdly far below.
      EXPECT_LT(h.memory_bandwidth, d.memory_bandwidth);
      EXPECT_GT(h.memory_bandwidth, 0.6 * d.memory_bandwidth);
      EXPECT_LT(h.matmul_peak(DType::bf16), d.matmul_peak(DType::bf16));
      EXPECT_GT(h.matmul_peak(DType::bf16), 0.5 * d.matmul_peak(DType::bf16));
    } else {
      EXPECT_THROW(load_hardware(id, CeilingsMode::measured), Error);
    }
  }
}

// By default every GPU is described by its datasheet: the H200 and the H100 have the same GH100
// compute, so a compute-bound prefill takes the same time on both, and the H200's larger
// bandwidth shows only where the bytes dominate. (With the H100's measured ceilings and the H200's
// datasheet, the H200 would come out 29% faster on the same compute.)
TEST(Hardware, DefaultCeilingsCompareGpusOnTheSameFooting) {
  const Hardware h100 = load_hardware("h100-sxm-80gb"), h200 = load_hardware("h200-sxm");
  EXPECT_EQ(h100.matmul_peak(DType::bf16), h200.matmul_peak(DType::bf16));
  EXPECT_LT(h100.memory_bandwidth, h200.memory_bandwidth);
  const Hardware measured = load_hardware("h100-sxm-80gb", "measured");
  EXPECT_NEAR(h200.matmul_peak(DType::bf16) / measured.matmul_peak(DType::bf16), 1.25, 0.05);
  EXPECT_DOUBLE_EQ(load_hardware("h100-sxm-80gb", "auto").matmul_peak(DType::bf16), measured.matmul_peak(DType::bf16));
  EXPECT_EQ(load_hardware("a100-sxm-80gb", "auto").ceilings_source, "datasheet");  // no measured file: auto keeps the sheet
  EXPECT_NE(error_of([] { load_hardware("h100-sxm-80gb", "guessed"); }).find("unknown ceilings 'guessed'"),
            std::string::npos);
}

// A user's own hardware file that keeps a shipped GPU's id keeps its own figures: the measured file
// is looked up beside the file that was loaded, never by id.
TEST(Hardware, AUsersHardwareFileIsNeverOverriddenByAShippedMeasurement) {
  const auto dir = std::filesystem::temp_directory_path() / ("inferlab_hw_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  auto j = read_json_file(data_dir() / "hardware" / "h100-sxm-80gb.json");
  j["memory"]["bandwidth_gb_s"] = 4000;
  j["launch_overhead_us"] = 1.0;
  write_file_atomic(dir / "my-h100.json", j.dump());
  const std::string mine = (dir / "my-h100.json").string();
  for (const char* mode : {"datasheet", "auto"}) {
    const Hardware h = load_hardware(mine, mode);
    EXPECT_EQ(h.id, "h100-sxm-80gb");
    EXPECT_DOUBLE_EQ(h.memory_bandwidth, 4000e9) << mode;
    EXPECT_DOUBLE_EQ(h.launch_overhead_s, 1e-6) << mode;
    EXPECT_EQ(h.ceilings_source, "datasheet");
  }
  EXPECT_NE(error_of([&] { load_hardware(mine, "measured"); }).find("my-h100.measured.json"), std::string::npos);
  // Its own measured file, beside it, or the shipped one given by path, are used when asked for.
  auto m = read_json_file(measured_ceilings_path("h100-sxm-80gb"));
  m["ceilings"]["memory_bandwidth_gb_s"] = 3500;
  write_file_atomic(dir / "my-h100.measured.json", m.dump());
  EXPECT_DOUBLE_EQ(load_hardware(mine, "measured").memory_bandwidth, 3500e9);
  EXPECT_NEAR(load_hardware(mine, measured_ceilings_path("h100-sxm-80gb").string()).memory_bandwidth, 2980e9, 1e9);
  // A measured file of another GPU is refused.
  EXPECT_NE(error_of([&] { load_hardware("h200-sxm", (dir / "my-h100.measured.json").string()); })
                .find("not of h200-sxm"),
            std::string::npos);
  std::filesystem::remove_all(dir);
}

// A measured file may hold the interconnect alone (inferlab_collectives' alpha-beta fit, before any
// `inferlab ceilings` run on that GPU): auto overlays it on the datasheet's figures, which otherwise stay;
// measured refuses (no measured ceilings). The shipped H200 file holds both: auto takes both.
TEST(Hardware, AMeasuredInterconnectAloneReplacesOnlyTheLink) {
  const auto dir = std::filesystem::temp_directory_path() / ("inferlab_ic_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  std::filesystem::copy_file(data_dir() / "hardware" / "h200-sxm.json", dir / "h200-sxm.json",
                             std::filesystem::copy_options::overwrite_existing);
  nlohmann::json shipped = read_json_file(measured_ceilings_path("h200-sxm"));
  ASSERT_TRUE(shipped.contains("interconnect"));
  std::ofstream(dir / "h200-sxm.measured.json") << nlohmann::json{{"id", "h200-sxm"}, {"interconnect", shipped["interconnect"]}}.dump();
  const std::string alone = (dir / "h200-sxm.json").string();
  const Hardware sheet = load_hardware(alone), autoh = load_hardware(alone, "auto");
  EXPECT_EQ(sheet.interconnect_source, "datasheet");
  EXPECT_NE(autoh.interconnect_source.find("h200-sxm.measured.json"), std::string::npos);
  EXPECT_EQ(autoh.ceilings_source, "datasheet");
  EXPECT_DOUBLE_EQ(autoh.memory_bandwidth, sheet.memory_bandwidth);
  EXPECT_DOUBLE_EQ(autoh.matmul_peak(DType::bf16), sheet.matmul_peak(DType::bf16));
  EXPECT_GT(autoh.nvlink_latency_s, 2 * sheet.nvlink_latency_s);  // measured 12.9 us a ring step vs the sheet's 2.5
  EXPECT_LT(autoh.nvlink_bandwidth, sheet.nvlink_bandwidth);
  EXPECT_NE(error_of([&] { load_hardware(alone, "measured"); }).find("holds only the interconnect"), std::string::npos);
  std::filesystem::remove_all(dir);
  const Hardware both = load_hardware("h200-sxm", "auto");
  EXPECT_NE(both.ceilings_source.find("measured"), std::string::npos);
  EXPECT_NE(both.interconnect_source.find("h200-sxm.measured.json"), std::string::npos);
  EXPECT_LT(both.memory_bandwidth, sheet.memory_bandwidth);
}

TEST(Hardware, DeviceNamesMapToHardware) {
  EXPECT_EQ(hardware_for_device("NVIDIA H100 80GB HBM3"), "h100-sxm-80gb");
  EXPECT_EQ(hardware_for_device("NVIDIA H200"), "h200-sxm");
  EXPECT_EQ(hardware_for_device("NVIDIA B200"), "");
}

}  // namespace
}  // namespace inferlab
