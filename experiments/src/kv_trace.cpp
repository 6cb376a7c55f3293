// The kv_trace scenario: a request trace served by the one scheduler (sim/scheduler.h) as a serving
// configuration: continuous batching, decode first (every running request decodes a token per pass,
// arrivals prefill and join the same pass), `slots` requests at once, one time unit per pass (a decode
// step), and enough KV memory that memory never decides; the KV cache held three ways:
//   contiguous   each admitted request reserves max_len tokens (what a server without paging does)
//   paged-B      blocks of B tokens taken as the request grows (B = 8, 16, 32)
// Every scheme serves the same passes. "Measured" is the block manager (sim/kv_blocks.h, the engine's
// too) counting the blocks it handed out; "predicted" is sim/memory.h's formula on the same token
// counts; they must agree exactly.
#include <algorithm>
#include <numeric>

#include "inferlab/experiments/scenarios.h"
#include "inferlab/sim/error.h"
#include "inferlab/sim/kv_blocks.h"
#include "inferlab/sim/memory.h"
#include "inferlab/sim/scheduler.h"
#include "inferlab/sim/serving.h"
#include "inferlab/sim/trace.h"

namespace inferlab {
namespace {

// Each pass is one time unit; after it, the tokens each running request holds are checked against
// sim/memory and sampled into rows.
class KvTraceRunner : public StepRunner {
 public:
  KvTraceRunner(const ModelConfig& m, DType kv, const std::vector<Request>& trace, const PagedKvManager& blocks,
                std::string scheme, int64_t max_len, int64_t every, std::vector<Row>& rows)
      : m_(m), kv_(kv), trace_(trace), blocks_(blocks), scheme_(std::move(scheme)), max_len_(max_len),
        every_(every), per_token_(kv_bytes_per_token(m, kv)), rows_(rows) {}

  double now() override { return t_; }
  void wait_until(double t) override {
    while (t_ < t) sample({}), ++t_;  // idle steps hold nothing
  }
  double run(const std::vector<ScheduledSequence>& step, const Batch&, double start) override {
    t_ = start;
    sample(step);
    return ++t_;
  }
  std::string describe() const override { return "one time unit per pass"; }
  double used_sum = 0, reserved_sum = 0, steps = 0;

