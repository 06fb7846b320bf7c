// The scalar codec (formats/codec.hpp) against an independent reference written here in
// double precision. The reference builds each format's value table from the descriptor
// fields with its own formula (std::ldexp; lpx::decode is only checked against it), then
// rounds by exact search over the sorted finite values, following codec.hpp's header
// comment as the spec: the grid extended by one step past the largest value, each mode's
// rule, then the overflow / NaN / -0 / e8m0 / integer policies.
//
// Inputs: all 2^16 bfloat16 bit patterns (as float32), every midpoint of every format,
// midpoints and values +-1 float32 ulp, values past max, float32 subnormals, zeros, Inf,
// NaN and random float32 bit patterns. Modes: rne, rna, rtz, rup, rdn and sr (several
// random words, sr_bits 32, 8, 3) under both overflow policies.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "lpx/formats/codec.hpp"
#include "lpx/formats/element_format.hpp"
#include "lpx/numerics/float_bits.hpp"

namespace {

using lpx::ElementFormat;
using lpx::Overflow;
using lpx::Rounding;
using lpx::Specials;

const char* const kGeneric[] = {"e1m1", "e2m0", "e1m2", "e3m0",   "e2m2",
                                "e1m0", "e3m3", "e2m2fn", "e3m2b2", "ue4m3"};

std::vector<ElementFormat> all_formats() {
  std::vector<ElementFormat> v;
  for (const ElementFormat* f : lpx::named_formats()) v.push_back(*f);
  for (const char* name : kGeneric) v.push_back(lpx::format_by_name(name));
  return v;
}

float f32(uint32_t b) { return lpx::bits_to_float(b); }
uint32_t bits(float x) { return lpx::float_to_bits(x); }

// ---------------------------------------------------------------------------------------
// The reference.

struct Reference {
  ElementFormat f;
  std::vector<double> value;  // by code; NaN codes hold NaN, Inf codes +-Inf
  bool m0 = false;            // M = 0 float format: the only significand digit is implicit
  // Rounding grid of magnitudes, increasing, with the magnitude code of each point; the
  // last point is the extended one (max + one step of the top binade), code max + 1.
  std::vector<double> grid;
  std::vector<uint32_t> grid_code;
  uint32_t max_code = 0;  // magnitude code of the largest finite value
  uint32_t nan_code = 0;  // canonical positive NaN, if any
  bool has_nan = false, has_inf = false;
  uint32_t sign_mask = 0;
  // Integers.
  double int_pos_max = 0, int_neg_max = 0;  // in code units (magnitudes)
};

// Value of a float-format code, from the field definitions in element_format.hpp.
double float_value(const ElementFormat& f, uint32_t code, bool& is_nan, bool& is_inf) {
  const int E = f.exponent_bits, M = f.mantissa_bits;
  const uint32_t sign_mask = f.is_signed ? 1u << (E + M) : 0u;
  const bool neg = (code & sign_mask) != 0;
  const uint32_t mag = code & ((1u << (E + M)) - 1);
  const uint32_t e = mag >> M, m = mag & ((1u << M) - 1);
  const uint32_t e_all = (1u << E) - 1, m_all = (1u << M) - 1;
  is_nan = is_inf = false;
  switch (f.specials) {
    case Specials::ieee:
      if (e == e_all) (m == 0 ? is_inf : is_nan) = true;
      break;
    case Specials::fn: is_nan = (e == e_all && m == m_all); break;
    case Specials::fnuz: is_nan = (code == sign_mask); break;
    case Specials::none: break;
  }
  if (is_nan) return std::numeric_limits<double>::quiet_NaN();
  double v;
  if (is_inf) {
    v = std::numeric_limits<double>::infinity();
  } else if (e == 0 && f.has_zero) {
    v = std::ldexp(static_cast<double>(m), 1 - f.bias - M);  // subnormal
  } else {
    v = std::ldexp(static_cast<double>(m + (1u << M)), static_cast<int>(e) - f.bias - M);
  }
  return neg ? -v : v;
}

Reference make_reference(const ElementFormat& f) {
  Reference r;
  r.f = f;
  const uint32_t n = 1u << f.bits;
  r.sign_mask = f.is_signed ? 1u << (f.bits - 1) : 0u;
  r.value.resize(n);
  if (f.is_integer) {
    for (uint32_t c = 0; c < n; ++c) {
      const int64_t v = (f.is_signed && c >= n / 2) ? static_cast<int64_t>(c) - n : c;
      r.value[c] = std::ldexp(static_cast<double>(v), -f.bias);
    }
    r.int_pos_max = f.is_signed ? n / 2 - 1 : n - 1;
    r.int_neg_max = f.is_signed ? (f.symmetric ? n / 2 - 1 : n / 2) : 0;
    return r;
  }
  r.m0 = f.mantissa_bits == 0;
  r.has_inf = f.specials == Specials::ieee;
  r.has_nan = f.specials != Specials::none;
  const int E = f.exponent_bits, M = f.mantissa_bits;
  // Canonical NaN: ieee: exponent all ones + top mantissa bit; fn: all ones; fnuz: -0 code.
  if (f.specials == Specials::ieee) r.nan_code = (((1u << E) - 1) << M) | (M ? 1u << (M - 1) : 0);
  if (f.specials == Specials::fn) r.nan_code = (1u << (E + M)) - 1;
  if (f.specials == Specials::fnuz) r.nan_code = r.sign_mask;
  for (uint32_t c = 0; c < n; ++c) {
    bool is_nan, is_inf;
    r.value[c] = float_value(f, c, is_nan, is_inf);
  }
  for (uint32_t mag = 0; mag < (1u << (E + M)); ++mag) {
    bool is_nan, is_inf;
    const double v = float_value(f, mag, is_nan, is_inf);
    if (is_nan || is_inf) continue;
    // e8m0 (no zero): below 2^-126 code 0 stands in for zero on the rounding ladder.
    r.grid.push_back(!f.has_zero && mag == 0 ? 0.0 : v);
    r.grid_code.push_back(mag);
    r.max_code = mag;
  }
  const double max = r.grid.back();
  const int emax = std::ilogb(max);
  r.grid.push_back(max + std::ldexp(1.0, emax - M));
  r.grid_code.push_back(r.max_code + 1);
  return r;
}

struct Mode {
  Rounding round;
  uint32_t random = 0;
  int sr_bits = 32;
};

// Does the magnitude round up from grid[i] to grid[i+1]? a is strictly between them.
bool rounds_up(const Reference& r, size_t i, double a, bool neg, const Mode& mode) {
  const double lo = r.grid[i], hi = r.grid[i + 1];
  switch (mode.round) {
    case Rounding::rne: {
      const double mid = lo + (hi - lo) / 2;  // exact: gaps are powers of two
      if (a != mid) return a > mid;
      // Tie: the even significand. For M >= 1 that is the even magnitude code; for M = 0
      // formats the only digit is the implicit 1 (odd) except at zero, so ties go up
      // (docs/formats.md#e8m0: e8m0's tie 1.5*2^k goes up) except the tie with zero (even).
      if (!r.m0 || r.f.is_integer) return (r.grid_code[i] & 1) != 0;
      return i != 0;
    }
    case Rounding::rna: return a >= lo + (hi - lo) / 2;
    case Rounding::rtz: return false;
    case Rounding::rup: return !neg;
    case Rounding::rdn: return neg;
    case Rounding::sr: {
      const int n = mode.sr_bits;
      const double frac = (a - lo) / (hi - lo);  // exact
      const uint64_t fl = static_cast<uint64_t>(std::floor(std::ldexp(frac, n)));
      const uint64_t rr = static_cast<uint64_t>(mode.random) >> (32 - n);
      return fl + rr >= (uint64_t{1} << n);
    }
  }
  return false;
}

// Where a magnitude lies on the grid: index of lo (a in [grid[i], grid[i+1])), or past
// the extended point.
struct Place {
  size_t i;
  bool exact;
  bool beyond;  // a >= extended point: every mode overflows
};
Place place(const Reference& r, double a) {
  if (a >= r.grid.back()) return {r.grid.size() - 1, false, true};
  const auto it = std::upper_bound(r.grid.begin(), r.grid.end(), a);  // binary search
  const size_t i = static_cast<size_t>(it - r.grid.begin()) - 1;
  return {i, r.grid[i] == a, false};
}

uint32_t ref_integer(const Reference& r, float x, const Mode& mode) {
  if (std::isnan(x)) return 0;
  const bool neg = std::signbit(x);
  const double limit = neg ? r.int_neg_max : r.int_pos_max;
  double q;
  if (std::isinf(x)) {
    q = limit;
  } else {
    const double a = std::ldexp(std::fabs(static_cast<double>(x)), r.f.bias);  // code units
    const double lo = std::floor(a);
    q = lo;
    if (a != lo) {
      bool up;
      switch (mode.round) {
        case Rounding::rne: up = a - lo > 0.5 || (a - lo == 0.5 && std::fmod(lo, 2) != 0); break;
        case Rounding::rna: up = a - lo >= 0.5; break;
        case Rounding::rtz: up = false; break;
        case Rounding::rup: up = !neg; break;
        case Rounding::rdn: up = neg; break;
        default: {
          const int n = mode.sr_bits;
          const double fl = std::floor(std::ldexp(a - lo, n));
          up = fl + static_cast<double>(static_cast<uint64_t>(mode.random) >> (32 - n)) >=
               std::ldexp(1.0, n);
        }
      }
      q = lo + (up ? 1 : 0);
    }
    q = std::min(q, limit);
  }
  const int64_t v = neg ? -static_cast<int64_t>(q) : static_cast<int64_t>(q);
  return static_cast<uint32_t>(v) & (r.f.code_mask);
}

// The reference encoder; `pl` is place(r, |x|) (computed once per input).
uint32_t ref_encode(const Reference& r, float x, const Place& pl, const Mode& mode,
                    Overflow ovf) {
  if (r.f.is_integer) return ref_integer(r, x, mode);
  const bool neg = std::signbit(x);
  const uint32_t sign = neg ? r.sign_mask : 0u;
  // NaN: the canonical quiet NaN with the input's sign; fnuz and unsigned: the single NaN;
  // no NaN in the format: ml_dtypes' rule (+NaN -> the -0 code, -NaN -> +0).
  if (std::isnan(x)) {
    if (!r.has_nan) return neg ? 0u : r.sign_mask;
    if (r.f.specials == Specials::fnuz || !r.f.is_signed) return r.nan_code;
    return r.nan_code | sign;
  }
  // Unsigned formats: zero and negative inputs have no code: NaN (ieee) or code 0 (sat).
  if (!r.f.is_signed && (neg || x == 0)) return (ovf == Overflow::ieee && r.has_nan) ? r.nan_code : 0u;
  // Zero-less formats (e8m0) outside rne: code 0 is its true value 2^(emin-1), not the
  // ml_dtypes ladder's stand-in for zero; everything at or below it gives code 0.
  if (!r.f.has_zero && mode.round != Rounding::rne && std::isfinite(x)) {
    const double a = std::fabs(static_cast<double>(x));
    const double least = r.value[0], next = r.grid[1];
    if (a <= least) return 0u;
    if (a < next) {
      bool up = false;
      switch (mode.round) {
        case Rounding::rna: up = a >= (least + next) / 2; break;
        case Rounding::rup: up = true; break;
        case Rounding::sr: {
          const int n = mode.sr_bits;
          const double fl = std::floor(std::ldexp((a - least) / (next - least), n));
          up = fl + static_cast<double>(static_cast<uint64_t>(mode.random) >> (32 - n)) >=
               std::ldexp(1.0, n);
          break;
        }
        default: up = false;  // rtz, rdn (positive values only here)
      }
      return up ? r.grid_code[1] : 0u;
    }
  }
  // Round the magnitude on the extended grid.
  bool overflow = std::isinf(x) || pl.beyond;
  uint32_t mag = 0;
  if (!overflow) {
    size_t j = pl.i;
    if (!pl.exact && rounds_up(r, pl.i, std::fabs(static_cast<double>(x)), neg, mode)) ++j;
    mag = r.grid_code[j];
    overflow = j == r.grid.size() - 1;
  }
  if (overflow) {
    const bool toward_zero = mode.round == Rounding::rtz || (mode.round == Rounding::rdn && !neg) ||
                             (mode.round == Rounding::rup && neg);
    const bool to_max = ovf == Overflow::sat || (toward_zero && !std::isinf(x));
    if (to_max || (!r.has_inf && !r.has_nan)) return r.max_code | sign;
    if (r.has_inf) return (r.max_code + 1) | sign;  // Inf follows the largest finite code
    if (r.f.specials == Specials::fnuz) return r.nan_code;
    return r.nan_code | sign;
  }
  if (mag == 0 && r.f.specials == Specials::fnuz) return 0u;  // no -0
  return mag | sign;
}

// ---------------------------------------------------------------------------------------
// Inputs.

void add_float(std::vector<float>& v, double d) {
  const float x = static_cast<float>(d);
  if (std::isfinite(x) && static_cast<double>(x) == d) v.push_back(x);
}

void add_around(std::vector<float>& v, double d) {
  const float x = static_cast<float>(d);
  if (!std::isfinite(x) || static_cast<double>(x) != d) return;
  v.push_back(x);
  v.push_back(std::nextafter(x, std::numeric_limits<float>::infinity()));
  v.push_back(std::nextafter(x, -std::numeric_limits<float>::infinity()));
}

// Points of one format: every value and every midpoint of neighbouring values (and the
// extended point), each +-1 float32 ulp, both signs; values just above max.
std::vector<float> format_points(const Reference& r) {
  std::vector<double> mags;
  if (r.f.is_integer) {
    for (double q = 0; q <= std::max(r.int_pos_max, r.int_neg_max) + 1; ++q)
      mags.push_back(std::ldexp(q, -r.f.bias));
  } else {
    mags = r.grid;
    const double max = mags[mags.size() - 2], ext = mags.back();
    for (int k = 1; k <= 30; ++k) mags.push_back(max + std::ldexp(ext - max, -k));
    mags.push_back(2 * ext);
    mags.push_back(4 * ext);
    for (uint32_t c = 0; c < r.value.size(); ++c)  // includes e8m0's 2^-127
      if (std::isfinite(r.value[c])) mags.push_back(std::fabs(r.value[c]));
  }
  std::sort(mags.begin(), mags.end());
  std::vector<float> out;
  for (size_t i = 0; i < mags.size(); ++i) {
    for (double s : {1.0, -1.0}) {
      add_around(out, s * mags[i]);
      if (i + 1 < mags.size()) {
        const double mid = mags[i] + (mags[i + 1] - mags[i]) / 2;
        add_around(out, s * mid);
        // Quarter points exercise SR with few random bits.
        add_float(out, s * (mags[i] + (mags[i + 1] - mags[i]) / 4));
        add_float(out, s * (mags[i] + 3 * (mags[i + 1] - mags[i]) / 4));
      }
    }
  }
  return out;
}

std::vector<float> shared_inputs() {
  std::vector<float> v;
  for (uint32_t b = 0; b < 65536; ++b) v.push_back(f32(b << 16));  // every bfloat16
  // float32 subnormals, zeros, Inf, NaN (several payloads, both signs), extremes.
  for (uint32_t b : {0x1u, 0x2u, 0x3u, 0x7u, 0x400000u, 0x400001u, 0x3fffffu, 0x7fffffu,
                     0x123456u, 0x0u, 0x7f7fffffu, 0x7f800000u, 0x7fc00000u, 0x7f800001u,
                     0x7fffffffu, 0x7fa00000u, 0x00800000u, 0x00800001u})
    for (uint32_t s : {0u, 0x80000000u}) v.push_back(f32(b | s));
  for (int e = -149; e <= 127; ++e) add_around(v, std::ldexp(1.0, e)), add_around(v, -std::ldexp(1.0, e));
  std::mt19937 rng(12345);
  for (int i = 0; i < 300000; ++i) v.push_back(f32(static_cast<uint32_t>(rng())));
  // Random values of moderate magnitude (where most formats have their grids).
  std::uniform_real_distribution<double> u(-40.0, 12.0);
  for (int i = 0; i < 100000; ++i) {
    const float x = static_cast<float>(std::exp2(u(rng)));
    v.push_back((i & 1) ? -x : x);
  }
  return v;
}

std::vector<Mode> modes() {
  std::vector<Mode> m = {{Rounding::rne}, {Rounding::rna}, {Rounding::rtz}, {Rounding::rup},
                         {Rounding::rdn}};
  for (uint32_t word : {0x00000000u, 0xFFFFFFFFu, 0x80000000u, 0x7FFFFFFFu, 0x3C6EF372u,
                        0xA54FF53Au, 0x1F83D9ABu})
    for (int n : {32, 8, 3}) m.push_back({Rounding::sr, word, n});
  return m;
}

std::string hex(uint32_t b) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%08x", b);
  return buf;
}

}  // namespace

