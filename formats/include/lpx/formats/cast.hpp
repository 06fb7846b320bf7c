// Element casts over arrays: the executions of the scalar codec (codec.hpp) over many
// elements. Each call is bit-identical to calling encode()/decode() per element with
// random_bits(seed, stream, index_offset + i), whatever the thread count or SIMD target.
#pragma once

#include <cstdint>
#include <span>

#include "lpx/formats/element_format.hpp"
#include "lpx/numerics/rounding.hpp"

namespace lpx {

struct CastOptions {
  Rounding round = Rounding::rne;
  Overflow overflow = Overflow::ieee;  // element casts default to ieee, as ml_dtypes does
  uint64_t seed = 0;
  uint32_t stream = 0;
  int sr_bits = kMaxSrBits;
  uint64_t index_offset = 0;  // flat index of in[0] in the whole tensor (SR keying)
  int threads = 0;            // 0: OpenMP's default
};

// Codes are right-aligned, one per byte for formats of up to 8 bits, one per uint16
// for 9- to 16-bit formats. Sizes of `in` and `out` must match (std::invalid_argument).
void encode_array(std::span<const float> in, std::span<uint8_t> out, const ElementFormat& f,
                  const CastOptions& opt);
void encode_array(std::span<const float> in, std::span<uint16_t> out, const ElementFormat& f,
                  const CastOptions& opt);
void decode_array(std::span<const uint8_t> in, std::span<float> out, const ElementFormat& f,
                  int threads = 0);
void decode_array(std::span<const uint16_t> in, std::span<float> out, const ElementFormat& f,
                  int threads = 0);
// decode(encode(x)) without materialising codes.
void fake_cast_array(std::span<const float> in, std::span<float> out, const ElementFormat& f,
                     const CastOptions& opt);

}  // namespace lpx
