#pragma once
// Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC 2011): a counter-based
// generator, the one the sampler draws with. Host and device (the host side is what the known-answer test checks).
#include <cstdint>

#if defined(__CUDACC__)
#define INFERLAB_HD __host__ __device__ __forceinline__
#else
#define INFERLAB_HD inline
#endif

namespace inferlab {

struct Philox4x32 {
  uint32_t v[4];
};

INFERLAB_HD Philox4x32 philox4x32_10(Philox4x32 ctr, uint32_t k0, uint32_t k1) {
  constexpr uint32_t kM0 = 0xD2511F53u, kM1 = 0xCD9E8D57u, kW0 = 0x9E3779B9u, kW1 = 0xBB67AE85u;
  for (int round = 0; round < 10; ++round) {
    const uint64_t p0 = uint64_t(kM0) * ctr.v[0], p1 = uint64_t(kM1) * ctr.v[2];
    const uint32_t hi0 = uint32_t(p0 >> 32), lo0 = uint32_t(p0), hi1 = uint32_t(p1 >> 32), lo1 = uint32_t(p1);
    ctr = Philox4x32{{hi1 ^ ctr.v[1] ^ k0, lo1, hi0 ^ ctr.v[3] ^ k1, lo0}};
    k0 += kW0;
    k1 += kW1;
  }
  return ctr;
}

// The 64 random bits of one draw keyed by (seed, offset): counter (offset, 0), key seed.
INFERLAB_HD uint64_t philox_draw64(uint64_t seed, uint64_t offset) {
  const Philox4x32 r = philox4x32_10(Philox4x32{{uint32_t(offset), uint32_t(offset >> 32), 0u, 0u}}, uint32_t(seed),
                                     uint32_t(seed >> 32));
  return (uint64_t(r.v[0]) << 32) | r.v[1];
}

}  // namespace inferlab

#undef INFERLAB_HD
