// The SIMD block quantizer (formats/src/quantize_hwy.cpp) against the scalar per-block
// reference (QuantizeOptions::path = QuantizePath::reference), bit for bit, on every SIMD
// target Highway compiled in and this CPU supports: MX presets (e8m0, every scale rule),
// pow2 and fp32 scales, NVFP4 (1-D and 16x16), per-tensor scales (with and without an
// amax history), integer and sub-4-bit elements; rne, rna, rtz, rup, rdn, sr; ragged
// shapes and odd block counts, every axis (blocks along axis 0 or a middle axis,
// per-channel blocks included, take the transposing strided path, sr and NVFP4
// included), NaN/Inf blocks, zero blocks, float32 subnormals, blocks whose scales clamp,
// the 3/4 headroom and the subnormal flush, ieee overflow. Codes, scales, the tensor
// scale, amax, statistics and the dequantized values must all match, for quantize,
// dequantize and fake_quantize, and thread counts must not change any bit.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "lpx/formats/block_format.hpp"
#include "lpx/formats/cast.hpp"
#include "lpx/formats/quantize.hpp"
#include "quantize_internal.hpp"

namespace {

using lpx::BlockFormat;
using lpx::QuantizedTensor;
using lpx::QuantizeOptions;
using lpx::Rounding;

uint32_t bits_of(float x) {
  uint32_t b;
  std::memcpy(&b, &x, 4);
  return b;
}

// Blocks of very different magnitudes, with special blocks sprinkled in: all zero, one
// NaN, one +-Inf, float32 subnormals only, huge (scales clamp high for small elements),
// tiny (scales clamp low), and a few elements 2^-140 below their block's amax (the
// products that leave float32's normal range).
std::vector<float> make_data(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_int_distribution<int> kind(0, 15), expo(-60, 60), pick(0, 999);
  std::vector<float> x(n);
  size_t i = 0;
  while (i < n) {
    const size_t run = std::min<size_t>(n - i, 1 + static_cast<size_t>(pick(rng) % 40));
    const int k = kind(rng);
    const float scale = std::ldexp(1.0f, expo(rng));
    for (size_t j = 0; j < run; ++j, ++i) {
      float v = normal(rng) * scale;
      switch (k) {
        case 0: v = 0.0f; break;
        case 1: v = (j == run / 2) ? std::numeric_limits<float>::quiet_NaN() : v; break;
        case 2: v = (j == 0) ? -std::numeric_limits<float>::infinity() : v; break;
        case 3: v = normal(rng) * 1e-39f; break;                      // subnormals
        case 4: v = normal(rng) * 1e37f; break;                       // huge
        case 5: v = (j % 3 == 0) ? normal(rng) * 1e38f : v; break;    // huge and ordinary
        case 6: v = normal(rng) * std::ldexp(1.0f, -140); break;      // tiny
        case 7: v = (j % 2 == 0) ? std::ldexp(normal(rng), -130) : normal(rng) * 1e4f; break;
        case 8: v = (j % 5 == 0) ? -0.0f : v; break;
        default: break;
      }
      x[i] = v;
    }
  }
  return x;
}

std::string describe(const std::string& spec, const std::vector<int64_t>& shape, int axis,
                     const QuantizeOptions& o) {
  std::string s = spec + " shape ";
  for (int64_t d : shape) s += std::to_string(d) + "x";
  s += " axis " + std::to_string(axis) + " round " + std::string(lpx::rounding_name(o.round)) +
       (o.overflow == lpx::Overflow::ieee ? " ieee" : " sat") + (o.headroom_3_4 ? " headroom" : "") +
       (o.flush_subnormal_inputs ? " flush" : "") + " threads " + std::to_string(o.threads);
  return s;
}

void require_same(const QuantizedTensor& a, const QuantizedTensor& b) {
  REQUIRE(a.codes.size() == b.codes.size());
  for (size_t i = 0; i < a.codes.size(); ++i) {
    INFO("code " << i);
    REQUIRE(int(a.codes[i]) == int(b.codes[i]));
  }
  REQUIRE(a.scale_codes == b.scale_codes);
  REQUIRE(a.scale_values.size() == b.scale_values.size());
  for (size_t i = 0; i < a.scale_values.size(); ++i) {
    INFO("scale " << i);
    REQUIRE(bits_of(a.scale_values[i]) == bits_of(b.scale_values[i]));
  }
  REQUIRE(a.scale_shape == b.scale_shape);
  REQUIRE(a.tensor_scale.has_value() == b.tensor_scale.has_value());
  if (a.tensor_scale) REQUIRE(bits_of(*a.tensor_scale) == bits_of(*b.tensor_scale));
  REQUIRE(bits_of(a.amax) == bits_of(b.amax));
  REQUIRE(a.stats.clamped_scales == b.stats.clamped_scales);
  REQUIRE(a.stats.saturated == b.stats.saturated);
  REQUIRE(a.stats.flushed == b.stats.flushed);
}

void require_same_values(const std::vector<float>& a, const std::vector<float>& b) {
  REQUIRE(a.size() == b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    INFO("value " << i << ": " << a[i] << " vs " << b[i]);
    REQUIRE(bits_of(a[i]) == bits_of(b[i]));
  }
}

// One case: scalar reference vs the current dispatch, for fake_quantize, quantize and
// dequantize.
void check_case(const std::string& spec, const std::vector<int64_t>& shape, int axis,
                const QuantizeOptions& opt, const std::vector<float>& x) {
  BlockFormat f = lpx::parse_block_format(spec);
  f.block.axis = axis;
  INFO(describe(spec, shape, axis, opt));
  const lpx::TensorView<const float> view{std::span<const float>(x), shape};
  std::vector<float> ref_out(x.size()), out(x.size()), deq(x.size());

  QuantizeOptions ref_opt = opt;
  ref_opt.path = lpx::QuantizePath::reference;
  const QuantizedTensor ref = lpx::fake_quantize(view, ref_out, f, ref_opt);

  const QuantizedTensor fast = lpx::fake_quantize(view, out, f, opt);
  require_same(ref, fast);
  require_same_values(ref_out, out);

  // fake_quantize_values: the same values, scales and statistics, and no codes.
  std::vector<float> vout(x.size());
  QuantizedTensor v = lpx::fake_quantize_values(view, vout, f, opt);
  REQUIRE(v.codes.empty());
  v.codes = ref.codes;
  require_same(ref, v);
  require_same_values(ref_out, vout);

  const QuantizedTensor q = lpx::quantize(view, f, opt);
  require_same(ref, q);
  lpx::dequantize(q, deq, opt.threads);
  require_same_values(ref_out, deq);
}

const std::vector<std::string>& specs() {
  static const std::vector<std::string> s = {
      "mxfp8_e4m3", "mxfp8_e5m2", "mxfp6_e3m2", "mxfp6_e2m3", "mxfp4", "mxint8", "nvfp4",
      "nvfp4_2d", "fp8_block128", "fp8_block128x128", "e2m1:b32:e8m0:rceil",
      "e4m3:b32:e8m0:ceil", "e2m1:b32:e8m0:even", "e4m3:b32:pow2", "e5m2:b64:pow2:floor",
      "e1m2:b16:e4m3", "e2m0:16x16:e8m0", "e4m3:row:e8m0", "e2m1:b7:e8m0", "e3m0:b5:pow2",
      "int4:b32:e8m0", "e4m3:b16:fp32", "fp8_tensor", "e5m2:tensor:pow2",
      "e2m1:tensor:e4m3", "int8:tensor:fp32",
      // IEEE P3109 elements (docs/formats.md#p3109): short path signed and unsigned,
      // the general path for P = 1.
      "p3109_k8p4se:b32:e8m0", "p3109_k8p3uf:b32:e8m0:rceil", "p3109_k6p3sf:b16:e4m3",
      "p3109_k8p1se:b32:pow2", "p3109_k4p2ue:b32:e8m0"};
  return s;
}

void check_all_on_current_target() {
  const std::vector<std::vector<int64_t>> shapes = {
      {1000}, {17}, {3, 97}, {64, 33}, {5, 32}, {2, 3, 40}, {31, 16}, {1}, {3, 37, 5}, {3, 256},
      {2, 40, 3, 2}};
  uint32_t seed = 1;
  for (const std::string& spec : specs()) {
    for (const auto& shape : shapes) {
      size_t n = 1;
      for (int64_t d : shape) n *= static_cast<size_t>(d);
      std::vector<float> x = make_data(n, seed++);
      if (spec.find("tensor") != std::string::npos) {
        // One NaN or Inf makes a per-tensor scale NaN (every code 0, the scalar path):
        // keep these tensors finite so that the SIMD cast runs.
        for (float& v : x)
          if (!std::isfinite(v)) v = 1.5f;
      }
      std::vector<int> axes = {-1, 0};
      for (int a = 1; a + 1 < static_cast<int>(shape.size()); ++a) axes.push_back(a);
      for (int axis : axes) {
        for (Rounding r : {Rounding::rne, Rounding::rtz, Rounding::sr, Rounding::rna,
                           Rounding::rup, Rounding::rdn}) {
          QuantizeOptions o;
          o.round = r;
          o.seed = 99 + seed;
          o.stream = 3;
          o.threads = 1;
          check_case(spec, shape, axis, o, x);
        }
        QuantizeOptions o;
        o.round = Rounding::sr;
        o.sr_bits = 9;
        o.overflow = lpx::Overflow::ieee;
        o.headroom_3_4 = true;
        o.threads = 1;
        check_case(spec, shape, axis, o, x);
        o.round = Rounding::rne;
        o.headroom_3_4 = false;
        o.flush_subnormal_inputs = true;
        check_case(spec, shape, axis, o, x);
        if (spec == "fp8_tensor") {
          // Delayed scaling: the scale comes from the history, the stored amax from x.
          lpx::AmaxHistory history(4);
          history.push(3.0f);
          history.push(0.25f);
          o.history = &history;
          check_case(spec, shape, axis, o, x);
          o.round = Rounding::sr;
          check_case(spec, shape, axis, o, x);
        }
      }
    }
  }
}

}  // namespace

