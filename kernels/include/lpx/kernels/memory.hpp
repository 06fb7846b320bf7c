// Device memory through the CUDA module (docs/kernels.md): allocation, copies and a
// grow-only buffer, for callers that keep tensors on the device between kernel calls
// (sim's --device gpu backend, the benchmarks, the host-to-host wrappers). Every call
// loads the module on first use and throws std::runtime_error("no CUDA device: ...")
// without a device, or naming the CUDA error.
#pragma once

#include <cstddef>

namespace lpx::kernels {

// Synchronous copies (they return when the bytes have arrived; a copy involving host
// memory also waits for the work queued before it on the default stream).
void copy_to_device(void* device_dst, const void* host_src, size_t bytes);
void copy_to_host(void* host_dst, const void* device_src, size_t bytes);
void copy_on_device(void* device_dst, const void* device_src, size_t bytes, void* stream = nullptr);
void fill_device(void* device_dst, int byte, size_t bytes, void* stream = nullptr);
// Waits for the work queued on `stream` (nullptr: the default stream).
void synchronize(void* stream = nullptr);

// An owning device allocation. reserve() grows it (the contents are not kept) and never
// shrinks it, so a caller that reserves its largest size once allocates once.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(size_t bytes) { reserve(bytes); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer(DeviceBuffer&& o) noexcept : ptr_(o.ptr_), bytes_(o.bytes_) {
    o.ptr_ = nullptr;
    o.bytes_ = 0;
  }
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept;
  ~DeviceBuffer() { reset(); }

  // At least `bytes` bytes; reallocates (discarding the contents) only to grow.
  void reserve(size_t bytes);
  void reset() noexcept;  // frees the allocation
  template <class T = void>
  T* get() const { return static_cast<T*>(ptr_); }
  size_t bytes() const { return bytes_; }

 private:
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

}  // namespace lpx::kernels
