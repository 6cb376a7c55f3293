// The parallel_engine scenario's measured side: one thread per rank, each driving its own engine (the
// shard of its stage and tensor-parallel rank) on its GPU; the engines of a layout kept across points.
#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>

#include <cuda_runtime.h>

#include "inferlab/experiments/parallel_engine.h"
#include "inferlab/kernels/common/check.h"
#include "inferlab/kernels/engine/engine.h"
#ifdef INFERLAB_HAVE_NCCL
#include "inferlab/kernels/engine/nccl_communicator.h"
#endif
#include "inferlab/roofline/gpu_info.h"
#include "inferlab/roofline/timing.h"
#include "inferlab/sim/error.h"
#include "inferlab/sim/rng.h"
#include "measurers.h"

namespace inferlab {
namespace {

using Clock = std::chrono::steady_clock;

// tp x pp threads, rank = stage * tp + tp_rank, each bound to its GPU, running the jobs it is given.
class Ranks {
 public:
  Ranks(int n, std::function<int(int)> device) : n_(n), jobs_(static_cast<std::size_t>(n)), errors_(static_cast<std::size_t>(n)) {
    for (int r = 0; r < n; ++r)
      threads_.emplace_back([this, r, dev = device(r)] {
        INFERLAB_CUDA_CHECK(cudaSetDevice(dev));
        uint64_t seen = 0;
        for (;;) {
          std::function<void()> job;
          {
            std::unique_lock<std::mutex> lock(mu_);
            cv_.wait(lock, [&] { return stop_ || generation_ != seen; });
            if (stop_) return;
            seen = generation_;
            job = jobs_[std::size_t(r)];
          }
          try {
            job();
          } catch (...) {
            errors_[std::size_t(r)] = std::current_exception();
          }
          std::lock_guard<std::mutex> lock(mu_);
          if (++done_ == n_) cv_.notify_all();
        }
      });
  }
  ~Ranks() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    for (auto& t : threads_) t.join();
  }
  // Runs job(rank) on every rank's thread at once; rethrows the first rank's error.
  void run(const std::function<void(int)>& job) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (int r = 0; r < n_; ++r) jobs_[std::size_t(r)] = [job, r] { job(r); }, errors_[std::size_t(r)] = nullptr;
      done_ = 0;
      ++generation_;
    }
    cv_.notify_all();
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return done_ == n_; });
    for (auto& e : errors_)
      if (e) std::rethrow_exception(e);
  }
  // A barrier of the rank threads inside a job.
  void barrier() {
    std::unique_lock<std::mutex> lock(bar_mu_);
    const uint64_t g = bar_gen_;
    if (++bar_count_ == n_) {
      bar_count_ = 0, ++bar_gen_;
      bar_cv_.notify_all();
      return;
    }
    bar_cv_.wait(lock, [&] { return bar_gen_ != g; });
  }

 private:
  int n_;
  std::vector<std::function<void()>> jobs_;
  std::vector<std::exception_ptr> errors_;
  std::vector<std::thread> threads_;
  std::mutex mu_, bar_mu_;
  std::condition_variable cv_, bar_cv_;
  uint64_t generation_ = 0, bar_gen_ = 0;
  int done_ = 0, bar_count_ = 0;
  bool stop_ = false;
};

// The engines of one layout, their communicators and threads.
struct Layout {
  std::string key;
  int64_t tp = 1, pp = 1;
  std::vector<std::unique_ptr<Communicator>> tp_comms, pp_comms;  // by rank (null where the degree is 1)
  std::vector<std::unique_ptr<Engine>> engines;                    // by rank
  std::unique_ptr<Ranks> ranks;                                    // last: its threads end first
  ~Layout() {
    if (ranks) ranks->run([this](int r) { engines[std::size_t(r)].reset(); });  // on the thread that built it
  }
};

std::unique_ptr<Communicator> join(const std::string& kind, std::vector<std::unique_ptr<Communicator>>* local,
                                   const std::vector<char>& id, int rank, int size) {
  if (kind == "local") return std::move((*local)[std::size_t(rank)]);
#ifdef INFERLAB_HAVE_NCCL
  NcclId nid;
  std::copy(id.begin(), id.end(), nid.begin());
  return nccl_communicator(nid, rank, size);
#else
  (void)id, (void)size;
  throw Error("communicator nccl: this binary was built without NCCL (nccl.h not found); use communicator local");
#endif
}

