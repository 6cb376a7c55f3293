// The `inferlab` binary end to end: output, --json, and bad input (message + non-zero exit).
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <random>

#include <nlohmann/json.hpp>

#include "inferlab/experiments/plots.h"
#include "inferlab/experiments/results.h"
#include "inferlab/sim/io.h"
#include "inferlab/sim/paths.h"

#include "cli_path.h"

namespace fs = std::filesystem;
namespace {

struct Result {
  int status;
  std::string out;  // stdout
  std::string all;  // stdout + stderr
};

using inferlab::cli_path;

Result cli(const std::string& args, const std::string& env = "") {
  const fs::path err = fs::temp_directory_path() / ("inferlab_cli_err_" + std::to_string(std::random_device{}()));
  const std::string cmd = "cd " + inferlab::shell_quote(inferlab::project_root().string()) + " && " + env +
                          inferlab::shell_quote(cli_path()) + " " + args + " 2>" + inferlab::shell_quote(err.string());
  Result r{-1, "", ""};
  r.status = inferlab::run_command(cmd, &r.out);
  std::string e;
  try {
    e = inferlab::read_text_file(err);
  } catch (...) {
  }
  fs::remove(err);
  r.all = r.out + e;
  return r;
}

void expect_failure(const std::string& args, const std::string& needle) {
  const Result r = cli(args);
  EXPECT_NE(r.status, 0) << args;
  EXPECT_NE(r.all.find(needle), std::string::npos) << args << "\n" << r.all;
}

TEST(Cli, ModelPrintsPerOpTableAndTotals) {
  const Result r = cli("model --model llama-2-7b --hardware a100-sxm-80gb --phase decode --batch 1 --context 4096");
  ASSERT_EQ(r.status, 0) << r.all;
  for (const char* s : {"qkv_proj", "attention/flash", "down_proj", "lm_head", "total", "memory-bound",
                        "ceilings datasheet", "ridge 153 FLOP/B (fp16)"})
    EXPECT_NE(r.out.find(s), std::string::npos) << s << "\n" << r.out;
}

TEST(Cli, ModelJsonIsMachineReadable) {
  const Result r = cli("model --model llama-2-7b --hardware h100-sxm-80gb --phase prefill --context 2048 --json");
  ASSERT_EQ(r.status, 0) << r.all;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["model"]["layers"], 32);
  EXPECT_EQ(j["step"]["phase"], "prefill");
  bool saw_total = false;
  for (const auto& op : j["ops"]) {
    EXPECT_TRUE(op["flops"].is_number());
    if (op["op"] == "total") {
      saw_total = true;
      EXPECT_EQ(op["bound"], "compute");
    }
  }
  EXPECT_TRUE(saw_total);
}

TEST(Cli, ModelWeightFormatShrinksTheLayerWeights) {
  const std::string base = "model --model llama-3-8b --hardware h100-sxm-80gb --context 1024 --json";
  const Result dense = cli(base), int4 = cli(base + " --weight-format int4");
  ASSERT_EQ(dense.status, 0) << dense.all;
  ASSERT_EQ(int4.status, 0) << int4.all;
  const auto d = nlohmann::json::parse(dense.out), q = nlohmann::json::parse(int4.out);
  EXPECT_EQ(d["step"]["weight_format"], "none");
  EXPECT_EQ(q["step"]["weight_format"], "int4");
  auto weight_bytes = [](const nlohmann::json& j, const std::string& op) {
    for (const auto& o : j["ops"])
      if (o["op"] == op) return o["bytes_weight"].get<double>();
    return -1.0;
  };
  // 2 B per value against 1/2 B + 4 B per group of 128 (32 layers of 4096 x 4096).
  EXPECT_NEAR(weight_bytes(d, "o_proj") / weight_bytes(q, "o_proj"), 2.0 / (0.5 + 4.0 / 128), 1e-9);
  EXPECT_EQ(weight_bytes(d, "lm_head"), weight_bytes(q, "lm_head"));  // not a layer GEMM
  EXPECT_LT(weight_bytes(q, "total"), weight_bytes(d, "total") / 2);
  const Result text = cli("model --model llama-3-8b --hardware h100-sxm-80gb --context 1024 --weight-format int4");
  ASSERT_EQ(text.status, 0) << text.all;
  EXPECT_NE(text.out.find("layer GEMMs int4"), std::string::npos) << text.out;
  expect_failure("model --model llama-3-8b --hardware h100-sxm-80gb --context 8 --weight-format int3",
                 "unknown weight format 'int3' (known: bf16, fp16, int8, int4, fp8, sparse24) or none");
}

