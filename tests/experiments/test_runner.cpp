#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <memory>
#include <random>

#include "inferlab/experiments/results.h"
#include "inferlab/experiments/runner.h"
#include "inferlab/experiments/scenarios.h"
#include "inferlab/sim/error.h"
#include "inferlab/sim/io.h"
#include "inferlab/sim/paths.h"

namespace inferlab {
namespace fs = std::filesystem;
namespace {

class Runner : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("inferlab_runner_" + std::to_string(std::random_device{}()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  RunOptions options() const {
    RunOptions o;
    o.out_dir = dir_ / "out";
    o.plots = false;
    o.progress = false;
    return o;
  }
  // Running the spec `yaml` (as x.yaml) fails with a message that contains `needle`.
  void expect_error(const std::string& yaml, const std::string& needle) {
    try {
      run_spec(parse_spec(yaml, dir_ / "x.yaml"), options(), no_gpu());
      ADD_FAILURE() << "accepted: " << yaml;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  }
  void expect_error_in(const Spec& spec, const RunOptions& o, const std::string& needle) {
    try {
      GpuInfo g;
      g.present = true;
      g.name = "Test GPU";
      run_spec(spec, o, g);
      ADD_FAILURE() << "accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  }
  static GpuInfo no_gpu() {
    GpuInfo g;
    g.reason = "test";
    return g;
  }
  fs::path dir_;
};

const char* kSpec = R"(
name: small
scenario: model
fixed: {model: llama-2-7b, dtype: fp16}
cases:
  - {phase: decode, context: 512}
  - {phase: prefill, context: 256}
sweep:
  hardware: [a100-sxm-80gb, h100-sxm-80gb]
  batch: [1, 4, 16]
)";

TEST_F(Runner, WritesOneRowPerOpAndPointWithProvenance) {
  const Spec s = parse_spec(kSpec, dir_ / "small.yaml");
  const RunResult r = run_spec(s, options(), no_gpu());
  EXPECT_TRUE(r.complete);
  EXPECT_EQ(r.points, 12);
  EXPECT_EQ(r.ran, 12);
  const ResultTable t = read_csv(r.csv);
  const auto totals = t.where("op", "total");
  EXPECT_EQ(totals.size(), 12u);
  EXPECT_EQ(t.rows.size() % 12, 0u);
  for (const auto* row : totals) {
    EXPECT_FALSE(row->at("predicted_s").empty());
    EXPECT_TRUE(row->at("measured_s").empty());  // no kernels, no GPU
    EXPECT_FALSE(row->at("point").empty());
  }
  const auto prov = read_json_file(r.provenance);
  EXPECT_TRUE(prov["complete"].get<bool>());
  EXPECT_EQ(prov["points_total"].get<int>(), 12);
  EXPECT_EQ(prov["points_measured"].get<int>(), 0);
  EXPECT_FALSE(prov["commit"].get<std::string>().empty());
  EXPECT_FALSE(prov["date"].get<std::string>().empty());
  EXPECT_FALSE(prov["gpu"]["present"].get<bool>());
  EXPECT_EQ(prov["mode"], "predicted");
  for (const auto& e : fs::directory_iterator(dir_ / "out"))
    EXPECT_EQ(e.path().filename().string().find(".tmp"), std::string::npos) << "temporary file left: " << e.path();
}

// Predictions are recomputed by every run: interrupted while predicting, a run writes nothing, and a
// changed predict-only spec simply replaces its results.
TEST_F(Runner, InterruptedWhilePredictingWritesNothing) {
  const Spec s = parse_spec(kSpec, dir_ / "small.yaml");
  RunOptions o = options();
  o.stop_after = 5;
  const RunResult first = run_spec(s, o, no_gpu());
  EXPECT_FALSE(first.complete);
  EXPECT_FALSE(first.written);
  EXPECT_FALSE(fs::exists(first.csv));
  EXPECT_FALSE(fs::exists(first.provenance));
  run_spec(s, options(), no_gpu());
  std::string changed = kSpec;
  changed.replace(changed.find("[1, 4, 16]"), 10, "[1, 2]");
  const RunResult second = run_spec(parse_spec(changed, dir_ / "small.yaml"), options(), no_gpu());
  EXPECT_TRUE(second.complete);
  EXPECT_EQ(read_csv(second.csv).where("op", "total").size(), 8u);
}

// A stand-in for a kernel measurement (tests have no GPU): a time that depends on the point only,
// and a count of the points it measured.
struct FakeKernel {
  std::shared_ptr<std::vector<std::string>> calls = std::make_shared<std::vector<std::string>>();
  std::function<void(const Params&, std::vector<Row>&)> measure() const {
    auto log = calls;
    return [log](const Params& p, std::vector<Row>& rows) {
      log->push_back(p.at("format") + "/" + p.at("m"));
      for (Row& r : rows) {
        set_cell(r, "measured_s", num(1e-5 * double(std::stoi(p.at("m"))) + (p.at("format") == "int4" ? 1e-6 : 2e-6)));
        set_cell(r, "measured_bf16_s", num(3e-5));
        derive_measured(r);
      }
    };
  }
};

GpuInfo test_gpu(const std::string& name = "Test GPU") {
  GpuInfo g;
  g.present = true;
  g.name = name;
  return g;
}

const char* kMeasured = R"(
name: lin
scenario: linear
fixed: {n: 4096, k: 4096, hardware: h100-sxm-80gb}
sweep:
  format: [bf16, int4]
  m: [1, 2, 4]
)";

// Measurements are kept per point: an interrupted run resumes where it stopped, an extended sweep
// measures only its new points, an edited comment measures nothing again, and the result is the
// file one uninterrupted run writes.
TEST_F(Runner, MeasurementsResumePerPoint) {
  FakeKernel kernel;
  RunOptions o = options();
  o.measure = kernel.measure();
  o.stop_after = 2;
  const Spec s = parse_spec(kMeasured, dir_ / "lin.yaml");
  const RunResult first = run_spec(s, o, test_gpu());
  EXPECT_FALSE(first.complete);
  EXPECT_TRUE(first.written);  // every prediction, the two measurements
  const ResultTable partial = read_csv(first.csv);
  ASSERT_EQ(partial.rows.size(), 6u);
  int measured = 0;
  for (const auto& r : partial.rows) measured += !r.at("measured_s").empty();
  EXPECT_EQ(measured, 2);
  EXPECT_FALSE(read_json_file(first.provenance)["complete"].get<bool>());

  o.stop_after = -1;
  const RunResult second = run_spec(s, o, test_gpu());
  EXPECT_TRUE(second.complete);
  EXPECT_EQ(second.resumed, 2);
  EXPECT_EQ(second.ran, 4);
  EXPECT_EQ(kernel.calls->size(), 6u);  // no point measured twice

  RunOptions clean = options();
  clean.out_dir = dir_ / "clean";
  FakeKernel other;
  clean.measure = other.measure();
  EXPECT_EQ(read_text_file(run_spec(s, clean, test_gpu()).csv), read_text_file(second.csv));

  // A comment and a new sweep value: only the new points are measured.
  std::string extended = std::string("# the same points, and m = 8\n") + kMeasured;
  extended.replace(extended.find("[1, 2, 4]"), 9, "[1, 2, 4, 8]");
  kernel.calls->clear();
  const RunResult third = run_spec(parse_spec(extended, dir_ / "lin.yaml"), o, test_gpu());
  EXPECT_EQ(*kernel.calls, (std::vector<std::string>{"bf16/8", "int4/8"}));
  EXPECT_EQ(third.resumed, 6);
  // Spelling a default out changes nothing either.
  kernel.calls->clear();
  std::string spelled = extended;
  spelled.replace(spelled.find("hardware: h100-sxm-80gb}"), 24, "hardware: h100-sxm-80gb, ceilings: datasheet}");
  run_spec(parse_spec(spelled, dir_ / "lin.yaml"), o, test_gpu());
  EXPECT_TRUE(kernel.calls->empty());
}

// A kept measurement stands beside a prediction of today's code and files: the derived columns
// (model error) follow the new prediction. Another GPU's measurements are measured again, kept when
// only predicting; measured points the spec no longer has are never dropped silently.
TEST_F(Runner, KeptMeasurementsMeetNewPredictions) {
  FakeKernel kernel;
  RunOptions o = options();
  o.measure = kernel.measure();
  const Spec s = parse_spec(kMeasured, dir_ / "lin.yaml");
  run_spec(s, o, test_gpu());
  std::string measured_ceilings = kMeasured;
  measured_ceilings.replace(measured_ceilings.find("hardware: h100-sxm-80gb}"), 24,
                            "hardware: h100-sxm-80gb, ceilings: measured}");
  kernel.calls->clear();
  const RunResult r = run_spec(parse_spec(measured_ceilings, dir_ / "lin.yaml"), o, test_gpu());
  EXPECT_TRUE(kernel.calls->empty());
  for (const auto& row : read_csv(r.csv).rows) {
    EXPECT_NE(row.at("ceilings").find("measured"), std::string::npos);
    const double t = std::stod(row.at("measured_s")), p = std::stod(row.at("predicted_s"));
    EXPECT_NEAR(std::stod(row.at("model_error")), (p - t) / t, 1e-9);
    EXPECT_NEAR(std::stod(row.at("measured_speedup")), 3e-5 / t, 1e-9);
    EXPECT_EQ(row.at("measured_on"), "Test GPU");
  }
  // Another GPU: measured again. Predicting only (no GPU): the measurements are kept as they are.
  RunOptions predict = options();
  const RunResult kept = run_spec(s, predict, no_gpu());
  EXPECT_EQ(kept.resumed, 6);
  for (const auto& row : read_csv(kept.csv).rows) EXPECT_FALSE(row.at("measured_s").empty());
  kernel.calls->clear();
  run_spec(s, o, test_gpu("Other GPU"));
  EXPECT_EQ(kernel.calls->size(), 6u);
  // Fewer points: refused, unless pruned.
  std::string fewer = kMeasured;
  fewer.replace(fewer.find("[1, 2, 4]"), 9, "[1, 2]");
  expect_error_in(parse_spec(fewer, dir_ / "lin.yaml"), o, "holds 2 measured point(s) the spec no longer has");
  RunOptions prune = o;
  prune.prune = true;
  EXPECT_EQ(run_spec(parse_spec(fewer, dir_ / "lin.yaml"), prune, test_gpu("Other GPU")).pruned, 2);
  EXPECT_EQ(read_csv(dir_ / "out" / "lin.csv").rows.size(), 4u);
}

// Only the H100 has a measured file: `auto` across GPUs would compare a measurement with a
// datasheet. The runner refuses it; the default (datasheet) and an explicit choice run.
TEST_F(Runner, CeilingsAreNeverMixedSilently) {
  const std::string spec = "scenario: model\nfixed: {model: llama-2-7b, context: 512, ceilings: auto}\n"
                           "sweep: {hardware: [a100-sxm-80gb, h100-sxm-80gb]}\n";
  expect_error(spec, "would mix datasheet figures with measured h100-sxm-80gb.measured.json");
  EXPECT_FALSE(fs::exists(dir_ / "out" / "x.csv"));
  const std::string plain = "scenario: model\nfixed: {model: llama-2-7b, context: 512}\n"
                            "sweep: {hardware: [a100-sxm-80gb, h100-sxm-80gb]}\n";
  const RunResult r = run_spec(parse_spec(plain, dir_ / "x.yaml"), options(), no_gpu());
  for (const auto& row : read_csv(r.csv).rows) EXPECT_EQ(row.at("ceilings"), "datasheet");
  EXPECT_EQ(read_json_file(r.provenance)["ceilings"], nlohmann::json::array({"datasheet"}));
  // --ceilings sets them on every point; a spec that sets them too is an error naming its line.
  RunOptions o = options();
  o.ceilings = "measured";
  o.out_dir = dir_ / "measured";
  const std::string h100 = "scenario: model\nfixed: {model: llama-2-7b, context: 512, hardware: h100-sxm-80gb}\n";
  for (const auto& row : read_csv(run_spec(parse_spec(h100, dir_ / "y.yaml"), o, no_gpu()).csv).rows)
    EXPECT_NE(row.at("ceilings").find("measured"), std::string::npos);
  try {
    run_spec(parse_spec(spec, dir_ / "x.yaml"), o, no_gpu());
    ADD_FAILURE() << "--ceilings and the spec's ceilings both accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("x.yaml:2: the spec sets ceilings (auto) and --ceilings measured"),
              std::string::npos)
        << e.what();
  }
}

TEST_F(Runner, BadPointIsReportedWithItsLineBeforeAnythingIsWritten) {
  std::string bad = kSpec;
  bad.replace(bad.find("[1, 4, 16]"), 10, "[1, 0, 16]");
  const Spec s = parse_spec(bad, dir_ / "small.yaml");
  try {
    run_spec(s, options(), no_gpu());
    FAIL();
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("small.yaml:10"), std::string::npos) << msg;
    EXPECT_NE(msg.find("batch"), std::string::npos) << msg;
  }
  EXPECT_FALSE(fs::exists(dir_ / "out" / "small.csv"));
}

TEST_F(Runner, SystemScenariosWriteTheirRows) {
  const Spec serving = parse_spec(R"(
name: serving
scenario: serving
fixed: {model: llama-2-7b, hardware: h100-sxm-80gb, requests: 100, rate: 20, max_len: 2048, trace_max_tokens: 2048,
        sample_every_s: 1}
sweep: {scheduler: [static, continuous], kv: [contiguous, paged]}
)", dir_ / "serving.yaml");
  const ResultTable t = read_csv(run_spec(serving, options(), no_gpu()).csv);
  const auto summaries = t.where("row", "summary");
  ASSERT_EQ(summaries.size(), 4u);
  for (const auto* r : summaries) EXPECT_EQ(r->at("completed"), "100");
  EXPECT_GT(t.where("row", "timeline").size(), 4u);

  const Spec parallel = parse_spec(R"(
name: parallel
scenario: parallel
fixed: {model: llama-2-70b, hardware: h100-sxm-80gb, batch: 4, context: 1024, dtype: fp16}
cases: [{tp: 1, pp: 1}, {tp: 8, pp: 1}, {tp: 2, pp: 4}]
)", dir_ / "parallel.yaml");
  const ResultTable p = read_csv(run_spec(parallel, options(), no_gpu()).csv);
  ASSERT_EQ(p.rows.size(), 3u);
  EXPECT_EQ(p.rows[0].at("fits"), "false");  // 138 GB of weights on one 80 GB device
  EXPECT_EQ(p.rows[1].at("fits"), "true");
  EXPECT_EQ(p.rows[0].at("comm_share"), "0");
  EXPECT_GT(std::stod(p.rows[1].at("comm_share")), 0.0);

  const Spec spec = parse_spec(R"(
name: speculative
scenario: speculative
fixed: {target: llama-2-70b, draft: llama-2-7b, hardware: h100-sxm-80gb, dtype: fp16}
sweep: {drafter: [model, ngram], alpha: [0, 0.8], gamma: [1, 4]}
)", dir_ / "speculative.yaml");
  const ResultTable s = read_csv(run_spec(spec, options(), no_gpu()).csv);
  ASSERT_EQ(s.rows.size(), 8u);
  for (const auto& r : s.rows) {
    if (r.at("alpha") == "0") {
      EXPECT_EQ(r.at("expected_tokens"), "1");
      EXPECT_EQ(r.at("optimal_gamma"), "0");
    }
  }
  const Spec bad = parse_spec("scenario: speculative\nfixed: {target: llama-2-70b, hardware: l4, alpha: 0.5, gamma: 2}\n",
                              dir_ / "bad.yaml");
  EXPECT_THROW(run_spec(bad, options(), no_gpu()), Error);  // drafter model without a draft
}

TEST_F(Runner, UnknownNamesAreListed) {
  expect_error("scenario: model\nfixed: {model: gpt-5, hardware: h100-sxm-80gb, context: 8}\n", "llama-2-7b");
  expect_error("scenario: model\nfixed: {model: llama-2-7b, hardware: tpu, context: 8}\n", "a100-sxm-80gb");
  expect_error("scenario: model\nfixed: {model: llama-2-7b, hardware: l4, context: 8, dtype: fp7}\n", "unknown dtype");
  expect_error("scenario: model\nfixed: {model: llama-2-7b, hardware: l4, context: 8, batsh: 2}\n",
               "unknown parameter 'batsh'");
  expect_error("scenario: model\nfixed: {model: llama-2-7b, hardware: l4}\n", "needs parameter 'context'");
  expect_error("scenario: modle\n", "known: model, memory");
  expect_error("scenario: memory\nfixed: {model: llama-2-70b, context: 8, kv_heads: 6}\n", "does not divide");
}

TEST(Csv, RoundTripsQuotedFields) {
  ResultTable t;
  t.add({{"a", "1"}, {"b", "x,y"}});
  t.add({{"a", "say \"hi\""}, {"c", "line\nbreak"}});
  const ResultTable back = parse_csv(t.to_csv(), "t.csv");
  ASSERT_EQ(back.rows.size(), 2u);
  EXPECT_EQ(back.columns, (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_EQ(back.rows[0].at("b"), "x,y");
  EXPECT_EQ(back.rows[1].at("a"), "say \"hi\"");
  EXPECT_EQ(back.rows[1].at("c"), "line\nbreak");
  EXPECT_EQ(back.rows[0].at("c"), "");
  EXPECT_THROW(parse_csv("a,b\n1,2,3\n", "bad.csv"), Error);
}

}  // namespace
}  // namespace inferlab

namespace inferlab {
namespace {

TEST(AttentionScenario, PredictsTheKernelShapeFromTheSimCost) {
  const Scenario& s = find_scenario("attention");
  const Params p = complete_params(s, {{"hardware", "h100-sxm-80gb"}, {"ceilings", "datasheet"}, {"seq", "2048"},
                                       {"tokens", "16384"}, {"kv_heads", "2"}, {"causal", "true"}});
  const AttentionPoint ap = evaluate_attention_point(p);
  EXPECT_EQ(ap.shape.batch, 8);
  EXPECT_EQ(ap.shape.kv_heads, 2);
  // Causal flash: 4 b h d s(s+1)/2 FLOPs.
  EXPECT_DOUBLE_EQ(ap.cost.flops, 4.0 * 8 * 16 * 128 * (2048.0 * 2049.0 / 2));
  const auto rows = attention_rows(ap);
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(get_cell(rows[0], "attention_kind"), "GQA-2");  // 2 KV heads for 16 query heads
  EXPECT_EQ(get_cell(rows[0], "kv_heads_count"), "2");
  // The overlapped flash kernel's CTAs walk their tiles at the tile loop's dependent chain (sim/src/kernels.cpp).
  EXPECT_EQ(get_cell(rows[0], "bound"), "latency");
  EXPECT_TRUE(get_cell(rows[0], "measured_s").empty());
  EXPECT_THROW(evaluate_attention_point(complete_params(s, {{"hardware", "h100-sxm-80gb"}, {"seq", "3000"},
                                                            {"tokens", "16384"}})),
               Error);
  EXPECT_THROW(complete_params(s, {{"hardware", "h100-sxm-80gb"}}), Error);  // seq is required
}

// A flash rung named in the variant is predicted as that kernel (its launch and its time); plain flash stays the
// overlapped kernel on Hopper. (What is measured is measure_cuda.cpp's FlashKernel of the same point: a GPU run.)
TEST(AttentionScenario, AFlashRungByNameIsPredictedAsThatKernel) {
  const Scenario& s = find_scenario("attention");
  auto point = [&](const std::string& variant, const std::string& head_dim, const std::string& hw = "h200-sxm") {
    return evaluate_attention_point(complete_params(s, {{"hardware", hw}, {"ceilings", "datasheet"}, {"seq", "4096"},
                                                        {"tokens", "16384"}, {"variant", variant},
                                                        {"head_dim", head_dim}}));
  };
  const AttentionPoint flash = point("flash", "128"), overlapped = point("flash-overlapped", "128"),
                       wgmma = point("flash-wgmma", "128"), wgmma64 = point("flash-wgmma", "64");
  ASSERT_EQ(wgmma.cost.kernels.size(), 1u);
  EXPECT_EQ(wgmma.cost.kernels[0].kernel, "flash_fwd_sm90_kernel");
  EXPECT_EQ(wgmma64.cost.kernels[0].kernel, "flash_fwd_sm90_kernel");
  EXPECT_EQ(flash.cost.kernels[0].kernel, "flash_fwd_overlap_kernel");
  EXPECT_EQ(overlapped.cost.kernels[0].kernel, "flash_fwd_overlap_kernel");
  EXPECT_EQ(flash.flash_kernel, "automatic");
  EXPECT_EQ(wgmma.flash_kernel, "wgmma");
  EXPECT_DOUBLE_EQ(overlapped.prediction.total_s, flash.prediction.total_s);
  EXPECT_EQ(get_cell(attention_rows(wgmma)[0], "variant"), "flash-wgmma");  // the fidelity family names the rung
  EXPECT_EQ(get_cell(attention_rows(flash)[0], "variant"), "flash");
  // The wgmma rung serializes its softmax and products (measured 1.35-1.57x the overlapped kernel's time at head dim
  // 128 on the H200, attention_ladder_h200).
  EXPECT_GT(wgmma.prediction.total_s, 1.2 * overlapped.prediction.total_s);
  auto message = [&](const std::string& variant, const std::string& head_dim, const std::string& hw) {
    try {
      point(variant, head_dim, hw);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message("flash-wgmma", "256", "h200-sxm").find("head dims 64 and 128"), std::string::npos);
  EXPECT_NE(message("flash-wgmma", "96", "h100-sxm-80gb").find("head dims 64 and 128"), std::string::npos);
  EXPECT_NE(message("flash-mma", "128", "h200-sxm").find("unknown flash rung 'mma'"), std::string::npos);
  EXPECT_NE(message("flash-wgmma", "128", "a100-sxm-80gb").find("Hopper only"), std::string::npos);
  EXPECT_NE(message("flashy", "128", "h200-sxm").find("unknown attention variant"), std::string::npos);
}

}  // namespace
}  // namespace inferlab

namespace inferlab {
namespace {

TEST(KvTraceScenario, AllocatorMatchesTheModelAndPagingWastesLittle) {
  const Scenario& s = find_scenario("kv_trace");
  // kv_trace_rows throws if the allocator and sim/memory ever disagree.
  const auto rows = s.predict(complete_params(s, {{"model", "llama-2-7b"}, {"requests", "120"}, {"slots", "8"},
                                                  {"max_len", "1024"}, {"rate", "0.2"}}));
  std::map<std::string, double> util;
  for (const auto& r : rows)
    if (get_cell(r, "step") == "mean") util[get_cell(r, "scheme")] = std::stod(get_cell(r, "utilization"));
  ASSERT_EQ(util.size(), 4u);
  EXPECT_LT(util["contiguous"], 0.6);
  EXPECT_GT(util["paged-8"], util["paged-16"]);
  EXPECT_GT(util["paged-16"], util["paged-32"]);
  EXPECT_GT(util["paged-32"], 0.9);
}

}  // namespace
}  // namespace inferlab

namespace inferlab {
namespace {

double cell(const std::map<std::string, std::string>& row, const std::string& column) {
  const std::string& s = row.at(column);
  EXPECT_FALSE(s.empty()) << column;
  return s.empty() ? -1.0 : std::stod(s);
}

TEST_F(Runner, CompressionSpecPredictsEveryPoint) {
  const Spec s = load_spec(project_root() / "experiments" / "compression.yaml");
  const RunResult r = run_spec(s, options(), no_gpu());
  EXPECT_TRUE(r.complete);
  EXPECT_EQ(r.points, 4 * 5 * 7 + 2);  // 4 Llama-3-8B shapes x 5 formats x m 1..64, + bf16/fp8 at 8192^3
  const ResultTable t = read_csv(r.csv);
  ASSERT_EQ(t.rows.size(), std::size_t(r.points));
  std::map<std::string, int> per_format;
  for (const auto& row : t.rows) {
    ++per_format[row.at("format")];
    EXPECT_EQ(row.at("variant"), row.at("format"));
    EXPECT_EQ(row.at("shape"), row.at("n") + "x" + row.at("k"));
    EXPECT_GT(cell(row, "predicted_s"), 0);
    EXPECT_GT(cell(row, "weight_bytes"), 0);
    EXPECT_NEAR(cell(row, "predicted_speedup"), cell(row, "predicted_bf16_s") / cell(row, "predicted_s"), 1e-6);
    // Memory-bound: never better than the bytes saved (fp8 also halves X, which matters only at 8192).
    if (row.at("m") != "8192") {
      EXPECT_LE(cell(row, "predicted_speedup"), cell(row, "ideal_speedup_bytes") + 1e-9);
    }
    for (const char* c : {"measured_s", "measured_bf16_s", "measured_speedup", "rel_error", "model_error"})
      EXPECT_TRUE(row.at(c).empty()) << c;  // predictions only
  }
  EXPECT_EQ(per_format, (std::map<std::string, int>{{"bf16", 29}, {"fp8", 29}, {"int4", 28}, {"int8", 28}, {"sparse24", 28}}));
  auto row_of = [&](const std::string& format, const std::string& n, const std::string& k, const std::string& m) {
    for (const auto& row : t.rows)
      if (row.at("format") == format && row.at("n") == n && row.at("k") == k && row.at("m") == m) return row;
    ADD_FAILURE() << "no row " << format << " " << n << "x" << k << " m=" << m;
    return std::map<std::string, std::string>{};
  };
  EXPECT_EQ(cell(row_of("bf16", "4096", "4096", "1"), "predicted_speedup"), 1.0);
  EXPECT_NEAR(cell(row_of("int4", "14336", "4096", "1"), "ideal_speedup_bytes"), 2.0 / (0.5 + 4.0 / 128), 1e-6);
  EXPECT_EQ(row_of("int4", "14336", "4096", "1").at("bound"), "memory");
  const auto fp8 = row_of("fp8", "8192", "8192", "8192");
  EXPECT_EQ(fp8.at("bound"), "compute");
  EXPECT_EQ(fp8.at("compute_dtype"), "fp8_e4m3");
  EXPECT_GT(cell(fp8, "predicted_speedup"), 1.6);  // the fp8/bf16 tensor peaks, less one launch each
}

TEST_F(Runner, LinearBadInputNamesTheConstraint) {
  expect_error("scenario: linear\nfixed: {n: 4096, k: 4096}\nsweep:\n  format: [int4, int3]\n",
               "x.yaml:4: point {format=int3 k=4096 n=4096}: parameter 'format': unknown weight format 'int3' "
               "(known: bf16, fp16, int8, int4, fp8, sparse24)");
  expect_error("scenario: linear\nfixed: {n: 4096, k: 100, format: int4}\n",
               "int4 needs k a multiple of the group size 128, got k=100");
  expect_error("scenario: linear\nfixed: {n: 4096, k: 4098, format: sparse24}\n", "multiple of 4, got k=4098");
  expect_error("scenario: linear\nfixed: {n: 4096, k: 4096, m: 0}\n", "parameter 'm' must be at least 1");
  expect_error("scenario: linear\nfixed: {k: 4096}\n", "needs parameter 'n'");
  expect_error("scenario: linear\nfixed: {n: 4096, k: 4096, format: fp8, hardware: a100-sxm-80gb}\n",
               "no dense tensor-core rate for fp8_e4m3");
  EXPECT_FALSE(fs::exists(dir_ / "out" / "x.csv"));
}

}  // namespace
}  // namespace inferlab