std::vector<char> new_id(const std::string& kind) {
#ifdef INFERLAB_HAVE_NCCL
  if (kind == "nccl") {
    const NcclId id = nccl_unique_id();
    return std::vector<char>(id.begin(), id.end());
  }
#endif
  (void)kind;
  return {};
}

std::unique_ptr<Layout>& current() {
  static std::unique_ptr<Layout> l;
  return l;
}

// Every sequence of the point in one slot each; a decode point's sequences held at context - warmup - repeats
// tokens (prefilled in steps of at most max_step_tokens), so that its timed steps end at the context.
constexpr int64_t kMaxSequences = 64, kMaxStepTokens = 8192, kMaxContext = 4096;

Layout& layout_for(const ParallelEngineConfig& c) {
  const std::string key = c.model + "|" + std::to_string(c.par.tp) + "|" + std::to_string(c.par.pp) + "|" +
                          c.communicator + "|" + std::to_string(c.seed);
  std::unique_ptr<Layout>& l = current();
  if (l && l->key == key) return *l;
  l.reset();  // the previous layout's memory back before the next is built
  int gpus = 0;
  INFERLAB_CUDA_CHECK(cudaGetDeviceCount(&gpus));
  const int n = int(c.par.tp * c.par.pp);
  if (c.communicator == "nccl" && n > gpus)
    throw Error("TP" + std::to_string(c.par.tp) + " x PP" + std::to_string(c.par.pp) + " needs " + std::to_string(n) +
                " GPUs; this host has " + std::to_string(gpus));
  auto L = std::make_unique<Layout>();
  L->key = key, L->tp = c.par.tp, L->pp = c.par.pp;
  L->tp_comms.resize(static_cast<std::size_t>(n)), L->pp_comms.resize(static_cast<std::size_t>(n)), L->engines.resize(static_cast<std::size_t>(n));
  // One communicator per stage (its tp ranks) and per tensor-parallel rank (its pp stages).
  std::vector<std::vector<std::unique_ptr<Communicator>>> tp_local(static_cast<std::size_t>(c.par.pp)), pp_local(static_cast<std::size_t>(c.par.tp));
  std::vector<std::vector<char>> tp_ids(static_cast<std::size_t>(c.par.pp)), pp_ids(static_cast<std::size_t>(c.par.tp));
  for (int64_t s = 0; s < c.par.pp; ++s) {
    if (c.communicator == "local") tp_local[std::size_t(s)] = local_group(int(c.par.tp));
    tp_ids[std::size_t(s)] = new_id(c.communicator);
  }
  for (int64_t t = 0; t < c.par.tp; ++t) {
    if (c.communicator == "local") pp_local[std::size_t(t)] = local_group(int(c.par.pp));
    pp_ids[std::size_t(t)] = new_id(c.communicator);
  }
  L->ranks = std::make_unique<Ranks>(n, [gpus](int r) { return r % gpus; });
  const EngineModel em = load_engine_model(c.model);
  L->ranks->run([&](int r) {
    const int64_t stage = r / c.par.tp, t = r % c.par.tp;
    // Tensor-parallel groups first on every rank, then the pipeline's: NCCL's joins block until the group is whole.
    if (c.par.tp > 1)
      L->tp_comms[std::size_t(r)] = join(c.communicator, &tp_local[std::size_t(stage)], tp_ids[std::size_t(stage)], int(t), int(c.par.tp));
    L->ranks->barrier();
    if (c.par.pp > 1)
      L->pp_comms[std::size_t(r)] = join(c.communicator, &pp_local[std::size_t(t)], pp_ids[std::size_t(t)], int(stage), int(c.par.pp));
    EngineOptions o;
    o.seed = c.seed;
    o.max_sequences = kMaxSequences;
    o.max_step_tokens = kMaxStepTokens;
    o.max_context = em.model.max_positions > 0 ? std::min(em.model.max_positions, kMaxContext) : kMaxContext;
    // Ranks sharing a GPU (communicator local) must not each take a fraction of what is free at once.
    if (c.communicator == "local") o.kv_blocks = kMaxSequences * kMaxContext / o.block_size / n;
    o.parallel.shard = WeightShard{c.par.tp, t, c.par.pp, stage};
    o.parallel.tp = L->tp_comms[std::size_t(r)].get();
    o.parallel.pp = L->pp_comms[std::size_t(r)].get();
    L->engines[std::size_t(r)] = std::make_unique<Engine>(em, o);
  });
  l = std::move(L);
  return *l;
}

}  // namespace

