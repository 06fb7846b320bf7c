// Random Hadamard transform along the last axis, sizes 16, 32, 64, 128 (the transform of
// Tseng et al. 2025, Quartet and NVIDIA's NVFP4 recipe, RECIPES.md):
//   y = (1/sqrt(n)) * H_n * diag(s) * x      for each row x of length n,
// H_n the Sylvester Hadamard matrix (H_1 = [1], H_2k = [[H_k, H_k], [H_k, -H_k]]), so
// H_n[i][j] = (-1)^popcount(i & j), and s a vector of +-1 signs, given or drawn from
// Philox: s_j = -1 iff the top bit of random_bits(seed, stream, j) is set.
//
// The reference below is LPX_HD: the CPU and the CUDA kernel run the very same fast
// Walsh-Hadamard butterflies in double (adds and subtracts only, in a fixed order), then
// one multiply by 1/sqrt(n) in double and one rounding to float32, so both executions are
// bit-identical (no FMA can contract an add followed by a separate multiply).
//
// NOTE: DESIGN.md places the CPU Hadamard in numerics/; this header lives in kernels/
// until it moves there (it depends on numerics/philox.hpp only).
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "lpx/numerics/hd.hpp"
#include "lpx/numerics/philox.hpp"

namespace lpx::kernels {

inline constexpr int kMaxHadamardSize = 128;

LPX_HD constexpr bool valid_hadamard_size(int n) {
  return n == 16 || n == 32 || n == 64 || n == 128;
}

// s_j in {+1, -1} from Philox (seed, stream, j).
LPX_HD inline float hadamard_sign(uint64_t seed, uint32_t stream, uint32_t j) {
  return (random_bits(seed, stream, j) >> 31) != 0 ? -1.0f : 1.0f;
}

// One row: y[0..n) = (1/sqrt(n)) H_n diag(signs) x[0..n). `signs` may be null (all +1).
// n must be a valid size; x and y may alias.
LPX_HD inline void hadamard_row(const float* x, float* y, int n, const float* signs) {
  double v[kMaxHadamardSize];
  for (int i = 0; i < n; ++i) v[i] = static_cast<double>(x[i]) * (signs ? signs[i] : 1.0f);
  // Butterflies: for each stride h, (a, b) -> (a + b, a - b) over pairs (i, i + h).
  for (int h = 1; h < n; h *= 2)
    for (int i = 0; i < n; i += 2 * h)
      for (int j = i; j < i + h; ++j) {
        const double a = v[j], b = v[j + h];
        v[j] = a + b;
        v[j + h] = a - b;
      }
  const double scale = 1.0 / sqrt(static_cast<double>(n));
  for (int i = 0; i < n; ++i) y[i] = static_cast<float>(v[i] * scale);
}

// The Philox sign vector of length n.
inline std::vector<float> hadamard_signs(int n, uint64_t seed, uint32_t stream) {
  std::vector<float> s(static_cast<size_t>(n));
  for (int j = 0; j < n; ++j) s[static_cast<size_t>(j)] = hadamard_sign(seed, stream, static_cast<uint32_t>(j));
  return s;
}

// CPU reference over a (rows, n) row-major array. Throws std::invalid_argument on an
// invalid size, a length that is not a multiple of n, or signs of the wrong length.
void hadamard_cpu(std::span<const float> in, std::span<float> out, int n,
                  std::span<const float> signs);

// Device pointers: in and out are (rows, n) row-major; `signs` is a device pointer to n
// floats (+-1) or null for the Philox signs of (seed, stream). Same checks as above
// (before any CUDA call); std::runtime_error without a device.
void hadamard_device(const float* in, float* out, size_t rows, int n, const float* signs,
                     uint64_t seed, uint32_t stream, void* cuda_stream = nullptr);
// Host to host; `signs` empty means Philox signs of (seed, stream).
void hadamard_host(std::span<const float> in, std::span<float> out, int n,
                   std::span<const float> signs, uint64_t seed, uint32_t stream);

}  // namespace lpx::kernels
