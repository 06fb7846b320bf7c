// The block-scale rule, written once for every executor (docs/architecture.md: one codec, many
// executions). quantize.cpp's scalar reference, its SIMD kernels (through
// quantize_internal.hpp) and the CUDA kernels (kernels/src/quantize.cu) all call these
// LPX_HD functions; the semantics are documented in quantize.hpp and docs/formats.md.
//
// Per block: amax over the prepared inputs (Amax) -> block_scale() -> for every element
// quantize_element() (prepare, scale, lpx::encode) -> dequant_value() (lpx::decode, the
// block scale, the tensor scale, the 3/4 headroom, in that order).
//
// Device rules kept here: no std:: function that lacks a device version (bit tricks and
// ternaries instead of std::bit_width, std::fabs, std::copysign, std::nextafter, std::min,
// std::clamp); named formats are copied into local constexpr values (host namespace-scope
// objects are not visible in device code); float32 arithmetic is plain IEEE (the kernels
// are built without fast-math, so no flush-to-zero and no approximate division).
#pragma once

#include <cfloat>
#include <cstdint>

#if !defined(__CUDA_ARCH__)
#include <bit>
#include <cmath>
#endif

#include "lpx/formats/block_format.hpp"
#include "lpx/formats/codec.hpp"
#include "lpx/formats/quantize.hpp"
#include "lpx/numerics/float_bits.hpp"
#include "lpx/numerics/hd.hpp"
#include "lpx/numerics/philox.hpp"

