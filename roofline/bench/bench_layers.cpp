// Google Benchmark over the small operators of a decoder layer (kernels/layers) at engine shapes: the
// Llama-2-7B layer (hidden 4096, 32/32 heads, FFN 11008, vocab 32000) and the Llama-3-8B layer (32/8 heads,
// FFN 14336, vocab 128256), bf16, decode steps of 1, 64 and 256 tokens, L2 flushed before every repeat.
// Counters from the sim/ cost of the op the kernel runs (step_ops of that model and step, the op of that name):
//   GB/s          the op's bytes over the median;  pct_bw  of the bandwidth the model uses
//   predicted_us  the model's time for one instance;  error_pct;  spread_pct
// Fused kernels are charged with the ops they replace: rmsnorm with the residual add = attn_residual + ffn_norm,
// rope = rope + kv_cache_write (so their GB/s counts the traffic the fusion saves, and may pass the copy bandwidth). sample has no sim op (the model does not count the sampler): its GB/s is the
// logits tensor of lm_head's traffic, the bytes it must read at least.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "inferlab/kernels/common/check.h"
#include "inferlab/kernels/common/device_buffer.h"
#include "inferlab/kernels/common/random.h"
#include "inferlab/kernels/layers/layers.h"
#include "inferlab/roofline/gpu_info.h"
#include "inferlab/roofline/timing.h"
#include "inferlab/sim/error.h"
#include "inferlab/sim/hardware.h"
#include "inferlab/sim/model.h"
#include "inferlab/sim/ops.h"
#include "inferlab/sim/roofline.h"

