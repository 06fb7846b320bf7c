// The scalar codec (formats/codec.hpp) against CUDA's own host conversions, compiled by
// the host compiler from /usr/local/cuda/include (no GPU, no nvcc needed):
//   cuda_fp8.h  __nv_cvt_float_to_fp8, __NV_SATFINITE / __NV_NOSAT, E4M3 / E5M2: all 2^32
//               float32 inputs (OpenMP), satfinite vs Overflow::sat, nosat vs Overflow::ieee
//   cuda_fp6.h, cuda_fp4.h  __nv_cvt_float_to_fp6/fp4 (saturating; RN and RZ)
//   cuda_bf16.h, cuda_fp16.h  __float2bfloat16_rn/_rz/_ru/_rd, __float2half_rn/_rz/_ru/_rd
// for >= 10^7 inputs per mode (random bit patterns, random in-range values, every value
// and midpoint +-1 ulp). NaN inputs are compared separately: CUDA turns every NaN into one
// positive code, lpx follows its documented NaN policy (codec.hpp), and the test pins both.
#include <catch2/catch.hpp>

#if __has_include(<cuda_fp8.h>) && __has_include(<cuda_fp6.h>) && __has_include(<cuda_fp4.h>) && \
    __has_include(<cuda_bf16.h>) && __has_include(<cuda_fp16.h>)
#define LPX_HAVE_CUDA_HEADERS 1
#endif

#ifdef LPX_HAVE_CUDA_HEADERS

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp4.h>
#include <cuda_fp6.h>
#include <cuda_fp8.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <functional>
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

float f32(uint32_t b) { return lpx::bits_to_float(b); }
bool is_nan_bits(uint32_t b) { return (b & 0x7fffffffu) > 0x7f800000u; }

std::string hex(uint32_t b) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%08x", b);
  return buf;
}

// One comparison: CUDA's conversion vs lpx::encode with a rounding and overflow policy.
struct Pair {
  const char* name;
  std::function<uint32_t(float)> cuda;
  ElementFormat format;
  Rounding round;
  Overflow overflow;
};

// Compares every pair on every non-NaN input; reports the first few mismatches in hex.
void compare(const std::vector<Pair>& pairs, const std::vector<float>& inputs) {
  for (const Pair& p : pairs) {
    int64_t mismatches = 0;
    const int64_t n = static_cast<int64_t>(inputs.size());
#pragma omp parallel for reduction(+ : mismatches) schedule(static)
    for (int64_t i = 0; i < n; ++i) {
      const float x = inputs[static_cast<size_t>(i)];
      if (std::isnan(x)) continue;
      mismatches += p.cuda(x) != lpx::encode(x, p.format, p.round, p.overflow);
    }
    std::string first;
    for (size_t i = 0; i < inputs.size() && mismatches > 0 && first.size() < 400; ++i) {
      const float x = inputs[i];
      if (std::isnan(x)) continue;
      const uint32_t c = p.cuda(x), l = lpx::encode(x, p.format, p.round, p.overflow);
      if (c != l) first += "x=" + hex(lpx::float_to_bits(x)) + " cuda " + hex(c) + " lpx " + hex(l) + "\n";
    }
    INFO(p.name << ": " << mismatches << " mismatches of " << inputs.size() << "\n" << first);
    CHECK(mismatches == 0);
  }
}

// >= 10^7 inputs for a format: random float32 bit patterns, random values whose exponent
// lies within the format's range (+-4 binades), and every value and midpoint +-1 ulp.
std::vector<float> inputs_for(const ElementFormat& f, size_t random_count) {
  std::vector<float> v;
  v.reserve(2 * random_count + 8 * (1u << f.bits));
  std::mt19937_64 rng(0xC0DEC0DEull + f.bits);
  for (size_t i = 0; i < random_count; ++i) v.push_back(f32(static_cast<uint32_t>(rng())));
  const int lo_exp = 1 - f.bias - f.mantissa_bits - 4, hi_exp = f.emax() + 4;
  for (size_t i = 0; i < random_count; ++i) {
    const uint64_t r = rng();
    const int e = lo_exp + static_cast<int>((r >> 32) % static_cast<uint64_t>(hi_exp - lo_exp + 1));
    const uint32_t biased = static_cast<uint32_t>(std::max(0, std::min(254, e + 127)));
    v.push_back(f32((static_cast<uint32_t>(r) & 0x807fffffu) | (biased << 23)));
  }
  std::vector<double> values;
  for (uint32_t c = 0; c < (1u << f.bits); ++c) {
    const double d = lpx::decode(c, f);
    if (std::isfinite(d) && d >= 0) values.push_back(d);
  }
  std::sort(values.begin(), values.end());
  const double max = values.back();
  values.push_back(max + std::ldexp(1.0, f.emax() - f.mantissa_bits));  // next binade step
  auto around = [&v](double d) {
    const float x = static_cast<float>(d);
    if (!std::isfinite(x) || static_cast<double>(x) != d) return;
    for (float s : {1.0f, -1.0f}) {
      v.push_back(s * x);
      v.push_back(s * std::nextafter(x, std::numeric_limits<float>::infinity()));
      v.push_back(s * std::nextafter(x, 0.0f));
    }
  };
  for (size_t i = 0; i < values.size(); ++i) {
    around(values[i]);
    if (i + 1 < values.size()) around(values[i] + (values[i + 1] - values[i]) / 2);
  }
  for (uint32_t b : {0x0u, 0x1u, 0x7fffffu, 0x800000u, 0x7f7fffffu, 0x7f800000u}) {
    v.push_back(f32(b));
    v.push_back(f32(b | 0x80000000u));
  }
  return v;
}

