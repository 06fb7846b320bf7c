// Pinned edge cases of block quantization (values from the OCP MX v1.0 spec and the
// NVFP4 operation order of docs/formats.md, worked out by hand), the spec grammar, the
// amax history, and stochastic rounding's reproducibility across thread counts.
#include <catch2/catch.hpp>

#include <cfloat>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "lpx/formats/block_format.hpp"
#include "lpx/formats/codec.hpp"
#include "lpx/formats/packing.hpp"
#include "lpx/formats/quantize.hpp"

namespace {

using lpx::BlockFormat;
using lpx::ScaleRule;

BlockFormat with_rule(const char* spec, ScaleRule r) {
  BlockFormat f = lpx::parse_block_format(spec);
  f.rule = r;
  return f;
}

struct Result {
  lpx::QuantizedTensor q;
  std::vector<float> out;
};

Result fq(const std::vector<float>& x, std::vector<int64_t> shape, const BlockFormat& f,
          const lpx::QuantizeOptions& opt = {}) {
  Result r;
  r.out.resize(x.size());
  r.q = lpx::fake_quantize({x, shape}, r.out, f, opt);
  return r;
}

uint32_t bits(float f) {
  uint32_t b;
  std::memcpy(&b, &f, 4);
  return b;
}

}  // namespace

TEST_CASE("E8M0 scale codes: 0xFF is NaN, 0x00 is 2^-127") {
  CHECK(std::isnan(lpx::decode(0xFF, lpx::fmt8::e8m0)));
  CHECK(lpx::decode(0x00, lpx::fmt8::e8m0) == std::ldexp(1.0f, -127));
  CHECK(lpx::decode(127, lpx::fmt8::e8m0) == 1.0f);
}

TEST_CASE("FP4 block with max 7.9: floor saturates to 6, rceil does not") {
  std::vector<float> x(32, 0.5f);
  x[3] = 7.9f;
  const auto fl = fq(x, {32}, with_rule("mxfp4", ScaleRule::floor));
  CHECK(fl.q.scale_codes[0] == 127);  // floor(log2 7.9) - 2 = 0
  CHECK(fl.out[3] == 6.0f);
  CHECK(fl.q.stats.saturated == 1);
  const auto rc = fq(x, {32}, with_rule("mxfp4", ScaleRule::rceil));
  CHECK(rc.q.scale_codes[0] == 128);  // ceil(log2(7.9 / 6)) = 1
  CHECK(rc.out[3] == 8.0f);           // 3.95 -> 4, times 2
  CHECK(rc.q.stats.saturated == 0);
}

TEST_CASE("E2M1 amax 7: floor gives 6; rceil gives scale 2 and 3.5 -> 4 (docs/formats.md)") {
  std::vector<float> x = {7.0f, 1.0f, -2.0f, 0.25f};
  const auto fl = fq(x, {4}, with_rule("mxfp4", ScaleRule::floor));
  CHECK(fl.out[0] == 6.0f);
  const auto rc = fq(x, {4}, with_rule("mxfp4", ScaleRule::rceil));
  CHECK(lpx::decode(rc.q.scale_codes[0], lpx::fmt8::e8m0) == 2.0f);
  CHECK(lpx::decode(rc.q.codes[0], lpx::fmt4::e2m1) == 4.0f);  // 3.5 ties to even 4
  CHECK(rc.out[0] == 8.0f);
  // ceil: ceil(log2 7) - 2 = 1 as well; even: 7 = 1.11b rounds to 2.0 * 4 -> 3 - 2 = 1.
  CHECK(fq(x, {4}, with_rule("mxfp4", ScaleRule::ceil)).q.scale_codes[0] == 128);
  CHECK(fq(x, {4}, with_rule("mxfp4", ScaleRule::even)).q.scale_codes[0] == 128);
}

TEST_CASE("E4M3 amax 460: scale 2^0 under floor (460 saturates to 448), 2^1 under rceil") {
  std::vector<float> x(32, 1.0f);
  x[0] = 460.0f;
  const auto fl = fq(x, {32}, with_rule("mxfp8_e4m3", ScaleRule::floor));
  CHECK(fl.q.scale_codes[0] == 127);
  CHECK(fl.out[0] == 448.0f);
  CHECK(fl.q.stats.saturated == 1);
  const auto rc = fq(x, {32}, with_rule("mxfp8_e4m3", ScaleRule::rceil));
  CHECK(rc.q.scale_codes[0] == 128);
  CHECK(rc.out[0] == 448.0f);  // 230 lies between 224 and 240 (step 16): 224, times 2
  CHECK(rc.q.stats.saturated == 0);
}

