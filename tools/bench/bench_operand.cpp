// Google Benchmark driver for one training operand through OperandQuantizer::apply (the
// transform, the quantizer and, with /stats, the per-operand statistics) on the shape of
// gpt-small's largest operands (1024 tokens x 512 features), one role of a catalogue recipe
// at a time, beside a memcpy moving the same bytes (read + write). This is the part of a
// training step that a recipe adds over fp32; the README's step table is the whole step.
// hadamard/... and quantize/... time the transform and the quantizer alone.
// Compare items_per_second (elements per second) within one run. The operand is large
// enough for the casts' OpenMP regions, so set one thread (as `lpx bench --train --threads 1`
// does): on a small machine the idle threads' spinning otherwise lands in the timings.
//   OMP_NUM_THREADS=1 lpx_bench_operand [--benchmark_filter=REGEX]
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include <benchmark/benchmark.h>

#include "lpx/formats/block_format.hpp"
#include "lpx/formats/quantize.hpp"
#include "lpx/numerics/hadamard.hpp"
#include "lpx/recipes/operand.hpp"
#include "lpx/recipes/recipe.hpp"

namespace {

constexpr int64_t kRows = 1024, kCols = 512;

std::vector<float> operand() {
  std::vector<float> v(static_cast<size_t>(kRows * kCols));
  std::mt19937 gen(1);
  std::normal_distribution<float> normal;
  for (float& x : v) x = normal(gen);
  return v;
}

void Apply(benchmark::State& state, const std::string& recipe, lpx::GemmRole role, bool stats) {
  const std::vector<float> in = operand();
  std::vector<float> out(in.size());
  lpx::OperandQuantizer q(lpx::recipe_by_name(recipe), lpx::LayerInfo{2, 6, lpx::LayerInfo::linear, "h2.mlp.fc"}, 1);
  lpx::OperandStats st;
  uint64_t step = 0;
  for (auto _ : state) {
    q.apply(role, in.data(), out.data(), kRows, kCols, step++, stats ? &st : nullptr, nullptr);
    benchmark::DoNotOptimize(out.data());
  }
  state.SetItemsProcessed(state.iterations() * kRows * kCols);
}

// The blocked Hadamard transform alone (the rht recipes' first step), along the rows
// (axis 1) or down the columns (axis 0), with random signs, on the operand's kRows x kCols
// or on its first kRows x 128 (gpt-small's width: rows 512 bytes apart).
void Hadamard(benchmark::State& state, int axis, int n, int64_t cols) {
  const std::vector<float> in = operand();
  std::vector<float> out(in.size());
  const std::vector<float> signs = lpx::hadamard_signs(n, 1, 2);
  for (auto _ : state) {
    lpx::hadamard_blocks(in.data(), out.data(), kRows, cols, axis, n, signs);
    benchmark::DoNotOptimize(out.data());
  }
  state.SetItemsProcessed(state.iterations() * kRows * cols);
}

// The block quantizer alone (the rht recipes' second step), mxfp4 with floor scales along
// the rows (axis 1) or down the columns (axis 0), under round-to-nearest, stochastic
// rounding, or stochastic rounding with the 3/4 headroom, on the operand's kRows x kCols or
// its first kRows x 128: beside hadamard/.../64 and lpx_bench_stats, the parts of
// mxfp4-sr-rht's backward operands one at a time.
void Quantize(benchmark::State& state, int axis, lpx::Rounding round, bool headroom, int64_t cols) {
  const std::vector<float> in = operand();
  std::vector<float> out(static_cast<size_t>(kRows * cols));
  lpx::BlockFormat f = lpx::parse_block_format("mxfp4");
  f.block.axis = axis;
  lpx::QuantizeOptions o;
  o.round = round;
  o.headroom_3_4 = headroom;
  o.threads = 1;
  o.seed = 3;
  const int64_t shape[2] = {kRows, cols};
  const lpx::TensorView<const float> view{std::span<const float>(in.data(), out.size()),
                                          std::span<const int64_t>(shape, 2)};
  for (auto _ : state) {
    lpx::fake_quantize_values(view, out, f, o);
    benchmark::DoNotOptimize(out.data());
  }
  state.SetItemsProcessed(state.iterations() * kRows * cols);
}

void Memcpy(benchmark::State& state) {
  const std::vector<float> in = operand();
  std::vector<float> out(in.size());
  for (auto _ : state) {
    std::memcpy(out.data(), in.data(), in.size() * sizeof(float));
    benchmark::DoNotOptimize(out.data());
  }
  state.SetItemsProcessed(state.iterations() * kRows * kCols);
}

// Every role that some recipe below quantizes differently: forward (reduction along the
// rows' contiguous axis), wgrad (down the columns), with and without statistics.
void Register() {
  const char* recipes[] = {"bf16", "mxfp8", "mxfp4-rne", "mxfp4-sr-rht", "nvfp4", "quartet-like"};
  const lpx::GemmRole roles[] = {lpx::GemmRole::fwd_x, lpx::GemmRole::dgrad_dy, lpx::GemmRole::wgrad_dy};
  for (const char* r : recipes)
    for (lpx::GemmRole role : roles)
      for (bool stats : {false, true}) {
        const std::string name = std::string(r) + "/" + std::string(lpx::role_name(role)) + (stats ? "/stats" : "");
        benchmark::RegisterBenchmark(name.c_str(), [r, role, stats](benchmark::State& s) { Apply(s, r, role, stats); })
            ->Unit(benchmark::kMicrosecond);
      }
  for (int axis : {0, 1})
    for (int n : {16, 32, 64, 128})
      for (int64_t cols : {kCols, int64_t{128}}) {
        const std::string name = "hadamard/axis" + std::to_string(axis) + "/" + std::to_string(n) +
                                 (cols == kCols ? "" : "/cols" + std::to_string(cols));
        benchmark::RegisterBenchmark(name.c_str(), [axis, n, cols](benchmark::State& s) { Hadamard(s, axis, n, cols); })
            ->Unit(benchmark::kMicrosecond);
      }
  const std::pair<const char*, lpx::Rounding> rounds[] = {
      {"rne", lpx::Rounding::rne}, {"sr", lpx::Rounding::sr}, {"sr-headroom", lpx::Rounding::sr}};
  for (int axis : {0, 1})
    for (const auto& [round_name, round] : rounds)
      for (int64_t cols : {kCols, int64_t{128}}) {
        const bool headroom = std::string(round_name) == "sr-headroom";
        const std::string name = "quantize/mxfp4/axis" + std::to_string(axis) + "/" + round_name +
                                 (cols == kCols ? "" : "/cols" + std::to_string(cols));
        benchmark::RegisterBenchmark(name.c_str(), [axis, round, headroom, cols](benchmark::State& s) {
          Quantize(s, axis, round, headroom, cols);
        })->Unit(benchmark::kMicrosecond);
      }
  benchmark::RegisterBenchmark("memcpy", Memcpy)->Unit(benchmark::kMicrosecond);
}

}  // namespace

int main(int argc, char** argv) {
  Register();
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
