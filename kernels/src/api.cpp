// The host API of the cast and Hadamard kernels: argument checks, then the CUDA module's
// launchers (backend.hpp) on views; the host-to-host forms copy through device buffers.
// Compiled in every build, so every check runs before any CUDA call and is unit-tested
// on machines without a GPU.
#include <stdexcept>
#include <string>

#include "backend.hpp"
#include "lpx/kernels/cast.hpp"
#include "lpx/kernels/hadamard.hpp"
#include "lpx/kernels/memory.hpp"

namespace lpx::kernels {

namespace detail {

void check_format(const ElementFormat& f) {
  if (f.bits < 1 || f.bits > 16)
    throw std::invalid_argument("lpx::kernels: unsupported format '" + std::string(f.name_view()) +
                                "': " + std::to_string(f.bits) + " bits (1 to 16 supported)");
  if (f.code_mask != (1u << f.bits) - 1 || (f.max_magnitude == 0 && f.nan_code == 0))
    throw std::invalid_argument("lpx::kernels: format descriptor '" + std::string(f.name_view()) +
                                "' was not finalized (use format_by_name or make_*_format)");
}

void check_options(const CastOptions& opt) {
  if (opt.sr_bits < 1 || opt.sr_bits > kMaxSrBits)
    throw std::invalid_argument("lpx::kernels: sr_bits must be in [1, 32], got " +
                                std::to_string(opt.sr_bits));
  if (opt.random_words != nullptr)
    throw std::invalid_argument("lpx::kernels: caller-given random words are CPU-only");
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

namespace {

// (1, n) views of flat device arrays.
DeviceTensor flat_values(const float* p, size_t n) {
  return DeviceTensor::values(p, 1, static_cast<int64_t>(n));
}
DeviceTensor flat_codes(const void* p, size_t n, const ElementFormat& f) {
  return DeviceTensor::codes(p, 1, static_cast<int64_t>(n), f);
}

void check_cast_views(const DeviceTensor& in, const DeviceTensor& out, bool codes_in,
                      bool codes_out, const char* what) {
  check_view(in, what);
  check_view(out, what);
  check_same_shape(in, out, what);
  const auto check_side = [what](const DeviceTensor& t, bool codes, const char* side) {
    if (!codes) return check_storage(t, Storage::f32, what);
    if (t.storage != Storage::code8 && t.storage != Storage::code16)
      throw std::invalid_argument(std::string("lpx::kernels: ") + what + ": the " + side +
                                  " must be codes");
  };
  check_side(in, codes_in, "input");
  check_side(out, codes_out, "output");
}

}  // namespace

void encode_device(const DeviceTensor& in, const DeviceTensor& out, const CastOptions& opt,
                   void* stream) {
  check_cast_views(in, out, false, true, "encode_device");
  check_options(opt);
  if (in.numel() > 0) backend::require().encode(in, out, opt, stream);
}

void decode_device(const DeviceTensor& in, const DeviceTensor& out, void* stream) {
  check_cast_views(in, out, true, false, "decode_device");
  if (in.numel() > 0) backend::require().decode(in, out, stream);
}

void fake_cast_device(const DeviceTensor& in, const DeviceTensor& out, const CastOptions& opt,
                      void* stream) {
  check_cast_views(in, out, false, false, "fake_cast_device");
  check_format(out.element);
  check_options(opt);
  if (in.numel() > 0) backend::require().fake_cast(in, out, opt, stream);
}

void encode_device(const float* in, void* codes, size_t n, const ElementFormat& f,
                   const CastOptions& opt, void* stream) {
  check_format(f);
  check_options(opt);
  check_pointer(in, n, "encode_device: input");
  check_pointer(codes, n, "encode_device: codes");
  if (n > 0) backend::require().encode(flat_values(in, n), flat_codes(codes, n, f), opt, stream);
}

void decode_device(const void* codes, float* out, size_t n, const ElementFormat& f, void* stream) {
  check_format(f);
  check_pointer(codes, n, "decode_device: codes");
  check_pointer(out, n, "decode_device: output");
  if (n > 0) backend::require().decode(flat_codes(codes, n, f), flat_values(out, n), stream);
}

void fake_cast_device(const float* in, float* out, size_t n, const ElementFormat& f,
                      const CastOptions& opt, void* stream) {
  check_format(f);
  check_options(opt);
  check_pointer(in, n, "fake_cast_device: input");
  check_pointer(out, n, "fake_cast_device: output");
  if (n > 0)
    backend::require().fake_cast(flat_values(in, n), flat_values(out, n).with_format(f), opt, stream);
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
  if (in.empty()) return;
  const backend::Table& t = backend::require();
  const size_t n = in.size();
  DeviceBuffer d_in(n * sizeof(float)), d_codes(n * sizeof(Code));
  copy_to_device(d_in.get(), in.data(), n * sizeof(float));
  t.encode(flat_values(d_in.get<float>(), n), flat_codes(d_codes.get(), n, f), opt, nullptr);
  copy_to_host(out.data(), d_codes.get(), n * sizeof(Code));
}
template <class Code>
void decode_host_impl(std::span<const Code> in, std::span<float> out, const ElementFormat& f) {
  check_format(f);
  check_code_width(f, sizeof(Code));
  check_sizes(in.size(), out.size(), "decode_host");
  check_pointer(in.data(), in.size(), "decode_host: codes");
  check_pointer(out.data(), out.size(), "decode_host: output");
  if (in.empty()) return;
  const backend::Table& t = backend::require();
  const size_t n = in.size();
  DeviceBuffer d_codes(n * sizeof(Code)), d_out(n * sizeof(float));
  copy_to_device(d_codes.get(), in.data(), n * sizeof(Code));
  t.decode(flat_codes(d_codes.get(), n, f), flat_values(d_out.get<float>(), n), nullptr);
  copy_to_host(out.data(), d_out.get(), n * sizeof(float));
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
  if (in.empty()) return;
  const backend::Table& t = backend::require();
  const size_t n = in.size();
  DeviceBuffer d_in(n * sizeof(float)), d_out(n * sizeof(float));
  copy_to_device(d_in.get(), in.data(), n * sizeof(float));
  t.fake_cast(flat_values(d_in.get<float>(), n), flat_values(d_out.get<float>(), n).with_format(f),
              opt, nullptr);
  copy_to_host(out.data(), d_out.get(), n * sizeof(float));
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

void hadamard_device(const DeviceTensor& in, const DeviceTensor& out, int axis, int n,
                     const float* signs, uint64_t seed, uint32_t stream, void* cuda_stream) {
  check_view(in, "hadamard_device: input");
  check_view(out, "hadamard_device: output");
  check_storage(in, Storage::f32, "hadamard_device: input");
  check_storage(out, Storage::f32, "hadamard_device: output");
  check_same_shape(in, out, "hadamard_device");
  if (axis != 0 && axis != 1)
    throw std::invalid_argument("lpx::kernels: hadamard_device: axis " + std::to_string(axis) +
                                " is not 0 or 1");
  check_hadamard(static_cast<size_t>(axis == 1 ? in.cols : in.rows), n, 0, "hadamard_device");
  if (in.numel() > 0)
    backend::require().hadamard(in, out, axis, n, signs, seed, stream, cuda_stream);
}

void hadamard_device(const float* in, float* out, size_t rows, int n, const float* signs,
                     uint64_t seed, uint32_t stream, void* cuda_stream) {
  check_hadamard(0, n, 0, "hadamard_device");
  const size_t total = rows * static_cast<size_t>(n);
  check_pointer(in, total, "hadamard_device: input");
  check_pointer(out, total, "hadamard_device: output");
  if (rows > 0)
    backend::require().hadamard(DeviceTensor::values(in, static_cast<int64_t>(rows), n),
                                DeviceTensor::values(out, static_cast<int64_t>(rows), n), 1, n,
                                signs, seed, stream, cuda_stream);
}

void hadamard_host(std::span<const float> in, std::span<float> out, int n,
                   std::span<const float> signs, uint64_t seed, uint32_t stream) {
  check_hadamard(in.size(), n, signs.size(), "hadamard_host");
  check_sizes(in.size(), out.size(), "hadamard_host");
  check_pointer(in.data(), in.size(), "hadamard_host: input");
  check_pointer(out.data(), out.size(), "hadamard_host: output");
  if (in.empty()) return;
  const backend::Table& t = backend::require();
  const size_t bytes = in.size() * sizeof(float);
  const auto rows = static_cast<int64_t>(in.size() / static_cast<size_t>(n));
  DeviceBuffer d_data(bytes), d_signs(signs.size() * sizeof(float));
  copy_to_device(d_data.get(), in.data(), bytes);
  copy_to_device(d_signs.get(), signs.data(), signs.size() * sizeof(float));
  const DeviceTensor v = DeviceTensor::values(d_data.get<float>(), rows, n);
  t.hadamard(v, v, 1, n, d_signs.get<float>(), seed, stream, nullptr);
  copy_to_host(out.data(), d_data.get(), bytes);
}

}  // namespace lpx::kernels