ParallelEngineMeasurement measure_parallel_engine(const ParallelEngineConfig& c) {
  if (c.communicator == "nccl") check_same_gpu(c.hardware);
  if (c.batch > kMaxSequences) throw Error("parallel_engine: batch " + std::to_string(c.batch) + " exceeds the engines' " +
                                           std::to_string(kMaxSequences) + " sequences");
  if (c.context > kMaxContext) throw Error("parallel_engine: context " + std::to_string(c.context) + " exceeds " +
                                           std::to_string(kMaxContext));
  if (c.phase == "prefill" && c.batch / c.par.microbatches * c.context > kMaxStepTokens)
    throw Error("parallel_engine: a prefill micro-batch of " + std::to_string(c.batch / c.par.microbatches) + " x " +
                std::to_string(c.context) + " tokens exceeds the engines' " + std::to_string(kMaxStepTokens) + " tokens a step");
  Layout& L = layout_for(c);
  const int n = int(L.tp * L.pp);
  const int64_t V = c.config.vocab, per = c.batch / c.par.microbatches;
  Rng rng{c.seed * 1009 + uint64_t(c.batch * 31 + c.context)};
  auto token = [&] { return int32_t(rng.next() % uint64_t(V)); };

  // The sequences' slots 0 .. batch - 1 emptied, then (decode) prefilled; the same inputs on every rank.
  L.ranks->run([&](int r) {
    Engine& e = *L.engines[std::size_t(r)];
    for (int s = 0; s < kMaxSequences; ++s) e.release(s);
    e.set_graphs(c.graphs);
  });
  using Step = std::vector<SequenceInput>;
  auto run_steps = [&](const std::vector<Step>& steps) {  // every rank through the same steps, in order
    L.ranks->run([&](int r) {
      for (const Step& s : steps) L.engines[std::size_t(r)]->step(s);
    });
  };
  if (c.phase == "decode") {
    const int64_t held = c.context - c.warmup - c.repeats;
    std::vector<Step> fill;
    for (int64_t b = 0; b < c.batch; ++b)
      for (int64_t at = 0; at < held; at += kMaxStepTokens) {
        SequenceInput s;
        s.slot = int(b);
        for (int64_t i = at; i < std::min(held, at + kMaxStepTokens); ++i) s.tokens.push_back(token());
        s.logits = 0;
        fill.push_back({s});
      }
    run_steps(fill);
  }
  // One step of the point: its micro-batches, in order, on every stage.
  auto step_inputs = [&]() {
    std::vector<Step> mbs(static_cast<std::size_t>(c.par.microbatches));
    for (int64_t b = 0; b < c.batch; ++b) {
      SequenceInput s;
      s.slot = int(b);
      const int64_t n_new = c.phase == "decode" ? 1 : c.context;
      for (int64_t i = 0; i < n_new; ++i) s.tokens.push_back(token());
      mbs[std::size_t(b / per)].push_back(s);
    }
    return mbs;
  };
  std::vector<double> walls;
  std::vector<Clock::time_point> t0(static_cast<std::size_t>(n)), t1(static_cast<std::size_t>(n));
  bool graphs = false;
  const int64_t total = c.warmup + c.repeats;
  std::vector<double> gpus;
  for (int64_t i = 0; i < total; ++i) {
    const std::vector<Step> mbs = step_inputs();
    std::vector<double> rank_gpu(static_cast<std::size_t>(n), 0.0);
    std::vector<uint8_t> rank_graph(static_cast<std::size_t>(n), 1);
    L.ranks->run([&](int r) {
      Engine& e = *L.engines[std::size_t(r)];
      if (c.phase == "prefill")  // a prefill point starts from empty slots every time
        for (int64_t b = 0; b < c.batch; ++b) e.release(int(b));
      L.ranks->barrier();
      t0[std::size_t(r)] = Clock::now();
      for (const Step& s : mbs) {
        const StepOutput out = e.step(s);
        rank_gpu[std::size_t(r)] += out.gpu_s;
        rank_graph[std::size_t(r)] &= uint8_t(out.graph);
      }
      t1[std::size_t(r)] = Clock::now();
    });
    if (i < c.warmup) continue;
    const auto start = *std::min_element(t0.begin(), t0.end()), end = *std::max_element(t1.begin(), t1.end());
    walls.push_back(std::chrono::duration<double>(end - start).count());
    gpus.push_back(rank_gpu[std::size_t((L.pp - 1) * L.tp)]);
    graphs = std::all_of(rank_graph.begin(), rank_graph.end(), [](uint8_t g) { return g != 0; });
  }
  ParallelEngineMeasurement m;
  // What one all-reduce of this step's activations costs inside a CUDA graph (as the decode steps replay
  // them) and launched alone (as the prefill steps issue them): 32 back to back, per call.
  if (L.tp > 1 && c.communicator == "nccl") {
    const int64_t tokens = per * (c.phase == "decode" ? 1 : c.context), count = tokens * c.config.hidden;
    constexpr int kCalls = 32, kReplays = 7;
    std::vector<double> in_graph(static_cast<std::size_t>(n)), eager(static_cast<std::size_t>(n));
    L.ranks->run([&](int r) {
      Communicator* comm = L.tp_comms[std::size_t(r)].get();
      if (!comm) return;
      cudaStream_t st = nullptr;
      cudaEvent_t a = nullptr, b = nullptr;
      void* buf = nullptr;
      INFERLAB_CUDA_CHECK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
      INFERLAB_CUDA_CHECK(cudaEventCreate(&a));
      INFERLAB_CUDA_CHECK(cudaEventCreate(&b));
      INFERLAB_CUDA_CHECK(cudaMalloc(&buf, std::size_t(count) * 2));
      INFERLAB_CUDA_CHECK(cudaMemsetAsync(buf, 0, std::size_t(count) * 2, st));
      cudaGraph_t g = nullptr;
      cudaGraphExec_t exec = nullptr;
      INFERLAB_CUDA_CHECK(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal));
      for (int k = 0; k < kCalls; ++k) comm->all_reduce_sum_bf16(buf, count, st);
      INFERLAB_CUDA_CHECK(cudaStreamEndCapture(st, &g));
      INFERLAB_CUDA_CHECK(cudaGraphInstantiate(&exec, g, 0));
      auto timed = [&](const std::function<void()>& body) {
        std::vector<double> v;
        for (int rep = 0; rep < kReplays + 1; ++rep) {
          L.ranks->barrier();
          INFERLAB_CUDA_CHECK(cudaEventRecord(a, st));
          body();
          INFERLAB_CUDA_CHECK(cudaEventRecord(b, st));
          INFERLAB_CUDA_CHECK(cudaEventSynchronize(b));
          float ms = 0;
          INFERLAB_CUDA_CHECK(cudaEventElapsedTime(&ms, a, b));
          if (rep > 0) v.push_back(double(ms) * 1e-3 / kCalls);
        }
        return summarize(v).median_s;
      };
      in_graph[std::size_t(r)] = timed([&] { INFERLAB_CUDA_CHECK(cudaGraphLaunch(exec, st)); });
      eager[std::size_t(r)] = timed([&] {
        for (int k = 0; k < kCalls; ++k) comm->all_reduce_sum_bf16(buf, count, st);
      });
      cudaGraphExecDestroy(exec);
      cudaGraphDestroy(g);
      cudaFree(buf);
      cudaEventDestroy(a);
      cudaEventDestroy(b);
      cudaStreamDestroy(st);
    });
    m.allreduce_graph_s = *std::max_element(in_graph.begin(), in_graph.end());
    m.allreduce_eager_s = *std::max_element(eager.begin(), eager.end());
  }
  const Timing wall = summarize(walls);
  m.step_s = wall.median_s, m.p10_s = wall.p10_s, m.p90_s = wall.p90_s;
  m.gpu_s = summarize(gpus).median_s;
  m.graphs = graphs;
  m.device = detect_gpu().name;
  return m;
}

std::function<void(const Params&)> parallel_engine_preflight() {
  return [](const Params& p) {
    const ParallelEngineConfig c = parallel_engine_config(p);
    if (c.communicator == "nccl") check_same_gpu(c.hardware);
  };
}

std::function<void(const Params&, std::vector<Row>&)> parallel_engine_measure() {
  return [](const Params& p, std::vector<Row>& rows) {
    const ParallelEngineConfig c = parallel_engine_config(p);
    rows = parallel_engine_rows(c, measure_parallel_engine(c));
  };
}

}  // namespace inferlab
