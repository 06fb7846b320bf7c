// The limited accumulator's GEMM loop (limited_gemm.hpp) with Highway, compiled once per
// SIMD target and chosen at run time (docs/kernels.md#ordered-gemms, "On the CPU").
//
// Shape: a tile of 8 rows (4 on targets with 16 vector registers) by one vector of
// columns keeps its partial sums and fp32 totals in registers while k runs, so each load
// of a vector of B feeds every row of the tile and no partial sum goes through memory.
// Columns past the last whole vector run through the same tiles, copied beside zero
// columns into one vector's width. With the scales at promotion (gemm_scaled) the loop is
// the same and each promotion is one fused multiply-add of the run's two scales
// (PromoteScaled).
//
// Arithmetic: the definition (numerics/ordered_sum.hpp, limited_add) rounds the exact sum
// of a partial sum and a float32 product to mb explicit mantissa bits. Here the sum is
// taken in float32 lanes and rounded to mb bits: twice the lanes of a double, no
// conversions. The rounding is Veltkamp's split (Step), three float operations; where it
// would overflow, the tile runs again with the rounding done on the sum's bits. The sum
// itself is taken one of two ways:
//   - Rounded to odd (AVX-512, mb <= 21): the lane adds once rounding down and once up
//     (AVX-512's per-instruction rounding) and keeps the result with an odd last bit,
//     which is the exact sum where that is a float32. With 24 bits, two more than the
//     grid's mb + 1, rounding it to the grid gives the exact sum's rounding (the grid's
//     midpoints are never odd floats), so no lane needs a test. This ran 1.7x as fast as the
//     nearest-sum loop below in lpx_bench_gemm's limited_14b_128.
//   - To nearest (other targets, and mb = 22, where a 24-bit odd float can be a
//     midpoint): s = fl(partial + p), whose rounding is right unless s is a midpoint of
//     the mb-bit grid; then the bits float32 dropped decide the direction. A vector with
//     one goes through Midpoints, which recovers those bits with TwoSum. How often depends
//     on the operands: products with few significant bits (bf16, 8-bit codes under
//     power-of-two scales) leave few bits below the grid and land on midpoints often.
// Subnormal sums: the definition rounds relative to the value's own exponent, and the
// cast to float32 rounds again. That needs an operand below 2^-50 (TinyOperands); only
// then is every sum's range tracked, and a tile that had a subnormal sum is recomputed by
// the scalar definition.
// Otherwise, for a finite s: every midpoint of the mb-bit grid is a float32 (mb <= 22)
// and rounding is monotone, so the exact sum lies strictly between the same two
// midpoints as s; both round to the one grid point between them. s = Inf from finite
// operands means the exact sum is at least FLT_MAX + ulp/2, which the definition rounds
// to 2^128 and casts to Inf (rounded to odd it is FLT_MAX, whose rounding is Inf too). A
// NaN s is the same NaN as the definition's double sum (same operands, same order), and
// both roundings pass a NaN through unchanged.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "limited_gemm_hwy.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep

#include <hwy/highway.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <utility>
#include <vector>

#include "limited_gemm.hpp"
#include "lpx/numerics/ordered_sum.hpp"

