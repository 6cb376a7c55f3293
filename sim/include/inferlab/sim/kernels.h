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
#include "inferlab/sim/weight_format.h"

namespace inferlab {

struct Hardware;
struct AttentionShape;
enum class AttentionVariant;

// How a launch's pipes share the SM's time. overlapped: max over pipes (independent warps keep every
// pipe busy); serialized: their sum (each warp waits for its matrix product before its softmax, and
// nothing else runs meanwhile).
enum class Composition { overlapped, serialized };
enum class LaunchMode { eager, graph };
// Which tensor-core ceiling a launch's FLOPs run against: the SM's per-clock rate by mma.sync (sm,
// PipeCeilings::tensor_flops_per_clk) or by wgmma (wgmma, PipeCeilings::wgmma_flops_per_clk: half as fast again on
// Hopper), or a library kernel's (cuBLAS/cuBLASLt: the measured matmul ceiling of the dtype).
enum class TensorPath { none, sm, wgmma, library };

std::string composition_name(Composition c);
std::string launch_mode_name(LaunchMode m);
LaunchMode parse_launch_mode(const std::string& s);

// Thread-level operations of a launch, by the pipe that runs them (one lane each); `other` is what
// only takes an issue slot (loads, stores, uniform and control instructions).
struct PipeWork {
  double tensor_flops = 0;
  DType tensor_dtype = DType::bf16;
  double mufu = 0, fp32 = 0, alu = 0, cvt = 0, other = 0;
  // Tensor-core instructions (HMMA, HGMMA), one a lane as the counts above, where the SASS counts give them: how often
  // the launch issues them sets its clock (sim/src/roofline.cpp). Not in warp_instructions().
  double tensor_ops = 0;
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
  // Whether its products keep the tensor pipe busy most of its time (the flash kernels: ncu 76% on the H200): it runs
  // at the clock of sustained wgmma (PipeCeilings::wgmma_clock_hz), which the power limit sets. Else the clock
  // follows how often it issues tensor-core instructions (sim/src/roofline.cpp).
  bool wgmma_clocked = false;
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
  // Round trips each wave of CTAs spends beside the memory stream, not in it: its CTAs' fill before their first
  // byte and their write-out after their last (a split's fence and counter). The CTAs of a wave do the same work
  // and start together, so they reach both together and no byte streams meanwhile: added to the memory term once
  // per wave (the latency term holds them in cta_round_trips).
  double wave_round_trips = 0;
  // L2-resident bytes the launch copies into shared memory beside its DRAM bytes (the wgmma_tma kernel's X tile,
  // once per unit), at the L2's bandwidth (PipeCeilings::l2_bandwidth). One producer thread's copies are processed
  // one after another, the weight's from DRAM and X's from L2, and every producer walks the same sequence of units:
  // the two streams add up (memory = bytes / DRAM + l2_bytes / L2).
  double l2_bytes = 0;
  // fp32 atomic adds the launch sends to L2 (split-k partial sums): a pipe of the L2, not of the SMs.
  // A block holds its SM until its atomics drain (its fence waits for them), and the blocks of a wave
  // (the same work, started together) reach their atomics together: a wave's atomics add to that
  // wave's time, nothing else runs beside them: rest + atomics.
  double atomics = 0;
  // Vector reductions (red.global.add.v4.f32: four fp32 sums each) of the Hopper weight-only kernels' shared tiles,
  // charged at PipeCeilings::l2_red_vector_per_clk and added to the wave as the atomics are.
  double vector_reductions = 0;
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
// The flash rungs on Hopper that have a model (kernels/attention/attention.h FlashKernel): overlapped is
// flash_fwd_sm90_overlap, dense attention's automatic rung there; wgmma is flash_fwd_sm90, the rung the varlen prefill
// (prefill.h, the engine's) runs, in dense or varlen mode alike.
enum class FlashRung { overlapped, wgmma };
std::vector<KernelLaunch> attention_prefill_kernels(const AttentionShape& s, AttentionVariant v, DType dtype,
                                                    const Hardware& hw, FlashRung rung = FlashRung::overlapped);
// The varlen prefill (prefill.h, the engine's: the wgmma rung in varlen mode) over sequences of one launch, each an
// AttentionShape (batch = how many sequences of that shape, their new and past tokens; heads, KV heads, head dim and
// the mask shared): the wgmma rung's model over the sum of their tiles and work items; bytes the sum of theirs.
std::vector<KernelLaunch> varlen_prefill_kernels(const std::vector<AttentionShape>& sequences, DType dtype,
                                                 const Hardware& hw);
// The overlapped flash kernel's tile by head dim (flash_fwd_sm90_overlap.cu builds OverlapTile from these; the
// model charges the same tiles). 128 query rows a CTA (two consumer warpgroups of 64); in shared memory Q and
// two stages each of K and V, every tile stored as 64-column 128-byte-swizzled atoms. The consumers hold
// 224 registers (setmaxnreg): O is head_dim / 2 of them, S block_n / 2 and P block_n / 4.
//   64, 128  128 keys a tile, Q double-buffered across items (192 KB at 128): measured, NOTES.md v7.
//   96       128 keys, its columns stored as two atoms (the second half zero-filled by the TMA, never read):
//            96 % 64 != 0, and a 64-byte-swizzled layout would need its own descriptors for one head dim.
//   256      64 keys: O alone is 128 registers, so S + P at 128 keys (96) would not fit in 224; Q single-
//            buffered: two Q tiles (128 KB) and the K and V stages (128 KB) exceed the 227 KB a CTA has.
constexpr bool flash_overlap_head_dim_supported(int64_t head_dim) {
  return head_dim == 64 || head_dim == 96 || head_dim == 128 || head_dim == 256;
}
constexpr int flash_overlap_block_n(int64_t head_dim) { return head_dim > 128 ? 64 : 128; }
constexpr int flash_overlap_q_buffers(int64_t head_dim) { return head_dim > 128 ? 1 : 2; }
constexpr int flash_overlap_stored_columns(int64_t head_dim) { return int((head_dim + 63) / 64 * 64); }
constexpr int64_t flash_overlap_smem_bytes(int64_t head_dim) {
  return (int64_t(flash_overlap_q_buffers(head_dim)) * 128 + 4 * int64_t(flash_overlap_block_n(head_dim))) *
             flash_overlap_stored_columns(head_dim) * 2 +
         1024 + 256;  // + alignment slack, mbarriers (128 B), item slots (64 B)
}
static_assert(flash_overlap_smem_bytes(256) <= (227 << 10) && flash_overlap_smem_bytes(128) <= (227 << 10),
              "the overlapped flash tiles fit the 227 KB a Hopper CTA can have");
// attention/decode: plain (one piece per context) or split (flash-decoding, s.splits pieces).
std::vector<KernelLaunch> decode_attention_kernels(const AttentionShape& s, DType dtype, const Hardware& hw);
// gemm/linear: cuBLAS (bf16, fp16), cuBLASLt (fp8) or a weight-only kernel (int8, int4, sparse24): the
// plan's (automatic) or the rung named (WeightOnlyKernel, declared below).
enum class WeightOnlyKernel;
// split_k and reduce: the candidates LinearParams names (0 and automatic: the plan's), as plan_weight_only takes them.
enum class SplitReduce;
std::vector<KernelLaunch> linear_kernels(int64_t m, int64_t n, int64_t k, WeightFormat f, const Hardware& hw,
                                         WeightOnlyKernel kernel, int64_t split_k = 0, SplitReduce reduce = SplitReduce{});
std::vector<KernelLaunch> linear_kernels(int64_t m, int64_t n, int64_t k, WeightFormat f, const Hardware& hw);
// Whether cuBLAS splits k (a GEMM kernel writing partial sums, then cublasLt::splitKreduce_kernel): where its output
// tiles of 64 weight rows x 16 tokens are at most half the SMs. Seen with ncu on the H100 (CUDA 13.0, 2026-11-25,
// kernels/gemm/NOTES.md r5) and in the times (4096 x 4096: 17.3-17.5 us to 16 tokens, 16.4-16.5 at 32-64): 1024 x 4096
// at 1, 16 and 64 tokens (16-64 tiles), 4096 x 4096 at 1 (64) but not at 64, 14336 x 4096 not at 64; 4096 x 14336
// splits at 64 tokens too (long k: where the rule misses, 3.5% fast). The library's heuristic, not ours: a rule for the
// shapes measured. bf16 only: cuBLASLt's fp8 kernels were not looked at.
bool library_splits_k(int64_t m, int64_t n, int64_t sm_count);
// A memory-streaming kernel over the whole GPU (norms, rope, activations, residual adds, copies).
KernelLaunch streaming_kernel(const std::string& name, double bytes, double write_share, double fp32_ops,
                              const Hardware& hw);

// The weight-only kernels, side by side in one process (no environment switches): LinearParams::kernel
// names one, automatic takes the plan's choice by m (the measured reason beside wgmma_from_tokens).
//   mma    weight_only.cu: mma.sync m16n8k16 (2:4: mma.sp m16n8k32), the weight the A operand straight
//          from registers (16 rows a warp), X staged once per block, split-k; every format, every GPU
//   wgmma  weight_only_sm90.cu (sm_90a, int8 and int4): the weight dequantized in registers as the A
//          operand of wgmma m64nNk16 (64 rows a warpgroup, N = the tokens padded to 16, 32 or 64), X the
//          B operand from swizzled shared memory; weight, X and scales stream through a ring of
//          shared-memory stages (cp.async); a persistent grid walks (128-row tile, 128-column group)
//          units in equal contiguous shares (stream-k: a tile cut between two blocks is summed in
//          fp32 by atomics, the last of its blocks converts)
//   wgmma_tma  weight_only_sm90_tma.cu (sm_90a, int8, int4 and sparse24, m = 1..64): the wgmma kernel's
//          units, dequantization and grid, its ring filled by producer warps (one copying thread each: TMA for
//          X, bulk copies for the weight, scales and 2:4 metadata, mbarriers) instead of every thread's cp.async
//          and a proxy fence per unit; 2:4 feeds its compressed values and metadata to wgmma.sp m64nNk32
//   mma_tma  weight_only_mma_tma.cu (sm_90a, int8 and int4, m = 1): the mma kernel's products and dequantization, its
//          weight streamed by one producer thread a block through a ring of 16 KB shared-memory stages (bulk copies,
//          mbarriers) instead of every warp's loads into registers; a persistent grid of one block an SM, each
//          taking whole 16-row tiles b, b + blocks, ... (the grid's copies sweep the weight together; a tile is one
//          run of bytes in quant.h's layout), 16 consumer warps over each stage's k range summed in shared memory:
//          no split-k, no workspace
enum class WeightOnlyKernel { automatic, mma, wgmma, wgmma_tma, mma_tma };
std::string weight_only_kernel_name(WeightOnlyKernel k);

// How the mma kernel's split-k blocks of one row tile sum their partial sums:
//   atomics  fp32 atomics into a workspace, then the tile's counter (one thread's acquire-release atomic); the last
//            block reads back and converts (dependent L2 round trips after the loop)
//   cluster  the split_k blocks of a row tile form one thread-block cluster (Hopper, at most 16); each owns
//            1/split_k of the tile's rows, and every block sends its sums of those rows into the owner's
//            shared memory (st.async, completing on the owner's mbarrier): one one-way hop between SMs, a
//            fixed summation order, no workspace traffic
//   automatic  on Hopper at 2-8 tokens: the fewest of 8 or 16 splits (no more than the plan's) that give blocks of at
//            most kAutoClusterColumns columns while the row tiles x splits fit one block an SM (the grid's path is one
//            block's: its fill, loop and write-out), in a cluster; else the plan's split by atomics. Measured on the H100
//            (kernels/gemm/NOTES.md c2, bench_gemm, two rounds, us, the plan by atomics -> the rule's cluster, m = 2 / 4 / 8):
//              1024 x 4096 (8 row tiles, the plan 32 splits -> 8 in a cluster): int4 7.46 / 7.76 / 8.48 -> 7.06 / 7.12 /
//              7.10, int8 8.18 / 8.50 / 9.26 -> 8.07 / 8.08 / 8.08, 2:4 7.78 / 8.11 / 8.73 -> 7.87 / 7.88 / 7.94;
//              2048 x 2048 (16 -> 8): int4 7.28 / 7.78 / 8.58 -> 7.30 / 7.32 / 7.34, int8 7.94 / 8.45 / 9.23 -> 8.10 /
//              8.03 / 8.15, 2:4 7.55 / 8.05 / 8.79 -> 7.36 / 7.35 / 7.38;
//              1024 x 8192 (64 -> 16): int4 8.96 / 9.41 / 10.81 -> 8.94 / 9.04 / 9.23, int8 10.10 / 10.45 / 11.89 ->
//              10.01 / 10.10 / 10.26, 2:4 9.60 / 10.08 / 11.49 -> 9.42 / 9.52 / 9.52.
//            Blocks of 1024 columns lose (1024 x 8192 in 8 splits: int8 10.79 / 10.85 / 10.91, 2:4 10.90 at every m), and
//            so do larger grids: 2048 x 8192 in 8 splits (128 blocks of 1024 columns) int8 12.76 / 13.12 / 13.58 ->
//            13.52 / 13.54 / 13.74, 2:4 11.90 -> 13.16 at m = 2; 4096 x 4096 at 8 splits by atomics / in a cluster (256
//            blocks) int4 / int8 at m = 8 10.98 / 12.79 -> 11.28 / 13.01 (since w10's cheaper counter); and clusters run on
//            124 of the 132 SMs (116 at 16 blocks, scripts/probes/cluster_placement.cu), so a one-wave grid of 512 blocks
//            takes a second (4096 x 14336 int8 at m = 1 25.1 -> 28.5 us). At 9-16 tokens the cluster gains more (1024 x
//            4096 int8 11.06 -> 8.98 at m = 16) but the model does not predict it (NOTES.md c2): atomics there.
enum class SplitReduce { automatic, atomics, cluster };
std::string split_reduce_name(SplitReduce r);
constexpr int kMaxClusterBlocks = 16;  // Hopper's largest cluster (beyond 8, a non-portable size the kernel allows)
constexpr int64_t kAutoClusterColumns = 512;  // automatic's longest cluster block (above: 1024 loses at 2-4 tokens)

// automatic: the wgmma_tma kernel from this many tokens on (where it is built and the GPU has it, int8 and
// int4), the mma kernel below (at one token the mma_tma kernel where it runs: weight_only_mma_tma_automatic); the
// wgmma kernel is a rung named explicitly. Measured on the H100
// (kernels/gemm/NOTES.md, tma1; bench_gemm, 2026-11-24, 14336 x 4096 / 4096 x 14336):
//   int4  from 9: at m = 8 mma is ahead (19.8 / 19.8 us against 22.4 / 23.6), at m = 16 wgmma_tma (24.0 / 24.6
//         against 27.9 / 27.7), at m = 32 and 64 wgmma_tma (29.3 / 29.4 and 41.5 / 40.4 against wgmma's 34.8 /
//         33.5 and 47.3 / 44.9);
//   int8  from 17: at m = 16 mma ties or leads (37.6 / 31.7 against 37.7 / 37.6), at m = 32 wgmma_tma (42.2 /
//         41.4 against mma's 47.5 / 40.9), at m = 64 by 2x (43.4 / 41.7 against 87.3 / 87.5).
//   sparse24 from 17 (bench_gemm, 2026-11-24, mma against wgmma_tma, us; 14336 x 4096 / 4096 x 14336 /
//         4096 x 4096 / 1024 x 4096): m = 8 mma (30.8 / 31.0 / 14.3 / 9.6 against 36.2 / 36.4 / 13.8 / 10.7);
//         m = 16 wgmma_tma on three shapes (38.5 / 34.0 / 16.2 / 11.6 against 37.9 / 37.5 / 15.4 / 11.1); m = 32
//         (44.6 / 42.0 / 19.7 / 15.5 against 41.5 / 42.7 / 18.5 / 12.6); m = 64 by 1.5-2x (84.5 / 84.8 / 35.0 /
//         23.2 against 43.0 / 45.8 / 22.3 / 14.9).
int64_t wgmma_from_tokens(WeightFormat f);  // 17 for int8 and sparse24, 9 for int4

// The wgmma kernel's tiles, in one place (weight_only_sm90.cu instantiates them): N tokens per
// product; blocks of 8 warps (128 rows) resident per SM as the registers allow (ptxas, sm_90a: N = 16
// and 32 take 96 and 122-125 registers, two blocks; N = 64 takes 164-168, one block: capped at 128 for
// two it spills); and as many shared-memory stages of one unit (X [N x 128] bf16, the weight's
// 128 x 128 values, int4's scales) as fit that many blocks, at most 8 (7 units in flight a block).
constexpr int weight_only_wgmma_tokens(int64_t m) { return m <= 16 ? 16 : m <= 32 ? 32 : 64; }
constexpr int weight_only_wgmma_blocks_per_sm(int tokens) { return tokens <= 32 ? 2 : 1; }
// A stage (both Hopper rungs): X [N x 128] bf16, the unit's packed weight (int4 8 KB, int8 16 KB, sparse24 16 KB
// of kept values) and its side data (int4's scales of the 128 rows, 512 bytes; sparse24's metadata, 8 warps x 4
// k32 steps x 64 bytes = 2 KB).
constexpr int64_t weight_only_side_bytes(WeightFormat f) {
  return f == WeightFormat::int4 ? 128 * 4 : f == WeightFormat::sparse24 ? 8 * 4 * 64 : 0;
}
constexpr int64_t weight_only_stage_bytes(WeightFormat f, int tokens) {
  return int64_t(tokens) * 128 * 2 + (f == WeightFormat::int4 ? 128 * 128 / 2 : 128 * 128) + weight_only_side_bytes(f);
}
constexpr int weight_only_wgmma_stages(WeightFormat f, int tokens) {
  const int64_t budget = (227 << 10) / weight_only_wgmma_blocks_per_sm(tokens) - (2 << 10);  // 1 KB alignment, 1 reserved
  const int64_t fit = budget / weight_only_stage_bytes(f, tokens);
  return int(fit < 8 ? fit : 8);
}
constexpr int64_t weight_only_wgmma_smem_bytes(WeightFormat f, int tokens) {
  return weight_only_wgmma_stages(f, tokens) * weight_only_stage_bytes(f, tokens) + 1024;
}
// The wgmma_tma kernel: the same units and stages (a stage per unit); blocks of 8 consumer warps and a
// producer warp, two an SM where the registers allow (N = 16 and 32: the consumers' dequantization and
// products are a latency-bound chain, and 2 warps a scheduler leave it exposed: kernels/gemm/NOTES.md),
// one at N = 64; as many stages as fit the block's share of 227 KB less 1 KB of alignment and 256 bytes
// of mbarriers, at most 8.
constexpr int weight_only_tma_blocks_per_sm(int tokens) { return tokens <= 32 ? 2 : 1; }
// Its producer warps (one copying thread each, taking the units in turn: a thread's copies are processed one after
// another, NOTES.md tma2, so a second producer overlaps the next unit's copies). Measured on the H100 (bench_gemm,
// 14336 x 4096 / 4096 x 14336): int4 at 64 tokens 4 (36.3 / 35.0 us against one's 41.5 / 40.4, copies split
// among them by warp then); int8 at 64 one (43.4 / 41.7 against two's 44.9 / 44.9, before the vector reductions:
// two since, below); 2:4 at 64 two (38.8 / 40.5 us, its weight one box, tma3); at 16 tokens, two blocks an SM, one
// (int4 m = 16 24.0 / 24.6 against two's 27.4 / 26.3; at 32 tokens, below).
// At 32 tokens (two blocks an SM) int4 two (H200, bench_gemm, two rounds, us, 14336 x 4096 / 4096 x 14336 / 4096 x
// 4096 / 1024 x 4096 at m = 32: 25.1, 25.2 / 25.4, 25.6 / 12.4, 12.7 / 10.4, 10.4 with one; 23.6, 23.6 / 24.4, 24.2 /
// 12.6, 12.8 / 9.54, 9.50 with two; ncu at one: 23% of the warps' samples on the consumers' wait for a full stage,
// kernels/gemm/NOTES.md r28), int8 and 2:4 one (two: within -2..+4%). At 64 tokens, since the shared tiles' vector
// reductions (defa2f6), int8 two (H200, the same four shapes, one / two / four: 38.3, 38.2 / 36.0, 36.2 / 35.3, 35.3;
// 37.5, 37.6 / 35.1, 34.7 / 35.2, 35.3; 17.7, 17.7 / 18.5, 18.1 / 18.7, 18.7; 12.2, 12.1 / 12.1, 12.2 / 12.6, 12.8:
// a Llama-3-8B layer's seven 3.3% faster with two, 2.9% with four) and 2:4 two (four: within noise, r28).
// Since int8's pairs are two lop3 and an FMA (9da17cd, a shorter consumer chain), int8 at 32 tokens two (H200,
// bench_gemm, three rounds, us, the same four shapes, one -> two: 27.6, 27.7, 26.9 -> 25.9, 26.0, 26.0; 26.9, 27.0,
// 27.0 -> 26.5, 26.5, 26.2; 13.6, 13.7, 13.6 -> 14.1, 14.0, 14.1; 10.2, 10.2, 10.1 -> 10.0, 9.9, 9.9: the layer's
// seven 2.4% faster); at 64 tokens it keeps two (four: 34.1, 34.0, 34.0 -> 33.3, 33.0, 33.1 on 14336 x 4096 but
// +0.1 / +1.3 / +2.7% on the others, the layer 0.4% faster: within the rounds' spread).
constexpr int weight_only_tma_producers(WeightFormat f, int tokens) {
  return tokens == 64   ? (f == WeightFormat::int4 ? 4 : 2)
         : tokens == 32 ? (f == WeightFormat::int4 || f == WeightFormat::int8 ? 2 : 1)
                        : 1;
}
// Whether a unit's weight lands as one box of a 3-d tensor map (the 8 row tiles' chunks of the group) or as one
// bulk copy per warp. Measured on the H100 (bench_gemm, tma3, us, 14336 x 4096 / 4096 x 14336, box against per
// warp): 2:4 (its metadata a box too: 4 copies a unit against 18) m = 16 33.5 / 33.8 against 37.9 / 37.5, m = 64
// 38.8 / 40.5 against 43.0 / 45.8; int4 m = 16 28.2 / 27.2 against 24.0 / 24.3, m = 32 32.1 / 30.6 against 28.6 /
// 28.7 (why one 8 KB box is slower than eight 1 KB copies there is not known).
constexpr bool weight_only_tma_weight_box(WeightFormat f) { return f == WeightFormat::sparse24; }
// Its grid: at most one block per this many units where the units are few (a block's fill and its
// write-out's atomics, fence, counter and read-back amortized over several units). Measured on the H100
// (bench_gemm, int8 / int4, us) against 1, 2 and 8: 1024 x 4096 at m = 16, 32, 64: 10.7 / 10.1, 12.2 / 11.8,
// 15.9 / 14.8 (one a unit: 12.1 / 11.0, 16.1 / 14.1, 17.7 / 16.5; 8: 14.0 / 13.1, 15.8 / 15.1, 19.0 / 17.2);
// 4096 x 4096: 15.4 / 12.7, 18.2 / 15.3, 22.6 / 20.6 (one: 17.5 / 13.7, 21.6 / 17.5, 22.9 / 20.7; 8 is 5-10%
// faster at m = 32-64 there, 20-30% slower on 1024 x 4096). The MLP shapes (27 units a block) are unaffected.
constexpr int64_t weight_only_tma_min_units = 4;
constexpr int weight_only_tma_stages(WeightFormat f, int tokens) {
  const int64_t fit =
      ((227 << 10) / weight_only_tma_blocks_per_sm(tokens) - 1024 - 256) / weight_only_stage_bytes(f, tokens);
  return int(fit < 8 ? fit : 8);
}
constexpr int64_t weight_only_tma_smem_bytes(WeightFormat f, int tokens) {
  return weight_only_tma_stages(f, tokens) * weight_only_stage_bytes(f, tokens) + 1024 + 256;
}

// The weight-only kernels' plan (kernels/gemm uses it, the model charges the same grid).
// mma: tokens padded to 8·m_tiles; a block's 8 warps hold 128 / k_warps rows, k_warps warps sharing each
// 16-row tile along the block's k range (summed in shared memory); split_k blocks along k per row tile
// (summed by fp32 atomics, the last block converting), k_per_block columns each; blocks_per_sm resident. wgmma: tokens (N), stages, and a persistent grid of ctas blocks over units =
// row_tiles x k/128; block b takes units [b·units/ctas, (b+1)·units/ctas).
struct WeightOnlyPlan {
  WeightOnlyKernel kernel = WeightOnlyKernel::mma;
  int m_tiles = 1;
  int split_k = 1;
  int k_warps = 1;
  int64_t k_per_block = 0;
  int blocks_per_sm = 4;
  int64_t row_tiles = 1;
  int tokens = 0;
  int stages = 0;
  int64_t units = 0;
  int64_t ctas = 0;
  int cluster = 1;  // mma, split_k > 1: blocks a cluster (SplitReduce::cluster: split_k), 1: atomics
};
// The mma_tma kernel's ring (weight_only_mma_tma.cu), in one place: stages of 32 chunks (16 KB of packed weight: int4
// 16 rows x 2048 columns, int8 x 1024) and, for int4, the stage's scales (16 rows x 16 groups, 1 KB); 16 consumer
// warps, two chunks each a stage.
constexpr int kMmaTmaStageChunks = 32;
constexpr int kMmaTmaConsumerWarps = 16;
// Its stages (all of them in flight an SM, beside X's row): int4 3 (51 KB, 6.7 MB over 132 SMs), int8 4 (64 KB). More
// bytes in flight are slower, not faster: 8 stages (17 MB over the GPU) measured on the H100 (kernels/gemm/NOTES.md r6;
// bench_gemm, two machines, in-flight limited by the producer, us, 8 -> 3 / 4 stages): int4 m = 1 14336 x 4096 18.4 ->
// 17.4 / 18.1 (the other machine 18.4 -> - / 17.7), 4096 x 14336 17.6 -> 17.1 / 17.2, 16 tokens on 14336 x 4096 19.8 ->
// 19.1 / 19.6, 8 tokens 17.3 -> 17.1 / 16.7; int8 m = 1 14336 x 4096 25.6 -> 25.6 / 25.1 (25.8 -> - / 25.2), 4096 x
// 14336 25.3 -> 24.9 / 24.8; 4096 x 4096 and 1024 x 4096 within 0.1. The H200, whose faster stream might want more in
// flight, measured the same (bench_gemm, main's binary and one with int4 4 / int8 6 stages alternated, three rounds, us,
// m = 1, the four shapes 14336 x 4096 / 4096 x 14336 / 4096 x 4096 / 1024 x 4096): int4 12.3 / 12.3 / 7.2 / 5.4 against
// 12.3 / 12.5 / 7.3 / 5.5 with 4 stages; int8 17.8 / 17.9 / 8.6 / 6.2 against 18.2 / 18.1 / 9.0 / 6.2 with 6 (NOTES r30).
constexpr int weight_only_mma_tma_stages(WeightFormat f) { return f == WeightFormat::int4 ? 3 : 4; }
// At 2 to 16 tokens with two stages a tile (pt = 2), a ring of 4: a pair of tiles takes slots 0-3, so each stage's slot
// is known when the kernel is compiled; else the int4 ring's 3. Not the wide kernel (kernels/gemm/NOTES.md r21: 16.0 ->
// 16.5 us on 14336 x 4096 at 16 tokens with it, against 18.7 -> 18.1 for the narrow kernel on 4096 x 14336).
constexpr int weight_only_mma_tma_token_stages(int64_t pt, bool wide) { return pt == 2 && !wide ? 4 : 3; }
constexpr int64_t kMmaTmaMaxK = 16384;   // X's row (bf16) in shared memory beside the ring
constexpr int64_t kMmaTmaMinTiles = 64;  // automatic's fewest 16-row tiles (weight_only_mma_tma_automatic)
// At 2 to 16 tokens (int4): the tokens in n8 tiles (B's columns), X's B fragments held in registers for the warp's
// groups (one a stage of a tile: 32 registers a group and n8 tile), at most kMmaTmaMaxGroupTiles groups x tiles (ptxas
// gives 17 warps 96 registers a thread: at 4, 64 registers of X, the 16-token loop spilled 60 bytes, NOTES.md r3);
// beyond, k is split over a cluster of weight_only_mma_tma_split blocks: the first of 1, 2, 4, 8, then 3, 5, 6, 7 (whose
// clusters hold fewer SMs) that divides k / 2048 and brings the groups within the bound (k = 14336, 7 stages: 7).
constexpr int64_t weight_only_mma_tma_token_tiles(int64_t m) { return m <= 8 ? 1 : 2; }
constexpr int64_t kMmaTmaMaxGroupTiles = 2;
int64_t weight_only_mma_tma_split(int64_t m, int64_t k);  // 0: none within 8 blocks
// The wide kernel: at 9-16 tokens (two n8 tiles) and k = 4096 (two stages) unsplit, two groups a warp (64 registers
// of X: its producer a warpgroup of its own that gives its registers to the consumers, setmaxnreg), a tile's sums every
// two stages, no cluster's end; X's second group copied into shared memory while the first tile's first stage computes.
bool weight_only_mma_tma_wide(int64_t m, int64_t k, int64_t split);
// The narrow kernel: at 9-16 tokens, stages of kMmaTmaNarrowWarps groups (1792 columns) for as many consumer warps, two
// stages a tile a block (two groups a warp: 15 warps leave ptxas 128 registers a thread, no setmaxnreg), a tile's sums
// every two stages: k = 14336 (the down projection, 8 stages of 1792) over clusters of 4; X's second group deferred as
// the wide kernel's.
constexpr int kMmaTmaNarrowWarps = 14;
bool weight_only_mma_tma_narrow(int64_t m, int64_t k, int64_t split);
// The consumer warps (two chunks each a stage) of the mma_tma kernel at m tokens over clusters of split blocks.
int weight_only_mma_tma_warps(int64_t m, int64_t k, int64_t split);
// The split the plan takes at 2 to 16 tokens: 1 (the wide kernel) where a block takes at least kMmaTmaWideMinTiles
// 16-row tiles (H200, kernels/gemm/NOTES.md r14; bench_gemm, one process a binary, three rounds, us, int4 at 16
// tokens, split 2 -> wide: 14336 x 4096, 6.8 tiles a block, 17.09 / 17.14 / 17.20 -> 16.18 / 16.26 / 16.26; 4096 x
// 4096, 1.9, 9.98 / 10.05 / 10.02 -> 10.02 / 9.98 / 9.92; 1024 x 4096, 0.5, 7.78 / 7.74 / 7.68 -> 7.87 / 7.86 / 7.87);
// the narrow kernel's (k = 14336: 4) where each of its clusters takes a tile at least (H200, NOTES.md r15; 4096 x
// 14336 at 16 tokens, clusters of 7 -> the narrow kernel: 19.6 / 19.7 / 19.7 -> 18.7 / 18.6 / 18.6); else
// weight_only_mma_tma_split.
constexpr int64_t kMmaTmaWideMinTiles = 4;
int64_t weight_only_mma_tma_plan_split(int64_t m, int64_t n, int64_t k, int64_t sm_count);
// Its clusters of `split` (1 to 8) blocks that fit the GPU at once, one block an SM: every SM in pairs, but the H100's
// GPCs hold whole clusters of 3-8 on fewer SMs (scripts/probes/cluster_occupancy.cu, cudaOccupancyMaxActiveClusters at
// 160-224 KB: 1 / 2 / 3 / 4 / 5 / 6 / 7 / 8 -> 132 / 66 / 39 / 30 / 22 / 17 / 15 / 15, i.e. 132, 132, 117, 120, 110,
// 102, 105, 120 SMs), scaled by the GPU's SMs; the plan asks no more.
int64_t weight_only_mma_tma_clusters(int64_t split, int64_t sm_count);
// Its ring's stages at m tokens over clusters of split blocks: weight_only_mma_tma_stages at one token, else
// weight_only_mma_tma_token_stages of the block's stages a tile.
int weight_only_mma_tma_ring_stages(WeightFormat f, int64_t m, int64_t k, int64_t split);
// Its shared memory for k columns, at most max_tiles 16-row tiles a cluster, m tokens and split blocks along k.
int64_t weight_only_mma_tma_smem_bytes(WeightFormat f, int64_t k, int64_t max_tiles, int64_t m = 1, int64_t split = 1);
// Why the mma_tma kernel cannot run m tokens of an n x k weight in format f ("" where it can).
std::string weight_only_mma_tma_refusal(WeightFormat f, int64_t m, int64_t n, int64_t k, bool hopper);
// automatic: the mma_tma kernel at one token wherever it can run with at least kMmaTmaMinTiles 16-row tiles (the fewest
// measured: 1024 rows, 64 blocks of one tile; with fewer its blocks are few and short where the mma kernel splits k, not
// measured), the mma kernel otherwise. Measured on the H100 (kernels/gemm/NOTES.md r1; bench_gemm, one session, three rounds, us, mma ->
// mma_tma, m = 1): int4 14336 x 4096 17.30 / 17.22 / 17.38 -> 16.56 / 16.56 / 16.59, 4096 x 14336 17.22 / 17.09 / 17.18
// -> 16.14 / 16.40 / 16.27, 4096 x 4096 8.83 / 8.83 / 8.91 -> 8.26 / 8.21 / 8.35, 1024 x 4096 (64 tiles) 6.62 / 6.53 /
// 6.66 -> 6.02 / 6.05 / 6.11; int8 24.62 / 24.78 / 24.80 -> 24.30 / 24.42 / 24.61, 25.02 / 25.02 / 25.10 -> 24.03 /
// 24.13 / 24.26, 10.66 / 10.56 / 10.72 -> 10.48 / 10.40 / 10.53, 7.31 / 7.20 / 7.36 -> 6.78 / 6.75 / 6.88.
// int4 at 2 to 16 tokens the same, where it runs (k / 2048 split over a cluster of 1, 2, 4 or 8 blocks into at most two
// groups a warp: the MLP's 14336 x 4096 and the 4096 x 4096 projections; k = 14336 splits over 7, below). Measured on the H100 (NOTES.md
// r3, bench_gemm, us, m = 4 / 8 / 16, mma or wgmma_tma (the plan before) -> mma_tma): 14336 x 4096 18.5 / 19.2 / 23.7
// -> 17.0 / 17.7 / 22.3; 4096 x 4096 11.0 / 11.6 / 12.5 -> 9.1 / 9.7 / 11.9; 1024 x 4096 7.1 / 7.1 / 10.3 -> 6.8 / 7.1 /
// 8.8. So int4 at 2 to 16 tokens where it runs in clusters of at most 2 (clusters of 4 and 8 run on 124 of the 132
// SMs: NOTES.md c1) and a cluster's sums fit beside the ring (at 9-16 wgmma_tma until the
// model named the tile barrier's drain, NOTES.md r4: 14-22% fast before, 13-17% after; compression from 21ede61: 14336 x
// 4096 at m = 16 24.1 -> 22.5 us, 1024 x 4096 10.3 -> 8.9; 20.3 on 14336 x 4096 after r5 batched the cluster's sums).
// And the down projection (k = 14336) at 9-16 tokens over clusters of 7 (105 of the 132 SMs): 16 tokens named 21.4 /
// 21.5 against wgmma_tma's 24.0 / 24.2 (NOTES.md r10; 9-15 tokens run the same kernel, not timed), 4-8 tokens a tie
// with the mma kernel, which keeps them; compression from 0415b1d 24.54 -> 22.27 us (r11).
bool weight_only_mma_tma_automatic(WeightFormat f, int64_t m, int64_t n, int64_t k, int64_t sm_count, bool hopper);
// kernel: automatic resolves by m (wgmma_available: built for sm_90a and running on compute capability
// 9.0); wgmma for sparse24 is an inferlab::Error naming why (its port is the wgmma_tma rung's).
// reduce: how split-k blocks sum (weight_only_cluster_blocks: where it cannot run, an inferlab::Error naming why; with
// split_k 1 nothing is summed across blocks and it is ignored).
// split_k: the mma kernel's blocks along k (0: the plan's; else a candidate that divides k / 128 and whose block fits
// the shared memory, an inferlab::Error naming the bound otherwise; one block along k lets a tile's warps share its
// range as the plan does, more give every warp its own 16 rows); the mma_tma kernel's at 2 to 16 tokens (the blocks of
// a cluster along k: one that divides k / 2048 into stages whose X fragments fit, weight_only_mma_tma_split's bound or
// the wide kernel's, an inferlab::Error naming it otherwise).
WeightOnlyPlan plan_weight_only(WeightFormat f, int64_t m, int64_t n, int64_t k, int64_t sm_count,
                                WeightOnlyKernel kernel = WeightOnlyKernel::automatic, bool wgmma_available = true,
                                SplitReduce reduce = SplitReduce::automatic, int64_t split_k = 0);
int weight_only_m_tiles(int64_t m);
// mma: the warps that share a 16-row tile along k (1, 2, 4 or 8) for m tokens, n rows and a block's k range:
// at m = 1 as many as divide its 128-column groups with at most max_row_tiles row tiles (blocks along n: one
// wave), else 1. Measured on the H100 (kernels/gemm/NOTES.md w4: scripts/probes/weight_stream.cu, bench_gemm
// and the compression run): at m = 1 the split-k write-out (atomics, fence, counter, read-back) costs 2.5-4 us
// a launch in the probe, and summing in shared memory instead took int8 14336 x 4096 from 26.5 to 25.6 us,
// int4 4096 x 4096 from 11.0 to 9.5; more blocks than one wave cost int4 14336 x 4096 21.8 us against 18.0
// (each block's scales and X are a round trip before its loop); at m = 2 and 4 (4 and 2 warps a tile) int4
// 14336 x 4096 took 20.3 / 20.2 us against split-k's 18.5 / 18.9 (not understood), so m > 1 keeps split-k.
int weight_only_k_warps(int64_t m, int64_t n, int64_t k_per_block, int64_t max_row_tiles);
// mma: the blocks an SM the kernel is built for at m_tiles n8 tiles of tokens (its registers: 64 a thread for 4,
// else more): 4 up to 8 tokens (6 chunks a warp in flight); at 16 tokens 4 (4 chunks a warp) where the 128-row
// tiles alone outnumber half the SMs, else 2 (8 chunks a warp); 2 above. Measured on the H100 at 16 tokens
// (bench_gemm, us, 2 blocks -> 4): 14336 x 4096 int8 37.5 -> 32.3, 2:4 38.4 -> 34.7, int4 28.0 -> 25.0 (112 row
// tiles: split-k 2 -> 4); 4096 x 4096 int8 16.2 -> 16.6, 2:4 16.1 -> 17.2, int4 14.9 -> 15.9; 4096 x 14336 int8
// 31.7 -> 32.5, int4 27.8 -> 24.7 (32 row tiles: split-k 8 -> 16, the extra splits' write-outs).
int weight_only_mma_blocks_per_sm(int m_tiles, int64_t n, int64_t sm_count);
// mma: the block's shared memory: X's rows (padded by 16 bytes; m = 1 with shared tiles, else 8·m_tiles, the
// rows past m zero), int4's scales and group sums of X, and the partial sums of the warps that share a tile;
// cluster > 1 (SplitReduce::cluster): the sums the cluster's blocks send, m x cluster x the rows each owns
// (the block's rows / cluster, rounded up) in fp32.
int64_t weight_only_smem_bytes(WeightFormat f, int64_t m, int m_tiles, int64_t k_per_block, int k_warps, int cluster = 1);
// mma: the blocks of a cluster that sum a row tile's split_k partial sums for `reduce` (1: fp32 atomics), given the
// plan's kernel, split_k, k_per_block, k_warps, m_tiles and blocks_per_sm; a reduce named for a Hopper kernel (wgmma,
// wgmma_tma: they plan their own grid), or SplitReduce::cluster where it cannot run (not Hopper, more than
// kMaxClusterBlocks splits, more than 16 tokens, the received sums beyond the block's shared memory) is an
// inferlab::Error naming why.
int weight_only_cluster_blocks(WeightFormat f, int64_t m, const WeightOnlyPlan& plan, SplitReduce reduce, bool hopper);
// wgmma: the blocks that share row tile `tile` (1: it is summed in registers and stored by one block).
int64_t weight_only_wgmma_segments(const WeightOnlyPlan& plan, int64_t tile, int64_t k);

}  // namespace inferlab
