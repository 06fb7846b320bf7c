// Google Benchmark driver for one training operand through OperandQuantizer::apply (the
// transform, the quantizer and, with /stats, the per-operand statistics) on the shape of
// gpt-small's largest operands (1024 tokens x 512 features), one role of a catalogue recipe
// at a time, beside a memcpy moving the same bytes (read + write). This is the part of a
// training step that a recipe adds over fp32; the README's step table is the whole step.
// hadamard/... and quantize/... time the transform and the quantizer alone; attention/...
// one layer's per-head attention operands for a step.
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

// One layer's attention products for one training step, as gpt-small's GPT makes them
// (sim/src/models.cpp): for each of 16 sequences x 4 heads, S = q k^T and O = P V forward,
// then their backward, 12 operand calls of 64 x 32, 64 x 64 or 32 x 64 with statistics,
// through one attention_bmm layer's quantizer. Per element against Apply's 1024 x 512
// operands, it shows what small operands cost per call; a step's repeated keys (the same
// signs and SR words for every head) are what OperandQuantizer caches.
void Attention(benchmark::State& state, const std::string& recipe) {
  const std::vector<float> in = operand();
  std::vector<float> out(64 * 64);
  lpx::OperandQuantizer q(lpx::recipe_by_name(recipe), lpx::LayerInfo{2, 6, lpx::LayerInfo::attention_bmm, "h2.attn.bmm"},
                          1);
  struct Call {
    lpx::GemmRole role;
    int64_t rows, cols;
  };
  using R = lpx::GemmRole;
  const Call calls[] = {{R::fwd_x, 64, 32},    {R::fwd_w, 64, 32},   {R::fwd_x, 64, 64},    {R::fwd_w, 32, 64},
                        {R::dgrad_dy, 64, 32}, {R::dgrad_w, 32, 64}, {R::wgrad_dy, 64, 32}, {R::wgrad_x, 64, 64},
                        {R::dgrad_dy, 64, 64}, {R::dgrad_w, 64, 32}, {R::wgrad_dy, 64, 64}, {R::wgrad_x, 64, 32}};
  int64_t per_step = 0;
  for (const Call& c : calls) per_step += 64 * c.rows * c.cols;
  lpx::OperandStats st;
  uint64_t step = 0;
  for (auto _ : state) {
    for (int64_t pair = 0; pair < 64; ++pair)
      for (const Call& c : calls) {
        q.apply(c.role, in.data() + pair * 4096, out.data(), c.rows, c.cols, step, &st, nullptr);
        benchmark::DoNotOptimize(out.data());
      }
    ++step;
  }
  state.SetItemsProcessed(state.iterations() * per_step);
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
  for (const char* r : {"mxfp4-sr-rht", "quartet-like"})
    benchmark::RegisterBenchmark((std::string("attention/") + r).c_str(), [r](benchmark::State& s) { Attention(s, r); })
        ->Unit(benchmark::kMicrosecond);
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
