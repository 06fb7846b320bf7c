// Block-quantization kernels: x is (rows, cols) row-major; blocks are br x bc boxes; the
// scale grid is (ceil(rows/br), ceil(cols/bc)). The scale rule, the element cast and the
// dequantized value are the LPX_HD functions of lpx/formats/block_scale.hpp, the very
// ones formats/src/quantize.cpp runs on the CPU (one codec, many executions).
//
//   quantize       one thread per block: amax -> block_scale -> quantize_element per
//                  element (codes), the order of lpx::quantize().
//   fake_quantize  the same thread per block, but each element's code is dequantized at
//                  once (dequant_value with the stored scale) and only the float32 value
//                  is written: no code array exists (lpx::fake_quantize_values).
//   dequantize     one thread per element: the block's stored scale decoded
//                  (decode_scale) and dequant_value; float32 out, or bfloat16 (RNE) for
//                  the dequantize-then-BF16 GEMM path (gemm.cu).
// NVFP4's two-level scale needs the tensor amax first: pass 1 reduces the finite amax
// with atomicMax on float32 bits (bits of non-negative floats order like their values),
// pass 2 derives s_enc on the device (tensor_encode_scale) and scales and casts.
#include <cuda_runtime.h>

#include <cstdint>

#include "cuda_util.cuh"
#include "launch.hpp"
#include "lpx/formats/block_scale.hpp"

