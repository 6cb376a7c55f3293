// The parallel_engine scenario's plain side (parallel_engine.h): the point, sim/parallel.h's prediction of
// the sharded engine's step and the rows.
#include "inferlab/experiments/parallel_engine.h"

#include "inferlab/experiments/scenarios.h"
#include "inferlab/kernels/engine/arch.h"
#include "inferlab/sim/engine_step.h"
#include "inferlab/sim/error.h"

namespace inferlab {

Batch ParallelEngineConfig::microbatch() const {
  Batch b;
  b.kv_block_size = 16;  // the engine's KV block size
  const int64_t n = batch / par.microbatches;
  // decode: the middle timed step (contexts context - repeats + 1 .. context); prefill: whole prompts.
  const SequenceWork s = phase == "decode" ? SequenceWork{1, context - (repeats + 1) / 2, n, 1} : SequenceWork{context, 0, n, 1};
  b.sequences.push_back(s);
  return b;
}

ParallelEngineConfig parallel_engine_config(const Params& p) {
  ParallelEngineConfig c;
  c.model = p.at("model");
  // The engine's reading of the config: an architecture it does not run is refused, measured or not.
  c.config = load_engine_model(c.model).model;
  c.hardware = load_hardware(p.at("hardware"), p.at("ceilings"));
  c.par.tp = param_int(p, "tp");
  c.par.pp = param_int(p, "pp");
  c.par.microbatches = p.at("microbatches") == "pp" ? c.par.pp : param_int(p, "microbatches");
  check_parallelism(c.config, c.par);
  c.phase = p.at("phase");
  if (c.phase != "decode" && c.phase != "prefill") throw Error("parameter 'phase': '" + c.phase + "' is not decode or prefill");
  c.batch = param_int(p, "batch");
  c.context = param_int(p, "context");
  if (c.batch % c.par.microbatches != 0)
    throw Error(std::to_string(c.par.microbatches) + " micro-batches do not divide the batch of " + std::to_string(c.batch));
  c.warmup = param_int(p, "warmup", 0);
  c.repeats = param_int(p, "repeats");
  if (c.phase == "decode" && c.context <= c.repeats + c.warmup)
    throw Error("decode: context " + std::to_string(c.context) + " must exceed warmup + repeats (" +
                std::to_string(c.warmup + c.repeats) + "): the timed steps end at the context");
  if (c.config.max_positions > 0 && c.context > c.config.max_positions)
    throw Error("context " + std::to_string(c.context) + " exceeds " + c.config.name + "'s max_position_embeddings " +
                std::to_string(c.config.max_positions));
  c.graphs = param_bool(p, "graphs");
  c.communicator = p.at("communicator");
  if (c.communicator != "nccl" && c.communicator != "local")
    throw Error("parameter 'communicator': '" + c.communicator + "' is not nccl or local");
  c.seed = uint64_t(param_int(p, "seed", 0));
  return c;
}

ParallelPrediction predict_parallel_engine(const ParallelEngineConfig& c) {
  OpOptions o;
  o.precision = Precision{DType::bf16, DType::bf16, DType::bf16};
  const LaunchMode launch = c.phase == "decode" && c.graphs ? LaunchMode::graph : LaunchMode::eager;
  const Hardware& hw = c.hardware;
  return predict_parallel(c.config, c.microbatch(), o, hw, c.par, [&](const ModelConfig& stage, const Batch& mb) {
    return engine_step_ops(stage, mb, o, hw, launch);
  });
}

std::vector<Row> parallel_engine_rows(const ParallelEngineConfig& c, const std::optional<ParallelEngineMeasurement>& m) {
  const ParallelPrediction p = predict_parallel_engine(c);
  const std::string layout = "TP" + std::to_string(c.par.tp) + " PP" + std::to_string(c.par.pp) +
                             (c.par.pp > 1 ? " m" + std::to_string(c.par.microbatches) : "");
  auto v = [&](double x) { return m ? num(x) : std::string(); };
  const CommOp* allreduce = nullptr;  // one of the step's per-layer all-reduces, as sim/parallel charged it
  for (const CommOp& op : p.stages[p.slowest].comm)
    if (op.name == "attn_allreduce") allreduce = &op;
  Row r{{"layout", layout},
        {"tp", num(c.par.tp)},
        {"pp", num(c.par.pp)},
        {"microbatches", num(c.par.microbatches)},
        {"phase", c.phase},
        {"batch", num(c.batch)},
        {"context", num(c.context)},
        {"measured_s", v(m ? m->step_s : 0)},
        {"measured_p10_s", v(m ? m->p10_s : 0)},
        {"measured_p90_s", v(m ? m->p90_s : 0)},
        {"measured_gpu_s", v(m ? m->gpu_s : 0)},
        {"predicted_s", num(p.time_s)},
        {"error", m && m->step_s > 0 ? num(p.time_s / m->step_s - 1) : ""},
        {"predicted_compute_s", num(p.compute_s)},
        {"predicted_tp_comm_s", num(p.tp_comm_s)},
        {"predicted_send_s", num(p.send_s)},
        {"predicted_bubble_s", num(p.bubble_s)},
        {"comm_share", num(p.comm_share())},
        {"predicted_allreduce_s", allreduce ? num(allreduce->time_s) : ""},
        {"measured_allreduce_graph_s", m && m->allreduce_graph_s > 0 ? num(m->allreduce_graph_s) : ""},
        {"measured_allreduce_eager_s", m && m->allreduce_eager_s > 0 ? num(m->allreduce_eager_s) : ""},
        {"link", p.link.name},
        {"link_alpha_s", num(p.link.latency_s)},
        {"link_bandwidth_bytes_per_s", num(p.link.bandwidth)},
        {"interconnect_source", c.hardware.interconnect_source},
        {"ceilings", c.hardware.ceilings_source},
        {"graph_replayed", m ? (m->graphs ? "true" : "false") : ""},
        {"device", m ? m->device : ""}};
  return {r};
}

}  // namespace inferlab
