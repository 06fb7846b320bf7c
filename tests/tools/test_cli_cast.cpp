// `lpx cast`, `lpx decode`, `lpx info|table|formats` through the real binary: results
// equal the library codec element for element, and every bad input gets one stderr
// line, the documented exit status, and no output file.
#include <catch2/catch.hpp>

#include <array>
#include <cmath>
#include <cstring>
#include <fstream>
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

namespace {
// Runs `script` with /bin/sh (for redirections and ulimit that run_lpx cannot express);
// "LPX" in it stands for the binary. Returns the exit status (128 + signal if killed) and
// what the script wrote to `dir`/err.txt.
CliResult run_sh(std::string script, const TempDir& dir) {
  for (size_t at = script.find("LPX"); at != std::string::npos; at = script.find("LPX", at))
    script.replace(at, 3, LPX_BINARY);
  std::ofstream(dir / "script.sh") << script << "\n";
  const int raw = std::system(("sh " + (dir / "script.sh").string() + " 2>" + (dir / "err.txt").string()).c_str());
  CliResult r;
  r.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : 128 + WTERMSIG(raw);
  r.err = slurp(dir / "err.txt");
  return r;
}

// A safetensors file of the given tensors (name, dtype, shape text, bytes), laid out by the
// format's README (8-byte length, JSON header padded with spaces, data).
std::string safetensors(const std::vector<std::array<std::string, 4>>& tensors) {
  std::string json = "{", data;
  for (const auto& [name, dtype, shape, bytes] : tensors) {
    json += (json.size() > 1 ? "," : "") + std::string("\"") + name + "\":{\"dtype\":\"" + dtype +
            "\",\"shape\":" + shape + ",\"data_offsets\":[" + std::to_string(data.size()) + "," +
            std::to_string(data.size() + bytes.size()) + "]}";
    data += bytes;
  }
  json += "}";
  json.append((8 - json.size() % 8) % 8, ' ');
  std::string len(8, '\0');
  for (size_t i = 0; i < 8; ++i) len[i] = static_cast<char>((json.size() >> (8 * i)) & 0xFF);
  return len + json + data;
}
}  // namespace

