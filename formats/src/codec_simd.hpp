// The element codec's descriptor as SIMD lane constants, shared by the Highway kernels
// (cast_hwy.cpp: array casts; quantize_hwy.cpp: block quantization). Target-independent;
// the per-target vector code that consumes these lives in codec_hwy-inl.h.
#pragma once

#include <cstdint>

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
  bool fnuz = false, is_unsigned = false, sat = false;  // fnuz: no -0 (fnuz and P3109)
  bool zero_ok = false;        // unsigned P3109: +-0 has a code (only negatives are unrepresentable)
  bool no_zero = false;        // e8m0: non-rne modes round below 2^-126 on {2^-127, 2^-126}
  bool f32_sub_fix = false;    // emin < -126: float32 subnormals as 2^-127 * (2 * frac) (codec step 1)
  bool code_parity = false;    // P3109 with P = 1: rne ties to the even code (codec step 2)
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
                                   : (f.single_nan() || !f.is_signed) ? f.nan_code
                                                                      : signed_nan);
  c.fnuz = f.single_nan();
  c.is_unsigned = !f.is_signed;
  c.zero_ok = f.is_p3109();
  c.f32_sub_fix = f.emin() < -126 && f.has_zero;
  c.code_parity = f.is_p3109() && f.mantissa_bits == 0;
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
  int32_t nan_thr = 0;    // mag > nan_thr && mag != nan_ne is NaN (ieee, fn, reserved codes)
  int32_t nan_ne = -1;
  int32_t fnuz_nan = -1;  // fnuz: code == nan_code is NaN
  int32_t inf_eq = -1;    // mag == inf_eq is Inf
  int32_t sub_ef = 0;     // exponent field of subnormals (-1: none, e8m0)
  int32_t sub_keep = 0;   // mantissa bits a subnormal code keeps (0: no subnormals, +-0)
  int32_t nan_sign_f32 = 0;  // keeps the sign of NaN codes (0 in fnuz, P3109: one unsigned NaN)
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
  const bool fnuz = f.single_nan();
  c.nan_thr = static_cast<int32_t>(f.max_magnitude);  // as decode(): above it, NaN unless Inf
  c.nan_ne = f.has_inf() ? static_cast<int32_t>(f.inf_magnitude) : -1;
  c.fnuz_nan = fnuz ? static_cast<int32_t>(f.nan_code) : -1;
  c.inf_eq = f.has_inf() ? static_cast<int32_t>(f.inf_magnitude) : -1;
  c.sub_ef = f.has_zero ? 0 : -1;
  c.sub_keep = f.subnormals ? c.mmask : 0;
  c.nan_sign_f32 = fnuz ? 0 : static_cast<int32_t>(kF32SignMask);
  return c;
}

