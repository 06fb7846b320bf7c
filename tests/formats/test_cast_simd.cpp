// The SIMD array casts (encode_array, decode_array, fake_cast_array) against the scalar
// codec, bit for bit, on every SIMD target Highway compiled in and this CPU supports:
// every named format plus e2m0, e1m2, e3m0; every rounding mode, both overflow modes;
// inputs on every grid point, midpoint and +-1 ulp, specials, float32 subnormals, huge
// values and random bit patterns; ragged lengths and unaligned pointers; SR with fixed
// seeds, index offsets that are not multiples of 4 (and cross 2^32 Philox groups), and
// sr_bits 32 and 8. Thread counts must not change any bit.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>
#include <span>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "lpx/formats/cast.hpp"
#include "lpx/formats/codec.hpp"
#include "lpx/formats/element_format.hpp"
#include "lpx/numerics/philox.hpp"

namespace {

using lpx::CastOptions;
using lpx::ElementFormat;
using lpx::Overflow;
using lpx::Rounding;

uint32_t bits_of(float x) {
  uint32_t b;
  std::memcpy(&b, &x, 4);
  return b;
}
float from_bits(uint32_t b) {
  float x;
  std::memcpy(&x, &b, 4);
  return x;
}

std::string fmt_hex(uint32_t v) {
  char buf[16];
  std::snprintf(buf, sizeof(buf), "%x", v);
  return buf;
}

std::vector<ElementFormat> all_formats() {
  std::vector<ElementFormat> out;
  for (const ElementFormat* f : lpx::named_formats()) out.push_back(*f);
  for (const char* name : {"e2m0", "e1m2", "e3m0"}) out.push_back(lpx::format_by_name(name));
  return out;
}

// Every positive finite value of the format (16-bit formats: every 16th code), the
// midpoints between neighbours and +-1 float32 ulp around both, with both signs; float32
// specials and subnormals; huge values; random bit patterns.
std::vector<float> inputs_for(const ElementFormat& f) {
  std::vector<float> grid;
  const uint32_t step = f.bits > 8 ? 16u : 1u;
  for (uint32_t c = 0; c <= f.code_mask; c += step) {
    if ((c & f.sign_mask) != 0) continue;
    const float v = lpx::decode(c, f);
    if (std::isfinite(v)) grid.push_back(v);
  }
  std::sort(grid.begin(), grid.end());
  std::vector<float> xs;
  auto add_around = [&](float v) {
    for (float w : {v, std::nextafter(v, -INFINITY), std::nextafter(v, INFINITY)}) {
      xs.push_back(w);
      xs.push_back(-w);
    }
  };
  for (size_t k = 0; k < grid.size(); ++k) {
    add_around(grid[k]);
    if (k + 1 < grid.size())
      add_around(static_cast<float>((static_cast<double>(grid[k]) + grid[k + 1]) / 2));
  }
  if (!grid.empty()) {
    // Past the largest value: the overflow boundary and beyond.
    const float mx = grid.back();
    for (float v : {mx * 1.0625f, mx * 1.125f, mx * 1.5f, mx * 2.0f, mx * 1024.0f}) add_around(v);
  }
  const float inf = std::numeric_limits<float>::infinity();
  for (float v : {0.0f, inf, std::numeric_limits<float>::max(), 1e30f, 3e38f, 65504.0f,
                  65520.0f, 448.0f, 464.0f, 6.0f, 7.0f, 0.25f, 0.75f,
                  std::numeric_limits<float>::min(), std::numeric_limits<float>::denorm_min(),
                  from_bits(0x007fffffu), from_bits(0x00400000u), from_bits(0x00000003u)})
    add_around(v);
  for (uint32_t b : {0x7fc00000u, 0xffc00000u, 0x7f800001u, 0xff800001u, 0x7fffffffu,
                     0xffffffffu, 0x7fa00000u})
    xs.push_back(from_bits(b));
  std::mt19937 rng(1234u + f.bits);
  for (int k = 0; k < 4099; ++k) xs.push_back(from_bits(static_cast<uint32_t>(rng())));
  // Random values near the format's range, where rounding decisions are dense.
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  const float scale = grid.empty() ? 1.0f : grid.back();
  for (int k = 0; k < 2000; ++k) xs.push_back(u(rng) * scale * 1.25f);
  return xs;
}

struct Mode {
  Rounding round;
  Overflow overflow;
  int sr_bits;
  uint64_t index_offset;
  uint64_t seed;
};

std::vector<Mode> all_modes() {
  std::vector<Mode> out;
  for (Overflow o : {Overflow::ieee, Overflow::sat}) {
    for (Rounding r : {Rounding::rne, Rounding::rna, Rounding::rtz, Rounding::rup, Rounding::rdn})
      out.push_back({r, o, 32, 0, 0});
    out.push_back({Rounding::sr, o, 32, 0, 42});
    out.push_back({Rounding::sr, o, 8, 7, 0x123456789abcdefull});
    // Groups i/4 cross 2^32: the counter's high word must carry.
    out.push_back({Rounding::sr, o, 32, (uint64_t{1} << 34) - 6, 7});
    // ... and a little later in the inputs, after draws that shared the high word 0.
    out.push_back({Rounding::sr, o, 32, (uint64_t{1} << 34) - 1002, 5});
    out.push_back({Rounding::sr, o, 13, 1, 99});
  }
  return out;
}

std::string describe(const ElementFormat& f, const Mode& m) {
  return std::string(f.name) + " " + std::string(lpx::rounding_name(m.round)) +
         (m.overflow == Overflow::sat ? " sat" : " ieee") + " sr_bits=" +
         std::to_string(m.sr_bits) + " index_offset=" + std::to_string(m.index_offset);
}

// Compares encode_array (u8 where it fits, and u16) and fake_cast_array on in[0, n)
// with the scalar codec; returns "" or a description of the first difference.
std::string check_encode(const float* in, size_t n, const ElementFormat& f, const Mode& m,
                         int threads) {
  CastOptions opt;
  opt.round = m.round;
  opt.overflow = m.overflow;
  opt.seed = m.seed;
  opt.stream = 3;
  opt.sr_bits = m.sr_bits;
  opt.index_offset = m.index_offset;
  opt.threads = threads;
  std::vector<uint32_t> want(n);
  for (size_t i = 0; i < n; ++i) {
    const uint32_t r = m.round == Rounding::sr
                           ? lpx::random_bits(opt.seed, opt.stream, opt.index_offset + i)
                           : 0u;
    want[i] = lpx::encode(in[i], f, m.round, m.overflow, r, m.sr_bits);
  }
  const std::span<const float> src(in, n);
  auto mismatch = [&](const char* what, size_t i, uint32_t got, uint32_t expected) {
    return std::string(what) + " at " + std::to_string(i) + " of " + std::to_string(n) +
           ": input bits 0x" + fmt_hex(bits_of(in[i])) + " got 0x" + fmt_hex(got) +
           " want 0x" + fmt_hex(expected);
  };
  if (f.bits <= 8) {
    std::vector<uint8_t> got(n + 1, 0xAB);
    lpx::encode_array(src, std::span<uint8_t>(got.data(), n), f, opt);
    for (size_t i = 0; i < n; ++i)
      if (got[i] != want[i]) return mismatch("encode u8", i, got[i], want[i]);
    if (got[n] != 0xAB) return "encode u8 wrote past the end";
  }
  std::vector<uint16_t> got16(n + 1, 0xABCD);
  lpx::encode_array(src, std::span<uint16_t>(got16.data(), n), f, opt);
  for (size_t i = 0; i < n; ++i)
    if (got16[i] != want[i]) return mismatch("encode u16", i, got16[i], want[i]);
  if (got16[n] != 0xABCD) return "encode u16 wrote past the end";
  std::vector<float> fake(n + 1, 1.5f);
  lpx::fake_cast_array(src, std::span<float>(fake.data(), n), f, opt);
  for (size_t i = 0; i < n; ++i) {
    const uint32_t w = bits_of(lpx::decode(want[i], f));
    if (bits_of(fake[i]) != w) return mismatch("fake_cast", i, bits_of(fake[i]), w);
  }
  if (fake[n] != 1.5f) return "fake_cast wrote past the end";
  return "";
}

// decode_array on every code (and, for <= 8-bit formats, every byte: bits above the
// format's width must be ignored), in u8 and u16 storage, from offset `skip`.
std::string check_decode(const ElementFormat& f, size_t skip) {
  const uint32_t top = f.bits <= 8 ? 255u : 65535u;
  std::vector<uint16_t> codes16;
  for (uint32_t c = 0; c <= top; ++c) codes16.push_back(static_cast<uint16_t>(c));
  for (size_t n : {size_t{0}, size_t{1}, size_t{5}, size_t{17}, codes16.size() - skip}) {
    std::vector<float> got(n);
    lpx::decode_array(std::span<const uint16_t>(codes16.data() + skip, n), got, f);
    for (size_t i = 0; i < n; ++i) {
      const uint32_t w = bits_of(lpx::decode(codes16[skip + i], f));
      if (bits_of(got[i]) != w)
        return "decode u16 code 0x" + fmt_hex(codes16[skip + i]) + " got 0x" +
               fmt_hex(bits_of(got[i])) + " want 0x" + fmt_hex(w);
    }
    if (f.bits <= 8) {
      std::vector<uint8_t> codes8(codes16.begin(), codes16.end());
      lpx::decode_array(std::span<const uint8_t>(codes8.data() + skip, n), got, f);
      for (size_t i = 0; i < n; ++i) {
        const uint32_t w = bits_of(lpx::decode(codes8[skip + i], f));
        if (bits_of(got[i]) != w)
          return "decode u8 code 0x" + fmt_hex(codes8[skip + i]) + " got 0x" +
                 fmt_hex(bits_of(got[i])) + " want 0x" + fmt_hex(w);
      }
    }
  }
  return "";
}

// Runs every check on the currently dispatched target.
void check_all_on_current_target(const std::string& target) {
  for (const ElementFormat& f : all_formats()) {
    const std::vector<float> xs = inputs_for(f);
    for (size_t skip = 0; skip < 4; ++skip) {
      const std::string err = check_decode(f, skip);
      INFO("target " << target << ", " << f.name << " decode, offset " << skip);
      INFO(err);
      CHECK(err.empty());
    }
    for (const Mode& m : all_modes()) {
      std::string err = check_encode(xs.data(), xs.size(), f, m, 0);
      size_t len_failed = xs.size();
      // Ragged lengths from unaligned starting points (offset by 1..3 floats).
      for (size_t len : {0, 1, 3, 4, 5, 17, 1000, 4099}) {
        for (size_t skip = 1; skip <= 3 && err.empty(); ++skip) {
          err = check_encode(xs.data() + skip, std::min(len, xs.size() - skip), f, m, 0);
          len_failed = len;
        }
      }
      INFO("target " << target << ", " << describe(f, m) << ", length " << len_failed);
      INFO(err);
      CHECK(err.empty());
    }
  }
}

}  // namespace

