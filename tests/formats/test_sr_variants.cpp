// The four stochastic-rounding rules (docs/formats.md#stochastic-rounding-variants) through
// the codec and the array casts, against the rules computed here in double from the
// format's neighbours (found by search over decoded values, not by round_shift_right):
// with delta = (|x| - lo) / (hi - lo) and r the top N bits of the element's word,
//   sr       up iff floor(delta 2^N) + r >= 2^N
//   sr-fast  up iff floor(delta 2^(N+1)) + 2r + 1 >= 2^(N+1)
//   sr-rne   up iff rne(delta 2^N) + r >= 2^N
//   sr-odd   up iff (delta 2^N rounded to nearest, ties to odd) + r >= 2^N
// for N = 1..13 on several formats; and the bias of each rule at N = 3 against the
// documented formula, from 2.6 million Philox draws (fixed seeds: deterministic); and
// caller-given random words (CastOptions::random_words) in place of Philox.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <span>
#include <string>
#include <vector>

#include "lpx/formats/block_format.hpp"
#include "lpx/formats/cast.hpp"
#include "lpx/formats/codec.hpp"
#include "lpx/formats/element_format.hpp"
#include "lpx/formats/quantize.hpp"
#include "lpx/numerics/philox.hpp"
#include "quantize_internal.hpp"  // column_kernel_tiles()

namespace {

using lpx::ElementFormat;
using lpx::Overflow;
using lpx::Rounding;

constexpr Rounding kVariants[] = {Rounding::sr, Rounding::sr_fast, Rounding::sr_rne,
                                  Rounding::sr_odd};

// Whether the rule rounds up, for a gap fraction delta (exact dyadic) and word w.
bool rule_up(Rounding m, double delta, uint32_t w, int N) {
  const uint64_t r = static_cast<uint64_t>(w) >> (32 - N);
  const double d = std::ldexp(delta, N);
  const double fl = std::floor(d), fr = d - fl;
  const bool odd = std::fmod(fl, 2.0) != 0;
  switch (m) {
    case Rounding::sr: return static_cast<uint64_t>(fl) + r >= (uint64_t{1} << N);
    case Rounding::sr_fast:
      return static_cast<uint64_t>(std::floor(std::ldexp(delta, N + 1))) + 2 * r + 1 >=
             (uint64_t{1} << (N + 1));
    case Rounding::sr_rne:
    case Rounding::sr_odd: {
      const bool tie_up = m == Rounding::sr_rne ? odd : !odd;
      const double rounded = fl + ((fr > 0.5 || (fr == 0.5 && tie_up)) ? 1 : 0);
      return static_cast<uint64_t>(rounded) + r >= (uint64_t{1} << N);
    }
    default: return false;
  }
}

// The rounded value of d = delta * 2^N under each rule's pre-rounding, over 2^N: the
// documented P(up) (a uniform r in [0, 2^N) makes P(R + r >= 2^N) = R / 2^N).
double p_up(Rounding m, double delta, int N) {
  const double d = std::ldexp(delta, N), fl = std::floor(d), fr = d - fl;
  const bool odd = std::fmod(fl, 2.0) != 0;
  double R = fl;
  if (m == Rounding::sr_fast) R = std::floor(d + 0.5);  // ties up
  if (m == Rounding::sr_rne) R = fl + ((fr > 0.5 || (fr == 0.5 && odd)) ? 1 : 0);
  if (m == Rounding::sr_odd) R = fl + ((fr > 0.5 || (fr == 0.5 && !odd)) ? 1 : 0);
  return std::ldexp(R, -N);
}

struct Finite {
  std::vector<double> v;
  std::vector<uint32_t> code;
};

Finite finite_values(const ElementFormat& f) {
  std::vector<std::pair<double, uint32_t>> p;
  for (uint32_t c = 0; c <= f.code_mask; ++c) {
    const double x = lpx::decode(c, f);
    if (std::isfinite(x) && x >= 0 && !std::signbit(x)) p.push_back({x, c});
  }
  std::sort(p.begin(), p.end());
  Finite out;
  for (const auto& [x, c] : p) {
    out.v.push_back(x);
    out.code.push_back(c);
  }
  return out;
}

}  // namespace

