#pragma once
// The KV cache of one layer in either layout, behind one view that kernels read:
//   contiguous  each sequence owns max_len token slots up front
//               k, v: [batch, max_len, kv_heads, head_dim]
//   paged       fixed-size blocks of block_size tokens from a shared pool; a block table per
//               sequence maps logical block i to a physical block (vLLM's PagedAttention)
//               k, v: [num_blocks, block_size, kv_heads, head_dim]
//               block_table: [batch, max_blocks_per_seq] int32, -1 where unused
// The layout enum and the host side (BlockAllocator, PagedKvManager) are sim/kv_blocks.h, plain C++
// shared with the serving simulator. Every check that
// can fail (a context beyond its blocks, an exhausted pool, a table entry outside the pool) is made
// on the host before a launch and throws inferlab::Error.
#include <cstdint>
#include <string>
#include <vector>

#include <cuda_runtime.h>

#include "inferlab/sim/kv_blocks.h"
#include "inferlab/sim/dtype.h"

namespace inferlab {

struct KvCacheView {
  KvLayout layout = KvLayout::contiguous;
  DType dtype = DType::bf16;
  int64_t batch = 0;
  int64_t kv_heads = 0;
  int64_t head_dim = 0;
  void* k = nullptr;
  void* v = nullptr;
  const int32_t* context_lens = nullptr;  // device [batch]: tokens each sequence holds
  // contiguous
  int64_t max_len = 0;
  // paged
  int64_t num_blocks = 0;
  int64_t block_size = 0;
  int64_t max_blocks_per_seq = 0;
  const int32_t* block_table = nullptr;  // device [batch, max_blocks_per_seq]

  std::size_t element_bytes() const { return std::size_t(dtype_bytes(dtype)); }
  // Bytes of one of the K or V pools.
  std::size_t pool_bytes() const;
};

// Host-side checks of a view against host copies of its context lengths and block table:
// sizes, dtype, every context within its allocation, every used table entry inside the pool.
void validate_kv_view(const KvCacheView& view, const std::vector<int32_t>& context_lens,
                      const std::vector<int32_t>& block_table);

// The pool row (slot) holding token `token` of sequence `seq`, from the host copy of the block
// table (paged) or the sequence's reserved rows (contiguous): what the CPU references and tests
// gather through. Unchecked: validate_kv_view checks the view first.
int64_t kv_slot(const KvCacheView& view, const std::vector<int32_t>& block_table, int64_t seq, int64_t token);

// Writes one new token per sequence: k_new/v_new [batch, kv_heads, head_dim] go to token index
// positions[b] of sequence b (device int32 [batch]). The caller has grown the sequences first.
void append_kv(const KvCacheView& view, const void* k_new, const void* v_new, const int32_t* positions,
               cudaStream_t stream);

}  // namespace inferlab
