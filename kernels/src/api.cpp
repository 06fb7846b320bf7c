// The host API of the cast and Hadamard kernels: argument checks, then the launchers
// (launch.hpp). Compiled in CUDA and non-CUDA builds alike, so every check runs before
// any CUDA call and is unit-tested on machines without a GPU.
#include <stdexcept>
#include <string>

#include "launch.hpp"
#include "lpx/kernels/cast.hpp"
#include "lpx/kernels/hadamard.hpp"

namespace lpx::kernels {

namespace detail {

void check_format(const ElementFormat& f) {
  if (f.bits < 1 || f.bits > 16)
    throw std::invalid_argument("lpx::kernels: unsupported format '" + std::string(f.name_view()) +
                                "': " + std::to_string(f.bits) + " bits (1 to 16 supported)");
  if (f.code_mask != (1u << f.bits) - 1 || f.max_magnitude == 0)
    throw std::invalid_argument("lpx::kernels: format descriptor '" + std::string(f.name_view()) +
                                "' was not finalized (use format_by_name or make_*_format)");
}

void check_options(const CastOptions& opt) {
  if (opt.sr_bits < 1 || opt.sr_bits > kMaxSrBits)
    throw std::invalid_argument("lpx::kernels: sr_bits must be in [1, 32], got " +
                                std::to_string(opt.sr_bits));
}

void check_pointer(const void* p, size_t n, const char* what) {
  if (p == nullptr && n > 0)
    throw std::invalid_argument(std::string("lpx::kernels: ") + what + " is a null pointer");
}

void check_sizes(size_t a, size_t b, const char* what) {
  if (a != b)
    throw std::invalid_argument(std::string("lpx::kernels: ") + what + ": sizes differ (" +
                                std::to_string(a) + " vs " + std::to_string(b) + ")");
}

void check_code_width(const ElementFormat& f, size_t bytes_per_code) {
  if (code_bytes(f) != bytes_per_code)
    throw std::invalid_argument("lpx::kernels: format '" + std::string(f.name_view()) + "' has " +
                                std::to_string(f.bits) + "-bit codes, stored in " +
                                std::to_string(code_bytes(f)) + " byte(s), not " +
                                std::to_string(bytes_per_code));
}

}  // namespace detail

using namespace detail;

size_t code_bytes(const ElementFormat& f) { return f.bits <= 8 ? 1 : 2; }

void encode_device(const float* in, void* codes, size_t n, const ElementFormat& f,
                   const CastOptions& opt, void* stream) {
  check_format(f);
  check_options(opt);
  check_pointer(in, n, "encode_device: input");
  check_pointer(codes, n, "encode_device: codes");
  if (n > 0) launch::encode(in, codes, n, f, opt, stream);
}

void decode_device(const void* codes, float* out, size_t n, const ElementFormat& f, void* stream) {
  check_format(f);
  check_pointer(codes, n, "decode_device: codes");
  check_pointer(out, n, "decode_device: output");
  if (n > 0) launch::decode(codes, out, n, f, stream);
}

void fake_cast_device(const float* in, float* out, size_t n, const ElementFormat& f,
                      const CastOptions& opt, void* stream) {
  check_format(f);
  check_options(opt);
  check_pointer(in, n, "fake_cast_device: input");
  check_pointer(out, n, "fake_cast_device: output");
  if (n > 0) launch::fake_cast(in, out, n, f, opt, stream);
}

namespace {
template <class Code>
void encode_host_impl(std::span<const float> in, std::span<Code> out, const ElementFormat& f,
                      const CastOptions& opt) {
  check_format(f);
  check_options(opt);
  check_code_width(f, sizeof(Code));
  check_sizes(in.size(), out.size(), "encode_host");
  check_pointer(in.data(), in.size(), "encode_host: input");
  check_pointer(out.data(), out.size(), "encode_host: codes");
  if (!in.empty()) launch::encode_h2h(in.data(), out.data(), in.size(), f, opt);
}
template <class Code>
void decode_host_impl(std::span<const Code> in, std::span<float> out, const ElementFormat& f) {
  check_format(f);
  check_code_width(f, sizeof(Code));
  check_sizes(in.size(), out.size(), "decode_host");
  check_pointer(in.data(), in.size(), "decode_host: codes");
  check_pointer(out.data(), out.size(), "decode_host: output");
  if (!in.empty()) launch::decode_h2h(in.data(), out.data(), in.size(), f);
}
}  // namespace

void encode_host(std::span<const float> in, std::span<uint8_t> out, const ElementFormat& f,
                 const CastOptions& opt) {
  encode_host_impl(in, out, f, opt);
}
void encode_host(std::span<const float> in, std::span<uint16_t> out, const ElementFormat& f,
                 const CastOptions& opt) {
  encode_host_impl(in, out, f, opt);
}
void decode_host(std::span<const uint8_t> in, std::span<float> out, const ElementFormat& f) {
  decode_host_impl(in, out, f);
}
void decode_host(std::span<const uint16_t> in, std::span<float> out, const ElementFormat& f) {
  decode_host_impl(in, out, f);
}
void fake_cast_host(std::span<const float> in, std::span<float> out, const ElementFormat& f,
                    const CastOptions& opt) {
  check_format(f);
  check_options(opt);
  check_sizes(in.size(), out.size(), "fake_cast_host");
  check_pointer(in.data(), in.size(), "fake_cast_host: input");
  check_pointer(out.data(), out.size(), "fake_cast_host: output");
  if (!in.empty()) launch::fake_cast_h2h(in.data(), out.data(), in.size(), f, opt);
}

// --- Hadamard

namespace {
void check_hadamard(size_t total, int n, size_t signs, const char* what) {
  if (!valid_rht_size(n))
    throw std::invalid_argument(std::string("lpx::kernels: ") + what + ": Hadamard size " +
                                std::to_string(n) + " is not one of 16, 32, 64, 128");
  if (total % static_cast<size_t>(n) != 0)
    throw std::invalid_argument(std::string("lpx::kernels: ") + what + ": length " +
                                std::to_string(total) + " is not a multiple of " + std::to_string(n));
  if (signs != 0 && signs != static_cast<size_t>(n))
    throw std::invalid_argument(std::string("lpx::kernels: ") + what + ": " + std::to_string(signs) +
                                " signs for size " + std::to_string(n));
}
}  // namespace

void hadamard_cpu(std::span<const float> in, std::span<float> out, int n,
                  std::span<const float> signs) {
  check_hadamard(in.size(), n, signs.size(), "hadamard_cpu");
  check_sizes(in.size(), out.size(), "hadamard_cpu");
  const size_t rows = in.size() / static_cast<size_t>(n);
  for (size_t r = 0; r < rows; ++r)
    hadamard_row(in.data() + r * static_cast<size_t>(n), out.data() + r * static_cast<size_t>(n), n,
                 signs.empty() ? nullptr : signs.data());
}

void hadamard_device(const float* in, float* out, size_t rows, int n, const float* signs,
                     uint64_t seed, uint32_t stream, void* cuda_stream) {
  check_hadamard(0, n, 0, "hadamard_device");
  const size_t total = rows * static_cast<size_t>(n);
  check_pointer(in, total, "hadamard_device: input");
  check_pointer(out, total, "hadamard_device: output");
  if (rows > 0) launch::hadamard(in, out, rows, n, signs, seed, stream, cuda_stream);
}

void hadamard_host(std::span<const float> in, std::span<float> out, int n,
                   std::span<const float> signs, uint64_t seed, uint32_t stream) {
  check_hadamard(in.size(), n, signs.size(), "hadamard_host");
  check_sizes(in.size(), out.size(), "hadamard_host");
  check_pointer(in.data(), in.size(), "hadamard_host: input");
  check_pointer(out.data(), out.size(), "hadamard_host: output");
  if (!in.empty())
    launch::hadamard_h2h(in.data(), out.data(), in.size() / static_cast<size_t>(n), n,
                         signs.empty() ? nullptr : signs.data(), seed, stream);
}

}  // namespace lpx::kernels
