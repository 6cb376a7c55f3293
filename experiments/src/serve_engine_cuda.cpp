// Serving on the GPU engine (serve_engine.h): the engine loop's runner, the engine's KV geometry and the
// calibration sweep of the measured step cost.
#include <algorithm>
#include <chrono>
#include <thread>

#include <cuda_runtime.h>

#include "inferlab/experiments/provenance.h"
#include "inferlab/experiments/serve_engine.h"
#include "inferlab/kernels/engine/engine.h"
#include "inferlab/roofline/gpu_info.h"
#include "inferlab/sim/error.h"
#include "inferlab/sim/memory.h"
#include "inferlab/sim/rng.h"
#include "inferlab/sim/scheduler.h"
#include "measurers.h"

namespace inferlab {
namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

int64_t pass_tokens(const ServingConfig& c) { return c.max_batch_tokens ? c.max_batch_tokens : default_batch_tokens(c); }

// The engine a serving configuration runs on: max_batch slots, passes of up to the token budget plus
// every running decode, contexts up to max_len, the KV blocks of kv_gib (or what the memory plan leaves).
Engine& serving_engine(const ServingConfig& c, const EngineServeOptions& o) {
  if (c.max_batch > INT32_MAX) throw Error("max_batch " + std::to_string(c.max_batch) + " is too large for the engine");
  EngineModel em = load_engine_model(o.weights == "random" ? o.model : o.weights);
  EngineOptions eo;
  eo.weights = o.weights;
  eo.seed = o.seed;
  eo.block_size = c.block_size;
  // Spare slots: the calibration's prompts (of at most max_len tokens each) beside max_batch decodes.
  const int64_t spare = kv_blocks_for(pass_tokens(c), c.max_len);
  eo.max_sequences = c.max_batch + spare;
  eo.max_step_tokens = pass_tokens(c) + c.max_batch;
  eo.max_logit_rows = c.max_batch + spare;
  eo.max_context = c.max_len;
  eo.graphs = o.graphs;
  if (em.model.max_positions > 0 && c.max_len > em.model.max_positions)
    throw Error("max_len " + std::to_string(c.max_len) + " exceeds " + em.model.name + "'s " +
                std::to_string(em.model.max_positions) + " positions");
  if (o.kv_gib > 0) {
    const double per_token = kv_bytes_per_token(em.model, DType::bf16);  // the engine's K and V are bf16
    eo.kv_blocks = int64_t(o.kv_gib * kGiB / (per_token * double(c.block_size)));
    if (eo.kv_blocks < 1) throw Error("kv_gib " + std::to_string(o.kv_gib) + " holds no KV block");
  }
  const std::string key = "serve|" + o.model + "|" + o.weights + "|" + std::to_string(o.seed) + "|" +
                          std::to_string(eo.block_size) + "|" + std::to_string(eo.max_sequences) + "|" +
                          std::to_string(eo.max_step_tokens) + "|" + std::to_string(eo.max_context) + "|" +
                          std::to_string(eo.kv_blocks);
  Engine& e = shared_engine(key, [](const Engine&) { return true; }, [&] { return std::make_unique<Engine>(em, eo); });
  e.set_graphs(o.graphs);
  return e;
}

double engine_bytes_per_token(const Engine& e) {
  const EngineMemory& m = e.memory();
  return m.kv_bytes / (double(m.kv_blocks) * double(e.options().block_size));
}

double gpu_free_bytes() {
  std::size_t free = 0, total = 0;
  if (cudaMemGetInfo(&free, &total) != cudaSuccess) throw Error("cudaMemGetInfo failed");
  return double(free);
}

// Every request's token stream: its prompt (random tokens from its own seed), then what it emitted.
class TokenStreams {
 public:
  TokenStreams(const std::vector<Request>& trace, uint64_t seed, int64_t vocab)
      : trace_(trace), seed_(seed), vocab_(vocab), ids_(trace.size()) {}
  std::vector<int32_t>& of(int64_t r) {
    auto& v = ids_[std::size_t(r)];
    if (v.empty()) {
      Rng rng{seed_ * 1000003 + uint64_t(r) * 7919 + 1};
      v.resize(std::size_t(trace_[std::size_t(r)].prompt));
      for (auto& t : v) t = int32_t(rng.next() % uint64_t(vocab_));
    }
    return v;
  }
  std::vector<int32_t> emitted(int64_t r) {
    const auto& v = of(r);
    return std::vector<int32_t>(v.begin() + trace_[std::size_t(r)].prompt, v.end());
  }

