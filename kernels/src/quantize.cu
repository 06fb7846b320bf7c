// Block-quantization kernels: x is (rows, cols) row-major; blocks are br x bc boxes; the
// scale grid is (ceil(rows/br), ceil(cols/bc)). One thread per block: amax -> scale ->
// cast, the order of formats/src/quantize.cpp. NVFP4's two-level scale needs the tensor
// amax first: pass 1 reduces the finite amax with atomicMax on float32 bits (bits of
// non-negative floats order like their values), pass 2 scales and casts.
//
// Every device function below MIRRORS a CPU function of formats/src/quantize.cpp line for
// line (named in its comment); the CPU ones are not LPX_HD. They should become one shared
// LPX_HD scale-rule header in formats/.
#include <cuda_runtime.h>

#include <cfloat>
#include <cstdint>

#include "cuda_util.cuh"
#include "launch.hpp"
#include "lpx/formats/codec.hpp"
#include "lpx/numerics/philox.hpp"

namespace lpx::kernels {

namespace {

constexpr unsigned kThreads = 128;

// Mirrors ElementLimits / limits_of (computed on the host with max_finite()).
struct Limits {
  float max_elem;
  int emax;
  uint32_t max_sig;
  int mbits;
};

// Mirrors floor_log2_bits.
__device__ inline int floor_log2_bits(uint32_t b) {
  const uint32_t biased = b >> 23;
  if (biased != 0) return static_cast<int>(biased) - kF32Bias;
  return (32 - __clz(b)) - 1 - 149;
}
// Mirrors significand24.
__device__ inline uint32_t significand24(uint32_t b) {
  if ((b >> 23) != 0) return (b & 0x7fffffu) | 0x800000u;
  return b << (24 - (32 - __clz(b)));
}
int host_floor_log2(uint32_t b) {
  const uint32_t biased = b >> 23;
  return biased != 0 ? static_cast<int>(biased) - kF32Bias : 31 - __builtin_clz(b) - 149;
}
uint32_t host_sig24(uint32_t b) {
  return (b >> 23) != 0 ? (b & 0x7fffffu) | 0x800000u : b << (24 - (32 - __builtin_clz(b)));
}

// Mirrors scale_exponent.
__device__ inline int scale_exponent(uint32_t amax_bits, ScaleRule rule, const Limits& l) {
  const int e = floor_log2_bits(amax_bits);
  switch (rule) {
    case ScaleRule::floor: return e - l.emax;
    case ScaleRule::ceil: return e + (significand24(amax_bits) == 0x800000u ? 0 : 1) - l.emax;
    case ScaleRule::rceil: return e - l.emax + (significand24(amax_bits) > l.max_sig ? 1 : 0);
    case ScaleRule::even: {
      const uint32_t rounded = amax_bits + (1u << (22 - l.mbits));
      const uint32_t biased = rounded >> 23;
      return (biased != 0 ? static_cast<int>(biased) - kF32Bias : e) - l.emax;
    }
  }
  return 0;
}

// Mirrors mul_pow2_exact: x * 2^k, rounded to odd below float32's normal range.
__device__ inline float mul_pow2_exact(float x, int k) {
  const float y = x * pow2f(k);
  if (!(fabsf(y) <= FLT_MIN) || x == 0.0f) return y;
  const double d = static_cast<double>(x) * ldexp(1.0, k);
  if (static_cast<double>(y) == d) return y;
  const float t = fabs(static_cast<double>(y)) > fabs(d) ? nextafterf(y, 0.0f) : y;
  return bits_to_float(float_to_bits(t) | 1u);
}

// Mirrors prepare / prepare_element.
__device__ inline float prepare(float x, const QuantizeOptions& o) {
  if (o.flush_subnormal_inputs && (float_to_bits(x) & kF32AbsMask) < 0x800000u)
    x = copysignf(0.0f, x);
  return x;
}
__device__ inline float prepare_element(float x, const QuantizeOptions& o) {
  const float p = prepare(x, o);
  return o.headroom_3_4 ? p * 0.75f : p;
}

struct Params {
  const float* x;
  size_t rows, cols, br, bc, grid_cols, nblocks;
  ElementFormat element;
  ElementFormat e4m3;  // fmt8::e4m3fn by value (host constants are not device-visible)
  ScaleFormat scale;
  ScaleRule rule;
  Limits lim;
  QuantizeOptions opt;  // history is null (checked on the host)
};

// Mirrors Amax / block_amax over the block's box.
__device__ inline void block_amax(const Params& p, size_t r0, size_t c0, uint32_t& all,
                                  uint32_t& finite) {
  all = 0;
  finite = 0;
  const size_t r1 = min(r0 + p.br, p.rows), c1 = min(c0 + p.bc, p.cols);
  for (size_t r = r0; r < r1; ++r)
    for (size_t c = c0; c < c1; ++c) {
      const uint32_t a = float_to_bits(prepare(p.x[r * p.cols + c], p.opt)) & kF32AbsMask;
      all = max(all, a);
      if (a < kF32InfBits) finite = max(finite, a);
    }
}

__global__ void tensor_amax_kernel(Params p, uint32_t* amax_bits) {
  for (size_t b = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; b < p.nblocks;
       b += static_cast<size_t>(gridDim.x) * blockDim.x) {
    uint32_t all, finite;
    block_amax(p, (b / p.grid_cols) * p.br, (b % p.grid_cols) * p.bc, all, finite);
    atomicMax(amax_bits, finite);
  }
}

// One thread per block: mirrors block_scale + cast_block (and quantize()'s tensor scale).
__global__ void quantize_kernel(Params p, const uint32_t* tensor_amax_bits, uint8_t* codes,
                                uint8_t* scale_codes, float* scale_values, float* tensor_scale) {
  const float qnan = bits_to_float(kF32QuietNanBits);
  float tensor_enc = 1.0f, tensor_dec = 1.0f;
  if (p.scale == ScaleFormat::e4m3) {
    const float amax_t = bits_to_float(*tensor_amax_bits);
    float enc = 1.0f;
    if (amax_t > 0.0f) {
      const float v = (p.lim.max_elem * 448.0f) / amax_t;
      enc = FLT_MAX < v ? FLT_MAX : v;  // std::min(v, FLT_MAX)
    }
    tensor_enc = enc;
    tensor_dec = 1.0f / enc;
    if (blockIdx.x == 0 && threadIdx.x == 0) *tensor_scale = tensor_dec;
  }
  for (size_t b = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; b < p.nblocks;
       b += static_cast<size_t>(gridDim.x) * blockDim.x) {
    const size_t r0 = (b / p.grid_cols) * p.br, c0 = (b % p.grid_cols) * p.bc;
    uint32_t all, finite;
    block_amax(p, r0, c0, all, finite);
    // block_scale
    bool nan = false;
    int exponent = 0;
    float enc = 1.0f, dec = 1.0f;
    uint8_t code = 0;
    if (all >= kF32InfBits) {
      nan = true;
      dec = qnan;
      code = static_cast<uint8_t>(p.scale == ScaleFormat::e4m3 ? fmt8::e4m3fn.nan_code
                                                               : fmt8::e8m0.nan_code);
    } else {
      const float amax = bits_to_float(all);
      switch (p.scale) {
        case ScaleFormat::e8m0:
        case ScaleFormat::pow2: {
          int x = -127;
          if (all != 0) {
            const int raw = scale_exponent(all, p.rule, p.lim);
            x = raw < -127 ? -127 : (raw > 127 ? 127 : raw);
          }
          exponent = x;
          code = static_cast<uint8_t>(x + 127);
          dec = pow2f(x);
          break;
        }
        case ScaleFormat::fp32: {
          float e = 1.0f;
          if (amax > 0.0f) {
            e = ldexpf(p.lim.max_elem / amax, -p.opt.margin);
            if (!(e <= FLT_MAX)) e = FLT_MAX;
          }
          enc = e;
          dec = 1.0f / e;
          break;
        }
        case ScaleFormat::e4m3: {
          const float v = (amax * tensor_enc) / p.lim.max_elem;
          code = static_cast<uint8_t>(encode(v, p.e4m3, Rounding::rne, Overflow::sat));
          dec = decode(code, p.e4m3);
          const float inv = 1.0f / (dec * tensor_dec);
          enc = FLT_MAX < inv ? FLT_MAX : inv;  // std::min(inv, FLT_MAX)
          break;
        }
      }
    }
    if (p.scale == ScaleFormat::e8m0 || p.scale == ScaleFormat::e4m3) scale_codes[b] = code;
    else scale_values[b] = dec;
    // cast_block
    const bool pow2 = p.scale == ScaleFormat::e8m0 || p.scale == ScaleFormat::pow2;
    const size_t r1 = min(r0 + p.br, p.rows), c1 = min(c0 + p.bc, p.cols);
    for (size_t r = r0; r < r1; ++r)
      for (size_t c = c0; c < c1; ++c) {
        const size_t i = r * p.cols + c;
        if (nan) {
          codes[i] = 0;
          continue;
        }
        const float pe = prepare_element(p.x[i], p.opt);
        const float scaled = pow2 ? mul_pow2_exact(pe, -exponent) : pe * enc;
        const uint32_t rnd =
            p.opt.round == Rounding::sr ? random_bits(p.opt.seed, p.opt.stream, i) : 0u;
        codes[i] = static_cast<uint8_t>(
            encode(scaled, p.element, p.opt.round, p.opt.overflow, rnd, p.opt.sr_bits));
      }
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
  p.e4m3 = fmt8::e4m3fn;
  p.scale = f.scale;
  p.rule = f.rule;
  p.lim.max_elem = static_cast<float>(max_finite(f.element));
  const uint32_t mb = float_to_bits(p.lim.max_elem);
  p.lim.emax = host_floor_log2(mb);
  p.lim.max_sig = host_sig24(mb);
  p.lim.mbits = f.element.is_integer ? (f.element.bits - 2 > 0 ? f.element.bits - 2 : 0)
                                     : f.element.mantissa_bits;
  p.opt = opt;
  p.opt.history = nullptr;
  return p;
}

}  // namespace

namespace launch {

void quantize(const float* x, size_t rows, size_t cols, size_t br, size_t bc, const BlockFormat& f,
              const QuantizeOptions& opt, uint8_t* codes, uint8_t* scale_codes, float* scale_values,
              float* tensor_scale, void* stream) {
  const auto s = static_cast<cudaStream_t>(stream);
  const Params p = make_params(x, rows, cols, br, bc, f, opt);
  const unsigned grid = cuda::grid_for(p.nblocks, kThreads);
  cuda::Buffer amax(sizeof(uint32_t));
  if (f.two_level()) {
    cuda::check(cudaMemsetAsync(amax.get(), 0, sizeof(uint32_t), s), "cudaMemsetAsync");
    tensor_amax_kernel<<<grid, kThreads, 0, s>>>(p, amax.get<uint32_t>());
    cuda::check(cudaGetLastError(), "tensor_amax_kernel launch");
  }
  quantize_kernel<<<grid, kThreads, 0, s>>>(p, amax.get<uint32_t>(), codes, scale_codes,
                                            scale_values, tensor_scale);
  cuda::check(cudaGetLastError(), "quantize_kernel launch");
  // The amax buffer is freed on return: wait for the kernels that read it.
  cuda::check(cudaStreamSynchronize(s), "quantize kernels");
}

void quantize_h2h(const float* x, size_t rows, size_t cols, size_t br, size_t bc,
                  const BlockFormat& f, const QuantizeOptions& opt, uint8_t* codes,
                  uint8_t* scale_codes, float* scale_values, float* tensor_scale) {
  require_device();
  const size_t n = rows * cols;
  const size_t nb = ((rows + br - 1) / br) * ((cols + bc - 1) / bc);
  cuda::Buffer d_x(n * sizeof(float)), d_codes(n), d_sc(nb), d_sv(nb * sizeof(float)),
      d_ts(sizeof(float));
  cuda::to_device(d_x.get(), x, n * sizeof(float));
  quantize(d_x.get<float>(), rows, cols, br, bc, f, opt, d_codes.get<uint8_t>(),
           d_sc.get<uint8_t>(), d_sv.get<float>(), d_ts.get<float>(), nullptr);
  cuda::to_host(codes, d_codes.get(), n);
  if (scale_codes) cuda::to_host(scale_codes, d_sc.get(), nb);
  if (scale_values) cuda::to_host(scale_values, d_sv.get(), nb * sizeof(float));
  if (tensor_scale) cuda::to_host(tensor_scale, d_ts.get(), sizeof(float));
}

}  // namespace launch

}  // namespace lpx::kernels