TEST(Cli, MemoryGivesTheTwoGibKvOfTheWorkedExample) {
  const Result r =
      cli("memory --model llama-2-7b --batch 1 --context 4096 --dtype fp16 --hardware h100-sxm-80gb --block-size 16 --json");
  ASSERT_EQ(r.status, 0) << r.all;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["memory"]["kv_cache_bytes"], 2147483648LL);
  EXPECT_NEAR(j["memory"]["weights_bytes"].get<double>() / 1e9, 13.48, 0.01);
  EXPECT_EQ(j["memory"]["fits"], true);
  const Result text = cli("memory --model llama-2-7b --batch 1 --context 4096 --dtype fp16 --hardware h100-sxm-80gb");
  ASSERT_EQ(text.status, 0) << text.all;
  for (const char* s : {"2.15 GB (2.00 GiB)", "fits", "largest batch", "paged", "contiguous"})
    EXPECT_NE(text.out.find(s), std::string::npos) << s << "\n" << text.out;
}

// Every verb that predicts takes --ceilings and names the ceilings it used; the default is the
// datasheet for every GPU, so the H100's ridge is one number wherever it is shown.
TEST(Cli, EveryVerbTakesAndLabelsItsCeilings) {
  const auto list = nlohmann::json::parse(cli("list --json").out);
  double ridge_list = 0;
  for (const auto& h : list["hardware"]) {
    EXPECT_EQ(h["ceilings"], "datasheet") << h["id"];
    if (h["id"] == "h100-sxm-80gb") ridge_list = h["ridge_bf16"].get<double>();
  }
  EXPECT_NEAR(ridge_list, 989.4 / 3.35, 0.1);
  const auto model = nlohmann::json::parse(cli("model --model llama-3-8b --hardware h100-sxm-80gb --context 512 --json").out);
  EXPECT_EQ(model["hardware"]["ceilings"], "datasheet");
  for (const auto& op : model["ops"])
    if (op["op"] == "total") {
      EXPECT_NEAR(op["ridge"].get<double>(), ridge_list, 1e-6);  // rows keep 10 digits
    }
  const std::string measured = " --hardware h100-sxm-80gb --ceilings measured --json";
  for (const std::string& verb : {std::string("model --model llama-3-8b --context 512"),
                                  std::string("memory --model llama-3-8b --context 512"),
                                  std::string("serve --model llama-3-8b --requests 20")}) {
    const Result r = cli(verb + measured);
    ASSERT_EQ(r.status, 0) << verb << "\n" << r.all;
    EXPECT_NE(nlohmann::json::parse(r.out)["hardware"]["ceilings"].get<std::string>().find("measured"), std::string::npos)
        << verb;
  }
  EXPECT_NE(cli("list --ceilings measured").all.find("no measured ceilings for a100"), std::string::npos);
  const Result text = cli("list --ceilings auto");
  EXPECT_EQ(text.status, 0) << text.all;
  EXPECT_NE(text.out.find("ceilings: auto"), std::string::npos) << text.out;
  expect_failure("model --model llama-3-8b --hardware a100-sxm-80gb --context 8 --ceilings measured",
                 "no measured ceilings for a100-sxm-80gb");
  expect_failure("memory --model llama-3-8b --hardware h100-sxm-80gb --context 8 --ceilings sometimes",
                 "unknown ceilings 'sometimes'");
}

// One answer everywhere for a sliding-window model: the KV cache, both reservations and the
// longest context agree, and a context past max_position_embeddings is refused by every verb alike.
TEST(Cli, SlidingWindowMemoryAndContextLimitsAgree) {
  const Result r = cli("memory --model mistral-7b --context 32768 --hardware h100-sxm-80gb --json");
  ASSERT_EQ(r.status, 0) << r.all;
  const auto m = nlohmann::json::parse(r.out)["memory"];
  const double kv = m["kv_cache_bytes"].get<double>();
  EXPECT_DOUBLE_EQ(kv, 4096.0 * 32 * 2 * 8 * 128 * 2);  // the 4096-token window of each of the 32 layers
  EXPECT_DOUBLE_EQ(m["contiguous_reserved_bytes"].get<double>(), kv);  // a rolling buffer of the window
  EXPECT_DOUBLE_EQ(m["paged_reserved_bytes"].get<double>(), kv);       // 256 blocks of 16
  EXPECT_EQ(m["paged_blocks"], 256);
  EXPECT_EQ(m["max_context"], 32768);  // the model's limit, not the search's
  EXPECT_EQ(m["max_context_limit"], "max positions");
  const Result text = cli("memory --model mistral-7b --context 32768 --hardware h100-sxm-80gb");
  EXPECT_NE(text.out.find("32768 tokens (the model's limit; memory would hold more)"), std::string::npos) << text.out;
  // Gemma-2: half the layers hold the window, half every token.
  const auto g = nlohmann::json::parse(cli("memory --model gemma-2-9b --context 8192 --dtype bf16 --json").out)["memory"];
  EXPECT_DOUBLE_EQ(g["kv_cache_bytes"].get<double>(), (21.0 * 8192 + 21.0 * 4096) * 2 * 8 * 256 * 2);
  EXPECT_DOUBLE_EQ(g["paged_reserved_bytes"].get<double>(), g["kv_cache_bytes"].get<double>());
  // Past max_position_embeddings: the same refusal from model, memory and serve; --max-positions lifts it.
  for (const std::string& verb : {std::string("model --hardware h100-sxm-80gb --context 8192"),
                                  std::string("memory --context 8192"),
                                  std::string("serve --hardware h100-sxm-80gb --requests 5 --max-len 8192")})
    expect_failure(verb + " --model llama-2-7b", "exceeds llama-2-7b's max_position_embeddings 4096");
  EXPECT_EQ(cli("model --model llama-2-7b --hardware h100-sxm-80gb --context 8192 --max-positions 8192").status, 0);
  EXPECT_EQ(cli("memory --model llama-2-7b --context 8192 --max-positions 16384").status, 0);
}

