// Google Benchmark driver for the array casts: every path of cast_paths.hpp at the given
// thread counts, each with a "memcpy/<path>" twin that moves the same bytes, so the
// ratio of their bytes_per_second counters is the ratio to memcpy.
//   lpx_bench_cast [--benchmark_filter=REGEX]   (LPX_BENCH_SIZE=elements, default 16Mi)
#include <cstdlib>
#include <memory>
#include <string>

#include <benchmark/benchmark.h>
#include <omp.h>

#include "cast_paths.hpp"

namespace {

size_t bench_size() {
  const char* s = std::getenv("LPX_BENCH_SIZE");
  return s != nullptr ? static_cast<size_t>(std::strtoull(s, nullptr, 10)) : size_t{16} << 20;
}

lpx::bench::Buffers& buffers() {
  static lpx::bench::Buffers b(bench_size());  // shared by every benchmark
  return b;
}

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  const int all = omp_get_max_threads();
  for (const lpx::bench::CastPath& p : lpx::bench::cast_paths()) {
    for (int t : {1, all}) {
      const std::string suffix = "/threads:" + std::to_string(t);
      const auto bytes_per_element = static_cast<int64_t>(p.in_bytes + p.out_bytes);
      benchmark::RegisterBenchmark(("memcpy/" + p.name + suffix).c_str(),
                                   [p, t, bytes_per_element](benchmark::State& st) {
                                     auto& b = buffers();
                                     const size_t copy = b.size() * (p.in_bytes + p.out_bytes) / 2;
                                     for (auto _ : st) lpx::bench::memcpy_baseline(b, copy, t);
                                     st.SetBytesProcessed(st.iterations() * bytes_per_element *
                                                          static_cast<int64_t>(b.size()));
                                   })
          ->UseRealTime()
          ->Unit(benchmark::kMillisecond);
      benchmark::RegisterBenchmark((p.name + suffix).c_str(),
                                   [p, t, bytes_per_element](benchmark::State& st) {
                                     auto& b = buffers();
                                     for (auto _ : st) p.run(b, t);
                                     st.SetBytesProcessed(st.iterations() * bytes_per_element *
                                                          static_cast<int64_t>(b.size()));
                                     st.SetItemsProcessed(st.iterations() *
                                                          static_cast<int64_t>(b.size()));
                                   })
          ->UseRealTime()
          ->Unit(benchmark::kMillisecond);
      if (all == 1) break;
    }
  }
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
