// Element-cast kernels: encode, decode and fake-cast over flat arrays, calling the LPX_HD
// codec (formats/codec.hpp) per element.
//
// Work split: thread t of the grid-stride loop handles the group of 4 consecutive elements
// [4g, 4g + 4) (one float4 load when aligned). Stochastic rounding needs
// random_bits(seed, stream, index_offset + i); Philox returns 4 words per counter, so a
// group costs one Philox block when index_offset is a multiple of 4 and two otherwise,
// never one per element. The rounding mode is a template parameter (so the codec's switch
// folds away); the code width (uint8/uint16) too. launch_cast is the one dispatch point.
#include <cuda_runtime.h>

#include <cstdint>

#include "cuda_util.cuh"
#include "launch.hpp"
#include "lpx/formats/codec.hpp"
#include "lpx/kernels/device.hpp"
#include "lpx/numerics/philox.hpp"

namespace lpx::kernels {

namespace {

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

// in is (n); codes is (n) of Code (encode) or out is (n) floats (fake_cast).
template <Op kOp, class Code, Rounding kRound>
__global__ void cast_kernel(const float* __restrict__ in, Code* __restrict__ codes,
                            float* __restrict__ out, size_t n, ElementFormat f, Overflow overflow,
                            SrKey key) {
  const size_t groups = (n + 3) / 4;
  const bool vec_in = aligned(in, 16);
  const bool vec_out = kOp == Op::encode ? aligned(codes, 4 * sizeof(Code)) : aligned(out, 16);
  for (size_t g = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; g < groups;
       g += static_cast<size_t>(gridDim.x) * blockDim.x) {
    const size_t i0 = 4 * g;
    const bool full = i0 + 4 <= n;
    float x[4] = {0.f, 0.f, 0.f, 0.f};
    if (full && vec_in) {
      const float4 v = *reinterpret_cast<const float4*>(in + i0);
      x[0] = v.x; x[1] = v.y; x[2] = v.z; x[3] = v.w;
    } else {
      for (int k = 0; k < 4; ++k) if (i0 + k < n) x[k] = in[i0 + k];
    }
    uint32_t r[4] = {0u, 0u, 0u, 0u};
    if constexpr (kRound == Rounding::sr) group_random_bits(key, key.index_offset + i0, r);
    uint32_t c[4];
    for (int k = 0; k < 4; ++k) c[k] = encode(x[k], f, kRound, overflow, r[k], key.sr_bits);
    if constexpr (kOp == Op::encode) {
      if (full && vec_out) {
        if constexpr (sizeof(Code) == 1) {
          *reinterpret_cast<uint32_t*>(codes + i0) = c[0] | (c[1] << 8) | (c[2] << 16) | (c[3] << 24);
        } else {
          *reinterpret_cast<uint2*>(codes + i0) = make_uint2(c[0] | (c[1] << 16), c[2] | (c[3] << 16));
        }
      } else {
        for (int k = 0; k < 4; ++k) if (i0 + k < n) codes[i0 + k] = static_cast<Code>(c[k]);
      }
    } else {
      float y[4];
      for (int k = 0; k < 4; ++k) y[k] = decode(c[k], f);
      if (full && vec_out) {
        *reinterpret_cast<float4*>(out + i0) = make_float4(y[0], y[1], y[2], y[3]);
      } else {
        for (int k = 0; k < 4; ++k) if (i0 + k < n) out[i0 + k] = y[k];
      }
    }
  }
}

// codes is (n) of Code; out is (n) floats.
template <class Code>
__global__ void decode_kernel(const Code* __restrict__ codes, float* __restrict__ out, size_t n,
                              ElementFormat f) {
  const size_t groups = (n + 3) / 4;
  const bool vec = aligned(codes, 4 * sizeof(Code)) && aligned(out, 16);
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
          make_float4(decode(c[0], f), decode(c[1], f), decode(c[2], f), decode(c[3], f));
    } else {
      for (int k = 0; k < 4; ++k) if (i0 + k < n) out[i0 + k] = decode(codes[i0 + k], f);
    }
  }
}

template <Op kOp, class Code, Rounding kRound>
void launch_one(const float* in, Code* codes, float* out, size_t n, const ElementFormat& f,
                const CastOptions& opt, cudaStream_t s) {
  const SrKey key{opt.seed, opt.stream, opt.index_offset, opt.sr_bits};
  cast_kernel<kOp, Code, kRound><<<cuda::grid_for((n + 3) / 4, kThreads), kThreads, 0, s>>>(
      in, codes, out, n, f, opt.overflow, key);
}