 private:
  void sample(const std::vector<ScheduledSequence>& step) {
    const auto arrived = int64_t(std::count_if(trace_.begin(), trace_.end(), [&](const Request& r) { return r.arrival <= t_; }));
    const bool contiguous = scheme_ == "contiguous";
    std::vector<int64_t> tokens;
    double future = 0, never = 0;
    for (const auto& s : step) {
      const Request& r = trace_[std::size_t(s.request)];
      if (!admitted_[std::size_t(s.request)]) admitted_[std::size_t(s.request)] = true, ++admitted_count_;
      tokens.push_back(s.past + s.new_tokens);
      future += double(r.prompt + r.output - 1 - tokens.back());
      never += double(max_len_ - (r.prompt + r.output - 1));
    }
    const double used = std::accumulate(tokens.begin(), tokens.end(), 0.0) * per_token_;
    const double measured = double(blocks_.used_blocks() * blocks_.block_size()) * per_token_;
    const KvReservation pred = contiguous ? contiguous_kv(m_, kv_, tokens, max_len_)
                                          : paged_kv(m_, kv_, tokens, blocks_.block_size());
    const int64_t n = int64_t(steps);
    if (pred.reserved != measured)
      throw Error("kv_trace: the block manager holds " + num(measured) + " bytes where sim/memory predicts " +
                  num(pred.reserved) + " (" + scheme_ + ", step " + std::to_string(n) + ")");
    used_sum += used;
    reserved_sum += measured;
    ++steps;
    if (n % every_ != 0) return;
    const int64_t active = int64_t(step.size());
    rows_.push_back(Row{{"step", num(n)},
                        {"scheme", scheme_},
                        {"block_size", num(contiguous ? max_len_ : blocks_.block_size())},
                        {"active", num(active)},
                        {"waiting", num(arrived - admitted_count_)},
                        {"used_bytes", num(used)},
                        {"reserved_bytes", num(measured)},
                        {"predicted_reserved_bytes", num(pred.reserved)},
                        {"reserved_for_future_bytes", num(contiguous ? future * per_token_ : 0.0)},
                        {"internal_fragmentation_bytes", num(contiguous ? never * per_token_ : measured - used)},
                        {"external_fragmentation_bytes", "0"},
                        {"utilization", num(measured > 0 ? used / measured : 1.0)}});
  }
  const ModelConfig& m_;
  DType kv_;
  const std::vector<Request>& trace_;
  const PagedKvManager& blocks_;
  std::string scheme_;
  int64_t max_len_, every_;
  double per_token_;
  std::vector<Row>& rows_;
  double t_ = 0;
  std::vector<bool> admitted_ = std::vector<bool>(trace_.size(), false);
  int64_t admitted_count_ = 0;
};

}  // namespace

std::vector<Row> kv_trace_rows(const Params& p) {
  const ModelConfig model = with_kv_heads(load_model(p.at("model")), p.at("kv_heads"));
  const DType kv = p.at("dtype") == "model" ? model.dtype : parse_dtype(p.at("dtype"));
  TraceSpec ts;
  ts.seed = uint64_t(param_int(p, "seed", 0));
  ts.requests = param_int(p, "requests");
  ts.rate = param_double(p, "rate");
  const int64_t max_len = param_int(p, "max_len", 2), slots = param_int(p, "slots"), every = param_int(p, "every");
  check_context(p, model, max_len, "max_len");
  ts.max_tokens = max_len;
  const std::vector<Request> trace = generate_trace(ts);

  ServingConfig c;
  c.scheduler = Scheduler::continuous;
  c.priority = Priority::decode_first;
  c.max_len = max_len;
  c.max_batch = slots;
  c.max_batch_tokens = slots * max_len;  // every admitted prompt fits the pass
  c.admission_watermark = 0;
  c.kv_bytes_per_token = kv_bytes_per_token(model, kv);
  c.kv_capacity_bytes = double(slots * max_len) * c.kv_bytes_per_token;  // memory never decides
  c.record_iterations = false;

  std::vector<Row> rows;
  std::vector<std::pair<std::string, std::pair<double, double>>> means;
  for (int64_t b : {int64_t(0), int64_t(8), int64_t(16), int64_t(32)}) {
    c.kv = b == 0 ? KvLayout::contiguous : KvLayout::paged;
    c.block_size = b == 0 ? 16 : b;
    const int64_t B = block_tokens(c);
    PagedKvManager blocks(serving_kv_blocks(c), B, kv_blocks_for(max_len, B));
    const std::string scheme = b == 0 ? "contiguous" : "paged-" + std::to_string(b);
    KvTraceRunner runner(model, kv, trace, blocks, scheme, max_len, every, rows);
    const ServingResult r = serve_iterations(trace, c, blocks, runner);
    for (const auto& q : r.requests)
      if (q.rejected) throw Error("kv_trace: request " + std::to_string(q.id) + " rejected: " + q.reason);
    if (r.blocks_allocated != r.blocks_freed || blocks.used_blocks() != 0)
      throw Error("kv_trace: " + scheme + " allocated " + std::to_string(r.blocks_allocated) + " blocks and freed " +
                  std::to_string(r.blocks_freed));
    means.push_back({scheme, {runner.used_sum / runner.steps, runner.reserved_sum / runner.steps}});
  }
  // Time averages over every step: the share of reserved KV memory that holds tokens.
  for (const auto& [scheme, m] : means)
    rows.push_back(Row{{"step", "mean"},
                       {"scheme", scheme},
                       {"block_size", scheme == "contiguous" ? num(max_len) : scheme.substr(6)},
                       {"active", ""},
                       {"waiting", ""},
                       {"used_bytes", num(m.first)},
                       {"reserved_bytes", num(m.second)},
                       {"predicted_reserved_bytes", ""},
                       {"reserved_for_future_bytes", ""},
                       {"internal_fragmentation_bytes", ""},
                       {"external_fragmentation_bytes", "0"},
                       {"utilization", num(m.first / m.second)}});
  return rows;
}

}  // namespace inferlab