// The short path of the vector codec (codec_hwy-inl.h: FastEncodeVec, FastFakeVec) for
// the formats and modes that training emulates all day: signed floats with a zero and
// ieee, fn, none or P3109 specials (e4m3fn, e5m2, e2m1, e3m2, e2m3, bf16, fp16,
// p3109_k8p4se, ...), under rne, rtz
// or sr. Where the result is a normal number of the target, rounding is a few integer
// operations on the float32 bits at the fixed position 23 - M, and the code or the
// rounded value follows from the same sum; only the target's subnormal range needs a
// per-lane shift, and that branch runs only for vectors that have such a lane.
struct FastConsts {
  int32_t sh = 0;             // 23 - M: float32 mantissa bits below the target's
  int32_t half_m1 = 0;        // rne: 2^(sh-1) - 1, plus the tie bit at tie_sh (below)
  // rne's tie-breaking bit: the lowest kept bit (bit sh). With no mantissa bits (M = 0,
  // eXm0) the lowest kept bit is the implicit 1 (codec.hpp: ties round up in magnitude),
  // which float32 does not store: there half_m1 is 2^22 and tie_sh is 31, |x|'s sign bit,
  // always 0.
  int32_t tie_sh = 0;
  int32_t keep_low = 0;       // ~(2^sh - 1): truncates a rounded float32 pattern
  int32_t code_off = 0;       // (127 - bias) << M: code = (rounded bits >> sh) - code_off
  int32_t min_normal = 0;     // float32 bits of the target's smallest normal, 2^emin
  int32_t sub_base = 0;       // subnormal lanes: shift = sub_base - max(biased exponent, 1)
  float sub_ulp = 0.0f;       // 2^(emin - M): spacing of the target's subnormals
  // rne below 2^emin: |x| + 2^(emin - M + 23) is rounded by the FPU (round-to-nearest-even,
  // the default mode) to a multiple of 2^(emin - M), and its low float32 bits are the code.
  // Used when 2^(emin - M) >= 2^-100, so a DAZ/FTZ mode set by the caller cannot matter
  // (a float32 subnormal input rounds to 0 either way).
  bool sub_magic_ok = false;
  float sub_magic = 0.0f;
  int32_t sub_magic_bits = 0;
  // rtz and sr below 2^emin, on AVX-512 (FastSubnormalQ): z = |x| * 2^(M - emin) is
  // exact and below 2^M; its integer part is q and 2^N times its fraction gives the sr
  // comparison's f. Used when 2^(emin - M) >= 2^-94: then f = 0 for float32 subnormal
  // inputs, so a DAZ/FTZ mode set by the caller cannot matter.
  bool sub_float_ok = false;
  float sub_scale = 0.0f;     // 2^(M - emin)
  float sr_two_n = 0.0f;      // 2^sr_bits
  int32_t max_mag = 0;        // largest finite code magnitude
  int32_t max_bits = 0;       // its value as float32 bits
  int32_t ovf_mag = 0;        // ieee overflow: code magnitude (NaN, Inf or max)
  int32_t ovf_bits = 0;       // ... and its decoded value's bits
  int32_t sign_shift = 0;     // float32 sign bit >> sign_shift = the code's sign bit
  int32_t sign_mask = 0;
  int32_t nan_pos = 0, nan_neg = 0;            // codes of NaN inputs (codec step 5)
  int32_t nan_pos_bits = 0, nan_neg_bits = 0;  // their decoded values' bits
  uint32_t sr_keep = 0;       // the top sr_bits bits of a random word
  bool sr_few_bits = false;   // sr_bits < sh: the sum needs sr_keep (else its shift suffices)
  int32_t sr_n = 32;
  uint32_t sr_mask_n = 0;     // 2^sr_bits - 1
  bool sat = false;
  bool no_negzero = false;    // P3109: no -0, and its one NaN decodes unsigned
  bool is_unsigned = false;   // unsigned P3109: nonzero negative inputs give unrep_code
  int32_t unrep_code = 0, unrep_bits = 0;  // ... and its decoded value's bits
};

// True when FastEncodeVec / FastFakeVec give exactly encode() / decode(encode()).
inline bool fast_path_ok(const ElementFormat& f, const CastOptions& opt) {
  const bool mode_ok = opt.round == Rounding::rne || opt.round == Rounding::rtz ||
                       (opt.round == Rounding::sr && opt.sr_bits >= 1 && opt.sr_bits <= 32);
  const bool specials_ok = f.specials == Specials::ieee || f.specials == Specials::fn ||
                           f.specials == Specials::none || f.is_p3109();
  // Normal values of the target must be float32 normals (emin >= -126, finite max below
  // 2^128) and at least one float32 mantissa bit must be dropped (M <= 22, sh >= 1). With
  // no mantissa bits (M = 0) rne's tie-breaking bit is the implicit one, not a stored bit:
  // eXm0 takes FastConsts::tie_sh; P3109 with P = 1 breaks ties to an even code, which
  // has no fast form here.
  // Unsigned formats only for P3109 (a zero, and only nonzero negatives unrepresentable).
  return mode_ok && specials_ok && !f.is_integer && (f.is_signed || f.is_p3109()) && f.has_zero &&
         f.subnormals && f.bits <= 16 && (f.mantissa_bits >= 1 || !f.is_p3109()) && f.mantissa_bits <= 22 &&
         f.emin() >= -126 && f.emax() <= 127;
}

