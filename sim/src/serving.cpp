// The serving engine: event loop, schedulers and KV block accounting (the model is in serving.h).
#include "inferlab/sim/serving.h"

#include <algorithm>
#include <limits>
#include <queue>
#include <tuple>

#include "inferlab/sim/error.h"
#include "inferlab/sim/memory.h"
#include "inferlab/sim/parallel.h"
#include "inferlab/sim/scheduler.h"

namespace inferlab {
namespace {

constexpr double kGB = 1e9;

std::string str(int64_t v) { return std::to_string(v); }

enum EventType : int { kStepEnd = 0, kArrival = 1 };  // the order of events at equal times
struct Event {
  double time;
  int type;
  int64_t id;  // request id (arrival) or iteration number (step end)
};
struct Later {
  bool operator()(const Event& a, const Event& b) const {
    return std::tie(a.time, a.type, a.id) > std::tie(b.time, b.type, b.id);
  }
};

// The discrete-event driver: the scheduler's passes take what the cost model says.
class EventLoop {
 public:
  EventLoop(const std::vector<Request>& trace, const ServingConfig& c, StepCostModel& cost, PagedKvManager& kv)
      : trace_(trace), cost_(cost), sched_(trace, c, kv, cost.describe()) {}

  ServingResult run() {
    for (std::size_t i = 0; i < trace_.size(); ++i) events_.push(Event{trace_[i].arrival, kArrival, int64_t(i)});
    bool busy = false;
    double start = 0;
    int64_t iteration = 0;
    while (!events_.empty()) {
      const Event e = events_.top();
      events_.pop();
      const double now = e.time;
      if (e.type == kStepEnd) {
        sched_.complete(start, now);
        busy = false;
      } else {
        sched_.arrive(e.id, now);
      }
      if (busy || (!events_.empty() && events_.top().time <= now)) continue;
      if (sched_.plan(now)) {
        const double t = cost_.step_time(sched_.batch());
        if (!(t > 0)) throw Error("step cost model '" + cost_.describe() + "' gave a non-positive step time");
        start = now;
        events_.push(Event{now + t, kStepEnd, iteration++});
        busy = true;
      } else if (!sched_.idle()) {
        throw Error("serving: the scheduler found nothing to run with " + str(sched_.running()) + " running and " +
                    str(sched_.waiting()) + " waiting requests");  // a bug, not an input error
      }
    }
    return sched_.take_result();
  }

