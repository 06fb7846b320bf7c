// SIMD array casts: the scalar codec (codec.hpp) rewritten on 32-bit lanes with Highway,
// compiled once per SIMD target (foreach_target) and chosen at run time.
//
// One generic kernel serves every format: the ElementFormat descriptor becomes a few
// broadcast constants, and the rounding mode is a template parameter (six loops). The
// scalar encode is already branch-free integer arithmetic on the float32 bits; each of
// its steps maps to lane operations:
//   1. split |x|: biased exponent, significand with implicit bit (sig < 2^24)
//   2. shift right by s = 23 - M + max(0, emin - exp) and round (see "32-bit lanes")
//   3. magnitude = (exponent base << M) + rounded significand (carries roll into exponent)
//   4. overflow and Inf: selects between the computed, max and Inf/NaN magnitudes
//   5. sign, fnuz zero, unsigned (e8m0) and NaN inputs: selects
//
// Why 32-bit lanes suffice (the scalar code uses 64 bits only to allow shifts up to 63):
// sig < 2^24, so any shift s >= 24 gives q = 0 and rem = sig. Clamping the shift to
// sc = min(s, 25) leaves q and rem unchanged and keeps half = 2^(sc-1) > sig, so rne/rna
// still round down; rup/rdn depend only on rem != 0. Rounding adds (half - 1 + lsb), half
// or 2^sc - 1 before the shift: sig + 2^25 < 2^31, no overflow in signed lanes. Stochastic
// rounding needs the unclamped shift: f = rem >> (s - N) for s >= N (zero once s - N >=
// 24, so that shift is clamped to 31 too) or rem << (N - s) (N - s <= 31, f < 2^N), and
// "f + r >= 2^N" is evaluated as the unsigned comparison f > (2^N - 1) ^ r, which cannot
// overflow even for N = 32. Magnitudes stay below 2^31 for every format of <= 16 bits
// with |bias| <= 1024 (larger biases fall back to the scalar loop).
//
// Stochastic rounding draws Philox4x32-10 in the lanes: every 4 consecutive u32 lanes
// hold one counter block (i/4 lo, i/4 hi, stream, 0) for elements i..i+3 (i % 4 == 0), so
// word k of the block lands in the lane of element i + k with no transpose. One round is
// MulEven (the two 32x32->64 products of words 0 and 2 of every block), a reversal of
// the four words, a 64-bit shift that brings words 1 and 3 down, and two xors.
//
// Fallbacks to the scalar codec: the first up-to-3 elements of an SR chunk whose flat
// index is not a multiple of 4, the ragged tail of every chunk (< one vector), SR with
// sr_bits outside [1, 32], formats with |bias| > 1024, and everything on HWY_SCALAR
// (Highway's one-lane baseline target, used only on CPUs without SSSE3).
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "cast_hwy.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep

#include <hwy/highway.h>

#include <string>
#include <type_traits>
#include <vector>

#include "cast_simd.hpp"
#include "lpx/formats/codec.hpp"
#include "lpx/numerics/philox.hpp"

#ifndef LPX_CAST_HWY_SHARED_
#define LPX_CAST_HWY_SHARED_
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
#endif  // LPX_CAST_HWY_SHARED_