// In a CUDA build the CLI that predicts loads no CUDA library (cuBLASLt's initializers alone take
// ~0.3 s at every start); the verbs that run kernels reach inferlab-cuda beside it.
TEST(Cli, ThePredictingCliLoadsNoCudaLibrary) {
  const fs::path cuda = fs::path(cli_path()).parent_path() / "inferlab-cuda";
  if (!fs::exists(cuda)) GTEST_SKIP() << "a build without CUDA: one CLI";
  std::string light, full;
  inferlab::run_command("ldd " + inferlab::shell_quote(cli_path()), &light);
  inferlab::run_command("ldd " + inferlab::shell_quote(cuda.string()), &full);
  for (const char* lib : {"libcudart", "libcublas", "libcupti"}) {
    EXPECT_EQ(light.find(lib), std::string::npos) << lib;
    EXPECT_NE(full.find(lib), std::string::npos) << lib;
  }
  // A ceilings call that stops before measuring anything (on a GPU machine a plain `ceilings` would measure
  // and write the shipped measured file): inferlab-cuda answers, not this binary.
  const Result r = cli("ceilings --hardware no-such-gpu --out /dev/null --json");
  EXPECT_NE(r.status, 0);
  EXPECT_EQ(r.all.find("is not built"), std::string::npos) << r.all;  // inferlab-cuda answered
}

TEST(Cli, ListShowsModelsHardwareAndSpecs) {
  const Result r = cli("list --json");
  ASSERT_EQ(r.status, 0) << r.all;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_GE(j["models"].size(), 7u);
  EXPECT_GE(j["hardware"].size(), 6u);
  EXPECT_GE(j["specs"].size(), 3u);
  EXPECT_EQ(cli("list").status, 0);
}

TEST(Cli, EveryVerbHasHelp) {
  for (const char* verb : {"", "list", "model", "memory", "serve", "run", "plot", "ceilings"}) {
    const Result r = cli(std::string(verb) + " --help");
    EXPECT_EQ(r.status, 0) << verb;
    if (*verb) {
      EXPECT_NE(r.out.find("--json"), std::string::npos) << verb;
    }
  }
}

TEST(Cli, BadInputFailsWithAClearMessage) {
  expect_failure("model --model llama-9 --hardware h100-sxm-80gb --context 8", "known: ");
  expect_failure("model --model llama-2-7b --hardware h900 --context 8", "unknown hardware 'h900'");
  expect_failure("model --model llama-2-7b --hardware h100-sxm-80gb --context 8 --dtype fp12", "unknown dtype 'fp12'");
  expect_failure("model --model llama-2-7b --hardware h100-sxm-80gb --context 0", "'context' must be at least 1");
  expect_failure("model --model llama-2-7b --hardware h100-sxm-80gb --context 8 --batch -2", "'batch' must be at least 1");
  expect_failure("model --model llama-2-7b --hardware h100-sxm-80gb --context 8 --kv-heads 5", "does not divide");
  expect_failure("model --model llama-2-7b --hardware h100-sxm-80gb --context 8 --kv-heads gqa-8",
                 "the literature's GQA-N (Ainslie et al. 2023) has N KV-head groups");
  expect_failure("model --model llama-2-7b --hardware a100-sxm-80gb --context 8 --dtype fp8", "no dense tensor-core rate");
  expect_failure("memory --model llama-2-7b --context ten", "must be an integer");
  expect_failure("model --hardware h100-sxm-80gb --context 8", "--model is required");
  expect_failure("run does-not-exist.yaml", "not found");
  expect_failure("plot nothing.csv", "not found");
}

