// Philox4x32-10 (Salmon, Moraes, Dror, Shaw: "Parallel random numbers: as easy as
// 1, 2, 3", SC 2011), bit-identical to Random123's philox4x32 with 10 rounds and to
// cuRAND's curand_Philox4x32_10.
//
// Keying used everywhere in lpx (CPU, SIMD, GPU):
//   key     = (seed low 32 bits, seed high 32 bits)
//   counter = (i/4 low, i/4 high, stream, 0)       for element index i
//   bits    = output word i % 4
// This is exactly what cuRAND returns from the first curand() after
// curand_init(seed, /*subsequence=*/stream, /*offset=*/i, &state) with a
// curandStatePhilox4_32_10_t, so results never depend on thread count, vector width,
// or CPU vs GPU: only on (seed, stream, element index).
#pragma once

#include <cstdint>

#include "lpx/numerics/hd.hpp"

namespace lpx {

struct Philox4x32 {
  uint32_t v[4];
};

namespace philox_detail {
inline constexpr uint32_t kMul0 = 0xD2511F53u;
inline constexpr uint32_t kMul1 = 0xCD9E8D57u;
inline constexpr uint32_t kWeyl0 = 0x9E3779B9u;  // golden ratio
inline constexpr uint32_t kWeyl1 = 0xBB67AE85u;  // sqrt(3) - 1

LPX_HD constexpr uint32_t mulhi(uint32_t a, uint32_t b) {
  return static_cast<uint32_t>((static_cast<uint64_t>(a) * b) >> 32);
}
}  // namespace philox_detail

// One Philox4x32-10 block: 10 rounds of the S-box, key bumped between rounds.
LPX_HD constexpr Philox4x32 philox4x32_10(Philox4x32 ctr, uint32_t key0, uint32_t key1) {
  using namespace philox_detail;
  for (int round = 0; round < 10; ++round) {
    if (round > 0) {
      key0 += kWeyl0;
      key1 += kWeyl1;
    }
    const uint32_t hi0 = mulhi(kMul0, ctr.v[0]);
    const uint32_t lo0 = kMul0 * ctr.v[0];
    const uint32_t hi1 = mulhi(kMul1, ctr.v[2]);
    const uint32_t lo1 = kMul1 * ctr.v[2];
    ctr = Philox4x32{{hi1 ^ ctr.v[1] ^ key0, lo1, hi0 ^ ctr.v[3] ^ key1, lo0}};
  }
  return ctr;
}

// The four random words of the group of elements [4*group, 4*group + 4).
LPX_HD constexpr Philox4x32 random_block(uint64_t seed, uint32_t stream, uint64_t group) {
  return philox4x32_10(Philox4x32{{static_cast<uint32_t>(group),
                                   static_cast<uint32_t>(group >> 32), stream, 0u}},
                       static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32));
}

// The 32 random bits of one element. Fast paths compute random_block once per four
// elements; this scalar form is the reference they are tested against.
LPX_HD constexpr uint32_t random_bits(uint64_t seed, uint32_t stream, uint64_t element_index) {
  return random_block(seed, stream, element_index >> 2).v[element_index & 3];
}

}  // namespace lpx
