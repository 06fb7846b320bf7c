// Element-cast kernels: encode, decode and fake-cast over views (lpx/kernels/tensor.hpp),
// calling the LPX_HD codec (formats/codec.hpp) per element.
//
// Work split: thread t of the grid-stride loop handles the group of 4 consecutive elements
// [4g, 4g + 4) of the logical row-major order (one float4 load when both views are
// contiguous and aligned; strided views address each element). Stochastic rounding needs
// random_bits(seed, stream, index_offset + i) for logical index i; Philox returns 4 words
// per counter, so a group costs one Philox block when index_offset is a multiple of 4 and
// two otherwise, never one per element. The rounding mode is a template parameter (so the
// codec's switch folds away); the code width (uint8/uint16) too. launch_cast is the one
// dispatch point.
#include <cuda_runtime.h>

#include <cstdint>

#include "cuda_util.cuh"
#include "fixed_formats.cuh"
#include "launch.hpp"
#include "lpx/formats/codec.hpp"
#include "lpx/numerics/philox.hpp"

namespace lpx::kernels::module {

namespace {

using cuda::Addressing;

constexpr unsigned kThreads = 256;

enum class Op { encode, fake_cast };

struct SrKey {
  uint64_t seed;
  uint32_t stream;
  uint64_t index_offset;
  int sr_bits;
};

// The four random words of elements first .. first+3 (flat indices), from one or two
// Philox blocks.
__device__ inline void group_random_bits(const SrKey& key, uint64_t first, uint32_t r[4]) {
  const Philox4x32 b0 = random_block(key.seed, key.stream, first >> 2);
  const unsigned phase = static_cast<unsigned>(first & 3);
  if (phase == 0) {
    for (int k = 0; k < 4; ++k) r[k] = b0.v[k];
    return;
  }
  const Philox4x32 b1 = random_block(key.seed, key.stream, (first >> 2) + 1);
  for (unsigned k = 0; k < 4; ++k) r[k] = phase + k < 4 ? b0.v[phase + k] : b1.v[phase + k - 4];
}

__device__ inline bool aligned(const void* p, unsigned bytes) {
  return (reinterpret_cast<uintptr_t>(p) & (bytes - 1)) == 0;
}

// in is (rows, cols) floats; codes is (rows, cols) of Code (encode) or out is (rows, cols)
// floats (fake_cast), each addressed through its view.
template <Op kOp, class Code, Rounding kRound>
__device__ __forceinline__ void cast_body(const float* __restrict__ in, Addressing ain, Code* __restrict__ codes,
                                          float* __restrict__ out, Addressing aout, const ElementFormat& f,
                                          Overflow overflow, const SrKey& key) {
  const size_t n = ain.rows * ain.cols;
  const size_t groups = (n + 3) / 4;
  const bool vec_in = ain.contiguous && aligned(in, 16);
  const bool vec_out = aout.contiguous &&
                       (kOp == Op::encode ? aligned(codes, 4 * sizeof(Code)) : aligned(out, 16));
  for (size_t g = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; g < groups;
       g += static_cast<size_t>(gridDim.x) * blockDim.x) {
    const size_t i0 = 4 * g;
    const bool full = i0 + 4 <= n;
    float x[4] = {0.f, 0.f, 0.f, 0.f};
    if (full && vec_in) {
      const float4 v = *reinterpret_cast<const float4*>(in + i0);
      x[0] = v.x; x[1] = v.y; x[2] = v.z; x[3] = v.w;
    } else {
      for (int k = 0; k < 4; ++k) if (i0 + k < n) x[k] = in[ain.at(i0 + k)];
    }
    uint32_t r[4] = {0u, 0u, 0u, 0u};
    if constexpr (is_stochastic(kRound)) group_random_bits(key, key.index_offset + i0, r);
    uint32_t c[4];
    for (int k = 0; k < 4; ++k) c[k] = lpx::encode(x[k], f, kRound, overflow, r[k], key.sr_bits);
    if constexpr (kOp == Op::encode) {
      if (full && vec_out) {
        if constexpr (sizeof(Code) == 1) {
          *reinterpret_cast<uint32_t*>(codes + i0) = c[0] | (c[1] << 8) | (c[2] << 16) | (c[3] << 24);
        } else {
          *reinterpret_cast<uint2*>(codes + i0) = make_uint2(c[0] | (c[1] << 16), c[2] | (c[3] << 16));
        }
      } else {
        for (int k = 0; k < 4; ++k) if (i0 + k < n) codes[aout.at(i0 + k)] = static_cast<Code>(c[k]);
      }
    } else {
      float y[4];
      for (int k = 0; k < 4; ++k) y[k] = lpx::decode(c[k], f);
      if (full && vec_out) {
        *reinterpret_cast<float4*>(out + i0) = make_float4(y[0], y[1], y[2], y[3]);
      } else {
        for (int k = 0; k < 4; ++k) if (i0 + k < n) out[aout.at(i0 + k)] = y[k];
      }
    }
  }
}

// codes is (rows, cols) of Code; out is (rows, cols) floats.
template <Op kOp, class Code, Rounding kRound, int kFixed>
__global__ void cast_kernel(const float* __restrict__ in, Addressing ain, Code* __restrict__ codes,
                            float* __restrict__ out, Addressing aout, ElementFormat f_arg,
                            Overflow overflow, SrKey key) {
  if constexpr (kFixed != kGenericFormat) {
    constexpr ElementFormat f = fixed_format(kFixed);
    cast_body<kOp, Code, kRound>(in, ain, codes, out, aout, f, overflow, key);
  } else {
    cast_body<kOp, Code, kRound>(in, ain, codes, out, aout, f_arg, overflow, key);
  }
}

template <class Code>
__device__ __forceinline__ void decode_body(const Code* __restrict__ codes, Addressing ain, float* __restrict__ out,
                                            Addressing aout, const ElementFormat& f) {
  const size_t n = ain.rows * ain.cols;
  const size_t groups = (n + 3) / 4;
  const bool vec = ain.contiguous && aout.contiguous && aligned(codes, 4 * sizeof(Code)) &&
                   aligned(out, 16);
  for (size_t g = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; g < groups;
       g += static_cast<size_t>(gridDim.x) * blockDim.x) {
    const size_t i0 = 4 * g;
    if (i0 + 4 <= n && vec) {
      uint32_t c[4];
      if constexpr (sizeof(Code) == 1) {
        const uint32_t w = *reinterpret_cast<const uint32_t*>(codes + i0);
        for (int k = 0; k < 4; ++k) c[k] = (w >> (8 * k)) & 0xffu;
      } else {
        const uint2 w = *reinterpret_cast<const uint2*>(codes + i0);
        c[0] = w.x & 0xffffu; c[1] = w.x >> 16; c[2] = w.y & 0xffffu; c[3] = w.y >> 16;
      }
      *reinterpret_cast<float4*>(out + i0) =
          make_float4(lpx::decode(c[0], f), lpx::decode(c[1], f), lpx::decode(c[2], f), lpx::decode(c[3], f));
    } else {
      for (int k = 0; k < 4; ++k)
        if (i0 + k < n) out[aout.at(i0 + k)] = lpx::decode(codes[ain.at(i0 + k)], f);
    }
  }
}

template <class Code>
__global__ void decode_kernel(const Code* __restrict__ codes, Addressing ain, float* __restrict__ out,
                              Addressing aout, ElementFormat f_arg, int fixed) {
  // one kernel per code width; the fixed formats' branches each see constant fields
  if constexpr (sizeof(Code) == 1) {
    switch (fixed) {
      case 0: { constexpr ElementFormat f = fixed_format(0); return decode_body(codes, ain, out, aout, f); }
      case 1: { constexpr ElementFormat f = fixed_format(1); return decode_body(codes, ain, out, aout, f); }
      case 2: { constexpr ElementFormat f = fixed_format(2); return decode_body(codes, ain, out, aout, f); }
      case 3: { constexpr ElementFormat f = fixed_format(3); return decode_body(codes, ain, out, aout, f); }
      case 4: { constexpr ElementFormat f = fixed_format(4); return decode_body(codes, ain, out, aout, f); }
      default: break;
    }
  } else if (fixed == 5) {
    constexpr ElementFormat f = fixed_format(5);
    return decode_body(codes, ain, out, aout, f);
  }
  decode_body(codes, ain, out, aout, f_arg);
}

template <Op kOp, class Code, Rounding kRound, int kFixed>
void launch_fixed(const DeviceTensor& in, Code* codes, float* out, const DeviceTensor& dst,
                  const ElementFormat& f, const CastOptions& opt, cudaStream_t s) {
  const SrKey key{opt.seed, opt.stream, opt.index_offset, opt.sr_bits};
  const size_t n = static_cast<size_t>(in.numel());
  cast_kernel<kOp, Code, kRound, kFixed><<<cuda::grid_for((n + 3) / 4, kThreads), kThreads, 0, s>>>(
      static_cast<const float*>(in.data), cuda::addressing(in), codes, out, cuda::addressing(dst),
      f, opt.overflow, key);
}

// RNE and SR (the recipes' casts) take the fixed-format kernels where the codes fit them
// (8-bit codes for FP8/FP6/FP4, 16-bit for BF16; fake_cast stores no codes); other modes
// and formats take the generic one.
template <Op kOp, class Code, Rounding kRound>
void launch_one(const DeviceTensor& in, Code* codes, float* out, const DeviceTensor& dst,
                const ElementFormat& f, const CastOptions& opt, cudaStream_t s) {
  if constexpr (kRound == Rounding::rne || kRound == Rounding::sr) {
    const int i = fixed_format_index(f);
    const bool fits = kOp == Op::fake_cast || (sizeof(Code) == 1) == (i != 5);
    if (fits) switch (i) {
        case 0: return launch_fixed<kOp, Code, kRound, 0>(in, codes, out, dst, f, opt, s);
        case 1: return launch_fixed<kOp, Code, kRound, 1>(in, codes, out, dst, f, opt, s);
        case 2: return launch_fixed<kOp, Code, kRound, 2>(in, codes, out, dst, f, opt, s);
        case 3: return launch_fixed<kOp, Code, kRound, 3>(in, codes, out, dst, f, opt, s);
        case 4: return launch_fixed<kOp, Code, kRound, 4>(in, codes, out, dst, f, opt, s);
        case 5: return launch_fixed<kOp, Code, kRound, 5>(in, codes, out, dst, f, opt, s);
        default: break;
      }
  }
  launch_fixed<kOp, Code, kRound, kGenericFormat>(in, codes, out, dst, f, opt, s);
}

// The one dispatch point of the cast family: code width x rounding mode.
template <Op kOp, class Code>
void launch_rounding(const DeviceTensor& in, Code* codes, float* out, const DeviceTensor& dst,
                     const ElementFormat& f, const CastOptions& opt, cudaStream_t s) {
  switch (opt.round) {
    case Rounding::rne: return launch_one<kOp, Code, Rounding::rne>(in, codes, out, dst, f, opt, s);
    case Rounding::rna: return launch_one<kOp, Code, Rounding::rna>(in, codes, out, dst, f, opt, s);
    case Rounding::rtz: return launch_one<kOp, Code, Rounding::rtz>(in, codes, out, dst, f, opt, s);
    case Rounding::rup: return launch_one<kOp, Code, Rounding::rup>(in, codes, out, dst, f, opt, s);
    case Rounding::rdn: return launch_one<kOp, Code, Rounding::rdn>(in, codes, out, dst, f, opt, s);
    case Rounding::sr: return launch_one<kOp, Code, Rounding::sr>(in, codes, out, dst, f, opt, s);
    case Rounding::rto: return launch_one<kOp, Code, Rounding::rto>(in, codes, out, dst, f, opt, s);
    case Rounding::sr_fast:
      return launch_one<kOp, Code, Rounding::sr_fast>(in, codes, out, dst, f, opt, s);
    case Rounding::sr_rne:
      return launch_one<kOp, Code, Rounding::sr_rne>(in, codes, out, dst, f, opt, s);
    case Rounding::sr_odd:
      return launch_one<kOp, Code, Rounding::sr_odd>(in, codes, out, dst, f, opt, s);
  }
  throw std::invalid_argument("lpx::kernels: unknown rounding mode");
}

}  // namespace

void encode(const DeviceTensor& in, const DeviceTensor& out, const CastOptions& opt, void* stream) {
  const auto s = static_cast<cudaStream_t>(stream);
  if (out.storage == Storage::code8)
    launch_rounding<Op::encode, uint8_t>(in, static_cast<uint8_t*>(out.data), nullptr, out,
                                         out.element, opt, s);
  else
    launch_rounding<Op::encode, uint16_t>(in, static_cast<uint16_t*>(out.data), nullptr, out,
                                          out.element, opt, s);
  cuda::check(cudaGetLastError(), "cast kernel launch");
}

void fake_cast(const DeviceTensor& in, const DeviceTensor& out, const CastOptions& opt,
               void* stream) {
  launch_rounding<Op::fake_cast, uint8_t>(in, nullptr, static_cast<float*>(out.data), out,
                                          out.element, opt, static_cast<cudaStream_t>(stream));
  cuda::check(cudaGetLastError(), "cast kernel launch");
}

void decode(const DeviceTensor& in, const DeviceTensor& out, void* stream) {
  const auto s = static_cast<cudaStream_t>(stream);
  const size_t n = static_cast<size_t>(in.numel());
  const unsigned grid = cuda::grid_for((n + 3) / 4, kThreads);
  auto* dst = static_cast<float*>(out.data);
  if (in.storage == Storage::code8)
    decode_kernel<uint8_t><<<grid, kThreads, 0, s>>>(static_cast<const uint8_t*>(in.data),
                                                     cuda::addressing(in), dst,
                                                     cuda::addressing(out), in.element,
                                                     fixed_format_index(in.element));
  else
    decode_kernel<uint16_t><<<grid, kThreads, 0, s>>>(static_cast<const uint16_t*>(in.data),
                                                      cuda::addressing(in), dst,
                                                      cuda::addressing(out), in.element,
                                                      fixed_format_index(in.element));
  cuda::check(cudaGetLastError(), "decode kernel launch");
}

}  // namespace lpx::kernels::module
