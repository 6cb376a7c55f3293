// The engine (engine.h): memory plan, the KV blocks of every sequence, a step's metadata in one copy,
// eager steps and CUDA graphs of uniform steps (decode, verification), timing.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <string>
#include <tuple>

#include "engine_impl.h"
#include "inferlab/kernels/attention/decode.h"
#include "inferlab/kernels/attention/prefill.h"
#include "inferlab/kernels/common/check.h"
#include "inferlab/kernels/common/cublas.h"
#include "inferlab/kernels/gemm/linear.h"
#include "inferlab/kernels/gemm/quant.h"
#include "inferlab/kernels/layers/layers.h"
#include "inferlab/sim/engine_step.h"
#include "inferlab/sim/error.h"

namespace inferlab {
namespace {

constexpr double kGB = 1e9;

std::string gb(double b) {
  char s[32];
  std::snprintf(s, sizeof s, "%.2f GB", b / kGB);
  return s;
}

std::size_t align16(std::size_t x) { return (x + 15) / 16 * 16; }

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

}  // namespace

int64_t graph_batch_size(int64_t b) {
  if (b <= 1) return 1;
  if (b <= 2) return 2;
  if (b <= 4) return 4;
  if (b <= 8) return 8;
  if (b <= 64) return ceil_div(b, 8) * 8;
  return ceil_div(b, 16) * 16;
}

int64_t context_bucket(int64_t c) { return decode_context_bucket(c); }

MetaLayout meta_layout(int64_t tokens, int64_t sequences, int64_t width, int64_t prefill_sequences, int64_t rows) {
  MetaLayout l{};
  std::size_t at = 0;
  auto take = [&](std::size_t bytes) {
    const std::size_t here = at;
    at += align16(bytes);
    return here;
  };
  l.tokens = take(std::size_t(tokens) * 4);
  l.positions = take(std::size_t(tokens) * 4);
  l.slots = take(std::size_t(tokens) * 4);
  l.context_lens = take(std::size_t(sequences) * 4);
  l.q_start = take(std::size_t(prefill_sequences + 1) * 4);
  l.logit_rows = take(std::size_t(rows) * 4);
  l.temperature = take(std::size_t(rows) * 4);
  l.top_k = take(std::size_t(rows) * 4);
  l.top_p = take(std::size_t(rows) * 4);
  l.seed = take(std::size_t(rows) * 8);
  l.offset = take(std::size_t(rows) * 8);
  l.block_table = take(std::size_t(sequences * width) * 4);  // last: the largest, copied only as far as used
  l.total = at;
  l.table_width = width;
  return l;
}

Engine::Engine(const EngineModel& model, const EngineOptions& options) : impl_(std::make_unique<Impl>()) {
  Impl& e = *impl_;
  e.em = model;
  e.opt = options;
  const EngineParallel& par = e.opt.parallel;
  e.local = shard_config(e.em.model, par.shard);  // checks the degrees and ranks against the model
  e.first_token = shard_first_token(e.em.model, par.shard);
  for (const auto& [comm, size, rank, what] :
       {std::tuple{par.tp, par.shard.tp, par.shard.tp_rank, "tensor-parallel"},
        std::tuple{par.pp, par.shard.pp, par.shard.stage, "pipeline"}}) {
    if (size == 1) continue;
    if (!comm) throw Error(std::string("engine: ") + what + " degree " + std::to_string(size) + " needs a communicator");
    if (comm->size() != size || comm->rank() != rank)
      throw Error(std::string("engine: the ") + what + " communicator has rank " + std::to_string(comm->rank()) + " of " +
                  std::to_string(comm->size()) + ", the shard says " + std::to_string(rank) + " of " + std::to_string(size));
    if (!comm->capturable()) e.opt.graphs = false;
  }
  const ModelConfig& m = e.local;
  const int64_t vocab = e.em.model.vocab;  // the sampler's and the returned logits' width
  const EngineOptions& o = e.opt;
  if (o.block_size <= 0 || (o.block_size & (o.block_size - 1)) || o.block_size > 1024)
    throw Error("engine: block size " + std::to_string(o.block_size) + " must be a power of two up to 1024");
  if (o.max_sequences <= 0 || o.max_step_tokens <= 0) throw Error("engine: max_sequences and max_step_tokens must be positive");
  e.max_context = o.max_context > 0 ? o.max_context : m.max_positions;
  if (e.max_context <= 0) throw Error("engine: the config gives no max_position_embeddings; set max_context");
  if (m.max_positions > 0 && e.max_context > m.max_positions)
    throw Error("engine: max_context " + std::to_string(e.max_context) + " exceeds the model's max_position_embeddings " +
                std::to_string(m.max_positions));
  if (e.em.arch.sliding_window) e.max_context = std::min(e.max_context, *e.em.arch.sliding_window);
  e.table_width = ceil_div(e.max_context, o.block_size);
  e.max_logit_rows = o.max_logit_rows > 0 ? o.max_logit_rows : o.max_sequences;
  int device = 0;
  INFERLAB_CUDA_CHECK(cudaGetDevice(&device));
  INFERLAB_CUDA_CHECK(cudaDeviceGetAttribute(&e.sm_count, cudaDevAttrMultiProcessorCount, device));

  // The memory plan, before anything large is allocated.
  std::size_t free_b = 0, total_b = 0;
  INFERLAB_CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
  e.mem.free_before = double(free_b);
  e.mem.total = double(total_b);
  const int64_t T = o.max_step_tokens, R = e.max_logit_rows, S = o.max_sequences;
  const int64_t qkv_n = m.q_dim() + 2 * m.kv_dim();
  const double act_elems = double(T) * double(3 * m.hidden + qkv_n + 2 * m.q_dim() + 3 * m.intermediate) +
                           double(R) * double(m.hidden);
  const std::size_t meta_bytes = meta_layout(T, S, e.table_width, S, R).total;
  // The split-KV workspace: the most pieces any decode batch of up to S sequences can be cut into.
  std::size_t decode_ws = 16;
  for (int64_t b = 1; b <= S; ++b) {
    DecodeParams d;
    d.batch = b, d.heads = m.heads, d.head_dim = m.head_dim, d.max_context = context_bucket(e.max_context);
    d.cache.kv_heads = m.kv_heads;
    decode_ws = std::max(decode_ws, decode_workspace_bytes(d, DecodeVariant::split, e.sm_count));
  }
  decode_ws *= 2;  // the largest partial outputs plus the largest counter array (decode.h: counters at the end)
  int64_t widest = std::max({qkv_n, m.hidden, 2 * m.intermediate});
  LinearParams lp;
  lp.format = o.weight_format.value_or(WeightFormat::bf16);
  lp.m = 64, lp.n = widest, lp.k = std::max(m.hidden, m.intermediate);
  lp.k = lp.k / 128 * 128;
  e.linear_ws_bytes = std::max<std::size_t>(16, lp.format == WeightFormat::bf16 ? 0 : linear_workspace_bytes(lp, e.sm_count));
  PrefillParams pp;
  pp.sequences = S, pp.heads = m.heads, pp.head_dim = m.head_dim, pp.total_q = T, pp.max_q = T, pp.max_context = e.max_context;
  pp.cache.kv_heads = m.kv_heads;
  const std::size_t prefill_ws = std::max<std::size_t>(16, prefill_workspace_bytes(pp));
  const std::size_t sample_ws = std::max<std::size_t>(16, sample_workspace_bytes(R, vocab));
  const bool gather = par.shard.tp > 1 && par.shard.last();
  const double gather_bytes = gather ? double(R) * double(m.vocab) * 4 * double(1 + par.shard.tp) : 0.0;
  const std::size_t cublas_ws = std::size_t(32) << 20;
  e.mem.activation_bytes = act_elems * 2 + double(R) * double(vocab) * 4 + gather_bytes + double(T) * double(m.heads) * 4 +
                           double(meta_bytes + decode_ws + e.linear_ws_bytes + prefill_ws + sample_ws + cublas_ws);
  const double weights = double(planned_weight_bytes(m, e.em.arch, o.weight_format,
                                                     par.shard.first() || (m.tied_embeddings && par.shard.last()),
                                                     par.shard.last()));
  const double block_bytes = double(m.layers) * 2 * double(o.block_size) * double(m.kv_dim()) * 2;
  const double one_sequence = double(e.table_width) * block_bytes;
  const double reserve = 512e6;  // CUDA context growth, cuBLAS, graphs
  const double need = weights + e.mem.activation_bytes + one_sequence + reserve;
  if (need > double(free_b))
    throw Error("engine: " + m.name + " does not fit on this GPU: it needs " + gb(need) + " (weights " + gb(weights) +
                ", activations and workspaces " + gb(e.mem.activation_bytes) + ", KV cache of one " +
                std::to_string(e.max_context) + "-token sequence " + gb(one_sequence) + ") and " + gb(double(free_b)) +
                " of " + gb(double(total_b)) + " are free");
  int64_t blocks = o.kv_blocks;
  const double left = double(free_b) - weights - e.mem.activation_bytes - reserve;
  if (blocks <= 0) blocks = int64_t(std::floor(left * o.kv_memory_fraction / block_bytes));
  if (double(blocks) * block_bytes > left)
    throw Error("engine: " + std::to_string(blocks) + " KV blocks need " + gb(double(blocks) * block_bytes) + "; " +
                gb(left) + " are left after the weights and activations");
  if (blocks < e.table_width)
    throw Error("engine: " + std::to_string(blocks) + " KV blocks cannot hold one sequence of " +
                std::to_string(e.max_context) + " tokens (" + std::to_string(e.table_width) + " blocks)");

  INFERLAB_CUDA_CHECK(cudaStreamCreateWithFlags(&e.stream, cudaStreamNonBlocking));
  INFERLAB_CUDA_CHECK(cudaEventCreate(&e.start));
  INFERLAB_CUDA_CHECK(cudaEventCreate(&e.stop));
  e.w = load_device_weights(e.em, o, e.stream);
  e.mem.weight_bytes = double(e.w.bytes);
  e.inv_freq = DeviceBuffer<float>(rope_inv_freq(m.head_dim, e.em.arch.rope));
  e.kv = DeviceBuffer<uint8_t>(std::size_t(double(blocks) * block_bytes));
  e.mem.kv_bytes = double(e.kv.bytes());
  e.mem.kv_blocks = blocks;
  e.blocks = std::make_unique<PagedKvManager>(blocks, o.block_size, e.table_width);
  auto act = [](int64_t rows, int64_t cols) { return DeviceBuffer<uint16_t>(std::size_t(rows * cols)); };
  e.h = act(T, m.hidden), e.x = act(T, m.hidden), e.y = act(T, m.hidden);
  e.qkv = act(T, qkv_n), e.q = act(T, m.q_dim()), e.attn = act(T, m.q_dim());
  e.gate_up = act(T, 2 * m.intermediate), e.act = act(T, m.intermediate), e.x_final = act(R, m.hidden);
  e.logits = DeviceBuffer<float>(std::size_t(R * vocab));
  if (gather) {
    e.logits_slice = DeviceBuffer<float>(std::size_t(R * m.vocab));
    e.logits_gathered = DeviceBuffer<float>(std::size_t(R * m.vocab * par.shard.tp));
  }
  if (!par.shard.last()) e.ones = DeviceBuffer<uint16_t>(std::vector<uint16_t>(std::size_t(m.hidden), bf16_bits(1.f)));
  e.lse = DeviceBuffer<float>(std::size_t(T * m.heads));
  e.sampled = DeviceBuffer<int32_t>(std::size_t(R));
  e.meta = DeviceBuffer<uint8_t>(meta_bytes);
  e.meta_bytes = meta_bytes;
  INFERLAB_CUDA_CHECK(cudaMallocHost(reinterpret_cast<void**>(&e.meta_host), meta_bytes));
  auto zeroed = [&](std::size_t bytes) {
    DeviceBuffer<uint8_t> b(bytes);
    INFERLAB_CUDA_CHECK(cudaMemset(b.get(), 0, bytes));
    return b;
  };
  e.decode_ws = zeroed(decode_ws);
  e.prefill_ws = zeroed(prefill_ws);
  e.linear_ws = zeroed(e.linear_ws_bytes);
  e.sample_ws = zeroed(sample_ws);
  e.cublas_ws = zeroed(cublas_ws);
  cublasHandle_t h = cublas_handle();
  INFERLAB_CUBLAS_CHECK(cublasSetStream(h, e.stream));
  INFERLAB_CUBLAS_CHECK(cublasSetWorkspace(h, e.cublas_ws.get(), cublas_ws));
  INFERLAB_CUDA_CHECK(cudaDeviceSynchronize());
}

Engine::~Engine() {
  Impl& e = *impl_;
  for (auto& [key, g] : e.graphs) cudaGraphExecDestroy(g);
  if (e.meta_host) cudaFreeHost(e.meta_host);
  if (e.start) cudaEventDestroy(e.start);
  if (e.stop) cudaEventDestroy(e.stop);
  if (e.stream) cudaStreamDestroy(e.stream);
}

StepOutput Engine::step(const std::vector<SequenceInput>& in, bool return_logits) {
  Impl& e = *impl_;
  const ModelConfig& m = e.em.model;  // the whole vocabulary: tokens in, logits out
  const bool outputs = e.opt.parallel.shard.last();  // a pipeline's earlier stages return no tokens
  const EngineOptions& o = e.opt;
  if (in.empty()) throw Error("engine step: no sequences");
  // Every check before anything changes.
  std::vector<uint8_t> seen(static_cast<std::size_t>(o.max_sequences), 0);
  int64_t tokens = 0, rows = 0, more_blocks = 0;
  for (std::size_t i = 0; i < in.size(); ++i) {
    const SequenceInput& s = in[i];
    const std::string who = "engine step: sequence " + std::to_string(i) + " (slot " + std::to_string(s.slot) + ")";
    if (s.slot < 0 || s.slot >= o.max_sequences)
      throw Error(who + ": slot outside 0.." + std::to_string(o.max_sequences - 1));
    if (seen[std::size_t(s.slot)]++) throw Error(who + ": the slot appears twice in the step");
    const int64_t n = int64_t(s.tokens.size());
    if (n == 0) throw Error(who + ": no new tokens");
    for (int32_t t : s.tokens)
      if (t < 0 || t >= m.vocab) throw Error(who + ": token " + std::to_string(t) + " outside the vocabulary of " + std::to_string(m.vocab));
    if (s.logits < 0 || s.logits > n) throw Error(who + ": logits must be in 0.." + std::to_string(n));
    const int64_t held = e.blocks->tokens(s.slot), ctx = held + n;
    if (ctx > e.max_context)
      throw Error(who + ": " + std::to_string(ctx) + " tokens exceed the engine's max context of " + std::to_string(e.max_context) +
                  (e.em.arch.sliding_window ? " (the model's sliding window: longer contexts are not run)" : ""));
    more_blocks += std::max<int64_t>(0, ceil_div(ctx, o.block_size) - int64_t(e.blocks->blocks(s.slot).size()));
    tokens += n;
    rows += s.logits;
  }
  if (tokens > o.max_step_tokens)
    throw Error("engine step: " + std::to_string(tokens) + " new tokens exceed max_step_tokens " + std::to_string(o.max_step_tokens));
  if (rows > e.max_logit_rows)
    throw Error("engine step: " + std::to_string(rows) + " logit rows exceed max_logit_rows " + std::to_string(e.max_logit_rows));
  if (more_blocks > e.blocks->allocator().free_blocks())
    throw Error("engine step: the KV cache is full: the step needs " + std::to_string(more_blocks) + " more blocks of " +
                std::to_string(o.block_size) + " tokens, " + std::to_string(e.blocks->allocator().free_blocks()) +
                " of " + std::to_string(e.blocks->allocator().num_blocks()) + " are free");

  // Decode rows first (new = 1), then the rest, each group in input order.
  std::vector<std::size_t> order(in.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_partition(order.begin(), order.end(), [&](std::size_t i) { return in[i].tokens.size() == 1; });
  const int64_t S = int64_t(in.size());
  int64_t nd = 0;
  for (std::size_t i : order) nd += in[i].tokens.size() == 1;
  // A uniform step: every sequence brings the same k new tokens with the same l logit rows (a decode step:
  // k = l = 1; a speculative verification: k = l = gamma + 1; a draft's catch-up: k = 2, l = 1). Its shape
  // is fixed by (padded batch, k, l, context bucket), so it runs as a CUDA graph.
  const int64_t k = int64_t(in[0].tokens.size()), l = in[0].logits;
  bool uniform = l >= 1 && k <= kGraphMaxNewTokens;  // not prefills: a graph per prompt length would pile up
  for (const SequenceInput& s : in) uniform = uniform && int64_t(s.tokens.size()) == k && s.logits == l;
  const int64_t pad = uniform && o.graphs ? graph_batch_size(S) : S;
  const bool graph = uniform && o.graphs && pad <= o.max_sequences && pad * k <= o.max_step_tokens &&
                     pad * l <= e.max_logit_rows;
  const int64_t Sx = graph ? pad : S, Tx = graph ? pad * k : tokens, Rx = graph ? pad * l : rows;

  std::vector<int64_t> past(in.size());
  int64_t max_ctx = 0, prefill_max_q = 0, prefill_max_ctx = 0, decode_max_ctx = 0;
  for (std::size_t i : order) {
    past[i] = e.blocks->tokens(in[i].slot);
    const int64_t n = int64_t(in[i].tokens.size()), ctx = past[i] + n;
    max_ctx = std::max(max_ctx, ctx);
    if (n == 1) decode_max_ctx = std::max(decode_max_ctx, ctx);
    else prefill_max_q = std::max(prefill_max_q, n), prefill_max_ctx = std::max(prefill_max_ctx, ctx);
  }
  for (std::size_t i : order) e.blocks->grow(in[i].slot, past[i] + int64_t(in[i].tokens.size()));

  StepShape sh;
  sh.tokens = Tx, sh.sequences = Sx, sh.decode_sequences = graph ? (k == 1 ? Sx : 0) : nd, sh.logit_rows = Rx;
  sh.prefill_max_q = prefill_max_q, sh.prefill_max_context = prefill_max_ctx;
  sh.decode_context_bucket = context_bucket(decode_max_ctx);
  // A multi-token graph plans its attention for the bucket of the longest context (the persistent prefill
  // kernel's grid depends on the sequences and k only; the contexts are read on the device).
  const int64_t bucket = graph ? (k == 1 ? sh.decode_context_bucket : context_bucket(max_ctx)) : 0;
  if (graph && k > 1) sh.prefill_max_context = std::min(bucket, e.table_width * o.block_size);
  const int64_t width = graph ? ceil_div(bucket, o.block_size) : ceil_div(max_ctx, o.block_size);
  sh.layout = meta_layout(Tx, Sx, std::min(width, e.table_width), Sx - sh.decode_sequences, Rx);
  const MetaLayout& L = sh.layout;

  // The metadata, in the pinned mirror: rows past the real ones are padding (token 0, position 0, no KV
  // write, an empty context, greedy sampling of a row nobody reads).
  uint8_t* hb = e.meta_host;
  std::memset(hb, 0, L.total);
  auto* tok = reinterpret_cast<int32_t*>(hb + L.tokens);
  auto* pos = reinterpret_cast<int32_t*>(hb + L.positions);
  auto* slot = reinterpret_cast<int32_t*>(hb + L.slots);
  auto* ctx = reinterpret_cast<int32_t*>(hb + L.context_lens);
  auto* table = reinterpret_cast<int32_t*>(hb + L.block_table);
  auto* qs = reinterpret_cast<int32_t*>(hb + L.q_start);
  auto* lrow = reinterpret_cast<int32_t*>(hb + L.logit_rows);
  auto* temp = reinterpret_cast<float*>(hb + L.temperature);
  auto* topk = reinterpret_cast<int32_t*>(hb + L.top_k);
  auto* topp = reinterpret_cast<float*>(hb + L.top_p);
  auto* seed = reinterpret_cast<uint64_t*>(hb + L.seed);
  auto* offs = reinterpret_cast<uint64_t*>(hb + L.offset);
  std::fill(slot, slot + Tx, -1);
  std::fill(table, table + Sx * L.table_width, -1);
  std::fill(topp, topp + Rx, 1.f);
  std::vector<int64_t> first_row(in.size());
  int64_t t = 0, r = 0;
  for (int64_t si = 0; si < S; ++si) {
    const std::size_t i = order[std::size_t(si)];
    const SequenceInput& s = in[i];
    const auto& bl = e.blocks->blocks(s.slot);
    const int64_t n = int64_t(s.tokens.size());
    ctx[si] = int32_t(past[i] + n);
    std::copy(bl.begin(), bl.end(), table + si * L.table_width);
    if (si >= nd) qs[si - nd + 1] = qs[si - nd] + int32_t(n);
    first_row[i] = r;
    for (int64_t j = 0; j < n; ++j, ++t) {
      const int64_t p = past[i] + j;
      tok[t] = s.tokens[std::size_t(j)];
      pos[t] = int32_t(p);
      slot[t] = int32_t(int64_t(bl[std::size_t(p / o.block_size)]) * o.block_size + p % o.block_size);
      if (j >= n - s.logits) {
        lrow[r] = int32_t(t);
        temp[r] = s.sampling.temperature;
        topk[r] = s.sampling.top_k;
        topp[r] = s.sampling.top_p;
        seed[r] = s.sampling.seed;
        offs[r] = uint64_t(p + 1);  // the position of the token drawn
        ++r;
      }
    }
  }
  if (graph && k > 1)  // padding sequences of a multi-token graph: k query rows each, no keys
    for (int64_t si = S; si < Sx; ++si) qs[si + 1] = qs[si] + int32_t(k);
  for (; r < Rx; ++r) lrow[r] = int32_t(r);  // padding rows: their own (finite) rows

  StepOutput out;
  out.graph = graph;
  for (std::size_t i = 0; i < in.size(); ++i) {
    const int64_t n = int64_t(in[i].tokens.size());
    out.batch.sequences.push_back(SequenceWork{n, past[i], 1, in[i].logits});
  }
  out.batch.kv_block_size = o.block_size;

  INFERLAB_CUDA_CHECK(cudaEventRecord(e.start, e.stream));
  INFERLAB_CUDA_CHECK(cudaMemcpyAsync(e.meta.get(), hb, L.total, cudaMemcpyHostToDevice, e.stream));
  const GraphKey key{pad, k, l, bucket};
  auto g = graph ? e.graphs.find(key) : e.graphs.end();
  if (g != e.graphs.end()) {
    INFERLAB_CUDA_CHECK(cudaGraphLaunch(g->second, e.stream));
  } else {
    e.forward(sh);
  }
  INFERLAB_CUDA_CHECK(cudaEventRecord(e.stop, e.stream));
  std::vector<int32_t> sampled(static_cast<std::size_t>(outputs ? rows : 0));
  if (outputs && rows > 0)
    INFERLAB_CUDA_CHECK(cudaMemcpyAsync(sampled.data(), e.sampled.get(), std::size_t(rows) * 4, cudaMemcpyDeviceToHost, e.stream));
  std::vector<float> logits_sorted;
  if (outputs && return_logits && rows > 0) {
    logits_sorted.resize(std::size_t(rows * m.vocab));
    INFERLAB_CUDA_CHECK(cudaMemcpyAsync(logits_sorted.data(), e.logits.get(), logits_sorted.size() * 4,
                                        cudaMemcpyDeviceToHost, e.stream));
  }
  INFERLAB_CUDA_CHECK(cudaStreamSynchronize(e.stream));
  float ms = 0;
  INFERLAB_CUDA_CHECK(cudaEventElapsedTime(&ms, e.start, e.stop));
  out.gpu_s = double(ms) * 1e-3;
  out.graph = graph && g != e.graphs.end();

  // First eager run of a graph shape done: capture it for the next step of that shape.
  if (graph && g == e.graphs.end()) {
    cudaGraph_t cg = nullptr;
    INFERLAB_CUDA_CHECK(cudaStreamBeginCapture(e.stream, cudaStreamCaptureModeRelaxed));
    try {
      e.forward(sh);
    } catch (...) {
      cudaStreamEndCapture(e.stream, &cg);
      if (cg) cudaGraphDestroy(cg);
      throw;
    }
    INFERLAB_CUDA_CHECK(cudaStreamEndCapture(e.stream, &cg));
    cudaGraphExec_t exec = nullptr;
    INFERLAB_CUDA_CHECK(cudaGraphInstantiate(&exec, cg, 0));
    INFERLAB_CUDA_CHECK(cudaGraphDestroy(cg));
    e.graphs.emplace(key, exec);
  }

  // Back to the input order: sequence i's rows start at the sum of the logits before it.
  out.tokens.resize(in.size());
  if (!outputs) return out;
  if (return_logits) out.logits.resize(std::size_t(rows * m.vocab));
  int64_t input_row = 0;
  for (std::size_t i = 0; i < in.size(); ++i) {
    for (int64_t j = 0; j < in[i].logits; ++j) {
      const int64_t sorted_row = first_row[i] + j;
      out.tokens[i].push_back(sampled[std::size_t(sorted_row)]);
      if (return_logits)
        std::copy(logits_sorted.begin() + sorted_row * m.vocab, logits_sorted.begin() + (sorted_row + 1) * m.vocab,
                  out.logits.begin() + (input_row + j) * m.vocab);
    }
    input_row += in[i].logits;
  }
  return out;
}

int64_t Engine::held_tokens(int slot) const { return impl_->blocks->tokens(slot); }
void Engine::release(int slot) { impl_->blocks->release(slot); }
void Engine::truncate(int slot, int64_t tokens) { impl_->blocks->truncate(slot, tokens); }
const PagedKvManager& Engine::kv() const { return *impl_->blocks; }
PagedKvManager& Engine::kv_blocks() { return *impl_->blocks; }
const EngineModel& Engine::model() const { return impl_->em; }
const EngineOptions& Engine::options() const { return impl_->opt; }
const EngineMemory& Engine::memory() const { return impl_->mem; }
int64_t Engine::max_context() const { return impl_->max_context; }
HostWeights Engine::download_weights() const { return download_device_weights(impl_->em, impl_->opt, impl_->w); }
int Engine::graphs_captured() const { return int(impl_->graphs.size()); }
void Engine::set_graphs(bool on) {
  const EngineParallel& p = impl_->opt.parallel;
  impl_->opt.graphs = on && (!p.tp || p.shard.tp == 1 || p.tp->capturable()) && (!p.pp || p.shard.pp == 1 || p.pp->capturable());
}

}  // namespace inferlab
