// User-defined formats with reserved codes and without subnormals
// (docs/formats.md#format-descriptor-files): formats built from descriptors that list their
// NaN, Inf and reserved codes one by one, or switch subnormals off, against a reference
// written here from the definitions alone, in double:
//   values   a listed NaN or reserved code is NaN, a listed Inf code is +-Inf; otherwise
//            (-1)^s 2^(e - bias) (1 + m/2^M), or below the normals (e = 0)
//            2^(1 - bias) m/2^M with subnormals and 0 without.
//   encode   |x| rounded on the grid of its binade extended past the largest finite value
//            (step 2^(e - M); below 2^emin, 2^(emin - M) with subnormals and 2^emin without)
//            with the mode computed by floor/ceil/nearbyint, then: above the largest finite
//            value, +-max (sat, or a mode rounding toward zero) or the Inf code, else the
//            NaN code, else max (ieee); a zero keeps its sign where the format has -0.
// The scalar codec, the array casts (SIMD where the dispatcher takes the format), the
// array decode and block quantization must all equal it; the descriptor's validation
// refuses overlapping, out-of-range, misplaced and layout-less code lists.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "lpx/formats/block_format.hpp"
#include "lpx/formats/cast.hpp"
#include "lpx/formats/codec.hpp"
#include "lpx/formats/format_registry.hpp"
#include "lpx/formats/quantize.hpp"
#include "lpx/numerics/float_bits.hpp"
#include "lpx/numerics/philox.hpp"

namespace {

using lpx::ElementFormat;
using lpx::Overflow;
using lpx::Rounding;

struct Layout {
  lpx::FormatDescriptor d;
  std::vector<uint32_t> nan, inf, reserved;  // the codes the test states, both signs
  bool negative_zero = true;                 // a -0 code exists (not fnuz)
  uint32_t nan_pos = 0, nan_neg = 0;         // codes of +NaN and -NaN inputs
};

lpx::FormatDescriptor desc(const char* name, int E, int M, int bias, std::optional<std::string> specials,
                           bool subnormals) {
  lpx::FormatDescriptor d;
  d.name = name;
  d.exponent_bits = E;
  d.mantissa_bits = M;
  d.bias = bias;
  d.specials = std::move(specials);
  d.subnormals = subnormals;
  return d;
}

std::vector<Layout> layouts() {
  std::vector<Layout> v;
  {  // e4m3 with fn's NaN listed (the kind is found from the lists) and two magnitudes reserved
    Layout l{desc("t_e4m3_res2", 4, 3, 7, std::nullopt, true), {0x7F, 0xFF}, {}, {0x7D, 0x7E, 0xFD, 0xFE}};
    l.nan_pos = 0x7F;
    l.nan_neg = 0xFF;
    v.push_back(l);
  }
  {  // e5m2 with IEEE's specials listed and the largest finite magnitude reserved
    Layout l{desc("t_e5m2_res1", 5, 2, 15, std::nullopt, true),
             {0x7D, 0x7E, 0x7F, 0xFD, 0xFE, 0xFF}, {0x7C, 0xFC}, {0x7B, 0xFB}};
    l.nan_pos = 0x7E;
    l.nan_neg = 0xFE;
    v.push_back(l);
  }
  {  // e4m3fn without subnormals
    Layout l{desc("t_e4m3_nosub", 4, 3, 7, "fn", false), {0x7F, 0xFF}, {}, {}};
    l.nan_pos = 0x7F;
    l.nan_neg = 0xFF;
    v.push_back(l);
  }
  {  // FP4 without subnormals: no NaN, so NaN inputs follow ml_dtypes (+NaN -> -0 code)
    Layout l{desc("t_e2m1_nosub", 2, 1, 1, "none", false), {}, {}, {}};
    l.nan_pos = 0x8;
    l.nan_neg = 0x0;
    v.push_back(l);
  }
  {  // e5m2 IEEE, one reserved magnitude and no subnormals
    Layout l{desc("t_e5m2_both", 5, 2, 15, "ieee", false),
             {0x7D, 0x7E, 0x7F, 0xFD, 0xFE, 0xFF}, {0x7C, 0xFC}, {0x7B, 0xFB}};
    l.nan_pos = 0x7E;
    l.nan_neg = 0xFE;
    v.push_back(l);
  }
  {  // e3m4 with the fnuz NaN (the -0 code) and the top magnitude reserved
    Layout l{desc("t_e3m4_fnuz_res", 3, 4, 4, "fnuz", true), {0x80}, {}, {0x7F, 0xFF}};
    l.negative_zero = false;
    l.nan_pos = 0x80;
    l.nan_neg = 0x80;
    v.push_back(l);
  }
  for (Layout& l : v) {
    l.d.nan_codes = l.nan;
    l.d.inf_codes = l.inf;
    l.d.reserved_codes = l.reserved;
  }
  return v;
}

bool in(const std::vector<uint32_t>& s, uint32_t c) { return std::find(s.begin(), s.end(), c) != s.end(); }

struct Reference {
  const Layout& l;
  int E, M, bias, bits;
  uint32_t sign_mask;
  std::vector<double> value;  // of every code
  double max = 0;             // the largest finite value
  std::map<double, uint32_t> code_by_value;  // finite values >= +0 to their codes

