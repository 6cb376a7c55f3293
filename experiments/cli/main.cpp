// inferlab: the command line of the lab.
//   inferlab list                      models, hardware, experiment specs, scenarios
//   inferlab model  --model M --hardware H --phase decode --batch 1 --context 4096 [--tp 2 --pp 2]
//                   [--weight-format int4]
//   inferlab memory --model M --batch 1 --context 4096 [--hardware H] [--block-size 16]
//   inferlab serve  --model M --hardware H [--trace T.csv | --requests N --rate R --seed S]
//                   --scheduler continuous --kv paged --block-size 16 [--chrome-trace out.json]
//   inferlab run SPEC.yaml... [--predict-only] [--out DIR] [--fresh] [--shard I/N]
//   inferlab merge DIR [--out DIR]     join the shards of a run spread over processes (cli/merge.cpp)
//   inferlab report RESULTS_DIR [--out PAGE.html]   one HTML page of a results folder (cli/report.cpp)
//   inferlab compare --model A,B --hardware G,H [--batch B --context C]   side by side (cli/compare.cpp)
//   inferlab plot RESULTS.csv [--plot NAME] [--out DIR]
//   inferlab ceilings [--quick]        measure this GPU: bandwidths, FP32/tensor peaks, launch overhead
//   inferlab generate --model M --weights random|PATH --batch B --prompt-tokens P --new-tokens N
//                   [--weight-format F] [--eager]   run the GPU engine (predict-only without a GPU)
//   inferlab eval --model DIR --data FILE [--weight-format F] [--agree-with DIR] [--reference]
//                   perplexity and top-1 accuracy on the engine (eval_verb.cpp)
// Every verb takes --json for machine-readable output. Bad input prints "inferlab: error: ..." and
// exits with status 1 (2 for command-line syntax errors).
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <unistd.h>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/core.h>

#include "inferlab/experiments/generate.h"
#include "inferlab/experiments/fidelity.h"
#include "inferlab/experiments/plots.h"
#include "inferlab/experiments/provenance.h"
#include "inferlab/experiments/results.h"
#include "inferlab/experiments/runner.h"
#include "inferlab/experiments/scenarios.h"
#include "inferlab/experiments/spec.h"
#include "inferlab/roofline/gpu_info.h"
#ifdef INFERLAB_HAVE_CUDA
#include "inferlab/roofline/ceilings.h"
#include "inferlab/roofline/pipe_ceilings.h"
#endif
#include "inferlab/sim/error.h"
#include "inferlab/sim/io.h"
#include "inferlab/sim/paths.h"
#include "inferlab/sim/warnings.h"
#include "describe.h"
#include "eval_verb.h"
#include "verbs.h"

namespace fs = std::filesystem;
using namespace inferlab;
using namespace inferlab::cli;

