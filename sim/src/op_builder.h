#pragma once
// Internal to sim/: the builder the cost functions (ops.cpp, linear.cpp) list an operator's tensor
// traffic and FLOPs with, and the size check they share.
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "inferlab/sim/error.h"
#include "inferlab/sim/ops.h"

namespace inferlab::detail {

// FLOPs per element of the non-matmul operators (FP32 vector units). Rough by nature; they only
// matter when such an op is compute-bound, which none is on any GPU we model.
inline constexpr double kNormFlopsPerElement = 4;  // square, sum, scale by rsqrt, scale by weight
inline constexpr double kRopeFlopsPerElement = 3;  // (x cos - y sin, x sin + y cos): 6 per pair
inline constexpr double kLseBytes = 4;             // the log-sum-exp is kept in fp32

struct OpBuilder {
  Op op;
  OpBuilder(std::string name, OpClass c, int64_t count) {
    op.name = std::move(name);
    op.op_class = c;
    op.count = count;
  }
  OpBuilder& read(std::string t, TensorRole r, double bytes) {
    op.traffic.push_back({std::move(t), r, false, bytes});
    return *this;
  }
  OpBuilder& write(std::string t, TensorRole r, double bytes) {
    op.traffic.push_back({std::move(t), r, true, bytes});
    return *this;
  }
  OpBuilder& matmul(double flops, DType t) {
    op.flops = flops;
    op.tensor_core = true;
    op.compute_dtype = t;
    return *this;
  }
  OpBuilder& vector(double flops) {
    op.flops = flops;
    op.tensor_core = false;
    op.compute_dtype = DType::fp32;
    return *this;
  }
  OpBuilder& scope(OpScope s) {
    op.scope = s;
    return *this;
  }
  OpBuilder& variant(std::string v) {
    op.variant = std::move(v);
    return *this;
  }
};

// An RMSNorm over rows x width activations (act bytes each) with a weight of width (wb bytes each).
inline Op norm_op(std::string name, double rows, double width, int64_t count, double act, double wb) {
  return OpBuilder(std::move(name), OpClass::elementwise, count)
      .read("x", TensorRole::activation, rows * width * act)
      .read("w_norm", TensorRole::weight, width * wb)
      .write("x_norm", TensorRole::activation, rows * width * act)
      .vector(kNormFlopsPerElement * rows * width)
      .op;
}

// A linear layer's traffic and FLOPs (sim/linear.h, the one place they are counted): `rows`
// tokens x k inputs read in `act` (fp8 for the fp8 format, with its scale), `copies` weights of
// n x k in format f (tensor `weight`, its scales and indices as `weight`_scales... entries), rows x n
// outputs written in `act`; the matmul runs in the input type.
void add_linear(OpBuilder& ob, WeightFormat f, DType act, double rows, int64_t n, int64_t k, double copies,
                const std::string& weight);

// The attention of a batch, summed over its sequences before any byte or FLOP is counted, so that a
// uniform batch (attention_cost) and a heterogeneous one (batch_attention_ops) share one formula.
struct AttentionWork {
  double queries = 0;        // sum of count x new tokens
  double new_keys = 0;       // K/V rows read from the activations (the new tokens' own)
  double cached_keys = 0;    // K/V rows read from the cache (keys read minus the new ones)
  double pairs = 0;          // (query, key) pairs computed: flash FLOPs
  double scored = 0;         // query x key rectangle: naive scores and FLOPs
  double table_entries = 0;  // block-table entries read (paged cache)
  double partial_rows = 0;   // query rows x split pieces (split-KV partial outputs)
};

// The head shapes attention runs on: `heads` query heads of qk_dim for scores and v_dim for values,
// against kv_heads K/V heads. shared_kv: V is the first v_dim values of each cached K row (MLA's
// latent), read once.
struct AttentionGeometry {
  int64_t heads = 1, kv_heads = 1, qk_dim = 128, v_dim = 128;
  bool shared_kv = false;
};

// `count` sequences of `new_tokens` queries after `past` cached tokens.
void add_sequences(AttentionWork& w, int64_t count, int64_t new_tokens, int64_t past, AttentionVariant variant,
                   bool causal, std::optional<int64_t> window, int64_t block_size, int64_t splits);
// The attention op (count 1) of the summed work.
Op attention_from_work(const AttentionWork& w, const AttentionGeometry& g, AttentionVariant variant, bool split,
                       DType act_dtype, DType kv_dtype);

// Multi-head latent attention (sim/src/mla.cpp): the projections from the normed residual stream to
// the cached latent and the queries (q_a_proj, q_a_norm, q_b_proj or q_proj; kv_a_proj, kv_a_norm;
// rope; kv_cache_write), and the attention op (count = layers) of a batch.
std::vector<Op> mla_projection_ops(const ModelConfig& m, const Batch& batch, const OpOptions& o,
                                   const std::function<Op(const char*, int64_t, int64_t, const char*)>& layer_gemm);
Op mla_attention_op(const ModelConfig& m, const Batch& batch, const OpOptions& o);

inline void check_positive(int64_t v, const char* what) {
  if (v <= 0) throw Error(std::string(what) + " must be positive, got " + std::to_string(v));
}

}  // namespace inferlab::detail
