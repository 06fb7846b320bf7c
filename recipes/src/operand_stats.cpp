// The per-operand statistics (operand_stats.hpp): error_stats with the BF16 overflow count,
// and identity_stats.
#include "operand_stats.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace lpx::detail {
namespace {

// The eight running sums of v^2 and (q - v)^2, added in order, and the counts, into st;
// returns the sum of squared errors.
double finish(const double (&signal)[8], const double (&noise)[8], uint32_t amax_bits, int64_t nonzero,
              int64_t flushed, int64_t n, OperandStats& st) {
  double sig = 0, noi = 0;
  for (int j = 0; j < 8; ++j) {
    sig += signal[j];
    noi += noise[j];
  }
  float amax;
  std::memcpy(&amax, &amax_bits, sizeof amax);
  st.elements = n;
  st.amax = amax;
  st.sqnr_db = noi == 0 ? std::numeric_limits<double>::infinity() : 10 * std::log10(sig / noi);
  st.flushed_pct = nonzero ? 100.0 * static_cast<double>(flushed) / static_cast<double>(nonzero) : 0;
  return noi;
}

// error_stats: SQNR, amax and % flushed of q against v (the quantizer's input), over the
// finite v. It runs on every quantized operand of every step. The sums of squares are in
// double, in eight running sums: sum j adds the elements i = j mod 8 in increasing i, each
// square rounded before it is added, and the eight are added in order at the end. Both
// loops below keep exactly that order, so every machine logs the same bits. A non-finite
// v is zeroed together with its q before the widening (both then add exactly 0), so a
// non-finite q beside a finite v still makes the noise infinite. Both loops return the sum
// of squared errors (see count_overflowed_loop for why error_stats reads it).
//
// The portable loop: 8-lane GCC/Clang vector extensions, compiled per SIMD level with
// run-time dispatch, the counts in 32-bit lanes emptied into 64-bit totals every
// kCountRun elements. About 0.5 ns per element on a 2-core Xeon, in cache or not: GCC
// widens each 8-lane half through two 4-lane conversions and keeps the vectors on the
// stack.
typedef float F8 __attribute__((vector_size(32)));
typedef int32_t I8 __attribute__((vector_size(32)));
typedef double D8 __attribute__((vector_size(64)));

__attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default"))) double error_stats_vectors(
    const float* v, const float* q, int64_t n, OperandStats& st) {
  constexpr int64_t kCountRun = int64_t{1} << 28;  // at most 2^25 per 32-bit lane
  D8 signal = {}, noise = {};
  I8 amax = {};  // the largest finite |v| as bits: non-negative floats order as their bits
  int64_t nonzero_all = 0, flushed_all = 0;
  const I8 magnitude = 0x7fffffff - I8{};
  const I8 largest = 0x7f7fffff - I8{};  // FLT_MAX's bits: above them, Inf and NaN
  for (int64_t run = 0; run < n; run += kCountRun) {
    const int64_t end = std::min(n, run + kCountRun);
    I8 nonzero = {}, flushed = {};
    for (int64_t i = run; i < end; i += 8) {
      F8 x = {}, y = {};
      if (end - i >= 8) {
        std::memcpy(&x, v + i, sizeof x);
        std::memcpy(&y, q + i, sizeof y);
      } else {  // the tail in the first lanes, zeros beside it (a zero adds nothing)
        for (int64_t j = 0; j < end - i; ++j) x[j] = v[i + j], y[j] = q[i + j];
      }
      const I8 ax = (I8)x & magnitude;
      const I8 finite = ax <= largest;  // -1 or 0 per lane
      const I8 ax_finite = ax & finite;
      amax = amax >= ax_finite ? amax : ax_finite;
      const I8 nz = finite & (x != 0);
      nonzero -= nz;
      flushed -= nz & (y == 0);
      const D8 xd = __builtin_convertvector((F8)((I8)x & finite), D8);
      const D8 d = __builtin_convertvector((F8)((I8)y & finite), D8) - xd;
      signal += xd * xd;
      noise += d * d;
    }
    for (int j = 0; j < 8; ++j) {
      nonzero_all += nonzero[j];
      flushed_all += flushed[j];
    }
  }
  double sums[2][8];
  int32_t amax_bits = 0;
  for (int j = 0; j < 8; ++j) {
    sums[0][j] = signal[j];
    sums[1][j] = noise[j];
    amax_bits = std::max(amax_bits, amax[j]);
  }
  return finish(sums[0], sums[1], static_cast<uint32_t>(amax_bits), nonzero_all, flushed_all, n, st);
}

