// What a serving run reports: latency percentiles, throughput, KV memory over time, and the timeline
// as a Chrome trace and CSV.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

#include "inferlab/sim/serving.h"

namespace inferlab {
namespace {

constexpr double kMicro = 1e6;  // Chrome trace timestamps are in microseconds

std::string fmt_num(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.10g", v);
  return buf;
}

// Arrival times to the last bit, so that a per-request CSV is the same trace again (trace.h).
std::string exact(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

std::string json_string(const std::string& s) {
  std::string out = "\"";
  for (char ch : s) {
    if (ch == '"' || ch == '\\') out += '\\';
    if (static_cast<unsigned char>(ch) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", ch);
      out += buf;
      continue;
    }
    out += ch;
  }
  return out + "\"";
}

struct Spans {
  std::string out;
  bool first = true;
  void add(const std::string& event) {
    out += first ? "\n" : ",\n";
    out += event;
    first = false;
  }
  void complete(const std::string& name, int pid, int64_t tid, double start, double end, const std::string& args = "") {
    add("{\"name\":" + json_string(name) + ",\"ph\":\"X\",\"pid\":" + std::to_string(pid) +
        ",\"tid\":" + std::to_string(tid) + ",\"ts\":" + fmt_num(start * kMicro) +
        ",\"dur\":" + fmt_num((end - start) * kMicro) + (args.empty() ? "" : ",\"args\":{" + args + "}") + "}");
  }
};

std::string csv_quoted(const std::string& s) {
  std::string out = "\"";
  for (char ch : s) out += ch == '"' ? std::string("\"\"") : std::string(1, ch);
  return out + "\"";
}

double optional_span(double from, double to) { return from >= 0 && to >= 0 ? to - from : std::nan(""); }

}  // namespace

Percentiles percentiles(std::vector<double> v) {
  Percentiles p;
  p.n = int64_t(v.size());
  if (v.empty()) return p;
  std::sort(v.begin(), v.end());
  auto at = [&](double q) {
    const double pos = q * double(v.size() - 1);
    const std::size_t lo = std::size_t(pos);
    const std::size_t hi = std::min(lo + 1, v.size() - 1);
    return v[lo] + (v[hi] - v[lo]) * (pos - double(lo));
  };
  double sum = 0;
  for (double x : v) sum += x;
  p.mean = sum / double(v.size());
  p.p50 = at(0.50);
  p.p90 = at(0.90);
  p.p99 = at(0.99);
  p.max = v.back();
  return p;
}

std::vector<std::pair<double, Iteration>> sample_iterations(const ServingResult& r, double every) {
  std::vector<std::pair<double, Iteration>> out;
  if (!(every > 0) || r.iterations.empty()) return out;
  const double end = r.iterations.back().end;
  std::size_t i = 0;
  for (int64_t k = 0;; ++k) {
    const double t = double(k) * every;
    if (t > end) break;
    while (i < r.iterations.size() && r.iterations[i].end <= t) ++i;
    const bool in = i < r.iterations.size() && r.iterations[i].start <= t;
    out.emplace_back(t, in ? r.iterations[i] : Iteration{});
  }
  return out;
}

ServingSummary summarize(const ServingResult& r) {
  ServingSummary s;
  s.requests = int64_t(r.requests.size());
  s.iterations = r.iteration_count;
  s.kv_capacity = r.kv_capacity;
  s.kv_peak_reserved = double(r.peak_blocks * r.block_tokens) * r.kv_bytes_per_token;
  std::vector<double> ttft, tpot, latency, queueing;
  double first = std::numeric_limits<double>::infinity(), last = 0, out_tokens = 0, all_tokens = 0;
  for (const auto& q : r.requests) {
    s.preemptions += q.preemptions;
    if (q.rejected) {
      ++s.rejected;
      continue;
    }
    first = std::min(first, q.arrival);
    if (q.completions == 0) continue;
    ++s.completed;
    last = std::max(last, q.finish);
    out_tokens += double(q.output);
    all_tokens += double(q.prompt + q.output);
    ttft.push_back(q.first_token - q.arrival);
    latency.push_back(q.finish - q.arrival);
    queueing.push_back(q.scheduled - q.arrival);
    if (q.output > 1) tpot.push_back((q.last_token - q.first_token) / double(q.output - 1));
  }
  s.ttft = percentiles(ttft);
  s.tpot = percentiles(tpot);
  s.latency = percentiles(latency);
  s.queueing = percentiles(queueing);
  if (s.completed == 0) return s;
  s.makespan_s = last - first;
  if (s.makespan_s > 0) {
    s.requests_per_s = double(s.completed) / s.makespan_s;
    s.output_tokens_per_s = out_tokens / s.makespan_s;
    s.total_tokens_per_s = all_tokens / s.makespan_s;
    s.busy_fraction = r.busy_s / s.makespan_s;
    s.kv_mean_reserved = r.reserved_integral / s.makespan_s;
    s.kv_mean_used = r.used_integral / s.makespan_s;
    s.kv_mean_wasted = s.kv_mean_reserved - s.kv_mean_used;
  }
  s.kv_utilization = s.kv_mean_reserved > 0 ? s.kv_mean_used / s.kv_mean_reserved : 0;
  s.recompute_tokens = r.recompute_tokens;
  s.recompute_fraction = r.busy_s > 0 ? r.recompute_s / r.busy_s : 0;
  if (!r.iterations.empty()) {
    double seqs = 0;
    for (const auto& it : r.iterations) seqs += double(it.sequences);
    s.mean_batch = seqs / double(r.iterations.size());
  }
  return s;
}

std::string chrome_trace_json(const ServingResult& r, const std::string& title) {
  enum { kEngine = 1, kRequests = 2 };
  Spans t;
  t.add("{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":1,\"args\":{\"name\":" + json_string("engine: " + title) + "}}");
  t.add("{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":2,\"args\":{\"name\":\"requests\"}}");
  for (const auto& it : r.iterations) {
    const char* name = it.prefill_tokens > 0 && it.decode_tokens > 0 ? "prefill+decode"
                       : it.prefill_tokens > 0                       ? "prefill"
                                                                     : "decode";
    t.complete(name, kEngine, 0, it.start, it.end,
               "\"prefill_tokens\":" + std::to_string(it.prefill_tokens) + ",\"decode_tokens\":" +
                   std::to_string(it.decode_tokens) + ",\"sequences\":" + std::to_string(it.sequences) +
                   ",\"waiting\":" + std::to_string(it.waiting));
    t.add("{\"name\":\"KV cache (GB)\",\"ph\":\"C\",\"pid\":1,\"ts\":" + fmt_num(it.start * kMicro) +
          ",\"args\":{\"used\":" + fmt_num(it.kv_used / 1e9) + ",\"wasted\":" +
          fmt_num((it.kv_reserved - it.kv_used) / 1e9) + "}}");
  }
  for (const auto& q : r.requests) {
    if (q.rejected) {
      t.add("{\"name\":" + json_string("rejected: " + q.reason) + ",\"ph\":\"i\",\"s\":\"t\",\"pid\":2,\"tid\":" +
            std::to_string(q.id) + ",\"ts\":" + fmt_num(q.arrival * kMicro) + "}");
      continue;
    }
    if (q.completions == 0) continue;
    t.complete("queued", kRequests, q.id, q.arrival, q.scheduled);
    t.complete("prefill", kRequests, q.id, q.scheduled, q.first_token,
               "\"prompt_tokens\":" + std::to_string(q.prompt));
    if (q.last_token > q.first_token)
      t.complete("decode", kRequests, q.id, q.first_token, q.last_token,
                 "\"output_tokens\":" + std::to_string(q.output));
    if (q.finish > q.last_token) t.complete("waits for its batch", kRequests, q.id, q.last_token, q.finish);
  }
  for (const auto& [time, id] : r.preemption_log)
    t.add("{\"name\":\"preempted\",\"ph\":\"i\",\"s\":\"t\",\"pid\":2,\"tid\":" + std::to_string(id) +
          ",\"ts\":" + fmt_num(time * kMicro) + "}");
  return "{\"displayTimeUnit\":\"ms\",\"otherData\":{\"cost_model\":" + json_string(r.cost_model) +
         "},\"traceEvents\":[" + t.out + "\n]}\n";
}

std::string iterations_csv(const ServingResult& r) {
  std::string out =
      "start_s,end_s,prefill_tokens,decode_tokens,prefill_sequences,sequences,running,waiting,kv_blocks,"
      "kv_reserved_bytes,kv_used_bytes,kv_wasted_bytes\n";
  for (const auto& it : r.iterations)
    out += fmt_num(it.start) + "," + fmt_num(it.end) + "," + std::to_string(it.prefill_tokens) + "," +
           std::to_string(it.decode_tokens) + "," + std::to_string(it.prefill_sequences) + "," +
           std::to_string(it.sequences) + "," + std::to_string(it.running) + "," + std::to_string(it.waiting) + "," +
           std::to_string(it.kv_blocks) + "," + fmt_num(it.kv_reserved) + "," + fmt_num(it.kv_used) + "," +
           fmt_num(it.kv_reserved - it.kv_used) + "\n";
  return out;
}

std::string requests_csv(const ServingResult& r) {
  std::string out =
      "id,arrival_s,prompt_tokens,output_tokens,status,reason,scheduled_s,first_token_s,last_token_s,finish_s,"
      "ttft_s,tpot_s,latency_s,queueing_s,preemptions\n";
  auto cell = [](double v) { return std::isnan(v) || v < 0 ? std::string() : fmt_num(v); };
  for (const auto& q : r.requests) {
    const bool done = q.completions > 0;
    const std::string reason = q.reason.empty() ? "" : csv_quoted(q.reason);  // it may hold commas
    out += std::to_string(q.id) + "," + exact(q.arrival) + "," + std::to_string(q.prompt) + "," +
           std::to_string(q.output) + "," + (q.rejected ? "rejected" : done ? "completed" : "unfinished") + "," +
           reason + "," + cell(q.scheduled) + "," + cell(q.first_token) + "," + cell(q.last_token) + "," +
           cell(q.finish) + "," + cell(done ? q.first_token - q.arrival : -1) + "," +
           cell(done && q.output > 1 ? (q.last_token - q.first_token) / double(q.output - 1) : -1) + "," +
           cell(done ? q.finish - q.arrival : -1) + "," + cell(optional_span(q.arrival, q.scheduled)) + "," +
           std::to_string(q.preemptions) + "\n";
  }
  return out;
}

}  // namespace inferlab
