#pragma once
// Measuring decode attention (kernels/attention/decode.h) as every kernel of the lab is measured:
// a KV cache of random values (paged: the pool's blocks handed out in shuffled order, as a
// long-running allocator leaves them), one checked run, then event timing with warm-up, L2 flushed
// before every repeat, the median.
#include <string>

#include "inferlab/kernels/attention/decode.h"
#include "inferlab/roofline/timing.h"
#include "inferlab/sim/ops.h"

namespace inferlab {

struct DecodeShape {
  DType dtype = DType::bf16;
  int64_t batch = 1, heads = 32, kv_heads = 8, head_dim = 128;
  int64_t context = 4096;  // tokens per sequence (all equal)
  KvLayout layout = KvLayout::paged;
  int64_t block_size = 16;  // paged
  int splits = 0;           // split: pieces per context (0: the kernel's plan)
  DecodeBlock block = DecodeBlock::planned;  // the block shape (decode.h)
};

struct DecodeMeasurement {
  Timing timing;        // events around each launch (host enqueue and launch latency included)
  double kernel_s = 0;  // median GPU duration of the decode kernel (CUPTI), when asked for
  int splits = 1;
};

// The split count the kernel will use on this device, and the sim/ shape that costs the launch.
int decode_splits_on_device(const DecodeShape& s, DecodeVariant v);
AttentionShape decode_cost_shape(const DecodeShape& s, int splits);
// Throws inferlab::Error naming the shortfall before anything is allocated.
void check_decode_fits(const DecodeShape& s, DecodeVariant v);
// trace_kernels: after the event timing, the same launches again under CUPTI for kernel_s.
DecodeMeasurement measure_decode(const DecodeShape& s, DecodeVariant v, const TimingOptions& timing = {},
                                 bool trace_kernels = false);

}  // namespace inferlab
