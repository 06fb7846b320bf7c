// Host API of the block-quantization kernels: argument checks (every build), the block
// geometry, then the launcher (quantize.cu or no_cuda.cpp).
#include <stdexcept>
#include <string>

#include "launch.hpp"
#include "lpx/kernels/cast.hpp"
#include "lpx/kernels/quantize.hpp"

namespace lpx::kernels {

namespace {

struct Geometry {
  size_t rows = 1, cols = 0, br = 1, bc = 1;
};

// The RxC block of `f` for a (rows, cols) matrix; throws for what the device lacks.
Geometry geometry(size_t rows, size_t cols, size_t rank, const BlockFormat& f,
                  const QuantizeOptions& opt) {
  validate(f);
  if (opt.sr_bits < 1 || opt.sr_bits > kMaxSrBits)
    throw std::invalid_argument("lpx::kernels::quantize: sr_bits must be in [1, 32], got " +
                                std::to_string(opt.sr_bits));
  if (opt.history != nullptr)
    throw std::invalid_argument("lpx::kernels::quantize: delayed scaling (amax history) is CPU-only");
  Geometry g{rows, cols, 1, 1};
  switch (f.block.kind) {
    case BlockShape::Kind::vector: {
      const int axis = f.block.axis < 0 ? f.block.axis + static_cast<int>(rank) : f.block.axis;
      if (axis < 0 || axis >= static_cast<int>(rank))
        throw std::invalid_argument("lpx::kernels::quantize: block axis " +
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
      throw std::invalid_argument(
          "lpx::kernels::quantize: per-tensor and per-channel blocks are CPU-only (format " +
          f.spec() + ")");
  }
  return g;
}

}  // namespace

void quantize_device(const float* x, size_t rows, size_t cols, const BlockFormat& f,
                     const QuantizeOptions& opt, uint8_t* codes, uint8_t* scale_codes,
                     float* scale_values, float* tensor_scale, void* stream) {
  const Geometry g = geometry(rows, cols, 2, f, opt);
  const size_t n = rows * cols;
  detail::check_pointer(x, n, "quantize_device: input");
  detail::check_pointer(codes, n, "quantize_device: codes");
  const bool coded = f.scale == ScaleFormat::e8m0 || f.scale == ScaleFormat::e4m3;
  detail::check_pointer(coded ? static_cast<const void*>(scale_codes) : scale_values, n,
                        "quantize_device: scales");
  if (f.two_level()) detail::check_pointer(tensor_scale, n, "quantize_device: tensor_scale");
  if (n > 0)
    launch::quantize(x, g.rows, g.cols, g.br, g.bc, f, opt, codes, scale_codes, scale_values,
                     tensor_scale, stream);
}

QuantizedTensor quantize_host(std::span<const float> x, std::span<const int64_t> shape,
                              const BlockFormat& f, const QuantizeOptions& opt) {
  if (shape.size() != 1 && shape.size() != 2)
    throw std::invalid_argument("lpx::kernels::quantize_host: rank " + std::to_string(shape.size()) +
                                " (1 or 2 supported)");
  for (int64_t d : shape)
    if (d < 0) throw std::invalid_argument("lpx::kernels::quantize_host: negative extent");
  const size_t rows = shape.size() == 2 ? static_cast<size_t>(shape[0]) : 1;
  const size_t cols = static_cast<size_t>(shape.back());
  detail::check_sizes(rows * cols, x.size(), "quantize_host: shape vs data");
  const Geometry g = geometry(rows, cols, shape.size(), f, opt);
  QuantizedTensor q;
  q.shape.assign(shape.begin(), shape.end());
  q.format = f;
  if (f.block.kind == BlockShape::Kind::vector && f.block.axis < 0)
    q.format.block.axis = f.block.axis + static_cast<int>(shape.size());
  const size_t gr = (rows + g.br - 1) / g.br, gc = (cols + g.bc - 1) / g.bc;
  if (shape.size() == 2) q.scale_shape = {static_cast<int64_t>(gr), static_cast<int64_t>(gc)};
  else q.scale_shape = {static_cast<int64_t>(gc)};
  q.headroom_3_4 = opt.headroom_3_4;
  q.codes.assign(x.size(), 0);
  const bool coded = f.scale == ScaleFormat::e8m0 || f.scale == ScaleFormat::e4m3;
  if (coded) q.scale_codes.assign(gr * gc, 0);
  else q.scale_values.assign(gr * gc, 0.0f);
  if (x.empty()) return q;
  float ts = 0;
  launch::quantize_h2h(x.data(), rows, cols, g.br, g.bc, f, opt, q.codes.data(),
                       coded ? q.scale_codes.data() : nullptr, coded ? nullptr : q.scale_values.data(),
                       f.two_level() ? &ts : nullptr);
  if (f.two_level()) q.tensor_scale = ts;
  return q;
}

}  // namespace lpx::kernels
