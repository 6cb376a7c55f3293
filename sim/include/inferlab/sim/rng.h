#pragma once
// The lab's seeded random numbers: splitmix64 with uniform, normal (Box-Muller) and lognormal draws,
// written out rather than taken from <random>'s distributions, whose values differ between standard
// libraries: the same seed gives the same trace, weights and activations on every machine.
#include <cmath>
#include <cstdint>

namespace inferlab {

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

}  // namespace inferlab
