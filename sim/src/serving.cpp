// The serving engine: event loop, schedulers and KV block accounting (the model is in serving.h).
#include "inferlab/sim/serving.h"

#include <algorithm>
#include <deque>
#include <limits>
#include <queue>
#include <tuple>

#include "inferlab/sim/error.h"
#include "inferlab/sim/memory.h"
#include "inferlab/sim/parallel.h"

namespace inferlab {
namespace {

constexpr double kGB = 1e9;
constexpr int64_t kUnlimited = std::numeric_limits<int64_t>::max();

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

struct Seq {
  int64_t req = 0;
  int64_t kv = 0;       // tokens whose K and V are stored
  int64_t target = 0;   // tokens to prefill before decoding: prompt + tokens emitted before (re)admission
  int64_t blocks = 0;   // KV blocks held
  int64_t planned = 0;  // new tokens in the pass being planned
  bool done = false;    // static: finished, held until its batch ends
  bool evicted = false; // preempted while the pass was planned
  bool prefilling() const { return kv < target; }
};

class Engine {
 public:
  Engine(const std::vector<Request>& trace, const ServingConfig& c, StepCostModel& cost)
      : trace_(trace), c_(c), cost_(cost), B_(block_tokens(c)), max_tokens_(c.max_batch_tokens) {
    if (max_tokens_ == 0) max_tokens_ = default_batch_tokens(c);
    blocks_total_ = int64_t(c.kv_capacity_bytes / (double(B_) * c.kv_bytes_per_token));
    if (blocks_total_ < 1)
      throw Error("the KV memory (" + std::to_string(c.kv_capacity_bytes / kGB) + " GB) holds no block of " + str(B_) +
                  " tokens" + (c.kv == KvScheme::contiguous ? " (contiguous reserves max_len tokens per request)" : ""));
    if (c.kv == KvScheme::paged) watermark_ = int64_t(c.admission_watermark * double(blocks_total_));
    emitted_.assign(trace.size(), 0);
    res_.cost_model = cost.describe();
    res_.block_tokens = B_;
    res_.blocks_total = blocks_total_;
    res_.kv_capacity = c.kv_capacity_bytes;
    res_.kv_bytes_per_token = c.kv_bytes_per_token;
    batch_.kv_block_size = c.kv == KvScheme::paged ? c.block_size : 0;
  }

  ServingResult run() {
    for (std::size_t i = 0; i < trace_.size(); ++i) {
      const Request& r = trace_[i];
      RequestResult rr;
      rr.id = int64_t(i);
      rr.arrival = r.arrival;
      rr.prompt = r.prompt;
      rr.output = r.output;
      res_.requests.push_back(rr);
      events_.push(Event{r.arrival, kArrival, int64_t(i)});
    }
    bool busy = false;
    while (!events_.empty()) {
      const Event e = events_.top();
      events_.pop();
      now_ = e.time;
      if (e.type == kStepEnd) {
        apply();
        busy = false;
      } else {
        arrive(e.id);
      }
      if (busy || (!events_.empty() && events_.top().time <= now_)) continue;
      if (plan()) {
        const double t = cost_.step_time(batch_);
        if (!(t > 0)) throw Error("step cost model '" + cost_.describe() + "' gave a non-positive step time");
        record(t);
        events_.push(Event{now_ + t, kStepEnd, res_.iteration_count++});
        busy = true;
      } else if (live_ > 0 || !waiting_.empty()) {
        throw Error("serving: the scheduler found nothing to run with " + str(live_) + " running and " +
                    str(int64_t(waiting_.size())) + " waiting requests");  // a bug, not an input error
      }
    }
    return std::move(res_);
  }

 private:
  int64_t blocks_for(int64_t tokens) const { return (tokens + B_ - 1) / B_; }