TEST_CASE("even and ceil differ from floor only past the element's significand") {
  // E4M3: max 448 = 1.75 * 2^8. amax 480 = 1.875 * 2^8: floor 0, rceil 1, ceil 1, even:
  // 1.875 rounded to 3 mantissa bits is 1.875 (no carry) -> 0.
  std::vector<float> x = {480.0f};
  CHECK(fq(x, {1}, with_rule("mxfp8_e4m3", ScaleRule::floor)).q.scale_codes[0] == 127);
  CHECK(fq(x, {1}, with_rule("mxfp8_e4m3", ScaleRule::rceil)).q.scale_codes[0] == 128);
  CHECK(fq(x, {1}, with_rule("mxfp8_e4m3", ScaleRule::ceil)).q.scale_codes[0] == 128);
  CHECK(fq(x, {1}, with_rule("mxfp8_e4m3", ScaleRule::even)).q.scale_codes[0] == 127);
  // amax 1.9375 * 2^8 = 496 rounds up to 2^9 under even -> 1.
  x = {496.0f};
  CHECK(fq(x, {1}, with_rule("mxfp8_e4m3", ScaleRule::even)).q.scale_codes[0] == 128);
  // A power of two: ceil == floor.
  x = {256.0f};
  CHECK(fq(x, {1}, with_rule("mxfp8_e4m3", ScaleRule::ceil)).q.scale_codes[0] == 127);
}

TEST_CASE("all-zero block: scale code 0x00 (2^-127), elements 0, not clamped") {
  std::vector<float> x(64, 0.0f);
  x[40] = 3.0f;  // second block non-zero
  x[1] = -0.0f;
  const auto r = fq(x, {64}, lpx::parse_block_format("mxfp8_e4m3"));
  CHECK(r.q.scale_codes[0] == 0x00);
  for (int i = 0; i < 32; ++i) CHECK(r.out[static_cast<size_t>(i)] == 0.0f);
  CHECK(std::signbit(r.out[1]));
  CHECK(r.q.codes[1] == 0x80);  // -0 kept
  CHECK(r.q.stats.clamped_scales == 0);
  CHECK(r.out[40] == 3.0f);
  // fp32 scales: 1; NVFP4: e4m3 scale 0.
  CHECK(fq(std::vector<float>(8, 0.0f), {8}, lpx::parse_block_format("fp8_tensor")).q.scale_values[0] == 1.0f);
  const auto nv = fq(std::vector<float>(16, 0.0f), {16}, lpx::parse_block_format("nvfp4"));
  CHECK(nv.q.scale_codes[0] == 0);
  CHECK(*nv.q.tensor_scale == 1.0f);
}

TEST_CASE("a NaN or an Inf makes its whole block NaN, other blocks unaffected") {
  for (float bad : {NAN, INFINITY, -INFINITY}) {
    std::vector<float> x(64, 1.5f);
    x[5] = bad;
    const auto r = fq(x, {64}, lpx::parse_block_format("mxfp4"));
    CHECK(r.q.scale_codes[0] == 0xFF);
    for (int i = 0; i < 32; ++i) CHECK(std::isnan(r.out[static_cast<size_t>(i)]));
    for (int i = 32; i < 64; ++i) CHECK(r.out[static_cast<size_t>(i)] == 1.5f);
    const auto nv = fq(x, {64}, lpx::parse_block_format("nvfp4"));
    CHECK(nv.q.scale_codes[0] == 0x7F);
    CHECK(std::isnan(nv.out[0]));
    CHECK(std::fabs(nv.out[63] - 1.5f) < 1e-6f);  // s_dec = 1/1792 is inexact
    const auto t = fq(x, {64}, lpx::parse_block_format("fp8_block128"));
    CHECK(std::isnan(t.q.scale_values[0]));
    CHECK(std::isnan(t.out[63]));
  }
}

