// One forward pass of the engine over a step's metadata (engine_impl.h): every launch, in order, on the
// engine's stream. Nothing here allocates, copies to or from the host or synchronizes, so the same code is
// captured into CUDA graphs. Per layer, with the sim/ops.h op names:
//   attn_norm (+ the previous layer's ffn_residual)  rmsnorm, residual add fused
//   qkv_proj                                        linear
//   rope + kv_cache_write                           rope (writes the new K/V into the paged cache)
//   attention                                       decode rows: split-KV; rows with new > 1: paged prefill
//   o_proj                                          linear
//   attn_residual + ffn_norm                        rmsnorm, residual add fused
//   gate_up_proj, act, down_proj                    linear, swiglu, linear
// then ffn_residual + final_norm over the logit rows only, lm_head (fp32 logits) and sampling.
#include <cublas_v2.h>

#include <algorithm>

#include "engine_impl.h"
#include "inferlab/kernels/attention/decode.h"
#include "inferlab/kernels/attention/prefill.h"
#include "inferlab/kernels/common/check.h"
#include "inferlab/kernels/common/cublas.h"
#include "inferlab/kernels/gemm/gemv.h"
#include "inferlab/kernels/gemm/linear.h"
#include "inferlab/kernels/layers/layers.h"
#include "inferlab/sim/engine_step.h"

