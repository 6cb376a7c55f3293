#include "inferlab/sim/engine_step.h"

#include <algorithm>
#include <map>

#include "inferlab/sim/linear.h"

namespace inferlab {
namespace {

constexpr int64_t kWeightOnlyMaxTokens = 64;

void fold(Op& into, const Op& from) {
  into.flops += from.flops;
  into.traffic.insert(into.traffic.end(), from.traffic.begin(), from.traffic.end());
}

// The launches of a linear layer m x n x k in the engine.
std::vector<KernelLaunch> linear_launches(int64_t m, int64_t n, int64_t k, WeightFormat f, const Hardware& hw) {
  if (is_dense(f) && m <= kEngineGemvMaxTokens) {
    // gemm/gemv: one warp (two from 4 tokens) per output row streaming W once, mnk FMAs on the CUDA cores.
    const Op cost = linear_cost(LinearShape{m, n, k}, f);
    KernelLaunch g = streaming_kernel("gemv_kernel", cost.bytes(), double(m * n * 2) / cost.bytes(), cost.flops / 2, hw);
    g.ctas = (n + 7) / 8, g.ctas_per_sm = m >= 4 ? 2 : 8;
    return {g};
  }
  if (is_dense(f) || m <= kWeightOnlyMaxTokens) return linear_kernels(m, n, k, f, hw);
  std::vector<KernelLaunch> all;
  for (int64_t m0 = 0; m0 < m; m0 += kWeightOnlyMaxTokens) {
    const auto part = linear_kernels(std::min(kWeightOnlyMaxTokens, m - m0), n, k, f, hw);
    all.insert(all.end(), part.begin(), part.end());
  }
  return all;
}

}  // namespace

int64_t decode_context_bucket(int64_t c) {
  int64_t b = 256;
  while (b < c) b *= 2;
  return b;
}

std::vector<Op> engine_step_ops(const ModelConfig& m, const Batch& batch, const OpOptions& o, const Hardware& hw,
                                LaunchMode launch) {
  std::vector<Op> ops = batch_ops(m, batch, o);
  auto find = [&](const std::string& name) {
    return std::find_if(ops.begin(), ops.end(), [&](const Op& op) { return op.name == name; });
  };
  // Fused launches: the residual adds into the norms after them, the KV write into rope.
  for (auto [from, into] : {std::pair<const char*, const char*>{"attn_residual", "ffn_norm"},
                            {"ffn_residual", "attn_norm"}, {"kv_cache_write", "rope"}}) {
    auto f = find(from), t = find(into);
    if (f == ops.end() || t == ops.end()) continue;
    fold(*t, *f);
    ops.erase(f);
  }
  int64_t tokens = 0, rows = 0, nd = 0, decode_ctx = 0, np = 0;
  for (const auto& s : batch.sequences) {
    tokens += s.count * s.new_tokens;
    rows += s.count * s.logits;
    if (s.new_tokens == 1) nd += s.count, decode_ctx = std::max(decode_ctx, s.past_tokens + 1);
    else np += s.count;
  }
  const WeightFormat layer_format = o.weight_format.value_or(WeightFormat::bf16);
  const DType act = o.precision.act;
  for (Op& op : ops) {
    op.kernels.clear();
    if (op.name == "qkv_proj") op.kernels = linear_launches(tokens, m.q_dim() + 2 * m.kv_dim(), m.hidden, layer_format, hw);
    else if (op.name == "o_proj") op.kernels = linear_launches(tokens, m.hidden, m.q_dim(), layer_format, hw);
    else if (op.name == "gate_up_proj") op.kernels = linear_launches(tokens, 2 * m.intermediate, m.hidden, layer_format, hw);
    else if (op.name == "down_proj") op.kernels = linear_launches(tokens, m.hidden, m.intermediate, layer_format, hw);
    else if (op.name == "lm_head") op.kernels = linear_launches(rows, m.vocab, m.hidden, WeightFormat::bf16, hw);
    else if (op.name == "attention") {
      if (nd > 0) {
        AttentionShape s{nd, m.heads, m.kv_heads, m.head_dim, 1, decode_ctx - 1, true, std::nullopt,
                         batch.kv_block_size, 1};
        s.splits = plan_decode_splits(nd * m.kv_heads * ((m.group_size() + 31) / 32), decode_context_bucket(decode_ctx),
                                      hw.sm_count);
        const auto k = decode_attention_kernels(s, act, hw);
        op.kernels.insert(op.kernels.end(), k.begin(), k.end());
      }
      if (np > 0) {
        std::vector<AttentionShape> seqs;
        for (const auto& s : batch.sequences)
          if (s.new_tokens > 1)
            seqs.push_back(AttentionShape{s.count, m.heads, m.kv_heads, m.head_dim, s.new_tokens, s.past_tokens, true,
                                          std::nullopt, 0, 1});
        const auto k = varlen_prefill_kernels(seqs, act, hw);
        op.kernels.insert(op.kernels.end(), k.begin(), k.end());
      }
    } else {
      const double writes = op.bytes() > 0 ? [&] {
        double w = 0;
        for (const auto& t : op.traffic) w += t.write ? t.bytes : 0.0;
        return w / op.bytes();
      }() : 0.0;
      op.kernels = {streaming_kernel(op.name + "_kernel", op.bytes(), writes, op.flops, hw)};
      // Small launches: a block per row (norms) or per few thousand elements; the grid is what it is.
      op.kernels[0].ctas = std::max<int64_t>(1, std::min<int64_t>(op.kernels[0].ctas, op.name == "embedding" ? tokens : tokens * 4));
    }
    for (KernelLaunch& k : op.kernels) k.launch = launch;
    op.launches = int(op.kernels.size());
  }
  return ops;
}

}  // namespace inferlab
