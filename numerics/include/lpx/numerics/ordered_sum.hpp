// The reduction order of one GEMM element, written once for the CPU and the device so that
// `lpx train --gemm exact` gives the same bits on both (docs/kernels.md#ordered-gemms).
//
// A library GEMM (Eigen on the CPU, cuBLASLt on the device) sums in whatever order its
// blocking picks, which differs between the two and even between thread counts of some
// libraries. An ordered GEMM fixes the order instead: each element c = sum_k a_k b_k is
// reduced in increasing k by one of two rules.
//   fp32      s = 0; s = fma(a_k, b_k, s) for k = 0, 1, ...; c = s, or c + s when
//             accumulating into c (one more rounding). One rounding per product, as a
//             tensor core's FP32 accumulation or a CPU's FMA does it.
//   limited   a tensor core whose partial sums keep `mantissa_bits` explicit bits (recipes'
//             Accumulation::limited): p = a_k b_k in float32 (exact for 8-bit and narrower
//             operands), partial = rne_bits(partial + p), the exact sum rounded once, as
//             an adder with no wider intermediate does it; and every `promote_every`
//             products (and after the last) total += partial (float32), partial = 0;
//             total starts at c when accumulating, else 0.
// Both are exact IEEE operations (fmaf, float and double add, a bit-level rounding), so a
// device kernel that keeps the order reproduces the CPU's bits whatever its tiling.
//
// The limited rule rounds the exact sum, not a double sum: until 2026-12-06 it rounded
// fl64(partial + p), which differs where p lies on a midpoint of the grid and partial is
// below 2^-53 of it (the double makes a tie the exact sum does not have). Rounding the
// exact sum needs no double at all, so a float32 executor can round to odd in hardware and
// skip the midpoint test (docs/kernels.md#ordered-gemms).
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#include "lpx/numerics/hd.hpp"

