// Google Benchmark driver for sim's GEMM orders (docs/kernels.md#ordered-gemms): fast fp32
// (the exact order's register tiles on a CPU with FMA, Eigen elsewhere) with B as stored
// and transposed, the exact fp32 order, the limited accumulator of the FP8 recipes (14
// mantissa bits, promotion every 128: fp8-blockwise's), that accumulator's scalar
// definition (ordered_dot per element), the same accumulator with the scales at promotion
// (gemm_scaled of the unscaled codes, fp8-blockwise's GEMM since 2026-12-07), and Eigen's
// float32 product on the same arrays as the peer, on one thread and scaled 8-bit
// operands. Compare the items_per_second (multiply-adds per second) counters of one run.
//   lpx_bench_gemm [--benchmark_filter=REGEX]   (LPX_BENCH_GEMM=M,N,K, each in [1, 16384];
//   default 256,512,512; a malformed value is one error line and exit 2)
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include <Eigen/Core>
#include <benchmark/benchmark.h>
#include <omp.h>

#include "lpx/numerics/ordered_sum.hpp"
#include "lpx/sim/gemm.hpp"

namespace {

struct Shape {
  int64_t m = 256, n = 512, k = 512;
};

// LPX_BENCH_GEMM=M,N,K: three integers in [1, 16384]; anything else is an error.
std::optional<Shape> shape_from_env(std::string& error) {
  Shape sh;
  const char* s = std::getenv("LPX_BENCH_GEMM");
  if (s == nullptr) return sh;
  long long v[3] = {0, 0, 0};
  char tail = 0;
  if (std::sscanf(s, "%lld,%lld,%lld%c", &v[0], &v[1], &v[2], &tail) != 3 || v[0] < 1 || v[1] < 1 || v[2] < 1 ||
      v[0] > 16384 || v[1] > 16384 || v[2] > 16384) {
    error = std::string("LPX_BENCH_GEMM='") + s + "' is not M,N,K with each in [1, 16384]";
    return std::nullopt;
  }
  sh.m = v[0], sh.n = v[1], sh.k = v[2];
  return sh;
}

Shape g_shape;

struct Problem {
  int64_t m, n, k;
  std::vector<float> a, b, c;
  // the same operands unscaled (codes), and their scales per row of A and column of B over
  // each run of 128 products (gemm_scaled's a_scales and b_scales)
  std::vector<float> codes_a, codes_b, scales_a, scales_b;
  Problem() : m(g_shape.m), n(g_shape.n), k(g_shape.k) {
    // e4m3-like codes (4 significant bits, 16 binades) times float32 scales
    uint64_t state = 7;
    const auto code = [&] {
      state = state * 6364136223846793005ull + 1442695040888963407ull;
      const auto r = static_cast<int>(state >> 33);
      return std::ldexp(static_cast<float>(8 + r % 8), r / 8 % 16 - 12) * ((r >> 20) & 1 ? -1.0f : 1.0f);
    };
    a.resize(static_cast<size_t>(m * k));
    b.resize(static_cast<size_t>(k * n));
    c.resize(static_cast<size_t>(m * n));
    codes_a.resize(a.size());
    codes_b.resize(b.size());
    for (float& v : codes_a) v = code();
    for (float& v : codes_b) v = code();
    for (size_t i = 0; i < a.size(); ++i) a[i] = codes_a[i] * 0.0137f;
    for (size_t i = 0; i < b.size(); ++i) b[i] = codes_b[i] * 0.731f;
    const int64_t runs = (k + 127) / 128;
    scales_a.assign(static_cast<size_t>(m * runs), 0.0137f);
    scales_b.assign(static_cast<size_t>(n * runs), 0.731f);
  }
  int64_t macs() const { return m * n * k; }
};

Problem& problem() {
  static Problem p;
  return p;
}

// tb = Trans::t reads p.b as an (N, K) array, as the layers' forward products do.
void run_gemm(benchmark::State& st, lpx::Accumulation acc, lpx::GemmOrder order,
              lpx::sim::Trans tb = lpx::sim::Trans::n) {
  auto& p = problem();
  for (auto _ : st) {
    lpx::sim::gemm(lpx::sim::Trans::n, tb, p.a.data(), p.b.data(), p.c.data(), p.m, p.n, p.k, acc, false, order);
    benchmark::DoNotOptimize(p.c.data());
  }
  st.SetItemsProcessed(st.iterations() * p.macs());
}

}  // namespace

