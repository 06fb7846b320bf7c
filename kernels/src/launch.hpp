// Internal: the launchers behind the public host API. api.cpp checks every argument
// (in every build) and then calls these; they are defined by the .cu files in a CUDA
// build and by no_cuda.cpp otherwise (where each throws std::runtime_error).
#pragma once

#include <cstddef>
#include <cstdint>

#include "lpx/formats/block_format.hpp"
#include "lpx/formats/cast.hpp"
#include "lpx/formats/quantize.hpp"
#include "lpx/kernels/bench.hpp"
#include "lpx/kernels/gemm.hpp"
#include "lpx/kernels/hw_cvt.hpp"
#include "lpx/formats/element_format.hpp"

namespace lpx::kernels::launch {

// Throws std::runtime_error("no CUDA device ...") unless a device is present.
void require_device();
// major * 10 + minor of the current device; 0 without one.
int compute_capability();

// The br x bc block of format f on a (rows, cols) matrix of the given rank (1 or 2):
// validate(f), then vector / tile extents; std::invalid_argument for per-tensor and
// per-channel blocks and for an axis out of range (quantize_api.cpp).
struct BlockGeometry {
  size_t br = 1, bc = 1;
};
BlockGeometry block_geometry(const BlockFormat& f, size_t rank, const char* what);

void encode(const float* in, void* codes, size_t n, const ElementFormat& f, const CastOptions& opt,
            void* stream);
void decode(const void* codes, float* out, size_t n, const ElementFormat& f, void* stream);
void fake_cast(const float* in, float* out, size_t n, const ElementFormat& f,
               const CastOptions& opt, void* stream);
// Host pointers in and out: allocate, copy, run, copy back, synchronize.
void encode_h2h(const float* in, void* codes, size_t n, const ElementFormat& f,
                const CastOptions& opt);
void decode_h2h(const void* codes, float* out, size_t n, const ElementFormat& f);
void fake_cast_h2h(const float* in, float* out, size_t n, const ElementFormat& f,
                   const CastOptions& opt);

void hadamard(const float* in, float* out, size_t rows, int n, const float* signs, uint64_t seed,
              uint32_t stream, void* cuda_stream);
void hadamard_h2h(const float* in, float* out, size_t rows, int n, const float* signs,
                  uint64_t seed, uint32_t stream);

// Block quantization of a (rows, cols) matrix in br x bc blocks (quantize.hpp).
void quantize(const float* x, size_t rows, size_t cols, size_t br, size_t bc, const BlockFormat& f,
              const QuantizeOptions& opt, uint8_t* codes, uint8_t* scale_codes, float* scale_values,
              float* tensor_scale, void* stream);
void quantize_h2h(const float* x, size_t rows, size_t cols, size_t br, size_t bc,
                  const BlockFormat& f, const QuantizeOptions& opt, uint8_t* codes,
                  uint8_t* scale_codes, float* scale_values, float* tensor_scale);
// fake_quantize: quantize and dequantize in one pass, no codes (out is (rows, cols)).
void fake_quantize(const float* x, size_t rows, size_t cols, size_t br, size_t bc,
                   const BlockFormat& f, const QuantizeOptions& opt, float* out,
                   uint8_t* scale_codes, float* scale_values, float* tensor_scale, void* stream);
void fake_quantize_h2h(const float* x, size_t rows, size_t cols, size_t br, size_t bc,
                       const BlockFormat& f, const QuantizeOptions& opt, float* out,
                       uint8_t* scale_codes, float* scale_values, float* tensor_scale);
// dequantize: codes and stored scales to float32 (out_bf16: bfloat16 bits, RNE).
// tensor_scale is a device pointer to s_dec (read for two-level formats only; null: not
// applied, as the BF16 GEMM path wants).
void dequantize(const uint8_t* codes, const uint8_t* scale_codes, const float* scale_values,
                const float* tensor_scale, size_t rows, size_t cols, size_t br, size_t bc,
                const BlockFormat& f, bool headroom_3_4, void* out, bool out_bf16, void* stream);
void dequantize_h2h(const uint8_t* codes, const uint8_t* scale_codes, const float* scale_values,
                    const float* tensor_scale, size_t rows, size_t cols, size_t br, size_t bc,
                    const BlockFormat& f, bool headroom_3_4, float* out);

void gemm(size_t m, size_t n, size_t k, const GemmOperand& x, const GemmOperand& w, void* y,
          GemmDtype out_dtype, void* stream);
// The quantized-operand GEMM (gemm.hpp); arguments checked, `path` is what
// choose_gemm_path allows (or automatic). Returns the path that ran.
GemmPath gemm_quantized(size_t m, size_t n, size_t k, const QuantizedOperand& x,
                        const QuantizedOperand& w, void* y, GemmDtype out_dtype, void* stream,
                        GemmPath path);
GemmPath gemm_quantized_h2h(const QuantizedTensor& x, const QuantizedTensor& w, float* y,
                            GemmPath path);
// rbits: one word per group of 4 (stochastic forms), else null. False: not supported.
bool hw_cvt_h2h(const float* in, const uint32_t* rbits, uint8_t* out, size_t n, HwCvt which);

}  // namespace lpx::kernels::launch
