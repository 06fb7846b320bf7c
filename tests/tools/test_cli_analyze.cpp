// `lpx analyze`: the table's numbers are the error statistics of the library's own
// fake-quantization, rows are sorted worst SQNR first, and bad input fails cleanly.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>

#include "cli_runner.hpp"
#include "lpx/formats/quantize.hpp"
#include "lpx/numerics/philox.hpp"

using namespace lpx_test;

namespace {
std::vector<float> gaussianish(size_t n) {
  std::vector<float> x(n);
  for (size_t i = 0; i < n; ++i) {
    // Sum of 4 uniforms: roughly Gaussian, with a few large outliers.
    double s = 0;
    for (int k = 0; k < 4; ++k) s += lpx::random_bits(5, 0, 4 * i + k) / 4294967296.0 - 0.5;
    x[i] = static_cast<float>(i % 97 == 0 ? 50 * s : s);
  }
  return x;
}
}  // namespace

TEST_CASE("analyze --json reports the library's fake-quantization error, sorted by SQNR") {
  TempDir dir;
  const std::vector<float> x = gaussianish(32 * 64);
  write_file(dir / "x.f32", x);
  const CliResult r = run_lpx("analyze --json --shape 32x64 --formats bfloat16,mxfp4,mxfp8_e4m3 " +
                                  (dir / "x.f32").string(), dir);
  REQUIRE(r.status == 0);
  const auto rows = nlohmann::json::parse(r.out);
  REQUIRE(rows.size() == 3);
  CHECK(rows[0]["format"] == "mxfp4");
  CHECK(rows[1]["format"] == "mxfp8_e4m3");
  CHECK(rows[2]["format"] == "bfloat16");
  for (size_t i = 0; i + 1 < rows.size(); ++i)
    CHECK(rows[i]["sqnr_db"].get<double>() <= rows[i + 1]["sqnr_db"].get<double>());

  // SQNR of mxfp4 recomputed here from the library's fake_quantize output.
  std::vector<float> y(x.size());
  const std::vector<int64_t> shape = {32, 64};
  lpx::fake_quantize({std::span<const float>(x), shape}, y, lpx::parse_block_format("mxfp4"));
  double signal = 0, noise = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    signal += double(x[i]) * x[i];
    noise += (double(y[i]) - x[i]) * (double(y[i]) - x[i]);
  }
  CHECK(rows[0]["sqnr_db"].get<double>() == Approx(10 * std::log10(signal / noise)).epsilon(1e-12));
  CHECK(rows[0]["elements"] == 32 * 64);
}

TEST_CASE("analyze: non-finite inputs are counted apart; bad input exits cleanly") {
  TempDir dir;
  std::vector<float> x = gaussianish(64);
  x[3] = std::numeric_limits<float>::quiet_NaN();
  write_file(dir / "x.f32", x);
  CliResult r = run_lpx("analyze --json --formats e4m3 " + (dir / "x.f32").string(), dir);
  REQUIRE(r.status == 0);
  const auto rows = nlohmann::json::parse(r.out);
  CHECK(rows[0]["nonfinite"] == 1);
  CHECK(std::isfinite(rows[0]["sqnr_db"].get<double>()));

  r = run_lpx("analyze --formats mxfp9 " + (dir / "x.f32").string(), dir);
  CHECK(r.status == 2);
  CHECK(r.err_lines() == 1);
  CHECK_THAT(r.err, Catch::Contains("mxfp4"));
  write_file(dir / "empty.f32", std::vector<float>{});
  r = run_lpx("analyze " + (dir / "empty.f32").string(), dir);
  CHECK(r.status == 1);
  CHECK(r.err_lines() == 1);
  r = run_lpx("analyze --shape 5x5 " + (dir / "x.f32").string(), dir);
  CHECK(r.status == 1);
  CHECK(r.err_lines() == 1);
}

namespace {
std::string safetensors_of(const std::string& name, const std::vector<float>& x) {
  std::string json = "{\"" + name + "\":{\"dtype\":\"F32\",\"shape\":[" + std::to_string(x.size()) +
                     "],\"data_offsets\":[0," + std::to_string(x.size() * 4) + "]}}";
  json.append((8 - json.size() % 8) % 8, ' ');
  std::string len(8, '\0');
  for (size_t i = 0; i < 8; ++i) len[i] = static_cast<char>((json.size() >> (8 * i)) & 0xFF);
  std::string data(x.size() * 4, '\0');
  std::memcpy(data.data(), x.data(), data.size());
  return len + json + data;
}
}  // namespace

