// The serving simulator: properties over many traces and configurations, closed forms, bad input.
#include <gtest/gtest.h>

#include <functional>

#include "inferlab/sim/error.h"
#include "inferlab/sim/memory.h"
#include "inferlab/sim/measured_step_cost.h"
#include "inferlab/sim/scheduler.h"
#include "inferlab/sim/serving.h"

namespace inferlab {
namespace {

const Precision kFp16{DType::fp16, DType::fp16, DType::fp16};
const OpOptions kOptions{kFp16, AttentionVariant::flash, true, std::nullopt};

struct Engine {
  ModelConfig model = load_model("llama-2-7b");
  Hardware hw = load_hardware("h100-sxm-80gb");
  RooflineStepCost cost{model, hw, kOptions};

  ServingConfig config(Scheduler s, Priority p, KvLayout kv, double kv_gb = 0) const {
    ServingConfig c;
    c.scheduler = s;
    c.priority = p;
    c.kv = kv;
    c.max_len = 2048;
    c.kv_bytes_per_token = kv_bytes_per_token(model, DType::fp16);
    c.kv_capacity_bytes = kv_gb > 0 ? kv_gb * 1e9 : serving_kv_capacity(model, hw, kFp16, 1, 0.9, default_batch_tokens(c));
    return c;
  }
};

std::vector<Request> trace(uint64_t seed, int64_t n, double rate) {
  TraceSpec t;
  t.seed = seed;
  t.requests = n;
  t.rate = rate;
  t.max_tokens = 2048;
  return generate_trace(t);
}

// Every scheduler x priority x allocator that means something (priority does not apply to static).
void for_each_config(const std::function<void(Scheduler, Priority, KvLayout)>& f) {
  for (auto s : {Scheduler::static_batching, Scheduler::continuous, Scheduler::chunked})
    for (auto p : {Priority::prefill_first, Priority::decode_first})
      for (auto kv : {KvLayout::contiguous, KvLayout::paged})
        if (s != Scheduler::static_batching || p == Priority::prefill_first) f(s, p, kv);
}

std::string name(Scheduler s, Priority p, KvLayout kv) {
  return scheduler_name(s) + "/" + priority_name(p) + "/" + kv_layout_name(kv);
}

TEST(Serving, EveryRequestCompletesExactlyOnceAndBlocksBalance) {
  Engine st;
  for (uint64_t seed : {1, 2, 3}) {
    const auto tr = trace(seed, 300, seed == 1 ? 5.0 : 60.0);
    for_each_config([&](Scheduler s, Priority p, KvLayout kv) {
      // A small KV memory (4 GB, ~7600 tokens) forces admission limits and, when paged, preemptions.
      const auto r = simulate_serving(tr, st.config(s, p, kv, 4.0), st.cost);
      ASSERT_EQ(r.requests.size(), tr.size());
      for (const auto& q : r.requests) {
        if (q.rejected) {
          EXPECT_EQ(q.completions, 0);
          EXPECT_FALSE(q.reason.empty());
          continue;
        }
        ASSERT_EQ(q.completions, 1) << name(s, p, kv) << " request " << q.id;
        EXPECT_LE(q.arrival, q.scheduled);
        EXPECT_LT(q.scheduled, q.first_token);
        EXPECT_LE(q.first_token, q.last_token);
        EXPECT_LE(q.last_token, q.finish);
        if (s != Scheduler::static_batching) {
          EXPECT_EQ(q.last_token, q.finish);
        }
      }
      EXPECT_EQ(r.blocks_allocated, r.blocks_freed) << name(s, p, kv);
      EXPECT_GT(r.blocks_allocated, 0);
    });
  }
}

TEST(Serving, KvMemoryNeverExceedsCapacityAndPreemptionRecomputes) {
  Engine st;
  const auto tr = trace(7, 400, 80.0);
  for_each_config([&](Scheduler s, Priority p, KvLayout kv) {
    const auto c = st.config(s, p, kv, 4.0);
    const auto r = simulate_serving(tr, c, st.cost);
    EXPECT_LE(r.peak_blocks, r.blocks_total);
    ASSERT_FALSE(r.iterations.empty());
    for (const auto& it : r.iterations) {
      ASSERT_LE(it.kv_blocks, r.blocks_total) << name(s, p, kv);
      ASSERT_LE(it.kv_reserved, c.kv_capacity_bytes);
      ASSERT_LE(it.kv_used, it.kv_reserved);
    }
    int64_t preemptions = 0;
    for (const auto& q : r.requests) preemptions += q.preemptions;
    if (kv == KvLayout::contiguous) {
      EXPECT_EQ(preemptions, 0) << "a contiguous reservation never runs out";
    } else {
      EXPECT_GT(preemptions, 0) << name(s, p, kv) << ": the test should exercise preemption";
    }
  });
}

TEST(Serving, BlocksInUseAreThoseOfTheTokensHeld) {
  // Whole-prompt schedulers take exactly ceil(tokens / B) blocks per sequence, so over the running
  // sequences: tokens <= blocks x B < tokens + running x B; a contiguous cache holds one block each.
  // (Static batches prefill in one pass here: a budget that holds every prompt, so that no admitted
  // prompt waits, reserved but not stored, for a later pass.)
  Engine st;
  const auto tr = trace(4, 300, 60.0);
  for (auto s : {Scheduler::static_batching, Scheduler::continuous}) {
    auto pc = st.config(s, Priority::prefill_first, KvLayout::paged, 4.0);
    if (s == Scheduler::static_batching) pc.max_batch_tokens = int64_t(1) << 30;
    const auto paged = simulate_serving(tr, pc, st.cost);
    for (const auto& it : paged.iterations) {
      const double tokens = it.kv_used / pc.kv_bytes_per_token;
      ASSERT_LE(tokens, double(it.kv_blocks * 16));
      ASSERT_LT(double(it.kv_blocks * 16), tokens + double(it.running * 16));
    }
    const auto contiguous = simulate_serving(tr, st.config(s, Priority::prefill_first, KvLayout::contiguous, 4.0), st.cost);
    for (const auto& it : contiguous.iterations) ASSERT_EQ(it.kv_blocks, it.running);
  }
}

// The engine loop's runner with a virtual clock: a pass takes what the cost model says.
class VirtualRunner : public StepRunner {
 public:
  explicit VirtualRunner(StepCostModel& cost) : cost_(cost) {}
  double now() override { return t_; }
  void wait_until(double t) override { t_ = std::max(t_, t); }
  double run(const std::vector<ScheduledSequence>& step, const Batch& batch, double start) override {
    EXPECT_EQ(start, t_);
    EXPECT_EQ(step.size(), batch.sequences.size());
    for (std::size_t i = 0; i < step.size(); ++i) {
      EXPECT_EQ(step[i].new_tokens, batch.sequences[i].new_tokens);
      EXPECT_EQ(step[i].past, batch.sequences[i].past_tokens);
      EXPECT_EQ(step[i].sample, batch.sequences[i].logits == 1);
    }
    t_ = start + cost_.step_time(batch);
    return t_;
  }
  std::string describe() const override { return cost_.describe(); }