  explicit Reference(const Layout& layout) : l(layout) {
    E = l.d.exponent_bits;
    M = l.d.mantissa_bits;
    bias = *l.d.bias;
    bits = 1 + E + M;
    sign_mask = 1u << (bits - 1);
    for (uint32_t c = 0; c < (1u << bits); ++c) {
      const uint32_t mag = c & ~sign_mask;
      const double sign = (c & sign_mask) ? -1.0 : 1.0;
      const uint32_t e = mag >> M, m = mag & ((1u << M) - 1);
      double v;
      if (in(l.nan, c) || in(l.reserved, c)) {
        v = std::numeric_limits<double>::quiet_NaN();
      } else if (in(l.inf, c)) {
        v = sign * std::numeric_limits<double>::infinity();
      } else if (e == 0) {
        v = sign * (l.d.subnormals ? std::ldexp(static_cast<double>(m), 1 - bias - M) : 0.0);
      } else {
        v = sign * std::ldexp(1.0 + std::ldexp(static_cast<double>(m), -M), static_cast<int>(e) - bias);
      }
      value.push_back(v);
      if (std::isfinite(v) && !(c & sign_mask)) {
        max = std::max(max, v);
        code_by_value.emplace(v, c);  // the first code of a value: +0 for zero
      }
    }
  }
  double max_finite() const { return max; }
  // The code of the finite value v >= 0 (a -0 is added by encode).
  uint32_t code_of(double v) const {
    const auto it = code_by_value.find(v);
    if (it == code_by_value.end()) FAIL("no code for " << v);
    return it->second;
  }
  uint32_t encode(float xf, Rounding mode, Overflow ovf, uint32_t word, int N) const {
    const double x = xf;
    const bool neg = std::signbit(x);
    if (std::isnan(x)) return neg ? l.nan_neg : l.nan_pos;
    const uint32_t max_code = code_of(max_finite());
    const bool toward_zero = mode == Rounding::rtz || (mode == Rounding::rdn && !neg) ||
                             (mode == Rounding::rup && neg);
    const uint32_t ovf_mag = !l.inf.empty() ? l.inf[0] : !l.nan.empty() ? l.nan_pos & ~sign_mask : max_code;
    const auto with_sign = [&](uint32_t mag, bool is_nan) {
      if (is_nan && l.nan_pos == l.nan_neg) return l.nan_pos;  // one unsigned NaN
      return mag | (neg ? sign_mask : 0u);
    };
    const auto overflowed = [&](bool from_inf) {
      const bool sat = ovf == Overflow::sat || (toward_zero && !from_inf);
      if (sat) return with_sign(max_code, false);
      return with_sign(ovf_mag, l.inf.empty() && !l.nan.empty());
    };
    if (std::isinf(x)) return overflowed(true);
    const double ax = std::fabs(x);
    const int emin = 1 - bias;
    const int e = ax == 0 ? emin : std::max(static_cast<int>(std::floor(std::log2(ax))), emin);
    const double step = (ax < std::ldexp(1.0, emin) && !l.d.subnormals) ? std::ldexp(1.0, emin)
                                                                         : std::ldexp(1.0, e - M);
    const double q = ax / step;  // exact: a float32 over a power of two
    const double fl = std::floor(q), fr = q - fl;
    double r = fl;
    switch (mode) {
      case Rounding::rne: r = std::nearbyint(q); break;
      case Rounding::rna: r = fr >= 0.5 ? fl + 1 : fl; break;
      case Rounding::rtz: r = fl; break;
      case Rounding::rup: r = neg ? fl : std::ceil(q); break;
      case Rounding::rdn: r = neg ? std::ceil(q) : fl; break;
      case Rounding::rto: r = fr == 0 ? fl : (std::fmod(fl, 2.0) != 0 ? fl : fl + 1); break;
      case Rounding::sr:
        r = fl + (static_cast<uint64_t>(std::floor(std::ldexp(fr, N))) + (word >> (32 - N)) >=
                          (uint64_t{1} << N) ? 1 : 0);
        break;
      default: FAIL("mode");
    }
    const double v = r * step;
    if (v > max_finite()) return overflowed(false);
    const uint32_t mag = code_of(v);
    if (mag == 0) return neg && l.negative_zero ? sign_mask : 0u;
    return mag | (neg ? sign_mask : 0u);
  }
};

// Every float32 from far below the smallest step to past the largest value at a stride,
// every value of the format, the midpoints of neighbours and their float32 neighbours,
// and the specials.
std::vector<float> inputs(const Reference& ref) {
  std::vector<float> x;
  const uint32_t lo = lpx::float_to_bits(std::ldexp(1.0f, 1 - ref.bias - ref.M - 4));
  const uint32_t hi = lpx::float_to_bits(static_cast<float>(ref.max_finite()) * 8.0f);
  const uint32_t stride = std::max<uint32_t>(1, (hi - lo) / 150000);
  for (uint32_t b = lo; b <= hi; b += stride) x.push_back(lpx::bits_to_float(b));
  std::vector<double> vals;
  for (double v : ref.value)
    if (std::isfinite(v) && v >= 0) vals.push_back(v);
  std::sort(vals.begin(), vals.end());
  vals.push_back(ref.max_finite() * 2);  // past the largest value
  for (size_t i = 0; i + 1 < vals.size(); ++i) {
    for (double t : {vals[i], (vals[i] + vals[i + 1]) / 2, vals[i] * 0.25 + vals[i + 1] * 0.75}) {
      const float f = static_cast<float>(t);
      x.insert(x.end(), {f, std::nextafter(f, 0.f), std::nextafter(f, 1e30f)});
    }
  }
  const size_t n = x.size();
  for (size_t i = 0; i < n; ++i) x.push_back(-x[i]);
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  x.insert(x.end(), {0.f, -0.f, inf, -inf, nan, -nan, 1e-40f, -1e-40f});
  return x;
}

std::string hex(uint32_t c) {
  char b[16];
  std::snprintf(b, sizeof b, "0x%02X", c);
  return b;
}

}  // namespace

