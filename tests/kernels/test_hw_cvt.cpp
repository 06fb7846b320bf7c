// The hardware conversion table (kernels/hw_cvt.hpp): its emulator equivalents, the
// cvt.rs random-bit mapping, the argument checks (every build), and on a device that has
// an instruction the emulator against it (skipped where the device or the build lacks it).
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <stdexcept>
#include <vector>

#include "lpx/formats/codec.hpp"
#include "lpx/kernels/device.hpp"
#include "lpx/kernels/hw_cvt.hpp"
#include "lpx/numerics/philox.hpp"

using namespace lpx;
using kernels::HwCvt;

TEST_CASE("hw_cvt table: formats, rounding and random bits per form") {
  CHECK(kernels::all_hw_cvts().size() == 12);
  for (HwCvt w : kernels::all_hw_cvts()) {
    const kernels::HwCvtInfo i = kernels::hw_cvt_info(w);
    INFO(i.ptx);
    const std::string ptx = i.ptx;
    CHECK((i.round == Rounding::sr) == (ptx.find("cvt.rs.") == 0));
    CHECK((i.sr_bits > 0) == (i.round == Rounding::sr));
    CHECK((i.min_cc == 89) == (ptx.find("e4m3x2") != std::string::npos ||
                               ptx.find("e5m2x2") != std::string::npos));
  }
  CHECK(kernels::hw_cvt_info(HwCvt::ue8m0_rp_satfinite).round == Rounding::rup);
  CHECK(kernels::hw_cvt_info(HwCvt::ue8m0_rz_satfinite).round == Rounding::rtz);
  CHECK(kernels::hw_cvt_info(HwCvt::e2m1_rs_satfinite).sr_bits == 8);
  CHECK(kernels::hw_cvt_info(HwCvt::e3m2_rs_satfinite).format.name_view() == "float6_e3m2fn");
}

TEST_CASE("cvt_rs_word: the PTX ISA's slices of rbits, placed at the top of the word") {
  const uint32_t r = 0xA1B2C3D4u;
  // 8- and 6-bit forms: a, b share [31:16]; e, f share [15:0].
  CHECK(kernels::cvt_rs_word(HwCvt::e4m3_rs_satfinite, r, 0) == 0xA1B20000u);
  CHECK(kernels::cvt_rs_word(HwCvt::e4m3_rs_satfinite, r, 1) == 0xA1B20000u);
  CHECK(kernels::cvt_rs_word(HwCvt::e3m2_rs_satfinite, r, 2) == 0xC3D40000u);
  CHECK(kernels::cvt_rs_word(HwCvt::e5m2_rs_satfinite, r, 3) == 0xC3D40000u);
  // e2m1x4: a [31:24], b [15:8], e [23:16], f [7:0].
  CHECK(kernels::cvt_rs_word(HwCvt::e2m1_rs_satfinite, r, 0) == 0xA1000000u);
  CHECK(kernels::cvt_rs_word(HwCvt::e2m1_rs_satfinite, r, 1) == 0xC3000000u);
  CHECK(kernels::cvt_rs_word(HwCvt::e2m1_rs_satfinite, r, 2) == 0xB2000000u);
  CHECK(kernels::cvt_rs_word(HwCvt::e2m1_rs_satfinite, r, 3) == 0xD4000000u);
  CHECK(kernels::cvt_rs_word(HwCvt::e4m3_rn_satfinite, r, 0) == 0u);
  CHECK_THROWS_AS(kernels::cvt_rs_word(HwCvt::e2m1_rs_satfinite, r, 4), std::invalid_argument);
  // With sr_bits = 16 the emulator reads exactly the slice: a value a quarter of the way
  // between two e4m3 neighbours (1 and 1.125) rounds up iff the slice is >= 3/4 of 2^16.
  const float x = 1.03125f;
  CHECK(encode(x, fmt8::e4m3fn, Rounding::sr, Overflow::sat,
               kernels::cvt_rs_word(HwCvt::e4m3_rs_satfinite, 0xBFFF0000u, 0), 16) == 0x38);
  CHECK(encode(x, fmt8::e4m3fn, Rounding::sr, Overflow::sat,
               kernels::cvt_rs_word(HwCvt::e4m3_rs_satfinite, 0xC0000000u, 0), 16) == 0x39);
}

TEST_CASE("hardware_cvt_host checks its arguments before any CUDA call") {
  std::vector<float> in(10, 1.0f);
  std::vector<uint8_t> out(10), short_out(9);
  std::vector<uint32_t> rbits(3), few(2);
  CHECK_THROWS_AS(kernels::hardware_cvt_host(in, short_out, HwCvt::e4m3_rn_satfinite),
                  std::invalid_argument);
  CHECK_THROWS_WITH(kernels::hardware_cvt_host(in, out, HwCvt::e2m1_rs_satfinite),
                    Catch::Contains("rbits"));
  CHECK_THROWS_WITH(kernels::hardware_cvt_host(in, rbits, out, HwCvt::e2m1_rn_satfinite),
                    Catch::Contains("no random bits"));
  CHECK_THROWS_AS(kernels::hardware_cvt_host(in, few, out, HwCvt::e4m3_rs_satfinite),
                  std::invalid_argument);
  CHECK(kernels::hardware_cvt_host({}, {}, HwCvt::e4m3_rn_satfinite));  // nothing to do
  if (!kernels::cuda_available())
    CHECK_THROWS_AS(kernels::hardware_cvt_host(in, out, HwCvt::e4m3_rn_satfinite),
                    std::runtime_error);
}

TEST_CASE("hardware conversions equal the emulator where the device has them") {
  if (!kernels::cuda_available()) {
    WARN("skipped: no CUDA device (" << kernels::device_description() << ")");
    return;
  }
  const size_t n = 1 << 16;
  for (HwCvt w : kernels::all_hw_cvts()) {
    const kernels::HwCvtInfo info = kernels::hw_cvt_info(w);
    INFO(info.ptx);
    const ElementFormat& f = info.format;
    const bool e8m0 = f.name_view() == fmt8::e8m0.name_view();
    const float top = static_cast<float>(max_finite(f) > 1e38 ? 1e38 : max_finite(f));
    std::vector<float> x(n);
    for (size_t i = 0; i < n; ++i) {
      const uint32_t r = random_bits(9, 1, i);
      const float u = static_cast<float>(r >> 8) * 0x1p-24f;
      x[i] = (r & 1 ? -1.0f : 1.0f) * top * 1.25f * u;
      if (e8m0) x[i] = std::ldexp(1.0f + u, static_cast<int>(r % 250) - 125);  // scales: > 0
    }
    std::vector<uint32_t> rbits((n + 3) / 4);
    for (size_t g = 0; g < rbits.size(); ++g) rbits[g] = random_bits(10, 2, g);
    std::vector<uint8_t> hw(n);
    const bool ran = info.sr_bits > 0 ? kernels::hardware_cvt_host(x, rbits, hw, w)
                                      : kernels::hardware_cvt_host(x, hw, w);
    if (!ran) {
      WARN(info.ptx << ": not supported on this device");
      continue;
    }
    size_t bad = 0;
    for (size_t i = 0; i < n; ++i) {
      const uint32_t word = kernels::cvt_rs_word(w, rbits[i / 4], static_cast<int>(i % 4));
      const uint32_t emu = encode(x[i], f, info.round, Overflow::sat, word,
                                  info.sr_bits > 0 ? info.sr_bits : kMaxSrBits);
      bad += hw[i] != emu;
    }
    CHECK(bad == 0);
  }
}
