// IEEE P3109 formats through the real binary (docs/formats.md#p3109): `lpx cast` and
// `lpx quantize` with a P3109 element give the library's results, `lpx info` / `lpx table`
// print gfloat's values and special codes, and unknown P3109 parameters are one stderr
// line with exit 2.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <limits>

#include "cli_runner.hpp"
#include "lpx/formats/block_format.hpp"
#include "lpx/formats/codec.hpp"
#include "lpx/formats/quantize.hpp"
#include "lpx/numerics/philox.hpp"

using namespace lpx_test;

namespace {
bool same_bytes(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * 4) == 0;
}
std::vector<float> sample(size_t n) {
  std::vector<float> x = {0.f, -0.f, 1.f, -1.5f, 224.f, 232.f, 233.f, 240.f, 248.f, 1e-9f,
                          -3e38f, 0.3f, std::numeric_limits<float>::infinity(),
                          -std::numeric_limits<float>::infinity(),
                          std::numeric_limits<float>::quiet_NaN()};
  for (size_t i = x.size(); i < n; ++i)
    x.push_back(std::ldexp(static_cast<float>(lpx::random_bits(5, 0, i) % 4000) - 2000.f, -4));
  return x;
}
}  // namespace

TEST_CASE("lpx cast to P3109 formats equals the codec, both overflow policies") {
  TempDir dir;
  const auto x = sample(1000);
  write_file(dir / "x.f32", x);
  for (const char* name : {"p3109_k8p4se", "p3109_k8p4sf", "p3109_k8p3ue", "p3109_k6p3sf",
                           "p3109_k8p1se"}) {
    const lpx::ElementFormat f = lpx::format_by_name(name);
    for (const char* ovf : {"ieee", "sat"}) {
      INFO(name << " " << ovf);
      const auto r = run_lpx(std::string("cast --to ") + name + " --overflow " + ovf + " " +
                                 (dir / "x.f32").string() + " " + (dir / "c.bin").string(),
                             dir);
      REQUIRE(r.status == 0);
      const auto codes = read_file<uint8_t>(dir / "c.bin");
      REQUIRE(codes.size() == x.size());
      const lpx::Overflow o = std::string(ovf) == "sat" ? lpx::Overflow::sat : lpx::Overflow::ieee;
      size_t bad = 0;
      for (size_t i = 0; i < x.size(); ++i)
        bad += codes[i] != lpx::encode(x[i], f, lpx::Rounding::rne, o) ? 1 : 0;
      CHECK(bad == 0);
    }
  }
  // Pinned codes (gfloat's rules): p3109_k8p4se 224 -> 0x7E, 232 (a tie) -> 0x7E,
  // 233 -> +Inf 0x7F, -Inf -> 0xFF, NaN -> 0x80, -0 -> 0x00.
  const auto r = run_lpx("cast --to p3109_k8p4se " + (dir / "x.f32").string() + " " +
                             (dir / "c.bin").string(), dir);
  REQUIRE(r.status == 0);
  const auto codes = read_file<uint8_t>(dir / "c.bin");
  CHECK(codes[0] == 0x00);
  CHECK(codes[1] == 0x00);
  CHECK(codes[2] == 0x40);
  CHECK(codes[4] == 0x7E);
  CHECK(codes[5] == 0x7E);
  CHECK(codes[6] == 0x7F);
  CHECK(codes[12] == 0x7F);
  CHECK(codes[13] == 0xFF);
  CHECK(codes[14] == 0x80);
}

TEST_CASE("lpx quantize with a P3109 element equals the library's fake_quantize") {
  TempDir dir;
  const auto x = sample(8 * 64);
  write_file(dir / "x.f32", x);
  for (const char* spec : {"p3109_k8p4se:b32:e8m0:floor", "p3109_k4p2sf:b16:e4m3", "p3109_k8p3ue:b32:e8m0:rceil"}) {
    INFO(spec);
    const auto r = run_lpx(std::string("quantize --format ") + spec + " --shape 8x64 " +
                               (dir / "x.f32").string() + " " + (dir / "v.f32").string(),
                           dir);
    REQUIRE(r.status == 0);
    std::vector<float> want(x.size());
    const std::vector<int64_t> shape = {8, 64};
    lpx::fake_quantize({x, shape}, want, lpx::parse_block_format(spec));
    CHECK(same_bytes(read_file<float>(dir / "v.f32"), want));
  }
}

TEST_CASE("lpx info and table print P3109 values and special codes") {
  TempDir dir;
  auto r = run_lpx("info p3109_k8p4se", dir);
  REQUIRE(r.status == 0);
  CHECK_THAT(r.out, Catch::Contains("max finite      224"));
  CHECK_THAT(r.out, Catch::Contains("NaN code        0x80"));
  CHECK_THAT(r.out, Catch::Contains("Inf code        0x7F"));
  CHECK_THAT(r.out, Catch::Contains("bias            8"));
  r = run_lpx("info p3109_k8p3uf", dir);
  REQUIRE(r.status == 0);
  CHECK_THAT(r.out, Catch::Contains("NaN code        0xFF"));
  CHECK(r.out.find("Inf code") == std::string::npos);
  r = run_lpx("table p3109_k3p2se", dir);
  REQUIRE(r.status == 0);
  // Signed K = 3, P = 2: codes 0..3 = 0, 0.5, 1, inf; 4 = NaN; 5..7 = -0.5, -1, -inf.
  CHECK_THAT(r.out, Catch::Contains("0x4  100  nan"));
  CHECK_THAT(r.out, Catch::Contains("0x3  011  inf"));
  CHECK_THAT(r.out, Catch::Contains("0x7  111  -inf"));
  CHECK_THAT(r.out, Catch::Contains("0x6  110  -1"));
  r = run_lpx("formats", dir);
  REQUIRE(r.status == 0);
  CHECK_THAT(r.out, Catch::Contains("p3109_k<K>p<P>"));
}

TEST_CASE("unknown P3109 parameters: one stderr line, exit 2") {
  TempDir dir;
  write_file(dir / "x.f32", std::vector<float>{1.f, 2.f});
  const std::string x = (dir / "x.f32").string(), out = (dir / "out.bin").string();
  for (const char* name : {"p3109_k8p8se", "p3109_k8p9sf", "p3109_k17p4se", "p3109_k1p1ue",
                           "p3109_k16p1se"}) {
    for (const std::string& args : {"cast --to " + std::string(name) + " " + x + " " + out,
                                    "info " + std::string(name)}) {
      INFO(args);
      const CliResult r = run_lpx(args, dir);
      CHECK(r.status == 2);
      CHECK(r.err_lines() == 1);
      CHECK_THAT(r.err, Catch::Contains(name));
      CHECK_FALSE(std::filesystem::exists(out));
    }
  }
  const CliResult r = run_lpx("info p3109_k8p8se", dir);
  CHECK_THAT(r.err, Catch::Contains("1 <= P < K"));
}
