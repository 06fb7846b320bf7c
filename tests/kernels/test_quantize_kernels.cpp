// Block quantization, dequantization and fused fake quantization on the device against
// lpx::quantize() / dequantize() / fake_quantize_values() (the CPU oracle): codes, scales
// and values bit for bit (a NaN value equals any NaN: its payload is the executor's),
// over MX / NVFP4 / 1x128 / 16x16 / per-tensor formats, rows and columns, ragged shapes and special
// inputs; the argument checks always (they precede any CUDA call).
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

namespace {

// Bits equal, or both NaN (a NaN's payload is the executor's; see kernels/quantize.hpp).
size_t value_mismatches(const std::vector<float>& a, const std::vector<float>& b) {
  size_t bad = a.size() != b.size() ? 1 : 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i)
    bad += float_to_bits(a[i]) != float_to_bits(b[i]) && !(a[i] != a[i] && b[i] != b[i]);
  return bad;
}

const char* const kSpecs[] = {"mxfp8_e4m3", "mxfp8_e5m2", "mxfp6_e3m2", "mxfp6_e2m3", "mxfp4",
                              "mxint8", "e2m1:b32:e8m0:rceil", "e4m3:b32:e8m0:ceil",
                              "e2m1:b32:e8m0:even", "nvfp4", "nvfp4_2d", "fp8_block128",
                              "fp8_block128x128", "e4m3:b128:pow2", "e2m0:16x16:e8m0",
                              "fp8_tensor", "e5m2:tensor:fp32", "e4m3:tensor:pow2"};

}  // namespace

