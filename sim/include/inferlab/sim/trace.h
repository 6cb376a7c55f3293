#pragma once
// Request traces for the memory and serving experiments, generated from a fixed seed so every run
// (and every machine) sees the same requests. Lengths are lognormal, the shape of chat traffic:
// by default with the means the vLLM paper reports for ShareGPT (prompt 161, output 338 tokens),
// sigma 1, clipped to [min, max]; arrivals are a Poisson process.
// The sampling is sim/rng.h (splitmix64 + Box-Muller), the same on every machine.
#include <cstdint>
#include <vector>

namespace inferlab {

struct TraceSpec {
  uint64_t seed = 1;
  int64_t requests = 500;
  double rate = 2.0;  // mean arrivals per time unit (a decode step, for the memory experiment)
  double prompt_mean = 161, output_mean = 338, sigma = 1.0;
  int64_t min_tokens = 4, max_tokens = 2048;  // prompt + output of a request stays within max_tokens
};

struct Request {
  int64_t id = 0;
  double arrival = 0;
  int64_t prompt = 0;
  int64_t output = 0;
};

std::vector<Request> generate_trace(const TraceSpec& spec);

}  // namespace inferlab
