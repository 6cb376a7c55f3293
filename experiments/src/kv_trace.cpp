// The kv_trace scenario: a request trace served by a fixed number of slots, one token per request
// per decode step, with the KV cache held three ways at once:
//   contiguous   each admitted request reserves max_len tokens (what a server without paging does)
//   paged-B      blocks of B tokens taken as the request grows (B = 8, 16, 32)
// "Measured" is the real allocator (kernels/kvcache/allocator.h) counting the blocks it handed
// out; "predicted" is sim/memory.h's formula on the same token counts; they must agree exactly.
#include <algorithm>
#include <deque>
#include <map>
#include <numeric>

#include "inferlab/experiments/scenarios.h"
#include "inferlab/kernels/kvcache/allocator.h"
#include "inferlab/sim/error.h"
#include "inferlab/sim/trace.h"

namespace inferlab {
namespace {

struct Scheme {
  std::string name;
  int64_t block;  // tokens per block (max_len for contiguous)
  PagedKvManager manager;
  double used_sum = 0, reserved_sum = 0;
};

}  // namespace

std::vector<Row> kv_trace_rows(const Params& p) {
  const ModelConfig model = with_kv_heads(load_model(p.at("model")), p.at("kv_heads"));
  const DType kv = p.at("dtype") == "model" ? model.dtype : parse_dtype(p.at("dtype"));
  TraceSpec ts;
  ts.seed = uint64_t(param_int(p, "seed", 0));
  ts.requests = param_int(p, "requests");
  ts.rate = param_double(p, "rate");
  const int64_t max_len = param_int(p, "max_len", 2), slots = param_int(p, "slots"), every = param_int(p, "every");
  check_context(p, model, max_len, "max_len");
  ts.max_tokens = max_len;
  const std::vector<Request> trace = generate_trace(ts);
  const double per_token = kv_bytes_per_token(model, kv);

  std::vector<Scheme> schemes;
  schemes.push_back({"contiguous", max_len, PagedKvManager(slots, max_len, 1)});
  for (int64_t b : {8, 16, 32}) {
    const int64_t per_seq = (max_len + b - 1) / b;
    schemes.push_back({"paged-" + std::to_string(b), b, PagedKvManager(slots * per_seq, b, per_seq)});
  }

  struct Active {
    Request r;
    int slot;
    int64_t tokens;
  };
  std::vector<Active> active;
  std::vector<int> free_slots;
  for (int s = int(slots) - 1; s >= 0; --s) free_slots.push_back(s);
  std::size_t next = 0;
  std::vector<Row> rows;
  int64_t step = 0;
  while (next < trace.size() || !active.empty()) {
    // Admit arrived requests into free slots, first come first served; the prompt is prefilled.
    while (next < trace.size() && trace[next].arrival <= double(step) && !free_slots.empty()) {
      Active a{trace[next++], free_slots.back(), 0};
      free_slots.pop_back();
      a.tokens = a.r.prompt;
      for (auto& s : schemes) s.manager.grow(a.slot, a.tokens);
      active.push_back(a);
    }
    // One decode step: every active request appends a token; finished ones release their memory.
    for (auto& a : active) {
      ++a.tokens;
      for (auto& s : schemes) s.manager.grow(a.slot, a.tokens);
    }
    std::vector<int64_t> tokens;
    double future = 0, never = 0;
    for (const auto& a : active) {
      tokens.push_back(a.tokens);
      future += double(a.r.prompt + a.r.output - a.tokens);
      never += double(max_len - a.r.prompt - a.r.output);
    }
    const double used = std::accumulate(tokens.begin(), tokens.end(), 0.0) * per_token;
    for (auto& s : schemes) {
      const double measured = double(s.manager.allocator().used_blocks() * s.block) * per_token;
      const KvReservation pred = s.name == "contiguous" ? contiguous_kv(model, kv, tokens, max_len)
                                                       : paged_kv(model, kv, tokens, s.block);
      if (pred.reserved != measured)
        throw Error("kv_trace: the allocator holds " + num(measured) + " bytes where sim/memory predicts " +
                    num(pred.reserved) + " (" + s.name + ", step " + std::to_string(step) + ")");
      s.used_sum += used;
      s.reserved_sum += measured;
      if (step % every == 0) {
        const bool contiguous = s.name == "contiguous";
        rows.push_back(Row{{"step", num(step)},
                           {"scheme", s.name},
                           {"block_size", num(s.block)},
                           {"active", num(int64_t(active.size()))},
                           {"waiting", num(int64_t(std::count_if(trace.begin() + std::ptrdiff_t(next), trace.end(),
                                                                 [&](const Request& r) { return r.arrival <= double(step); })))},
                           {"used_bytes", num(used)},
                           {"reserved_bytes", num(measured)},
                           {"predicted_reserved_bytes", num(pred.reserved)},
                           {"reserved_for_future_bytes", num(contiguous ? future * per_token : 0.0)},
                           {"internal_fragmentation_bytes",
                            num(contiguous ? never * per_token : measured - used)},
                           {"external_fragmentation_bytes", "0"},
                           {"utilization", num(measured > 0 ? used / measured : 1.0)}});
      }
    }
    for (std::size_t i = 0; i < active.size();) {
      if (active[i].tokens >= active[i].r.prompt + active[i].r.output) {
        for (auto& s : schemes) s.manager.release(active[i].slot);
        free_slots.push_back(active[i].slot);
        active[i] = active.back();
        active.pop_back();
      } else {
        ++i;
      }
    }
    ++step;
  }
  // Time averages over every step: the share of reserved KV memory that holds tokens.
  for (const auto& s : schemes)
    rows.push_back(Row{{"step", "mean"},
                       {"scheme", s.name},
                       {"block_size", num(s.block)},
                       {"active", ""},
                       {"waiting", ""},
                       {"used_bytes", num(s.used_sum / double(step))},
                       {"reserved_bytes", num(s.reserved_sum / double(step))},
                       {"predicted_reserved_bytes", ""},
                       {"reserved_for_future_bytes", ""},
                       {"internal_fragmentation_bytes", ""},
                       {"external_fragmentation_bytes", "0"},
                       {"utilization", num(s.used_sum / s.reserved_sum)}});
  return rows;
}

}  // namespace inferlab
