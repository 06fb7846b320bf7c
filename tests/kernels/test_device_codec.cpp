// The device codec against the CPU codec, code for code. Skips (and says so) where no
// CUDA device is present; the host API's answers without a device are checked always.
#include <catch2/catch.hpp>

#include "lpx/formats/codec.hpp"
#include "lpx/kernels/device.hpp"

TEST_CASE("device codec round trip equals the CPU codec for every format") {
  if (!lpx::kernels::cuda_available()) {
    WARN("skipped: no CUDA device (" << lpx::kernels::device_description() << ")");
    CHECK_THROWS_AS(lpx::kernels::device_codec_roundtrip(lpx::fmt4::e2m1), std::runtime_error);
    return;
  }
  for (const lpx::ElementFormat* f : lpx::named_formats()) {
    INFO(f->name);
    const auto device = lpx::kernels::device_codec_roundtrip(*f);
    REQUIRE(device.size() == f->code_mask + 1);
    size_t mismatches = 0;
    for (uint32_t c = 0; c <= f->code_mask; ++c) {
      const float v = lpx::decode(c, *f);
      const uint32_t cpu = lpx::encode(v, *f, lpx::Rounding::rne, lpx::Overflow::ieee, 0);
      mismatches += device[c] != cpu ? 1 : 0;
    }
    CHECK(mismatches == 0);
  }
}