TEST_CASE("device quantize rejects what it cannot do, before any CUDA call") {
  std::vector<float> x(64, 1.0f);
  const std::vector<int64_t> s2{2, 32}, s3{2, 2, 16};
  const BlockFormat mx = parse_block_format("mxfp8_e4m3");
  CHECK_THROWS_AS(kernels::quantize_host(x, s3, mx, {}), std::invalid_argument);
  CHECK_THROWS_AS(kernels::quantize_host(std::span<const float>(x).first(10), s2, mx, {}),
                  std::invalid_argument);
  CHECK_THROWS_AS(kernels::quantize_host(x, s2, parse_block_format("e4m3:channel:fp32"), {}),
                  std::invalid_argument);
  QuantizeOptions bad;
  bad.sr_bits = 40;
  CHECK_THROWS_AS(kernels::quantize_host(x, s2, mx, bad), std::invalid_argument);
  AmaxHistory h;
  QuantizeOptions delayed;
  delayed.history = &h;
  CHECK_THROWS_AS(kernels::quantize_host(x, s2, parse_block_format("e4m3:b128:fp32"), delayed),
                  std::invalid_argument);
  QuantizeOptions piece;
  piece.whole_tensor_amax = TensorAmax{0x3f800000u, 0x3f800000u};
  CHECK_THROWS_AS(kernels::quantize_host(x, s2, parse_block_format("nvfp4"), piece),
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

TEST_CASE("device dequantize and fake_quantize check their arguments before any CUDA call") {
  std::vector<float> x(64, 1.0f), out(64);
  const std::vector<int64_t> s2{2, 32}, s3{2, 2, 16};
  const BlockFormat mx = parse_block_format("mxfp8_e4m3");
  const BlockFormat nv = parse_block_format("nvfp4");
  // dequantize_host: the same checks as lpx::dequantize.
  QuantizedTensor q = quantize({x, s2}, mx);
  CHECK_NOTHROW(dequantize(q, out));
  QuantizedTensor bad = q;
  bad.codes.resize(10);
  CHECK_THROWS_AS(kernels::dequantize_host(bad, out), std::invalid_argument);
  bad = q;
  bad.scale_codes.pop_back();
  CHECK_THROWS_AS(kernels::dequantize_host(bad, out), std::invalid_argument);
  bad = q;
  bad.shape = s3;
  CHECK_THROWS_AS(kernels::dequantize_host(bad, out), std::invalid_argument);
  CHECK_THROWS_AS(kernels::dequantize_host(q, std::span<float>(out).first(32)),
                  std::invalid_argument);
  QuantizedTensor qn = quantize({x, s2}, nv);
  qn.tensor_scale.reset();
  CHECK_THROWS_WITH(kernels::dequantize_host(qn, out), Catch::Contains("tensor scale"));
  bad = q;
  bad.format = parse_block_format("fp8_tensor");
  CHECK_THROWS_AS(kernels::dequantize_host(bad, out), std::invalid_argument);
  // dequantize_device: null pointers, a two-level format without its tensor scale.
  std::vector<uint8_t> codes(64), sc(2);
  CHECK_THROWS_AS(kernels::dequantize_device(nullptr, sc.data(), nullptr, nullptr, 2, 32, mx, false,
                                             out.data()),
                  std::invalid_argument);
  CHECK_THROWS_AS(kernels::dequantize_device(codes.data(), nullptr, nullptr, nullptr, 2, 32, mx,
                                             false, out.data()),
                  std::invalid_argument);
  CHECK_THROWS_AS(kernels::dequantize_device(codes.data(), sc.data(), nullptr, nullptr, 2, 32, mx,
                                             false, nullptr),
                  std::invalid_argument);
  CHECK_THROWS_WITH(kernels::dequantize_device(codes.data(), sc.data(), nullptr, nullptr, 2, 32, nv,
                                               false, out.data()),
                    Catch::Contains("tensor_scale"));
  // fake_quantize: sizes, rank, options, pointers.
  CHECK_THROWS_AS(kernels::fake_quantize_host(x, s2, std::span<float>(out).first(63), mx, {}),
                  std::invalid_argument);
  CHECK_THROWS_AS(kernels::fake_quantize_host(x, s3, out, mx, {}), std::invalid_argument);
  QuantizeOptions sr40;
  sr40.sr_bits = 40;
  CHECK_THROWS_WITH(kernels::fake_quantize_host(x, s2, out, mx, sr40), Catch::Contains("sr_bits"));
  CHECK_THROWS_AS(kernels::fake_quantize_device(x.data(), 2, 32, mx, {}, nullptr),
                  std::invalid_argument);
  CHECK_THROWS_AS(kernels::fake_quantize_device(nullptr, 2, 32, mx, {}, out.data()),
                  std::invalid_argument);
  CHECK_THROWS_AS(kernels::fake_quantize_device(x.data(), 2, 32, parse_block_format("e4m3:channel:fp32"),
                                                {}, out.data()),
                  std::invalid_argument);
  // Empty tensors are valid and touch no device.
  CHECK_NOTHROW(kernels::fake_quantize_device(nullptr, 0, 32, mx, {}, nullptr));
  const std::vector<int64_t> empty{0, 32};
  CHECK(kernels::fake_quantize_host({}, empty, {}, mx, {}).scale_codes.empty());
  if (!kernels::cuda_available()) {
    CHECK_THROWS_AS(kernels::dequantize_host(q, out), std::runtime_error);
    CHECK_THROWS_AS(kernels::fake_quantize_host(x, s2, out, mx, {}), std::runtime_error);
  }
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
  for (const char* spec : kSpecs) {
    for (int axis : {-1, 0}) {
      for (Rounding r : {Rounding::rne, Rounding::sr}) {
        BlockFormat f = parse_block_format(spec);
        f.block.axis = axis;
        INFO(spec << " axis " << axis << " " << rounding_name(r));
        QuantizeOptions o;
        o.round = r;
        o.seed = 11;
        o.stream = 2;
        o.margin = r == Rounding::sr ? 1 : 0;  // fp32 scales: max / amax / 2^margin
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

TEST_CASE("device dequantize and fused fake_quantize equal the CPU bit for bit") {
  if (!kernels::cuda_available()) {
    WARN("skipped: no CUDA device (" << kernels::device_description() << ")");
    return;
  }
  const std::vector<int64_t> shape{45, 203};  // ragged in both directions
  std::vector<float> x(static_cast<size_t>(shape[0] * shape[1]));
  for (size_t i = 0; i < x.size(); ++i) {
    const uint32_t r = random_bits(5, 1, i);
    x[i] = static_cast<float>(static_cast<int32_t>(r)) * 0x1p-31f * (i % 5 == 0 ? 300.0f : 1.0f);
    if (i % 997 == 0) x[i] = std::numeric_limits<float>::infinity();
    if (i % 1999 == 0) x[i] = -2e-39f;  // float32 subnormal
  }
  for (size_t i = 16 * 203; i < 17 * 203; ++i) x[i] = 0.0f;  // a zero row
  for (const char* spec : kSpecs) {
    for (int axis : {-1, 0}) {
      for (Rounding r : {Rounding::rne, Rounding::sr}) {
        for (bool headroom : {false, true}) {
          BlockFormat f = parse_block_format(spec);
          f.block.axis = axis;
          INFO(spec << " axis " << axis << " " << rounding_name(r) << " headroom " << headroom);
          QuantizeOptions o;
          o.round = r;
          o.seed = 23;
          o.stream = 4;
          o.headroom_3_4 = headroom;
          o.flush_subnormal_inputs = headroom;  // both options on or off
          // dequantize: the CPU's codes and scales through the device.
          const QuantizedTensor q = quantize({x, shape}, f, o);
          std::vector<float> cpu(x.size()), dev(x.size());
          dequantize(q, cpu);
          kernels::dequantize_host(q, dev);
          CHECK(value_mismatches(cpu, dev) == 0);
          // fake_quantize: values, scales and tensor scale.
          std::vector<float> cpu_fq(x.size()), dev_fq(x.size());
          const QuantizedTensor cq = fake_quantize_values({x, shape}, cpu_fq, f, o);
          const QuantizedTensor dq = kernels::fake_quantize_host(x, shape, dev_fq, f, o);
          CHECK(value_mismatches(cpu_fq, dev_fq) == 0);
          CHECK(dq.codes.empty());
          CHECK(cq.scale_shape == dq.scale_shape);
          CHECK(cq.scale_codes == dq.scale_codes);
          REQUIRE(cq.scale_values.size() == dq.scale_values.size());
          CHECK(std::memcmp(cq.scale_values.data(), dq.scale_values.data(),
                            cq.scale_values.size() * sizeof(float)) == 0);
          CHECK(cq.tensor_scale.has_value() == dq.tensor_scale.has_value());
          if (cq.tensor_scale && dq.tensor_scale)
            CHECK(float_to_bits(*cq.tensor_scale) == float_to_bits(*dq.tensor_scale));
        }
      }
    }
  }
}

TEST_CASE("quantize_both checks its views before any CUDA call") {
  std::vector<float> x(64 * 32, 1.0f);
  std::vector<uint8_t> codes(x.size()), codes_t(x.size()), sc(64), sc_t(64);
  const BlockFormat mx = parse_block_format("mxfp8_e4m3");
  const auto in = kernels::DeviceTensor::values(x.data(), 64, 32);
  const auto rows = kernels::quantized_view(codes.data(), kernels::Storage::code8, 64, 32, mx,
                                            sc.data(), nullptr, nullptr);
  const auto cols = kernels::quantized_view(codes_t.data(), kernels::Storage::code8, 32, 64, mx,
                                            sc_t.data(), nullptr, nullptr);
  // The column output must have the transpose's shape, not x's.
  const auto not_transposed = kernels::quantized_view(codes_t.data(), kernels::Storage::code8, 64,
                                                      32, mx, sc_t.data(), nullptr, nullptr);
  CHECK_THROWS_WITH(kernels::quantize_both_device(in, rows, {}, not_transposed, {}),
                    Catch::Contains("transpose"));
  CHECK_THROWS_WITH(kernels::quantize_both_device(in, cols, {}, cols, {}),
                    Catch::Contains("shapes differ"));
  // Outputs need scales, and codes or float32 values (not bfloat16).
  kernels::DeviceTensor no_scales = cols;
  no_scales.scales = {};
  CHECK_THROWS_WITH(kernels::quantize_both_device(in, rows, {}, no_scales, {}),
                    Catch::Contains("no block scales"));
  kernels::DeviceTensor bf16 = rows;
  bf16.storage = kernels::Storage::bf16;
  CHECK_THROWS_AS(kernels::quantize_both_device(in, bf16, {}, cols, {}), std::invalid_argument);
  // Codes in, options each checked.
  CHECK_THROWS_AS(kernels::quantize_both_device(rows, rows, {}, cols, {}), std::invalid_argument);
  QuantizeOptions sr40;
  sr40.sr_bits = 40;
  CHECK_THROWS_WITH(kernels::quantize_both_device(in, rows, {}, cols, sr40), Catch::Contains("sr_bits"));
  QuantizeOptions piece;
  piece.whole_tensor_amax = TensorAmax{};
  CHECK_THROWS_AS(kernels::quantize_both_host(x, 64, 32, mx, piece, mx, {}), std::invalid_argument);
  // Host form: the data must match the shape; per-channel blocks are not on the device.
  CHECK_THROWS_AS(kernels::quantize_both_host(std::span<const float>(x).first(100), 64, 32, mx, {}, mx, {}),
                  std::invalid_argument);
  CHECK_THROWS_AS(kernels::quantize_both_host(x, 64, 32, mx, {}, parse_block_format("e4m3:channel:fp32"), {}),
                  std::invalid_argument);
  // Empty: valid, shapes and scale grids of both layouts, no device touched.
  const kernels::QuantizedPair e = kernels::quantize_both_host({}, 0, 32, mx, {}, mx, {});
  CHECK(e.rows.shape == std::vector<int64_t>{0, 32});
  CHECK(e.cols.shape == std::vector<int64_t>{32, 0});
  if (!kernels::cuda_available())
    CHECK_THROWS_AS(kernels::quantize_both_host(x, 64, 32, mx, {}, mx, {}), std::runtime_error);
}

TEST_CASE("quantize_both equals lpx::quantize of x and of its transpose bit for bit") {
  if (!kernels::cuda_available()) {
    WARN("skipped: no CUDA device (" << kernels::device_description() << ")");
    return;
  }
  // The transpose is built here, element by element, so the oracle is lpx::quantize on an
  // ordinary row-major tensor: nothing of the device path's transposed addressing.
  struct Case {
    const char *rows, *cols;
  };
  const Case cases[] = {{"mxfp8_e4m3", "mxfp8_e4m3"}, {"mxfp4", "mxfp4"},
                        {"nvfp4", "nvfp4"},           {"mxfp8_e5m2", "nvfp4"},
                        {"e2m1:b8:e8m0:rceil", "e4m3:b16:e8m0:ceil"},
                        {"mxfp8_e4m3", "fp8_block128"}};  // 1x128: the two-call path
  for (const auto& [rows, cols] : {std::pair<int64_t, int64_t>{77, 301}, {64, 96}, {1, 40}}) {
    std::vector<float> x(static_cast<size_t>(rows * cols)), xt(x.size());
    for (size_t i = 0; i < x.size(); ++i) {
      const uint32_t r = random_bits(7, 3, i);
      x[i] = static_cast<float>(static_cast<int32_t>(r)) * 0x1p-31f * (i % 11 == 0 ? 500.0f : 1.0f);
      if (i % 1013 == 7) x[i] = std::numeric_limits<float>::quiet_NaN();
      if (i % 2011 == 5) x[i] = -std::numeric_limits<float>::infinity();
      if (i % 503 == 2) x[i] = 3e-39f;  // float32 subnormal
    }
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols; ++c)
        xt[static_cast<size_t>(c * rows + r)] = x[static_cast<size_t>(r * cols + c)];
    const std::vector<int64_t> shape{rows, cols}, shape_t{cols, rows};
    for (const Case& k : cases)
      for (Rounding round : {Rounding::rne, Rounding::sr})
        for (bool flush : {false, true}) {
          INFO(k.rows << " / " << k.cols << " on " << rows << " x " << cols << " "
                      << rounding_name(round) << " flush " << flush);
          const BlockFormat fr = parse_block_format(k.rows), fc = parse_block_format(k.cols);
          QuantizeOptions orow, ocol;
          orow.round = ocol.round = round;
          orow.seed = ocol.seed = 31;
          orow.stream = 1;
          ocol.stream = 2;  // the two layouts draw different random bits, as roles do
          orow.flush_subnormal_inputs = ocol.flush_subnormal_inputs = flush;
          ocol.headroom_3_4 = flush;
          const QuantizedTensor want_r = quantize({x, shape}, fr, orow);
          const QuantizedTensor want_c = quantize({xt, shape_t}, fc, ocol);
          const kernels::QuantizedPair got = kernels::quantize_both_host(x, rows, cols, fr, orow, fc, ocol);
          for (const auto& [want, have] : {std::pair{&want_r, &got.rows}, std::pair{&want_c, &got.cols}}) {
            CHECK(want->shape == have->shape);
            CHECK(want->scale_shape == have->scale_shape);
            CHECK(want->codes == have->codes);
            CHECK(want->scale_codes == have->scale_codes);
            REQUIRE(want->scale_values.size() == have->scale_values.size());
            CHECK(std::memcmp(want->scale_values.data(), have->scale_values.data(),
                              want->scale_values.size() * sizeof(float)) == 0);
            REQUIRE(want->tensor_scale.has_value() == have->tensor_scale.has_value());
            if (want->tensor_scale)
              CHECK(float_to_bits(*want->tensor_scale) == float_to_bits(*have->tensor_scale));
          }
        }
  }
}
