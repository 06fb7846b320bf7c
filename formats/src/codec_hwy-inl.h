// The scalar codec (codec.hpp) on 32-bit SIMD lanes, one copy per Highway target: the
// vector encode, decode and Philox4x32-10 that the array casts (cast_hwy.cpp) and the
// block quantizer (quantize_hwy.cpp) both use, so there is one vector codec to test.
// Included inside a foreach_target translation unit (Highway's -inl.h convention: the
// include guard toggles per target).
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
// Stochastic rounding draws Philox4x32-10 in the lanes, one counter (group of 4 elements)
// per u64 lane ("structure of arrays"): a chain of four vectors x0..x3 holds word w of N/2
// counters in the low halves of xw's u64 lanes. MulEven reads only those low halves, so
// the high halves may hold anything and a round needs no masking: two MulEven (64-bit
// products lo | hi << 32), two DupOdd that bring hi down and two three-way xors with the
// round key, 6 operations for N/2 counters. One counter per 4 u32 lanes (the layout that
// needs no transpose) takes 4 operations for N/4 counters (MulEven, a reversal of each
// counter's words, a 64-bit shift, a xor): a third more per word. Round 10 pairs each
// counter's words in its u64 lane, and two 64-bit interleaves give one counter per 128-bit
// block, word k of group g in the lane of element 4g + k; the counters sit in the lanes in
// the order that makes those blocks consecutive groups (PhiloxBegin). On AVX-512 (Sapphire
// Rapids), where a Philox-only fill is bound by the two vector ports, it runs ~17% faster
// per word than with one counter per 4 u32 lanes.

// Per-target include guard (Highway convention).
#if defined(LPX_CODEC_HWY_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef LPX_CODEC_HWY_INL_H_
#undef LPX_CODEC_HWY_INL_H_
#else
#define LPX_CODEC_HWY_INL_H_
#endif

#include <hwy/highway.h>

#include "codec_simd.hpp"