TEST_CASE("SIMD block quantization matches the scalar reference on every target",
          "[quantize][simd]") {
  const auto targets = lpx::cast_testing::simd_targets();
  REQUIRE(!targets.empty());
  for (const auto& t : targets) {
    lpx::cast_testing::force_simd_target(t.id);
    INFO("forced target " << t.name);
    REQUIRE(lpx::cast_testing::dispatched_simd_target() == t.name);
    check_all_on_current_target();
    WARN("checked SIMD block quantization on target " << t.name);
  }
  lpx::cast_testing::force_simd_target(0);
}

// Finite data of ordinary magnitudes, a different one per column (2^-6 .. 2^5, inside
// the range of NVFP4's e4m3 block scales), so that the strided strategy's tiles of blocks
// down the columns take the column-lane kernel (make_data's special runs send nearly
// every tile to the transposing path), with an all-zero column. Spoiled data adds what
// sends a tile back: a NaN, an Inf, an element 2^-140 below its block's amax (the scalar
// round-to-odd case) and a column 2^-30 below the rest (NVFP4 scales underflow to 0).
// Edge data keeps every tile on the column-lane kernel for power-of-two scales but puts
// the lane-wise scale rules (Pow2ScaleLanes) through their rare cases: a column near
// 2^-124 (its scale clamps low under e4m3's emax of 8, not under e2m1's 2), a column near
// 2^-138 whose amax is a float32 subnormal (the scalar fallback lane; clamped under every
// element format), and a column near 2^122 (amax close to FLT_MAX).
enum class ColumnData { plain, spoiled, edges };

