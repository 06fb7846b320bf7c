// Random Hadamard transform kernel: in and out are (rows, n) row-major, n in {16, 32, 64,
// 128}. One thread per row runs the LPX_HD reference hadamard_row (hadamard.hpp) itself,
// so the device result equals hadamard_cpu bit for bit. The block first stages the n
// signs (given, or Philox signs of (seed, stream)) in shared memory.
#include <cuda_runtime.h>

#include "cuda_util.cuh"
#include "launch.hpp"
#include "lpx/kernels/hadamard.hpp"

namespace lpx::kernels {

namespace {

constexpr unsigned kThreads = 128;

__global__ void hadamard_kernel(const float* __restrict__ in, float* __restrict__ out, size_t rows,
                                int n, const float* __restrict__ signs, uint64_t seed,
                                uint32_t stream) {
  __shared__ float s[kMaxHadamardRow];
  for (int j = static_cast<int>(threadIdx.x); j < n; j += static_cast<int>(blockDim.x))
    s[j] = signs ? signs[j] : hadamard_sign(seed, stream, static_cast<uint32_t>(j));
  __syncthreads();
  for (size_t r = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; r < rows;
       r += static_cast<size_t>(gridDim.x) * blockDim.x)
    hadamard_row(in + r * n, out + r * n, n, s);
}

}  // namespace

namespace launch {

void hadamard(const float* in, float* out, size_t rows, int n, const float* signs, uint64_t seed,
              uint32_t stream, void* cuda_stream) {
  hadamard_kernel<<<cuda::grid_for(rows, kThreads), kThreads, 0,
                    static_cast<cudaStream_t>(cuda_stream)>>>(in, out, rows, n, signs, seed, stream);
  cuda::check(cudaGetLastError(), "hadamard kernel launch");
}

void hadamard_h2h(const float* in, float* out, size_t rows, int n, const float* signs,
                  uint64_t seed, uint32_t stream) {
  require_device();
  const size_t bytes = rows * static_cast<size_t>(n) * sizeof(float);
  cuda::Buffer d_in(bytes), d_out(bytes), d_signs(signs ? static_cast<size_t>(n) * sizeof(float) : 0);
  cuda::to_device(d_in.get(), in, bytes);
  if (signs) cuda::to_device(d_signs.get(), signs, static_cast<size_t>(n) * sizeof(float));
  hadamard(d_in.get<float>(), d_out.get<float>(), rows, n, d_signs.get<float>(), seed, stream, nullptr);
  cuda::to_host(out, d_out.get(), bytes);
}

}  // namespace launch

}  // namespace lpx::kernels