#if defined(__x86_64__)
#if defined(__GNUC__) && !defined(__clang__)
// GCC 12's own intrinsic headers start some results from `__m512 __Y = __Y;` and then warn
// that __Y may be used uninitialized (GCC bug 105593); nothing here reads such a value.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
// The AVX-512 loop: 16 elements per iteration, the masks in mask registers, the counts as
// popcounts, each half widened by one instruction. The two halves go into the sums in
// order (elements i..i+7, then i+8..i+15), as the portable loop's consecutive iterations
// would; a partial last group is loaded under a mask, zeros beside it. Groups without Inf
// or NaN in v (nearly all) skip zeroing lanes, and the signal's squares are fused into
// their sums: 2.8 to 3.6 G elements/s on a 2-core AMD EPYC (lpx_bench_stats' Avx512/N,
// one thread), with the same bits (tests/recipes/test_operand_stats.cpp).
__attribute__((target("avx512f"))) double error_stats_avx512_loop(const float* v, const float* q, int64_t n,
                                                                    OperandStats& st) {
  __m512d signal = _mm512_setzero_pd(), noise = _mm512_setzero_pd();
  __m512i amax = _mm512_setzero_si512();  // the largest finite |v| as bits
  const __m512i magnitude = _mm512_set1_epi32(0x7fffffff);
  const __m512i largest = _mm512_set1_epi32(0x7f7fffff);  // FLT_MAX's bits: above, Inf and NaN
  const __m512 zero = _mm512_setzero_ps();
  int64_t nonzero_all = 0, flushed_all = 0;
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 in = n - i >= 16 ? __mmask16{0xffff} : static_cast<__mmask16>((1u << (n - i)) - 1);
    const __m512 x = _mm512_maskz_loadu_ps(in, v + i);
    const __m512 y = _mm512_maskz_loadu_ps(in, q + i);
    const __m512i ax = _mm512_and_si512(_mm512_castps_si512(x), magnitude);
    const __mmask16 finite = _mm512_cmple_epu32_mask(ax, largest);
    amax = _mm512_mask_max_epu32(amax, finite, amax, ax);
    const __mmask16 nz = _mm512_mask_cmp_ps_mask(finite, x, zero, _CMP_NEQ_OQ);
    const __mmask16 flushed = _mm512_mask_cmp_ps_mask(nz, y, zero, _CMP_EQ_OQ);
    nonzero_all += __builtin_popcount(nz);
    flushed_all += __builtin_popcount(flushed);
    __m512 xf = x, yf = y;
    if (__builtin_expect(finite != 0xffff, 0)) {  // Inf or NaN in v: those lanes add 0
      xf = _mm512_maskz_mov_ps(finite, x);
      yf = _mm512_maskz_mov_ps(finite, y);
    }
    // the high eight lanes moved down (128-bit lanes 2, 3 to 0, 1) and read as 256 bits
    const __m256 x_high = _mm512_castps512_ps256(_mm512_shuffle_f32x4(xf, xf, 0xEE));
    const __m256 y_high = _mm512_castps512_ps256(_mm512_shuffle_f32x4(yf, yf, 0xEE));
    const __m512d x0 = _mm512_cvtps_pd(_mm512_castps512_ps256(xf)), x1 = _mm512_cvtps_pd(x_high);
    const __m512d d0 = _mm512_sub_pd(_mm512_cvtps_pd(_mm512_castps512_ps256(yf)), x0);
    const __m512d d1 = _mm512_sub_pd(_mm512_cvtps_pd(y_high), x1);
    // x0 * x0 is exact in double (24-bit significands), so the fused multiply-add rounds
    // the same sum as the separate multiply and add; (q - v)^2 is not exact in general.
    signal = _mm512_fmadd_pd(x0, x0, signal);
    noise = _mm512_add_pd(noise, _mm512_mul_pd(d0, d0));
    signal = _mm512_fmadd_pd(x1, x1, signal);
    noise = _mm512_add_pd(noise, _mm512_mul_pd(d1, d1));
  }
  alignas(64) double sums[2][8];
  alignas(64) uint32_t largest_bits[16];
  _mm512_store_pd(sums[0], signal);
  _mm512_store_pd(sums[1], noise);
  _mm512_store_si512(largest_bits, amax);
  uint32_t amax_bits = 0;
  for (uint32_t b : largest_bits) amax_bits = std::max(amax_bits, b);
  return finish(sums[0], sums[1], amax_bits, nonzero_all, flushed_all, n, st);
}
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
#endif

