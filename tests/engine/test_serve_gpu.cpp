// Serving on the GPU engine (experiments/serve_engine.h): the one scheduler drives the engine's KV.
//   - 10,000 requests through a KV memory small enough to preempt often: every request completes exactly
//     once (one, too long, is rejected with its reason), blocks allocated = blocks freed, the engine's
//     pool empty and the device's free memory unchanged after the run;
//   - a request preempted and recomputed emits the same greedy tokens as in a run that never preempts.
//     The tiny model's weights are drawn with a large initializer range so that the top logit leads the
//     second by far more than bf16 rounding moves it: the tokens may then not depend on the batch a row
//     ran in, and any difference is a scheduling bug (a token fed at the wrong position, a stale block).
#include <gtest/gtest.h>

#include "../kernels/gpu_test.h"

#include <filesystem>
#include <fstream>

#include <unistd.h>

#include <nlohmann/json.hpp>

#include "inferlab/experiments/serve_engine.h"
#include "inferlab/sim/rng.h"

namespace inferlab {
namespace {

std::string tiny_model(double init_range) {
  const nlohmann::json j{{"architectures", {"LlamaForCausalLM"}},
                         {"model_type", "llama"},
                         {"hidden_size", 256},
                         {"intermediate_size", 512},
                         {"num_hidden_layers", 2},
                         {"num_attention_heads", 4},
                         {"num_key_value_heads", 2},
                         {"head_dim", 64},
                         {"vocab_size", 512},
                         {"max_position_embeddings", 256},
                         {"rms_norm_eps", 1e-5},
                         {"rope_theta", 10000.0},
                         {"hidden_act", "silu"},
                         {"initializer_range", init_range},
                         {"tie_word_embeddings", false},
                         {"torch_dtype", "bfloat16"}};
  const auto dir = std::filesystem::temp_directory_path() / ("inferlab-serve-" + std::to_string(::getpid()) + "-" +
                                                             std::to_string(int(init_range * 1000)));
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "config.json") << j.dump(1);
  return (dir / "config.json").string();
}

std::vector<Request> short_requests(int64_t n, int64_t max_prompt, int64_t max_output, uint64_t seed) {
  Rng rng{seed};
  std::vector<Request> t(static_cast<std::size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    t[std::size_t(i)].id = i;
    t[std::size_t(i)].prompt = 1 + int64_t(rng.next() % uint64_t(max_prompt));
    t[std::size_t(i)].output = 1 + int64_t(rng.next() % uint64_t(max_output));
  }
  return t;
}

TEST(ServeEngine, TenThousandRequestsCompleteOnceAndNothingLeaks) {
  REQUIRE_GPU();
  auto trace = short_requests(10000, 24, 12, 3);
  trace[5000].prompt = 300;  // beyond max_len: rejected, the rest served
  ServingConfig c;
  c.scheduler = Scheduler::continuous;
  c.priority = Priority::decode_first;
  c.kv = KvLayout::paged;
  c.max_len = 128;
  c.max_batch = 64;
  c.max_batch_tokens = 512;
  EngineServeOptions o;
  o.model = tiny_model(0.02);
  o.offline = true;
  o.kv_gib = 1.0 / 1024;  // 1 MiB: 64 blocks of 16 tokens at 1 KiB a token, well under 64 requests' needs
  const EngineServeResult r = serve_on_engine(trace, c, o);
  ASSERT_EQ(r.result.requests.size(), trace.size());
  int64_t preemptions = 0;
  for (const auto& q : r.result.requests) {
    preemptions += q.preemptions;
    if (q.id == 5000) {
      EXPECT_TRUE(q.rejected);
      EXPECT_NE(q.reason.find("exceed max_len 128"), std::string::npos) << q.reason;
      EXPECT_EQ(q.completions, 0);
      continue;
    }
    ASSERT_FALSE(q.rejected) << q.id << ": " << q.reason;
    ASSERT_EQ(q.completions, 1) << "request " << q.id;
  }
  EXPECT_GT(preemptions, 0) << "the KV memory was meant to force preemptions";
  EXPECT_EQ(r.result.blocks_allocated, r.result.blocks_freed);
  EXPECT_EQ(r.gpu_free_before, r.gpu_free_after) << "device memory changed across the run";
  EXPECT_EQ(r.summary.completed, 9999);
}

TEST(ServeEngine, ARecomputedRequestEmitsTheSameTokensAsAnUndisturbedOne) {
  REQUIRE_GPU();
  const auto trace = short_requests(96, 40, 40, 9);
  ServingConfig c;
  c.scheduler = Scheduler::continuous;
  c.priority = Priority::decode_first;
  c.kv = KvLayout::paged;
  c.max_len = 128;
  c.max_batch = 32;
  EngineServeOptions o;
  o.model = tiny_model(1.0);
  o.offline = true;
  o.keep_outputs = true;
  o.kv_gib = 64.0 / 1024;  // ample: nothing is preempted
  const EngineServeResult calm = serve_on_engine(trace, c, o);
  o.kv_gib = 1.0 / 1024;   // 64 blocks for 32 running requests of up to 80 tokens: many preemptions
  const EngineServeResult tight = serve_on_engine(trace, c, o);
  EXPECT_EQ(calm.summary.preemptions, 0);
  ASSERT_GT(tight.summary.preemptions, 0);
  int64_t preempted = 0;
  for (std::size_t i = 0; i < trace.size(); ++i) {
    ASSERT_EQ(tight.result.requests[i].completions, 1);
    ASSERT_EQ(int64_t(calm.outputs[i].size()), trace[i].output);
    EXPECT_EQ(tight.outputs[i], calm.outputs[i]) << "request " << i << " (" << tight.result.requests[i].preemptions
                                                 << " preemptions)";
    preempted += tight.result.requests[i].preemptions > 0;
  }
  EXPECT_GT(preempted, 0);
}

}  // namespace
}  // namespace inferlab