namespace {

// ---------------------------------------------------------------- list
int cmd_list(const std::string& ceilings, bool json) {
  nlohmann::json out = {{"models", nlohmann::json::array()},
                        {"hardware", nlohmann::json::array()},
                        {"specs", nlohmann::json::array()},
                        {"scenarios", nlohmann::json::array()}};
  for (const auto& n : known_models()) out["models"].push_back(model_json(load_model(n)));
  for (const auto& n : known_hardware()) {
    const Hardware h = load_hardware(n, ceilings);
    nlohmann::json j = hardware_json(h);
    if (h.tensor_dense.count("bf16")) j["ridge_bf16"] = h.ridge(DType::bf16);
    out["hardware"].push_back(j);
  }
  for (const auto& n : list_stems(project_root() / "experiments", ".yaml")) {
    const auto spec = load_spec(project_root() / "experiments" / (n + ".yaml"));
    out["specs"].push_back({{"name", spec.name},
                            {"file", (fs::path("experiments") / (n + ".yaml")).string()},
                            {"scenario", spec.scenario},
                            {"points", spec.points().size()},
                            {"description", spec.description}});
  }
  for (const auto& s : scenarios()) {
    nlohmann::json params = nlohmann::json::array();
    for (const auto& p : s.params) params.push_back({{"name", p.name}, {"default", p.fallback}, {"help", p.help}});
    out["scenarios"].push_back({{"name", s.name}, {"help", s.help}, {"params", params}});
  }
  if (json) {
    print_json(out);
    return 0;
  }
  fmt::print("Models (data/models):\n");
  for (const auto& n : known_models()) fmt::print("  {}\n", model_summary(load_model(n)));
  fmt::print("\nHardware (data/hardware; dense tensor-core peaks; ceilings: {}):\n", ceilings);
  for (const auto& n : known_hardware()) {
    const Hardware h = load_hardware(n, ceilings);
    fmt::print("  {:<15} {:<26} {:>7.1f} TFLOP/s bf16  {:>6.0f} GB/s  {:>6.1f} GiB ({})  ridge {:.0f} FLOP/B (bf16)\n",
               h.id, h.name, h.tensor_dense.count("bf16") ? h.tensor_dense.at("bf16") / 1e12 : 0.0,
               h.memory_bandwidth / 1e9, h.memory_bytes / kGiB, h.memory_label,
               h.tensor_dense.count("bf16") ? h.ridge(DType::bf16) : 0.0);
  }
  // Descriptions wrapped at word boundaries under their spec, never cut.
  auto wrapped = [](const std::string& text, std::size_t width, const std::string& indent) {
    std::string out, line;
    std::size_t start = 0;
    while (start < text.size()) {
      std::size_t end = text.find(' ', start);
      if (end == std::string::npos) end = text.size();
      const std::string word = text.substr(start, end - start);
      if (!line.empty() && line.size() + 1 + word.size() > width) {
        out += indent + line + "\n";
        line.clear();
      }
      if (!word.empty()) line += (line.empty() ? "" : " ") + word;
      start = end + 1;
    }
    if (!line.empty()) out += indent + line + "\n";
    return out;
  };
  fmt::print("\nExperiment specs (experiments/*.yaml):\n");
  for (const auto& s : out["specs"]) {
    fmt::print("  {:<28} {:<11} {:>5} points\n", s["name"].get<std::string>(), s["scenario"].get<std::string>(),
               s["points"].get<std::size_t>());
    fmt::print("{}", wrapped(s["description"].get<std::string>(), 96, "      "));
  }
  fmt::print("\nScenarios:\n");
  for (const auto& s : scenarios()) fmt::print("  {:<11} {}\n", s.name, s.help);
  return 0;
}

nlohmann::json parallel_json(const ModelPoint& mp) {
  const auto& r = mp.parallel;
  const auto& b = mp.memory.breakdown;
  return {{"tp", mp.par.tp},
          {"pp", mp.par.pp},
          {"microbatches", mp.par.microbatches},
          {"devices", mp.par.devices()},
          {"link", mp.par.devices() > 1 ? r.link.name : ""},
          {"step_s", r.time_s},
          {"stage_s", r.stage_s},
          {"ops_s", r.compute_s},
          {"tp_comm_s", r.tp_comm_s},
          {"send_s", r.send_s},
          {"bubble_s", r.bubble_s},
          {"bubble_fraction", r.bubble_fraction},
          {"comm_share", r.comm_share()},
          {"slowest_stage", r.slowest},
          {"device_memory",
           {{"stage", mp.memory.stage},
            {"weights_bytes", b.weights},
            {"kv_cache_bytes", b.kv_cache},
            {"activation_bytes", b.activations},
            {"total_bytes", b.total()},
            {"fits", b.total() <= mp.hardware.memory_bytes}}}};
}

// ---------------------------------------------------------------- model
int cmd_model(const Params& p, bool json) {
  const Scenario& sc = find_scenario("model");
  const ModelPoint mp = evaluate_model_point(complete_params(sc, p));
  const auto rows = model_rows(mp);
  if (json) {
    print_json({{"model", model_json(mp.model)},
                {"hardware", hardware_json(mp.hardware)},
                {"step",
                 {{"phase", phase_name(mp.step.phase)},
                  {"batch", mp.step.batch},
                  {"new_tokens", mp.step.new_tokens},
                  {"past_tokens", mp.step.past_tokens},
                  {"attention", attention_variant_name(mp.options.attention)},
                  {"causal", mp.options.causal},
                  {"weight_dtype", dtype_name(mp.options.precision.weight)},
                  {"weight_format",
                   mp.options.weight_format ? weight_format_name(*mp.options.weight_format) : std::string("none")},
                  {"act_dtype", dtype_name(mp.options.precision.act)},
                  {"kv_dtype", dtype_name(mp.options.precision.kv)}}},
                {"parallel", parallel_json(mp)},
                {"ops", rows_to_json(rows)}});
    return 0;
  }
  const auto& h = mp.hardware;
  const auto& s = mp.prediction;
  const DType mm = mp.options.precision.act;
  fmt::print("{}\n", model_summary(mp.model));
  fmt::print("on {}, ceilings {}: {:.1f} TFLOP/s {} dense, {:.0f} GB/s, ridge {:.0f} FLOP/B ({}), {:.1f} us per launch\n",
             h.id, h.ceilings_source, h.matmul_peak(mm) / 1e12, dtype_name(mm), h.memory_bandwidth / 1e9, h.ridge(mm),
             dtype_name(mm), h.launch_overhead_s * 1e6);
  const bool parallel = mp.par.devices() > 1 || mp.par.microbatches > 1;
  const auto& par = mp.parallel;
  if (parallel)
    fmt::print("TP {} x PP {} = {} devices ({}, {:.0f} GB/s a direction, {:.1f} us a step), {} micro-batch{} of {}; "
               "table: one device of stage {} ({} layers), one micro-batch\n",
               mp.par.tp, mp.par.pp, mp.par.devices(), par.link.name, par.link.bandwidth / 1e9, par.link.latency_s * 1e6,
               mp.par.microbatches, mp.par.microbatches > 1 ? "es" : "", mp.step.batch / mp.par.microbatches,
               par.slowest, par.stages[par.slowest].layers);
  fmt::print("{} · batch {} · {} {} · {} · {} attention{}\n\n", phase_name(mp.step.phase), mp.step.batch,
             mp.step.phase == Phase::prefill ? "prompt" : "context", mp.step.context(), precision_text(mp.options.precision, mp.options.weight_format),
             attention_variant_name(mp.options.attention),
             mp.step.phase == Phase::prefill ? (mp.options.causal ? ", causal" : ", non-causal") : "");
  // The op column as wide as its longest name: nothing is cut.
  auto op_name = [](const Op& op) { return op.name + (op.variant.empty() ? "" : "/" + op.variant); };
  std::size_t w = 12;
  for (const Op& op : s.ops) w = std::max(w, op_name(op).size());
  for (const auto& c : par.stages[par.slowest].comm) w = std::max(w, c.name.size());
  fmt::print("{:<{}} {:>5} {:>11} {:>11} {:>10} {:>10} {:>9} {:<14} {:>10} {:>7}\n", "op", w, "count", "FLOPs", "bytes",
             "weights", "KV", "AI F/B", "bound", "time", "share");
  for (std::size_t i = 0; i < s.ops.size(); ++i) {
    const Op& op = s.ops[i];
    const Prediction& pr = s.predictions[i];
    const double n = double(op.count);
    fmt::print("{:<{}} {:>5} {:>11} {:>11} {:>10} {:>10} {:>9.3g} {:<14} {:>10} {:>6.1f}%\n", op_name(op), w, op.count,
               si(op.total_flops(), "FLOP"), si(op.total_bytes(), "B"), si(op.bytes(TensorRole::weight) * n, "B"),
               si(op.bytes(TensorRole::kv_cache) * n, "B"), op.ai(), bound_name(pr.bound), seconds(pr.total_s),
               100.0 * pr.total_s / par.time_s);
  }
  for (const auto& c : par.stages[par.slowest].comm)
    fmt::print("{:<{}} {:>5} {:>11} {:>11} {:>10} {:>10} {:>9} {:<14} {:>10} {:>6.1f}%\n", c.name, w, c.count, "",
               si(c.bytes * double(c.count), "B"), "", "", "", collective_name(c.kind), seconds(c.total_s()),
               100.0 * c.total_s() / par.time_s);
  fmt::print("{:<{}} {:>5} {:>11} {:>11} {:>10} {:>10} {:>9.3g} {:<14} {:>10} {:>6.1f}%\n",
             parallel ? "device total" : "total", w, "", si(s.flops, "FLOP"), si(s.bytes, "B"), "", "", s.ai(),
             bound_name(s.bound()), seconds(parallel ? par.stage_s : s.time_s),
             100.0 * (parallel ? par.stage_s : s.time_s) / par.time_s);
  fmt::print("\nstep {}: the ops' roofline times, max(compute, memory) + launches each; their terms summed apart: "
             "compute {}, memory {}, launches {}; {} · {:.0f} tokens/s\n",
             seconds(par.time_s), seconds(s.compute_s), seconds(s.memory_s), seconds(s.launch_s),
             bound_name(s.bound()) + "-bound", double(mp.step.tokens()) / par.time_s);
  if (parallel) {
    const auto& b = mp.memory.breakdown;
    fmt::print("on the critical path: operators {} · TP all-reduces {} · stage sends {} · pipeline bubble {} ({:.0f}% of the "
               "slots); communication {:.1f}% of the step\n",
               seconds(par.compute_s), seconds(par.tp_comm_s), seconds(par.send_s), seconds(par.bubble_s),
               100 * par.bubble_fraction, 100 * par.comm_share());
    fmt::print("per device (stage {}): weights {} + KV {} + activations {} = {} — {} on {}\n", mp.memory.stage,
               gb(b.weights), gb(b.kv_cache), gb(b.activations), gb(b.total()),
               b.total() <= h.memory_bytes ? "fits" : "does NOT fit", h.id);
  }
  return 0;
}

// ---------------------------------------------------------------- memory
int cmd_memory(const Params& p, bool json) {
  const Scenario& sc = find_scenario("memory");
  const MemoryPoint mp = evaluate_memory_point(complete_params(sc, p));
  if (json) {
    nlohmann::json j = {{"model", model_json(mp.model)},
                        {"batch", mp.batch},
                        {"context", mp.context},
                        {"weight_dtype", dtype_name(mp.options.precision.weight)},
                        {"act_dtype", dtype_name(mp.options.precision.act)},
                        {"kv_dtype", dtype_name(mp.options.precision.kv)},
                        {"memory", rows_to_json(memory_rows(mp))[0]}};
    if (mp.has_hardware) j["hardware"] = hardware_json(mp.hardware);
    print_json(j);
    return 0;
  }
  const auto& b = mp.breakdown;
  const auto& m = mp.model;
  fmt::print("{}\n", model_summary(m));
  fmt::print("batch {} · context {} · {}\n\n", mp.batch, mp.context, precision_text(mp.options.precision));
  fmt::print("  weights      {:>26}   {:.3f} B params x {} B\n", gb(b.weights), m.total_params() / 1e9,
             dtype_bytes(mp.options.precision.weight));
  const double kvb = dtype_bytes(mp.options.precision.kv);
  const std::string per_layer =
      m.mla ? fmt::format("latent {} + RoPE key {}", m.mla->kv_lora_rank, m.mla->qk_rope_head_dim)
            : fmt::format("2 x {} KV heads x {}", m.kv_heads, m.head_dim);
  fmt::print("  KV cache     {:>26}   {} seq x {} layer-tokens x {} B ({} values of {} B a token and layer)\n",
             gb(b.kv_cache), mp.batch, b.kv_layer_tokens, m.kv_elements_per_token_per_layer() * kvb, per_layer, kvb);
  if (b.kv_layer_tokens < m.layers * mp.context) {
    std::string held = fmt::format("{} windowed layers x {} tokens (rolling window)", m.window_layer_count(),
                                   b.kv_tokens_per_sequence < mp.context ? b.kv_tokens_per_sequence : *m.sliding_window);
    if (m.global_layer_count()) held = fmt::format("{} global layers x {} tokens + ", m.global_layer_count(), mp.context) + held;
    fmt::print("  {:<42}layer-tokens: {}\n", "", held);
  }
  fmt::print("  activations  {:>26}   peak of one pass ({} attention, prefill chunk {})\n", gb(b.activations),
             attention_variant_name(mp.options.attention),
             mp.options.prefill_chunk ? std::to_string(mp.options.prefill_chunk) : std::string("whole prompt"));
  if (b.reserve > 0) fmt::print("  reserve      {:>26}\n", gb(b.reserve));
  fmt::print("  total        {:>26}\n\n", gb(b.total()));
  if (mp.has_hardware) {
    const double cap = mp.hardware.memory_bytes;
    fmt::print("on {} ({} MiB usable; ceilings {}): {} — {}\n", mp.hardware.id, int64_t(cap / 1048576.0),
               mp.hardware.ceilings_source,
               b.total() <= cap ? "fits" : "does NOT fit",
               b.total() <= cap ? gb(cap - b.total()) + " free" : gb(b.total() - cap) + " over");
    const std::string why = mp.max_context_limit == "memory"        ? "memory-bound"
                            : mp.max_context_limit == "max positions" ? "the model's limit; memory would hold more"
                                                                      : "the search's cap; memory would hold more";
    fmt::print("  largest batch at {} tokens: {};  longest context at batch {}: {} tokens ({})\n\n", mp.context,
               mp.max_batch, mp.batch, mp.max_context, why);
  }
  fmt::print("KV reservation for {} x {} tokens:\n", mp.batch, mp.context);
  for (const KvReservation* r : {&mp.contiguous, &mp.paged}) {
    fmt::print("  {:<10} {:<18} reserved {:>26}  used {:>26}  wasted {:.1f}%\n", r->scheme,
               r->scheme == "paged" ? fmt::format("block {}", r->block_size) : fmt::format("max len {}", r->block_size),
               gb(r->reserved), gb(r->used), 100.0 * r->waste_fraction());
  }
  return 0;
}

// ---------------------------------------------------------------- serve
struct ServeFiles {
  std::string chrome_trace, timeline, requests;
  std::vector<std::pair<std::string, std::string>> outputs() const {
    return {{chrome_trace, "--chrome-trace"}, {timeline, "--timeline"}, {requests, "--requests-csv"}};
  }
  // Every output folder must exist before the run: a failure afterwards would leave some files written.
  void check() const {
    for (const auto& [path, flag] : outputs()) {
      if (path.empty()) continue;
      const fs::path dir = fs::absolute(path).parent_path();
      if (!fs::is_directory(dir)) throw Error(flag + " " + path + ": folder " + dir.string() + " does not exist");
    }
  }
  // Writes the asked-for files of a run (each atomically); returns their paths.
  std::vector<std::string> write(const ServingResult& r, const std::string& title) const {
    std::vector<std::string> written;
    for (const auto& [path, flag] : outputs()) {
      if (path.empty()) continue;
      write_file_atomic(path, flag == "--chrome-trace" ? chrome_trace_json(r, title)
                              : flag == "--timeline"   ? iterations_csv(r)
                                                       : requests_csv(r));
      written.push_back(path);
    }
    return written;
  }
};

int cmd_serve(const Params& p, const ServeFiles& files, bool json) {
  files.check();
  const ServingPoint sp = evaluate_serving_point(complete_params(find_scenario("serving"), p));
  const ServingSummary& s = sp.summary;
  const ServingConfig& c = sp.config;
  const std::string title = sp.model.name + " on " + sp.hardware.id + ", " + scheduler_name(c.scheduler) + " / " +
                            kv_layout_name(c.kv);
  const std::vector<std::string> written = files.write(sp.result, title);
  nlohmann::json rejected = nlohmann::json::array();
  for (const auto& q : sp.result.requests)
    if (q.rejected) rejected.push_back({{"id", q.id}, {"reason", q.reason}});
  if (json) {
    print_json({{"model", model_json(sp.model)},
                {"hardware", hardware_json(sp.hardware)},
                {"config",
                 {{"scheduler", scheduler_name(c.scheduler)},
                  {"priority", priority_name(c.priority)},
                  {"kv", kv_layout_name(c.kv)},
                  {"block_tokens", block_tokens(c)},
                  {"max_len", c.max_len},
                  {"max_batch", c.max_batch},
                  {"max_batch_tokens", c.max_batch_tokens ? c.max_batch_tokens : default_batch_tokens(c)},
                  {"tp", sp.tp},
                  {"kv_capacity_bytes", c.kv_capacity_bytes},
                  {"kv_bytes_per_token", c.kv_bytes_per_token}}},
                {"trace", sp.trace_source},
                {"summary", rows_to_json(serving_rows(sp, 0))[0]},
                {"rejected", rejected},
                {"files", written}});
    return 0;
  }
  fmt::print("{}\n", model_summary(sp.model));
  fmt::print("on {}{}, ceilings {}; step times: {}\n", sp.hardware.id,
             sp.tp > 1 ? fmt::format(" x{} (TP)", sp.tp) : "", sp.hardware.ceilings_source, sp.result.cost_model);
  fmt::print("trace: {}: {} requests\n", sp.trace_source, s.requests);
  fmt::print("scheduler {}{} · KV {} ({} tokens a block) · max_len {} · max_batch {} · {} tokens a pass\n",
             scheduler_name(c.scheduler),
             c.scheduler == Scheduler::static_batching ? "" : " (" + priority_name(c.priority) + ")",
             kv_layout_name(c.kv), block_tokens(c), c.max_len, c.max_batch,
             c.max_batch_tokens ? c.max_batch_tokens : default_batch_tokens(c));
  fmt::print("KV memory {} per device: {} blocks, {} tokens at {} per token\n\n", gb(c.kv_capacity_bytes),
             sp.result.blocks_total, sp.result.blocks_total * sp.result.block_tokens, si(c.kv_bytes_per_token, "B"));
  fmt::print("completed {} of {} ({} rejected, {} preemptions) in {} ({} iterations, {:.1f} sequences each, busy {:.0f}%)\n",
             s.completed, s.requests, s.rejected, s.preemptions, seconds(s.makespan_s), s.iterations, s.mean_batch,
             100 * s.busy_fraction);
  fmt::print("throughput {:.3g} requests/s · {:.4g} output tokens/s · {:.4g} tokens/s with prompts\n\n", s.requests_per_s,
             s.output_tokens_per_s, s.total_tokens_per_s);
  fmt::print("{:<26} {:>10} {:>10} {:>10} {:>10}\n", "", "mean", "p50", "p90", "p99");
  for (const auto& [name, pc] : {std::pair<const char*, const Percentiles*>{"time to first token", &s.ttft},
                                 {"time per output token", &s.tpot},
                                 {"latency (arrival to end)", &s.latency},
                                 {"queueing", &s.queueing}})
    fmt::print("{:<26} {:>10} {:>10} {:>10} {:>10}\n", name, seconds(pc->mean), seconds(pc->p50), seconds(pc->p90),
               seconds(pc->p99));
  fmt::print("\nKV memory over the run: reserved {} on average (peak {}), holding tokens {}, wasted {} ({:.0f}% used)\n",
             gb(s.kv_mean_reserved), gb(s.kv_peak_reserved), gb(s.kv_mean_used), gb(s.kv_mean_wasted),
             100 * s.kv_utilization);
  for (std::size_t i = 0; i < rejected.size() && i < 10; ++i)
    fmt::print("rejected request {}: {}\n", rejected[i]["id"].get<int64_t>(), rejected[i]["reason"].get<std::string>());
  if (rejected.size() > 10) fmt::print("... and {} more rejected\n", rejected.size() - 10);
  for (const auto& f : written) fmt::print("wrote {}\n", f);
  return 0;
}

// serve --engine gpu: the trace on the GPU engine, beside the simulator on the same KV memory.
int cmd_serve_engine(Params p, const ServeFiles& files, bool json) {
  for (const char* k : {"tp", "gpu_memory_utilization", "max_positions", "dtype", "weight_dtype", "act_dtype", "kv_dtype"})
    if (p.count(k)) throw Error(std::string("serve --engine gpu: option '") + k + "' does not apply to the engine (bf16, one GPU)");
  if (!p.count("kv_gib"))
    throw Error("serve --engine gpu: give --kv-gib (the KV memory the engine and the simulator share)");
  if (!p.count("max_len")) p["max_len"] = "2048";
  if (!p.count("trace_max_tokens") && !p.count("trace")) p["trace_max_tokens"] = p["max_len"];
  files.check();
  ServingEnginePoint sp = plan_serving_engine(complete_params(find_scenario("serving_engine"), p));
#ifdef INFERLAB_HAVE_CUDA
  const GpuInfo gpu = detect_gpu();
  if (!gpu.present) throw Error("serve --engine gpu: no GPU (" + gpu.reason + ")");
  sp.engine = serve_on_engine(sp.trace, sp.config, sp.options);
#else
  throw Error("serve --engine gpu: running the engine needs a CUDA build and a GPU");
#endif
  const ServingResult& er = sp.engine->result;
  const std::string title = sp.model.name + " on the GPU engine, " + scheduler_name(sp.config.scheduler) + " / " +
                            kv_layout_name(sp.config.kv);
  const std::vector<std::string> written = files.write(er, title);
  const std::vector<Row> rows = serving_engine_rows(sp, 0);
  if (json) {
    print_json({{"summary", rows_to_json(rows)[0]}, {"files", written}});
    return 0;
  }
  const ServingSummary& m = sp.engine->summary;
  const ServingSummary r = summarize(sp.des_roofline);
  std::optional<ServingSummary> d;
  if (sp.des_measured) d = summarize(*sp.des_measured);
  fmt::print("{}: {} requests, {} completed, {} rejected, {} preemptions, {} passes; KV {} blocks of {} tokens\n", title,
             m.requests, m.completed, m.rejected, m.preemptions, m.iterations, sp.engine->kv_blocks, sp.engine->block_size);
  fmt::print("{:<24} {:>12} {:>14} {:>14}\n", "", "engine", "sim (measured)", "sim (roofline)");
  auto line = [&](const char* what, double a, std::optional<double> b, double c, bool secs) {
    auto f = [&](double v) { return secs ? seconds(v) : fmt::format("{:.4g}", v); };
    fmt::print("{:<24} {:>12} {:>14} {:>14}\n", what, f(a), b ? f(*b) : std::string("-"), f(c));
  };
  line("output tokens/s", m.output_tokens_per_s, d ? std::optional<double>(d->output_tokens_per_s) : std::nullopt, r.output_tokens_per_s, false);
  line("TTFT p50", m.ttft.p50, d ? std::optional<double>(d->ttft.p50) : std::nullopt, r.ttft.p50, true);
  line("TPOT p50", m.tpot.p50, d ? std::optional<double>(d->tpot.p50) : std::nullopt, r.tpot.p50, true);
  line("latency p99", m.latency.p99, d ? std::optional<double>(d->latency.p99) : std::nullopt, r.latency.p99, true);
  fmt::print("GPU memory free before {} and after {} the run; blocks allocated {} = freed {}\n", gb(sp.engine->gpu_free_before),
             gb(sp.engine->gpu_free_after), er.blocks_allocated, er.blocks_freed);
  for (const auto& q : er.requests)
    if (q.rejected) fmt::print("rejected request {}: {}\n", q.id, q.reason);
  for (const auto& f : written) fmt::print("wrote {}\n", f);
  return 0;
}

// calibrate-engine: the measured step cost's timings (sim/measured_step_cost.h).
int cmd_calibrate_engine(Params p, const std::string& out, int repeats, bool json) {
  if (out.empty()) throw Error("calibrate-engine: give --out FILE");
  const fs::path dir = fs::absolute(out).parent_path();
  if (!fs::is_directory(dir)) throw Error("--out " + out + ": folder " + dir.string() + " does not exist");
  if (repeats < 1) throw Error("calibrate-engine: --repeats must be at least 1");
  if (!p.count("kv_gib")) throw Error("calibrate-engine: give --kv-gib (the KV memory the sweep may fill)");
  if (!p.count("max_len")) p["max_len"] = "2048";
  ServingEnginePoint sp = plan_serving_engine(complete_params(find_scenario("serving_engine"), p));
  const int64_t budget = sp.config.max_batch_tokens ? sp.config.max_batch_tokens : default_batch_tokens(sp.config);
  std::vector<int64_t> decode{0}, prefill{0};
  for (int64_t d = 1; d < sp.config.max_batch; d *= 2) decode.push_back(d);
  decode.push_back(sp.config.max_batch);
  for (int64_t t : {int64_t(16), int64_t(128), int64_t(512), int64_t(1024), int64_t(2048)})
    if (t < budget) prefill.push_back(t);
  prefill.push_back(budget);
  const int64_t base_context = std::min<int64_t>(256, sp.config.max_len / 4);
  const StepTimingTable t = calibrate_engine(sp.config, sp.options, decode, prefill, base_context, sp.config.max_len, repeats);
  write_file_atomic(out, step_timing_json(t));
  if (json) {
    print_json(nlohmann::json::parse(step_timing_json(t)));
  } else {
    fmt::print("{} on {}: {} x {} passes timed ({}), wrote {}\n", t.model, t.device, t.decode.size(), t.prefill.size(),
               t.provenance, out);
  }
  return 0;
}

// ---------------------------------------------------------------- run
int cmd_run(const std::vector<std::string>& specs, const RunOptions& base, bool json) {
  const GpuInfo gpu = detect_gpu();
  // Load every spec first: a malformed one stops the run before anything is written.
  std::vector<Spec> loaded;
  for (const auto& s : specs) loaded.push_back(load_spec(s));
  nlohmann::json out = nlohmann::json::array();
  int status = 0;
  for (const Spec& spec : loaded) {
    if (!json) fmt::print(stderr, "{}: {} points ({})\n", spec.name, spec.points().size(), spec.path.string());
    RunOptions o = base;
    o.progress = !json;
    RunResult r;
    try {
      r = run_spec(spec, o, gpu);
    } catch (const PlotsInterrupted& e) {
      fmt::print(stderr, "inferlab: {}\n", e.what());
      return 130;
    }
    if (!r.complete) {
      if (!r.written)
        fmt::print(stderr, "inferlab: interrupted while predicting {} (point {} of {}); nothing written\n", spec.name,
                   r.ran + 1, r.points);
      else
        fmt::print(stderr,
                   "inferlab: interrupted after measuring {} of {} points of {} ({} kept from before); {} holds every "
                   "prediction and the measurements so far: the same command measures the rest\n",
                   r.ran + r.resumed, r.points, spec.name, r.resumed, r.csv.string());
      return 130;
    }
    nlohmann::json figs = nlohmann::json::array();
    for (const auto& f : r.figures) figs.push_back(f.string());
    out.push_back({{"spec", spec.name},
                   {"csv", r.csv.string()},
                   {"provenance", r.provenance.string()},
                   {"figures", figs},
                   {"points", r.points},
                   {"ran", r.ran},
                   {"resumed", r.resumed},
                   {"pruned", r.pruned},
                   {"mode", r.measured ? "measured" : "predicted"},
                   {"mode_reason", r.mode_reason}});
    if (!json) {
      fmt::print(stderr, "  {} ({})\n  wrote {}\n", r.measured ? "measured" : "predicted", r.mode_reason, r.csv.string());
      for (const auto& f : r.figures) fmt::print(stderr, "  figure {}\n", f.string());
    }
  }
  if (json) print_json(out);
  return status;
}

// ---------------------------------------------------------------- plot
struct PlotArgs {
  std::string csv, only, out, spec;
  bool check = false;
};

int cmd_plot(const PlotArgs& a, bool json) {
  const fs::path csv(a.csv);
  if (!fs::is_regular_file(csv)) throw Error("results file not found: " + csv.string());
  // The plot entries: the spec's (to redraw results with the figures as the spec now has them), or
  // those the provenance beside the results recorded.
  std::string where, name = csv.stem().string();
  nlohmann::json entries;
  if (!a.spec.empty()) {
    const Spec spec = load_spec(a.spec);
    entries = spec.plots;
    where = spec.path.string();
    name = spec.name;
  } else {
    fs::path prov = csv;
    prov.replace_extension(".json");
    if (!fs::is_regular_file(prov))
      throw Error("no provenance " + prov.string() + " beside " + csv.string() + ": it names the plots to draw (or --spec)");
    const auto p = read_json_file(prov);
    entries = p.value("plots", nlohmann::json::array());
    where = prov.string();
    name = p.value("spec_name", name);
  }
  std::vector<nlohmann::json> plots;
  for (const auto& pl : entries)
    if (a.only.empty() || pl.value("name", std::string()) == a.only) plots.push_back(pl);
  if (plots.empty())
    throw Error(a.only.empty() ? where + " lists no plots" : "no plot named '" + a.only + "' in " + where);
  read_csv(csv);  // a malformed file is reported by file and line before python sees it
  if (a.check) {
    check_plots(read_text_file(csv), plots);
    if (json)
      print_json({{"checked", plots.size()}});
    else
      fmt::print("{} plot(s) of {} can be drawn from {}\n", plots.size(), where, csv.string());
    return 0;
  }
  const fs::path out = a.out.empty() ? csv.parent_path() / "figures" : fs::path(a.out);
  const auto figs = draw_plots(csv, plots, out, name);
  if (json) {
    nlohmann::json j = nlohmann::json::array();
    for (const auto& f : figs) j.push_back(f.string());
    print_json(j);
  } else {
    for (const auto& f : figs) fmt::print("figure {}\n", f.string());
  }
  return 0;
}

#ifdef INFERLAB_CUDA_CLI
// This `inferlab` predicts and loads no CUDA library, so that it starts at once; verbs that run
// kernels are handed over to inferlab-cuda beside it (the same CLI with the measured side), with the
// same arguments: `ceilings`, `generate` (the GPU engine) and `run` of a spec whose scenario has kernels.
bool runs_kernels(const std::vector<std::string>& specs) {
  for (const auto& path : specs) {
    try {
      if (find_scenario(load_spec(path).scenario).kernels) return true;
    } catch (const std::exception&) {
      // A spec that does not load is reported as ever, by this process.
    }
  }
  return false;
}

fs::path cuda_cli() {
  std::error_code ec;
  return fs::read_symlink("/proc/self/exe", ec).parent_path() / INFERLAB_CUDA_CLI;
}

// Replaces this process by inferlab-cuda; returns only when that cannot be run.
int hand_over(char** argv) {
  const fs::path cuda = cuda_cli();
  std::error_code ec;
  if (!fs::is_regular_file(cuda, ec)) return 0;  // not built: the verb explains what is missing
  const std::string self = cuda.string();
  argv[0] = const_cast<char*>(self.c_str());
  ::execv(self.c_str(), argv);
  fmt::print(stderr, "inferlab: error: cannot run {}: {}\n", self, std::strerror(errno));
  return 1;
}
#endif

// ---------------------------------------------------------------- ceilings
int cmd_ceilings(const std::string& hardware_arg, const std::string& out_arg, bool quick, bool json) {
#ifndef INFERLAB_HAVE_CUDA
  (void)hardware_arg, (void)out_arg, (void)quick, (void)json;
#ifdef INFERLAB_CUDA_CLI
  throw Error("ceilings: " + cuda_cli().string() + " (the CLI that measures) is not built: build the inferlab-cuda target");
#else
  throw Error("ceilings: this inferlab was built without CUDA; build with nvcc to measure a GPU");
#endif
#else
  const GpuInfo gpu = detect_gpu();
  if (!gpu.present) throw Error("ceilings: no GPU to measure (" + gpu.reason + ")");
  std::string id = hardware_arg.empty() ? hardware_for_device(gpu.name) : hardware_arg;
  if (id.empty())
    throw Error("ceilings: no data/hardware file lists the device name '" + gpu.name +
                "' (add it to a file's device_names, or pass --hardware ID)");
  const Hardware sheet = load_hardware(id, CeilingsMode::datasheet);
  if (!json) fmt::print(stderr, "measuring {} as {} ({})...\n", gpu.name, id, quick ? "quick" : "full");
  CeilingOptions options;
  options.quick = quick;
  const Ceilings c = measure_ceilings(options);
  const PipeMeasurements pipes = measure_pipes(quick);
  nlohmann::json tensor = nlohmann::json::object();
  for (const auto& [k, v] : c.tensor_flops) tensor[k] = v / 1e12;
  nlohmann::json details = nlohmann::json::array();
  for (const auto& d : c.details)
    details.push_back({{"key", d.key},
                       {"value", d.value},
                       {"unit", d.unit},
                       {"method", d.method},
                       {"median_s", d.timing.median_s},
                       {"p10_s", d.timing.p10_s},
                       {"p90_s", d.timing.p90_s},
                       {"repeats", d.timing.repeats}});
  nlohmann::json out = provenance_json(gpu);
  out["id"] = id;
  out["quick"] = quick;
  out["ceilings"] = {{"memory_bandwidth_gb_s", c.copy_bandwidth / 1e9},
                     {"memory_read_bandwidth_gb_s", c.read_bandwidth / 1e9},
                     {"l2_bandwidth_gb_s", c.l2_bandwidth / 1e9},
                     {"tensor_tflops_dense", tensor},
                     {"vector_tflops", {{"fp32", c.fp32_flops / 1e12}}},
                     {"launch_overhead_us", c.launch_overhead_s * 1e6},
                     {"pipes", pipes_json(pipes)}};
  out["note"] = "memory_bandwidth_gb_s is the copy bandwidth (bytes read + written); it replaces the datasheet "
                "bandwidth in predictions, as the tensor and FP32 rates replace the datasheet peaks";
  out["details"] = details;
  const fs::path path = out_arg.empty() ? measured_ceilings_path(id) : fs::path(out_arg);
  write_file_atomic(path, out.dump(2) + "\n");
  if (json) {
    print_json(out);
    return 0;
  }
  auto ratio = [](double m, double d) { return d > 0 ? fmt::format("{:5.1f}%", 100 * m / d) : std::string("   - "); };
  fmt::print("{:<28} {:>14} {:>14} {:>8}\n", "ceiling", "measured", "datasheet", "ratio");
  fmt::print("{:<28} {:>10.0f} GB/s {:>9.0f} GB/s {:>8}\n", "HBM copy (read+write)", c.copy_bandwidth / 1e9,
             sheet.memory_bandwidth / 1e9, ratio(c.copy_bandwidth, sheet.memory_bandwidth));
  fmt::print("{:<28} {:>10.0f} GB/s {:>9.0f} GB/s {:>8}\n", "HBM read", c.read_bandwidth / 1e9,
             sheet.memory_bandwidth / 1e9, ratio(c.read_bandwidth, sheet.memory_bandwidth));
  fmt::print("{:<28} {:>10.0f} GB/s {:>14} {:>8}\n", "L2 read", c.l2_bandwidth / 1e9, "", "");
  fmt::print("{:<28} {:>7.1f} TFLOP/s {:>6.1f} TFLOP/s {:>8}\n", "FP32 FMA", c.fp32_flops / 1e12,
             sheet.vector_peak() / 1e12, ratio(c.fp32_flops, sheet.vector_peak()));
  for (const auto& [k, v] : c.tensor_flops) {
    const double d = sheet.tensor_dense.count(k) ? sheet.tensor_dense.at(k) : 0;
    fmt::print("{:<28} {:>7.1f} TFLOP/s {:>6.1f} TFLOP/s {:>8}\n", "tensor " + k + " (dense)", v / 1e12, d / 1e12,
               ratio(v, d));
  }
  fmt::print("{:<28} {:>10.2f} us\n", "kernel launch", c.launch_overhead_s * 1e6);
  const nlohmann::json pj = pipes_json(pipes);
  for (const auto& [k, v] : pj.items())
    if (v.is_number()) fmt::print("{:<28} {:>14.4g}\n", "pipes." + k, v.get<double>());
  fmt::print("wrote {}\n", path.string());
  return 0;
#endif
}


void add_precision_options(CLI::App* c, Params& p) {
  c->add_option_function<std::string>("--dtype", [&p](const std::string& v) { p["dtype"] = v; },
                                      "weights, activations and KV (default: the model's torch_dtype)");
  c->add_option_function<std::string>("--weight-dtype", [&p](const std::string& v) { p["weight_dtype"] = v; },
                                      "override for weights");
  c->add_option_function<std::string>("--act-dtype", [&p](const std::string& v) { p["act_dtype"] = v; },
                                      "override for activations");
  c->add_option_function<std::string>("--kv-dtype", [&p](const std::string& v) { p["kv_dtype"] = v; },
                                      "override for the KV cache");
}

int cmd_generate(const Params& given, bool predict_only, bool profile, bool json) {
  Params p = given;
  const GpuInfo gpu = detect_gpu();
  if (!p.count("hardware")) {
    const std::string id = gpu.present ? hardware_for_device(gpu.name) : "";
    p["hardware"] = id.empty() ? "h100-sxm-80gb" : id;
  }
  const Scenario& sc = find_scenario("engine");
  GenerateConfig config = generate_config(complete_params(sc, p));
  config.profile = profile;
  GenerateRun run = plan_generate(config);
  std::string why_not;
#ifdef INFERLAB_HAVE_CUDA
  if (!predict_only && !gpu.present) why_not = "no GPU: " + gpu.reason;
#else
  why_not = "built without CUDA";
#endif
  if (predict_only) why_not = "--predict-only";
  if (why_not.empty()) measure_generate(run);
  const GenerateSummary s = summarize(run);
  const GenerateConfig& c = run.config;
  const std::string format = c.weight_format ? weight_format_name(*c.weight_format) : "bf16";
  if (json) {
    nlohmann::json steps = nlohmann::json::array();
    for (const GenerateStep& st : run.steps) {
      int64_t tokens = 0, past = 0;
      for (const auto& q : st.sequences) tokens += q.new_tokens, past = std::max(past, q.past);
      nlohmann::json j = {{"phase", st.phase}, {"sequences", st.sequences.size()}, {"tokens", tokens},
                          {"max_past", past}, {"predicted_s", st.predicted_s}, {"limit_s", st.limit_s},
                          {"bytes", st.bytes}, {"flops", st.flops}};
      if (run.measured) j["measured_s"] = st.measured_s, j["wall_s"] = st.wall_s, j["graph"] = st.graph;
      steps.push_back(j);
    }
    print_json({{"model", model_json(run.model)},
                {"hardware", hardware_json(run.hardware)},
                {"weights", c.weights},
                {"weight_format", format},
                {"batch", c.batch},
                {"prompt_tokens", c.prompt_tokens},
                {"new_tokens", c.new_tokens},
                {"graphs", c.graphs},
                {"measured", run.measured},
                {"not_measured_because", why_not},
                {"device", run.device},
                {"engine_weight_bytes", run.weight_bytes},
                {"prefill", {{"tokens", s.prefill_tokens}, {"predicted_s", s.prefill_predicted_s},
                             {"measured_s", s.prefill_measured_s}, {"wall_s", s.prefill_wall_s},
                             {"tokens_per_s", s.prefill_tokens_per_s},
                             {"predicted_tokens_per_s", s.predicted_prefill_tokens_per_s}}},
                {"decode", {{"tokens", s.decode_tokens}, {"steps", s.decode_steps},
                            {"tokens_per_s", s.tokens_per_s}, {"gpu_tokens_per_s", s.gpu_tokens_per_s},
                            {"predicted_tokens_per_s", s.predicted_tokens_per_s},
                            {"limit_tokens_per_s", s.limit_tokens_per_s}, {"share_of_limit", s.share_of_limit()},
                            {"median_step_measured_s", s.median_decode_measured_s},
                            {"median_step_predicted_s", s.median_decode_predicted_s},
                            {"wall_s", s.decode_wall_s}, {"gpu_s", s.decode_measured_s},
                            {"predicted_s", s.decode_predicted_s}, {"limit_s", s.decode_limit_s}}},
                {"first_sequence_tokens", run.first_sequence},
                {"steps", steps}});
    return 0;
  }
  fmt::print("{}\n", model_summary(run.model));
  fmt::print("engine: weights {} ({}), batch {}, prompt {} + {} new tokens, {} decode\n", c.weights, format, c.batch,
             c.prompt_tokens, c.new_tokens, c.graphs ? "CUDA graphs for" : "eager launches for");
  fmt::print("predicted on {} ({}): {:.0f} GB/s copy bandwidth\n", run.hardware.id, run.hardware.ceilings_source,
             run.hardware.memory_bandwidth / 1e9);
  if (!run.measured) fmt::print("not measured ({}): predictions only\n", why_not);
  else fmt::print("measured on {}: weights {}\n", run.device, gb(run.weight_bytes));
  fmt::print("\n{:<8} {:>8} {:>12} {:>12} {:>12} {:>13} {:>13}\n", "phase", "tokens", "predicted", "measured", "wall",
             "tok/s pred", "tok/s meas");
  fmt::print("{:<8} {:>8} {:>12} {:>12} {:>12} {:>13.1f} {:>13}\n", "prefill", s.prefill_tokens,
             seconds(s.prefill_predicted_s), run.measured ? seconds(s.prefill_measured_s) : "-",
             run.measured ? seconds(s.prefill_wall_s) : "-", s.predicted_prefill_tokens_per_s,
             run.measured ? fmt::format("{:.1f}", s.prefill_tokens_per_s) : "-");
  if (s.decode_steps > 0) {
    fmt::print("{:<8} {:>8} {:>12} {:>12} {:>12} {:>13.1f} {:>13}\n", "decode", s.decode_tokens,
               seconds(s.decode_predicted_s), run.measured ? seconds(s.decode_measured_s) : "-",
               run.measured ? seconds(s.decode_wall_s) : "-", s.predicted_tokens_per_s,
               run.measured ? fmt::format("{:.1f}", s.tokens_per_s) : "-");
    fmt::print("\ndecode step: predicted {} (median){}\n", seconds(s.median_decode_predicted_s),
               run.measured ? fmt::format(", measured {} (median GPU time), model error {:+.1f}%",
                                          seconds(s.median_decode_measured_s),
                                          100 * (s.median_decode_predicted_s - s.median_decode_measured_s) /
                                              s.median_decode_measured_s)
                            : "");
    fmt::print("bandwidth limit (the step's bytes once at {:.0f} GB/s): {:.1f} tokens/s{}\n",
               run.hardware.memory_bandwidth / 1e9, s.limit_tokens_per_s,
               run.measured ? fmt::format("; reached {:.1f}% of it (wall clock), {:.1f}% by GPU time",
                                          100 * s.share_of_limit(), 100 * s.gpu_tokens_per_s / s.limit_tokens_per_s)
                            : "");
  }
  if (!run.profile.empty()) {
    double sum = 0;
    for (const auto& k : run.profile) sum += k.seconds;
    fmt::print("\nkernels of one decode step (CUPTI): {} in kernels, {} from the first start to the last end\n",
               seconds(sum), seconds(run.profile_span_s));
    for (const auto& k : run.profile)
      fmt::print("  {:>10} {:>5.1f}% {:>5}x  {}\n", seconds(k.seconds), 100 * k.seconds / sum, k.launches, k.kernel);
  }
  if (run.measured && !run.first_sequence.empty()) {
    std::string t;
    for (std::size_t i = 0; i < run.first_sequence.size() && i < 16; ++i) t += (i ? " " : "") + std::to_string(run.first_sequence[i]);
    fmt::print("first sequence's tokens: {}{}\n", t, run.first_sequence.size() > 16 ? " ..." : "");
  }
  return 0;
}

void add_param(CLI::App* c, Params& p, const std::string& flag, const std::string& key, const std::string& help,
               bool required = false) {
  auto* o = c->add_option_function<std::string>(flag, [&p, key](const std::string& v) { p[key] = v; }, help);
  if (required) o->required();
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"inferlab: analytic model, kernels and roofline lab for LLM inference"};
  app.require_subcommand(1);
  bool json = false;

