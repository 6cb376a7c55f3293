#include "inferlab/sim/trace.h"

#include <algorithm>
#include <cmath>

#include "inferlab/sim/error.h"

namespace inferlab {
namespace {

struct Rng {
  uint64_t state;
  uint64_t next() {  // splitmix64
    uint64_t z = (state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  double uniform() { return (double(next() >> 11) + 0.5) * (1.0 / 9007199254740992.0); }  // (0, 1)
  double normal() { return std::sqrt(-2.0 * std::log(uniform())) * std::cos(6.283185307179586 * uniform()); }
  // Lognormal with the given mean: exp(mu + sigma z), mu = ln(mean) - sigma^2 / 2.
  double lognormal(double mean, double sigma) { return std::exp(std::log(mean) - sigma * sigma / 2 + sigma * normal()); }
};

}  // namespace

std::vector<Request> generate_trace(const TraceSpec& s) {
  if (s.requests <= 0 || !(s.rate > 0) || !(s.prompt_mean > 0) || !(s.output_mean > 0) || s.sigma < 0 ||
      s.min_tokens <= 0 || s.max_tokens < 2 * s.min_tokens)
    throw Error("trace: requests, rate, means and token bounds must be positive (max >= 2 x min)");
  Rng rng{s.seed};
  std::vector<Request> out;
  double t = 0;
  for (int64_t i = 0; i < s.requests; ++i) {
    t += -std::log(rng.uniform()) / s.rate;  // exponential inter-arrival times
    Request r;
    r.id = i;
    r.arrival = t;
    r.prompt = std::clamp<int64_t>(std::llround(rng.lognormal(s.prompt_mean, s.sigma)), s.min_tokens,
                                   s.max_tokens - s.min_tokens);
    r.output = std::clamp<int64_t>(std::llround(rng.lognormal(s.output_mean, s.sigma)), s.min_tokens,
                                   s.max_tokens - r.prompt);
    out.push_back(r);
  }
  return out;
}

}  // namespace inferlab
