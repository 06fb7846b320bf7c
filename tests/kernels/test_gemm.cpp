// GEMMs over quantized operands (kernels/gemm.hpp): the path table, cuBLASLt's tiled
// block-scale layout, the argument checks (every build, before any CUDA call), and on a
// device the result against dequantize-on-the-CPU then a double-precision product; the
// float32 GEMM of a chosen order (gemm_f32_device) against its definition.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <set>
#include <stdexcept>
#include <vector>

#include "lpx/formats/quantize.hpp"
#include "lpx/kernels/device.hpp"
#include "lpx/kernels/gemm.hpp"
#include "lpx/kernels/memory.hpp"
#include "lpx/numerics/philox.hpp"

using namespace lpx;
using kernels::GemmPath;

namespace {

// cuBLAS "1D block scaling factors layout" examples: row 1 is 16 bytes in, row 32 is 4
// bytes in, the next K-block is the next byte, the next 4 K-blocks the next 512-byte tile,
// the next 128 rows come after all K-tiles of the first 128.
static_assert(kernels::block_scale_tile_offset(0, 0, 8) == 0);
static_assert(kernels::block_scale_tile_offset(1, 0, 8) == 16);
static_assert(kernels::block_scale_tile_offset(32, 0, 8) == 4);
static_assert(kernels::block_scale_tile_offset(0, 3, 8) == 3);
static_assert(kernels::block_scale_tile_offset(0, 4, 8) == 512);
static_assert(kernels::block_scale_tile_offset(128, 0, 8) == 1024);
static_assert(kernels::block_scale_tile_offset(127, 7, 8) == 512 + 31 * 16 + 3 * 4 + 3);
static_assert(kernels::block_scale_tile_bytes(129, 5) == 2 * 2 * 512);

BlockFormat fmt(const char* spec) { return parse_block_format(spec); }

}  // namespace

TEST_CASE("block_scale_tile_offset is a bijection onto the padded tiles") {
  for (size_t rows : {1, 100, 128, 200, 384}) {
    for (size_t kb : {1, 3, 4, 9, 16}) {
      INFO(rows << " rows, " << kb << " K-blocks");
      const size_t prow = (rows + 127) / 128 * 128, pcol = (kb + 3) / 4 * 4;
      const size_t bytes = kernels::block_scale_tile_bytes(rows, kb);
      CHECK(bytes == prow * pcol);
      std::set<size_t> seen;
      for (size_t r = 0; r < prow; ++r)
        for (size_t c = 0; c < pcol; ++c) {
          const size_t o = kernels::block_scale_tile_offset(r, c, kb);
          CHECK(o < bytes);
          seen.insert(o);
        }
      CHECK(seen.size() == bytes);
    }
  }
}

