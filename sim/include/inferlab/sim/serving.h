#pragma once
// A deterministic discrete-event simulator of one LLM serving engine: a request trace goes through a
// scheduler and a KV-cache allocator; every iteration's time comes from a StepCostModel (step_cost.h,
// the sim/ roofline of the iteration's mixed prefill/decode pass by default).
//
// Events are ordered by (time, type, id): at equal times an iteration's end (type 0: its tokens are
// emitted, finished requests free their KV) comes before arrivals (type 1, by request id); the next
// iteration is scheduled once every event at that instant has been handled. Nothing else (no
// container order, no wall clock, no unseeded randomness) decides anything, so a trace and a
// configuration always give the same result.
//
// Requests: a prompt of P tokens and O output tokens. The pass that completes the prompt samples the
// first output token; each later decode feeds the last token and samples the next, so a request needs
// 1 prefill (or several chunks) and O - 1 decodes and holds at most P + O - 1 tokens of KV cache.
// A request with P + O > max_len, or whose P + O - 1 tokens need more KV blocks than the whole KV
// memory holds, is rejected on arrival with the reason (never dropped silently).
//
// Schedulers (all first come, first served; the head of the queue blocks those behind it):
//   static      request-level batching: when the engine is idle it takes up to max_batch waiting
//               requests, prefills them (whole prompts, passes of at most max_batch_tokens tokens) and
//               decodes them together until the longest one
//               ends; a finished request keeps its slot and its KV until then, when all the batch's
//               responses return and the next batch starts (request-level scheduling as Orca
//               describes it). Prompts are not padded to the longest (a varlen prefill).
//   continuous  iteration-level batching: finished requests leave and waiting ones join at every
//               iteration; a prompt is prefilled whole in one pass (max_batch_tokens bounds the
//               prompt tokens of a pass; decodes are bounded by max_batch only).
//   chunked     continuous, with prompts cut into chunks so that every pass holds at most
//               max_batch_tokens tokens (Sarathi-Serve, vLLM's chunked prefill).
// Priority (continuous and chunked):
//   prefill_first  new prompts go first: continuous runs an iteration of prefills alone while decodes
//                  wait (vLLM v0); chunked gives the token budget to prompt chunks, decodes get the rest.
//   decode_first   running decodes are never paused: every iteration decodes all of them, and prompts
//                  (whole, or chunks in the remaining budget) join the same pass (Orca; Sarathi's
//                  stall-free batching).
// KV layouts (sim/kv_blocks.h: memory in blocks of B tokens; capacity = floor(KV bytes / (B x bytes per
// token)); the simulator's own block manager has B = block_tokens(config), the engine's its own B):
//   contiguous  a request reserves max_len tokens when admitted, whatever it will use (B = max_len).
//   paged       B = block_size. Admission:
//     reserve     a request reserves its prompt and every output token (P + O - 1) when admitted and
//                 never grows: no preemption ever (TensorRT-LLM's GUARANTEED_NO_EVICT).
//     optimistic  (default) a request takes the blocks of its prompt when admitted (only if a
//               watermark of admission_watermark x all blocks stays free while others run: vLLM's 1%,
//               headroom for the running decodes) and one block at a time as it decodes. When a
//               decode finds no free block, the most recently
//               admitted request is preempted (recompute, as vLLM v0): its blocks are freed and it
//               rejoins the front of the queue; when readmitted it prefills its prompt and the tokens
//               it had already emitted (which stay emitted), then continues.
// Recompute is logged: the tokens preemptions threw away, and the share of iteration time spent storing
// them again (each pass's time apportioned by its tokens).
// Not modelled: padding (of static batches' prompts, or of finished rows), swapping to host memory,
// prefix caching, a scheduler or sampler time on the host, several batches in flight (pipelining).
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "inferlab/sim/kv_blocks.h"
#include "inferlab/sim/step_cost.h"
#include "inferlab/sim/trace.h"