TEST(Cli, ModelSplitsTheStepOverTensorAndPipelineRanks) {
  const Result r = cli("model --model llama-2-70b --hardware h100-sxm-80gb --batch 8 --context 2048 --tp 2 --pp 2 --json");
  ASSERT_EQ(r.status, 0) << r.all;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["parallel"]["devices"], 4);
  EXPECT_GT(j["parallel"]["tp_comm_s"].get<double>(), 0.0);
  EXPECT_NEAR(j["parallel"]["bubble_fraction"].get<double>(), 0.5, 1e-12);  // (p - 1) / (m + p - 1), m = 1
  int64_t allreduces = 0;
  for (const auto& op : j["ops"])
    if (op["op_class"] == "communication" && op["variant"] == "all_reduce") allreduces += op["count"].get<int64_t>();
  EXPECT_EQ(allreduces, 80);  // two per layer, 40 layers on the stage
  // Half the layers and half of each: about a quarter of the 138 GB of weights per device.
  EXPECT_NEAR(j["parallel"]["device_memory"]["weights_bytes"].get<double>() / 1e9, 138.0 / 4, 1.0);
  const Result text = cli("model --model llama-2-70b --hardware h100-sxm-80gb --batch 8 --context 2048 --tp 2 --pp 2");
  ASSERT_EQ(text.status, 0) << text.all;
  for (const char* s : {"TP 2 x PP 2 = 4 devices", "attn_allreduce", "pipeline bubble", "per device"})
    EXPECT_NE(text.out.find(s), std::string::npos) << s << "\n" << text.out;
  // Degree 1 is the plain model, to the digit.
  const auto plain = nlohmann::json::parse(cli("model --model llama-2-7b --hardware h100-sxm-80gb --context 512 --json").out);
  const auto one = nlohmann::json::parse(cli("model --model llama-2-7b --hardware h100-sxm-80gb --context 512 --tp 1 --pp 1 --json").out);
  EXPECT_EQ(plain["ops"], one["ops"]);
  expect_failure("model --model llama-2-7b --hardware h100-sxm-80gb --context 8 --tp 3",
                 "tensor-parallel degree 3 does not divide the 32 attention heads");
  expect_failure("model --model llama-2-7b --hardware h100-sxm-80gb --context 8 --pp 64", "exceeds the 32 layers");
  expect_failure("model --model llama-2-7b --hardware h100-sxm-80gb --context 8 --batch 3 --pp 2 --microbatches 2",
                 "do not divide the batch");
}

TEST(Cli, ServeSimulatesAGeneratedTrace) {
  const Result r = cli("serve --model llama-2-7b --hardware h100-sxm-80gb --requests 300 --rate 8 --seed 3 --json");
  ASSERT_EQ(r.status, 0) << r.all;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["summary"]["completed"], 300);
  EXPECT_EQ(j["summary"]["rejected"], 0);
  EXPECT_GT(j["summary"]["requests_per_s"].get<double>(), 0.0);
  EXPECT_LE(j["summary"]["ttft_p50_s"].get<double>(), j["summary"]["ttft_p99_s"].get<double>());
  EXPECT_EQ(j["config"]["scheduler"], "continuous");
  EXPECT_EQ(j["config"]["kv"], "paged");
  // The same seed gives the same numbers; the text form has the table.
  EXPECT_EQ(cli("serve --model llama-2-7b --hardware h100-sxm-80gb --requests 300 --rate 8 --seed 3 --json").out, r.out);
  const Result text = cli("serve --model llama-2-7b --hardware h100-sxm-80gb --requests 100 --scheduler static --kv contiguous");
  ASSERT_EQ(text.status, 0) << text.all;
  for (const char* s : {"time to first token", "p99", "requests/s", "KV memory", "scheduler static"})
    EXPECT_NE(text.out.find(s), std::string::npos) << s << "\n" << text.out;
}

