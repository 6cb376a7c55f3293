#include "inferlab/sim/parallel.h"

#include <algorithm>

#include "inferlab/sim/error.h"

namespace inferlab {
namespace {

std::string str(int64_t v) { return std::to_string(v); }

bool on_stage(const Op& op, int64_t stage, int64_t pp) {
  if (op.scope == OpScope::before_layers) return stage == 0;
  if (op.scope == OpScope::after_layers) return stage == pp - 1;
  return true;
}

CommOp comm(std::string name, Collective kind, int64_t ranks, int64_t count, double bytes, const Link& link) {
  return CommOp{std::move(name), kind, ranks, count, bytes, collective_time(kind, bytes, ranks, link)};
}

}  // namespace

void check_parallelism(const ModelConfig& m, const Parallelism& p) {
  if (p.tp < 1) throw Error("tensor-parallel degree must be at least 1, got " + str(p.tp));
  if (p.pp < 1) throw Error("pipeline-parallel degree must be at least 1, got " + str(p.pp));
  if (p.microbatches < 1) throw Error("micro-batches must be at least 1, got " + str(p.microbatches));
  if (m.heads % p.tp != 0)
    throw Error("tensor-parallel degree " + str(p.tp) + " does not divide the " + str(m.heads) + " attention heads of " +
                m.name);
  if (p.tp <= m.kv_heads ? m.kv_heads % p.tp != 0 : p.tp % m.kv_heads != 0)
    throw Error("tensor-parallel degree " + str(p.tp) + " and the " + str(m.kv_heads) + " KV heads of " + m.name +
                ": tp must divide the KV heads, or be a multiple of them (each KV head then replicated on tp / "
                "kv_heads ranks)");
  for (const auto& [width, what] : {std::pair{m.intermediate, "MLP width"},
                                    std::pair{m.is_moe() ? m.expert_intermediate() : 0, "expert width"},
                                    std::pair{m.shared_intermediate, "shared-expert width"}})
    if (width % p.tp != 0)
      throw Error("tensor-parallel degree " + str(p.tp) + " does not divide the " + what + " " + str(width) + " of " +
                  m.name);
  if (p.pp > m.layers)
    throw Error("pipeline-parallel degree " + str(p.pp) + " exceeds the " + str(m.layers) + " layers of " + m.name);
}

int64_t kv_heads_per_rank(const ModelConfig& m, int64_t tp) { return std::max<int64_t>(1, m.kv_heads / tp); }
int64_t vocab_per_rank(const ModelConfig& m, int64_t tp) { return (m.vocab + tp - 1) / tp; }

ModelConfig shard_model(const ModelConfig& m, int64_t tp) {
  check_parallelism(m, Parallelism{tp, 1, 1});
  if (tp == 1) return m;
  ModelConfig s = m;
  s.heads = m.heads / tp;
  s.kv_heads = kv_heads_per_rank(m, tp);
  s.intermediate = m.intermediate / tp;
  s.moe_intermediate = m.moe_intermediate / tp;
  s.shared_intermediate = m.shared_intermediate / tp;
  s.vocab = vocab_per_rank(m, tp);
  s.name = m.name + " (1/" + str(tp) + " rank)";
  return s;
}

std::vector<int64_t> stage_layers(int64_t layers, int64_t pp) {
  if (pp < 1 || pp > layers) throw Error("cannot split " + str(layers) + " layers into " + str(pp) + " stages");
  std::vector<int64_t> out(std::size_t(pp), layers / pp);
  for (int64_t i = 0; i < layers % pp; ++i) ++out[std::size_t(i)];
  return out;
}

ModelConfig stage_model(const ModelConfig& m, const Parallelism& p, int64_t stage) {
  check_parallelism(m, p);
  if (stage < 0 || stage >= p.pp) throw Error("stage " + str(stage) + " outside 0.." + str(p.pp - 1));
  const std::vector<int64_t> sizes = stage_layers(m.layers, p.pp);
  int64_t first = 0;
  for (int64_t i = 0; i < stage; ++i) first += sizes[std::size_t(i)];
  return layer_range(shard_model(m, p.tp), first, sizes[std::size_t(stage)]);
}

double stage_params(const ModelConfig& m, const Parallelism& p, int64_t stage) {
  const ModelConfig s = stage_model(m, p, stage);
  const bool first = stage == 0, last = stage == p.pp - 1;
  // Summed in the order of ModelConfig::total_params, so one stage of one rank gives it exactly.
  double params = first ? s.embedding_params() : 0.0;
  params += s.layers_params();
  if (last) {
    params += double(s.hidden);
    params += (s.tied_embeddings && first) ? 0.0 : s.lm_head_params();
  }
  return params;
}

Link interconnect(const Hardware& hw) {
  const bool nvlink = hw.nvlink_bandwidth > 0;
  Link l{nvlink ? "NVLink" : "PCIe", (nvlink ? hw.nvlink_bandwidth : hw.pcie_bandwidth) / 2,
         nvlink ? hw.nvlink_latency_s : hw.pcie_latency_s};
  if (!(l.bandwidth > 0))
    throw Error(hw.id + " lists no interconnect bandwidth (interconnect.nvlink_gb_s or pcie_gb_s in " + hw.origin + ")");
  if (!(l.latency_s > 0))
    throw Error(hw.id + " lists no " + l.name + " latency (interconnect." + (nvlink ? "nvlink" : "pcie") +
                "_latency_us in " + hw.origin + ")");
  return l;
}

std::string collective_name(Collective c) {
  switch (c) {
    case Collective::all_reduce: return "all_reduce";
    case Collective::all_gather: return "all_gather";
    case Collective::send: return "send";
  }
  return "?";
}

double collective_time(Collective c, double bytes, int64_t ranks, const Link& link) {
  if (ranks <= 1) return 0;
  const double p = double(ranks);
  switch (c) {
    case Collective::all_reduce: return 2 * (p - 1) / p * bytes / link.bandwidth + 2 * (p - 1) * link.latency_s;
    case Collective::all_gather: return (p - 1) / p * bytes / link.bandwidth + (p - 1) * link.latency_s;
    case Collective::send: return bytes / link.bandwidth + link.latency_s;
  }
  return 0;
}

ParallelPrediction predict_parallel(const ModelConfig& m, const Batch& mb, const OpOptions& o, const Hardware& hw,
                                    const Parallelism& par) {
  return predict_parallel(m, mb, o, hw, par,
                          [&](const ModelConfig& sm, const Batch& b) { return batch_ops(sm, b, o); });
}

ParallelPrediction predict_parallel(const ModelConfig& m, const Batch& mb, const OpOptions& o, const Hardware& hw,
                                    const Parallelism& par, const StageOps& stage_ops) {
  check_parallelism(m, par);
  ParallelPrediction r;
  r.par = par;
  if (par.devices() > 1) r.link = interconnect(hw);
  const double act = dtype_bytes(o.precision.act);
  const double hidden_bytes = double(mb.tokens()) * double(m.hidden) * act;  // the residual stream of the pass
  for (int64_t s = 0; s < par.pp; ++s) {
    StagePrediction st;
    st.stage = s;
    const ModelConfig sm = stage_model(m, par, s);
    st.layers = sm.layers;
    std::vector<Op> ops;
    for (Op& op : stage_ops(sm, mb))
      if (on_stage(op, s, par.pp)) ops.push_back(std::move(op));
    st.compute = predict_step(ops, hw);
    if (par.tp > 1) {
      if (s == 0) st.comm.push_back(comm("embed_allreduce", Collective::all_reduce, par.tp, 1, hidden_bytes, r.link));
      st.comm.push_back(comm("attn_allreduce", Collective::all_reduce, par.tp, sm.layers, hidden_bytes, r.link));
      st.comm.push_back(comm("mlp_allreduce", Collective::all_reduce, par.tp, sm.layers, hidden_bytes, r.link));
      if (s == par.pp - 1 && mb.logit_rows() > 0)
        st.comm.push_back(comm("logits_allgather", Collective::all_gather, par.tp, 1,
                               double(mb.logit_rows()) * double(sm.vocab * par.tp) * kLogitBytes, r.link));
    }
    for (const auto& c : st.comm) st.comm_s += c.total_s();
    r.stages.push_back(std::move(st));
  }
  for (std::size_t i = 1; i < r.stages.size(); ++i)
    if (r.stages[i].time_s() > r.stages[r.slowest].time_s()) r.slowest = i;
  const StagePrediction& slow = r.stages[r.slowest];
  r.send = par.pp > 1 ? comm("stage_send", Collective::send, 2, par.pp - 1, hidden_bytes, r.link)
                      : CommOp{"stage_send", Collective::send, 2, 0, hidden_bytes, 0.0};
  const double m_ = double(par.microbatches), p_ = double(par.pp);
  r.stage_s = slow.time_s();
  r.compute_s = m_ * slow.compute.time_s;
  r.tp_comm_s = m_ * slow.comm_s;
  r.send_s = r.send.total_s();
  r.bubble_s = (p_ - 1) * r.stage_s;
  r.time_s = (m_ + p_ - 1) * r.stage_s + r.send_s;
  r.bubble_fraction = (p_ - 1) / (m_ + p_ - 1);
  return r;
}

ParallelPrediction predict_parallel(const ModelConfig& m, const Step& step, const OpOptions& o, const Hardware& hw,
                                    const Parallelism& par) {
  if (par.microbatches < 1 || step.batch % par.microbatches != 0)
    throw Error(str(par.microbatches) + " micro-batches do not divide the batch of " + str(step.batch));
  Step mb = step;
  mb.batch = step.batch / par.microbatches;
  return predict_parallel(m, Batch::of(mb), o, hw, par);
}

DeviceMemory device_memory(const ModelConfig& m, int64_t batch, int64_t context, const MemoryOptions& o,
                           const Parallelism& par) {
  check_parallelism(m, par);
  if (batch % par.microbatches != 0)
    throw Error(str(par.microbatches) + " micro-batches do not divide the batch of " + str(batch));
  DeviceMemory best;
  for (int64_t s = 0; s < par.pp; ++s) {
    const ModelConfig sm = stage_model(m, par, s);
    MemoryBreakdown b = memory_breakdown(sm, batch, context, o);  // KV of the whole batch on this stage's layers
    b.weights = stage_params(m, par, s) * dtype_bytes(o.precision.weight);
    if (par.microbatches > 1) b.activations = memory_breakdown(sm, batch / par.microbatches, context, o).activations;
    if (s == 0 || b.total() > best.breakdown.total()) best = DeviceMemory{s, b};
  }
  return best;
}

}  // namespace inferlab