  auto* list = app.add_subcommand("list", "models, hardware, experiment specs and scenarios");
  std::string list_ceilings = "datasheet";
  list->add_option("--ceilings", list_ceilings, std::string("the hardware figures: ") + kCeilingsHelp);
  list->add_flag("--json", json, "machine-readable output");

  Params model_p, memory_p;
  auto* model = app.add_subcommand("model", "per-operator roofline of one prefill or decode step");
  add_param(model, model_p, "--model", "model", "model name (inferlab list) or path to a config.json", true);
  add_param(model, model_p, "--hardware", "hardware", "hardware name or path to a .json", true);
  add_param(model, model_p, "--ceilings", "ceilings", kCeilingsHelp);
  add_param(model, model_p, "--phase", "phase", "prefill or decode (default decode)");
  add_param(model, model_p, "--batch", "batch", "sequences in the step (default 1)");
  add_param(model, model_p, "--context", "context", "prompt tokens (prefill) or tokens attended (decode)", true);
  add_param(model, model_p, "--attention", "attention", "flash (default) or naive");
  add_param(model, model_p, "--max-positions", "max_positions",
            "longest context: model (default: the config's max_position_embeddings) or a number to compute past it");
  add_param(model, model_p, "--kv-heads", "kv_heads", "config (default), mha, mqa or the number of KV heads (GQA-8: 8)");
  add_param(model, model_p, "--tp", "tp", "tensor-parallel degree: divides the heads (default 1)");
  add_param(model, model_p, "--pp", "pp", "pipeline-parallel stages (default 1)");
  add_param(model, model_p, "--microbatches", "microbatches", "micro-batches of the pipeline schedule (default 1)");
  add_param(model, model_p, "--weight-format", "weight_format",
            "weights of the layer GEMMs: none (default: dense in the weight dtype), " +
                join(known_weight_formats(), ", "));
  model->add_flag_function("--non-causal", [&](std::int64_t) { model_p["causal"] = "false"; }, "no causal mask in prefill");
  add_precision_options(model, model_p);
  model->add_flag("--json", json, "machine-readable output");

