// GEMMs through cuBLASLt, in the forward layout of docs/recipes.md:
//   Y (m, n) = X (m, k) · W (n, k)^T          all row-major, Y in bfloat16 or float32,
// accumulated in float32. Row-major X·Wᵀ is column-major Yᵀ = W·Xᵀ with W transposed and X
// not: the "TN" layout, the only one the FP8 and block-scaled kernels support, so no
// operand is ever transposed in memory.
//
// Two entry points:
//  1. gemm(GemmOperand...): raw operands. Per-tensor FP8 (E4M3 x E4M3, E4M3 x E5M2,
//     E5M2 x E4M3) multiplied by the operands' decode scales through
//     CUBLASLT_MATMUL_DESC_A/B_SCALE_POINTER (sm_89+), or BF16 x BF16. FP8 needs k % 16 == 0.
//  2. gemm(QuantizedOperand...): operands as lpx::quantize / kernels::quantize_device lay
//     them out (codes, scale grid, tensor scale, BlockFormat); it chooses the path:
//
//     path                 formats (X and W)                         device     how
//     mxfp8_block_scaled   both MXFP8 (e4m3/e5m2, e8m0, 1x32 along k) sm_100+    cuBLASLt VEC32_UE8M0 block scales
//     nvfp4_block_scaled   both NVFP4 (e2m1, e4m3, 1x16 along k)      sm_100+    cuBLASLt VEC16_UE4M3, FP4 packed 2 per byte,
//                                                                               alpha = s_dec(X) * s_dec(W)
//     mxfp4_block_scaled   both MXFP4 (e2m1, e8m0, 1x32 along k)      sm_100+    cuBLASLt VEC32_UE8M0 on FP4 data (where
//                                                                               cuBLASLt has it; else the fallback)
//     fp8_block128_scaled  X FP8 1x128 along k, W FP8 128x128 or     sm_90      cuBLASLt VEC128_32F (X) and BLK128x128_32F
//                          1x128 (DeepSeek-V3), fp32 or pow2 scales   only       or VEC128_32F (W) float32 scales; k % 128 == 0
//     fp8_tensor           both per-tensor FP8 (fp8_tensor)          sm_89+     gemm(GemmOperand) above
//     bf16_fallback        anything else with 1xN / Nx1 / tile blocks, any device:
//                          each operand dequantized on the device to BF16 (block scale
//                          only), BF16 GEMM, alpha = the tensor scales and the 4/3 headroom
//
//     The block-scaled paths copy the scale grids into cuBLASLt's tiled layout (128 rows x
//     4 K-blocks per 512-byte tile, block_scale_tile_offset below). In the fallback the BF16
//     operands are exact for every MX, NVFP4 and power-of-two format (at most 8 significant
//     bits); with fp32 scales (1x128, 128x128) each dequantized value is rounded to BF16.
//     GemmPath::automatic takes the first applicable path of the table and, when cuBLASLt
//     has no algorithm for it, the BF16 fallback; the return value says which path ran.
//     A two-level operand (NVFP4) makes the call read its tensor scale back to the host
//     (one stream synchronization).
//
//     Requirements: k % 32 == 0 (no ragged block along the reduction); blocks of 1xN along
//     k, Nx1 along the rows, or tiles (per-channel blocks are not supported; per-tensor
//     only as fp8_tensor). Accumulation order differs from any CPU loop: compare with a
//     tolerance (lpx validate reports the largest error relative to sum_k |x||w|).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

#include "lpx/formats/block_format.hpp"
#include "lpx/formats/quantize.hpp"
#include "lpx/numerics/ordered_sum.hpp"

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

// --- GEMMs over quantized operands.

enum class GemmPath : uint8_t {
  automatic,
  mxfp8_block_scaled,
  nvfp4_block_scaled,
  mxfp4_block_scaled,
  fp8_tensor,
  bf16_fallback,
  fp8_block128_scaled,  // last: added with backend ABI 3
};
std::string_view gemm_path_name(GemmPath p);

// One operand, (rows, k) row-major, as kernels::quantize_device writes it (device pointers).
struct QuantizedOperand {
  BlockFormat format;                    // block axis: the last (k) or 0 (rows), as quantized
  const uint8_t* codes = nullptr;        // (rows, k) element codes, one per byte
  const uint8_t* scale_codes = nullptr;  // e8m0 / e4m3: the scale grid, row-major
  const float* scale_values = nullptr;   // pow2 / fp32: the scale grid, row-major
  const float* tensor_scale = nullptr;   // e4m3 (NVFP4): s_dec
  bool headroom_3_4 = false;             // QuantizedTensor::headroom_3_4
};

