// Google Benchmark driver for sim's GEMM orders (docs/kernels.md#ordered-gemms): Eigen's
// float32 GEMM (fast), the exact fp32 order, the limited accumulator of the FP8 recipes
// (14 mantissa bits, promotion every 128: fp8-blockwise's), and that accumulator's scalar
// definition (ordered_dot per element), on one thread and scaled 8-bit operands. Compare
// the items_per_second (multiply-adds per second) counters of one run.
//   lpx_bench_gemm [--benchmark_filter=REGEX]   (LPX_BENCH_GEMM=M,N,K, default 256,512,512)
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include <benchmark/benchmark.h>
#include <omp.h>

#include "lpx/numerics/ordered_sum.hpp"
#include "lpx/sim/gemm.hpp"

namespace {

struct Problem {
  int64_t m = 256, n = 512, k = 512;
  std::vector<float> a, b, c;
  Problem() {
    if (const char* s = std::getenv("LPX_BENCH_GEMM")) {
      long long mm = 0, nn = 0, kk = 0;
      if (std::sscanf(s, "%lld,%lld,%lld", &mm, &nn, &kk) == 3 && mm > 0 && nn > 0 && kk > 0) m = mm, n = nn, k = kk;
    }
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
    for (float& v : a) v = code() * 0.0137f;
    for (float& v : b) v = code() * 0.731f;
  }
  int64_t macs() const { return m * n * k; }
};

Problem& problem() {
  static Problem p;
  return p;
}

void run_gemm(benchmark::State& st, lpx::Accumulation acc, lpx::GemmOrder order) {
  auto& p = problem();
  for (auto _ : st) {
    lpx::sim::gemm(lpx::sim::Trans::n, lpx::sim::Trans::n, p.a.data(), p.b.data(), p.c.data(), p.m, p.n, p.k, acc,
                   false, order);
    benchmark::DoNotOptimize(p.c.data());
  }
  st.SetItemsProcessed(st.iterations() * p.macs());
}

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  omp_set_num_threads(1);  // the loops, not the threading
  const lpx::Accumulation limited{true, 14, 128};
  benchmark::RegisterBenchmark("gemm/fp32_fast_eigen",
                               [](benchmark::State& st) { run_gemm(st, lpx::Accumulation{}, lpx::GemmOrder::fast); })
      ->Unit(benchmark::kMillisecond);
  benchmark::RegisterBenchmark("gemm/fp32_exact",
                               [](benchmark::State& st) { run_gemm(st, lpx::Accumulation{}, lpx::GemmOrder::exact); })
      ->Unit(benchmark::kMillisecond);
  benchmark::RegisterBenchmark("gemm/limited_14b_128", [limited](benchmark::State& st) {
    run_gemm(st, limited, lpx::GemmOrder::fast);
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