  auto* memory = app.add_subcommand("memory", "weights + KV cache + activations, and what fits on a device");
  add_param(memory, memory_p, "--model", "model", "model name or path to a config.json", true);
  add_param(memory, memory_p, "--hardware", "hardware", "device to fit into (default: none)");
  add_param(memory, memory_p, "--ceilings", "ceilings", std::string(kCeilingsHelp) + " (only shown: memory needs the capacity)");
  add_param(memory, memory_p, "--batch", "batch", "sequences (default 1)");
  add_param(memory, memory_p, "--context", "context", "tokens per sequence", true);
  add_param(memory, memory_p, "--block-size", "block_size", "paged KV block size in tokens (default 16)");
  add_param(memory, memory_p, "--max-len", "max_len", "contiguous reservation per sequence (default: model max)");
  add_param(memory, memory_p, "--prefill-chunk", "prefill_chunk", "tokens per prefill pass, 0 = whole prompt (default 8192)");
  add_param(memory, memory_p, "--attention", "attention", "flash (default) or naive");
  add_param(memory, memory_p, "--max-positions", "max_positions",
            "longest context: model (default: the config's max_position_embeddings) or a number to compute past it");
  add_param(memory, memory_p, "--kv-heads", "kv_heads", "config (default), mha, mqa or the number of KV heads (GQA-8: 8)");
  add_param(memory, memory_p, "--reserve-gib", "reserve_gib", "memory set aside on the device (default 0)");
  memory->add_flag_function("--no-rolling-window", [&](std::int64_t) { memory_p["rolling_window"] = "false"; },
                            "keep every token of a sliding-window model in the KV cache");
  add_precision_options(memory, memory_p);
  memory->add_flag("--json", json, "machine-readable output");

