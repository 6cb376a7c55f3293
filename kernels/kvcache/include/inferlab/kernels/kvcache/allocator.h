#pragma once
// The host side of a paged KV cache, plain C++ (built with or without CUDA, so the memory
// experiments run the real allocator anywhere):
//   BlockAllocator   a free list of physical block ids; allocating from an empty pool throws
//   PagedKvManager   per-sequence block lists: grow(slot, tokens) takes blocks on demand as tokens
//                    are appended, release(slot) returns them when the sequence ends, and
//                    block_table() lays the rows out for the kernels
#include <cstdint>
#include <vector>

namespace inferlab {

class BlockAllocator {
 public:
  explicit BlockAllocator(int64_t num_blocks);
  int32_t allocate();  // throws inferlab::Error when every block is in use
  void release(int32_t block);
  int64_t num_blocks() const { return num_blocks_; }
  int64_t free_blocks() const { return int64_t(free_.size()); }
  int64_t used_blocks() const { return num_blocks_ - free_blocks(); }

 private:
  int64_t num_blocks_;
  std::vector<int32_t> free_;
  std::vector<uint8_t> in_use_;
};

// Sequences in slots 0..max_seqs-1; each slot holds a token count and its physical blocks.
class PagedKvManager {
 public:
  PagedKvManager(int64_t num_blocks, int64_t block_size, int64_t max_blocks_per_seq);
  // Makes room for `tokens` tokens in total in `slot`, allocating blocks as needed.
  void grow(int slot, int64_t tokens);
  void release(int slot);  // the sequence ended: its blocks return to the pool
  // Keeps the first `tokens` tokens (a speculative rollback: a length decrement); whole trailing blocks
  // return to the pool. More tokens than the slot holds is an error.
  void truncate(int slot, int64_t tokens);
  int64_t tokens(int slot) const;
  const std::vector<int32_t>& blocks(int slot) const;
  // Table rows for the given slots, -1 padded to max_blocks_per_seq.
  std::vector<int32_t> block_table(const std::vector<int>& slots) const;
  const BlockAllocator& allocator() const { return alloc_; }
  int64_t block_size() const { return block_size_; }
  int64_t max_blocks_per_seq() const { return max_blocks_; }

 private:
  struct Seq {
    int64_t tokens = 0;
    std::vector<int32_t> blocks;
  };
  Seq& seq(int slot);
  const Seq& seq(int slot) const;
  BlockAllocator alloc_;
  int64_t block_size_, max_blocks_;
  std::vector<Seq> seqs_;
};

}  // namespace inferlab
