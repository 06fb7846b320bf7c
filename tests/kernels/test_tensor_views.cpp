// The device tensor view (kernels/tensor.hpp): block scales of a format, the checks of
// the view-taking entry points (always: they precede any CUDA call), and on a device the
// kernels on strided views: the Hadamard transform down the columns of a row-major matrix
// against numerics' hadamard_blocks, casts and fused fake quantization of a transposed
// view against the CPU on the transposed copy, bit for bit.
#include <catch2/catch.hpp>

#include <limits>
#include <stdexcept>
#include <vector>

#include "lpx/formats/cast.hpp"
#include "lpx/formats/quantize.hpp"
#include "lpx/kernels/cast.hpp"
#include "lpx/kernels/device.hpp"
#include "lpx/kernels/hadamard.hpp"
#include "lpx/kernels/memory.hpp"
#include "lpx/kernels/quantize.hpp"
#include "lpx/kernels/tensor.hpp"
#include "lpx/numerics/float_bits.hpp"
#include "lpx/numerics/hadamard.hpp"
#include "lpx/numerics/philox.hpp"

using namespace lpx;
using kernels::DeviceTensor;
using kernels::Storage;

namespace {

std::vector<float> sample(size_t n, uint64_t seed) {
  std::vector<float> x(n);
  for (size_t i = 0; i < n; ++i)
    x[i] = static_cast<float>(static_cast<int32_t>(random_bits(seed, 3, i))) * 0x1p-29f *
           (i % 11 == 0 ? 40.0f : 1.0f);
  return x;
}

// (cols, rows) row-major copy of a (rows, cols) row-major matrix.
std::vector<float> transpose(const std::vector<float>& x, int64_t rows, int64_t cols) {
  std::vector<float> t(x.size());
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) t[static_cast<size_t>(c * rows + r)] = x[static_cast<size_t>(r * cols + c)];
  return t;
}

size_t bits_differ(const std::vector<float>& a, const std::vector<float>& b) {
  size_t bad = a.size() != b.size();
  for (size_t i = 0; i < a.size() && i < b.size(); ++i)
    bad += float_to_bits(a[i]) != float_to_bits(b[i]) && !(a[i] != a[i] && b[i] != b[i]);
  return bad;
}

}  // namespace

TEST_CASE("block_scales: the box of every block shape, the transpose's view") {
  const auto mx = kernels::block_scales(parse_block_format("mxfp8_e4m3"));
  CHECK(mx.present);
  CHECK(mx.format == ScaleFormat::e8m0);
  CHECK((mx.block_rows == 1 && mx.block_cols == 32));
  BlockFormat cols = parse_block_format("nvfp4");
  cols.block.axis = 0;
  const auto nv = kernels::block_scales(cols);
  CHECK((nv.block_rows == 16 && nv.block_cols == 1));
  CHECK(nv.format == ScaleFormat::e4m3);
  const auto tile = kernels::block_scales(parse_block_format("fp8_block128x128"));
  CHECK((tile.block_rows == 128 && tile.block_cols == 128));
  CHECK(kernels::block_scales(parse_block_format("fp8_block128x128"), 1).block_rows == 1);
  CHECK(tile.grid_rows(300) == 3);
  const auto whole = kernels::block_scales(parse_block_format("fp8_tensor"));  // one block, any shape
  CHECK((whole.grid_rows(1) == 1 && whole.grid_cols(int64_t{1} << 40) == 1 && whole.grid_rows(0) == 0));
  CHECK(whole.format == ScaleFormat::fp32);
  CHECK_THROWS_WITH(kernels::block_scales(parse_block_format("e4m3:channel:fp32")), Catch::Contains("per-channel"));
  CHECK_THROWS_AS(kernels::block_scales(parse_block_format("mxfp4"), 3), std::invalid_argument);

  float dummy = 0;
  const DeviceTensor v = DeviceTensor::values(&dummy, 3, 5);
  CHECK(v.contiguous());
  const DeviceTensor t = v.transposed();
  CHECK((t.rows == 5 && t.cols == 3 && t.row_stride == 1 && t.col_stride == 5));
  CHECK(!t.contiguous());
  CHECK(DeviceTensor::codes(&dummy, 2, 2, fmt16::bf16).storage == Storage::code16);
  CHECK(kernels::storage_bytes(Storage::code8) == 1);
}