// The path gemm() takes for operand formats x, w on a device of compute capability
// `cc` (major * 10 + minor), before asking cuBLASLt (which may still send automatic to the
// fallback). No CUDA call; throws std::invalid_argument for formats no path takes.
GemmPath choose_gemm_path(const BlockFormat& x, const BlockFormat& w, int cc);

// Y (m, n) = dequantize(X) · dequantize(W)^T. `path` forces one path (std::invalid_argument
// when it does not apply to the formats or the device; std::runtime_error when cuBLASLt
// has no algorithm for it). Returns the path that ran.
GemmPath gemm(size_t m, size_t n, size_t k, const QuantizedOperand& x, const QuantizedOperand& w,
              void* y, GemmDtype out_dtype, void* stream = nullptr,
              GemmPath path = GemmPath::automatic);

// Host to host: x (m, k) and w (n, k) as lpx::quantize returns them; y (m * n) float32.
GemmPath gemm_host(const QuantizedTensor& x, const QuantizedTensor& w, std::span<float> y,
                   GemmPath path = GemmPath::automatic);

// --- Float32 GEMMs in a chosen order (lpx train --gemm; docs/kernels.md#ordered-gemms).
//
// c (m, n) = op(a) (m, k) · op(b) (k, n), or c + that when `accumulate`; a is stored (m, k)
// row-major, or (k, m) when a_trans; b (k, n), or (n, k) when b_trans; c (m, n); device
// pointers, c not overlapping a or b. The order:
//   GemmOrder::exact, or limited accumulation (acc.mantissa_bits < 23) in either order:
//     numerics/ordered_sum.hpp's rule for every element (module: ordered_gemm.cu), the same
//     bits as sim's CPU gemm() in that order, on any device and tiling.
//   GemmOrder::fast with fp32 accumulation: cuBLASLt's SGEMM (CUBLAS_COMPUTE_32F, no TF32),
//     in cuBLASLt's own order.
// Throws std::invalid_argument on a negative size, a null pointer with a nonzero size,
// mantissa_bits outside [1, 23] or a negative promote_every; std::runtime_error without a
// device. A size of zero does nothing (k = 0: c = 0, or unchanged when accumulating).
void gemm_f32_device(bool a_trans, bool b_trans, const float* a, const float* b, float* c,
                     int64_t m, int64_t n, int64_t k, LimitedSum acc, bool accumulate,
                     GemmOrder order, void* stream = nullptr);

// Byte offset of the scale of row r, K-block c in cuBLASLt's block-scale layout for an
// operand with `kblocks` scales per row (CUBLASLT_MATMUL_MATRIX_SCALE_VEC32_UE8M0 and
// VEC16_UE4M3; cuBLAS "1D block scaling factors layout"): rows are padded to a multiple
// of 128 and K-blocks to a multiple of 4; tiles of 128 rows x 4 K-blocks are 512 bytes,
// K-tiles fastest; inside a tile row r sits at (r % 32) * 16 + ((r / 32) % 4) * 4.
constexpr size_t block_scale_tile_offset(size_t r, size_t c, size_t kblocks) {
  const size_t ktiles = (kblocks + 3) / 4;
  return ((r / 128) * ktiles + c / 4) * 512 + (r % 32) * 16 + ((r % 128) / 32) * 4 + c % 4;
}
// Bytes of that layout for `rows` rows.
constexpr size_t block_scale_tile_bytes(size_t rows, size_t kblocks) {
  return (rows + 127) / 128 * ((kblocks + 3) / 4) * 512;
}

// The float32 scale layouts of the Hopper FP8 block-scaled GEMM (fp8_block128_scaled), as
// Transformer Engine hands them to cuBLASLt. VEC128_32F (1x128 along k): the (rows,
// kblocks) grid transposed, rows fastest, the row count padded to a multiple of 4 (16
// bytes); element index of (r, c):
constexpr size_t vec128_scale_index(size_t r, size_t c, size_t rows) { return c * ((rows + 3) / 4 * 4) + r; }
constexpr size_t vec128_scale_count(size_t rows, size_t kblocks) { return kblocks * ((rows + 3) / 4 * 4); }
// BLK128x128_32F: the (row blocks, kblocks) grid row-major, K-blocks fastest, padded to a
// multiple of 4.
constexpr size_t blk128_scale_index(size_t rb, size_t c, size_t kblocks) { return rb * ((kblocks + 3) / 4 * 4) + c; }
constexpr size_t blk128_scale_count(size_t row_blocks, size_t kblocks) { return row_blocks * ((kblocks + 3) / 4 * 4); }

}  // namespace lpx::kernels
