#pragma once
// Tensor and pipeline parallelism of one forward pass (Megatron-LM layout), as one device sees it.
//
// Tensor parallelism over tp GPUs. Each rank holds 1/tp of every layer: the query heads and their
// share of the KV heads (QKV column-parallel, O row-parallel), 1/tp of the MLP's intermediate width
// (gate/up column-parallel, down row-parallel), and 1/tp of the vocabulary for the embedding and the
// lm_head (padded up to a multiple of tp, as vLLM pads it). Norms and residual adds are replicated.
// A rank's FLOPs and bytes are those of shard_model(m, tp) through sim/ops: nothing is re-derived.
//   Heads: tp must divide the query heads and the MLP width. KV heads (vLLM's rule): when tp <=
//   kv_heads, tp must divide them and each rank holds kv_heads / tp; when tp > kv_heads, tp must be a
//   multiple of kv_heads and each KV head is replicated on tp / kv_heads ranks (each rank holds one,
//   its weights and its KV cache included).
//   Communication per layer: two all-reduces of the activations (after o_proj and after down_proj),
//   tokens x hidden x act bytes each; once per pass an all-reduce after the vocabulary-parallel
//   embedding and an all-gather of the logits (logit rows x vocab x 4 bytes).
//
// Collectives (alpha-beta model; B = per-direction link bandwidth = half the bidirectional NVLink
// figure of data/hardware, or PCIe without NVLink; alpha = the link's per-step latency):
//   ring all-reduce of n bytes over p ranks:  2(p-1)/p * n / B + 2(p-1) * alpha
//   ring all-gather (n = the gathered size):   (p-1)/p * n / B + (p-1) * alpha
//   point-to-point send:                       n / B + alpha
//
// Pipeline parallelism over pp stages. Layers are split as evenly as possible (the first L mod pp
// stages hold one more); the embedding runs on the first stage, final norm and lm_head on the last.
// A step's batch is cut into m micro-batches (m divides the batch); with the GPipe schedule the step
// takes (m + pp - 1) slots of the slowest stage plus (pp - 1) stage-to-stage sends of one
// micro-batch's activations (tokens x hidden x act bytes): the bubble is (pp - 1)/(m + pp - 1) of the
// slots. The slowest stage bounds every slot (an overestimate when stages differ, e.g. by the lm_head).
//
// Not counted: overlap of communication with compute (TP collectives sit on the critical path, as
// in a plain Megatron/vLLM forward), sequence parallelism, NVLink SHARP / one-shot all-reduce
// kernels, the host. tp = pp = 1 is the plain model, exactly.
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "inferlab/sim/hardware.h"
#include "inferlab/sim/memory.h"
#include "inferlab/sim/model.h"
#include "inferlab/sim/ops.h"
#include "inferlab/sim/roofline.h"

