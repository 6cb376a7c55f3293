// Speculative decoding: the expected-token formula at its limits, the cost model against the closed
// form, the optimal draft length, drafters' memory, bad input.
#include <gtest/gtest.h>

#include <cmath>

#include "inferlab/sim/error.h"
#include "inferlab/sim/memory.h"
#include "inferlab/sim/speculative.h"

namespace inferlab {
namespace {

SpeculativeSetup setup(Drafter d, int64_t batch = 1) {
  SpeculativeSetup s;
  s.target = load_model("llama-2-70b");
  s.draft = load_model("llama-2-7b");
  s.drafter = d;
  s.hardware = load_hardware("h100-sxm-80gb");
  s.options = OpOptions{Precision{DType::fp16, DType::fp16, DType::fp16}, AttentionVariant::flash, true, std::nullopt};
  s.batch = batch;
  s.context = 1024;
  return s;
}

TEST(Speculative, ExpectedTokensAtTheLimits) {
  for (int64_t g : {0, 1, 4, 10}) {
    EXPECT_DOUBLE_EQ(expected_tokens(0.0, g), 1.0);             // nothing accepted: the target's own token
    EXPECT_DOUBLE_EQ(expected_tokens(1.0, g), double(g + 1));   // everything accepted
    EXPECT_NEAR(expected_tokens(1 - 1e-9, g), double(g + 1), 1e-6);  // continuous at alpha -> 1
  }
  EXPECT_DOUBLE_EQ(expected_tokens(0.6, 0), 1.0);
  // The geometric sum term by term: 1 + a + a^2 + a^3.
  EXPECT_NEAR(expected_tokens(0.5, 3), 1 + 0.5 + 0.25 + 0.125, 1e-15);
  for (double a : {0.3, 0.6, 0.9})
    for (int64_t g = 0; g < 12; ++g) EXPECT_LT(expected_tokens(a, g), expected_tokens(a, g + 1));
}

TEST(Speculative, ClosedFormSpeedup) {
  EXPECT_DOUBLE_EQ(closed_form_speedup(0.8, 4, 0.0), expected_tokens(0.8, 4));
  EXPECT_DOUBLE_EQ(closed_form_speedup(0.8, 0, 0.3), 1.0);
  EXPECT_DOUBLE_EQ(closed_form_speedup(0.0, 3, 0.1), 1.0 / 1.3);  // drafting for nothing costs time
}

TEST(Speculative, CostModelMatchesTheClosedFormWhenVerifyingCostsADecode) {
  // At batch 1 the 70B target is memory-bound: verifying 5 tokens reads the same weights as decoding one.
  const SpeculativeModel m(setup(Drafter::model));
  const auto r = m.round(4);
  EXPECT_NEAR(r.verify_s / r.target_decode_s, 1.0, 0.01);
  EXPECT_GT(r.c, 0.05);
  EXPECT_LT(r.c, 0.2);  // a 7B model costs about a tenth of a 70B one
  for (double a : {0.5, 0.7, 0.9})
    for (int64_t g : {1, 3, 6}) EXPECT_NEAR(m.speedup(a, g) / closed_form_speedup(a, g, m.round(g).c), 1.0, 0.01);
  EXPECT_DOUBLE_EQ(m.speedup(0.7, 0), 1.0);
}

TEST(Speculative, LargerBatchesMakeVerificationCostlierAndSpeculationWorthLess) {
  const SpeculativeModel one(setup(Drafter::ngram, 1)), many(setup(Drafter::ngram, 128));
  EXPECT_GT(many.round(6).verify_s / many.round(6).target_decode_s, one.round(6).verify_s / one.round(6).target_decode_s);
  EXPECT_LT(many.speedup(0.8, 6), one.speedup(0.8, 6));
  EXPECT_LE(one.speedup(0.8, 6), expected_tokens(0.8, 6));  // no drafter is free of the verification pass
}

TEST(Speculative, OptimalDraftLengthGrowsWithAcceptance) {
  for (Drafter d : {Drafter::model, Drafter::medusa, Drafter::ngram}) {
    const SpeculativeModel m(setup(d));
    EXPECT_EQ(m.optimal_gamma(0.0, 10), 0) << drafter_name(d);  // nothing accepted: do not speculate
    int64_t prev = 0;
    for (double a = 0.1; a < 0.96; a += 0.05) {
      const int64_t g = m.optimal_gamma(a, 10);
      EXPECT_GE(g, prev) << drafter_name(d) << " alpha " << a;
      if (g > 0) {  // the optimum beats its neighbours
        EXPECT_GE(m.speedup(a, g), m.speedup(a, g - 1));
        if (g < 10) {
          EXPECT_GE(m.speedup(a, g), m.speedup(a, g + 1));
        }
      }
      prev = g;
    }
  }
}

TEST(Speculative, DraftersCostWhatTheyHold) {
  const auto s = setup(Drafter::model, 8);
  const SpeculativeModel model(s);
  EXPECT_DOUBLE_EQ(model.extra_memory_bytes(4), weight_bytes(*s.draft, DType::fp16) +
                                                    kv_cache_bytes(*s.draft, 8, 1024, DType::fp16));
  const SpeculativeModel medusa(setup(Drafter::medusa, 8));
  const double head = (8192.0 * 8192.0 + 8192.0 * 32000.0) * 2;  // hidden^2 + hidden x vocab, fp16
  EXPECT_DOUBLE_EQ(medusa.extra_memory_bytes(5), 5 * head);
  EXPECT_EQ(SpeculativeModel(setup(Drafter::ngram)).extra_memory_bytes(5), 0.0);
  EXPECT_EQ(SpeculativeModel(setup(Drafter::ngram)).round(5).draft_s, 0.0);
  // Medusa's heads cost a fraction of a decode step, far less than 5 passes of a 7B draft model.
  EXPECT_LT(medusa.round(5).draft_s, 0.1 * medusa.round(5).target_decode_s);
  EXPECT_LT(medusa.round(5).draft_s, model.round(5).draft_s);
}

TEST(Speculative, TensorParallelTargetShortensItsSteps) {
  auto s = setup(Drafter::model);
  const SpeculativeModel tp1(s);
  s.tp = 4;
  const SpeculativeModel tp4(s);
  EXPECT_LT(tp4.round(3).target_decode_s, tp1.round(3).target_decode_s);
  EXPECT_GT(tp4.round(3).c, tp1.round(3).c);  // the draft on one device weighs more against a faster target
}

TEST(Speculative, BadInputIsRejected) {
  EXPECT_THROW(expected_tokens(1.2, 3), Error);
  EXPECT_THROW(expected_tokens(-0.1, 3), Error);
  EXPECT_THROW(expected_tokens(0.5, -1), Error);
  auto s = setup(Drafter::model);
  s.draft = load_model("llama-3-8b");  // another tokenizer
  try {
    SpeculativeModel m(s);
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("tokenizer"), std::string::npos) << e.what();
  }
  s.draft.reset();
  EXPECT_THROW(SpeculativeModel m(s), Error);
  EXPECT_THROW(parse_drafter("oracle"), Error);
}

}  // namespace
}  // namespace inferlab