  // Makes room for `tokens` tokens in s, keeping `reserve` blocks free; false (nothing taken) when the
  // free blocks do not suffice.
  bool take(Seq& s, int64_t tokens, int64_t reserve = 0) {
    const int64_t need = blocks_for(tokens) - s.blocks;
    if (need <= 0) return true;
    if (need + reserve > blocks_total_ - blocks_used_) return false;
    s.blocks += need;
    blocks_used_ += need;
    res_.blocks_allocated += need;
    res_.peak_blocks = std::max(res_.peak_blocks, blocks_used_);
    return true;
  }
  void release(Seq& s) {
    blocks_used_ -= s.blocks;
    res_.blocks_freed += s.blocks;
    s.blocks = 0;
  }

  void arrive(int64_t id) {
    const Request& r = trace_[std::size_t(id)];
    RequestResult& rr = res_.requests[std::size_t(id)];
    const int64_t peak = r.prompt + r.output - 1;
    if (r.prompt + r.output > c_.max_len) {
      rr.rejected = true;
      rr.reason = "prompt + output = " + str(r.prompt + r.output) + " tokens exceed max_len " + str(c_.max_len);
    } else if (blocks_for(peak) > blocks_total_) {
      rr.rejected = true;
      rr.reason = "needs " + str(peak) + " tokens of KV cache (" + str(blocks_for(peak)) + " blocks of " + str(B_) +
                  "), more than the whole KV memory (" + str(blocks_total_) + " blocks, " +
                  std::to_string(c_.kv_capacity_bytes / kGB) + " GB)";
    } else {
      waiting_.push_back(id);
    }
  }

  // The last sequence that still runs (not evicted; in a static batch not finished): the victim.
  std::size_t last_live() const {
    for (std::size_t i = running_.size(); i-- > 0;)
      if (!running_[i].evicted && !running_[i].done) return i;
    return running_.size();
  }

  void preempt(std::size_t i) {
    Seq& s = running_[i];
    release(s);
    s.evicted = true;
    s.planned = 0;
    --live_;
    evicted_any_ = true;
    waiting_.push_front(s.req);
    ++res_.requests[std::size_t(s.req)].preemptions;
    res_.preemption_log.emplace_back(now_, s.req);
  }

  // Room for the next token of decoding sequence i, preempting from the back; false if i itself went.
  bool grow(std::size_t i) {
    while (!take(running_[i], running_[i].kv + 1)) {
      const std::size_t v = last_live();
      preempt(v);
      if (v == i) return false;
    }
    return true;
  }

  // Admits the head of the queue when the sequence cap, the token budget and the KV memory allow, and
  // plans its prefill (a chunk of it unless `whole`). Its prompt's blocks are taken now.
  bool admit(int64_t& budget, bool whole) {
    if (waiting_.empty() || live_ >= c_.max_batch || budget <= 0) return false;
    const int64_t id = waiting_.front();
    Seq s;
    s.req = id;
    s.target = trace_[std::size_t(id)].prompt + emitted_[std::size_t(id)];
    if (whole && s.target > budget) return false;
    if (!take(s, s.target, live_ > 0 ? watermark_ : 0)) return false;
    waiting_.pop_front();
    s.planned = std::min(s.target, budget);
    budget -= s.planned;
    running_.push_back(s);
    ++live_;
    admitted_ = true;
    RequestResult& rr = res_.requests[std::size_t(id)];
    if (rr.scheduled < 0) rr.scheduled = now_;
    return true;
  }

  void plan_chunks(int64_t& budget) {
    for (auto& s : running_)
      if (!s.evicted && s.prefilling() && s.planned == 0 && budget > 0) {
        s.planned = std::min(s.target - s.kv, budget);
        budget -= s.planned;
      }
  }

  void plan_decodes(int64_t& budget) {
    for (std::size_t i = 0; i < running_.size() && budget > 0; ++i) {
      const Seq& s = running_[i];
      if (s.evicted || s.done || s.prefilling() || s.planned > 0) continue;
      if (!grow(i)) continue;
      running_[i].planned = 1;
      --budget;
    }
  }