namespace inferlab {
namespace {

constexpr int64_t kWeightOnlyMaxTokens = 64;  // the weight-only kernels' m (kernels/gemm/linear.h)

template <class T>
T* at(uint8_t* base, std::size_t offset) {
  return reinterpret_cast<T*>(base + offset);
}

// Y[m, n] = X[m, k] · Wᵀ. bf16: the streaming GEMV up to kEngineGemvMaxTokens (sim/engine_step.h), cuBLAS above (fp32 output for the
// logits). Weight-only formats: their kernels in pieces of 64 tokens (a prefill step re-reads the packed
// weight once per piece).
struct LinearRef {
  WeightFormat format = WeightFormat::bf16;
  int64_t n = 0, k = 0;
  const void* values = nullptr;
  const void* scales = nullptr;
  const void* metadata = nullptr;
};
LinearRef ref(const LinearWeight& w) {
  return {w.format, w.n, w.k, w.values.get(), w.scales.size() ? w.scales.get() : nullptr,
          w.metadata.size() ? w.metadata.get() : nullptr};
}

void run_linear(const LinearRef& w, const void* x, void* y, int64_t m, bool fp32_out, void* ws, std::size_t ws_bytes,
                cudaStream_t s) {
  if (w.format == WeightFormat::bf16) {
    if (m <= kEngineGemvMaxTokens) {
      GemvParams g;
      g.m = m, g.n = w.n, g.k = w.k;
      g.x = x, g.w = w.values, g.y = y;
      g.out_dtype = fp32_out ? DType::fp32 : DType::bf16;
      gemv(g, s);
      return;
    }
    if (!fp32_out) {
      LinearParams p;
      p.format = WeightFormat::bf16;
      p.m = m, p.n = w.n, p.k = w.k;
      p.x = x, p.w = w.values, p.y = y;
      linear(p, s);
      return;
    }
    // Row-major Y[m, n] = X W^T is column-major Y^T[n, m] = W[n, k] (col-major k x n, transposed) · X^T.
    cublasHandle_t h = cublas_handle();
    INFERLAB_CUBLAS_CHECK(cublasSetStream(h, s));
    const float one = 1.f, zero = 0.f;
    INFERLAB_CUBLAS_CHECK(cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, int(w.n), int(m), int(w.k), &one, w.values,
                                       CUDA_R_16BF, int(w.k), x, CUDA_R_16BF, int(w.k), &zero, y, CUDA_R_32F, int(w.n),
                                       CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    return;
  }
  for (int64_t m0 = 0; m0 < m; m0 += kWeightOnlyMaxTokens) {
    LinearParams p;
    p.format = w.format;
    p.m = std::min(kWeightOnlyMaxTokens, m - m0), p.n = w.n, p.k = w.k;
    p.x = static_cast<const uint16_t*>(x) + m0 * w.k;
    p.w = w.values, p.scales = w.scales, p.metadata = w.metadata;
    p.y = static_cast<uint16_t*>(y) + m0 * w.n;
    p.workspace = ws, p.workspace_bytes = ws_bytes;
    linear(p, s);
  }
}

}  // namespace

void Engine::Impl::forward(const StepShape& s) {
  const ModelConfig& m = local;  // this device's heads, KV heads, MLP width, vocabulary slice and layers
  const WeightShard& shard = opt.parallel.shard;
  Communicator* tp = shard.tp > 1 ? opt.parallel.tp : nullptr;
  Communicator* pp = shard.pp > 1 ? opt.parallel.pp : nullptr;
  const MetaLayout& L = s.layout;
  uint8_t* md = meta.get();
  const int32_t* tokens = at<int32_t>(md, L.tokens);
  const int64_t T = s.tokens, H = m.hidden;
  const std::size_t pool = std::size_t(blocks->allocator().num_blocks() * opt.block_size * m.kv_dim());  // elements

  KvCacheView cache;
  cache.layout = KvLayout::paged;
  cache.dtype = DType::bf16;
  cache.kv_heads = m.kv_heads;
  cache.head_dim = m.head_dim;
  cache.num_blocks = blocks->allocator().num_blocks();
  cache.block_size = opt.block_size;
  cache.max_blocks_per_seq = L.table_width;

  if (shard.first()) {
    EmbeddingParams e;
    e.tokens = T, e.hidden = H, e.vocab = std::min(m.vocab, em.model.vocab - first_token);
    e.first_id = first_token;
    e.ids = tokens, e.table = w.embed.get(), e.out = h.get();
    embedding(e, stream);
    if (tp) tp->all_reduce_sum_bf16(h.get(), T * H, stream);  // each id's row lives on one rank, zeros elsewhere
  } else {
    pp->recv(h.get(), T * H * 2, int(shard.stage - 1), stream);
  }

  for (int64_t l = 0; l < m.layers; ++l) {
    const LayerWeights& lw = w.layers[std::size_t(l)];
    auto* k_pool = reinterpret_cast<uint16_t*>(kv.get()) + std::size_t(2 * l) * pool;
    cache.k = k_pool;
    cache.v = k_pool + pool;

    RmsNormParams n1;
    n1.rows = T, n1.hidden = H, n1.eps = float(em.arch.rms_norm_eps);
    n1.residual = h.get(), n1.add = l == 0 ? nullptr : y.get(), n1.weight = lw.attn_norm.get(), n1.out = x.get();
    n1.name = "attn_norm";
    rmsnorm(n1, stream);

    run_linear(ref(lw.qkv), x.get(), qkv.get(), T, false, linear_ws.get(), linear_ws_bytes, stream);

    RopeParams r;
    r.tokens = T, r.heads = m.heads, r.kv_heads = m.kv_heads, r.head_dim = m.head_dim;
    r.qkv = qkv.get(), r.bias = lw.qkv_bias.size() ? lw.qkv_bias.get() : nullptr;
    r.positions = at<int32_t>(md, L.positions), r.inv_freq = inv_freq.get();
    r.q_out = q.get(), r.cache = cache, r.slots = at<int32_t>(md, L.slots);
    rope(r, stream);

    const int64_t row = m.heads * m.head_dim;  // elements of one token's q / attention output
    if (s.decode_sequences > 0) {
      DecodeParams d;
      d.batch = s.decode_sequences, d.heads = m.heads, d.head_dim = m.head_dim;
      d.q = q.get(), d.o = attn.get(), d.lse = lse.get();
      d.cache = cache;
      d.cache.batch = s.decode_sequences;
      d.cache.context_lens = at<int32_t>(md, L.context_lens);
      d.cache.block_table = at<int32_t>(md, L.block_table);
      d.max_context = s.decode_context_bucket;
      d.workspace = decode_ws.get(), d.workspace_bytes = decode_ws.bytes();
      decode_attention(d, DecodeVariant::split, stream);
    }
    if (s.sequences > s.decode_sequences) {
      const int64_t nd = s.decode_sequences;
      PrefillParams pp;
      pp.sequences = s.sequences - nd, pp.heads = m.heads, pp.head_dim = m.head_dim;
      pp.total_q = T - nd, pp.max_q = s.prefill_max_q, pp.max_context = s.prefill_max_context;
      pp.q = q.get() + nd * row, pp.o = attn.get() + nd * row;
      pp.q_start = at<int32_t>(md, L.q_start);
      pp.cache = cache;
      pp.cache.batch = pp.sequences;
      pp.cache.context_lens = at<int32_t>(md, L.context_lens) + nd;
      pp.cache.block_table = at<int32_t>(md, L.block_table) + nd * L.table_width;
      pp.workspace = prefill_ws.get(), pp.workspace_bytes = prefill_ws.bytes();
      prefill_attention(pp, stream);
    }

    run_linear(ref(lw.o), attn.get(), y.get(), T, false, linear_ws.get(), linear_ws_bytes, stream);
    if (tp) tp->all_reduce_sum_bf16(y.get(), T * H, stream);

    RmsNormParams n2 = n1;
    n2.add = y.get(), n2.weight = lw.ffn_norm.get();
    n2.name = "ffn_norm";
    rmsnorm(n2, stream);

    run_linear(ref(lw.gate_up), x.get(), gate_up.get(), T, false, linear_ws.get(), linear_ws_bytes, stream);
    SwiGluParams sg;
    sg.tokens = T, sg.intermediate = m.intermediate, sg.gate_up = gate_up.get(), sg.out = act.get();
    swiglu(sg, stream);
    run_linear(ref(lw.down), act.get(), y.get(), T, false, linear_ws.get(), linear_ws_bytes, stream);
    if (tp) tp->all_reduce_sum_bf16(y.get(), T * H, stream);
  }
  if (!shard.last()) {
    // The last layer's residual add (the next stage's first norm has nothing to add), then the stream on.
    RmsNormParams add;
    add.rows = T, add.hidden = H, add.eps = float(em.arch.rms_norm_eps);
    add.residual = h.get(), add.add = y.get(), add.weight = ones.get(), add.out = x.get();
    add.name = "stage_residual";
    rmsnorm(add, stream);
    pp->send(h.get(), T * H * 2, int(shard.stage + 1), stream);
    return;
  }
  if (s.logit_rows == 0) return;

  RmsNormParams nf;
  nf.rows = s.logit_rows, nf.hidden = H, nf.eps = float(em.arch.rms_norm_eps);
  nf.residual = h.get(), nf.add = y.get(), nf.weight = w.final_norm.get(), nf.out = x_final.get();
  nf.row_index = at<int32_t>(md, L.logit_rows), nf.source_rows = T;
  nf.name = "final_norm";
  rmsnorm(nf, stream);

  // lm_head (or the tied embedding): bf16, never quantized; fp32 logits. Tensor-parallel: this rank's slice
  // of the vocabulary, the slices gathered ([tp][rows][slice]) and laid side by side ([rows][vocab]).
  run_linear(LinearRef{WeightFormat::bf16, m.vocab, H, w.lm_head_ptr()}, x_final.get(),
             tp ? logits_slice.get() : logits.get(), s.logit_rows, true, nullptr, 0, stream);
  if (tp) {
    const int64_t R = s.logit_rows, V = em.model.vocab, slice = m.vocab;
    tp->all_gather(logits_slice.get(), logits_gathered.get(), R * slice * 4, stream);
    for (int64_t r = 0; r < shard.tp; ++r) {
      const int64_t cols = std::min(slice, V - r * slice);
      INFERLAB_CUDA_CHECK(cudaMemcpy2DAsync(logits.get() + r * slice, std::size_t(V) * 4,
                                            logits_gathered.get() + r * R * slice, std::size_t(slice) * 4,
                                            std::size_t(cols) * 4, std::size_t(R), cudaMemcpyDeviceToDevice, stream));
    }
  }

  SampleParams sp;
  sp.rows = s.logit_rows, sp.vocab = em.model.vocab, sp.logits = logits.get();
  sp.temperature = at<float>(md, L.temperature), sp.top_k = at<int32_t>(md, L.top_k), sp.top_p = at<float>(md, L.top_p);
  sp.seed = at<uint64_t>(md, L.seed), sp.offset = at<uint64_t>(md, L.offset);
  sp.out = sampled.get();
  sp.workspace = sample_ws.size() ? sample_ws.get() : nullptr, sp.workspace_bytes = sample_ws.bytes();
  sample(sp, stream);
}

}  // namespace inferlab
