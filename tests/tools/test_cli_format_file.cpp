// `lpx --format-file F.json` (docs/formats.md#format-descriptor-files): a descriptor that
// reproduces a named format gives that format's codes and block quantization bit for bit,
// its name works in info/table/cast/quantize, and every malformed descriptor is one
// stderr line with exit 2 and no output file.
#include <catch2/catch.hpp>

#include <cmath>
#include <fstream>
#include <limits>

#include "cli_runner.hpp"
#include "lpx/formats/format_registry.hpp"
#include "lpx/numerics/philox.hpp"

using namespace lpx_test;

namespace {
void write_text(const std::filesystem::path& p, const std::string& s) { std::ofstream(p) << s; }
std::vector<float> sample() {
  std::vector<float> x = {0.f, -0.f, 448.f, 464.f, 465.f, 224.f, 232.f, 233.f, 1e-30f,
                          std::numeric_limits<float>::infinity(),
                          -std::numeric_limits<float>::infinity(),
                          std::numeric_limits<float>::quiet_NaN()};
  for (size_t i = 0; i < 4000; ++i)
    x.push_back(std::ldexp(static_cast<float>(lpx::random_bits(21, 0, i) % 60001) - 30000.f, -6));
  return x;
}
}  // namespace

TEST_CASE("a descriptor that reproduces a named format gives its codes") {
  TempDir dir;
  const auto x = sample();
  write_file(dir / "x.f32", x);
  const std::string xf = (dir / "x.f32").string();
  struct Case {
    std::string json, name, named, block;
  };
  const Case cases[] = {
      {R"({"name": "my_e4m3", "exponent_bits": 4, "mantissa_bits": 3, "bias": 7, "specials": "fn"})",
       "my_e4m3", "float8_e4m3fn", ":b32:e8m0"},
      {R"({"name": "my.p3109-k8p4se", "signed": true, "exponent_bits": 4, "mantissa_bits": 3,
          "bias": 8, "specials": "p3109e", "notes": "P3109 binary8p4se"})",
       "my.p3109-k8p4se", "p3109_k8p4se", ":b32:e8m0:rceil"},
      {R"({"name": "my_fp4", "exponent_bits": 2, "mantissa_bits": 1})", "my_fp4", "float4_e2m1fn",
       ":b16:e4m3"},
  };
  for (const Case& c : cases) {
    INFO(c.name);
    write_text(dir / "f.json", c.json);
    const std::string ff = "--format-file " + (dir / "f.json").string() + " ";
    auto a = run_lpx(ff + "cast --to " + c.name + " --round rne " + xf + " " + (dir / "a.bin").string(), dir);
    auto b = run_lpx("cast --to " + c.named + " " + xf + " " + (dir / "b.bin").string(), dir);
    REQUIRE(a.status == 0);
    REQUIRE(b.status == 0);
    CHECK(read_file<uint8_t>(dir / "a.bin") == read_file<uint8_t>(dir / "b.bin"));
    a = run_lpx(ff + "quantize --format " + c.name + c.block + " " + xf + " " + (dir / "qa.f32").string(), dir);
    b = run_lpx("quantize --format " + c.named + c.block + " " + xf + " " + (dir / "qb.f32").string(), dir);
    REQUIRE(a.status == 0);
    REQUIRE(b.status == 0);
    CHECK(read_file<float>(dir / "qa.f32").size() == x.size());
    const auto qa = read_file<uint8_t>(dir / "qa.f32"), qb = read_file<uint8_t>(dir / "qb.f32");
    CHECK(qa == qb);
    // info and table print the same limits and values under the new name.
    a = run_lpx(ff + "table " + c.name, dir);
    b = run_lpx("table " + c.named, dir);
    REQUIRE(a.status == 0);
    CHECK(a.out == b.out);
    a = run_lpx(ff + "info " + c.name, dir);
    REQUIRE(a.status == 0);
    CHECK_THAT(a.out, Catch::Contains(c.name));
  }
}

