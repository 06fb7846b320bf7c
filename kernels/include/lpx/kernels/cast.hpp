// Element casts on the device: encode (float32 -> codes), decode (codes -> float32) and
// fake-cast (decode(encode(x))) for every ElementFormat and every rounding mode. The
// kernels call lpx::encode / lpx::decode of formats/codec.hpp themselves (one codec,
// many executions, docs/architecture.md), and stochastic rounding draws
// random_bits(seed, stream, index_offset + i) exactly as the CPU casts (cast.hpp) do, so
// the results equal lpx::encode_array / decode_array / fake_cast_array bit for bit.
//
// Codes are right-aligned, one per byte for formats of up to 8 bits and one per uint16
// for 9- to 16-bit formats (the layout of formats/cast.hpp). `n` counts elements.
//
// Argument errors (null pointers with n > 0, size mismatches, sr_bits outside [1, 32],
// an invalid format descriptor, a code span of the wrong width) throw
// std::invalid_argument before any CUDA call, in CUDA and non-CUDA builds alike. Without
// a device (or without CUDA) a call with valid arguments throws std::runtime_error.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "lpx/formats/cast.hpp"
#include "lpx/formats/element_format.hpp"
#include "lpx/kernels/tensor.hpp"

namespace lpx::kernels {

// Bytes per code on the device and in the host wrappers: 1 (<= 8 bits) or 2.
size_t code_bytes(const ElementFormat& f);

// --- Device pointers. `stream` is a cudaStream_t (nullptr: the default stream); the
// calls are asynchronous with respect to the host. CastOptions::threads is ignored.
void encode_device(const float* in, void* codes, size_t n, const ElementFormat& f,
                   const CastOptions& opt, void* stream = nullptr);
void decode_device(const void* codes, float* out, size_t n, const ElementFormat& f,
                   void* stream = nullptr);
void fake_cast_device(const float* in, float* out, size_t n, const ElementFormat& f,
                      const CastOptions& opt, void* stream = nullptr);

// --- Device tensor views (tensor.hpp): rank 1 or 2, any strides; element i of the
// logical row-major order is keyed random_bits(seed, stream, index_offset + i). in and
// out must have the same shape. Asynchronous on `stream`.
// in float32 -> out codes of out.element (code8 / code16 by its width).
void encode_device(const DeviceTensor& in, const DeviceTensor& out, const CastOptions& opt,
                   void* stream = nullptr);
// in codes of in.element -> out float32.
void decode_device(const DeviceTensor& in, const DeviceTensor& out, void* stream = nullptr);
// in float32 -> out float32 on the grid of out.element.
void fake_cast_device(const DeviceTensor& in, const DeviceTensor& out, const CastOptions& opt,
                      void* stream = nullptr);

// --- Host to host (for validation and tests): copies in, runs the kernel, copies back,
// synchronously. Sizes of `in` and `out` must match.
void encode_host(std::span<const float> in, std::span<uint8_t> out, const ElementFormat& f,
                 const CastOptions& opt);
void encode_host(std::span<const float> in, std::span<uint16_t> out, const ElementFormat& f,
                 const CastOptions& opt);
void decode_host(std::span<const uint8_t> in, std::span<float> out, const ElementFormat& f);
void decode_host(std::span<const uint16_t> in, std::span<float> out, const ElementFormat& f);
void fake_cast_host(std::span<const float> in, std::span<float> out, const ElementFormat& f,
                    const CastOptions& opt);

// The argument checks shared by every entry point above (compiled in every build; the
// tests call the entry points, these are exposed for the other kernel families).
namespace detail {
void check_format(const ElementFormat& f);  // a finalized descriptor of 1..16 bits
void check_options(const CastOptions& opt);  // sr_bits in [1, 32]
void check_pointer(const void* p, size_t n, const char* what);  // non-null when n > 0
void check_sizes(size_t a, size_t b, const char* what);
void check_code_width(const ElementFormat& f, size_t bytes_per_code);
// A view: extents >= 0, data non-null when it has elements, codes of a finalized format of
// the storage's width, block boxes >= 1 (tensor.cpp).
void check_view(const DeviceTensor& t, const char* what);
void check_storage(const DeviceTensor& t, Storage want, const char* what);
void check_same_shape(const DeviceTensor& a, const DeviceTensor& b, const char* what);
}  // namespace detail

}  // namespace lpx::kernels
