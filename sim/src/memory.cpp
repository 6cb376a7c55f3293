#include "inferlab/sim/memory.h"

#include <algorithm>
#include <map>

#include "inferlab/sim/error.h"
#include "inferlab/sim/kv_blocks.h"

namespace inferlab {

double weight_bytes(const ModelConfig& m, DType weight) { return m.total_params() * dtype_bytes(weight); }

namespace {

double bytes_per_layer_token(const ModelConfig& m, DType kv) {
  return double(m.kv_elements_per_token_per_layer()) * dtype_bytes(kv);
}

// The layers of one kind and the most tokens each keeps (0: all of them).
struct LayerGroup {
  int64_t layers;
  int64_t window;
};
std::vector<LayerGroup> layer_groups(const ModelConfig& m, bool rolling_window) {
  const int64_t windowed = rolling_window ? m.window_layer_count() : 0;
  std::vector<LayerGroup> g;
  if (m.layers - windowed > 0) g.push_back({m.layers - windowed, 0});
  if (windowed > 0) g.push_back({windowed, *m.sliding_window});
  return g;
}
int64_t held(const LayerGroup& g, int64_t tokens) { return g.window ? std::min(tokens, g.window) : tokens; }

}  // namespace

double kv_bytes_per_token(const ModelConfig& m, DType kv) { return double(m.layers) * bytes_per_layer_token(m, kv); }

int64_t kv_tokens_stored(const ModelConfig& m, int64_t tokens, bool rolling_window) {
  int64_t most = 0;
  for (const auto& g : layer_groups(m, rolling_window)) most = std::max(most, held(g, tokens));
  return most;
}

int64_t kv_layer_tokens(const ModelConfig& m, int64_t tokens, bool rolling_window) {
  int64_t sum = 0;
  for (const auto& g : layer_groups(m, rolling_window)) sum += g.layers * held(g, tokens);
  return sum;
}

double kv_cache_bytes(const ModelConfig& m, int64_t batch, int64_t tokens, DType kv, bool rolling_window) {
  return double(batch) * double(kv_layer_tokens(m, tokens, rolling_window)) * bytes_per_layer_token(m, kv);
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
  r.kv_layer_tokens = kv_layer_tokens(m, context, o.rolling_window);
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

KvReservation contiguous_kv(const ModelConfig& m, DType kv, int64_t count, int64_t tokens, int64_t max_len,
                            bool rolling_window) {
  if (max_len <= 0) throw Error("maximum length must be positive, got " + std::to_string(max_len));
  if (count < 0 || tokens < 0) throw Error("a sequence cannot hold a negative number of tokens");
  if (tokens > max_len)
    throw Error("a sequence of " + std::to_string(tokens) + " tokens exceeds the reserved maximum length " +
                std::to_string(max_len));
  KvReservation r;
  r.scheme = "contiguous";
  r.block_size = max_len;
  const double per = bytes_per_layer_token(m, kv), n = double(count);
  for (const auto& g : layer_groups(m, rolling_window)) {
    r.reserved += n * double(g.layers) * double(held(g, max_len)) * per;
    r.used += n * double(g.layers) * double(held(g, tokens)) * per;
  }
  return r;
}

KvReservation paged_kv(const ModelConfig& m, DType kv, int64_t count, int64_t tokens, int64_t block_size,
                       bool rolling_window) {
  if (block_size <= 0) throw Error("block size must be positive, got " + std::to_string(block_size));
  if (count < 0 || tokens < 0) throw Error("a sequence cannot hold a negative number of tokens");
  KvReservation r;
  r.scheme = "paged";
  r.block_size = block_size;
  const double per = bytes_per_layer_token(m, kv), n = double(count);
  for (const auto& g : layer_groups(m, rolling_window)) {
    const int64_t blocks = kv_blocks_for(held(g, tokens), block_size);  // the block manager's count
    r.blocks += count * blocks;
    r.reserved += n * double(g.layers) * double(blocks * block_size) * per;
    r.used += n * double(g.layers) * double(held(g, tokens)) * per;
  }
  return r;
}

namespace {
// The sum of one reservation per sequence.
template <class One>
KvReservation per_sequence(const std::vector<int64_t>& seq_tokens, One one) {
  KvReservation total = one(0);  // for the scheme's name and block size
  total.blocks = 0;
  total.reserved = total.used = 0;
  for (int64_t t : seq_tokens) {
    const KvReservation r = one(t);
    total.blocks += r.blocks;
    total.reserved += r.reserved;
    total.used += r.used;
  }
  return total;
}
}  // namespace

KvReservation contiguous_kv(const ModelConfig& m, DType kv, const std::vector<int64_t>& seq_tokens, int64_t max_len,
                            bool rolling_window) {
  return per_sequence(seq_tokens, [&](int64_t t) { return contiguous_kv(m, kv, 1, t, max_len, rolling_window); });
}

KvReservation paged_kv(const ModelConfig& m, DType kv, const std::vector<int64_t>& seq_tokens, int64_t block_size,
                       bool rolling_window) {
  return per_sequence(seq_tokens, [&](int64_t t) { return paged_kv(m, kv, 1, t, block_size, rolling_window); });
}

}  // namespace inferlab
