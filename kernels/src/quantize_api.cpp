// Host API of the block-quantization kernels: argument checks (every build), the block
// geometry, then the launchers (quantize.cu or no_cuda.cpp).
#include <stdexcept>
#include <string>

#include "launch.hpp"
#include "lpx/kernels/cast.hpp"
#include "lpx/kernels/quantize.hpp"

namespace lpx::kernels {

namespace {

struct Geometry {
  size_t rows = 1, cols = 0, br = 1, bc = 1;
  size_t grid_rows() const { return (rows + br - 1) / br; }
  size_t grid_cols() const { return (cols + bc - 1) / bc; }
  size_t nblocks() const { return grid_rows() * grid_cols(); }
};

Geometry geometry(size_t rows, size_t cols, size_t rank, const BlockFormat& f, const char* what) {
  const launch::BlockGeometry b = launch::block_geometry(f, rank, what);
  return Geometry{rows, cols, b.br, b.bc};
}

void check_quantize_options(const QuantizeOptions& opt, const char* what) {
  if (opt.sr_bits < 1 || opt.sr_bits > kMaxSrBits)
    throw std::invalid_argument(std::string("lpx::kernels::") + what +
                                ": sr_bits must be in [1, 32], got " + std::to_string(opt.sr_bits));
  if (opt.history != nullptr)
    throw std::invalid_argument(std::string("lpx::kernels::") + what +
                                ": delayed scaling (amax history) is CPU-only");
  if (opt.whole_tensor_amax)
    throw std::invalid_argument(std::string("lpx::kernels::") + what +
                                ": a given whole-tensor amax (streamed pieces) is CPU-only");
}

// (rows, cols) of a host tensor of rank 1 or 2 whose data has `size` elements.
Geometry host_geometry(std::span<const int64_t> shape, size_t size, const BlockFormat& f,
                       const char* what) {
  if (shape.size() != 1 && shape.size() != 2)
    throw std::invalid_argument(std::string("lpx::kernels::") + what + ": rank " +
                                std::to_string(shape.size()) + " (1 or 2 supported)");
  for (int64_t d : shape)
    if (d < 0) throw std::invalid_argument(std::string("lpx::kernels::") + what + ": negative extent");
  const size_t rows = shape.size() == 2 ? static_cast<size_t>(shape[0]) : 1;
  const size_t cols = static_cast<size_t>(shape.back());
  detail::check_sizes(rows * cols, size, (std::string(what) + ": shape vs data").c_str());
  return geometry(rows, cols, shape.size(), f, what);
}

// The QuantizedTensor of `shape` in format f, scales allocated, codes left empty.
QuantizedTensor make_result(std::span<const int64_t> shape, const Geometry& g, const BlockFormat& f,
                            const QuantizeOptions& opt) {
  QuantizedTensor q;
  q.shape.assign(shape.begin(), shape.end());
  q.format = f;
  if (f.block.kind == BlockShape::Kind::vector && f.block.axis < 0)
    q.format.block.axis = f.block.axis + static_cast<int>(shape.size());
  if (shape.size() == 2)
    q.scale_shape = {static_cast<int64_t>(g.grid_rows()), static_cast<int64_t>(g.grid_cols())};
  else q.scale_shape = {static_cast<int64_t>(g.grid_cols())};
  q.headroom_3_4 = opt.headroom_3_4;
  if (f.scale_is_code()) q.scale_codes.assign(g.nblocks(), 0);
  else q.scale_values.assign(g.nblocks(), 0.0f);
  return q;
}

}  // namespace

namespace launch {

BlockGeometry block_geometry(const BlockFormat& f, size_t rank, const char* what) {
  validate(f);
  BlockGeometry g;
  switch (f.block.kind) {
    case BlockShape::Kind::vector: {
      const int axis = f.block.axis < 0 ? f.block.axis + static_cast<int>(rank) : f.block.axis;
      if (axis < 0 || axis >= static_cast<int>(rank))
        throw std::invalid_argument(std::string("lpx::kernels::") + what + ": block axis " +
                                    std::to_string(f.block.axis) + " out of range for rank " +
                                    std::to_string(rank));
      const size_t len = static_cast<size_t>(f.block.length);
      if (axis == static_cast<int>(rank) - 1) g.bc = len;
      else g.br = len;
      break;
    }
    case BlockShape::Kind::tile:
      g.br = rank == 2 ? static_cast<size_t>(f.block.rows) : 1;
      g.bc = static_cast<size_t>(f.block.cols);
      break;
    default:
      throw std::invalid_argument(std::string("lpx::kernels::") + what +
                                  ": per-tensor and per-channel blocks are CPU-only (format " +
                                  f.spec() + ")");
  }
  return g;
}

}  // namespace launch

void quantize_device(const float* x, size_t rows, size_t cols, const BlockFormat& f,
                     const QuantizeOptions& opt, uint8_t* codes, uint8_t* scale_codes,
                     float* scale_values, float* tensor_scale, void* stream) {
  const Geometry g = geometry(rows, cols, 2, f, "quantize_device");
  check_quantize_options(opt, "quantize_device");
  const size_t n = rows * cols;
  detail::check_pointer(x, n, "quantize_device: input");
  detail::check_pointer(codes, n, "quantize_device: codes");
  detail::check_pointer(f.scale_is_code() ? static_cast<const void*>(scale_codes) : scale_values, n,
                        "quantize_device: scales");
  if (f.two_level()) detail::check_pointer(tensor_scale, n, "quantize_device: tensor_scale");
  if (n > 0)
    launch::quantize(x, g.rows, g.cols, g.br, g.bc, f, opt, codes, scale_codes, scale_values,
                     tensor_scale, stream);
}

void dequantize_device(const uint8_t* codes, const uint8_t* scale_codes, const float* scale_values,
                       const float* tensor_scale, size_t rows, size_t cols, const BlockFormat& f,
                       bool headroom_3_4, float* out, void* stream) {
  const Geometry g = geometry(rows, cols, 2, f, "dequantize_device");
  const size_t n = rows * cols;
  detail::check_pointer(codes, n, "dequantize_device: codes");
  detail::check_pointer(out, n, "dequantize_device: output");
  detail::check_pointer(f.scale_is_code() ? static_cast<const void*>(scale_codes) : scale_values, n,
                        "dequantize_device: scales");
  if (f.two_level()) detail::check_pointer(tensor_scale, n, "dequantize_device: tensor_scale");
  if (n > 0)
    launch::dequantize(codes, scale_codes, scale_values, tensor_scale, g.rows, g.cols, g.br, g.bc,
                       f, headroom_3_4, out, false, stream);
}

void fake_quantize_device(const float* x, size_t rows, size_t cols, const BlockFormat& f,
                          const QuantizeOptions& opt, float* out, uint8_t* scale_codes,
                          float* scale_values, float* tensor_scale, void* stream) {
  const Geometry g = geometry(rows, cols, 2, f, "fake_quantize_device");
  check_quantize_options(opt, "fake_quantize_device");
  const size_t n = rows * cols;
  detail::check_pointer(x, n, "fake_quantize_device: input");
  detail::check_pointer(out, n, "fake_quantize_device: output");
  if (n > 0)
    launch::fake_quantize(x, g.rows, g.cols, g.br, g.bc, f, opt, out, scale_codes, scale_values,
                          tensor_scale, stream);
}

QuantizedTensor quantize_host(std::span<const float> x, std::span<const int64_t> shape,
                              const BlockFormat& f, const QuantizeOptions& opt) {
  const Geometry g = host_geometry(shape, x.size(), f, "quantize_host");
  check_quantize_options(opt, "quantize_host");
  QuantizedTensor q = make_result(shape, g, f, opt);
  q.codes.assign(x.size(), 0);
  if (x.empty()) return q;
  const bool coded = f.scale_is_code();
  float ts = 0;
  launch::quantize_h2h(x.data(), g.rows, g.cols, g.br, g.bc, f, opt, q.codes.data(),
                       coded ? q.scale_codes.data() : nullptr, coded ? nullptr : q.scale_values.data(),
                       f.two_level() ? &ts : nullptr);
  if (f.two_level()) q.tensor_scale = ts;
  return q;
}

void dequantize_host(const QuantizedTensor& q, std::span<float> out) {
  const BlockFormat& f = q.format;
  const Geometry g = host_geometry(q.shape, out.size(), f, "dequantize_host");
  detail::check_sizes(q.codes.size(), out.size(), "dequantize_host: codes vs output");
  const bool coded = f.scale_is_code();
  detail::check_sizes(coded ? q.scale_codes.size() : q.scale_values.size(), g.nblocks(),
                      "dequantize_host: block scales vs blocks");
  if (f.two_level() && !q.tensor_scale)
    throw std::invalid_argument(
        "lpx::kernels::dequantize_host: a two-level (e4m3) format needs its tensor scale");
  if (out.empty()) return;
  const float ts = q.tensor_scale.value_or(1.0f);
  launch::dequantize_h2h(q.codes.data(), coded ? q.scale_codes.data() : nullptr,
                         coded ? nullptr : q.scale_values.data(), &ts, g.rows, g.cols, g.br, g.bc,
                         f, q.headroom_3_4, out.data());
}

QuantizedTensor fake_quantize_host(std::span<const float> x, std::span<const int64_t> shape,
                                   std::span<float> out, const BlockFormat& f,
                                   const QuantizeOptions& opt) {
  const Geometry g = host_geometry(shape, x.size(), f, "fake_quantize_host");
  check_quantize_options(opt, "fake_quantize_host");
  detail::check_sizes(x.size(), out.size(), "fake_quantize_host: input vs output");
  QuantizedTensor q = make_result(shape, g, f, opt);
  if (x.empty()) return q;
  const bool coded = f.scale_is_code();
  float ts = 0;
  launch::fake_quantize_h2h(x.data(), g.rows, g.cols, g.br, g.bc, f, opt, out.data(),
                            coded ? q.scale_codes.data() : nullptr,
                            coded ? nullptr : q.scale_values.data(), f.two_level() ? &ts : nullptr);
  if (f.two_level()) q.tensor_scale = ts;
  return q;
}

}  // namespace lpx::kernels
