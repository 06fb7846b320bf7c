// GPU benchmarks of the kernels, for `lpx bench --gpu` and tools/gpu-check.sh. Every
// bandwidth is also given as a fraction of the device-to-device copy bandwidth measured in
// the same run (ratios measured in the same run, never bare times: docs/kernels.md).
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace lpx::kernels {

struct GpuBenchOptions {
  size_t input_bytes = size_t{1} << 30;  // float32 input per cast path (1 GiB)
  int repetitions = 5;                    // timed runs per path (median reported)
  // GEMM sizes (m = n = k) for the FP8 vs BF16 rows; empty: no GEMM rows.
  std::vector<size_t> gemm_sizes = {4096, 8192};
};

struct GpuBenchRow {
  std::string path;      // "copy d2d", "encode float8_e4m3fn rne", "gemm e4m3xe4m3 8192", ...
  size_t bytes = 0;      // bytes read + written per run (GEMMs: 0)
  double seconds = 0;    // median time of one run
  double gb_per_s = 0;   // bytes / seconds / 1e9
  double copy_fraction = 0;  // gb_per_s / the copy's gb_per_s (GEMMs: 0)
  double tflops = 0;     // GEMMs: 2mnk / seconds / 1e12
  std::string error;     // non-empty: the path failed (the library's message); no figures
};

// Throws std::runtime_error without a device.
std::vector<GpuBenchRow> run_gpu_benchmarks(const GpuBenchOptions& opt = {});

}  // namespace lpx::kernels
