#pragma once
// The one scheduler of the lab (serving.h describes its policies): admission, KV blocks, preemption and
// the batch of each iteration, as {sequence: new tokens} under a token budget. Two drivers run it:
//   the discrete-event simulator (serving.h simulate_serving)   clock: a StepCostModel
//   the engine loop (serving.h serve_iterations + a StepRunner) clock: the GPU runs the step, or any
//                                                               other clock the runner reports
// It holds no clock of its own: each call says what time it is, so for equal step times both drivers
// make the same decisions (tests/sim/test_serving.cpp checks that).
//
// KV memory lives in a PagedKvManager handed in by the driver: the simulator's own, or the GPU engine's,
// whose block tables the kernels read. Every sequence the scheduler runs has a slot there
// (0 .. max_batch - 1). Before a pass the scheduler has reserved the blocks of every token the pass
// stores; the engine's grow() inside the pass then takes no block of its own.
#include <cstdint>
#include <deque>
#include <string>
#include <vector>

#include "inferlab/sim/kv_blocks.h"
#include "inferlab/sim/serving.h"

namespace inferlab {

// One sequence of a planned pass.
struct ScheduledSequence {
  int64_t request = 0;     // trace index
  int slot = 0;            // KV slot in the block manager
  int64_t past = 0;        // tokens its KV holds before the pass
  int64_t new_tokens = 0;  // tokens the pass feeds (positions past .. past + new_tokens - 1)
  bool sample = false;     // the pass samples the request's next output token
  bool recompute = false;  // a prefill of tokens it had stored before a preemption
};

class BatchScheduler {
 public:
  // The trace is checked (serving.h check rules) by the caller; `kv` must outlive the scheduler and
  // hold no sequence. Contiguous: a request reserves max_len tokens when admitted; paged: its prompt
  // (optimistic admission; blocks as it decodes, recompute preemption when none is left) or its prompt
  // and every output token (reserve admission: never preempts).
  BatchScheduler(const std::vector<Request>& trace, const ServingConfig& config, PagedKvManager& kv,
                 std::string cost_model);

  // Request `id` arrives at `now`: queued, or rejected with its reason (it can never fit).
  void arrive(int64_t id, double now);
  // Plans the next pass at `now`; false when nothing can run (nothing admitted, nothing waiting that
  // fits). The pass is step() (admission order) and batch() (sim/ops.h's view of the same pass).
  bool plan(double now);
  const std::vector<ScheduledSequence>& step() const { return step_; }
  const Batch& batch() const { return batch_; }
  // The planned pass ran from `start` to `end`: its stored tokens, its sampled tokens, finished requests
  // (their blocks return to the manager). Records the iteration.
  void complete(double start, double end);

  bool idle() const { return live_ == 0 && waiting_.empty(); }
  int64_t running() const { return live_; }
  int64_t waiting() const { return int64_t(waiting_.size()); }
  int64_t emitted(int64_t id) const { return emitted_[std::size_t(id)]; }
  const ServingResult& result() const { return res_; }
  ServingResult take_result() { return std::move(res_); }

 private:
  struct Seq {
    int64_t req = 0;
    int slot = 0;
    int64_t kv = 0;       // tokens whose K and V are stored
    int64_t target = 0;   // tokens to prefill before decoding: prompt + tokens emitted before (re)admission
    int64_t planned = 0;  // new tokens in the pass being planned
    bool done = false;    // static: finished, held until its batch ends
    bool evicted = false; // preempted (or finished) while the pass was planned
    bool prefilling() const { return kv < target; }
  };

  int64_t reserve_tokens(const Seq& s) const;  // what admission sets aside
  bool take(Seq& s, int64_t tokens, int64_t keep_free);
  void release(Seq& s);
  std::size_t last_live() const;
  void preempt(std::size_t i, double now);
  bool grow(std::size_t i, double now);
  bool admit(int64_t& budget, bool whole, double now);
  void plan_chunks(int64_t& budget);
  void plan_decodes(int64_t& budget, double now);
  void end_static_batch(double now);
  void plan_static(double now);
  void finish(int64_t id, double now);
  void record(double start, double end);

  const std::vector<Request>& trace_;
  const ServingConfig& c_;
  PagedKvManager& kv_;
  int64_t max_tokens_ = 0, blocks_total_ = 0, watermark_ = 0;
  std::deque<int64_t> waiting_;
  std::vector<Seq> running_;  // in admission order
  std::vector<int> free_slots_;
  int64_t live_ = 0;          // running_ entries not evicted
  std::vector<int64_t> emitted_;
  std::vector<int64_t> lost_;  // per request: the most tokens a preemption threw away
  std::vector<ScheduledSequence> step_;
  Iteration pending_;          // the planned pass, recorded when it completes
  Batch batch_;
  bool admitted_ = false, evicted_any_ = false;
  ServingResult res_;
};

}  // namespace inferlab
