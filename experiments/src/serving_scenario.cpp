// The serving scenario (and `inferlab serve`): a request trace, from a file or generated from a
// seed, through the serving simulator with the roofline step cost of the model on the hardware.
#include <filesystem>

#include "inferlab/experiments/scenarios.h"
#include "inferlab/sim/error.h"
#include "inferlab/sim/memory.h"
#include "inferlab/sim/paths.h"
#include "inferlab/sim/trace.h"

namespace inferlab {
namespace fs = std::filesystem;
namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

void add_percentiles(Row& r, const std::string& what, const Percentiles& p) {
  r.emplace_back(what + "_mean_s", num(p.mean));
  r.emplace_back(what + "_p50_s", num(p.p50));
  r.emplace_back(what + "_p90_s", num(p.p90));
  r.emplace_back(what + "_p99_s", num(p.p99));
}

}  // namespace

void read_scheduling(const Params& p, ServingConfig& c) {
  c.scheduler = parse_scheduler(p.at("scheduler"));
  c.priority = parse_priority(p.at("priority"));
  c.kv = parse_kv_layout(p.at("kv"));
  c.admission = parse_admission(p.at("admission"));
  c.block_size = param_int(p, "block_size");
}

ServingPoint evaluate_serving_point(const Params& p) {
  ServingPoint sp;
  sp.model = load_model(p.at("model"));
  sp.hardware = load_hardware(p.at("hardware"), p.at("ceilings"));
  sp.precision = param_precision(p, sp.model);
  sp.tp = param_int(p, "tp");
  ServingConfig& c = sp.config;
  read_scheduling(p, c);
  c.max_len = param_int(p, "max_len", 0);
  if (c.max_len == 0) c.max_len = param_max_positions(p, sp.model);
  if (c.max_len < 2) throw Error(sp.model.name + " states no max positions: set parameter 'max_len'");
  check_context(p, sp.model, c.max_len, "max_len");
  c.max_batch = param_int(p, "max_batch");
  c.max_batch_tokens = param_int(p, "max_batch_tokens", 0);
  const double kv_gib = param_double(p, "kv_gib");
  if (kv_gib < 0) throw Error("parameter 'kv_gib' must not be negative");
  const int64_t pass_tokens = c.max_batch_tokens ? c.max_batch_tokens : default_batch_tokens(c);
  c.kv_capacity_bytes = kv_gib > 0 ? kv_gib * kGiB
                                   : serving_kv_capacity(sp.model, sp.hardware, sp.precision, sp.tp,
                                                         param_double(p, "gpu_memory_utilization"), pass_tokens);
  c.kv_bytes_per_token = kv_bytes_per_token(stage_model(sp.model, Parallelism{sp.tp, 1, 1}, 0), sp.precision.kv);

  const std::string& file = p.at("trace");
  if (file != "none") {
    sp.trace = read_trace_csv(in_project(file));
    sp.trace_source = file;
  } else {
    TraceSpec ts;
    ts.seed = uint64_t(param_int(p, "seed", 0));
    ts.requests = param_int(p, "requests");
    ts.rate = param_double(p, "rate");
    ts.prompt_mean = param_double(p, "prompt_mean");
    ts.output_mean = param_double(p, "output_mean");
    ts.sigma = param_double(p, "sigma");
    ts.max_tokens = param_int(p, "trace_max_tokens", 0);  // not max_len: longer requests are rejected, and counted
    sp.trace = generate_trace(ts);
    sp.trace_source = "generated (seed " + p.at("seed") + ", " + p.at("requests") + " requests, Poisson " +
                      p.at("rate") + "/s, lognormal prompt " + p.at("prompt_mean") + " / output " +
                      p.at("output_mean") + " tokens, sigma " + p.at("sigma") +
                      (ts.max_tokens ? ", prompt + output clipped to " + p.at("trace_max_tokens") : std::string()) + ")";
  }
  RooflineStepCost cost(sp.model, sp.hardware, OpOptions{sp.precision, AttentionVariant::flash, true, std::nullopt}, sp.tp);
  sp.result = simulate_serving(sp.trace, c, cost);
  sp.summary = summarize(sp.result);
  return sp;
}

std::vector<Row> serving_rows(const ServingPoint& sp, double sample_every_s) {
  if (sample_every_s < 0) throw Error("parameter 'sample_every_s' must not be negative");
  const ServingSummary& s = sp.summary;
  const ServingResult& r = sp.result;
  Row sum{{"row", "summary"},
          {"time_s", ""},
          {"requests_total", num(s.requests)},
          {"completed", num(s.completed)},
          {"rejected", num(s.rejected)},
          {"preemptions", num(s.preemptions)},
          {"iterations", num(s.iterations)},
          {"makespan_s", num(s.makespan_s)},
          {"requests_per_s", num(s.requests_per_s)},
          {"output_tokens_per_s", num(s.output_tokens_per_s)},
          {"total_tokens_per_s", num(s.total_tokens_per_s)}};
  add_percentiles(sum, "ttft", s.ttft);
  add_percentiles(sum, "tpot", s.tpot);
  add_percentiles(sum, "latency", s.latency);
  add_percentiles(sum, "queueing", s.queueing);
  const Row rest{{"mean_batch", num(s.mean_batch)},
                 {"busy_fraction", num(s.busy_fraction)},
                 {"kv_capacity_bytes", num(s.kv_capacity)},
                 {"kv_blocks_total", num(r.blocks_total)},
                 {"block_tokens", num(r.block_tokens)},
                 {"kv_peak_reserved_bytes", num(s.kv_peak_reserved)},
                 {"kv_reserved_bytes", num(s.kv_mean_reserved)},
                 {"kv_used_bytes", num(s.kv_mean_used)},
                 {"kv_wasted_bytes", num(s.kv_mean_wasted)},
                 {"kv_utilization", num(s.kv_utilization)},
                 {"recompute_tokens", num(s.recompute_tokens)},
                 {"recompute_fraction", num(s.recompute_fraction)},
                 {"running", ""},
                 {"waiting", ""},
                 {"trace_source", sp.trace_source},
                 {"cost_model", r.cost_model},
                 {"ceilings", sp.hardware.ceilings_source}};
  sum.insert(sum.end(), rest.begin(), rest.end());
  std::vector<Row> rows{sum};
  if (sample_every_s == 0 || r.iterations.empty()) return rows;
  // The KV memory every sample_every_s seconds: the iteration running then (nothing is held while idle).
  for (const auto& [t, it] : sample_iterations(r, sample_every_s)) {
    Row tl;
    for (const auto& [col, _] : sum) tl.emplace_back(col, "");
    set_cell(tl, "row", "timeline");
    set_cell(tl, "time_s", num(t));
    set_cell(tl, "kv_capacity_bytes", num(s.kv_capacity));
    set_cell(tl, "kv_reserved_bytes", num(it.kv_reserved));
    set_cell(tl, "kv_used_bytes", num(it.kv_used));
    set_cell(tl, "kv_wasted_bytes", num(it.kv_reserved - it.kv_used));
    set_cell(tl, "running", num(it.running));
    set_cell(tl, "waiting", num(it.waiting));
    set_cell(tl, "ceilings", sp.hardware.ceilings_source);
    rows.push_back(std::move(tl));
  }
  return rows;
}

}  // namespace inferlab
