#include "inferlab/roofline/measure_prefill.h"

#include <algorithm>
#include <cstdio>
#include <numeric>
#include <random>

#include "inferlab/kernels/common/check.h"
#include "inferlab/kernels/common/device_buffer.h"
#include "inferlab/kernels/common/random.h"
#include "inferlab/roofline/kernel_trace.h"
#include "inferlab/sim/engine_step.h"
#include "inferlab/sim/error.h"

namespace inferlab {
namespace {

// The launch's description on the host: params with every pointer empty, q_start, context lengths.
struct Plan {
  PrefillParams p;
  std::vector<int32_t> q_start, lens;
};

Plan plan(const PrefillShape& s) {
  Plan pl;
  pl.q_start.push_back(0);
  for (const auto& w : s.sequences) {
    if (w.new_tokens <= 0 || w.past_tokens < 0 || w.count <= 0)
      throw Error("prefill shape: new tokens and counts must be positive, past tokens not negative");
    for (int64_t i = 0; i < w.count; ++i) {
      pl.q_start.push_back(pl.q_start.back() + int32_t(w.new_tokens));
      pl.lens.push_back(int32_t(w.past_tokens + w.new_tokens));
    }
  }
  if (pl.lens.empty()) throw Error("prefill shape: no sequences");
  PrefillParams& p = pl.p;
  p.dtype = s.dtype;
  p.sequences = int64_t(pl.lens.size());
  p.heads = s.heads;
  p.head_dim = s.head_dim;
  p.total_q = pl.q_start.back();
  p.causal = s.causal;
  for (std::size_t i = 0; i < pl.lens.size(); ++i) {
    p.max_q = std::max<int64_t>(p.max_q, pl.q_start[i + 1] - pl.q_start[i]);
    p.max_context = std::max<int64_t>(p.max_context, pl.lens[i]);
  }
  KvCacheView& c = p.cache;
  c.layout = s.layout;
  c.dtype = s.dtype;
  c.batch = p.sequences;
  c.kv_heads = s.kv_heads;
  c.head_dim = s.head_dim;
  if (s.layout == KvLayout::paged) {
    c.block_size = s.block_size;
    c.max_blocks_per_seq = (p.max_context + s.block_size - 1) / s.block_size;
    for (auto l : pl.lens) c.num_blocks += (l + s.block_size - 1) / s.block_size;
  } else {
    c.max_len = p.max_context;
  }
  return pl;
}

}  // namespace

Op prefill_shape_cost(const PrefillShape& s) {
  const Plan pl = plan(s);
  return prefill_cost(pl.p, pl.q_start, pl.lens);
}

Op prefill_shape_engine_cost(const PrefillShape& s, const Hardware& hw) {
  plan(s);  // validates the shape
  if (!s.causal) throw Error("prefill shape: the engine's step is causal; a non-causal shape has no engine charge");
  ModelConfig m;  // one layer of the shape's attention; the other widths only make the step's other ops valid
  m.name = "prefill";
  m.layers = 1;
  m.heads = s.heads;
  m.kv_heads = s.kv_heads;
  m.head_dim = s.head_dim;
  m.hidden = s.heads * s.head_dim;
  m.intermediate = m.hidden;
  m.vocab = 1;
  Batch batch;
  batch.kv_block_size = s.layout == KvLayout::paged ? s.block_size : 0;
  for (const auto& w : s.sequences) batch.sequences.push_back(SequenceWork{w.new_tokens, w.past_tokens, w.count, 0});
  OpOptions o;
  o.precision.act = o.precision.kv = s.dtype;
  o.causal = s.causal;
  for (Op& op : engine_step_ops(m, batch, o, hw, LaunchMode::eager))
    if (op.name == "attention") return op;
  throw Error("prefill shape: the engine's step has no attention op");
}

void check_prefill_fits(const PrefillShape& s) {
  const Plan pl = plan(s);
  const std::size_t rows = std::size_t(pl.p.total_q * s.heads);
  const std::size_t need = 2 * pl.p.cache.pool_bytes() + rows * std::size_t(s.head_dim) * 2 * 2 + rows * 4;
  std::size_t free_b = 0, total_b = 0;
  INFERLAB_CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
  if (need + (std::size_t(1) << 30) > free_b) {
    char buf[200];
    std::snprintf(buf, sizeof buf, "prefill attention: shape needs %.1f GiB of device memory, %.1f GiB free",
                  double(need) / (1 << 30), double(free_b) / (1 << 30));
    throw Error(buf);
  }
}

PrefillMeasurement measure_prefill(const PrefillShape& s, const TimingOptions& timing, bool trace_kernels) {
  check_prefill_fits(s);
  Plan pl = plan(s);
  PrefillParams& p = pl.p;
  const int64_t slots = s.layout == KvLayout::paged ? p.cache.num_blocks * s.block_size : p.sequences * p.cache.max_len;
  const int64_t pool = slots * s.kv_heads * s.head_dim, nq = p.total_q * s.heads * s.head_dim;
  DeviceBuffer<char> k(std::size_t(pool) * 2), v(std::size_t(pool) * 2), q(std::size_t(nq) * 2), o(std::size_t(nq) * 2);
  DeviceBuffer<float> lse(std::size_t(p.total_q * s.heads));
  fill_normal(k.get(), pool, s.dtype, 21, 1.f, timing.stream);
  fill_normal(v.get(), pool, s.dtype, 22, 1.f, timing.stream);
  fill_normal(q.get(), nq, s.dtype, 23, 1.f, timing.stream);
  std::vector<int32_t> table;
  if (s.layout == KvLayout::paged) {
    std::vector<int32_t> perm(std::size_t(p.cache.num_blocks));
    std::iota(perm.begin(), perm.end(), 0);
    std::shuffle(perm.begin(), perm.end(), std::mt19937(7));
    table.assign(std::size_t(p.sequences * p.cache.max_blocks_per_seq), -1);
    std::size_t next = 0;
    for (int64_t b = 0; b < p.sequences; ++b)
      for (int64_t i = 0; i < (pl.lens[std::size_t(b)] + s.block_size - 1) / s.block_size; ++i)
        table[std::size_t(b * p.cache.max_blocks_per_seq + i)] = perm[next++];
  }
  DeviceBuffer<int32_t> dq_start(pl.q_start), dlens(pl.lens), dtable(table.empty() ? std::vector<int32_t>{0} : table);
  DeviceBuffer<char> ws(prefill_workspace_bytes(p));
  INFERLAB_CUDA_CHECK(cudaMemsetAsync(ws.get(), 0, ws.size(), timing.stream));
  p.q = q.get();
  p.q_start = dq_start.get();
  p.cache.k = k.get();
  p.cache.v = v.get();
  p.cache.context_lens = dlens.get();
  p.cache.block_table = s.layout == KvLayout::paged ? dtable.get() : nullptr;
  validate_kv_view(p.cache, pl.lens, table);
  p.o = o.get();
  p.lse = lse.get();
  p.workspace = ws.get();
  p.workspace_bytes = ws.size();
  prefill_attention(p, timing.stream);  // validated and checked once
  INFERLAB_CUDA_CHECK(cudaStreamSynchronize(timing.stream));
  PrefillMeasurement m;
  m.timing = time_cuda([&] { prefill_attention(p, timing.stream); }, timing);
  if (trace_kernels) {
    L2Flusher flusher;
    KernelTrace trace;
    for (int i = 0; i < timing.repeats; ++i) {
      flusher.flush(timing.stream);
      prefill_attention(p, timing.stream);
    }
    std::vector<double> d;
    for (const KernelRecord& r : trace.collect())
      if (r.name.find("flash_fwd") != std::string::npos) d.push_back(r.duration_s());
    m.kernel_s = summarize(d).median_s;
  }
  return m;
}

}  // namespace inferlab