TEST_CASE("decode reads codes from raw, .npy and .safetensors files and stdin, and refuses values") {
  // Before: decode read anything but .npy as raw bytes, so a .safetensors file (header
  // included) decoded to garbage with exit 0, and stdin was always raw.
  TempDir dir;
  const auto x = sample();
  write_file(dir / "x.f32", x);
  REQUIRE(run_lpx("cast --to e4m3 " + (dir / "x.f32").string() + " " + (dir / "c.bin").string(), dir).status == 0);
  REQUIRE(run_lpx("cast --to e4m3 " + (dir / "x.f32").string() + " " + (dir / "c.npy").string(), dir).status == 0);
  REQUIRE(run_lpx("cast --to e4m3 " + (dir / "x.f32").string() + " " + (dir / "c.safetensors").string(), dir).status == 0);
  REQUIRE(run_lpx("cast --to bf16 " + (dir / "x.f32").string() + " " + (dir / "c16.safetensors").string(), dir).status == 0);
  REQUIRE(run_lpx("decode --from e4m3 " + (dir / "c.bin").string() + " " + (dir / "want.f32").string(), dir).status == 0);
  const std::string want = slurp(dir / "want.f32");
  REQUIRE(want.size() == x.size() * 4);
  const std::string codes = slurp(dir / "c.bin");
  std::ofstream(dir / "two.safetensors", std::ios::binary)
      << safetensors({{"a", "U8", "[" + std::to_string(codes.size()) + "]", codes},
                      {"b", "U8", "[2]", std::string("\x38\x40", 2)}});
  struct Ok {
    std::string args, stdin_file;
  };
  for (const Ok& c : std::vector<Ok>{
           {"decode --from e4m3 " + (dir / "c.npy").string() + " OUT", ""},
           {"decode --from e4m3 " + (dir / "c.safetensors").string() + " OUT", ""},
           {"decode --from e4m3 --tensor a " + (dir / "two.safetensors").string() + " OUT", ""},
           {"decode --from e4m3 - OUT", (dir / "c.bin").string()},
           {"decode --from e4m3 - OUT", (dir / "c.npy").string()},
           {"decode --from e4m3 - OUT", (dir / "c.safetensors").string()},
           {"decode --from e4m3 --tensor a - OUT", (dir / "two.safetensors").string()}}) {
    std::string args = c.args;
    args.replace(args.find("OUT"), 3, (dir / "got.f32").string());
    INFO(args << " < " << c.stdin_file);
    std::filesystem::remove(dir / "got.f32");
    const auto r = run_lpx(args, dir, c.stdin_file);
    INFO(r.err);
    REQUIRE(r.status == 0);
    CHECK(slurp(dir / "got.f32") == want);
  }
  // 16-bit codes from a .safetensors, against the bfloat16 values themselves.
  auto r = run_lpx("decode --from bf16 " + (dir / "c16.safetensors").string() + " " + (dir / "d16.f32").string(), dir);
  REQUIRE(r.status == 0);
  const auto d16 = read_file<float>(dir / "d16.f32");
  REQUIRE(d16.size() == x.size());
  for (size_t i = 0; i < x.size(); ++i)
    CHECK((std::isnan(x[i]) ? std::isnan(d16[i]) : d16[i] == lpx::decode(lpx::encode(x[i], lpx::fmt16::bf16, lpx::Rounding::rne, lpx::Overflow::ieee), lpx::fmt16::bf16)));

  // Refusals: float tensors (values, not codes), codes of the wrong width, --tensor and
  // --shape where they do not apply, several tensors without --tensor.
  REQUIRE(run_lpx("cast --to e4m3 --emit values " + (dir / "x.f32").string() + " " + (dir / "v.safetensors").string(), dir).status == 0);
  REQUIRE(run_lpx("cast --to e4m3 --emit values " + (dir / "x.f32").string() + " " + (dir / "v.npy").string(), dir).status == 0);
  struct Bad {
    std::string args, stdin_file;
    int status;
    std::string says;
  };
  const std::string out = (dir / "bad.f32").string();
  std::ofstream(dir / "empty.bin").flush();
  for (const Bad& c : std::vector<Bad>{
           {"decode --from e4m3 " + (dir / "v.safetensors").string() + " " + out, "", 1, "holds float32"},
           {"decode --from e4m3 " + (dir / "v.npy").string() + " " + out, "", 1, "holds float32"},
           {"decode --from e4m3 - " + out, (dir / "v.safetensors").string(), 1, "holds float32"},
           {"decode --from bf16 " + (dir / "c.safetensors").string() + " " + out, "", 1, "uint16"},
           {"decode --from e4m3 " + (dir / "two.safetensors").string() + " " + out, "", 2, "--tensor"},
           {"decode --from e4m3 --tensor z " + (dir / "two.safetensors").string() + " " + out, "", 1, "no tensor named 'z'"},
           {"decode --from e4m3 --tensor a " + (dir / "c.npy").string() + " " + out, "", 2, "--tensor applies"},
           {"decode --from e4m3 --tensor a " + (dir / "c.bin").string() + " " + out, "", 2, "--tensor applies"},
           {"decode --from e4m3 --shape 5x5 " + (dir / "c.npy").string() + " " + out, "", 2, "--shape applies"},
           {"decode --from e4m3 --shape 5x5 " + (dir / "c.bin").string() + " " + out, "", 1, "does not match"},
           // An empty raw file (read with memcpy(NULL, NULL, 0) before: UBSan).
           {"decode --from e4m3 " + (dir / "empty.bin").string() + " " + out, "", 1, "empty input"},
           {"decode --from e4m3 - " + out, (dir / "empty.bin").string(), 1, "<stdin>: empty input"}}) {
    INFO(c.args << " < " << c.stdin_file);
    r = run_lpx(c.args, dir, c.stdin_file);
    INFO(r.err);
    CHECK(r.status == c.status);
    CHECK(r.err_lines() == 1);
    CHECK_THAT(r.err, Catch::Contains(c.says));
    CHECK_FALSE(std::filesystem::exists(out));
  }
}

TEST_CASE("cast reads .safetensors and .npy from stdin by their first bytes") {
  // Before: stdin was .npy or raw float32, so a .safetensors was cast as floats (header
  // bytes included) with exit 0.
  TempDir dir;
  const auto x = sample();
  write_file(dir / "x.f32", x);
  REQUIRE(run_lpx("cast --to e4m3 --emit values " + (dir / "x.f32").string() + " " + (dir / "v.safetensors").string(), dir).status == 0);
  REQUIRE(run_lpx("cast --to e4m3 --emit values " + (dir / "x.f32").string() + " " + (dir / "v.npy").string(), dir).status == 0);
  REQUIRE(run_lpx("cast --to e5m2 " + (dir / "v.safetensors").string() + " " + (dir / "want.bin").string(), dir).status == 0);
  for (const char* in : {"v.safetensors", "v.npy"}) {
    INFO(in);
    const auto r = run_lpx("cast --to e5m2 - " + (dir / "got.bin").string(), dir, (dir / in).string());
    INFO(r.err);
    REQUIRE(r.status == 0);
    CHECK(slurp(dir / "got.bin") == slurp(dir / "want.bin"));
  }
  // --tensor on a .npy arriving on stdin is refused once its kind is known.
  const auto r = run_lpx("cast --to e5m2 --tensor v - " + (dir / "no.bin").string(), dir, (dir / "v.npy").string());
  CHECK(r.status == 2);
  CHECK(r.err_lines() == 1);
  CHECK_THAT(r.err, Catch::Contains("<stdin> is a .npy file"));
  CHECK_FALSE(std::filesystem::exists(dir / "no.bin"));
}

