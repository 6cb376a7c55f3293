#include "inferlab/experiments/scenarios.h"
#include "inferlab/experiments/parallel_engine.h"
#include "inferlab/experiments/speculative_engine.h"

#include <algorithm>
#include <cmath>

#include "inferlab/experiments/evaluate.h"
#include "inferlab/experiments/generate.h"
#include "inferlab/sim/error.h"
#include "inferlab/sim/io.h"
#include "measurers.h"
#include "inferlab/sim/paths.h"

namespace inferlab {
namespace {

const std::string& get(const Params& p, const std::string& name) {
  auto it = p.find(name);
  if (it == p.end()) throw Error("missing parameter '" + name + "'");
  return it->second;
}

const char* const kKvHeadsHelp =
    "config (the model's), mha, mqa or the number of KV heads (GQA-8: 8 KV heads, each shared by a group of query heads)";

const char* const kMaxPositionsHelp =
    "longest context allowed: 'model' (the config's max_position_embeddings) or a number (to compute past it)";

const std::vector<ParamInfo> kPrecisionParams = {
    {"dtype", "model", "element type of weights, activations and KV cache ('model': the config's torch_dtype)"},
    {"weight_dtype", "", "overrides dtype for weights"},
    {"act_dtype", "", "overrides dtype for activations"},
    {"kv_dtype", "", "overrides dtype for the KV cache"},
};

std::vector<ParamInfo> with_precision(std::vector<ParamInfo> v) {
  v.insert(v.end(), kPrecisionParams.begin(), kPrecisionParams.end());
  return v;
}

// The parameters of a forward step on a TP x PP layout (model and parallel scenarios).
std::vector<ParamInfo> step_params() {
  return with_precision({{"model", "", "model name (inferlab list) or path to a config.json"},
                         {"hardware", "", "hardware name (inferlab list) or path to a hardware .json"},
                         {"phase", "decode", "prefill or decode"},
                         {"batch", "1", "sequences in the step"},
                         {"context", "", "prefill: prompt tokens; decode: tokens attended (the new one included)"},
                         {"attention", "flash", "naive or flash"},
                         {"causal", "true", "causal mask in prefill"},
                         {"kv_heads", "config", kKvHeadsHelp},
                         {"max_positions", "model", kMaxPositionsHelp},
                         {"weight_format", "none",
                          "weights of the layer GEMMs (qkv/o/gate_up/down): none (dense in the weight dtype), " +
                              join(known_weight_formats(), ", ")},
                         {"ceilings", "datasheet", kCeilingsHelp},
                         {"tp", "1", "tensor-parallel degree (divides the heads)"},
                         {"pp", "1", "pipeline-parallel stages"},
                         {"microbatches", "1", "micro-batches the batch is cut into (pipeline schedule)"}});
}

}  // namespace

int64_t param_int(const Params& p, const std::string& name, int64_t min_value) {
  const std::string& s = get(p, name);
  const auto v = parse_integer(s);
  if (!v) throw Error("parameter '" + name + "' must be an integer, got '" + s + "'");
  if (*v < min_value)
    throw Error("parameter '" + name + "' must be at least " + std::to_string(min_value) + ", got " + s);
  return *v;
}

double param_double(const Params& p, const std::string& name) {
  const std::string& s = get(p, name);
  const auto v = parse_number(s);
  if (!v) throw Error("parameter '" + name + "' must be a number, got '" + s + "'");
  return *v;
}

bool param_bool(const Params& p, const std::string& name) {
  const std::string& s = get(p, name);
  if (s == "true" || s == "1" || s == "yes") return true;
  if (s == "false" || s == "0" || s == "no") return false;
  throw Error("parameter '" + name + "' must be true or false, got '" + s + "'");
}

Precision param_precision(const Params& p, const ModelConfig& m) {
  const std::string& d = get(p, "dtype");
  const DType base = d == "model" ? m.dtype : parse_dtype(d);
  auto one = [&](const char* name) {
    auto it = p.find(name);
    return it == p.end() || it->second.empty() ? base : parse_dtype(it->second);
  };
  return Precision{one("weight_dtype"), one("act_dtype"), one("kv_dtype")};
}

std::optional<WeightFormat> param_weight_format(const Params& p) {
  auto it = p.find("weight_format");
  if (it == p.end() || it->second == "none") return std::nullopt;
  try {
    return parse_weight_format(it->second);
  } catch (const Error& e) {
    throw Error(std::string("parameter 'weight_format': ") + e.what() + " or none");
  }
}

int64_t param_max_positions(const Params& p, const ModelConfig& m) {
  auto it = p.find("max_positions");
  if (it == p.end() || it->second == "model") return m.max_positions;
  return param_int(p, "max_positions");
}

void check_context(const Params& p, const ModelConfig& m, int64_t tokens, const std::string& what) {
  const int64_t limit = param_max_positions(p, m);
  if (limit <= 0 || tokens <= limit) return;
  const bool own = p.count("max_positions") && p.at("max_positions") != "model";
  throw Error(what + " " + std::to_string(tokens) + " exceeds " +
              (own ? "max_positions " + std::to_string(limit)
                   : m.name + "'s max_position_embeddings " + std::to_string(limit) + " (what it was trained for)") +
              "; set parameter 'max_positions' (--max-positions) to compute past it");
}

ModelPoint evaluate_model_point(const Params& p) {
  ModelPoint mp;
  mp.model = with_kv_heads(load_model(get(p, "model")), get(p, "kv_heads"));
  mp.hardware = load_hardware(get(p, "hardware"), get(p, "ceilings"));
  mp.step = make_step(parse_phase(get(p, "phase")), param_int(p, "batch"), param_int(p, "context"));
  check_context(p, mp.model, mp.step.context(), "context");
  mp.options.precision = param_precision(p, mp.model);
  mp.options.attention = parse_attention_variant(get(p, "attention"));
  mp.options.causal = param_bool(p, "causal");
  mp.options.weight_format = param_weight_format(p);
  mp.par = Parallelism{param_int(p, "tp"), param_int(p, "pp"), param_int(p, "microbatches")};
  mp.parallel = predict_parallel(mp.model, mp.step, mp.options, mp.hardware, mp.par);
  mp.prediction = mp.parallel.stages[mp.parallel.slowest].compute;
  MemoryOptions mo;
  mo.precision = mp.options.precision;
  mo.attention = mp.options.attention;
  mp.memory = device_memory(mp.model, mp.step.batch, mp.step.context(), mo, mp.par);
  return mp;
}

namespace {

// A collective as a row of the per-op table: its bytes and time, no FLOPs.
Row comm_row(const CommOp& c, double step_time_s) {
  return Row{{"op", c.name},
             {"op_class", "communication"},
             {"variant", collective_name(c.kind)},
             {"count", num(c.count)},
             {"launches", num(c.count)},
             {"flops", "0"},
             {"bytes", num(c.bytes * double(c.count))},
             {"bytes_weight", "0"},
             {"bytes_activation", num(c.bytes * double(c.count))},
             {"bytes_kv", "0"},
             {"bytes_scores", "0"},
             {"ai", "0"},
             {"compute_dtype", ""},
             {"peak_flops", ""},
             {"bandwidth", ""},
             {"ridge", ""},
             {"compute_s", "0"},
             {"memory_s", "0"},
             {"launch_s", "0"},
             {"predicted_s", num(c.total_s())},
             {"bound", "communication"},
             {"share", num(step_time_s > 0 ? c.total_s() / step_time_s : 0.0)},
             {"predicted_flops_per_s", "0"},
             {"predicted_bytes_per_s", num(c.total_s() > 0 ? c.bytes * double(c.count) / c.total_s() : 0.0)}};
}

std::string layout_label(const Parallelism& p) {
  return "TP" + std::to_string(p.tp) + " x PP" + std::to_string(p.pp) +
         (p.microbatches > 1 ? " (" + std::to_string(p.microbatches) + " mb)" : "");
}

}  // namespace

Row op_row(const Op& op, const Prediction& pr, double step_time_s) {
  const double n = double(op.count);
  return Row{{"op", op.name},
             {"op_class", op_class_name(op.op_class)},
             {"variant", op.variant},
             {"count", num(op.count)},
             {"launches", num(int64_t(op.launches) * op.count)},
             {"flops", num(op.total_flops())},
             {"bytes", num(op.total_bytes())},
             {"bytes_weight", num(op.bytes(TensorRole::weight) * n)},
             {"bytes_activation", num(op.bytes(TensorRole::activation) * n)},
             {"bytes_kv", num(op.bytes(TensorRole::kv_cache) * n)},
             {"bytes_scores", num(op.bytes(TensorRole::scores) * n)},
             {"ai", num(op.ai())},
             {"compute_dtype", op.tensor_core ? dtype_name(op.compute_dtype) : "fp32-vector"},
             {"peak_flops", num(pr.peak_flops)},
             {"bandwidth", num(pr.bandwidth)},
             {"ridge", num(pr.ridge())},
             {"compute_s", num(pr.compute_s * n)},
             {"memory_s", num(pr.memory_s * n)},
             {"launch_s", num(pr.launch_s * n)},
             {"predicted_s", num(pr.total_s)},
             {"bound", bound_name(pr.bound)},
             {"share", num(step_time_s > 0 ? pr.total_s / step_time_s : 0.0)},
             {"predicted_flops_per_s", num(pr.total_s > 0 ? op.total_flops() / pr.total_s : 0.0)},
             {"predicted_bytes_per_s", num(pr.total_s > 0 ? op.total_bytes() / pr.total_s : 0.0)}};
}

namespace {
// The refined model's terms (sim/roofline.h) of an op that carries its kernel launches.
void add_refined_columns(Row& r, const Prediction& p) {
  r.emplace_back("dominant", p.dominant);
  for (auto [name, v] : {std::pair{"tensor_s", p.tensor_s}, std::pair{"mufu_s", p.mufu_s}, std::pair{"fp32_s", p.fp32_s},
                         std::pair{"alu_s", p.alu_s}, std::pair{"cvt_s", p.cvt_s}, std::pair{"issue_s", p.issue_s},
                         std::pair{"pipes_s", p.pipes_s}, std::pair{"latency_s", p.latency_s},
                         std::pair{"atomics_s", p.atomics_s}, std::pair{"tail_s", p.tail_s},
                         std::pair{"floor_s", p.floor_s}, std::pair{"reachable_bandwidth", p.reachable_bandwidth},
                         std::pair{"waves", p.waves}})
    r.emplace_back(name, num(v));
}
}  // namespace

void set_cell(Row& row, const std::string& column, const std::string& value) {
  for (auto& [k, v] : row)
    if (k == column) {
      v = value;
      return;
    }
  row.emplace_back(column, value);
}

std::string get_cell(const Row& row, const std::string& column) {
  for (const auto& [k, v] : row)
    if (k == column) return v;
  return "";
}

const std::vector<std::string>& raw_measured_columns() {
  static const std::vector<std::string> columns = {"measured_s", "measured_p10_s", "measured_p90_s", "kernels",
                                                   "measured_bf16_s", "rel_error", "measured_on", "measured_commit",
                                                   // engine: generation measured end to end
                                                   "tokens_per_s", "gpu_tokens_per_s", "share_of_limit",
                                                   "engine_weight_bytes", "device",
                                                   // eval: perplexity on the engine
                                                   "perplexity", "nll_per_token", "bits_per_token", "top1_accuracy",
                                                   "agreement", "eval_s", "median_step_measured_s"};
  return columns;
}

void derive_measured(Row& r) {
  const auto t = parse_number(get_cell(r, "measured_s"));
  if (!t || !(*t > 0)) return;
  auto cell = [&](const char* c) { return parse_number(get_cell(r, c)).value_or(0.0); };
  auto has = [&](const char* c) { return std::any_of(r.begin(), r.end(), [&](const auto& kv) { return kv.first == c; }); };
  if (has("flops")) set_cell(r, "measured_flops_per_s", num(cell("flops") / *t));
  if (has("bytes")) set_cell(r, "measured_bytes_per_s", num(cell("bytes") / *t));
  set_cell(r, "model_error", num((cell("predicted_s") - *t) / *t));
  for (const auto& [k, _] : r)
    if (k == "measured_kv_bytes_per_s") {  // decode: the K/V bytes read, the measure of a decode kernel
      set_cell(r, k, num(cell("bytes_kv") / *t));
      break;
    }
  if (const auto base = parse_number(get_cell(r, "measured_bf16_s")); base && *base > 0)
    set_cell(r, "measured_speedup", num(*base / *t));
}

const char* const kMeasuredColumns[] = {"measured_s", "measured_p10_s", "measured_p90_s", "measured_flops_per_s",
                                        "measured_bytes_per_s", "model_error", "kernels"};

std::vector<Row> model_rows(const ModelPoint& mp) {
  const auto& s = mp.prediction;
  const auto& par = mp.parallel;
  std::vector<Row> rows;
  const std::string kind = mp.model.attention_kind();
  for (std::size_t i = 0; i < s.ops.size(); ++i) {
    Row r = op_row(s.ops[i], s.predictions[i], par.time_s);
    r.insert(r.begin() + 3, {"attention_kind", kind});
    r.emplace_back("tokens_per_s", "");
    rows.push_back(std::move(r));
  }
  for (const auto& c : par.stages[par.slowest].comm) {
    Row r = comm_row(c, par.time_s);
    r.insert(r.begin() + 3, {"attention_kind", kind});
    r.emplace_back("tokens_per_s", "");
    rows.push_back(std::move(r));
  }
  // The step as a whole; its ridge is that of the matmul dtype.
  const double ridge = mp.hardware.ridge(mp.options.precision.act);
  int64_t launches = 0;
  for (const auto& op : s.ops) launches += int64_t(op.launches) * op.count;
  double by_role[4] = {0, 0, 0, 0};
  for (const auto& op : s.ops)
    for (int r = 0; r < 4; ++r) by_role[r] += op.bytes(TensorRole(r)) * double(op.count);
  rows.push_back(Row{{"op", "total"},
                     {"op_class", "step"},
                     {"variant", attention_variant_name(mp.options.attention)},
                     {"attention_kind", kind},
                     {"count", "1"},
                     {"launches", num(launches)},
                     {"flops", num(s.flops)},
                     {"bytes", num(s.bytes)},
                     {"bytes_weight", num(by_role[int(TensorRole::weight)])},
                     {"bytes_activation", num(by_role[int(TensorRole::activation)])},
                     {"bytes_kv", num(by_role[int(TensorRole::kv_cache)])},
                     {"bytes_scores", num(by_role[int(TensorRole::scores)])},
                     {"ai", num(s.ai())},
                     {"compute_dtype", dtype_name(mp.options.precision.act)},
                     {"peak_flops", num(mp.hardware.matmul_peak(mp.options.precision.act))},
                     {"bandwidth", num(mp.hardware.memory_bandwidth)},
                     {"ridge", num(ridge)},
                     {"compute_s", num(s.compute_s)},
                     {"memory_s", num(s.memory_s)},
                     {"launch_s", num(s.launch_s)},
                     {"predicted_s", num(par.time_s)},
                     {"bound", bound_name(s.bound())},
                     {"share", "1"},
                     {"predicted_flops_per_s", num(s.time_s > 0 ? s.flops / s.time_s : 0.0)},
                     {"predicted_bytes_per_s", num(s.time_s > 0 ? s.bytes / s.time_s : 0.0)},
                     {"tokens_per_s", num(par.time_s > 0 ? double(mp.step.tokens()) / par.time_s : 0.0)},
                     {"devices", num(mp.par.devices())},
                     {"step_ops_s", num(par.compute_s)},
                     {"step_tp_comm_s", num(par.tp_comm_s)},
                     {"step_send_s", num(par.send_s)},
                     {"step_bubble_s", num(par.bubble_s)},
                     {"comm_share", num(par.comm_share())}});
  // Whether the step's weights + KV cache + activations fit the (fullest) device at all.
  const double mem = mp.memory.breakdown.total();
  const std::string fits = mem <= mp.hardware.memory_bytes ? "true" : "false";
  for (auto& r : rows) {
    r.emplace_back("memory_bytes", num(mem));
    r.emplace_back("fits", fits);
    r.emplace_back("ceilings", mp.hardware.ceilings_source);
    for (const char* c : kMeasuredColumns) r.emplace_back(c, "");
  }
  return rows;
}

std::vector<Row> parallel_rows(const ModelPoint& mp) {
  const auto& r = mp.parallel;
  const auto& b = mp.memory.breakdown;
  const double cap = mp.hardware.memory_bytes;
  const double tokens = double(mp.step.tokens());
  return {Row{{"layout", layout_label(mp.par)},
              {"devices", num(mp.par.devices())},
              {"link", mp.par.devices() > 1 ? r.link.name : ""},
              {"stage_layers", num(mp.parallel.stages[mp.memory.stage].layers)},
              {"weights_bytes", num(b.weights)},
              {"kv_cache_bytes", num(b.kv_cache)},
              {"activation_bytes", num(b.activations)},
              {"total_bytes", num(b.total())},
              {"capacity_bytes", num(cap)},
              {"capacity_label", mp.hardware.id + " (" + mp.hardware.memory_label + ")"},
              {"fits", b.total() <= cap ? "true" : "false"},
              {"step_s", num(r.time_s)},
              {"step_ops_s", num(r.compute_s)},
              {"step_tp_comm_s", num(r.tp_comm_s)},
              {"step_send_s", num(r.send_s)},
              {"step_bubble_s", num(r.bubble_s)},
              {"comm_share", num(r.comm_share())},
              {"bubble_fraction", num(r.bubble_fraction)},
              {"tokens_per_s", num(tokens / r.time_s)},
              {"pipelined_tokens_per_s", num(tokens / double(mp.par.microbatches) / r.stage_s)},
              {"ceilings", mp.hardware.ceilings_source}}};
}

MemoryPoint evaluate_memory_point(const Params& p) {
  MemoryPoint mp;
  mp.model = with_kv_heads(load_model(get(p, "model")), get(p, "kv_heads"));
  const std::string& hw = get(p, "hardware");
  if (hw != "none") {
    mp.hardware = load_hardware(hw, get(p, "ceilings"));
    mp.has_hardware = true;
  }
  mp.batch = param_int(p, "batch");
  mp.context = param_int(p, "context");
  mp.options.precision = param_precision(p, mp.model);
  mp.options.attention = parse_attention_variant(get(p, "attention"));
  mp.options.prefill_chunk = param_int(p, "prefill_chunk", 0);
  mp.options.rolling_window = param_bool(p, "rolling_window");
  const double reserve_gib = param_double(p, "reserve_gib");
  if (reserve_gib < 0) throw Error("parameter 'reserve_gib' must not be negative");
  mp.options.reserve_bytes = reserve_gib * 1024.0 * 1024.0 * 1024.0;
  mp.block_size = param_int(p, "block_size");
  check_context(p, mp.model, mp.context, "context");
  mp.max_positions = param_max_positions(p, mp.model);
  mp.max_len = param_int(p, "max_len", 0);
  if (mp.max_len == 0) mp.max_len = mp.max_positions > 0 ? mp.max_positions : mp.context;
  check_context(p, mp.model, mp.max_len, "max_len");
  if (mp.context > mp.max_len)
    throw Error("context " + std::to_string(mp.context) + " exceeds max_len " + std::to_string(mp.max_len) +
                " (the longest sequence a contiguous cache reserves; set max_len)");
  mp.breakdown = memory_breakdown(mp.model, mp.batch, mp.context, mp.options);
  if (mp.has_hardware) {
    mp.max_batch = max_batch(mp.model, mp.context, mp.options, mp.hardware.memory_bytes);
    // The longest context: what memory holds, never past the model's limit (a rolling window
    // would let memory hold any length).
    const int64_t cap = int64_t(1) << 24;
    const int64_t limit = mp.max_positions > 0 ? std::min(mp.max_positions, cap) : cap;
    mp.max_context = max_context(mp.model, mp.batch, mp.options, mp.hardware.memory_bytes, limit);
    mp.max_context_limit = mp.max_context < limit ? "memory" : limit == mp.max_positions ? "max positions" : "search cap";
  }
  // Closed forms over the batch's identical sequences (a batch of 10^9 needs no list of them).
  mp.contiguous = contiguous_kv(mp.model, mp.options.precision.kv, mp.batch, mp.context, mp.max_len,
                                mp.options.rolling_window);
  mp.paged = paged_kv(mp.model, mp.options.precision.kv, mp.batch, mp.context, mp.block_size, mp.options.rolling_window);
  return mp;
}

std::vector<Row> memory_rows(const MemoryPoint& mp) {
  const auto& b = mp.breakdown;
  const double cap = mp.has_hardware ? mp.hardware.memory_bytes : 0.0;
  return {Row{{"attention_kind", mp.model.attention_kind()},
              {"kv_heads_count", num(mp.model.kv_heads)},
              {"config_kv_heads", num(mp.model.config_kv_heads ? mp.model.config_kv_heads : mp.model.kv_heads)},
              {"params", num(mp.model.total_params())},
              {"weights_bytes", num(b.weights)},
              {"kv_bytes_per_token", num(kv_bytes_per_token(mp.model, mp.options.precision.kv))},
              {"kv_tokens_per_sequence", num(b.kv_tokens_per_sequence)},
              {"kv_cache_bytes", num(b.kv_cache)},
              {"activation_bytes", num(b.activations)},
              {"reserve_bytes", num(b.reserve)},
              {"total_bytes", num(b.total())},
              {"capacity_bytes", mp.has_hardware ? num(cap) : ""},
              {"capacity_label", mp.has_hardware ? mp.hardware.id + " (" + mp.hardware.memory_label + ")" : ""},
              {"fits", mp.has_hardware ? (b.total() <= cap ? "true" : "false") : ""},
              {"free_bytes", mp.has_hardware ? num(cap - b.total()) : ""},
              {"max_batch", mp.has_hardware ? num(mp.max_batch) : ""},
              {"max_context", mp.has_hardware ? num(mp.max_context) : ""},
              {"max_context_limit", mp.max_context_limit},
              {"max_positions", num(mp.max_positions)},
              {"contiguous_max_len", num(mp.max_len)},
              {"contiguous_reserved_bytes", num(mp.contiguous.reserved)},
              {"contiguous_wasted_bytes", num(mp.contiguous.wasted())},
              {"paged_block_size", num(mp.block_size)},
              {"paged_blocks", num(mp.paged.blocks)},
              {"paged_reserved_bytes", num(mp.paged.reserved)},
              {"paged_wasted_bytes", num(mp.paged.wasted())},
              {"ceilings", mp.has_hardware ? mp.hardware.ceilings_source : ""}}};
}

AttentionPoint evaluate_attention_point(const Params& p) {
  AttentionPoint ap;
  ap.hardware = load_hardware(get(p, "hardware"), get(p, "ceilings"));
  // variant: naive, flash, or flash-<rung> for one rung of the ladder by name (the rungs sim/ has a model of).
  const std::string variant = get(p, "variant");
  if (variant.rfind("flash-", 0) == 0) {
    ap.variant = AttentionVariant::flash;
    ap.flash_kernel = variant.substr(6);
    if (ap.flash_kernel != "overlapped" && ap.flash_kernel != "wgmma")
      throw Error("parameter 'variant': unknown flash rung '" + ap.flash_kernel +
                  "' (known: flash-overlapped, flash-wgmma; the mma.sync rung has no model in sim/ and is timed by "
                  "inferlab_bench_attention)");
  } else if (variant == "naive" || variant == "flash") {
    ap.variant = parse_attention_variant(variant);
  } else {
    throw Error("parameter 'variant': unknown attention variant '" + variant +
                "' (known: naive, flash, flash-overlapped, flash-wgmma)");
  }
  ap.dtype = parse_dtype(get(p, "dtype"));
  auto& a = ap.shape;
  a.heads = param_int(p, "heads");
  a.head_dim = param_int(p, "head_dim");
  // kv_heads relative to the query heads, as for models: mha, mqa or the number of KV heads.
  ModelConfig probe;
  probe.name = "attention";
  probe.heads = a.heads;
  probe.kv_heads = a.heads;
  a.kv_heads = with_kv_heads(probe, get(p, "kv_heads")).kv_heads;
  a.new_tokens = param_int(p, "seq");
  a.past_tokens = 0;
  a.causal = param_bool(p, "causal");
  const int64_t tokens = param_int(p, "tokens", 0);
  if (tokens > 0) {
    if (tokens % a.new_tokens != 0)
      throw Error("parameter 'tokens' (" + std::to_string(tokens) + ") is not a multiple of 'seq' (" +
                  std::to_string(a.new_tokens) + ")");
    a.batch = tokens / a.new_tokens;
  } else {
    a.batch = param_int(p, "batch");
  }
  ap.cost = attention_cost(a, ap.variant, ap.dtype, ap.dtype);
  // The lab's kernels (sim/kernels.h): the wgmma flash kernels run on Hopper, the naive path anywhere.
  const bool hopper = ap.hardware.architecture.find("Hopper") != std::string::npos;
  const bool wgmma_rung = ap.flash_kernel == "wgmma";
  if (ap.flash_kernel != "automatic") {
    if (!hopper)
      throw Error("parameter 'variant': the flash-" + ap.flash_kernel + " rung runs on Hopper only, not on " +
                  ap.hardware.name);
    if (wgmma_rung && a.head_dim != 64 && a.head_dim != 128)
      throw Error("parameter 'head_dim': the flash-wgmma rung has head dims 64 and 128, not " +
                  std::to_string(a.head_dim) + " (96 and 256 run on flash-overlapped)");
  }
  if (ap.variant == AttentionVariant::naive || hopper)
    ap.cost.kernels = attention_prefill_kernels(a, ap.variant, ap.dtype, ap.hardware,
                                                wgmma_rung ? FlashRung::wgmma : FlashRung::overlapped);
  ap.prediction = predict(ap.cost, ap.hardware);
  return ap;
}

std::vector<Row> attention_rows(const AttentionPoint& ap) {
  Row r = op_row(ap.cost, ap.prediction, ap.prediction.total_s);
  if (ap.flash_kernel != "automatic") set_cell(r, "variant", "flash-" + ap.flash_kernel);  // the rung, by name
  r.insert(r.begin() + 3, {"attention_kind", attention_kind_of(ap.shape.heads, ap.shape.kv_heads)});
  r.insert(r.begin() + 4, {"batch_used", num(ap.shape.batch)});
  r.insert(r.begin() + 5, {"kv_heads_count", num(ap.shape.kv_heads)});
  add_refined_columns(r, ap.prediction);
  r.emplace_back("ceilings", ap.hardware.ceilings_source);
  for (const char* c : kMeasuredColumns) r.emplace_back(c, "");
  return {r};
}

namespace {
int64_t kv_heads_param(const Params& p, int64_t heads) {
  ModelConfig probe;
  probe.name = "attention";
  probe.heads = heads;
  probe.kv_heads = heads;
  return with_kv_heads(probe, get(p, "kv_heads")).kv_heads;
}
}  // namespace

DecodePoint evaluate_decode_point(const Params& p) {
  DecodePoint dp;
  dp.hardware = load_hardware(get(p, "hardware"), get(p, "ceilings"));
  dp.variant = get(p, "variant");
  if (dp.variant != "plain" && dp.variant != "split")
    throw Error("parameter 'variant' must be plain or split, got '" + dp.variant + "'");
  dp.layout = get(p, "layout");
  if (dp.layout != "contiguous" && dp.layout != "paged")
    throw Error("parameter 'layout' must be contiguous or paged, got '" + dp.layout + "'");
  dp.dtype = parse_dtype(get(p, "dtype"));
  auto& a = dp.shape;
  a.batch = param_int(p, "batch");
  a.heads = param_int(p, "heads");
  a.kv_heads = kv_heads_param(p, a.heads);
  a.head_dim = param_int(p, "head_dim");
  const int64_t context = param_int(p, "context");
  a.new_tokens = 1;
  a.past_tokens = context - 1;
  if (dp.layout == "paged") {
    a.block_size = param_int(p, "block_size");
    if (a.block_size & (a.block_size - 1)) throw Error("parameter 'block_size' must be a power of two");
  }
  const int64_t groups = (a.heads / a.kv_heads + 31) / 32;  // query heads per block, as the kernel groups them
  a.splits = dp.variant == "split" ? plan_decode_splits(a.batch * a.kv_heads * groups, context, dp.hardware.sm_count) : 1;
  dp.cost = attention_cost(a, AttentionVariant::flash, dp.dtype, dp.dtype);
  dp.cost.kernels = decode_attention_kernels(a, dp.dtype, dp.hardware);
  dp.prediction = predict(dp.cost, dp.hardware);
  return dp;
}

std::vector<Row> decode_rows(const DecodePoint& dp) {
  Row r = op_row(dp.cost, dp.prediction, dp.prediction.total_s);
  set_cell(r, "variant", dp.variant);
  r.insert(r.begin() + 3, {"attention_kind", attention_kind_of(dp.shape.heads, dp.shape.kv_heads)});
  r.insert(r.begin() + 4, {"splits", num(dp.shape.splits)});
  r.insert(r.begin() + 5, {"kv_heads_count", num(dp.shape.kv_heads)});
  add_refined_columns(r, dp.prediction);
  r.emplace_back("ceilings", dp.hardware.ceilings_source);
  for (const char* c : kMeasuredColumns) r.emplace_back(c, "");
  r.emplace_back("measured_kv_bytes_per_s", "");
  return {r};
}

LinearPoint evaluate_linear_point(const Params& p) {
  LinearPoint lp;
  lp.hardware = load_hardware(get(p, "hardware"), get(p, "ceilings"));
  try {
    lp.format = parse_weight_format(get(p, "format"));
  } catch (const Error& e) {
    throw Error(std::string("parameter 'format': ") + e.what());
  }
  lp.shape = LinearShape{param_int(p, "m"), param_int(p, "n"), param_int(p, "k")};
  lp.cost = linear_cost(lp.shape, lp.format);
  lp.cost.kernels = linear_kernels(lp.shape.m, lp.shape.n, lp.shape.k, lp.format, lp.hardware);
  lp.prediction = predict(lp.cost, lp.hardware);
  lp.bf16_cost = linear_cost(lp.shape, WeightFormat::bf16);
  lp.bf16_cost.kernels = linear_kernels(lp.shape.m, lp.shape.n, lp.shape.k, WeightFormat::bf16, lp.hardware);
  lp.bf16_prediction = predict(lp.bf16_cost, lp.hardware);
  return lp;
}

std::vector<Row> linear_rows(const LinearPoint& lp) {
  Row r = op_row(lp.cost, lp.prediction, lp.prediction.total_s);
  r.insert(r.begin() + 3, {"shape", std::to_string(lp.shape.n) + "x" + std::to_string(lp.shape.k)});
  const double wb = lp.cost.bytes(TensorRole::weight);
  r.emplace_back("weight_bytes", num(wb));
  r.emplace_back("ideal_speedup_bytes", num(lp.bf16_cost.bytes(TensorRole::weight) / wb));
  r.emplace_back("predicted_bf16_s", num(lp.bf16_prediction.total_s));
  r.emplace_back("predicted_speedup", num(lp.bf16_prediction.total_s / lp.prediction.total_s));
  add_refined_columns(r, lp.prediction);
  r.emplace_back("ceilings", lp.hardware.ceilings_source);
  for (const char* c : kMeasuredColumns) r.emplace_back(c, "");
  for (const char* c : {"measured_bf16_s", "measured_speedup", "rel_error"}) r.emplace_back(c, "");
  return {r};
}

const std::vector<Scenario>& scenarios() {
  static const std::vector<Scenario> all = {
      {"model",
       "per-operator roofline of one forward step (prefill or decode) + a total row; per device with tp/pp",
       step_params(),
       [](const Params& p) { return model_rows(evaluate_model_point(p)); },
       {},
       {}},
      {"memory",
       "weights + KV cache + activations, fit on a device, contiguous vs paged KV",
       with_precision({{"model", "", "model name or path to a config.json"},
                       {"hardware", "none", "hardware whose capacity to fit into, or none"},
                       {"ceilings", "datasheet", std::string(kCeilingsHelp) + " (the hardware's figures shown beside it)"},
                       {"batch", "1", "sequences"},
                       {"context", "", "tokens per sequence"},
                       {"attention", "flash", "naive or flash (naive materializes the scores)"},
                       {"kv_heads", "config", kKvHeadsHelp},
                       {"prefill_chunk", "8192", "tokens per prefill pass (0: whole prompt)"},
                       {"rolling_window", "true", "keep only the sliding window in the KV cache"},
                       {"reserve_gib", "0", "memory set aside on the device"},
                       {"block_size", "16", "paged KV block size in tokens"},
                       {"max_len", "0", "contiguous reservation per sequence (0: max_positions)"},
                       {"max_positions", "model", kMaxPositionsHelp}}),
       [](const Params& p) { return memory_rows(evaluate_memory_point(p)); },
       {},
       {}},
      {"attention",
       "the attention core of a prefill (kernels/attention): naive vs flash, MHA/GQA/MQA, predicted and measured",
       {{"hardware", "", "hardware to predict for; measuring needs this GPU"},
        {"ceilings", "datasheet", kCeilingsHelp},
        {"variant", "flash",
         "naive, flash (the fastest rung: on Hopper the overlapped kernel), or one flash rung by name: "
         "flash-overlapped, flash-wgmma (the persistent wgmma kernel the engine's varlen prefill runs; head dims 64 "
         "and 128)"},
        {"dtype", "bf16", "bf16 or fp16"},
        {"batch", "1", "sequences (ignored when tokens is set)"},
        {"tokens", "0", "batch x seq; batch = tokens / seq when set"},
        {"seq", "", "query = key length"},
        {"heads", "16", "query heads"},
        {"kv_heads", "mha", "mha, mqa or the number of KV heads (GQA-8: 8 KV heads, each shared by a group of query heads)"},
        {"head_dim", "128", "64 or 128"},
        {"causal", "false", "causal mask"}},
       [](const Params& p) { return attention_rows(evaluate_attention_point(p)); },
       attention_preflight(),
       attention_measure(),
       true},
      {"decode",
       "decode attention over a contiguous or paged KV cache (kernels/attention/decode.h): plain vs split",
       {{"hardware", "", "hardware to predict for; measuring needs this GPU"},
        {"ceilings", "datasheet", kCeilingsHelp},
        {"variant", "split", "plain or split (flash-decoding)"},
        {"layout", "paged", "contiguous or paged"},
        {"block_size", "16", "paged block size in tokens (a power of two)"},
        {"dtype", "bf16", "bf16 or fp16"},
        {"batch", "1", "sequences"},
        {"context", "", "tokens in every sequence's cache"},
        {"heads", "32", "query heads"},
        {"kv_heads", "8", "mha, mqa or the number of KV heads (GQA-8: 8 KV heads, each shared by a group of query heads)"},
        {"head_dim", "128", "64 or 128"}},
       [](const Params& p) { return decode_rows(evaluate_decode_point(p)); },
       decode_preflight(),
       decode_measure(),
       true},
      {"engine",
       "generation on the GPU engine (kernels/engine): B prompts prefilled, then N - 1 greedy decode steps; "
       "decode (or prefill) tokens/s measured beside sim/'s prediction of every step and the bandwidth limit",
       {{"model", "", "model name or path to a config.json (the engine runs llama, mistral, qwen2)"},
        {"weights", "random", "random (seeded, Hugging Face's init) or a Hugging Face model folder"},
        {"hardware", "h100-sxm-80gb", "hardware to predict for; measuring needs this GPU"},
        {"ceilings", "auto", "auto, datasheet or measured"},
        {"batch", "1", "sequences"},
        {"prompt_tokens", "128", "prompt tokens per sequence"},
        {"new_tokens", "128", "tokens generated per sequence (1: prefill only)"},
        {"weight_format", "none", "layer GEMM weights: none (bf16), int8, int4, sparse24"},
        {"graphs", "true", "CUDA graphs for the decode steps (false: eager launches)"},
        {"seed", "1", "seed of the random weights and prompts"},
        {"max_step_tokens", "8192", "new tokens per step (longer prefills are cut into steps)"}},
       [](const Params& p) { return generate_rows(plan_generate(generate_config(p))); },
       engine_preflight(),
       engine_measure(),
       true},
      {"eval",
       "perplexity and top-1 accuracy of a model folder on a text, teacher-forced on the GPU engine, beside the "
       "engine's decode tokens/s with the same weights (experiments/evaluate.h)",
       {{"model", "", "Hugging Face model folder (config.json + model.safetensors)"},
        {"data", "", "text file (UTF-8 bytes; the folder's byte_tokenizer.json) or .json token ids"},
        {"weight_format", "none", "layer GEMM weights: none (bf16), int8, int4, sparse24"},
        {"window", "0", "tokens per sequence (0: the tokenizer's)"},
        {"max_tokens", "0", "predicted tokens at most (0: the whole file)"},
        {"agree_with", "none", "another model folder: share of positions with the same argmax (none: not asked)"},
        {"hardware", "h100-sxm-80gb", "hardware to predict for; measuring needs this GPU"},
        {"ceilings", "auto", "auto, datasheet or measured"},
        {"batch", "1", "decode speed: sequences"},
        {"prompt_tokens", "128", "decode speed: prompt tokens"},
        {"new_tokens", "128", "decode speed: tokens generated (0: no speed measured)"}},
       [](const Params& p) {
         const EvalRun e = plan_eval(eval_config(p));
         const auto g = eval_speed_config(p);
         const Hardware hw = load_hardware(p.at("hardware"), parse_ceilings_mode(p.at("ceilings")));
         if (!g) return eval_rows(e, nullptr, hw);
         const GenerateRun run = plan_generate(*g);
         return eval_rows(e, &run, hw);
       },
       eval_preflight(),
       eval_measure(),
       true},
      {"linear",
       "a linear layer Y[m, n] = X[m, k] W[n, k]^T with its weight in one format (kernels/gemm): bf16, fp16, "
       "int8, int4, fp8, sparse24; predicted and measured time, speedup over bf16, error",
       {{"hardware", "h100-sxm-80gb", "hardware to predict for; measuring needs this GPU"},
        {"ceilings", "datasheet", kCeilingsHelp},
        {"format", "bf16", "weight format: " + join(known_weight_formats(), ", ")},
        {"m", "1", "tokens (rows of X)"},
        {"n", "", "output features (rows of W)"},
        {"k", "", "input features"}},
       [](const Params& p) { return linear_rows(evaluate_linear_point(p)); },
       linear_preflight(),
       linear_measure(),
       true},
      {"kv_trace",
       "KV memory over a served request trace: contiguous max-length reservation vs paged blocks (8/16/32), "
       "measured from the real allocator and predicted by sim/memory",
       {{"model", "", "model name or path to a config.json"},
        {"kv_heads", "config", kKvHeadsHelp},
        {"dtype", "model", "KV cache element type ('model': the config's torch_dtype)"},
        {"seed", "1", "trace seed"},
        {"requests", "500", "requests in the trace"},
        {"rate", "0.5", "mean arrivals per decode step"},
        {"slots", "32", "requests served at once"},
        {"max_len", "2048", "tokens a contiguous cache reserves per request (prompt + output bound)"},
        {"every", "10", "write a row every this many steps"}},
       [](const Params& p) { return kv_trace_rows(p); },
       {},
       {}},
      {"parallel",
       "a step on a tensor x pipeline parallel layout: per-device memory, time split into compute, "
       "all-reduces, stage sends and bubble",
       step_params(),
       [](const Params& p) { return parallel_rows(evaluate_model_point(p)); },
       {},
       {}},
      {"serving",
       "a request trace served by a scheduler (static, continuous, chunked) x KV allocator (contiguous, paged): "
       "throughput, TTFT/TPOT/latency percentiles, KV memory",
       with_precision({{"model", "", "model name or path to a config.json"},
                       {"hardware", "", "hardware name or path to a .json"},
                       {"ceilings", "datasheet", kCeilingsHelp},
                       {"tp", "1", "tensor-parallel degree"},
                       {"scheduler", "continuous", "static, continuous or chunked"},
                       {"priority", "prefill-first", "prefill-first or decode-first (continuous, chunked)"},
                       {"kv", "paged", "contiguous or paged"},
                       {"admission", "optimistic",
                        "paged: optimistic (blocks as needed, recompute preemption) or reserve (prompt + every output "
                        "token up front, never preempts)"},
                       {"block_size", "16", "paged KV block size in tokens"},
                       {"max_len", "0", "longest request (prompt + output) served; contiguous reserves it (0: max_positions)"},
                       {"max_positions", "model", kMaxPositionsHelp},
                       {"max_batch", "256", "sequences admitted at once"},
                       {"max_batch_tokens", "0", "tokens per pass (0: 2048 chunked, else max(max_len, 2048))"},
                       {"gpu_memory_utilization", "0.9", "share of device memory the engine may use"},
                       {"kv_gib", "0", "KV memory per device in GiB (0: what utilization leaves after weights and activations)"},
                       {"trace", "none", "trace CSV (arrival_s,prompt_tokens,output_tokens), or none: generate one"},
                       {"seed", "1", "generated trace: seed"},
                       {"requests", "1000", "generated trace: requests"},
                       {"rate", "10", "generated trace: mean arrivals per second (Poisson)"},
                       {"prompt_mean", "161", "generated trace: mean prompt tokens (lognormal; ShareGPT's, vLLM paper)"},
                       {"output_mean", "338", "generated trace: mean output tokens (lognormal; ShareGPT's)"},
                       {"sigma", "1", "generated trace: lognormal sigma"},
                       {"trace_max_tokens", "0",
                        "generated trace: clip each request's prompt + output to this (0: no clipping; a request "
                        "longer than max_len is then rejected and reported, as from a trace file)"},
                       {"sample_every_s", "0", "add a timeline row every this many seconds (0: summary only)"}}),
       [](const Params& p) { return serving_rows(evaluate_serving_point(p), param_double(p, "sample_every_s")); },
       {},
       {}},
      {"serving_engine",
       "a request trace served on the GPU engine by the one scheduler (static, continuous, chunked x contiguous, "
       "paged), beside the simulator with the roofline and with the measured step cost on the same KV memory",
       {{"model", "", "model name or path to a config.json (the engine runs llama, mistral, qwen2)"},
        {"weights", "random", "random (seeded, Hugging Face's init) or a Hugging Face model folder"},
        {"hardware", "h100-sxm-80gb", "hardware to predict for; measuring needs this GPU"},
        {"ceilings", "measured", kCeilingsHelp},
        {"graphs", "true", "CUDA graphs for decode-only passes"},
        {"scheduler", "continuous", "static, continuous or chunked"},
        {"priority", "prefill-first", "prefill-first or decode-first (continuous, chunked)"},
        {"kv", "paged", "contiguous (max_len reserved per request) or paged"},
        {"admission", "optimistic", "paged: optimistic (recompute preemption) or reserve (never preempts)"},
        {"block_size", "16", "KV block size in tokens (the engine's pages)"},
        {"max_len", "2048", "longest request (prompt + output) served; contiguous reserves it"},
        {"max_batch", "256", "sequences admitted at once (the engine's slots)"},
        {"max_batch_tokens", "0", "tokens per pass (0: 2048 chunked, else max(max_len, 2048))"},
        {"kv_gib", "", "KV memory of the engine and the simulator, GiB"},
        {"seed", "1", "seed of the trace, the prompts and the random weights"},
        {"trace", "none", "trace CSV (arrival_s,prompt_tokens,output_tokens), or none: generate one"},
        {"requests", "200", "requests in the generated trace"},
        {"rate", "4", "mean arrivals per second (Poisson)"},
        {"offline", "false", "every request arrives at time 0 (the rate only orders them)"},
        {"prompt_mean", "161", "mean prompt tokens (lognormal; ShareGPT's, vLLM paper)"},
        {"output_mean", "338", "mean output tokens (lognormal; ShareGPT's)"},
        {"sigma", "1", "lognormal sigma"},
        {"trace_max_tokens", "2048", "clip each request's prompt + output to this (0: no clipping)"},
        {"step_cost", "none", "the engine's measured step timings (calibrate-engine JSON), or none"},
        {"sample_every_s", "0", "KV memory timeline rows every this many seconds (0: none)"}},
       [](const Params& p) { return serving_engine_rows(plan_serving_engine(p), param_double(p, "sample_every_s")); },
       serving_engine_preflight(),
       serving_engine_measure(),
       true},
      {"speculative_engine",
       "speculative vs plain decoding measured on the GPU engine (draft model, quantized self-draft or n-gram "
       "prompt lookup), beside sim/speculative's speedup from the measured acceptance and step costs",
       {{"model", "", "target: a model name or config (random weights) or its Hugging Face folder (weights)"},
        {"weights", "random", "random (seeded) or the target's Hugging Face folder"},
        {"drafter", "model", "model (a draft model), self (the target quantized: draft_format) or ngram"},
        {"draft", "none", "drafter model: the draft model's name, config or folder"},
        {"draft_weights", "auto", "drafter model: random, a folder, or auto (the draft's own folder, else random)"},
        {"draft_format", "none", "self: int8 or int4; model: the draft's weight format (none: bf16)"},
        {"gamma", "4", "tokens drafted per round (1 .. 15)"},
        {"batch", "1", "sequences decoding together"},
        {"sequences", "0", "prompts per point, run as sequences / batch batches one after another, their tokens "
                           "and times summed (0: one batch)"},
        {"prompt_tokens", "128", "tokens of each prompt"},
        {"new_tokens", "128", "tokens each sequence generates at least"},
        {"prompts", "random", "a text file (byte-level models: its bytes) or random token ids"},
        {"temperature", "0", "0: greedy (verified token for token); > 0: rejection sampling"},
        {"seed", "1", "random weights, prompts and sampling"},
        {"ngram_min", "1", "ngram: shortest suffix matched"},
        {"ngram_max", "3", "ngram: longest suffix matched"},
        {"graphs", "true", "CUDA graphs for uniform steps (decode, verification, drafting)"},
        {"alpha_prior", "0.8", "the roofline's alpha without a GPU; speedup_at_alpha_prior: the measured costs at it"},
        {"hardware", "h100-sxm-80gb", "hardware to predict for; measuring needs this GPU"},
        {"ceilings", "measured", kCeilingsHelp}},
       [](const Params& p) { return speculative_engine_rows(spec_engine_config(p), std::nullopt); },
       speculative_engine_preflight(),
       speculative_engine_measure(),
       true},
      {"parallel_engine",
       "one step of the GPU engine sharded over tp x pp GPUs (Megatron-LM's layout, NCCL), measured beside "
       "sim/parallel's prediction with the hardware file's alpha-beta",
       {{"model", "llama-2-13b", "model name or config (random weights, bf16)"},
        {"tp", "1", "tensor-parallel degree"},
        {"pp", "1", "pipeline stages"},
        {"microbatches", "pp", "micro-batches a step's batch is cut into (pp: one per stage)"},
        {"phase", "decode", "decode (one token per sequence) or prefill (whole prompts of `context` tokens)"},
        {"batch", "1", "sequences of the step"},
        {"context", "1024", "decode: tokens each sequence holds at the last timed step; prefill: prompt tokens"},
        {"warmup", "3", "untimed steps first (graphs captured)"},
        {"repeats", "20", "timed steps (median)"},
        {"graphs", "true", "CUDA graphs for decode steps"},
        {"communicator", "nccl", "nccl (a GPU per rank) or local (threads, host-synchronized: tests on one GPU)"},
        {"seed", "1", "random weights and tokens"},
        {"hardware", "h200-sxm", "hardware to predict for; measuring over NCCL needs this GPU"},
        {"ceilings", "auto", kCeilingsHelp}},
       [](const Params& p) { return parallel_engine_rows(parallel_engine_config(p), std::nullopt); },
       parallel_engine_preflight(),
       parallel_engine_measure(),
       true},
      {"speculative",
       "speculative decoding: expected tokens per pass, speedup (cost model and closed form), optimal draft length",
       with_precision({{"target", "", "target model"},
                       {"draft", "none", "draft model (drafter = model)"},
                       {"drafter", "model", "model, medusa or ngram"},
                       {"hardware", "", "hardware name or path"},
                       {"ceilings", "datasheet", kCeilingsHelp},
                       {"batch", "1", "sequences decoding together"},
                       {"context", "1024", "tokens each sequence holds"},
                       {"max_positions", "model", kMaxPositionsHelp},
                       {"alpha", "", "acceptance rate of a drafted token, in [0, 1]"},
                       {"gamma", "", "tokens drafted per round"},
                       {"max_gamma", "10", "the optimal gamma is searched in 0..max_gamma"},
                       {"tp", "1", "target's tensor-parallel degree"},
                       {"draft_tp", "1", "draft model's tensor-parallel degree"}}),
       [](const Params& p) { return speculative_rows(p); },
       {},
       {}},
  };
  return all;
}

const Scenario& find_scenario(const std::string& name) {
  std::vector<std::string> names;
  for (const auto& s : scenarios()) {
    if (s.name == name) return s;
    names.push_back(s.name);
  }
  throw Error("unknown scenario '" + name + "' (known: " + join(names, ", ") + ")");
}

Params complete_params(const Scenario& s, const Params& given) {
  std::vector<std::string> names;
  for (const auto& pi : s.params) names.push_back(pi.name);
  for (const auto& [k, _] : given) {
    bool known = false;
    for (const auto& pi : s.params) known = known || pi.name == k;
    if (!known)
      throw Error("unknown parameter '" + k + "' for scenario '" + s.name + "' (known: " + join(names, ", ") + ")");
  }
  Params p = given;
  for (const auto& pi : s.params) {
    if (p.count(pi.name)) continue;
    const bool optional_override = pi.name == "weight_dtype" || pi.name == "act_dtype" || pi.name == "kv_dtype";
    if (pi.fallback.empty() && !optional_override)
      throw Error("scenario '" + s.name + "' needs parameter '" + pi.name + "' (" + pi.help + ")");
    p[pi.name] = pi.fallback;
  }
  return p;
}

}  // namespace inferlab
