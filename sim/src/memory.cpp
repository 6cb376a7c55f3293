#include "inferlab/sim/memory.h"

#include <algorithm>
#include <map>

#include "inferlab/sim/error.h"

namespace inferlab {

double weight_bytes(const ModelConfig& m, DType weight) { return m.total_params() * dtype_bytes(weight); }

double kv_bytes_per_token(const ModelConfig& m, DType kv) {
  return 2.0 * double(m.layers) * double(m.kv_heads) * double(m.head_dim) * dtype_bytes(kv);
}

int64_t kv_tokens_stored(const ModelConfig& m, int64_t tokens, bool rolling_window) {
  return (rolling_window && m.sliding_window) ? std::min(tokens, *m.sliding_window) : tokens;
}

double kv_cache_bytes(const ModelConfig& m, int64_t batch, int64_t tokens, DType kv, bool rolling_window) {
  return double(batch) * double(kv_tokens_stored(m, tokens, rolling_window)) * kv_bytes_per_token(m, kv);
}

double step_activation_bytes(const ModelConfig& m, const Step& s, const OpOptions& o) {
  double largest = 0;
  for (const Op& op : step_ops(m, s, o)) {
    std::map<std::string, double> live;  // distinct tensors of this op (a read and a write of S is one buffer)
    for (const auto& t : op.traffic)
      if (t.role == TensorRole::activation || t.role == TensorRole::scores)
        live[t.tensor] = std::max(live[t.tensor], t.bytes);
    double sum = 0;
    for (const auto& [_, b] : live) sum += b;
    largest = std::max(largest, sum);
  }
  const double residual_stream = double(s.tokens()) * double(m.hidden) * dtype_bytes(o.precision.act);
  return largest + residual_stream;
}

MemoryBreakdown memory_breakdown(const ModelConfig& m, int64_t batch, int64_t context, const MemoryOptions& o) {
  if (batch <= 0) throw Error("batch must be positive, got " + std::to_string(batch));
  if (context <= 0) throw Error("context must be positive, got " + std::to_string(context));
  if (o.prefill_chunk < 0) throw Error("prefill chunk must not be negative");
  MemoryBreakdown r;
  r.weights = weight_bytes(m, o.precision.weight);
  r.kv_tokens_per_sequence = kv_tokens_stored(m, context, o.rolling_window);
  r.kv_cache = kv_cache_bytes(m, batch, context, o.precision.kv, o.rolling_window);
  const OpOptions oo{o.precision, o.attention, true, std::nullopt};
  const int64_t chunk = o.prefill_chunk == 0 ? context : std::min(o.prefill_chunk, context);
  const Step prefill{Phase::prefill, 1, chunk, context - chunk};
  r.activations = std::max(step_activation_bytes(m, decode_step(batch, context), oo),
                           step_activation_bytes(m, prefill, oo));
  r.reserve = o.reserve_bytes;
  return r;
}

namespace {
// Largest x in [1, hi] with fits(x), assuming fits is monotone (true then false); 0 if fits(1) fails.
template <class F>
int64_t largest_fitting(int64_t hi, F fits) {
  if (!fits(1)) return 0;
  int64_t lo = 1;
  while (lo < hi) {
    const int64_t mid = lo + (hi - lo + 1) / 2;
    if (fits(mid))
      lo = mid;
    else
      hi = mid - 1;
  }
  return lo;
}
}  // namespace

int64_t max_batch(const ModelConfig& m, int64_t context, const MemoryOptions& o, double capacity) {
  return largest_fitting(int64_t(1) << 24,
                         [&](int64_t b) { return memory_breakdown(m, b, context, o).total() <= capacity; });
}

int64_t max_context(const ModelConfig& m, int64_t batch, const MemoryOptions& o, double capacity, int64_t limit) {
  return largest_fitting(limit, [&](int64_t c) { return memory_breakdown(m, batch, c, o).total() <= capacity; });
}

KvReservation contiguous_kv(const ModelConfig& m, DType kv, const std::vector<int64_t>& seq_tokens, int64_t max_len) {
  if (max_len <= 0) throw Error("maximum length must be positive, got " + std::to_string(max_len));
  KvReservation r;
  r.scheme = "contiguous";
  r.block_size = max_len;
  const double per_token = kv_bytes_per_token(m, kv);
  for (int64_t t : seq_tokens) {
    if (t < 0) throw Error("a sequence cannot hold a negative number of tokens");
    if (t > max_len)
      throw Error("a sequence of " + std::to_string(t) + " tokens exceeds the reserved maximum length " +
                  std::to_string(max_len));
    r.reserved += double(max_len) * per_token;
    r.used += double(t) * per_token;
  }
  return r;
}

KvReservation paged_kv(const ModelConfig& m, DType kv, const std::vector<int64_t>& seq_tokens, int64_t block_size) {
  if (block_size <= 0) throw Error("block size must be positive, got " + std::to_string(block_size));
  KvReservation r;
  r.scheme = "paged";
  r.block_size = block_size;
  const double per_token = kv_bytes_per_token(m, kv);
  for (int64_t t : seq_tokens) {
    if (t < 0) throw Error("a sequence cannot hold a negative number of tokens");
    const int64_t blocks = (t + block_size - 1) / block_size;
    r.blocks += blocks;
    r.reserved += double(blocks * block_size) * per_token;
    r.used += double(t) * per_token;
  }
  return r;
}

}  // namespace inferlab
