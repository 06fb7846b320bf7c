// Internal interface between the array-cast dispatch point (cast.cpp: argument checks,
// OpenMP chunking) and the Highway kernels (cast_hwy.cpp, compiled once per SIMD target
// and chosen at run time). Each kernel handles one contiguous chunk, starting at flat
// element index `first_index` (the SR counter), and is bit-identical to the scalar codec.
#pragma once

#include <cstddef>
#include <cstdint>

#include "lpx/formats/cast.hpp"
#include "lpx/formats/element_format.hpp"

namespace lpx::simd {

// float32 -> codes (one per byte or per uint16), and decode(encode(x)) in place of codes.
// stream: write the output with non-temporal stores (for arrays far larger than the
// caches: no read-for-ownership of output lines that would be evicted anyway).
void encode_u8(const float* in, uint8_t* out, size_t n, uint64_t first_index,
               const ElementFormat& f, const CastOptions& opt, bool stream = false);
void encode_u16(const float* in, uint16_t* out, size_t n, uint64_t first_index,
                const ElementFormat& f, const CastOptions& opt, bool stream = false);
void fake_cast(const float* in, float* out, size_t n, uint64_t first_index,
               const ElementFormat& f, const CastOptions& opt, bool stream = false);
void decode_u8(const uint8_t* in, float* out, size_t n, const ElementFormat& f);
void decode_u16(const uint16_t* in, float* out, size_t n, const ElementFormat& f);
// The HWY_* bit of the target the calls above use now.
int64_t dispatched_target_id();

}  // namespace lpx::simd