TEST_CASE("listed specials, reserved codes and no subnormals: decode equals the definition") {
  for (const Layout& l : layouts()) {
    INFO(l.d.name);
    const ElementFormat f = lpx::make_described_format(l.d);
    const Reference ref(l);
    std::vector<uint8_t> codes(size_t{1} << ref.bits);
    for (uint32_t c = 0; c < codes.size(); ++c) codes[c] = static_cast<uint8_t>(c);
    std::vector<float> simd(codes.size());
    lpx::decode_array(codes, simd, f);
    for (uint32_t c = 0; c < codes.size(); ++c) {
      INFO(hex(c));
      const double want = ref.value[c];
      const float got = lpx::decode(c, f);
      if (std::isnan(want)) {
        CHECK(std::isnan(got));
        CHECK(std::isnan(simd[c]));
      } else {
        CHECK(static_cast<double>(got) == want);
        CHECK(lpx::float_to_bits(simd[c]) == lpx::float_to_bits(got));
        // zeros keep the code's sign (unused subnormal codes too)
        CHECK(std::signbit(got) == ((c & ref.sign_mask) != 0));
      }
    }
    CHECK(lpx::max_finite(f) == ref.max_finite());
  }
}

TEST_CASE("listed specials, reserved codes and no subnormals: encode equals the definition") {
  const Rounding modes[] = {Rounding::rne, Rounding::rna, Rounding::rtz, Rounding::rup,
                            Rounding::rdn, Rounding::rto, Rounding::sr};
  for (const Layout& l : layouts()) {
    const ElementFormat f = lpx::make_described_format(l.d);
    const Reference ref(l);
    const std::vector<float> x = inputs(ref);
    for (const Rounding mode : modes) {
      for (const Overflow ovf : {Overflow::ieee, Overflow::sat}) {
        for (const int N : {3, 8}) {
          if (mode != Rounding::sr && N != 8) continue;
          INFO(l.d.name << " mode " << static_cast<int>(mode) << " overflow " << static_cast<int>(ovf)
                        << " sr_bits " << N << " over " << x.size() << " inputs");
          lpx::CastOptions opt;
          opt.round = mode;
          opt.overflow = ovf;
          opt.sr_bits = N;
          opt.seed = 77;
          opt.threads = 2;
          std::vector<uint8_t> arr(x.size());
          lpx::encode_array(x, arr, f, opt);
          std::vector<float> fake(x.size());
          lpx::fake_cast_array(x, fake, f, opt);
          size_t bad = 0;
          for (size_t i = 0; i < x.size(); ++i) {
            const uint32_t w = lpx::random_bits(77, 0, i);
            const uint32_t want = ref.encode(x[i], mode, ovf, w, N);
            const uint32_t got = lpx::encode(x[i], f, mode, ovf, w, N);
            const bool ok = got == want && arr[i] == want &&
                            lpx::float_to_bits(fake[i]) == lpx::float_to_bits(lpx::decode(want, f));
            if (!ok && bad++ < 5)
              UNSCOPED_INFO("x = " << x[i] << ": want " << hex(want) << ", scalar " << hex(got)
                                   << ", array " << hex(arr[i]));
          }
          CHECK(bad == 0);
        }
      }
    }
  }
}

