#include "inferlab/sim/trace.h"

#include <algorithm>
#include <cmath>

#include "inferlab/sim/error.h"
#include "inferlab/sim/rng.h"

namespace inferlab {

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