TEST_CASE("SIMD array casts match the scalar codec on every target", "[cast][simd]") {
  const auto targets = lpx::cast_testing::simd_targets();
  REQUIRE(!targets.empty());
  for (const auto& t : targets) {
    lpx::cast_testing::force_simd_target(t.id);
    const std::string dispatched = lpx::cast_testing::dispatched_simd_target();
    INFO("forced target " << t.name << ", dispatched " << dispatched);
    CHECK(dispatched == t.name);
    check_all_on_current_target(t.name);
    WARN("checked SIMD target " << t.name);
  }
  lpx::cast_testing::force_simd_target(0);
}

TEST_CASE("Array casts do not depend on the thread count", "[cast][simd][threads]") {
  // Several 64 Ki chunks with a ragged end, so threads really split the work.
  const size_t n = (size_t{1} << 18) + 4099;
  std::vector<float> xs(n);
  std::mt19937 rng(7);
  std::normal_distribution<float> g(0.0f, 100.0f);
  for (float& x : xs) x = g(rng);
  for (const ElementFormat* f : {&lpx::fmt8::e4m3fn, &lpx::fmt4::e2m1, &lpx::fmt16::bf16}) {
    for (Rounding r : {Rounding::rne, Rounding::sr}) {
      CastOptions opt;
      opt.round = r;
      opt.seed = 5;
      opt.index_offset = 3;  // chunk boundaries off the array's multiples of 4
      std::vector<uint16_t> a(n), b(n), c(n);
      opt.threads = 1;
      lpx::encode_array(xs, a, *f, opt);
      opt.threads = 2;
      lpx::encode_array(xs, b, *f, opt);
      opt.threads = 3;
      lpx::encode_array(xs, c, *f, opt);
      INFO(f->name << " " << lpx::rounding_name(r));
      CHECK(a == b);
      CHECK(a == c);
      std::vector<float> fa(n), fb(n);
      opt.threads = 1;
      lpx::fake_cast_array(xs, fa, *f, opt);
      opt.threads = 2;
      lpx::fake_cast_array(xs, fb, *f, opt);
      CHECK(std::memcmp(fa.data(), fb.data(), n * sizeof(float)) == 0);
      // And both equal the scalar reference.
      const Mode m{r, opt.overflow, opt.sr_bits, opt.index_offset, opt.seed};
      const std::string err = check_encode(xs.data(), n, *f, m, 2);
      INFO(err);
      CHECK(err.empty());
    }
  }
}

