// The scalar element codec: float32 -> code and code -> float32 for any ElementFormat.
// This is the reference every fast path (SIMD, threads, CUDA) is tested against, and
// CUDA kernels call these very functions (LPX_HD). Branches are value selects, with no
// allocation or table, so a compiler can vectorize a loop over it.
//
// Semantics (the defaults equal ml_dtypes' float32 casts; see README "Element casts"):
//   rounding  on the format's grid extended past its largest value, then:
//   overflow  a finite result above max: `sat` clamps to +-max; `ieee` gives Inf where
//             the format has it, else NaN where it has one, else clamps. Under IEEE rules
//             a rounding direction toward zero (rtz, rdn for +, rup for -) gives +-max.
//   +-Inf     `sat`: +-max (as CUDA's __NV_SATFINITE and the hardware do); `ieee`: as overflow.
//   NaN       the format's quiet NaN with the input's sign (ieee: exponent all ones and top
//             mantissa bit; fn: S.1..1); fnuz: 0x80; e8m0: 0xFF. Formats without NaN
//             (FP6, FP4, eXmY) follow ml_dtypes: +NaN -> the -0 code, -NaN -> +0.
//   -0        kept, except in fnuz formats (no -0: any result of magnitude 0 is 0x00).
//   e8m0      unsigned without zero: 0, negatives -> NaN (ieee) or 0x00 = 2^-127 (sat);
//             below 2^-126, rne rounds as ml_dtypes does, on the ladder {2^-127 (code 0),
//             2^-126} with code 0 standing in for zero: (2^-127, 2^-126) -> 2^-126; the
//             other modes round between the true values 2^-127 and 2^-126, and anything
//             below 2^-127 gives code 0.
//   integers  round with the mode, then clamp to [min, max] (quantizer semantics, not the
//             C cast's truncate-and-wrap); NaN -> 0.
//   P3109     (p3109e/p3109f, docs/formats.md#p3109) as gfloat: one NaN, no -0 (a zero
//             result is code 0); ieee overflow and +-Inf give +-Inf (e) or NaN (f); sat
//             gives +-max. P = 1 (no mantissa bits): rne ties go to the even *code*,
//             and rto's odd is the code's too.
//             Unsigned: -0 -> 0, other negatives -> NaN (ieee) or 0 (sat), as e8m0 does.
//   reserved  codes (ElementFormat::reserved_top) are never produced and decode to NaN.
//   no subnormals (ElementFormat::subnormals false): below 2^emin the grid is {0, 2^emin};
//             the unused codes (exponent field 0, mantissa nonzero) decode to +-0.
#pragma once

#include <cstdint>

#include "lpx/formats/element_format.hpp"
#include "lpx/numerics/float_bits.hpp"
#include "lpx/numerics/rounding.hpp"