TEST_CASE("view entry points check their arguments before any CUDA call") {
  std::vector<float> buf(64);
  std::vector<uint8_t> codes(64);
  const DeviceTensor x = DeviceTensor::values(buf.data(), 2, 32);
  const DeviceTensor null_x = DeviceTensor::values(static_cast<float*>(nullptr), 2, 32);
  const DeviceTensor c8 = DeviceTensor::codes(codes.data(), 2, 32, fmt8::e4m3fn);
  const CastOptions opt;
  // Casts: storage, shape, null data, a code width that does not fit the format.
  CHECK_THROWS_AS(kernels::encode_device(x, x, opt), std::invalid_argument);
  CHECK_THROWS_AS(kernels::encode_device(null_x, c8, opt), std::invalid_argument);
  CHECK_THROWS_AS(kernels::encode_device(DeviceTensor::values(buf.data(), 4, 16), c8, opt),
                  std::invalid_argument);
  DeviceTensor wide = c8;
  wide.element = fmt16::bf16;
  CHECK_THROWS_AS(kernels::encode_device(x, wide, opt), std::invalid_argument);
  CHECK_THROWS_AS(kernels::decode_device(x, x), std::invalid_argument);
  CHECK_THROWS_AS(kernels::fake_cast_device(x, x, opt), std::invalid_argument);  // no format
  DeviceTensor negative = x;
  negative.rows = -1;
  CHECK_THROWS_AS(kernels::fake_cast_device(negative, negative.with_format(fmt16::bf16), opt),
                  std::invalid_argument);
  // Quantize: the output needs its block scales; storage; options.
  const BlockFormat mx = parse_block_format("mxfp8_e4m3");
  CHECK_THROWS_AS(kernels::fake_quantize_device(x, x.with_format(mx.element), {}),
                  std::invalid_argument);
  const DeviceTensor fq = kernels::quantized_view(buf.data(), Storage::f32, 2, 32, mx, nullptr,
                                                  nullptr, nullptr);
  CHECK_THROWS_AS(kernels::quantize_device(x, fq, {}), std::invalid_argument);  // codes wanted
  QuantizeOptions sr40;
  sr40.sr_bits = 40;
  CHECK_THROWS_WITH(kernels::fake_quantize_device(x, fq, sr40), Catch::Contains("sr_bits"));
  CHECK_THROWS_AS(kernels::dequantize_device(c8, x), std::invalid_argument);  // no scales
  const DeviceTensor nvq = kernels::quantized_view(codes.data(), Storage::code8, 2, 32,
                                                   parse_block_format("nvfp4"), codes.data(),
                                                   nullptr, nullptr);
  CHECK_THROWS_WITH(kernels::dequantize_device(nvq, x), Catch::Contains("tensor_scale"));
  // Hadamard: axis, size, the extent along the axis.
  CHECK_THROWS_AS(kernels::hadamard_device(x, x, 2, 16, nullptr, 0, 0), std::invalid_argument);
  CHECK_THROWS_AS(kernels::hadamard_device(x, x, 1, 48, nullptr, 0, 0), std::invalid_argument);
  CHECK_THROWS_AS(kernels::hadamard_device(x, x, 0, 16, nullptr, 0, 0), std::invalid_argument);
  // Empty views are valid and touch no device.
  const DeviceTensor empty = DeviceTensor::values(static_cast<float*>(nullptr), 0, 32);
  CHECK_NOTHROW(kernels::fake_cast_device(empty, empty.with_format(fmt16::bf16), opt));
  CHECK_NOTHROW(kernels::hadamard_device(empty, empty, 0, 16, nullptr, 0, 0));
  if (!kernels::cuda_available()) {
    CHECK_THROWS_AS(kernels::fake_cast_device(x, x.with_format(fmt16::bf16), opt), std::runtime_error);
    CHECK_THROWS_AS(kernels::hadamard_device(x, x, 1, 16, nullptr, 0, 0), std::runtime_error);
    CHECK_THROWS_AS(kernels::fake_quantize_device(x, fq, {}), std::runtime_error);
  }
}

