// Shape arithmetic of the block quantizer at its edges: zero-element tensors (also with
// extents near 2^63), shapes whose extents multiply past int64, and blocks longer than
// their axis (one ragged block). docs/formats.md#block-shapes and #edge-semantics.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <vector>

#include "lpx/formats/block_format.hpp"
#include "lpx/formats/quantize.hpp"

using lpx::BlockFormat;
using lpx::parse_block_format;

namespace {
constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
const char* const kFormats[] = {"mxfp4", "nvfp4", "nvfp4_2d", "fp8_tensor", "fp8_block128",
                                "fp8_block128x128", "e4m3:channel:fp32", "e2m1:b32:pow2"};
}  // namespace

TEST_CASE("zero-element tensors quantize, dequantize and fake-quantize to nothing") {
  // Before: the grid of [0, 2^63 - 1] was computed as (extent + block - 1) / block, a
  // signed overflow (UBSan), which gave a negative grid extent; and a two-level format
  // returned no tensor scale, so fake_quantize() threw from its own dequantize().
  const std::vector<std::vector<int64_t>> shapes = {{0}, {0, 64}, {64, 0}, {0, kMax}, {kMax, 0}, {3, 0, 5}};
  for (const char* spec : kFormats) {
    const BlockFormat f = parse_block_format(spec);
    for (const auto& shape : shapes) {
      INFO(spec << " shape size " << shape.size() << " [" << shape[0] << ", " << shape.back() << "]");
      const lpx::TensorView<const float> x{{}, shape};
      const lpx::QuantizedTensor q = lpx::quantize(x, f);
      CHECK(q.codes.empty());
      CHECK(q.shape == shape);
      REQUIRE(q.scale_shape.size() == shape.size());
      int64_t blocks = 1;
      for (size_t d = 0; d < shape.size(); ++d) {
        CHECK(q.scale_shape[d] >= 0);
        CHECK(q.scale_shape[d] <= shape[d]);
        CHECK((q.scale_shape[d] == 0) == (shape[d] == 0));
        blocks *= q.scale_shape[d];
      }
      CHECK(blocks == 0);
      CHECK(q.scale_codes.size() + q.scale_values.size() == 0);
      CHECK(q.tensor_scale.has_value() == f.two_level());
      if (q.tensor_scale) CHECK(*q.tensor_scale == 1.0f);
      std::vector<float> none;
      CHECK_NOTHROW(lpx::dequantize(q, none));
      CHECK_NOTHROW(lpx::fake_quantize(x, none, f));
      CHECK_NOTHROW(lpx::fake_quantize_values(x, none, f));
      CHECK_NOTHROW(lpx::tensor_amax(x, f));
    }
  }
  // The grid of the extreme shapes, exactly: ceil((2^63 - 1) / 32) = 2^58.
  CHECK(lpx::scale_grid_shape(std::vector<int64_t>{0, kMax}, parse_block_format("mxfp4")) ==
        std::vector<int64_t>{0, int64_t{1} << 58});
  CHECK(lpx::scale_grid_shape(std::vector<int64_t>{0, kMax}, parse_block_format("fp8_tensor")) ==
        std::vector<int64_t>{0, 1});
  CHECK(lpx::scale_grid_shape(std::vector<int64_t>{kMax, 0}, parse_block_format("nvfp4_2d")) ==
        std::vector<int64_t>{(kMax >> 4) + 1, 0});
}

TEST_CASE("shapes whose extents multiply past int64 are refused, zero extent or not") {
  const BlockFormat f = parse_block_format("mxfp4");
  for (const std::vector<int64_t>& shape : {std::vector<int64_t>{0, int64_t{1} << 62, 4},
                                           std::vector<int64_t>{int64_t{1} << 62, 4, 0},
                                           std::vector<int64_t>{kMax, 2}}) {
    const lpx::TensorView<const float> x{{}, shape};
    CHECK_THROWS_WITH(lpx::quantize(x, f), Catch::Contains("more elements than int64"));
    CHECK_THROWS_AS(lpx::scale_grid_shape(shape, f), std::invalid_argument);
    CHECK_THROWS_AS(lpx::tensor_amax(x, f), std::invalid_argument);
  }
}

TEST_CASE("a block longer than its axis is one ragged block, for any block length") {
  // docs/formats.md#edge-semantics: the block takes its amax over the elements it has.
  const std::vector<float> x = {1.0f, -3.0f, 0.25f, 6.0f, 2.0f};
  const std::vector<int64_t> shape = {5};
  BlockFormat whole = parse_block_format("e2m1:b5:e8m0");
  for (const int64_t length : {int64_t{6}, int64_t{32}, int64_t{1} << 40, kMax}) {
    INFO(length);
    BlockFormat f = whole;
    f.block.length = length;
    const lpx::QuantizedTensor q = lpx::quantize({x, shape}, f);
    const lpx::QuantizedTensor w = lpx::quantize({x, shape}, whole);
    CHECK(q.scale_shape == std::vector<int64_t>{1});
    CHECK(q.scale_codes == w.scale_codes);
    CHECK(q.codes == w.codes);
  }
}

TEST_CASE("block_reach agrees with the quantizer's block extents on matrices") {
  // block_reach is the shape-free answer (recipes check with it before any shape is
  // known); block_extents is the quantizer's own layout for a shape.
  for (const char* spec : kFormats) {
    for (int own : {0, 1, -1, -2}) {
      BlockFormat f = parse_block_format(spec);
      f.block.axis = own;
      for (const std::vector<int64_t>& shape : {std::vector<int64_t>{7, 300}, std::vector<int64_t>{300, 7},
                                               std::vector<int64_t>{0, 5}}) {
        const std::vector<int64_t> ext = lpx::block_extents(shape, f);
        for (int d = 0; d < 2; ++d) {
          INFO(spec << " axis " << own << " shape [" << shape[0] << ", " << shape[1] << "] along " << d);
          const int64_t reach = lpx::block_reach(f.block, d);
          CHECK(ext[static_cast<size_t>(d)] == (reach > 0 ? reach : std::max<int64_t>(shape[static_cast<size_t>(d)], 1)));
        }
      }
    }
  }
  BlockFormat mx = parse_block_format("mxfp4");
  mx.block.axis = 0;
  CHECK(lpx::block_reach(mx.block, 0) == 32);
  CHECK(lpx::block_reach(mx.block, 1) == 1);
  CHECK(lpx::block_reach(parse_block_format("fp8_block128x128").block, 0) == 128);
  BlockFormat channel = parse_block_format("e4m3:channel:fp32");
  channel.block.axis = 0;
  CHECK(lpx::block_reach(channel.block, 0) == 0);
  CHECK(lpx::block_reach(channel.block, 1) == 1);
  CHECK(lpx::block_reach(parse_block_format("fp8_tensor").block, 1) == 0);
}
