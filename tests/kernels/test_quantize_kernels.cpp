// Block quantization on the device against lpx::quantize() (the CPU oracle), codes and
// scales bit for bit, over MX / NVFP4 / 1x128 / 16x16 formats, rows and columns, ragged
// shapes and special inputs; the argument checks always (they precede any CUDA call).
#include <catch2/catch.hpp>

#include <cstring>
#include <limits>
#include <stdexcept>
#include <vector>

#include "lpx/formats/quantize.hpp"
#include "lpx/kernels/device.hpp"
#include "lpx/kernels/quantize.hpp"
#include "lpx/numerics/float_bits.hpp"
#include "lpx/numerics/philox.hpp"

using namespace lpx;

TEST_CASE("device quantize rejects what it cannot do, before any CUDA call") {
  std::vector<float> x(64, 1.0f);
  const std::vector<int64_t> s2{2, 32}, s3{2, 2, 16};
  const BlockFormat mx = parse_block_format("mxfp8_e4m3");
  CHECK_THROWS_AS(kernels::quantize_host(x, s3, mx, {}), std::invalid_argument);
  CHECK_THROWS_AS(kernels::quantize_host(std::span<const float>(x).first(10), s2, mx, {}),
                  std::invalid_argument);
  CHECK_THROWS_AS(kernels::quantize_host(x, s2, parse_block_format("fp8_tensor"), {}),
                  std::invalid_argument);
  QuantizeOptions bad;
  bad.sr_bits = 40;
  CHECK_THROWS_AS(kernels::quantize_host(x, s2, mx, bad), std::invalid_argument);
  AmaxHistory h;
  QuantizeOptions delayed;
  delayed.history = &h;
  CHECK_THROWS_AS(kernels::quantize_host(x, s2, parse_block_format("e4m3:b128:fp32"), delayed),
                  std::invalid_argument);
  std::vector<uint8_t> codes(64);
  CHECK_THROWS_AS(kernels::quantize_device(nullptr, 2, 32, mx, {}, codes.data(), codes.data(),
                                           nullptr, nullptr),
                  std::invalid_argument);
  CHECK_THROWS_AS(kernels::quantize_device(x.data(), 2, 32, mx, {}, codes.data(), nullptr, nullptr,
                                           nullptr),
                  std::invalid_argument);
  if (!kernels::cuda_available())
    CHECK_THROWS_AS(kernels::quantize_host(x, s2, mx, {}), std::runtime_error);
}

TEST_CASE("device quantize equals lpx::quantize bit for bit") {
  if (!kernels::cuda_available()) {
    WARN("skipped: no CUDA device (" << kernels::device_description() << ")");
    return;
  }
  const std::vector<int64_t> shape{77, 301};  // ragged in both directions
  std::vector<float> x(static_cast<size_t>(shape[0] * shape[1]));
  for (size_t i = 0; i < x.size(); ++i) {
    const uint32_t r = random_bits(3, 0, i);
    x[i] = static_cast<float>(static_cast<int32_t>(r)) * 0x1p-31f * (i % 7 == 0 ? 1e3f : 1.0f);
    if (i % 1009 == 0) x[i] = std::numeric_limits<float>::quiet_NaN();
    if (i % 2003 == 0) x[i] = 1e-40f;  // float32 subnormal
  }
  for (size_t i = 32 * 301; i < 33 * 301; ++i) x[i] = 0.0f;  // a zero row
  for (const char* spec : {"mxfp8_e4m3", "mxfp8_e5m2", "mxfp6_e3m2", "mxfp6_e2m3", "mxfp4", "mxint8",
                           "e2m1:b32:e8m0:rceil", "e4m3:b32:e8m0:ceil", "e2m1:b32:e8m0:even",
                           "nvfp4", "nvfp4_2d", "fp8_block128", "fp8_block128x128", "e4m3:b128:pow2",
                           "e2m0:16x16:e8m0"}) {
    for (int axis : {-1, 0}) {
      for (Rounding r : {Rounding::rne, Rounding::sr}) {
        BlockFormat f = parse_block_format(spec);
        f.block.axis = axis;
        INFO(spec << " axis " << axis << " " << rounding_name(r));
        QuantizeOptions o;
        o.round = r;
        o.seed = 11;
        o.stream = 2;
        const QuantizedTensor cpu = quantize({x, shape}, f, o);
        const QuantizedTensor dev = kernels::quantize_host(x, shape, f, o);
        CHECK(cpu.scale_shape == dev.scale_shape);
        CHECK(cpu.codes == dev.codes);
        CHECK(cpu.scale_codes == dev.scale_codes);
        REQUIRE(cpu.scale_values.size() == dev.scale_values.size());
        CHECK(std::memcmp(cpu.scale_values.data(), dev.scale_values.data(),
                          cpu.scale_values.size() * sizeof(float)) == 0);
        CHECK(cpu.tensor_scale.has_value() == dev.tensor_scale.has_value());
        if (cpu.tensor_scale && dev.tensor_scale)
          CHECK(float_to_bits(*cpu.tensor_scale) == float_to_bits(*dev.tensor_scale));
      }
    }
  }
}
