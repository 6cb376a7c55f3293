// append_kv: one new token's K and V per sequence into either layout. One thread moves 16 bytes.
#include "inferlab/kernels/common/check.h"
#include "inferlab/kernels/common/nvtx.h"
#include "inferlab/kernels/kvcache/kvcache.h"
#include "inferlab/sim/error.h"

namespace inferlab {
namespace {

// row_chunks: 16-byte pieces of one token's K (or V) row, kv_heads * head_dim * element / 16.
__global__ void append_kernel(const KvCacheView v, const uint4* k_new, const uint4* v_new, const int32_t* positions,
                              int64_t row_chunks) {
  const int64_t total = v.batch * row_chunks;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t b = i / row_chunks, c = i % row_chunks;
    const int64_t pos = positions[b];
    int64_t slot;  // token slot in the pool
    if (v.layout == KvLayout::paged)
      slot = int64_t(v.block_table[b * v.max_blocks_per_seq + pos / v.block_size]) * v.block_size + pos % v.block_size;
    else
      slot = b * v.max_len + pos;
    reinterpret_cast<uint4*>(v.k)[slot * row_chunks + c] = k_new[i];
    reinterpret_cast<uint4*>(v.v)[slot * row_chunks + c] = v_new[i];
  }
}

}  // namespace

void append_kv(const KvCacheView& v, const void* k_new, const void* v_new, const int32_t* positions,
               cudaStream_t stream) {
  if ((v.kv_heads * v.head_dim * int64_t(v.element_bytes())) % 16 != 0)
    throw Error("append_kv: a token's K row must be a multiple of 16 bytes");
  NvtxRange range("kv_cache_write/append");
  const int64_t row_chunks = v.kv_heads * v.head_dim * int64_t(v.element_bytes()) / 16;
  const int64_t chunks = v.batch * row_chunks;
  append_kernel<<<unsigned((chunks + 255) / 256), 256, 0, stream>>>(v, static_cast<const uint4*>(k_new),
                                                                      static_cast<const uint4*>(v_new), positions,
                                                                      row_chunks);
  INFERLAB_CHECK_LAUNCH();
}

}  // namespace inferlab