 private:
  const std::vector<Request>& trace_;
  uint64_t seed_;
  int64_t vocab_;
  std::vector<std::vector<int32_t>> ids_;
};

// The engine loop's runner on the GPU: the host clock from the start of the run.
class EngineRunner : public StepRunner {
 public:
  EngineRunner(Engine& e, TokenStreams& streams) : e_(e), streams_(streams), t0_(std::chrono::steady_clock::now()) {}
  double now() override { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count(); }
  void wait_until(double t) override {
    const double dt = t - now();
    if (dt > 0) std::this_thread::sleep_for(std::chrono::duration<double>(dt));
  }
  double run(const std::vector<ScheduledSequence>& step, const Batch&, double) override {
    in_.resize(step.size());
    for (std::size_t i = 0; i < step.size(); ++i) {
      const ScheduledSequence& s = step[i];
      if (e_.held_tokens(s.slot) != s.past)
        throw Error("serving on the engine: slot " + std::to_string(s.slot) + " holds " +
                    std::to_string(e_.held_tokens(s.slot)) + " tokens where the scheduler expects " +
                    std::to_string(s.past));  // a bug, not an input error
      const auto& ids = streams_.of(s.request);
      SequenceInput& q = in_[i];
      q.slot = s.slot;
      q.tokens.assign(ids.begin() + s.past, ids.begin() + s.past + s.new_tokens);
      q.logits = s.sample ? 1 : 0;
    }
    const StepOutput o = e_.step(in_);
    gpu_s += o.gpu_s;
    for (std::size_t i = 0; i < step.size(); ++i) {
      if (!step[i].sample) continue;
      auto& ids = streams_.of(step[i].request);
      if (int64_t(ids.size()) != step[i].past + step[i].new_tokens || o.tokens[i].size() != 1)
        throw Error("serving on the engine: request " + std::to_string(step[i].request) + " sampled out of turn");
      ids.push_back(o.tokens[i][0]);
    }
    return now();
  }
  std::string describe() const override { return "the GPU engine (host clock)"; }
  double gpu_s = 0;

