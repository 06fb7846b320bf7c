// The shared LPX_HD scale rule (lpx/formats/block_scale.hpp) that the CPU quantizer and
// the CUDA kernels both call: compile-time evaluation (what makes it usable from device
// code without host-only std:: calls), the examples of docs/formats.md, and its limits against
// the format library's.
#include <catch2/catch.hpp>

#include <cfloat>
#include <cmath>
#include <limits>

#include "lpx/formats/block_scale.hpp"
#include "lpx/formats/element_format.hpp"

using namespace lpx;
namespace bs = lpx::block_scaling;

namespace {

constexpr bs::ElementLimits kE4m3 = bs::limits_of(fmt8::e4m3fn);
constexpr bs::ElementLimits kE2m1 = bs::limits_of(fmt4::e2m1);

// docs/formats.md: E4M3 block with amax 460: floor gives scale 1, rceil gives 2. E2M1 with
// amax 7: floor gives 1 (7 saturates to 6), rceil gives 2 (3.5 -> 4).
static_assert(kE4m3.max_elem == 448.0f && kE4m3.emax == 8 && kE4m3.max_sig == 0xE00000u);
static_assert(bs::scale_exponent(float_to_bits(460.0f), ScaleRule::floor, kE4m3) == 0);
static_assert(bs::scale_exponent(float_to_bits(460.0f), ScaleRule::rceil, kE4m3) == 1);
static_assert(bs::scale_exponent(float_to_bits(7.0f), ScaleRule::floor, kE2m1) == 0);
static_assert(bs::scale_exponent(float_to_bits(7.0f), ScaleRule::rceil, kE2m1) == 1);
// ceil differs from rceil: ceil(log2 7) - 2 = 1; a power of two stays: ceil(log2 4) - 2 = 0.
static_assert(bs::scale_exponent(float_to_bits(7.0f), ScaleRule::ceil, kE2m1) == 1);
static_assert(bs::scale_exponent(float_to_bits(4.0f), ScaleRule::ceil, kE2m1) == 0);
// even: 7 rounded to E2M1's 1-bit mantissa is 8 -> floor 3 - 2 = 1; 5 rounds to 6 -> 0.
static_assert(bs::scale_exponent(float_to_bits(7.0f), ScaleRule::even, kE2m1) == 1);
static_assert(bs::scale_exponent(float_to_bits(5.0f), ScaleRule::even, kE2m1) == 0);
// Float32 subnormals: 2^-149 has floor log2 -149, its significand normalizes to 2^23.
static_assert(bs::floor_log2_bits(1u) == -149 && bs::significand24(1u) == 0x800000u);
static_assert(bs::floor_log2_bits(0x00400000u) == -127);
static_assert(bs::tensor_encode_scale(0.0f, 6.0f) == 1.0f);
static_assert(bs::tensor_encode_scale(2688.0f, 6.0f) == 1.0f);
static_assert(bs::decode_scale(ScaleFormat::e8m0, 127, 0.0f) == 1.0f);
static_assert(bs::decode_scale(ScaleFormat::e4m3, 0x38, 0.0f) == 1.0f);
static_assert(bs::decode_scale(ScaleFormat::fp32, 0, 0.25f) == 0.25f);

bs::ScaleParams params(ScaleFormat f, ScaleRule r, const ElementFormat& e) {
  bs::ScaleParams p;
  p.scale = f;
  p.rule = r;
  p.lim = bs::limits_of(e);
  return p;
}

bs::Amax amax_of(std::initializer_list<float> xs) {
  bs::Amax a;
  for (float x : xs) a.add(float_to_bits(x) & kF32AbsMask);
  return a;
}

}  // namespace

TEST_CASE("limits_of equals max_finite for every named format") {
  for (const ElementFormat* f : named_formats()) {
    INFO(f->name);
    if (!f->has_zero) continue;  // e8m0: a scale, never an element
    const bs::ElementLimits l = bs::limits_of(*f);
    CHECK(static_cast<double>(l.max_elem) == max_finite(*f));
    CHECK(l.emax == std::ilogb(l.max_elem));
  }
}