int main(int argc, char** argv) {
  std::string error;
  const std::optional<Shape> shape = shape_from_env(error);
  if (!shape) {
    std::fprintf(stderr, "lpx_bench_gemm: %s\n", error.c_str());
    return 2;
  }
  g_shape = *shape;
  benchmark::Initialize(&argc, argv);
  omp_set_num_threads(1);  // the loops, not the threading
  const lpx::Accumulation limited{true, 14, 128};
  benchmark::RegisterBenchmark("gemm/fp32_fast",
                               [](benchmark::State& st) { run_gemm(st, lpx::Accumulation{}, lpx::GemmOrder::fast); })
      ->Unit(benchmark::kMillisecond);
  benchmark::RegisterBenchmark("gemm/fp32_fast_b_transposed", [](benchmark::State& st) {
    run_gemm(st, lpx::Accumulation{}, lpx::GemmOrder::fast, lpx::sim::Trans::t);
  })->Unit(benchmark::kMillisecond);
  benchmark::RegisterBenchmark("gemm/eigen_fp32_peer", [](benchmark::State& st) {
    auto& p = problem();
    using RowMat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
    const Eigen::Map<const RowMat> a(p.a.data(), p.m, p.k), b(p.b.data(), p.k, p.n);
    Eigen::Map<RowMat> c(p.c.data(), p.m, p.n);
    for (auto _ : st) {
      c.noalias() = a * b;
      benchmark::DoNotOptimize(p.c.data());
    }
    st.SetItemsProcessed(st.iterations() * p.macs());
  })->Unit(benchmark::kMillisecond);
  benchmark::RegisterBenchmark("gemm/fp32_exact",
                               [](benchmark::State& st) { run_gemm(st, lpx::Accumulation{}, lpx::GemmOrder::exact); })
      ->Unit(benchmark::kMillisecond);
  benchmark::RegisterBenchmark("gemm/limited_14b_128", [limited](benchmark::State& st) {
    run_gemm(st, limited, lpx::GemmOrder::fast);
  })->Unit(benchmark::kMillisecond);
  benchmark::RegisterBenchmark("gemm/limited_14b_128_scales_at_promotion", [](benchmark::State& st) {
    auto& p = problem();
    const lpx::Accumulation at_promotion{true, 14, 128, true};
    for (auto _ : st) {
      lpx::sim::gemm_scaled(lpx::sim::Trans::n, lpx::sim::Trans::n, p.codes_a.data(), p.scales_a.data(),
                            p.codes_b.data(), p.scales_b.data(), p.c.data(), p.m, p.n, p.k, at_promotion, false);
      benchmark::DoNotOptimize(p.c.data());
    }
    st.SetItemsProcessed(st.iterations() * p.macs());
  })->Unit(benchmark::kMillisecond);
  benchmark::RegisterBenchmark("gemm/limited_14b_128_scalar_definition", [limited](benchmark::State& st) {
    auto& p = problem();
    const lpx::LimitedSum sum{limited.mantissa_bits, limited.promote_every};
    for (auto _ : st) {
      for (int64_t i = 0; i < p.m; ++i)
        for (int64_t j = 0; j < p.n; ++j)
          p.c[static_cast<size_t>(i * p.n + j)] =
              lpx::ordered_dot(p.a.data() + i * p.k, 1, p.b.data() + j, p.n, p.k, sum, 0.0f, false);
      benchmark::DoNotOptimize(p.c.data());
    }
    st.SetItemsProcessed(st.iterations() * p.macs());
  })->Unit(benchmark::kMillisecond);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
