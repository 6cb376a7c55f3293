// The model's fidelity on the committed H100 measurements: every measured point of
// data/results/nvidia-h100-80gb-hbm3 re-predicted by this build's model (the row's parameters
// through its scenario) must stay within the goal of ../shared/FIDELITY.md. A kernel change that
// moves a kernel away from its declared model, or a model change that breaks a family, fails here.
#include <gtest/gtest.h>

#include <cstdio>

#include "inferlab/experiments/fidelity.h"
#include "inferlab/sim/paths.h"

namespace inferlab {
namespace {

std::vector<FidelityPoint> h100_points() {
  return repredict_results(data_dir() / "results" / "nvidia-h100-80gb-hbm3");
}

TEST(Fidelity, EveryCommittedH100PointIsRepredicted) {
  const auto pts = h100_points();
  std::printf("%s", fidelity_table(pts).c_str());
  // attention_prefill 72 + decode_attention 192 + compression 142 measured rows
  EXPECT_EQ(pts.size(), 406u);
  for (const auto& p : pts) {
    EXPECT_GT(p.predicted_s, 0) << p.point;
    EXPECT_FALSE(p.dominant.empty()) << p.point;
  }
}

TEST(Fidelity, MedianAndWorstSymmetricErrorOnTheH100) {
  const auto pts = h100_points();
  const FidelitySummary all = summarize(pts);
  EXPECT_LE(all.median, 0.10);
  std::vector<FidelityPoint> worst = pts;
  std::sort(worst.begin(), worst.end(), [](const auto& a, const auto& b) { return a.error() > b.error(); });
  for (size_t i = 0; i < worst.size() && i < 15; ++i)
    std::printf("%6.1f%%  %-16s %s  p=%.1f us m=%.1f us (%s)\n", 100 * worst[i].error(), worst[i].family.c_str(),
                worst[i].point.c_str(), worst[i].predicted_s * 1e6, worst[i].measured_s * 1e6, worst[i].dominant.c_str());
  EXPECT_LE(all.worst, 0.25);
}

}  // namespace
}  // namespace inferlab
