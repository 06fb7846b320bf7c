// The rounding primitive shared by every format: round a non-negative integer
// significand right by `shift` bits under one of six modes.
//
// Modes (IEEE 754 names where they exist):
//   rne  nearest, ties to even          rna  nearest, ties away from zero
//   rtz  toward zero                    rup  toward +inf      rdn  toward -inf
//   rto  to odd: toward zero, then an inexact result gets its lowest bit set (P3109's
//        RoundToOdd; the magnitude q | (rem != 0))
//   sr   stochastic: rounds the magnitude up with probability equal to the distance to
//        the lower neighbour over the gap, resolved to `sr_bits` random bits.
//   sr_fast, sr_rne, sr_odd  the other published stochastic rules (below).
//
// Stochastic rounding, precisely: let f be the discarded fraction of the gap truncated
// to N = sr_bits bits (f = floor(rem * 2^N / 2^shift)) and r the top N bits of the
// 32-bit random word. The magnitude rounds up iff f + r >= 2^N, so
// P(up) = f / 2^N: exact for N >= shift, and an N-bit resolution otherwise, as
// hardware with a limited number of random bits behaves. With delta = rem / 2^shift (the
// fraction of the gap) and r the top N bits of the word, the variants (gfloat's names;
// their biases are in docs/formats.md#stochastic-rounding-variants):
//   sr       floor(delta * 2^N) + r >= 2^N                  (gfloat StochasticFastest)
//   sr_fast  floor(delta * 2^(N+1)) + 2r + 1 >= 2^(N+1)     (gfloat StochasticFast)
//   sr_rne   rne(delta * 2^N) + r >= 2^N                    (gfloat Stochastic)
//   sr_odd   rno(delta * 2^N) + r >= 2^N, nearest with ties to odd (gfloat StochasticOdd)
#pragma once

#include <cstdint>
#include <string_view>

#include "lpx/numerics/hd.hpp"

namespace lpx {

enum class Rounding : uint8_t { rne, rna, rtz, rup, rdn, sr, rto, sr_fast, sr_rne, sr_odd };

// True for the modes that take random bits.
LPX_HD constexpr bool is_stochastic(Rounding mode) {
  return mode == Rounding::sr || mode == Rounding::sr_fast || mode == Rounding::sr_rne ||
         mode == Rounding::sr_odd;
}

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
    case Rounding::rto: up = rem != 0 && (q & 1) == 0; break;
    case Rounding::sr: {
      const int n = sr_bits;
      const uint64_t f = shift >= n ? rem >> (shift - n) : rem << (n - shift);
      const uint64_t r = static_cast<uint64_t>(random_bits) >> (32 - n);
      up = f + r >= (uint64_t{1} << n);
      break;
    }
    case Rounding::sr_fast: {
      // floor(delta * 2^(N+1)) + 2r + 1 >= 2^(N+1); N + 1 <= 33 bits, within 64.
      const int n1 = sr_bits + 1;
      const uint64_t f = shift >= n1 ? rem >> (shift - n1) : rem << (n1 - shift);
      const uint64_t r = static_cast<uint64_t>(random_bits) >> (32 - sr_bits);
      up = f + 2 * r + 1 >= (uint64_t{1} << n1);
      break;
    }
    case Rounding::sr_rne:
    case Rounding::sr_odd: {
      // delta * 2^N rounded to nearest (ties to even or to odd) before the comparison.
      const int n = sr_bits;
      uint64_t d = rem << (shift >= n ? 0 : n - shift);
      if (shift > n) {
        const int s = shift - n;
        const uint64_t fl = rem >> s, frac = rem & ((uint64_t{1} << s) - 1);
        const uint64_t h = uint64_t{1} << (s - 1);
        const bool odd = (fl & 1) != 0;
        const bool tie_up = mode == Rounding::sr_rne ? odd : !odd;
        d = fl + ((frac > h || (frac == h && tie_up)) ? 1u : 0u);
      }
      const uint64_t r = static_cast<uint64_t>(random_bits) >> (32 - n);
      up = d + r >= (uint64_t{1} << n);
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

// Host-side names: "rne", "rna", "rtz", "rup", "rdn", "sr", "rto", "sr-fast", "sr-rne",
// "sr-odd".
std::string_view rounding_name(Rounding mode);
// Throws std::invalid_argument listing the valid names.
Rounding rounding_by_name(std::string_view name);

}  // namespace lpx
