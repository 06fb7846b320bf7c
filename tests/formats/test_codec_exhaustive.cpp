// Exhaustive tests of the scalar element codec (formats/codec.hpp) over every code of
// every named format and of a set of generic eXmY formats: decode then encode returns
// the code, NaN codes re-encode to the canonical NaN, -0 per format. The limits of each
// format and the ml_dtypes / CUDA cast conventions (docs/formats.md#reference-conventions) are pinned
// as literal spec values, so a wrong descriptor cannot pass by
// agreeing with itself.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "lpx/formats/codec.hpp"
#include "lpx/formats/element_format.hpp"
#include "lpx/numerics/float_bits.hpp"

namespace {

using lpx::ElementFormat;
using lpx::Overflow;
using lpx::Rounding;

constexpr Rounding kModes[] = {Rounding::rne, Rounding::rna, Rounding::rtz, Rounding::rup,
                               Rounding::rdn};

const char* const kGeneric[] = {"e1m1", "e2m0", "e1m2", "e3m0",   "e2m2",
                                "e1m0", "e3m3", "e2m2fn", "e3m2b2", "ue4m3"};

std::vector<ElementFormat> all_formats() {
  std::vector<ElementFormat> v;
  for (const ElementFormat* f : lpx::named_formats()) v.push_back(*f);
  for (const char* name : kGeneric) v.push_back(lpx::format_by_name(name));
  return v;
}

uint32_t enc(float x, const char* name, Rounding r = Rounding::rne, Overflow o = Overflow::ieee) {
  return lpx::encode(x, lpx::format_by_name(name), r, o);
}

const float kInf = std::numeric_limits<float>::infinity();
const float kNaN = std::numeric_limits<float>::quiet_NaN();

}  // namespace

TEST_CASE("every code round-trips through decode and encode", "[codec][exhaustive]") {
  for (const ElementFormat& f : all_formats()) {
    INFO("format " << f.name);
    const uint32_t n = 1u << f.bits;
    int mismatches = 0;
    int nan_codes = 0;
    for (uint32_t code = 0; code < n; ++code) {
      const float v = lpx::decode(code, f);
      const bool negative = (code & f.sign_mask) != 0;
      for (Overflow o : {Overflow::ieee, Overflow::sat}) {
        for (Rounding r : kModes) {
          // An exact value encodes to itself in every deterministic mode (e8m0's code 0
          // is the exception under rna/rup, see the next test).
          if (!f.has_zero && code == 0 && (r == Rounding::rna || r == Rounding::rup)) continue;
          const uint32_t got = lpx::encode(v, f, r, o);
          uint32_t want = code;
          if (std::isnan(v)) {
            ++nan_codes;
            // The canonical NaN, sign kept where the format has a signed NaN.
            want = (f.specials == lpx::Specials::fnuz || !f.is_signed)
                       ? f.nan_code
                       : (f.nan_code | (negative ? f.sign_mask : 0u));
          } else if (std::isinf(v) && o == Overflow::sat) {
            want = f.max_magnitude | (negative ? f.sign_mask : 0u);
          } else if (f.is_integer && f.symmetric && code == f.sign_mask) {
            want = (f.code_mask + 1 - f.max_magnitude) & f.code_mask;  // -max
          }
          if (got != want) {
            if (++mismatches < 5)
              FAIL_CHECK("code 0x" << std::hex << code << " value " << v << " mode "
                                   << static_cast<int>(r) << " ovf " << static_cast<int>(o)
                                   << " -> 0x" << got << " want 0x" << want);
          }
        }
      }
    }
    CHECK(mismatches == 0);
    // Which codes are NaN, by spec: ieee: exponent all ones and mantissa != 0 (2 signs);
    // fn: S.1..1 (2, unsigned 1); fnuz: 0x80 only; none/integers: none.
    int want_nan = 0;
    if (!f.is_integer) {
      switch (f.specials) {
        case lpx::Specials::ieee: want_nan = 2 * ((1 << f.mantissa_bits) - 1); break;
        case lpx::Specials::fn: want_nan = f.is_signed ? 2 : 1; break;
        case lpx::Specials::fnuz: want_nan = 1; break;
        case lpx::Specials::none: want_nan = 0; break;
      }
    }
    CHECK(nan_codes == want_nan * 10);  // 5 modes x 2 overflow policies
  }
}