namespace inferlab {
namespace {

constexpr DType kDtype = DType::bf16;

// The ops of a decode step of `tokens` sequences (context 1024: these ops do not depend on it).
std::vector<Op> ops_of(const ModelConfig& m, int64_t tokens) {
  OpOptions o;
  o.precision = Precision{kDtype, kDtype, kDtype};
  return step_ops(m, decode_step(tokens, 1024), o);
}
const Op& op_named(const std::vector<Op>& ops, const std::string& name) {
  for (const auto& op : ops)
    if (op.name == name) return op;
  throw Error("bench_layers: no sim op named " + name);
}
// One launch's cost as the sum of the fused ops (count 1).
Op fused(const std::vector<Op>& ops, const std::vector<std::string>& names) {
  Op sum = op_named(ops, names[0]);
  sum.count = 1;
  for (std::size_t i = 1; i < names.size(); ++i) {
    const Op& o = op_named(ops, names[i]);
    sum.name += "+" + o.name;
    sum.flops += o.flops;
    sum.traffic.insert(sum.traffic.end(), o.traffic.begin(), o.traffic.end());
  }
  return sum;
}

void report(benchmark::State& state, const Timing& t, double bytes, const Op* cost) {
  state.counters["GB/s"] = bytes / t.median_s / 1e9;
  state.counters["spread_pct"] = 100.0 * t.spread();
  if (!cost) return;
  try {
    const Prediction pred = predict(*cost, hardware_of_this_gpu());
    state.counters["pct_bw"] = 100.0 * bytes / t.median_s / pred.bandwidth;
    state.counters["predicted_us"] = pred.time_s * 1e6;
    state.counters["error_pct"] = 100.0 * (pred.time_s - t.median_s) / t.median_s;
  } catch (const std::exception&) {  // no hardware file for this GPU: the measured counters only
  }
}

// Runs `enqueue` under time_cuda and reports against `cost` (or, without one, `bytes`).
template <class F>
void time_and_report(benchmark::State& state, F&& enqueue, const Op* cost, double bytes) {
  try {
    Timing t;
    for (auto _ : state) {
      t = time_cuda(enqueue);
      state.SetIterationTime(t.median_s);
    }
    report(state, t, cost ? cost->bytes() : bytes, cost);
  } catch (const std::exception& e) {
    state.SkipWithError(e.what());
  }
}

void* random_buffer(DeviceBuffer<char>& buf, int64_t count, DType dtype, uint64_t seed, float stddev = 1.f) {
  buf = DeviceBuffer<char>(std::size_t(count) * std::size_t(dtype_bytes(dtype)));
  fill_normal(buf.get(), count, dtype, seed, stddev, nullptr);
  return buf.get();
}

void bench_embedding(benchmark::State& state, const ModelConfig& m, int64_t tokens) {
  const auto ops = ops_of(m, tokens);
  DeviceBuffer<char> table, out;
  std::mt19937 rng(1);
  std::vector<int32_t> ids(static_cast<std::size_t>(tokens));
  for (auto& i : ids) i = int32_t(rng() % uint32_t(m.vocab));
  DeviceBuffer<int32_t> dids(ids);
  EmbeddingParams p{kDtype, tokens, m.hidden, m.vocab, dids.get(), random_buffer(table, m.vocab * m.hidden, kDtype, 1),
                    random_buffer(out, tokens * m.hidden, kDtype, 2)};
  const Op cost = fused(ops, {"embedding"});
  time_and_report(state, [&] { embedding(p, nullptr); }, &cost, 0);
}

// kind: "attn_norm" (no add), "ffn_norm" (the residual add fused), "final_norm" (row_index over every row).
void bench_rmsnorm(benchmark::State& state, const ModelConfig& m, int64_t tokens, const std::string& kind) {
  const auto ops = ops_of(m, tokens);
  DeviceBuffer<char> res, add, w, out;
  std::vector<int32_t> index(static_cast<std::size_t>(tokens));
  std::iota(index.begin(), index.end(), 0);
  DeviceBuffer<int32_t> dindex(index);
  RmsNormParams p;
  p.dtype = kDtype;
  p.rows = tokens;
  p.hidden = m.hidden;
  p.residual = random_buffer(res, tokens * m.hidden, kDtype, 3);
  p.add = kind == "ffn_norm" ? random_buffer(add, tokens * m.hidden, kDtype, 4) : nullptr;
  p.weight = random_buffer(w, m.hidden, kDtype, 5);
  p.out = random_buffer(out, tokens * m.hidden, kDtype, 6);
  if (kind == "final_norm") {
    p.row_index = dindex.get();
    p.source_rows = tokens;
  }
  p.name = kind.c_str();
  const Op cost = kind == "ffn_norm" ? fused(ops, {"attn_residual", "ffn_norm"}) : fused(ops, {kind});
  time_and_report(state, [&] { rmsnorm(p, nullptr); }, &cost, 0);
}

void bench_rope(benchmark::State& state, const ModelConfig& m, int64_t tokens) {
  const auto ops = ops_of(m, tokens);
  const int64_t width = (m.heads + 2 * m.kv_heads) * m.head_dim, block = 16;
  DeviceBuffer<char> qkv, q, k, v;
  KvCacheView c;
  c.layout = KvLayout::paged;
  c.dtype = kDtype;
  c.batch = tokens;
  c.kv_heads = m.kv_heads;
  c.head_dim = m.head_dim;
  c.block_size = block;
  c.num_blocks = tokens;  // one block per sequence; each token writes the slot of its position
  c.max_blocks_per_seq = 1;
  const int64_t pool = c.num_blocks * block * m.kv_heads * m.head_dim;
  c.k = random_buffer(k, pool, kDtype, 7);
  c.v = random_buffer(v, pool, kDtype, 8);
  std::mt19937 rng(2);
  std::vector<int32_t> pos(static_cast<std::size_t>(tokens)), slots(pos.size()), blocks(pos.size());
  std::iota(blocks.begin(), blocks.end(), 0);
  std::shuffle(blocks.begin(), blocks.end(), rng);
  for (std::size_t t = 0; t < pos.size(); ++t) {
    pos[t] = int32_t(rng() % 4096);
    slots[t] = blocks[t] * int32_t(block) + pos[t] % int32_t(block);
  }
  const auto inv = rope_inv_freq(m.head_dim, 10000.0, {});  // the values do not change the time
  DeviceBuffer<int32_t> dpos(pos), dslots(slots);
  DeviceBuffer<float> dinv(inv);
  RopeParams p;
  p.dtype = kDtype;
  p.tokens = tokens;
  p.heads = m.heads;
  p.kv_heads = m.kv_heads;
  p.head_dim = m.head_dim;
  p.qkv = random_buffer(qkv, tokens * width, kDtype, 9);
  p.positions = dpos.get();
  p.inv_freq = dinv.get();
  p.q_out = random_buffer(q, tokens * m.heads * m.head_dim, kDtype, 10);
  p.cache = c;
  p.slots = dslots.get();
  const Op cost = fused(ops, {"rope", "kv_cache_write"});
  time_and_report(state, [&] { rope(p, nullptr); }, &cost, 0);
}

void bench_swiglu(benchmark::State& state, const ModelConfig& m, int64_t tokens) {
  const auto ops = ops_of(m, tokens);
  DeviceBuffer<char> in, out;
  SwiGluParams p{kDtype, tokens, m.intermediate, random_buffer(in, tokens * 2 * m.intermediate, kDtype, 11),
                 random_buffer(out, tokens * m.intermediate, kDtype, 12)};
  const Op cost = fused(ops, {"act"});
  time_and_report(state, [&] { swiglu(p, nullptr); }, &cost, 0);
}

// mode: "greedy", "topk50" (T 0.8), "topp0.9" (T 1), "topk50_topp0.9".
void bench_sample(benchmark::State& state, const ModelConfig& m, int64_t rows, const std::string& mode) {
  const auto ops = ops_of(m, rows);
  double logits_bytes = 0;
  for (const auto& t : op_named(ops, "lm_head").traffic)
    if (t.tensor == "logits") logits_bytes += t.bytes;
  DeviceBuffer<char> logits;
  random_buffer(logits, rows * m.vocab, DType::fp32, 13, 2.f);
  const bool greedy = mode == "greedy";
  DeviceBuffer<float> temp(std::vector<float>(std::size_t(rows), greedy ? 0.f : (mode == "topk50" ? 0.8f : 1.f)));
  DeviceBuffer<int32_t> k(std::vector<int32_t>(std::size_t(rows), mode.rfind("topk50", 0) == 0 ? 50 : 0));
  DeviceBuffer<float> pp(std::vector<float>(std::size_t(rows), mode.find("topp0.9") != std::string::npos ? 0.9f : 1.f));
  std::vector<uint64_t> offsets(static_cast<std::size_t>(rows));
  std::iota(offsets.begin(), offsets.end(), 0);
  DeviceBuffer<uint64_t> seed(std::vector<uint64_t>(std::size_t(rows), 1234)), off(offsets);
  DeviceBuffer<int32_t> out(static_cast<std::size_t>(rows));
  DeviceBuffer<char> ws(sample_workspace_bytes(rows, m.vocab));
  INFERLAB_CUDA_CHECK(cudaMemset(ws.get(), 0, ws.size()));
  SampleParams p;
  p.rows = rows;
  p.vocab = m.vocab;
  p.logits = reinterpret_cast<const float*>(logits.get());
  p.temperature = temp.get();
  p.top_k = k.get();
  p.top_p = pp.get();
  p.seed = seed.get();
  p.offset = off.get();
  p.out = out.get();
  p.workspace = ws.get();
  p.workspace_bytes = ws.size();
  time_and_report(state, [&] { sample(p, nullptr); }, nullptr, logits_bytes);
}

}  // namespace
}  // namespace inferlab