HWY_BEFORE_NAMESPACE();
namespace lpx::sim::simd {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

using DF = hn::ScalableTag<float>;
using DU = hn::RebindToUnsigned<DF>;
using VF = hn::Vec<DF>;
using VU = hn::Vec<DU>;

struct Rounding {
  int mb, drop;  // drop: the float32 mantissa bits below the kept ones, >= 1
  VU keep, dropped, tie, one, mag;
  VF split;  // 2^drop + 1, Veltkamp's factor (Step)
  explicit Rounding(int mantissa_bits) : mb(mantissa_bits), drop(23 - mantissa_bits) {
    const DU du;
    split = hn::Set(DF(), static_cast<float>((1u << drop) + 1u));
    keep = hn::Set(du, ~((uint32_t{1} << drop) - 1));
    dropped = hn::Set(du, (uint32_t{1} << drop) - 1);
    tie = hn::Set(du, uint32_t{1} << (drop - 1));
    one = hn::Set(du, 1u);
    mag = hn::Set(du, 0x7fffffffu);
  }
};

// Subnormal sums, tracked without a branch where the operands allow them (see
// TinyOperands): lo = min over the tile of (|s| bits - 1), below 0x007fffff for a
// subnormal s (zero wraps to the top).
struct Range {
  VU lo;
  Range() : lo(hn::Set(DU(), ~0u)) {}
  bool normal() const {
    const DU du;
    HWY_ALIGN uint32_t l[hn::MaxLanes(du)];
    hn::Store(lo, du, l);
    for (size_t i = 0; i < hn::Lanes(du); ++i)
      if (l[i] < 0x007fffffu) return false;
    return true;
  }
};

// The lanes of s = fl(partial + p) that are midpoints of the mb-bit grid, rounded as the
// definition rounds the exact sum; other lanes keep `rounded`. TwoSum gives the exact sum
// as s + e. Where e != 0 the exact sum lies on e's side of the midpoint and rounds to the
// neighbour there, s + tie or s - tie in bits; where e = 0 the tie to even in `rounded`
// is right. A NaN s (NaN e) keeps `rounded`, as the definition does.
HWY_INLINE VF Midpoints(const Rounding& r, VF partial, VF p, VF s, VF rounded) {
  const DF df;
  const DU du;
  const hn::RebindToSigned<DF> di;
  const VF bb = hn::Sub(s, partial);
  const VF e = hn::Add(hn::Sub(partial, hn::Sub(s, bb)), hn::Sub(p, bb));
  const VU bits = hn::BitCast(du, s);
  const auto mid = hn::RebindMask(df, hn::Eq(hn::And(hn::Add(bits, r.tie), r.dropped), hn::Zero(du)));
  const auto inexact = hn::Gt(hn::Abs(e), hn::Zero(df));  // false for NaN
  const auto toward_zero = hn::RebindMask(df, hn::Lt(hn::BitCast(di, hn::Xor(bits, hn::BitCast(du, e))), hn::Zero(di)));
  const VF directed = hn::BitCast(df, hn::IfThenElse(hn::RebindMask(du, toward_zero), hn::Sub(bits, r.tie), hn::Add(bits, r.tie)));
  return hn::IfThenElse(hn::And(mid, inexact), directed, rounded);
}

#if HWY_TARGET <= HWY_AVX3
// Whether this target can round sums to odd (SumToOdd); elsewhere every width takes the
// nearest sum and Midpoints.
constexpr bool kHasOddSum = true;

// partial + p rounded to odd: of the sums rounded down and up, the one whose last bit is
// 1 (they are adjacent floats, so one is, unless both are the exact sum). Highway has no
// per-instruction rounding, so this is AVX-512's own add with an embedded rounding mode.
HWY_INLINE VF SumToOdd(const Rounding& r, VF partial, VF p) {
  const VF down{_mm512_add_round_ps(partial.raw, p.raw, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC)};
  const VF up{_mm512_add_round_ps(partial.raw, p.raw, _MM_FROUND_TO_POS_INF | _MM_FROUND_NO_EXC)};
  return hn::IfThenElse(hn::RebindMask(DF(), hn::TestBit(hn::BitCast(DU(), down), r.one)), down, up);
}
#else
constexpr bool kHasOddSum = false;
#endif

// s rounded to nearest even on its bits: (bits + tie - 1 + lowest kept bit) & keep, with
// u = bits + tie. A NaN s stays s, as in round_mantissa_bits: on the bits, a NaN with
// all-ones kept payload bits would carry into the sign and become a signed zero. (Only
// the kSplit-off rerun and Midpoints take this path, so the select costs the hot loop
// nothing: a NaN sum makes the tile's total non-finite.)
HWY_INLINE VF RoundBits(const Rounding& r, VU bits, VU u) {
  const DF df;
  const VF s = hn::BitCast(df, bits);
  const VF rounded = hn::BitCast(df, hn::And(hn::Sub(u, hn::AndNot(hn::ShiftRightSame(bits, r.drop), r.one)), r.keep));
  return hn::IfThenElse(hn::IsNaN(s), s, rounded);
}

// Whether a lane of s = bits is a midpoint of the mb-bit grid: u = bits + tie has its
// dropped bits all zero.
HWY_INLINE bool AnyMidpoint(const Rounding& r, VU u) {
  const DU du;
#if HWY_TARGET <= HWY_AVX3
  // AVX-512's TestBit is the vptestmd instruction, (u & dropped) != 0 per lane for any
  // number of bits in `dropped`: one operation instead of an And and a compare (other
  // targets' TestBit is only defined for one bit).
  return !hn::AllTrue(du, hn::TestBit(u, r.dropped));
#else
  return !hn::AllFalse(du, hn::Eq(hn::And(u, r.dropped), hn::Zero(du)));
#endif
}

// partial <- limited_add(partial, av, b, mb), lane by lane, where no sum is subnormal
// (tracked in `range` when kTiny).
//   kOdd: the sum is rounded to odd (SumToOdd), so its rounding to the grid needs no
//     midpoint test; otherwise it is the nearest float32 and midpoints take Midpoints.
//   kSplit: the sum is rounded by Veltkamp's splitting, hi = g + (s - g) with
//     g = (2^drop + 1) s, three float operations instead of five integer ones. For every
//     float32 s that is normal and with g finite, hi is s rounded to nearest even with
//     mb + 1 significant bits, the same bits as RoundBits, ties included (checked over
//     every normal float of both signs for each drop 1..22 by the hidden test
//     "[.exhaustive]" in tests/sim/test_gradcheck.cpp). Where g overflows, hi is NaN;
//     Tiles sees the non-finite total and reruns the tile with kSplit off.
//   otherwise: RoundBits, exact for every s including Inf and NaN.
template <bool kTiny, bool kOdd, bool kSplit>
HWY_INLINE VF Step(const Rounding& r, Range& range, VF partial, float av, VF b) {
  const DF df;
  const DU du;
  const VF p = hn::Mul(hn::Set(df, av), b);
  VF s;
  if constexpr (kOdd) {
#if HWY_TARGET <= HWY_AVX3
    s = SumToOdd(r, partial, p);
#endif
  } else {
    s = hn::Add(partial, p);
  }
  const VU bits = hn::BitCast(du, s);
  if constexpr (kTiny) range.lo = hn::Min(range.lo, hn::Sub(hn::And(bits, r.mag), r.one));
  if constexpr (kOdd) {
    if constexpr (kSplit) {
      const VF g = hn::Mul(s, r.split);
      return hn::Add(g, hn::Sub(s, g));
    } else {
      return RoundBits(r, bits, hn::Add(bits, r.tie));
    }
  } else {
    const VU u = hn::Add(bits, r.tie);
    if constexpr (kSplit) {
      const VF g = hn::Mul(s, r.split);
      const VF hi = hn::Add(g, hn::Sub(s, g));
      if (HWY_LIKELY(!AnyMidpoint(r, u))) return hi;
      return Midpoints(r, partial, p, s, RoundBits(r, bits, u));
    } else {
      const VF rounded = RoundBits(r, bits, u);
      if (HWY_LIKELY(!AnyMidpoint(r, u))) return rounded;
      return Midpoints(r, partial, p, s, rounded);
    }
  }
}

// Where a block of C and its B columns live: element (i, j) of C at c[(i - row0) * ldc + j],
// B's row kk at b + kk * ldb. With scales at promotion, sa + i * runs holds row i of A's
// scales (one per run of `every` products) and sb + r * ldb B's scales over run r, one per
// column; otherwise both are null.
struct Out {
  const float* b;
  int64_t ldb;
  float* c;
  int64_t ldc, row0;
  const float* sa = nullptr;
  const float* sb = nullptr;
  int64_t runs = 0;
  float* row(int64_t i) const { return c + (i - row0) * ldc; }
};

// C[i0:i1, j0:j1] by the scalar definition.
void DefinitionTile(const float* a, int64_t a_si, int64_t a_sk, const Out& o, int64_t i0, int64_t i1, int64_t j0,
                    int64_t j1, int64_t k, LimitedSum acc, bool accumulate) {
  for (int64_t i = i0; i < i1; ++i)
    for (int64_t j = j0; j < j1; ++j)
      o.row(i)[j] = o.sa ? ordered_dot_scaled(a + i * a_si, a_sk, o.b + j, o.ldb, k, acc, o.sa + i * o.runs, 1,
                                              o.sb + j, o.ldb, o.row(i)[j], accumulate)
                         : ordered_dot(a + i * a_si, a_sk, o.b + j, o.ldb, k, acc, o.row(i)[j], accumulate);
}

// total + sa sb partial with one rounding (ordered_dot_scaled's promotion), lane by lane.
// Highway's MulAdd is one fused operation only where the target has FMA instructions;
// elsewhere each lane takes std::fma.
HWY_INLINE VF PromoteScaled(VF scale, VF partial, VF total) {
#if HWY_NATIVE_FMA
  return hn::MulAdd(scale, partial, total);
#else
  const DF df;
  HWY_ALIGN float s[hn::MaxLanes(df)], p[hn::MaxLanes(df)], t[hn::MaxLanes(df)];
  hn::Store(scale, df, s);
  hn::Store(partial, df, p);
  hn::Store(total, df, t);
  for (size_t i = 0; i < hn::Lanes(df); ++i) t[i] = std::fma(s[i], p[i], t[i]);
  return hn::Load(df, t);
#endif
}

// Rows in one register tile: each load of a vector of B feeds this many partial sums.
// AVX-512's 32 vector registers hold 8 rows' partial sums and totals beside the
// rounding's temporaries: 7.1-7.2 to 7.5-7.6 G multiply-adds/s in three alternating runs
// of lpx_bench_gemm's limited_14b_128 against 4 rows. With 16 registers (AVX2 and
// narrower) 8 rows would spill, so those keep 4.
#if HWY_TARGET <= HWY_AVX3
constexpr int kTileRows = 8;
#else
constexpr int kTileRows = 4;
#endif

// The totals of one tile, rows a_row[q] (q < kTileRows) by one vector of columns from j0,
// starting from t[q] (c or zero). Returns false where a total is not finite. kScaled: the
// scales at promotion, sa_row[q] row q's scales (Out).
template <bool kTiny, bool kOdd, bool kSplit, bool kScaled>
HWY_INLINE bool TileSums(const float* const (&a_row)[kTileRows], const float* const (&sa_row)[kTileRows],
                         int64_t a_sk, const Out& o, int64_t j0, int64_t k, int64_t every, const Rounding& r,
                         Range& range, VF (&t)[kTileRows]) {
  const DF df;
  for (int64_t k0 = 0, run = 0; k0 < k; k0 += every, ++run) {
    const int64_t k1 = std::min(k, k0 + every);
    VF part[kTileRows];
#pragma GCC unroll 8
    for (int q = 0; q < kTileRows; ++q) part[q] = hn::Zero(df);
    for (int64_t kk = k0; kk < k1; ++kk) {
      const VF b = hn::LoadU(df, o.b + kk * o.ldb + j0);
      const int64_t off = kk * a_sk;
#pragma GCC unroll 8
      for (int q = 0; q < kTileRows; ++q) part[q] = Step<kTiny, kOdd, kSplit>(r, range, part[q], a_row[q][off], b);
    }
    // promotion: the partial sums into the fp32 totals
    if constexpr (kScaled) {
      const VF sb = hn::LoadU(df, o.sb + run * o.ldb + j0);
#pragma GCC unroll 8
      for (int q = 0; q < kTileRows; ++q)
        t[q] = PromoteScaled(hn::Mul(hn::Set(df, sa_row[q][run]), sb), part[q], t[q]);
    } else {
#pragma GCC unroll 8
      for (int q = 0; q < kTileRows; ++q) t[q] = hn::Add(t[q], part[q]);
    }
  }
  auto finite = hn::IsFinite(t[0]);
#pragma GCC unroll 8
  for (int q = 1; q < kTileRows; ++q) finite = hn::And(finite, hn::IsFinite(t[q]));
  return hn::AllTrue(df, finite);
}

// Rows [r0, r1) by columns [0, cols) of o, cols a multiple of the vector length. Every
// tile runs with kSplit; one whose totals are not all finite (an overflow there, or Inf
// or NaN among its operands or in c) runs again without it, and one that had a
// subnormal sum (kTiny) is recomputed by the scalar definition.
template <bool kTiny, bool kOdd, bool kScaled>
void Tiles(const float* HWY_RESTRICT a, int64_t a_si, int64_t a_sk, const Out& o, int64_t r0, int64_t r1,
           int64_t cols, int64_t k, const Rounding& r, LimitedSum acc, bool accumulate) {
  const DF df;
  const auto N = static_cast<int64_t>(hn::Lanes(df));
  for (int64_t j0 = 0; j0 < cols; j0 += N)
    for (int64_t i0 = r0; i0 < r1; i0 += kTileRows) {
      // past r1 the last row is computed again and not stored
      const int64_t rows = std::min<int64_t>(kTileRows, r1 - i0);
      const float* a_row[kTileRows];
      const float* sa_row[kTileRows];
      float* c_row[kTileRows];
      for (int q = 0; q < kTileRows; ++q) {
        const int64_t i = std::min<int64_t>(i0 + q, r1 - 1);
        a_row[q] = a + i * a_si;
        sa_row[q] = kScaled ? o.sa + i * o.runs : nullptr;
        c_row[q] = o.row(i) + j0;
      }
      // the limited rule starts its total at c
      VF t[kTileRows], t_in[kTileRows];
      for (int q = 0; q < kTileRows; ++q) t_in[q] = t[q] = accumulate ? hn::LoadU(df, c_row[q]) : hn::Zero(df);
      Range range;
      const bool finite =
          TileSums<kTiny, kOdd, true, kScaled>(a_row, sa_row, a_sk, o, j0, k, acc.promote_every, r, range, t);
      if (HWY_UNLIKELY(!finite)) {
        for (int q = 0; q < kTileRows; ++q) t[q] = t_in[q];
        range = Range();
        TileSums<kTiny, kOdd, false, kScaled>(a_row, sa_row, a_sk, o, j0, k, acc.promote_every, r, range, t);
      }
      if (HWY_UNLIKELY(kTiny && !range.normal())) {
        DefinitionTile(a, a_si, a_sk, o, i0, i0 + rows, j0, j0 + N, k, acc, accumulate);
        continue;
      }
      for (int q = 0; q < rows; ++q) hn::StoreU(t[q], df, c_row[q]);
    }
}

template <bool kTiny, bool kOdd, bool kScaled>
void Rows(const float* HWY_RESTRICT a, int64_t a_si, int64_t a_sk, const float* HWY_RESTRICT bk, float* HWY_RESTRICT c,
          int64_t r0, int64_t r1, int64_t n, int64_t k, int mb, int64_t every, bool accumulate, const float* sa,
          const float* sbk) {
  const auto N = static_cast<int64_t>(hn::Lanes(DF()));
  const Rounding r(mb);
  const LimitedSum acc{mb, every};
  const int64_t n_vec = n - n % N, runs = (k + every - 1) / every;
  Tiles<kTiny, kOdd, kScaled>(a, a_si, a_sk, Out{bk, n, c, n, 0, sa, sbk, runs}, r0, r1, n_vec, k, r, acc,
                              accumulate);
  if (n_vec == n) return;
  // The last n - n_vec columns: copied into one vector's width with zero columns beside
  // them (lanes never mix, so the zeros change nothing) and run by the same tiles. B's
  // scales (one row per run) are padded the same way.
  const int64_t tail = n - n_vec;
  std::vector<float> bpad(static_cast<size_t>(k * N), 0.0f), cpad(static_cast<size_t>((r1 - r0) * N), 0.0f);
  for (int64_t kk = 0; kk < k; ++kk) std::copy(bk + kk * n + n_vec, bk + kk * n + n, bpad.data() + kk * N);
  std::vector<float> sbpad;
  if (kScaled) {
    sbpad.assign(static_cast<size_t>(runs * N), 0.0f);
    for (int64_t q = 0; q < runs; ++q) std::copy(sbk + q * n + n_vec, sbk + q * n + n, sbpad.data() + q * N);
  }
  if (accumulate)
    for (int64_t i = r0; i < r1; ++i) std::copy(c + i * n + n_vec, c + i * n + n, cpad.data() + (i - r0) * N);
  Tiles<kTiny, kOdd, kScaled>(a, a_si, a_sk, Out{bpad.data(), N, cpad.data(), N, r0, sa, sbpad.data(), runs}, r0,
                              r1, N, k, r, acc, accumulate);
  for (int64_t i = r0; i < r1; ++i) std::copy(cpad.data() + (i - r0) * N, cpad.data() + (i - r0) * N + tail, c + i * n + n_vec);
}

// Whether a or b holds a nonzero |v| < 2^-50. Without one, every nonzero product is at
// least 2^-100, a multiple of 2^-123; so are all partial sums (a multiple of 2^-123 below
// 2^(-123 + mb + 1) has at most mb + 1 significant bits, so the rounding keeps it), and a
// nonzero one is at least 2^-123 > FLT_MIN: no sum is subnormal.
bool TinyOperands(const float* HWY_RESTRICT a, int64_t na, const float* HWY_RESTRICT b, int64_t nb) {
  const DU du;
  const auto N = static_cast<int64_t>(hn::Lanes(du));
  const uint32_t bound = 0x26800000u;  // 2^-50
  const auto mag = hn::Set(du, 0x7fffffffu), one = hn::Set(du, 1u);
  auto lo = hn::Set(du, ~0u);
  for (const auto& [v, nv] : {std::pair{a, na}, std::pair{b, nb}}) {
    int64_t i = 0;
    for (; i + N <= nv; i += N)
      lo = hn::Min(lo, hn::Sub(hn::And(hn::BitCast(du, hn::LoadU(DF(), v + i)), mag), one));
    for (; i < nv; ++i) {
      uint32_t bits;
      std::memcpy(&bits, v + i, sizeof bits);
      if ((bits & 0x7fffffffu) - 1u < bound - 1u) return true;
    }
  }
  HWY_ALIGN uint32_t l[hn::MaxLanes(du)];
  hn::Store(lo, du, l);
  for (size_t i = 0; i < hn::Lanes(du); ++i)
    if (l[i] < bound - 1u) return true;
  return false;
}

template <bool kScaled>
void RowsOf(const float* HWY_RESTRICT a, int64_t a_si, int64_t a_sk, const float* HWY_RESTRICT bk,
            float* HWY_RESTRICT c, int64_t r0, int64_t r1, int64_t n, int64_t k, int mb, int64_t every,
            bool accumulate, bool tiny, const float* sa, const float* sbk) {
  // rounding to odd needs two bits beyond the grid's mb + 1 within float32's 24
  if (kHasOddSum && mb <= 21) {
    if (tiny) Rows<true, kHasOddSum, kScaled>(a, a_si, a_sk, bk, c, r0, r1, n, k, mb, every, accumulate, sa, sbk);
    else Rows<false, kHasOddSum, kScaled>(a, a_si, a_sk, bk, c, r0, r1, n, k, mb, every, accumulate, sa, sbk);
  } else {
    if (tiny) Rows<true, false, kScaled>(a, a_si, a_sk, bk, c, r0, r1, n, k, mb, every, accumulate, sa, sbk);
    else Rows<false, false, kScaled>(a, a_si, a_sk, bk, c, r0, r1, n, k, mb, every, accumulate, sa, sbk);
  }
}

void LimitedGemmRows(const float* HWY_RESTRICT a, int64_t a_si, int64_t a_sk, const float* HWY_RESTRICT bk,
                     float* HWY_RESTRICT c, int64_t r0, int64_t r1, int64_t n, int64_t k, int mb, int64_t every,
                     bool accumulate, bool tiny, const float* sa, const float* sbk) {
  if (sa) RowsOf<true>(a, a_si, a_sk, bk, c, r0, r1, n, k, mb, every, accumulate, tiny, sa, sbk);
  else RowsOf<false>(a, a_si, a_sk, bk, c, r0, r1, n, k, mb, every, accumulate, tiny, nullptr, nullptr);
}

}  // namespace HWY_NAMESPACE
}  // namespace lpx::sim::simd
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace lpx::sim::simd {
HWY_EXPORT(LimitedGemmRows);
HWY_EXPORT(TinyOperands);
}  // namespace lpx::sim::simd

namespace lpx::sim::detail {
// the using-directive: see formats/src/quantize_hwy.cpp (HWY_DYNAMIC_DISPATCH with one target)
using namespace lpx::sim::simd;

void limited_gemm_rows(const float* a, int64_t a_si, int64_t a_sk, const float* bk, float* c, int64_t r0,
                       int64_t r1, int64_t n, int64_t k, int mb, int64_t every, bool accumulate, bool tiny,
                       const float* sa, const float* sbk) {
  HWY_DYNAMIC_DISPATCH(LimitedGemmRows)(a, a_si, a_sk, bk, c, r0, r1, n, k, mb, every, accumulate, tiny, sa, sbk);
}
bool tiny_operands(const float* a, int64_t na, const float* b, int64_t nb) {
  return HWY_DYNAMIC_DISPATCH(TinyOperands)(a, na, b, nb);
}
}  // namespace lpx::sim::detail
#endif  // HWY_ONCE
