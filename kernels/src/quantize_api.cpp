// Host API of the block-quantization kernels: argument checks (every build), the block
// geometry (tensor.cpp's block_scales), then the CUDA module's launchers on views; the
// host-to-host forms copy through device buffers.
#include <stdexcept>
#include <string>

#include "backend.hpp"
#include "lpx/kernels/cast.hpp"
#include "lpx/kernels/memory.hpp"
#include "lpx/kernels/quantize.hpp"

namespace lpx::kernels {

namespace {

struct Geometry {
  int64_t rows = 1, cols = 0;
  DeviceScales scales;  // format, rule, block box
  int64_t grid_rows() const { return scales.grid_rows(rows); }
  int64_t grid_cols() const { return scales.grid_cols(cols); }
  size_t nblocks() const { return static_cast<size_t>(grid_rows() * grid_cols()); }
  size_t numel() const { return static_cast<size_t>(rows * cols); }
};

Geometry geometry(size_t rows, size_t cols, size_t rank, const BlockFormat& f, const char* what) {
  return Geometry{static_cast<int64_t>(rows), static_cast<int64_t>(cols), block_scales(f, rank, what)};
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
  if (opt.random_words != nullptr)
    throw std::invalid_argument(std::string("lpx::kernels::") + what +
                                ": caller-given random words are CPU-only");
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
  if (shape.size() == 2) q.scale_shape = {g.grid_rows(), g.grid_cols()};
  else q.scale_shape = {g.grid_cols()};
  q.headroom_3_4 = opt.headroom_3_4;
  if (f.scale_is_code()) q.scale_codes.assign(g.nblocks(), 0);
  else q.scale_values.assign(g.nblocks(), 0.0f);
  return q;
}

// The views of a quantize / fake_quantize: x on the device, its output, and scales.
void check_quantize_views(const DeviceTensor& x, const DeviceTensor& out, Storage want,
                          const char* what) {
  detail::check_view(x, what);
  detail::check_view(out, what);
  detail::check_storage(x, Storage::f32, what);
  detail::check_storage(out, want, what);
  detail::check_same_shape(x, out, what);
  detail::check_format(out.element);
  if (!out.scales.present)
    throw std::invalid_argument(std::string("lpx::kernels::") + what +
                                ": the output view has no block scales (use quantized_view)");
}

// A device output of quantize_both: codes or values, scales present.
void check_both_output(const DeviceTensor& out, const char* what) {
  detail::check_view(out, what);
  if (out.storage != Storage::f32) detail::check_storage(out, Storage::code8, what);
  detail::check_format(out.element);
  if (!out.scales.present)
    throw std::invalid_argument(std::string("lpx::kernels::") + what +
                                ": an output view has no block scales (use quantized_view)");
}

// Device buffers for one output of g in format f (codes or fake-quantized values, scales,
// tensor scale) and its view.
struct DeviceOutput {
  DeviceBuffer data, scales, tensor;
  DeviceTensor view;
  DeviceOutput(const Geometry& g, const BlockFormat& f, Storage storage)
      : data(g.numel() * storage_bytes(storage)),
        scales(f.scale_is_code() ? g.nblocks() : g.nblocks() * sizeof(float)),
        tensor(sizeof(float)) {
    view = DeviceTensor::values(data.get<float>(), g.rows, g.cols);
    view.storage = storage;
    view.element = f.element;
    view.scales = g.scales;
    view.scales.codes = f.scale_is_code() ? scales.get<uint8_t>() : nullptr;
    view.scales.values = f.scale_is_code() ? nullptr : scales.get<float>();
    view.scales.tensor = f.two_level() ? tensor.get<float>() : nullptr;
  }
  // The codes or values into `host` (numel elements of the storage).
  void fetch_data(void* host) const {
    copy_to_host(host, data.get(), static_cast<size_t>(view.numel()) * storage_bytes(view.storage));
  }
  // Scales and the tensor scale into q (made by make_result).
  void fetch_scales(QuantizedTensor& q, const BlockFormat& f) const {
    if (f.scale_is_code()) copy_to_host(q.scale_codes.data(), scales.get(), q.scale_codes.size());
    else copy_to_host(q.scale_values.data(), scales.get(), q.scale_values.size() * sizeof(float));
    if (f.two_level()) {
      float ts = 0;
      copy_to_host(&ts, tensor.get(), sizeof(float));
      q.tensor_scale = ts;
    }
  }
};

// Host tensors through device buffers: x up, the module's quantize into codes (code8) or
// values (f32), everything it stored back.
void quantize_through_device(std::span<const float> x, const Geometry& g, const BlockFormat& f,
                             const QuantizeOptions& opt, uint8_t* codes, float* values,
                             QuantizedTensor& q) {
  const backend::Table& t = backend::require();
  DeviceBuffer d_x(g.numel() * sizeof(float));
  copy_to_device(d_x.get(), x.data(), g.numel() * sizeof(float));
  const DeviceOutput out(g, f, codes ? Storage::code8 : Storage::f32);
  t.quantize(DeviceTensor::values(d_x.get<float>(), g.rows, g.cols), out.view, opt, nullptr, nullptr);
  out.fetch_data(codes ? static_cast<void*>(codes) : values);
  out.fetch_scales(q, f);
}

}  // namespace

// --- Views

void quantize_device(const DeviceTensor& x, const DeviceTensor& out, const QuantizeOptions& opt,
                     void* stream, uint32_t* amax_word) {
  check_quantize_views(x, out, Storage::code8, "quantize_device");
  check_quantize_options(opt, "quantize_device");
  if (x.numel() > 0) backend::require().quantize(x, out, opt, amax_word, stream);
}

void fake_quantize_device(const DeviceTensor& x, const DeviceTensor& out,
                          const QuantizeOptions& opt, void* stream, uint32_t* amax_word) {
  check_quantize_views(x, out, Storage::f32, "fake_quantize_device");
  check_quantize_options(opt, "fake_quantize_device");
  if (x.numel() > 0) backend::require().quantize(x, out, opt, amax_word, stream);
}

void quantize_both_device(const DeviceTensor& x, const DeviceTensor& out_rows,
                          const QuantizeOptions& opt_rows, const DeviceTensor& out_cols,
                          const QuantizeOptions& opt_cols, void* stream, uint32_t* amax_words) {
  const char* what = "quantize_both_device";
  detail::check_view(x, what);
  detail::check_storage(x, Storage::f32, what);
  check_both_output(out_rows, what);
  check_both_output(out_cols, what);
  detail::check_same_shape(x, out_rows, what);
  detail::check_same_shape(x.transposed(), out_cols, "quantize_both_device (out_cols is x's transpose)");
  check_quantize_options(opt_rows, what);
  check_quantize_options(opt_cols, what);
  if (x.numel() > 0)
    backend::require().quantize_both(x, out_rows, opt_rows, out_cols, opt_cols, amax_words, stream);
}

void dequantize_device(const DeviceTensor& q, const DeviceTensor& out, void* stream) {
  const char* what = "dequantize_device";
  detail::check_view(q, what);
  detail::check_view(out, what);
  detail::check_storage(q, Storage::code8, what);
  if (out.storage != Storage::f32) detail::check_storage(out, Storage::bf16, what);
  detail::check_same_shape(q, out, what);
  if (!q.scales.present)
    throw std::invalid_argument("lpx::kernels::dequantize_device: the codes have no block scales");
  if (q.numel() > 0) {
    detail::check_pointer(scale_is_code(q.scales.format) ? static_cast<const void*>(q.scales.codes)
                                                         : q.scales.values,
                          1, "dequantize_device: scales");
    if (q.scales.format == ScaleFormat::e4m3)
      detail::check_pointer(q.scales.tensor, 1, "dequantize_device: tensor_scale");
    backend::require().dequantize(q, out, stream);
  }
}

// --- Device pointers

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
  if (n == 0) return;
  const backend::Table& t = backend::require();
  t.quantize(DeviceTensor::values(x, g.rows, g.cols),
             quantized_view(codes, Storage::code8, g.rows, g.cols, f, scale_codes, scale_values,
                            tensor_scale),
             opt, nullptr, stream);
  t.synchronize(stream);
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
  if (n == 0) return;
  backend::require().dequantize(
      quantized_view(const_cast<uint8_t*>(codes), Storage::code8, g.rows, g.cols, f,
                     const_cast<uint8_t*>(scale_codes), const_cast<float*>(scale_values),
                     const_cast<float*>(tensor_scale), headroom_3_4),
      DeviceTensor::values(out, g.rows, g.cols), stream);
}

