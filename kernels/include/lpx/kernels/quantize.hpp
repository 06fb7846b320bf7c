// Block-scaled quantization on the device, bit-identical to lpx::quantize(),
// lpx::dequantize() and lpx::fake_quantize() (formats/quantize.hpp, the oracle): MX 1x32
// blocks along rows or columns (OCP MX v1.0, every scale rule), NVFP4 two-level 1x16 and
// 16x16 (docs/recipes.md operation order), DeepSeek-V3 1x128 / 128x128 FP32-scaled tiles,
// per-tensor FP8 (current scaling: the tensor's own amax, fp32 scale and margin), and
// any other 1xN, Nx1 or RxC block of the BlockFormat grammar with e8m0 / pow2 / fp32 /
// e4m3 scales. The scale rule, the element cast and the dequantized value are the LPX_HD
// functions of lpx/formats/block_scale.hpp, shared with the CPU library.
//
// Tensors are 1-D (one row) or 2-D (rows, cols) row-major float32. A block is an RxC box:
//   vector along the last axis  1 x length       vector along axis 0  length x 1
//   tile                        rows x cols      (1-D input: one row)
//   tensor                      the whole tensor (scale grid 1 x 1)
// Ragged edge blocks are shorter, as in the CPU library. The scale grid is
// (ceil(rows / R), ceil(cols / C)) in C order — lpx::QuantizedTensor::scale_shape.
// Not on the device (std::invalid_argument): per-channel blocks, an amax history (delayed
// scaling), ranks above 2. QuantizeStats and amax are not computed.
//
// NaN values: a dequantized NaN (a NaN block) is NaN on both executors, but its payload
// is the executor's (x86 propagates the operand's NaN, NVIDIA GPUs return 0x7FFFFFFF), so
// values compare bit for bit except that any NaN equals any NaN. Codes and scales
// compare bit for bit without exception.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "lpx/formats/block_format.hpp"
#include "lpx/formats/quantize.hpp"
#include "lpx/kernels/tensor.hpp"