std::vector<float> column_data(int64_t rows, int64_t cols, uint32_t seed, ColumnData kind) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(rows * cols));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c)
      x[static_cast<size_t>(r * cols + c)] = std::ldexp(normal(rng), static_cast<int>(c % 12) - 6);
  for (int64_t r = 0; r < rows; ++r) x[static_cast<size_t>(r * cols + 5)] = 0.0f;
  if (kind == ColumnData::edges) {
    for (int64_t r = 0; r < rows; ++r) {
      x[static_cast<size_t>(r * cols + 9)] = std::ldexp(normal(rng), -124);
      x[static_cast<size_t>(r * cols + 10)] = std::ldexp(normal(rng), -138);
      x[static_cast<size_t>(r * cols + 11)] = std::ldexp(normal(rng), 122);
    }
  }
  if (kind == ColumnData::spoiled) {
    x[static_cast<size_t>(3 * cols + 1)] = std::numeric_limits<float>::quiet_NaN();
    x[static_cast<size_t>((rows - 1) * cols + cols - 1)] = -std::numeric_limits<float>::infinity();
    x[static_cast<size_t>((rows / 2) * cols + cols / 2)] = std::ldexp(1.0f, -150 + 12);
    for (int64_t r = 0; r < rows; ++r) x[static_cast<size_t>(r * cols + 7)] *= std::ldexp(1.0f, -30);
  }
  return x;
}