void fake_quantize_device(const float* x, size_t rows, size_t cols, const BlockFormat& f,
                          const QuantizeOptions& opt, float* out, uint8_t* scale_codes,
                          float* scale_values, float* tensor_scale, void* stream) {
  const Geometry g = geometry(rows, cols, 2, f, "fake_quantize_device");
  check_quantize_options(opt, "fake_quantize_device");
  const size_t n = rows * cols;
  detail::check_pointer(x, n, "fake_quantize_device: input");
  detail::check_pointer(out, n, "fake_quantize_device: output");
  if (n == 0) return;
  const backend::Table& t = backend::require();
  t.quantize(DeviceTensor::values(x, g.rows, g.cols),
             quantized_view(out, Storage::f32, g.rows, g.cols, f, scale_codes, scale_values,
                            tensor_scale),
             opt, nullptr, stream);
  t.synchronize(stream);
}

// --- Host to host

QuantizedTensor quantize_host(std::span<const float> x, std::span<const int64_t> shape,
                              const BlockFormat& f, const QuantizeOptions& opt) {
  const Geometry g = host_geometry(shape, x.size(), f, "quantize_host");
  check_quantize_options(opt, "quantize_host");
  QuantizedTensor q = make_result(shape, g, f, opt);
  q.codes.assign(x.size(), 0);
  if (x.empty()) return q;
  quantize_through_device(x, g, f, opt, q.codes.data(), nullptr, q);
  return q;
}