uint32_t fp8(float x, __nv_saturation_t s, __nv_fp8_interpretation_t k) {
  return __nv_cvt_float_to_fp8(x, s, k);
}

}  // namespace

TEST_CASE("FP8 E4M3/E5M2: all 2^32 float32 inputs vs cuda_fp8.h", "[codec][cuda][slow]") {
  const ElementFormat& e4 = lpx::fmt8::e4m3fn;
  const ElementFormat& e5 = lpx::fmt8::e5m2;
  int64_t mism[4] = {0, 0, 0, 0};
  int64_t nan_cuda = 0, nan_lpx = 0, m0 = 0, m1 = 0, m2 = 0, m3 = 0;
  const int64_t total = int64_t{1} << 32;
#pragma omp parallel for reduction(+ : m0, m1, m2, m3, nan_cuda, nan_lpx) schedule(static, 1 << 20)
  for (int64_t i = 0; i < total; ++i) {
    const uint32_t b = static_cast<uint32_t>(i);
    const float x = f32(b);
    const uint32_t c0 = fp8(x, __NV_SATFINITE, __NV_E4M3), c1 = fp8(x, __NV_NOSAT, __NV_E4M3);
    const uint32_t c2 = fp8(x, __NV_SATFINITE, __NV_E5M2), c3 = fp8(x, __NV_NOSAT, __NV_E5M2);
    const uint32_t l0 = lpx::encode(x, e4, Rounding::rne, Overflow::sat);
    const uint32_t l1 = lpx::encode(x, e4, Rounding::rne, Overflow::ieee);
    const uint32_t l2 = lpx::encode(x, e5, Rounding::rne, Overflow::sat);
    const uint32_t l3 = lpx::encode(x, e5, Rounding::rne, Overflow::ieee);
    if (is_nan_bits(b)) {
      // CUDA: every NaN -> one positive code (0x7F for both formats, either saturation).
      nan_cuda += (c0 != 0x7Fu) + (c1 != 0x7Fu) + (c2 != 0x7Fu) + (c3 != 0x7Fu);
      // lpx (codec.hpp): the quiet NaN with the input's sign, under sat too.
      const uint32_t s = b >> 31 ? 0x80u : 0u;
      nan_lpx += (l0 != (0x7Fu | s)) + (l1 != (0x7Fu | s)) + (l2 != (0x7Eu | s)) +
                 (l3 != (0x7Eu | s));
      continue;
    }
    m0 += c0 != l0;
    m1 += c1 != l1;
    m2 += c2 != l2;
    m3 += c3 != l3;
  }
  mism[0] = m0, mism[1] = m1, mism[2] = m2, mism[3] = m3;
  const char* names[4] = {"E4M3 satfinite vs sat", "E4M3 nosat vs ieee", "E5M2 satfinite vs sat",
                          "E5M2 nosat vs ieee"};
  for (int k = 0; k < 4; ++k) {
    std::string first;
    for (uint64_t i = 0; i < (uint64_t{1} << 32) && mism[k] > 0 && first.size() < 300; ++i) {
      const uint32_t b = static_cast<uint32_t>(i);
      const float x = f32(b);
      if (is_nan_bits(b)) continue;
      const auto sat = (k % 2 == 0) ? __NV_SATFINITE : __NV_NOSAT;
      const auto kind = k < 2 ? __NV_E4M3 : __NV_E5M2;
      const uint32_t c = fp8(x, sat, kind);
      const uint32_t l = lpx::encode(x, k < 2 ? e4 : e5, Rounding::rne,
                                     k % 2 == 0 ? Overflow::sat : Overflow::ieee);
      if (c != l) first += "x=" + hex(b) + " cuda " + hex(c) + " lpx " + hex(l) + "\n";
    }
    INFO(names[k] << ": " << mism[k] << " mismatches\n" << first);
    CHECK(mism[k] == 0);
  }
  CHECK(nan_cuda == 0);
  CHECK(nan_lpx == 0);
}