TEST_CASE("analyze refuses options that do not apply, as cast and quantize do") {
  // Before: --seed without --round sr and --tensor on a .npy were accepted and ignored.
  TempDir dir;
  write_file(dir / "x.f32", gaussianish(64));
  REQUIRE(run_lpx("cast --to e4m3 --emit values " + (dir / "x.f32").string() + " " + (dir / "x.npy").string(), dir).status == 0);
  const std::string f32 = (dir / "x.f32").string(), npy = (dir / "x.npy").string();
  struct Bad {
    std::string args;
    int status;
    std::string says;
  };
  for (const Bad& c : std::vector<Bad>{
           {"analyze --seed 3 " + f32, 2, "--seed needs --round sr"},
           {"analyze --round rne --seed 3 " + f32, 2, "--seed needs --round sr"},
           {"analyze --round sr --seed -1 " + f32, 2, "--seed '-1'"},
           {"analyze --round sr --seed 1e23 " + f32, 2, "--seed"},
           {"analyze --round nearest " + f32, 2, "rne"},
           {"analyze --tensor w " + npy, 2, "--tensor applies to .safetensors inputs only"},
           {"analyze --tensor w " + f32, 2, "--tensor applies to .safetensors inputs only"},
           {"analyze --shape 8x8 " + npy, 2, "--shape applies to raw inputs only"},
           {"analyze --shape 8x8 " + f32 + " " + npy, 2, "--shape applies to raw inputs only"}}) {
    INFO(c.args);
    const CliResult r = run_lpx(c.args, dir);
    CHECK(r.status == c.status);
    CHECK(r.err_lines() == 1);
    CHECK_THAT(r.err, Catch::Contains(c.says));
    CHECK(r.out.empty());
  }
  // With --round sr the seed is used: another seed, other errors.
  const CliResult a = run_lpx("analyze --json --formats e2m1 --round sr --seed 1 " + f32, dir);
  const CliResult b = run_lpx("analyze --json --formats e2m1 --round sr --seed 2 " + f32, dir);
  REQUIRE(a.status == 0);
  REQUIRE(b.status == 0);
  CHECK(nlohmann::json::parse(a.out)[0]["mse"] != nlohmann::json::parse(b.out)[0]["mse"]);
}

TEST_CASE("analyze escapes control characters of tensor names; reads .safetensors from stdin") {
  // Before: a name holding ESC [ 3 1 m or BEL reached the terminal raw.
  TempDir dir;
  const std::vector<float> x = gaussianish(64);
  // The JSON header spells the controls as \u escapes; the name itself holds them.
  std::ofstream(dir / "n.safetensors", std::ios::binary) << safetensors_of("w\\u001b[31m\\u0007\xc2\x9b", x);
  CliResult r = run_lpx("analyze --formats e4m3 " + (dir / "n.safetensors").string(), dir);
  REQUIRE(r.status == 0);
  CHECK(r.out.find('\x1b') == std::string::npos);
  CHECK(r.out.find('\x07') == std::string::npos);
  CHECK(r.out.find("\xc2\x9b") == std::string::npos);
  CHECK_THAT(r.out, Catch::Contains("w\\x1b[31m\\x07\\u009b [64]"));
  r = run_lpx("analyze --json --formats e4m3 " + (dir / "n.safetensors").string(), dir);
  REQUIRE(r.status == 0);
  CHECK(r.out.find('\x1b') == std::string::npos);
  CHECK(r.out.find("\xc2\x9b") == std::string::npos);
  const auto rows = nlohmann::json::parse(r.out);
  CHECK(rows[0]["tensor"] == "w\x1b[31m\x07\xc2\x9b [64]");  // the JSON value itself is exact
  r = run_lpx("analyze --tensor zz " + (dir / "n.safetensors").string(), dir);
  CHECK(r.status == 1);
  CHECK(r.err_lines() == 1);
  CHECK(r.err.find('\x1b') == std::string::npos);
  CHECK_THAT(r.err, Catch::Contains("available: w\\x1b[31m\\x07\\u009b"));
  // A header that names a tensor twice is refused, not read as its last entry (io's
  // parser sees every key; nlohmann-json alone keeps the last one silently).
  std::string dup = "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
                    "\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}";
  dup.append((8 - dup.size() % 8) % 8, ' ');
  std::string len(8, '\0');
  for (size_t i = 0; i < 8; ++i) len[i] = static_cast<char>((dup.size() >> (8 * i)) & 0xFF);
  std::ofstream(dir / "dup.safetensors", std::ios::binary) << len + dup + std::string(8, '\0');
  r = run_lpx("analyze " + (dir / "dup.safetensors").string(), dir);
  CHECK(r.status == 1);
  CHECK(r.err_lines() == 1);
  CHECK_THAT(r.err, Catch::Contains("repeats the key 'a'"));
  // stdin: the same rows as the file.
  r = run_lpx("analyze --json --formats e4m3,mxfp4 -", dir, (dir / "n.safetensors").string());
  INFO(r.err);
  REQUIRE(r.status == 0);
  const auto from_stdin = nlohmann::json::parse(r.out);
  REQUIRE(from_stdin.size() == 2);
  CHECK(from_stdin[0]["tensor"] == "w\x1b[31m\x07\xc2\x9b [64]");
  CHECK(from_stdin[0]["elements"] == 64);
}

TEST_CASE("analyze --json: a write error on stdout is exit 1 with one line") {
  TempDir dir;
  write_file(dir / "x.f32", gaussianish(64));
  // ulimit -f 4: 2 KiB in dash's 512-byte blocks, below the JSON's ~2.8 kB, and above
  // the 1 KiB that LLVM's OpenMP runtime (a clang build: tools/run-fuzz.sh --tests) sizes
  // its registration file in /dev/shm to at start-up, failing otherwise.
  for (const std::string& redirect : {std::string(">/dev/full"),
                                     "; ulimit -f 4; trap '' XFSZ; exec " + std::string(LPX_BINARY) + " analyze --json " +
                                         (dir / "x.f32").string() + " >" + (dir / "a.json").string()}) {
    const std::string script = std::string(LPX_BINARY) + " analyze --json " + (dir / "x.f32").string() + " " +
                               (redirect[0] == '>' ? redirect : ">/dev/null" + redirect);
    INFO(script);
    const int raw = std::system(("sh -c \"" + script + "\" 2>" + (dir / "err.txt").string()).c_str());
    REQUIRE(WIFEXITED(raw));
    CHECK(WEXITSTATUS(raw) == 1);
    const std::string err = slurp(dir / "err.txt");
    CHECK(std::count(err.begin(), err.end(), '\n') == 1);
    CHECK_THAT(err, Catch::Contains("standard output"));
  }
}
