// The CUDA backend of the recipe quantizers (device.hpp).
#include "lpx/sim/device.hpp"

#include <atomic>
#include <cstring>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <vector>

#include <fmt/format.h>

#include "device_backend.hpp"
#include "enum_names.hpp"
#include "lpx/formats/cast.hpp"
#include "lpx/formats/quantize.hpp"
#include "lpx/kernels/cast.hpp"
#include "lpx/kernels/device.hpp"
#include "lpx/kernels/gemm.hpp"
#include "lpx/kernels/hadamard.hpp"
#include "lpx/kernels/memory.hpp"
#include "lpx/kernels/quantize.hpp"
#include "lpx/kernels/tensor.hpp"
#include "lpx/numerics/hadamard.hpp"

namespace lpx::sim {

namespace {
std::atomic<int64_t> g_device_calls{0}, g_fallbacks{0};
}

constexpr EnumNames<Device, 3> kDeviceNames{{"cpu", "gpu", "emulated"}};

std::string_view device_name(Device d) { return kDeviceNames(d); }

Device device_by_name(std::string_view name) {
  if (const auto d = kDeviceNames.find(name)) return *d;
  throw std::invalid_argument(fmt::format("device '{}' is not cpu or gpu", name));
}

void require_device(Device d) {
  if (d == Device::gpu && !kernels::cuda_available())
    throw std::runtime_error(fmt::format("no CUDA device: {}", kernels::device_description()));
}

DeviceCounts device_counts() { return DeviceCounts{g_device_calls.load(), g_fallbacks.load()}; }

namespace {

using kernels::DeviceTensor;

// What the backend runs on: a buffer type for its workspace, the two copies, and the three
// kernels on views of that workspace. CudaKernels is the CUDA module (device memory);
// EmulatedKernels (Device::emulated) keeps its "device" memory on the host and runs CPU
// stand-ins with the same contracts, so that the backend's own code (the workspace, the
// views, the copies, the fallbacks) runs in CPU-only CI.
struct CudaKernels {
  using Buffer = kernels::DeviceBuffer;
  static void to_device(void* dst, const void* src, size_t bytes) { kernels::copy_to_device(dst, src, bytes); }
  static void to_host(void* dst, const void* src, size_t bytes) { kernels::copy_to_host(dst, src, bytes); }
  static void hadamard(const DeviceTensor& t, int axis, int n, const float* signs) {
    kernels::hadamard_device(t, t, axis, n, signs, 0, 0);
  }
  static void fake_quantize(const DeviceTensor& x, const DeviceTensor& out, const BlockFormat&,
                            const QuantizeOptions& opt, uint32_t* amax_word) {
    kernels::fake_quantize_device(x, out, opt, nullptr, amax_word);
  }
  static void fake_cast(const DeviceTensor& in, const DeviceTensor& out, const CastOptions& opt) {
    kernels::fake_cast_device(in, out, opt);
  }
  static void gemm(Trans ta, Trans tb, const float* a, const float* b, float* c, int64_t m, int64_t n,
                   int64_t k, const Accumulation& acc, bool accumulate, GemmOrder order) {
    const LimitedSum sum{acc.is_fp32() ? 23 : acc.mantissa_bits, acc.promote_every};
    kernels::gemm_f32_device(ta == Trans::t, tb == Trans::t, a, b, c, m, n, k, sum, accumulate, order);
  }
};

struct EmulatedKernels {
  // Grow-only host memory with DeviceBuffer's interface.
  class Buffer {
   public:
    void reserve(size_t bytes) {
      if (bytes <= bytes_) return;
      data_ = std::make_unique<float[]>((bytes + sizeof(float) - 1) / sizeof(float));
      bytes_ = bytes;
    }
    template <class T = void>
    T* get() const { return reinterpret_cast<T*>(data_.get()); }

