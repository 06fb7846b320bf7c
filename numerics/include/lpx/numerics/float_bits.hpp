// Bits of an IEEE binary32 float: bit casts, fields, and exact powers of two.
#pragma once

#include <cstdint>

#include <bit>

#include "lpx/numerics/hd.hpp"

namespace lpx {

LPX_HD constexpr uint32_t float_to_bits(float x) {
#if defined(__CUDA_ARCH__)
  return static_cast<uint32_t>(__float_as_uint(x));
#else
  return std::bit_cast<uint32_t>(x);
#endif
}

LPX_HD constexpr float bits_to_float(uint32_t b) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(b);
#else
  return std::bit_cast<float>(b);
#endif
}

inline constexpr uint32_t kF32SignMask = 0x80000000u;
inline constexpr uint32_t kF32AbsMask = 0x7fffffffu;
inline constexpr uint32_t kF32InfBits = 0x7f800000u;
inline constexpr uint32_t kF32QuietNanBits = 0x7fc00000u;
inline constexpr int kF32MantissaBits = 23;
inline constexpr int kF32Bias = 127;

// 2^e as a float for e in [-149, 127], built from bits so it is exact for subnormal
// results too (ldexp is not constexpr and not available in every device context).
LPX_HD constexpr float pow2f(int e) {
  return e >= -126 ? bits_to_float(static_cast<uint32_t>(e + kF32Bias) << kF32MantissaBits)
                   : bits_to_float(1u << (e + 149));
}

// Unpacks |x| (given as abs bits, not NaN/Inf) into an integer significand and the
// exponent of its most significant possible bit: |x| = sig * 2^(exp - 23), with
// sig < 2^24. Float32 subnormals keep exp = -126 and a significand without the
// implicit bit, so the rounding code treats every input uniformly.
struct UnpackedF32 {
  uint32_t sig;
  int exp;
};
LPX_HD constexpr UnpackedF32 unpack_abs(uint32_t abs_bits) {
  const uint32_t biased = abs_bits >> kF32MantissaBits;
  const uint32_t frac = abs_bits & 0x7fffffu;
  return {biased != 0 ? (frac | 0x800000u) : frac,
          biased != 0 ? static_cast<int>(biased) - kF32Bias : 1 - kF32Bias};
}

}  // namespace lpx
