// Random Hadamard transform kernel over views: blocks of n (16, 32, 64 or 128) consecutive
// elements along one axis of a (rows, cols) tensor, the vectors numerics' hadamard_blocks
// transforms. One thread per vector gathers it through the view's strides (along axis 0:
// consecutive threads take consecutive columns, so the loads coalesce; a run with unit
// column stride along axis 1 is transformed where it lies), runs the LPX_HD reference
// hadamard_row (numerics/hadamard.hpp) on it and scatters the result, so the
// device result equals the CPU's bit for bit along either axis and the host never
// transposes. The block first stages the n signs (given, or Philox signs of
// (seed, stream)) in shared memory. in and out may be the same memory (each thread reads
// its whole vector before writing it).
#include <cuda_runtime.h>

#include "cuda_util.cuh"
#include "launch.hpp"
#include "lpx/numerics/hadamard.hpp"

namespace lpx::kernels::module {

namespace {

constexpr unsigned kThreads = 128;

__global__ void hadamard_kernel(const float* in, cuda::Addressing ain, float* out,
                                cuda::Addressing aout, int axis, int n,
                                const float* __restrict__ signs, uint64_t seed, uint32_t stream) {
  __shared__ float s[kMaxHadamardRow];
  for (int j = static_cast<int>(threadIdx.x); j < n; j += static_cast<int>(blockDim.x))
    s[j] = signs ? signs[j] : hadamard_sign(seed, stream, static_cast<uint32_t>(j));
  __syncthreads();
  const size_t un = static_cast<size_t>(n);
  // Vector v: along axis 1, row v / (cols / n) from column (v % (cols / n)) * n; along axis
  // 0, column v % cols from row (v / cols) * n.
  const size_t per_line = axis == 1 ? ain.cols / un : ain.cols;
  const size_t vectors = axis == 1 ? ain.rows * per_line : ain.rows / un * ain.cols;
  for (size_t v = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; v < vectors;
       v += static_cast<size_t>(gridDim.x) * blockDim.x) {
    const size_t r0 = axis == 1 ? v / per_line : (v / per_line) * un;
    const size_t c0 = axis == 1 ? (v % per_line) * un : v % per_line;
    if (axis == 1 && ain.col_stride == 1 && aout.col_stride == 1) {  // a contiguous run
      hadamard_row(in + ain.offset(r0, c0), out + aout.offset(r0, c0), n, s);
      continue;
    }
    const size_t dr = axis == 1 ? 0 : 1, dc = axis == 1 ? 1 : 0;
    float buf[kMaxHadamardRow];
    for (size_t i = 0; i < un; ++i) buf[i] = in[ain.offset(r0 + i * dr, c0 + i * dc)];
    hadamard_row(buf, buf, n, s);
    for (size_t i = 0; i < un; ++i) out[aout.offset(r0 + i * dr, c0 + i * dc)] = buf[i];
  }
}

}  // namespace

void hadamard(const DeviceTensor& in, const DeviceTensor& out, int axis, int n, const float* signs,
              uint64_t seed, uint32_t sign_stream, void* stream) {
  const size_t vectors = static_cast<size_t>(in.numel()) / static_cast<size_t>(n);
  hadamard_kernel<<<cuda::grid_for(vectors, kThreads), kThreads, 0,
                    static_cast<cudaStream_t>(stream)>>>(
      static_cast<const float*>(in.data), cuda::addressing(in), static_cast<float*>(out.data),
      cuda::addressing(out), axis, n, signs, seed, sign_stream);
  cuda::check(cudaGetLastError(), "hadamard kernel launch");
}

}  // namespace lpx::kernels::module