TEST_CASE("formats with reserved codes or without subnormals quantize in blocks as their element codec says") {
  // MX-style blocks of 32 with an E8M0 scale (OCP floor rule: 2^(floor(log2 amax) - emax)),
  // elements saturating: each fake-quantized value is the reference's element times the
  // scale. e4m3 with two reserved magnitudes (max 384) runs the vector kernels; e4m3fn
  // without subnormals, the scalar per-block path.
  const std::vector<Layout> all = layouts();
  for (const Layout* l : {&all[0], &all[2]}) {
    INFO(l->d.name);
    lpx::register_format(lpx::make_described_format(l->d));
    const Reference ref(*l);
    const int emax = static_cast<int>(std::floor(std::log2(ref.max_finite())));
    const lpx::BlockFormat bf = lpx::parse_block_format(std::string(l->d.name) + ":b32:e8m0");
    std::vector<float> x(32 * 64);
    for (size_t i = 0; i < x.size(); ++i)
      x[i] = std::ldexp(static_cast<float>(static_cast<int32_t>(lpx::random_bits(5, 1, i)) >> 8), -20 + int(i % 7));
    const int64_t shape[] = {64, 32};
    for (const lpx::QuantizePath path : {lpx::QuantizePath::fastest, lpx::QuantizePath::reference}) {
      lpx::QuantizeOptions opt;
      opt.path = path;
      std::vector<float> out(x.size());
      lpx::fake_quantize({x, shape}, out, bf, opt);
      size_t bad = 0;
      for (size_t b = 0; b < 64; ++b) {
        float amax = 0;
        for (size_t k = 0; k < 32; ++k) amax = std::max(amax, std::fabs(x[b * 32 + k]));
        const int scale_exp = static_cast<int>(std::floor(std::log2(amax))) - emax;
        for (size_t k = 0; k < 32; ++k) {
          const size_t i = b * 32 + k;
          const float scaled = std::ldexp(x[i], -scale_exp);
          const double want = ref.value[ref.encode(scaled, Rounding::rne, Overflow::sat, 0, 8)];
          if (std::ldexp(want, scale_exp) != static_cast<double>(out[i]) && bad++ < 5)
            UNSCOPED_INFO("x = " << x[i] << ": want " << std::ldexp(want, scale_exp) << ", got " << out[i]);
        }
      }
      CHECK(bad == 0);
    }
  }
}