// One fake_quantize of x (blocks down the columns, sr, one thread): how many tiles the
// column-lane kernel took, and how many block scales clamped.
struct ColumnRun {
  int64_t tiles = 0, clamped = 0;
};

ColumnRun column_run(const std::string& spec, const std::vector<int64_t>& shape, const std::vector<float>& x) {
  BlockFormat f = lpx::parse_block_format(spec);
  f.block.axis = 0;
  QuantizeOptions o;
  o.round = Rounding::sr;
  o.threads = 1;
  std::vector<float> out(x.size());
  const int64_t before = lpx::quantize_detail::column_kernel_tiles();
  const QuantizedTensor q =
      lpx::fake_quantize(lpx::TensorView<const float>{std::span<const float>(x), shape}, out, f, o);
  return {lpx::quantize_detail::column_kernel_tiles() - before, q.stats.clamped_scales};
}

TEST_CASE("Blocks down the columns on finite data (the column-lane kernel) match the reference",
          "[quantize][simd]") {
  const auto targets = lpx::cast_testing::simd_targets();
  for (const auto& t : targets) {
    lpx::cast_testing::force_simd_target(t.id);
    INFO("forced target " << t.name);
    uint32_t seed = 1;
    // Row blocks whole and partial (40 = 32 + 8; 16 rows under 32-row blocks), tiles as
    // wide as the strided strategy makes them (256 columns for 32-row blocks, 512 for 16)
    // and ragged (520 = 2 x 256 + 8).
    for (const auto& shape : std::vector<std::vector<int64_t>>{{96, 48}, {40, 64}, {16, 520}, {16, 1024}}) {
      for (const ColumnData kind : {ColumnData::plain, ColumnData::spoiled, ColumnData::edges}) {
        if (kind != ColumnData::plain && shape[1] > 64) continue;
        const std::vector<float> x = column_data(shape[0], shape[1], seed++, kind);
        for (const std::string spec :
             {"mxfp4", "mxfp8_e4m3", "mxint8", "e2m1:b32:e8m0:rceil", "e2m1:b16:e8m0", "e2m0:b32:e8m0",
              "e2m1:b32:e8m0:ceil", "e4m3:b32:e8m0:even", "nvfp4", "e1m2:b16:e4m3"}) {
          if (kind == ColumnData::edges && lpx::parse_block_format(spec).scale != lpx::ScaleFormat::e4m3 &&
              t.name != "SCALAR") {  // the scalar target has no column-lane kernel
            // The edge columns must reach the column-lane kernel, or this case tests only
            // the transposing path: as many tiles take it as on plain data of the shape,
            // and the 2^-138 column's scales clamp.
            const std::vector<float> plain = column_data(shape[0], shape[1], seed, ColumnData::plain);
            INFO(spec << " on " << shape[0] << "x" << shape[1]);
            const ColumnRun edge_run = column_run(spec, shape, x), plain_run = column_run(spec, shape, plain);
            CHECK(edge_run.tiles == plain_run.tiles);
            CHECK(edge_run.tiles > 0);
            CHECK(edge_run.clamped >= (shape[0] + 31) / 32);
          }
          for (Rounding r : {Rounding::rne, Rounding::sr, Rounding::rna}) {
            QuantizeOptions o;
            o.round = r;
            o.seed = 7 + seed;
            o.stream = 2;
            o.threads = 1;
            check_case(spec, shape, 0, o, x);
          }
          QuantizeOptions o;
          o.round = Rounding::sr;
          o.sr_bits = 9;
          o.headroom_3_4 = true;
          o.index_offset = 1001;
          o.threads = 1;
          check_case(spec, shape, 0, o, x);
          // Philox's group count crosses 2^32 at element 976, inside a draw (its scalar
          // fallback): row 20, column 16 of the 48-column shape, mid-way through the 32 words
          // after a row's 4-vector draws on AVX-512.
          o.index_offset = (uint64_t{1} << 34) - 976;
          check_case(spec, shape, 0, o, x);
          o.round = Rounding::rne;
          o.headroom_3_4 = false;
          o.flush_subnormal_inputs = true;
          check_case(spec, shape, 0, o, x);
        }
      }
    }
  }
  lpx::cast_testing::force_simd_target(0);
}