TEST_CASE("-0 per format", "[codec][exhaustive]") {
  for (const ElementFormat& f : all_formats()) {
    INFO("format " << f.name);
    for (Overflow o : {Overflow::ieee, Overflow::sat}) {
      const uint32_t neg_zero = lpx::encode(-0.0f, f, Rounding::rne, o);
      const uint32_t tiny = lpx::encode(-1e-44f, f, Rounding::rne, o);  // rounds to -0
      if (f.is_integer) {
        CHECK(neg_zero == 0u);
        CHECK(tiny == 0u);
      } else if (!f.is_signed) {
        // e8m0 has no zero: -0 is unrepresentable (NaN / smallest code); ue4m3 -> +0.
        const uint32_t want = (o == Overflow::ieee && f.has_nan()) ? f.nan_code : 0u;
        CHECK(neg_zero == want);
      } else if (f.specials == lpx::Specials::fnuz) {
        CHECK(neg_zero == 0u);
        CHECK(tiny == 0u);
        CHECK(std::signbit(lpx::decode(0u, f)) == false);
      } else {
        CHECK(neg_zero == f.sign_mask);
        CHECK(tiny == f.sign_mask);
        CHECK(lpx::float_to_bits(lpx::decode(f.sign_mask, f)) == 0x80000000u);
      }
    }
  }
}

TEST_CASE("e8m0 below 2^-126: ml_dtypes' ladder under rne, true values otherwise", "[codec][exhaustive]") {
  // codec.hpp: under rne, e8m0 rounds below 2^-126 on ml_dtypes' ladder {code 0, 2^-126}
  // with code 0 standing in for zero (2^-127 is that ladder's tie and stays, (2^-127,
  // 2^-126) goes up); the other modes round between the true values 2^-127 and 2^-126,
  // so the exact value 2^-127 never moves, and smaller inputs give code 0.
  const ElementFormat& f = lpx::fmt8::e8m0;
  const float v = std::ldexp(1.0f, -127);
  for (Rounding mode : {Rounding::rne, Rounding::rna, Rounding::rtz, Rounding::rup, Rounding::rdn})
    CHECK(lpx::encode(v, f, mode, Overflow::ieee) == 0u);
  CHECK(lpx::encode(std::ldexp(1.2f, -127), f, Rounding::rne, Overflow::ieee) == 1u);  // ml_dtypes
  CHECK(lpx::encode(std::ldexp(1.2f, -127), f, Rounding::rna, Overflow::ieee) == 0u);  // nearest
  CHECK(lpx::encode(std::ldexp(1.5f, -127), f, Rounding::rna, Overflow::ieee) == 1u);  // tie away
  CHECK(lpx::encode(std::ldexp(1.2f, -127), f, Rounding::rup, Overflow::ieee) == 1u);
  CHECK(lpx::encode(std::ldexp(1.9f, -127), f, Rounding::rtz, Overflow::ieee) == 0u);
  CHECK(lpx::encode(std::ldexp(1.5f, -127), f, Rounding::rne, Overflow::ieee) == 1u);
  CHECK(lpx::encode(std::ldexp(1.0f, -140), f, Rounding::rne, Overflow::ieee) == 0u);
  CHECK(lpx::encode(std::ldexp(1.0f, -140), f, Rounding::rup, Overflow::ieee) == 0u);
  CHECK(lpx::encode(std::ldexp(1.0f, -140), f, Rounding::rtz, Overflow::ieee) == 0u);
}

