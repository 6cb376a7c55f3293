#pragma once
// The one KV block core of the lab, plain C++: the serving simulator, the KV-memory experiment and the
// GPU engine's block tables all count KV memory through it.
//   KvLayout         how a sequence's KV is held: contiguous (max_len tokens set aside up front, what a
//                    server without paging must do) or paged (blocks of block_size tokens taken as needed)
//   BlockAllocator   a free list of physical block ids; allocating from an empty pool throws
//   PagedKvManager   per-sequence block lists: grow(slot, tokens) takes blocks on demand as tokens
//                    are appended, reserve(slot, tokens) sets blocks aside ahead of the tokens (a
//                    scheduler's admission, a contiguous reservation), release(slot) returns them when
//                    the sequence ends, truncate() rolls back, and block_table() lays the rows out for
//                    the kernels
// A contiguous layout is the same manager with one block of max_len tokens per sequence (sim/, the
// memory experiment), or max_len tokens reserved at admission in blocks of any size (the engine,
// whose kernels read pages; the memory it sets aside is the same).
#include <cstdint>
#include <string>
#include <vector>

namespace inferlab {

enum class KvLayout { contiguous, paged };
std::string kv_layout_name(KvLayout l);  // "contiguous", "paged"
KvLayout parse_kv_layout(const std::string& s);

// Blocks of `block_size` tokens that hold `tokens` tokens: ceil(tokens / block_size).
inline int64_t kv_blocks_for(int64_t tokens, int64_t block_size) { return (tokens + block_size - 1) / block_size; }

class BlockAllocator {
 public:
  explicit BlockAllocator(int64_t num_blocks);
  int32_t allocate();  // throws inferlab::Error when every block is in use
  void release(int32_t block);
  int64_t num_blocks() const { return num_blocks_; }
  int64_t free_blocks() const { return num_blocks_ - used_; }
  int64_t used_blocks() const { return used_; }

 private:
  int64_t num_blocks_, used_ = 0;
  std::vector<int32_t> free_;     // released blocks, reused first
  std::vector<uint8_t> in_use_;   // per block ever handed out
};

// Sequences in slots 0..max_seqs-1; each slot holds a token count and its physical blocks.
class PagedKvManager {
 public:
  PagedKvManager(int64_t num_blocks, int64_t block_size, int64_t max_blocks_per_seq);
  // Makes room for `tokens` tokens in total in `slot`, allocating blocks as needed; the slot then holds
  // max(its tokens, `tokens`) tokens.
  void grow(int slot, int64_t tokens);
  // Sets aside the blocks of `tokens` tokens in `slot` without storing any (held tokens unchanged).
  // Returns false, taking nothing, when that would leave fewer than `keep_free` blocks free.
  bool reserve(int slot, int64_t tokens, int64_t keep_free = 0);
  // Blocks `slot` still needs to hold `tokens` tokens (0 when it has them).
  int64_t blocks_needed(int slot, int64_t tokens) const;
  void release(int slot);  // the sequence ended: its blocks return to the pool
  // Keeps the first `tokens` tokens (a speculative rollback: a length decrement); whole trailing blocks
  // return to the pool. More tokens than the slot holds is an error.
  void truncate(int slot, int64_t tokens);
  int64_t tokens(int slot) const;
  const std::vector<int32_t>& blocks(int slot) const;
  // Table rows for the given slots, -1 padded to max_blocks_per_seq.
  std::vector<int32_t> block_table(const std::vector<int>& slots) const;
  const BlockAllocator& allocator() const { return alloc_; }
  int64_t free_blocks() const { return alloc_.free_blocks(); }
  int64_t used_blocks() const { return alloc_.used_blocks(); }
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