namespace inferlab {

struct Parallelism {
  int64_t tp = 1;            // tensor-parallel ranks
  int64_t pp = 1;            // pipeline stages
  int64_t microbatches = 1;  // micro-batches a step's batch is cut into
  int64_t devices() const { return tp * pp; }
};

// Throws inferlab::Error naming what does not divide (heads, KV heads, MLP width) or does not fit
// (more stages than layers, non-positive degrees).
void check_parallelism(const ModelConfig& m, const Parallelism& p);
int64_t kv_heads_per_rank(const ModelConfig& m, int64_t tp);
int64_t vocab_per_rank(const ModelConfig& m, int64_t tp);  // ceil(vocab / tp): the padded slice
// One rank's slice of every layer (heads, KV heads, MLP width, vocabulary); the layer count unchanged.
ModelConfig shard_model(const ModelConfig& m, int64_t tp);
std::vector<int64_t> stage_layers(int64_t layers, int64_t pp);
// What one device of `stage` holds: shard_model(m, tp) with that stage's layers.
ModelConfig stage_model(const ModelConfig& m, const Parallelism& p, int64_t stage);
// Parameters on one device of `stage`: its layers' slices, the embedding slice on the first stage,
// the final norm and the lm_head slice on the last (a tied embedding is kept again there when pp > 1).
double stage_params(const ModelConfig& m, const Parallelism& p, int64_t stage);

struct Link {
  std::string name;        // "NVLink" or "PCIe"
  double bandwidth = 0;    // bytes/s per direction
  double latency_s = 0;    // alpha
};
// NVLink when the hardware has it, else PCIe. Throws when the hardware file gives no latency.
Link interconnect(const Hardware& hw);

enum class Collective { all_reduce, all_gather, send };
std::string collective_name(Collective c);
// Time of one collective of `bytes` (the whole tensor) over `ranks` ranks; 0 for one rank.
double collective_time(Collective c, double bytes, int64_t ranks, const Link& link);

struct CommOp {
  std::string name;  // "attn_allreduce", "mlp_allreduce", "embed_allreduce", "logits_allgather", "stage_send"
  Collective kind = Collective::all_reduce;
  int64_t ranks = 1;
  int64_t count = 1;   // instances per pass of one micro-batch
  double bytes = 0;    // per instance
  double time_s = 0;   // per instance
  double total_s() const { return time_s * double(count); }
};

struct StagePrediction {
  int64_t stage = 0, layers = 0;
  StepPrediction compute;      // one micro-batch on one device of the stage
  std::vector<CommOp> comm;    // its tensor-parallel collectives
  double comm_s = 0;
  double time_s() const { return compute.time_s + comm_s; }
};

struct ParallelPrediction {
  Parallelism par;
  Link link;
  std::vector<StagePrediction> stages;  // each for one micro-batch
  std::size_t slowest = 0;
  CommOp send;                          // one stage boundary, one micro-batch (count 0 when pp = 1)
  double stage_s = 0;                   // the slowest stage's slot
  // The step on the critical path: time = compute + tp_comm + send + bubble, where
  //   compute = m x slowest stage's compute, tp_comm = m x its collectives,
  //   send = (pp - 1) x one send, bubble = (pp - 1) x stage_s.
  double time_s = 0, compute_s = 0, tp_comm_s = 0, send_s = 0, bubble_s = 0;
  double bubble_fraction = 0;           // (pp - 1) / (m + pp - 1)
  double comm_share() const { return time_s > 0 ? (tp_comm_s + send_s) / time_s : 0; }
};

// The step whose micro-batches each do `microbatch` (par.microbatches of them).
ParallelPrediction predict_parallel(const ModelConfig& m, const Batch& microbatch, const OpOptions& o,
                                    const Hardware& hw, const Parallelism& par);
// The ops one device runs for one micro-batch, given its stage's model (stage_model): batch_ops by default,
// or a kernel-level list such as sim/engine_step.h's engine_step_ops for the GPU engine's own launches.
// Ops scoped before / after the layers are kept on the first / last stage only.
using StageOps = std::function<std::vector<Op>(const ModelConfig& stage, const Batch& microbatch)>;
ParallelPrediction predict_parallel(const ModelConfig& m, const Batch& microbatch, const OpOptions& o,
                                    const Hardware& hw, const Parallelism& par, const StageOps& ops);
// A uniform step cut into par.microbatches micro-batches (which must divide its batch).
ParallelPrediction predict_parallel(const ModelConfig& m, const Step& step, const OpOptions& o, const Hardware& hw,
                                    const Parallelism& par);

// Memory of the fullest device: its stage's weights, the KV cache of the whole batch for its layers
// and KV heads, and the activations of one micro-batch's pass (sim/memory.h on stage_model).
struct DeviceMemory {
  int64_t stage = 0;
  MemoryBreakdown breakdown;
};
DeviceMemory device_memory(const ModelConfig& m, int64_t batch, int64_t context, const MemoryOptions& o,
                           const Parallelism& par);

}  // namespace inferlab