TEST_CASE("limits are the spec values", "[codec][exhaustive]") {
  struct Limit {
    const char* name;
    double max, min_normal, min_subnormal;
  };
  const double kBf16Max = std::ldexp(255.0, 120);  // (2 - 2^-7) * 2^127
  const Limit limits[] = {
      {"float8_e4m3fn", 448, std::ldexp(1.0, -6), std::ldexp(1.0, -9)},
      {"float8_e5m2", 57344, std::ldexp(1.0, -14), std::ldexp(1.0, -16)},
      {"float8_e4m3fnuz", 240, std::ldexp(1.0, -7), std::ldexp(1.0, -10)},
      {"float8_e5m2fnuz", 57344, std::ldexp(1.0, -15), std::ldexp(1.0, -17)},
      {"float8_e4m3b11fnuz", 30, std::ldexp(1.0, -10), std::ldexp(1.0, -13)},
      {"float8_e4m3", 240, std::ldexp(1.0, -6), std::ldexp(1.0, -9)},
      {"float8_e3m4", 15.5, 0.25, std::ldexp(1.0, -6)},
      {"float8_e8m0fnu", std::ldexp(1.0, 127), std::ldexp(1.0, -127), std::ldexp(1.0, -127)},
      {"float6_e3m2fn", 28, 0.25, 0.0625},
      {"float6_e2m3fn", 7.5, 1, 0.125},
      {"float4_e2m1fn", 6, 1, 0.5},
      {"bfloat16", kBf16Max, std::ldexp(1.0, -126), std::ldexp(1.0, -133)},
      {"float16", 65504, std::ldexp(1.0, -14), std::ldexp(1.0, -24)},
  };
  for (const Limit& l : limits) {
    INFO(l.name);
    const ElementFormat f = lpx::format_by_name(l.name);
    CHECK(lpx::max_finite(f) == l.max);
    CHECK(lpx::min_normal(f) == l.min_normal);
    CHECK(lpx::min_subnormal(f) == l.min_subnormal);
    // The largest finite value is also the largest decoded finite code, and nothing
    // decodes below min_subnormal but zero.
    double largest = 0, smallest = std::numeric_limits<double>::infinity();
    for (uint32_t c = 0; c < (1u << f.bits); ++c) {
      const double v = std::fabs(static_cast<double>(lpx::decode(c, f)));
      if (std::isfinite(v)) largest = std::max(largest, v);
      if (v > 0) smallest = std::min(smallest, v);
    }
    CHECK(largest == l.max);
    CHECK(smallest == l.min_subnormal);
  }
  CHECK(lpx::decode(0u, lpx::fmt8::e8m0) == std::ldexp(1.0f, -127));
  CHECK(lpx::decode(0xFEu, lpx::fmt8::e8m0) == std::ldexp(1.0f, 127));
  CHECK(std::isnan(lpx::decode(0xFFu, lpx::fmt8::e8m0)));
  // Integers: two's complement / unsigned ranges; MXINT8 element 127/64, symmetric.
  CHECK(lpx::max_finite(lpx::fmtint::int4) == 7);
  CHECK(lpx::decode(0x8u, lpx::fmtint::int4) == -8);
  CHECK(lpx::decode(0x2u, lpx::fmtint::int2) == -2);
  CHECK(lpx::max_finite(lpx::fmtint::uint8) == 255);
  CHECK(lpx::max_finite(lpx::fmtint::mxint8) == 127.0 / 64);
  CHECK(lpx::encode(-100.0f, lpx::fmtint::mxint8, Rounding::rne, Overflow::ieee) == 0x81u);
  // The whole FP4 value set (OCP MX v1.0): +-{0, .5, 1, 1.5, 2, 3, 4, 6}.
  const float e2m1[8] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6};
  for (uint32_t c = 0; c < 16; ++c)
    CHECK(lpx::decode(c, lpx::fmt4::e2m1) == (c & 8 ? -e2m1[c & 7] : e2m1[c & 7]));
  // Canonical NaN codes.
  CHECK(enc(kNaN, "float8_e5m2") == 0x7Eu);
  CHECK(enc(kNaN, "bfloat16") == 0x7FC0u);
  CHECK(enc(-kNaN, "float16") == 0xFE00u);
  CHECK(enc(kNaN, "float8_e4m3") == 0x7Cu);
  CHECK(enc(kNaN, "float8_e3m4") == 0x78u);
}

