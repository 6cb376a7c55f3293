#pragma once
// Decode attention: one new query token per sequence against its KV cache (kernels/kvcache), any
// context length per sequence, contiguous or paged, MHA/GQA/MQA, bf16/fp16, head dim 64/128.
//   plain  one thread block per (sequence, KV head) walks the whole context;
//   split  flash-decoding: the context is cut into `splits` pieces, one block each; each block
//          leaves a partial output with its row max and sum, and the last block of a
//          (sequence, KV head) to finish combines them (log-sum-exp weighting).
// Both are GQA-aware: a block takes all query heads that share its KV head (up to 32 at once,
// as rows of tensor-core tiles), so each KV head is read once for its group.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include <cuda_runtime.h>

#include "inferlab/kernels/kvcache/kvcache.h"
#include "inferlab/sim/dtype.h"

namespace inferlab {

enum class DecodeVariant { plain, split };
// The block shape of a decode launch (warps x K/V pipeline stages): planned is the plan's choice from the
// grid (decode.cu dispatch_config: 8 warps with a deep K/V ring at most one block per SM, else 4 warps;
// measured reasons in kernels/attention/NOTES.md); the others are the candidates it was measured against,
// at head dim 128 with query groups of at most 16 heads, so a benchmark times them side by side.
enum class DecodeBlock { planned, w4s3, w8s3, w8s2, w4s5 };
const char* decode_block_name(DecodeBlock b);
std::string decode_variant_name(DecodeVariant v);
DecodeVariant parse_decode_variant(const std::string& s);

struct DecodeParams {
  DType dtype = DType::bf16;
  int64_t batch = 1;
  int64_t heads = 1;        // query heads; cache.kv_heads must divide them
  int64_t head_dim = 128;   // 64 or 128
  float scale = 0.f;        // 0: 1 / sqrt(head_dim)
  const void* q = nullptr;  // [batch, heads, head_dim]
  KvCacheView cache;
  void* o = nullptr;        // [batch, heads, head_dim]
  float* lse = nullptr;     // [batch, heads]: log(sum_j exp(scale * q.k_j)); -inf for an empty context
  int64_t max_context = 0;  // the longest context in the batch (known on the host: plans the split)
  int splits = 0;           // split: pieces per context (0: the heuristic); plain: ignored
  DecodeBlock block = DecodeBlock::planned;
  // split: zero-filled once before its first use (cudaMemset); every launch leaves its counters (at the
  // workspace's end) at zero (the merging block resets its counter), so a workspace is reused without
  // clearing it again. A workspace shared by launches of different shapes must hold the largest partial
  // outputs plus the largest counter array (decode_workspace_bytes of each, summed, is enough).
  void* workspace = nullptr;
  std::size_t workspace_bytes = 0;
  // Diagnostic: when set, thread 0 of every block writes %globaltimer (ns) at 6 points
  // [grid.y][grid.x][6]: entry, first K/V tile ready, loop done, partial written, counter taken,
  // final merge done (the last two only with splits > 1; the last only in the merging block).
  unsigned long long* trace = nullptr;

  float softmax_scale() const;
};

// The number of pieces a context is cut into: sim's plan_decode_splits over the shape and the
// device's SM count (the measurements behind it are written beside it in sim/src/ops.cpp).
int decode_splits(const DecodeParams& p, DecodeVariant v, int sm_count);
std::size_t decode_workspace_bytes(const DecodeParams& p, DecodeVariant v, int sm_count);
// Everything but the cache's host-side checks (validate_kv_view): dtype, head dim, heads,
// pointers, workspace. Throws inferlab::Error before any launch.
void validate_decode(const DecodeParams& p, DecodeVariant v, int sm_count);

void decode_attention(const DecodeParams& p, DecodeVariant v, cudaStream_t stream);

// CPU reference in double precision: gathers each sequence's K/V through its block table (paged)
// or its reserved rows (contiguous) from host copies of the pools.
void decode_attention_reference(const DecodeParams& shape, const float* q, const float* k_pool, const float* v_pool,
                                const std::vector<int32_t>& context_lens, const std::vector<int32_t>& block_table,
                                float* o, float* lse);

}  // namespace inferlab