TEST_CASE("malformed descriptors: one stderr line, exit 2") {
  TempDir dir;
  write_file(dir / "x.f32", std::vector<float>{1.f, 2.f});
  const std::string out = (dir / "out.bin").string();
  struct Case {
    std::string json, message;
  };
  const Case cases[] = {
      {R"({"name": "wide", "exponent_bits": 8, "mantissa_bits": 10})", "at most 16"},
      {R"({"name": "e4m3", "exponent_bits": 4, "mantissa_bits": 3})", "name is taken"},
      {R"({"name": "p3109_k8p4se", "exponent_bits": 4, "mantissa_bits": 3})", "name is taken"},
      {R"({"name": "a", "exponent_bits": 4, "mantissa_bits": 3, "specials": "weird"})", "is not one of"},
      {R"({"name": "a", "exponent_bits": 4, "mantissa_bits": 3, "nan_code": 255})", "unknown key"},
      {R"({"name": "a", "exponent_bits": 4, "mantissa_bits": 3, "subnormals": "no"})", "true or false"},
      {R"({"name": "a", "exponent_bits": 4, "mantissa_bits": 3, "nan_codes": ["0xZZ"]})", "not a code"},
      {R"({"name": "a", "exponent_bits": 4, "mantissa_bits": 3, "nan_codes": 255})", "list of codes"},
      {R"({"name": "a", "exponent_bits": 4, "mantissa_bits": 3, "nan_codes": ["0x7F", 255],
          "inf_codes": [127, "0xFF"]})", "listed both as NaN and as Inf"},
      {R"({"name": "a", "exponent_bits": 4, "mantissa_bits": 3, "specials": "fn",
          "nan_codes": ["0x7E", "0xFE"]})", "finite under specials 'fn'"},
      {R"({"name": "a", "exponent_bits": 4, "mantissa_bits": 3, "nan_codes": ["0x00"]})", "fit no layout"},
      {R"({"name": "a", "exponent_bits": 4})", "missing \"mantissa_bits\""},
      {R"({"name": "a", "exponent_bits": "4", "mantissa_bits": 3})", "must be an integer"},
      {R"({"name": "a", "signed": false, "exponent_bits": 4, "mantissa_bits": 3, "specials": "fnuz"})",
       "fnuz needs a sign bit"},
      {R"({"name": "a", "exponent_bits": 8, "mantissa_bits": 3, "bias": -20})", "float32"},
      {R"({"name": "a:b", "exponent_bits": 4, "mantissa_bits": 3})", "letters, digits"},
      {R"({"name": "a", "exponent_bits": 0, "mantissa_bits": 3})", "outside 1..8"},
      {R"([1, 2])", "JSON object"},
      {R"({"name": "a", "name": "b", "exponent_bits": 4, "mantissa_bits": 3})", "duplicate key"},
      {R"({"name": )", "not valid JSON"},
  };
  for (const Case& c : cases) {
    INFO(c.json);
    write_text(dir / "f.json", c.json);
    const CliResult r = run_lpx("--format-file " + (dir / "f.json").string() + " cast --to e4m3 " +
                                    (dir / "x.f32").string() + " " + out,
                                dir);
    CHECK(r.status == 2);
    CHECK(r.err_lines() == 1);
    CHECK_THAT(r.err, Catch::Contains(c.message));
    CHECK_FALSE(std::filesystem::exists(out));
  }
  const CliResult r = run_lpx("--format-file " + (dir / "nope.json").string() + " info e4m3", dir);
  CHECK(r.status == 2);
  CHECK(r.err_lines() == 1);
  CHECK_THAT(r.err, Catch::Contains("nope.json"));
}

TEST_CASE("make_described_format equals the named descriptor field for field") {
  lpx::FormatDescriptor d;
  d.name = "lib_e5m2";
  d.exponent_bits = 5;
  d.mantissa_bits = 2;
  d.specials = "ieee";
  const lpx::ElementFormat f = lpx::make_described_format(d);
  const lpx::ElementFormat& g = lpx::fmt8::e5m2;
  CHECK(f.bias == g.bias);
  CHECK(f.max_magnitude == g.max_magnitude);
  CHECK(f.inf_magnitude == g.inf_magnitude);
  CHECK(f.nan_code == g.nan_code);
  lpx::register_format(f);
  CHECK(std::string(lpx::format_by_name("lib_e5m2").name) == "lib_e5m2");
  CHECK_THROWS_AS(lpx::register_format(f), std::invalid_argument);  // twice: taken
}

