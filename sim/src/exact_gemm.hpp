// The exact fp32 order's GEMM loop, vectorized (exact_gemm_hwy.cpp).
#pragma once

#include <cstddef>
#include <cstdint>

namespace lpx::sim::detail {

// op(B)[kk, j] = b[kk * b_sk + j * b_sj], (K, N), packed into the panels exact_gemm_rows
// reads (one sequential stream per panel of columns, however B is stored), into packed:
// exact_gemm_packed_size(n, k) floats, every one written (the panels' padding with zeros).
size_t exact_gemm_packed_size(int64_t n, int64_t k);
void exact_gemm_pack(const float* b, int64_t b_sk, int64_t b_sj, int64_t n, int64_t k, float* packed);

// Rows [r0, r1) of C (M, N) row-major by the exact fp32 rule of numerics/ordered_sum.hpp
// (ordered_dot without a LimitedSum), bit for bit: op(A)[i, kk] is a[i * a_si + kk * a_sk],
// op(B) is what exact_gemm_pack made of it; c = sum, or c + sum when accumulating. Returns
// false, having written nothing, where the CPU's best target has no fused multiply-add.
bool exact_gemm_rows(const float* a, int64_t a_si, int64_t a_sk, const float* packed, float* c, int64_t r0,
                     int64_t r1, int64_t n, int64_t k, bool accumulate);

// Whether exact_gemm_rows runs (the CPU's best target has a fused multiply-add).
bool exact_gemm_tiled();

}  // namespace lpx::sim::detail