   private:
    std::unique_ptr<float[]> data_;
    size_t bytes_ = 0;
  };
  static void to_device(void* dst, const void* src, size_t bytes) { std::memcpy(dst, src, bytes); }
  static void to_host(void* dst, const void* src, size_t bytes) { std::memcpy(dst, src, bytes); }
  static std::span<float> span_of(const DeviceTensor& t) {
    return {static_cast<float*>(t.data), static_cast<size_t>(t.numel())};
  }
  static void hadamard(const DeviceTensor& t, int axis, int n, const float* signs) {
    hadamard_blocks(static_cast<float*>(t.data), t.rows, t.cols, axis, n,
                    std::span<const float>(signs, static_cast<size_t>(n)));
  }
  static void fake_quantize(const DeviceTensor& x, const DeviceTensor& out, const BlockFormat& f,
                            const QuantizeOptions& opt, uint32_t*) {
    const int64_t shape[2] = {x.rows, x.cols};
    fake_quantize_values(TensorView<const float>{span_of(x), std::span<const int64_t>(shape, 2)},
                         span_of(out), f, opt);
  }
  static void fake_cast(const DeviceTensor& in, const DeviceTensor& out, const CastOptions& opt) {
    fake_cast_array(span_of(in), span_of(out), out.element, opt);
  }
  static void gemm(Trans ta, Trans tb, const float* a, const float* b, float* c, int64_t m, int64_t n,
                   int64_t k, const Accumulation& acc, bool accumulate, GemmOrder order) {
    sim::gemm(ta, tb, a, b, c, m, n, k, acc, accumulate, order);
  }
};

// The OperandBackend and GemmBackend of Device::gpu (K = CudaKernels) and
// Device::emulated. Each call copies the operand's values up into a grow-only workspace,
// runs one kernel on views of it and copies the values back; nothing else crosses (no
// codes, no scales: the fused fake_quantize writes the dequantized values directly).
// Workspace, per quantizer call of `count` elements: [0, count) the input (the Hadamard
// transform runs in place there), [count, 2 count) the output, then kMaxHadamardRow signs
// and the two-level amax word; per GEMM: a, b, c one after the other. It grows to the
// largest call and is never freed before the backend; a mutex serializes the calls (the
// quantizer may run roles concurrently).
template <class K>
class DeviceOperandBackend final : public OperandBackend, public GemmBackend {
 public:
  void gemm(Trans ta, Trans tb, const float* a, const float* b, float* c, int64_t m, int64_t n,
            int64_t k, const Accumulation& acc, bool accumulate, GemmOrder order) override {
    if (m <= 0 || n <= 0) return;
    ++g_device_calls;
    const auto sa = static_cast<size_t>(m * k), sb = static_cast<size_t>(k * n), sc = static_cast<size_t>(m * n);
    const std::lock_guard<std::mutex> lock(mutex_);
    float* d = grow(sa + sb + sc);
    K::to_device(d, a, sa * sizeof(float));
    K::to_device(d + sa, b, sb * sizeof(float));
    if (accumulate) K::to_device(d + sa + sb, c, sc * sizeof(float));
    K::gemm(ta, tb, d, d + sa, d + sa + sb, m, n, k, acc, accumulate, order);
    K::to_host(c, d + sa + sb, sc * sizeof(float));
  }

  void hadamard(float* data, int64_t rows, int64_t cols, int axis, int n,
                std::span<const float> signs) override {
    const auto count = static_cast<size_t>(rows * cols);
    if (count == 0) return;
    ++g_device_calls;
    std::vector<float> ones;
    if (signs.empty()) {  // hadamard_blocks' "all +1" (the kernel's null is Philox signs)
      ones.assign(static_cast<size_t>(n), 1.0f);
      signs = ones;
    }
    if (signs.size() != static_cast<size_t>(n) || n > kMaxHadamardRow)
      throw std::invalid_argument(fmt::format("hadamard: {} signs for size {}", signs.size(), n));
    const std::lock_guard<std::mutex> lock(mutex_);
    float* d = reserve(count);
    K::to_device(d, data, count * sizeof(float));
    K::to_device(signs_slot(count), signs.data(), signs.size() * sizeof(float));
    K::hadamard(DeviceTensor::values(d, rows, cols), axis, n, signs_slot(count));
    K::to_host(data, d, count * sizeof(float));
  }

