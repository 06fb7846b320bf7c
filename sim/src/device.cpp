// The CUDA backend of the recipe quantizers (device.hpp).
#include "lpx/sim/device.hpp"

#include <algorithm>
#include <atomic>
#include <stdexcept>
#include <vector>

#include <fmt/format.h>

#include "lpx/kernels/cast.hpp"
#include "lpx/kernels/device.hpp"
#include "lpx/kernels/hadamard.hpp"
#include "lpx/formats/cast.hpp"
#include "lpx/formats/quantize.hpp"
#include "lpx/kernels/quantize.hpp"
#include "device_backend.hpp"

namespace lpx::sim {

namespace {
std::atomic<int64_t> g_device_calls{0}, g_fallbacks{0};
}

std::string_view device_name(Device d) {
  switch (d) {
    case Device::cpu: return "cpu";
    case Device::gpu: return "gpu";
    case Device::emulated: return "emulated";
  }
  return "?";
}

Device device_by_name(std::string_view name) {
  if (name == "cpu") return Device::cpu;
  if (name == "gpu") return Device::gpu;
  if (name == "emulated") return Device::emulated;
  throw std::invalid_argument(fmt::format("device '{}' is not cpu or gpu", name));
}

void require_device(Device d) {
  if (d == Device::gpu && !kernels::cuda_available())
    throw std::runtime_error(fmt::format("no CUDA device: {}", kernels::device_description()));
}

DeviceCounts device_counts() { return DeviceCounts{g_device_calls.load(), g_fallbacks.load()}; }

#ifdef LPX_SIM_HAVE_RECIPES
namespace {

// The kernels the device backend calls: the CUDA ones, or (Device::emulated) CPU
// stand-ins with the same contracts, so the backend's own code runs in CPU-only CI.
struct CudaKernels {
  static QuantizedTensor quantize(std::span<const float> x, std::span<const int64_t> shape,
                                  const BlockFormat& f, const QuantizeOptions& opt) {
    return kernels::quantize_host(x, shape, f, opt);
  }
  static void cast(std::span<const float> in, std::span<float> out, const ElementFormat& f, const CastOptions& opt) {
    kernels::fake_cast_host(in, out, f, opt);
  }
  static void hadamard_rows(std::span<const float> in, std::span<float> out, int n, std::span<const float> signs) {
    kernels::hadamard_host(in, out, n, signs, 0, 0);
  }
};
struct EmulatedKernels {
  static QuantizedTensor quantize(std::span<const float> x, std::span<const int64_t> shape,
                                  const BlockFormat& f, const QuantizeOptions& opt) {
    QuantizedTensor q = lpx::quantize(TensorView<const float>{x, shape}, f, opt);
    q.amax = 0;  // quantize_host leaves amax and stats 0
    q.stats = {};
    return q;
  }
  static void cast(std::span<const float> in, std::span<float> out, const ElementFormat& f, const CastOptions& opt) {
    fake_cast_array(in, out, f, opt);
  }
  static void hadamard_rows(std::span<const float> in, std::span<float> out, int n, std::span<const float> signs) {
    kernels::hadamard_cpu(in, out, n, signs);
  }
};

template <class K>
class DeviceOperandBackend final : public OperandBackend {
 public:
  void hadamard(float* data, int64_t rows, int64_t cols, int axis, int n,
                std::span<const float> signs) override {
    const auto count = static_cast<size_t>(rows * cols);
    if (count == 0) return;
    ++g_device_calls;
    std::vector<float> in(count), out(count);
    if (axis == 1) {  // rows of length n along the last axis, as the kernel wants them
      std::copy(data, data + count, in.begin());
      K::hadamard_rows(in, std::span<float>(data, count), n, signs);
      return;
    }
    // along axis 0: transpose to (cols, rows), transform, transpose back
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < cols; ++j) in[static_cast<size_t>(j * rows + i)] = data[i * cols + j];
    K::hadamard_rows(in, out, n, signs);
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < cols; ++j) data[i * cols + j] = out[static_cast<size_t>(j * rows + i)];
  }

  QuantizedTensor fake_quantize(TensorView<const float> v, std::span<float> out, const BlockFormat& f,
                                const QuantizeOptions& opt) override {
    const bool device_format = (f.block.kind == BlockShape::Kind::vector || f.block.kind == BlockShape::Kind::tile) &&
                               opt.history == nullptr && v.shape.size() <= 2;
    if (!device_format) {
      ++g_fallbacks;
      return fake_quantize_values(v, out, f, opt);
    }
    ++g_device_calls;
    QuantizedTensor q = K::quantize(v.data, v.shape, f, opt);
    dequantize(q, out);
    q.stats.saturated = -1;  // the device does not count them
    q.stats.clamped_scales = -1;
    return q;
  }

  void fake_cast(std::span<const float> in, std::span<float> out, const ElementFormat& f,
                 const CastOptions& opt) override {
    ++g_device_calls;
    K::cast(in, out, f, opt);
  }
};

}  // namespace

std::shared_ptr<OperandBackend> make_operand_backend(Device d) {
  require_device(d);
  switch (d) {
    case Device::cpu: return nullptr;
    case Device::gpu: return std::make_shared<DeviceOperandBackend<CudaKernels>>();
    case Device::emulated: return std::make_shared<DeviceOperandBackend<EmulatedKernels>>();
  }
  return nullptr;
}
#endif

}  // namespace lpx::sim
