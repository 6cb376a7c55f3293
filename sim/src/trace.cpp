#include "inferlab/sim/trace.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "inferlab/sim/error.h"
#include "inferlab/sim/io.h"
#include "inferlab/sim/rng.h"

namespace inferlab {

std::vector<Request> generate_trace(const TraceSpec& s) {
  if (s.requests <= 0 || !(s.rate > 0) || !(s.prompt_mean > 0) || !(s.output_mean > 0) || s.sigma < 0 ||
      s.min_tokens <= 0 || s.max_tokens < 0 || (s.max_tokens > 0 && s.max_tokens < 2 * s.min_tokens))
    throw Error("trace: requests, rate, means and token bounds must be positive (max 0, or >= 2 x min)");
  const int64_t max_tokens = s.max_tokens > 0 ? s.max_tokens : int64_t(1) << 40;
  Rng rng{s.seed};
  std::vector<Request> out;
  double t = 0;
  for (int64_t i = 0; i < s.requests; ++i) {
    t += -std::log(rng.uniform()) / s.rate;  // exponential inter-arrival times
    Request r;
    r.id = i;
    r.arrival = t;
    r.prompt = std::clamp<int64_t>(std::llround(rng.lognormal(s.prompt_mean, s.sigma)), s.min_tokens,
                                   max_tokens - s.min_tokens);
    r.output = std::clamp<int64_t>(std::llround(rng.lognormal(s.output_mean, s.sigma)), s.min_tokens,
                                   max_tokens - r.prompt);
    out.push_back(r);
  }
  return out;
}

namespace {

const char* const kTraceColumns[] = {"arrival_s", "prompt_tokens", "output_tokens"};

}  // namespace

std::vector<Request> parse_trace_csv(const std::string& text, const std::string& origin) {
  const std::vector<CsvRecord> records = parse_csv_records(text, origin);
  if (records.empty()) throw Error(origin + ": empty trace (expected a header: arrival_s,prompt_tokens,output_tokens)");
  std::size_t col[3];
  for (int c = 0; c < 3; ++c) {
    const auto& h = records[0].fields;
    auto it = std::find(h.begin(), h.end(), kTraceColumns[c]);
    if (it == h.end())
      throw Error(origin + ":" + std::to_string(records[0].line) + ": the header has no column '" + kTraceColumns[c] +
                  "' (a trace needs arrival_s, prompt_tokens, output_tokens)");
    col[c] = std::size_t(it - h.begin());
  }
  std::vector<Request> out;
  for (std::size_t r = 1; r < records.size(); ++r) {
    const auto& f = records[r].fields;
    if (f.size() == 1 && f[0].empty()) continue;  // blank line
    const std::string where =
        origin + ":" + std::to_string(records[r].line) + " (request " + std::to_string(out.size()) + ")";
    auto field = [&](int c) -> const std::string& {
      if (col[c] >= f.size() || f[col[c]].empty()) throw Error(where + ": missing field '" + kTraceColumns[c] + "'");
      return f[col[c]];
    };
    auto integer = [&](int c) {
      const std::string& s = field(c);
      const auto v = parse_integer(s);
      if (!v) throw Error(where + ": field '" + kTraceColumns[c] + "' must be an integer, got '" + s + "'");
      if (*v <= 0) throw Error(where + ": field '" + kTraceColumns[c] + "' must be positive, got " + s);
      return *v;
    };
    Request q;
    q.id = int64_t(out.size());
    const std::string& a = field(0);
    const auto arrival = parse_number(a);
    if (!arrival) throw Error(where + ": field 'arrival_s' must be a number, got '" + a + "'");
    q.arrival = *arrival;
    if (q.arrival < 0) throw Error(where + ": field 'arrival_s' must not be negative, got " + a);
    if (!out.empty() && q.arrival < out.back().arrival)
      throw Error(where + ": arrival_s " + a + " is before the previous row's; rows must be sorted by arrival time");
    q.prompt = integer(1);
    q.output = integer(2);
    out.push_back(q);
  }
  if (out.empty()) throw Error(origin + ": the trace has a header but no requests");
  return out;
}

std::vector<Request> read_trace_csv(const std::filesystem::path& path) {
  if (!std::filesystem::is_regular_file(path)) throw Error("trace file not found: " + path.string());
  return parse_trace_csv(read_text_file(path), path.string());
}

std::string trace_csv(const std::vector<Request>& trace) {
  std::string out = "arrival_s,prompt_tokens,output_tokens\n";
  char buf[96];
  for (const auto& r : trace) {
    std::snprintf(buf, sizeof buf, "%.17g,%lld,%lld\n", r.arrival, static_cast<long long>(r.prompt),
                  static_cast<long long>(r.output));
    out += buf;
  }
  return out;
}

}  // namespace inferlab
