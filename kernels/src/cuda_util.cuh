// Internal helpers of the .cu files: error checks, an owning device buffer, launch sizes,
// the addressing of a view inside a kernel.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "lpx/kernels/tensor.hpp"

namespace lpx::kernels::cuda {

// Throws on an error, after clearing it: cudaGetLastError() resets a non-sticky error (out
// of memory, a bad launch configuration), so that the next launch's check does not report
// this one again. A sticky error (a fault inside a kernel) cannot be cleared: the context
// stays unusable until the process exits.
inline void check(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return;
  cudaGetLastError();
  throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(e));
}

// Owning device allocation of `bytes` bytes (freed on scope exit, errors ignored there).
class Buffer {
 public:
  Buffer() = default;
  explicit Buffer(size_t bytes) : bytes_(bytes) {
    if (bytes > 0) check(cudaMalloc(&ptr_, bytes), "cudaMalloc");
  }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  Buffer(Buffer&& o) noexcept : ptr_(o.ptr_), bytes_(o.bytes_) { o.ptr_ = nullptr; o.bytes_ = 0; }
  Buffer& operator=(Buffer&& o) noexcept {
    if (this != &o) { reset(); ptr_ = o.ptr_; bytes_ = o.bytes_; o.ptr_ = nullptr; o.bytes_ = 0; }
    return *this;
  }
  ~Buffer() { reset(); }
  void reset() {
    if (ptr_) cudaFree(ptr_);
    ptr_ = nullptr;
    bytes_ = 0;
  }
  template <class T = void>
  T* get() const { return static_cast<T*>(ptr_); }
  size_t bytes() const { return bytes_; }

 private:
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

inline void to_device(void* dst, const void* src, size_t bytes) {
  check(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice), "cudaMemcpy host to device");
}
inline void to_host(void* dst, const void* src, size_t bytes) {
  check(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy device to host");
}

// Extents and strides of a DeviceTensor, passed to kernels by value: element (r, c) is at
// offset(r, c); at(i) is the element of logical row-major index i.
struct Addressing {
  size_t rows, cols;
  int64_t row_stride, col_stride;
  bool contiguous;
  __host__ __device__ int64_t offset(size_t r, size_t c) const {
    return static_cast<int64_t>(r) * row_stride + static_cast<int64_t>(c) * col_stride;
  }
  __host__ __device__ int64_t at(size_t i) const {
    return contiguous ? static_cast<int64_t>(i) : offset(i / cols, i % cols);
  }
};
inline Addressing addressing(const DeviceTensor& t) {
  return Addressing{static_cast<size_t>(t.rows), static_cast<size_t>(t.cols), t.row_stride,
                    t.col_stride, t.contiguous()};
}

// Blocks of `threads` threads for `work` items, capped for grid-stride loops.
inline unsigned grid_for(size_t work, unsigned threads) {
  const size_t blocks = (work + threads - 1) / threads;
  const size_t cap = size_t{1} << 20;
  return static_cast<unsigned>(blocks == 0 ? 1 : (blocks < cap ? blocks : cap));
}

}  // namespace lpx::kernels::cuda