  Params serve_p;
  ServeFiles serve_files;
  auto* serve = app.add_subcommand("serve", "simulate serving a request trace: scheduler x KV allocator, latency and "
                                            "throughput, KV memory over time");
  add_param(serve, serve_p, "--model", "model", "model name or path to a config.json", true);
  add_param(serve, serve_p, "--hardware", "hardware", "hardware name or path to a .json", true);
  auto* trace_opt = serve->add_option_function<std::string>(
      "--trace", [&](const std::string& v) { serve_p["trace"] = v; },
      "trace CSV with columns arrival_s,prompt_tokens,output_tokens (default: generate one)");
  for (const auto& [flag, key, help] : std::vector<std::tuple<std::string, std::string, std::string>>{
           {"--requests", "requests", "generated trace: requests (default 1000)"},
           {"--rate", "rate", "generated trace: mean arrivals per second, Poisson (default 10)"},
           {"--seed", "seed", "generated trace: seed (default 1)"},
           {"--prompt-mean", "prompt_mean", "generated trace: mean prompt tokens, lognormal (default 161, ShareGPT)"},
           {"--output-mean", "output_mean", "generated trace: mean output tokens, lognormal (default 338, ShareGPT)"},
           {"--sigma", "sigma", "generated trace: lognormal sigma (default 1)"},
           {"--trace-max-tokens", "trace_max_tokens",
            "generated trace: clip prompt + output to this (default 0: no clipping; longer than --max-len is rejected)"}}) {
    auto* o = serve->add_option_function<std::string>(flag, [&serve_p, key = key](const std::string& v) { serve_p[key] = v; },
                                                      help);
    o->excludes(trace_opt);
  }
  add_param(serve, serve_p, "--scheduler", "scheduler", "static, continuous (default) or chunked");
  add_param(serve, serve_p, "--priority", "priority", "prefill-first (default) or decode-first");
  add_param(serve, serve_p, "--kv", "kv", "paged (default) or contiguous");
  add_param(serve, serve_p, "--block-size", "block_size", "paged KV block size in tokens (default 16)");
  add_param(serve, serve_p, "--max-len", "max_len", "longest request served, prompt + output (default: model max)");
  add_param(serve, serve_p, "--max-positions", "max_positions",
            "longest request the model takes: model (default) or a number to compute past it");
  add_param(serve, serve_p, "--max-batch", "max_batch", "sequences admitted at once (default 256)");
  add_param(serve, serve_p, "--max-batch-tokens", "max_batch_tokens",
            "tokens per pass (default: 2048 chunked, else max(max_len, 2048))");
  add_param(serve, serve_p, "--gpu-memory-utilization", "gpu_memory_utilization", "share of device memory (default 0.9)");
  add_param(serve, serve_p, "--kv-gib", "kv_gib", "KV memory per device in GiB (default: what weights leave)");
  add_param(serve, serve_p, "--tp", "tp", "tensor-parallel degree (default 1)");
  add_param(serve, serve_p, "--ceilings", "ceilings", kCeilingsHelp);
  add_precision_options(serve, serve_p);
  std::string serve_engine = "sim";
  serve->add_option("--engine", serve_engine, "sim (default: the discrete-event simulator) or gpu (the GPU engine)")
      ->check(CLI::IsMember({"sim", "gpu"}));
  add_param(serve, serve_p, "--admission", "admission",
            "paged: optimistic (default; recompute preemption) or reserve (prompt + every output token up front)");
  add_param(serve, serve_p, "--weights", "weights", "--engine gpu: random (default) or a Hugging Face model folder");
  add_param(serve, serve_p, "--step-cost", "step_cost", "--engine gpu: calibrate-engine JSON for the simulator beside it");
  serve->add_flag_function("--offline", [&](std::int64_t) { serve_p["offline"] = "true"; },
                           "--engine gpu: every request arrives at time 0");
  serve->add_option("--chrome-trace", serve_files.chrome_trace, "write the timeline as Chrome trace JSON here");
  serve->add_option("--timeline", serve_files.timeline, "write one CSV row per iteration here");
  serve->add_option("--requests-csv", serve_files.requests, "write one CSV row per request here");
  serve->add_flag("--json", json, "machine-readable output");

