#pragma once
// Measuring prefill attention (kernels/attention/prefill.h) as every kernel of the lab is measured:
// a KV cache of random values holding each sequence's past and new tokens (paged: the pool's blocks
// handed out in shuffled order), random queries, one checked run, then event timing with warm-up,
// L2 flushed before every repeat, the median; optionally the kernel alone under CUPTI.
#include <vector>

#include "inferlab/kernels/attention/prefill.h"
#include "inferlab/roofline/timing.h"
#include "inferlab/sim/hardware.h"
#include "inferlab/sim/ops.h"

namespace inferlab {

struct PrefillShape {
  DType dtype = DType::bf16;
  int64_t heads = 32, kv_heads = 8, head_dim = 128;
  std::vector<SequenceWork> sequences;  // new_tokens after past_tokens, count of each (logits unused)
  KvLayout layout = KvLayout::paged;
  int64_t block_size = 16;  // paged
  bool causal = true;
};

struct PrefillMeasurement {
  Timing timing;        // events around each launch
  double kernel_s = 0;  // median GPU duration of the kernel (CUPTI), when asked for
};

// The sim/ cost of the shape's launch (prefill_cost: batch_attention_op of its sequences).
Op prefill_shape_cost(const PrefillShape& s);
// The same op as the engine's step charges it on `hw` (sim/engine_step.h engine_step_ops' attention: its launch the
// wgmma flash rung over each sequence's tiles and work items, sim/kernels.h varlen_prefill_kernels; sequences of one
// new token go to the decode kernel, as the engine's). Causal shapes only (the engine's step is causal).
Op prefill_shape_engine_cost(const PrefillShape& s, const Hardware& hw);
// Throws inferlab::Error naming the shortfall before anything is allocated.
void check_prefill_fits(const PrefillShape& s);
PrefillMeasurement measure_prefill(const PrefillShape& s, const TimingOptions& timing = {}, bool trace_kernels = false);

}  // namespace inferlab