TEST_CASE("SR variants: codes with given words equal each rule, N = 1..13", "[sr]") {
  for (const char* name : {"float8_e4m3fn", "float4_e2m1fn", "p3109_k8p4se", "bfloat16", "e2m0"}) {
    const ElementFormat f = lpx::format_by_name(name);
    const Finite fin = finite_values(f);
    // Inputs strictly between neighbours below max, at many gap fractions, and the words.
    std::vector<float> in;
    std::vector<double> delta;
    std::vector<size_t> lo_index;
    uint64_t k = 0;
    for (size_t i = 0; i + 1 < fin.v.size(); ++i) {
      const double lo = fin.v[i], hi = fin.v[i + 1];
      for (int j = 0; j < 40; ++j, ++k) {
        // delta with up to 16 bits, including exact ties at every N.
        const double dl = (j < 16) ? std::ldexp(1.0, -1 - j % 16)
                                   : std::ldexp(static_cast<double>(lpx::random_bits(77, 1, k) & 0xFFFFu), -16);
        const double x = lo + dl * (hi - lo);
        if (static_cast<double>(static_cast<float>(x)) != x || x <= lo || x >= hi) continue;
        in.push_back(static_cast<float>(x));
        delta.push_back(dl);
        lo_index.push_back(i);
      }
    }
    REQUIRE(in.size() > 100);
    for (const Rounding m : kVariants) {
      for (int N = 1; N <= 13; ++N) {
        INFO(name << " " << lpx::rounding_name(m) << " N=" << N);
        lpx::CastOptions opt;
        opt.round = m;
        opt.sr_bits = N;
        opt.seed = static_cast<uint64_t>(N) * 31 + 5;
        opt.stream = 3;
        std::vector<uint8_t> c8(f.bits <= 8 ? in.size() : 0);
        std::vector<uint16_t> c16(f.bits > 8 ? in.size() : 0);
        if (f.bits <= 8) lpx::encode_array(in, c8, f, opt);
        else lpx::encode_array(in, c16, f, opt);
        size_t bad = 0, ups = 0;
        for (size_t i = 0; i < in.size(); ++i) {
          const uint32_t w = lpx::random_bits(opt.seed, opt.stream, i);
          const bool up = rule_up(m, delta[i], w, N);
          ups += up ? 1 : 0;
          const uint32_t want = fin.code[lo_index[i] + (up ? 1 : 0)];
          const uint32_t scalar = lpx::encode(in[i], f, m, Overflow::sat, w, N);
          const uint32_t array = f.bits <= 8 ? c8[i] : c16[i];
          if ((scalar != want || array != want) && bad++ < 3) {
            INFO("x=" << in[i] << " delta=" << delta[i] << " w=" << w);
            CHECK(scalar == want);
            CHECK(array == want);
          }
        }
        CHECK(bad == 0);
        CHECK(ups > 0);  // the comparison is exercised both ways
        CHECK(ups < in.size());
      }
    }
  }
}

