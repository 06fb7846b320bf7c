// The exact fp32 order's GEMM loop (exact_gemm.hpp) with Highway, compiled once per SIMD
// target and chosen at run time (docs/kernels.md#ordered-gemms, "On the CPU").
//
// The rule (numerics/ordered_sum.hpp, ordered_dot with no LimitedSum): every element of C
// is s = fma(a_k, b_k, s) for k = 0, 1, ..., from s = 0, then c = s or c + s. Each lane
// here is one element of C and walks k upward with one fused multiply-add per product, so
// any tiling gives the definition's bits; the tiling only decides how many loads feed
// each FMA. A tile of kRows rows by kVecs vectors of C stays in registers for the whole
// of k: each vector of B loaded feeds kRows FMAs and each element of A, broadcast, feeds
// kVecs. Only targets with a fused multiply-add run it (HWY_NATIVE_FMA): elsewhere
// MulAdd would round twice, and the caller keeps its fmaf loop.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "exact_gemm_hwy.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep

#include <hwy/highway.h>

#include <algorithm>
#include <vector>

#include "exact_gemm.hpp"

HWY_BEFORE_NAMESPACE();
namespace lpx::sim::simd {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

#if HWY_NATIVE_FMA
using DF = hn::ScalableTag<float>;
using VF = hn::Vec<DF>;

// AVX-512 has 32 vector registers: 8 x 2 accumulators, two B vectors and a broadcast
// fit; AVX2's 16 take 4 x 2.
#if HWY_TARGET <= HWY_AVX3
constexpr int kRows = 8;
#else
constexpr int kRows = 4;
#endif
constexpr int kVecs = 2;

// C[rows of c_row, V vectors) from the sums over k, with B's columns packed in `panel`
// (row kk at panel + kk * V * N). kMasked: the last vector holds `tail` < N columns (the
// panel's other lanes are zero; MaskedLoad and BlendedStore touch nothing of C past them).
template <int V, bool kMasked>
HWY_INLINE void Tile(const float* const (&a_row)[kRows], int64_t a_sk, const float* HWY_RESTRICT panel, int64_t k,
                     float* const (&c_row)[kRows], int rows, size_t tail, bool accumulate) {
  const DF df;
  const auto N = static_cast<int64_t>(hn::Lanes(df));
  VF s[kRows][V];
#pragma GCC unroll 16
  for (int q = 0; q < kRows; ++q)
#pragma GCC unroll 4
    for (int v = 0; v < V; ++v) s[q][v] = hn::Zero(df);
  for (int64_t kk = 0; kk < k; ++kk) {
    const float* brow = panel + kk * V * N;
    VF b[V];
#pragma GCC unroll 4
    for (int v = 0; v < V; ++v) b[v] = hn::LoadU(df, brow + v * N);
    const int64_t off = kk * a_sk;
#pragma GCC unroll 16
    for (int q = 0; q < kRows; ++q) {
      const VF av = hn::Set(df, a_row[q][off]);
#pragma GCC unroll 4
      for (int v = 0; v < V; ++v) s[q][v] = hn::MulAdd(av, b[v], s[q][v]);
    }
  }
  const auto last = hn::FirstN(df, kMasked ? tail : hn::Lanes(df));
  // unrolled with a guard rather than bounded by `rows`: a loop bound known only at run
  // time makes GCC keep s in memory, stored after every product
#pragma GCC unroll 16
  for (int q = 0; q < kRows; ++q) {
    if (q >= rows) break;
#pragma GCC unroll 4
    for (int v = 0; v < V; ++v) {
      float* out = c_row[q] + v * N;
      // the rule adds c after its sum
      if (kMasked && v == V - 1) {
        hn::BlendedStore(accumulate ? hn::Add(hn::MaskedLoad(last, df, out), s[q][v]) : s[q][v], last, df, out);
      } else {
        hn::StoreU(accumulate ? hn::Add(hn::LoadU(df, out), s[q][v]) : s[q][v], df, out);
      }
    }
  }
}

// Where op(B)'s columns go in the packed array: panels of kVecs vectors of columns, then
// one of a single vector for what is left (zero past n), each k rows deep and stored row by
// row, so that a tile reads one sequential stream however B was stored. The panel that
// holds column j0 starts at j0 * k.
int64_t PanelWidth(int64_t j0, int64_t n) {
  const auto N = static_cast<int64_t>(hn::Lanes(DF()));
  return j0 < n - n % (kVecs * N) ? kVecs * N : N;
}

size_t PackedSize(int64_t n, int64_t k) {
  const auto N = static_cast<int64_t>(hn::Lanes(DF()));
  return static_cast<size_t>((n + N - 1) / N * N * k);
}

void Pack(const float* HWY_RESTRICT b, int64_t b_sk, int64_t b_sj, int64_t n, int64_t k, float* HWY_RESTRICT packed) {
  for (int64_t j0 = 0; j0 < n;) {
    const int64_t stride = PanelWidth(j0, n), width = std::min(stride, n - j0);
    float* panel = packed + j0 * k;
    if (b_sj == 1) {
      for (int64_t kk = 0; kk < k; ++kk) {
        std::copy(b + kk * b_sk + j0, b + kk * b_sk + j0 + width, panel + kk * stride);
        std::fill(panel + kk * stride + width, panel + (kk + 1) * stride, 0.0f);
      }
    } else {
      // B stored transposed: each column of op(B) is contiguous; 16 of its elements at a
      // time keep the writes within 16 rows of the panel
      if (width < stride) std::fill(panel, panel + k * stride, 0.0f);
      constexpr int64_t kBlock = 16;
      for (int64_t k0 = 0; k0 < k; k0 += kBlock) {
        const int64_t k1 = std::min(k, k0 + kBlock);
        for (int64_t j = 0; j < width; ++j) {
          const float* col = b + (j0 + j) * b_sj;
          for (int64_t kk = k0; kk < k1; ++kk) panel[kk * stride + j] = col[kk * b_sk];
        }
      }
    }
    j0 += stride;
  }
}

bool ExactGemmRows(const float* HWY_RESTRICT a, int64_t a_si, int64_t a_sk, const float* HWY_RESTRICT packed,
                   float* HWY_RESTRICT c, int64_t r0, int64_t r1, int64_t n, int64_t k, bool accumulate) {
  const auto N = static_cast<int64_t>(hn::Lanes(DF()));
  for (int64_t j0 = 0; j0 < n;) {
    const int64_t stride = PanelWidth(j0, n), width = std::min(stride, n - j0);
    const float* panel = packed + j0 * k;
    // Rows past r1 repeat the last row and are not stored: the tile's shape stays fixed.
    for (int64_t i0 = r0; i0 < r1; i0 += kRows) {
      const int rows = static_cast<int>(std::min<int64_t>(kRows, r1 - i0));
      const float* a_row[kRows];
      float* c_row[kRows];
      for (int q = 0; q < kRows; ++q) {
        const int64_t i = std::min<int64_t>(i0 + q, r1 - 1);
        a_row[q] = a + i * a_si;
        c_row[q] = c + i * n + j0;
      }
      if (stride == kVecs * N)
        Tile<kVecs, false>(a_row, a_sk, panel, k, c_row, rows, 0, accumulate);
      else if (width == N)
        Tile<1, false>(a_row, a_sk, panel, k, c_row, rows, 0, accumulate);
      else
        Tile<1, true>(a_row, a_sk, panel, k, c_row, rows, static_cast<size_t>(width), accumulate);
    }
    j0 += stride;
  }
  return true;
}
#else
// no fused multiply-add on this target: nothing runs here (HasTiles)
size_t PackedSize(int64_t, int64_t) { return 0; }
void Pack(const float*, int64_t, int64_t, int64_t, int64_t, float*) {}
bool ExactGemmRows(const float*, int64_t, int64_t, const float*, float*, int64_t, int64_t, int64_t, int64_t, bool) {
  return false;
}
#endif  // HWY_NATIVE_FMA

bool HasTiles() { return HWY_NATIVE_FMA != 0; }

}  // namespace HWY_NAMESPACE
}  // namespace lpx::sim::simd
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace lpx::sim::simd {
HWY_EXPORT(ExactGemmRows);
HWY_EXPORT(PackedSize);
HWY_EXPORT(Pack);
HWY_EXPORT(HasTiles);
}  // namespace lpx::sim::simd

namespace lpx::sim::detail {
// the using-directive: see formats/src/quantize_hwy.cpp (HWY_DYNAMIC_DISPATCH with one target)
using namespace lpx::sim::simd;

size_t exact_gemm_packed_size(int64_t n, int64_t k) { return HWY_DYNAMIC_DISPATCH(PackedSize)(n, k); }
void exact_gemm_pack(const float* b, int64_t b_sk, int64_t b_sj, int64_t n, int64_t k, float* packed) {
  HWY_DYNAMIC_DISPATCH(Pack)(b, b_sk, b_sj, n, k, packed);
}
bool exact_gemm_rows(const float* a, int64_t a_si, int64_t a_sk, const float* packed, float* c, int64_t r0,
                     int64_t r1, int64_t n, int64_t k, bool accumulate) {
  return HWY_DYNAMIC_DISPATCH(ExactGemmRows)(a, a_si, a_sk, packed, c, r0, r1, n, k, accumulate);
}
bool exact_gemm_tiled() { return HWY_DYNAMIC_DISPATCH(HasTiles)(); }
}  // namespace lpx::sim::detail
#endif  // HWY_ONCE