TEST(Cli, ServeReadsATraceFileAndWritesItsTimeline) {
  const fs::path dir = fs::temp_directory_path() / ("inferlab_cli_serve_" + std::to_string(std::random_device{}()));
  fs::create_directories(dir);
  const std::string t = (dir / "t.csv").string();
  // Request 2 needs more KV than 0.05 GiB hold (~100 tokens): rejected with a reason, the others served.
  inferlab::write_file_atomic(t, "arrival_s,prompt_tokens,output_tokens\n0,20,5\n0.01,30,8\n0.02,900,50\n0.5,10,3\n");
  const std::string files = " --chrome-trace '" + (dir / "ct.json").string() + "' --timeline '" +
                            (dir / "it.csv").string() + "' --requests-csv '" + (dir / "rq.csv").string() + "'";
  const Result r = cli("serve --model llama-2-7b --hardware h100-sxm-80gb --kv-gib 0.05 --trace '" + t + "'" + files);
  ASSERT_EQ(r.status, 0) << r.all;
  EXPECT_NE(r.out.find("rejected request 2: needs 949 tokens of KV cache"), std::string::npos) << r.out;
  const auto trace = nlohmann::json::parse(inferlab::read_text_file(dir / "ct.json"));
  EXPECT_GT(trace["traceEvents"].size(), 10u);
  const std::string rq = inferlab::read_text_file(dir / "rq.csv");
  EXPECT_NE(rq.find("completed"), std::string::npos);
  EXPECT_NE(rq.find("rejected"), std::string::npos);
  EXPECT_NE(inferlab::read_text_file(dir / "it.csv").find("kv_used_bytes"), std::string::npos);

  // A malformed row names the file and the line, and nothing is written.
  const std::string bad = (dir / "bad.csv").string();
  inferlab::write_file_atomic(bad, "arrival_s,prompt_tokens,output_tokens\n0,20,5\n1,-4,8\n");
  fs::remove(dir / "ct.json");
  expect_failure("serve --model llama-2-7b --hardware h100-sxm-80gb --trace '" + bad + "'" + files,
                 "bad.csv:3 (request 1): field 'prompt_tokens' must be positive, got -4");
  EXPECT_FALSE(fs::exists(dir / "ct.json"));
  inferlab::write_file_atomic(bad, "arrival_s,prompt_tokens,output_tokens\n3,20,5\n1,4,8\n");
  expect_failure("serve --model llama-2-7b --hardware h100-sxm-80gb --trace '" + bad + "'", "must be sorted by arrival");
  inferlab::write_file_atomic(bad, "arrival_s,prompt_tokens,output_tokens\n3,20\n");
  expect_failure("serve --model llama-2-7b --hardware h100-sxm-80gb --trace '" + bad + "'", "missing field 'output_tokens'");
  fs::remove_all(dir);
}

TEST(Cli, ServeBadInputFailsWithAClearMessage) {
  const std::string base = "serve --model llama-2-7b --hardware h100-sxm-80gb --requests 10 ";
  expect_failure(base + "--scheduler greedy", "unknown scheduler 'greedy'");
  expect_failure(base + "--kv virtual", "unknown KV layout 'virtual'");
  expect_failure(base + "--priority later", "unknown priority 'later'");
  expect_failure(base + "--tp 3", "does not divide the 32 attention heads");
  expect_failure(base + "--block-size 0", "'block_size' must be at least 1");
  expect_failure(base + "--max-batch-tokens 100", "at least max_len");
  expect_failure(base + "--chrome-trace /nonexistent/dir/t.json", "does not exist");
  expect_failure("serve --model llama-2-70b --hardware h100-sxm-80gb --requests 10", "leave no KV memory");
  expect_failure("serve --model llama-2-7b --hardware h100-sxm-80gb --trace missing.csv", "trace file not found");
  expect_failure("serve --model llama-2-7b --hardware h100-sxm-80gb --trace t.csv --rate 3", "excludes");
}

TEST(Cli, RunRejectsMalformedSpecWithoutWritingAnything) {
  const fs::path dir = fs::temp_directory_path() / ("inferlab_cli_run_" + std::to_string(std::random_device{}()));
  fs::create_directories(dir);
  inferlab::write_file_atomic(dir / "bad.yaml", "scenario: model\nsweep:\n  batch: [1, 2\n");
  expect_failure("run '" + (dir / "bad.yaml").string() + "' --out '" + (dir / "out").string() + "'", "bad.yaml:");
  EXPECT_FALSE(fs::exists(dir / "out"));
  inferlab::write_file_atomic(dir / "good.yaml",
                              "scenario: memory\nfixed: {model: llama-2-7b, context: 4096}\nsweep: {batch: [1, 2]}\n");
  const Result ok = cli("run '" + (dir / "good.yaml").string() + "' --out '" + (dir / "out").string() + "' --json");
  EXPECT_EQ(ok.status, 0) << ok.all;
  EXPECT_TRUE(fs::exists(dir / "out" / "good.csv"));
  EXPECT_TRUE(fs::exists(dir / "out" / "good.json"));
  fs::remove_all(dir);
}