 private:
  const std::vector<Request>& trace_;
  StepCostModel& cost_;
  BatchScheduler sched_;
  std::priority_queue<Event, std::vector<Event>, Later> events_;
};

void check_config(const ServingConfig& c) {
  auto positive = [](int64_t v, const char* what) {
    if (v < 1) throw Error(std::string(what) + " must be at least 1, got " + str(v));
  };
  positive(c.block_size, "block size");
  positive(c.max_batch, "max_batch");
  if (c.max_len < 2) throw Error("max_len must be at least 2 (a prompt token and an output token), got " + str(c.max_len));
  if (c.max_batch_tokens < 0) throw Error("max_batch_tokens must not be negative");
  if (!(c.admission_watermark >= 0 && c.admission_watermark < 1))
    throw Error("the admission watermark must be in [0, 1), got " + std::to_string(c.admission_watermark));
  const int64_t tokens = c.max_batch_tokens ? c.max_batch_tokens : default_batch_tokens(c);
  if (c.scheduler != Scheduler::chunked && tokens < c.max_len)
    throw Error(scheduler_name(c.scheduler) + " batching prefills whole prompts: max_batch_tokens (" + str(tokens) +
                ") must be at least max_len (" + str(c.max_len) + "); use the chunked scheduler for smaller passes");
  if (!(c.kv_capacity_bytes > 0) || !(c.kv_bytes_per_token > 0))
    throw Error("the KV memory and the KV bytes per token must be positive");
}

void check_trace(const std::vector<Request>& trace) {
  for (std::size_t i = 0; i < trace.size(); ++i) {
    const Request& r = trace[i];
    const std::string who = "request " + str(int64_t(i));
    if (r.prompt < 1 || r.output < 1) throw Error(who + ": prompt and output lengths must be positive");
    if (!(r.arrival >= 0)) throw Error(who + ": arrival time must not be negative");
    if (i > 0 && r.arrival < trace[i - 1].arrival) throw Error(who + ": arrives before the request ahead of it");
  }
}

}  // namespace

std::string scheduler_name(Scheduler s) {
  switch (s) {
    case Scheduler::static_batching: return "static";
    case Scheduler::continuous: return "continuous";
    case Scheduler::chunked: return "chunked";
  }
  return "?";
}
Scheduler parse_scheduler(const std::string& s) {
  if (s == "static") return Scheduler::static_batching;
  if (s == "continuous") return Scheduler::continuous;
  if (s == "chunked" || s == "chunked-prefill") return Scheduler::chunked;
  throw Error("unknown scheduler '" + s + "' (known: static, continuous, chunked)");
}
std::string admission_name(Admission a) { return a == Admission::reserve ? "reserve" : "optimistic"; }
Admission parse_admission(const std::string& s) {
  if (s == "optimistic") return Admission::optimistic;
  if (s == "reserve") return Admission::reserve;
  throw Error("unknown admission '" + s + "' (known: optimistic, reserve)");
}
std::string priority_name(Priority p) { return p == Priority::prefill_first ? "prefill-first" : "decode-first"; }
Priority parse_priority(const std::string& s) {
  if (s == "prefill-first" || s == "prefill_first") return Priority::prefill_first;
  if (s == "decode-first" || s == "decode_first") return Priority::decode_first;
  throw Error("unknown priority '" + s + "' (known: prefill-first, decode-first)");
}
int64_t default_batch_tokens(const ServingConfig& c) {
  constexpr int64_t kVllmBudget = 2048;  // vLLM's max_num_batched_tokens default with chunked prefill
  return c.scheduler == Scheduler::chunked ? kVllmBudget : std::max(c.max_len, kVllmBudget);
}
int64_t block_tokens(const ServingConfig& c) { return c.kv == KvLayout::paged ? c.block_size : c.max_len; }

double serving_kv_capacity(const ModelConfig& m, const Hardware& hw, const Precision& p, int64_t tp, double utilization,
                           int64_t max_batch_tokens) {
  if (!(utilization > 0 && utilization <= 1))
    throw Error("GPU memory utilization must be in (0, 1], got " + std::to_string(utilization));
  const Parallelism par{tp, 1, 1};
  const double weights = stage_params(m, par, 0) * dtype_bytes(p.weight);
  const OpOptions o{p, AttentionVariant::flash, true, std::nullopt};
  const double act = step_activation_bytes(stage_model(m, par, 0), prefill_step(1, max_batch_tokens), o);
  const double kv = utilization * hw.memory_bytes - weights - act;
  if (!(kv > 0))
    throw Error(m.name + " on " + hw.id + (tp > 1 ? " x" + str(tp) : "") + ": weights (" +
                std::to_string(weights / kGB) + " GB per device) and activations (" + std::to_string(act / kGB) +
                " GB) leave no KV memory in " + std::to_string(utilization * hw.memory_bytes / kGB) + " GB");
  return kv;
}

int64_t serving_kv_blocks(const ServingConfig& c) {
  const int64_t B = block_tokens(c);
  const double blocks = std::floor(c.kv_capacity_bytes / (double(B) * c.kv_bytes_per_token));
  if (blocks < 1)
    throw Error("the KV memory (" + std::to_string(c.kv_capacity_bytes / kGB) + " GB) holds no block of " + str(B) +
                " tokens" + (c.kv == KvLayout::contiguous ? " (contiguous reserves max_len tokens per request)" : ""));
  return int64_t(std::min(blocks, double(INT32_MAX)));
}

void check_serving(const std::vector<Request>& trace, const ServingConfig& config) {
  check_config(config);
  check_trace(trace);
}

ServingResult simulate_serving(const std::vector<Request>& trace, const ServingConfig& config, StepCostModel& cost) {
  check_serving(trace, config);
  const int64_t B = block_tokens(config);
  PagedKvManager kv(serving_kv_blocks(config), B, kv_blocks_for(config.max_len, B));
  return EventLoop(trace, config, cost, kv).run();
}

ServingResult simulate_serving(const std::vector<Request>& trace, const ServingConfig& config, StepCostModel& cost,
                               PagedKvManager& kv) {
  check_serving(trace, config);
  return EventLoop(trace, config, cost, kv).run();
}

ServingResult serve_iterations(const std::vector<Request>& trace, const ServingConfig& config, PagedKvManager& kv,
                               StepRunner& runner) {
  check_serving(trace, config);
  BatchScheduler sched(trace, config, kv, runner.describe());
  std::size_t next = 0;
  while (next < trace.size() || !sched.idle()) {
    const double now = runner.now();
    for (; next < trace.size() && trace[next].arrival <= now; ++next) sched.arrive(int64_t(next), trace[next].arrival);
    if (sched.plan(now)) {
      const double end = runner.run(sched.step(), sched.batch(), now);
      sched.complete(now, end);
    } else if (next < trace.size()) {
      runner.wait_until(trace[next].arrival);
    } else if (!sched.idle()) {
      throw Error("serving: the scheduler found nothing to run with " + str(sched.running()) + " running and " +
                  str(sched.waiting()) + " waiting requests");  // a bug, not an input error
    }
  }
  return sched.take_result();
}

}  // namespace inferlab