QuantizedPair quantize_both_host(std::span<const float> x, int64_t rows, int64_t cols,
                                 const BlockFormat& f_rows, const QuantizeOptions& opt_rows,
                                 const BlockFormat& f_cols, const QuantizeOptions& opt_cols) {
  const int64_t shape[2] = {rows, cols}, shape_t[2] = {cols, rows};
  const Geometry g = host_geometry(shape, x.size(), f_rows, "quantize_both_host");
  const Geometry gt = host_geometry(shape_t, x.size(), f_cols, "quantize_both_host");
  check_quantize_options(opt_rows, "quantize_both_host");
  check_quantize_options(opt_cols, "quantize_both_host");
  QuantizedPair out{make_result(shape, g, f_rows, opt_rows), make_result(shape_t, gt, f_cols, opt_cols)};
  out.rows.codes.assign(x.size(), 0);
  out.cols.codes.assign(x.size(), 0);
  if (x.empty()) return out;
  const backend::Table& t = backend::require();
  DeviceBuffer d_x(x.size() * sizeof(float));
  copy_to_device(d_x.get(), x.data(), x.size() * sizeof(float));
  const DeviceOutput r(g, f_rows, Storage::code8), c(gt, f_cols, Storage::code8);
  t.quantize_both(DeviceTensor::values(d_x.get<float>(), rows, cols), r.view, opt_rows, c.view,
                  opt_cols, nullptr, nullptr);
  r.fetch_data(out.rows.codes.data());
  r.fetch_scales(out.rows, f_rows);
  c.fetch_data(out.cols.codes.data());
  c.fetch_scales(out.cols, f_cols);
  return out;
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
  const backend::Table& t = backend::require();
  const size_t n = g.numel(), nb = g.nblocks();
  DeviceBuffer d_codes(n), d_scales(coded ? nb : nb * sizeof(float)), d_ts(sizeof(float)),
      d_out(n * sizeof(float));
  copy_to_device(d_codes.get(), q.codes.data(), n);
  if (coded) copy_to_device(d_scales.get(), q.scale_codes.data(), nb);
  else copy_to_device(d_scales.get(), q.scale_values.data(), nb * sizeof(float));
  const float ts = q.tensor_scale.value_or(1.0f);
  copy_to_device(d_ts.get(), &ts, sizeof(float));
  DeviceTensor codes = DeviceTensor::codes(d_codes.get(), g.rows, g.cols, f.element);
  codes.scales = g.scales;
  codes.scales.codes = coded ? d_scales.get<uint8_t>() : nullptr;
  codes.scales.values = coded ? nullptr : d_scales.get<float>();
  codes.scales.tensor = d_ts.get<float>();
  codes.scales.headroom_3_4 = q.headroom_3_4;
  t.dequantize(codes, DeviceTensor::values(d_out.get<float>(), g.rows, g.cols), nullptr);
  copy_to_host(out.data(), d_out.get(), n * sizeof(float));
}

QuantizedTensor fake_quantize_host(std::span<const float> x, std::span<const int64_t> shape,
                                   std::span<float> out, const BlockFormat& f,
                                   const QuantizeOptions& opt) {
  const Geometry g = host_geometry(shape, x.size(), f, "fake_quantize_host");
  check_quantize_options(opt, "fake_quantize_host");
  detail::check_sizes(x.size(), out.size(), "fake_quantize_host: input vs output");
  QuantizedTensor q = make_result(shape, g, f, opt);
  if (x.empty()) return q;
  quantize_through_device(x, g, f, opt, nullptr, out.data(), q);
  return q;
}

}  // namespace lpx::kernels
