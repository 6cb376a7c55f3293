#include "inferlab/sim/kv_blocks.h"

#include <algorithm>
#include <string>

#include "inferlab/sim/error.h"

namespace inferlab {

std::string kv_layout_name(KvLayout l) { return l == KvLayout::paged ? "paged" : "contiguous"; }
KvLayout parse_kv_layout(const std::string& s) {
  if (s == "paged") return KvLayout::paged;
  if (s == "contiguous") return KvLayout::contiguous;
  throw Error("unknown KV layout '" + s + "' (known: contiguous, paged)");
}

BlockAllocator::BlockAllocator(int64_t num_blocks) : num_blocks_(num_blocks) {
  if (num_blocks <= 0 || num_blocks > INT32_MAX) throw Error("block pool size must be in 1..2^31-1");
}

// Fresh blocks are handed out in order 0, 1, 2, ...; a released block is handed out again before any
// fresh one (last released, first reused). The bookkeeping grows with the blocks ever used, not the pool.
int32_t BlockAllocator::allocate() {
  if (used_ == num_blocks_)
    throw Error("KV block pool exhausted: all " + std::to_string(num_blocks_) + " blocks are in use");
  int32_t b;
  if (!free_.empty()) {
    b = free_.back();
    free_.pop_back();
  } else {
    b = int32_t(in_use_.size());
    in_use_.push_back(0);
  }
  in_use_[std::size_t(b)] = 1;
  ++used_;
  return b;
}

void BlockAllocator::release(int32_t b) {
  if (b < 0 || std::size_t(b) >= in_use_.size() || !in_use_[std::size_t(b)])
    throw Error("releasing KV block " + std::to_string(b) + ", which is not allocated");
  in_use_[std::size_t(b)] = 0;
  free_.push_back(b);
  --used_;
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
  const int64_t need = kv_blocks_for(tokens, block_size_);
  if (need > max_blocks_)
    throw Error("sequence " + std::to_string(slot) + ": " + std::to_string(tokens) + " tokens need " +
                std::to_string(need) + " blocks, beyond the " + std::to_string(max_blocks_) + " a table row holds");
  while (int64_t(s.blocks.size()) < need) s.blocks.push_back(alloc_.allocate());
  s.tokens = std::max(s.tokens, tokens);
}

int64_t PagedKvManager::blocks_needed(int slot, int64_t tokens) const {
  return std::max<int64_t>(0, kv_blocks_for(tokens, block_size_) - int64_t(seq(slot).blocks.size()));
}

bool PagedKvManager::reserve(int slot, int64_t tokens, int64_t keep_free) {
  const int64_t need = blocks_needed(slot, tokens);
  if (need == 0) return true;
  if (need + keep_free > alloc_.free_blocks()) return false;
  const int64_t held = seq(slot).tokens;
  grow(slot, tokens);
  seq(slot).tokens = held;
  return true;
}

void PagedKvManager::release(int slot) {
  Seq& s = seq(slot);
  for (int32_t b : s.blocks) alloc_.release(b);
  s.blocks.clear();
  s.tokens = 0;
}

void PagedKvManager::truncate(int slot, int64_t tokens) {
  Seq& s = seq(slot);
  if (tokens < 0 || tokens > s.tokens)
    throw Error("sequence " + std::to_string(slot) + ": cannot keep " + std::to_string(tokens) + " of its " +
                std::to_string(s.tokens) + " tokens");
  const std::size_t keep = std::size_t((tokens + block_size_ - 1) / block_size_);
  while (s.blocks.size() > keep) {
    alloc_.release(s.blocks.back());
    s.blocks.pop_back();
  }
  s.tokens = tokens;
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
