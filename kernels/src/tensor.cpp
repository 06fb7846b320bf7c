// The device tensor view (tensor.hpp): block scales of a BlockFormat, and the checks every
// view-taking entry point runs before any CUDA call.
#include "lpx/kernels/tensor.hpp"

#include <stdexcept>
#include <string>

#include "lpx/kernels/cast.hpp"

namespace lpx::kernels {

size_t storage_bytes(Storage s) {
  switch (s) {
    case Storage::f32: return 4;
    case Storage::bf16: return 2;
    case Storage::code8: return 1;
    case Storage::code16: return 2;
  }
  return 0;
}

DeviceScales block_scales(const BlockFormat& f, size_t rank, const char* what) {
  validate(f);
  if (rank != 1 && rank != 2)
    throw std::invalid_argument(std::string("lpx::kernels::") + what + ": rank " +
                                std::to_string(rank) + " (1 or 2 supported)");
  DeviceScales s;
  s.present = true;
  s.format = f.scale;
  s.rule = f.rule;
  switch (f.block.kind) {
    case BlockShape::Kind::vector: {
      const int axis = f.block.axis < 0 ? f.block.axis + static_cast<int>(rank) : f.block.axis;
      if (axis < 0 || axis >= static_cast<int>(rank))
        throw std::invalid_argument(std::string("lpx::kernels::") + what + ": block axis " +
                                    std::to_string(f.block.axis) + " out of range for rank " +
                                    std::to_string(rank));
      if (axis == static_cast<int>(rank) - 1) s.block_cols = f.block.length;
      else s.block_rows = f.block.length;
      break;
    }
    case BlockShape::Kind::tile:
      s.block_rows = rank == 2 ? f.block.rows : 1;
      s.block_cols = f.block.cols;
      break;
    case BlockShape::Kind::tensor:
      s.block_rows = s.block_cols = kWholeTensorBlock;
      break;
    default:
      throw std::invalid_argument(std::string("lpx::kernels::") + what +
                                  ": per-channel blocks are CPU-only (format " + f.spec() + ")");
  }
  return s;
}

DeviceTensor quantized_view(void* p, Storage storage, int64_t rows, int64_t cols,
                            const BlockFormat& f, uint8_t* scale_codes, float* scale_values,
                            float* tensor_scale, bool headroom_3_4, size_t rank) {
  DeviceTensor t = DeviceTensor::values(static_cast<float*>(p), rows, cols);
  t.storage = storage;
  t.element = f.element;
  t.scales = block_scales(f, rank, "quantized_view");
  t.scales.codes = scale_codes;
  t.scales.values = scale_values;
  t.scales.tensor = tensor_scale;
  t.scales.headroom_3_4 = headroom_3_4;
  return t;
}

namespace detail {

void check_view(const DeviceTensor& t, const char* what) {
  const std::string w = std::string("lpx::kernels: ") + what;
  if (t.rows < 0 || t.cols < 0)
    throw std::invalid_argument(w + ": negative extent (" + std::to_string(t.rows) + ", " +
                                std::to_string(t.cols) + ")");
  check_pointer(t.data, static_cast<size_t>(t.numel()), what);
  if (t.storage == Storage::code8 || t.storage == Storage::code16) {
    check_format(t.element);
    check_code_width(t.element, storage_bytes(t.storage));
  }
  if (t.scales.present && (t.scales.block_rows < 1 || t.scales.block_cols < 1))
    throw std::invalid_argument(w + ": a block box of " + std::to_string(t.scales.block_rows) +
                                " x " + std::to_string(t.scales.block_cols));
}

void check_storage(const DeviceTensor& t, Storage want, const char* what) {
  if (t.storage != want)
    throw std::invalid_argument(std::string("lpx::kernels: ") + what + ": storage " +
                                std::to_string(storage_bytes(t.storage)) + "-byte " +
                                (t.storage == Storage::f32    ? "float32"
                                 : t.storage == Storage::bf16 ? "bfloat16"
                                                              : "codes") +
                                " where " +
                                (want == Storage::f32    ? "float32 values"
                                 : want == Storage::bf16 ? "bfloat16 values"
                                                         : "codes") +
                                " are needed");
}

void check_same_shape(const DeviceTensor& a, const DeviceTensor& b, const char* what) {
  if (a.rows != b.rows || a.cols != b.cols)
    throw std::invalid_argument(std::string("lpx::kernels: ") + what + ": shapes differ ((" +
                                std::to_string(a.rows) + ", " + std::to_string(a.cols) + ") vs (" +
                                std::to_string(b.rows) + ", " + std::to_string(b.cols) + "))");
}

}  // namespace detail

}  // namespace lpx::kernels
