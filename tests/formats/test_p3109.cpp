// IEEE P3109 formats (p3109_k<K>p<P><s|u><e|f>, docs/formats.md#p3109) against a reference
// written here from the P3109 rules as gfloat states them, not from lpx's descriptor or
// codec:
//   signed:   K - P exponent bits, bias 2^(K-P-1), P - 1 mantissa bits, sign-magnitude;
//             NaN = 2^(K-1) (the -0 code); extended: +-Inf = 2^(K-1) - 1 with either sign
//   unsigned: K - P + 1 exponent bits, bias 2^(K-P), P - 1 mantissa bits;
//             NaN = 2^K - 1; extended: +Inf = 2^K - 2
// Every other code is finite: subnormals at exponent field 0, one zero. The value of each
// code comes from that formula in double (std::ldexp). Rounding is an exact search over
// the sorted finite values extended by one grid step past the largest (the value the next
// magnitude code would have by the formula): rne takes the even *code* on a tie (gfloat's
// rule, which for P = 1 is the exponent field's parity) and rto the odd code of the two
// neighbours, rna/rtz/rup/rdn as IEEE 754; with delta the fraction of the gap and r the
// top N bits of the word, sr rounds the magnitude up iff floor(delta 2^N) + r >= 2^N,
// sr-fast iff floor(delta 2^(N+1)) + 2r + 1 >= 2^(N+1), sr-rne / sr-odd iff delta 2^N
// rounded to nearest (ties to even / to odd) + r >= 2^N. Overflow as
// gfloat: +-Inf (extended) or NaN (finite) unless `sat` or the mode rounds toward zero,
// then +-max; +-Inf inputs under `sat` give +-max. Unsigned formats: -0 -> 0, other
// negative inputs -> NaN (ieee) or 0 (sat), lpx's documented choice.
//
// Inputs (1,050,000+ float32 per format): 2^20 patterns covering every sign, exponent and
// top 11 mantissa bits (with pseudo-random low bits), every finite value of the format,
// every midpoint between neighbours, each +-1 float32 ulp, the extended grid point, zeros,
// +-Inf, NaNs of both signs, the largest float32 and float32 subnormals. Both the scalar
// codec and the array cast (SIMD, fast path where it applies) are compared, in every
// rounding mode (sr with N = 32, 8 and 3, the other stochastic variants with N = 3, words
// from lpx::random_bits) and both overflow
// policies, for K in {3, 4, 6, 8}, 1 <= P < K, both signednesses and both domains.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "lpx/formats/cast.hpp"
#include "lpx/formats/codec.hpp"
#include "lpx/formats/element_format.hpp"
#include "lpx/numerics/float_bits.hpp"
#include "lpx/numerics/philox.hpp"

namespace {

using lpx::ElementFormat;
using lpx::Overflow;
using lpx::Rounding;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

struct Ref {
  int K = 0, P = 0;
  bool sgn = true, ext = true;
  int E = 0, M = 0, bias = 0;
  uint32_t nan_code = 0, pos_inf = 0, sign_bit = 0, max_code = 0;
  std::vector<double> value;      // by code
  std::vector<double> grid;       // non-negative finite values ascending, then the extended point
  std::vector<uint32_t> grid_code;  // magnitude codes (the extended point: max_code + 1)

