// Random Hadamard transform in blocks of n along an axis, sizes 16, 32, 64, 128 (the
// transform of Tseng et al. 2025, Quartet and NVIDIA's NVFP4 recipe, docs/recipes.md):
//   y = (1/sqrt(n)) * H_n * diag(s) * x      for each row x of length n,
// H_n the Sylvester Hadamard matrix (H_1 = [1], H_2k = [[H_k, H_k], [H_k, -H_k]]), so
// H_n[i][j] = (-1)^popcount(i & j), and s a vector of +-1 signs, given or drawn from
// Philox: s_j = -1 iff the top bit of random_bits(seed, stream, j) is set.
//
// The reference is numerics/hadamard.hpp's LPX_HD hadamard_row: the CPU and the CUDA
// kernel run the very same fast Walsh-Hadamard butterflies in double (adds and subtracts
// only, in a fixed order), then one multiply by 1/sqrt(n) in double and one rounding to
// float32, so both executions are bit-identical (no FMA can contract an add followed by
// a separate multiply). The sign vectors are numerics' hadamard_signs (Philox).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "lpx/kernels/tensor.hpp"
#include "lpx/numerics/hadamard.hpp"

namespace lpx::kernels {

// The one implementation, shared with the CPU (recipes/ uses it for its transforms).
using lpx::hadamard_row;
using lpx::hadamard_sign;
using lpx::hadamard_signs;

// CPU reference over a (rows, n) row-major array. Throws std::invalid_argument on an
// invalid size, a length that is not a multiple of n, or signs of the wrong length.
void hadamard_cpu(std::span<const float> in, std::span<float> out, int n,
                  std::span<const float> signs);

// Device pointers: in and out are (rows, n) row-major; `signs` is a device pointer to n
// floats (+-1) or null for the Philox signs of (seed, stream). Same checks as above
// (before any CUDA call); std::runtime_error without a device.
void hadamard_device(const float* in, float* out, size_t rows, int n, const float* signs,
                     uint64_t seed, uint32_t stream, void* cuda_stream = nullptr);
// Views (tensor.hpp): in and out are float32 (rows, cols), any strides, the same shape (they
// may be the same memory); every run of n elements along `axis` (1: along each row; 0: down
// each column, read through the strides, so no transpose is needed) starting at a multiple
// of n is transformed: numerics' hadamard_blocks, bit for bit. The extent along `axis` must
// be a multiple of n. signs: a device pointer to n floats or null (Philox signs of (seed,
// stream)). Asynchronous on cuda_stream.
void hadamard_device(const DeviceTensor& in, const DeviceTensor& out, int axis, int n,
                     const float* signs, uint64_t seed, uint32_t stream, void* cuda_stream = nullptr);
// Host to host; `signs` empty means Philox signs of (seed, stream).
void hadamard_host(std::span<const float> in, std::span<float> out, int n,
                   std::span<const float> signs, uint64_t seed, uint32_t stream);

}  // namespace lpx::kernels
