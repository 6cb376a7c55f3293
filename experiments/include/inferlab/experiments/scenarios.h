#pragma once
// Scenarios turn one experiment point (a map of parameters) into result rows. Each scenario lists
// the parameters it takes, with defaults; the runner rejects any other parameter. The CLI verbs
// `model` and `memory` evaluate the same functions, so the table a user reads and the rows an
// experiment writes never disagree.
//
//   model   one row per operator of a forward step + a `total` row: FLOPs, bytes by role,
//           arithmetic intensity, roofline terms, predicted time, bound, share of the step.
//   memory  one row per point: weights, KV cache, activations, fit on the hardware, the largest
//           batch / context that fits, contiguous vs paged KV reservation.
//   model with tp/pp/microbatches: the op rows are one device of the slowest pipeline stage for one
//           micro-batch, followed by its collectives (op_class communication); the total row is the
//           whole step (sim/parallel.h) with its compute / communication / bubble split.
//   parallel   one row per point: per-device memory and the step's time split for a TP x PP layout;
//              tokens_per_s is one batch at a time, pipelined_tokens_per_s the pipeline kept full
//              (pp batches in flight, whose extra KV caches the memory columns do not count).
//   serving    a request trace through the serving simulator (sim/serving.h): one summary row, and
//              with sample_every_s > 0 rows of the KV memory over time (row = timeline).
//   speculative  speedup of speculative decoding at (alpha, gamma) for a drafter (sim/speculative.h).
//   linear  one row per point: a linear layer m x n x k in one weight format (sim/linear.h), its
//           predicted time beside that of bf16 on the same shape (the predicted speedup), and on
//           a GPU the measured time, the measured cuBLAS bf16 time and the output's error.
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "inferlab/experiments/results.h"
#include "inferlab/experiments/spec.h"
#include "inferlab/sim/hardware.h"
#include "inferlab/sim/linear.h"
#include "inferlab/sim/memory.h"
#include "inferlab/sim/model.h"
#include "inferlab/sim/ops.h"
#include "inferlab/sim/parallel.h"
#include "inferlab/sim/roofline.h"
#include "inferlab/experiments/serve_engine.h"
#include "inferlab/sim/serving.h"

