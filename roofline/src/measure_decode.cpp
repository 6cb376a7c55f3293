#include "inferlab/roofline/measure_decode.h"

#include <algorithm>
#include <cstdlib>
#include <cstdio>
#include <numeric>
#include <random>

#include "inferlab/kernels/common/check.h"
#include "inferlab/kernels/common/device_buffer.h"
#include "inferlab/kernels/common/random.h"
#include "inferlab/roofline/kernel_trace.h"
#include "inferlab/sim/error.h"

namespace inferlab {
namespace {

int sm_count() {
  int device = 0, sms = 0;
  INFERLAB_CUDA_CHECK(cudaGetDevice(&device));
  INFERLAB_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  return sms;
}

int64_t blocks_per_seq(const DecodeShape& s) { return (s.context + s.block_size - 1) / s.block_size; }

// The params of the shape with every pointer empty (for the split plan and the workspace size).
DecodeParams shape_params(const DecodeShape& s) {
  DecodeParams p;
  p.dtype = s.dtype;
  p.batch = s.batch;
  p.heads = s.heads;
  p.head_dim = s.head_dim;
  p.max_context = s.context;
  p.splits = s.splits;
  p.block = s.block;
  p.cache.layout = s.layout;
  p.cache.dtype = s.dtype;
  p.cache.batch = s.batch;
  p.cache.kv_heads = s.kv_heads;
  p.cache.head_dim = s.head_dim;
  if (s.layout == KvLayout::paged) {
    p.cache.block_size = s.block_size;
    p.cache.max_blocks_per_seq = blocks_per_seq(s);
    p.cache.num_blocks = s.batch * blocks_per_seq(s);
  } else {
    p.cache.max_len = s.context;
  }
  return p;
}

// Diagnostic (INFERLAB_DECODE_TRACE set): one more launch after an L2 flush with per-block
// %globaltimer stamps; prints, for each stamp, the 10/50/90th percentile and the largest time over
// blocks since the first block started (us).
void print_block_trace(DecodeParams p, DecodeVariant v, int splits, cudaStream_t stream) {
  const int64_t groups = (p.heads / p.cache.kv_heads + 31) / 32;
  const std::size_t blocks = std::size_t(p.batch * p.cache.kv_heads * groups * splits), n = blocks * 6;
  DeviceBuffer<unsigned long long> d(n);
  INFERLAB_CUDA_CHECK(cudaMemsetAsync(d.get(), 0, n * 8, stream));
  p.trace = d.get();
  L2Flusher flusher;
  flusher.flush(stream);
  decode_attention(p, v, stream);
  std::vector<unsigned long long> h(n);
  INFERLAB_CUDA_CHECK(cudaMemcpyAsync(h.data(), d.get(), n * 8, cudaMemcpyDeviceToHost, stream));
  INFERLAB_CUDA_CHECK(cudaStreamSynchronize(stream));
  unsigned long long t0 = ~0ull;
  for (std::size_t i = 0; i < blocks; ++i) t0 = std::min(t0, h[i * 6]);
  const char* names[6] = {"entry", "first tile", "loop done", "partial out", "counter", "merged"};
  std::fprintf(stderr, "block trace b=%lld splits=%d blocks=%zu (us since first entry: p10 p50 p90 max)\n",
               (long long)p.batch, splits, blocks);
  for (int k = 0; k < 6; ++k) {
    std::vector<double> x;
    for (std::size_t i = 0; i < blocks; ++i)
      if (h[i * 6 + k]) x.push_back(double(h[i * 6 + k] - t0) * 1e-3);
    if (x.empty()) continue;
    const Timing t = summarize(x);
    std::fprintf(stderr, "  %-12s %7.2f %7.2f %7.2f %7.2f  (%zu blocks)\n", names[k], t.p10_s, t.median_s, t.p90_s,
                 t.max_s, x.size());
  }
}

}  // namespace

int decode_splits_on_device(const DecodeShape& s, DecodeVariant v) { return decode_splits(shape_params(s), v, sm_count()); }

AttentionShape decode_cost_shape(const DecodeShape& s, int splits) {
  AttentionShape a;
  a.batch = s.batch;
  a.heads = s.heads;
  a.kv_heads = s.kv_heads;
  a.head_dim = s.head_dim;
  a.new_tokens = 1;
  a.past_tokens = s.context - 1;
  a.block_size = s.layout == KvLayout::paged ? s.block_size : 0;
  a.splits = splits;
  return a;
}

void check_decode_fits(const DecodeShape& s, DecodeVariant v) {
  const DecodeParams p = shape_params(s);
  const std::size_t need = 2 * p.cache.pool_bytes() + decode_workspace_bytes(p, v, sm_count()) +
                           std::size_t(s.batch * s.heads * s.head_dim) * 4;
  std::size_t free_b = 0, total_b = 0;
  INFERLAB_CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
  if (need + (std::size_t(1) << 30) > free_b) {
    char buf[200];
    std::snprintf(buf, sizeof buf, "decode attention: shape needs %.1f GiB of device memory, %.1f GiB free",
                  double(need) / (1 << 30), double(free_b) / (1 << 30));
    throw Error(buf);
  }
}

DecodeMeasurement measure_decode(const DecodeShape& s, DecodeVariant v, const TimingOptions& timing,
                                 bool trace_kernels) {
  if (s.batch <= 0 || s.context <= 0 || (s.layout == KvLayout::paged && s.block_size <= 0))
    throw Error("decode shape: batch, context and block size must be positive");
  check_decode_fits(s, v);
  DecodeParams p = shape_params(s);
  const int64_t slots = s.layout == KvLayout::paged ? p.cache.num_blocks * s.block_size : s.batch * s.context;
  const std::size_t pool = std::size_t(slots * s.kv_heads * s.head_dim);
  DeviceBuffer<char> k(pool * 2), vv(pool * 2), q(std::size_t(s.batch * s.heads * s.head_dim) * 2),
      o(std::size_t(s.batch * s.heads * s.head_dim) * 2);
  DeviceBuffer<float> lse(std::size_t(s.batch * s.heads));
  fill_normal(k.get(), int64_t(pool), s.dtype, 11, 1.f, timing.stream);
  fill_normal(vv.get(), int64_t(pool), s.dtype, 12, 1.f, timing.stream);
  fill_normal(q.get(), s.batch * s.heads * s.head_dim, s.dtype, 13, 1.f, timing.stream);
  const std::vector<int32_t> lens(std::size_t(s.batch), int32_t(s.context));
  std::vector<int32_t> table;
  if (s.layout == KvLayout::paged) {
    table.resize(std::size_t(p.cache.num_blocks));
    std::iota(table.begin(), table.end(), 0);
    std::shuffle(table.begin(), table.end(), std::mt19937(7));
  }
  DeviceBuffer<int32_t> dlens(lens), dtable(table.empty() ? std::vector<int32_t>{0} : table);
  p.cache.k = k.get();
  p.cache.v = vv.get();
  p.cache.context_lens = dlens.get();
  p.cache.block_table = s.layout == KvLayout::paged ? dtable.get() : nullptr;
  validate_kv_view(p.cache, lens, table);
  p.q = q.get();
  p.o = o.get();
  p.lse = lse.get();
  const int sms = sm_count();
  DeviceBuffer<char> ws(std::max<std::size_t>(1, decode_workspace_bytes(p, v, sms)));
  INFERLAB_CUDA_CHECK(cudaMemsetAsync(ws.get(), 0, ws.size(), timing.stream));
  p.workspace = ws.get();
  p.workspace_bytes = ws.size();
  decode_attention(p, v, timing.stream);
  INFERLAB_CUDA_CHECK(cudaStreamSynchronize(timing.stream));
  DecodeMeasurement m;
  m.splits = decode_splits(p, v, sms);
  m.timing = time_cuda([&] { decode_attention(p, v, timing.stream); }, timing);
  if (std::getenv("INFERLAB_DECODE_TRACE")) print_block_trace(p, v, m.splits, timing.stream);
  if (trace_kernels) {
    L2Flusher flusher;
    KernelTrace trace;
    for (int i = 0; i < timing.repeats; ++i) {
      flusher.flush(timing.stream);
      decode_attention(p, v, timing.stream);
    }
    std::vector<double> d;
    for (const KernelRecord& r : trace.collect())
      if (r.name.find("decode_kernel") != std::string::npos) d.push_back(r.duration_s());
    m.kernel_s = summarize(d).median_s;
  }
  return m;
}

}  // namespace inferlab
