// The rounding primitive shared by every format: round a non-negative integer
// significand right by `shift` bits under one of six modes.
//
// Modes (IEEE 754 names where they exist):
//   rne  nearest, ties to even          rna  nearest, ties away from zero
//   rtz  toward zero                    rup  toward +inf      rdn  toward -inf
//   sr   stochastic: rounds the magnitude up with probability equal to the distance to
//        the lower neighbour over the gap, resolved to `sr_bits` random bits.
//
// Stochastic rounding, precisely: let f be the discarded fraction of the gap truncated
// to N = sr_bits bits (f = floor(rem * 2^N / 2^shift)) and r the top N bits of the
// 32-bit random word. The magnitude rounds up iff f + r >= 2^N, so
// P(up) = f / 2^N: exact for N >= shift, and an N-bit resolution otherwise, as
// hardware with a limited number of random bits behaves.
#pragma once

#include <cstdint>
#include <string_view>

#include "lpx/numerics/hd.hpp"

namespace lpx {

enum class Rounding : uint8_t { rne, rna, rtz, rup, rdn, sr };

inline constexpr int kMaxSrBits = 32;

// sig >> shift, rounded. `negative` is the sign of the value whose magnitude is `sig`
// (it only matters for rup/rdn). shift must be in [0, 63].
LPX_HD constexpr uint64_t round_shift_right(uint64_t sig, int shift, Rounding mode,
                                            bool negative, uint32_t random_bits,
                                            int sr_bits = kMaxSrBits) {
  if (shift == 0) return sig;
  const uint64_t q = sig >> shift;
  const uint64_t rem = sig & ((uint64_t{1} << shift) - 1);
  const uint64_t half = uint64_t{1} << (shift - 1);
  bool up = false;
  switch (mode) {
    case Rounding::rne: up = rem > half || (rem == half && (q & 1) != 0); break;
    case Rounding::rna: up = rem >= half; break;
    case Rounding::rtz: up = false; break;
    case Rounding::rup: up = !negative && rem != 0; break;
    case Rounding::rdn: up = negative && rem != 0; break;
    case Rounding::sr: {
      const int n = sr_bits;
      const uint64_t f = shift >= n ? rem >> (shift - n) : rem << (n - shift);
      const uint64_t r = static_cast<uint64_t>(random_bits) >> (32 - n);
      up = f + r >= (uint64_t{1} << n);
      break;
    }
  }
  return q + (up ? 1u : 0u);
}

// True when a finite value that overflows the format should become the largest finite
// value rather than Inf under IEEE rules: the rounding direction points toward zero.
LPX_HD constexpr bool rounds_toward_zero(Rounding mode, bool negative) {
  return mode == Rounding::rtz || (mode == Rounding::rdn && !negative) ||
         (mode == Rounding::rup && negative);
}

// Host-side names: "rne", "rna", "rtz", "rup", "rdn", "sr".
std::string_view rounding_name(Rounding mode);
// Throws std::invalid_argument listing the valid names.
Rounding rounding_by_name(std::string_view name);

}  // namespace lpx