TEST_CASE("SR variants: the empirical bias at N = 3 matches each rule's formula", "[sr]") {
  // delta = j / 2^7 (s = 4 bits below N = 3) for every j, 20000 words each (2.56M draws). Per rule, the
  // documented mean bias over these deltas, in units of the gap:
  //   sr      -(1 - 2^-s) / 2^(N+1)      sr-fast  +2^-(N+s+1)      sr-rne, sr-odd  0
  // and per delta, P(up) = R(delta 2^N) / 2^N with R the rule's pre-rounding.
  const int N = 3, s = 4, per = 20000;
  const ElementFormat f = lpx::format_by_name("bfloat16");  // gap 2^-7 at 1.0: exact deltas
  const int deltas = 1 << (N + s);                             // delta = j / 2^(N+s)
  const double gap = std::ldexp(1.0, -7 - N - s);              // input spacing: bf16 gap / 2^(N+s)
  std::vector<float> in;
  for (int j = 0; j < deltas; ++j)
    for (int i = 0; i < per; ++i) in.push_back(static_cast<float>(1.0 + j * gap));
  const double expected_bias[] = {-(1.0 - std::ldexp(1.0, -s)) / std::ldexp(1.0, N + 1),
                                  std::ldexp(1.0, -(N + s + 1)), 0.0, 0.0};
  for (size_t v = 0; v < 4; ++v) {
    const Rounding m = kVariants[v];
    INFO(lpx::rounding_name(m));
    lpx::CastOptions opt;
    opt.round = m;
    opt.sr_bits = N;
    opt.seed = 2024;
    std::vector<float> out(in.size());
    lpx::fake_cast_array(in, out, f, opt);
    double total_bias = 0;
    double formula_mean = 0;
    for (int j = 0; j < deltas; ++j) {
      const double delta = static_cast<double>(j) / deltas;
      double ups = 0;
      for (int i = 0; i < per; ++i) {
        const size_t k = static_cast<size_t>(j) * per + static_cast<size_t>(i);
        const double e = (static_cast<double>(out[k]) - static_cast<double>(in[k])) / std::ldexp(1.0, -7);
        total_bias += e;
        ups += out[k] > in[k] ? 1 : 0;
      }
      const double p = p_up(m, delta, N);
      formula_mean += p - delta;
      // Per delta: P(up) within 4.5 standard errors of the rule's R / 2^N (exact 0 or 1
      // where the rule is deterministic).
      const double se = std::sqrt(std::max(p * (1 - p), 1e-12) / per);
      INFO("delta=" << delta << " P(up)=" << ups / per << " formula=" << p);
      CHECK(std::fabs(ups / per - p) <= 4.5 * se + 1e-12);
    }
    const double mean = total_bias / static_cast<double>(in.size());
    formula_mean /= deltas;
    CHECK(formula_mean == Approx(expected_bias[v]).margin(1e-15));  // the doc's closed form
    const double se = std::sqrt(0.25 / static_cast<double>(in.size()));
    INFO("mean bias " << mean << " formula " << expected_bias[v] << " se " << se);
    CHECK(std::fabs(mean - expected_bias[v]) <= 4.5 * se);
  }
}

TEST_CASE("caller-given random words replace Philox, piece by piece", "[sr]") {
  // docs/formats.md#caller-given-random-bits: word i belongs to flat index i.
  const ElementFormat f = lpx::format_by_name("p3109_k8p3se");
  std::vector<float> x(10007);
  for (size_t i = 0; i < x.size(); ++i)
    x[i] = std::ldexp(static_cast<float>(lpx::random_bits(8, 8, i) % 100001) - 50000.f, -12);
  std::vector<uint32_t> words(x.size());
  for (size_t i = 0; i < words.size(); ++i) words[i] = lpx::random_bits(1, 2, i) * 2654435761u;
  for (const Rounding m : kVariants) {
    INFO(lpx::rounding_name(m));
    lpx::CastOptions opt;
    opt.round = m;
    opt.sr_bits = 6;
    opt.random_words = words.data();
    opt.random_words_count = words.size();
    // Two pieces with index_offset give the whole call's codes: the words' own.
    std::vector<uint8_t> codes(x.size());
    const size_t cut = 4099;
    lpx::CastOptions first = opt, second = opt;
    second.index_offset = cut;
    lpx::encode_array(std::span<const float>(x).first(cut), std::span<uint8_t>(codes).first(cut), f, first);
    lpx::encode_array(std::span<const float>(x).subspan(cut), std::span<uint8_t>(codes).subspan(cut), f,
                      second);
    size_t bad = 0;
    for (size_t i = 0; i < x.size(); ++i)
      bad += codes[i] != lpx::encode(x[i], f, m, Overflow::ieee, words[i], 6) ? 1 : 0;
    CHECK(bad == 0);
    // Philox's words handed back reproduce the internal stream exactly.
    std::vector<uint32_t> philox(x.size());
    for (size_t i = 0; i < x.size(); ++i) philox[i] = lpx::random_bits(77, 5, i);
    lpx::CastOptions given = opt, internal = opt;
    given.random_words = philox.data();
    internal.random_words = nullptr;
    internal.random_words_count = 0;
    internal.seed = 77;
    internal.stream = 5;
    std::vector<float> a(x.size()), b(x.size());
    lpx::fake_cast_array(x, a, f, given);
    lpx::fake_cast_array(x, b, f, internal);
    CHECK(std::memcmp(a.data(), b.data(), a.size() * 4) == 0);
  }
}

