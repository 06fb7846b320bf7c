// Block-scaled quantization on the device, bit-identical to lpx::quantize()
// (formats/quantize.hpp, the oracle): MX 1x32 blocks along rows or columns (OCP MX v1.0,
// every scale rule), NVFP4 two-level 1x16 and 16x16 (RECIPES.md operation order),
// DeepSeek-V3 1x128 / 128x128 FP32-scaled tiles, and any other 1xN, Nx1 or RxC block of
// the BlockFormat grammar with e8m0 / pow2 / fp32 / e4m3 scales.
//
// Tensors are 1-D (one row) or 2-D (rows, cols) row-major float32. A block is an RxC box:
//   vector along the last axis  1 x length       vector along axis 0  length x 1
//   tile                        rows x cols      (1-D input: one row)
// Ragged edge blocks are shorter, as in the CPU library. The scale grid is
// (ceil(rows / R), ceil(cols / C)) in C order — lpx::QuantizedTensor::scale_shape.
// Not on the device (std::invalid_argument): per-tensor and per-channel blocks, an amax
// history (delayed scaling), ranks above 2. QuantizeStats are not computed.
//
// The per-block scale computation mirrors formats/src/quantize.cpp (block_scale,
// scale_exponent, mul_pow2_exact, cast_block) in kernels/src/quantize.cu, because the CPU
// versions are not LPX_HD; that scale rule should become shared LPX_HD code in formats/.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "lpx/formats/block_format.hpp"
#include "lpx/formats/quantize.hpp"

namespace lpx::kernels {

// Device pointers. x is (rows, cols); codes is (rows, cols) bytes; scale_codes (e8m0,
// e4m3) or scale_values (pow2, fp32: the decode multiplier) is the scale grid;
// tensor_scale (e4m3 only) receives the float32 decode scale s_dec. Pointers a format
// does not use may be null.
void quantize_device(const float* x, size_t rows, size_t cols, const BlockFormat& f,
                     const QuantizeOptions& opt, uint8_t* codes, uint8_t* scale_codes,
                     float* scale_values, float* tensor_scale, void* stream = nullptr);

// Host to host: the same result as lpx::quantize(x, f, opt) (codes, scale_codes,
// scale_values, tensor_scale, shape, scale_shape; amax and stats left 0). shape has
// rank 1 or 2.
QuantizedTensor quantize_host(std::span<const float> x, std::span<const int64_t> shape,
                              const BlockFormat& f, const QuantizeOptions& opt);

}  // namespace lpx::kernels
