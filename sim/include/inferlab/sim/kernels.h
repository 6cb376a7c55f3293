#pragma once
// The lab's kernels as the refined model sees them (../shared/FIDELITY.md): for each kernel variant,
// one launch's work per pipe, its grid, how its pipes compose, its critical path and how it is
// launched. sim/roofline.h predict() turns an Op that carries these launches into a time; an Op
// without them keeps the plain roofline.
//
// Every number here is a property of the kernel's code, not of a measurement of it: the grid and
// the tiles are those the launcher picks (the same planning functions), the per-tile instruction
// counts are read off the kernel's SASS by scripts/sass-counts.py (command and counts beside each
// table in src/kernels.cpp), and the composition is what the kernel's schedule does (e.g. the flash
// kernel's two consumer warpgroups wait on the same K/V stage, so their matrix products and
// softmaxes do not overlap: serialized). No factor is fitted to a measured point.
#include <cstdint>
#include <string>
#include <vector>

#include "inferlab/sim/dtype.h"

namespace inferlab {

struct Hardware;
struct AttentionShape;
enum class AttentionVariant;
enum class WeightFormat;

// How a launch's pipes share the SM's time. overlapped: max over pipes (independent warps keep every
// pipe busy); serialized: their sum (each warp waits for its matrix product before its softmax, and
// nothing else runs meanwhile).
enum class Composition { overlapped, serialized };
enum class LaunchMode { eager, graph };
// Which tensor-core ceiling a launch's FLOPs run against: the SM's per-clock rate (wgmma), or a
// library kernel's (cuBLAS/cuBLASLt: the measured matmul ceiling of the dtype).
enum class TensorPath { none, sm, library };

std::string composition_name(Composition c);
std::string launch_mode_name(LaunchMode m);
LaunchMode parse_launch_mode(const std::string& s);

// Thread-level operations of a launch, by the pipe that runs them (one lane each); `other` is what
// only takes an issue slot (loads, stores, uniform and control instructions).
struct PipeWork {
  double tensor_flops = 0;
  DType tensor_dtype = DType::bf16;
  double mufu = 0, fp32 = 0, alu = 0, cvt = 0, other = 0;
  double warp_instructions() const { return (mufu + fp32 + alu + cvt + other) / 32.0; }
  PipeWork scaled(double f) const;
  PipeWork& operator+=(const PipeWork& o);
};

struct KernelLaunch {
  std::string kernel;  // as CUPTI names it, shortened
  Composition composition = Composition::overlapped;
  // Whether the memory stream overlaps the pipes (loads in flight while the SM computes: a
  // producer warpgroup, a ring of tiles) or adds to them (each warp waits for its loads, then
  // computes on them).
  bool memory_overlapped = true;
  TensorPath tensor = TensorPath::none;
  LaunchMode launch = LaunchMode::eager;
  int64_t ctas = 1;
  int ctas_per_sm = 1;  // resident at once
  double bytes = 0;     // DRAM bytes this launch moves
  double write_share = 0;  // share of the bytes written (read-only streams reach the read bandwidth)
  PipeWork work;        // the whole launch
  // One CTA's critical path when it runs alone: dependent instructions (cycles) and dependent
  // global round trips. Waves of such CTAs bound the launch from below (latency-bound kernels).
  double cta_cycles = 0;
  double cta_round_trips = 0;
  // Round trips before the first byte streams (the stream cannot start earlier), and, for
  // persistent kernels, round trips exposed per SM over the whole launch (e.g. one per work item).
  double startup_round_trips = 0;
  double sm_round_trips = 0;
  // fp32 atomic adds the launch sends to L2 (split-k partial sums): a pipe of the L2, not of the SMs.
  // A block holds its SM until its atomics drain (its fence waits for them), so they overlap the
  // other waves' work but not their own: max(rest, atomics) + min(rest, atomics) / waves.
  double atomics = 0;
  // One CTA's work after its last load has arrived (its last tile, the warps' merge, a split's partial
  // written, fenced and counted): cycles and dependent L2 round trips. Part of the CTA's critical path
  // (the latency term), and exposed once after the memory stream: the last CTAs to receive their data
  // still run it (memory + epilogue).
  double epilogue_cycles = 0;
  double epilogue_l2_round_trips = 0;
  // After the last wave: dependent L2 round trips (split-k: the last block of a row tile reads the
  // partial sums back one load at a time; split-KV: the last piece's merge batches), and L2-resident
  // bytes read by tail_ctas CTAs, each through its SM's port (PipeCeilings::sm_bandwidth), while
  // they run tail_cycles of dependent work: max(bytes over the port, cycles) + round trips.
  double tail_l2_round_trips = 0;
  double tail_bytes = 0;
  int64_t tail_ctas = 1;
  double tail_cycles = 0;
};

// The kernel variants of kernels/ (names as their NOTES use them).
// attention/flash_fwd_sm90 (wgmma, persistent) or attention/naive (pointer tables, cuBLAS QK^T,
// softmax_rows, cuBLAS PV) for a prefill shape; bytes are the op's (sim/ops.h attention_cost).
std::vector<KernelLaunch> attention_prefill_kernels(const AttentionShape& s, AttentionVariant v, DType dtype,
                                                    const Hardware& hw);
// attention/decode: plain (one piece per context) or split (flash-decoding, s.splits pieces).
std::vector<KernelLaunch> decode_attention_kernels(const AttentionShape& s, DType dtype, const Hardware& hw);
// gemm/linear: cuBLAS (bf16, fp16), cuBLASLt (fp8) or the weight-only kernel (int8, int4, sparse24).
std::vector<KernelLaunch> linear_kernels(int64_t m, int64_t n, int64_t k, WeightFormat f, const Hardware& hw);
// A memory-streaming kernel over the whole GPU (norms, rope, activations, residual adds, copies).
KernelLaunch streaming_kernel(const std::string& name, double bytes, double write_share, double fp32_ops,
                              const Hardware& hw);

// The weight-only kernel's plan (kernels/gemm/src/weight_only.cu uses it): tokens padded to 8·m_tiles,
// split_k blocks along k per 128-row tile, k_per_block columns each, blocks_per_sm resident.
struct WeightOnlyPlan {
  int m_tiles = 1;
  int split_k = 1;
  int64_t k_per_block = 0;
  int blocks_per_sm = 4;
  int64_t row_tiles = 1;
};
WeightOnlyPlan plan_weight_only(WeightFormat f, int64_t m, int64_t n, int64_t k, int64_t sm_count);
int weight_only_m_tiles(int64_t m);
int64_t weight_only_smem_bytes(WeightFormat f, int m_tiles, int64_t k_per_block);

}  // namespace inferlab
