#pragma once
// Prefill attention for any mix of sequences in one launch: variable-length flash attention whose
// queries attend to a KV cache (paged or contiguous, kernels/kvcache) that already holds the keys
// and values of every new token.
//
// Sequence s brings n_s = q_start[s + 1] - q_start[s] new queries (rows q_start[s] .. of q and o)
// and holds L_s = context_lens[s] keys (past + new). Query i sits at absolute position
// L_s - n_s + i; causal: it sees keys j <= L_s - n_s + i (attention.h's bottom-right convention,
// per sequence); non-causal: all L_s keys. A row that sees no key (L_s < n_s, an invalid input)
// writes 0 and a log-sum-exp of -inf. MHA/GQA/MQA (query head h reads KV head h / (heads /
// kv_heads)), bf16/fp16, head dim 64 or 128; paged blocks of any power-of-two size.
//
// One launch for all sequences, nothing allocated, copied or synchronized on the host: the map
// from a work item to (sequence, query tile, head) is computed on the device from q_start. On
// compute capability 9.0 the persistent wgmma kernel runs it (flash_fwd_sm90.cu), elsewhere the
// mma.sync kernel (flash_fwd.cu): both are attention_forward's flash kernels in a varlen mode.
// Decode rows (n_s = 1) are better served by decode.h's split-KV kernel; they are correct here too.
//
// Plain C++ header: launchers take the params, device pointers and a stream.
#include <cstddef>
#include <cstdint>
#include <vector>

#include <cuda_runtime.h>

#include "inferlab/kernels/attention/attention.h"
#include "inferlab/kernels/kvcache/kvcache.h"
#include "inferlab/sim/dtype.h"
#include "inferlab/sim/ops.h"

namespace inferlab {

// The most sequences one launch takes (the persistent kernel keeps a prefix of their query tiles
// in shared memory).
inline constexpr int64_t kMaxPrefillSequences = 4096;

struct PrefillParams {
  DType dtype = DType::bf16;    // bf16 or fp16 (the cache's dtype too)
  int64_t sequences = 0;        // sequences in the launch (== cache.batch)
  int64_t heads = 0;            // query heads; cache.kv_heads divides them
  int64_t head_dim = 128;       // 64 or 128
  int64_t total_q = 0;          // rows of q / o: the sum of the sequences' new tokens (known on the host)
  int64_t max_q = 0;            // the most new tokens of any sequence (known on the host)
  int64_t max_context = 0;      // the longest context_lens entry (known on the host)
  bool causal = true;
  float scale = 0.f;            // 0: 1 / sqrt(head_dim)

  const void* q = nullptr;           // [total_q, heads, head_dim]: the sequences' rows one after another
  const int32_t* q_start = nullptr;  // device [sequences + 1]: first row of each sequence, q_start[sequences] = total_q
  KvCacheView cache;                 // context_lens = past + new keys per sequence; the new K/V already written
  void* o = nullptr;                 // [total_q, heads, head_dim]
  float* lse = nullptr;              // [total_q, heads]: natural-log log-sum-exp, or nullptr (not written)
  // prefill_workspace_bytes(p): the persistent kernel's work counters. Zero-filled once before its
  // first use (cudaMemset); every launch leaves it zeroed, so it is reused as is. One workspace per
  // stream that may run a prefill concurrently with another.
  void* workspace = nullptr;
  std::size_t workspace_bytes = 0;
  FlashOptions flash;                // which flash rung runs (attention.h)

  float softmax_scale() const;
};

std::size_t prefill_workspace_bytes(const PrefillParams& p);

// Host checks before any launch (dtype, head dim, heads, sizes against the cache view, pointers,
// workspace); throws inferlab::Error naming the problem. The cache's own host-side checks
// (validate_kv_view: every context within its blocks) are the caller's, as for decode.
void validate_prefill(const PrefillParams& p);

// The one entry point: validated, checked, in an NVTX range "attention/prefill_paged" or
// "attention/prefill_contiguous". The sim/ cost of a launch is batch_attention_op over the same
// sequences (past = context - new).
void prefill_attention(const PrefillParams& p, cudaStream_t stream);

// The sim/ cost of a launch (ops.h): its sequences as a Batch (past = context - new, the paged
// cache's block size) costed by batch_attention_op for one layer. Benchmarks charge a launch with it.
Op prefill_cost(const PrefillParams& shape, const std::vector<int32_t>& q_start, const std::vector<int32_t>& context_lens);

// CPU reference in double precision on float inputs: q [total_q, heads, head_dim], the K and V
// pools laid out as `shape.cache` says, and host copies of q_start, context_lens and (paged) the
// block table; o [total_q, heads, head_dim] and lse [total_q, heads] are written.
void prefill_attention_reference(const PrefillParams& shape, const float* q, const float* k_pool, const float* v_pool,
                                 const std::vector<int32_t>& q_start, const std::vector<int32_t>& context_lens,
                                 const std::vector<int32_t>& block_table, float* o, float* lse);

}  // namespace inferlab
