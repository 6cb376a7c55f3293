// The serving_engine scenario: a request trace replayed on the GPU engine by the one scheduler, beside
// the discrete-event simulator driving the same scheduler with the same KV memory, twice: with the
// roofline step cost (sim/ alone) and with the measured step cost (the engine's calibrated pass times,
// sim/measured_step_cost.h). Without a GPU only the two simulations are written.
#include <filesystem>

#include "inferlab/experiments/scenarios.h"
#include "inferlab/experiments/serve_engine.h"
#include "inferlab/sim/error.h"
#include "inferlab/sim/memory.h"
#include "inferlab/sim/paths.h"
#include "inferlab/sim/trace.h"

namespace inferlab {
namespace fs = std::filesystem;
namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

void add_summary(Row& r, const std::string& prefix, const ServingSummary* s) {
  auto v = [&](double x) { return s ? num(x) : std::string(); };
  r.emplace_back(prefix + "throughput", v(s ? s->output_tokens_per_s : 0));
  r.emplace_back(prefix + "requests_per_s", v(s ? s->requests_per_s : 0));
  r.emplace_back(prefix + "ttft_p50", v(s ? s->ttft.p50 : 0));
  r.emplace_back(prefix + "ttft_p99", v(s ? s->ttft.p99 : 0));
  r.emplace_back(prefix + "tpot_p50", v(s ? s->tpot.p50 : 0));
  r.emplace_back(prefix + "tpot_p99", v(s ? s->tpot.p99 : 0));
  r.emplace_back(prefix + "latency_p50", v(s ? s->latency.p50 : 0));
  r.emplace_back(prefix + "latency_p99", v(s ? s->latency.p99 : 0));
  r.emplace_back(prefix + "queueing_p50", v(s ? s->queueing.p50 : 0));
  r.emplace_back(prefix + "makespan_s", v(s ? s->makespan_s : 0));
  r.emplace_back(prefix + "mean_batch", v(s ? s->mean_batch : 0));
  r.emplace_back(prefix + "kv_reserved_bytes", v(s ? s->kv_mean_reserved : 0));
  r.emplace_back(prefix + "kv_used_bytes", v(s ? s->kv_mean_used : 0));
  r.emplace_back(prefix + "preemptions", s ? num(s->preemptions) : std::string());
  r.emplace_back(prefix + "recompute_fraction", v(s ? s->recompute_fraction : 0));
  r.emplace_back(prefix + "iterations", s ? num(s->iterations) : std::string());
}

std::string rel(double model, double measured) { return measured > 0 ? num(model / measured - 1) : std::string(); }

// KV memory over time every `every` seconds: the pass running then (nothing held while idle).
void add_timeline(std::vector<Row>& rows, const Row& columns, const ServingResult& r, const std::string& source,
                  double every) {
  for (const auto& [t, it] : sample_iterations(r, every)) {
    Row tl;
    for (const auto& [col, _] : columns) tl.emplace_back(col, "");
    set_cell(tl, "row", "timeline");
    set_cell(tl, "source", source);
    set_cell(tl, "time_s", num(t));
    set_cell(tl, "kv_reserved_bytes", num(it.kv_reserved));
    set_cell(tl, "kv_used_bytes", num(it.kv_used));
    set_cell(tl, "running", num(it.running));
    set_cell(tl, "waiting", num(it.waiting));
    rows.push_back(std::move(tl));
  }
}

}  // namespace