TEST_CASE("choose_gemm_path: block-scaled on sm_100+, FP8 128-blocks on sm_90, per-tensor FP8 on sm_89+, else BF16") {
  const BlockFormat mx = fmt("mxfp8_e4m3"), mx5 = fmt("mxfp8_e5m2"), nv = fmt("nvfp4");
  CHECK(kernels::choose_gemm_path(mx, mx, 100) == GemmPath::mxfp8_block_scaled);
  CHECK(kernels::choose_gemm_path(mx, mx5, 100) == GemmPath::mxfp8_block_scaled);
  CHECK(kernels::choose_gemm_path(mx5, mx5, 100) == GemmPath::bf16_fallback);  // no e5m2 x e5m2
  CHECK(kernels::choose_gemm_path(mx, mx, 90) == GemmPath::bf16_fallback);
  CHECK(kernels::choose_gemm_path(nv, nv, 100) == GemmPath::nvfp4_block_scaled);
  CHECK(kernels::choose_gemm_path(nv, nv, 120) == GemmPath::nvfp4_block_scaled);
  CHECK(kernels::choose_gemm_path(nv, nv, 90) == GemmPath::bf16_fallback);
  CHECK(kernels::choose_gemm_path(mx, nv, 100) == GemmPath::bf16_fallback);  // mixed formats
  BlockFormat cols = mx;
  cols.block.axis = 0;  // blocks along the rows, not k: no block-scaled kernel takes them
  CHECK(kernels::choose_gemm_path(cols, mx, 100) == GemmPath::bf16_fallback);
  CHECK(kernels::choose_gemm_path(fmt("mxfp4"), fmt("mxfp4"), 100) == GemmPath::mxfp4_block_scaled);
  CHECK(kernels::choose_gemm_path(fmt("mxfp4"), fmt("mxfp4"), 90) == GemmPath::bf16_fallback);
  CHECK(kernels::choose_gemm_path(fmt("mxfp6_e3m2"), fmt("mxfp6_e3m2"), 100) == GemmPath::bf16_fallback);
  CHECK(kernels::choose_gemm_path(fmt("fp8_tensor"), fmt("fp8_tensor"), 90) == GemmPath::fp8_tensor);
  CHECK(kernels::choose_gemm_path(fmt("fp8_tensor"), fmt("fp8_tensor"), 80) ==
        GemmPath::bf16_fallback);
  // DeepSeek-V3's operands: cuBLASLt's float32 128-block scale modes exist on sm_90 only.
  CHECK(kernels::choose_gemm_path(fmt("fp8_block128"), fmt("fp8_block128x128"), 90) ==
        GemmPath::fp8_block128_scaled);
  CHECK(kernels::choose_gemm_path(fmt("fp8_block128"), fmt("fp8_block128"), 90) ==
        GemmPath::fp8_block128_scaled);
  CHECK(kernels::choose_gemm_path(fmt("e4m3:b128:pow2"), fmt("fp8_block128x128"), 90) ==
        GemmPath::fp8_block128_scaled);
  CHECK(kernels::choose_gemm_path(fmt("fp8_block128"), fmt("fp8_block128x128"), 89) ==
        GemmPath::bf16_fallback);
  CHECK(kernels::choose_gemm_path(fmt("fp8_block128"), fmt("fp8_block128x128"), 100) ==
        GemmPath::bf16_fallback);
  // X must be the 1x128 operand; 128x128 x 128x128, e5m2 x e5m2 and e8m0 scales are not taken.
  CHECK(kernels::choose_gemm_path(fmt("fp8_block128x128"), fmt("fp8_block128x128"), 90) ==
        GemmPath::bf16_fallback);
  CHECK(kernels::choose_gemm_path(fmt("e5m2:b128:fp32"), fmt("e5m2:128x128:fp32"), 90) ==
        GemmPath::bf16_fallback);
  CHECK(kernels::choose_gemm_path(fmt("e4m3:b128:e8m0"), fmt("fp8_block128x128"), 90) ==
        GemmPath::bf16_fallback);
  CHECK_THROWS_AS(kernels::choose_gemm_path(fmt("e4m3:channel:fp32"), mx, 90), std::invalid_argument);
  for (GemmPath p : {GemmPath::automatic, GemmPath::mxfp8_block_scaled, GemmPath::nvfp4_block_scaled,
                     GemmPath::mxfp4_block_scaled, GemmPath::fp8_tensor, GemmPath::bf16_fallback,
                     GemmPath::fp8_block128_scaled})
    CHECK(kernels::gemm_path_name(p) != "?");
}

TEST_CASE("the float32 128-block scale layouts place every scale once, rows or K-blocks fastest") {
  for (const auto& [rows, kb] : {std::pair<size_t, size_t>{5, 3}, {8, 4}, {130, 7}}) {
    std::vector<int> hits(kernels::vec128_scale_count(rows, kb)), hits2(kernels::blk128_scale_count(rows, kb));
    for (size_t r = 0; r < rows; ++r)
      for (size_t c = 0; c < kb; ++c) {
        ++hits.at(kernels::vec128_scale_index(r, c, rows));
        ++hits2.at(kernels::blk128_scale_index(r, c, kb));
      }
    for (size_t i = 0; i < hits.size(); ++i) CHECK(hits[i] == (i % ((rows + 3) / 4 * 4) < rows ? 1 : 0));
    for (size_t i = 0; i < hits2.size(); ++i) CHECK(hits2[i] == (i % ((kb + 3) / 4 * 4) < kb ? 1 : 0));
    CHECK(kernels::vec128_scale_index(1, 0, rows) == 1);  // VEC128: rows fastest
    CHECK(kernels::blk128_scale_index(0, 1, kb) == 1);    // BLK128x128: K-blocks fastest
  }
}