namespace lpx::kernels {

// --- Device tensor views (tensor.hpp). x is a float32 view of any strides; `out` has x's
// shape and is made by quantized_view(): its element format and block scales say what to
// compute and where the scales go (null scale pointers: not stored). Stochastic rounding
// is keyed by the logical row-major index. Asynchronous on `stream` (nothing is
// synchronized); amax_word is a device uint32 the two-level (NVFP4) amax pass may use
// (null: one allocated on the stream), so a caller with its own workspace allocates
// nothing per call.

// out: codes (Storage::code8).
void quantize_device(const DeviceTensor& x, const DeviceTensor& out, const QuantizeOptions& opt,
                     void* stream = nullptr, uint32_t* amax_word = nullptr);
// Fused: out (Storage::f32) = dequantize(quantize(x)), no codes. out may be x's memory.
void fake_quantize_device(const DeviceTensor& x, const DeviceTensor& out,
                          const QuantizeOptions& opt, void* stream = nullptr,
                          uint32_t* amax_word = nullptr);
// Both GEMM layouts of one tensor in one read, as Transformer Engine's row-wise plus
// column-wise quantization: out_rows has x's shape (rows, cols) and gets quantize(x,
// out_rows, opt_rows); out_cols has the transpose's shape (cols, rows) and gets
// quantize(x.transposed(), out_cols, opt_cols), i.e. the operand a wgrad GEMM reads, with
// blocks running down x's columns. Each output is bit for bit the call it replaces (its
// own SR keys, the transpose's logical index for out_cols) and may hold codes (code8) or
// fake-quantized values (f32). One read of x when x is contiguous and both outputs have
// vector blocks of a power of two up to 32 along their rows (MX, NVFP4 1x16); otherwise
// the two calls run one after the other. The outputs must not overlap x or each other.
// amax_words: two device uint32 for the two-level amax passes (null: allocated on the
// stream).
void quantize_both_device(const DeviceTensor& x, const DeviceTensor& out_rows,
                          const QuantizeOptions& opt_rows, const DeviceTensor& out_cols,
                          const QuantizeOptions& opt_cols, void* stream = nullptr,
                          uint32_t* amax_words = nullptr);
// q: codes with their scales (scales.tensor required for e4m3 scales; scales.headroom_3_4
// applied) -> out float32, or the bfloat16 bits (RNE) of the same values (Storage::bf16).
void dequantize_device(const DeviceTensor& q, const DeviceTensor& out, void* stream = nullptr);

// --- Device pointers. `stream` is a cudaStream_t (nullptr: the default stream).

// x is (rows, cols); codes is (rows, cols) bytes; scale_codes (e8m0, e4m3) or
// scale_values (pow2, fp32: the decode multiplier) is the scale grid; tensor_scale (e4m3
// only) receives the float32 decode scale s_dec. Pointers a format does not use may be
// null. Returns when the kernels are done.
void quantize_device(const float* x, size_t rows, size_t cols, const BlockFormat& f,
                     const QuantizeOptions& opt, uint8_t* codes, uint8_t* scale_codes,
                     float* scale_values, float* tensor_scale, void* stream = nullptr);

// Codes and stored scales (as quantize_device writes them) to float32 out (rows, cols):
// lpx::dequantize. tensor_scale is a device pointer to s_dec, required for e4m3 (two-level)
// scales, ignored otherwise; headroom_3_4 is QuantizedTensor::headroom_3_4 (divide by 3/4
// last). Asynchronous with respect to the host.
void dequantize_device(const uint8_t* codes, const uint8_t* scale_codes, const float* scale_values,
                       const float* tensor_scale, size_t rows, size_t cols, const BlockFormat& f,
                       bool headroom_3_4, float* out, void* stream = nullptr);

// Fused fake quantization: out (rows, cols) = dequantize(quantize(x)) without writing
// element codes (lpx::fake_quantize / fake_quantize_values). The scales and tensor scale
// are stored where their pointers are not null (all may be null). out may equal x (in
// place). Returns when the kernels are done.
void fake_quantize_device(const float* x, size_t rows, size_t cols, const BlockFormat& f,
                          const QuantizeOptions& opt, float* out, uint8_t* scale_codes = nullptr,
                          float* scale_values = nullptr, float* tensor_scale = nullptr,
                          void* stream = nullptr);

// --- Host to host (validation and tests): copy in, run, copy back, synchronously.

// The same result as lpx::quantize(x, f, opt) (codes, scale_codes, scale_values,
// tensor_scale, shape, scale_shape; amax and stats left 0). shape has rank 1 or 2.
QuantizedTensor quantize_host(std::span<const float> x, std::span<const int64_t> shape,
                              const BlockFormat& f, const QuantizeOptions& opt);

// quantize_both_device from and to the host: x is (rows, cols) row-major; returns
// {lpx::quantize(x, f_rows, opt_rows), lpx::quantize(x^T, f_cols, opt_cols)} (x^T of shape
// (cols, rows)), amax and stats left 0.
struct QuantizedPair {
  QuantizedTensor rows, cols;
};
QuantizedPair quantize_both_host(std::span<const float> x, int64_t rows, int64_t cols,
                                 const BlockFormat& f_rows, const QuantizeOptions& opt_rows,
                                 const BlockFormat& f_cols, const QuantizeOptions& opt_cols);

// lpx::dequantize(q, out) on the device: q.shape has rank 1 or 2; the same checks as the
// CPU (codes and scales matching the shapes, the tensor scale of a two-level format).
void dequantize_host(const QuantizedTensor& q, std::span<float> out);

// lpx::fake_quantize_values(x, out, f, opt) on the device: out receives the values; the
// returned tensor has the scales, tensor scale, shape and scale shape, and no codes.
QuantizedTensor fake_quantize_host(std::span<const float> x, std::span<const int64_t> shape,
                                   std::span<float> out, const BlockFormat& f,
                                   const QuantizeOptions& opt);

}  // namespace lpx::kernels
