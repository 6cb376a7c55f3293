#pragma once
// The alpha-beta model of a collective fitted to measured times (least squares, Eigen): the same formulas
// as sim/parallel.h charges, solved for the link's per-step latency alpha and per-direction bandwidth B.
//   ring all-reduce of n bytes over p ranks:  t = 2(p-1) alpha + 2(p-1)/p * n / B
//   point-to-point send of n bytes:           t = alpha + n / B
// Each is t = a + b n: a least-squares line over the measured (n, t), then alpha and B from a and b.
// The fit weighs every point by 1 / t (relative residuals), so the small messages that fix alpha count as
// much as the large ones that fix B.
#include <cstdint>
#include <utility>
#include <vector>

namespace inferlab {

struct AlphaBetaFit {
  double alpha_s = 0;         // per ring step (all-reduce) or per message (send)
  double bandwidth = 0;       // bytes/s per direction of one link
  double worst_residual = 0;  // max |t_fit / t - 1| over the points
};

// points: (bytes, seconds), at least two distinct sizes; ranks >= 2. Throws inferlab::Error otherwise, or
// when the fitted line has a non-positive slope or a negative intercept (no link behaves so: a bad sweep).
AlphaBetaFit fit_all_reduce(const std::vector<std::pair<double, double>>& points, int ranks);
AlphaBetaFit fit_send(const std::vector<std::pair<double, double>>& points);

}  // namespace inferlab
