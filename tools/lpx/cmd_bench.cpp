// `lpx bench`: throughput of the emulator's array casts, each beside a memcpy that moves
// the same bytes in the same run (ratios, not bare times, are what compare across
// machines). The paths are shared with tools/bench/lpx_bench_cast (Google Benchmark).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <functional>
#include <limits>
#include <memory>
#include <regex>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <omp.h>
#include <unistd.h>

#include "../bench/cast_paths.hpp"
#include "cli_util.hpp"
#include "command.hpp"
#include "lpx/kernels/bench.hpp"
#include "lpx/io/tensor_file.hpp"
#include "lpx/kernels/device.hpp"
#include "lpx/recipes/recipe.hpp"
#include "lpx/sim/trainer.hpp"

namespace lpx::cli {
namespace {

// The ranges of the numeric options (docs/input-policy.md): a value outside is a usage
// error. 2^32 elements already need 44 GiB of buffers (11 bytes each); a bench of more than 1000
// repetitions or steps would look hung.
constexpr int64_t kMaxSize = int64_t{1} << 32;
constexpr int64_t kMaxReps = 1000;
constexpr int64_t kMaxSteps = 1000;
constexpr int64_t kMaxEvery = int64_t{1} << 40;  // as `lpx train --stats-every`

struct BenchArgs {
  size_t size = size_t{64} << 20;
  int threads = 0;
  int reps = 3;
  bool json = false;
  bool gpu = false;
  bool train = false;
  std::string models = "mlp,gpt", recipes, gemm = "fast";
  int steps = 7;  // the fewest paired steps whose ratio has a 95% interval
  int64_t stats_every = 1;  // as `lpx train`: every timed step collects the statistics
  std::string filter;
};

std::vector<std::string> split_commas(const std::string& s) {
  std::vector<std::string> out;
  size_t begin = 0;
  while (begin <= s.size()) {
    const size_t end = std::min(s.find(',', begin), s.size());
    if (end > begin) out.push_back(s.substr(begin, end - begin));
    begin = end + 1;
  }
  return out;
}

// `lpx bench --train`: seconds per training step of each recipe, and its ratio to the
// fp32 step of the same model (always in the fast GEMM order, so that --gemm exact's rows
// show what the fixed order costs), the two timed in alternation (sim::bench_against_fp32),
// both collecting the per-operand statistics every --stats-every steps. The default, 1, is
// `lpx train`'s; a study that logs them every 50 steps (tools/sweeps/orderings.json) spends
// its median step without them, so --stats-every 50 times the step such a study runs.
void run_train_bench(const BenchArgs& a) {
  std::vector<std::string> recipes;
  if (a.recipes.empty()) {
    for (std::string_view r : recipe_names()) recipes.emplace_back(r);
  } else {
    recipes = split_commas(a.recipes);
  }
  if (a.steps < 1) throw UsageError("bench --train: --steps must be at least 1");
  const GemmOrder order = sim::gemm_order_by_name(a.gemm);  // CLI11 checked the name
  for (const std::string& model : split_commas(a.models)) {  // every name checked before any output
    sim::ModelConfig m;
    try {
      if (model.starts_with("gpt-")) sim::apply_gpt_preset(m, model);
      else (void)sim::model_kind_by_name(model);
    } catch (const std::invalid_argument& e) {
      throw UsageError(fmt::format("bench --train: --models: {}", e.what()));
    }
  }
  if (!a.json) {
    // which steps the table times: those of `lpx train` by default, or those of a study
    if (a.stats_every == 0) fmt::print("steps without per-operand statistics (--stats-every 0)\n");
    else if (a.stats_every == 1) fmt::print("steps with per-operand statistics every step (--stats-every 1)\n");
    else fmt::print("steps with per-operand statistics every {0} steps (--stats-every {0})\n", a.stats_every);
    fmt::print("{:<10} {:<16} {:>12} {:>12} {:>10} {:>14}\n", "model", "recipe", "s/step", "samples/s",
               "x fp32", "95% interval");
  }
  std::string json;
  for (const std::string& model : split_commas(a.models)) {
    for (const std::string& recipe : recipes) {
      if (!a.filter.empty() && recipe.find(a.filter) == std::string::npos) continue;
      // fp32 in the fast order is the baseline itself; every other row is timed in
      // alternation with an fp32 trainer of its own
      sim::BenchResult r;
      // the baseline row's ratio is 1 by definition: no interval
      double ratio = 1, lo = std::numeric_limits<double>::quiet_NaN(), hi = lo;
      if (recipe == "fp32" && order == GemmOrder::fast) {
        r = sim::bench_train_steps(model, recipe, a.steps, a.threads, GemmOrder::fast, a.stats_every);
      } else {
        const sim::BenchPair p = sim::bench_against_fp32(model, recipe, a.steps, a.threads, order, a.stats_every);
        r = p.run;
        ratio = p.ratio;
        lo = p.ratio_lo;
        hi = p.ratio_hi;
      }
      const bool interval = std::isfinite(lo) && std::isfinite(hi);
      if (a.json) {
        json += fmt::format("{}  {{\"model\": \"{}\", \"recipe\": \"{}\", \"seconds_per_step\": "
                            "{:.6g}, \"samples_per_second\": {:.6g}, \"ratio_to_fp32\": {:.4f}, "
                            "\"ratio_to_fp32_ci95\": {}, \"gemm\": \"{}\", \"stats_every\": {}}}",
                            json.empty() ? "" : ",\n", model, recipe, r.seconds_per_step,
                            r.samples_per_second, ratio,
                            interval ? fmt::format("[{:.4f}, {:.4f}]", lo, hi) : std::string("null"), a.gemm,
                            r.stats_every);
      } else {
        fmt::print("{:<10} {:<16} {:>12.4f} {:>12.1f} {:>10.2f} {:>14}\n", model, recipe,
                   r.seconds_per_step, r.samples_per_second, ratio,
                   interval ? fmt::format("{:.2f}-{:.2f}", lo, hi) : std::string("-"));
        std::fflush(stdout);
      }
    }
  }
  if (a.json) fmt::print("[\n{}\n]\n", json);
}

// `lpx bench --gpu`: the kernels' bandwidth as a fraction of the device-to-device copy
// measured in the same run, and FP8 vs BF16 GEMM TFLOP/s.
void run_gpu_bench(const BenchArgs& a) {
  if (!kernels::cuda_available())
    throw io::DataError("no CUDA device: " + kernels::device_description());
  kernels::GpuBenchOptions opt;
  opt.repetitions = a.reps;
  const auto rows = kernels::run_gpu_benchmarks(opt);
  if (a.json) {
    fmt::print("[\n");
    for (size_t k = 0; k < rows.size(); ++k)
      fmt::print("  {{\"path\": \"{}\", \"bytes\": {}, \"seconds\": {:.6g}, \"gb_per_s\": {:.6g}, "
                 "\"copy_fraction\": {:.4f}, \"tflops\": {:.6g}, \"error\": {}}}{}\n",
                 rows[k].path, rows[k].bytes, rows[k].seconds, rows[k].gb_per_s,
                 rows[k].copy_fraction, rows[k].tflops,
                 rows[k].error.empty() ? "null" : nlohmann::json(rows[k].error).dump(),
                 k + 1 < rows.size() ? "," : "");
    fmt::print("]\n");
  } else {
    fmt::print("device: {}\n{:<48} {:>10} {:>12} {:>10}\n", kernels::device_description(), "path",
               "GB/s", "of copy", "TFLOP/s");
    for (const auto& r : rows) {
      if (!r.error.empty()) fmt::print("{:<48} failed: {}\n", r.path, r.error);
      else fmt::print("{:<48} {:>10.1f} {:>12.3f} {:>10.1f}\n", r.path, r.gb_per_s, r.copy_fraction, r.tflops);
    }
  }
  const auto failed = std::count_if(rows.begin(), rows.end(), [](const auto& r) { return !r.error.empty(); });
  if (failed > 0) throw std::runtime_error(fmt::format("bench --gpu: {} of {} paths failed", failed, rows.size()));
}

// Best of `reps` timed runs of each function, after one untimed warm-up of each (page
// faults, caches, OpenMP pool). The runs alternate (f0, f1, ..., f0, f1, ...) so that a
// change in the machine's load during the measurement reaches every side of a ratio.
std::vector<double> best_seconds_interleaved(int reps, const std::vector<std::function<void()>>& fns) {
  for (const auto& f : fns) f();
  std::vector<double> best(fns.size(), 1e300);
  for (int r = 0; r < reps; ++r)
    for (size_t k = 0; k < fns.size(); ++k) {
      const auto t0 = std::chrono::steady_clock::now();
      fns[k]();
      best[k] = std::min(
          best[k], std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
  return best;
}

void run_bench(const BenchArgs& a) {
  if (a.gpu) return run_gpu_bench(a);
  if (a.train) return run_train_bench(a);
  std::regex re;
  try {
    re = std::regex(a.filter.empty() ? std::string(".*") : a.filter);
  } catch (const std::regex_error& e) {
    throw UsageError(fmt::format("bench: bad --filter regex: {}", e.what()));
  }
  const int all = a.threads > 0 ? a.threads : omp_get_max_threads();
  std::vector<int> thread_counts{1};
  if (all > 1) thread_counts.push_back(all);

  // Allocation succeeds lazily (overcommit) and the OOM killer strikes while the buffers
  // fill, so buffers larger than most of the memory are refused up front.
  const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGE_SIZE);
  const double need = static_cast<double>(a.size) * 11, have = static_cast<double>(pages) * static_cast<double>(page);
  if (pages > 0 && page > 0 && need > 0.75 * have)
    throw io::DataError(fmt::format("bench: --size {} needs {:.1f} GiB of buffers, more than 3/4 of "
                                    "this machine's {:.1f} GiB", a.size, need / (1 << 30), have / (1 << 30)));
  std::unique_ptr<bench::Buffers> owned;
  try {
    owned = std::make_unique<bench::Buffers>(a.size);
  } catch (const std::exception& e) {  // bad_alloc, length_error
    throw io::DataError(fmt::format("bench: cannot allocate the buffers of --size {} ({} bytes): {}",
                                    a.size, a.size * 11, e.what()));
  }
  bench::Buffers& buf = *owned;
  const double n = static_cast<double>(a.size);
  struct Row {
    std::string path;
    int threads;
    double seconds, memcpy_seconds, bytes;
    // Against the same path and memcpy on one thread, timed interleaved with this row.
    double speedup = 1.0, memcpy_speedup = 1.0;
    // sr rows: the rate over the same path's rne rate, timed interleaved (0: no such row).
    double vs_rne = 0.0;
  };
  std::vector<Row> rows;
  const std::vector<bench::CastPath> paths = bench::cast_paths();
  // A path's rne counterpart: the path of the same name with "rne" for "sr" (or for a
  // stochastic variant, "sr-fast", "sr-rne", "sr-odd").
  const auto rne_of = [&](const std::string& name) -> const bench::CastPath* {
    const size_t at = name.find(" sr");
    if (at == std::string::npos) return nullptr;
    const size_t end = std::min(name.find(' ', at + 1), name.size());
    const std::string want = name.substr(0, at) + " rne" + name.substr(end);
    for (const auto& q : paths)
      if (q.name == want) return &q;
    return nullptr;
  };
  if (!a.json)
    fmt::print("{:<28} {:>7} {:>12} {:>9} {:>11} {:>8} {:>9} {:>9} {:>7}\n", "path", "threads",
               "elements/s", "GB/s", "memcpy GB/s", "ratio", "x 1 thr", "memcpy x", "x rne");
  for (const bench::CastPath& p : paths) {
    if (!std::regex_search(p.name, re)) continue;
    const double bytes = n * static_cast<double>(p.in_bytes + p.out_bytes);
    // The memcpy beside the path moves the same bytes: (I + O) / 2 per element. Every
    // thread count's memcpy and path (and an sr path's rne counterpart) are interleaved,
    // so the scaling from one thread to all and the cost of sr over rne are ratios taken
    // in one window too.
    const size_t copy = a.size * (p.in_bytes + p.out_bytes) / 2;
    const bench::CastPath* rne = rne_of(p.name);
    const size_t per = rne != nullptr ? 3 : 2;
    std::vector<std::function<void()>> fns;
    for (int t : thread_counts) {
      fns.emplace_back([&buf, copy, t] { bench::memcpy_baseline(buf, copy, t); });
      fns.emplace_back([&buf, &p, t] { p.run(buf, t); });
      if (rne != nullptr) fns.emplace_back([&buf, rne, t] { rne->run(buf, t); });
    }
    const std::vector<double> best = best_seconds_interleaved(a.reps, fns);
    for (size_t k = 0; k < thread_counts.size(); ++k) {
      Row r{p.name, thread_counts[k], best[per * k + 1], best[per * k], bytes};
      r.speedup = best[1] / r.seconds;
      r.memcpy_speedup = best[0] / r.memcpy_seconds;
      if (rne != nullptr) r.vs_rne = best[per * k + 2] / r.seconds;
      rows.push_back(r);
      if (!a.json) {
        const std::string sp = k == 0 ? "" : fmt::format("{:.2f}", r.speedup);
        const std::string mp = k == 0 ? "" : fmt::format("{:.2f}", r.memcpy_speedup);
        const std::string vr = rne == nullptr ? "" : fmt::format("{:.2f}", r.vs_rne);
        fmt::print("{:<28} {:>7} {:>12.3e} {:>9.2f} {:>11.2f} {:>8.2f} {:>9} {:>9} {:>7}\n",
                   p.name, r.threads, n / r.seconds, bytes / r.seconds * 1e-9,
                   bytes / r.memcpy_seconds * 1e-9, r.memcpy_seconds / r.seconds, sp, mp, vr);
      }
      std::fflush(stdout);
    }
  }
  if (a.json) {
    fmt::print("[\n");
    for (size_t k = 0; k < rows.size(); ++k) {
      const Row& r = rows[k];
      fmt::print(
          "  {{\"path\": \"{}\", \"threads\": {}, \"elements\": {}, \"seconds\": {:.6g}, "
          "\"elements_per_s\": {:.6g}, \"gb_per_s\": {:.6g}, \"memcpy_gb_per_s\": {:.6g}, "
          "\"ratio_to_memcpy\": {:.6g}, \"speedup_over_1_thread\": {:.6g}, "
          "\"memcpy_speedup_over_1_thread\": {:.6g}, \"rate_over_rne\": {}}}{}\n",
          r.path, r.threads, a.size, r.seconds, n / r.seconds, r.bytes / r.seconds * 1e-9,
          r.bytes / r.memcpy_seconds * 1e-9, r.memcpy_seconds / r.seconds, r.speedup,
          r.memcpy_speedup, r.vs_rne > 0 ? fmt::format("{:.6g}", r.vs_rne) : "null",
          k + 1 < rows.size() ? "," : "");
    }
    fmt::print("]\n");
  }
}

const bool registered = register_command(60, [](CLI::App& app) {
  auto args = std::make_shared<BenchArgs>();
  CLI::App* cmd = app.add_subcommand(
      "bench",
      "Throughput of the array casts (encode, decode, fake-cast) at 1 and all threads, with\n"
      "the ratio to a memcpy moving the same bytes (read + write) timed in the same run.");
  add_int_option(cmd, "--size", args->size, 1, kMaxSize, "elements per array (default 64Mi, at most 2^32)");
  add_threads_option(cmd, args->threads, "the 'all threads' count (default 0: OpenMP's; at most 1024)");
  add_int_option(cmd, "--reps", args->reps, 1, kMaxReps, "timed repetitions, best kept (default 3, at most 1000)");
  cmd->add_flag("--json", args->json, "print a JSON list instead of the table");
  cmd->add_option("--filter", args->filter, "only paths matching this regex (e.g. 'e2m1')");
  cmd->add_flag("--gpu", args->gpu, "benchmark the CUDA kernels (1 GiB inputs) and GEMMs instead");
  cmd->add_flag("--train", args->train, "time training steps of each recipe against fp32 instead");
  cmd->add_option("--models", args->models, "with --train: mlp,gpt or GPT presets gpt-small,gpt-medium (default mlp,gpt)");
  cmd->add_option("--recipes", args->recipes, "with --train: recipes to time (default: the catalogue)");
  cmd->add_option("--gemm", args->gemm,
                  "with --train: the GEMM order of the timed runs, fast | exact (the fp32 baseline is "
                  "always fast)")
      ->capture_default_str()
      ->check(CLI::IsMember({"fast", "exact"}));
  add_int_option(cmd, "--steps", args->steps, 1, kMaxSteps,
                 "with --train: timed steps per recipe, each paired with an fp32 step (the ratio is their "
                 "median, with a 95% interval from 6 steps on; default 7, at most 1000)");
  add_int_option(cmd, "--stats-every", args->stats_every, 0, kMaxEvery,
                 "with --train: per-operand statistics every N steps, as lpx train (default 1: every "
                 "timed step; 0: never; 50: the orderings study's)");
  cmd->footer("Examples:\n  lpx bench --size 67108864 --filter 'e4m3fn|mxfp'\n  lpx bench --gpu\n  lpx bench --train --models gpt --recipes fp32,bf16,mxfp8");
  cmd->callback([args] { run_bench(*args); });
});

}  // namespace
}  // namespace lpx::cli