TEST_CASE("raw gemm checks its arguments before any CUDA call") {
  using kernels::GemmDtype;
  alignas(16) static uint8_t x[64 * 64 + 16], w[64 * 64 + 16];
  alignas(16) static float y[64 * 64 + 4], scale[8] = {1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f};
  const kernels::GemmOperand e4{x, GemmDtype::e4m3, scale}, e4w{w, GemmDtype::e4m3, scale + 4};
  const kernels::GemmOperand e5{x, GemmDtype::e5m2, scale}, bf{x, GemmDtype::bf16, nullptr};
  CHECK_THROWS_WITH(kernels::gemm(0, 64, 64, e4, e4w, y, GemmDtype::f32), Catch::Contains("zero"));
  CHECK_THROWS_WITH(kernels::gemm(64, 64, 40, e4, e4w, y, GemmDtype::f32), Catch::Contains("k % 16"));
  CHECK_THROWS_AS(kernels::gemm(64, 64, 64, e4, bf, y, GemmDtype::f32), std::invalid_argument);
  CHECK_THROWS_WITH(kernels::gemm(64, 64, 64, e5, e5, y, GemmDtype::f32), Catch::Contains("e5m2 x e5m2"));
  CHECK_THROWS_AS(kernels::gemm(64, 64, 64, e4, e4w, nullptr, GemmDtype::f32), std::invalid_argument);
  const kernels::GemmOperand bf_scaled{x, GemmDtype::bf16, scale};
  CHECK_THROWS_WITH(kernels::gemm(64, 64, 64, bf_scaled, bf, y, GemmDtype::f32), Catch::Contains("FP8 operands only"));
  // Misaligned matrices: one line before any CUDA call (cuBLASLt would fail or fault).
  const kernels::GemmOperand shifted{x + 1, GemmDtype::e4m3, scale};
  CHECK_THROWS_WITH(kernels::gemm(64, 64, 64, shifted, e4w, y, GemmDtype::f32), Catch::Contains("16-byte aligned"));
  CHECK_THROWS_WITH(kernels::gemm(64, 64, 64, e4, e4w, y + 1, GemmDtype::f32), Catch::Contains("16-byte aligned"));
  // a per-tensor scale 4 bytes into its buffer: cuBLASLt returned NOT_SUPPORTED on an H200
  const kernels::GemmOperand e4w_scale_shifted{w, GemmDtype::e4m3, scale + 1};
  CHECK_THROWS_WITH(kernels::gemm(64, 64, 64, e4, e4w_scale_shifted, y, GemmDtype::f32),
                    Catch::Contains("16-byte aligned"));
  if (!kernels::cuda_available())
    CHECK_THROWS_AS(kernels::gemm(64, 64, 64, e4, e4w, y, GemmDtype::f32), std::runtime_error);
}