namespace lpx {

namespace codec_detail {

LPX_HD constexpr int min_int(int a, int b) { return a < b ? a : b; }
LPX_HD constexpr int max_int(int a, int b) { return a > b ? a : b; }

LPX_HD constexpr uint32_t encode_integer(uint32_t bits, const ElementFormat& f, Rounding mode,
                                         uint32_t random_bits, int sr_bits) {
  const bool negative = (bits >> 31) != 0;
  const uint32_t abs_bits = bits & kF32AbsMask;
  const bool is_nan = abs_bits > kF32InfBits;
  const UnpackedF32 u = unpack_abs(abs_bits);
  // |x| * 2^frac = sig * 2^(exp - 23 + frac): drop (23 - exp - frac) bits. A negative
  // shift means |x| >= 2^23 in code units, far beyond any 16-bit integer: clamp.
  const int shift = 23 - u.exp - f.bias;
  const bool huge = shift < 0 || abs_bits >= kF32InfBits;
  const uint64_t q = huge ? ~uint64_t{0}
                          : round_shift_right(u.sig, min_int(shift, 63), mode, negative,
                                              random_bits, sr_bits);
  const uint64_t pos_max = f.max_magnitude;
  const uint64_t neg_max = f.is_signed ? (f.symmetric ? pos_max : pos_max + 1) : 0;
  const uint64_t magnitude = negative ? (q < neg_max ? q : neg_max) : (q < pos_max ? q : pos_max);
  const uint32_t code =
      negative ? static_cast<uint32_t>(0u - static_cast<uint32_t>(magnitude)) & f.code_mask
               : static_cast<uint32_t>(magnitude);
  return is_nan ? 0u : code;
}

LPX_HD constexpr float decode_integer(uint32_t code, const ElementFormat& f) {
  const bool negative = f.is_signed && (code & f.sign_mask) != 0;
  const int value = negative ? static_cast<int>(code) - static_cast<int>(f.code_mask) - 1
                             : static_cast<int>(code);
  return static_cast<float>(value) * pow2f(-f.bias);
}

}  // namespace codec_detail

// float32 -> code (right-aligned in the low `bits` bits).
// `random_bits` is used only by Rounding::sr (see numerics/rounding.hpp for the rule);
// `sr_bits` limits how many of its top bits are used.
LPX_HD constexpr uint32_t encode(float x, const ElementFormat& f, Rounding mode,
                                 Overflow overflow, uint32_t random_bits = 0,
                                 int sr_bits = kMaxSrBits) {
  using namespace codec_detail;
  const uint32_t bits = float_to_bits(x);
  if (f.is_integer) return encode_integer(bits, f, mode, random_bits, sr_bits);

  // 1. Split the input: sign, NaN/Inf, significand and exponent.
  const bool negative = (bits >> 31) != 0;
  const uint32_t abs_bits = bits & kF32AbsMask;
  const bool is_nan = abs_bits > kF32InfBits;
  const bool is_inf = abs_bits == kF32InfBits;
  UnpackedF32 u = unpack_abs(abs_bits);
  //    A format whose min normal is below float32's (emin = -127: unsigned P3109 with
  //    K - P = 7) sees float32 subnormals with the exponent of 2^-127 and one more bit,
  //    so step 3's implicit-bit arithmetic holds for them too.
  if (f.emin() < -126 && f.has_zero && abs_bits < 0x00800000u) {
    u.sig <<= 1;
    u.exp = -127;
  }

  // 2. Round the significand to the format's grid at this exponent. Below the min normal
  //    exponent the grid spacing stays 2^(emin - M) (subnormals), so the shift grows.
  //    Shifts past 63 only ever give 0 before rounding; clamping keeps the arithmetic in
  //    64 bits without changing any rounding decision (sig < 2^24).
  //    A format without subnormals has one step below 2^emin, from 0 to 2^emin itself:
  //    M more bits go, and the rounded 0 or 1 is shifted back into place in step 3.
  const int m = f.mantissa_bits;
  const int emin = f.emin();
  const bool below_normals = !f.subnormals && u.exp < emin;
  const int shift = min_int(23 - m + max_int(0, emin - u.exp) + (below_normals ? m : 0), 63);
  //    P3109 with P = 1: a normal significand is just the implicit 1, so ties-to-even
  //    means an even code, i.e. an even exponent field (gfloat), and to-odd an odd one.
  //    Adding 2^shift when the field is even makes the significand's parity the code's;
  //    it is taken off after (no other mode looks at the parity).
  const uint64_t parity_fix =
      (f.is_p3109() && m == 0 && u.exp >= emin && ((u.exp + f.bias) & 1) == 0)
          ? uint64_t{1} << shift : 0u;
  const uint64_t q =
      round_shift_right(u.sig + parity_fix, shift, mode, negative, random_bits, sr_bits) -
      (parity_fix >> shift);

  // 3. Assemble the magnitude code by addition: (exponent field - 1) << M plus the
  //    rounded significand with its implicit bit, so a carry out of the significand
  //    (1.11..1 -> 10.0) increments the exponent by itself, and a subnormal that rounds
  //    up to 2^emin lands exactly on the first normal code.
  const int64_t exponent_base = max_int(u.exp, emin) + f.bias - 1;
  uint64_t magnitude = (static_cast<uint64_t>(exponent_base) << m) + (below_normals ? q << m : q);

  //    Formats without zero (e8m0, whose 2^-126 is float32's min normal): under rne the
  //    grid below 2^-126 is ml_dtypes' ladder {code 0, 2^-126} with code 0 in zero's
  //    place (above). Every other mode rounds between the true values 2^-127 (code 0)
  //    and 2^-126 (code 1), so exact values never move and smaller inputs give code 0.
  if (!f.has_zero && mode != Rounding::rne && abs_bits < 0x00800000u) {
    const uint32_t above_least = u.sig > 0x400000u ? u.sig - 0x400000u : 0u;  // in 2^-149 units
    magnitude = round_shift_right(above_least, 22, mode, negative, random_bits, sr_bits);
  }

  // 4. Overflow: the rounded value lies beyond the largest finite code.
  const bool overflows = magnitude > f.max_magnitude;
  const bool to_max = overflow == Overflow::sat || rounds_toward_zero(mode, negative);
  const uint32_t overflow_magnitude = f.has_inf() ? f.inf_magnitude : f.max_magnitude;
  const uint32_t nan_or_max = f.has_nan() ? f.nan_code : f.max_magnitude;
  // ieee overflow in a format with NaN but no Inf (fn, fnuz) gives NaN.
  const bool overflow_is_nan = !f.has_inf() && f.has_nan();
  uint32_t mag = static_cast<uint32_t>(magnitude);
  bool result_is_nan = false;
  if (overflows || is_inf) {
    const bool sat = to_max && !(is_inf && overflow == Overflow::ieee);
    mag = sat ? f.max_magnitude : (overflow_is_nan ? nan_or_max : overflow_magnitude);
    result_is_nan = !sat && overflow_is_nan;
  }

  // 5. Sign and special cases.
  uint32_t code = mag | (negative ? f.sign_mask : 0u);
  if (f.single_nan()) {
    // One NaN (fnuz, signed P3109: 0x80; unsigned P3109: all ones) and no -0: a zero
    // result is +0 whatever the sign.
    code = result_is_nan ? f.nan_code : (mag == 0 ? 0u : code);
  } else if (result_is_nan) {
    code = f.nan_code | (negative ? f.sign_mask : 0u);
  }
  if (!f.is_signed) {
    // Unsigned formats (e8m0): zero and negative inputs have no code. ieee: NaN; sat: the
    // smallest code. Inputs with a set sign bit or zero magnitude land here. Unsigned
    // P3109 has a zero: only nonzero negatives (-Inf included) are unrepresentable.
    const bool unrepresentable =
        f.is_p3109() ? negative && abs_bits != 0 : negative || abs_bits == 0;
    const uint32_t nan_or_min = (overflow == Overflow::ieee && f.has_nan()) ? f.nan_code : 0u;
    code = unrepresentable ? nan_or_min : code;
  }
  if (is_nan) {
    // NaN inputs: the quiet NaN with the input's sign; fnuz's single NaN; formats without
    // NaN follow ml_dtypes, whose NaN there is the -0 code and whose negation flips it.
    code = !f.has_nan() ? (negative ? 0u : f.sign_mask)
           : (f.single_nan() || !f.is_signed) ? f.nan_code
           : f.nan_code | (negative ? f.sign_mask : 0u);
  }
  return code;
}

// code -> float32 (exact: every value of every format up to 16 bits is a float32).
LPX_HD constexpr float decode(uint32_t code, const ElementFormat& f) {
  using namespace codec_detail;
  code &= f.code_mask;
  if (f.is_integer) return decode_integer(code, f);
  const bool negative = (code & f.sign_mask) != 0;
  const uint32_t mag = code & ~f.sign_mask;
  const int m = f.mantissa_bits;
  const uint32_t exponent_field = mag >> m;
  const uint32_t mantissa = mag & ((1u << m) - 1);
  // NaN: the single NaN code, or a magnitude above the largest finite one that is not
  // Inf (ieee's and fn's NaNs, unsigned P3109's, and reserved codes in every kind).
  const bool is_inf = f.has_inf() && mag == f.inf_magnitude;
  const bool is_nan = (f.single_nan() && code == f.nan_code) || (mag > f.max_magnitude && !is_inf);
  const bool subnormal = exponent_field == 0 && f.has_zero;
  const uint32_t significand = subnormal ? (f.subnormals ? mantissa : 0u) : (mantissa | (1u << m));
  const int lsb_exponent = (subnormal ? 1 : static_cast<int>(exponent_field)) - f.bias - m;
  const float magnitude = static_cast<float>(significand) * pow2f(lsb_exponent);
  const float value = is_inf ? bits_to_float(kF32InfBits) : magnitude;
  // fnuz and P3109 formats have negative values too; only their NaN decodes unsigned.
  const uint32_t sign = negative ? kF32SignMask : 0u;
  const uint32_t nan_sign = !f.single_nan() ? sign : 0u;
  return is_nan ? bits_to_float(kF32QuietNanBits | nan_sign)
                : bits_to_float(float_to_bits(value) | sign);
}

// True for the codes that decode to NaN.
LPX_HD constexpr bool is_nan_code(uint32_t code, const ElementFormat& f) {
  const float v = decode(code, f);
  return v != v;
}

}  // namespace lpx