  Params cal_p;
  std::string cal_out;
  int cal_repeats = 5;
  auto* calibrate = app.add_subcommand("calibrate-engine", "time GPU engine passes (decodes x prompt tokens, contexts): "
                                                           "the simulator's measured step cost");
  add_param(calibrate, cal_p, "--model", "model", "model name or path to a config.json (llama, mistral, qwen2)", true);
  add_param(calibrate, cal_p, "--weights", "weights", "random (default) or a Hugging Face model folder");
  add_param(calibrate, cal_p, "--seed", "seed", "random weights' seed (default 1)");
  add_param(calibrate, cal_p, "--max-batch", "max_batch", "the most decode sequences a pass holds (default 256)");
  add_param(calibrate, cal_p, "--max-len", "max_len", "the longest context (default 2048)");
  add_param(calibrate, cal_p, "--max-batch-tokens", "max_batch_tokens", "the most prompt tokens a pass holds");
  add_param(calibrate, cal_p, "--block-size", "block_size", "KV block size (default 16)");
  add_param(calibrate, cal_p, "--kv-gib", "kv_gib", "KV memory of the engine, GiB", true);
  calibrate->add_option("--out", cal_out, "the timing table (JSON) to write")->required();
  calibrate->add_option("--repeats", cal_repeats, "timed passes a point (median; default 5)");
  calibrate->add_flag("--json", json, "machine-readable output");

