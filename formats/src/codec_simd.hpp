// The element codec's descriptor as SIMD lane constants, shared by the Highway kernels
// (cast_hwy.cpp: array casts; quantize_hwy.cpp: block quantization). Target-independent;
// the per-target vector code that consumes these lives in codec_hwy-inl.h.
#pragma once

#include <cstdint>
#include <climits>

#include "lpx/formats/cast.hpp"
#include "lpx/formats/codec.hpp"
#include "lpx/formats/element_format.hpp"
#include "lpx/numerics/philox.hpp"

namespace lpx::simd::detail {

// The descriptor as lane constants for encode (i32 unless noted).
struct EncodeConsts {
  int32_t m = 0;               // mantissa bits
  int32_t shift_base = 0;      // floats: 23 - M
  int32_t sub_ref = 0;         // floats: shift = shift_base + max(0, sub_ref - biased_exp)
  int32_t ebase_off = 0;       // floats: exponent base = max(biased_exp + ebase_off, 0)
  int32_t int_shift_base = 0;  // integers: shift = int_shift_base - biased_exp
  int32_t max_mag = 0, ovf_mag = 0, sign_mask = 0;
  int32_t pos_max = 0, neg_max = 0, code_mask = 0;          // integers
  int32_t unrep_code = 0, nan_pos = 0, nan_neg = 0;         // e8m0 zero/negatives, NaN inputs
  bool fnuz = false, is_unsigned = false, sat = false;
  bool no_zero = false;        // e8m0: non-rne modes round below 2^-126 on {2^-127, 2^-126}
  int32_t sr_n = 32;           // random bits used
  uint32_t sr_mask_n = 0;      // 2^N - 1
};

inline EncodeConsts make_encode_consts(const ElementFormat& f, const CastOptions& opt) {
  EncodeConsts c;
  c.m = f.mantissa_bits;
  c.shift_base = 23 - f.mantissa_bits;
  c.sub_ref = 128 - f.bias;  // emin - exp = (1 - bias) - (biased - 127)
  c.ebase_off = f.bias - 128;
  c.int_shift_base = 150 - f.bias;  // 23 - (biased - 127) - frac_bits
  c.max_mag = static_cast<int32_t>(f.max_magnitude);
  // ieee overflow result (codec step 4): NaN where there is NaN but no Inf, else Inf, else max.
  const bool overflow_is_nan = !f.has_inf() && f.has_nan();
  c.ovf_mag = static_cast<int32_t>(overflow_is_nan ? f.nan_code
                                   : f.has_inf()   ? f.inf_magnitude
                                                   : f.max_magnitude);
  c.sign_mask = static_cast<int32_t>(f.sign_mask);
  c.pos_max = static_cast<int32_t>(f.max_magnitude);
  c.neg_max = static_cast<int32_t>(
      f.is_signed ? (f.symmetric ? f.max_magnitude : f.max_magnitude + 1) : 0u);
  c.code_mask = static_cast<int32_t>(f.code_mask);
  c.unrep_code = static_cast<int32_t>(
      opt.overflow == Overflow::ieee && f.has_nan() ? f.nan_code : 0u);
  const uint32_t signed_nan = f.nan_code | f.sign_mask;
  c.nan_pos = static_cast<int32_t>(!f.has_nan() ? f.sign_mask : f.nan_code);
  c.nan_neg = static_cast<int32_t>(!f.has_nan() ? 0u
                                   : (f.specials == Specials::fnuz || !f.is_signed) ? f.nan_code
                                                                                    : signed_nan);
  c.fnuz = f.specials == Specials::fnuz;
  c.is_unsigned = !f.is_signed;
  c.no_zero = !f.has_zero;
  c.sat = opt.overflow == Overflow::sat;
  c.sr_n = opt.sr_bits;
  c.sr_mask_n = opt.sr_bits >= 32 ? 0xffffffffu : (1u << opt.sr_bits) - 1u;
  return c;
}

// The descriptor as lane constants for decode.
struct DecodeConsts {
  bool is_integer = false;
  int32_t code_mask = 0, sign_mask = 0, m = 0, mmask = 0, implicit = 0, bias_m = 0;
  int32_t nan_thr = 0;    // mag > nan_thr && mag != nan_ne is NaN (ieee, fn)
  int32_t nan_ne = -1;
  int32_t fnuz_nan = -1;  // fnuz: code == nan_code is NaN
  int32_t inf_eq = -1;    // mag == inf_eq is Inf
  int32_t sub_ef = 0;     // exponent field of subnormals (-1: none, e8m0)
  int32_t nan_sign_f32 = 0;  // keeps the sign of NaN codes (0 in fnuz: its NaN is unsigned)
  float int_scale = 1.0f;
};

inline DecodeConsts make_decode_consts(const ElementFormat& f) {
  DecodeConsts c;
  c.is_integer = f.is_integer;
  c.code_mask = static_cast<int32_t>(f.code_mask);
  c.sign_mask = static_cast<int32_t>(f.sign_mask);
  c.int_scale = pow2f(-f.bias);
  c.m = f.mantissa_bits;
  c.mmask = (1 << f.mantissa_bits) - 1;
  c.implicit = 1 << f.mantissa_bits;
  c.bias_m = f.bias + f.mantissa_bits;
  const bool fnuz = f.specials == Specials::fnuz;
  c.nan_thr = f.has_nan() && !fnuz ? static_cast<int32_t>(f.max_magnitude) : INT32_MAX;
  c.nan_ne = f.has_inf() ? static_cast<int32_t>(f.inf_magnitude) : -1;
  c.fnuz_nan = fnuz ? static_cast<int32_t>(f.nan_code) : -1;
  c.inf_eq = f.has_inf() ? static_cast<int32_t>(f.inf_magnitude) : -1;
  c.sub_ef = f.has_zero ? 0 : -1;
  c.nan_sign_f32 = fnuz ? 0 : static_cast<int32_t>(kF32SignMask);
  return c;
}

// Which inputs the vector loops accept; the rest run the scalar codec.
inline bool vectorizable(const ElementFormat& f, const CastOptions& opt) {
  const bool sr_ok = opt.round != Rounding::sr || (opt.sr_bits >= 1 && opt.sr_bits <= 32);
  return sr_ok && f.bias >= -1024 && f.bias <= 1024 && f.bits <= 16;
}

// The 10 round keys of Philox4x32-10 laid out as one 128-bit block (k0, 0, k1, 0), and
// the multipliers as (M0, 0, M1, 0), so MulEven multiplies words 0 and 2 of each block.
struct PhiloxConsts {
  alignas(16) uint32_t keys[10][4];
  alignas(16) uint32_t mul[4];
};
inline PhiloxConsts make_philox_consts(uint64_t seed) {
  PhiloxConsts p{};
  uint32_t k0 = static_cast<uint32_t>(seed), k1 = static_cast<uint32_t>(seed >> 32);
  for (int r = 0; r < 10; ++r) {
    if (r > 0) {
      k0 += philox_detail::kWeyl0;
      k1 += philox_detail::kWeyl1;
    }
    p.keys[r][0] = k0;
    p.keys[r][1] = 0;
    p.keys[r][2] = k1;
    p.keys[r][3] = 0;
  }
  p.mul[0] = philox_detail::kMul0;
  p.mul[1] = 0;
  p.mul[2] = philox_detail::kMul1;
  p.mul[3] = 0;
  return p;
}

}  // namespace lpx::simd::detail
