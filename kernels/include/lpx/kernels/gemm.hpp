// GEMMs through cuBLASLt on quantized operands, in the forward layout of RECIPES.md:
//   Y (m, n) = X (m, k) · W (n, k)^T          all row-major, Y in bfloat16 or float32,
// accumulated in float32. Per-tensor FP8 (E4M3 x E4M3, E4M3 x E5M2, E5M2 x E4M3) multiplies
// by the operands' decode scales through CUBLASLT_MATMUL_DESC_A/B_SCALE_POINTER (sm_89+);
// BF16 x BF16 is the baseline. Row-major X·Wᵀ is column-major Yᵀ = W·Xᵀ with W transposed
// and X not: the "TN" layout, the only one Hopper's FP8 kernels support, so no operand is
// ever transposed in memory. FP8 needs k (the leading dimension of both operands) to be a
// multiple of 16.
//
// Not here yet: MXFP8 / NVFP4 block-scaled GEMMs (CUBLASLT_MATMUL_MATRIX_SCALE_VEC32_UE8M0,
// VEC16_UE4M3, sm_100+); dequantize with kernels::quantize's inverse and use BF16 instead.
#pragma once

#include <cstddef>
#include <cstdint>

namespace lpx::kernels {

enum class GemmDtype : uint8_t { bf16, e4m3, e5m2, f32 };

struct GemmOperand {
  const void* data = nullptr;    // device pointer, row-major
  GemmDtype dtype = GemmDtype::bf16;
  const float* scale = nullptr;  // FP8 only: device pointer to the float32 decode scale (null: 1)
};

// y: device pointer to (m, n) of out_dtype (bf16 or f32). Throws std::invalid_argument on
// null pointers, zero sizes, an unsupported combination (bf16 with fp8, e5m2 x e5m2, f32
// inputs) or k % 16 != 0 with FP8; std::runtime_error without a device or when cuBLASLt
// has no algorithm (FP8 before sm_89).
void gemm(size_t m, size_t n, size_t k, const GemmOperand& x, const GemmOperand& w, void* y,
          GemmDtype out_dtype, void* stream = nullptr);

}  // namespace lpx::kernels