  std::vector<std::string> specs;
  RunOptions run_opts;
  std::string out_dir;
  bool no_plots = false;
  auto* run = app.add_subcommand("run", "run experiment specs: predict (and measure on a GPU), write rows, draw plots");
  run->add_option("specs", specs, "spec files (experiments/*.yaml)")->required();
  run->add_flag("--predict-only", run_opts.predict_only, "do not measure even when a GPU is present");
  run->add_option("--out", out_dir,
                  "output folder (default out/<gpu>, or out/model when predicting; committed results: "
                  "--out data/results/<gpu or model>, from a clean tree)");
  run->add_flag("--allow-dirty", run_opts.allow_dirty, "write into data/results/ although the tree has uncommitted changes");
  run->add_flag("--fresh", run_opts.fresh, "keep nothing of an earlier run in --out: measure every point again");
  run->add_flag("--prune", run_opts.prune, "drop the measured points of an earlier run that the spec no longer has");
  run->add_option("--ceilings", run_opts.ceilings,
                  std::string("ceilings of every point that takes them (the spec must not set them): ") + kCeilingsHelp);
  run->add_flag("--no-plots", no_plots, "skip the figures");
  std::string run_shard;
  run->add_option("--shard", run_shard,
                  "I/N: run the points I, I+N, I+2N, ... (I from 0 to N-1) into NAME.shard-I-of-N.csv; `merge` joins the N shards");
  run->add_flag("--json", json, "machine-readable summary");

