#include "inferlab/sim/kernels.h"

#include <algorithm>
#include <cmath>

#include "inferlab/sim/error.h"
#include "inferlab/sim/hardware.h"
#include "inferlab/sim/linear.h"
#include "inferlab/sim/ops.h"

namespace inferlab {
namespace {

// Instructions per thread of one iteration of a kernel's hot loop, by pipe, read off its SASS:
//   scripts/sass-counts.py build/<object> [function regex] --json
// on the objects built for sm_90 (sm_90a for the flash kernel) with nvcc 13.0 (cuobjdump 13.x).
struct LoopCounts {
  double tensor, mufu, fp32, alu, cvt, memory, uniform, control;
  double other() const { return memory + uniform + control; }
  double total() const { return tensor + mufu + fp32 + alu + cvt + memory + uniform + control; }
};

// attention/flash_fwd_sm90 (kernels/CMakeFiles/inferlab_kernels_sm90a.dir/attention/src/flash_fwd_sm90.cu.o,
// bf16; fp16 identical): one K/V tile of 128 keys for one consumer warpgroup (64 query rows).
// The loop's masking block (partial and diagonal tiles) is left out.
constexpr LoopCounts kFlashD128{16, 66, 228, 129, 32, 8, 105, 28};
constexpr LoopCounts kFlashD128Causal{16, 66, 228, 135, 32, 10, 105, 28};
constexpr LoopCounts kFlashD64{12, 66, 196, 110, 32, 8, 81, 20};
constexpr LoopCounts kFlashD64Causal{12, 66, 196, 96, 32, 8, 82, 20};
// attention/flash_fwd_sm90_overlap (.../attention/src/flash_fwd_sm90_overlap.cu.o, bf16): the tile loop,
// which the item loop holds once, unrolled around it, so it is named by its start:
//   scripts/sass-counts.py OBJ 'OverlapTileILi128EEELb0E13__nv_bfloat16' --loop 3070
// (nvcc 13.0, fe30984; d64 2b80 / causal 3020, d96 2d50 / 3230, d128 3070 / 3560, d256 2d40 / 3060). One K/V tile
// (128 keys; 64 at head dim 256, sim/kernels.h flash_overlap_block_n) for one consumer warpgroup, on the steady
// path: O's rescale (head_dim / 2 FMULs a thread) is a region the scripts leave out, as the lazy maximum skips it
// on most tiles.
constexpr LoopCounts kOverlapD64{12, 66, 142, 109, 32, 4, 94, 29};
constexpr LoopCounts kOverlapD64Causal{12, 66, 142, 112, 32, 4, 94, 31};
constexpr LoopCounts kOverlapD96{22, 66, 142, 107, 32, 4, 152, 33};
constexpr LoopCounts kOverlapD96Causal{22, 66, 142, 110, 32, 4, 152, 35};
constexpr LoopCounts kOverlapD128{16, 66, 142, 99, 32, 4, 108, 41};
constexpr LoopCounts kOverlapD128Causal{16, 66, 142, 100, 32, 4, 110, 43};
constexpr LoopCounts kOverlapD256{20, 34, 78, 67, 16, 4, 128, 58};
constexpr LoopCounts kOverlapD256Causal{20, 34, 78, 70, 16, 4, 131, 62};
// Its chain per tile for one warp (scripts/sass-chain.py, same loop, --warpgroups 2 --tensor-flops-per-clk 4096
// --tensor-clock-ratio 1): cycles of the clock the kernel runs at. The softmax of S_j runs while P_{j-1} V_{j-1} is
// in flight (the chain waits for each wgmma group as WARPGROUP.DEPBAR.LE gsb0, n names it), so the chain is the
// warpgroup's two products back to back plus the P V wait's tail: the products at the SM's wgmma rate (4096 FLOP a
// clock, PipeCeilings::wgmma_flops_per_clk; the H200 measured 4090-4100) shared with the other warpgroup. (Until
// 2026-11-29 they were taken at the library GEMM's rate, 3268 FLOP a tensor clock: 2772 at every head dim from 128,
// 1690-2079 below.) Before the softmax moved between the waits (7602a85) they were 2038 / 2593 / 3167 / 2888.
constexpr double kOverlapChainD64 = 1509, kOverlapChainD64Causal = 1513, kOverlapChainD96 = 1761,
                 kOverlapChainD96Causal = 1779, kOverlapChainD128 = 2060, kOverlapChainD128Causal = 2069,
                 kOverlapChainD256 = 2048, kOverlapChainD256Causal = 2048;
// attention/decode (inferlab_kernels.dir/attention/src/decode.cu.o, head dim 128, 8 or 4 warps
// alike): one 16-token K/V tile for one warp; MT = m16 tiles of query heads (1: up to 16, 2: 32).
constexpr LoopCounts kDecodeMt1{32, 10, 88, 353, 4, 43, 6, 17};
constexpr LoopCounts kDecodeMt1Paged{32, 10, 88, 382, 4, 78, 6, 33};
constexpr LoopCounts kDecodeMt2{64, 20, 176, 395, 8, 47, 6, 17};
constexpr LoopCounts kDecodeMt2Paged{64, 20, 176, 444, 8, 87, 6, 33};
// Its epilogue loops (the same SASS for every layout and MT, head dim 128), instructions per thread:
// the warps' merge, one output element per iteration (split: the partial written, 88-93; plain: the
// normalized output, and in the warps whose lanes hold d = 0 the log-sum-exp, 137), and the last
// piece's merge: one batch of 16 pieces (275: 16 float4 and 16 float2 loads, 16 ex2, 80 FFMA) and
// the per-item rest (121: normalize, convert, store, the log-sum-exp).
constexpr double kWarpMergeSplit = 93, kWarpMergePlain = 137, kMergeBatch = 275, kMergeItem = 121;
// roofline/src/pipe_ceilings.cu dependent_kernel: its unrolled loop (SASS, nvcc 13.0, sm_90) issues 16
// dependent FFMAs and 3 loop instructions per iteration; dependent_issue_cycles is ticks per FFMA.
constexpr double kDependentLoopFfmas = 16, kDependentLoopInstructions = 19;
// One warp's dependent chain through one iteration of a loop, alone on its scheduler: the in-order
// issue its SASS control words schedule (stall counts, scoreboards), read off by
//   scripts/sass-chain.py build/<object> <function regex> [--warpgroups W]
// (latencies: smem 30, mufu 18 cycles, the SM's share of the tensor cores; nvcc 13.0). `alone`: the
// cycles with no DRAM wait; `beside`: the cycles beside one DRAM latency: an iteration whose loads
// were issued one iteration earlier (a ring's refill) or that fences its copies in flight takes
// latency + beside cycles when that is the longer.
struct Chain {
  double alone, beside;
};
// gemm/weight_only (inferlab_kernels.dir/gemm/src/weight_only.cu.o): the loop body holds kDepth
// chunks (m_tiles 1: 6, 2 and 4: 8, 8: 4; the last entry m_tiles 2 at 4 blocks an SM: 4); a chunk is 16 weight
// rows x 64 (int4) or 32 columns.
// Each chunk's refill is issued after its use and consumed kDepth chunks (one iteration) later.
struct WoLoop {
  int depth;
  LoopCounts c;
  Chain chain;
};
constexpr WoLoop kWoInt4[] = {{6, {24, 0, 42, 242, 0, 29, 0, 12}, {1044, 949}},
                              {8, {64, 0, 104, 411, 0, 64, 0, 19}, {1561, 1362}},
                              {8, {128, 0, 200, 479, 0, 105, 0, 17}, {1922, 1690}},
                              {4, {128, 0, 196, 393, 0, 94, 0, 28}, {3394, 3164}},   // spills: LDL on the chain
                              {4, {32, 0, 52, 223, 0, 33, 0, 12}, {1276.6, 1143.6}}};  // m_tiles 2, 4 blocks an SM
// int8 read again from 9da17cd's SASS (its pairs by two lop3 and an FMA, kernels/gemm/NOTES.md r29).
constexpr WoLoop kWoInt8[] = {{6, {12, 0, 48, 172, 0, 13, 0, 10}, {679, 552}},
                              {8, {32, 0, 64, 277, 0, 32, 0, 12}, {1313, 1180}},
                              {8, {64, 0, 64, 311, 0, 48, 0, 19}, {1413, 1268}},
                              {4, {64, 0, 32, 199, 0, 41, 0, 12}, {1033, 815}},
                              {4, {16, 0, 32, 145, 0, 17, 0, 8}, {680, 546}}};
// int8 on shared tiles (m = 1, Share::warp; Share::block 211 instructions, 640 / 513 cycles): the weight as fp16 against
// X's row converted once (w9, NOTES.md). The plain entries stand for int4's and 2:4's shared loops: int4's are within
// 5% of its plain loop (366 / 367 instructions against 349), 2:4's Share::warp loop too (183 against 185), while its
// Share::block loop is shorter (121) and is not charged as its own (2:4 on 14336 x 4096 at m = 1: 26.15 us predicted
// against 26.27 measured).
constexpr WoLoop kWoInt8Shared{6, {12, 0, 48, 125, 0, 13, 0, 10}, {691, 564}};
constexpr WoLoop kWoSparse[] = {{6, {6, 0, 0, 139, 0, 24, 1, 15}, {805, 695}},
                                {8, {16, 0, 0, 173, 0, 40, 0, 25}, {1047, 937}},
                                {8, {32, 0, 0, 153, 0, 49, 0, 28}, {915, 793}},
                                {4, {32, 0, 0, 147, 0, 45, 0, 16}, {829, 685}},
                                {4, {8, 0, 0, 93, 0, 21, 0, 11}, {591, 469}}};
// The loop weight_only.cu builds for a format at m_tiles n8 tiles of tokens and blocks_per_sm
// (sim/kernels.h weight_only_mma_blocks_per_sm), its tiles shared (k_warps > 1) or not: its depth is the plan's chunks
// a warp keeps in flight.
const WoLoop& wo_loop(WeightFormat f, int m_tiles, int blocks_per_sm, bool shared) {
  if (f == WeightFormat::int8 && shared) return kWoInt8Shared;
  const int i = m_tiles == 1 ? 0 : m_tiles == 2 ? (blocks_per_sm == 4 ? 4 : 1) : m_tiles == 4 ? 2 : 3;
  return f == WeightFormat::int4 ? kWoInt4[i] : f == WeightFormat::int8 ? kWoInt8[i] : kWoSparse[i];
}
// gemm/weight_only_sm90 (inferlab_kernels_sm90a.dir/gemm/src/weight_only_sm90.cu.o): one unit (a
// 128-column group of the warp's 16 rows: 8 wgmma k16 steps, the unit's copies issued) for one warp,
// N = 16, 32, 64 tokens; the steady-state path only (sass-chain.py's path: the stretch's write-out,
// taken once or twice a block, left out). HADD2/HFMA2 count on the fp32 pipe. Read again from 9da17cd's SASS
// (nvcc 13.0) for both Hopper rungs' int4 and int8: until then each format held the other's loop (int4 the float route's
// 64 FADD a unit, int8 int4's HFMA2s counted as ALU), which moved 17 committed points' predictions by at most 2.7%.
constexpr LoopCounts kWgInt4[] = {{8, 2, 40, 187, 4, 19, 23, 13}, {8, 2, 48, 227, 4, 20, 10, 17}, {8, 2, 64, 216, 4, 22, 23, 13}};
constexpr LoopCounts kWgInt8[] = {{8, 2, 40, 182, 4, 17, 18, 13}, {8, 2, 48, 190, 4, 18, 24, 13}, {8, 2, 64, 209, 4, 20, 23, 13}};
// Its chain per unit (sass-chain.py --warpgroups 4 for N = 16 and 32: two blocks an SM; 2 for N = 64).
// The unit's fence.proxy.async (SASS: MEMBAR.ALL.CTA, before the unit's barrier) waits for every
// copy the thread has in flight, the next units' included: each unit waits one DRAM latency for the
// copies the previous unit issued, however many stages the ring has (measured ~1.6 us a unit at
// every N, kernels/gemm/NOTES.md).
constexpr Chain kWgChainInt4[] = {{818.9, 441.6}, {1154.4, 436.6}, {1162.4, 493.6}};
constexpr Chain kWgChainInt8[] = {{830.8, 460.0}, {1096.8, 468.0}, {1185.7, 539.0}};
// gemm/weight_only_sm90_tma (inferlab_kernels_sm90a.dir/gemm/src/weight_only_sm90_tma.cu.o): a consumer
// warp's steady-state path per unit (sass-chain.py --warpgroups 4 for N = 16 and 32, two blocks an SM; 2
// for N = 64): its per-pipe counts and its chain with no DRAM wait (the producer's copies are off the
// consumers' path). Read again from 9da17cd's SASS as the wgmma rung's above (the formats had been swapped).
constexpr LoopCounts kTmaInt4[] = {{8, 0, 40, 130, 0, 4, 0, 29}, {8, 0, 48, 129, 0, 4, 0, 29}, {8, 0, 64, 129, 0, 4, 0, 29}};
constexpr LoopCounts kTmaInt8[] = {{8, 0, 40, 141, 0, 4, 0, 29}, {8, 0, 48, 141, 0, 4, 0, 29}, {8, 0, 64, 141, 0, 4, 0, 29}};
constexpr double kTmaChainInt4[] = {628.4, 902.8, 914.8};
constexpr double kTmaChainInt8[] = {611.4, 891.8, 898.8};
// 2:4 (the same kernel, sparse24): 4 wgmma.sp k32 a unit on the stored fragments, no conversion.
constexpr LoopCounts kTmaSparse[] = {{4, 0, 8, 65, 0, 8, 0, 21}, {4, 0, 16, 65, 0, 8, 0, 21}, {4, 0, 32, 53, 0, 8, 0, 21}};
constexpr double kTmaChainSparse[] = {338.2, 474.4, 481.4};
// attention/naive softmax_rows (inferlab_kernels.dir/attention/src/attention.cu.o): the first pass
// (online max and sum) per 4 elements of a row per thread. The second pass (exp, scale, store) is
// counted from its source: load, subtract, ex2, multiply, convert, store, index and compare.
constexpr LoopCounts kSoftmaxPass1x4{0, 7, 35, 26, 0, 4, 0, 17};
constexpr LoopCounts kSoftmaxPass2x1{0, 1, 2, 3, 1, 2, 0, 1};
// What every thread of a row's block runs once whatever the row's length: its indices and bounds, the two block
// reductions, the log-sum-exp and the loops' entries and exits. Read off ncu's per-instruction execution counts of
// one launch (H200, MHA seq 512: 262 144 rows of 512), the instructions a warp executes other than the element
// loops': 353 of its 460 (a warp-0-only instruction counted an eighth). At seq 512 the kernel is issue-bound (ncu:
// issue slots 90% busy), where the loops alone would make it a seventh of that.
constexpr LoopCounts kSoftmaxRow{0, 0, 65.2, 185.1, 0, 4.2, 38.8, 59.9};

PipeWork work_of(const LoopCounts& c, double threads_iterations) {
  PipeWork w;
  w.tensor_ops = c.tensor * threads_iterations;
  w.mufu = c.mufu * threads_iterations;
  w.fp32 = c.fp32 * threads_iterations;
  w.alu = c.alu * threads_iterations;
  w.cvt = c.cvt * threads_iterations;
  w.other = c.other() * threads_iterations;
  return w;
}

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// One block's loop of `iterations` iterations, the warps latency-bound: with W warps on a scheduler,
// each needing the chain's cycles for `instructions` instructions, the scheduler issues
// min(1, W x instructions / chain) a cycle, so an iteration takes max(chain alone, the SM's issue
// of its resident warps' instructions). The first iteration's loads arrive with the block's first
// round trip (cta_round_trips); every later one waits for the loads the previous iteration issued:
// one DRAM latency beside the chain's other cycles, where that is the longer.
double latency_bound_cycles(const Chain& ch, double instructions, double iterations, double resident_warps,
                            const PipeCeilings& p) {
  const double per = std::max(ch.alone, resident_warps * instructions / p.issue_per_clk);
  const double with_dram = p.dram_latency_s * p.sm_clock_hz + ch.beside;
  return iterations * per + std::max(0.0, iterations - 1.0) * std::max(0.0, with_dram - per);
}

double write_share(const Op& op) {
  double w = 0;
  for (const auto& t : op.traffic)
    if (t.write) w += t.bytes;
  return op.bytes() > 0 ? w / op.bytes() : 0.0;
}

}  // namespace

std::string composition_name(Composition c) { return c == Composition::serialized ? "serialized" : "overlapped"; }
std::string launch_mode_name(LaunchMode m) { return m == LaunchMode::graph ? "graph" : "eager"; }
LaunchMode parse_launch_mode(const std::string& s) {
  if (s == "eager") return LaunchMode::eager;
  if (s == "graph") return LaunchMode::graph;
  throw Error("unknown launch mode '" + s + "' (known: eager, graph)");
}

PipeWork PipeWork::scaled(double f) const {
  PipeWork w = *this;
  w.tensor_flops *= f;
  w.tensor_ops *= f;
  w.mufu *= f;
  w.fp32 *= f;
  w.alu *= f;
  w.cvt *= f;
  w.other *= f;
  return w;
}

PipeWork& PipeWork::operator+=(const PipeWork& o) {
  tensor_flops += o.tensor_flops;
  tensor_ops += o.tensor_ops;
  mufu += o.mufu;
  fp32 += o.fp32;
  alu += o.alu;
  cvt += o.cvt;
  other += o.other;
  return *this;
}

KernelLaunch streaming_kernel(const std::string& name, double bytes, double write_share, double fp32_ops,
                              const Hardware& hw) {
  KernelLaunch k;
  k.kernel = name;
  k.ctas = int64_t(hw.sm_count) * 8;
  k.ctas_per_sm = 8;
  k.bytes = bytes;
  k.write_share = write_share;
  k.work.fp32 = fp32_ops;
  k.work.other = bytes / 16.0;  // one 16-byte load or store per thread
  k.startup_round_trips = 1;
  return k;
}

// --- attention prefill ---------------------------------------------------------------------------

namespace {

// The flash kernel (flash_fwd_sm90.cu): persistent, one CTA per SM, 2 consumer warpgroups of 64
// query rows (BM = 128) and a producer warpgroup; K/V tiles of BN = 128 keys; items = (query block,
// batch x head) taken from a counter. Both consumer warpgroups wait on the same K/V stage, so they
// run in step: the SM's tensor, MUFU, FP32, ALU and conversion work add up (serialized); the
// producer's copies overlap them.
// The persistent flash kernels' work items: (query block of 128 rows, batch x head).
int64_t flash_items(const AttentionShape& s) { return ceil_div(s.new_tokens, int64_t(128)) * s.batch * s.heads; }

// Tensor FLOPs of one warpgroup's tile: S = Q K^T and O += P V over its 64 query rows and bn keys at head dim d.
double flash_wg_tile_flops(int64_t bn, int64_t d) { return 4.0 * 64.0 * double(bn) * double(d); }

// K/V tiles of bn keys over all items (query blocks of 128 rows) of the shape, each counted twice: two
// consumer warpgroups an item tile. Causal items stop at their last row's diagonal.
double flash_wg_tiles(const AttentionShape& s, int64_t bn) {
  constexpr int64_t BM = 128;
  const int64_t m_blocks = ceil_div(s.new_tokens, BM);
  const int64_t seq_k = s.past_tokens + s.new_tokens;
  const int64_t offset = seq_k - s.new_tokens;
  double tiles = 0;  // K/V tiles over all items of one (batch, head)
  for (int64_t mb = 0; mb < m_blocks; ++mb) {
    int64_t end = seq_k;
    if (s.causal) end = std::min(seq_k, (mb + 1) * BM + offset);
    tiles += double(end > 0 ? ceil_div(end, bn) : 0);
  }
  return 2.0 * tiles * double(s.batch * s.heads);
}

// K/V tiles of bn keys of the shape's longest item: its last query block's (causal: up to the diagonal, which the
// last block's rows reach at the last key).
int64_t flash_longest_item_tiles(const AttentionShape& s, int64_t bn) {
  const int64_t seq_k = s.past_tokens + s.new_tokens;
  return s.new_tokens > 0 && seq_k > 0 ? ceil_div(seq_k, bn) : 0;
}

// The wgmma rung over `wg_tiles` warpgroup tiles of 128 keys in `items` work items, the longest `longest_tiles` tiles,
// at one head dim: a dense shape's (flash_sm90) or the sum of a varlen launch's sequences (varlen_prefill_kernels).
KernelLaunch flash_sm90_tiles(double wg_tiles, int64_t items, int64_t longest_tiles, int64_t head_dim, bool causal,
                              DType dtype, const Hardware& hw) {
  constexpr int64_t BN = 128;
  const LoopCounts& c = head_dim <= 64 ? (causal ? kFlashD64Causal : kFlashD64) : (causal ? kFlashD128Causal : kFlashD128);
  KernelLaunch k;
  k.kernel = "flash_fwd_sm90_kernel";
  k.composition = Composition::serialized;
  k.tensor = TensorPath::wgmma;
  k.wgmma_clocked = true;
  k.ctas = std::min<int64_t>(items, hw.sm_count);
  k.ctas_per_sm = 1;
  k.work = work_of(c, 128.0 * wg_tiles);
  k.work.tensor_flops = wg_tiles * flash_wg_tile_flops(BN, head_dim);
  k.work.tensor_dtype = dtype;
  k.startup_round_trips = 2;
  // Between one item's last tile and the next item's first product, four dependent steps: the
  // work counter's atomic, the item slot handed through shared memory, the Q buffer released and
  // refilled, the first K/V tile.
  k.sm_round_trips = 4.0 * double(ceil_div(items, hw.sm_count));
  // However the items balance, a CTA takes its items whole: the launch lasts at least its longest item, its tiles
  // one after another at one SM's serialized pipes (both warpgroups' work on a tile) or its issue. Where the items
  // are few (the engine's prefill of short sequences over few heads: 128 items of 1-16 tiles at 1 x 2048, 8 heads)
  // the work spread over the SMs (the pipes term) is the average item, not the longest: charged so, the trained
  // models' prefill was 15-43% short (H200, kernels/attention/NOTES.md).
  const PipeCeilings& pc = hw.pipes;
  const double tile_threads = 256.0;  // both consumer warpgroups
  const double serialized = 2.0 * flash_wg_tile_flops(BN, head_dim) / pc.wgmma_flops_per_clk +
                            tile_threads * (c.mufu / pc.mufu_lanes + c.fp32 / pc.fp32_lanes + c.alu / pc.alu_lanes +
                                             c.cvt / pc.cvt_lanes);
  const double issue = tile_threads / 32.0 * (c.total() - c.tensor) / pc.issue_per_clk;
  k.cta_cycles = double(longest_tiles) * std::max(serialized, issue);
  return k;
}

KernelLaunch flash_sm90(const AttentionShape& s, DType dtype, const Hardware& hw) {
  return flash_sm90_tiles(flash_wg_tiles(s, 128), flash_items(s), flash_longest_item_tiles(s, 128), s.head_dim,
                          s.causal, dtype, hw);
}

// The tile loop of the overlapped kernel at a head dim it has; a head dim it does not have (a model's, in the
// analytic tables) is charged as the next larger one it has.
struct OverlapLoop {
  const LoopCounts* counts;
  double chain;
  int64_t head_dim;  // the kernel's
};
OverlapLoop overlap_loop(int64_t head_dim, bool causal) {
  if (head_dim <= 64) return {causal ? &kOverlapD64Causal : &kOverlapD64, causal ? kOverlapChainD64Causal : kOverlapChainD64, 64};
  if (head_dim <= 96) return {causal ? &kOverlapD96Causal : &kOverlapD96, causal ? kOverlapChainD96Causal : kOverlapChainD96, 96};
  if (head_dim <= 128)
    return {causal ? &kOverlapD128Causal : &kOverlapD128, causal ? kOverlapChainD128Causal : kOverlapChainD128, 128};
  return {causal ? &kOverlapD256Causal : &kOverlapD256, causal ? kOverlapChainD256Causal : kOverlapChainD256, 256};
}

// The overlapped flash kernel (flash_fwd_sm90_overlap.cu): the schedule, tiles and items of
// flash_sm90, its tile by head dim from sim/kernels.h; the two consumer warpgroups take turns issuing their
// products (ping-pong), and within a warpgroup the softmax of S_j runs while P_{j-1} V_{j-1} is in flight (the wait
// for P V in a block of its own: kernels/attention/NOTES.md v7d). A CTA's time is its item tiles, a tile pair at a
// time, at the larger of the loop's chain (sass-chain.py) and the stand-in below, or the SM's pipes if they take
// longer.
KernelLaunch flash_sm90_overlapped(const AttentionShape& s, DType dtype, const Hardware& hw) {
  KernelLaunch k = flash_sm90(s, dtype, hw);
  const OverlapLoop loop = overlap_loop(s.head_dim, s.causal);
  const LoopCounts& c = *loop.counts;
  const double chain = loop.chain;
  const int64_t bn = flash_overlap_block_n(loop.head_dim);  // sim/kernels.h: 64 keys at 256, else 128
  const double wg_tiles = flash_wg_tiles(s, bn);
  const double tensor_flops = wg_tiles * flash_wg_tile_flops(bn, s.head_dim);
  k.kernel = "flash_fwd_overlap_kernel";
  k.composition = Composition::overlapped;
  k.work = work_of(c, 128.0 * wg_tiles);
  k.work.tensor_flops = tensor_flops;
  k.work.tensor_dtype = dtype;
  // Items balance dynamically: a CTA walks its share of the item tiles (two warpgroups each). Per item the
  // producer has taken the next item and loaded its Q ahead (flash_sm90's four dependent steps are not
  // on the path), but the pairing of S_j with P_{j-1} V_{j-1} restarts: an item's first S and last P V
  // run unpaired, one tile's chain an item, and one dependent round trip an item stays exposed (which
  // step of the hand-off it is is not named). Measured against both head dims (attention_prefill and
  // attention_prefill_d64, 72 points): 4 round trips an item, as flash_sm90: worst 58% (seq 512, d64,
  // predicted slow); a chain step and no round trip: 29% fast; this: 23.7%.
  const double items_per_sm = double(ceil_div(flash_items(s), int64_t(hw.sm_count)));
  // A tile pair (both warpgroups' tiles) takes the chain, or the tensor cores' and the SFU's work one after the
  // other if that is longer: the products at the SM's wgmma rate, then the exponentials at 16 a clock, in cycles of
  // the clock the power limit holds under sustained wgmma (KernelLaunch::wgmma_clocked). That is what the four head
  // dims measured (the H200, 2026-11-28; at the probe's 1.6 GHz, seq 16384, not causal): per tile pair d64 / 96 /
  // 128 / 256 took 1997 / 2524 / 2879 / 2636 cycles against tensor + SFU 2080 / 2592 / 3104 / 2592 and the chain
  // 1509 / 1761 / 2060 / 2048; ncu (--clock-control none) counted 2719 cycles a pair at head dim 128 with the
  // tensor pipe busy 76%, at 1.71 GHz in its single launch. The ping-pong hides part of one warpgroup's softmax
  // under the other's products at head dim 128 (the sum is 8% long there) and little of it elsewhere; the SFU as the
  // mechanism was tested and is not it: a quarter of the exponentials moved to the FMA pipe (d51cdbf, reverted)
  // measured 0-7% slower (kernels/attention/NOTES.md v7e). So the sum stands in for a cost of the tile pair that is
  // not named yet. (Until 2026-11-29 the products were charged at the library GEMM's measured rate and the SM
  // clock: that rate is cuBLAS's at 8192^3, 789 TFLOP/s on the H100 and 685 on the H200, whose SMs are the H100's
  // and on which this kernel runs as fast: the H200's points were predicted 18.6% slow, median.)
  const double pair_flops = 2.0 * flash_wg_tile_flops(bn, s.head_dim);
  const double pair_cycles = pair_flops / hw.pipes.wgmma_flops_per_clk + 2.0 * 128.0 * c.mufu / hw.pipes.mufu_lanes;
  const double step = std::max(chain, pair_cycles);
  k.cta_cycles = step * wg_tiles / 2.0 / double(k.ctas) + chain * items_per_sm;
  k.sm_round_trips = items_per_sm;
  // One Q buffer (head dim 256, sim/kernels.h): the producer loads the next item's Q only once the consumers
  // have released the buffer, after the item's last S, so per item that load stands exposed: one more round
  // trip and the tile's bytes through the SM's port (PipeCeilings::sm_bandwidth). Before this term head dim 256
  // at seq 512 (16 items an SM of 8 tiles) was predicted 26-30% fast.
  if (flash_overlap_q_buffers(loop.head_dim) == 1) {
    const double q_bytes = 128.0 * double(flash_overlap_stored_columns(loop.head_dim)) * 2.0;
    k.cta_cycles += items_per_sm * q_bytes / hw.pipes.sm_bandwidth * hw.pipes.wgmma_clock_hz;
    k.sm_round_trips += items_per_sm;
  }
  return k;
}

// The naive path (attention.cu): a pointer-table kernel, cuBLAS S = QK^T (batched), softmax_rows
// (one 256-thread CTA per row: a first pass that streams the row from HBM 4 elements per thread per
// round trip, a block reduction, a second pass from L2 that writes P), cuBLAS O = PV.
std::vector<KernelLaunch> naive(const AttentionShape& s, DType dtype, const Hardware& hw) {
  const double act = dtype_bytes(dtype);
  const double bh = double(s.batch * s.heads), sq = double(s.new_tokens);
  const double sk = double(s.past_tokens + s.new_tokens), d = double(s.head_dim);
  const double q = double(s.batch) * sq * double(s.heads) * d * act;
  const double kv = double(s.batch) * sk * double(s.kv_heads) * d * act;
  const double scores = bh * sq * sk * act;
  std::vector<KernelLaunch> ks;
  KernelLaunch tables;
  tables.kernel = "build_pointer_tables";
  tables.ctas = ceil_div(int64_t(bh), 256);
  tables.bytes = bh * 5 * 8;
  tables.write_share = 1;
  ks.push_back(tables);

  KernelLaunch qk;
  qk.kernel = "gemm";
  qk.tensor = TensorPath::library;
  qk.ctas = int64_t(hw.sm_count) * 2;
  qk.ctas_per_sm = 2;
  qk.bytes = q + kv + scores;
  qk.write_share = scores / qk.bytes;
  qk.work.tensor_flops = 2.0 * bh * sq * sk * d;
  qk.work.tensor_dtype = dtype;
  qk.startup_round_trips = 1;
  ks.push_back(qk);

  KernelLaunch sm;
  sm.kernel = "softmax_rows";
  sm.memory_overlapped = false;  // each thread's 4 loads, then their exponentials: no load in flight meanwhile
  constexpr double kThreads = 256;
  sm.ctas = int64_t(bh * sq);
  sm.ctas_per_sm = 8;  // 2048 threads per SM
  // Elements a row's threads touch: the first pass reads the keys the mask keeps, the second writes all.
  const double kept = s.causal ? (sk - sq + (sq + 1) / 2.0) : sk;
  sm.bytes = bh * sq * (kept + sk) * act;  // S read once from HBM (the second read hits L2), P written
  sm.write_share = sk / (kept + sk);
  sm.work = work_of(kSoftmaxPass1x4, bh * sq * kept / 4.0);
  sm.work += work_of(kSoftmaxPass2x1, bh * sq * sk);
  sm.work += work_of(kSoftmaxRow, bh * sq * kThreads);
  const double per_thread = std::ceil(kept / kThreads);
  // Round trips of one row: the first pass's unrolled groups of 4 loads, one for the second pass's
  // loads (independent, from L2), one for the stores to drain; the block reduction between them
  // (two rounds of 5 shuffles and a barrier).
  sm.cta_round_trips = std::ceil(per_thread / 4.0) + 2;
  sm.cta_cycles = 2 * (5 * hw.pipes.smem_latency_cycles + 2 * hw.pipes.smem_latency_cycles) +
                  per_thread * (hw.pipes.mufu_latency_cycles + 3 * hw.pipes.dependent_issue_cycles);
  ks.push_back(sm);

  KernelLaunch pv = qk;
  pv.bytes = scores + kv + q;
  pv.write_share = q / pv.bytes;
  ks.push_back(pv);
  return ks;
}

}  // namespace

std::vector<KernelLaunch> attention_prefill_kernels(const AttentionShape& s, AttentionVariant v, DType dtype,
                                                    const Hardware& hw, FlashRung rung) {
  if (v == AttentionVariant::naive) return naive(s, dtype, hw);
  KernelLaunch k = rung == FlashRung::wgmma ? flash_sm90(s, dtype, hw) : flash_sm90_overlapped(s, dtype, hw);
  const Op op = attention_cost(s, v, dtype, dtype);
  k.bytes = op.bytes();
  k.write_share = write_share(op);
  return {k};
}

std::vector<KernelLaunch> varlen_prefill_kernels(const std::vector<AttentionShape>& sequences, DType dtype,
                                                 const Hardware& hw) {
  if (sequences.empty()) throw Error("varlen prefill: no sequences");
  const AttentionShape& first = sequences.front();
  double wg_tiles = 0, bytes = 0, writes = 0;
  int64_t items = 0, longest = 0;
  for (const AttentionShape& s : sequences) {
    if (s.heads != first.heads || s.kv_heads != first.kv_heads || s.head_dim != first.head_dim || s.causal != first.causal)
      throw Error("varlen prefill: the sequences of one launch share heads, KV heads, head dim and the mask");
    wg_tiles += flash_wg_tiles(s, 128);
    items += flash_items(s);
    longest = std::max(longest, flash_longest_item_tiles(s, 128));
    const Op op = attention_cost(s, AttentionVariant::flash, dtype, dtype);
    bytes += op.bytes();
    writes += write_share(op) * op.bytes();
  }
  KernelLaunch k = flash_sm90_tiles(wg_tiles, items, longest, first.head_dim, first.causal, dtype, hw);
  k.bytes = bytes;
  k.write_share = bytes > 0 ? writes / bytes : 0.0;
  return {k};
}

// --- decode attention ----------------------------------------------------------------------------

std::vector<KernelLaunch> decode_attention_kernels(const AttentionShape& s, DType dtype, const Hardware& hw) {
  // decode.cu: a block per (sequence, KV head, group of <= 32 query heads, piece of the context);
  // 8 warps when the grid has at most one block per SM (192 KB of K/V rings: 1 resident), else 4
  // (2 resident). Each warp walks its 16-token tiles (2 in flight), then the warps merge through
  // shared memory; split: each piece writes a partial, fences it and takes a counter; the last piece
  // of its (sequence, KV head, group) merges all pieces in batches of 16 (one L2 round trip each).
  const int64_t group = s.heads / s.kv_heads;
  const int64_t rows = std::min<int64_t>(group, 32);
  const int mt = rows <= 16 ? 1 : 2;
  const bool paged = s.block_size > 0;
  const LoopCounts& c = mt == 1 ? (paged ? kDecodeMt1Paged : kDecodeMt1) : (paged ? kDecodeMt2Paged : kDecodeMt2);
  const double dscale = double(s.head_dim) / 128.0;  // the tile's work scales with the head dim
  const int64_t units = s.batch * s.kv_heads * ceil_div(group, 32);
  const int64_t blocks = units * s.splits;
  const int warps = blocks <= hw.sm_count ? 8 : 4;
  const int per_sm = warps == 8 ? 1 : 2;
  const int64_t context = s.past_tokens + s.new_tokens;
  const int64_t chunk = ceil_div(ceil_div(context, s.splits), 16) * 16;
  const int64_t tiles = ceil_div(std::min(chunk, context), 16);
  const double tiles_per_warp = double(ceil_div(tiles, warps));
  const auto& p = hw.pipes;
  const double resident_warps = double(warps) * std::min<double>(per_sm, std::max<double>(1.0, double(blocks) / hw.sm_count));
  // A warp's instructions at the dependent interval (or the SM's issue rate when more warps share it).
  // dependent_issue_cycles is clock ticks per FFMA of a loop that issues 19 instructions per 16 FFMAs
  // (roofline/src/pipe_ceilings.cu dependent_kernel, SASS: 16 FFMA, IADD3, ISETP, BRA); the counts
  // charged here are every instruction the kernel's loops issue, their own control included, so the
  // interval per issued instruction is ticks x 16 / 19.
  const double per_instruction = p.dependent_issue_cycles * kDependentLoopFfmas / kDependentLoopInstructions;
  const double cpi = std::max(per_instruction, resident_warps / p.issue_per_clk);
  const double threads = 32.0 * warps;
  const bool split = s.splits > 1;

  KernelLaunch k;
  k.kernel = "decode_kernel";
  k.tensor = TensorPath::sm;
  k.ctas = blocks;
  k.ctas_per_sm = per_sm;
  const Op op = attention_cost(s, AttentionVariant::flash, dtype, dtype);
  k.bytes = op.bytes();
  k.write_share = write_share(op);
  const double warp_tiles = double(blocks) * warps * tiles_per_warp;
  k.work = work_of(c, 32.0 * warp_tiles * dscale);
  k.work.tensor_flops = op.flops;
  k.work.tensor_dtype = dtype;
  // One CTA: two round trips before its first tile (context length, table entries and Q; then the
  // first K/V tile), its tiles at the warp's issue interval (or the bandwidth of its 2 tiles in
  // flight). After its last tile's data have arrived (the epilogue): that tile, the warps' merge
  // (the warp that also writes the log-sum-exp), and for a split its partial's fence (the stores
  // reach L2) and the counter's atomic: two L2 round trips.
  const double tile_cycles = std::max(c.total() * dscale * cpi, 0.5 * p.dram_latency_s * p.sm_clock_hz);
  const double merge_iterations = std::ceil(double(rows) * s.head_dim / threads);
  k.cta_cycles = std::max(0.0, tiles_per_warp - 1) * tile_cycles;
  k.cta_round_trips = 2;
  k.startup_round_trips = 2;
  // Before that merge each warp stores its O rows to shared memory: per m16 tile and half (rows g or
  // g + 8), head_dim / 8 STS.64 whose 8 rows lie head_dim x 4 bytes apart, all in the same banks: one
  // shared-memory wavefront per real row among the 8 (32 banks x 4 bytes a clock: the SM's shared
  // memory serves one wavefront per clock), for every warp of the CTA.
  double store_wavefronts = 0;
  for (int64_t t = 0; t < 2 * mt; ++t) store_wavefronts += double(std::clamp<int64_t>(rows - 8 * t, 0, 8));
  store_wavefronts *= double(s.head_dim) / 8.0 * warps;
  k.epilogue_cycles =
      tile_cycles + store_wavefronts + merge_iterations * (split ? kWarpMergeSplit : kWarpMergePlain) * cpi;
  k.epilogue_l2_round_trips = split ? 2 : 0;
  if (split) {
    // The last piece merges: each thread owns 4 consecutive d of a row (ceil(rows x d / 4 / threads)
    // items), each over the pieces in batches of 16 whose loads are issued together (one L2 round
    // trip a batch). Its SM pulls every piece's fp32 partial row and (max, sum) through its port, the
    // units' last pieces side by side; the batches' instructions at the dependent interval.
    const double items = std::ceil(double(rows) * s.head_dim / 4.0 / threads);
    const double batches = items * std::ceil(double(s.splits) / 16.0);
    k.tail_l2_round_trips = batches;
    k.tail_bytes = double(units) * double(rows) * double(s.splits) * (double(s.head_dim) * 4.0 + 8.0);
    k.tail_ctas = units;
    k.tail_cycles = (batches * kMergeBatch + items * kMergeItem) * cpi;
  }
  return {k};
}

// --- linear layers -------------------------------------------------------------------------------

int weight_only_m_tiles(int64_t m) { return m <= 8 ? 1 : m <= 16 ? 2 : m <= 32 ? 4 : 8; }

int weight_only_k_warps(int64_t m, int64_t n, int64_t kb, int64_t max_row_tiles) {
  const int64_t groups = kb / 128;
  if (m != 1) return 1;
  for (int s = 8; s > 1; s /= 2)
    if (groups % s == 0 && ceil_div(n, 128 / s) <= max_row_tiles) return s;
  return 1;
}

int weight_only_mma_blocks_per_sm(int m_tiles, int64_t n, int64_t sm_count) {
  if (m_tiles == 1) return 4;
  if (m_tiles == 2) return 2 * ceil_div(n, int64_t(128)) > sm_count ? 4 : 2;
  return 2;
}

namespace {
// The shared memory one mma block may take at blocks_per_sm blocks an SM: its share of the SM's 227 KB less 1 KB.
int64_t mma_block_smem_budget(int blocks_per_sm) { return (227 << 10) / blocks_per_sm - (1 << 10); }

// The mma_tma kernel at 2 to 16 tokens over `split` blocks along k: whole 2048-column stages a block, and X's fragments
// for its groups x n8 tiles within 17 warps' registers (kMmaTmaMaxGroupTiles).
bool mma_tma_fragments_fit(int64_t m, int64_t k, int64_t split) {
  const int64_t stages = k / 2048;
  return stages % split == 0 && stages / split * weight_only_mma_tma_token_tiles(m) <= kMmaTmaMaxGroupTiles;
}

// The mma_tma kernel at 2 to 16 tokens in clusters of `split` blocks: the clusters its plan asks for (one a share of the
// row tiles) and the shared memory that gives each block (the cluster's sums of its share beside the ring).
struct MmaTmaTokensGrid {
  int64_t clusters, smem;
  bool fits() const { return smem <= (227 << 10); }
};
MmaTmaTokensGrid mma_tma_tokens_grid(WeightFormat f, int64_t m, int64_t n, int64_t k, int64_t split, int64_t sm_count) {
  const int64_t tiles = n / 16, clusters = std::min<int64_t>(tiles, weight_only_mma_tma_clusters(split, sm_count));
  return {clusters, weight_only_mma_tma_smem_bytes(f, k, ceil_div(tiles, clusters), m, split)};
}
}  // namespace

int64_t weight_only_smem_bytes(WeightFormat f, int64_t m, int mt, int64_t kb, int k_warps, int cluster) {
  const int64_t block_rows = 128 / k_warps;
  return (k_warps > 1 ? m : 8 * mt) * (kb + 8) * 2 + (f == WeightFormat::int4 ? (kb / 128) * (block_rows + 8 * mt) * 4 : 0) +
         (f == WeightFormat::int8 && k_warps > 1 ? 8 * 4 : 0) + (k_warps > 1 ? 8 * 32 * 4 * mt * 4 : 0) +
         (cluster > 1 ? m * cluster * ceil_div(block_rows, int64_t(cluster)) * 4 : 0);
}

std::string split_reduce_name(SplitReduce r) {
  switch (r) {
    case SplitReduce::automatic: return "automatic";
    case SplitReduce::atomics: return "atomics";
    case SplitReduce::cluster: return "cluster";
  }
  return "?";
}

std::string weight_only_kernel_name(WeightOnlyKernel k) {
  switch (k) {
    case WeightOnlyKernel::automatic: return "automatic";
    case WeightOnlyKernel::mma: return "mma";
    case WeightOnlyKernel::wgmma: return "wgmma";
    case WeightOnlyKernel::wgmma_tma: return "wgmma_tma";
    case WeightOnlyKernel::mma_tma: return "mma_tma";
  }
  return "?";
}

int64_t wgmma_from_tokens(WeightFormat f) { return f == WeightFormat::int4 ? 9 : 17; }

WeightOnlyPlan plan_weight_only(WeightFormat f, int64_t m, int64_t n, int64_t k, int64_t sm_count,
                                WeightOnlyKernel kernel, bool wgmma_available, SplitReduce reduce, int64_t split_k) {
  constexpr int64_t kBlockRows = 128, kXSmemBytes = 64 << 10;
  const bool dequant_format = f == WeightFormat::int4 || f == WeightFormat::int8;
  const bool tma_format = dequant_format || f == WeightFormat::sparse24;
  if (kernel == WeightOnlyKernel::wgmma && !dequant_format)
    throw Error("linear: the wgmma weight-only kernel serves int8 and int4 (" + weight_format_name(f) +
                " runs on the mma kernel or the wgmma_tma kernel)");
  if (kernel == WeightOnlyKernel::wgmma_tma && !tma_format)
    throw Error("linear: the wgmma_tma weight-only kernel serves int8, int4 and sparse24 (" + weight_format_name(f) +
                " is not a weight-only format)");
  if (kernel == WeightOnlyKernel::automatic && split_k == 0 && reduce == SplitReduce::automatic &&
      weight_only_mma_tma_automatic(f, m, n, k, sm_count, wgmma_available))
    kernel = WeightOnlyKernel::mma_tma;
  // A named split is the mma kernel's candidate at every m (the wgmma_tma kernel plans its own grid: it ignored one).
  if (kernel == WeightOnlyKernel::automatic)
    kernel = split_k == 0 && wgmma_available && tma_format && m >= wgmma_from_tokens(f) ? WeightOnlyKernel::wgmma_tma
                                                                                        : WeightOnlyKernel::mma;
  WeightOnlyPlan plan;
  plan.kernel = kernel;
  if (kernel == WeightOnlyKernel::mma_tma) {
    const std::string why = weight_only_mma_tma_refusal(f, m, n, k, wgmma_available);
    if (!why.empty()) throw Error("linear: the mma_tma weight-only kernel " + why);
    weight_only_cluster_blocks(f, m, plan, reduce, wgmma_available);  // its refusal of a named reduce
    if (split_k != 0 && m == 1)
      throw Error("linear: split_k applies to the mma weight-only kernel, and the mma_tma kernel's at 2 to 16 tokens "
                  "(at one token it plans its own grid)");
    // One block an SM, block b taking the 16-row tiles b, b + blocks, ... (2 to 16 tokens: a cluster of split blocks
    // along k each cluster's tiles, interleaved the same way).
    plan.row_tiles = n / 16;
    plan.ctas = std::min<int64_t>(plan.row_tiles, sm_count);
    if (m > 1) {
      if (split_k != 0) {  // a candidate: whole stages a block, X's fragments within the registers (or the wide kernel)
        if (split_k < 1 || split_k > 8 ||
            (!mma_tma_fragments_fit(m, k, split_k) && !weight_only_mma_tma_wide(m, k, split_k) &&
             !weight_only_mma_tma_narrow(m, k, split_k)))
          throw Error("linear: the mma_tma weight-only kernel at " + std::to_string(m) + " tokens takes k = " +
                      std::to_string(k) + " over clusters of 1 to 8 blocks of whole 2048-column stages, at most " +
                      std::to_string(kMmaTmaMaxGroupTiles) + " groups x n8 tiles a warp (4 unsplit at k = 4096, 9-16 " +
                      "tokens; at k = 14336 and 9-16 tokens 4, the narrow kernel's 1792-column stages): split_k " +
                      std::to_string(split_k) + " is not one");
      }
      plan.cluster = int(split_k != 0 ? split_k : weight_only_mma_tma_plan_split(m, n, k, sm_count));
      const MmaTmaTokensGrid grid = mma_tma_tokens_grid(f, m, n, k, plan.cluster, sm_count);
      plan.ctas = grid.clusters * plan.cluster;
      if (!grid.fits())
        throw Error("linear: the mma_tma weight-only kernel's cluster sums of " + std::to_string(plan.row_tiles) +
                    " row tiles do not fit a block's shared memory (" + std::to_string(grid.smem) + " bytes)");
    }
    plan.blocks_per_sm = 1;
    plan.k_warps = weight_only_mma_tma_warps(m, k, plan.cluster);
    plan.k_per_block = k / plan.cluster;
    plan.stages = weight_only_mma_tma_ring_stages(f, m, k, plan.cluster);
    plan.units = plan.row_tiles * (k / (f == WeightFormat::int4 ? 64 : 32) / (2 * plan.k_warps));  // stages in all
    plan.m_tiles = int(weight_only_mma_tma_token_tiles(m));
    return plan;
  }
  plan.row_tiles = ceil_div(n, kBlockRows);
  if (kernel == WeightOnlyKernel::wgmma || kernel == WeightOnlyKernel::wgmma_tma) {
    weight_only_cluster_blocks(f, m, plan, reduce, wgmma_available);  // its refusal of a named reduce
    const bool tma = kernel == WeightOnlyKernel::wgmma_tma;
    // One persistent wave: every SM holds blocks_per_sm blocks, each with an equal contiguous share
    // of the units (a tile's 128-column groups in order, then the next tile's).
    plan.tokens = weight_only_wgmma_tokens(m);
    plan.blocks_per_sm = tma ? weight_only_tma_blocks_per_sm(plan.tokens) : weight_only_wgmma_blocks_per_sm(plan.tokens);
    plan.stages = tma ? weight_only_tma_stages(f, plan.tokens)
                      : weight_only_wgmma_stages(f, plan.tokens);
    plan.units = plan.row_tiles * (k / 128);
    plan.ctas = std::min<int64_t>(plan.units, sm_count * plan.blocks_per_sm);
    if (tma) plan.ctas = std::min<int64_t>(plan.ctas, std::max<int64_t>(1, plan.units / weight_only_tma_min_units));
    plan.m_tiles = plan.tokens / 8;
    plan.k_per_block = 128;
    return plan;
  }
  // mma. Tiles (measured reasons: kernels/gemm/NOTES.md): m_tiles: tokens padded to 8, 16, 32 or 64; the
  // block's k range a multiple of 128 that divides k, small enough that X's rows, int4's scales and the warps'
  // partial sums leave room for blocks_per_sm blocks in the SM's 227 KB; k_warps (weight_only_k_warps) warps
  // share a row tile where m = 1 and one block along k (no atomics) fills at least half the block slots (SMs x
  // blocks_per_sm), or its warps have at most three rounds of loads (kDepth chunks a round): a smaller grid
  // pays its DRAM round trip per round, which only short warps amortize better than the split-k write-out's
  // round trips (measured at m = 1, us, shared against split-k: 1024 x 4096 int4, 64 blocks of 8-chunk warps,
  // 6.9 against 8.0; 4096 x 4096 int4, 256 of 8, 9.7 against 11.0; int8 256 of 16, 11.0 against 12.5-12.8;
  // 4096 x 14336 int4, 256 of 28, 18.4 against 17.7; the model predicts 4096 x 4096 int8 at m = 4 with 2 warps a tile, 64 blocks of 64-chunk
  // warps, 20.6 us against split-k's 13.6 measured). Else
  // every warp its own 16 rows and split_k the most blocks (row tiles x split_k) that still run in ONE wave
  // at the blocks per SM the registers allow (the plan before k_warps, measured in NOTES.md w2-w3).
  plan.m_tiles = weight_only_m_tiles(m);
  plan.blocks_per_sm = weight_only_mma_blocks_per_sm(plan.m_tiles, n, sm_count);
  const int64_t units = k / 128;
  const int64_t smem_budget = std::min<int64_t>(kXSmemBytes, mma_block_smem_budget(plan.blocks_per_sm));
  const int64_t capacity = sm_count * plan.blocks_per_sm;
  auto k_warps = [&](int64_t d) { return weight_only_k_warps(m, n, k / d, std::max<int64_t>(1, capacity / d)); };
  auto fits = [&](int64_t d) {
    return units % d == 0 && weight_only_smem_bytes(f, m, plan.m_tiles, k / d, k_warps(d)) <= smem_budget;
  };
  int64_t split = 0, warps = 1;
  const int64_t chunks_alone = k / k_warps(1) / (f == WeightFormat::int4 ? 64 : 32);  // a warp's chunks, split 1
  const int depth = wo_loop(f, plan.m_tiles, plan.blocks_per_sm, k_warps(1) > 1).depth;
  if (fits(1) && k_warps(1) > 1 &&
      (ceil_div(n, kBlockRows / k_warps(1)) * 2 >= capacity || chunks_alone <= 3 * depth)) {
    split = 1;  // no atomics: the warps of a tile sum in shared memory
    warps = k_warps(1);
  }
  auto fits_alone = [&](int64_t d) {  // k_warps 1: every warp its own 16 rows of the block's range
    return units % d == 0 && weight_only_smem_bytes(f, m, plan.m_tiles, k / d, 1) <= smem_budget;
  };
  for (int64_t d = units; d >= 1 && split == 0; --d)
    if (fits_alone(d) && plan.row_tiles * d <= capacity) split = d;
  for (int64_t d = 1; d <= units && split == 0; ++d)
    if (fits_alone(d)) split = d;
  if (split == 0) split = units;
  // int8 at one token where the plain kernel splits k four ways or more (4096 x 14336: 16): 4 warps a tile over a
  // quarter of the splits, the same blocks and chunks a warp, on shared tiles' fp16 loop (w9) with a quarter of the
  // atomics: 25.5 / 25.5 us against 25.8-26.0 (2 warps a tile x 8 splits 25.3-25.6, 8 x 2 26.2-26.4; int4 and 2:4
  // measured slower so, 18.5 against 17.6 and 27.8-28.6 against 27.6-28.0: NOTES.md w9).
  if (f == WeightFormat::int8 && m == 1 && warps == 1 && split >= 4 && split % 4 == 0 &&
      weight_only_smem_bytes(f, m, plan.m_tiles, k / (split / 4), 4) <= smem_budget) {
    warps = 4;
    split /= 4;
  }
  if (split_k != 0) {
    // A candidate split (LinearParams::split_k): one block along k lets the warps of a tile share its range (as the
    // plan does), more give every warp its own 16 rows.
    auto warps_of = [&](int64_t kb) { return kb == k ? weight_only_k_warps(m, n, kb, capacity) : int64_t(1); };
    auto smem_of = [&](int64_t kb) { return weight_only_smem_bytes(f, m, plan.m_tiles, kb, int(warps_of(kb))); };
    int64_t max_kb = 0;
    for (int64_t kb = 128; kb <= k && smem_of(kb) <= smem_budget; kb += 128) max_kb = kb;
    if (split_k < 0 || units % split_k != 0 || smem_of(k / split_k) > smem_budget)
      throw Error("linear: split_k " + std::to_string(split_k) + " must divide k/128 = " + std::to_string(units) +
                  " with at most " + std::to_string(max_kb) + " columns per block");
    split = split_k;
    warps = warps_of(k / split);
  } else if (reduce == SplitReduce::automatic && wgmma_available && m >= 2 && plan.m_tiles == 1 && warps == 1) {
    // automatic: split-k in a cluster of 8 or 16 (the fewest that give blocks of at most kAutoClusterColumns) where the
    // row tiles x those blocks fit one an SM (sim/kernels.h SplitReduce, the measured reason).
    for (int64_t d : {int64_t(8), int64_t(16)})
      if (d <= split && units % d == 0 && k / d <= kAutoClusterColumns && plan.row_tiles * d <= sm_count &&
          weight_only_smem_bytes(f, m, plan.m_tiles, k / d, 1, int(d)) <= mma_block_smem_budget(plan.blocks_per_sm)) {
        split = d;
        reduce = SplitReduce::cluster;
        break;
      }
  }
  plan.k_warps = int(warps);
  plan.row_tiles = ceil_div(n, kBlockRows / plan.k_warps);
  plan.split_k = int(split);
  plan.k_per_block = k / split;
  plan.ctas = plan.row_tiles * split;
  plan.cluster = weight_only_cluster_blocks(f, m, plan, reduce, wgmma_available);
  return plan;
}

int64_t weight_only_mma_tma_split(int64_t m, int64_t k) {
  for (int64_t c : {1, 2, 4, 8, 3, 5, 6, 7})
    if (mma_tma_fragments_fit(m, k, c)) return c;
  return 0;
}

bool weight_only_mma_tma_wide(int64_t m, int64_t k, int64_t split) {
  return m > 8 && m <= 16 && split == 1 && k == 2 * 2048;
}

bool weight_only_mma_tma_narrow(int64_t m, int64_t k, int64_t split) {
  // k a multiple of the other kernels' 2048-column stages too (the refusal's): within kMmaTmaMaxK, 14336 only, the
  // shape measured
  return m > 8 && m <= 16 && split >= 1 && k % 2048 == 0 && k % (kMmaTmaNarrowWarps * 128) == 0 &&
         k / (kMmaTmaNarrowWarps * 128) == 2 * split;
}

int weight_only_mma_tma_warps(int64_t m, int64_t k, int64_t split) {
  return weight_only_mma_tma_narrow(m, k, split) ? kMmaTmaNarrowWarps : kMmaTmaConsumerWarps;
}

int64_t weight_only_mma_tma_plan_split(int64_t m, int64_t n, int64_t k, int64_t sm_count) {
  if (weight_only_mma_tma_wide(m, k, 1) && n / 16 >= kMmaTmaWideMinTiles * sm_count) return 1;
  const int64_t narrow = k / (2 * kMmaTmaNarrowWarps * 128);  // two narrow stages a block a tile
  if (narrow <= 8 && weight_only_mma_tma_narrow(m, k, narrow) &&
      n / 16 >= weight_only_mma_tma_clusters(narrow, sm_count))
    return narrow;
  return weight_only_mma_tma_split(m, k);
}

int64_t weight_only_mma_tma_clusters(int64_t split, int64_t sm_count) {
  static constexpr int64_t kH100[9] = {0, 132, 66, 39, 30, 22, 17, 15, 15};  // at once on the H100's 132 SMs
  if (split < 1 || split > 8) throw Error("linear: the mma_tma weight-only kernel's clusters hold 1 to 8 blocks");
  return std::max<int64_t>(1, kH100[split] * sm_count / 132);
}

int weight_only_mma_tma_ring_stages(WeightFormat f, int64_t m, int64_t k, int64_t split) {
  if (m == 1) return weight_only_mma_tma_stages(f);
  return weight_only_mma_tma_token_stages(k / (128 * weight_only_mma_tma_warps(m, k, split)) / split,
                                          weight_only_mma_tma_wide(m, k, split));
}

int64_t weight_only_mma_tma_smem_bytes(WeightFormat f, int64_t k, int64_t max_tiles, int64_t m, int64_t split) {
  const bool int4 = f == WeightFormat::int4;
  const int64_t stages = weight_only_mma_tma_stages(f);
  const int64_t ring = stages * (kMmaTmaStageChunks * 512 + (int4 ? 1024 : 0));
  if (m > 1) {  // the ring (two chunks a warp a stage, the scales' 1 KB); the warps' tile sums [2][warps][16 x 16]
                // (fragment order; also X's staging); X's group sums [warps][4][16 tokens]; split > 1: the cluster's
                // tiles' sums [tiles][tokens][16 rows]; fp32; mbarriers
    // the wide and narrow kernels: their second group of X [warps][tiles of tokens][8 x 128] bf16
    const int64_t tokens = 8 * weight_only_mma_tma_token_tiles(m), warps = weight_only_mma_tma_warps(m, k, split);
    const bool defer = weight_only_mma_tma_wide(m, k, split) || weight_only_mma_tma_narrow(m, k, split);
    const int64_t ts = weight_only_mma_tma_ring_stages(f, m, k, split);
    return ts * (warps * 2 * 512 + 1024) + (2 * 16 * 16 + 4 * 16) * warps * 4 +
           (split > 1 ? max_tiles * 16 * tokens * 4 : 0) + (defer ? warps * tokens * 128 * 2 : 0) + 2 * ts * 8;
  }
  const int64_t side = int4 ? k / 128 * 4 : max_tiles * 16 * 4;  // int4: X's group sums; int8: the channel scales
  return ring + k * 2 + side + 2 * kMmaTmaConsumerWarps * 16 * 4 + (2 * stages + 2) * 8;
}

bool weight_only_mma_tma_automatic(WeightFormat f, int64_t m, int64_t n, int64_t k, int64_t sm_count, bool hopper) {
  if (!(m == 1 || (f == WeightFormat::int4 && m <= 16)) || !weight_only_mma_tma_refusal(f, m, n, k, hopper).empty() ||
      n / 16 < kMmaTmaMinTiles)
    return false;
  if (m == 1) return true;
  // Clusters of at most 2 (clusters of 3-8 hold 102-120 of the H100's 132 SMs at once, weight_only_mma_tma_clusters),
  // and at 9-16 tokens on k = 14336 (the down projection) clusters of 7 (at 16 tokens 21.4 us against wgmma_tma's
  // 24.1 on the H100; at 4-8 tokens they tie the mma kernel, 17.9-18.2 against 17.7-18.6, which keeps them: NOTES.md
  // r10) or the narrow kernel's of 4 (NOTES.md r15).
  const int64_t split = weight_only_mma_tma_plan_split(m, n, k, sm_count);
  // ... and where a cluster's sums of its tiles fit beside the ring (plan_weight_only's "do not fit").
  return (split <= 2 || (m > 8 && (split == 7 || weight_only_mma_tma_narrow(m, k, split)))) &&
         mma_tma_tokens_grid(f, m, n, k, split, sm_count).fits();
}

std::string weight_only_mma_tma_refusal(WeightFormat f, int64_t m, int64_t n, int64_t k, bool hopper) {
  if (f != WeightFormat::int4 && f != WeightFormat::int8)
    return "serves int8 and int4 (" + weight_format_name(f) + " runs on the mma kernel or the wgmma_tma kernel)";
  if (!hopper) return "needs a Hopper GPU (compute capability 9.0) and a build for it";
  if (m < 1 || m > 16) return "serves 1 to 16 tokens (" + std::to_string(m) + " asked)";
  if (m > 1 && f != WeightFormat::int4) return "serves int8 at one token (" + std::to_string(m) + " asked)";
  if (n % 16 != 0) return "takes whole 16-row tiles: n must be a multiple of 16 (" + std::to_string(n) + ")";
  const int64_t stage_cols = kMmaTmaStageChunks * (f == WeightFormat::int4 ? 64 : 32);
  if (k % stage_cols != 0)
    return "streams stages of " + std::to_string(stage_cols) + " columns: k must be a multiple of it (" +
           std::to_string(k) + ")";
  if (k > kMmaTmaMaxK) return "holds X's row in shared memory: k at most " + std::to_string(kMmaTmaMaxK);
  // Every k it takes splits (weight_only_mma_tma_split: k / 2048 <= 8 stages, a cluster of as many holds one each).
  static_assert(kMmaTmaMaxK / 2048 <= 8 && kMmaTmaMaxGroupTiles >= 2, "a k the ring kernel takes would not split");
  return "";
}

int weight_only_cluster_blocks(WeightFormat f, int64_t m, const WeightOnlyPlan& plan, SplitReduce reduce, bool hopper) {
  if (reduce == SplitReduce::automatic) return 1;
  if (plan.kernel != WeightOnlyKernel::mma)
    throw Error("linear: split_reduce " + split_reduce_name(reduce) + " applies to the mma weight-only kernel (the " +
                weight_only_kernel_name(plan.kernel) + " kernel runs at " + std::to_string(m) + " tokens)");
  if (plan.split_k == 1 || reduce == SplitReduce::atomics) return 1;
  const bool fits = weight_only_smem_bytes(f, m, plan.m_tiles, plan.k_per_block, plan.k_warps, plan.split_k) <=
                    mma_block_smem_budget(plan.blocks_per_sm);
  const std::string what = "linear: split-k summed in a cluster (" + std::to_string(plan.split_k) + " blocks along k)";
  if (!hopper) throw Error(what + " needs a Hopper GPU (compute capability 9.0) and a build for it");
  if (plan.m_tiles > 2) throw Error(what + " serves up to 16 tokens (" + std::to_string(m) + " asked)");
  if (plan.split_k > kMaxClusterBlocks)
    throw Error(what + ": a cluster holds at most " + std::to_string(kMaxClusterBlocks) + " blocks");
  if (!fits) throw Error(what + ": the sums it receives do not fit the block's shared memory beside X");
  return plan.split_k;
}

int64_t weight_only_wgmma_segments(const WeightOnlyPlan& plan, int64_t tile, int64_t k) {
  // Block b starts at unit floor(b·U/B); unit u lies in block floor(((u + 1)·B − 1) / U).
  const int64_t g = k / 128, u = plan.units, b = plan.ctas;
  auto block_of = [&](int64_t unit) { return ((unit + 1) * b - 1) / u; };
  return block_of((tile + 1) * g - 1) - block_of(tile * g) + 1;
}

namespace {

// The Hopper weight-only kernels (weight_only_sm90*.cu): tables indexed by N = 16, 32, 64; a block of 8
// consumer warps whose tensor cores run the padded N tokens over every 128-row tile, and a counted loop
// per unit and warp; each block takes its equal contiguous share of the units.
int tokens_index(const WeightOnlyPlan& plan) { return plan.tokens == 16 ? 0 : plan.tokens == 32 ? 1 : 2; }
double units_per_cta(const WeightOnlyPlan& plan) { return std::ceil(double(plan.units) / double(plan.ctas)); }
void hopper_weight_only_launch(const WeightOnlyPlan& plan, int64_t k, const LoopCounts& lp, const char* name,
                               KernelLaunch& kl) {
  kl.kernel = name;
  kl.tensor = TensorPath::wgmma;
  kl.ctas = plan.ctas;
  kl.ctas_per_sm = plan.blocks_per_sm;
  kl.work.tensor_flops = 2.0 * double(plan.tokens) * double(plan.row_tiles * 128) * double(k);
  kl.work += work_of(lp, 32.0 * 8.0 * double(plan.units));
}

// The Hopper weight-only kernels' write-out (weight_only_sm90_unit.cuh write_out): a tile whose units several
// blocks share is summed in the workspace by vector reductions (red.global.add.v4.f32, since defa2f6): every thread
// sends its four sums of an n8 tile, padded tokens and rows included, so a block's piece of a tile is 128 x N / 4
// L2 operations whatever m and n are, charged at the L2's measured vector rate (PipeCeilings::l2_red_vector_per_clk).
// The leader fences (__threadfence: the block's reductions performed), counts (atomicAdd on the tile's counter) and
// fences again, three dependent round trips, and the last block reads the sums back, every load before any store:
// one L2 round trip after the wave.
// Until defa2f6 the kernels sent one scalar atomic per cell (real rows and tokens only), charged so: at m = 64 on
// the H200's int4 MLP shapes the scalar charge (at the 80-a-clock estimate the H200's file then fell back to)
// predicted 41.3 / 37.4 us where bench_gemm measured 36.7 / 36.1; the vector charge at the measured 95.2 a clock
// predicts 31.7 / 30.9 where the compression run of 3c155ed measured 32.1 / 32.0 (kernels/gemm/NOTES.md r27, r28).
// Returns the write-out's round trips (0: no tile of the launch is shared).
double stream_k_write_out(const WeightOnlyPlan& plan, int64_t k, KernelLaunch& kl) {
  double split_ops = 0;
  for (int64_t t = 0; t < plan.row_tiles; ++t) {
    const int64_t segs = weight_only_wgmma_segments(plan, t, k);
    if (segs > 1) split_ops += double(segs) * 128.0 * double(plan.tokens) / 4.0;
  }
  kl.vector_reductions = split_ops;
  kl.tail_l2_round_trips = split_ops > 0 ? 1 : 0;
  return split_ops > 0 ? 3 : 0;
}

// weight_only_sm90.cu: 8 warps (2 warpgroups of 64 rows) a block, a persistent grid over units of a
// 128-row tile by 128 columns; per unit each warp dequantizes its 16 rows into registers and its
// warpgroup issues 8 wgmma m64nNk16 on X's stage. The tensor cores run the padded N tokens.
KernelLaunch wgmma_linear_kernel(const WeightOnlyPlan& plan, int64_t k, WeightFormat f,
                                 const Hardware& hw, KernelLaunch kl) {
  const int ti = tokens_index(plan);
  const LoopCounts& lp = f == WeightFormat::int4 ? kWgInt4[ti] : kWgInt8[ti];
  const Chain& ch = f == WeightFormat::int4 ? kWgChainInt4[ti] : kWgChainInt8[ti];
  hopper_weight_only_launch(plan, k, lp, "weight_only_wgmma_kernel", kl);
  // One block: its share of the units, each a latency-bound chain (the fence's DRAM wait), after one
  // round trip fills the ring; a tile shared with another block adds the atomics' drain, the counter
  // and the read-back.
  kl.cta_cycles = latency_bound_cycles(ch, lp.total(), units_per_cta(plan), 8.0 * plan.blocks_per_sm, hw.pipes);
  kl.cta_round_trips = 1 + stream_k_write_out(plan, k, kl);
  return kl;
}

// weight_only_sm90_tma.cu: the wgmma kernel's units and grid, the ring filled by producer threads (TMA for X,
// bulk copies or boxes for the weight and its side data). Its costs, each from the kernel's code:
//   - the streams: the weight (and scales, metadata) from DRAM once, and X's [N x 128] tile copied again for every
//     unit (X is L2-resident: every block reads it) at the L2's bandwidth, the two added (KernelLaunch::l2_bytes:
//     a producer's copies are processed one after another, NOTES.md tma2). Until 2026-11-24 X's per-unit tiles were
//     charged at the DRAM rate: 2:4 at m = 64 on the MLP shapes, whose units move the most bytes, 23-35% slow;
//   - a block's path: its first boxes wait for the tensor map (a __grid_constant__ parameter the TMA unit fetches
//     from memory, never prefetched: prefetch.tensormap is not issued), then for their data: two round trips; its
//     units at the consumers' chain, off the copies' latency (S - 1 units in flight), but never before their
//     copies have landed: a block's copies arrive at the bulk-copy rate the probe measured for one copying thread
//     a block (PipeCeilings::bulk_copy_dram_bandwidth / bulk_copy_l2_bandwidth, 44.4 and 31.3 GB/s on the H100; two
//     blocks an SM pull twice), whatever the block's producer count, so the consumers finish one unit's chain after
//     all U of the block's units have landed. Until 2026-11-28 the P producers (int4 4, 2:4 2 at N = 64) were
//     credited P times that rate: every point of theirs on the grids where it binds was predicted fast (int4 at
//     m = 64 12-25%, 2:4 on 1024 x 4096 14%; 7-13% and 1% with one rate a block: kernels/gemm/NOTES.md r6). What
//     more producers gain (tma2: int4 at m = 64 41.5 -> 36.3 us from one to four) is then in the copies' issue
//     (~120 cycles a copy from one thread, 11 a unit), which the model does not charge. It binds where a block's
//     bytes are many for its chain (int8 at N = 64: 32 KB a unit, 3.6 us for 4 units on 1024 x 4096 against a
//     1.8 us chain); on the full grid DRAM binds;
//   - the write-out (stream_k_write_out: three round trips), and int8's channel scales, loaded (__ldg) at
//     every tile's end before its sums: one more. The persistent blocks end their equal shares together, so the
//     last write-out stands after the stream as it stands after the chain (KernelLaunch::wave_round_trips, one wave).
KernelLaunch tma_linear_kernel(const WeightOnlyPlan& plan, int64_t k, WeightFormat f,
                               const Hardware& hw, KernelLaunch kl) {
  const int ti = tokens_index(plan);
  const bool int4 = f == WeightFormat::int4, sparse = f == WeightFormat::sparse24;
  const LoopCounts& lp = int4 ? kTmaInt4[ti] : sparse ? kTmaSparse[ti] : kTmaInt8[ti];
  const double chain = int4 ? kTmaChainInt4[ti] : sparse ? kTmaChainSparse[ti] : kTmaChainInt8[ti];
  hopper_weight_only_launch(plan, k, lp, "weight_only_tma_kernel", kl);
  if (sparse) kl.work.tensor_flops /= 2;  // wgmma.sp skips the pruned half: a k32 step in a dense k16's time
  const double x_unit = double(plan.tokens) * 128.0 * 2.0;  // X's tile, bytes a unit
  const double w_unit = double(weight_only_stage_bytes(f, plan.tokens)) - x_unit;  // the weight and side data a unit
  kl.l2_bytes = double(plan.units) * x_unit;
  const PipeCeilings& p = hw.pipes;
  const Chain ch{chain, chain - p.dram_latency_s * p.sm_clock_hz};  // no DRAM wait per unit
  const double resident_warps = 8.0 * plan.blocks_per_sm, units = units_per_cta(plan);
  const double consumers = latency_bound_cycles(ch, lp.total(), units, resident_warps, p);
  const double last_unit = latency_bound_cycles(ch, lp.total(), 1, resident_warps, p);
  const double copies = units * (w_unit / p.bulk_copy_dram_bandwidth + x_unit / p.bulk_copy_l2_bandwidth) * p.sm_clock_hz;
  kl.cta_cycles = std::max(consumers, copies + last_unit);
  const double fill = 2, write_out = stream_k_write_out(plan, k, kl) + (f == WeightFormat::int8 ? 1 : 0);
  kl.cta_round_trips = fill + write_out;
  kl.startup_round_trips = 0;
  kl.wave_round_trips = fill + write_out;
  return kl;
}

// weight_only_mma_tma.cu: one block an SM over every blocks-th 16-row tile (b, b + blocks, ...), the weight streamed
// through a ring of 16 KB stages by one producer thread (bulk copies; int4's scales a box of a 2-d tensor map a
// stage), 16 consumer warps of two chunks a stage (the mma kernel's dequantization and products, from shared memory).
// Its costs, each from the kernel's code:
//   - the stream: the weight and scales from DRAM once; a block's bytes cannot arrive faster than its producer
//     thread's bulk copies (PipeCeilings::bulk_copy_dram_bandwidth), which binds only on small grids;
//   - the fill: X's row and the first stages requested together at the block's start (one round trip; int4's first
//     box waits for the tensor map first: two), beside the stream once (one wave);
//   - the consumers: per stage two chunks a warp of the shared-tile loop (its counts per chunk), a latency-bound
//     chain off the copies' latency (the ring's stages all in flight: weight_only_mma_tma_stages); int4 at k = 2048
//     and 4096 holds X's fragments in registers and issues no ldmatrix in the loop (NOTES.md r7), counted anyway:
//     the stream binds there;
//   - no split-k: a tile's warps sum in shared memory and one warp stores its 16 outputs.
//   - 2 to 16 tokens (int4): the mma kernel's loop at m_tiles n8 tiles (its counts per chunk: the same products and
//     dequantization, X's fragments held in registers instead of read by ldmatrix), each warp's pieces of X from L2
//     once (every block reads T tokens x its k range: at the L2's bandwidth beside the stream), a tile's warps' sums
//     added after one barrier by 16 dependent shared loads (every PT stages: with the cluster's split, every stage);
//     the warps leave that barrier together, so a tile's last stage's chain does not overlap the next tile's (one
//     chain a tile drains: at one stage a tile, 16 tokens, the stage's chain and its issue add, NOTES.md r4); and a
//     cluster's split summed at the end over its blocks' shared memory (one round trip). The wide kernel (9-16
//     tokens, k = 4096 unsplit) is the same loop at two stages a tile; both groups of X are its L2 bytes beside the
//     stream, and the first, staged before the loop, also stands on a block's path (below; the second is copied in
//     during the first stage). The narrow kernel (9-16 tokens, k = 14336 over clusters of 4) is the same loop at
//     stages of 14 groups for 14 warps, two a tile. On the H200's ceilings the model predicts 14.6 us for the wide
//     kernel where 15.9-16.4 was measured, 16.1 for the narrow one where 18.5-18.9 was (NOTES.md r14-r16: the
//     two-stage tiles' miss of 8 tokens too, and a tile's barrier charged more than the kernels lose to it).
KernelLaunch mma_tma_linear_kernel(const WeightOnlyPlan& plan, int64_t m, int64_t n, int64_t k, WeightFormat f,
                                   const Hardware& hw, KernelLaunch kl) {
  const bool int4 = f == WeightFormat::int4;
  const WoLoop& lp = m == 1 ? wo_loop(f, 1, 4, true) : wo_loop(f, plan.m_tiles, 4, plan.m_tiles == 1);
  const PipeCeilings& p = hw.pipes;
  kl.kernel = m == 1 ? "weight_only_mma_tma_kernel" : "weight_only_mma_tma_tokens_kernel";
  kl.tensor = TensorPath::sm;
  kl.ctas = plan.ctas;
  kl.ctas_per_sm = 1;
  const double chunks = double(n / 16) * double(k / (int4 ? 64 : 32));
  kl.work += work_of(lp.c, 32.0 * chunks / lp.depth);
  const double per_warp = 2;  // chunks a warp a stage
  const Chain ch{lp.chain.alone * per_warp / lp.depth, lp.chain.beside * per_warp / lp.depth};
  const double clusters = double(plan.ctas / plan.cluster);
  const double tiles = std::ceil(double(plan.row_tiles) / clusters);  // the longest share
  const double stages = tiles * double(plan.units / plan.row_tiles) / plan.cluster;
  const double instructions = lp.c.total() * per_warp / lp.depth;
  double per_stage = std::max(ch.alone, plan.k_warps * instructions / p.issue_per_clk);
  double x_cycles = 0;  // 2 to 16 tokens: X staged before the loop, on a block's path
  if (m > 1) {
    const double sum_cycles = plan.k_warps * 33.0;  // a tile's sums: a dependent shared load a warp after the barrier
    // ... and the chain the barrier drains (once a tile)
    const double stages_a_tile = double(plan.units / plan.row_tiles) / plan.cluster;
    per_stage += (sum_cycles + ch.alone) / stages_a_tile;
    kl.l2_bytes = double(plan.ctas) * 8.0 * plan.m_tiles * double(plan.k_per_block) * 2;
    if (plan.cluster > 1) kl.epilogue_l2_round_trips = 1;
    // Of X's groups (a stage's each), those staged before the loop (the wide and narrow kernels' first, the others'
    // every one a block holds): every block asks L2 for them at the start and no stage computes until they land, the
    // grid's bytes at the L2's bandwidth (kernels/gemm/NOTES.md r16: knocked out, the first group 1.1-1.3 us of the
    // H200's 16-token kernels; the deferred second group, copied in during the first stage, nothing).
    const bool defer = weight_only_mma_tma_wide(m, k, plan.cluster) || weight_only_mma_tma_narrow(m, k, plan.cluster);
    x_cycles = kl.l2_bytes / (defer ? stages_a_tile : 1.0) / p.l2_bandwidth * p.sm_clock_hz;
  }
  // a block's bytes: its cluster's tiles, 1/cluster of each (k split over the cluster)
  const double block_bytes = double(kl.bytes) * tiles / double(plan.row_tiles) / plan.cluster;
  const double copies = block_bytes / p.bulk_copy_dram_bandwidth * p.sm_clock_hz;
  kl.cta_cycles = x_cycles + std::max(stages * per_stage, copies + per_stage);
  const double fill = int4 ? 2 : 1;
  kl.cta_round_trips = fill;
  kl.startup_round_trips = 0;
  kl.wave_round_trips = fill;
  return kl;
}

}  // namespace

bool library_splits_k(int64_t m, int64_t n, int64_t sm_count) { return 2 * ceil_div(n, 64) * ceil_div(m, 16) <= sm_count; }

std::vector<KernelLaunch> linear_kernels(int64_t m, int64_t n, int64_t k, WeightFormat f, const Hardware& hw) {
  return linear_kernels(m, n, k, f, hw, WeightOnlyKernel::automatic);
}

std::vector<KernelLaunch> linear_kernels(int64_t m, int64_t n, int64_t k, WeightFormat f, const Hardware& hw,
                                         WeightOnlyKernel kernel, int64_t split_k, SplitReduce reduce) {
  const Op op = linear_cost(LinearShape{m, n, k}, f);
  KernelLaunch kl;
  kl.bytes = op.bytes();
  kl.write_share = write_share(op);
  kl.work.tensor_flops = op.flops;
  kl.work.tensor_dtype = op.compute_dtype;
  kl.startup_round_trips = 2;
  if (is_dense(f) || f == WeightFormat::fp8) {
    // cuBLAS / cuBLASLt: a library kernel over the whole GPU at the measured matmul ceiling.
    kl.kernel = f == WeightFormat::fp8 ? "cublasLt" : "cublas";
    kl.tensor = TensorPath::library;
    kl.ctas = int64_t(hw.sm_count) * 2;
    kl.ctas_per_sm = 2;
    if (f == WeightFormat::fp8 || !library_splits_k(m, n, hw.sm_count)) return {kl};
    // ... and where cuBLAS splits k, its reduce kernel after it: a launch inside the stream's pipeline (the graph
    // floor) moving the least it can (two fp32 partials read, the output written); how the split divides the GEMM
    // is the library's and is not charged.
    KernelLaunch reduce;
    reduce.kernel = "cublas_splitk_reduce";
    reduce.launch = LaunchMode::graph;
    reduce.bytes = double(m) * double(n) * (2 * 4 + 2);
    reduce.write_share = 0.2;
    reduce.ctas = std::max<int64_t>(1, m * n / 512);
    return {kl, reduce};
  }
  // weight_only.cu: 8 warps of 16 weight rows per block (k_warps of them to a tile, each over its share of
  // the block's k range, summed in shared memory), chunks of 512 packed bytes per warp streamed into
  // registers (kDepth in flight) and dequantized into mma.sync; split-k partial sums by fp32 atomics, the
  // last block of a row tile converts.
  // The wgmma kernel exists on Hopper only (sm_90a), as the launcher decides on the device.
  const bool hopper = hw.architecture.rfind("Hopper", 0) == 0;
  const WeightOnlyPlan plan = plan_weight_only(f, m, n, k, hw.sm_count, kernel, hopper, reduce, split_k);
  if (plan.kernel == WeightOnlyKernel::wgmma) return {wgmma_linear_kernel(plan, k, f, hw, kl)};
  if (plan.kernel == WeightOnlyKernel::wgmma_tma) return {tma_linear_kernel(plan, k, f, hw, kl)};
  if (plan.kernel == WeightOnlyKernel::mma_tma) return {mma_tma_linear_kernel(plan, m, n, k, f, hw, kl)};
  const WoLoop& lp = wo_loop(f, plan.m_tiles, plan.blocks_per_sm, plan.k_warps > 1);
  const double cols = f == WeightFormat::int4 ? 64 : 32;
  const double chunks_per_warp = double(plan.k_per_block) / plan.k_warps / cols;
  kl.kernel = "weight_only_kernel";
  kl.tensor = TensorPath::sm;
  kl.ctas = plan.row_tiles * plan.split_k;
  kl.ctas_per_sm = plan.blocks_per_sm;
  const double warp_chunks = double(kl.ctas) * 8 * chunks_per_warp;
  kl.work += work_of(lp.c, 32.0 * warp_chunks / lp.depth);
  // One block: the first weight chunks and its X tile (one round trip), the chunks' iterations
  // latency-bound (each waits for the refills the previous one issued); split-k: the write-out's
  // counter, one thread's acquire-release atomic after the block's barrier (SASS: MEMBAR.ALL.GPU, which waits
  // for the block's atomics to be performed, then ATOMG), two dependent round trips.
  kl.cta_cycles = latency_bound_cycles(lp.chain, lp.c.total(), chunks_per_warp / lp.depth, 8.0 * plan.blocks_per_sm,
                                       hw.pipes);
  kl.cta_round_trips = 1 + (plan.split_k > 1 && plan.cluster == 1 ? 2 : 0);
  // The grid is (row tiles x split_k) blocks of the same work, started together: every wave's blocks fill
  // together and write out together, so each wave's fill and write-out round trips stand beside the memory
  // stream (nothing streams while a wave fences and counts, and the next wave's blocks start with their fill).
  // They are taken at the loaded DRAM latency: the wave's other blocks' loads and atomics are still in flight.
  // (Before 2026-11-24 the memory term charged two startup round trips once, and none of the waves' write-outs:
  // the split-k points at m = 16 on 14336 x 4096, two waves, were predicted 20-24% fast.)
  // The scaled formats wait once more per wave, beside the stream: int8's channel scales are loaded after the loop
  // (SASS: two LDG.E.CONSTANT after the last HMMA, their FMULs before the write-out: a dependent round trip after the
  // block's last chunk); int4's group scales are requested after the weight's first chunks (Share::none, ::block),
  // so the barrier before the loop waits for them behind the wave's fill, and no refill leaves until then. 2:4 has
  // neither, nor int8 on shared tiles, which requests its scales with the first chunks (w9: its loop's fp16 leaves
  // the registers to hold them). Measured with and without it (compression, 2026-11-24, commit 8c596cf, when int8
  // still loaded its scales after the loop on every kernel; NOTES.md w5): int4 at m = 1 on 4096 x 4096 7.3 -> 8.5 us predicted against 8.9, 14336 x 4096 14.7 -> 15.8 against 17.8;
  // int8 9.9 -> 11.0 against 11.1, 23.7 -> 24.9 against 25.8; every int4 and int8 mma point within 13% (median 3%).
  // Share::warp requests int4's scales first and still measures this round trip more than 2:4: not named. Charged
  // beside the stream only, not on one CTA's path (cta_round_trips): there it binds the small grids, int8 1024 x 4096
  // at m = 1 9.6 us predicted against 7.9 (that block's few chunks leave its scales' load little to wait behind).
  const bool scales_wait = f == WeightFormat::int4 || (f == WeightFormat::int8 && plan.k_warps == 1);
  kl.startup_round_trips = 0;
  kl.wave_round_trips = kl.cta_round_trips + (scales_wait ? 1 : 0);
  if (plan.cluster > 1) {
    // Split-k in a cluster: after its loop every block sends its sums to their rows' owners (st.async into the
    // owner's shared memory, completing on its mbarrier) and each owner, once every split's sums have arrived, adds
    // them and stores: one hop between SMs after the loop instead of the counter's two round trips (cta_round_trips
    // above), no atomics, no read-back. The hop is charged at the L2's latency (a distributed shared memory latency
    // is not measured here). The cluster's placement (124 of 132 SMs for 4 and 8 blocks) is not charged: automatic
    // takes it only where the blocks fit one an SM.
    kl.epilogue_l2_round_trips = 1;
  } else if (plan.split_k > 1) {
    // Every block adds its m x 128 partial sums into the workspace: m x n x split_k fp32 atomics
    // (SASS: REDG.E.ADD.F32 per accumulator of a real token), done by the L2's atomic units. The last block
    // of a row tile then reads them back (its counter's acquire, no fence of its own since w10): its loop
    // loads, converts and stores one cell per thread per iteration, each load consumed before the next is
    // issued (SASS: LDG.E.STRONG.GPU -> F2FP -> STG, 4 iterations unrolled, none overlapped): ceil(m x 128 /
    // 256) dependent L2 round trips after the last wave (before w10 one more, the last block's fence).
    kl.atomics = double(m) * double(n) * double(plan.split_k);
    kl.tail_l2_round_trips = std::ceil(double(m) * double(std::min<int64_t>(n, 128 / plan.k_warps)) / 256.0);
  }
  return {kl};
}

}  // namespace inferlab