  void end_static_batch() {
    for (auto& s : running_) {
      if (s.evicted) continue;
      release(s);
      finish(s.req);
    }
    running_.clear();
    live_ = 0;
  }

  void plan_static() {
    if (live_ > 0) {  // the batch decodes on; finished rows keep their slot and KV until it ends
      for (std::size_t i = 0; i < running_.size(); ++i)
        if (!running_[i].evicted && !running_[i].done && grow(i)) running_[i].planned = 1;
      for (const auto& s : running_)
        if (!s.evicted && s.planned > 0) return;
      end_static_batch();  // every unfinished row was preempted: the batch is over
    }
    int64_t budget = kUnlimited;
    while (admit(budget, true)) {
    }
  }

  bool plan() {
    batch_.sequences.clear();
    admitted_ = evicted_any_ = false;
    int64_t budget = max_tokens_, unlimited = kUnlimited;
    const bool prefill_first = c_.priority == Priority::prefill_first;
    switch (c_.scheduler) {
      case Scheduler::static_batching:
        plan_static();
        break;
      case Scheduler::continuous:
        if (prefill_first) {
          while (admit(budget, true)) {
          }
          if (!admitted_) plan_decodes(unlimited);
        } else {
          plan_decodes(unlimited);
          while (admit(budget, true)) {
          }
        }
        break;
      case Scheduler::chunked:
        if (prefill_first) {
          plan_chunks(budget);
          while (admit(budget, false)) {
          }
          plan_decodes(budget);
        } else {
          plan_decodes(budget);
          plan_chunks(budget);
          while (admit(budget, false)) {
          }
        }
        break;
    }
    if (evicted_any_)
      running_.erase(std::remove_if(running_.begin(), running_.end(), [](const Seq& s) { return s.evicted; }),
                     running_.end());
    for (const auto& s : running_)
        if (s.planned > 0)
        batch_.sequences.push_back(SequenceWork{s.planned, s.kv, 1, !s.prefilling() || s.kv + s.planned == s.target ? 1 : 0});
    return !batch_.sequences.empty();
  }

  void record(double t) {
    Iteration it;
    it.start = now_;
    it.end = now_ + t;
    int64_t used = 0;
    for (const auto& s : running_) {
      used += s.kv + s.planned;
      if (s.planned == 0) continue;
      ++it.sequences;
      if (s.prefilling()) {
        it.prefill_tokens += s.planned;
        ++it.prefill_sequences;
      } else {
        it.decode_tokens += s.planned;
      }
    }
    it.running = live_;
    it.waiting = int64_t(waiting_.size());
    it.kv_blocks = blocks_used_;
    it.kv_reserved = double(blocks_used_ * B_) * c_.kv_bytes_per_token;
    it.kv_used = double(used) * c_.kv_bytes_per_token;
    res_.reserved_integral += it.kv_reserved * t;
    res_.used_integral += it.kv_used * t;
    res_.busy_s += t;
    if (c_.record_iterations) res_.iterations.push_back(it);
  }

  void finish(int64_t id) {
    RequestResult& rr = res_.requests[std::size_t(id)];
    rr.finish = now_;
    ++rr.completions;
  }

  // The pass that ends now: stored tokens, sampled tokens, finished requests.
  void apply() {
    bool removed = false;
    for (auto& s : running_) {
      if (s.planned == 0) continue;
      const bool was_prefill = s.prefilling();
      s.kv += s.planned;
      s.planned = 0;
      if (was_prefill && s.kv < s.target) continue;  // an earlier chunk: nothing sampled
      const std::size_t id = std::size_t(s.req);
      RequestResult& rr = res_.requests[id];
      if (rr.first_token < 0) rr.first_token = now_;
      rr.last_token = now_;
      if (++emitted_[id] < trace_[id].output) continue;
      if (c_.scheduler == Scheduler::static_batching) {
        s.done = true;
      } else {
        release(s);
        finish(s.req);
        s.evicted = removed = true;  // leaves the batch
        --live_;
      }
    }
    if (removed)
      running_.erase(std::remove_if(running_.begin(), running_.end(), [](const Seq& s) { return s.evicted; }),
                     running_.end());
    if (c_.scheduler == Scheduler::static_batching && live_ > 0 &&
        std::all_of(running_.begin(), running_.end(), [](const Seq& s) { return s.done; }))
      end_static_batch();
  }

