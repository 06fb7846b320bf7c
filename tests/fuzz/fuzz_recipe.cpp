// libFuzzer target: lpx::Recipe::from_json, the parser behind `lpx train --recipe FILE`,
// `lpx recipes check` and sweep specs' recipe files (recipes/include/lpx/recipes/recipe.hpp).
// std::invalid_argument is the expected answer to a bad recipe; anything else escaping
// (another exception, an ASan/UBSan report, a stack overflow, a timeout) is a finding.
// A recipe that parses must also keep the header's round-trip promise (from_json of its
// to_json() gives back the same to_json()), describe itself, and apply to the six
// operands of a small layer (recipes/include/lpx/recipes/operand.hpp) without an error:
// whatever from_json accepts, lpx train must be able to run.
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "lpx/recipes/operand.hpp"
#include "lpx/recipes/recipe.hpp"

namespace {

// A (kRows x kCols) operand with zeros, subnormals, outliers and both signs.
constexpr int64_t kRows = 8, kCols = 64;
std::array<float, kRows * kCols> operand() {
  std::array<float, kRows * kCols> x{};
  for (size_t i = 0; i < x.size(); ++i) {
    const float v = std::ldexp(static_cast<float>(i % 13) - 6.0f, static_cast<int>(i % 7) - 3);
    x[i] = i % 61 == 0 ? 1e4f : i % 37 == 0 ? 1e-40f : v;
  }
  return x;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  lpx::Recipe recipe;
  try {
    recipe = lpx::Recipe::from_json(text, "fuzz.json");
  } catch (const std::invalid_argument&) {
    return 0;
  }
  const std::string canonical = recipe.to_json();
  const lpx::Recipe again = lpx::Recipe::from_json(canonical, "fuzz.json (to_json)");  // must not throw
  if (again.to_json() != canonical) __builtin_trap();
  (void)recipe.describe();

  static const std::array<float, kRows * kCols> in = operand();
  std::array<float, kRows * kCols> out{};
  for (lpx::LayerInfo::Kind kind : {lpx::LayerInfo::linear, lpx::LayerInfo::head}) {
    lpx::OperandQuantizer q(recipe, lpx::LayerInfo{0, 2, kind, "fuzz.fc"}, 7);
    for (uint64_t step = 0; step < 2; ++step)
      for (lpx::GemmRole role : lpx::kAllGemmRoles) {
        lpx::OperandStats stats;
        lpx::AppliedOperand applied;
        q.apply(role, in.data(), out.data(), kRows, kCols, step, &stats, &applied);
      }
  }
  return 0;
}