namespace lpx::block_scaling {

// ---------------------------------------------------------------------------------------
// Float32 bit helpers.

// Bits needed to write b (std::bit_width; 0 for 0).
LPX_HD constexpr int bit_width32(uint32_t b) {
#if defined(__CUDA_ARCH__)
  return 32 - __clz(static_cast<int>(b));
#else
  return static_cast<int>(std::bit_width(b));
#endif
}

// 2^k as a double for k in [-1022, 1023] (exact, from its bits).
LPX_HD constexpr double pow2d(int k) {
  const uint64_t bits = static_cast<uint64_t>(k + 1023) << 52;
#if defined(__CUDA_ARCH__)
  return __longlong_as_double(static_cast<long long>(bits));
#else
  return std::bit_cast<double>(bits);
#endif
}

// std::ldexp(x, k) for float32 (correctly rounded, as both libraries provide it).
LPX_HD inline float ldexp32(float x, int k) {
#if defined(__CUDA_ARCH__)
  return ldexpf(x, k);
#else
  return std::ldexp(x, k);
#endif
}

// floor(log2 a) of a positive finite float given by its bits (subnormals included).
LPX_HD constexpr int floor_log2_bits(uint32_t b) {
  const uint32_t biased = b >> 23;
  if (biased != 0) return static_cast<int>(biased) - kF32Bias;
  return bit_width32(b) - 1 - 149;  // b = m, value m * 2^-149
}

// The significand of a positive finite float, normalized to 24 bits (1.xxx * 2^23).
LPX_HD constexpr uint32_t significand24(uint32_t b) {
  if ((b >> 23) != 0) return (b & 0x7fffffu) | 0x800000u;
  return b << (24 - bit_width32(b));
}

// x * 2^k for k in [-127, 127], exact, except that a result below float32's normal range
// is rounded to odd: it keeps a sticky bit, so the element rounding that follows (to a
// grid far coarser than 2^-149) decides exactly as on the exact product.
LPX_HD inline float mul_pow2_exact(float x, int k) {
  const float y = x * pow2f(k);  // exact whenever the result is normal (or 0 / Inf / NaN)
  const uint32_t y_abs = float_to_bits(y) & kF32AbsMask;
  // !(|y| <= FLT_MIN): normal, Inf or NaN (a NaN's bits exceed every finite float's).
  if (!(y_abs <= 0x00800000u) || x == 0.0f) return y;
  const double d = static_cast<double>(x) * pow2d(k);  // exact in double
  if (static_cast<double>(y) == d) return y;
  const double d_abs = d < 0.0 ? -d : d;
  // y rounded away from zero: step it one ulp toward zero (std::nextafter(y, 0.0f); y != 0).
  const float t = static_cast<double>(bits_to_float(y_abs)) > d_abs
                      ? bits_to_float(float_to_bits(y) - 1u)
                      : y;
  return bits_to_float(float_to_bits(t) | 1u);
}

// ---------------------------------------------------------------------------------------
// The element format's limits that the scale rules read.

struct ElementLimits {
  float max_elem = 0;
  int emax = 0;          // floor(log2 max_elem)
  uint32_t max_sig = 0;  // significand24(max_elem)
  int mbits = 0;         // mantissa width for the `even` rule
};

LPX_HD constexpr ElementLimits limits_of(const ElementFormat& e) {
  ElementLimits l;
  l.max_elem = decode(e.max_magnitude, e);  // = max_finite(e), exactly
  const uint32_t b = float_to_bits(l.max_elem);
  l.emax = floor_log2_bits(b);
  l.max_sig = significand24(b);
  l.mbits = e.is_integer ? (e.bits - 2 > 0 ? e.bits - 2 : 0) : e.mantissa_bits;
  return l;
}

// The unclamped scale exponent X of a block with finite amax > 0 (amax_bits = its bits),
// from float32 bits with exact integer arithmetic (block_format.hpp, docs/formats.md#scale-rules).
LPX_HD constexpr int scale_exponent(uint32_t amax_bits, ScaleRule rule, const ElementLimits& l) {
  const int e = floor_log2_bits(amax_bits);
  switch (rule) {
    case ScaleRule::floor: return e - l.emax;
    case ScaleRule::ceil: {
      // amax is a power of two iff its normalized significand is exactly 2^23.
      const bool pow2 = significand24(amax_bits) == 0x800000u;
      return e + (pow2 ? 0 : 1) - l.emax;
    }
    case ScaleRule::rceil:
      // amax / max_elem = (a / m) * 2^(e - emax) with a, m in [1, 2): the ceil of its
      // log2 is e - emax, plus one iff a > m (a == m is exact, a < m lies in (-1, 0)).
      return e - l.emax + (significand24(amax_bits) > l.max_sig ? 1 : 0);
    case ScaleRule::even: {
      // Round amax half-up to 1 + mbits significant bits by adding half an ulp of that
      // width to the float32 bits (a carry moves into the exponent field), then floor.
      const uint32_t rounded = amax_bits + (1u << (22 - l.mbits));
      const uint32_t biased = rounded >> 23;
      // A subnormal amax that stays subnormal keeps its own floor (its scale clamps).
      return (biased != 0 ? static_cast<int>(biased) - kF32Bias : e) - l.emax;
    }
  }
  return 0;
}

// ---------------------------------------------------------------------------------------
// Inputs as the scale and the element cast see them.

// float32 subnormals zeroed (sign kept) when the option says so.
LPX_HD constexpr float prepare(float x, const QuantizeOptions& opt) {
  const uint32_t b = float_to_bits(x);
  if (opt.flush_subnormal_inputs && (b & kF32AbsMask) < 0x800000u)
    return bits_to_float(b & kF32SignMask);  // std::copysign(0.0f, x)
  return x;
}
// The 3/4 headroom is applied after the scale was chosen from the unscaled amax, so
// |x * 3/4| / scale stays below the element's max and stochastic rounding cannot clip
// (Tseng et al. 2025, section 3.2).
LPX_HD constexpr float prepare_element(float x, const QuantizeOptions& opt) {
  const float p = prepare(x, opt);
  return opt.headroom_3_4 ? p * 0.75f : p;
}

// Maxima of |x'| as float32 bits: over all elements (>= Inf bits: the block has a NaN or
// an Inf) and over finite elements only. Bits compare like magnitudes.
struct Amax {
  uint32_t all = 0, finite = 0;
  LPX_HD constexpr void add(uint32_t abs_bits) {
    all = abs_bits > all ? abs_bits : all;
    if (abs_bits < kF32InfBits) finite = abs_bits > finite ? abs_bits : finite;
  }
  LPX_HD constexpr void merge(const Amax& o) {
    all = o.all > all ? o.all : all;
    finite = o.finite > finite ? o.finite : finite;
  }
  LPX_HD constexpr bool nonfinite() const { return all >= kF32InfBits; }
};

// ---------------------------------------------------------------------------------------
// The scale of one block.

// Everything block_scale() reads besides the block's amax.
struct ScaleParams {
  ScaleFormat scale = ScaleFormat::e8m0;
  ScaleRule rule = ScaleRule::floor;  // e8m0 / pow2
  ElementLimits lim;
  int margin = 0;               // fp32: s_enc = max_elem / amax / 2^margin
  bool fixed_amax = false;      // fp32 delayed scaling: amax is `history_amax`
  float history_amax = 0.0f;
  float tensor_enc = 1.0f;      // e4m3 (NVFP4 two-level): the tensor's s_enc and s_dec
  float tensor_dec = 1.0f;
};

// One block's scale: how to encode (x -> scaled) and how to decode (v * dec).
struct BlockScale {
  bool nan = false;
  bool clamped = false;
  int exponent = 0;     // power-of-two scales: X
  float enc = 1.0f;     // fp32 / e4m3: the encode multiplier
  float dec = 1.0f;     // decode multiplier: 2^X, s_dec, float(s_dec_b); NaN for NaN blocks
  uint8_t code = 0;     // e8m0 / e4m3 code
};


// NVFP4's tensor encode scale (docs/formats.md#nvfp4): s_enc = (max_elem * 448) / amax_t over finite
// values, capped at FLT_MAX, 1 when amax_t is 0. The decode scale is 1 / s_enc.
LPX_HD constexpr float tensor_encode_scale(float amax_t, float max_elem) {
  if (!(amax_t > 0.0f)) return 1.0f;
  const float v = (max_elem * 448.0f) / amax_t;
  return FLT_MAX < v ? FLT_MAX : v;  // std::min(v, FLT_MAX)
}

LPX_HD inline BlockScale block_scale(const Amax& a, const ScaleParams& p) {
  constexpr ElementFormat e4m3 = fmt8::e4m3fn;
  constexpr ElementFormat e8m0 = fmt8::e8m0;
  BlockScale s;
  if (a.nonfinite()) {
    const float qnan = bits_to_float(kF32QuietNanBits);
    s.nan = true;
    s.dec = qnan;
    s.enc = qnan;
    s.code = static_cast<uint8_t>(p.scale == ScaleFormat::e4m3 ? e4m3.nan_code : e8m0.nan_code);
    return s;
  }
  const float amax = bits_to_float(a.all);
  switch (p.scale) {
    case ScaleFormat::e8m0:
    case ScaleFormat::pow2: {
      int x = -127;  // all-zero block: the smallest scale, 2^-127 (code 0x00)
      if (a.all != 0) {
        const int raw = scale_exponent(a.all, p.rule, p.lim);
        x = raw < -127 ? -127 : (raw > 127 ? 127 : raw);
        s.clamped = x != raw;
      }
      s.exponent = x;
      s.code = static_cast<uint8_t>(x + 127);
      s.dec = pow2f(x);
      break;
    }
    case ScaleFormat::fp32: {
      const float am = p.fixed_amax ? p.history_amax : amax;
      float enc = 1.0f;
      if (am > 0.0f) {
        // Transformer Engine: scale = max_fp8 / amax / 2^margin, in float32.
        enc = ldexp32(p.lim.max_elem / am, -p.margin);
        if (!(enc <= FLT_MAX)) {
          enc = FLT_MAX;
          s.clamped = true;
        }
      }
      s.enc = enc;
      s.dec = 1.0f / enc;
      break;
    }
    case ScaleFormat::e4m3: {
      // NVFP4 (docs/formats.md#nvfp4): s_dec_b = e4m3_rne_satfinite(amax_b * s_enc / max_elem), left to
      // right in float32; s_enc_b = min(1 / (float(s_dec_b) * s_dec), FLT_MAX).
      const float v = (amax * p.tensor_enc) / p.lim.max_elem;
      s.code = static_cast<uint8_t>(encode(v, e4m3, Rounding::rne, Overflow::sat));
      s.dec = decode(s.code, e4m3);
      const float inv = 1.0f / (s.dec * p.tensor_dec);
      s.enc = FLT_MAX < inv ? FLT_MAX : inv;
      s.clamped = a.all != 0 && s.dec == 0.0f;
      break;
    }
  }
  return s;
}

// The decode multiplier of a stored scale: e8m0 and e4m3 codes decoded (e8m0 0xFF and
// e4m3 0x7F are NaN), pow2 / fp32 values as they are.
LPX_HD constexpr float decode_scale(ScaleFormat f, uint8_t code, float value) {
  constexpr ElementFormat e4m3 = fmt8::e4m3fn;
  constexpr ElementFormat e8m0 = fmt8::e8m0;
  switch (f) {
    case ScaleFormat::e8m0: return decode(code, e8m0);
    case ScaleFormat::e4m3: return decode(code, e4m3);
    default: return value;
  }
}
// The decode multiplier dequantize() reads back from the scale stored for `s`.
LPX_HD constexpr float stored_dec(const BlockScale& s, ScaleFormat f) {
  return decode_scale(f, s.code, s.dec);
}

// ---------------------------------------------------------------------------------------
// One element.

// The value handed to the element codec: x'' = x' * 2^-X (exact, power-of-two scales) or
// x' * s_enc in float32 (fp32 and e4m3 scales), x' = prepare_element(x).
LPX_HD inline float scale_element(float prepared, const BlockScale& s, bool pow2) {
  return pow2 ? mul_pow2_exact(prepared, -s.exponent) : prepared * s.enc;
}

struct ElementCode {
  uint32_t code = 0;
  float scaled = 0.0f;  // the value encoded (0 in a NaN block)
};

// One element of a block with scale s, given its random word (sr; ignored otherwise).
// A NaN block's codes are 0.
LPX_HD inline ElementCode quantize_element_rnd(float x, const BlockScale& s, bool pow2,
                                               const ElementFormat& e, const QuantizeOptions& o,
                                               uint32_t rnd) {
  ElementCode r;
  if (s.nan) return r;
  r.scaled = scale_element(prepare_element(x, o), s, pow2);
  r.code = encode(r.scaled, e, o.round, o.overflow, rnd, o.sr_bits);
  return r;
}

// Element `index` (its flat C-order index; index_offset + index keys its random bits) of
// a block with scale s.
LPX_HD inline ElementCode quantize_element(float x, const BlockScale& s, bool pow2,
                                           const ElementFormat& e, const QuantizeOptions& o,
                                           uint64_t index) {
  const uint32_t rnd =
      is_stochastic(o.round) ? random_bits(o.seed, o.stream, o.index_offset + index) : 0u;
  return quantize_element_rnd(x, s, pow2, e, o, rnd);
}

// The float32 value of one element code under its block's decode multiplier `dec`: the
// block scale first, then the tensor scale (two-level), then the 4/3 of the headroom.
LPX_HD constexpr float dequant_value(uint32_t code, float dec, const ElementFormat& e,
                                     bool two_level, float tensor_dec, bool headroom) {
  float v = decode(code, e) * dec;
  if (two_level) v = v * tensor_dec;
  if (headroom) v = v / 0.75f;
  return v;
}

}  // namespace lpx::block_scaling