int main(int argc, char** argv) {
  using namespace inferlab;
  std::vector<std::pair<std::string, ModelConfig>> models;
  for (const char* name : {"llama-2-7b", "llama-3-8b"}) models.emplace_back(name, load_model(name));
  auto add = [](const std::string& name, auto fn) {
    benchmark::RegisterBenchmark(name.c_str(),
                                 [fn](benchmark::State& s) {
                                   try {
                                     fn(s);
                                   } catch (const std::exception& e) {  // setup failed (no GPU, no memory)
                                     s.SkipWithError(e.what());
                                   }
                                 })
        ->Iterations(1)
        ->UseManualTime()
        ->Unit(benchmark::kMicrosecond);
  };
  for (const auto& [mname, m] : models)
    for (int64_t t : {1, 64, 256}) {
      const std::string suffix = "/" + mname + "/t" + std::to_string(t);
      const ModelConfig mc = m;
      add("embedding" + suffix, [mc, t](benchmark::State& s) { bench_embedding(s, mc, t); });
      for (const char* kind : {"attn_norm", "ffn_norm", "final_norm"}) {
        const std::string k = kind;
        add("rmsnorm/" + k + suffix, [mc, t, k](benchmark::State& s) { bench_rmsnorm(s, mc, t, k); });
      }
      add("rope" + suffix, [mc, t](benchmark::State& s) { bench_rope(s, mc, t); });
      add("act" + suffix, [mc, t](benchmark::State& s) { bench_swiglu(s, mc, t); });
      for (const char* mode : {"greedy", "topk50", "topp0.9", "topk50_topp0.9"}) {
        const std::string md = mode;
        add("sample/" + md + suffix, [mc, t, md](benchmark::State& s) { bench_sample(s, mc, t, md); });
      }
    }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