TEST_CASE("the reference value table is lpx::decode, bit for bit", "[codec][reference]") {
  for (const ElementFormat& f : all_formats()) {
    INFO("format " << f.name);
    const Reference r = make_reference(f);
    int mismatches = 0;
    for (uint32_t c = 0; c < r.value.size(); ++c) {
      const float got = lpx::decode(c, f);
      const double want = r.value[c];
      const bool ok = std::isnan(want)
                          ? std::isnan(got) &&
                                std::signbit(got) == (f.specials != Specials::fnuz &&
                                                      (c & r.sign_mask) != 0)
                          : bits(got) == bits(static_cast<float>(want));
      if (!ok && ++mismatches < 4) FAIL_CHECK("code " << hex(c) << " decodes to " << got << ", want " << want);
    }
    CHECK(mismatches == 0);
    if (!f.is_integer) {
      // Grid sanity: strictly increasing, and its largest finite point is max_finite.
      CHECK(std::is_sorted(r.grid.begin(), r.grid.end()));
      CHECK(std::adjacent_find(r.grid.begin(), r.grid.end()) == r.grid.end());
      CHECK(r.grid[r.grid.size() - 2] == lpx::max_finite(f));
      CHECK(r.max_code == f.max_magnitude);
    }
  }
}

TEST_CASE("encode equals the exact-search reference in every mode", "[codec][reference]") {
  const std::vector<float> shared = shared_inputs();
  const std::vector<ElementFormat> formats = all_formats();
  // Every format's points go to every format (cheap for the small ones), except the
  // 16-bit formats' own large point sets, which are checked on their own format.
  std::vector<float> small_points;
  std::vector<Reference> refs;
  for (const ElementFormat& f : formats) {
    refs.push_back(make_reference(f));
    if (f.bits <= 8) {
      const std::vector<float> p = format_points(refs.back());
      small_points.insert(small_points.end(), p.begin(), p.end());
    }
  }
  const std::vector<Mode> mode_list = modes();
  size_t total_inputs = shared.size() + small_points.size();
  size_t checks = 0;
  for (const Reference& r : refs) {
    const ElementFormat& f = r.f;
    std::vector<float> inputs = shared;
    inputs.insert(inputs.end(), small_points.begin(), small_points.end());
    if (f.bits > 8) {
      const std::vector<float> own = format_points(r);
      inputs.insert(inputs.end(), own.begin(), own.end());
      total_inputs += own.size();
    }
    int64_t mismatches = 0;
    std::string first;
    for (const float x : inputs) {
      const Place pl = f.is_integer ? Place{} : place(r, std::fabs(static_cast<double>(x)));
      for (const Mode& m : mode_list) {
        for (Overflow o : {Overflow::ieee, Overflow::sat}) {
          const uint32_t got = lpx::encode(x, f, m.round, o, m.random, m.sr_bits);
          const uint32_t want = ref_encode(r, x, pl, m, o);
          ++checks;
          if (got != want && ++mismatches <= 3) {
            first += "x=" + hex(bits(x)) + " (" + std::to_string(x) + ") mode " +
                     std::to_string(static_cast<int>(m.round)) + " r=" + hex(m.random) +
                     " n=" + std::to_string(m.sr_bits) + " ovf " +
                     std::to_string(static_cast<int>(o)) + ": lpx " + hex(got) + " ref " +
                     hex(want) + "\n";
          }
        }
      }
    }
    INFO("format " << f.name << "\n" << first);
    REQUIRE(mismatches == 0);
  }
  INFO("inputs " << total_inputs);
  CHECK(total_inputs >= 1000000);
  CHECK(checks > 100000000);
}