 private:
  StepCostModel& cost_;
  double t_ = 0;
};

void expect_same_iterations(const ServingResult& a, const ServingResult& b, const std::string& what) {
  ASSERT_EQ(a.iterations.size(), b.iterations.size()) << what;
  for (std::size_t i = 0; i < a.iterations.size(); ++i) {
    const Iteration &x = a.iterations[i], &y = b.iterations[i];
    ASSERT_TRUE(x.start == y.start && x.end == y.end && x.prefill_tokens == y.prefill_tokens &&
                x.decode_tokens == y.decode_tokens && x.sequences == y.sequences && x.running == y.running &&
                x.waiting == y.waiting && x.kv_blocks == y.kv_blocks && x.recompute_tokens == y.recompute_tokens)
        << what << ": iteration " << i << " differs";
  }
  ASSERT_EQ(a.requests.size(), b.requests.size());
  for (std::size_t i = 0; i < a.requests.size(); ++i) {
    EXPECT_EQ(a.requests[i].first_token, b.requests[i].first_token) << what;
    EXPECT_EQ(a.requests[i].finish, b.requests[i].finish) << what;
    EXPECT_EQ(a.requests[i].preemptions, b.requests[i].preemptions) << what;
  }
  EXPECT_EQ(a.preemption_log, b.preemption_log) << what;
  EXPECT_EQ(a.blocks_allocated, b.blocks_allocated) << what;
}

TEST(Serving, TheEngineLoopAndTheEventLoopMakeTheSameIterations) {
  // One scheduler, two clocks: for equal step times (a fixed-cost model of a pass's tokens and contexts)
  // the discrete-event loop and the engine loop make the same passes, with preemptions and rejections,
  // in blocks of the simulator's size and of the engine's (16 tokens, contiguous reserving max_len).
  Engine st;
  FunctionStepCost fixed(
      [](const Batch& b) {
        double t = 2e-3;
        for (const auto& s : b.sequences) t += 1e-6 * double(s.new_tokens) + 1e-8 * double(s.past_tokens);
        return t;
      },
      "fixed: 2 ms + 1 us a token + 10 ns a past token");
  const auto tr = trace(11, 250, 40.0);
  for_each_config([&](Scheduler s, Priority p, KvLayout kv) {
    for (auto adm : {Admission::optimistic, Admission::reserve}) {
      if (kv == KvLayout::contiguous && adm == Admission::reserve) continue;
      ServingConfig c = st.config(s, p, kv, 3.0);
      c.admission = adm;
      const std::string what = name(s, p, kv) + "/" + admission_name(adm);
      VirtualRunner runner(fixed);
      const int64_t B = block_tokens(c);
      PagedKvManager a(serving_kv_blocks(c), B, kv_blocks_for(c.max_len, B));
      PagedKvManager b(serving_kv_blocks(c), B, kv_blocks_for(c.max_len, B));
      expect_same_iterations(simulate_serving(tr, c, fixed, a), serve_iterations(tr, c, b, runner), what);
      EXPECT_EQ(a.used_blocks(), 0);
      EXPECT_EQ(b.used_blocks(), 0);
      const int64_t blocks16 = int64_t(c.kv_capacity_bytes / (16 * c.kv_bytes_per_token));
      PagedKvManager e1(blocks16, 16, kv_blocks_for(c.max_len, 16)), e2(blocks16, 16, kv_blocks_for(c.max_len, 16));
      VirtualRunner runner2(fixed);
      expect_same_iterations(simulate_serving(tr, c, fixed, e1), serve_iterations(tr, c, e2, runner2), what + " (16)");
    }
  });
}

TEST(Serving, ReserveAdmissionNeverPreemptsOptimisticLogsItsRecompute) {
  Engine st;
  const auto tr = trace(7, 400, 80.0);
  for (auto s : {Scheduler::continuous, Scheduler::chunked}) {
    ServingConfig c = st.config(s, Priority::decode_first, KvLayout::paged, 3.0);
    const auto opt = simulate_serving(tr, c, st.cost);
    c.admission = Admission::reserve;
    const auto res = simulate_serving(tr, c, st.cost);
    int64_t pre_opt = 0, pre_res = 0, done = 0;
    for (const auto& q : opt.requests) pre_opt += q.preemptions;
    for (const auto& q : res.requests) {
      pre_res += q.preemptions;
      done += q.completions;
      EXPECT_TRUE(q.rejected || q.completions == 1);
    }
    EXPECT_EQ(pre_res, 0) << "reserving every output token up front never runs out";
    EXPECT_EQ(res.recompute_tokens, 0);
    ASSERT_GT(pre_opt, 0) << "3 GB under this load must preempt optimistic admission";
    EXPECT_GT(opt.recompute_tokens, 0);
    int64_t again = 0;
    for (const auto& it : opt.iterations) again += it.recompute_tokens;
    EXPECT_EQ(again, opt.recompute_tokens) << "every thrown-away token is stored again, once";
    const ServingSummary sum = summarize(opt);
    EXPECT_GT(sum.recompute_fraction, 0);
    EXPECT_LT(sum.recompute_fraction, 1);
    // Reserving for the worst case holds fewer requests at once.
    EXPECT_LE(summarize(res).mean_batch, sum.mean_batch);
    EXPECT_GT(done, 0);
  }
}

TEST(Serving, MeasuredStepCostInterpolatesItsGridAndRefusesABadTable) {
  StepTimingTable t;
  t.model = "m", t.device = "d";
  t.decode = {0, 1, 4};
  t.prefill = {0, 100, 1000};
  t.base_context = 10;
  t.base = {{0, 0.010, 0.050}, {0.005, 0.012, 0.052}, {0.008, 0.015, 0.060}};
  t.per_context = {0, 1e-6, 2e-6};
  MeasuredStepCost c(t, "table");
  auto pass = [](int64_t decodes, int64_t past, int64_t prompt) {
    Batch b;
    for (int64_t i = 0; i < decodes; ++i) b.sequences.push_back(SequenceWork{1, past, 1, 1});
    if (prompt > 0) b.sequences.push_back(SequenceWork{prompt, 0, 1, 1});
    return b;
  };
  EXPECT_DOUBLE_EQ(c.step_time(pass(1, 10, 0)), 0.005);   // grid points at the base context
  EXPECT_DOUBLE_EQ(c.step_time(pass(4, 10, 1000)), 0.060);
  EXPECT_DOUBLE_EQ(c.step_time(pass(0, 0, 100)), 0.010);
  EXPECT_NEAR(c.step_time(pass(4, 110, 0)), 0.008 + 2e-6 * 4 * 100, 1e-12);  // the context slope
  EXPECT_NEAR(c.step_time(pass(2, 10, 550)), 0.5 * (0.012 + 0.052) + (0.015 + 0.060 - 0.012 - 0.052) / 6, 1e-12);
  EXPECT_NEAR(c.step_time(pass(0, 0, 2000)), 0.050 + 0.040 / 900 * 1000, 1e-12);  // linear past the grid
  const StepTimingTable back = parse_step_timing(step_timing_json(t), "round trip");
  EXPECT_EQ(back.base, t.base);
  EXPECT_EQ(back.per_context, t.per_context);
  StepTimingTable bad = t;
  bad.prefill = {0, 1000, 100};
  EXPECT_THROW(MeasuredStepCost(bad, "x"), Error);
  bad = t;
  bad.base[2][1] = -1;
  EXPECT_THROW(MeasuredStepCost(bad, "x"), Error);
  EXPECT_THROW(parse_step_timing("{\"decode\": [0, 1]}", "f.json"), Error);
}

TEST(Serving, StaticBatchingNeverBeatsContinuousOnThroughput) {
  Engine st;
  for (uint64_t seed : {1, 2, 3, 4})
    for (double rate : {0.5, 4.0, 20.0, 100.0})
      for (auto kv : {KvLayout::contiguous, KvLayout::paged}) {
        const auto tr = trace(seed, 200, rate);
        const auto stat = summarize(simulate_serving(tr, st.config(Scheduler::static_batching, Priority::prefill_first, kv), st.cost));
        const auto cont = summarize(simulate_serving(tr, st.config(Scheduler::continuous, Priority::prefill_first, kv), st.cost));
        EXPECT_LE(stat.requests_per_s, cont.requests_per_s * (1 + 1e-12)) << seed << " " << rate << " " << kv_layout_name(kv);
        EXPECT_LE(stat.output_tokens_per_s, cont.output_tokens_per_s * (1 + 1e-12));
      }
}

TEST(Serving, SameSeedSameOutputOtherSeedOtherOutput) {
  Engine st;
  for_each_config([&](Scheduler s, Priority p, KvLayout kv) {
    const auto c = st.config(s, p, kv, 6.0);
    const auto a = simulate_serving(trace(11, 200, 30.0), c, st.cost);
    RooflineStepCost fresh(st.model, st.hw, kOptions);  // no state shared through the cost model's memo
    const auto b = simulate_serving(trace(11, 200, 30.0), c, fresh);
    EXPECT_EQ(requests_csv(a), requests_csv(b)) << name(s, p, kv);
    EXPECT_EQ(iterations_csv(a), iterations_csv(b));
    EXPECT_EQ(chrome_trace_json(a, "x"), chrome_trace_json(b, "x"));
    EXPECT_NE(requests_csv(a), requests_csv(simulate_serving(trace(12, 200, 30.0), c, st.cost)));
  });
}

TEST(Serving, ASingleRequestTakesTheSumOfItsStepTimes) {
  Engine st;
  const Request req{0, 0.25, 700, 40};
  RooflineStepCost cost(st.model, st.hw, kOptions);
  // One pass of n new tokens after `past`; a paged cache (block 16) adds its block-table reads.
  auto step = [&](int64_t n, int64_t past, int64_t logits, int64_t block) {
    return cost.step_time(Batch{{SequenceWork{n, past, 1, logits}}, block});
  };
  for (auto s : {Scheduler::static_batching, Scheduler::continuous})
    for (auto kv : {KvLayout::contiguous, KvLayout::paged}) {
      const int64_t block = kv == KvLayout::paged ? 16 : 0;
      double expected = step(700, 0, 1, block);  // the prefill samples the first token
      const double ttft = expected;
      for (int64_t i = 1; i < 40; ++i) expected += step(1, 700 + i - 1, 1, block);
      const auto r = simulate_serving({req}, st.config(s, Priority::prefill_first, kv), st.cost);
      EXPECT_NEAR(r.requests[0].finish - req.arrival, expected, 1e-12 * expected) << scheduler_name(s);
      EXPECT_NEAR(r.requests[0].first_token - req.arrival, ttft, 1e-12 * ttft);
    }
  // Chunked prefill in chunks of 256: 256 + 256 + 188 tokens, only the last samples.
  auto c = st.config(Scheduler::chunked, Priority::decode_first, KvLayout::contiguous);
  c.max_batch_tokens = 256;
  double chunked = step(256, 0, 0, 0) + step(256, 256, 0, 0) + step(188, 512, 1, 0);
  for (int64_t i = 1; i < 40; ++i) chunked += step(1, 700 + i - 1, 1, 0);
  const auto r = simulate_serving({req}, c, st.cost);
  EXPECT_NEAR(r.requests[0].finish - req.arrival, chunked, 1e-12 * chunked);
  EXPECT_EQ(r.iteration_count, 3 + 39);
}

TEST(Serving, ConstantStepTimeGivesClosedFormLatencies) {
  // With every pass taking tau, a lone request of O output tokens takes O passes; back-to-back
  // requests arriving together under static batching all finish with the longest.
  const double tau = 0.01;
  FunctionStepCost cost([&](const Batch&) { return tau; }, "constant");
  Engine st;
  auto c = st.config(Scheduler::static_batching, Priority::prefill_first, KvLayout::paged);
  const std::vector<Request> tr = {{0, 0.0, 10, 5}, {1, 0.0, 20, 50}, {2, 0.0, 30, 8}};
  const auto r = simulate_serving(tr, c, cost);
  for (const auto& q : r.requests) {
    EXPECT_NEAR(q.finish, 50 * tau, 1e-12);                 // the batch runs until its longest request ends
    EXPECT_NEAR(q.last_token, double(q.output) * tau, 1e-12);  // each one's own tokens come earlier
    EXPECT_NEAR(q.first_token, tau, 1e-12);
  }
  c.scheduler = Scheduler::continuous;
  const auto rc = simulate_serving(tr, c, cost);
  for (const auto& q : rc.requests) EXPECT_NEAR(q.finish, double(q.output) * tau, 1e-12);
}

TEST(Serving, EventsAtEqualTimesFollowTimeTypeId) {
  const double tau = 1.0;
  FunctionStepCost cost([&](const Batch&) { return tau; }, "constant");
  Engine st;
  auto c = st.config(Scheduler::continuous, Priority::decode_first, KvLayout::paged);
  c.max_batch = 1;
  // Two requests arrive together: the lower id goes first. A third arrives exactly when a pass ends:
  // the end is handled first (request 0 finishes at t = 2 and frees its slot), then the arrival.
  const std::vector<Request> tr = {{0, 0.0, 4, 2}, {1, 0.0, 4, 2}, {2, 2.0, 4, 2}};
  const auto r = simulate_serving(tr, c, cost);
  EXPECT_DOUBLE_EQ(r.requests[0].scheduled, 0.0);
  EXPECT_DOUBLE_EQ(r.requests[0].finish, 2.0);
  EXPECT_DOUBLE_EQ(r.requests[1].scheduled, 2.0);  // FCFS: request 1 was waiting before request 2 came
  EXPECT_DOUBLE_EQ(r.requests[2].scheduled, 4.0);
}

TEST(Serving, DecodeFirstNeverPausesDecodes) {
  Engine st;
  const auto tr = trace(3, 300, 40.0);
  auto paused = [&](Priority p) {
    const auto r = simulate_serving(tr, st.config(Scheduler::continuous, p, KvLayout::paged), st.cost);
    int64_t n = 0;  // passes that prefill while admitted requests wait to decode
    for (const auto& it : r.iterations) n += it.decode_tokens == 0 && it.running > it.prefill_sequences;
    return n;
  };
  EXPECT_GT(paused(Priority::prefill_first), 0);
  EXPECT_EQ(paused(Priority::decode_first), 0);
}

TEST(Serving, ChunkedPrefillKeepsEveryPassWithinItsBudget) {
  Engine st;
  auto c = st.config(Scheduler::chunked, Priority::decode_first, KvLayout::paged);
  c.max_batch_tokens = 512;
  const auto r = simulate_serving(trace(5, 300, 40.0), c, st.cost);
  int64_t longest = 0;
  for (const auto& it : r.iterations) longest = std::max(longest, it.prefill_tokens + it.decode_tokens);
  EXPECT_LE(longest, 512);
  EXPECT_EQ(longest, 512);  // and the budget is used
}

TEST(Serving, PagedHoldsMoreRequestsThanContiguous) {
  Engine st;
  const auto tr = trace(9, 600, 60.0);
  const auto con = summarize(simulate_serving(tr, st.config(Scheduler::continuous, Priority::prefill_first, KvLayout::contiguous), st.cost));
  const auto pag = summarize(simulate_serving(tr, st.config(Scheduler::continuous, Priority::prefill_first, KvLayout::paged), st.cost));
  EXPECT_GT(pag.mean_batch, 1.5 * con.mean_batch);
  EXPECT_GT(pag.requests_per_s, con.requests_per_s);
  EXPECT_GT(pag.kv_utilization, 0.9);  // only the last block's tail is empty
  EXPECT_LT(con.kv_utilization, 0.5);  // max_len reserved, a few hundred tokens used
}

TEST(Serving, OversizedRequestsAreRejectedWithAReason) {
  Engine st;
  auto c = st.config(Scheduler::continuous, Priority::prefill_first, KvLayout::paged, 0.1);  // 0.1 GB: 190 tokens
  const std::vector<Request> tr = {{0, 0.0, 50, 20}, {1, 0.1, 150, 100}, {2, 0.2, 2000, 100}, {3, 0.3, 30, 10}};
  const auto r = simulate_serving(tr, c, st.cost);
  EXPECT_FALSE(r.requests[0].rejected);
  EXPECT_TRUE(r.requests[1].rejected);
  EXPECT_NE(r.requests[1].reason.find("more than the whole KV memory"), std::string::npos) << r.requests[1].reason;
  EXPECT_TRUE(r.requests[2].rejected);
  EXPECT_NE(r.requests[2].reason.find("exceed max_len 2048"), std::string::npos) << r.requests[2].reason;
  EXPECT_EQ(r.requests[3].completions, 1);
  const auto s = summarize(r);
  EXPECT_EQ(s.rejected, 2);
  EXPECT_EQ(s.completed, 2);
  EXPECT_NE(requests_csv(r).find("rejected"), std::string::npos);
}

TEST(Serving, BadConfigurationsAreClearErrors) {
  Engine st;
  const auto tr = trace(1, 10, 1.0);
  auto c = st.config(Scheduler::continuous, Priority::prefill_first, KvLayout::contiguous, 0.5);  // < 1 GB = 2048 tokens
  EXPECT_THROW(simulate_serving(tr, c, st.cost), Error);
  c = st.config(Scheduler::continuous, Priority::prefill_first, KvLayout::paged);
  c.max_batch_tokens = 1024;
  try {
    simulate_serving(tr, c, st.cost);
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("at least max_len"), std::string::npos) << e.what();
  }
  c.max_batch_tokens = 0;
  c.block_size = 0;
  EXPECT_THROW(simulate_serving(tr, c, st.cost), Error);
  EXPECT_THROW(serving_kv_capacity(load_model("llama-2-70b"), st.hw, kFp16, 1, 0.9, 2048), Error);
  EXPECT_GT(serving_kv_capacity(load_model("llama-2-70b"), st.hw, kFp16, 4, 0.9, 2048), 0);
  EXPECT_THROW(parse_scheduler("greedy"), Error);
  EXPECT_THROW(parse_kv_layout("virtual"), Error);
}

TEST(Serving, MemoizedStepCostIsTheParallelPrediction) {
  // The roofline step cost reuses everything but attention across passes of equal (tokens, logit
  // rows): it must still give what predict_parallel gives for each batch, whatever came before.
  Engine st;
  for (int64_t tp : {1, 2}) {
    RooflineStepCost cost(st.model, st.hw, kOptions, tp);
    for (int64_t past : {100, 3000, 100}) {  // same tokens and logit rows, other contexts
      const Batch b{{SequenceWork{1, past, 7, 1}, SequenceWork{57, 3 * past, 1, 0}, SequenceWork{1, 9, 1, 1}}, 16};
      const double direct = predict_parallel(st.model, b, kOptions, st.hw, Parallelism{tp, 1, 1}).time_s;
      EXPECT_NEAR(cost.step_time(b), direct, 1e-12 * direct) << "tp " << tp << " past " << past;
    }
  }
}

TEST(Serving, ThePerRequestCsvIsATraceAgain) {
  Engine st;
  const auto tr = trace(8, 50, 5.0);
  const auto r = simulate_serving(tr, st.config(Scheduler::continuous, Priority::prefill_first, KvLayout::paged, 0.1), st.cost);
  const auto again = parse_trace_csv(requests_csv(r), "requests.csv");  // reasons with commas are quoted
  ASSERT_EQ(again.size(), tr.size());
  for (std::size_t i = 0; i < tr.size(); ++i) {
    EXPECT_EQ(again[i].arrival, tr[i].arrival);
    EXPECT_EQ(again[i].prompt, tr[i].prompt);
    EXPECT_EQ(again[i].output, tr[i].output);
  }
  EXPECT_GT(summarize(r).rejected, 0);  // 0.1 GB holds 190 tokens: some requests are too large
}

TEST(Serving, PercentilesInterpolateBetweenRanks) {
  std::vector<double> v;
  for (int i = 101; i >= 1; --i) v.push_back(i);
  const auto p = percentiles(v);
  EXPECT_DOUBLE_EQ(p.p50, 51);
  EXPECT_DOUBLE_EQ(p.p90, 91);
  EXPECT_DOUBLE_EQ(p.p99, 100);
  EXPECT_DOUBLE_EQ(p.mean, 51);
  EXPECT_EQ(percentiles({}).n, 0);
}

TEST(Serving, KvCapacityIsWhatWeightsAndActivationsLeave) {
  Engine st;
  const double cap = serving_kv_capacity(st.model, st.hw, kFp16, 1, 0.9, 2048);
  const double act = step_activation_bytes(st.model, prefill_step(1, 2048), kOptions);
  EXPECT_DOUBLE_EQ(cap, 0.9 * st.hw.memory_bytes - weight_bytes(st.model, DType::fp16) - act);
}

}  // namespace
}  // namespace inferlab
