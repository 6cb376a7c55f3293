// The scheduler (scheduler.h): admission, KV blocks through the block manager, preemption, each pass.
#include "inferlab/sim/scheduler.h"

#include <algorithm>
#include <limits>

#include "inferlab/sim/error.h"

namespace inferlab {
namespace {

constexpr double kGB = 1e9;
constexpr int64_t kUnlimited = std::numeric_limits<int64_t>::max();

std::string str(int64_t v) { return std::to_string(v); }

}  // namespace

BatchScheduler::BatchScheduler(const std::vector<Request>& trace, const ServingConfig& c, PagedKvManager& kv,
                               std::string cost_model)
    : trace_(trace), c_(c), kv_(kv), max_tokens_(c.max_batch_tokens) {
  if (max_tokens_ == 0) max_tokens_ = default_batch_tokens(c);
  if (kv.used_blocks() != 0) throw Error("the scheduler needs an empty KV block manager");
  if (kv.max_blocks_per_seq() < kv_blocks_for(c.max_len, kv.block_size()))
    throw Error("a KV block-table row of " + str(kv.max_blocks_per_seq()) + " blocks of " + str(kv.block_size()) +
                " tokens cannot hold max_len " + str(c.max_len) + " tokens");
  blocks_total_ = kv.allocator().num_blocks();
  if (c.kv == KvLayout::paged && c.admission == Admission::optimistic)
    watermark_ = int64_t(c.admission_watermark * double(blocks_total_));
  for (int s = int(c.max_batch) - 1; s >= 0; --s) free_slots_.push_back(s);
  emitted_.assign(trace.size(), 0);
  lost_.assign(trace.size(), 0);
  res_.cost_model = std::move(cost_model);
  res_.block_tokens = kv.block_size();
  res_.blocks_total = blocks_total_;
  res_.kv_capacity = c.kv_capacity_bytes;
  res_.kv_bytes_per_token = c.kv_bytes_per_token;
  batch_.kv_block_size = c.kv == KvLayout::paged ? c.block_size : 0;
  for (std::size_t i = 0; i < trace.size(); ++i) {
    RequestResult rr;
    rr.id = int64_t(i);
    rr.arrival = trace[i].arrival;
    rr.prompt = trace[i].prompt;
    rr.output = trace[i].output;
    res_.requests.push_back(rr);
  }
}

int64_t BatchScheduler::reserve_tokens(const Seq& s) const {
  if (c_.kv == KvLayout::contiguous) return c_.max_len;
  const Request& r = trace_[std::size_t(s.req)];
  return c_.admission == Admission::reserve ? r.prompt + r.output - 1 : s.target;
}

// Makes room for `tokens` tokens in s, keeping `keep_free` blocks free; false (nothing taken) when the
// free blocks do not suffice.
bool BatchScheduler::take(Seq& s, int64_t tokens, int64_t keep_free) {
  const int64_t before = kv_.used_blocks();
  if (!kv_.reserve(s.slot, tokens, keep_free)) return false;
  res_.blocks_allocated += kv_.used_blocks() - before;
  res_.peak_blocks = std::max(res_.peak_blocks, kv_.used_blocks());
  return true;
}

void BatchScheduler::release(Seq& s) {
  res_.blocks_freed += int64_t(kv_.blocks(s.slot).size());
  kv_.release(s.slot);
  free_slots_.push_back(s.slot);
}

void BatchScheduler::arrive(int64_t id, double) {
  const Request& r = trace_[std::size_t(id)];
  RequestResult& rr = res_.requests[std::size_t(id)];
  const int64_t peak = c_.kv == KvLayout::contiguous ? c_.max_len : r.prompt + r.output - 1;
  const int64_t B = kv_.block_size();
  if (r.prompt + r.output > c_.max_len) {
    rr.rejected = true;
    rr.reason = "prompt + output = " + str(r.prompt + r.output) + " tokens exceed max_len " + str(c_.max_len);
  } else if (kv_blocks_for(peak, B) > blocks_total_) {
    rr.rejected = true;
    rr.reason = "needs " + str(peak) + " tokens of KV cache (" + str(kv_blocks_for(peak, B)) + " blocks of " + str(B) +
                "), more than the whole KV memory (" + str(blocks_total_) + " blocks, " +
                std::to_string(c_.kv_capacity_bytes / kGB) + " GB)";
  } else {
    waiting_.push_back(id);
  }
}

// The last sequence that still runs (not evicted; in a static batch not finished): the victim.
std::size_t BatchScheduler::last_live() const {
  for (std::size_t i = running_.size(); i-- > 0;)
    if (!running_[i].evicted && !running_[i].done) return i;
  return running_.size();
}

void BatchScheduler::preempt(std::size_t i, double now) {
  Seq& s = running_[i];
  res_.recompute_tokens += s.kv;  // stored, thrown away, prefilled again when readmitted
  lost_[std::size_t(s.req)] = std::max(lost_[std::size_t(s.req)], s.kv);
  release(s);
  s.evicted = true;
  s.planned = 0;
  --live_;
  evicted_any_ = true;
  waiting_.push_front(s.req);
  ++res_.requests[std::size_t(s.req)].preemptions;
  res_.preemption_log.emplace_back(now, s.req);
}

// Room for the next token of decoding sequence i, preempting from the back; false if i itself went.
bool BatchScheduler::grow(std::size_t i, double now) {
  while (!take(running_[i], running_[i].kv + 1, 0)) {
    const std::size_t v = last_live();
    preempt(v, now);
    if (v == i) return false;
  }
  return true;
}

// Admits the head of the queue when the sequence cap, the token budget and the KV memory allow, and
// plans its prefill (a chunk of it unless `whole`). Its admission reservation is taken now.
bool BatchScheduler::admit(int64_t& budget, bool whole, double now) {
  if (waiting_.empty() || live_ >= c_.max_batch || budget <= 0) return false;
  const int64_t id = waiting_.front();
  Seq s;
  s.req = id;
  s.target = trace_[std::size_t(id)].prompt + emitted_[std::size_t(id)];
  if (whole && s.target > budget) return false;
  s.slot = free_slots_.back();
  if (!take(s, reserve_tokens(s), live_ > 0 ? watermark_ : 0)) return false;
  free_slots_.pop_back();
  waiting_.pop_front();
  s.planned = std::min(s.target, budget);
  budget -= s.planned;
  running_.push_back(s);
  ++live_;
  admitted_ = true;
  RequestResult& rr = res_.requests[std::size_t(id)];
  if (rr.scheduled < 0) rr.scheduled = now;
  return true;
}

void BatchScheduler::plan_chunks(int64_t& budget) {
  for (auto& s : running_)
    if (!s.evicted && s.prefilling() && s.planned == 0 && budget > 0) {
      s.planned = std::min(s.target - s.kv, budget);
      budget -= s.planned;
    }
}

void BatchScheduler::plan_decodes(int64_t& budget, double now) {
  for (std::size_t i = 0; i < running_.size() && budget > 0; ++i) {
    const Seq& s = running_[i];
    if (s.evicted || s.done || s.prefilling() || s.planned > 0) continue;
    if (!grow(i, now)) continue;
    running_[i].planned = 1;
    --budget;
  }
}

void BatchScheduler::end_static_batch(double now) {
  for (auto& s : running_) {
    if (s.evicted) continue;
    release(s);
    finish(s.req, now);
  }
  running_.clear();
  live_ = 0;
}

void BatchScheduler::plan_static(double now) {
  if (live_ == 0) {  // a new batch: up to max_batch waiting requests, their KV reserved at once
    int64_t unlimited = kUnlimited;
    while (admit(unlimited, true, now)) {
    }
    for (auto& s : running_) s.planned = 0;
  }
  // Its prompts first, whole, in passes of at most max_batch_tokens tokens (at least one prompt a pass).
  int64_t budget = max_tokens_;
  bool prefill = false;
  for (auto& s : running_) {
    if (s.evicted || !s.prefilling()) continue;
    const int64_t n = s.target - s.kv;
    if (prefill && n > budget) break;
    s.planned = n;
    budget -= n;
    prefill = true;
  }
  if (prefill) return;
  // Then the batch decodes on; finished rows keep their slot and KV until it ends.
  for (std::size_t i = 0; i < running_.size(); ++i)
    if (!running_[i].evicted && !running_[i].done && grow(i, now)) running_[i].planned = 1;
  for (const auto& s : running_)
    if (!s.evicted && s.planned > 0) return;
  if (live_ > 0) {
    end_static_batch(now);  // every unfinished row was preempted: the batch is over
    plan_static(now);
  }
}

bool BatchScheduler::plan(double now) {
  batch_.sequences.clear();
  step_.clear();
  admitted_ = evicted_any_ = false;
  int64_t budget = max_tokens_, unlimited = kUnlimited;
  const bool prefill_first = c_.priority == Priority::prefill_first;
  switch (c_.scheduler) {
    case Scheduler::static_batching:
      plan_static(now);
      break;
    case Scheduler::continuous:
      if (prefill_first) {
        while (admit(budget, true, now)) {
        }
        if (!admitted_) plan_decodes(unlimited, now);
      } else {
        plan_decodes(unlimited, now);
        while (admit(budget, true, now)) {
        }
      }
      break;
    case Scheduler::chunked:
      if (prefill_first) {
        plan_chunks(budget);
        while (admit(budget, false, now)) {
        }
        plan_decodes(budget, now);
      } else {
        plan_decodes(budget, now);
        plan_chunks(budget);
        while (admit(budget, false, now)) {
        }
      }
      break;
  }
  if (evicted_any_)
    running_.erase(std::remove_if(running_.begin(), running_.end(), [](const Seq& s) { return s.evicted; }),
                   running_.end());
  Iteration& it = pending_;
  it = Iteration{};
  int64_t used = 0;
  for (const auto& s : running_) {
    used += s.kv + s.planned;
    if (s.planned == 0) continue;
    const bool sample = !s.prefilling() || s.kv + s.planned == s.target;
    // Tokens this pass stores again that a preemption threw away: [kv, kv + planned) within [0, lost).
    const int64_t again = s.prefilling() ? std::max<int64_t>(0, std::min(s.kv + s.planned, lost_[std::size_t(s.req)]) - s.kv) : 0;
    const bool recompute = again > 0;
    batch_.sequences.push_back(SequenceWork{s.planned, s.kv, 1, sample ? 1 : 0});
    step_.push_back(ScheduledSequence{s.req, s.slot, s.kv, s.planned, sample, recompute});
    ++it.sequences;
    if (s.prefilling()) {
      it.prefill_tokens += s.planned;
      ++it.prefill_sequences;
      it.recompute_tokens += again;
    } else {
      it.decode_tokens += s.planned;
    }
  }
  it.running = live_;
  it.waiting = int64_t(waiting_.size());
  it.kv_blocks = kv_.used_blocks();
  it.kv_reserved = double(it.kv_blocks * kv_.block_size()) * c_.kv_bytes_per_token;
  it.kv_used = double(used) * c_.kv_bytes_per_token;
  return !batch_.sequences.empty();
}

void BatchScheduler::record(double start, double end) {
  Iteration it = pending_;
  it.start = start;
  it.end = end;
  const double t = end - start;
  res_.reserved_integral += it.kv_reserved * t;
  res_.used_integral += it.kv_used * t;
  res_.busy_s += t;
  const int64_t tokens = it.prefill_tokens + it.decode_tokens;
  if (tokens > 0) res_.recompute_s += t * double(it.recompute_tokens) / double(tokens);
  ++res_.iteration_count;
  if (c_.record_iterations) res_.iterations.push_back(it);
}

void BatchScheduler::finish(int64_t id, double now) {
  RequestResult& rr = res_.requests[std::size_t(id)];
  rr.finish = now;
  ++rr.completions;
}

void BatchScheduler::complete(double start, double now) {
  if (!(now > start)) throw Error("serving: a pass must take a positive time (it ran from " + std::to_string(start) +
                                  " to " + std::to_string(now) + " s)");
  record(start, now);
  bool removed = false;
  for (auto& s : running_) {
    if (s.planned == 0) continue;
    const bool was_prefill = s.prefilling();
    s.kv += s.planned;
    s.planned = 0;
    if (was_prefill && s.kv < s.target) continue;  // an earlier chunk: nothing sampled
    const std::size_t id = std::size_t(s.req);
    RequestResult& rr = res_.requests[id];
    if (rr.first_token < 0) rr.first_token = now;
    rr.last_token = now;
    if (++emitted_[id] < trace_[id].output) continue;
    if (c_.scheduler == Scheduler::static_batching) {
      s.done = true;
    } else {
      release(s);
      finish(s.req, now);
      s.evicted = removed = true;  // leaves the batch
      --live_;
    }
  }
  if (removed)
    running_.erase(std::remove_if(running_.begin(), running_.end(), [](const Seq& s) { return s.evicted; }),
                   running_.end());
  if (c_.scheduler == Scheduler::static_batching && live_ > 0 &&
      std::all_of(running_.begin(), running_.end(), [](const Seq& s) { return s.done; }))
    end_static_batch(now);
  step_.clear();
  batch_.sequences.clear();
}

}  // namespace inferlab
