// Least-squares alpha-beta fits (alpha_beta.h).
#include "inferlab/sim/alpha_beta.h"

#include <algorithm>
#include <cmath>
#include <set>
#include <string>

#include <Eigen/Dense>

#include "inferlab/sim/error.h"

namespace inferlab {
namespace {

// t = a + b n, weighted by 1 / t.
std::pair<double, double> line(const std::vector<std::pair<double, double>>& pts, const std::string& what) {
  std::set<double> sizes;
  for (const auto& [n, t] : pts) {
    if (!(n > 0) || !(t > 0) || !std::isfinite(n) || !std::isfinite(t))
      throw Error(what + ": every point needs positive bytes and seconds");
    sizes.insert(n);
  }
  if (sizes.size() < 2) throw Error(what + ": at least two message sizes are needed");
  Eigen::MatrixXd A(pts.size(), 2);
  Eigen::VectorXd y(pts.size());
  for (std::size_t i = 0; i < pts.size(); ++i) {
    const double w = 1.0 / pts[i].second;
    A(Eigen::Index(i), 0) = w;
    A(Eigen::Index(i), 1) = pts[i].first * w;
    y(Eigen::Index(i)) = 1.0;
  }
  const Eigen::Vector2d x = A.colPivHouseholderQr().solve(y);
  if (!(x(1) > 0)) throw Error(what + ": the fitted time does not grow with the message size (a bad sweep)");
  if (x(0) < 0) throw Error(what + ": the fitted fixed cost is negative (a bad sweep)");
  return {x(0), x(1)};
}

double worst(const std::vector<std::pair<double, double>>& pts, double a, double b) {
  double w = 0;
  for (const auto& [n, t] : pts) w = std::max(w, std::abs((a + b * n) / t - 1));
  return w;
}

}  // namespace

AlphaBetaFit fit_all_reduce(const std::vector<std::pair<double, double>>& points, int ranks) {
  if (ranks < 2) throw Error("all-reduce fit: ranks must be at least 2");
  const auto [a, b] = line(points, "all-reduce fit");
  const double p = ranks;
  AlphaBetaFit f;
  f.alpha_s = a / (2 * (p - 1));
  f.bandwidth = 2 * (p - 1) / p / b;
  f.worst_residual = worst(points, a, b);
  return f;
}

AlphaBetaFit fit_send(const std::vector<std::pair<double, double>>& points) {
  const auto [a, b] = line(points, "send fit");
  AlphaBetaFit f;
  f.alpha_s = a;
  f.bandwidth = 1 / b;
  f.worst_residual = worst(points, a, b);
  return f;
}

}  // namespace inferlab
