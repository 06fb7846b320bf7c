// Block-quantization kernels over views (lpx/kernels/tensor.hpp): x is a (rows, cols)
// float32 view, any strides; blocks are the br x bc boxes of the output view's scales; the
// scale grid is (ceil(rows/br), ceil(cols/bc)), row-major. Stochastic rounding is keyed by
// the logical row-major index r * cols + c, whatever the strides. The scale rule, the element cast and the
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
// with atomicMax on float32 bits (bits of non-negative floats order like their values)
// into a device word (the caller's, or one allocated on the stream), pass 2 derives s_enc
// on the device (tensor_encode_scale) and scales and casts. Nothing synchronizes: the
// launches are ordered on the stream.
#include <cuda_runtime.h>

#include <cstdint>

#include "cuda_util.cuh"
#include "launch.hpp"
#include "lpx/formats/block_scale.hpp"

namespace lpx::kernels::module {

namespace {

namespace bs = block_scaling;
using cuda::Addressing;

constexpr unsigned kThreads = 128;

struct Params {
  const float* x;  // (rows, cols) through ax
  Addressing ax;
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
      a.add(float_to_bits(bs::prepare(p.x[p.ax.offset(r, c)], p.opt)) & kF32AbsMask);
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
                                float* out, Addressing aout, uint8_t* scale_codes,
                                float* scale_values, float* tensor_scale) {
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
        const size_t i = r * p.cols + c;  // the logical index (SR key)
        const uint32_t code =
            bs::quantize_element(p.x[p.ax.offset(r, c)], s, pow2, p.element, p.opt, i).code;
        if (codes != nullptr) codes[aout.offset(r, c)] = static_cast<uint8_t>(code);
        else
          out[aout.offset(r, c)] = bs::dequant_value(code, dec, p.element, two_level,
                                                     p.scale.tensor_dec, p.opt.headroom_3_4);
      }
  }
}

struct DequantParams {
  Addressing aq, aout;
  size_t br, bc, grid_cols;
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
  const size_t n = p.aq.rows * p.aq.cols;
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    const size_t r = i / p.aq.cols, c = i % p.aq.cols;
    const size_t b = (r / p.br) * p.grid_cols + c / p.bc;
    const float dec = coded ? bs::decode_scale(p.scale, scale_codes[b], 0.0f) : scale_values[b];
    const float v = bs::dequant_value(codes[p.aq.offset(r, c)], dec, p.element, two_level,
                                      tensor_dec, p.headroom);
    if constexpr (sizeof(Out) == sizeof(float)) out[p.aout.offset(r, c)] = v;
    else out[p.aout.offset(r, c)] = static_cast<Out>(lpx::encode(v, bf16, Rounding::rne, Overflow::ieee));
  }
}

Params make_params(const DeviceTensor& x, const DeviceTensor& out, const QuantizeOptions& opt) {
  Params p{};
  p.x = static_cast<const float*>(x.data);
  p.ax = cuda::addressing(x);
  p.rows = static_cast<size_t>(x.rows);
  p.cols = static_cast<size_t>(x.cols);
  p.br = static_cast<size_t>(out.scales.block_rows);
  p.bc = static_cast<size_t>(out.scales.block_cols);
  p.grid_cols = (p.cols + p.bc - 1) / p.bc;
  p.nblocks = ((p.rows + p.br - 1) / p.br) * p.grid_cols;
  p.element = out.element;
  p.scale.scale = out.scales.format;
  p.scale.rule = out.scales.rule;
  p.scale.lim = bs::limits_of(out.element);
  p.scale.margin = opt.margin;
  p.opt = opt;
  p.opt.history = nullptr;
  return p;
}

}  // namespace

void quantize(const DeviceTensor& x, const DeviceTensor& out, const QuantizeOptions& opt,
              uint32_t* amax_word, void* stream) {
  const auto s = static_cast<cudaStream_t>(stream);
  const Params p = make_params(x, out, opt);
  const unsigned grid = cuda::grid_for(p.nblocks, kThreads);
  const bool two_level = out.scales.format == ScaleFormat::e4m3;
  uint32_t* amax = amax_word;
  if (two_level) {
    if (amax == nullptr)
      cuda::check(cudaMallocAsync(reinterpret_cast<void**>(&amax), sizeof(uint32_t), s),
                  "cudaMallocAsync");
    cuda::check(cudaMemsetAsync(amax, 0, sizeof(uint32_t), s), "cudaMemsetAsync");
    tensor_amax_kernel<<<grid, kThreads, 0, s>>>(p, amax);
    cuda::check(cudaGetLastError(), "tensor_amax_kernel launch");
  }
  const bool fake = out.storage == Storage::f32;
  quantize_kernel<<<grid, kThreads, 0, s>>>(
      p, amax, fake ? nullptr : static_cast<uint8_t*>(out.data),
      fake ? static_cast<float*>(out.data) : nullptr, cuda::addressing(out), out.scales.codes,
      out.scales.values, out.scales.tensor);
  const cudaError_t launched = cudaGetLastError();
  if (two_level && amax_word == nullptr) cudaFreeAsync(amax, s);  // after the kernels, in stream order
  cuda::check(launched, "quantize_kernel launch");
}

void dequantize(const DeviceTensor& q, const DeviceTensor& out, void* stream) {
  DequantParams p{};
  p.aq = cuda::addressing(q);
  p.aout = cuda::addressing(out);
  p.br = static_cast<size_t>(q.scales.block_rows);
  p.bc = static_cast<size_t>(q.scales.block_cols);
  p.grid_cols = (p.aq.cols + p.bc - 1) / p.bc;
  p.element = q.element;
  p.scale = q.scales.format;
  p.headroom = q.scales.headroom_3_4;
  const unsigned grid = cuda::grid_for(static_cast<size_t>(q.numel()), 256);
  const auto s = static_cast<cudaStream_t>(stream);
  const auto* codes = static_cast<const uint8_t*>(q.data);
  if (out.storage == Storage::bf16)
    dequantize_kernel<<<grid, 256, 0, s>>>(p, codes, q.scales.codes, q.scales.values,
                                           q.scales.tensor, static_cast<uint16_t*>(out.data));
  else
    dequantize_kernel<<<grid, 256, 0, s>>>(p, codes, q.scales.codes, q.scales.values,
                                           q.scales.tensor, static_cast<float*>(out.data));
  cuda::check(cudaGetLastError(), "dequantize_kernel launch");
}

}  // namespace lpx::kernels::module
