#pragma once
// Request traces for the memory and serving experiments, generated from a fixed seed so every run
// (and every machine) sees the same requests. Lengths are lognormal, the shape of chat traffic:
// by default with the means the vLLM paper reports for ShareGPT (prompt 161, output 338 tokens),
// sigma 1, at least min_tokens each, and clipped to max_tokens when that is set (0: not clipped);
// arrivals are a Poisson process.
// The sampling is sim/rng.h (splitmix64 + Box-Muller), the same on every machine.
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace inferlab {

struct TraceSpec {
  uint64_t seed = 1;
  int64_t requests = 500;
  double rate = 2.0;  // mean arrivals per time unit (a decode step, for the memory experiment)
  double prompt_mean = 161, output_mean = 338, sigma = 1.0;
  int64_t min_tokens = 4, max_tokens = 2048;  // prompt + output of a request stays within max_tokens (0: any)
};

struct Request {
  int64_t id = 0;
  double arrival = 0;
  int64_t prompt = 0;
  int64_t output = 0;
};

std::vector<Request> generate_trace(const TraceSpec& spec);

// A trace file: CSV with a header naming (in any order, other columns ignored)
//   arrival_s       seconds since the start, non-negative, rows sorted by it (ties allowed)
//   prompt_tokens   positive integer
//   output_tokens   positive integer (tokens the request generates, the first one included)
// Request ids are the row order (0-based). A malformed row (a missing or empty field, a value that is
// not a number, a non-positive length, an arrival before the previous row's) throws inferlab::Error
// "FILE:LINE (request N): ..."; a missing column or an empty file names the file.
std::vector<Request> read_trace_csv(const std::filesystem::path& path);
std::vector<Request> parse_trace_csv(const std::string& text, const std::string& origin);
std::string trace_csv(const std::vector<Request>& trace);

}  // namespace inferlab
