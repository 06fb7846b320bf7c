// The (random) Hadamard transform: fast Walsh-Hadamard butterflies, Philox sign vectors,
// and the blocked application "size-n blocks along one axis of a row-major matrix" that
// the recipes use (Tseng et al. 2025 RHT 64; Castro et al. 2025, Quartet, Hadamard 32;
// NVIDIA 2025 NVFP4, RHT 16 on the wgrad inputs; docs/recipes.md#transforms).
//
// Definitions. H_n is the Sylvester Hadamard matrix (H_1 = [1], H_2k = [[H_k, H_k],
// [H_k, -H_k]]), so H_n[i][j] = (-1)^popcount(i & j); it is symmetric and H_n H_n = n I,
// hence (1/sqrt(n)) H_n is orthonormal and its own inverse. The random Hadamard
// transform of a length-n vector x with signs s (+-1) is
//     y = (1/sqrt(n)) * H_n * diag(s) * x.
// Applying the same Q = (1/sqrt n) H_n diag(s) to both operands of a dot product along
// the reduction dimension leaves the dot product unchanged: (Qa).(Qb) = a.Q^T Q.b = a.b.
//
// Operation order (fixed, so that any executor can match it bit for bit):
//   butterflies  for h = 1, 2, 4, ..., n/2 (ascending); for i = 0, 2h, 4h, ... (ascending);
//                for j = i .. i+h-1 (ascending): (v[j], v[j+h]) <- (v[j] + v[j+h], v[j] - v[j+h])
//   Every butterfly output depends only on its two inputs, so the order of the pairs within
//   one stage does not change the result; the order of the stages does, and is fixed.
//   Only additions and subtractions, each rounded once: no FMA can contract them.
//
// Two float paths:
//   fwht(float*)          float32 throughout: butterflies in float32, then each value times
//                         float(1/sqrt(n)) (1/sqrt(n) computed in double, rounded once to
//                         float; exact for n a power of 4). Any length 2^k.
//   hadamard_row()        the random Hadamard transform used by the recipes (n <= 128):
//                         x[j] * s[j] to double (exact), butterflies in double, one multiply
//                         by 1/sqrt(n) in double, one rounding to float32. It is LPX_HD:
//                         the CUDA kernel (kernels/src/hadamard.cu) runs this very
//                         function, so the GPU transform equals it bit for bit. For n <= 128 and float32 inputs whose
//                         exponents span at most 53 - 7 - 24 = 22 binades the double
//                         butterflies are exact, leaving only the scale multiply's and the
//                         final rounding; otherwise the result is still deterministic.
//
// Signs: s_j = -1 when the top bit of random_bits(seed, stream, j) (philox.hpp) is set,
// else +1, for j = 0 .. n-1. One sign vector serves every block of a call.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "lpx/numerics/hd.hpp"
#include "lpx/numerics/philox.hpp"

namespace lpx {

inline constexpr int kMaxHadamardRow = 128;

LPX_HD constexpr bool is_power_of_two(int64_t n) { return n > 0 && (n & (n - 1)) == 0; }

// The recipe transform sizes (docs/recipes.md#transforms): 16, 32, 64, 128.
LPX_HD constexpr bool valid_rht_size(int n) { return n == 16 || n == 32 || n == 64 || n == 128; }

// In-place unnormalized Walsh-Hadamard butterflies (H_n v) in the order above, in T.
// n must be a power of two. Exact in double for integer inputs below 2^53 / n.
template <class T>
LPX_HD constexpr void fwht_unnormalized(T* v, int64_t n) {
  for (int64_t h = 1; h < n; h *= 2)
    for (int64_t i = 0; i < n; i += 2 * h)
      for (int64_t j = i; j < i + h; ++j) {
        const T a = v[j], b = v[j + h];
        v[j] = a + b;
        v[j + h] = a - b;
      }
}

// In-place normalized transform (1/sqrt n) H_n v in T (float32 or double): the
// butterflies, then one multiply of each value by T(1/sqrt(n)). Its own inverse up to
// rounding. Throws std::invalid_argument unless n is a power of two.
template <class T>
void fwht(T* v, int64_t n) {
  if (!is_power_of_two(n))
    throw std::invalid_argument("fwht: length " + std::to_string(n) + " is not a power of two");
  fwht_unnormalized(v, n);
  const T scale = static_cast<T>(1.0 / std::sqrt(static_cast<double>(n)));
  for (int64_t i = 0; i < n; ++i) v[i] *= scale;
}

// s_j in {+1, -1}: -1 iff the top bit of random_bits(seed, stream, j) is set.
LPX_HD constexpr float hadamard_sign(uint64_t seed, uint32_t stream, uint64_t j) {
  return (random_bits(seed, stream, j) >> 31) != 0 ? -1.0f : 1.0f;
}

// The Philox sign vector of length n: hadamard_sign(seed, stream, j) for every j, one
// Philox block per four signs (a recipe draws a fresh vector for every GEMM call).
inline std::vector<float> hadamard_signs(int n, uint64_t seed, uint32_t stream) {
  std::vector<float> s(static_cast<size_t>(n));
  for (int j = 0; j < n; j += 4) {
    const Philox4x32 block = random_block(seed, stream, static_cast<uint64_t>(j) >> 2);
    for (int w = 0; w < 4 && j + w < n; ++w)
      s[static_cast<size_t>(j + w)] = (block.v[w] >> 31) != 0 ? -1.0f : 1.0f;
  }
  return s;
}

// y[0..n) = (1/sqrt n) H_n diag(signs) x[0..n), n a power of two <= 128, computed as the
// header says (double butterflies, one rounding). `signs` may be null (all +1); x and y
// may alias.
LPX_HD inline void hadamard_row(const float* x, float* y, int n, const float* signs) {
  double v[kMaxHadamardRow];
  for (int i = 0; i < n; ++i) v[i] = static_cast<double>(x[i]) * (signs ? signs[i] : 1.0f);
  fwht_unnormalized(v, n);
  const double scale = 1.0 / sqrt(static_cast<double>(n));
  for (int i = 0; i < n; ++i) y[i] = static_cast<float>(v[i] * scale);
}

// The blocked transform of a row-major (rows x cols) matrix, in place: every run of n
// consecutive elements along `axis` (1: along each row, the last axis; 0: down each
// column) starting at a multiple of n is replaced by hadamard_row of it, with the same
// `signs` (length n, or empty for all +1) for every block. The extent along `axis` must
// be a multiple of n and n a power of two <= 128 (std::invalid_argument otherwise).
// numerics/src/hadamard.cpp runs hadamard_row's arithmetic in SIMD lanes: the same bits.
void hadamard_blocks(float* data, int64_t rows, int64_t cols, int axis, int n, std::span<const float> signs);
// The same transform read from `in` and written to `out` (rows x cols each; they may be
// the same array, not partly overlapping ones): saves the copy a caller that keeps its
// input would make first.
void hadamard_blocks(const float* in, float* out, int64_t rows, int64_t cols, int axis, int n,
                     std::span<const float> signs);

}  // namespace lpx