namespace lpx::kernels {

namespace {

namespace bs = block_scaling;

constexpr unsigned kThreads = 128;

struct Params {
  const float* x;  // (rows, cols)
  size_t rows, cols, br, bc, grid_cols, nblocks;
  ElementFormat element;
  bs::ScaleParams scale;  // tensor_enc / tensor_dec are set on the device (two-level)
  QuantizeOptions opt;    // history is null (checked on the host)
};

// The Amax of the block whose top-left element is (r0, c0).
__device__ inline bs::Amax block_amax(const Params& p, size_t r0, size_t c0) {
  bs::Amax a;
  const size_t r1 = min(r0 + p.br, p.rows), c1 = min(c0 + p.bc, p.cols);
  for (size_t r = r0; r < r1; ++r)
    for (size_t c = c0; c < c1; ++c)
      a.add(float_to_bits(bs::prepare(p.x[r * p.cols + c], p.opt)) & kF32AbsMask);
  return a;
}

__global__ void tensor_amax_kernel(Params p, uint32_t* amax_bits) {
  for (size_t b = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; b < p.nblocks;
       b += static_cast<size_t>(gridDim.x) * blockDim.x) {
    const bs::Amax a = block_amax(p, (b / p.grid_cols) * p.br, (b % p.grid_cols) * p.bc);
    atomicMax(amax_bits, a.finite);
  }
}

// One thread per block. codes (quantize) or out (fake_quantize) is null; scale_codes /
// scale_values / tensor_scale may be null (not stored).
__global__ void quantize_kernel(Params p, const uint32_t* tensor_amax_bits, uint8_t* codes,
                                float* out, uint8_t* scale_codes, float* scale_values,
                                float* tensor_scale) {
  const bool two_level = p.scale.scale == ScaleFormat::e4m3;
  if (two_level) {
    p.scale.tensor_enc = bs::tensor_encode_scale(bits_to_float(*tensor_amax_bits),
                                                 p.scale.lim.max_elem);
    p.scale.tensor_dec = 1.0f / p.scale.tensor_enc;
    if (tensor_scale != nullptr && blockIdx.x == 0 && threadIdx.x == 0)
      *tensor_scale = p.scale.tensor_dec;
  }
  const bool pow2 = scale_is_power_of_two(p.scale.scale);
  const bool coded = scale_is_code(p.scale.scale);
  for (size_t b = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; b < p.nblocks;
       b += static_cast<size_t>(gridDim.x) * blockDim.x) {
    const size_t r0 = (b / p.grid_cols) * p.br, c0 = (b % p.grid_cols) * p.bc;
    const bs::BlockScale s = bs::block_scale(block_amax(p, r0, c0), p.scale);
    if (coded && scale_codes != nullptr) scale_codes[b] = s.code;
    if (!coded && scale_values != nullptr) scale_values[b] = s.dec;
    const float dec = bs::stored_dec(s, p.scale.scale);
    const size_t r1 = min(r0 + p.br, p.rows), c1 = min(c0 + p.bc, p.cols);
    for (size_t r = r0; r < r1; ++r)
      for (size_t c = c0; c < c1; ++c) {
        const size_t i = r * p.cols + c;
        const uint32_t code = bs::quantize_element(p.x[i], s, pow2, p.element, p.opt, i).code;
        if (codes != nullptr) codes[i] = static_cast<uint8_t>(code);
        else
          out[i] = bs::dequant_value(code, dec, p.element, two_level, p.scale.tensor_dec,
                                     p.opt.headroom_3_4);
      }
  }
}

struct DequantParams {
  size_t rows, cols, br, bc, grid_cols;
  ElementFormat element;
  ScaleFormat scale;
  bool headroom;
};

// One thread per element; Out is float (float32) or uint16_t (bfloat16 bits, RNE).
template <class Out>
__global__ void dequantize_kernel(DequantParams p, const uint8_t* __restrict__ codes,
                                  const uint8_t* __restrict__ scale_codes,
                                  const float* __restrict__ scale_values,
                                  const float* __restrict__ tensor_scale, Out* __restrict__ out) {
  constexpr ElementFormat bf16 = fmt16::bf16;
  const bool two_level = p.scale == ScaleFormat::e4m3;
  // No tensor scale (the BF16 GEMM path applies it as alpha): the block scale only.
  const float tensor_dec = two_level && tensor_scale != nullptr ? *tensor_scale : 1.0f;
  const bool coded = scale_is_code(p.scale);
  const size_t n = p.rows * p.cols;
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    const size_t r = i / p.cols, c = i % p.cols;
    const size_t b = (r / p.br) * p.grid_cols + c / p.bc;
    const float dec = coded ? bs::decode_scale(p.scale, scale_codes[b], 0.0f) : scale_values[b];
    const float v = bs::dequant_value(codes[i], dec, p.element, two_level, tensor_dec, p.headroom);
    if constexpr (sizeof(Out) == sizeof(float)) out[i] = v;
    else out[i] = static_cast<Out>(encode(v, bf16, Rounding::rne, Overflow::ieee));
  }
}

Params make_params(const float* x, size_t rows, size_t cols, size_t br, size_t bc,
                   const BlockFormat& f, const QuantizeOptions& opt) {
  Params p{};
  p.x = x;
  p.rows = rows;
  p.cols = cols;
  p.br = br;
  p.bc = bc;
  p.grid_cols = (cols + bc - 1) / bc;
  p.nblocks = ((rows + br - 1) / br) * p.grid_cols;
  p.element = f.element;
  p.scale.scale = f.scale;
  p.scale.rule = f.rule;
  p.scale.lim = bs::limits_of(f.element);
  p.scale.margin = opt.margin;
  p.opt = opt;
  p.opt.history = nullptr;
  return p;
}

// quantize (codes != null) or fake_quantize (out != null) on the device.
void run_quantize(const float* x, size_t rows, size_t cols, size_t br, size_t bc,
                  const BlockFormat& f, const QuantizeOptions& opt, uint8_t* codes, float* out,
                  uint8_t* scale_codes, float* scale_values, float* tensor_scale, void* stream) {
  const auto s = static_cast<cudaStream_t>(stream);
  const Params p = make_params(x, rows, cols, br, bc, f, opt);
  const unsigned grid = cuda::grid_for(p.nblocks, kThreads);
  cuda::Buffer amax(sizeof(uint32_t));
  if (f.two_level()) {
    cuda::check(cudaMemsetAsync(amax.get(), 0, sizeof(uint32_t), s), "cudaMemsetAsync");
    tensor_amax_kernel<<<grid, kThreads, 0, s>>>(p, amax.get<uint32_t>());
    cuda::check(cudaGetLastError(), "tensor_amax_kernel launch");
  }
  quantize_kernel<<<grid, kThreads, 0, s>>>(p, amax.get<uint32_t>(), codes, out, scale_codes,
                                            scale_values, tensor_scale);
  cuda::check(cudaGetLastError(), "quantize_kernel launch");
  // The amax buffer is freed on return: wait for the kernels that read it.
  cuda::check(cudaStreamSynchronize(s), "quantize kernels");
}

// Host pointers in and out (codes or out is null): copy in, run_quantize, copy back.
void run_quantize_h2h(const float* x, size_t rows, size_t cols, size_t br, size_t bc,
                      const BlockFormat& f, const QuantizeOptions& opt, uint8_t* codes, float* out,
                      uint8_t* scale_codes, float* scale_values, float* tensor_scale) {
  launch::require_device();
  const size_t n = rows * cols;
  const size_t nb = ((rows + br - 1) / br) * ((cols + bc - 1) / bc);
  cuda::Buffer d_x(n * sizeof(float)), d_codes(codes != nullptr ? n : 0),
      d_out(out != nullptr ? n * sizeof(float) : 0), d_sc(nb), d_sv(nb * sizeof(float)),
      d_ts(sizeof(float));
  cuda::to_device(d_x.get(), x, n * sizeof(float));
  run_quantize(d_x.get<float>(), rows, cols, br, bc, f, opt, d_codes.get<uint8_t>(),
               d_out.get<float>(), d_sc.get<uint8_t>(), d_sv.get<float>(), d_ts.get<float>(),
               nullptr);
  if (codes) cuda::to_host(codes, d_codes.get(), n);
  if (out) cuda::to_host(out, d_out.get(), n * sizeof(float));
  if (scale_codes) cuda::to_host(scale_codes, d_sc.get(), nb);
  if (scale_values) cuda::to_host(scale_values, d_sv.get(), nb * sizeof(float));
  if (tensor_scale) cuda::to_host(tensor_scale, d_ts.get(), sizeof(float));
}

}  // namespace