TEST_CASE("scale exponents outside [-127, 127] clamp and are counted") {
  // floor(log2 1e-45) = -150; -150 - 8 < -127 -> clamp to -127; elements underflow.
  std::vector<float> x(32, 1e-45f);
  auto r = fq(x, {32}, lpx::parse_block_format("mxfp8_e4m3"));
  CHECK(r.q.scale_codes[0] == 0);
  CHECK(r.q.stats.clamped_scales == 1);
  CHECK(r.q.stats.flushed == 32);
  // MXINT8 (emax 0) with ceil: amax FLT_MAX -> ceil(log2) - 0 = 128 -> 127.
  x.assign(32, FLT_MAX);
  r = fq(x, {32}, with_rule("mxint8", ScaleRule::ceil));
  CHECK(r.q.scale_codes[0] == 254);
  CHECK(r.q.stats.clamped_scales == 1);
  CHECK(r.q.stats.saturated == 32);  // 2^128 * (1 - 2^-24) / 2^127 > 127/64
  CHECK(r.out[0] == static_cast<float>(std::ldexp(127.0 / 64.0, 127)));
}

TEST_CASE("float32 subnormal inputs are kept unless flushing is asked for") {
  // MXINT8 floor: X = floor(log2 2^-130) - 0 = -130 -> clamps to -127; 2^-130 * 2^127 =
  // 1/8 = 8/64 exactly.
  std::vector<float> x = {std::ldexp(1.0f, -130)};
  auto r = fq(x, {1}, lpx::parse_block_format("mxint8"));
  CHECK(r.out[0] == x[0]);
  CHECK(r.q.stats.flushed == 0);
  lpx::QuantizeOptions opt;
  opt.flush_subnormal_inputs = true;
  r = fq(x, {1}, lpx::parse_block_format("mxint8"), opt);
  CHECK(r.out[0] == 0.0f);
  CHECK(r.q.stats.flushed == 1);
}

TEST_CASE("ragged last blocks have their own amax; axis 0 and axis 1") {
  // 2x33 along axis 1: blocks [0,32) and [32,33) per row.
  std::vector<float> x(66, 1.0f);
  x[32] = 100.0f;   // the ragged block of row 0 holds only this element
  x[33] = 0.001f;   // row 1, first block
  const auto r = fq(x, {2, 33}, lpx::parse_block_format("mxfp4"));
  REQUIRE(r.q.scale_shape == std::vector<int64_t>{2, 2});
  CHECK(r.out[32] == 96.0f);  // floor(log2 100) - 2 = 4: 100/16 = 6.25 -> 6 -> 96
  CHECK(r.out[0] == 1.0f);
  // Along axis 0 of a 33x2 tensor: column blocks.
  BlockFormat f = lpx::parse_block_format("mxfp4");
  f.block.axis = 0;
  std::vector<float> y(66, 1.0f);
  y[64] = 100.0f;  // row 32, column 0: the ragged block of column 0
  const auto c = fq(y, {33, 2}, f);
  REQUIRE(c.q.scale_shape == std::vector<int64_t>{2, 2});
  CHECK(c.out[64] == 96.0f);
  CHECK(c.out[65] == 1.0f);
  CHECK(c.q.format.block.axis == 0);
}

TEST_CASE("NVFP4 two-level scale, hand-computed") {
  // amax_t = 2688 -> s_enc = 1, s_dec = 1. Block 0 amax 2688: s_dec_b = e4m3(448) = 448,
  // s_enc_b = 1/448; 2688/448 = 6. Block 1 amax 3: s_dec_b = e4m3(0.5) = 0.5, 3 * 2 = 6.
  std::vector<float> x(32, 0.0f);
  x[0] = 2688.0f;
  x[16] = 3.0f;
  x[17] = 1.2f;  // 2.4 -> 2 -> 1.0
  const auto r = fq(x, {32}, lpx::parse_block_format("nvfp4"));
  CHECK(*r.q.tensor_scale == 1.0f);
  CHECK(lpx::decode(r.q.scale_codes[0], lpx::fmt8::e4m3fn) == 448.0f);
  CHECK(lpx::decode(r.q.scale_codes[1], lpx::fmt8::e4m3fn) == 0.5f);
  CHECK(r.out[0] == 2688.0f);
  CHECK(r.out[16] == 3.0f);
  CHECK(r.out[17] == 1.0f);
}

