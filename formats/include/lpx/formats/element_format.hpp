// What an element format is: one descriptor, from which every limit, the encoder and
// the decoder are derived. A named format (float8_e4m3fn, float4_e2m1fn, int4, ...) is
// a row of data, not a code path (docs/formats.md#descriptor).
//
// Floating formats: [sign][exponent: E bits][mantissa: M bits], value
//   normal    (-1)^s * 2^(e - bias) * (1 + m / 2^M)       for exponent field e >= 1
//   subnormal (-1)^s * 2^(1 - bias) * (m / 2^M)           for e == 0
// Special values are chosen by `Specials`:
//   ieee  exponent all ones: Inf (m = 0) and NaN (m != 0)          e5m2, e4m3, e3m4, bf16, f16
//   fn    no Inf; the one NaN magnitude is all ones (S.1111.111)   e4m3fn, e8m0fnu
//   fnuz  no Inf, no -0; the single NaN is the -0 code (0x80)      e4m3fnuz, e5m2fnuz, e4m3b11fnuz
//   none  every code is finite                                     OCP FP6/FP4, generic eXmY
//   p3109e, p3109f  IEEE P3109 (p3109_k<K>p<P><s|u><e|f>): one zero, one NaN; signed: NaN =
//         the -0 code (0x80 for K = 8), extended (e): +-Inf = the largest magnitude code
//         (0x7F, 0xFF); unsigned: NaN = all ones, extended: +Inf = all ones - 1; finite (f):
//         no Inf. Precision P counts the implicit bit: M = P - 1 (docs/formats.md#p3109).
// e8m0fnu is unsigned and has no zero: its exponent field 0 means 2^-127.
// Two refinements serve user-defined formats (docs/formats.md#format-descriptor-files):
//   reserved_top  the largest reserved_top finite magnitudes that `specials` leaves are
//                 reserved instead: never produced, decoded as NaN (hardware that keeps
//                 codes for its own use); the largest finite value moves down with them.
//   subnormals    false: the codes with exponent field 0 and a nonzero mantissa are not
//                 values; inputs below 2^emin round on {0, 2^emin}, and those codes
//                 decode to +-0 (as denormals-are-zero hardware reads them).
//
// Integer formats: two's complement (or unsigned) codes, value = code * 2^-frac_bits,
// so MXINT8's element (implicit 2^-6) is int8 with frac_bits = 6. Symmetric integer
// formats never produce the most negative code.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "lpx/numerics/hd.hpp"

namespace lpx {

enum class Specials : uint8_t { ieee, fn, fnuz, none, p3109e, p3109f };
enum class Overflow : uint8_t { sat, ieee };

struct ElementFormat {
  char name[32] = {};
  bool is_integer = false;
  bool is_signed = true;
  bool has_zero = true;     // false only for e8m0-like scale formats
  bool symmetric = false;   // integers: clamp negatives to -max instead of -max-1
  uint8_t bits = 0;         // storage bits of one code (<= 16)
  uint8_t exponent_bits = 0;
  uint8_t mantissa_bits = 0;  // integers: bits - sign bit
  int16_t bias = 0;           // floats: exponent bias; integers: fractional bits
  Specials specials = Specials::none;
  bool subnormals = true;     // floats: false leaves out the subnormal codes (above)
  uint16_t reserved_top = 0;  // floats: reserved magnitudes just below the specials (above)

  // Derived by finalize(): magnitude codes exclude the sign bit.
  uint32_t max_magnitude = 0;  // largest finite magnitude code
  uint32_t inf_magnitude = 0;  // ieee only
  uint32_t nan_code = 0;       // canonical positive NaN code (fnuz: 0x80 of an 8-bit format)
  uint32_t sign_mask = 0;      // 0 for unsigned formats
  uint32_t code_mask = 0;      // (1 << bits) - 1