TEST_CASE("Arrays too large for the caches (non-temporal stores) match the scalar codec",
          "[cast][simd][stream]") {
  // 14 Mi + 13 float32: past cast.cpp's 64 MiB threshold for streamed stores (kStreamBytes)
  // with float outputs and with byte codes (5 bytes per element; on AVX-512 stored 64 at
  // a time). The outputs start one element past an aligned address, so every chunk's
  // vector loop has to find its own aligned start (and, under sr, one on a Philox block
  // boundary).
  const size_t n = (size_t{14} << 20) + 13;
  std::vector<float> xs(n);
  std::mt19937 rng(11);
  std::normal_distribution<float> g(0.0f, 3.0f);
  for (float& x : xs) x = g(rng);
  xs[12345] = std::numeric_limits<float>::quiet_NaN();
  xs[777777] = -std::numeric_limits<float>::infinity();
  for (Rounding r : {Rounding::rne, Rounding::sr}) {
    CastOptions opt;
    opt.round = r;
    opt.seed = 9;
    opt.index_offset = 2;
    opt.threads = 2;
    std::vector<float> fake(n + 1);
    lpx::fake_cast_array(xs, std::span<float>(fake.data() + 1, n), lpx::fmt8::e4m3fn, opt);
    std::vector<uint8_t> codes(n + 1);
    lpx::encode_array(xs, std::span<uint8_t>(codes.data() + 1, n), lpx::fmt8::e4m3fn, opt);
    size_t bad = 0;
    for (size_t i = 0; i < n; ++i) {
      const uint32_t rb = r == Rounding::sr ? lpx::random_bits(opt.seed, opt.stream, opt.index_offset + i) : 0u;
      const uint32_t want = lpx::encode(xs[i], lpx::fmt8::e4m3fn, r, opt.overflow, rb, opt.sr_bits);
      const float want_v = lpx::decode(want, lpx::fmt8::e4m3fn);
      if (codes[i + 1] != want || std::memcmp(&fake[i + 1], &want_v, sizeof(float)) != 0) ++bad;
    }
    INFO(lpx::rounding_name(r));
    CHECK(bad == 0);
  }
}
