// Attention products kept in high precision get what the recipe says: "bf16" rounds the
// operands of both attention GEMMs (Q, K, P, V and their gradients) to bfloat16 with RNE
// through formats' codec, accumulating in fp32; "fp32" leaves them float32.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <unistd.h>
#include <vector>

#include "lpx/recipes/recipe.hpp"
#include "lpx/sim/trainer.hpp"
#include "train_helpers.hpp"

using namespace lpx;
using namespace lpx::sim;

namespace {

TrainConfig small_gpt(const std::string& recipe) {
  TrainConfig c = test::tiny_gpt(recipe, 1, 32, 2, 32, 4);
  c.seed = 4;
  c.steps = 3;
  return c;
}

std::vector<double> losses(const TrainConfig& c) { return test::train_losses(c); }

bool is_bf16(float x) {
  uint32_t b;
  std::memcpy(&b, &x, 4);
  return (b & 0xFFFFu) == 0;
}

}  // namespace

TEST_CASE("bf16 attention rounds its GEMM operands to bfloat16; fp32 attention does not", "[attention]") {
  // The fp32 recipe with only its attention products kept in high precision, once as bf16
  // and once as fp32 (written as recipe files: the catalogue's fp32 recipe keeps nothing).
  const auto dir = std::filesystem::temp_directory_path() / ("lpx_attn_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  std::string path[2];
  for (int i = 0; i < 2; ++i) {
    lpx::Recipe r = lpx::recipe_by_name("fp32");
    r.name = i == 0 ? "fp32-attn-bf16" : "fp32-attn-fp32";
    r.high_precision.attention = true;
    r.high_precision.format = i == 0 ? lpx::RoleSpec::Kind::bf16 : lpx::RoleSpec::Kind::fp32;
    path[i] = (dir / (r.name + ".json")).string();
    std::ofstream(path[i]) << r.to_json();
  }
  const std::vector<double> fp32 = losses(small_gpt("fp32"));
  const std::vector<double> attn_bf16 = losses(small_gpt(path[0]));
  const std::vector<double> attn_fp32 = losses(small_gpt(path[1]));
  CHECK(attn_fp32 == fp32);  // "fp32" attention is the fp32 computation, bit for bit
  CHECK(attn_bf16 != fp32);  // "bf16" attention is not
  for (size_t i = 0; i < fp32.size(); ++i) CHECK(std::fabs(attn_bf16[i] - fp32[i]) < 0.01 * fp32[i]);

  // the operands the attention GEMMs multiplied are bfloat16 values, for every role
  Trainer t(small_gpt(path[0]));
  int64_t calls[6] = {}, rounded[6] = {};
  bool all_bf16[6] = {true, true, true, true, true, true};
  for (QuantGemms* q : t.model().gemm_layers()) {
    if (q->info().kind != LayerInfo::attention_bmm) continue;
    q->operand_hook = [&](GemmRole r, const float* in, const float* used, int64_t rows, int64_t cols, uint64_t) {
      const auto i = static_cast<size_t>(r);
      ++calls[i];
      for (int64_t k = 0; k < rows * cols; ++k) {
        all_bf16[i] = all_bf16[i] && is_bf16(used[k]);
        rounded[i] += used[k] != in[k] ? 1 : 0;
      }
    };
  }
  t.step();
  for (int r = 0; r < 6; ++r) {
    INFO("role " << role_name(static_cast<GemmRole>(r)));
    // two GEMM pairs (Q K^T and P V) per batch row and head: 4 * 2 calls per role
    CHECK(calls[r] == 2 * 4 * 2);
    CHECK(all_bf16[r]);
    CHECK(rounded[r] > 0);  // the inputs were not bf16 already
  }
  std::filesystem::remove_all(dir);
}