TEST_CASE("SIMD block quantization does not depend on the thread count",
          "[quantize][simd][threads]") {
  // Large enough for the parallel path (>= 16 Ki elements), with a ragged row length.
  const std::vector<int64_t> shape = {301, 257};
  const std::vector<float> data = make_data(301 * 257, 7);
  std::vector<float> finite = data;  // per-tensor scales: see check_all_on_current_target
  for (float& v : finite)
    if (!std::isfinite(v)) v = 1.5f;
  for (const std::string spec :
       {"mxfp8_e4m3", "mxfp4", "nvfp4", "fp8_block128", "nvfp4_2d", "fp8_tensor"}) {
    const std::vector<float>& x = spec == "fp8_tensor" ? finite : data;
    for (Rounding r : {Rounding::rne, Rounding::sr}) {
      QuantizeOptions o;
      o.round = r;
      o.seed = 5;
      const BlockFormat f = lpx::parse_block_format(spec);
      const lpx::TensorView<const float> view{std::span<const float>(x), shape};
      std::vector<float> out1(x.size()), out2(x.size());
      o.threads = 1;
      const QuantizedTensor a = lpx::fake_quantize(view, out1, f, o);
      o.threads = 2;
      const QuantizedTensor b = lpx::fake_quantize(view, out2, f, o);
      INFO(spec << " " << lpx::rounding_name(r));
      require_same(a, b);
      require_same_values(out1, out2);
      check_case(spec, shape, -1, o, x);  // the scalar reference, 2 threads
      check_case(spec, shape, 0, o, x);   // blocks along axis 0 (the transposing path)
      // Blocks along the middle axis of a 3-D tensor (the strided path over 7 slabs).
      const std::vector<int64_t> shape3 = {7, 43, 257};
      BlockFormat f3 = f;
      f3.block.axis = 1;
      const lpx::TensorView<const float> view3{std::span<const float>(x), shape3};
      o.threads = 1;
      const QuantizedTensor c = lpx::fake_quantize(view3, out1, f3, o);
      o.threads = 2;
      const QuantizedTensor d = lpx::fake_quantize(view3, out2, f3, o);
      require_same(c, d);
      require_same_values(out1, out2);
      check_case(spec, shape3, 1, o, x);
    }
  }
}

