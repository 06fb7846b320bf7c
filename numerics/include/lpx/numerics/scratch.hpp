// A grow-only buffer for per-call work arrays that every caller overwrites in full before
// reading: a std::vector resized from a smaller to a larger size zero-fills the new part
// first, and in a training step where one buffer serves operands of several shapes
// (X, then dY) that zero-fill was 1-2% of the step (docs/architecture.md#scratch-buffers).
#pragma once

#include <cstddef>
#include <memory>

namespace lpx {

template <class T>
class ScratchBuffer {
 public:
  ScratchBuffer() = default;
  // A copy starts empty: the contents are work space, not state.
  ScratchBuffer(const ScratchBuffer&) {}
  ScratchBuffer& operator=(const ScratchBuffer&) { return *this; }
  ScratchBuffer(ScratchBuffer&&) noexcept = default;
  ScratchBuffer& operator=(ScratchBuffer&&) noexcept = default;

  // At least n elements, uninitialized when the buffer grows; earlier contents are not
  // kept across a growth.
  T* get(size_t n) {
    if (n > capacity_) {
      data_ = std::make_unique_for_overwrite<T[]>(n);
      capacity_ = n;
    }
    return data_.get();
  }

 private:
  std::unique_ptr<T[]> data_;
  size_t capacity_ = 0;
};

}  // namespace lpx