TEST_CASE("SR variants in block quantization: the SIMD kernels equal the scalar reference", "[sr]") {
  const std::vector<int64_t> shape = {24, 96};
  std::vector<float> x(24 * 96);
  for (size_t i = 0; i < x.size(); ++i)
    x[i] = std::ldexp(static_cast<float>(lpx::random_bits(4, 4, i) % 200001) - 100000.f, -14);
  for (const char* spec : {"mxfp4", "mxfp8_e4m3", "nvfp4", "p3109_k8p3se:b32:e8m0", "int8:b32:e8m0"}) {
    for (const Rounding m : kVariants) {
      for (const int N : {3, 13, 32}) {
        INFO(spec << " " << lpx::rounding_name(m) << " N=" << N);
        lpx::QuantizeOptions opt;
        opt.round = m;
        opt.sr_bits = N;
        opt.seed = 5;
        opt.stream = 6;
        opt.index_offset = 1;  // off the Philox group boundary
        std::vector<float> fast(x.size()), ref(x.size());
        const lpx::BlockFormat f = lpx::parse_block_format(spec);
        const lpx::QuantizedTensor a = lpx::fake_quantize({x, shape}, fast, f, opt);
        opt.path = lpx::QuantizePath::reference;
        const lpx::QuantizedTensor b = lpx::fake_quantize({x, shape}, ref, f, opt);
        CHECK(a.codes == b.codes);
        CHECK(std::memcmp(fast.data(), ref.data(), fast.size() * 4) == 0);
      }
    }
  }
}