TEST_CASE("ml_dtypes default-cast conventions (docs/formats.md)", "[codec][exhaustive]") {
  // float8_e4m3fn: 464 is the tie 448/480 -> 448; above it NaN, sign kept.
  CHECK(enc(464.0f, "float8_e4m3fn") == 0x7Eu);
  CHECK(enc(464.0001f, "float8_e4m3fn") == 0x7Fu);
  CHECK(enc(-464.0001f, "float8_e4m3fn") == 0xFFu);
  CHECK(enc(kInf, "float8_e4m3fn") == 0x7Fu);
  CHECK(enc(-kInf, "float8_e4m3fn") == 0xFFu);
  CHECK(enc(-kNaN, "float8_e4m3fn") == 0xFFu);
  CHECK(enc(kNaN, "float8_e4m3fn") == 0x7Fu);
  CHECK(enc(-0.0f, "float8_e4m3fn") == 0x80u);
  // float8_e5m2: Inf from 61440 (the tie 57344/65536 goes to even = Inf).
  CHECK(enc(61440.0f, "float8_e5m2") == 0x7Cu);
  CHECK(enc(61439.99f, "float8_e5m2") == 0x7Bu);
  CHECK(enc(-61440.0f, "float8_e5m2") == 0xFCu);
  CHECK(enc(kInf, "float8_e5m2") == 0x7Cu);
  // float8_e4m3 (IEEE-like): Inf from 248; float8_e3m4: Inf from 15.75.
  CHECK(enc(248.0f, "float8_e4m3") == 0x78u);
  CHECK(enc(247.99f, "float8_e4m3") == 0x77u);
  CHECK(enc(15.75f, "float8_e3m4") == 0x70u);
  CHECK(enc(15.74f, "float8_e3m4") == 0x6Fu);
  // fnuz: NaN -> 0x80, -0 -> 0x00, overflow -> 0x80 whatever the sign.
  for (const char* name : {"float8_e4m3fnuz", "float8_e5m2fnuz", "float8_e4m3b11fnuz"}) {
    INFO(name);
    CHECK(enc(kNaN, name) == 0x80u);
    CHECK(enc(-kNaN, name) == 0x80u);
    CHECK(enc(-0.0f, name) == 0x00u);
    CHECK(enc(1e30f, name) == 0x80u);
    CHECK(enc(-1e30f, name) == 0x80u);
    CHECK(enc(kInf, name) == 0x80u);
    CHECK(enc(-kInf, name, Rounding::rne, Overflow::sat) == 0xFFu);
  }
  CHECK(enc(248.0f, "float8_e4m3fnuz") == 0x80u);     // tie 240/256 -> 256 -> NaN
  CHECK(enc(247.99f, "float8_e4m3fnuz") == 0x7Fu);
  // fp6/fp4: overflow and Inf saturate; +NaN -> the -0 code, -NaN -> +0.
  CHECK(enc(1e9f, "float6_e3m2fn") == 0x1Fu);
  CHECK(enc(-kInf, "float6_e3m2fn") == 0x3Fu);
  CHECK(enc(kInf, "float6_e2m3fn") == 0x1Fu);
  CHECK(enc(kNaN, "float6_e2m3fn") == 0x20u);
  CHECK(enc(-kNaN, "float6_e2m3fn") == 0x00u);
  CHECK(enc(kNaN, "float6_e3m2fn") == 0x20u);
  CHECK(enc(7.0f, "float4_e2m1fn") == 0x7u);
  CHECK(enc(-100.0f, "float4_e2m1fn") == 0xFu);
  CHECK(enc(kInf, "float4_e2m1fn") == 0x7u);
  CHECK(enc(kNaN, "float4_e2m1fn") == 0x8u);
  CHECK(enc(-kNaN, "float4_e2m1fn") == 0x0u);
  CHECK(enc(5.0f, "float4_e2m1fn") == 0x6u);   // tie 4/6 -> even mantissa (4)
  CHECK(enc(2.5f, "float4_e2m1fn") == 0x4u);   // tie 2/3 -> 2
  CHECK(enc(0.25f, "float4_e2m1fn") == 0x0u);  // tie 0/0.5 -> 0
  CHECK(enc(0.75f, "float4_e2m1fn") == 0x2u);  // tie 0.5/1 -> 1
  // e8m0: the tie 1.5*2^k goes up; 0, negatives and >= 1.5*2^127 -> NaN (0xFF).
  for (int k : {-126, -20, -1, 0, 1, 2, 3, 50, 126}) {
    INFO("k = " << k);
    CHECK(enc(std::ldexp(1.5f, k), "e8m0") == static_cast<uint32_t>(k + 128));
    CHECK(enc(std::ldexp(1.4999f, k), "e8m0") == static_cast<uint32_t>(k + 127));
    CHECK(enc(std::ldexp(1.0f, k), "e8m0") == static_cast<uint32_t>(k + 127));
  }
  CHECK(enc(0.0f, "e8m0") == 0xFFu);
  CHECK(enc(-0.0f, "e8m0") == 0xFFu);
  CHECK(enc(-1.0f, "e8m0") == 0xFFu);
  CHECK(enc(kNaN, "e8m0") == 0xFFu);
  CHECK(enc(std::ldexp(1.5f, 127), "e8m0") == 0xFFu);
  CHECK(enc(std::ldexp(1.4999f, 127), "e8m0") == 0xFEu);
  CHECK(enc(kInf, "e8m0") == 0xFFu);
  CHECK(enc(0.0f, "e8m0", Rounding::rne, Overflow::sat) == 0x00u);
  CHECK(enc(-1.0f, "e8m0", Rounding::rne, Overflow::sat) == 0x00u);
  CHECK(enc(kInf, "e8m0", Rounding::rne, Overflow::sat) == 0xFEu);
  CHECK(enc(kNaN, "e8m0", Rounding::rne, Overflow::sat) == 0xFFu);
  // sat: Inf -> +-max, overflow -> +-max.
  CHECK(enc(kInf, "float8_e4m3fn", Rounding::rne, Overflow::sat) == 0x7Eu);
  CHECK(enc(-kInf, "float8_e4m3fn", Rounding::rne, Overflow::sat) == 0xFEu);
  CHECK(enc(kInf, "float8_e5m2", Rounding::rne, Overflow::sat) == 0x7Bu);
  CHECK(enc(-1e30f, "float8_e5m2", Rounding::rne, Overflow::sat) == 0xFBu);
  CHECK(enc(kInf, "bfloat16", Rounding::rne, Overflow::sat) == 0x7F7Fu);
  CHECK(enc(-kInf, "float16", Rounding::rne, Overflow::sat) == 0xFBFFu);
  // NaN stays NaN under sat (lpx keeps the sign; CUDA's satfinite gives 0x7F).
  CHECK(enc(-kNaN, "float8_e4m3fn", Rounding::rne, Overflow::sat) == 0xFFu);
  // IEEE round-toward-zero overflows to max, not NaN/Inf (ml_dtypes' rtz differs).
  CHECK(enc(480.0f, "float8_e4m3fn", Rounding::rtz) == 0x7Eu);
  CHECK(enc(1e30f, "float8_e4m3fn", Rounding::rtz) == 0x7Eu);
  CHECK(enc(1e30f, "float8_e5m2", Rounding::rtz) == 0x7Bu);
  CHECK(enc(1e30f, "float8_e5m2", Rounding::rdn) == 0x7Bu);
  CHECK(enc(1e30f, "float8_e5m2", Rounding::rup) == 0x7Cu);
  CHECK(enc(-1e30f, "float8_e5m2", Rounding::rup) == 0xFBu);
  CHECK(enc(-1e30f, "float8_e5m2", Rounding::rdn) == 0xFCu);
  CHECK(enc(kInf, "float8_e5m2", Rounding::rtz) == 0x7Cu);  // Inf is exact: stays Inf
  CHECK(enc(449.0f, "float8_e4m3fn", Rounding::rup) == 0x7Fu);
  CHECK(enc(100000.0f, "float16", Rounding::rtz) == 0x7BFFu);
}

