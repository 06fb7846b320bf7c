// Google Benchmark driver for the per-operand statistics loops (recipes/src/operand_stats.hpp):
// error_stats' portable loop and its AVX-512 loop on the same v and q, identity_stats, and a
// memcpy moving the same bytes (both arrays), at operand sizes from L1-resident to 8 MB per
// array, on one thread. Compare the items_per_second (elements per second) counters of one
// run; the README's "Speed" section quotes their ratio.
//   lpx_bench_stats [--benchmark_filter=REGEX]
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include <benchmark/benchmark.h>

#include "operand_stats.hpp"

namespace {

struct Operand {
  std::vector<float> v, q, copy;
  explicit Operand(int64_t n) : v(static_cast<size_t>(n)), q(static_cast<size_t>(n)), copy(static_cast<size_t>(2 * n)) {
    std::mt19937 gen(1);
    std::normal_distribution<float> normal;
    for (size_t i = 0; i < v.size(); ++i) {
      v[i] = normal(gen);
      q[i] = i % 7 == 0 ? 0.0f : v[i] * (1.0f + 1e-2f * normal(gen));  // some flushed, the rest near
    }
  }
};

void Portable(benchmark::State& state) {
  Operand o(state.range(0));
  lpx::OperandStats st;
  for (auto _ : state) {
    benchmark::DoNotOptimize(lpx::detail::error_stats_portable(o.v.data(), o.q.data(), state.range(0), st));
    benchmark::DoNotOptimize(st);
  }
  state.SetItemsProcessed(state.iterations() * state.range(0));
}

void Avx512(benchmark::State& state) {
  Operand o(state.range(0));
  lpx::OperandStats st;
  int64_t overflowed = 0;
  if (!lpx::detail::error_stats_avx512(o.v.data(), o.q.data(), 0, st, overflowed)) {
    state.SkipWithError("no AVX-512F on this CPU");
    return;
  }
  for (auto _ : state) {
    lpx::detail::error_stats_avx512(o.v.data(), o.q.data(), state.range(0), st, overflowed);
    benchmark::DoNotOptimize(st);
    benchmark::DoNotOptimize(overflowed);
  }
  state.SetItemsProcessed(state.iterations() * state.range(0));
}

void Identity(benchmark::State& state) {
  Operand o(state.range(0));
  lpx::OperandStats st;
  for (auto _ : state) {
    lpx::detail::identity_stats(o.v.data(), state.range(0), st);
    benchmark::DoNotOptimize(st);
  }
  state.SetItemsProcessed(state.iterations() * state.range(0));
}

// both arrays read once and written once: the bytes error_stats reads, and as many written
void Memcpy(benchmark::State& state) {
  Operand o(state.range(0));
  const auto n = static_cast<size_t>(state.range(0));
  for (auto _ : state) {
    std::memcpy(o.copy.data(), o.v.data(), n * sizeof(float));
    std::memcpy(o.copy.data() + n, o.q.data(), n * sizeof(float));
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(state.iterations() * state.range(0));
}

}  // namespace

BENCHMARK(Portable)->Arg(1 << 14)->Arg(1 << 17)->Arg(1 << 21);
BENCHMARK(Avx512)->Arg(1 << 14)->Arg(1 << 17)->Arg(1 << 21);
BENCHMARK(Identity)->Arg(1 << 14)->Arg(1 << 17)->Arg(1 << 21);
BENCHMARK(Memcpy)->Arg(1 << 14)->Arg(1 << 17)->Arg(1 << 21);
BENCHMARK_MAIN();