namespace lpx {

// fast: the executor's fastest fp32 product (cuBLASLt; on the CPU the exact order's
// register tiles where it has FMA, Eigen elsewhere: sim/gemm.hpp); exact: the order above.
enum class GemmOrder : uint8_t { fast, exact };

struct LimitedSum {
  int mantissa_bits = 23;     // 23: plain float32 (the fp32 rule above)
  int64_t promote_every = 0;  // 0: never promote (one partial sum over all of k)
  LPX_HD bool fp32() const { return mantissa_bits >= 23; }
};

// x rounded to nearest-even with mantissa_bits + 1 significant bits (0 <= mantissa_bits
// < 52), on the bits of the double: add half of the dropped bits' weight minus one plus
// the lowest kept bit (ties to even), then clear the dropped bits. A carry out of the
// mantissa moves to the next binade; signed zero and Inf come out unchanged. A NaN comes
// out as itself: on the bits alone, a NaN whose kept payload bits are all ones would carry
// through the exponent into the sign and leave a signed zero, and NaN payloads are the
// executor's (a GPU makes 0x7fffffff, which widens to exactly such a NaN; x86 makes
// 0xffc00000), so a NaN product would vanish from a GPU's sum and not from the CPU's.
// For a finite normal x this is ldexp(nearbyint(ldexp(frexp(x), mantissa_bits + 1)), ...),
// which tests/sim/test_gradcheck.cpp holds it to. Branch-free (the NaN case is a select),
// so loops over it vectorize.
LPX_HD inline double round_mantissa_bits(double x, int mantissa_bits) {
  const int drop = 52 - mantissa_bits;
  uint64_t b;
  std::memcpy(&b, &x, sizeof b);
  const uint64_t half = (uint64_t{1} << (drop - 1)) - 1;
  b = (b + half + ((b >> drop) & 1)) & ~((uint64_t{1} << drop) - 1);
  double r;
  std::memcpy(&r, &b, sizeof r);
  return x != x ? x : r;
}

// x + y rounded to odd with 53 bits: the double nearest the exact sum where the sum is a
// double, else the neighbour of the two around it whose last mantissa bit is 1. Rounding
// that to q <= 51 significant bits gives the exact sum rounded to q bits (two spare bits
// keep the sticky information; Boldo and Melquiond, "When double rounding is odd", 2005).
// TwoSum gives the error e of s = fl(x + y) exactly; e != 0 with an even s moves s one
// ulp toward e. A non-finite s is returned as it is.
LPX_HD inline double sum_rounded_to_odd(double x, double y) {
  const double s = x + y;
  const double bb = s - x;
  const double e = (x - (s - bb)) + (y - bb);
  if (e == 0.0 || s - s != 0.0) return s;  // exact, or Inf or NaN (whose e is NaN)
  uint64_t b;
  std::memcpy(&b, &s, sizeof b);
  if ((b & 1) == 0) b += (e > 0) == (s > 0) ? 1 : uint64_t(-1);  // away from or toward zero
  double r;
  std::memcpy(&r, &b, sizeof r);
  return r;
}

// One product into a limited partial sum: the exact partial + p rounded once to
// mantissa_bits (< 52), then to float32 (which moves nothing but a subnormal result, and
// a subnormal sum of two floats is exact).
LPX_HD inline float limited_add(float partial, float a, float b, int mantissa_bits) {
#if defined(__CUDA_ARCH__)
  const float p = __fmul_rn(a, b);  // never contracted into an FMA
#else
  const float p = a * b;
#endif
  return static_cast<float>(
      round_mantissa_bits(sum_rounded_to_odd(static_cast<double>(partial), static_cast<double>(p)), mantissa_bits));
}

// c_ij by the rule of `acc`: a_k = a[k * a_step], b_k = b[k * b_step]; c0 is the value
// accumulated into (ignored unless accumulate). The scalar definition: the CPU's
// vectorized loops and the device kernel are tested against it.
LPX_HD inline float ordered_dot(const float* a, int64_t a_step, const float* b, int64_t b_step,
                                int64_t k, LimitedSum acc, float c0, bool accumulate) {
  if (acc.fp32()) {
    float s = 0.0f;
    for (int64_t i = 0; i < k; ++i) s = fmaf(a[i * a_step], b[i * b_step], s);
    return accumulate ? c0 + s : s;
  }
  const int64_t every = acc.promote_every > 0 ? acc.promote_every : k;
  float total = accumulate ? c0 : 0.0f, partial = 0.0f;
  for (int64_t i = 0; i < k; ++i) {
    partial = limited_add(partial, a[i * a_step], b[i * b_step], acc.mantissa_bits);
    if ((i + 1) % every == 0 || i + 1 == k) {
      total += partial;
      partial = 0.0f;
    }
  }
  return total;
}

// c_ij by the limited rule with DeepSeek-V3's scales at promotion (recipes'
// Accumulation::scales_at_promotion): a_k and b_k are element values (codes decoded, the
// block scale left out); the products of promotion run r (k in [r every, (r + 1) every))
// are summed by the limited rule, and the run's partial sum enters the total as
//   total = fma(fl32(sa_r * sb_r), partial, total),
// sa_r = sa[r * sa_step], sb_r = sb[r * sb_step] the two operands' scales over that run.
// The scales' product is rounded once and the fma rounds once: DeepGEMM's promotion
// (a scale product per run, then final += scale * partial, contracted to one FFMA).
// acc must be limited with promote_every >= 1.
LPX_HD inline float ordered_dot_scaled(const float* a, int64_t a_step, const float* b, int64_t b_step,
                                       int64_t k, LimitedSum acc, const float* sa, int64_t sa_step,
                                       const float* sb, int64_t sb_step, float c0, bool accumulate) {
  const int64_t every = acc.promote_every;
  float total = accumulate ? c0 : 0.0f;
  for (int64_t r = 0; r * every < k; ++r) {
    float partial = 0.0f;
    const int64_t end = r * every + every < k ? r * every + every : k;
    for (int64_t i = r * every; i < end; ++i)
      partial = limited_add(partial, a[i * a_step], b[i * b_step], acc.mantissa_bits);
#if defined(__CUDA_ARCH__)
    const float scale = __fmul_rn(sa[r * sa_step], sb[r * sb_step]);
#else
    const float scale = sa[r * sa_step] * sb[r * sb_step];
#endif
    total = fmaf(scale, partial, total);
  }
  return total;
}

}  // namespace lpx