// Without --out, run writes under out/ of the current folder; data/results/ (committed results) is
// written only on purpose, and never from a tree with uncommitted changes.
TEST(Cli, RunNeverWritesOverCommittedResultsByDefault) {
  if (inferlab::run_command("git --version > /dev/null 2>&1", nullptr) != 0) GTEST_SKIP() << "no git";
  const fs::path root = fs::temp_directory_path() / ("inferlab_cli_root_" + std::to_string(std::random_device{}()));
  fs::create_directories(root / "data" / "models");
  fs::create_directories(root / "data" / "hardware");
  fs::create_directories(root / "data" / "results" / "model");
  fs::copy_file(inferlab::data_dir() / "models" / "llama-2-7b.json", root / "data" / "models" / "llama-2-7b.json");
  inferlab::write_file_atomic(root / "s.yaml", "scenario: memory\nfixed: {model: llama-2-7b, context: 512}\n");
  const std::string in_root = "cd '" + root.string() + "' && ";
  ASSERT_EQ(inferlab::run_command(in_root + "git init -q && git add -A && git -c user.email=t@t -c user.name=t commit -qm t",
                                  nullptr),
            0);
  const std::string run = in_root + "INFERLAB_ROOT='" + root.string() + "' " + inferlab::shell_quote(cli_path()) +
                          " run s.yaml --no-plots";
  std::string out;
  EXPECT_EQ(inferlab::run_command(run + " 2>&1", &out), 0) << out;
  EXPECT_TRUE(fs::exists(root / "out" / "model" / "s.csv"));
  EXPECT_FALSE(fs::exists(root / "data" / "results" / "model" / "s.csv"));
  // Into data/results: from the clean tree yes; after a change to the tree, refused unless --allow-dirty.
  const std::string committed = " --out '" + (root / "data" / "results" / "model").string() + "'";
  EXPECT_EQ(inferlab::run_command(run + committed + " 2>&1", &out), 0) << out;
  const auto prov = inferlab::read_json_file(root / "data" / "results" / "model" / "s.json");
  // The binary was built from another tree than this temporary repository: its build commit is recorded.
  const std::string commit = prov["commit"].get<std::string>();
  EXPECT_NE(commit.find("built from"), std::string::npos) << commit;
  inferlab::write_file_atomic(root / "s.yaml", "scenario: memory\nfixed: {model: llama-2-7b, context: 1024}\n");
  EXPECT_NE(inferlab::run_command(run + committed + " 2>&1", &out), 0);
  EXPECT_NE(out.find("uncommitted changes"), std::string::npos) << out;
  EXPECT_EQ(inferlab::run_command(run + committed + " --allow-dirty --fresh 2>&1", &out), 0) << out;
  fs::remove_all(root);
}

// Every bad input is found before anything is written: plot entries are checked against the rows
// the run would write (python3 without matplotlib is enough), a huge batch is a closed form, a
// generated trace is not clipped to --max-len but its long requests rejected and reported.
TEST(Cli, BadInputIsFoundBeforeAnythingIsWritten) {
  const fs::path dir = fs::temp_directory_path() / ("inferlab_cli_bad_" + std::to_string(std::random_device{}()));
  fs::create_directories(dir);
  if (inferlab::run_command("python3 -c '' 2>/dev/null", nullptr) == 0) {
    inferlab::write_file_atomic(dir / "p.yaml", R"(scenario: memory
fixed: {model: llama-2-7b, context: 512}
sweep: {batch: [1, 2]}
plots:
  - {name: a, kind: line, x: batch, y: kv_cach_bytes}
  - {name: b, kind: pie}
  - {name: c, kind: line, x: batch, y: kv_cache_bytes, where: {batch: 7}}
  - {name: d, kind: line, x: batch, y: kv_cache_bytes, serie: model}
)");
    for (const char* extra : {"", " --no-plots"}) {
      const Result r = cli("run '" + (dir / "p.yaml").string() + "' --out '" + (dir / "out").string() + "'" + extra);
      EXPECT_NE(r.status, 0);
      for (const char* needle : {"p.yaml:5: plot 'a': column 'kv_cach_bytes' not in the results",
                                 "p.yaml:6: plot 'b': unknown plot kind 'pie'",
                                 "p.yaml:7: plot 'c': no rows left after 'where'/'exclude'",
                                 "p.yaml:8: plot 'd': unknown field 'serie'"})
        EXPECT_NE(r.all.find(needle), std::string::npos) << needle << "\n" << r.all;
      EXPECT_FALSE(fs::exists(dir / "out")) << extra;
    }
  }
  inferlab::write_file_atomic(dir / "dup.yaml", "scenario: memory\nfixed: {model: llama-2-7b, context: 512, context: 9}\n");
  expect_failure("run '" + (dir / "dup.yaml").string() + "' --out '" + (dir / "out").string() + "'",
                 "key 'context' appears twice");
  EXPECT_FALSE(fs::exists(dir / "out"));
  fs::remove_all(dir);

  const Result huge = cli("memory --model llama-2-7b --context 1024 --batch 4000000000 --hardware h100-sxm-80gb --json");
  ASSERT_EQ(huge.status, 0) << huge.all;
  const auto h = nlohmann::json::parse(huge.out)["memory"];
  EXPECT_EQ(h["fits"], false);
  EXPECT_DOUBLE_EQ(h["paged_blocks"].get<double>(), 4e9 * 64);
  const auto serve = nlohmann::json::parse(
      cli("serve --model llama-2-7b --hardware h100-sxm-80gb --requests 40 --max-len 10 --json").out);
  EXPECT_EQ(serve["summary"]["rejected"], 40);
  EXPECT_EQ(serve["rejected"].size(), 40u);
  EXPECT_NE(serve["rejected"][0]["reason"].get<std::string>().find("exceed max_len 10"), std::string::npos);
}

