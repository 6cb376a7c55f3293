#include "inferlab/kernels/kvcache/kvcache.h"

#include <algorithm>

#include "inferlab/sim/error.h"

namespace inferlab {

std::size_t KvCacheView::pool_bytes() const {
  const std::size_t per_token = std::size_t(kv_heads * head_dim) * element_bytes();
  return layout == KvLayout::paged ? std::size_t(num_blocks * block_size) * per_token
                                   : std::size_t(batch * max_len) * per_token;
}

void validate_kv_view(const KvCacheView& v, const std::vector<int32_t>& lens, const std::vector<int32_t>& table) {
  if (v.batch <= 0 || v.kv_heads <= 0 || v.head_dim <= 0) throw Error("KV cache: batch, kv_heads and head_dim must be positive");
  if (v.dtype != DType::bf16 && v.dtype != DType::fp16)
    throw Error("KV cache: unsupported dtype " + dtype_name(v.dtype) + " (supported: bf16, fp16)");
  if (!v.k || !v.v || !v.context_lens) throw Error("KV cache: k, v and context_lens must be given");
  if (int64_t(lens.size()) != v.batch) throw Error("KV cache: context_lens has " + std::to_string(lens.size()) +
                                                   " entries for a batch of " + std::to_string(v.batch));
  if (v.layout == KvLayout::contiguous) {
    for (int64_t b = 0; b < v.batch; ++b)
      if (lens[b] < 0 || lens[b] > v.max_len)
        throw Error("KV cache: sequence " + std::to_string(b) + " holds " + std::to_string(lens[b]) +
                    " tokens, beyond its reserved " + std::to_string(v.max_len));
    return;
  }
  if (v.block_size <= 0 || v.num_blocks <= 0 || v.max_blocks_per_seq <= 0 || !v.block_table)
    throw Error("KV cache: a paged cache needs block_size, num_blocks, max_blocks_per_seq and a block table");
  if (int64_t(table.size()) != v.batch * v.max_blocks_per_seq)
    throw Error("KV cache: block table has " + std::to_string(table.size()) + " entries, expected " +
                std::to_string(v.batch * v.max_blocks_per_seq));
  for (int64_t b = 0; b < v.batch; ++b) {
    const int64_t need = (lens[b] + v.block_size - 1) / v.block_size;
    if (lens[b] < 0 || need > v.max_blocks_per_seq)
      throw Error("KV cache: sequence " + std::to_string(b) + " holds " + std::to_string(lens[b]) +
                  " tokens, beyond the " + std::to_string(v.max_blocks_per_seq * v.block_size) + " its table can map");
    for (int64_t i = 0; i < need; ++i) {
      const int32_t blk = table[b * v.max_blocks_per_seq + i];
      if (blk < 0)
        throw Error("KV cache: sequence " + std::to_string(b) + " holds " + std::to_string(lens[b]) +
                    " tokens but logical block " + std::to_string(i) + " is not allocated");
      if (blk >= v.num_blocks)
        throw Error("KV cache: sequence " + std::to_string(b) + " block table points to block " + std::to_string(blk) +
                    ", outside the pool of " + std::to_string(v.num_blocks));
    }
  }
}

int64_t kv_slot(const KvCacheView& v, const std::vector<int32_t>& table, int64_t seq, int64_t token) {
  if (v.layout == KvLayout::paged)
    return int64_t(table[std::size_t(seq * v.max_blocks_per_seq + token / v.block_size)]) * v.block_size +
           token % v.block_size;
  return seq * v.max_len + token;
}

}  // namespace inferlab