TEST_CASE("cast, tour: numbers out of range are usage errors, never defaults") {
  // Before: --threads 100000 crashed (SIGSEGV) on inputs large enough to run threads;
  // --seed -1 and --seed 2^64 gave seed 2^64-1, --stream 0x10 was read as hex.
  TempDir dir;
  std::vector<float> big(1 << 16);
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<float>(i % 1000) / 7.0f;
  write_file(dir / "big.f32", big);
  const std::string in = (dir / "big.f32").string(), out = (dir / "o.bin").string();
  for (const std::string& args : std::vector<std::string>{"cast --to e4m3 --threads 100000 " + in + " " + out,
                                  "cast --to e4m3 --threads 1025 " + in + " " + out,
                                  "cast --to e4m3 --round sr --seed -1 " + in + " " + out,
                                  "cast --to e4m3 --round sr --seed 18446744073709551616 " + in + " " + out,
                                  "cast --to e4m3 --round sr --seed 1e23 " + in + " " + out,
                                  "cast --to e4m3 --round sr --stream -1 " + in + " " + out,
                                  "cast --to e4m3 --round sr --stream 4294967296 " + in + " " + out,
                                  "cast --to e4m3 --round sr --stream 0x10 " + in + " " + out,
                                  "cast --to e4m3 --round sr --sr-bits 0x10 " + in + " " + out,
                                  "cast --to e4m3 --round sr --sr-bits 0 " + in + " " + out,
                                  "tour --seed -1", "tour --seed 1e3", "tour --size 0", "tour --size 0x10"}) {
    INFO(args);
    const auto r = run_lpx(args, dir);
    CHECK(r.status == 2);
    CHECK(r.err_lines() == 1);
    CHECK(r.out.empty());
    CHECK_FALSE(std::filesystem::exists(out));
  }
  // The largest values in range are taken as given.
  auto r = run_lpx("cast --to e4m3 --threads 1024 " + in + " " + out, dir);
  CHECK(r.status == 0);
  r = run_lpx("cast --to e4m3 --round sr --seed 18446744073709551615 --stream 4294967295 --sr-bits 32 " + in + " " + out, dir);
  CHECK(r.status == 0);
  const auto codes = read_file<uint8_t>(out);
  REQUIRE(codes.size() == big.size());
  CHECK(codes[123] == lpx::encode(big[123], lpx::fmt8::e4m3fn, lpx::Rounding::sr, lpx::Overflow::ieee,
                                  lpx::random_bits(UINT64_MAX, UINT32_MAX, 123), 32));
}

TEST_CASE("formats, info, table: a write error on stdout is exit 1 with one line") {
  // Before: the output sat in stdio's buffer and its failed flush at exit went unnoticed
  // (exit 0), or SIGXFSZ killed the process under a file-size limit.
  TempDir dir;
  for (const std::string& script : {std::string("LPX formats >/dev/full"), std::string("LPX info e4m3 >/dev/full"),
                                    std::string("LPX table e2m1 >/dev/full"), std::string("LPX table bf16 >/dev/full"),
                                    std::string("ulimit -f 1; LPX formats >") + (dir / "f.txt").string(),
                                    std::string("ulimit -f 1; trap '' XFSZ; LPX formats >") + (dir / "f.txt").string(),
                                    std::string("ulimit -f 1; LPX table bf16 >") + (dir / "t.txt").string()}) {
    INFO(script);
    const auto r = run_sh(script, dir);
    INFO(r.err);
    CHECK(r.status == 1);
    CHECK(r.err_lines() == 1);
    CHECK_THAT(r.err, Catch::Contains("lpx: "));
  }
  // A stdout that works is still exit 0.
  CHECK(run_sh("LPX formats >/dev/null", dir).status == 0);
}