#ifdef __clang__
// the sanitized build (clang -O1) cannot vectorize the two loops below and says so: fine.
#pragma clang diagnostic ignored "-Wpass-failed"
#endif

// The statistics of an operand the role leaves as it is (q == v): error_stats(v, v) without
// its arithmetic. The noise is zero (SQNR +inf) and nothing is flushed, so the largest
// finite |v| is the only figure the data decides. Non-negative floats order as their bits,
// so the max runs on integers, with Inf and NaN (bits above FLT_MAX's) counted as 0. An
// fp32 step observes every operand of every layer, and this pass reads each one once
// where error_stats converted and squared it: it was a fifth of a gpt-small fp32 step.
__attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default"))) void identity_stats_loop(
    const float* v, int64_t n, OperandStats& st) {
  uint32_t largest = 0;
#pragma omp simd reduction(max : largest)
  for (int64_t i = 0; i < n; ++i) {
    uint32_t bits;
    std::memcpy(&bits, v + i, sizeof bits);
    bits &= 0x7fffffffu;
    largest = std::max(largest, bits <= 0x7f7fffffu ? bits : 0u);
  }
  float amax;
  std::memcpy(&amax, &largest, sizeof amax);
  st.elements = n;
  st.amax = amax;
  st.sqnr_db = std::numeric_limits<double>::infinity();
  st.flushed_pct = 0;
}

// How many finite v[i] became Inf or NaN in q[i] (a BF16 cast's overflows). Branch-free
// so that it vectorizes: |x| <= FLT_MAX is false exactly for Inf and NaN. error_stats runs
// it only when the sum of squared errors it has just made is not finite, which happens
// exactly when there is such an element: the squared difference of two finite floats is
// below 2^258 and there are fewer than 2^63 of them, so the finite terms cannot overflow
// the double sum, while an Inf or NaN q beside a finite v adds +Inf or NaN, which no later
// term takes back. An operand without overflows (nearly every one) is read once, not twice
// (the separate pass was 3.4% of a gpt-small bf16 step).
__attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default"))) int64_t count_overflowed_loop(
    const float* __restrict v, const float* __restrict q, int64_t n) {
  const float largest = std::numeric_limits<float>::max();
  int64_t count = 0;
#pragma omp simd reduction(+ : count)
  for (int64_t i = 0; i < n; ++i)
    count += static_cast<int>(std::fabs(v[i]) <= largest) & static_cast<int>(!(std::fabs(q[i]) <= largest));
  return count;
}

// error_stats' count from the sum of squared errors its loop returned.
int64_t overflows_after(double noise, const float* v, const float* q, int64_t n) {
  return std::isfinite(noise) ? 0 : count_overflowed_loop(v, q, n);
}

}  // namespace

bool error_stats_avx512(const float* v, const float* q, int64_t n, OperandStats& st, int64_t& overflowed) {
#if defined(__x86_64__)
  static const bool available = __builtin_cpu_supports("avx512f");
  if (!available) return false;
  overflowed = overflows_after(error_stats_avx512_loop(v, q, n, st), v, q, n);
  return true;
#else
  (void)v, (void)q, (void)n, (void)st, (void)overflowed;
  return false;
#endif
}

int64_t error_stats_portable(const float* v, const float* q, int64_t n, OperandStats& st) {
  return overflows_after(error_stats_vectors(v, q, n, st), v, q, n);
}

int64_t error_stats(const float* v, const float* q, int64_t n, OperandStats& st) {
  int64_t count = 0;
  return error_stats_avx512(v, q, n, st, count) ? count : error_stats_portable(v, q, n, st);
}

void identity_stats(const float* v, int64_t n, OperandStats& st) { identity_stats_loop(v, n, st); }

}  // namespace lpx::detail