// Ctrl-C while predicting stops at the next point, writes nothing and says so.
TEST(Cli, AnInterruptWhilePredictingStopsPromptlyAndWritesNothing) {
  const fs::path dir = fs::temp_directory_path() / ("inferlab_cli_sig_" + std::to_string(std::random_device{}()));
  fs::create_directories(dir);
  // The batching spec predicts 68 serving simulations: seconds, time enough to interrupt it.
  const std::string cmd = "cd " + inferlab::shell_quote(inferlab::project_root().string()) + " && (" +
                          inferlab::shell_quote(cli_path()) + " run experiments/batching.yaml --no-plots --out '" +
                          (dir / "out").string() + "' 2>'" + (dir / "err").string() +
                          "' & pid=$!; sleep 0.4; start=$(date +%s%N); kill -INT $pid; wait $pid; rc=$?; "
                          "echo $rc $(( ($(date +%s%N) - start) / 1000000 )))";
  std::string out;
  ASSERT_EQ(inferlab::run_command(cmd, &out), 0);
  int rc = 0, ms = 0;
  ASSERT_EQ(std::sscanf(out.c_str(), "%d %d", &rc, &ms), 2) << out;
  EXPECT_EQ(rc, 130) << inferlab::read_text_file(dir / "err");
  EXPECT_LT(ms, 2000);  // one point at most
  EXPECT_NE(inferlab::read_text_file(dir / "err").find("nothing written"), std::string::npos);
  EXPECT_FALSE(fs::exists(dir / "out" / "batching.csv"));
  fs::remove_all(dir);
}

// Ctrl-C while the figures are drawn: plot.py exits quietly (130), the results stay complete, and
// inferlab says how to draw them (a stand-in python exits 130 as plot.py does when interrupted).
TEST(Cli, AnInterruptWhileDrawingKeepsTheResults) {
  try {
    inferlab::plot_python();
  } catch (const std::exception& e) {
    GTEST_SKIP() << e.what();
  }
  const fs::path dir = fs::temp_directory_path() / ("inferlab_cli_int_" + std::to_string(std::random_device{}()));
  fs::create_directories(dir);
  inferlab::write_file_atomic(dir / "python", "#!/bin/sh\ncase \"$*\" in *--out*) exit 130 ;; esac\nexec " +
                                                  inferlab::shell_quote(inferlab::plot_python()) + " \"$@\"\n");
  fs::permissions(dir / "python", fs::perms::owner_all);
  inferlab::write_file_atomic(dir / "p.yaml", "scenario: memory\nfixed: {model: llama-2-7b, context: 512}\n"
                                              "sweep: {batch: [1, 2]}\nplots: [{name: kv, kind: line, x: batch, y: kv_cache_bytes}]\n");
  const Result r = cli("run '" + (dir / "p.yaml").string() + "' --out '" + (dir / "out").string() + "'",
                       "INFERLAB_PYTHON='" + (dir / "python").string() + "' ");
  EXPECT_EQ(r.status, 130) << r.all;
  EXPECT_NE(r.all.find("interrupted while drawing the figures; the results are complete: `inferlab plot"),
            std::string::npos)
      << r.all;
  EXPECT_EQ(r.all.find("Traceback"), std::string::npos);
  EXPECT_TRUE(inferlab::read_json_file(dir / "out" / "p.json")["complete"].get<bool>());
  EXPECT_EQ(inferlab::read_csv(dir / "out" / "p.csv").rows.size(), 2u);
  fs::remove_all(dir);
}

// Every spec's figures can be drawn from its committed results (data/results/*/<spec>.csv), as the
// spec has them now: a renamed column or a changed filter shows here, not on a user's machine.
TEST(Cli, EverySpecsFiguresDrawFromItsCommittedResults) {
  if (inferlab::run_command("python3 -c '' 2>/dev/null", nullptr) != 0) GTEST_SKIP() << "no python3";
  int checked = 0;
  for (const auto& spec : inferlab::list_stems(inferlab::project_root() / "experiments", ".yaml"))
    for (const auto& dir : fs::directory_iterator(inferlab::data_dir() / "results")) {
      const fs::path csv = dir.path() / (spec + ".csv");
      if (!fs::exists(csv)) continue;
      const Result r = cli("plot '" + csv.string() + "' --spec experiments/" + spec + ".yaml --check");
      EXPECT_EQ(r.status, 0) << csv << "\n" << r.all;
      ++checked;
    }
  EXPECT_GE(checked, 9);
}