TEST_CASE("device Hadamard along either axis of a row-major matrix equals hadamard_blocks") {
  if (!kernels::cuda_available()) {
    WARN("skipped: no CUDA device (" << kernels::device_description() << ")");
    return;
  }
  const int64_t rows = 256, cols = 96;
  const std::vector<float> x = sample(static_cast<size_t>(rows * cols), 7);
  const size_t bytes = x.size() * sizeof(float);
  kernels::DeviceBuffer d(bytes), d_signs(128 * sizeof(float));
  for (int axis : {0, 1})
    for (int n : {16, 32}) {
      INFO("axis " << axis << " n " << n);
      const std::vector<float> s = hadamard_signs(n, 5, static_cast<uint32_t>(axis));
      std::vector<float> cpu = x, dev(x.size());
      hadamard_blocks(cpu.data(), rows, cols, axis, n, s);
      kernels::copy_to_device(d.get(), x.data(), bytes);
      kernels::copy_to_device(d_signs.get(), s.data(), s.size() * sizeof(float));
      const DeviceTensor v = DeviceTensor::values(d.get<float>(), rows, cols);
      kernels::hadamard_device(v, v, axis, n, d_signs.get<float>(), 0, 0);  // in place
      kernels::copy_to_host(dev.data(), d.get(), bytes);
      CHECK(bits_differ(cpu, dev) == 0);
    }
}

TEST_CASE("casts and fused fake_quantize on a transposed view equal the CPU on the transpose") {
  if (!kernels::cuda_available()) {
    WARN("skipped: no CUDA device (" << kernels::device_description() << ")");
    return;
  }
  const int64_t rows = 67, cols = 45;  // the view is (45, 67), ragged for every block
  std::vector<float> x = sample(static_cast<size_t>(rows * cols), 9);
  x[17] = std::numeric_limits<float>::quiet_NaN();
  const std::vector<float> xt = transpose(x, rows, cols);  // what the view shows, contiguous
  const std::vector<int64_t> tshape{cols, rows};
  const size_t bytes = x.size() * sizeof(float);
  kernels::DeviceBuffer d_x(bytes), d_out(bytes), d_codes(x.size());
  kernels::copy_to_device(d_x.get(), x.data(), bytes);
  const DeviceTensor view = DeviceTensor::values(d_x.get<float>(), rows, cols).transposed();
  const DeviceTensor out = DeviceTensor::values(d_out.get<float>(), cols, rows);

  CastOptions co;
  co.round = Rounding::sr;
  co.seed = 3;
  co.index_offset = 1;
  std::vector<float> want(x.size()), got(x.size());
  fake_cast_array(xt, want, fmt8::e4m3fn, co);
  kernels::fake_cast_device(view, out.with_format(fmt8::e4m3fn), co);
  kernels::copy_to_host(got.data(), d_out.get(), bytes);
  CHECK(bits_differ(want, got) == 0);

  std::vector<uint8_t> want_codes(x.size()), got_codes(x.size());
  encode_array(xt, want_codes, fmt8::e5m2, co);
  kernels::encode_device(view, DeviceTensor::codes(d_codes.get(), cols, rows, fmt8::e5m2), co);
  kernels::copy_to_host(got_codes.data(), d_codes.get(), x.size());
  CHECK(want_codes == got_codes);

  for (const char* spec : {"mxfp4", "nvfp4", "fp8_block128x128"})
    for (int axis : {-1, 0}) {
      INFO(spec << " axis " << axis);
      BlockFormat f = parse_block_format(spec);
      f.block.axis = axis;
      QuantizeOptions o;
      o.round = Rounding::sr;
      o.seed = 11;
      fake_quantize_values({xt, tshape}, want, f, o);
      kernels::DeviceBuffer d_amax(sizeof(uint32_t));
      kernels::fake_quantize_device(
          view, kernels::quantized_view(d_out.get(), Storage::f32, cols, rows, f, nullptr, nullptr, nullptr),
          o, nullptr, d_amax.get<uint32_t>());
      kernels::copy_to_host(got.data(), d_out.get(), bytes);
      CHECK(bits_differ(want, got) == 0);
    }
}
