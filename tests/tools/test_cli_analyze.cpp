// `lpx analyze`: the table's numbers are the error statistics of the library's own
// fake-quantization, rows are sorted worst SQNR first, and bad input fails cleanly.
#include <catch2/catch.hpp>

#include <cmath>
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