TEST_CASE("quantized gemm checks its arguments before any CUDA call") {
  const BlockFormat mx = fmt("mxfp8_e4m3"), nv = fmt("nvfp4");
  std::vector<uint8_t> bytes(64 * 64);
  std::vector<float> floats(64);
  kernels::QuantizedOperand a;
  a.format = mx;
  a.codes = bytes.data();
  a.scale_codes = bytes.data();
  std::vector<float> y(64 * 64);
  const auto f32 = kernels::GemmDtype::f32;
  CHECK_THROWS_AS(kernels::gemm(0, 64, 64, a, a, y.data(), f32), std::invalid_argument);
  CHECK_THROWS_WITH(kernels::gemm(64, 64, 48, a, a, y.data(), f32), Catch::Contains("k % 32"));
  CHECK_THROWS_AS(kernels::gemm(64, 64, 64, a, a, nullptr, f32), std::invalid_argument);
  CHECK_THROWS_AS(kernels::gemm(64, 64, 64, a, a, y.data(), kernels::GemmDtype::e4m3),
                  std::invalid_argument);
  kernels::QuantizedOperand no_scales = a;
  no_scales.scale_codes = nullptr;
  CHECK_THROWS_WITH(kernels::gemm(64, 64, 64, no_scales, a, y.data(), f32), Catch::Contains("scales"));
  kernels::QuantizedOperand two_level = a;
  two_level.format = nv;  // without its tensor scale
  CHECK_THROWS_WITH(kernels::gemm(64, 64, 64, a, two_level, y.data(), f32),
                    Catch::Contains("tensor_scale"));
  // A forced path that does not take the formats.
  CHECK_THROWS_AS(kernels::gemm(64, 64, 64, a, a, y.data(), f32, nullptr, GemmPath::nvfp4_block_scaled),
                  std::invalid_argument);
  // cuBLASLt's FP8 paths need 16-byte aligned matrices: a forced path refuses others.
  std::vector<uint8_t> wide(64 * 64 + 16);
  kernels::QuantizedOperand shifted = a;
  shifted.codes = wide.data() + (16 - reinterpret_cast<uintptr_t>(wide.data()) % 16) % 16 + 1;
  CHECK_THROWS_WITH(kernels::gemm(64, 64, 64, shifted, a, y.data(), f32, nullptr, GemmPath::mxfp8_block_scaled),
                    Catch::Contains("16-byte aligned"));
  // The 128-block FP8 path wants whole K-blocks.
  kernels::QuantizedOperand b128 = a, t128 = a;
  b128.format = fmt("fp8_block128");
  t128.format = fmt("fp8_block128x128");
  b128.scale_values = t128.scale_values = floats.data();
  CHECK_THROWS_WITH(kernels::gemm(64, 64, 96, b128, t128, y.data(), f32, nullptr, GemmPath::fp8_block128_scaled),
                    Catch::Contains("k % 128"));
  kernels::QuantizedOperand channel = a;
  channel.format = fmt("e4m3:channel:fp32");
  channel.scale_values = floats.data();
  CHECK_THROWS_AS(kernels::gemm(64, 64, 64, channel, a, y.data(), f32), std::invalid_argument);
  if (!kernels::cuda_available())
    CHECK_THROWS_AS(kernels::gemm(64, 64, 64, a, a, y.data(), f32), std::runtime_error);

  // gemm_host: shapes, codes and scales against the formats.
  std::vector<float> x(64 * 64, 0.5f);
  const std::vector<int64_t> s{64, 64}, s_k96{64, 96};
  const QuantizedTensor q = quantize({x, s}, mx);
  CHECK_THROWS_AS(kernels::gemm_host(q, q, std::span<float>(y).first(10)), std::invalid_argument);
  std::vector<float> x96(64 * 96, 0.5f);
  const QuantizedTensor q96 = quantize({x96, s_k96}, mx);
  CHECK_THROWS_WITH(kernels::gemm_host(q, q96, y), Catch::Contains("k ="));
  QuantizedTensor bad = q;
  bad.scale_codes.pop_back();
  CHECK_THROWS_AS(kernels::gemm_host(bad, q, y), std::invalid_argument);
  bad = q;
  bad.codes.pop_back();
  CHECK_THROWS_AS(kernels::gemm_host(q, bad, y), std::invalid_argument);
  QuantizedTensor qn = quantize({x, s}, nv);
  qn.tensor_scale.reset();
  CHECK_THROWS_WITH(kernels::gemm_host(qn, qn, y), Catch::Contains("tensor scale"));
  if (!kernels::cuda_available()) CHECK_THROWS_AS(kernels::gemm_host(q, q, y), std::runtime_error);
}

