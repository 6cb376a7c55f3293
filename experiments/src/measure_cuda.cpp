// Measured columns for the scenarios with kernels. The cost that turns a time into FLOP/s and
// GB/s is the row's own (sim/ops.h), never a second formula.
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <algorithm>
#include <map>
#include <memory>

#include "inferlab/experiments/generate.h"
#include "inferlab/kernels/engine/engine.h"
#include "inferlab/roofline/kernel_trace.h"
#include "inferlab/sim/rng.h"

#include "inferlab/experiments/scenarios.h"
#include "inferlab/roofline/gpu_info.h"
#include "inferlab/roofline/measure_attention.h"
#include "inferlab/roofline/measure_decode.h"
#include "inferlab/roofline/measure_linear.h"
#include "inferlab/sim/error.h"
#include "measurers.h"

namespace inferlab {

void check_same_gpu(const Hardware& hw) {
  static const GpuInfo gpu = detect_gpu();
  if (!gpu.present) throw Error("measuring needs a GPU: " + gpu.reason);
  const std::string id = hardware_for_device(gpu.name);
  if (id != hw.id)
    throw Error("this GPU is " + gpu.name + " (" + (id.empty() ? std::string("no hardware file lists it") : id) +
                ") but the point predicts for " + hw.id + ": measure on that GPU, set hardware, or use --predict-only");
}

namespace {

// The raw measurement; derive_measured (scenarios.cpp) computes the rest from it and the row's cost.
void fill_measured(Row& r, const Timing& t, const std::string& kernels) {
  set_cell(r, "measured_s", num(t.median_s));
  set_cell(r, "measured_p10_s", num(t.p10_s));
  set_cell(r, "measured_p90_s", num(t.p90_s));
  set_cell(r, "kernels", kernels);
  derive_measured(r);
}

// The kernel's parameters of a point, its named flash rung included (validate_shape refuses a rung the device or the
// build does not have, by name).
AttentionParams attention_params(const AttentionPoint& ap) {
  AttentionParams a = params_for(ap.shape, ap.dtype);
  if (ap.flash_kernel == "overlapped") a.flash.kernel = FlashKernel::overlapped;
  else if (ap.flash_kernel == "wgmma") a.flash.kernel = FlashKernel::wgmma;
  else if (ap.flash_kernel != "automatic") throw Error("unknown flash rung '" + ap.flash_kernel + "'");
  return a;
}

}  // namespace

std::function<void(const Params&)> attention_preflight() {
  return [](const Params& p) {
    const AttentionPoint ap = evaluate_attention_point(p);
    check_same_gpu(ap.hardware);
    check_attention_fits(attention_params(ap), ap.variant);
  };
}

std::function<void(const Params&, std::vector<Row>&)> attention_measure() {
  return [](const Params& p, std::vector<Row>& rows) {
    const AttentionPoint ap = evaluate_attention_point(p);
    const AttentionMeasurement m = measure_attention(attention_params(ap), ap.variant);
    for (Row& r : rows) fill_measured(r, m.timing, m.kernels);
  };
}

namespace {
DecodeShape decode_shape(const DecodePoint& dp) {
  DecodeShape s;
  s.dtype = dp.dtype;
  s.batch = dp.shape.batch;
  s.heads = dp.shape.heads;
  s.kv_heads = dp.shape.kv_heads;
  s.head_dim = dp.shape.head_dim;
  s.context = dp.shape.past_tokens + 1;
  s.layout = parse_kv_layout(dp.layout);
  s.block_size = dp.layout == "paged" ? dp.shape.block_size : 16;
  return s;
}
}  // namespace

std::function<void(const Params&)> decode_preflight() {
  return [](const Params& p) {
    const DecodePoint dp = evaluate_decode_point(p);
    check_same_gpu(dp.hardware);
    check_decode_fits(decode_shape(dp), parse_decode_variant(dp.variant));
  };
}

std::function<void(const Params&, std::vector<Row>&)> decode_measure() {
  return [](const Params& p, std::vector<Row>& rows) {
    const DecodePoint dp = evaluate_decode_point(p);
    const DecodeMeasurement m = measure_decode(decode_shape(dp), parse_decode_variant(dp.variant));
    if (m.splits != dp.shape.splits)
      throw Error("the kernel used " + std::to_string(m.splits) + " pieces where the model planned " +
                  std::to_string(dp.shape.splits) + " (SM count of the hardware file differs from the GPU?)");
    for (Row& r : rows) fill_measured(r, m.timing, "");  // measured_kv_bytes_per_s: the row's K/V bytes / time
  };
}

std::function<void(const Params&)> linear_preflight() {
  return [](const Params& p) {
    const LinearPoint lp = evaluate_linear_point(p);
    check_same_gpu(lp.hardware);
    check_linear_supported(lp.shape, lp.format);
  };
}

std::function<void(const Params&, std::vector<Row>&)> linear_measure() {
  return [](const Params& p, std::vector<Row>& rows) {
    const LinearPoint lp = evaluate_linear_point(p);
    const LinearMeasurement m = measure_linear(lp.shape, lp.format);
    for (Row& r : rows) {
      set_cell(r, "measured_bf16_s", num(m.baseline.median_s));
      set_cell(r, "rel_error", num(m.rel_error));
      fill_measured(r, m.timing, "");
    }
  };
}

// One engine at a time on the GPU, kept across the points that share its weights (a 7B model loads in
// seconds, quantized ones in tens): rebuilt when the key (model, weights, format, seed, ...) changes or
// the cached one does not fit the point.
Engine& shared_engine(const std::string& key, const std::function<bool(const Engine&)>& fits,
                      const std::function<std::unique_ptr<Engine>()>& build) {
  static std::string cached_key;
  static std::unique_ptr<Engine> cached;
  if (!cached || cached_key != key || !fits(*cached)) {
    cached.reset();  // free the old one's memory first
    cached_key.clear();
    cached = build();
    cached_key = key;
  }
  return *cached;
}

namespace {

Engine& engine_for(const GenerateRun& r) {
  const GenerateConfig& c = r.config;
  const std::string key = c.model + "|" + c.weights + "|" +
                          (c.weight_format ? weight_format_name(*c.weight_format) : "bf16") + "|" + std::to_string(c.seed);
  const int64_t context = c.prompt_tokens + c.new_tokens;
  return shared_engine(
      key,
      [&](const Engine& e) {
        return c.batch <= e.options().max_sequences && c.max_step_tokens <= e.options().max_step_tokens &&
               context <= e.max_context();
      },
      [&] {
        EngineModel em = load_engine_model(c.weights == "random" ? c.model : c.weights);
        EngineOptions o;
        o.weights = c.weights;
        o.seed = c.seed;
        o.weight_format = c.weight_format;
        o.max_sequences = std::max<int64_t>(256, c.batch);
        o.max_step_tokens = std::max<int64_t>(8192, c.max_step_tokens);
        o.max_context = em.model.max_positions > 0 ? std::min(em.model.max_positions, std::max<int64_t>(8192, context)) : context;
        return std::make_unique<Engine>(em, o);
      });
}

}  // namespace

void measure_generate(GenerateRun& r) {
  check_same_gpu(r.hardware);
  Engine& e = engine_for(r);
  e.set_graphs(r.config.graphs);
  const GenerateConfig& c = r.config;
  Rng rng{c.seed * 7919 + 17};
  std::vector<std::vector<int32_t>> prompts(std::size_t(c.batch), std::vector<int32_t>(std::size_t(c.prompt_tokens)));
  for (auto& p : prompts)
    for (auto& t : p) t = int32_t(rng.next() % uint64_t(r.model.vocab));
  auto run_steps = [&](bool record) {
    std::vector<std::vector<int32_t>> generated(std::size_t(c.batch));
    for (GenerateStep& st : r.steps) {
      const auto t0 = std::chrono::steady_clock::now();
      std::vector<SequenceInput> in;
      for (const PlannedSequence& q : st.sequences) {
        SequenceInput s;
        s.slot = q.slot, s.logits = q.logits;
        const auto& prompt = prompts[std::size_t(q.slot)];
        if (st.phase == "prefill") s.tokens.assign(prompt.begin() + q.past, prompt.begin() + q.past + q.new_tokens);
        else s.tokens = {generated[std::size_t(q.slot)].back()};
        in.push_back(std::move(s));
      }
      const bool trace = record && c.profile && st.phase == "decode" && &st == &r.steps[r.steps.size() - (c.new_tokens - 1) / 2 - 1];
      std::unique_ptr<KernelTrace> tracer;
      if (trace) tracer = std::make_unique<KernelTrace>();
      const StepOutput o = e.step(in);
      if (trace) {
        const std::vector<KernelRecord> ks = tracer->collect();
        std::map<std::string, KernelShare> by;
        for (const KernelRecord& k : ks) {
          KernelShare& b = by[k.name.substr(0, 80)];
          b.kernel = k.name.substr(0, 80), b.launches += 1, b.seconds += k.duration_s();
        }
        for (auto& [name, share] : by) r.profile.push_back(share);
        std::sort(r.profile.begin(), r.profile.end(), [](const KernelShare& a, const KernelShare& b) { return a.seconds > b.seconds; });
        if (!ks.empty()) r.profile_span_s = ks.back().end_s - ks.front().start_s;
      }
      const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      for (std::size_t i = 0; i < in.size(); ++i)
        if (!o.tokens[i].empty()) generated[std::size_t(in[i].slot)].push_back(o.tokens[i].back());
      if (record) st.measured_s = o.gpu_s, st.wall_s = wall, st.graph = o.graph;
    }
    for (int b = 0; b < int(c.batch); ++b) e.release(b);
    if (record) r.first_sequence = generated[0];
  };
  run_steps(false);  // warm-up: clocks, cuBLAS plans, CUDA graphs captured
  run_steps(true);
  r.measured = true;
  r.device = detect_gpu().name;
  r.weight_bytes = e.memory().weight_bytes;
}

std::function<void(const Params&)> serving_engine_preflight() {
  return [](const Params& p) { check_same_gpu(load_hardware(p.at("hardware"), p.at("ceilings"))); };
}

std::function<void(const Params&, std::vector<Row>&)> serving_engine_measure() {
  return [](const Params& p, std::vector<Row>& rows) {
    ServingEnginePoint sp = plan_serving_engine(p);
    const EngineKvGeometry g = engine_kv_geometry(sp.config, sp.options);
    if (g.blocks != sp.kv_blocks || g.block_size != sp.config.block_size || g.bytes_per_token != sp.config.kv_bytes_per_token)
      throw Error("the engine holds " + std::to_string(g.blocks) + " KV blocks of " + std::to_string(g.block_size) +
                  " tokens at " + num(g.bytes_per_token) + " bytes a token; the simulator planned " +
                  std::to_string(sp.kv_blocks) + " at " + num(sp.config.kv_bytes_per_token));
    sp.engine = serve_on_engine(sp.trace, sp.config, sp.options);
    rows = serving_engine_rows(sp, param_double(p, "sample_every_s"));
  };
}

std::function<void(const Params&)> engine_preflight() {
  return [](const Params& p) { check_same_gpu(plan_generate(generate_config(p)).hardware); };
}

std::function<void(const Params&, std::vector<Row>&)> engine_measure() {
  return [](const Params& p, std::vector<Row>& rows) {
    GenerateRun run = plan_generate(generate_config(p));
    measure_generate(run);
    rows = generate_rows(run);
  };
}

}  // namespace inferlab