  QuantizedTensor fake_quantize(TensorView<const float> v, std::span<float> out, const BlockFormat& f,
                                const QuantizeOptions& opt) override {
    const bool device_format =
        (f.block.kind == BlockShape::Kind::vector || f.block.kind == BlockShape::Kind::tile ||
         f.block.kind == BlockShape::Kind::tensor) &&
        opt.history == nullptr && !opt.whole_tensor_amax && (v.shape.size() == 1 || v.shape.size() == 2);
    if (!device_format) {
      ++g_fallbacks;
      return fake_quantize_values(v, out, f, opt);
    }
    ++g_device_calls;
    const int64_t rows = v.shape.size() == 2 ? v.shape[0] : 1, cols = v.shape.back();
    DeviceTensor y = DeviceTensor::values(static_cast<float*>(nullptr), rows, cols).with_format(f.element);
    y.scales = kernels::block_scales(f, v.shape.size(), "fake_quantize");  // checks f
    y.scales.headroom_3_4 = opt.headroom_3_4;
    // What the quantizer reads back: shape, format, no scales; amax 0 (delayed scaling,
    // which needs it, runs on the CPU) and the two statistics the device does not count.
    QuantizedTensor q;
    q.shape.assign(v.shape.begin(), v.shape.end());
    q.format = f;
    if (f.block.kind == BlockShape::Kind::vector && f.block.axis < 0)
      q.format.block.axis = f.block.axis + static_cast<int>(v.shape.size());
    q.scale_shape = scale_grid_shape(v.shape, f);
    q.headroom_3_4 = opt.headroom_3_4;
    q.stats.saturated = -1;
    q.stats.clamped_scales = -1;
    const size_t count = v.data.size();
    if (count != out.size() || count != static_cast<size_t>(rows * cols))
      throw std::invalid_argument(fmt::format("fake_quantize: {} values, {} outputs, shape {} x {}",
                                              count, out.size(), rows, cols));
    if (count == 0) return q;
    const std::lock_guard<std::mutex> lock(mutex_);
    float* d = reserve(count);
    K::to_device(d, v.data.data(), count * sizeof(float));
    y.data = d + count;
    K::fake_quantize(DeviceTensor::values(d, rows, cols), y, f, opt, amax_slot(count));
    K::to_host(out.data(), d + count, count * sizeof(float));
    return q;
  }

  void fake_cast(std::span<const float> in, std::span<float> out, const ElementFormat& f,
                 const CastOptions& opt) override {
    ++g_device_calls;
    const size_t count = in.size();
    if (count != out.size())
      throw std::invalid_argument(fmt::format("fake_cast: {} values, {} outputs", count, out.size()));
    if (count == 0) return;
    const std::lock_guard<std::mutex> lock(mutex_);
    float* d = reserve(count);
    K::to_device(d, in.data(), count * sizeof(float));
    const auto n = static_cast<int64_t>(count);
    K::fake_cast(DeviceTensor::values(d, 1, n), DeviceTensor::values(d + count, 1, n).with_format(f), opt);
    K::to_host(out.data(), d + count, count * sizeof(float));
  }

  void count_cpu_fallback() override { ++g_fallbacks; }

 private:
  static constexpr size_t kGrain = size_t{1} << 20;  // grow in whole MiB

  // The workspace for a quantizer call of `count` elements (layout above).
  float* reserve(size_t count) { return grow(2 * count + kMaxHadamardRow + 1); }
  // At least `floats` floats of workspace, grown when needed.
  float* grow(size_t floats) {
    const size_t bytes = floats * sizeof(float);
    workspace_.reserve((bytes + kGrain - 1) / kGrain * kGrain);
    return workspace_.template get<float>();
  }
  float* signs_slot(size_t count) { return workspace_.template get<float>() + 2 * count; }
  uint32_t* amax_slot(size_t count) {
    return reinterpret_cast<uint32_t*>(workspace_.template get<float>() + 2 * count + kMaxHadamardRow);
  }

  std::mutex mutex_;
  typename K::Buffer workspace_;
};

}  // namespace

namespace {
template <class K>
DeviceBackends both_of() {
  auto b = std::make_shared<DeviceOperandBackend<K>>();
  return DeviceBackends{b, b};
}
}  // namespace

DeviceBackends make_device_backends(Device d) {
  require_device(d);
  switch (d) {
    case Device::cpu: return {};
    case Device::gpu: return both_of<CudaKernels>();
    case Device::emulated: return both_of<EmulatedKernels>();
  }
  return {};
}

}  // namespace lpx::sim