TEST_CASE("integers round then clamp; NaN -> 0", "[codec][exhaustive]") {
  CHECK(enc(7.5f, "int4") == 0x7u);     // rne: 8 (even), clamped to 7
  CHECK(enc(6.5f, "int4") == 0x6u);     // tie to even
  CHECK(enc(5.5f, "int4") == 0x6u);
  CHECK(enc(-8.6f, "int4") == 0x8u);    // -9 clamped to -8
  CHECK(enc(-7.5f, "int4") == 0x8u);    // tie -> -8 (even)
  CHECK(enc(-100.0f, "int4") == 0x8u);
  CHECK(enc(kInf, "int4") == 0x7u);
  CHECK(enc(-kInf, "int4") == 0x8u);
  CHECK(enc(kNaN, "int4") == 0x0u);
  CHECK(enc(-kNaN, "int8") == 0x0u);
  CHECK(enc(-1.0f, "uint2") == 0x0u);
  CHECK(enc(kNaN, "uint2") == 0x0u);
  CHECK(enc(3.4f, "uint2") == 0x3u);
  CHECK(enc(300.0f, "uint8") == 0xFFu);
  CHECK(enc(254.5f, "uint8") == 0xFEu);
  CHECK(enc(-128.4f, "int8") == 0x80u);
  CHECK(enc(1.0f, "mxint8_element") == 0x40u);       // 2^-6 fractional bits
  CHECK(enc(1.0f / 128, "mxint8_element") == 0x0u);  // tie 0 / 1/64 -> 0
  CHECK(enc(3.0f / 128, "mxint8_element") == 0x2u);  // tie 1/64 / 2/64 -> 2
  // int2 in every mode: values {-2, -1, 0, 1}, codes {2, 3, 0, 1}.
  struct Case {
    float x;
    uint32_t rne, rna, rtz, rup, rdn;
  };
  const Case cases[] = {
      {0.5f, 0, 1, 0, 1, 0},   {1.5f, 1, 1, 1, 1, 1},   {-0.5f, 0, 3, 0, 0, 3},
      {-1.5f, 2, 2, 3, 3, 2},  {-2.5f, 2, 2, 2, 2, 2},  {0.25f, 0, 0, 0, 1, 0},
      {-0.75f, 3, 3, 0, 0, 3}, {-1.25f, 3, 3, 3, 3, 2}, {0.75f, 1, 1, 0, 1, 0},
      {5.0f, 1, 1, 1, 1, 1},   {-kInf, 2, 2, 2, 2, 2},  {kNaN, 0, 0, 0, 0, 0},
      {-0.0f, 0, 0, 0, 0, 0},
  };
  for (const Case& c : cases) {
    INFO("x = " << c.x);
    CHECK(enc(c.x, "int2", Rounding::rne) == c.rne);
    CHECK(enc(c.x, "int2", Rounding::rna) == c.rna);
    CHECK(enc(c.x, "int2", Rounding::rtz) == c.rtz);
    CHECK(enc(c.x, "int2", Rounding::rup) == c.rup);
    CHECK(enc(c.x, "int2", Rounding::rdn) == c.rdn);
    CHECK(enc(c.x, "int2", Rounding::rne, Overflow::sat) == c.rne);
  }
}
