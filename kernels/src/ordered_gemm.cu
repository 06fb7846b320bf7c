// Float32 GEMMs in numerics/ordered_sum.hpp's order (gemm.hpp, gemm_f32_device): the
// device half of `lpx train --gemm exact`, whose CPU half is sim's gemm().
//
// The kernel is a plain shared-memory tiled SGEMM: a CTA of 256 threads owns a 64x64 tile
// of C, stages 64x16 slices of op(a) and 16x64 slices of op(b) in shared memory, and each
// thread keeps a 4x4 patch of C in registers. Tiling changes where the operands come from,
// never the order of an element's sum: every thread walks k upward, one product at a
// time, with the very LPX_HD steps of ordered_sum.hpp (fmaf, or limited_add with its
// promotions at the same k), and it stops at k itself (products past k would move the
// limited rule's last promotion). So the bits are the CPU's.
//
// Loads follow the storage: the slice of a stored (m, k) is read along k, of a stored
// (k, m) along m, and likewise for b, so consecutive threads read consecutive floats in
// every layout.
#include <cuda_runtime.h>

#include <algorithm>
#include <stdexcept>
#include <string>

#include "cuda_util.cuh"
#include "launch.hpp"
#include "lpx/numerics/ordered_sum.hpp"

namespace lpx::kernels::module {

namespace {

constexpr int kTile = 64;     // C tile side
constexpr int kSlice = 16;    // k per shared-memory slice
constexpr int kThreads = 256;  // 16 x 16 threads, 4 x 4 elements each

template <bool Limited>
__global__ void __launch_bounds__(kThreads) ordered_gemm_kernel(bool a_trans, bool b_trans,
                                                                const float* __restrict__ a,
                                                                const float* __restrict__ b,
                                                                float* __restrict__ c, int64_t m,
                                                                int64_t n, int64_t k, LimitedSum acc,
                                                                bool accumulate) {
  // as[kk][row], bs[kk][col]; one float of padding per kk row, so that the loads along k
  // (consecutive threads, consecutive kk) store to different banks
  __shared__ float as[kSlice][kTile + 1];
  __shared__ float bs[kSlice][kTile + 1];
  const int tid = threadIdx.x, tx = tid % 16, ty = tid / 16;
  const int64_t row0 = static_cast<int64_t>(blockIdx.y) * kTile, col0 = static_cast<int64_t>(blockIdx.x) * kTile;
  const int64_t every = acc.promote_every > 0 ? acc.promote_every : k;

  float sum[4][4], total[4][4];
#pragma unroll
  for (int i = 0; i < 4; ++i)
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      sum[i][j] = 0.0f;
      total[i][j] = 0.0f;
      if (Limited && accumulate) {
        const int64_t r = row0 + ty + 16 * i, cc = col0 + tx + 16 * j;
        if (r < m && cc < n) total[i][j] = c[r * n + cc];
      }
    }

  for (int64_t k0 = 0; k0 < k; k0 += kSlice) {
    const int kn = static_cast<int>(min(static_cast<int64_t>(kSlice), k - k0));
    // Stage the slices (zeros outside; never multiplied, the loop below stops at kn).
#pragma unroll
    for (int q = 0; q < kTile * kSlice / kThreads; ++q) {
      const int e = tid + q * kThreads;
      int kk, r;
      if (a_trans) kk = e / kTile, r = e % kTile;  // stored (k, m): read along m
      else r = e / kSlice, kk = e % kSlice;          // stored (m, k): read along k
      const int64_t gr = row0 + r, gk = k0 + kk;
      as[kk][r] = gr < m && gk < k ? a[a_trans ? gk * m + gr : gr * k + gk] : 0.0f;
      int col;
      if (b_trans) col = e / kSlice, kk = e % kSlice;  // stored (n, k): read along k
      else kk = e / kTile, col = e % kTile;              // stored (k, n): read along n
      const int64_t gc = col0 + col, gk2 = k0 + kk;
      bs[kk][col] = gc < n && gk2 < k ? b[b_trans ? gc * k + gk2 : gk2 * n + gc] : 0.0f;
    }
    __syncthreads();
    for (int kk = 0; kk < kn; ++kk) {
      float av[4], bv[4];
#pragma unroll
      for (int i = 0; i < 4; ++i) av[i] = as[kk][ty + 16 * i];
#pragma unroll
      for (int j = 0; j < 4; ++j) bv[j] = bs[kk][tx + 16 * j];
      if constexpr (Limited) {
        const int64_t g = k0 + kk;
        const bool promote = (g + 1) % every == 0 || g + 1 == k;
#pragma unroll
        for (int i = 0; i < 4; ++i)
#pragma unroll
          for (int j = 0; j < 4; ++j) {
            sum[i][j] = limited_add(sum[i][j], av[i], bv[j], acc.mantissa_bits);
            if (promote) {
              total[i][j] += sum[i][j];
              sum[i][j] = 0.0f;
            }
          }
      } else {
#pragma unroll
        for (int i = 0; i < 4; ++i)
#pragma unroll
          for (int j = 0; j < 4; ++j) sum[i][j] = fmaf(av[i], bv[j], sum[i][j]);
      }
    }
    __syncthreads();
  }

#pragma unroll
  for (int i = 0; i < 4; ++i)
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int64_t r = row0 + ty + 16 * i, cc = col0 + tx + 16 * j;
      if (r >= m || cc >= n) continue;
      float& out = c[r * n + cc];
      if constexpr (Limited) out = total[i][j];
      else out = accumulate ? __fadd_rn(out, sum[i][j]) : sum[i][j];
    }
}

}  // namespace

void gemm_f32(bool a_trans, bool b_trans, const float* a, const float* b, float* c, int64_t m,
              int64_t n, int64_t k, LimitedSum acc, bool accumulate, GemmOrder order, void* stream) {
  if (!acc.fp32() || order == GemmOrder::exact) {
    const int64_t gx = (n + kTile - 1) / kTile, gy = (m + kTile - 1) / kTile;
    if (gy > 65535 || gx > 2147483647)
      throw std::runtime_error("gemm_f32: " + std::to_string(m) + " x " + std::to_string(n) +
                               " is more tiles than one ordered-GEMM launch takes");
    const dim3 grid(static_cast<unsigned>(gx), static_cast<unsigned>(gy));
    const auto s = static_cast<cudaStream_t>(stream);
    if (acc.fp32())
      ordered_gemm_kernel<false><<<grid, kThreads, 0, s>>>(a_trans, b_trans, a, b, c, m, n, k, acc, accumulate);
    else
      ordered_gemm_kernel<true><<<grid, kThreads, 0, s>>>(a_trans, b_trans, a, b, c, m, n, k, acc, accumulate);
    cuda::check(cudaGetLastError(), "ordered_gemm_kernel launch");
    return;
  }
  gemm_sgemm(a_trans, b_trans, a, b, c, m, n, k, accumulate, stream);
}

}  // namespace lpx::kernels::module