HWY_BEFORE_NAMESPACE();
namespace lpx {
namespace simd {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;
using detail::DecodeConsts;
using detail::EncodeConsts;
using detail::FastConsts;
using detail::PhiloxConsts;

using DI = hn::ScalableTag<int32_t>;
using DU = hn::RebindToUnsigned<DI>;
using DF = hn::RebindToFloat<DI>;
using DU64 = hn::Repartition<uint64_t, DU>;
using VI = hn::Vec<DI>;

#if HWY_TARGET != HWY_SCALAR
// Codec step 2 on lanes: sig >> shift rounded by mode M, with sc = min(shift, 25) (and
// >= 0 for integers; see the header comment); negm is all-ones in negative lanes (rup,
// rdn) and rnd the lanes' random words (sr, the top sr_n bits used).
template <Rounding M, bool kInt>
HWY_INLINE VI RoundShifted(VI sig, VI shift, VI sc, VI negm, VI rnd, int32_t sr_n,
                           uint32_t sr_mask_n) {
  const DI di;
  const DU du;
  const VI mask = hn::Sub(hn::Shl(hn::Set(di, 1), sc), hn::Set(di, 1));  // 2^sc - 1
  if constexpr (M == Rounding::rne) {
    const VI half_m1 = hn::ShiftRight<1>(mask);  // 2^(sc-1) - 1, or 0 when sc = 0
    VI lsb = hn::And(hn::Shr(sig, sc), hn::Set(di, 1));
    if constexpr (kInt) lsb = hn::Min(lsb, mask);  // sc = 0: nothing to round
    return hn::Shr(hn::Add(sig, hn::Add(half_m1, lsb)), sc);
  } else if constexpr (M == Rounding::rna) {
    const VI half = hn::Sub(mask, hn::ShiftRight<1>(mask));  // 2^(sc-1), or 0 when sc = 0
    return hn::Shr(hn::Add(sig, half), sc);
  } else if constexpr (M == Rounding::rtz) {
    return hn::Shr(sig, sc);
  } else if constexpr (M == Rounding::rup) {
    return hn::Shr(hn::Add(sig, hn::AndNot(negm, mask)), sc);  // ceil for positives
  } else if constexpr (M == Rounding::rdn) {
    return hn::Shr(hn::Add(sig, hn::And(negm, mask)), sc);  // ceil of the magnitude for negatives
  } else if constexpr (M == Rounding::rto) {
    // Truncate, then set the lowest bit of an inexact result (rem != 0).
    const VI sticky = hn::IfThenElseZero(hn::Ne(hn::And(sig, mask), hn::Zero(di)), hn::Set(di, 1));
    return hn::Or(hn::Shr(sig, sc), sticky);
  } else {
    static_assert(is_stochastic(M), "every other mode has its branch above");
    const VI rem = hn::And(sig, mask);
    const VI d = hn::Sub(shift, hn::Set(di, sr_n));
    const VI thirty_one = hn::Set(di, 31);
    const VI dpos = hn::Min(hn::Max(d, hn::Zero(di)), thirty_one);
    const VI dneg = hn::Min(hn::Max(hn::Neg(d), hn::Zero(di)), thirty_one);
    VI f;
    if constexpr (M == Rounding::sr) {
      f = hn::Shl(hn::Shr(rem, dpos), dneg);
    } else {
      // sr-fast, sr-rne, sr-odd (numerics/rounding.hpp): delta * 2^N = rem / 2^d rounded
      // to an integer (ties up, to even, to odd) before the same comparison as sr;
      // sr-fast's floor(delta 2^(N+1)) + 2r + 1 >= 2^(N+1) is exactly floor(delta 2^N +
      // 1/2) + r >= 2^N. d <= 0: delta * 2^N = rem << -d is exact. Sums stay below 2^31
      // (rem < 2^25, half <= 2^30); a d clamped to 31 rounds to 0, as the true one does.
      const VI one = hn::Set(di, 1);
      const VI dmask = hn::Sub(hn::Shl(one, dpos), one);         // 2^dpos - 1
      VI add;
      if constexpr (M == Rounding::sr_fast) {
        add = hn::Sub(dmask, hn::ShiftRight<1>(dmask));          // 2^(dpos-1)
      } else {
        const VI lsb = hn::And(hn::Shr(rem, dpos), one);
        // ties to even: half - 1 + lsb; ties to odd: half - 1 + (1 - lsb).
        add = hn::Add(hn::ShiftRight<1>(dmask),
                      M == Rounding::sr_rne ? lsb : hn::Xor(lsb, one));
      }
      f = hn::IfThenElse(hn::Gt(d, hn::Zero(di)), hn::Shr(hn::Add(rem, add), dpos),
                         hn::Shl(rem, dneg));
    }
    const auto r = hn::ShiftRightSame(hn::BitCast(du, rnd), 32 - sr_n);
    const auto up = hn::Gt(hn::BitCast(du, f), hn::Xor(r, hn::Set(du, sr_mask_n)));
    return hn::Sub(hn::Shr(sig, sc), hn::VecFromMask(di, hn::RebindMask(di, up)));
  }
}

// Codec steps 1-5 for one vector of float32 bit patterns; `rnd` holds each lane's random
// word (used by sr only). Returns the codes in i32 lanes.
template <Rounding M, bool kInt>
HWY_INLINE VI EncodeVec(VI bits, VI rnd, const EncodeConsts& c) {
  const DI di;
  // 1. Split: negm is all-ones in negative lanes.
  const VI negm = hn::BroadcastSignBit(bits);
  const auto neg = hn::MaskFromVec(negm);
  const VI abs = hn::And(bits, hn::Set(di, 0x7fffffff));
  const VI inf = hn::Set(di, 0x7f800000);
  const auto is_nan = hn::Gt(abs, inf);
  const VI biased = hn::ShiftRight<23>(abs);
  VI exp_b = hn::Max(biased, hn::Set(di, 1));  // float32 subnormals: exponent of 2^-126
  VI sig = hn::Or(hn::And(abs, hn::Set(di, 0x7fffff)),
                  hn::IfThenElseZero(hn::Gt(biased, hn::Zero(di)), hn::Set(di, 0x800000)));
  if constexpr (!kInt) {
    if (c.f32_sub_fix) {
      // emin < -126 (codec step 1): float32 subnormals as 2^-127 * (2 * fraction).
      const auto f32_sub = hn::Eq(biased, hn::Zero(di));
      sig = hn::IfThenElse(f32_sub, hn::ShiftLeft<1>(sig), sig);
      exp_b = hn::IfThenZeroElse(f32_sub, exp_b);
    }
  }

  // 2. Shift and round (see the header comment for why 25 bounds every shift).
  VI shift;
  if constexpr (kInt) {
    shift = hn::Sub(hn::Set(di, c.int_shift_base), exp_b);
  } else {
    shift = hn::Add(hn::Set(di, c.shift_base),
                    hn::Max(hn::Zero(di), hn::Sub(hn::Set(di, c.sub_ref), exp_b)));
  }
  if constexpr (!kInt && M != Rounding::rne) {
    if (c.no_zero) {
      // Formats without zero (e8m0) below 2^-126, every mode but rne (codec step 3): round
      // the excess over 2^-127 (code 0), in 2^-149 units, by 22 bits; the exponent base of
      // these lanes is 0, so the magnitude below is just that rounded value.
      const auto low = hn::Lt(abs, hn::Set(di, 0x00800000));
      sig = hn::IfThenElse(low, hn::Max(hn::Sub(abs, hn::Set(di, 0x400000)), hn::Zero(di)), sig);
      shift = hn::IfThenElse(low, hn::Set(di, 22), shift);
    }
  }
  VI sc = hn::Min(shift, hn::Set(di, 25));
  if constexpr (kInt) sc = hn::Max(sc, hn::Zero(di));  // integers may need no shift at all
  // P3109 with P = 1 under rne and rto (codec step 2): target-normal lanes whose exponent
  // field is even get 2^23 added to the significand (their shift is 23), so the parity the
  // mode looks at is the code's.
  constexpr bool kParity = !kInt && (M == Rounding::rne || M == Rounding::rto);
  auto parity_fix = hn::MaskFromVec(hn::Zero(di));
  if constexpr (kParity) {
    if (c.code_parity) {
      const VI field = hn::Add(exp_b, hn::Set(di, c.ebase_off + 1));
      parity_fix = hn::AndNot(hn::Gt(hn::Set(di, c.sub_ref), exp_b),
                              hn::Eq(hn::And(field, hn::Set(di, 1)), hn::Zero(di)));
      sig = hn::Add(sig, hn::IfThenElseZero(parity_fix, hn::Set(di, 1 << 23)));
    }
  }
  VI q = RoundShifted<M, kInt>(sig, shift, sc, negm, rnd, c.sr_n, c.sr_mask_n);
  if constexpr (kParity) {
    if (c.code_parity) q = hn::Sub(q, hn::IfThenElseZero(parity_fix, hn::Set(di, 1)));
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
      const auto is_zero = hn::Eq(abs, hn::Zero(di));
      // e8m0: zero and negatives; unsigned P3109 (zero_ok): nonzero negatives.
      const auto unrep = c.zero_ok ? hn::AndNot(is_zero, neg) : hn::Or(neg, is_zero);
      code = hn::IfThenElse(unrep, hn::Set(di, c.unrep_code), code);
    }
    return hn::IfThenElse(
        is_nan, hn::IfThenElse(neg, hn::Set(di, c.nan_neg), hn::Set(di, c.nan_pos)), code);
  }
}

// The short path (codec_simd.hpp: FastConsts, fast_path_ok) for one vector of float32
// bit patterns. Lanes where the result is a target normal round at the fixed float32
// bit position sh = 23 - M:
//   rne  t = |x| + (2^(sh-1) - 1) + lsb      rtz  t = |x|
//   sr   t = |x| + ((r & top N bits) >> (32 - sh))
// (sr: with rem the dropped bits, rem + floor(r_N / 2^(N - sh)) >= 2^sh exactly when the
// codec's f + r_N >= 2^N, for N >= sh and, shifting the other way, for N < sh.) A carry
// out of the mantissa bumps the exponent as in the codec's step 3, so the code is
// (t >> sh) - (127 - bias) << M and the rounded value is t with the low sh bits cleared.
// Target subnormals (|x| < 2^emin) take, in vectors that have such a lane, the FPU's own
// round-to-nearest-even on |x| + 2^(emin - M + 23) under rne (FastConsts::sub_magic), or
// the codec's shift-and-round on the significand (FastSubnormalQ) otherwise.
template <Rounding M>
HWY_INLINE VI FastNormalSum(VI abs, VI rnd, const FastConsts& c) {
  const DI di;
  const DU du;
  if constexpr (M == Rounding::rne) {
    const VI lsb = hn::And(hn::ShiftRightSame(abs, c.tie_sh), hn::Set(di, 1));
    return hn::Add(abs, hn::Add(hn::Set(di, c.half_m1), lsb));
  } else if constexpr (M == Rounding::rtz) {
    return abs;
  } else {
    auto r = hn::BitCast(du, rnd);
    if (c.sr_few_bits) r = hn::And(r, hn::Set(du, c.sr_keep));  // else the shift drops them
    return hn::Add(abs, hn::BitCast(di, hn::ShiftRightSame(r, 32 - c.sh)));
  }
}

// Target-subnormal lanes: the multiple q of 2^(emin - M) that |x| rounds to (codec steps
// 1-2 with the shift 23 - M + emin - exponent > 23 - M).
template <Rounding M>
HWY_INLINE VI FastSubnormalQ(VI abs, VI rnd, const FastConsts& c) {
  const DI di;
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX3
  // AVX-512 converts float32 to u32, so the FPU can split |x| / 2^(emin - M) into q and
  // the sr comparison's f in 9 operations instead of the shift-and-round's 25 (both exact:
  // FastConsts::sub_float_ok). The raw truncating conversions need no overflow fix-up:
  // z < 2^M and w < 2^N.
  if constexpr (M == Rounding::rtz || M == Rounding::sr) {
    if (c.sub_float_ok) {
      const DF df;
      const DU du;
      const auto z = hn::Mul(hn::BitCast(df, abs), hn::Set(df, c.sub_scale));
      const VI q{_mm512_maskz_cvttps_epi32(0xFFFF, z.raw)};
      if constexpr (M == Rounding::rtz) return q;
      const auto w = hn::Mul(hn::Sub(z, hn::ConvertTo(df, q)), hn::Set(df, c.sr_two_n));
      const hn::Vec<DU> f{_mm512_maskz_cvttps_epu32(0xFFFF, w.raw)};
      const auto r = hn::ShiftRightSame(hn::BitCast(du, rnd), 32 - c.sr_n);
      const auto up = hn::Gt(f, hn::Xor(r, hn::Set(du, c.sr_mask_n)));  // f + r >= 2^N
      return hn::Sub(q, hn::VecFromMask(di, hn::RebindMask(di, up)));
    }
  }
#endif
  const VI biased = hn::ShiftRight<23>(abs);
  const VI exp_b = hn::Max(biased, hn::Set(di, 1));
  const VI sig = hn::Or(hn::And(abs, hn::Set(di, 0x7fffff)),
                        hn::IfThenElseZero(hn::Gt(biased, hn::Zero(di)), hn::Set(di, 0x800000)));
  const VI shift = hn::Sub(hn::Set(di, c.sub_base), exp_b);
  return RoundShifted<M, false>(sig, shift, hn::Min(shift, hn::Set(di, 25)), hn::Zero(di), rnd,
                                c.sr_n, c.sr_mask_n);
}

// encode() on the short path: codes in i32 lanes.
template <Rounding M>
HWY_INLINE VI FastEncodeVec(VI bits, VI rnd, const FastConsts& c) {
  const DI di;
  const VI abs = hn::And(bits, hn::Set(di, 0x7fffffff));
  VI mag = hn::Sub(hn::ShiftRightSame(FastNormalSum<M>(abs, rnd, c), c.sh), hn::Set(di, c.code_off));
  const auto sub = hn::Lt(abs, hn::Set(di, c.min_normal));
  if (!hn::AllFalse(di, sub)) {
    VI q;
    if (M == Rounding::rne && c.sub_magic_ok) {
      const auto t = hn::Add(hn::BitCast(DF(), abs), hn::Set(DF(), c.sub_magic));
      q = hn::Sub(hn::BitCast(di, t), hn::Set(di, c.sub_magic_bits));
    } else {
      q = FastSubnormalQ<M>(abs, rnd, c);
    }
    mag = hn::IfThenElse(sub, q, mag);
  }
  const VI max_mag = hn::Set(di, c.max_mag);
  if (c.sat) {
    mag = hn::Min(mag, max_mag);  // Inf too; NaN lanes are replaced below
  } else {
    const auto over = hn::Gt(mag, max_mag);
    VI ovf = hn::Set(di, c.ovf_mag);
    // ieee rules keep +-max under rtz unless the input is Inf (codec step 4).
    if constexpr (M == Rounding::rtz)
      ovf = hn::IfThenElse(hn::Eq(abs, hn::Set(di, 0x7f800000)), ovf, max_mag);
    mag = hn::IfThenElse(over, ovf, mag);
  }
  VI code = hn::OrAnd(mag, hn::BitCast(di, hn::ShiftRightSame(hn::BitCast(DU(), bits), c.sign_shift)),
                      hn::Set(di, c.sign_mask));
  // Signed P3109: no -0 (its overflow NaN, 0x80, already ignores the sign it is or-ed with).
  if (c.no_negzero) code = hn::IfThenZeroElse(hn::Eq(mag, hn::Zero(di)), code);
  if (c.is_unsigned) {
    // Unsigned P3109 (codec step 5): a nonzero negative input has no code (the sign mask
    // is 0, so the rest is the magnitude's code).
    const auto unrep = hn::And(hn::Lt(bits, hn::Zero(di)), hn::Gt(abs, hn::Zero(di)));
    code = hn::IfThenElse(unrep, hn::Set(di, c.unrep_code), code);
  }
  const auto is_nan = hn::Gt(abs, hn::Set(di, 0x7f800000));
  if (!hn::AllFalse(di, is_nan)) {
    const VI nan = hn::IfThenElse(hn::Lt(bits, hn::Zero(di)), hn::Set(di, c.nan_neg),
                                  hn::Set(di, c.nan_pos));
    code = hn::IfThenElse(is_nan, nan, code);
  }
  return code;
}

// decode(encode()) on the short path: the rounded values as float32 bits in i32 lanes.
template <Rounding M>
HWY_INLINE VI FastFakeVec(VI bits, VI rnd, const FastConsts& c) {
  const DI di;
  const DF df;
  const VI abs = hn::And(bits, hn::Set(di, 0x7fffffff));
  VI mag = hn::And(FastNormalSum<M>(abs, rnd, c), hn::Set(di, c.keep_low));
  const auto sub = hn::Lt(abs, hn::Set(di, c.min_normal));
  if (!hn::AllFalse(di, sub)) {
    hn::Vec<DF> v;
    if (M == Rounding::rne && c.sub_magic_ok) {
      const auto magic = hn::Set(df, c.sub_magic);
      v = hn::Sub(hn::Add(hn::BitCast(df, abs), magic), magic);  // exact: both steps
    } else {
      v = hn::Mul(hn::ConvertTo(df, FastSubnormalQ<M>(abs, rnd, c)), hn::Set(df, c.sub_ulp));
    }
    mag = hn::IfThenElse(sub, hn::BitCast(di, v), mag);
  }
  const VI max_bits = hn::Set(di, c.max_bits);
  if (c.sat) {
    mag = hn::Min(mag, max_bits);
  } else {
    const auto over = hn::Gt(mag, max_bits);
    VI ovf = hn::Set(di, c.ovf_bits);
    if constexpr (M == Rounding::rtz)
      ovf = hn::IfThenElse(hn::Eq(abs, hn::Set(di, 0x7f800000)), ovf, max_bits);
    mag = hn::IfThenElse(over, ovf, mag);
  }
  VI value = hn::OrAnd(mag, bits, hn::Set(di, static_cast<int32_t>(kF32SignMask)));
  if (c.no_negzero) {
    // Signed P3109: a zero result is +0 and the overflow NaN is unsigned (decode of 0x80).
    const auto keep_sign =
        hn::AndNot(hn::Gt(mag, hn::Set(di, 0x7f800000)), hn::Gt(mag, hn::Zero(di)));
    value = hn::IfThenElse(keep_sign, value, mag);
  }
  if (c.is_unsigned) {
    const auto unrep = hn::And(hn::Lt(bits, hn::Zero(di)), hn::Gt(abs, hn::Zero(di)));
    value = hn::IfThenElse(unrep, hn::Set(di, c.unrep_bits), value);
  }
  const auto is_nan = hn::Gt(abs, hn::Set(di, 0x7f800000));
  if (!hn::AllFalse(di, is_nan)) {
    const VI nan = hn::IfThenElse(hn::Lt(bits, hn::Zero(di)), hn::Set(di, c.nan_neg_bits),
                                  hn::Set(di, c.nan_pos_bits));
    value = hn::IfThenElse(is_nan, nan, value);
  }
  return value;
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
  const VI significand = hn::IfThenElse(sub, hn::And(mant, hn::Set(di, c.sub_keep)),
                                        hn::Or(mant, hn::Set(di, c.implicit)));
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

// Word w of N64 counters in the low halves of xw's u64 lanes (high halves: don't care).
struct PhiloxChain {
  hn::Vec<DU> x0, x1, x2, x3;
};

// Rounds 3..9: (x0, x1, x2, x3) = (hi1 ^ x1 ^ k0, lo1, hi0 ^ x3 ^ k1, lo0) with
// lo0 | hi0 << 32 = M0 * x0 and lo1 | hi1 << 32 = M1 * x2. DupOdd (a shuffle, port 5)
// brings hi down: ShiftRight<32> (port 0) measured ~7% slower on Sapphire Rapids.
HWY_INLINE void PhiloxRound(PhiloxChain& c, hn::Vec<DU> m0, hn::Vec<DU> m1, hn::Vec<DU> k0,
                            hn::Vec<DU> k1) {
  const DU du;
  const auto p0 = hn::BitCast(du, hn::MulEven(c.x0, m0));  // (lo0, hi0)
  const auto p1 = hn::BitCast(du, hn::MulEven(c.x2, m1));  // (lo1, hi1)
  c.x0 = hn::Xor3(hn::DupOdd(p1), c.x1, k0);
  c.x1 = p1;
  c.x2 = hn::Xor3(hn::DupOdd(p0), c.x3, k1);
  c.x3 = p0;
}

// Rounds 3..9 of every chain given, interleaved round by round (one chain's ~7-cycle
// round hides behind the others').
template <class... Chains>
HWY_INLINE void PhiloxRounds(const PhiloxConsts& p, hn::Vec<DU> m0, hn::Vec<DU> m1, Chains&... c) {
  const DU du;
  HWY_UNROLL(7)
  for (int r = 2; r < 9; ++r) {
    const auto k0 = hn::Set(du, p.key0[r]);
    const auto k1 = hn::Set(du, p.key1[r]);
    (PhiloxRound(c, m0, m1, k0, k1), ...);
  }
}

// s ^ x ^ k in the even u32 lanes, s in the odd ones: one merge-masked ternary logic op
// on AVX-512 (Highway 1.0.3 has no masked Xor3; measured ~4% faster than the blend).
HWY_INLINE hn::Vec<DU> XorEven(hn::Vec<DU> s, hn::Vec<DU> x, hn::Vec<DU> k) {
#if HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL
  return hn::Vec<DU>{_mm512_mask_ternarylogic_epi32(s.raw, 0x5555, x.raw, k.raw, 0x96)};
#else
  return hn::OddEven(s, hn::Xor3(s, x, k));
#endif
}

// Round 10 and the words in element order. Each counter's (w0, w1) = (hi1 ^ x1 ^ k0, lo1)
// is its product p1 with the halves swapped and the low half xored, (w2, w3) likewise
// from p0, so the round costs no DupOdd; then the 64-bit interleaves put lane 2b's counter
// (group b of the chain) in block b of lo and lane 2b+1's (group N64/2 + b) in block b of
// hi.
HWY_INLINE void PhiloxLast(const PhiloxChain& c, hn::Vec<DU> m0, hn::Vec<DU> m1,
                           hn::Vec<DU> k0, hn::Vec<DU> k1, VI& lo, VI& hi) {
  const DU du;
  const DU64 du64;
  const auto s0 = hn::Shuffle2301(hn::BitCast(du, hn::MulEven(c.x0, m0)));  // (hi0, lo0)
  const auto s1 = hn::Shuffle2301(hn::BitCast(du, hn::MulEven(c.x2, m1)));  // (hi1, lo1)
  const auto a = hn::BitCast(du64, XorEven(s1, c.x1, k0));                  // (w0, w1)
  const auto b = hn::BitCast(du64, XorEven(s0, c.x3, k1));                  // (w2, w3)
  lo = hn::BitCast(DI(), hn::InterleaveLower(du64, a, b));
  hi = hn::BitCast(DI(), hn::InterleaveUpper(du64, a, b));
}

// Philox words for consecutive groups of 4 elements, drawn 4N words (Draw4) or N words
// (Draw1) at a time; the vector loops' only Philox state. Chain a's lane 2b holds group
// g + b and lane 2b+1 group g + N64/2 + b (chain b: N64 further on), so that PhiloxLast's
// interleaves give consecutive groups.
//
// Rounds 1 and 2 are mostly constant: a counter is (g low, g high, stream, 0), so only
// word 0 differs from lane to lane as long as the groups share their high word, which
// they do except across a multiple of 2^32 groups (2^34 elements). For such a `hi`,
// round 1 leaves the words (C0, L1, x2 = hi(M0 g) ^ k1, lo(M0 g)) with
// C0 = hi(M1 s) ^ hi ^ k0 and L1 = lo(M1 s), and round 2 multiplies the constant C0: its
// words are (hi(M1 x2) ^ L1 ^ k0', lo(M1 x2), lo(M0 g) ^ hi(M0 C0) ^ k1', lo(M0 C0)).
// The two rounds cost 6 operations per chain instead of 15. A draw whose groups straddle
// a new high word takes the scalar Philox (once per 2^34 elements).
struct PhiloxLanes {
  hn::Vec<DU64> ga, gb;  // the chains' group numbers (u64 lanes)
  hn::Vec<DU> r2x0, r2x2, r2x3;  // round 2's constants: xored into words 0 and 2; word 3
  uint64_t g = 0;        // first group of the next draw
  uint64_t hi = ~uint64_t{0};  // the groups' high word the constants were made for
  uint32_t stream = 0;
};

// Lane l of chain a holds group g0 + l / 2 (l even) or g0 + N64 / 2 + l / 2 (l odd), built
// in registers: filled lane by lane through the stack, its one wide load waited for the
// narrow stores to retire (no store forwarding), about 5% of the column-lane SR kernel,
// which begins a draw per row.
HWY_INLINE PhiloxLanes PhiloxBegin(uint64_t g0, uint32_t stream) {
  const DU64 du64;
  const size_t N64 = hn::Lanes(du64);
  const auto lane = hn::Iota(du64, 0);
  const auto odd = hn::Eq(hn::And(lane, hn::Set(du64, 1)), hn::Set(du64, 1));
  const auto offset = hn::Add(hn::ShiftRight<1>(lane), hn::IfThenElseZero(odd, hn::Set(du64, N64 / 2)));
  PhiloxLanes s;
  s.ga = hn::Add(hn::Set(du64, g0), offset);
  s.gb = hn::Add(s.ga, hn::Set(du64, N64));
  s.g = g0;
  s.stream = stream;
  return s;
}

// Makes round 2's constants for the high word of s.g.
inline HWY_NOINLINE void PhiloxRekey(PhiloxLanes& s, const PhiloxConsts& p) {
  using namespace philox_detail;
  const DU du;
  const uint32_t hi = static_cast<uint32_t>(s.g >> 32);
  const uint32_t c0 = mulhi(kMul1, s.stream) ^ hi ^ p.key0[0];
  const uint32_t l1 = kMul1 * s.stream;
  s.r2x0 = hn::Set(du, l1 ^ p.key0[1]);
  s.r2x2 = hn::Set(du, mulhi(kMul0, c0) ^ p.key1[1]);
  s.r2x3 = hn::Set(du, kMul0 * c0);
  s.hi = hi;
}

// Rounds 1 and 2 of a chain whose lanes hold groups g (high word s.hi).
HWY_INLINE PhiloxChain PhiloxStart(hn::Vec<DU64> g, const PhiloxLanes& s,
                                   const PhiloxConsts& p) {
  const DU du;
  const auto p0 = hn::BitCast(du, hn::MulEven(hn::BitCast(du, g), hn::Set(du, philox_detail::kMul0)));
  const auto x2 = hn::Xor(hn::DupOdd(p0), hn::Set(du, p.key1[0]));
  const auto p1 = hn::BitCast(du, hn::MulEven(x2, hn::Set(du, philox_detail::kMul1)));
  return PhiloxChain{hn::Xor(hn::DupOdd(p1), s.r2x0), p1, hn::Xor(p0, s.r2x2), s.r2x3};
}

// The words of groups [s.g, s.g + count) in element order, by the scalar Philox: draws
// that straddle a multiple of 2^32 groups.
inline HWY_NOINLINE void PhiloxScalarDraw(const PhiloxLanes& s, const PhiloxConsts& p,
                                          size_t count, uint32_t* HWY_RESTRICT out) {
  for (size_t k = 0; k < count; ++k) {
    const uint64_t g = s.g + k;
    const Philox4x32 w = philox4x32_10(
        Philox4x32{{static_cast<uint32_t>(g), static_cast<uint32_t>(g >> 32), s.stream, 0u}},
        p.key0[0], p.key1[0]);
    for (size_t j = 0; j < 4; ++j) out[4 * k + j] = w.v[j];
  }
}

// True when the next `count` groups share the high word of round 2's constants; makes
// new constants when they all share another one, false when they straddle two.
HWY_INLINE bool PhiloxReady(PhiloxLanes& s, const PhiloxConsts& p, size_t count) {
  const uint64_t last = s.g + count - 1;
  if (HWY_LIKELY((s.g >> 32) == s.hi && (last >> 32) == s.hi)) return true;
  if ((s.g >> 32) != (last >> 32)) return false;
  PhiloxRekey(s, p);
  return true;
}

// 4N words (N groups) from two chains interleaved: a round is a ~7-cycle dependency
// (multiply, DupOdd, xor) of 6 operations, so one chain alone would leave the vector
// ports idle.
HWY_INLINE void PhiloxDraw4(PhiloxLanes& s, const PhiloxConsts& p, VI& out0, VI& out1,
                            VI& out2, VI& out3) {
  const DU du;
  const DU64 du64;
  const size_t N = hn::Lanes(du);
  if (HWY_UNLIKELY(!PhiloxReady(s, p, N))) {
    HWY_ALIGN uint32_t w[4 * HWY_MAX_BYTES / 4];
    PhiloxScalarDraw(s, p, N, w);
    out0 = hn::BitCast(DI(), hn::Load(du, w));
    out1 = hn::BitCast(DI(), hn::Load(du, w + N));
    out2 = hn::BitCast(DI(), hn::Load(du, w + 2 * N));
    out3 = hn::BitCast(DI(), hn::Load(du, w + 3 * N));
  } else {
    const auto m0 = hn::Set(du, philox_detail::kMul0);
    const auto m1 = hn::Set(du, philox_detail::kMul1);
    PhiloxChain a = PhiloxStart(s.ga, s, p);
    PhiloxChain b = PhiloxStart(s.gb, s, p);
    PhiloxRounds(p, m0, m1, a, b);
    const auto k0 = hn::Set(du, p.key0[9]);
    const auto k1 = hn::Set(du, p.key1[9]);
    PhiloxLast(a, m0, m1, k0, k1, out0, out1);
    PhiloxLast(b, m0, m1, k0, k1, out2, out3);
  }
  const auto step = hn::Set(du64, N);
  s.ga = hn::Add(s.ga, step);
  s.gb = hn::Add(s.gb, step);
  s.g += N;
}

// 8N words (2N groups) from four chains interleaved, into out: PhiloxDraw4's draw twice
// over (chains c and d hold the groups 2 N64 and 3 N64 past chain a's), for targets with
// 32 vector registers (the four chains and the constants need 22).
HWY_INLINE void PhiloxDraw8(PhiloxLanes& s, const PhiloxConsts& p, uint32_t* HWY_RESTRICT out) {
  const DU du;
  const DU64 du64;
  const size_t N = hn::Lanes(du);
  const size_t N64 = hn::Lanes(du64);
  if (HWY_UNLIKELY(!PhiloxReady(s, p, 2 * N))) {
    PhiloxScalarDraw(s, p, 2 * N, out);
  } else {
    const auto m0 = hn::Set(du, philox_detail::kMul0);
    const auto m1 = hn::Set(du, philox_detail::kMul1);
    PhiloxChain a = PhiloxStart(s.ga, s, p);
    PhiloxChain b = PhiloxStart(s.gb, s, p);
    PhiloxChain c = PhiloxStart(hn::Add(s.ga, hn::Set(du64, 2 * N64)), s, p);
    PhiloxChain d = PhiloxStart(hn::Add(s.ga, hn::Set(du64, 3 * N64)), s, p);
    PhiloxRounds(p, m0, m1, a, b, c, d);
    const auto k0 = hn::Set(du, p.key0[9]);
    const auto k1 = hn::Set(du, p.key1[9]);
    size_t j = 0;
    for (const PhiloxChain* chain : {&a, &b, &c, &d}) {
      VI lo, hi;
      PhiloxLast(*chain, m0, m1, k0, k1, lo, hi);
      hn::StoreU(hn::BitCast(du, lo), du, out + j);
      hn::StoreU(hn::BitCast(du, hi), du, out + j + N);
      j += 2 * N;
    }
  }
  const auto step = hn::Set(du64, 2 * N);
  s.ga = hn::Add(s.ga, step);
  s.gb = hn::Add(s.gb, step);
  s.g += 2 * N;
}

// One chain, for tails only (the bulk goes through PhiloxDraw4 or PhiloxDraw8, whose
// chains hide each other's latency): its lanes hold groups g ... g + N64 - 1 in the order PhiloxLast turns
// into lo (the first N words) and hi (the next N). The state advances by `groups`: N/2
// when both halves are used, N/4 when only lo is.
HWY_INLINE void PhiloxDrawChain(PhiloxLanes& s, const PhiloxConsts& p, size_t groups, VI& lo,
                                VI& hi) {
  const DU du;
  const DU64 du64;
  const size_t N = hn::Lanes(du);
  if (HWY_UNLIKELY(!PhiloxReady(s, p, groups))) {
    HWY_ALIGN uint32_t w[2 * HWY_MAX_BYTES / 4] = {};
    PhiloxScalarDraw(s, p, groups, w);
    lo = hn::BitCast(DI(), hn::Load(du, w));
    hi = hn::BitCast(DI(), hn::Load(du, w + N));
  } else {
    const auto m0 = hn::Set(du, philox_detail::kMul0);
    const auto m1 = hn::Set(du, philox_detail::kMul1);
    PhiloxChain c = PhiloxStart(s.ga, s, p);
    PhiloxRounds(p, m0, m1, c);
    PhiloxLast(c, m0, m1, hn::Set(du, p.key0[9]), hn::Set(du, p.key1[9]), lo, hi);
  }
  const auto step = hn::Set(du64, groups);
  s.ga = hn::Add(s.ga, step);
  s.gb = hn::Add(s.gb, step);
  s.g += groups;
}

// 2N words (N/2 groups): both halves of one chain.
HWY_INLINE void PhiloxDraw2(PhiloxLanes& s, const PhiloxConsts& p, VI& lo, VI& hi) {
  PhiloxDrawChain(s, p, hn::Lanes(DU()) / 2, lo, hi);
}

// N words (N/4 groups): the first half of one chain (the last vector of a tail).
HWY_INLINE VI PhiloxDraw1(PhiloxLanes& s, const PhiloxConsts& p) {
  VI lo, hi;
  PhiloxDrawChain(s, p, hn::Lanes(DU()) / 4, lo, hi);
  return lo;
}

#endif  // HWY_TARGET != HWY_SCALAR

}  // namespace HWY_NAMESPACE
}  // namespace simd
}  // namespace lpx
HWY_AFTER_NAMESPACE();

#endif  // per-target include guard
