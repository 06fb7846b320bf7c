// `lpx cast`, `lpx decode`, `lpx info|table|formats` through the real binary: results
// equal the library codec element for element, and every bad input gets one stderr
// line, the documented exit status, and no output file.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>

#include "cli_runner.hpp"
#include "lpx/formats/codec.hpp"
#include "lpx/numerics/philox.hpp"

using namespace lpx_test;

namespace {
std::vector<float> sample() {
  std::vector<float> x = {0.f, -0.f, 1.f, -1.5f, 448.f, 464.f, 465.f, 1e-9f, -3e38f, 0.3f,
                          std::numeric_limits<float>::infinity(),
                          -std::numeric_limits<float>::infinity(),
                          std::numeric_limits<float>::quiet_NaN()};
  for (int i = 0; i < 1000; ++i)
    x.push_back(std::ldexp(static_cast<float>(lpx::random_bits(3, 0, static_cast<uint64_t>(i)) % 2000) - 1000.f, -6));
  return x;
}
}  // namespace

TEST_CASE("cast writes the codec's codes, values and .npy; decode inverts it") {
  TempDir dir;
  const auto x = sample();
  write_file(dir / "x.f32", x);
  const lpx::ElementFormat e4m3 = lpx::format_by_name("e4m3");

  auto r = run_lpx("cast --to e4m3 " + (dir / "x.f32").string() + " " + (dir / "c.bin").string(), dir);
  REQUIRE(r.status == 0);
  const auto codes = read_file<uint8_t>(dir / "c.bin");
  REQUIRE(codes.size() == x.size());
  for (size_t i = 0; i < x.size(); ++i)
    CHECK(codes[i] == lpx::encode(x[i], e4m3, lpx::Rounding::rne, lpx::Overflow::ieee));

  r = run_lpx("cast --to fp4 --overflow sat --round sr --seed 9 --sr-bits 8 --emit values " +
                  (dir / "x.f32").string() + " " + (dir / "v.f32").string(), dir);
  REQUIRE(r.status == 0);
  const auto values = read_file<float>(dir / "v.f32");
  REQUIRE(values.size() == x.size());
  size_t mismatches = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    const uint32_t code = lpx::encode(x[i], lpx::fmt4::e2m1, lpx::Rounding::sr, lpx::Overflow::sat,
                                      lpx::random_bits(9, 0, i), 8);
    const float expect = lpx::decode(code, lpx::fmt4::e2m1);
    mismatches += std::memcmp(&expect, &values[i], 4) != 0 ? 1 : 0;
  }
  CHECK(mismatches == 0);

  // 16-bit codes are little-endian uint16; decode gives back the exact bfloat16 values.
  r = run_lpx("cast --to bf16 " + (dir / "x.f32").string() + " " + (dir / "c16.bin").string(), dir);
  REQUIRE(r.status == 0);
  CHECK(read_file<uint16_t>(dir / "c16.bin").size() == x.size());
  r = run_lpx("decode --from bf16 " + (dir / "c16.bin").string() + " " + (dir / "d.npy").string(), dir);
  REQUIRE(r.status == 0);
  const std::string npy = slurp(dir / "d.npy");
  REQUIRE(npy.size() > 10);
  CHECK(npy.substr(1, 5) == "NUMPY");

  // stdin to stdout
  r = run_lpx("cast --to e5m2 - -", dir, (dir / "x.f32").string());
  REQUIRE(r.status == 0);
  REQUIRE(r.out.size() == x.size());
  CHECK(static_cast<uint8_t>(r.out[4]) == lpx::encode(448.f, lpx::fmt8::e5m2, lpx::Rounding::rne, lpx::Overflow::ieee));
}

TEST_CASE("info, table and formats print the spec values") {
  TempDir dir;
  auto r = run_lpx("info e4m3", dir);
  REQUIRE(r.status == 0);
  CHECK_THAT(r.out, Catch::Contains("448"));
  CHECK_THAT(r.out, Catch::Contains("float8_e4m3fn"));
  r = run_lpx("table e2m1", dir);
  REQUIRE(r.status == 0);
  for (const char* v : {"0.5", "1.5", "3", "4", "6", "-6"}) CHECK_THAT(r.out, Catch::Contains(v));
  r = run_lpx("formats", dir);
  REQUIRE(r.status == 0);
  CHECK_THAT(r.out, Catch::Contains("57344"));
  r = run_lpx("info e2m0", dir);
  REQUIRE(r.status == 0);
  CHECK_THAT(r.out, Catch::Contains("max finite      4"));
}