TEST(Cli, RunDrawsTheSpecPlotsAndPlotRedrawsThem) {
  try {
    inferlab::plot_python();
  } catch (const std::exception& e) {
    GTEST_SKIP() << e.what();
  }
  const fs::path dir = fs::temp_directory_path() / ("inferlab_cli_plot_" + std::to_string(std::random_device{}()));
  fs::create_directories(dir);
  inferlab::write_file_atomic(dir / "p.yaml", R"(scenario: memory
fixed: {model: llama-2-7b, hardware: a100-40gb, dtype: fp16}
sweep: {batch: [1, 8], context: [1024, 4096]}
plots:
  - {name: bars, kind: memory, x: batch, where: {context: 4096}}
  - {name: kv, kind: line, x: context, y: kv_cache_bytes, series: batch}
)");
  const Result r = cli("run '" + (dir / "p.yaml").string() + "' --out '" + (dir / "out").string() + "'");
  ASSERT_EQ(r.status, 0) << r.all;
  for (const char* f : {"p-bars.png", "p-bars.svg", "p-kv.png", "p-kv.svg"})
    EXPECT_TRUE(fs::exists(dir / "out" / "figures" / f)) << f;
  const Result again = cli("plot '" + (dir / "out" / "p.csv").string() + "' --plot kv --out '" + (dir / "redo").string() + "'");
  EXPECT_EQ(again.status, 0) << again.all;
  EXPECT_TRUE(fs::exists(dir / "redo" / "p-kv.png"));
  EXPECT_FALSE(fs::exists(dir / "redo" / "p-bars.png"));
  expect_failure("plot '" + (dir / "out" / "p.csv").string() + "' --plot nope", "no plot named 'nope'");
  fs::remove_all(dir);
}

}  // namespace

namespace {

// generate without running the engine: every step planned and predicted, the limit beside it.
TEST(Cli, GeneratePredictsEveryStepAndTheBandwidthLimit) {
  const Result r = cli("generate --model llama-2-7b --hardware h100-sxm-80gb --batch 4 --prompt-tokens 100 "
                       "--new-tokens 20 --predict-only --json");
  ASSERT_EQ(r.status, 0) << r.all;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_FALSE(j["measured"].get<bool>());
  EXPECT_EQ(j["prefill"]["tokens"], 400);
  EXPECT_EQ(j["decode"]["tokens"], 76);  // 19 decode steps of 4 sequences
  EXPECT_EQ(j["steps"].size(), 20u);
  const double limit = j["decode"]["limit_tokens_per_s"], predicted = j["decode"]["predicted_tokens_per_s"];
  // Batch 4 of Llama-2-7B streams ~13.3 GB of weights per step: the limit is ~4 x 223 tokens/s, and the
  // roofline (with its launch term) predicts below it.
  EXPECT_GT(limit, 800);
  EXPECT_LT(limit, 950);
  EXPECT_LT(predicted, limit);
  EXPECT_GT(predicted, 0.5 * limit);
  // A longer prompt than a step holds is cut into chunks: 2 prefill steps for 1000 tokens at 600 a step.
  const Result c = cli("generate --model llama-3-8b --prompt-tokens 1000 --new-tokens 2 --max-step-tokens 600 "
                       "--predict-only --json");
  ASSERT_EQ(c.status, 0) << c.all;
  const auto cj = nlohmann::json::parse(c.out);
  EXPECT_EQ(cj["steps"][0]["tokens"], 600);
  EXPECT_EQ(cj["steps"][1]["tokens"], 400);
  EXPECT_EQ(cj["steps"][2]["phase"], "decode");
}

TEST(Cli, GenerateRefusesWhatTheEngineDoesNotRun) {
  expect_failure("generate --model mixtral-8x7b --predict-only", "model_type 'mixtral' is not run by the engine");
  expect_failure("generate --model llama-2-7b --prompt-tokens 4000 --new-tokens 200 --predict-only",
                 "exceed llama-2-7b's max_position_embeddings of 4096");
  expect_failure("generate --model llama-2-7b --batch 0 --predict-only", "batch");
  expect_failure("generate --model llama-2-7b --weight-format int5 --predict-only", "int5");
  expect_failure("generate --model no-such-model --predict-only", "unknown model");
}

}  // namespace
