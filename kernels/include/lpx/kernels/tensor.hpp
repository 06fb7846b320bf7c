// The device tensor view: what every kernel launcher takes (docs/kernels.md).
//
// A DeviceTensor describes, without owning anything, one tensor of rank 1 or 2 in device
// memory: its pointer, shape and strides, what one element is (float32 values, bfloat16
// bits, or codes of an element format) and, for the codes or values of a block format,
// the block scales (one-byte codes or float32 values, with their block box) and NVFP4's
// per-tensor decode scale. A 1-D tensor is one row. Strides are in elements, so the view
// of a transpose is a view with its extents and strides swapped (transposed()); the
// kernels address element (r, c) at data + r * row_stride + c * col_stride and key
// stochastic rounding by its logical row-major index r * cols + c, whatever the strides.
//
// The struct is plain data (trivially copyable): it crosses the boundary to the CUDA
// module (liblpx_cuda.so) by reference. Views are checked on the host before any CUDA call
// (std::invalid_argument: a null pointer with elements, a negative extent, a storage that
// does not fit the element format, missing scales).
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "lpx/formats/block_format.hpp"
#include "lpx/formats/element_format.hpp"

namespace lpx::kernels {

// What one element of a DeviceTensor is stored as.
enum class Storage : uint8_t {
  f32,     // float32 values
  bf16,    // bfloat16 bits (uint16): the operands of the BF16 GEMM path
  code8,   // one code per byte, right-aligned (element formats of up to 8 bits)
  code16,  // one code per uint16 (9- to 16-bit element formats)
};
size_t storage_bytes(Storage s);  // bytes per element: 4, 2, 1, 2

// The block scales of a quantized tensor (or of the values a fake quantization writes).
// The scale grid is (ceil(rows / block_rows), ceil(cols / block_cols)), row-major and
// contiguous; e8m0 / e4m3 scales live in `codes`, pow2 / fp32 ones (the decode
// multiplier) in `values`. `tensor` is NVFP4's float32 decode scale s_dec (e4m3 scales).
// Pointers a call does not need may be null; a quantize or fake_quantize stores only
// through the pointers that are not null.
struct DeviceScales {
  bool present = false;  // false: no block scaling (plain values or element codes)
  ScaleFormat format = ScaleFormat::e8m0;
  ScaleRule rule = ScaleRule::floor;  // e8m0 / pow2 only (what quantize computes)
  int64_t block_rows = 1, block_cols = 1;
  uint8_t* codes = nullptr;
  float* values = nullptr;
  float* tensor = nullptr;
  bool headroom_3_4 = false;  // QuantizedTensor::headroom_3_4: dequantize divides by 3/4

  int64_t grid_rows(int64_t rows) const { return (rows + block_rows - 1) / block_rows; }
  int64_t grid_cols(int64_t cols) const { return (cols + block_cols - 1) / block_cols; }
};

struct DeviceTensor {
  void* data = nullptr;  // device pointer to element (0, 0)
  Storage storage = Storage::f32;
  int64_t rows = 1, cols = 0;
  int64_t row_stride = 0, col_stride = 1;  // in elements
  // code8 / code16: the codes' format. f32 written by a cast or a (fake) quantization:
  // the format its values lie on. Unused for plain float32 or bfloat16 data.
  ElementFormat element{};
  DeviceScales scales;

  int64_t numel() const { return rows * cols; }
  bool contiguous() const { return col_stride == 1 && (row_stride == cols || rows <= 1); }
  // The view of the transpose: (cols, rows), strides swapped. Block boxes swap too.
  DeviceTensor transposed() const {
    DeviceTensor t = *this;
    t.rows = cols;
    t.cols = rows;
    t.row_stride = col_stride;
    t.col_stride = row_stride;
    t.scales.block_rows = scales.block_cols;
    t.scales.block_cols = scales.block_rows;
    return t;
  }

  // Contiguous row-major views.
  static DeviceTensor values(float* p, int64_t rows, int64_t cols) {
    DeviceTensor t;
    t.data = p;
    t.rows = rows;
    t.cols = cols;
    t.row_stride = cols;
    return t;
  }
  static DeviceTensor values(const float* p, int64_t rows, int64_t cols) {
    return values(const_cast<float*>(p), rows, cols);
  }
  static DeviceTensor bf16_bits(void* p, int64_t rows, int64_t cols) {
    DeviceTensor t = values(static_cast<float*>(p), rows, cols);
    t.storage = Storage::bf16;
    return t;
  }
  // code8 for formats of up to 8 bits, else code16.
  static DeviceTensor codes(void* p, int64_t rows, int64_t cols, const ElementFormat& f) {
    DeviceTensor t = values(static_cast<float*>(p), rows, cols);
    t.storage = f.bits <= 8 ? Storage::code8 : Storage::code16;
    t.element = f;
    return t;
  }
  static DeviceTensor codes(const void* p, int64_t rows, int64_t cols, const ElementFormat& f) {
    return codes(const_cast<void*>(p), rows, cols, f);
  }
  // This view with the element format and block scales of `f` (block_scales() below) and
  // the given scale pointers.
  DeviceTensor with_format(const ElementFormat& f) const {
    DeviceTensor t = *this;
    t.element = f;
    return t;
  }
  DeviceTensor with_scales(const DeviceScales& s) const {
    DeviceTensor t = *this;
    t.scales = s;
    return t;
  }
};

static_assert(std::is_trivially_copyable_v<DeviceTensor>);

// The block box of a per-tensor format: larger than any tensor, so the scale grid is 1 x 1
// (0 x 0 when empty) and the whole tensor is one block.
inline constexpr int64_t kWholeTensorBlock = int64_t{1} << 62;

// The block scaling of block format f on a tensor of rank 1 or 2: scale format, rule and
// block box (vectors along the last axis are 1 x length, along axis 0 length x 1; tiles
// rows x cols, one row for rank 1; per-tensor kWholeTensorBlock both ways); pointers null,
// headroom off. Calls validate(f); std::invalid_argument for per-channel blocks (not on
// the device) and for an axis out of range. `what` names the caller in the message.
DeviceScales block_scales(const BlockFormat& f, size_t rank = 2, const char* what = "block_scales");

// The view of a block-format tensor: codes (code8) or values (f32, as a fake quantization
// writes them) at p, element format and block scales of f, the given scale pointers.
DeviceTensor quantized_view(void* p, Storage storage, int64_t rows, int64_t cols,
                            const BlockFormat& f, uint8_t* scale_codes, float* scale_values,
                            float* tensor_scale, bool headroom_3_4 = false, size_t rank = 2);

}  // namespace lpx::kernels