TEST_CASE("bad input: one stderr line, exit 2 for usage and 1 for data, no output file") {
  TempDir dir;
  write_file(dir / "x.f32", std::vector<float>{1.f, 2.f});
  write_file(dir / "odd.f32", std::vector<uint8_t>{1, 2, 3, 4, 5});
  write_file(dir / "empty.f32", std::vector<uint8_t>{});
  const std::string x = (dir / "x.f32").string(), out = (dir / "out.bin").string();

  struct Case {
    std::string args;
    int status;
    std::string message;
  };
  const Case cases[] = {
      {"cast --to fp5 " + x + " " + out, 2, "float8_e4m3fn"},       // lists known names
      {"cast --to e9m9 " + x + " " + out, 2, "exponent bits"},
      {"cast --to e4m3 --round nearest " + x + " " + out, 2, "rne"},
      {"cast --to e4m3 --overflow clamp " + x + " " + out, 2, "sat or ieee"},
      {"cast --to e4m3 --seed 3 " + x + " " + out, 2, "--round sr"},  // conflicting options
      {"cast --to e4m3 --round sr --sr-bits 40 " + x + " " + out, 2, "sr-bits"},
      {"cast --to e4m3 " + (dir / "odd.f32").string() + " " + out, 1, "multiple of 4"},
      {"cast --to e4m3 " + (dir / "missing.f32").string() + " " + out, 1, "missing.f32"},
      {"cast --to e4m3 " + (dir / "empty.f32").string() + " " + out, 1, "empty"},
      {"cast --to e4m3 --shape 3x1 " + x + " " + out, 1, "shape"},
      {"cast --to e4m3 " + x + " " + (dir / "no/such/dir/out.bin").string(), 1, "out.bin"},
      {"cast --to e4m3 " + x, 2, "OUT"},
      {"decode --from e2m1 " + x + " " + out, 1, "does not fit"},   // 0x80 is not an FP4 code
      {"info nosuchformat", 2, "known formats"},
      {"frobnicate", 2, ""},
  };
  for (const Case& c : cases) {
    INFO(c.args);
    const CliResult r = run_lpx(c.args, dir);
    CHECK(r.status == c.status);
    CHECK(r.err_lines() == 1);
    CHECK_THAT(r.err, Catch::Contains(c.message));
    CHECK_FALSE(std::filesystem::exists(out));
  }
  // Nothing but the inputs and the captured streams is left in the directory.
  int files = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir.path())) files += e.is_regular_file();
  CHECK(files == 5);
}

TEST_CASE("npy inputs: float16 is read exactly, unsupported dtypes and orders are refused") {
  TempDir dir;
  // Hand-built .npy v1 headers (independent of lpx's writer).
  auto npy = [](const std::string& descr, bool fortran, const std::string& shape,
                const std::string& payload) {
    std::string dict = "{'descr': '" + descr + "', 'fortran_order': " +
                       (fortran ? "True" : "False") + ", 'shape': " + shape + ", }";
    while ((10 + dict.size() + 1) % 64 != 0) dict += ' ';
    dict += '\n';
    std::string s = "\x93NUMPY";
    s += '\x01';
    s += '\x00';
    s += static_cast<char>(dict.size() & 0xff);
    s += static_cast<char>(dict.size() >> 8);
    return s + dict + payload;
  };
  auto put = [&](const std::string& name, const std::string& bytes) {
    std::ofstream f(dir / name, std::ios::binary);
    f << bytes;
  };
  // float16 1.0 (0x3C00) and -2.0 (0xC000)
  put("h.npy", npy("<f2", false, "(2,)", std::string("\x00\x3c\x00\xc0", 4)));
  put("d.npy", npy("<f8", false, "(1,)", std::string(8, '\0')));
  put("f.npy", npy("<f4", true, "(1, 1)", std::string(4, '\0')));

  auto r = run_lpx("cast --to e4m3 " + (dir / "h.npy").string() + " " + (dir / "o.bin").string(), dir);
  REQUIRE(r.status == 0);
  const auto codes = read_file<uint8_t>(dir / "o.bin");
  REQUIRE(codes.size() == 2);
  CHECK(codes[0] == 0x38);  // 1.0
  CHECK(codes[1] == 0xC0);  // -2.0

  r = run_lpx("cast --to e4m3 " + (dir / "d.npy").string() + " " + (dir / "o2.bin").string(), dir);
  CHECK(r.status == 1);
  CHECK(r.err_lines() == 1);
  CHECK_FALSE(std::filesystem::exists(dir / "o2.bin"));
  r = run_lpx("cast --to e4m3 " + (dir / "f.npy").string() + " " + (dir / "o3.bin").string(), dir);
  CHECK(r.status == 1);
  CHECK_THAT(r.err, Catch::Contains("fortran"));
  CHECK_FALSE(std::filesystem::exists(dir / "o3.bin"));
}