  const std::vector<Request>& trace_;
  const ServingConfig& c_;
  StepCostModel& cost_;
  const int64_t B_;
  int64_t max_tokens_;
  int64_t blocks_total_ = 0, blocks_used_ = 0, watermark_ = 0;
  std::priority_queue<Event, std::vector<Event>, Later> events_;
  std::deque<int64_t> waiting_;
  std::vector<Seq> running_;  // in admission order
  int64_t live_ = 0;          // running_ entries not evicted
  std::vector<int64_t> emitted_;
  Batch batch_;
  double now_ = 0;
  bool admitted_ = false, evicted_any_ = false;
  ServingResult res_;
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
  if (c.scheduler == Scheduler::continuous && tokens < c.max_len)
    throw Error("continuous batching prefills whole prompts: max_batch_tokens (" + str(tokens) +
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
std::string priority_name(Priority p) { return p == Priority::prefill_first ? "prefill-first" : "decode-first"; }
Priority parse_priority(const std::string& s) {
  if (s == "prefill-first" || s == "prefill_first") return Priority::prefill_first;
  if (s == "decode-first" || s == "decode_first") return Priority::decode_first;
  throw Error("unknown priority '" + s + "' (known: prefill-first, decode-first)");
}
std::string kv_scheme_name(KvScheme k) { return k == KvScheme::paged ? "paged" : "contiguous"; }
KvScheme parse_kv_scheme(const std::string& s) {
  if (s == "paged") return KvScheme::paged;
  if (s == "contiguous") return KvScheme::contiguous;
  throw Error("unknown KV allocator '" + s + "' (known: contiguous, paged)");
}

int64_t default_batch_tokens(const ServingConfig& c) {
  constexpr int64_t kVllmBudget = 2048;  // vLLM's max_num_batched_tokens default with chunked prefill
  return c.scheduler == Scheduler::chunked ? kVllmBudget : std::max(c.max_len, kVllmBudget);
}
int64_t block_tokens(const ServingConfig& c) { return c.kv == KvScheme::paged ? c.block_size : c.max_len; }

double serving_kv_capacity(const ModelConfig& m, const Hardware& hw, const Precision& p, int64_t tp, double utilization,
                           int64_t max_batch_tokens) {
  if (!(utilization > 0 && utilization <= 1))
    throw Error("GPU memory utilization must be in (0, 1], got " + std::to_string(utilization));
  const Parallelism par{tp, 1, 1};
  const double weights = stage_params(m, par, 0) * dtype_bytes(p.weight);
  const OpOptions o{p, AttentionVariant::flash, true};
  const double act = step_activation_bytes(stage_model(m, par, 0), prefill_step(1, max_batch_tokens), o);
  const double kv = utilization * hw.memory_bytes - weights - act;
  if (!(kv > 0))
    throw Error(m.name + " on " + hw.id + (tp > 1 ? " x" + str(tp) : "") + ": weights (" +
                std::to_string(weights / kGB) + " GB per device) and activations (" + std::to_string(act / kGB) +
                " GB) leave no KV memory in " + std::to_string(utilization * hw.memory_bytes / kGB) + " GB");
  return kv;
}

ServingResult simulate_serving(const std::vector<Request>& trace, const ServingConfig& config, StepCostModel& cost) {
  check_config(config);
  check_trace(trace);
  return Engine(trace, config, cost).run();
}

}  // namespace inferlab