TEST_CASE("code lists that describe a named format give that format") {
  const auto check_same = [](const lpx::FormatDescriptor& d, const ElementFormat& g) {
    const ElementFormat f = lpx::make_described_format(d);
    CHECK(f.specials == g.specials);
    CHECK(f.bias == g.bias);
    CHECK(f.max_magnitude == g.max_magnitude);
    CHECK(f.inf_magnitude == g.inf_magnitude);
    CHECK(f.nan_code == g.nan_code);
    CHECK(f.reserved_top == 0);
    for (uint32_t c = 0; c <= g.code_mask; ++c) {
      const float a = lpx::decode(c, f), b = lpx::decode(c, g);
      CHECK((lpx::float_to_bits(a) == lpx::float_to_bits(b) || (a != a && b != b)));
    }
  };
  lpx::FormatDescriptor d = desc("t_list_e4m3fn", 4, 3, 7, std::nullopt, true);
  d.nan_codes = std::vector<uint32_t>{0x7F, 0xFF};
  check_same(d, lpx::fmt8::e4m3fn);
  d = desc("t_list_e5m2", 5, 2, 15, std::nullopt, true);
  d.inf_codes = std::vector<uint32_t>{0x7C, 0xFC};
  d.nan_codes = std::vector<uint32_t>{0x7D, 0x7E, 0x7F, 0xFD, 0xFE, 0xFF};
  check_same(d, lpx::fmt8::e5m2);
  d = desc("t_list_fnuz", 4, 3, 8, std::nullopt, true);
  d.nan_codes = std::vector<uint32_t>{0x80};
  check_same(d, lpx::fmt8::e4m3fnuz);  // fnuz comes before p3109f, which has the same codes
  d = desc("t_list_p3109", 4, 3, 8, std::nullopt, true);
  d.nan_codes = std::vector<uint32_t>{0x80};
  d.inf_codes = std::vector<uint32_t>{0x7F, 0xFF};
  check_same(d, lpx::format_by_name("p3109_k8p4se"));
  d = desc("t_list_e2m1", 2, 1, 1, std::nullopt, true);
  d.nan_codes = std::vector<uint32_t>{};
  check_same(d, lpx::fmt4::e2m1);
}

TEST_CASE("malformed code lists are refused with one line") {
  struct Case {
    std::vector<uint32_t> nan, inf, reserved;
    std::optional<std::string> specials;
    std::string message;
  };
  const Case cases[] = {
      {{0x7F, 0xFF}, {0x7F}, {}, std::nullopt, "listed both as NaN and as Inf"},
      {{0x7F, 0x7F}, {}, {}, std::nullopt, "lists 0x7F twice"},
      {{0x17F}, {}, {}, std::nullopt, "beyond the 8-bit codes"},
      {{0x7E, 0xFE}, {}, {}, "fn", "0x7E is listed as NaN but is finite under specials 'fn'"},
      {{0x7F, 0xFF}, {}, {0x7E}, "fn", "both signs"},
      {{0x7F, 0xFF}, {}, {0x7E, 0xFD}, "fn", "0xFD is listed as reserved but is finite under specials 'fn' and 2 reserved codes"},
      {{0x7F, 0xFF, 0x00}, {}, {}, std::nullopt, "fit no layout"},
      {{0x7F}, {}, {}, std::nullopt, "fit no layout"},  // one sign only
      {{0x7F, 0xFF}, {}, {0x33, 0xB3}, std::nullopt, "fit no layout"},  // not at the top
  };
  for (const Case& c : cases) {
    lpx::FormatDescriptor d = desc("t_bad", 4, 3, 7, c.specials, true);
    d.nan_codes = c.nan;
    d.inf_codes = c.inf;
    d.reserved_codes = c.reserved;
    INFO(c.message);
    try {
      (void)lpx::make_described_format(d);
      FAIL("accepted");
    } catch (const std::invalid_argument& e) {
      const std::string what = e.what();
      CHECK_THAT(what, Catch::Contains(c.message));
      CHECK(what.find('\n') == std::string::npos);
    }
  }
  lpx::FormatDescriptor d = desc("t_bad", 2, 1, 1, "none", true);
  d.reserved_codes = std::vector<uint32_t>{0x7, 0xF, 0x6, 0xE, 0x5, 0xD, 0x4, 0xC, 0x3, 0xB, 0x2, 0xA, 0x1, 0x9};
  CHECK_THROWS_WITH(lpx::make_described_format(d), Catch::Contains("leave no finite nonzero value"));
}