TEST_CASE("block_scale: e8m0 codes, clamping, zero and non-finite blocks") {
  const auto p = params(ScaleFormat::e8m0, ScaleRule::floor, fmt8::e4m3fn);
  bs::BlockScale s = bs::block_scale(amax_of({-460.0f, 3.0f}), p);
  CHECK(s.exponent == 0);
  CHECK(s.code == 127);
  CHECK(s.dec == 1.0f);
  CHECK_FALSE(s.clamped);
  s = bs::block_scale(amax_of({0.0f, -0.0f}), p);  // all zero: 2^-127, not clamped
  CHECK(s.code == 0);
  CHECK_FALSE(s.clamped);
  s = bs::block_scale(amax_of({1e-44f}), p);  // X = -147 - 8 clamps to -127
  CHECK(s.exponent == -127);
  CHECK(s.clamped);
  s = bs::block_scale(amax_of({1.0f, std::numeric_limits<float>::infinity()}), p);
  CHECK(s.nan);
  CHECK(s.code == 0xFF);
  CHECK(std::isnan(bs::stored_dec(s, ScaleFormat::e8m0)));
  // A NaN block's elements are code 0.
  CHECK(bs::quantize_element(5.0f, s, true, fmt8::e4m3fn, QuantizeOptions{}, 0).code == 0);
}

TEST_CASE("block_scale: NVFP4 two-level and fp32 scales") {
  auto p = params(ScaleFormat::e4m3, ScaleRule::floor, fmt4::e2m1);
  p.tensor_enc = bs::tensor_encode_scale(6.0f * 448.0f, 6.0f);  // amax_t = 2688: s_enc = 1
  p.tensor_dec = 1.0f / p.tensor_enc;
  // s_dec_b = e4m3(6 * 1 / 6) = 1 (code 0x38); s_enc_b = 1.
  bs::BlockScale s = bs::block_scale(amax_of({6.0f}), p);
  CHECK(s.code == 0x38);
  CHECK(s.dec == 1.0f);
  CHECK(s.enc == 1.0f);
  s = bs::block_scale(amax_of({1.0f, std::numeric_limits<float>::quiet_NaN()}), p);
  CHECK(s.code == 0x7F);
  // A tiny tensor amax: 2688 / 2^-149 overflows float32, s_enc is capped at FLT_MAX.
  CHECK(bs::tensor_encode_scale(0x1p-149f, 6.0f) == FLT_MAX);
  // fp32: s_enc = 448 / 3.5 = 128, s_dec = 1/128; a 2^-1 margin halves s_enc.
  auto q = params(ScaleFormat::fp32, ScaleRule::floor, fmt8::e4m3fn);
  s = bs::block_scale(amax_of({-3.5f}), q);
  CHECK(s.enc == 128.0f);
  CHECK(s.dec == 0x1p-7f);
  q.margin = 1;
  CHECK(bs::block_scale(amax_of({-3.5f}), q).enc == 64.0f);
  q.fixed_amax = true;  // delayed scaling: the history's amax, not the block's
  q.history_amax = 7.0f;
  CHECK(bs::block_scale(amax_of({-3.5f}), q).enc == 32.0f);
  q.history_amax = 1e-44f;  // 448 / 1e-44 overflows: capped, counted as clamped
  s = bs::block_scale(amax_of({-3.5f}), q);
  CHECK(s.enc == FLT_MAX);
  CHECK(s.clamped);
}

TEST_CASE("mul_pow2_exact rounds to odd below the normal range and is exact elsewhere") {
  CHECK(bs::mul_pow2_exact(3.0f, -2) == 0.75f);
  CHECK(bs::mul_pow2_exact(-0.0f, -127) == 0.0f);
  CHECK(std::signbit(bs::mul_pow2_exact(-0.0f, -127)));
  // 1.5 * 2^-149 is not a float: round to odd gives 2^-149 (odd) rather than RNE's 2^-148.
  CHECK(float_to_bits(bs::mul_pow2_exact(1.5f, -149 + 0)) == 1u);
  // 3 * 2^-149 is exact (bits 3) and stays.
  CHECK(float_to_bits(bs::mul_pow2_exact(3.0f, -149)) == 3u);
  // 2.5 * 2^-149: RNE would give 2 (even), round to odd gives 3 (the sticky bit kept).
  CHECK(float_to_bits(bs::mul_pow2_exact(2.5f, -149)) == 3u);
  CHECK(float_to_bits(bs::mul_pow2_exact(-2.5f, -149)) == (0x80000000u | 3u));
  CHECK(std::isnan(bs::mul_pow2_exact(std::numeric_limits<float>::quiet_NaN(), 3)));
}

TEST_CASE("prepare flushes float32 subnormals (sign kept) only when asked") {
  QuantizeOptions o;
  CHECK(bs::prepare(-1e-40f, o) == -1e-40f);
  o.flush_subnormal_inputs = true;
  CHECK(float_to_bits(bs::prepare(-1e-40f, o)) == 0x80000000u);
  CHECK(bs::prepare(1e-37f, o) == 1e-37f);
  o.headroom_3_4 = true;
  CHECK(bs::prepare_element(4.0f, o) == 3.0f);
}