TEST_CASE("Quantizing pieces of rows with index_offset equals one whole-tensor call",
          "[quantize][simd][sr]") {
  // What `lpx quantize` relies on to stream a tensor through a small buffer: stochastic
  // rounding keyed by index_offset + the flat index within the piece, and for tensor-wide
  // scales (per-tensor blocks, NVFP4's tensor scale) the whole tensor's amax given in
  // whole_tensor_amax. Both the SIMD path and the scalar reference; the data with its
  // NaN/Inf blocks (a NaN per-tensor scale) and made finite.
  const int64_t rows = 40, cols = 256;
  const std::vector<float> data = make_data(static_cast<size_t>(rows * cols), 11);
  const std::vector<float> finite = [&] {
    std::vector<float> v = data;
    for (float& e : v)
      if (!std::isfinite(e)) e = -2.5f;
    return v;
  }();
  for (const bool scalar : {false, true}) {
    for (const std::string spec :
         {"mxfp8_e4m3", "mxfp4", "fp8_block128", "nvfp4", "fp8_tensor", "e2m1:tensor:e4m3"}) {
      const BlockFormat f = lpx::parse_block_format(spec);
      const bool tensor_wide = f.two_level() || f.block.kind == lpx::BlockShape::Kind::tensor;
      for (const std::vector<float>* xs : {&data, &finite}) {
        const std::vector<float>& x = *xs;
        QuantizeOptions o;
        o.round = Rounding::sr;
        o.seed = 9;
        o.stream = 2;
        o.path = scalar ? lpx::QuantizePath::reference : lpx::QuantizePath::fastest;
        std::vector<float> whole(x.size());
        const std::vector<int64_t> shape = {rows, cols};
        const lpx::TensorView<const float> all{std::span<const float>(x), shape};
        const QuantizedTensor w = lpx::fake_quantize(all, whole, f, o);
        const size_t nscales = std::max(w.scale_codes.size(), w.scale_values.size());
        bool unkeyed_differs = false;
        for (int64_t r0 = 0; r0 < rows; r0 += 15) {  // pieces of 15, 15 and 10 rows
          const int64_t n = std::min<int64_t>(15, rows - r0);
          const size_t first = static_cast<size_t>(r0 * cols), count = static_cast<size_t>(n * cols);
          const std::span<const float> piece(x.data() + first, count);
          QuantizeOptions po = o;
          po.index_offset = first;
          if (tensor_wide) po.whole_tensor_amax = lpx::tensor_amax(all, f, o);
          std::vector<float> out(count), unkeyed(count);
          const QuantizedTensor q =
              lpx::fake_quantize({piece, std::vector<int64_t>{n, cols}}, out, f, po);
          INFO(spec << (scalar ? " scalar" : " simd") << (xs == &data ? "" : " finite")
                    << ", rows from " << r0);
          for (size_t i = 0; i < count; ++i) {
            INFO("element " << first + i);
            REQUIRE(q.codes[i] == w.codes[first + i]);
            REQUIRE(bits_of(out[i]) == bits_of(whole[first + i]));
          }
          // The piece's scales are its rows' run of the whole grid (per-tensor: the one).
          const size_t s0 = nscales == 1 ? 0 : static_cast<size_t>(r0) * (nscales / rows);
          for (size_t b = 0; b < q.scale_codes.size(); ++b)
            REQUIRE(q.scale_codes[b] == w.scale_codes[s0 + b]);
          for (size_t b = 0; b < q.scale_values.size(); ++b)
            REQUIRE(bits_of(q.scale_values[b]) == bits_of(w.scale_values[s0 + b]));
          REQUIRE(q.tensor_scale.has_value() == w.tensor_scale.has_value());
          if (w.tensor_scale) REQUIRE(bits_of(*q.tensor_scale) == bits_of(*w.tensor_scale));
          if (tensor_wide) REQUIRE(bits_of(q.amax) == bits_of(w.amax));
          // Without the offset the pieces after the first draw other words.
          lpx::fake_quantize({piece, std::vector<int64_t>{n, cols}}, unkeyed, f, o);
          for (size_t i = 0; i < count && r0 > 0; ++i)
            unkeyed_differs = unkeyed_differs || bits_of(unkeyed[i]) != bits_of(whole[first + i]);
        }
        // (A NaN per-tensor scale makes every value NaN, whatever the words.)
        if (!(f.block.kind == lpx::BlockShape::Kind::tensor && xs == &data)) CHECK(unkeyed_differs);
      }
    }
  }
}