// The one dispatch point of the cast family: code width x rounding mode.
template <Op kOp, class Code>
void launch_rounding(const float* in, Code* codes, float* out, size_t n, const ElementFormat& f,
                     const CastOptions& opt, cudaStream_t s) {
  switch (opt.round) {
    case Rounding::rne: return launch_one<kOp, Code, Rounding::rne>(in, codes, out, n, f, opt, s);
    case Rounding::rna: return launch_one<kOp, Code, Rounding::rna>(in, codes, out, n, f, opt, s);
    case Rounding::rtz: return launch_one<kOp, Code, Rounding::rtz>(in, codes, out, n, f, opt, s);
    case Rounding::rup: return launch_one<kOp, Code, Rounding::rup>(in, codes, out, n, f, opt, s);
    case Rounding::rdn: return launch_one<kOp, Code, Rounding::rdn>(in, codes, out, n, f, opt, s);
    case Rounding::sr: return launch_one<kOp, Code, Rounding::sr>(in, codes, out, n, f, opt, s);
  }
  throw std::invalid_argument("lpx::kernels: unknown rounding mode");
}

void launch_cast(Op op, const float* in, void* codes, float* out, size_t n, const ElementFormat& f,
                 const CastOptions& opt, void* stream) {
  const auto s = static_cast<cudaStream_t>(stream);
  if (op == Op::fake_cast)
    launch_rounding<Op::fake_cast, uint8_t>(in, nullptr, out, n, f, opt, s);
  else if (f.bits <= 8)
    launch_rounding<Op::encode, uint8_t>(in, static_cast<uint8_t*>(codes), nullptr, n, f, opt, s);
  else
    launch_rounding<Op::encode, uint16_t>(in, static_cast<uint16_t*>(codes), nullptr, n, f, opt, s);
  cuda::check(cudaGetLastError(), "cast kernel launch");
}

}  // namespace

namespace launch {

void require_device() {
  if (!cuda_available()) throw std::runtime_error("no CUDA device found (" + device_description() + ")");
}

void encode(const float* in, void* codes, size_t n, const ElementFormat& f, const CastOptions& opt,
            void* stream) {
  launch_cast(Op::encode, in, codes, nullptr, n, f, opt, stream);
}

void fake_cast(const float* in, float* out, size_t n, const ElementFormat& f,
               const CastOptions& opt, void* stream) {
  launch_cast(Op::fake_cast, in, nullptr, out, n, f, opt, stream);
}

void decode(const void* codes, float* out, size_t n, const ElementFormat& f, void* stream) {
  const auto s = static_cast<cudaStream_t>(stream);
  const unsigned grid = cuda::grid_for((n + 3) / 4, kThreads);
  if (f.bits <= 8)
    decode_kernel<uint8_t><<<grid, kThreads, 0, s>>>(static_cast<const uint8_t*>(codes), out, n, f);
  else
    decode_kernel<uint16_t><<<grid, kThreads, 0, s>>>(static_cast<const uint16_t*>(codes), out, n, f);
  cuda::check(cudaGetLastError(), "decode kernel launch");
}

void encode_h2h(const float* in, void* codes, size_t n, const ElementFormat& f,
                const CastOptions& opt) {
  require_device();
  const size_t cb = f.bits <= 8 ? 1 : 2;
  cuda::Buffer d_in(n * sizeof(float)), d_codes(n * cb);
  cuda::to_device(d_in.get(), in, n * sizeof(float));
  encode(d_in.get<float>(), d_codes.get(), n, f, opt, nullptr);
  cuda::to_host(codes, d_codes.get(), n * cb);
}

void decode_h2h(const void* codes, float* out, size_t n, const ElementFormat& f) {
  require_device();
  const size_t cb = f.bits <= 8 ? 1 : 2;
  cuda::Buffer d_codes(n * cb), d_out(n * sizeof(float));
  cuda::to_device(d_codes.get(), codes, n * cb);
  decode(d_codes.get(), d_out.get<float>(), n, f, nullptr);
  cuda::to_host(out, d_out.get(), n * sizeof(float));
}

void fake_cast_h2h(const float* in, float* out, size_t n, const ElementFormat& f,
                   const CastOptions& opt) {
  require_device();
  cuda::Buffer d_in(n * sizeof(float)), d_out(n * sizeof(float));
  cuda::to_device(d_in.get(), in, n * sizeof(float));
  fake_cast(d_in.get<float>(), d_out.get<float>(), n, f, opt, nullptr);
  cuda::to_host(out, d_out.get(), n * sizeof(float));
}

}  // namespace launch

}  // namespace lpx::kernels