TEST_CASE("per-tensor current and delayed scaling") {
  std::vector<float> x = {448.0f, 1.0f, -3.0f, 100.0f};
  auto cur = fq(x, {4}, lpx::parse_block_format("fp8_tensor"));
  CHECK(cur.q.scale_values[0] == 1.0f);
  CHECK(cur.q.amax == 448.0f);
  CHECK(cur.out[0] == 448.0f);
  lpx::AmaxHistory h(3, lpx::AmaxHistory::Reduction::max);
  h.push(224.0f);
  lpx::QuantizeOptions opt;
  opt.history = &h;
  auto del = fq(x, {4}, lpx::parse_block_format("fp8_tensor"), opt);
  CHECK(del.q.scale_values[0] == 0.5f);  // s_enc = 448 / 224 = 2, s_dec = 1/2
  CHECK(del.out[0] == 224.0f);           // 896 saturates to 448
  CHECK(del.q.stats.saturated == 1);
  opt.margin = 1;  // s_enc = 448 / 224 / 2 = 1
  CHECK(fq(x, {4}, lpx::parse_block_format("fp8_tensor"), opt).q.scale_values[0] == 1.0f);
  // History delayed scaling needs per-tensor fp32 scales.
  std::vector<float> out(4);
  CHECK_THROWS_AS(lpx::quantize({x, std::vector<int64_t>{4}}, lpx::parse_block_format("mxfp4"), opt),
                  std::invalid_argument);
}

TEST_CASE("AmaxHistory: length, max and most_recent") {
  lpx::AmaxHistory h(2, lpx::AmaxHistory::Reduction::max);
  CHECK(h.amax() == 0.0f);
  h.push(5.0f);
  h.push(1.0f);
  CHECK(h.amax() == 5.0f);
  h.push(2.0f);  // 5 drops out
  CHECK(h.amax() == 2.0f);
  CHECK(h.size() == 2);
  lpx::AmaxHistory m(4, lpx::AmaxHistory::Reduction::most_recent);
  m.push(5.0f);
  m.push(1.0f);
  CHECK(m.amax() == 1.0f);
}

TEST_CASE("headroom 3/4: SR never clips under floor; dequantize divides by 0.75") {
  std::vector<float> x(32 * 64);
  for (size_t i = 0; i < x.size(); ++i)
    x[i] = static_cast<float>(std::sin(static_cast<double>(i) * 0.37) * 7.99 * static_cast<double>(1 + i % 5));
  lpx::QuantizeOptions opt;
  opt.round = lpx::Rounding::sr;
  opt.seed = 5;
  opt.headroom_3_4 = true;
  for (const char* spec : {"mxfp4", "mxfp8_e4m3"}) {
    const auto r = fq(x, {64, 32}, lpx::parse_block_format(spec), opt);
    CHECK(r.q.stats.saturated == 0);
    CHECK(r.q.headroom_3_4);
    // Element 0 by hand: v = decode(code) * 2^X, then v / 0.75f.
    const float v = lpx::decode(r.q.codes[1], r.q.format.element) *
                    lpx::decode(r.q.scale_codes[0], lpx::fmt8::e8m0);
    CHECK(bits(r.out[1]) == bits(v / 0.75f));
  }
}

TEST_CASE("stochastic rounding: same seed same bits, independent of the thread count") {
  std::vector<float> x(260 * 77);  // above the library's parallel threshold
  for (size_t i = 0; i < x.size(); ++i)
    x[i] = static_cast<float>(std::cos(static_cast<double>(i) * 1.7) * std::exp(static_cast<double>(i % 11) - 5.0));
  for (const char* spec : {"mxfp4", "nvfp4", "fp8_tensor", "nvfp4_2d", "fp8_block128x128"}) {
    lpx::QuantizeOptions opt;
    opt.round = lpx::Rounding::sr;
    opt.seed = 42;
    opt.threads = 1;
    const auto a = fq(x, {260, 77}, lpx::parse_block_format(spec), opt);
    opt.threads = 2;
    const auto b = fq(x, {260, 77}, lpx::parse_block_format(spec), opt);
    opt.threads = 3;
    const auto c = fq(x, {260, 77}, lpx::parse_block_format(spec), opt);
    CHECK(a.q.codes == b.q.codes);
    CHECK(a.q.codes == c.q.codes);
    CHECK(std::memcmp(a.out.data(), b.out.data(), a.out.size() * 4) == 0);
    CHECK(a.q.stats.flushed == b.q.stats.flushed);
    opt.seed = 43;
    const auto d = fq(x, {260, 77}, lpx::parse_block_format(spec), opt);
    CHECK(a.q.codes != d.q.codes);
  }
}

