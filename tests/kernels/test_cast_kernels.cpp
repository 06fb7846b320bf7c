// The cast kernels' host API: argument checks (always, they run before any CUDA call),
// and on a device the kernels against the CPU codec bit for bit (skipped without one).
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <vector>

#include "lpx/formats/codec.hpp"
#include "lpx/formats/format_registry.hpp"
#include "lpx/kernels/cast.hpp"
#include "lpx/kernels/device.hpp"
#include "lpx/numerics/philox.hpp"

using namespace lpx;
using kernels::cuda_available;

namespace {
std::vector<float> battery(size_t n) {
  std::vector<float> x(n);
  for (size_t i = 0; i < n; ++i) {
    const uint32_t r = random_bits(7, 1, i);
    // Mostly random float32 bit patterns over a moderate exponent range, plus specials.
    const uint32_t exp = 100 + (r >> 24) % 50;
    x[i] = bits_to_float((r & 0x807fffffu) | (exp << 23));
    if (i % 97 == 0) x[i] = std::numeric_limits<float>::quiet_NaN();
    if (i % 89 == 0) x[i] = -std::numeric_limits<float>::infinity();
    if (i % 83 == 0) x[i] = -0.0f;
  }
  return x;
}
}  // namespace

TEST_CASE("cast kernels reject bad arguments before touching CUDA") {
  const std::vector<float> in(8, 1.0f);
  std::vector<uint8_t> codes8(8);
  std::vector<uint16_t> codes16(8);
  std::vector<float> out(8);
  CastOptions opt;

  SECTION("null device pointers") {
    CHECK_THROWS_AS(kernels::encode_device(nullptr, codes8.data(), 8, fmt8::e4m3fn, opt), std::invalid_argument);
    CHECK_THROWS_AS(kernels::encode_device(in.data(), nullptr, 8, fmt8::e4m3fn, opt), std::invalid_argument);
    CHECK_THROWS_AS(kernels::decode_device(nullptr, out.data(), 8, fmt8::e4m3fn), std::invalid_argument);
    CHECK_THROWS_AS(kernels::fake_cast_device(in.data(), nullptr, 8, fmt8::e4m3fn, opt), std::invalid_argument);
    // Zero elements with null pointers is a no-op.
    CHECK_NOTHROW(kernels::encode_device(nullptr, nullptr, 0, fmt8::e4m3fn, opt));
  }
  SECTION("sizes and code widths") {
    CHECK_THROWS_AS(kernels::encode_host(in, std::span<uint8_t>(codes8).first(7), fmt8::e4m3fn, opt),
                    std::invalid_argument);
    CHECK_THROWS_AS(kernels::encode_host(in, codes16, fmt8::e4m3fn, opt), std::invalid_argument);
    CHECK_THROWS_AS(kernels::encode_host(in, codes8, fmt16::bf16, opt), std::invalid_argument);
    CHECK_THROWS_AS(kernels::decode_host(codes8, std::span<float>(out).first(3), fmt4::e2m1),
                    std::invalid_argument);
    CHECK_THROWS_AS(kernels::fake_cast_host(in, std::span<float>(out).first(3), fmt4::e2m1, opt),
                    std::invalid_argument);
  }
  SECTION("sr_bits range") {
    for (int bad : {0, -1, 33}) {
      CastOptions o;
      o.round = Rounding::sr;
      o.sr_bits = bad;
      CHECK_THROWS_AS(kernels::fake_cast_host(in, out, fmt8::e4m3fn, o), std::invalid_argument);
      CHECK_THROWS_AS(kernels::encode_device(in.data(), codes8.data(), 8, fmt8::e4m3fn, o),
                      std::invalid_argument);
    }
  }
  SECTION("unsupported or unfinalized formats") {
    ElementFormat blank;  // bits = 0
    CHECK_THROWS_AS(kernels::encode_host(in, codes8, blank, opt), std::invalid_argument);
    ElementFormat wide = fmt16::bf16;
    wide.bits = 20;
    CHECK_THROWS_AS(kernels::decode_device(codes8.data(), out.data(), 8, wide), std::invalid_argument);
    CHECK(kernels::code_bytes(fmt8::e5m2) == 1);
    CHECK(kernels::code_bytes(fmt16::f16) == 2);
  }
  SECTION("valid arguments without a device: runtime_error, not invalid_argument") {
    if (cuda_available()) return;
    CHECK_THROWS_AS(kernels::fake_cast_host(in, out, fmt8::e4m3fn, opt), std::runtime_error);
    CHECK_THROWS_AS(kernels::encode_host(in, codes8, fmt8::e4m3fn, opt), std::runtime_error);
  }
}