TEST_CASE("quantized gemm on the device equals the dequantized product up to accumulation") {
  if (!kernels::cuda_available()) {
    WARN("skipped: no CUDA device (" << kernels::device_description() << ")");
    return;
  }
  const int64_t m = 200, n = 136, k = 512;  // m, n not multiples of 128: padded scale tiles
  std::vector<float> xv(static_cast<size_t>(m * k)), wv(static_cast<size_t>(n * k));
  for (size_t i = 0; i < xv.size(); ++i)
    xv[i] = static_cast<float>(static_cast<int32_t>(random_bits(1, 0, i))) * 0x1p-31f *
            (i % 97 == 0 ? 40.0f : 1.0f);
  for (size_t i = 0; i < wv.size(); ++i)
    wv[i] = static_cast<float>(static_cast<int32_t>(random_bits(2, 0, i))) * 0x1p-33f;
  const std::vector<int64_t> sx{m, k}, sw{n, k};
  const std::pair<const char*, const char*> cases[] = {
      {"mxfp8_e4m3", "mxfp8_e4m3"}, {"nvfp4", "nvfp4"}, {"mxfp4", "mxfp4"}, {"fp8_tensor", "fp8_tensor"},
      {"fp8_block128", "fp8_block128"}, {"fp8_block128", "fp8_block128x128"}};
  for (const auto& [spec, wspec] : cases) {
    INFO(spec << " x " << wspec);
    const BlockFormat f = fmt(spec);
    const QuantizedTensor qx = quantize({xv, sx}, f), qw = quantize({wv, sw}, fmt(wspec));
    std::vector<float> dx(xv.size()), dw(wv.size()), y(static_cast<size_t>(m * n));
    dequantize(qx, dx);
    dequantize(qw, dw);
    const GemmPath path = kernels::gemm_host(qx, qw, y);
    INFO("path " << kernels::gemm_path_name(path));
    // fp32 scales: each dequantized value is rounded to BF16 in the fallback.
    const bool rounded = path == GemmPath::bf16_fallback && f.scale == ScaleFormat::fp32;
    const double bound = rounded ? 0x1p-7 : 0x1p-10;
    double worst = 0;
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double ref = 0, mag = 0;
        for (int64_t t = 0; t < k; ++t) {
          const double p = static_cast<double>(dx[static_cast<size_t>(i * k + t)]) *
                           static_cast<double>(dw[static_cast<size_t>(j * k + t)]);
          ref += p;
          mag += std::fabs(p);
        }
        const double err = std::fabs(static_cast<double>(y[static_cast<size_t>(i * n + j)]) - ref);
        worst = std::max(worst, mag > 0 ? err / mag : err);
      }
    CHECK(worst <= bound);
  }
}

// --- Float32 GEMMs in a chosen order (gemm_f32_device).

TEST_CASE("gemm_f32_device checks its arguments before any CUDA call") {
  static float a[64], b[64], c[64];
  const LimitedSum fp32{};
  using kernels::gemm_f32_device;
  CHECK_THROWS_WITH(gemm_f32_device(false, false, a, b, c, -1, 4, 4, fp32, false, GemmOrder::exact),
                    Catch::Contains("negative size"));
  CHECK_THROWS_WITH(gemm_f32_device(false, false, a, b, c, 4, 4, 4, LimitedSum{0, 0}, false, GemmOrder::exact),
                    Catch::Contains("mantissa_bits 0"));
  CHECK_THROWS_WITH(gemm_f32_device(false, false, a, b, c, 4, 4, 4, LimitedSum{24, 0}, false, GemmOrder::exact),
                    Catch::Contains("mantissa_bits 24"));
  CHECK_THROWS_WITH(gemm_f32_device(false, false, a, b, c, 4, 4, 4, LimitedSum{10, -1}, false, GemmOrder::exact),
                    Catch::Contains("promote_every"));
  CHECK_THROWS_AS(gemm_f32_device(false, false, nullptr, b, c, 4, 4, 4, fp32, false, GemmOrder::exact),
                  std::invalid_argument);
  CHECK_THROWS_AS(gemm_f32_device(false, false, a, b, nullptr, 4, 4, 4, fp32, false, GemmOrder::exact),
                  std::invalid_argument);
  if (!kernels::cuda_available())
    CHECK_THROWS_WITH(gemm_f32_device(false, false, a, b, c, 4, 4, 4, fp32, false, GemmOrder::exact),
                      Catch::StartsWith("no CUDA device"));
}