ServingEnginePoint plan_serving_engine(const Params& p) {
  ServingEnginePoint sp;
  sp.model = load_model(p.at("model"));
  sp.hardware = load_hardware(p.at("hardware"), p.at("ceilings"));
  sp.options.model = p.at("model");
  sp.options.weights = p.at("weights");
  sp.options.seed = uint64_t(param_int(p, "seed", 0));
  sp.options.offline = param_bool(p, "offline");
  sp.options.graphs = param_bool(p, "graphs");
  sp.options.kv_gib = param_double(p, "kv_gib");
  if (!(sp.options.kv_gib > 0)) throw Error("parameter 'kv_gib' must be positive (the engine and the simulator share it)");
  ServingConfig& c = sp.config;
  read_scheduling(p, c);
  c.max_len = param_int(p, "max_len", 2);
  check_context(p, sp.model, c.max_len, "max_len");
  c.max_batch = param_int(p, "max_batch");
  c.max_batch_tokens = param_int(p, "max_batch_tokens", 0);
  // The engine's KV memory: kv_gib in blocks of block_size tokens of bf16 K and V.
  c.kv_bytes_per_token = kv_bytes_per_token(sp.model, DType::bf16);
  sp.kv_blocks = int64_t(sp.options.kv_gib * kGiB / (c.kv_bytes_per_token * double(c.block_size)));
  if (sp.kv_blocks < 1) throw Error("kv_gib " + p.at("kv_gib") + " holds no KV block");
  c.kv_capacity_bytes = double(sp.kv_blocks * c.block_size) * c.kv_bytes_per_token;

  if (p.at("trace") != "none") {
    sp.trace = read_trace_csv(in_project(p.at("trace")));
  } else {
    TraceSpec ts;
    ts.seed = sp.options.seed;
    ts.requests = param_int(p, "requests");
    ts.rate = param_double(p, "rate");
    ts.prompt_mean = param_double(p, "prompt_mean");
    ts.output_mean = param_double(p, "output_mean");
    ts.sigma = param_double(p, "sigma");
    ts.max_tokens = param_int(p, "trace_max_tokens", 0);
    sp.trace = generate_trace(ts);
  }
  if (sp.options.offline)
    for (auto& r : sp.trace) r.arrival = 0;
  check_serving(sp.trace, c);

  const OpOptions ops{Precision{DType::bf16, DType::bf16, DType::bf16}, AttentionVariant::flash, true, std::nullopt};
  RooflineStepCost roofline(sp.model, sp.hardware, ops, 1);
  PagedKvManager kv1(sp.kv_blocks, c.block_size, kv_blocks_for(c.max_len, c.block_size));
  sp.des_roofline = simulate_serving(sp.trace, c, roofline, kv1);
  const std::string& cost_file = p.at("step_cost");
  if (cost_file != "none") {
    const fs::path path = in_project(cost_file);
    std::error_code ec;
    if (fs::exists(path, ec)) {
      sp.step_cost_source = cost_file;
      MeasuredStepCost measured(read_step_timing(path), cost_file);
      PagedKvManager kv2(sp.kv_blocks, c.block_size, kv_blocks_for(c.max_len, c.block_size));
      sp.des_measured = simulate_serving(sp.trace, c, measured, kv2);
    }
  }
  return sp;
}

std::vector<Row> serving_engine_rows(const ServingEnginePoint& sp, double every) {
  if (every < 0) throw Error("parameter 'sample_every_s' must not be negative");
  const auto des_r = summarize(sp.des_roofline);
  std::optional<ServingSummary> des_m, eng;
  if (sp.des_measured) des_m = summarize(*sp.des_measured);
  if (sp.engine) eng = sp.engine->summary;
  Row r{{"row", "summary"}, {"source", ""}, {"time_s", ""}};
  r.emplace_back("requests_total", num(int64_t(sp.trace.size())));
  r.emplace_back("measured_completed", eng ? num(eng->completed) : "");
  r.emplace_back("rejected", num(des_r.rejected));
  add_summary(r, "measured_", eng ? &*eng : nullptr);
  add_summary(r, "des_measured_", des_m ? &*des_m : nullptr);
  add_summary(r, "des_roofline_", &des_r);
  const double mt = eng ? eng->output_tokens_per_s : 0;
  r.emplace_back("des_measured_throughput_error", des_m && eng ? rel(des_m->output_tokens_per_s, mt) : "");
  r.emplace_back("des_measured_ttft_p50_error", des_m && eng ? rel(des_m->ttft.p50, eng->ttft.p50) : "");
  r.emplace_back("des_measured_tpot_p50_error", des_m && eng ? rel(des_m->tpot.p50, eng->tpot.p50) : "");
  r.emplace_back("des_roofline_throughput_error", eng ? rel(des_r.output_tokens_per_s, mt) : "");
  r.emplace_back("des_roofline_tpot_p50_error", eng ? rel(des_r.tpot.p50, eng->tpot.p50) : "");
  r.emplace_back("kv_blocks", num(sp.kv_blocks));
  r.emplace_back("kv_capacity_bytes", num(sp.config.kv_capacity_bytes));
  r.emplace_back("measured_blocks_allocated", sp.engine ? num(sp.engine->result.blocks_allocated) : "");
  r.emplace_back("measured_blocks_freed", sp.engine ? num(sp.engine->result.blocks_freed) : "");
  r.emplace_back("gpu_free_before_bytes", sp.engine ? num(sp.engine->gpu_free_before) : "");
  r.emplace_back("gpu_free_after_bytes", sp.engine ? num(sp.engine->gpu_free_after) : "");
  r.emplace_back("measured_gpu_busy_fraction",
                 sp.engine && eng->makespan_s > 0 ? num(sp.engine->gpu_seconds / eng->makespan_s) : "");
  r.emplace_back("running", "");
  r.emplace_back("waiting", "");
  r.emplace_back("step_cost", sp.step_cost_source);
  r.emplace_back("ceilings", sp.hardware.ceilings_source);
  r.emplace_back("device", sp.engine ? sp.engine->device : "");
  std::vector<Row> rows{r};
  if (sp.engine) add_timeline(rows, r, sp.engine->result, "engine", every);
  if (sp.des_measured) add_timeline(rows, r, *sp.des_measured, "des_measured", every);
  add_timeline(rows, r, sp.des_roofline, "des_roofline", every);
  return rows;
}

}  // namespace inferlab