namespace inferlab {

struct ParamInfo {
  std::string name;
  std::string fallback;  // default value; empty = required
  std::string help;
};

struct Scenario {
  std::string name;
  std::string help;
  std::vector<ParamInfo> params;
  std::function<std::vector<Row>(const Params&)> predict;  // rows without the point's own parameters
  // Measured side, present only where a kernel exists (and the binary has CUDA). preflight runs for
  // every point before the first launch (fit in memory, the GPU is the hardware predicted for);
  // measure fills the measured columns of the point's predicted rows.
  std::function<void(const Params&)> preflight;
  std::function<void(const Params&, std::vector<Row>&)> measure;
  bool kernels = false;  // a kernel measures it in a build with CUDA (whether or not this one has it)
};

const std::vector<Scenario>& scenarios();
const Scenario& find_scenario(const std::string& name);  // unknown: inferlab::Error listing the known ones
// The point's parameters completed with the scenario's defaults. An unknown or missing parameter
// throws inferlab::Error naming it and the scenario's parameters.
Params complete_params(const Scenario& s, const Params& given);

// Typed evaluation shared by the CLI verbs and the scenarios.
struct ModelPoint {
  ModelConfig model;
  Hardware hardware;
  Step step;
  OpOptions options;
  Parallelism par;
  ParallelPrediction parallel;  // the whole step on par (tp = pp = 1: the plain model)
  StepPrediction prediction;    // one device of the slowest stage, one micro-batch
  DeviceMemory memory;          // the fullest device, with the memory scenario's default options
};
ModelPoint evaluate_model_point(const Params& p);
std::vector<Row> model_rows(const ModelPoint& mp);

struct MemoryPoint {
  ModelConfig model;
  bool has_hardware = false;
  Hardware hardware;
  int64_t batch = 0, context = 0, max_len = 0, block_size = 0;
  MemoryOptions options;
  MemoryBreakdown breakdown;
  int64_t max_batch = 0, max_context = 0;
  int64_t max_positions = 0;          // the context limit of the point (param_max_positions)
  std::string max_context_limit;      // what bounds max_context: "memory", "max positions" or "search cap"
  KvReservation contiguous, paged;
};
MemoryPoint evaluate_memory_point(const Params& p);
std::vector<Row> memory_rows(const MemoryPoint& mp);

struct AttentionPoint {
  Hardware hardware;
  AttentionShape shape;
  AttentionVariant variant = AttentionVariant::flash;
  // The flash rung the point names (variant flash-overlapped or flash-wgmma: kernels/attention/attention.h
  // FlashKernel by name); "automatic" for variant flash (the fastest rung the GPU has) and for naive.
  std::string flash_kernel = "automatic";
  DType dtype = DType::bf16;
  Op cost;
  Prediction prediction;
};
AttentionPoint evaluate_attention_point(const Params& p);
std::vector<Row> attention_rows(const AttentionPoint& ap);

struct DecodePoint {
  Hardware hardware;
  AttentionShape shape;  // new_tokens 1, past_tokens context - 1, block_size (paged) and splits set
  std::string variant;   // plain or split
  std::string layout;    // contiguous or paged
  DType dtype = DType::bf16;
  Op cost;
  Prediction prediction;
};
DecodePoint evaluate_decode_point(const Params& p);
std::vector<Row> decode_rows(const DecodePoint& dp);

// parallel: the model point's step and memory on a TP x PP layout, as one row.
std::vector<Row> parallel_rows(const ModelPoint& mp);

struct LinearPoint {
  Hardware hardware;
  LinearShape shape;
  WeightFormat format = WeightFormat::bf16;
  Op cost, bf16_cost;                     // the format's and dense bf16's on the same shape
  Prediction prediction, bf16_prediction;
};
LinearPoint evaluate_linear_point(const Params& p);
std::vector<Row> linear_rows(const LinearPoint& lp);

// kv_trace: contiguous vs paged KV memory over a served request trace (src/kv_trace.cpp).
std::vector<Row> kv_trace_rows(const Params& p);

// serving (src/serving_scenario.cpp).
struct ServingPoint {
  ModelConfig model;
  Hardware hardware;
  Precision precision;
  int64_t tp = 1;
  ServingConfig config;
  std::string trace_source;  // the file, or how the trace was generated
  std::vector<Request> trace;
  ServingResult result;
  ServingSummary summary;
};
// The scheduling parameters both serving scenarios take: scheduler, priority, kv, admission, block_size.
void read_scheduling(const Params& p, ServingConfig& c);
ServingPoint evaluate_serving_point(const Params& p);
std::vector<Row> serving_rows(const ServingPoint& sp, double sample_every_s);

// serving_engine (src/serving_engine_scenario.cpp): a trace on the GPU engine beside the simulator with
// the roofline and with the measured step cost, sharing the engine's KV memory (kv_gib).
struct ServingEnginePoint {
  ModelConfig model;
  Hardware hardware;
  EngineServeOptions options;
  ServingConfig config;
  int64_t kv_blocks = 0;
  std::vector<Request> trace;  // arrivals at 0 when offline
  ServingResult des_roofline;
  std::optional<ServingResult> des_measured;  // when the step-cost file exists
  std::string step_cost_source;
  std::optional<EngineServeResult> engine;    // measured
};
ServingEnginePoint plan_serving_engine(const Params& p);
std::vector<Row> serving_engine_rows(const ServingEnginePoint& sp, double sample_every_s);

// speculative (src/speculative_scenario.cpp).
std::vector<Row> speculative_rows(const Params& p);

// Measured columns. The raw ones are what a kernel measurement gives (its times, its kernels, the
// baseline's time, the output's error) and the GPU and commit it was measured on; they are what a
// run keeps from an earlier one. The derived ones (measured FLOP/s and GB/s, model error, speedup)
// come from the raw ones and the row's own cost and prediction, and are computed again with them.
const std::vector<std::string>& raw_measured_columns();
void derive_measured(Row& row);

// A row of one operator: its cost, its roofline prediction, and empty measured columns.
Row op_row(const Op& op, const Prediction& pr, double step_time_s);
// Sets (or adds) a column of a row.
void set_cell(Row& row, const std::string& column, const std::string& value);
std::string get_cell(const Row& row, const std::string& column);

// Parameter parsing shared by the scenarios and the CLI: errors name the parameter.
int64_t param_int(const Params& p, const std::string& name, int64_t min_value = 1);
double param_double(const Params& p, const std::string& name);
bool param_bool(const Params& p, const std::string& name);
Precision param_precision(const Params& p, const ModelConfig& m);  // dtype / weight_dtype / act_dtype / kv_dtype
std::optional<WeightFormat> param_weight_format(const Params& p);  // weight_format: none (absent) or a format
// The longest context a point may use: the model's max_position_embeddings ('model', the default),
// or the number a point's max_positions gives (to compute past what the model was trained for);
// 0: the config states none. check_context throws inferlab::Error when `tokens` exceed it, so that
// model, memory, serving and speculative agree on what a model can hold.
int64_t param_max_positions(const Params& p, const ModelConfig& m);
void check_context(const Params& p, const ModelConfig& m, int64_t tokens, const std::string& what);

}  // namespace inferlab