inline FastConsts make_fast_consts(const ElementFormat& f, const CastOptions& opt) {
  FastConsts c;
  const int m = f.mantissa_bits;
  c.sh = 23 - m;
  c.half_m1 = (1 << (c.sh - 1)) - (m == 0 ? 0 : 1);
  c.tie_sh = m == 0 ? 31 : c.sh;
  c.keep_low = static_cast<int32_t>(~((1u << c.sh) - 1u));
  c.code_off = (127 - f.bias) << m;
  c.min_normal = static_cast<int32_t>(float_to_bits(pow2f(f.emin())));
  c.sub_base = c.sh + f.emin() + 127;
  c.sub_ulp = pow2f(f.emin() - m);
  c.sub_magic_ok = f.emin() - m >= -100;
  if (c.sub_magic_ok) {
    c.sub_magic = pow2f(f.emin() - m + 23);
    c.sub_magic_bits = static_cast<int32_t>(float_to_bits(c.sub_magic));
  }
  c.sub_float_ok = f.emin() - m >= -94;
  if (c.sub_float_ok) c.sub_scale = pow2f(m - f.emin());
  c.sr_two_n = pow2f(opt.sr_bits);
  c.max_mag = static_cast<int32_t>(f.max_magnitude);
  c.max_bits = static_cast<int32_t>(float_to_bits(decode(f.max_magnitude, f)));
  const bool overflow_is_nan = !f.has_inf() && f.has_nan();
  c.ovf_mag = static_cast<int32_t>(overflow_is_nan ? f.nan_code
                                   : f.has_inf()   ? f.inf_magnitude
                                                   : f.max_magnitude);
  c.ovf_bits = static_cast<int32_t>(float_to_bits(decode(static_cast<uint32_t>(c.ovf_mag), f)));
  c.sign_shift = 32 - f.bits;
  c.sign_mask = static_cast<int32_t>(f.sign_mask);
  // NaN inputs: the codes encode() gives (it is the reference), and their decoded values.
  const float qnan = bits_to_float(kF32QuietNanBits);
  c.nan_pos = static_cast<int32_t>(encode(qnan, f, opt.round, opt.overflow, 0u, opt.sr_bits));
  c.nan_neg = static_cast<int32_t>(encode(-qnan, f, opt.round, opt.overflow, 0u, opt.sr_bits));
  c.nan_pos_bits = static_cast<int32_t>(float_to_bits(decode(static_cast<uint32_t>(c.nan_pos), f)));
  c.nan_neg_bits = static_cast<int32_t>(float_to_bits(decode(static_cast<uint32_t>(c.nan_neg), f)));
  c.sr_n = opt.sr_bits;
  c.sr_few_bits = opt.sr_bits < c.sh;
  c.sr_keep = opt.sr_bits >= 32 ? 0xffffffffu : ~((1u << (32 - opt.sr_bits)) - 1u);
  c.sr_mask_n = opt.sr_bits >= 32 ? 0xffffffffu : (1u << opt.sr_bits) - 1u;
  c.sat = opt.overflow == Overflow::sat;
  c.no_negzero = f.is_p3109();
  c.is_unsigned = !f.is_signed;
  c.unrep_code = static_cast<int32_t>(encode(-1.0f, f, opt.round, opt.overflow, 0u, opt.sr_bits));
  c.unrep_bits = static_cast<int32_t>(float_to_bits(decode(static_cast<uint32_t>(c.unrep_code), f)));
  return c;
}

// Which inputs the vector loops accept; the rest run the scalar codec.
// Caller-given random words have no vector loop: they run the scalar codec, still
// threaded. So do formats without subnormals (user-defined only): their encode has no
// vector loop; decode has (DecodeConsts::sub_keep).
inline bool vectorizable(const ElementFormat& f, const CastOptions& opt) {
  const bool sr_ok = !is_stochastic(opt.round) || (opt.sr_bits >= 1 && opt.sr_bits <= 32);
  const bool mode_ok = !is_stochastic(opt.round) || opt.random_words == nullptr;
  return sr_ok && mode_ok && f.subnormals && f.bias >= -1024 && f.bias <= 1024 && f.bits <= 16;
}

// The 10 round keys of Philox4x32-10 (key0 and key1 of round r; the vector rounds
// broadcast them).
struct PhiloxConsts {
  uint32_t key0[10];
  uint32_t key1[10];
};
inline PhiloxConsts make_philox_consts(uint64_t seed) {
  PhiloxConsts p{};
  uint32_t k0 = static_cast<uint32_t>(seed), k1 = static_cast<uint32_t>(seed >> 32);
  for (int r = 0; r < 10; ++r) {
    if (r > 0) {
      k0 += philox_detail::kWeyl0;
      k1 += philox_detail::kWeyl1;
    }
    p.key0[r] = k0;
    p.key1[r] = k1;
  }
  return p;
}

}  // namespace lpx::simd::detail