TEST_CASE("FP6/FP4 vs cuda_fp6.h / cuda_fp4.h (RN and RZ, saturating)", "[codec][cuda][slow]") {
  constexpr size_t kRandom = 5000000;  // x2 (bit patterns, in-range values) + midpoints
  struct Kind {
    ElementFormat f;
    std::function<uint32_t(float, cudaRoundMode)> cuda;
  };
  const Kind kinds[] = {
      {lpx::fmt6::e3m2, [](float x, cudaRoundMode m) -> uint32_t { return __nv_cvt_float_to_fp6(x, __NV_E3M2, m); }},
      {lpx::fmt6::e2m3, [](float x, cudaRoundMode m) -> uint32_t { return __nv_cvt_float_to_fp6(x, __NV_E2M3, m); }},
      {lpx::fmt4::e2m1, [](float x, cudaRoundMode m) -> uint32_t { return __nv_cvt_float_to_fp4(x, __NV_E2M1, m); }},
  };
  for (const Kind& k : kinds) {
    const std::vector<float> in = inputs_for(k.f, kRandom);
    REQUIRE(in.size() >= 10000000);
    auto cuda = k.cuda;
    std::vector<Pair> pairs;
    for (Overflow o : {Overflow::sat, Overflow::ieee}) {  // no Inf/NaN: ieee clamps too
      pairs.push_back({"rn", [cuda](float x) { return cuda(x, cudaRoundNearest); }, k.f, Rounding::rne, o});
      pairs.push_back({"rz", [cuda](float x) { return cuda(x, cudaRoundZero); }, k.f, Rounding::rtz, o});
    }
    INFO(k.f.name);
    compare(pairs, in);
    // NaN: CUDA gives +max (no NaN in the format); lpx follows ml_dtypes (codec.hpp):
    // +NaN -> the -0 code, -NaN -> +0.
    for (uint32_t b : {0x7fc00000u, 0x7f800001u, 0x7fffffffu, 0xffc00000u, 0xff800001u}) {
      CHECK(k.cuda(f32(b), cudaRoundNearest) == k.f.max_magnitude);
      CHECK(lpx::encode(f32(b), k.f, Rounding::rne, Overflow::sat) == (b >> 31 ? 0u : k.f.sign_mask));
    }
  }
}

TEST_CASE("bfloat16/float16 vs cuda_bf16.h / cuda_fp16.h (rn, rz, ru, rd)", "[codec][cuda][slow]") {
  constexpr size_t kRandom = 5000000;
  using Conv = uint32_t (*)(float);
  struct Mode {
    const char* name;
    Conv cuda;
    Rounding round;
  };
  const Mode bf[] = {
      {"bf16 rn", [](float x) -> uint32_t { return __bfloat16_as_ushort(__float2bfloat16_rn(x)); }, Rounding::rne},
      {"bf16 rz", [](float x) -> uint32_t { return __bfloat16_as_ushort(__float2bfloat16_rz(x)); }, Rounding::rtz},
      {"bf16 ru", [](float x) -> uint32_t { return __bfloat16_as_ushort(__float2bfloat16_ru(x)); }, Rounding::rup},
      {"bf16 rd", [](float x) -> uint32_t { return __bfloat16_as_ushort(__float2bfloat16_rd(x)); }, Rounding::rdn},
  };
  const Mode hf[] = {
      {"f16 rn", [](float x) -> uint32_t { return __half_as_ushort(__float2half_rn(x)); }, Rounding::rne},
      {"f16 rz", [](float x) -> uint32_t { return __half_as_ushort(__float2half_rz(x)); }, Rounding::rtz},
      {"f16 ru", [](float x) -> uint32_t { return __half_as_ushort(__float2half_ru(x)); }, Rounding::rup},
      {"f16 rd", [](float x) -> uint32_t { return __half_as_ushort(__float2half_rd(x)); }, Rounding::rdn},
  };
  for (int which = 0; which < 2; ++which) {
    const ElementFormat& f = which == 0 ? lpx::fmt16::bf16 : lpx::fmt16::f16;
    const std::vector<Mode> modes(which == 0 ? bf : hf, (which == 0 ? bf : hf) + 4);
    const std::vector<float> in = inputs_for(f, kRandom);
    REQUIRE(in.size() >= 10000000);
    std::vector<Pair> pairs;
    for (const Mode& m : modes) pairs.push_back({m.name, m.cuda, f, m.round, Overflow::ieee});
    compare(pairs, in);
    // NaN: both give a NaN; lpx's is the canonical quiet NaN with the input's sign.
    for (uint32_t b : {0x7fc00000u, 0x7f800001u, 0xffc00000u, 0xff812345u}) {
      for (const Mode& m : modes) {
        INFO(m.name << " NaN " << hex(b) << " -> cuda " << hex(m.cuda(f32(b))));
        CHECK(lpx::is_nan_code(m.cuda(f32(b)), f));
      }
      CHECK(lpx::encode(f32(b), f, Rounding::rne, Overflow::ieee) == (f.nan_code | (b >> 31 ? f.sign_mask : 0u)));
    }
  }
}

#else

TEST_CASE("CUDA host conversions", "[codec][cuda][slow]") {
  WARN("skipped: CUDA headers not found");
  SUCCEED();
}

#endif