  LPX_HD constexpr bool has_inf() const {
    return specials == Specials::ieee || specials == Specials::p3109e;
  }
  LPX_HD constexpr bool has_nan() const { return specials != Specials::none; }
  LPX_HD constexpr bool is_p3109() const {
    return specials == Specials::p3109e || specials == Specials::p3109f;
  }
  // One unsigned NaN (nan_code) and no -0: a zero result is code 0 whatever the sign.
  LPX_HD constexpr bool single_nan() const { return specials == Specials::fnuz || is_p3109(); }
  LPX_HD constexpr int emin() const { return 1 - bias; }  // exponent of the min normal
  LPX_HD constexpr int emax() const {  // exponent of the largest finite value
    return is_integer ? (bits - (is_signed ? 1 : 0) - 1 - bias)
                      : static_cast<int>(max_magnitude >> mantissa_bits) - bias;
  }
  // A reserved code (reserved_top, above): its magnitude lies between the largest finite
  // one and the largest the specials kind alone would leave finite.
  LPX_HD constexpr bool is_reserved_magnitude(uint32_t magnitude) const {
    return magnitude > max_magnitude && magnitude <= max_magnitude + reserved_top;
  }
  std::string_view name_view() const { return name; }
  // Every field, the name's bytes included: two formats are equal only when every encode
  // and decode gives the same bits (the CUDA module picks its compiled-in formats by it).
  bool operator==(const ElementFormat&) const = default;
};

// Fills the derived fields; called once by every constructor below.
constexpr ElementFormat finalize(ElementFormat f) {
  f.code_mask = (1u << f.bits) - 1;
  f.sign_mask = f.is_signed ? 1u << (f.bits - 1) : 0u;
  const uint32_t magnitude_mask = f.code_mask & ~f.sign_mask;
  if (f.is_integer) {
    f.max_magnitude = magnitude_mask;  // signed: 2^(bits-1) - 1
    return f;
  }
  switch (f.specials) {
    case Specials::ieee:
      f.inf_magnitude = ((1u << f.exponent_bits) - 1) << f.mantissa_bits;
      f.max_magnitude = f.inf_magnitude - 1;
      // Quiet NaN: exponent all ones and the top mantissa bit (IEEE 754-2019 6.2.1).
      f.nan_code = f.inf_magnitude | (f.mantissa_bits > 0 ? 1u << (f.mantissa_bits - 1) : 0u);
      break;
    case Specials::fn:
      f.max_magnitude = magnitude_mask - 1;
      f.nan_code = magnitude_mask;
      break;
    case Specials::fnuz:
      f.max_magnitude = magnitude_mask;
      f.nan_code = f.sign_mask;
      break;
    case Specials::none:
      f.max_magnitude = magnitude_mask;
      break;
    case Specials::p3109e:
    case Specials::p3109f: {
      // Signed: NaN is the -0 code, Inf the largest magnitude. Unsigned (no sign bit): NaN
      // is all ones and Inf the code below it. Finite domain: that Inf code is the max.
      const bool ext = f.specials == Specials::p3109e;
      const uint32_t top = f.is_signed ? magnitude_mask : magnitude_mask - 1;  // Inf or max
      f.nan_code = f.is_signed ? f.sign_mask : f.code_mask;
      f.inf_magnitude = ext ? top : 0u;
      f.max_magnitude = ext ? top - 1 : top;
      break;
    }
  }
  f.max_magnitude -= f.reserved_top;  // checked by make_described_format to leave a value
  return f;
}

constexpr ElementFormat make_float_format(std::string_view name, int exponent_bits,
                                          int mantissa_bits, int bias, Specials specials,
                                          bool is_signed = true, bool has_zero = true) {
  ElementFormat f;
  for (size_t i = 0; i < name.size() && i + 1 < sizeof(f.name); ++i) f.name[i] = name[i];
  f.is_signed = is_signed;
  f.has_zero = has_zero;
  f.bits = static_cast<uint8_t>(exponent_bits + mantissa_bits + (is_signed ? 1 : 0));
  f.exponent_bits = static_cast<uint8_t>(exponent_bits);
  f.mantissa_bits = static_cast<uint8_t>(mantissa_bits);
  f.bias = static_cast<int16_t>(bias);
  f.specials = specials;
  return finalize(f);
}

constexpr ElementFormat make_int_format(std::string_view name, int bits, bool is_signed,
                                        int frac_bits = 0, bool symmetric = false) {
  ElementFormat f;
  for (size_t i = 0; i < name.size() && i + 1 < sizeof(f.name); ++i) f.name[i] = name[i];
  f.is_integer = true;
  f.is_signed = is_signed;
  f.symmetric = symmetric;
  f.bits = static_cast<uint8_t>(bits);
  f.mantissa_bits = static_cast<uint8_t>(bits - (is_signed ? 1 : 0));
  f.bias = static_cast<int16_t>(frac_bits);
  f.specials = Specials::none;
  return finalize(f);
}

// IEEE P3109 format p3109_k<k>p<p><s|u><e|f> as gfloat defines it: k bits, precision p
// (implicit bit included, so p - 1 mantissa bits); signed: k - p exponent bits, bias
// floor(2^(k-p-1)); unsigned: k - p + 1 exponent bits, bias 2^(k-p). Subnormals always.
// Needs 1 <= p < k <= 16 (format_by_name checks, and that the values are float32s).
constexpr ElementFormat make_p3109_format(int k, int p, bool is_signed, bool extended) {
  char name[32] = "p3109_k";
  int n = 7;
  const auto put_int = [&](int v) {
    if (v >= 10) name[n++] = static_cast<char>('0' + v / 10);
    name[n++] = static_cast<char>('0' + v % 10);
  };
  put_int(k);
  name[n++] = 'p';
  put_int(p);
  name[n++] = is_signed ? 's' : 'u';
  name[n++] = extended ? 'e' : 'f';
  const int exponent_bits = is_signed ? k - p : k - p + 1;
  const int bias = is_signed ? (k - p - 1 >= 0 ? 1 << (k - p - 1) : 0) : 1 << (k - p);
  return make_float_format(std::string_view(name, static_cast<size_t>(n)), exponent_bits, p - 1,
                           bias, extended ? Specials::p3109e : Specials::p3109f, is_signed);
}

// The named formats (names as ml_dtypes and PyTorch spell them).
namespace fmt8 {
inline constexpr ElementFormat e4m3fn = make_float_format("float8_e4m3fn", 4, 3, 7, Specials::fn);
inline constexpr ElementFormat e5m2 = make_float_format("float8_e5m2", 5, 2, 15, Specials::ieee);
inline constexpr ElementFormat e4m3fnuz = make_float_format("float8_e4m3fnuz", 4, 3, 8, Specials::fnuz);
inline constexpr ElementFormat e5m2fnuz = make_float_format("float8_e5m2fnuz", 5, 2, 16, Specials::fnuz);
inline constexpr ElementFormat e4m3b11fnuz = make_float_format("float8_e4m3b11fnuz", 4, 3, 11, Specials::fnuz);
inline constexpr ElementFormat e4m3 = make_float_format("float8_e4m3", 4, 3, 7, Specials::ieee);
inline constexpr ElementFormat e3m4 = make_float_format("float8_e3m4", 3, 4, 3, Specials::ieee);
inline constexpr ElementFormat e8m0 = make_float_format("float8_e8m0fnu", 8, 0, 127, Specials::fn,
                                                        /*is_signed=*/false, /*has_zero=*/false);
}  // namespace fmt8
namespace fmt6 {
inline constexpr ElementFormat e3m2 = make_float_format("float6_e3m2fn", 3, 2, 3, Specials::none);
inline constexpr ElementFormat e2m3 = make_float_format("float6_e2m3fn", 2, 3, 1, Specials::none);
}  // namespace fmt6
namespace fmt4 {
inline constexpr ElementFormat e2m1 = make_float_format("float4_e2m1fn", 2, 1, 1, Specials::none);
}  // namespace fmt4
namespace fmt16 {
inline constexpr ElementFormat bf16 = make_float_format("bfloat16", 8, 7, 127, Specials::ieee);
inline constexpr ElementFormat f16 = make_float_format("float16", 5, 10, 15, Specials::ieee);
}  // namespace fmt16
namespace fmtint {
inline constexpr ElementFormat int8 = make_int_format("int8", 8, true);
inline constexpr ElementFormat int4 = make_int_format("int4", 4, true);
inline constexpr ElementFormat int2 = make_int_format("int2", 2, true);
inline constexpr ElementFormat uint8 = make_int_format("uint8", 8, false);
inline constexpr ElementFormat uint4 = make_int_format("uint4", 4, false);
inline constexpr ElementFormat uint2 = make_int_format("uint2", 2, false);
// MXINT8 element (OCP MX v1.0): int8 with an implicit scale of 2^-6, symmetric.
inline constexpr ElementFormat mxint8 = make_int_format("mxint8_element", 8, true, 6, true);
}  // namespace fmtint

// Every named format, in display order.
std::span<const ElementFormat* const> named_formats();
// Aliases as (alias, canonical name) pairs.
struct FormatAlias {
  std::string_view alias;
  std::string_view canonical;
};
std::span<const FormatAlias> format_aliases();

// Looks a format up by canonical name or alias, else parses the generic grammar
//   [u]e<X>m<Y>[b<BIAS>][fn|fnuz|ieee]
// (sign + X exponent bits + Y mantissa bits; bias 2^(X-1)-1 by default, one more with
// fnuz; every code finite unless a suffix says otherwise; a leading u drops the sign).
// Throws std::invalid_argument with the list of known names.
ElementFormat format_by_name(std::string_view name);

// Value-level properties, for `lpx info` and tests.
double max_finite(const ElementFormat& f);
double min_normal(const ElementFormat& f);     // floats only
double min_subnormal(const ElementFormat& f);  // smallest positive value
// "Inf and NaN (IEEE: exponent all ones)", with "; N reserved codes" and "; no subnormals"
// where the descriptor says so.
std::string describe_specials(const ElementFormat& f);

}  // namespace lpx
