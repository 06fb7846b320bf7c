// The per-operand statistics OperandQuantizer logs (OperandStats, operand.hpp): internal to
// lpx_recipes, declared here so that tests/recipes/test_operand_stats.cpp can hold the
// SIMD paths of error_stats to each other.
#pragma once

#include <cstdint>

#include "lpx/recipes/operand.hpp"

namespace lpx::detail {

// amax, SQNR and % flushed of q against v (the quantizer's input), over the finite v:
// the AVX-512 loop where the CPU has AVX-512F, else the portable one. Both sum in the same
// order, so they give the same bits. Returns how many finite v have an Inf or NaN q (a
// BF16 cast's overflows).
int64_t error_stats(const float* v, const float* q, int64_t n, OperandStats& st);
// The portable loop (vector extensions, cloned per SIMD level).
int64_t error_stats_portable(const float* v, const float* q, int64_t n, OperandStats& st);
// The AVX-512 loop, its count in `overflowed`; false (and nothing written) where the CPU
// lacks AVX-512F.
bool error_stats_avx512(const float* v, const float* q, int64_t n, OperandStats& st, int64_t& overflowed);

// The statistics of an operand the role leaves as it is (q == v).
void identity_stats(const float* v, int64_t n, OperandStats& st);

}  // namespace lpx::detail