namespace inferlab {

enum class Scheduler { static_batching, continuous, chunked };
enum class Priority { prefill_first, decode_first };
enum class Admission { optimistic, reserve };
std::string scheduler_name(Scheduler s);  // "static", "continuous", "chunked"
Scheduler parse_scheduler(const std::string& s);
std::string priority_name(Priority p);    // "prefill-first", "decode-first"
Priority parse_priority(const std::string& s);
std::string admission_name(Admission a);  // "optimistic", "reserve"
Admission parse_admission(const std::string& s);

struct ServingConfig {
  Scheduler scheduler = Scheduler::continuous;
  Priority priority = Priority::prefill_first;
  KvLayout kv = KvLayout::paged;
  Admission admission = Admission::optimistic;  // paged only (contiguous always reserves max_len)
  int64_t block_size = 16;        // paged: tokens per block
  int64_t max_len = 2048;         // longest request (prompt + output) served; what contiguous reserves
  int64_t max_batch = 256;        // sequences admitted at once
  int64_t max_batch_tokens = 0;   // tokens per pass; 0: default_batch_tokens
  double admission_watermark = 0.01;  // paged: share of the blocks admission leaves free (vLLM's default)
  double kv_capacity_bytes = 0;   // KV memory on one device
  double kv_bytes_per_token = 0;  // one token's K and V for every layer held by that device
  bool record_iterations = true;  // keep every iteration (timeline, Chrome trace, memory checks)
};
// vLLM's defaults: a 2048-token chunk budget with chunked prefill; otherwise max(max_len, 2048), so
// that the longest prompt fits one pass.
int64_t default_batch_tokens(const ServingConfig& c);
int64_t block_tokens(const ServingConfig& c);  // B: block_size (paged) or max_len (contiguous)

// The KV memory an engine keeps on each device: utilization x capacity - the device's weights - the
// activations of its largest pass (a prefill of max_batch_tokens tokens), as vLLM sizes its cache.
// Throws when nothing is left.
double serving_kv_capacity(const ModelConfig& m, const Hardware& hw, const Precision& p, int64_t tp, double utilization,
                           int64_t max_batch_tokens);

struct RequestResult {
  int64_t id = 0;
  double arrival = 0;
  int64_t prompt = 0, output = 0;
  bool rejected = false;
  std::string reason;         // why it was rejected
  double scheduled = -1;      // first admitted
  double first_token = -1;    // end of the pass that sampled its first output token
  double last_token = -1;     // end of the pass that sampled its last one
  double finish = -1;         // its response returns (static: when its batch ends)
  int64_t preemptions = 0;
  int64_t completions = 0;    // 1 once finished
};

struct Iteration {
  double start = 0, end = 0;
  int64_t prefill_tokens = 0, decode_tokens = 0;
  int64_t prefill_sequences = 0, sequences = 0;
  int64_t running = 0, waiting = 0;  // admitted and queued when it started
  double kv_reserved = 0;            // bytes set aside during the pass
  double kv_used = 0;                // bytes holding tokens by its end
  int64_t kv_blocks = 0;             // blocks in use
  int64_t recompute_tokens = 0;      // prefill tokens storing again what a preemption threw away
};

struct ServingResult {
  std::vector<RequestResult> requests;  // in trace order
  std::vector<Iteration> iterations;    // when recorded
  std::vector<std::pair<double, int64_t>> preemption_log;  // (time, request id)
  std::string cost_model;
  int64_t iteration_count = 0;
  int64_t block_tokens = 0, blocks_total = 0;  // the allocator's block size and block count
  int64_t blocks_allocated = 0, blocks_freed = 0, peak_blocks = 0;
  double kv_capacity = 0;               // bytes of KV memory
  double kv_bytes_per_token = 0;
  double reserved_integral = 0, used_integral = 0;  // byte-seconds over the iterations
  double busy_s = 0;                    // time spent in iterations
  int64_t recompute_tokens = 0;         // stored tokens preemptions threw away
  double recompute_s = 0;               // iteration time apportioned to storing them again
};

// Runs the trace (sorted by arrival; ids 0..n-1 in order). Throws inferlab::Error on a bad
// configuration (non-positive sizes, a KV memory that cannot hold max_len tokens at all) or a
// non-positive step time. The KV block manager is the simulator's own (blocks of block_tokens(config)),
// or `kv` when given (the geometry of another, e.g. the engine's: then it must be empty).
ServingResult simulate_serving(const std::vector<Request>& trace, const ServingConfig& config, StepCostModel& cost);
ServingResult simulate_serving(const std::vector<Request>& trace, const ServingConfig& config, StepCostModel& cost,
                               PagedKvManager& kv);
// Blocks of a simulator's own manager: floor(KV bytes / (block_tokens x bytes per token)); throws when none.
int64_t serving_kv_blocks(const ServingConfig& config);
// Checks a configuration and a trace as simulate_serving does (for the other drivers).
void check_serving(const std::vector<Request>& trace, const ServingConfig& config);

struct ScheduledSequence;
// The engine's side of the one scheduler: runs a planned pass and keeps the clock.
class StepRunner {
 public:
  virtual ~StepRunner() = default;
  virtual double now() = 0;                 // seconds since the start of the run
  virtual void wait_until(double t) = 0;    // nothing to run: idle until t (the next arrival)
  // Runs the pass that starts at `start`; returns when it ended (> start).
  virtual double run(const std::vector<ScheduledSequence>& step, const Batch& batch, double start) = 0;
  virtual std::string describe() const = 0;
};
// The engine loop: arrivals up to now() join, the scheduler plans a pass, the runner runs it, the pass
// completes; idle until the next arrival when nothing can run. For a runner whose pass takes what a
// StepCostModel says, it makes the same iterations as simulate_serving with that model and manager.
ServingResult serve_iterations(const std::vector<Request>& trace, const ServingConfig& config, PagedKvManager& kv,
                               StepRunner& runner);

struct Percentiles {
  int64_t n = 0;
  double mean = 0, p50 = 0, p90 = 0, p99 = 0, max = 0;
};
// Linear interpolation between closest ranks (numpy's default); all zero for an empty set.
Percentiles percentiles(std::vector<double> values);

struct ServingSummary {
  int64_t requests = 0, completed = 0, rejected = 0, preemptions = 0, iterations = 0;
  double makespan_s = 0;                 // first arrival to last response
  double requests_per_s = 0, output_tokens_per_s = 0, total_tokens_per_s = 0;
  Percentiles ttft, tpot, latency, queueing;  // seconds; TPOT over requests with 2+ output tokens
  double mean_batch = 0;                 // sequences per iteration
  double busy_fraction = 0;              // of the makespan
  double kv_capacity = 0, kv_peak_reserved = 0;
  double kv_mean_reserved = 0, kv_mean_used = 0, kv_mean_wasted = 0;  // time averages over the makespan
  double kv_utilization = 0;             // mean used / mean reserved
  int64_t recompute_tokens = 0;          // stored tokens preemptions threw away
  double recompute_fraction = 0;         // of the busy time, spent storing them again
};
ServingSummary summarize(const ServingResult& r);

// The pass running at t = 0, every, 2 x every, ... up to the last pass's end (an empty Iteration while
// idle: nothing is held then): KV memory over time. Empty without recorded iterations; every > 0.
std::vector<std::pair<double, Iteration>> sample_iterations(const ServingResult& r, double every);

// The timeline as Chrome trace JSON (chrome://tracing, ui.perfetto.dev): the engine's iterations
// (prefill/decode tokens in their args) and KV memory counters, and per request its queueing,
// prefill and decode spans and preemptions. Needs recorded iterations.
std::string chrome_trace_json(const ServingResult& r, const std::string& title);
// One CSV row per iteration: start_s,end_s,prefill_tokens,decode_tokens,prefill_sequences,sequences,
// running,waiting,kv_blocks,kv_reserved_bytes,kv_used_bytes,kv_wasted_bytes.
std::string iterations_csv(const ServingResult& r);
// One CSV row per request: id,arrival_s,prompt_tokens,output_tokens,status,reason,scheduled_s,
// first_token_s,last_token_s,finish_s,ttft_s,tpot_s,latency_s,queueing_s,preemptions.
std::string requests_csv(const ServingResult& r);

}  // namespace inferlab