HWY_BEFORE_NAMESPACE();
namespace lpx {
namespace simd {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;
using detail::DecodeConsts;
using detail::EncodeConsts;
using detail::PhiloxConsts;

using DI = hn::ScalableTag<int32_t>;
using DU = hn::RebindToUnsigned<DI>;
using DF = hn::RebindToFloat<DI>;
using DU64 = hn::Repartition<uint64_t, DU>;
using VI = hn::Vec<DI>;

#if HWY_TARGET != HWY_SCALAR
// Codec steps 1-5 for one vector of float32 bit patterns; `rnd` holds each lane's random
// word (used by sr only). Returns the codes in i32 lanes.
template <Rounding M, bool kInt>
HWY_INLINE VI EncodeVec(VI bits, VI rnd, const EncodeConsts& c) {
  const DI di;
  const DU du;
  // 1. Split: negm is all-ones in negative lanes.
  const VI negm = hn::BroadcastSignBit(bits);
  const auto neg = hn::MaskFromVec(negm);
  const VI abs = hn::And(bits, hn::Set(di, 0x7fffffff));
  const VI inf = hn::Set(di, 0x7f800000);
  const auto is_nan = hn::Gt(abs, inf);
  const VI biased = hn::ShiftRight<23>(abs);
  const VI exp_b = hn::Max(biased, hn::Set(di, 1));  // float32 subnormals: exponent of 2^-126
  const VI sig = hn::Or(hn::And(abs, hn::Set(di, 0x7fffff)),
                        hn::IfThenElseZero(hn::Gt(biased, hn::Zero(di)), hn::Set(di, 0x800000)));

  // 2. Shift and round (see the header comment for why 25 bounds every shift).
  VI shift;
  if constexpr (kInt) {
    shift = hn::Sub(hn::Set(di, c.int_shift_base), exp_b);
  } else {
    shift = hn::Add(hn::Set(di, c.shift_base),
                    hn::Max(hn::Zero(di), hn::Sub(hn::Set(di, c.sub_ref), exp_b)));
  }
  VI sc = hn::Min(shift, hn::Set(di, 25));
  if constexpr (kInt) sc = hn::Max(sc, hn::Zero(di));  // integers may need no shift at all
  const VI mask = hn::Sub(hn::Shl(hn::Set(di, 1), sc), hn::Set(di, 1));  // 2^sc - 1
  VI q;
  if constexpr (M == Rounding::rne) {
    const VI half_m1 = hn::ShiftRight<1>(mask);  // 2^(sc-1) - 1, or 0 when sc = 0
    VI lsb = hn::And(hn::Shr(sig, sc), hn::Set(di, 1));
    if constexpr (kInt) lsb = hn::Min(lsb, mask);  // sc = 0: nothing to round
    q = hn::Shr(hn::Add(sig, hn::Add(half_m1, lsb)), sc);
  } else if constexpr (M == Rounding::rna) {
    const VI half = hn::Sub(mask, hn::ShiftRight<1>(mask));  // 2^(sc-1), or 0 when sc = 0
    q = hn::Shr(hn::Add(sig, half), sc);
  } else if constexpr (M == Rounding::rtz) {
    q = hn::Shr(sig, sc);
  } else if constexpr (M == Rounding::rup) {
    q = hn::Shr(hn::Add(sig, hn::AndNot(negm, mask)), sc);  // ceil for positives
  } else if constexpr (M == Rounding::rdn) {
    q = hn::Shr(hn::Add(sig, hn::And(negm, mask)), sc);  // ceil of the magnitude for negatives
  } else {
    const VI rem = hn::And(sig, mask);
    const VI d = hn::Sub(shift, hn::Set(di, c.sr_n));
    const VI thirty_one = hn::Set(di, 31);
    const VI f = hn::Shl(hn::Shr(rem, hn::Min(hn::Max(d, hn::Zero(di)), thirty_one)),
                         hn::Min(hn::Max(hn::Neg(d), hn::Zero(di)), thirty_one));
    const auto r = hn::ShiftRightSame(hn::BitCast(du, rnd), 32 - c.sr_n);
    const auto up = hn::Gt(hn::BitCast(du, f), hn::Xor(r, hn::Set(du, c.sr_mask_n)));
    q = hn::Sub(hn::Shr(sig, sc), hn::VecFromMask(di, hn::RebindMask(di, up)));
  }

  if constexpr (kInt) {
    // Clamp to [-neg_max, pos_max]; NaN -> 0.
    const auto huge = hn::Or(hn::Lt(shift, hn::Zero(di)), hn::Gt(abs, hn::Set(di, 0x7f7fffff)));
    const VI limit = hn::IfThenElse(neg, hn::Set(di, c.neg_max), hn::Set(di, c.pos_max));
    const VI mag = hn::IfThenElse(huge, limit, hn::Min(q, limit));
    const VI code = hn::IfThenElse(
        neg, hn::And(hn::Neg(mag), hn::Set(di, c.code_mask)), mag);
    return hn::IfThenZeroElse(is_nan, code);
  } else {
    // 3. Assemble by addition so a significand carry bumps the exponent.
    const VI ebase = hn::Max(hn::Add(exp_b, hn::Set(di, c.ebase_off)), hn::Zero(di));
    const VI magnitude = hn::Add(hn::ShiftLeftSame(ebase, c.m), q);
    // 4. Overflow and Inf.
    const VI max_mag = hn::Set(di, c.max_mag);
    const auto special = hn::Or(hn::Gt(magnitude, max_mag), hn::Eq(abs, inf));
    const auto is_inf = hn::Eq(abs, inf);
    auto sat_l = hn::MaskFromVec(hn::Set(di, c.sat ? -1 : 0));
    // ieee rules keep +-max when the rounding direction points toward zero (not for Inf).
    if constexpr (M == Rounding::rtz) {
      sat_l = hn::Or(sat_l, hn::Not(is_inf));
    } else if constexpr (M == Rounding::rdn) {
      sat_l = hn::Or(sat_l, hn::AndNot(is_inf, hn::Not(neg)));
    } else if constexpr (M == Rounding::rup) {
      sat_l = hn::Or(sat_l, hn::AndNot(is_inf, neg));
    }
    const VI mag = hn::IfThenElse(
        special, hn::IfThenElse(sat_l, max_mag, hn::Set(di, c.ovf_mag)), magnitude);
    // 5. Sign and special inputs.
    VI code = hn::Or(mag, hn::And(negm, hn::Set(di, c.sign_mask)));
    if (c.fnuz) code = hn::IfThenZeroElse(hn::Eq(mag, hn::Zero(di)), code);
    if (c.is_unsigned) {
      code = hn::IfThenElse(hn::Or(neg, hn::Eq(abs, hn::Zero(di))), hn::Set(di, c.unrep_code),
                            code);
    }
    return hn::IfThenElse(
        is_nan, hn::IfThenElse(neg, hn::Set(di, c.nan_neg), hn::Set(di, c.nan_pos)), code);
  }
}

// decode() for one vector of codes in i32 lanes; returns float32 values.
HWY_INLINE hn::Vec<DF> DecodeVec(VI code, const DecodeConsts& c) {
  const DI di;
  const DF df;
  code = hn::And(code, hn::Set(di, c.code_mask));
  const auto neg = hn::Ne(hn::And(code, hn::Set(di, c.sign_mask)), hn::Zero(di));
  if (c.is_integer) {
    const VI value = hn::IfThenElse(neg, hn::Sub(code, hn::Set(di, c.code_mask + 1)), code);
    return hn::Mul(hn::ConvertTo(df, value), hn::Set(df, c.int_scale));
  }
  const VI mag = hn::AndNot(hn::Set(di, c.sign_mask), code);
  const VI ef = hn::ShiftRightSame(mag, c.m);
  const VI mant = hn::And(mag, hn::Set(di, c.mmask));
  const auto is_nan =
      hn::Or(hn::And(hn::Gt(mag, hn::Set(di, c.nan_thr)), hn::Ne(mag, hn::Set(di, c.nan_ne))),
             hn::Eq(code, hn::Set(di, c.fnuz_nan)));
  const auto is_inf = hn::Eq(mag, hn::Set(di, c.inf_eq));
  const auto sub = hn::Eq(ef, hn::Set(di, c.sub_ef));
  const VI significand = hn::IfThenElse(sub, mant, hn::Or(mant, hn::Set(di, c.implicit)));
  const VI e = hn::Sub(hn::IfThenElse(sub, hn::Set(di, 1), ef), hn::Set(di, c.bias_m));
  // pow2f(e): normal bits, or a float32 subnormal 2^(e+149) below 2^-126.
  const VI pow_norm = hn::ShiftLeft<23>(hn::Add(e, hn::Set(di, 127)));
  const VI pow_sub = hn::Shl(
      hn::Set(di, 1),
      hn::Min(hn::Max(hn::Add(e, hn::Set(di, 149)), hn::Zero(di)), hn::Set(di, 31)));
  const VI pow = hn::IfThenElse(hn::Gt(e, hn::Set(di, -127)), pow_norm, pow_sub);
  // Exact: every value of the format is a float32 (as in the scalar decode).
  const auto magnitude = hn::Mul(hn::ConvertTo(df, significand), hn::BitCast(df, pow));
  const VI value = hn::IfThenElse(is_inf, hn::Set(di, 0x7f800000), hn::BitCast(di, magnitude));
  const VI sign = hn::And(hn::VecFromMask(di, neg), hn::Set(di, static_cast<int32_t>(kF32SignMask)));
  const VI nan = hn::Or(hn::Set(di, static_cast<int32_t>(kF32QuietNanBits)),
                        hn::And(sign, hn::Set(di, c.nan_sign_f32)));
  const VI result = hn::IfThenElse(is_nan, nan, hn::Or(value, sign));
  return hn::BitCast(df, result);
}

// Stores one vector of codes (or, for float output, their decoded values).
HWY_INLINE void StoreOut(VI code, uint8_t* p, const DecodeConsts&) {
  const hn::Rebind<uint8_t, DI> d8;
  hn::StoreU(hn::DemoteTo(d8, code), d8, p);  // codes are in [0, 255]: exact
}
HWY_INLINE void StoreOut(VI code, uint16_t* p, const DecodeConsts&) {
  const hn::Rebind<uint16_t, DI> d16;
  hn::StoreU(hn::DemoteTo(d16, code), d16, p);  // codes are in [0, 65535]: exact
}
HWY_INLINE void StoreOut(VI code, float* p, const DecodeConsts& dc) {
  hn::StoreU(DecodeVec(code, dc), DF(), p);
}

// Philox4x32-10 for the blocks held in `ctr` (four u32 lanes per block).
HWY_INLINE VI PhiloxVec(hn::Vec<DU64> ctr, const PhiloxConsts& p) {
  const DU du;
  const DU64 du64;
  const auto mul = hn::LoadDup128(du, p.mul);
  auto v = hn::BitCast(du, ctr);
  for (int r = 0; r < 10; ++r) {
    // Per block: (lo0 hi0 lo1 hi1) = (M0 * w0, M1 * w2); new block (hi1^w1^k0, lo1, hi0^w3^k1, lo0).
    const auto prod = hn::BitCast(du, hn::MulEven(v, mul));
    const auto odd_words = hn::BitCast(du, hn::ShiftRight<32>(hn::BitCast(du64, v)));
    v = hn::Xor3(hn::Shuffle0123(prod), odd_words, hn::LoadDup128(du, p.keys[r]));
  }
  return hn::BitCast(DI(), v);
}

// Two independent Philox streams interleaved: one round is a ~7-cycle dependency chain
// (multiply, shuffle, xor), so a second chain in flight roughly doubles the throughput.
HWY_INLINE void PhiloxVec2(hn::Vec<DU64> ctr_a, hn::Vec<DU64> ctr_b, const PhiloxConsts& p,
                           VI& out_a, VI& out_b) {
  const DU du;
  const DU64 du64;
  const auto mul = hn::LoadDup128(du, p.mul);
  auto a = hn::BitCast(du, ctr_a);
  auto b = hn::BitCast(du, ctr_b);
  for (int r = 0; r < 10; ++r) {
    const auto key = hn::LoadDup128(du, p.keys[r]);
    const auto prod_a = hn::BitCast(du, hn::MulEven(a, mul));
    const auto prod_b = hn::BitCast(du, hn::MulEven(b, mul));
    const auto odd_a = hn::BitCast(du, hn::ShiftRight<32>(hn::BitCast(du64, a)));
    const auto odd_b = hn::BitCast(du, hn::ShiftRight<32>(hn::BitCast(du64, b)));
    a = hn::Xor3(hn::Shuffle0123(prod_a), odd_a, key);
    b = hn::Xor3(hn::Shuffle0123(prod_b), odd_b, key);
  }
  out_a = hn::BitCast(DI(), a);
  out_b = hn::BitCast(DI(), b);
}

#endif  // HWY_TARGET != HWY_SCALAR

template <class Out>
HWY_INLINE Out ScalarOut(uint32_t code, const ElementFormat& f) {
  if constexpr (std::is_same_v<Out, float>) {
    return decode(code, f);
  } else {
    return static_cast<Out>(code);
  }
}

template <Rounding M, bool kInt, class Out>
void EncodeLoop(const float* HWY_RESTRICT in, Out* HWY_RESTRICT out, size_t n,
                uint64_t first_index, const ElementFormat& f, const CastOptions& opt) {
  const DI di;
  const DF df;
  const size_t N = hn::Lanes(di);
  auto scalar_one = [&](size_t k) {
    const uint32_t r =
        M == Rounding::sr ? random_bits(opt.seed, opt.stream, first_index + k) : 0u;
    out[k] = ScalarOut<Out>(encode(in[k], f, M, opt.overflow, r, opt.sr_bits), f);
  };
  size_t i = 0;
#if HWY_TARGET == HWY_SCALAR
  // One-lane target (Highway's baseline in this build): the vector loop would be the
  // scalar codec in disguise, and one lane cannot hold a Philox block.
  (void)di;
  (void)df;
  (void)N;
#else
  const EncodeConsts ec = detail::make_encode_consts(f, opt);
  const DecodeConsts dc = detail::make_decode_consts(f);
  if constexpr (M == Rounding::sr) {
    // Vector loop from a flat index that is a multiple of 4 (a Philox block boundary).
    const size_t head = static_cast<size_t>((4 - first_index % 4) % 4);
    for (; i < head && i < n; ++i) scalar_one(i);
    const DU du;
    const DU64 du64;
    const PhiloxConsts pc = detail::make_philox_consts(opt.seed);
    // Counter blocks (group lo, group hi, stream, 0) for groups g0, g0 + 1, ...
    HWY_ALIGN uint32_t init[HWY_MAX_BYTES / 4];
    const uint64_t g0 = (first_index + i) / 4;
    for (size_t l = 0; l < N; l += 4) {
      const uint64_t g = g0 + l / 4;
      init[l] = static_cast<uint32_t>(g);
      init[l + 1] = static_cast<uint32_t>(g >> 32);
      init[l + 2] = opt.stream;
      init[l + 3] = 0;
    }
    auto ctr = hn::BitCast(du64, hn::Load(du, init));
    HWY_ALIGN const uint32_t inc_words[4] = {static_cast<uint32_t>(N / 4), 0, 0, 0};
    const auto inc = hn::BitCast(du64, hn::LoadDup128(du, inc_words));
    for (; i + 2 * N <= n; i += 2 * N) {
      const VI bits_a = hn::BitCast(di, hn::LoadU(df, in + i));
      const VI bits_b = hn::BitCast(di, hn::LoadU(df, in + i + N));
      const auto ctr_b = hn::Add(ctr, inc);
      VI rnd_a, rnd_b;
      PhiloxVec2(ctr, ctr_b, pc, rnd_a, rnd_b);
      ctr = hn::Add(ctr_b, inc);
      StoreOut(EncodeVec<M, kInt>(bits_a, rnd_a, ec), out + i, dc);
      StoreOut(EncodeVec<M, kInt>(bits_b, rnd_b, ec), out + i + N, dc);
    }
    for (; i + N <= n; i += N) {
      const VI bits = hn::BitCast(di, hn::LoadU(df, in + i));
      const VI rnd = PhiloxVec(ctr, pc);
      ctr = hn::Add(ctr, inc);  // 64-bit add: the group counter carries into its high word
      StoreOut(EncodeVec<M, kInt>(bits, rnd, ec), out + i, dc);
    }
  } else {
    const VI zero = hn::Zero(di);
    for (; i + N <= n; i += N) {
      const VI bits = hn::BitCast(di, hn::LoadU(df, in + i));
      StoreOut(EncodeVec<M, kInt>(bits, zero, ec), out + i, dc);
    }
  }
#endif
  for (; i < n; ++i) scalar_one(i);
}

template <class Out>
void EncodeDispatch(const float* in, Out* out, size_t n, uint64_t first_index,
                    const ElementFormat* fp, const CastOptions* op) {
  const ElementFormat& f = *fp;
  const CastOptions& opt = *op;
  const bool i = f.is_integer;
  switch (opt.round) {
    case Rounding::rne:
      return i ? EncodeLoop<Rounding::rne, true>(in, out, n, first_index, f, opt)
               : EncodeLoop<Rounding::rne, false>(in, out, n, first_index, f, opt);
    case Rounding::rna:
      return i ? EncodeLoop<Rounding::rna, true>(in, out, n, first_index, f, opt)
               : EncodeLoop<Rounding::rna, false>(in, out, n, first_index, f, opt);
    case Rounding::rtz:
      return i ? EncodeLoop<Rounding::rtz, true>(in, out, n, first_index, f, opt)
               : EncodeLoop<Rounding::rtz, false>(in, out, n, first_index, f, opt);
    case Rounding::rup:
      return i ? EncodeLoop<Rounding::rup, true>(in, out, n, first_index, f, opt)
               : EncodeLoop<Rounding::rup, false>(in, out, n, first_index, f, opt);
    case Rounding::rdn:
      return i ? EncodeLoop<Rounding::rdn, true>(in, out, n, first_index, f, opt)
               : EncodeLoop<Rounding::rdn, false>(in, out, n, first_index, f, opt);
    case Rounding::sr:
      return i ? EncodeLoop<Rounding::sr, true>(in, out, n, first_index, f, opt)
               : EncodeLoop<Rounding::sr, false>(in, out, n, first_index, f, opt);
  }
}

void EncodeU8(const float* in, uint8_t* out, size_t n, uint64_t first_index,
              const ElementFormat* f, const CastOptions* opt) {
  EncodeDispatch(in, out, n, first_index, f, opt);
}
void EncodeU16(const float* in, uint16_t* out, size_t n, uint64_t first_index,
               const ElementFormat* f, const CastOptions* opt) {
  EncodeDispatch(in, out, n, first_index, f, opt);
}
void FakeCast(const float* in, float* out, size_t n, uint64_t first_index,
              const ElementFormat* f, const CastOptions* opt) {
  EncodeDispatch(in, out, n, first_index, f, opt);
}

template <class Code>
void DecodeLoop(const Code* HWY_RESTRICT in, float* HWY_RESTRICT out, size_t n,
                const ElementFormat* fp) {
  size_t i = 0;
#if HWY_TARGET != HWY_SCALAR
  const DI di;
  const DF df;
  const hn::Rebind<Code, DI> dc_in;
  const size_t N = hn::Lanes(di);
  const DecodeConsts dc = detail::make_decode_consts(*fp);
  for (; i + N <= n; i += N) {
    const VI code = hn::PromoteTo(di, hn::LoadU(dc_in, in + i));
    hn::StoreU(DecodeVec(code, dc), df, out + i);
  }
#endif
  for (; i < n; ++i) out[i] = decode(in[i], *fp);
}
void DecodeU8(const uint8_t* in, float* out, size_t n, const ElementFormat* f) {
  DecodeLoop(in, out, n, f);
}
void DecodeU16(const uint16_t* in, float* out, size_t n, const ElementFormat* f) {
  DecodeLoop(in, out, n, f);
}

int64_t TargetId() { return HWY_TARGET; }

}  // namespace HWY_NAMESPACE
}  // namespace simd
}  // namespace lpx
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace lpx::simd {

HWY_EXPORT(EncodeU8);
HWY_EXPORT(EncodeU16);
HWY_EXPORT(FakeCast);
HWY_EXPORT(DecodeU8);
HWY_EXPORT(DecodeU16);
HWY_EXPORT(TargetId);

namespace {
// The scalar codec over a chunk: the fallback for inputs the vector loops do not accept.
template <class Out>
void scalar_encode(const float* in, Out* out, size_t n, uint64_t first_index,
                   const ElementFormat& f, const CastOptions& opt) {
  for (size_t k = 0; k < n; ++k) {
    const uint32_t r = opt.round == Rounding::sr
                           ? random_bits(opt.seed, opt.stream, first_index + k)
                           : 0u;
    const uint32_t code = encode(in[k], f, opt.round, opt.overflow, r, opt.sr_bits);
    if constexpr (std::is_same_v<Out, float>) {
      out[k] = decode(code, f);
    } else {
      out[k] = static_cast<Out>(code);
    }
  }
}
}  // namespace

void encode_u8(const float* in, uint8_t* out, size_t n, uint64_t first_index,
               const ElementFormat& f, const CastOptions& opt) {
  if (!detail::vectorizable(f, opt)) return scalar_encode(in, out, n, first_index, f, opt);
  HWY_DYNAMIC_DISPATCH(EncodeU8)(in, out, n, first_index, &f, &opt);
}
void encode_u16(const float* in, uint16_t* out, size_t n, uint64_t first_index,
                const ElementFormat& f, const CastOptions& opt) {
  if (!detail::vectorizable(f, opt)) return scalar_encode(in, out, n, first_index, f, opt);
  HWY_DYNAMIC_DISPATCH(EncodeU16)(in, out, n, first_index, &f, &opt);
}
void fake_cast(const float* in, float* out, size_t n, uint64_t first_index,
               const ElementFormat& f, const CastOptions& opt) {
  if (!detail::vectorizable(f, opt)) return scalar_encode(in, out, n, first_index, f, opt);
  HWY_DYNAMIC_DISPATCH(FakeCast)(in, out, n, first_index, &f, &opt);
}
void decode_u8(const uint8_t* in, float* out, size_t n, const ElementFormat& f) {
  HWY_DYNAMIC_DISPATCH(DecodeU8)(in, out, n, &f);
}
void decode_u16(const uint16_t* in, float* out, size_t n, const ElementFormat& f) {
  HWY_DYNAMIC_DISPATCH(DecodeU16)(in, out, n, &f);
}
int64_t dispatched_target_id() { return HWY_DYNAMIC_DISPATCH(TargetId)(); }

}  // namespace lpx::simd

namespace lpx::cast_testing {

std::vector<SimdTarget> simd_targets() {
  std::vector<SimdTarget> out;
  for (const int64_t t : hwy::SupportedAndGeneratedTargets()) out.push_back({t, hwy::TargetName(t)});
  return out;
}
void force_simd_target(int64_t target) { hwy::SetSupportedTargetsForTest(target); }
std::string dispatched_simd_target() { return hwy::TargetName(simd::dispatched_target_id()); }

}  // namespace lpx::cast_testing
#endif  // HWY_ONCE
