// `lpx tour`: the main job on built-in defaults. Shows a format's code table, the
// table of all formats, and what casting a built-in sample (a Gaussian tensor with a few
// outliers, drawn from the same Philox stream as stochastic rounding) does to it.
#include <cmath>
#include <numbers>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "cli_util.hpp"
#include "command.hpp"
#include "lpx/formats/cast.hpp"
#include "lpx/formats/codec.hpp"
#include "lpx/numerics/philox.hpp"

namespace lpx::cli {

namespace {

// Deterministic sample: Box-Muller over Philox uniforms, plus 0.1% outliers at 40 sigma.
std::vector<float> builtin_sample(size_t n, uint64_t seed) {
  std::vector<float> x(n);
  for (size_t i = 0; i < n; ++i) {
    // u1 in (0, 1] so log(u1) is finite; u2 in [0, 1).
    const double u1 = (random_bits(seed, 1, 2 * i) + 1.0) / 4294967296.0;
    const double u2 = random_bits(seed, 1, 2 * i + 1) / 4294967296.0;
    const double z = std::sqrt(-2.0 * std::log(u1)) * std::cos(2 * std::numbers::pi * u2);
    x[i] = static_cast<float>(i % 1000 == 7 ? 40.0 * z : z);
  }
  return x;
}

void run_tour_sample(size_t n, uint64_t seed) {
  const std::vector<float> x = builtin_sample(n, seed);
  fmt::print("{:<16} {:<5} {:>9} {:>12} {:>11} {:>10}\n", "format", "round", "SQNR dB",
             "max |err|", "saturated%", "flushed%");
  for (const char* name : {"bfloat16", "float16", "float8_e4m3fn", "float8_e5m2", "float6_e3m2fn",
                           "float6_e2m3fn", "float4_e2m1fn", "e2m0", "int8"}) {
    const ElementFormat f = format_by_name(name);
    for (Rounding mode : {Rounding::rne, Rounding::sr}) {
      CastOptions opt;
      opt.round = mode;
      opt.overflow = Overflow::sat;
      opt.seed = seed;
      std::vector<float> y(n);
      fake_cast_array(x, y, f, opt);
      double signal = 0, noise = 0, max_err = 0;
      size_t saturated = 0, flushed = 0;
      const double top = max_finite(f);
      for (size_t i = 0; i < n; ++i) {
        const double err = static_cast<double>(y[i]) - x[i];
        signal += static_cast<double>(x[i]) * x[i];
        noise += err * err;
        max_err = std::max(max_err, std::fabs(err));
        saturated += std::fabs(x[i]) > top ? 1 : 0;
        flushed += (x[i] != 0 && y[i] == 0) ? 1 : 0;
      }
      fmt::print("{:<16} {:<5} {:>9.2f} {:>12.4g} {:>11.3f} {:>10.3f}\n", name,
                 rounding_name(mode), 10 * std::log10(signal / noise), max_err,
                 100.0 * static_cast<double>(saturated) / static_cast<double>(n),
                 100.0 * static_cast<double>(flushed) / static_cast<double>(n));
    }
  }
}

const bool registered = register_command(1, [](CLI::App& app) {
  auto* tour = app.add_subcommand("tour", "A short tour on built-in defaults (no input needed)");
  auto n = std::make_shared<size_t>(1 << 16);
  auto seed = std::make_shared<uint64_t>(0);
  add_int_option(tour, "--size", *n, 1, int64_t{1} << 28, "Elements in the built-in sample (1..2^28)");
  add_seed_option(tour, *seed, "Seed of the sample and of stochastic rounding (0..2^64-1)");
  tour->footer("Example: lpx tour");
  tour->callback([n, seed] {
    fmt::print("== The FP4 (OCP E2M1) code table: `lpx table e2m1` ==\n");
    print_table(format_by_name("e2m1"));
    fmt::print("\n== Every named format: `lpx formats` ==\n");
    print_formats();
    fmt::print("\n== Casting a built-in sample of {} Gaussian values with 0.1% outliers at "
               "40 sigma (overflow sat) ==\n", *n);
    run_tour_sample(*n, *seed);
  });
});
}  // namespace

}  // namespace lpx::cli