TEST_CASE("packed -> unpack -> dequantize equals fake_quantize bit for bit") {
  std::vector<float> x(45 * 7);
  for (size_t i = 0; i < x.size(); ++i)
    x[i] = static_cast<float>(std::sin(static_cast<double>(i)) * std::exp(static_cast<double>(i % 13) - 6.0));
  for (const char* spec : {"mxfp4", "mxfp6_e3m2", "mxfp6_e2m3", "mxfp8_e5m2", "mxint8", "nvfp4",
                           "fp8_block128x128", "e2m0:16x16:e8m0", "e1m2:b16:e4m3"}) {
    INFO(spec);
    const auto r = fq(x, {45, 7}, lpx::parse_block_format(spec));
    const lpx::Packing p = lpx::packing_for_bits(r.q.format.element.bits);
    const auto packed = lpx::pack(r.q.codes, p);
    CHECK(packed.size() == lpx::packed_size(x.size(), p));
    lpx::QuantizedTensor back = r.q;
    back.codes = lpx::unpack(packed, x.size(), p);
    std::vector<float> out(x.size());
    lpx::dequantize(back, out);
    CHECK(std::memcmp(out.data(), r.out.data(), out.size() * 4) == 0);
  }
}

TEST_CASE("spec grammar: presets, examples, round trip, errors name the bad part") {
  for (auto name : lpx::block_preset_names()) {
    const BlockFormat f = lpx::parse_block_format(name);
    const BlockFormat g = lpx::parse_block_format(f.spec());
    CHECK(g.spec() == f.spec());
  }
  CHECK(lpx::parse_block_format("mxfp8_e4m3").spec() == "float8_e4m3fn:b32:e8m0:floor");
  CHECK(lpx::parse_block_format("mxint8").element.bias == 6);
  CHECK(lpx::parse_block_format("nvfp4").spec() == "float4_e2m1fn:b16:e4m3");
  CHECK(lpx::parse_block_format("fp8_block128x128").spec() == "float8_e4m3fn:128x128:fp32");
  CHECK(lpx::parse_block_format("e2m1:b32:e8m0:rceil").rule == ScaleRule::rceil);
  CHECK(lpx::parse_block_format("e1m2:b16:e4m3").element.bits == 4);
  const BlockFormat t = lpx::parse_block_format("e2m0:16x16:e8m0");
  CHECK(t.block.kind == lpx::BlockShape::Kind::tile);
  CHECK(t.block.rows == 16);
  CHECK(lpx::parse_block_format("e4m3:tensor:fp32").block.kind == lpx::BlockShape::Kind::tensor);
  CHECK(lpx::parse_block_format("e4m3:b128:pow2").rule == ScaleRule::rceil);
  CHECK(lpx::parse_block_format("e4m3:row:fp32").block.kind == lpx::BlockShape::Kind::channel);

  auto message = [](const char* spec) {
    try {
      lpx::parse_block_format(spec);
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  CHECK_THAT(message("mxfp5"), Catch::Contains("mxfp4") && Catch::Contains("mxfp5"));
  CHECK_THAT(message("e2m1:b0:e8m0"), Catch::Contains("'b0'") && Catch::Contains("bN"));
  CHECK_THAT(message("e2m1:b32:e9m0"), Catch::Contains("e9m0") && Catch::Contains("pow2"));
  CHECK_THAT(message("e2m1:b32:e8m0:round"), Catch::Contains("round") && Catch::Contains("rceil"));
  CHECK_THAT(message("e2m1:b32:fp32:floor"), Catch::Contains("power-of-two"));
  CHECK_THAT(message("bogus:b32"), Catch::Contains("bogus"));
  CHECK_THAT(message("bf16:b32"), Catch::Contains("8 bits"));
  CHECK_THAT(message("e2m1:b32:e8m0:floor:x"), Catch::Contains("ELEMENT:BLOCK"));
}

TEST_CASE("shape and axis errors") {
  std::vector<float> x(12, 1.0f);
  const std::vector<int64_t> bad = {5, 2};
  CHECK_THROWS_AS(lpx::quantize({x, bad}, lpx::parse_block_format("mxfp4")), std::invalid_argument);
  BlockFormat f = lpx::parse_block_format("mxfp4");
  f.block.axis = 2;
  const std::vector<int64_t> s = {3, 4};
  CHECK_THROWS_AS(lpx::quantize({x, s}, f), std::invalid_argument);
  f.block.axis = -3;
  CHECK_THROWS_AS(lpx::quantize({x, s}, f), std::invalid_argument);
  f.block.axis = -2;
  CHECK(lpx::quantize({x, s}, f).scale_shape == std::vector<int64_t>{1, 4});
}
