#include "inferlab/kernels/kvcache/kvcache.h"

#include <algorithm>

#include "inferlab/sim/error.h"

namespace inferlab {

std::string kv_layout_name(KvLayout l) { return l == KvLayout::paged ? "paged" : "contiguous"; }
KvLayout parse_kv_layout(const std::string& s) {
  if (s == "paged") return KvLayout::paged;
  if (s == "contiguous") return KvLayout::contiguous;
  throw Error("unknown KV layout '" + s + "' (known: contiguous, paged)");
}

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

BlockAllocator::BlockAllocator(int64_t num_blocks) : num_blocks_(num_blocks) {
  if (num_blocks <= 0 || num_blocks > INT32_MAX) throw Error("block pool size must be in 1..2^31-1");
  free_.reserve(std::size_t(num_blocks));
  for (int64_t i = num_blocks - 1; i >= 0; --i) free_.push_back(int32_t(i));  // hand out 0, 1, 2, ... first
  in_use_.assign(std::size_t(num_blocks), 0);
}

int32_t BlockAllocator::allocate() {
  if (free_.empty())
    throw Error("KV block pool exhausted: all " + std::to_string(num_blocks_) + " blocks are in use");
  const int32_t b = free_.back();
  free_.pop_back();
  in_use_[std::size_t(b)] = 1;
  return b;
}

void BlockAllocator::release(int32_t b) {
  if (b < 0 || b >= num_blocks_ || !in_use_[std::size_t(b)])
    throw Error("releasing KV block " + std::to_string(b) + ", which is not allocated");
  in_use_[std::size_t(b)] = 0;
  free_.push_back(b);
}

PagedKvManager::PagedKvManager(int64_t num_blocks, int64_t block_size, int64_t max_blocks_per_seq)
    : alloc_(num_blocks), block_size_(block_size), max_blocks_(max_blocks_per_seq) {
  if (block_size <= 0) throw Error("block size must be positive");
  if (max_blocks_per_seq <= 0) throw Error("max blocks per sequence must be positive");
}

PagedKvManager::Seq& PagedKvManager::seq(int slot) {
  if (slot < 0) throw Error("negative sequence slot");
  if (std::size_t(slot) >= seqs_.size()) seqs_.resize(std::size_t(slot) + 1);
  return seqs_[std::size_t(slot)];
}
const PagedKvManager::Seq& PagedKvManager::seq(int slot) const {
  static const Seq empty;
  return slot >= 0 && std::size_t(slot) < seqs_.size() ? seqs_[std::size_t(slot)] : empty;
}

void PagedKvManager::grow(int slot, int64_t tokens) {
  Seq& s = seq(slot);
  const int64_t need = (tokens + block_size_ - 1) / block_size_;
  if (need > max_blocks_)
    throw Error("sequence " + std::to_string(slot) + ": " + std::to_string(tokens) + " tokens need " +
                std::to_string(need) + " blocks, beyond the " + std::to_string(max_blocks_) + " a table row holds");
  while (int64_t(s.blocks.size()) < need) s.blocks.push_back(alloc_.allocate());
  s.tokens = std::max(s.tokens, tokens);
}

void PagedKvManager::release(int slot) {
  Seq& s = seq(slot);
  for (int32_t b : s.blocks) alloc_.release(b);
  s.blocks.clear();
  s.tokens = 0;
}

int64_t PagedKvManager::tokens(int slot) const { return seq(slot).tokens; }
const std::vector<int32_t>& PagedKvManager::blocks(int slot) const { return seq(slot).blocks; }

std::vector<int32_t> PagedKvManager::block_table(const std::vector<int>& slots) const {
  std::vector<int32_t> t(slots.size() * std::size_t(max_blocks_), -1);
  for (std::size_t r = 0; r < slots.size(); ++r) {
    const auto& bl = seq(slots[r]).blocks;
    std::copy(bl.begin(), bl.end(), t.begin() + std::ptrdiff_t(r * std::size_t(max_blocks_)));
  }
  return t;
}

}  // namespace inferlab