namespace launch {

void quantize(const float* x, size_t rows, size_t cols, size_t br, size_t bc, const BlockFormat& f,
              const QuantizeOptions& opt, uint8_t* codes, uint8_t* scale_codes, float* scale_values,
              float* tensor_scale, void* stream) {
  run_quantize(x, rows, cols, br, bc, f, opt, codes, nullptr, scale_codes, scale_values,
               tensor_scale, stream);
}

void fake_quantize(const float* x, size_t rows, size_t cols, size_t br, size_t bc,
                   const BlockFormat& f, const QuantizeOptions& opt, float* out,
                   uint8_t* scale_codes, float* scale_values, float* tensor_scale, void* stream) {
  run_quantize(x, rows, cols, br, bc, f, opt, nullptr, out, scale_codes, scale_values,
               tensor_scale, stream);
}

void dequantize(const uint8_t* codes, const uint8_t* scale_codes, const float* scale_values,
                const float* tensor_scale, size_t rows, size_t cols, size_t br, size_t bc,
                const BlockFormat& f, bool headroom_3_4, void* out, bool out_bf16, void* stream) {
  DequantParams p{};
  p.rows = rows;
  p.cols = cols;
  p.br = br;
  p.bc = bc;
  p.grid_cols = (cols + bc - 1) / bc;
  p.element = f.element;
  p.scale = f.scale;
  p.headroom = headroom_3_4;
  const unsigned grid = cuda::grid_for(rows * cols, 256);
  const auto s = static_cast<cudaStream_t>(stream);
  if (out_bf16)
    dequantize_kernel<<<grid, 256, 0, s>>>(p, codes, scale_codes, scale_values, tensor_scale,
                                           static_cast<uint16_t*>(out));
  else
    dequantize_kernel<<<grid, 256, 0, s>>>(p, codes, scale_codes, scale_values, tensor_scale,
                                           static_cast<float*>(out));
  cuda::check(cudaGetLastError(), "dequantize_kernel launch");
}

void quantize_h2h(const float* x, size_t rows, size_t cols, size_t br, size_t bc,
                  const BlockFormat& f, const QuantizeOptions& opt, uint8_t* codes,
                  uint8_t* scale_codes, float* scale_values, float* tensor_scale) {
  run_quantize_h2h(x, rows, cols, br, bc, f, opt, codes, nullptr, scale_codes, scale_values,
                   tensor_scale);
}

void fake_quantize_h2h(const float* x, size_t rows, size_t cols, size_t br, size_t bc,
                       const BlockFormat& f, const QuantizeOptions& opt, float* out,
                       uint8_t* scale_codes, float* scale_values, float* tensor_scale) {
  run_quantize_h2h(x, rows, cols, br, bc, f, opt, nullptr, out, scale_codes, scale_values,
                   tensor_scale);
}

void dequantize_h2h(const uint8_t* codes, const uint8_t* scale_codes, const float* scale_values,
                    const float* tensor_scale, size_t rows, size_t cols, size_t br, size_t bc,
                    const BlockFormat& f, bool headroom_3_4, float* out) {
  require_device();
  const size_t n = rows * cols;
  const size_t nb = ((rows + br - 1) / br) * ((cols + bc - 1) / bc);
  const bool coded = f.scale_is_code();
  cuda::Buffer d_codes(n), d_sc(coded ? nb : 0), d_sv(coded ? 0 : nb * sizeof(float)),
      d_ts(sizeof(float)), d_out(n * sizeof(float));
  cuda::to_device(d_codes.get(), codes, n);
  if (coded) cuda::to_device(d_sc.get(), scale_codes, nb);
  else cuda::to_device(d_sv.get(), scale_values, nb * sizeof(float));
  const float one = 1.0f;
  cuda::to_device(d_ts.get(), tensor_scale != nullptr ? tensor_scale : &one, sizeof(float));
  dequantize(d_codes.get<uint8_t>(), d_sc.get<uint8_t>(), d_sv.get<float>(), d_ts.get<float>(),
             rows, cols, br, bc, f, headroom_3_4, d_out.get(), false, nullptr);
  cuda::to_host(out, d_out.get(), n * sizeof(float));  // synchronizes with the kernel
}

}  // namespace launch

}  // namespace lpx::kernels
