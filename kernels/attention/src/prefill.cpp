// Prefill attention (prefill.h): the host checks and the entry point. The kernels are the flash
// forward kernels in their varlen modes (flash_fwd.cu, flash_fwd_sm90.cu).
#include <cmath>
#include <string>

#include "flash_fwd.h"
#include "inferlab/kernels/attention/prefill.h"
#include "inferlab/kernels/common/nvtx.h"
#include "inferlab/sim/error.h"
#include "inferlab/sim/model.h"
#include "inferlab/sim/ops.h"

namespace inferlab {

float PrefillParams::softmax_scale() const {
  return scale != 0.f ? scale : float(1.0 / std::sqrt(double(head_dim)));
}

// [next item, blocks done] of the persistent kernel, padded to an allocation granule.
std::size_t prefill_workspace_bytes(const PrefillParams&) { return 256; }

Op prefill_cost(const PrefillParams& p, const std::vector<int32_t>& q_start, const std::vector<int32_t>& context_lens) {
  if (int64_t(q_start.size()) != p.sequences + 1 || int64_t(context_lens.size()) != p.sequences)
    throw Error("prefill attention: q_start needs sequences + 1 entries and context_lens sequences");
  ModelConfig m;
  m.layers = 1;
  m.heads = p.heads;
  m.kv_heads = p.cache.kv_heads;
  m.head_dim = p.head_dim;
  Batch batch;
  batch.kv_block_size = p.cache.layout == KvLayout::paged ? p.cache.block_size : 0;
  for (int64_t s = 0; s < p.sequences; ++s) {
    const int64_t n = q_start[std::size_t(s) + 1] - q_start[std::size_t(s)];
    if (n <= 0) continue;
    batch.sequences.push_back(SequenceWork{n, context_lens[std::size_t(s)] - n, 1, 0});
  }
  OpOptions o;
  o.precision.act = o.precision.kv = p.dtype;
  o.causal = p.causal;
  return batch_attention_op(m, batch, o);
}

void validate_prefill(const PrefillParams& p) {
  auto fail = [](const std::string& what) { throw Error("prefill attention: " + what); };
  auto str = [](int64_t x) { return std::to_string(x); };
  const KvCacheView& c = p.cache;
  if (p.dtype != DType::bf16 && p.dtype != DType::fp16)
    fail("unsupported dtype " + dtype_name(p.dtype) + " (supported: bf16, fp16)");
  if (p.head_dim != 64 && p.head_dim != 128) fail("unsupported head dim " + str(p.head_dim) + " (supported: 64, 128)");
  if (p.sequences <= 0 || p.heads <= 0 || c.kv_heads <= 0) fail("sequences, heads and the cache's kv_heads must be positive");
  if (p.sequences > kMaxPrefillSequences)
    fail(str(p.sequences) + " sequences in one launch; at most " + str(kMaxPrefillSequences));
  if (p.heads % c.kv_heads != 0) fail("kv_heads " + str(c.kv_heads) + " does not divide heads " + str(p.heads));
  if (c.batch != p.sequences) fail("the cache view holds " + str(c.batch) + " sequences, the launch " + str(p.sequences));
  if (c.head_dim != p.head_dim || c.dtype != p.dtype)
    fail("the KV cache's head dim or dtype (" + str(c.head_dim) + ", " + dtype_name(c.dtype) + ") differs from the query's (" +
         str(p.head_dim) + ", " + dtype_name(p.dtype) + ")");
  if (p.total_q <= 0 || p.max_q <= 0) fail("total_q and max_q must be positive");
  if (p.max_q > p.total_q) fail("max_q " + str(p.max_q) + " exceeds total_q " + str(p.total_q));
  if (p.total_q > INT32_MAX || p.sequences * p.heads > INT32_MAX) fail("shape too large for 32-bit row indices");
  if (p.max_context < p.max_q)
    fail("max_context " + str(p.max_context) + " is smaller than max_q " + str(p.max_q) +
         ": context_lens count the new tokens too");
  if (p.max_context > INT32_MAX) fail("max_context " + str(p.max_context) + " beyond 32-bit key indices");
  if (c.layout == KvLayout::paged) {
    if (!c.block_table) fail("paged cache without a block table");
    if (c.block_size <= 0 || (c.block_size & (c.block_size - 1)) != 0 || c.block_size > (int64_t(1) << 30))
      fail("paged block size " + str(c.block_size) + " must be a power of two");
    if (c.num_blocks <= 0 || c.max_blocks_per_seq <= 0 || c.max_blocks_per_seq > INT32_MAX)
      fail("paged cache needs positive num_blocks and max_blocks_per_seq");
    if (p.max_context > c.max_blocks_per_seq * c.block_size)
      fail("max_context " + str(p.max_context) + " beyond the " + str(c.max_blocks_per_seq * c.block_size) +
           " tokens a block table row maps");
  } else {
    if (c.max_len <= 0) fail("contiguous cache needs a positive max_len");
    if (p.max_context > c.max_len) fail("max_context " + str(p.max_context) + " beyond the cache's max_len " + str(c.max_len));
  }
  if (!p.q || !p.q_start || !p.o || !c.k || !c.v || !c.context_lens)
    fail("q, q_start, o and the cache's k, v, context_lens must be given");
  const std::size_t need = prefill_workspace_bytes(p);
  if (!p.workspace || p.workspace_bytes < need)
    fail("needs a zero-filled workspace of " + std::to_string(need) + " bytes (prefill_workspace_bytes)");
}

void prefill_attention(const PrefillParams& p, cudaStream_t stream) {
  validate_prefill(p);
  NvtxRange range(p.cache.layout == KvLayout::paged ? "attention/prefill_paged" : "attention/prefill_contiguous");
  launch_flash_prefill(p, stream);
}

}  // namespace inferlab