  // Value of magnitude code `mag` by the field formula (any mag, even past the last code).
  double field_value(uint32_t mag) const {
    const uint32_t e = mag >> M, m = mag & ((1u << M) - 1);
    return e == 0 ? std::ldexp(static_cast<double>(m), 1 - bias - M)
                  : std::ldexp(static_cast<double>((1u << M) + m), static_cast<int>(e) - bias - M);
  }
};

Ref make_ref(int K, int P, bool sgn, bool ext) {
  Ref r;
  r.K = K;
  r.P = P;
  r.sgn = sgn;
  r.ext = ext;
  r.M = P - 1;
  r.E = sgn ? K - P : K - P + 1;
  r.bias = sgn ? 1 << (K - P - 1) : 1 << (K - P);
  const uint32_t n = 1u << K;
  r.sign_bit = sgn ? 1u << (K - 1) : 0u;
  r.nan_code = sgn ? 1u << (K - 1) : n - 1;
  r.pos_inf = sgn ? (1u << (K - 1)) - 1 : n - 2;  // meaningful when ext
  r.max_code = ext ? r.pos_inf - 1 : r.pos_inf;   // largest finite magnitude code
  r.value.resize(n);
  for (uint32_t c = 0; c < n; ++c) {
    const bool neg = (c & r.sign_bit) != 0;
    const uint32_t mag = c & ~r.sign_bit;
    double v;
    if (c == r.nan_code) v = kNaN;
    else if (ext && mag == r.pos_inf) v = kInf;
    else v = r.field_value(mag);
    r.value[c] = neg ? -v : v;
  }
  for (uint32_t mag = 0; mag <= r.max_code; ++mag) {
    r.grid.push_back(r.field_value(mag));
    r.grid_code.push_back(mag);
  }
  r.grid.push_back(r.field_value(r.max_code + 1));
  r.grid_code.push_back(r.max_code + 1);
  REQUIRE(std::is_sorted(r.grid.begin(), r.grid.end()));
  return r;
}

struct Mode {
  Rounding round;
  int sr_bits;
};

// What the reference needs of one input, whatever the mode: where |x| sits in the grid.
struct Located {
  enum Kind : uint8_t { nan, neg_unsigned, neg_zero_unsigned, inf, beyond, exact, between } kind;
  bool neg = false;
  uint32_t lo_code = 0, hi_code = 0;
  int mid_cmp = 0;     // sign of |x| - midpoint (between)
  double delta = 0;    // (|x| - lo) / (hi - lo) (between), exact
};

Located locate(const Ref& r, float xf) {
  Located l{Located::nan};
  const double x = xf;
  if (std::isnan(x)) return l;
  l.neg = std::signbit(x);
  if (!r.sgn && l.neg) {
    l.kind = x == 0 ? Located::neg_zero_unsigned : Located::neg_unsigned;
    return l;
  }
  const double a = std::fabs(x);
  if (std::isinf(a)) {
    l.kind = Located::inf;
  } else if (a >= r.grid.back()) {
    l.kind = Located::beyond;  // past the extended point: overflows in every mode
  } else {
    const size_t hi = static_cast<size_t>(std::upper_bound(r.grid.begin(), r.grid.end(), a) -
                                          r.grid.begin());
    const size_t lo = hi - 1;
    const double vlo = r.grid[lo], vhi = r.grid[hi];
    l.lo_code = r.grid_code[lo];
    l.hi_code = r.grid_code[hi];
    if (a == vlo) {
      l.kind = Located::exact;
    } else {
      l.kind = Located::between;
      const double mid = (vlo + vhi) / 2;  // exact: neighbours share their spacing
      l.mid_cmp = a < mid ? -1 : (a > mid ? 1 : 0);
      l.delta = (a - vlo) / (vhi - vlo);  // exact: a power-of-two spacing
    }
  }
  return l;
}

// The expected code of an input located by locate().
uint32_t ref_encode(const Ref& r, const Located& l, Mode mode, Overflow ovf, uint32_t word) {
  const bool neg = l.neg;
  const uint32_t sign = neg ? r.sign_bit : 0u;
  const uint32_t max_code = r.max_code | sign;
  const uint32_t over_code = r.ext ? (r.pos_inf | sign) : r.nan_code;
  const bool toward_zero = mode.round == Rounding::rtz || (mode.round == Rounding::rdn && !neg) ||
                           (mode.round == Rounding::rup && neg);
  uint32_t mag = 0;
  switch (l.kind) {
    case Located::nan: return r.nan_code;
    case Located::neg_zero_unsigned: return 0u;
    case Located::neg_unsigned: return ovf == Overflow::ieee ? r.nan_code : 0u;
    case Located::inf: return ovf == Overflow::sat ? max_code : over_code;
    case Located::beyond: mag = r.max_code + 1; break;
    case Located::exact: mag = l.lo_code; break;
    case Located::between: {
      bool up = false;
      switch (mode.round) {
        case Rounding::rne: up = l.mid_cmp > 0 || (l.mid_cmp == 0 && (l.hi_code & 1u) == 0); break;
        case Rounding::rna: up = l.mid_cmp >= 0; break;
        case Rounding::rtz: up = false; break;
        case Rounding::rup: up = !neg; break;
        case Rounding::rdn: up = neg; break;
        case Rounding::rto: up = (l.lo_code & 1u) == 0; break;
        case Rounding::sr:
        case Rounding::sr_fast:
        case Rounding::sr_rne:
        case Rounding::sr_odd: {
          const int N = mode.sr_bits;
          const uint64_t rr = N == 32 ? word : word >> (32 - N);
          const double d = std::ldexp(l.delta, N);  // exact
          const double fl = std::floor(d), fr = d - fl;
          const bool fl_odd = std::fmod(fl, 2.0) != 0;
          uint64_t lhs = 0, rhs = uint64_t{1} << N;
          if (mode.round == Rounding::sr) {
            lhs = static_cast<uint64_t>(fl) + rr;
          } else if (mode.round == Rounding::sr_fast) {
            lhs = static_cast<uint64_t>(std::floor(std::ldexp(l.delta, N + 1))) + 2 * rr + 1;
            rhs = uint64_t{1} << (N + 1);
          } else {
            const bool tie_up = mode.round == Rounding::sr_rne ? fl_odd : !fl_odd;
            lhs = static_cast<uint64_t>(fl) + ((fr > 0.5 || (fr == 0.5 && tie_up)) ? 1u : 0u) + rr;
          }
          up = lhs >= rhs;
          break;
        }
      }
      mag = up ? l.hi_code : l.lo_code;
      break;
    }
  }
  if (mag > r.max_code) return (ovf == Overflow::sat || toward_zero) ? max_code : over_code;
  return mag == 0 ? 0u : (mag | sign);
}

uint64_t splitmix(uint64_t& s) {
  uint64_t z = (s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// The common dense sample: every sign / exponent / top-11-mantissa-bit pattern with
// pseudo-random low 12 bits, then the specials.
std::vector<float> dense_sample() {
  std::vector<float> v;
  v.reserve((size_t{1} << 20) + 64);
  uint64_t s = 3109;
  for (uint32_t hi = 0; hi < (1u << 20); ++hi) {
    const uint32_t low = static_cast<uint32_t>(splitmix(s)) & 0xFFFu;
    v.push_back(lpx::bits_to_float((hi << 12) | low));
  }
  for (const uint32_t b : {0x00000000u, 0x80000000u, 0x7F800000u, 0xFF800000u, 0x7FC00000u,
                           0xFFC00000u, 0x7F800001u, 0xFF800001u, 0x7FFFFFFFu, 0xFFFFFFFFu,
                           0x7F7FFFFFu, 0xFF7FFFFFu, 0x00000001u, 0x80000001u, 0x007FFFFFu,
                           0x807FFFFFu, 0x00800000u, 0x80800000u, 0x00400000u, 0x80400000u})
    v.push_back(lpx::bits_to_float(b));
  return v;
}

// Targeted inputs for one format: every finite value, every midpoint, +-1 ulp of each.
std::vector<float> targeted_sample(const Ref& r) {
  std::vector<float> v;
  const auto add = [&](double d) {
    const float f = static_cast<float>(d);
    if (static_cast<double>(f) != d) return;  // midpoints of 16-bit formats may not be float32s
    for (const float g : {f, std::nextafter(f, 0.0f), std::nextafter(f, std::numeric_limits<float>::infinity())})
      for (const float s : {g, -g}) v.push_back(s);
  };
  for (size_t i = 0; i < r.grid.size(); ++i) {
    add(r.grid[i]);
    if (i + 1 < r.grid.size()) add((r.grid[i] + r.grid[i + 1]) / 2);
  }
  add(r.grid.back() * 2);
  add((r.grid.back() + r.grid[r.grid.size() - 2]) / 2 * 1.0000001);
  return v;
}

std::string label(const ElementFormat& f, Mode m, Overflow o) {
  return std::string(f.name) + " " + std::string(lpx::rounding_name(m.round)) + "/" +
         std::to_string(m.sr_bits) + (o == Overflow::sat ? " sat" : " ieee");
}

}  // namespace

TEST_CASE("P3109 names parse to gfloat's parameters", "[p3109]") {
  const ElementFormat a = lpx::format_by_name("p3109_k8p4se");
  CHECK(a.bits == 8);
  CHECK(a.exponent_bits == 4);
  CHECK(a.mantissa_bits == 3);
  CHECK(a.bias == 8);
  CHECK(a.nan_code == 0x80);
  CHECK(a.inf_magnitude == 0x7F);
  CHECK(a.max_magnitude == 0x7E);
  CHECK(std::string(a.name) == "p3109_k8p4se");
  const ElementFormat b = lpx::format_by_name("p3109_k8p3uf");
  CHECK_FALSE(b.is_signed);
  CHECK(b.exponent_bits == 6);
  CHECK(b.bias == 32);
  CHECK(b.nan_code == 0xFF);
  CHECK(b.max_magnitude == 0xFE);
  CHECK_FALSE(b.has_inf());
  const ElementFormat c = lpx::format_by_name("p3109_k16p11se");
  CHECK(c.exponent_bits == 5);
  CHECK(c.bias == 16);
  CHECK(std::string(c.name) == "p3109_k16p11se");
  // Pinned values from the P3109 interim report's binary8 tables (gfloat agrees):
  // p3109_k8p4se max 224 and min subnormal 2^-10; p3109_k8p3se max 49152, min 2^-17.
  CHECK(lpx::max_finite(a) == 224.0);
  CHECK(lpx::min_subnormal(a) == std::ldexp(1.0, -10));
  const ElementFormat d = lpx::format_by_name("p3109_k8p3se");
  CHECK(lpx::max_finite(d) == 49152.0);
  CHECK(lpx::min_subnormal(d) == std::ldexp(1.0, -17));
  CHECK(std::isinf(lpx::decode(0x7F, d)));
  CHECK(lpx::decode(0xFF, d) == -kInf);
  CHECK(std::isnan(lpx::decode(0x80, d)));
  CHECK(lpx::decode(0x40, d) == 1.0f);

  for (const char* bad : {"p3109_k8p8se", "p3109_k8p9se", "p3109_k17p4se", "p3109_k1p1se",
                          "p3109_k8p0se", "p3109_k16p1se", "p3109_k16p2ue"}) {
    INFO(bad);
    CHECK_THROWS_AS(lpx::format_by_name(bad), std::invalid_argument);
  }
  // Not P3109 names at all: the unknown-format error.
  CHECK_THROWS_WITH(lpx::format_by_name("p3109_k8p4sx"), Catch::Contains("unknown format"));
}

TEST_CASE("P3109 codes decode to the reference values and round-trip", "[p3109]") {
  for (const int K : {2, 3, 4, 5, 6, 7, 8, 10, 12, 16}) {
    for (int P = 1; P < K; ++P) {
      for (const bool sgn : {true, false}) {
        for (const bool ext : {true, false}) {
          const Ref r = make_ref(K, P, sgn, ext);
          const std::string name = "p3109_k" + std::to_string(K) + "p" + std::to_string(P) +
                                   (sgn ? "s" : "u") + (ext ? "e" : "f");
          ElementFormat f;
          try {
            f = lpx::format_by_name(name);
          } catch (const std::invalid_argument&) {
            // Refused only when some value is not a float32.
            const double top = r.grid[r.grid.size() - 2], low = r.grid[1];
            INFO(name);
            CHECK((top >= std::ldexp(1.0, 128) || low < std::ldexp(1.0, -149)));
            continue;
          }
          INFO(name);
          for (uint32_t c = 0; c < (1u << K); ++c) {
            INFO("code " << c);
            const float got = lpx::decode(c, f);
            if (std::isnan(r.value[c])) {
              CHECK(std::isnan(got));
              CHECK_FALSE(std::signbit(got));
            } else {
              CHECK(static_cast<double>(got) == r.value[c]);
              if (got != 0) CHECK(std::signbit(got) == std::signbit(r.value[c]));
            }
            // Every code round-trips in every deterministic mode (-0 does not exist).
            if (!std::isnan(r.value[c]))
              for (const Rounding m : {Rounding::rne, Rounding::rtz, Rounding::rup})
                CHECK(lpx::encode(got, f, m, Overflow::ieee) == c);
          }
        }
      }
    }
  }
}

TEST_CASE("P3109 casts equal the independent reference on a dense sample", "[p3109]") {
  const std::vector<float> dense = dense_sample();
  const Mode modes[] = {{Rounding::rne, 32}, {Rounding::rna, 32}, {Rounding::rtz, 32},
                        {Rounding::rup, 32}, {Rounding::rdn, 32}, {Rounding::sr, 32},
                        {Rounding::sr, 8},   {Rounding::sr, 3},   {Rounding::rto, 32},
                        {Rounding::sr_fast, 3}, {Rounding::sr_rne, 3}, {Rounding::sr_odd, 3}};
  size_t checked = 0;
  for (const int K : {3, 4, 6, 8}) {
    for (int P = 1; P < K; ++P) {
      for (const bool sgn : {true, false}) {
        for (const bool ext : {true, false}) {
          const Ref r = make_ref(K, P, sgn, ext);
          const std::string name = "p3109_k" + std::to_string(K) + "p" + std::to_string(P) +
                                   (sgn ? "s" : "u") + (ext ? "e" : "f");
          const ElementFormat f = lpx::format_by_name(name);
          std::vector<float> in = dense;
          const std::vector<float> t = targeted_sample(r);
          in.insert(in.end(), t.begin(), t.end());
          REQUIRE(in.size() >= 1000000);
          std::vector<uint8_t> got(in.size());
          std::vector<Located> where(in.size());
          for (size_t i = 0; i < in.size(); ++i) where[i] = locate(r, in[i]);
          for (const Overflow ovf : {Overflow::ieee, Overflow::sat}) {
            for (const Mode m : modes) {
              lpx::CastOptions opt;
              opt.round = m.round;
              opt.overflow = ovf;
              opt.sr_bits = m.sr_bits;
              opt.seed = 0x3109u + static_cast<uint64_t>(K);
              opt.stream = static_cast<uint32_t>(P);
              lpx::encode_array(in, got, f, opt);
              size_t bad = 0;
              for (size_t i = 0; i < in.size(); ++i) {
                const uint32_t w = lpx::is_stochastic(m.round)
                                       ? lpx::random_bits(opt.seed, opt.stream, i) : 0u;
                const uint32_t want = ref_encode(r, where[i], m, ovf, w);
                const uint32_t scalar = lpx::encode(in[i], f, m.round, ovf, w, m.sr_bits);
                if ((scalar != want || got[i] != want) && bad++ < 3) {
                  INFO(label(f, m, ovf) << " x=" << in[i] << " bits=0x" << std::hex
                                        << lpx::float_to_bits(in[i]) << " want=0x" << want
                                        << " scalar=0x" << scalar << " array=0x"
                                        << static_cast<unsigned>(got[i]));
                  CHECK(scalar == want);
                  CHECK(static_cast<uint32_t>(got[i]) == want);
                }
              }
              CHECK(bad == 0);
              checked += in.size();
            }
          }
        }
      }
    }
  }
  CHECK(checked > 1000000000);
}

TEST_CASE("P3109 fake casts equal decode(encode) including the fast path", "[p3109]") {
  // FastFakeVec's signed P3109 rules: +0 for zero results, an unsigned overflow NaN.
  std::vector<float> in = dense_sample();
  for (const char* name : {"p3109_k8p4se", "p3109_k8p4sf", "p3109_k8p3se", "p3109_k6p3sf",
                           "p3109_k8p1se", "p3109_k8p4ue", "p3109_k16p11se", "p3109_k16p8sf"}) {
    const ElementFormat f = lpx::format_by_name(name);
    for (const Overflow ovf : {Overflow::ieee, Overflow::sat}) {
      for (const Rounding m : {Rounding::rne, Rounding::rtz, Rounding::sr, Rounding::rup,
                               Rounding::rto}) {
        lpx::CastOptions opt;
        opt.round = m;
        opt.overflow = ovf;
        opt.sr_bits = 5;
        opt.seed = 7;
        std::vector<float> out(in.size());
        lpx::fake_cast_array(in, out, f, opt);
        size_t bad = 0;
        for (size_t i = 0; i < in.size(); ++i) {
          const uint32_t w = m == Rounding::sr ? lpx::random_bits(7, 0, i) : 0u;
          const float want = lpx::decode(lpx::encode(in[i], f, m, ovf, w, 5), f);
          if (lpx::float_to_bits(want) != lpx::float_to_bits(out[i]) && bad++ < 3) {
            INFO(name << " " << lpx::rounding_name(m) << " x bits 0x" << std::hex
                      << lpx::float_to_bits(in[i]));
            CHECK(lpx::float_to_bits(out[i]) == lpx::float_to_bits(want));
          }
        }
        CHECK(bad == 0);
      }
    }
    // 16-bit codes through the array path as well.
    if (f.bits > 8) {
      std::vector<uint16_t> codes(in.size());
      lpx::CastOptions opt;
      lpx::encode_array(in, codes, f, opt);
      size_t bad = 0;
      for (size_t i = 0; i < in.size(); ++i)
        bad += codes[i] != lpx::encode(in[i], f, Rounding::rne, Overflow::ieee) ? 1 : 0;
      CHECK(bad == 0);
    }
  }
}