TEST_CASE("gemm_f32_device's exact order is one fma per product in increasing k, in every layout") {
  if (!kernels::cuda_available()) {
    WARN("skipped: no CUDA device (" << kernels::device_description() << ")");
    return;
  }
  // ragged against the kernel's 64x64 tiles and 16-deep slices
  const int64_t m = 131, n = 67, k = 83;
  std::vector<float> a(static_cast<size_t>(m * k)), b(static_cast<size_t>(k * n)), c0(static_cast<size_t>(m * n));
  for (size_t i = 0; i < a.size(); ++i)
    a[i] = static_cast<float>(static_cast<int32_t>(random_bits(3, 0, i))) * 0x1p-31f;
  for (size_t i = 0; i < b.size(); ++i)
    b[i] = static_cast<float>(static_cast<int32_t>(random_bits(4, 0, i))) * 0x1p-29f;
  for (size_t i = 0; i < c0.size(); ++i)
    c0[i] = static_cast<float>(static_cast<int32_t>(random_bits(5, 0, i))) * 0x1p-30f;
  kernels::DeviceBuffer da(a.size() * 4), db(b.size() * 4), dc(c0.size() * 4);
  kernels::copy_to_device(da.get(), a.data(), a.size() * 4);
  kernels::copy_to_device(db.get(), b.data(), b.size() * 4);
  for (bool at : {false, true})
    for (bool bt : {false, true})
      for (bool acc : {false, true}) {
        INFO("a_trans " << at << " b_trans " << bt << " accumulate " << acc);
        kernels::copy_to_device(dc.get(), c0.data(), c0.size() * 4);
        kernels::gemm_f32_device(at, bt, da.get<float>(), db.get<float>(), dc.get<float>(), m, n, k, LimitedSum{},
                                 acc, GemmOrder::exact);
        std::vector<float> got(c0.size());
        kernels::copy_to_host(got.data(), dc.get(), got.size() * 4);
        // the definition, written here with std::fma (the stored layouts read as the
        // kernel must read them)
        for (int64_t i = 0; i < m; ++i)
          for (int64_t j = 0; j < n; ++j) {
            float s = 0;
            for (int64_t t = 0; t < k; ++t)
              s = std::fma(a[static_cast<size_t>(at ? t * m + i : i * k + t)],
                           b[static_cast<size_t>(bt ? j * k + t : t * n + j)], s);
            const float want = acc ? c0[static_cast<size_t>(i * n + j)] + s : s;
            REQUIRE(got[static_cast<size_t>(i * n + j)] == want);
          }
      }
  // k = 0: c = 0, or unchanged when accumulating
  kernels::copy_to_device(dc.get(), c0.data(), c0.size() * 4);
  kernels::gemm_f32_device(false, false, da.get<float>(), db.get<float>(), dc.get<float>(), m, n, 0, LimitedSum{},
                           true, GemmOrder::exact);
  std::vector<float> same(c0.size());
  kernels::copy_to_host(same.data(), dc.get(), same.size() * 4);
  CHECK(same == c0);
  kernels::gemm_f32_device(false, false, da.get<float>(), db.get<float>(), dc.get<float>(), m, n, 0, LimitedSum{},
                           false, GemmOrder::exact);
  kernels::copy_to_host(same.data(), dc.get(), same.size() * 4);
  CHECK(std::all_of(same.begin(), same.end(), [](float v) { return v == 0.0f; }));
}
