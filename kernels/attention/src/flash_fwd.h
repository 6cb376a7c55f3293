#pragma once
// Internal: the flash forward launchers (src/flash_fwd.cu). attention.cu validates before calling them.
#include <cstdint>
#include <string>

#include <cuda_runtime.h>

#include "inferlab/kernels/attention/attention.h"
#include "inferlab/kernels/attention/prefill.h"
#include "inferlab/sim/error.h"

namespace inferlab {

void launch_flash_forward(const AttentionParams& p, cudaStream_t stream);
// The Hopper (wgmma, sm_90a) kernel; launch_flash_forward picks it on compute capability 9.0.
void launch_flash_forward_sm90(const AttentionParams& p, cudaStream_t stream);
// The same two kernels in their varlen modes (prefill.h); prefill.cu validates before calling.
void launch_flash_prefill(const PrefillParams& p, cudaStream_t stream);
void launch_flash_prefill_sm90(const PrefillParams& p, cudaStream_t stream);
// The overlapped Hopper kernel (flash_fwd_sm90_overlap.cu): dense attention only.
void launch_flash_forward_overlap(const AttentionParams& p, cudaStream_t stream);
// The dense persistent grid of the two Hopper kernels for query tiles of bm rows: work items (query
// tile, batch x head), CTAs (one per SM, at most flash.max_ctas) and the stream's work counter, zeroed
// on the stream.
struct FlashGrid {
  int m_blocks = 0, items = 0, grid = 0;
  int* counter = nullptr;
};
// The Hopper kernels' head dims, one place: f(Tile<D, BN>{}) for D 128 or 64 (BN 128), else an
// inferlab::Error from `who`.
template <template <int, int> class Tile, class F>
void with_sm90_head_dim(int64_t head_dim, const char* who, F&& f) {
  switch (head_dim) {
    case 128: return f(Tile<128, 128>{});
    case 64: return f(Tile<64, 128>{});
    default: throw Error(std::string(who) + ": unsupported head dim " + std::to_string(head_dim) + " (supported: 64, 128)");
  }
}
FlashGrid flash_dense_grid(const AttentionParams& a, int bm, cudaStream_t stream);
// The persistent kernels' work-item counter: one int per (device, stream), allocated once, zeroed by
// the launcher on its stream before each launch.
int* flash_work_counter(int device, cudaStream_t stream);

}  // namespace inferlab
