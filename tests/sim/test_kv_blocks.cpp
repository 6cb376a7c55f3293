// sim/kv_blocks.h: the one block manager of the simulator, the memory experiment and the engine.
#include <gtest/gtest.h>

#include <algorithm>

#include "inferlab/sim/error.h"
#include "inferlab/sim/kv_blocks.h"

#include "error_of.h"

namespace inferlab {
namespace {

TEST(KvBlocks, BlockAllocatorHandsOutEveryBlockOnceAndReportsExhaustion) {
  BlockAllocator a(5);
  std::vector<int32_t> got;
  for (int i = 0; i < 5; ++i) got.push_back(a.allocate());
  std::sort(got.begin(), got.end());
  EXPECT_EQ(got, (std::vector<int32_t>{0, 1, 2, 3, 4}));
  EXPECT_NE(error_of([&] { a.allocate(); }).find("exhausted"), std::string::npos);
  a.release(3);
  EXPECT_EQ(a.allocate(), 3);
  EXPECT_NE(error_of([&] { a.release(7); }).find("not allocated"), std::string::npos);
  a.release(2);
  EXPECT_NE(error_of([&] { a.release(2); }).find("not allocated"), std::string::npos);
}

TEST(KvBlocks, ManagerGrowsOnDemandAndFreesOnRelease) {
  PagedKvManager m(10, 16, 4);
  m.grow(0, 1);
  EXPECT_EQ(m.blocks(0).size(), 1u);
  m.grow(0, 16);
  EXPECT_EQ(m.blocks(0).size(), 1u);
  m.grow(0, 17);
  EXPECT_EQ(m.blocks(0).size(), 2u);
  m.grow(1, 40);
  EXPECT_EQ(m.allocator().used_blocks(), 5);
  const auto t = m.block_table({1, 0});
  ASSERT_EQ(t.size(), 8u);
  EXPECT_EQ(t[3], -1);
  EXPECT_EQ(t[6], -1);
  EXPECT_NE(error_of([&] { m.grow(2, 65); }).find("beyond the 4"), std::string::npos);
  m.release(1);
  EXPECT_EQ(m.allocator().used_blocks(), 2);
  m.grow(2, 64);
  m.grow(3, 64);
  EXPECT_NE(error_of([&] { m.grow(4, 1); }).find("exhausted"), std::string::npos);
}

TEST(KvBlocks, TruncateFreesWholeTrailingBlocksOnly) {
  PagedKvManager m(8, 16, 8);
  m.grow(0, 50);  // 4 blocks
  const std::vector<int32_t> before = m.blocks(0);
  m.truncate(0, 33);  // 3 blocks hold 33 tokens
  EXPECT_EQ(m.tokens(0), 33);
  EXPECT_EQ(m.blocks(0), std::vector<int32_t>(before.begin(), before.begin() + 3));
  EXPECT_EQ(m.allocator().free_blocks(), 5);
  m.truncate(0, 32);  // exactly 2 blocks
  EXPECT_EQ(m.blocks(0).size(), 2u);
  m.truncate(0, 32);
  EXPECT_EQ(m.allocator().free_blocks(), 6);
  EXPECT_NE(error_of([&] { m.truncate(0, 33); }).find("cannot keep 33 of its 32"), std::string::npos);
  m.truncate(0, 0);
  EXPECT_TRUE(m.blocks(0).empty());
  EXPECT_EQ(m.allocator().free_blocks(), 8);
}

TEST(KvBlocks, ReserveSetsBlocksAsideWithoutStoringTokens) {
  PagedKvManager m(10, 16, 8);
  EXPECT_TRUE(m.reserve(0, 40));  // 3 blocks, no token held
  EXPECT_EQ(m.tokens(0), 0);
  EXPECT_EQ(m.blocks(0).size(), 3u);
  EXPECT_EQ(m.blocks_needed(0, 48), 0);
  EXPECT_EQ(m.blocks_needed(0, 49), 1);
  m.grow(0, 33);  // inside the reservation: no new block
  EXPECT_EQ(m.tokens(0), 33);
  EXPECT_EQ(m.used_blocks(), 3);
  EXPECT_FALSE(m.reserve(1, 16 * 6, 2));  // 6 blocks would leave 1 free, fewer than 2
  EXPECT_EQ(m.used_blocks(), 3);          // nothing taken
  EXPECT_TRUE(m.reserve(1, 16 * 5, 2));
  EXPECT_EQ(m.free_blocks(), 2);
  EXPECT_TRUE(m.reserve(1, 16 * 5, 9));  // already held: nothing needed, whatever the headroom
  m.release(0);
  m.release(1);
  EXPECT_EQ(m.free_blocks(), 10);
}

TEST(KvBlocks, LayoutNamesRoundTripAndUnknownOnesAreNamed) {
  for (KvLayout l : {KvLayout::contiguous, KvLayout::paged}) EXPECT_EQ(parse_kv_layout(kv_layout_name(l)), l);
  EXPECT_NE(error_of([] { parse_kv_layout("virtual"); }).find("unknown KV layout 'virtual'"), std::string::npos);
  EXPECT_EQ(kv_blocks_for(0, 16), 0);
  EXPECT_EQ(kv_blocks_for(16, 16), 1);
  EXPECT_EQ(kv_blocks_for(17, 16), 2);
}

}  // namespace
}  // namespace inferlab
