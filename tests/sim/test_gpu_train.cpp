// `--device gpu`: the recipe quantizers and the GEMMs run through the CUDA kernels
// (sim/device.hpp). With --gemm exact the loss array is bit-identical to the CPU's; with
// --gemm fast (cuBLASLt) it stays within a stated tolerance of it. Without a device the
// test says it was skipped, and checks that asking for the GPU is one clear error; the
// backend's own code runs everywhere on CPU stand-ins for the kernels (Device::emulated).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "lpx/kernels/device.hpp"
#include "lpx/sim/gemm.hpp"
#include "lpx/sim/device.hpp"
#include "lpx/sim/trainer.hpp"
#include "train_helpers.hpp"

using namespace lpx::sim;

namespace {

// head size 64, M = 128 rows: every block and Hadamard size of the catalogue fits
TrainConfig small_gpt(const std::string& recipe, int layers, const std::string& device,
                      lpx::GemmOrder order = lpx::GemmOrder::exact) {
  TrainConfig c = test::tiny_gpt(recipe, layers, 64, 1, 64, 2);
  c.seed = 21;
  c.steps = 4;
  c.device = device_by_name(device);
  c.gemm = order;
  return c;
}

using test::train_losses;

// Every device path: MX 1x32 (rceil, floor; SR + per-call RHT 64 along both axes),
// NVFP4 1x16 and 16x16 with SR and fixed RHT 16 (11 blocks: block 2 is quantized),
// 1x128 / 128x128 fp32 scales, bf16 casts (kept attention and head), per-tensor current
// scaling, and per-tensor delayed scaling, which falls back to the CPU; fp8-blockwise's
// limited accumulation runs in the ordered GEMM kernel. Every GEMM in the exact order.
void check_same_losses_as_cpu(const std::string& device) {
  struct Case {
    const char* recipe;
    int layers;
  };
  for (const Case k : {Case{"fp32", 2}, Case{"mxfp8", 2}, Case{"mxfp4-sr-rht", 2}, Case{"quartet-like", 2}, Case{"nvfp4", 11},
                       Case{"fp8-blockwise", 2}, Case{"fp8-current", 2}, Case{"fp8-delayed", 2}}) {
    INFO(k.recipe << " on " << device);
    const std::vector<double> cpu = train_losses(small_gpt(k.recipe, k.layers, "cpu"));
    const DeviceCounts before = device_counts();
    const std::vector<double> dev = train_losses(small_gpt(k.recipe, k.layers, device));
    const DeviceCounts after = device_counts();
    REQUIRE(cpu.size() == 4);
    CHECK(dev == cpu);
    CHECK(after.device > before.device);  // the backend really ran its kernels
    if (std::string(k.recipe) == "fp8-delayed") CHECK(after.fallback > before.fallback);
  }
}

}  // namespace

TEST_CASE("--device gpu gives the CPU's loss array bit for bit", "[gpu]") {
  if (!lpx::kernels::cuda_available()) {
    WARN("skipped: no CUDA device (" << lpx::kernels::device_description() << ")");
    CHECK_THROWS_WITH(Trainer(small_gpt("mxfp8", 2, "gpu")), Catch::StartsWith("no CUDA device: "));
    return;
  }
  check_same_losses_as_cpu("gpu");
}

TEST_CASE("--device gpu --gemm fast stays within its tolerance of the exact order", "[gpu]") {
  if (!lpx::kernels::cuda_available()) {
    WARN("skipped: no CUDA device (" << lpx::kernels::device_description() << ")");
    return;
  }
  // Tolerance: a float32 sum of k products in another order differs by at most about
  // k 2^-24 sum|ab| (k <= 256 here: 1.5e-5 of the magnitudes); a quantizer may turn such
  // a change into one code step of one element. After 4 steps that stays far below 1e-3
  // of the loss, while a wrong layout or transpose computes another product altogether
  // (planted in the mock, it puts validate's fast row 0.29 of sum|ab| off).
  for (const char* recipe : {"fp32", "mxfp8", "mxfp4-sr-rht"}) {
    INFO(recipe);
    const std::vector<double> exact = train_losses(small_gpt(recipe, 2, "cpu"));
    const std::vector<double> fast = train_losses(small_gpt(recipe, 2, "gpu", lpx::GemmOrder::fast));
    REQUIRE(fast.size() == exact.size());
    double worst = 0;
    for (size_t i = 0; i < exact.size(); ++i) worst = std::max(worst, std::abs(fast[i] - exact[i]) / exact[i]);
    WARN(recipe << ": largest relative loss difference, gpu fast vs exact: " << worst);
    CHECK(worst < 1e-3);
  }
}

TEST_CASE("the device backend's own code, on CPU stand-ins for the kernels, gives the CPU's losses", "[gpu]") {
  // Runs everywhere: the backend's workspace, views and copies, the Hadamard transform
  // along either axis, the per-tensor fallbacks and the "not counted" statistics of the
  // gpu path. (The gpu case itself runs in CI against the CPU mock of the CUDA module:
  // sim_test_gpu_train_mock_module, docs/kernels.md.)
  check_same_losses_as_cpu("emulated");
}

TEST_CASE("the emulated backend in the fast order gives the CPU's fast losses", "[gpu]") {
  // fast on the CPU stand-ins is the CPU's fast product: the GEMM backend's copies and
  // argument order are the only difference
  const std::vector<double> cpu = train_losses(small_gpt("fp32", 2, "cpu", lpx::GemmOrder::fast));
  const std::vector<double> dev = train_losses(small_gpt("fp32", 2, "emulated", lpx::GemmOrder::fast));
  CHECK(dev == cpu);
  // In fp32 (products not exact, as they are for 8-bit operands) Eigen's order gives
  // other bits than the exact one, so the exact comparisons above are not vacuous; where
  // the CPU has FMA, fast is the exact order's tiles (sim/gemm.hpp) and gives its bits.
  const std::vector<double> exact = train_losses(small_gpt("fp32", 2, "cpu"));
  if (lpx::sim::fast_gemm_is_exact()) CHECK(exact == cpu);
  else CHECK(exact != cpu);
}