TEST_CASE("--format-dir registers every descriptor of a folder, and refuses a missing or empty one") {
  TempDir dir;
  std::filesystem::create_directories(dir / "reg");
  write_text(dir / "reg" / "a.json", R"({"name": "reg_e4m3", "exponent_bits": 4, "mantissa_bits": 3, "specials": "fn"})");
  write_text(dir / "reg" / "b.json", R"({"name": "reg_e2m1", "exponent_bits": 2, "mantissa_bits": 1})");
  write_text(dir / "reg" / "readme.txt", "not a descriptor");
  const std::string reg = "--format-dir " + (dir / "reg").string() + " ";
  // the registered formats are the named ones they describe: the same tables
  for (const auto& [mine, named] : {std::pair<std::string, std::string>{"reg_e4m3", "e4m3"}, {"reg_e2m1", "e2m1"}}) {
    const CliResult a = run_lpx(reg + "table " + mine, dir), b = run_lpx("table " + named, dir);
    REQUIRE(a.status == 0);
    REQUIRE(b.status == 0);
    CHECK(a.out == b.out);
  }
  std::filesystem::create_directories(dir / "empty");
  for (const auto& [args, message] : {std::pair<std::string, std::string>{"--format-dir " + (dir / "empty").string(), "no format descriptor"},
                                      {"--format-dir " + (dir / "nope").string(), "not a folder"}}) {
    const CliResult r = run_lpx(args + " info e4m3", dir);
    CHECK(r.status == 2);
    CHECK(r.err_lines() == 1);
    CHECK_THAT(r.err, Catch::Contains(message));
  }
  // a bad descriptor in the folder names its file
  write_text(dir / "reg" / "c.json", R"({"name": "reg_bad", "exponent_bits": 12, "mantissa_bits": 3})");
  const CliResult r = run_lpx(reg + "info e4m3", dir);
  CHECK(r.status == 2);
  CHECK(r.err_lines() == 1);
  CHECK_THAT(r.err, Catch::Contains("c.json"));
}

TEST_CASE("a descriptor with reserved codes and no subnormals: info, table and cast say so") {
  TempDir dir;
  write_text(dir / "f.json", R"({"name": "hw_e4m3", "exponent_bits": 4, "mantissa_bits": 3, "bias": 7,
      "subnormals": false, "nan_codes": ["0x7F", "0xFF"], "reserved_codes": ["0x7E", "0xFE"]})");
  const std::string ff = "--format-file " + (dir / "f.json").string() + " ";
  CliResult r = run_lpx(ff + "info hw_e4m3", dir);
  REQUIRE(r.status == 0);
  CHECK_THAT(r.out, Catch::Contains("2 reserved codes"));
  CHECK_THAT(r.out, Catch::Contains("no subnormals"));
  CHECK_THAT(r.out, Catch::Contains("416"));        // max finite: 0x7D = 1.625 * 2^8
  CHECK_THAT(r.out, Catch::Contains("0.015625"));   // min positive: the min normal 2^-6
  r = run_lpx(ff + "table hw_e4m3", dir);
  REQUIRE(r.status == 0);
  CHECK_THAT(r.out, Catch::Contains("0x7E  01111110  nan (reserved)"));
  CHECK_THAT(r.out, Catch::Contains("0x01  00000001  0 (unused: no subnormals)"));
  // 440 is past the largest finite value (416) and rounds to the reserved 448: overflow,
  // NaN under ieee and 416 saturated; 0.01 lies nearer 2^-6 than 0, 0.007 nearer 0.
  write_file(dir / "x.f32", std::vector<float>{440.f, 0.01f, 0.007f, -0.01f});
  r = run_lpx(ff + "cast --to hw_e4m3 " + (dir / "x.f32").string() + " " + (dir / "c.bin").string(), dir);
  REQUIRE(r.status == 0);
  CHECK(read_file<uint8_t>(dir / "c.bin") == std::vector<uint8_t>{0x7F, 0x08, 0x00, 0x88});
  r = run_lpx(ff + "cast --overflow sat --to hw_e4m3 " + (dir / "x.f32").string() + " " + (dir / "s.bin").string(), dir);
  REQUIRE(r.status == 0);
  CHECK(read_file<uint8_t>(dir / "s.bin") == std::vector<uint8_t>{0x7D, 0x08, 0x00, 0x88});
}