TEST_CASE("caller-given words in block quantization: the SIMD kernels read them as the reference does", "[sr]") {
  // QuantizeOptions::random_words through every SIMD strategy: along rows (contiguous,
  // 1x128 fp32 scales, NVFP4's two levels), down columns (the column-lane kernel, and its
  // transposing fallback for a column holding NaN), per tensor; each against the scalar
  // reference given the same words, which are not Philox's (a Philox-keyed bug could not
  // hide behind them). Then Philox's own words, from random_words(), reproduce the
  // internal stream bit for bit.
  const int64_t rows = 256, cols = 96;
  const std::vector<int64_t> shape = {rows, cols};
  std::vector<float> x(static_cast<size_t>(rows * cols)), nan_x;
  for (size_t i = 0; i < x.size(); ++i)
    x[i] = std::ldexp(static_cast<float>(lpx::random_bits(4, 9, i) % 200001) - 100000.f, -14);
  // A block whose amax is 2^100 beside elements of 2^-40: scaled, they fall below float32's
  // normal range, where the kernels hand the vector (or, down columns, the tile) to the
  // scalar reference, which must take the caller's words too.
  x[0] = 0x1p100f;
  x[1] = x[static_cast<size_t>(cols)] = 0x1p-40f;
  nan_x = x;
  nan_x[5 * cols + 7] = std::numeric_limits<float>::quiet_NaN();
  const uint64_t offset = 3;  // words[offset + i] for element i, off the Philox group boundary
  std::vector<uint32_t> words(x.size() + offset);
  for (size_t i = 0; i < words.size(); ++i) words[i] = lpx::random_bits(1, 2, i) * 2654435761u + 12345u;
  struct Case {
    const char* spec;
    int axis;
    const std::vector<float>* data;
  };
  const Case cases[] = {{"mxfp4", 1, &x},        {"mxfp4", 0, &x},        {"mxfp4", 0, &nan_x},
                        {"mxfp8_e4m3", 0, &x},   {"nvfp4", 1, &x},        {"nvfp4", 0, &x},
                        {"e4m3:b128:fp32", 1, &x}, {"e4m3:tensor:fp32", 1, &x}};
  const int64_t tiles_before = lpx::quantize_detail::column_kernel_tiles();
  for (const Case& c : cases) {
    for (const Rounding m : {Rounding::sr, Rounding::sr_rne}) {
      INFO(c.spec << " axis " << c.axis << (c.data == &nan_x ? " with NaN " : " ") << lpx::rounding_name(m));
      lpx::BlockFormat f = lpx::parse_block_format(c.spec);
      f.block.axis = c.axis;
      lpx::QuantizeOptions opt;
      opt.round = m;
      opt.sr_bits = 13;
      opt.headroom_3_4 = true;
      opt.index_offset = offset;
      opt.random_words = words.data();
      opt.random_words_count = words.size();
      opt.threads = 1;
      std::vector<float> fast(x.size()), ref(x.size());
      const lpx::QuantizedTensor a = lpx::fake_quantize({*c.data, shape}, fast, f, opt);
      opt.path = lpx::QuantizePath::reference;
      const lpx::QuantizedTensor b = lpx::fake_quantize({*c.data, shape}, ref, f, opt);
      CHECK(a.codes == b.codes);
      CHECK(a.scale_codes == b.scale_codes);
      CHECK(std::memcmp(fast.data(), ref.data(), fast.size() * 4) == 0);
      CHECK(a.stats.saturated == b.stats.saturated);
      CHECK(a.stats.flushed == b.stats.flushed);

      // Philox's words handed back equal the kernels' own draw (no words given).
      std::vector<uint32_t> philox(x.size() + offset);
      lpx::random_words(77, 5, 0, philox);
      lpx::QuantizeOptions given = opt, internal = opt;
      given.path = internal.path = lpx::QuantizePath::fastest;
      given.random_words = philox.data();
      given.random_words_count = philox.size();
      internal.random_words = nullptr;
      internal.random_words_count = 0;
      internal.seed = 77;
      internal.stream = 5;
      lpx::fake_quantize_values({*c.data, shape}, fast, f, given);
      lpx::fake_quantize_values({*c.data, shape}, ref, f, internal);
      CHECK(std::memcmp(fast.data(), ref.data(), fast.size() * 4) == 0);
    }
  }
  // The column-lane kernel took the finite axis-0 cases' tiles with the words (it declined
  // caller-given words before), so the comparison above covers it.
  CHECK(lpx::quantize_detail::column_kernel_tiles() > tiles_before);
}

TEST_CASE("random_words() draws random_bits() word for word", "[sr]") {
  // Lengths and starts around the vector Philox's group of 4 and its chains; a start just
  // below a multiple of 2^34 crosses the counter's high word.
  for (const uint64_t first : {uint64_t{0}, uint64_t{1}, uint64_t{3}, uint64_t{4097}, (uint64_t{1} << 34) - 70}) {
    for (const size_t n : {size_t{0}, size_t{1}, size_t{5}, size_t{31}, size_t{257}, size_t{5000}}) {
      INFO("first " << first << " n " << n);
      std::vector<uint32_t> w(n);
      lpx::random_words(0x0123456789abcdefull, 0xfeedu, first, w);
      size_t bad = 0;
      for (size_t i = 0; i < n; ++i) bad += w[i] != lpx::random_bits(0x0123456789abcdefull, 0xfeedu, first + i) ? 1 : 0;
      CHECK(bad == 0);
    }
  }
}
