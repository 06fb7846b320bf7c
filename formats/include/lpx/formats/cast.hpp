// Element casts over arrays: the executions of the scalar codec (codec.hpp) over many
// elements. Each call is bit-identical to calling encode()/decode() per element with
// random_bits(seed, stream, index_offset + i), whatever the thread count or SIMD target.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

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
  // Caller-given random words (docs/formats.md#caller-given-random-bits): when set, the
  // stochastic modes take random_words[index_offset + i] for in[i] instead of Philox's
  // word; random_words_count must cover index_offset + in.size() (std::invalid_argument),
  // and a non-stochastic mode with words is refused. The scalar codec runs them.
  const uint32_t* random_words = nullptr;
  uint64_t random_words_count = 0;
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

// Test hooks for the SIMD paths (Highway runtime dispatch). A target is Highway's HWY_*
// bit, kept as a plain integer so this header does not depend on Highway.
namespace cast_testing {
struct SimdTarget {
  int64_t id;
  std::string name;  // "AVX3", "AVX2", "SSE4", "SSSE3", "EMU128", ...
};
// The targets compiled into lpx that this CPU supports, best first.
std::vector<SimdTarget> simd_targets();
// Restricts dispatch to `target` (one id from simd_targets()); 0 restores the default.
void force_simd_target(int64_t target);
// The target the array casts dispatch to now.
std::string dispatched_simd_target();
}  // namespace cast_testing

}  // namespace lpx