TEST_CASE("device casts equal the CPU codec for every format and rounding mode") {
  if (!cuda_available()) {
    WARN("skipped: no CUDA device (" << kernels::device_description() << ")");
    return;
  }
  // Ragged length and a misaligned index offset exercise the tails and the two-block
  // Philox path.
  const std::vector<float> x = battery(100003);
  for (const ElementFormat* f : named_formats()) {
    for (Rounding r : {Rounding::rne, Rounding::rna, Rounding::rtz, Rounding::rup, Rounding::rdn,
                       Rounding::sr}) {
      for (Overflow ov : {Overflow::sat, Overflow::ieee}) {
        INFO(f->name << " " << rounding_name(r) << " " << (ov == Overflow::sat ? "sat" : "ieee"));
        CastOptions opt;
        opt.round = r;
        opt.overflow = ov;
        opt.seed = 0x1234567890abcdefull;
        opt.stream = 3;
        opt.index_offset = 5;
        opt.sr_bits = r == Rounding::sr ? 13 : 32;
        std::vector<float> fake(x.size());
        kernels::fake_cast_host(x, fake, *f, opt);
        size_t bad_codes = 0, bad_fake = 0;
        std::vector<uint32_t> cpu(x.size());
        for (size_t i = 0; i < x.size(); ++i)
          cpu[i] = encode(x[i], *f, r, ov, random_bits(opt.seed, opt.stream, opt.index_offset + i), opt.sr_bits);
        if (f->bits <= 8) {
          std::vector<uint8_t> dev(x.size());
          kernels::encode_host(x, dev, *f, opt);
          for (size_t i = 0; i < x.size(); ++i) bad_codes += dev[i] != cpu[i];
        } else {
          std::vector<uint16_t> dev(x.size());
          kernels::encode_host(x, dev, *f, opt);
          for (size_t i = 0; i < x.size(); ++i) bad_codes += dev[i] != cpu[i];
        }
        for (size_t i = 0; i < x.size(); ++i)
          bad_fake += float_to_bits(fake[i]) != float_to_bits(decode(cpu[i], *f));
        CHECK(bad_codes == 0);
        CHECK(bad_fake == 0);
      }
    }
    // Decode: every code.
    const size_t codes = size_t{f->code_mask} + 1;
    std::vector<float> dev(codes);
    if (f->bits <= 8) {
      std::vector<uint8_t> c(codes);
      for (size_t i = 0; i < codes; ++i) c[i] = static_cast<uint8_t>(i);
      kernels::decode_host(c, dev, *f);
    } else {
      std::vector<uint16_t> c(codes);
      for (size_t i = 0; i < codes; ++i) c[i] = static_cast<uint16_t>(i);
      kernels::decode_host(c, dev, *f);
    }
    size_t bad = 0;
    for (size_t i = 0; i < codes; ++i)
      bad += float_to_bits(dev[i]) != float_to_bits(decode(static_cast<uint32_t>(i), *f));
    CHECK(bad == 0);
  }
}

TEST_CASE("device casts: P3109 formats, rto, the SR variants and described formats") {
  if (!cuda_available()) {
    WARN("skipped: no CUDA device (" << kernels::device_description() << ")");
    return;
  }
  // docs/formats.md#p3109, #stochastic-rounding-variants, #format-descriptor-files: the
  // kernels run the same LPX_HD codec, so the codes equal the CPU's; a descriptor of
  // float8_e4m3fn gives float8_e4m3fn's codes.
  const std::vector<float> x = battery(20011);
  FormatDescriptor d;
  d.name = "kernels_e4m3";
  d.exponent_bits = 4;
  d.mantissa_bits = 3;
  d.bias = 7;
  d.specials = "fn";
  const ElementFormat described = make_described_format(d);
  // and user formats the named ones cannot express: reserved codes, no subnormals
  d.name = "kernels_e4m3_hw";
  d.specials.reset();
  d.subnormals = false;
  d.nan_codes = std::vector<uint32_t>{0x7F, 0xFF};
  d.reserved_codes = std::vector<uint32_t>{0x7E, 0xFE};
  const ElementFormat reserved_no_subnormals = make_described_format(d);
  const ElementFormat formats[] = {format_by_name("p3109_k8p4se"), format_by_name("p3109_k8p3uf"),
                                   format_by_name("p3109_k8p1se"), format_by_name("p3109_k16p11se"),
                                   described, reserved_no_subnormals};
  for (const ElementFormat& f : formats) {
    for (Rounding r : {Rounding::rne, Rounding::rto, Rounding::sr, Rounding::sr_fast,
                       Rounding::sr_rne, Rounding::sr_odd}) {
      for (Overflow ov : {Overflow::sat, Overflow::ieee}) {
        INFO(f.name << " " << rounding_name(r) << " " << (ov == Overflow::sat ? "sat" : "ieee"));
        CastOptions opt;
        opt.round = r;
        opt.overflow = ov;
        opt.seed = 99;
        opt.stream = 1;
        opt.index_offset = 3;
        opt.sr_bits = is_stochastic(r) ? 5 : 32;
        size_t bad = 0, unlike_named = 0;
        std::vector<uint16_t> dev16(x.size());
        std::vector<uint8_t> dev8(x.size());
        if (f.bits <= 8) kernels::encode_host(x, dev8, f, opt);
        else kernels::encode_host(x, dev16, f, opt);
        for (size_t i = 0; i < x.size(); ++i) {
          const uint32_t w = random_bits(opt.seed, opt.stream, opt.index_offset + i);
          const uint32_t cpu = encode(x[i], f, r, ov, w, opt.sr_bits);
          const uint32_t dev = f.bits <= 8 ? dev8[i] : dev16[i];
          bad += dev != cpu ? 1 : 0;
          if (&f == &formats[4])
            unlike_named += dev != encode(x[i], fmt8::e4m3fn, r, ov, w, opt.sr_bits) ? 1 : 0;
        }
        CHECK(bad == 0);
        CHECK(unlike_named == 0);
      }
    }
  }
}