TEST_CASE("the reference itself pins known answers", "[codec][reference]") {
  // Guards against the reference and the codec agreeing on a shared mistake.
  const Reference e4 = make_reference(lpx::fmt8::e4m3fn);
  const Reference e8 = make_reference(lpx::fmt8::e8m0);
  auto ref = [](const Reference& r, float x, Rounding m, Overflow o = Overflow::ieee) {
    return ref_encode(r, x, place(r, std::fabs(static_cast<double>(x))), Mode{m}, o);
  };
  CHECK(ref(e4, 464.0f, Rounding::rne) == 0x7Eu);
  CHECK(ref(e4, 465.0f, Rounding::rne) == 0x7Fu);
  CHECK(ref(e4, 480.0f, Rounding::rtz) == 0x7Eu);
  CHECK(ref(e4, -1e-30f, Rounding::rne) == 0x80u);
  CHECK(ref(e4, 0.015625f * 1.0625f, Rounding::rne) == 0x08u);  // 2^-6 * (1 + 1/16): tie -> even
  CHECK(ref(e8, 3.0f, Rounding::rne) == 129u);
  CHECK(ref(e8, 1.5f, Rounding::rne) == 128u);
  CHECK(ref(e8, std::ldexp(1.5f, 127), Rounding::rne) == 0xFFu);
  CHECK(ref(e8, std::ldexp(1.5f, 127), Rounding::rne, Overflow::sat) == 0xFEu);
  CHECK(ref(e8, std::ldexp(1.2f, -127), Rounding::rne) == 1u);
  const Reference i4 = make_reference(lpx::fmtint::int4);
  CHECK(ref_integer(i4, 7.5f, Mode{Rounding::rne}) == 7u);
  CHECK(ref_integer(i4, -8.6f, Mode{Rounding::rne}) == 8u);
}