 private:
  Engine& e_;
  TokenStreams& streams_;
  std::chrono::steady_clock::time_point t0_;
  std::vector<SequenceInput> in_;
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// Captures, before a timed run, the CUDA graphs its decode passes will replay (one per padded batch size
// and context bucket, captured on first use): every padded size up to max_batch at every bucket up to
// max_len. The bucket follows the longest context of the pass, so one sequence holds it and the others
// one token each: every pair fits the KV memory a serving run can reach. Once per engine.
void warm_graphs(Engine& e, int64_t max_batch, int64_t max_len) {
  static const Engine* warmed = nullptr;
  if (warmed == &e || !e.options().graphs) return;
  PagedKvManager& kv = e.kv_blocks();
  const int64_t B = kv.block_size();
  for (int64_t bucket = context_bucket(1); bucket <= context_bucket(max_len); bucket *= 2) {
    const int64_t longest = std::min(bucket, max_len) - 1;
    for (int64_t b = 1; b <= max_batch; b = graph_batch_size(b) + 1) {
      const int64_t n = std::min(graph_batch_size(b), max_batch);
      if (kv_blocks_for(longest + 1, B) + (n - 1) * kv_blocks_for(2, B) > kv.free_blocks()) break;
      std::vector<SequenceInput> in;
      in.resize(std::size_t(n));
      for (int64_t i = 0; i < n; ++i) {
        kv.grow(int(i), i == 0 ? longest : 1);
        in[std::size_t(i)].slot = int(i);
        in[std::size_t(i)].tokens = {0};
      }
      for (int k = 0; k < 2; ++k) {  // eager first, captured the second time
        e.step(in);
        for (int64_t i = 0; i < n; ++i) kv.truncate(int(i), i == 0 ? longest : 1);
      }
      for (int64_t i = 0; i < n; ++i) kv.release(int(i));
    }
  }
  warmed = &e;
}

}  // namespace

EngineKvGeometry engine_kv_geometry(const ServingConfig& config, const EngineServeOptions& options) {
  Engine& e = serving_engine(config, options);
  return EngineKvGeometry{e.kv().allocator().num_blocks(), e.options().block_size, e.kv().max_blocks_per_seq(),
                          engine_bytes_per_token(e)};
}

EngineServeResult serve_on_engine(const std::vector<Request>& trace_in, ServingConfig c, const EngineServeOptions& o) {
  std::vector<Request> trace = trace_in;
  if (o.offline)
    for (auto& r : trace) r.arrival = 0;
  Engine& e = serving_engine(c, o);
  PagedKvManager& kv = e.kv_blocks();
  if (kv.used_blocks() != 0) throw Error("serving on the engine: its KV cache is not empty");
  c.kv_bytes_per_token = engine_bytes_per_token(e);
  c.kv_capacity_bytes = double(kv.allocator().num_blocks() * kv.block_size()) * c.kv_bytes_per_token;
  check_serving(trace, c);
  EngineServeResult r;
  r.kv_blocks = kv.allocator().num_blocks();
  r.block_size = kv.block_size();
  r.kv_bytes_per_token = c.kv_bytes_per_token;
  r.device = detect_gpu().name;
  TokenStreams streams(trace, o.seed, e.model().model.vocab);
  warm_graphs(e, c.max_batch, c.max_len);
  r.gpu_free_before = gpu_free_bytes();
  EngineRunner runner(e, streams);
  r.result = serve_iterations(trace, c, kv, runner);
  r.gpu_free_after = gpu_free_bytes();
  r.gpu_seconds = runner.gpu_s;
  if (kv.used_blocks() != 0)
    throw Error("serving on the engine: " + std::to_string(kv.used_blocks()) + " KV blocks still held after the run");
  for (const auto& q : r.result.requests)
    if (q.completions == 1 && int64_t(streams.emitted(q.id).size()) != q.output)
      throw Error("serving on the engine: request " + std::to_string(q.id) + " emitted " +
                  std::to_string(streams.emitted(q.id).size()) + " tokens, not " + std::to_string(q.output));
  if (o.keep_outputs) {
    r.outputs.resize(trace.size());
    for (std::size_t i = 0; i < trace.size(); ++i)
      if (r.result.requests[i].completions == 1) r.outputs[i] = streams.emitted(int64_t(i));
  }
  r.summary = summarize(r.result);
  return r;
}

StepTimingTable calibrate_engine(const ServingConfig& c, const EngineServeOptions& o, const std::vector<int64_t>& decode,
                                 const std::vector<int64_t>& prefill, int64_t base_context, int64_t long_context,
                                 int repeats) {
  Engine& e = serving_engine(c, o);
  PagedKvManager& kv = e.kv_blocks();
  if (kv.used_blocks() != 0) throw Error("calibration: the engine's KV cache is not empty");
  const int64_t vocab = e.model().model.vocab, B = kv.block_size();
  Rng rng{o.seed * 31 + 5};
  std::vector<int32_t> prompt(std::size_t(std::max<int64_t>(1, prefill.back())));
  for (auto& t : prompt) t = int32_t(rng.next() % uint64_t(vocab));

  // One pass of d decodes at `context` tokens each (stored tokens stand in: their values do not change a
  // pass's time) and a prompt of p tokens from position 0; the median of `repeats` after 2 warm-ups.
  auto time_pass = [&](int64_t d, int64_t p, int64_t context) {
    const int64_t max_len = e.max_context(), prompts = kv_blocks_for(p, max_len);  // a prompt holds <= max_len
    if (d + prompts > e.options().max_sequences) throw Error("calibration: more sequences than the engine's slots");
    const int64_t need = d * kv_blocks_for(context + 1, B) + kv_blocks_for(p, B) + prompts;
    if (need > kv.free_blocks())
      throw Error("calibration: " + std::to_string(d) + " decodes at " + std::to_string(context) + " tokens and a " +
                  std::to_string(p) + "-token prompt need " + std::to_string(need) + " KV blocks, " +
                  std::to_string(kv.free_blocks()) + " are free");
    std::vector<SequenceInput> in;
    for (int64_t i = 0; i < d; ++i) {
      kv.grow(int(i), context);
      SequenceInput s;
      s.slot = int(i);
      s.tokens = {int32_t(i % vocab)};
      in.push_back(s);
    }
    for (int64_t k = 0, left = p; k < prompts; ++k) {
      SequenceInput s;
      s.slot = int(d + k);
      const int64_t n = std::min(left, max_len);
      s.tokens.assign(prompt.begin(), prompt.begin() + n);
      left -= n;
      in.push_back(s);
    }
    std::vector<double> t;
    for (int k = 0; k < repeats + 2; ++k) {
      const auto t0 = std::chrono::steady_clock::now();
      e.step(in);
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if (k >= 2) t.push_back(s);
      for (int64_t i = 0; i < d; ++i) kv.truncate(int(i), context);
      for (int64_t k = 0; k < prompts; ++k) kv.release(int(d + k));
    }
    for (int64_t i = 0; i < d; ++i) kv.release(int(i));
    return median(t);
  };

  StepTimingTable tab;
  tab.model = e.model().model.name;
  tab.device = detect_gpu().name;
  tab.decode = decode;
  tab.prefill = prefill;
  tab.base_context = base_context;
  tab.base.assign(decode.size(), std::vector<double>(prefill.size(), 0.0));
  tab.per_context.assign(decode.size(), 0.0);
  for (std::size_t i = 0; i < decode.size(); ++i)
    for (std::size_t k = 0; k < prefill.size(); ++k)
      if (i > 0 || k > 0) tab.base[i][k] = time_pass(decode[i], prefill[k], base_context);
  const int64_t capacity = kv.free_blocks() * B;
  for (std::size_t i = 1; i < decode.size(); ++i) {
    const int64_t d = decode[i];
    const int64_t ctx = std::min(long_context - 1, capacity / d - B);  // the longest context all d fit at (+1 new)
    if (ctx <= base_context + B) throw Error("calibration: no room for a long context at " + std::to_string(d) + " decodes");
    tab.per_context[i] = std::max(0.0, (time_pass(d, 0, ctx) - tab.base[i][0]) / (double(d) * double(ctx - base_context)));
  }
  tab.provenance = "commit " + git_commit() + ", " + utc_now_iso8601() + ", " + std::to_string(repeats) +
                   " timed passes a point (median, host clock), " + (o.graphs ? "CUDA graphs for decode-only passes" : "eager");
  check_step_timing(tab, "calibration");
  return tab;
}

}  // namespace inferlab
