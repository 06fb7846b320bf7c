// The limited accumulator's GEMM loop, vectorized (limited_gemm_hwy.cpp).
#pragma once

#include <cstdint>

namespace lpx::sim::detail {

// Rows [r0, r1) of C (M, N) row-major by the limited rule of numerics/ordered_sum.hpp
// (ordered_dot with LimitedSum{mb, every}), bit for bit: row i of op(A) is
// a[i * a_si + kk * a_sk], op(B) is bk, a (K, N) row-major array; c is read first when
// accumulating. 1 <= mb <= 22, every >= 1 (k for "never promote"). tiny: what
// tiny_operands says of a and bk (false lets the loop skip its subnormal check).
// Scales at promotion (ordered_dot_scaled), when sa is not null: sa (M, runs) row-major
// holds op(A)'s scale of row i over run r at sa[i * runs + r], sbk (runs, N) row-major
// op(B)'s scales, runs = ceil(k / every).
void limited_gemm_rows(const float* a, int64_t a_si, int64_t a_sk, const float* bk, float* c, int64_t r0,
                       int64_t r1, int64_t n, int64_t k, int mb, int64_t every, bool accumulate, bool tiny,
                       const float* sa = nullptr, const float* sbk = nullptr);

// Whether a[0, na) or b[0, nb) holds a nonzero magnitude below 2^-50 (Inf and NaN do not
// count): only then can a sum of the limited loop be subnormal.
bool tiny_operands(const float* a, int64_t na, const float* b, int64_t nb);

}  // namespace lpx::sim::detail