  std::string ceil_hw, ceil_out;
  bool ceil_quick = false;
  auto* ceilings = app.add_subcommand("ceilings", "measure this GPU's ceilings into data/hardware/<id>.measured.json");
  ceilings->add_option("--hardware", ceil_hw, "hardware id to file the measurement under (default: by device name)");
  ceilings->add_option("--out", ceil_out, "write here instead of data/hardware/<id>.measured.json");
  ceilings->add_flag("--quick", ceil_quick, "small sizes, few repeats (a smoke run; not for the model)");
  ceilings->add_flag("--json", json, "machine-readable output");

  Params gen_p;
  bool gen_predict_only = false;
  auto* generate = app.add_subcommand("generate", "run the GPU engine: prefill B prompts, decode N tokens; tokens/s "
                                                  "beside the prediction of every step and the bandwidth limit");
  add_param(generate, gen_p, "--model", "model", "model name or path to a config.json (llama, mistral, qwen2)", true);
  add_param(generate, gen_p, "--weights", "weights", "random (default: seeded, Hugging Face's init) or a model folder");
  add_param(generate, gen_p, "--batch", "batch", "sequences (default 1)");
  add_param(generate, gen_p, "--prompt-tokens", "prompt_tokens", "prompt tokens per sequence (default 128)");
  add_param(generate, gen_p, "--new-tokens", "new_tokens", "tokens to generate per sequence (default 128)");
  add_param(generate, gen_p, "--weight-format", "weight_format", "layer GEMM weights: none (bf16), int8, int4, sparse24");
  add_param(generate, gen_p, "--hardware", "hardware", "hardware to predict for (default: this GPU, else h100-sxm-80gb)");
  add_param(generate, gen_p, "--ceilings", "ceilings", "auto (default), datasheet or measured");
  add_param(generate, gen_p, "--seed", "seed", "seed of the random weights and prompts (default 1)");
  add_param(generate, gen_p, "--max-step-tokens", "max_step_tokens", "new tokens per step (default 8192)");
  generate->add_flag_function("--eager", [&](std::int64_t) { gen_p["graphs"] = "false"; },
                              "launch every kernel from the host (no CUDA graphs)");
  generate->add_flag("--predict-only", gen_predict_only, "do not run the engine even when a GPU is present");
  bool gen_profile = false;
  generate->add_flag("--profile", gen_profile, "kernel times of one decode step (CUPTI), by kernel");
  generate->add_flag("--json", json, "machine-readable output");

  EvalArgs eval_args;
  auto* eval = add_eval_command(app, eval_args, json);

  std::string fid_dir = (data_dir() / "results" / "nvidia-h100-80gb-hbm3").string();
  bool fid_write = false;
  auto* fidelity = app.add_subcommand("fidelity", "re-predict every committed measured point: error per kernel family");
  fidelity->add_option("results", fid_dir, "folder of result CSVs with provenance (default: the committed H100 results)");
  fidelity->add_flag("--write", fid_write, "replace the CSVs' predicted columns by this model's");
  fidelity->add_flag("--json", json, "every point as JSON");

  PlotArgs plot_args;
  auto* plot = app.add_subcommand("plot", "draw the plots of a results CSV (named in its provenance JSON, or a spec)");
  plot->add_option("results", plot_args.csv, "results .csv")->required();
  plot->add_option("--plot", plot_args.only, "only the plot with this name");
  plot->add_option("--out", plot_args.out, "figure folder (default: figures/ beside the CSV)");
  plot->add_option("--spec", plot_args.spec, "take the plot entries from this spec instead of the provenance");
  plot->add_flag("--check", plot_args.check, "check that the plots can be drawn from the CSV; draw nothing");
  plot->add_flag("--json", json, "machine-readable output");

  const std::vector<Verb> verbs = {add_merge_verb(app, json), add_compare_verb(app, json), add_report_verb(app, json)};

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
#ifdef INFERLAB_CUDA_CLI
  if (*ceilings || (*generate && !gen_predict_only) || (*eval && !eval_args.reference) ||
      (*run && !run_opts.predict_only && runs_kernels(specs)) || (*serve && serve_engine == "gpu") || *calibrate)
    if (const int rc = hand_over(argv)) return rc;
#endif
  // Warnings (a model config read with an assumption, say) go to stderr after the output.
  auto warn = [] {
    for (const auto& w : drain_warnings()) fmt::print(stderr, "inferlab: warning: {}\n", w);
  };
  try {
    int status = 0;
    if (*list) status = cmd_list(list_ceilings, json);
    if (*model) status = cmd_model(model_p, json);
    if (*memory) status = cmd_memory(memory_p, json);
    if (*serve) status = serve_engine == "gpu" ? cmd_serve_engine(serve_p, serve_files, json) : cmd_serve(serve_p, serve_files, json);
    if (*calibrate) status = cmd_calibrate_engine(cal_p, cal_out, cal_repeats, json);
    if (*run) {
      run_opts.out_dir = out_dir;
      run_opts.plots = !no_plots;
      if (!run_shard.empty()) run_opts.shard = parse_shard(run_shard);
      status = cmd_run(specs, run_opts, json);
    }
    if (*plot) status = cmd_plot(plot_args, json);
    for (const Verb& v : verbs)
      if (*v.command) status = v.run();
    if (*ceilings) status = cmd_ceilings(ceil_hw, ceil_out, ceil_quick, json);
    if (*generate) status = cmd_generate(gen_p, gen_predict_only, gen_profile, json);
    if (*eval) status = cmd_eval(eval_args, json);
    if (*fidelity) {
      const auto pts = repredict_results(fid_dir, fid_write);
      if (json) {
        nlohmann::json a = nlohmann::json::array();
        for (const auto& p : pts)
          a.push_back({{"file", p.file}, {"family", p.family}, {"point", p.point}, {"predicted_s", p.predicted_s},
                       {"measured_s", p.measured_s}, {"error", p.error()}, {"dominant", p.dominant}});
        print_json(a);
      } else {
        fmt::print("{}", fidelity_table(pts));
      }
    }
    warn();
    return status;
  } catch (const PlotsInterrupted& e) {
    fmt::print(stderr, "inferlab: {}\n", e.what());
    return 130;
  } catch (const Error& e) {
    warn();
    fmt::print(stderr, "inferlab: error: {}\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    fmt::print(stderr, "inferlab: internal error: {}\n", e.what());
    return 1;
  }
}
