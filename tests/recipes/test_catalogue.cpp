// The compiled-in catalogue: every recipe parses, round-trips through its canonical JSON,
// and says what its source says (docs/recipes.md#catalogue).
#include <catch2/catch.hpp>

#include <algorithm>
#include <string>

#include "lpx/recipes/recipe.hpp"

using namespace lpx;

namespace {
bool is(const RoleSpec& r, std::string_view format, Rounding round = Rounding::rne) {
  return r.format_name() == format && r.round == round;
}
bool no_transform(const RoleSpec& r) { return r.transform.kind == Transform::Kind::none; }
bool rht(const RoleSpec& r, int size, Transform::Signs signs) {
  return r.transform.kind == Transform::Kind::rht && r.transform.size == size && r.transform.signs == signs;
}
}  // namespace

TEST_CASE("catalogue: the names of docs/recipes.md, each parses and round-trips", "[recipes]") {
  const auto names = recipe_names();
  const std::vector<std::string_view> want = {"fp32",         "bf16",   "fp8-delayed",  "fp8-current",
                                              "fp8-blockwise", "mxfp8", "mxfp6",        "mxfp4-rne",
                                              "mxfp4-sr-rht", "nvfp4",  "quartet-like", "bitnet-b1.58",
                                              "sub4-e2m0"};
  CHECK(std::vector<std::string_view>(names.begin(), names.end()) == want);
  for (auto name : names) {
    INFO(name);
    const Recipe& r = recipe_by_name(name);
    CHECK(r.name == name);
    CHECK(!r.source.empty());
    CHECK(!r.summary.empty());
    const std::string text = r.to_json();
    const Recipe back = Recipe::from_json(text, "round trip");
    CHECK(back.to_json() == text);
    CHECK(back.describe() == r.describe());
    CHECK(load_recipe(std::string(name)).to_json() == text);
  }
  CHECK_THROWS_WITH(recipe_by_name("nvfp5"), Catch::Contains("nvfp5") && Catch::Contains("mxfp4-sr-rht"));
  CHECK_THROWS_WITH(load_recipe("/no/such/recipe.json"), Catch::Contains("nvfp4"));
}

TEST_CASE("catalogue: nvfp4 (NVIDIA 2025)", "[recipes]") {
  const Recipe& r = recipe_by_name("nvfp4");
  const auto& fw = r.role(GemmRole::fwd_w);
  CHECK(is(fw, "nvfp4_2d"));
  CHECK(fw.block.block.kind == BlockShape::Kind::tile);
  CHECK(fw.block.block.rows == 16);
  CHECK(fw.block.block.cols == 16);
  CHECK(fw.block.scale == ScaleFormat::e4m3);
  CHECK(is(r.role(GemmRole::fwd_x), "nvfp4"));
  CHECK(r.role(GemmRole::fwd_x).block.block.length == 16);
  CHECK(is(r.role(GemmRole::dgrad_w), "nvfp4_2d"));
  // SR only on the gradients.
  for (GemmRole g : kAllGemmRoles) {
    const bool grad = g == GemmRole::dgrad_dy || g == GemmRole::wgrad_dy;
    CHECK((r.role(g).round == Rounding::sr) == grad);
  }
  // RHT 16 with one fixed sign vector on the wgrad inputs only.
  CHECK(rht(r.role(GemmRole::wgrad_x), 16, Transform::Signs::fixed));
  CHECK(rht(r.role(GemmRole::wgrad_dy), 16, Transform::Signs::fixed));
  for (GemmRole g : {GemmRole::fwd_x, GemmRole::fwd_w, GemmRole::dgrad_dy, GemmRole::dgrad_w})
    CHECK(no_transform(r.role(g)));
  // NVIDIA's counts at 62 blocks, written as fractions of depth so that they scale.
  CHECK(r.high_precision.first_count(62) == 2);
  CHECK(r.high_precision.last_count(62) == 8);
  CHECK(r.high_precision.first_count(8) == 0);  // 0.26 of a block
  CHECK(r.high_precision.last_count(8) == 1);   // 1.03 blocks
  CHECK(r.high_precision.last_count(4) == 1);   // 0.52: halves round up
  CHECK(r.high_precision.last_count(3) == 0);   // 0.39
  CHECK(r.high_precision.embeddings);
  CHECK(r.high_precision.head);
  CHECK(r.high_precision.attention);
  // ~16% of 62 blocks.
  int kept = 0;
  for (int i = 0; i < 62; ++i) kept += keeps_high_precision(r, LayerInfo{i, 62, LayerInfo::linear, "l"}) ? 1 : 0;
  CHECK(kept == 10);
  CHECK(keeps_high_precision(r, LayerInfo{1, 62, LayerInfo::linear, "l"}));
  CHECK(!keeps_high_precision(r, LayerInfo{2, 62, LayerInfo::linear, "l"}));
  CHECK(!keeps_high_precision(r, LayerInfo{53, 62, LayerInfo::linear, "l"}));
  CHECK(keeps_high_precision(r, LayerInfo{54, 62, LayerInfo::linear, "l"}));
  // On an 8-block model only the last block stays in BF16.
  for (int i = 0; i < 8; ++i) CHECK(keeps_high_precision(r, LayerInfo{i, 8, LayerInfo::linear, "l"}) == (i == 7));
}

TEST_CASE("high_precision.blocks keeps more blocks, and the canonical form keeps fractions and blocks") {
  Recipe r = recipe_by_name("mxfp4-rne");
  r.high_precision.blocks = {1, 3};
  for (int i = 0; i < 6; ++i)
    CHECK(keeps_high_precision(r, LayerInfo{i, 6, LayerInfo::linear, "l"}) == (i == 1 || i == 3));
  CHECK(!keeps_high_precision(r, LayerInfo{1, 6, LayerInfo::attention_bmm, "a"}));  // a linear's rule only
  r.high_precision.last_fraction = 0.5;
  const Recipe back = Recipe::from_json(r.to_json(), "roundtrip");
  CHECK(back.to_json() == r.to_json());
  CHECK(back.high_precision.blocks == std::vector<int>{1, 3});
  REQUIRE(back.high_precision.last_fraction);
  CHECK(*back.high_precision.last_fraction == 0.5);
  for (int i = 0; i < 6; ++i)
    CHECK(keeps_high_precision(back, LayerInfo{i, 6, LayerInfo::linear, "l"}) == (i == 1 || i >= 3));
}

TEST_CASE("catalogue: mxfp4-sr-rht (Tseng et al. 2025)", "[recipes]") {
  const Recipe& r = recipe_by_name("mxfp4-sr-rht");
  CHECK(is(r.role(GemmRole::fwd_x), "bf16"));
  CHECK(is(r.role(GemmRole::fwd_w), "bf16"));
  CHECK(no_transform(r.role(GemmRole::fwd_x)));
  for (GemmRole g : {GemmRole::dgrad_dy, GemmRole::dgrad_w, GemmRole::wgrad_x, GemmRole::wgrad_dy}) {
    const auto& s = r.role(g);
    CHECK(is(s, "mxfp4", Rounding::sr));
    CHECK(s.block.rule == ScaleRule::floor);
    CHECK(s.headroom_3_4);
    CHECK(rht(s, 64, Transform::Signs::per_call));
  }
}

TEST_CASE("catalogue: fp8-delayed and fp8-current (Micikevicius et al. 2022)", "[recipes]") {
  for (const char* name : {"fp8-delayed", "fp8-current"}) {
    const Recipe& r = recipe_by_name(name);
    const bool delayed = std::string(name) == "fp8-delayed";
    for (GemmRole g : kAllGemmRoles) {
      const auto& s = r.role(g);
      const bool dy = g == GemmRole::dgrad_dy || g == GemmRole::wgrad_dy;
      CHECK(s.kind == RoleSpec::Kind::block);
      CHECK(s.block.block.kind == BlockShape::Kind::tensor);
      CHECK(s.block.scale == ScaleFormat::fp32);
      CHECK(std::string(s.block.element.name) == (dy ? "float8_e5m2" : "float8_e4m3fn"));
      CHECK(s.round == Rounding::rne);
      CHECK(s.margin == 0);
      CHECK(s.amax_history.has_value() == delayed);
      if (delayed) {
        CHECK(s.amax_history->length == 1024);
        CHECK(s.amax_history->reduction == AmaxHistory::Reduction::max);
      }
    }
    CHECK(r.high_precision.attention);
    CHECK(r.high_precision.first_blocks == 0);
  }
}

TEST_CASE("catalogue: fp8-blockwise (DeepSeek-V3)", "[recipes]") {
  const Recipe& r = recipe_by_name("fp8-blockwise");
  for (GemmRole g : kAllGemmRoles) {
    const auto& s = r.role(g);
    CHECK(std::string(s.block.element.name) == "float8_e4m3fn");
    CHECK(s.block.scale == ScaleFormat::fp32);
    const bool weight = g == GemmRole::fwd_w || g == GemmRole::dgrad_w;
    if (weight) {
      CHECK(s.block.block.kind == BlockShape::Kind::tile);
      CHECK(s.block.block.rows == 128);
      CHECK(s.block.block.cols == 128);
    } else {
      CHECK(s.block.block.kind == BlockShape::Kind::vector);
      CHECK(s.block.block.length == 128);
    }
  }
  CHECK(r.accumulation.limited);
  CHECK(r.accumulation.promote_every == 128);
  CHECK(r.accumulation.mantissa_bits == 14);
  CHECK(r.accumulation.scales_at_promotion);
  CHECK(r.optimizer_state == OptimizerState::bf16);
  CHECK(r.master_weights == MasterWeights::fp32);
  CHECK(r.high_precision.embeddings);
  CHECK(r.high_precision.head);
  CHECK(r.high_precision.attention);
}

TEST_CASE("catalogue: MX recipes, quartet-like, bitnet, sub-4-bit, baselines", "[recipes]") {
  const Recipe& mx8 = recipe_by_name("mxfp8");
  for (GemmRole g : kAllGemmRoles) {
    CHECK(is(mx8.role(g), "mxfp8_e4m3"));
    CHECK(mx8.role(g).block.rule == ScaleRule::rceil);
  }
  CHECK(mx8.high_precision.attention);
  const Recipe& mx6 = recipe_by_name("mxfp6");
  for (GemmRole g : kAllGemmRoles) CHECK(mx6.role(g).block.spec() == "float6_e3m2fn:b32:e8m0:floor");
  const Recipe& mx4 = recipe_by_name("mxfp4-rne");
  for (GemmRole g : kAllGemmRoles) {
    CHECK(is(mx4.role(g), "mxfp4"));
    CHECK(mx4.role(g).block.rule == ScaleRule::floor);
    CHECK(!mx4.role(g).headroom_3_4);
    CHECK(no_transform(mx4.role(g)));
  }
  CHECK(!keeps_high_precision(mx4, LayerInfo{0, 4, LayerInfo::head, "head"}));

  const Recipe& q = recipe_by_name("quartet-like");
  for (GemmRole g : kAllGemmRoles) {
    const bool fwd = gemm_of(g) == Gemm::fwd;
    CHECK(is(q.role(g), "mxfp4", fwd ? Rounding::rne : Rounding::sr));
    CHECK(q.role(g).headroom_3_4 == !fwd);
    CHECK(rht(q.role(g), 32, Transform::Signs::per_call));
  }

  const Recipe& b = recipe_by_name("bitnet-b1.58");
  CHECK(b.role(GemmRole::fwd_w).kind == RoleSpec::Kind::ternary_absmean);
  CHECK(b.role(GemmRole::dgrad_w).kind == RoleSpec::Kind::ternary_absmean);
  CHECK(b.role(GemmRole::fwd_x).block.spec() == "int8:channel:fp32");
  CHECK(b.role(GemmRole::dgrad_dy).kind == RoleSpec::Kind::bf16);

  const Recipe& s = recipe_by_name("sub4-e2m0");
  CHECK(std::string(s.role(GemmRole::fwd_x).block.element.name) == "e2m0");
  CHECK(s.role(GemmRole::fwd_x).block.block.length == 16);

  for (GemmRole g : kAllGemmRoles) {
    CHECK(recipe_by_name("fp32").role(g).is_identity());
    CHECK(recipe_by_name("bf16").role(g).kind == RoleSpec::Kind::bf16);
  }
  CHECK(recipe_by_name("fp32").high_precision.format == RoleSpec::Kind::fp32);
}

TEST_CASE("roles: names, GEMMs and reduction axes", "[recipes]") {
  CHECK(role_name(GemmRole::dgrad_dy) == "dgrad_dy");
  CHECK(role_by_name("wgrad_x") == GemmRole::wgrad_x);
  CHECK_THROWS_WITH(role_by_name("bwd_x"), Catch::Contains("fwd_x"));
  CHECK(gemm_of(GemmRole::fwd_w) == Gemm::fwd);
  CHECK(gemm_of(GemmRole::dgrad_w) == Gemm::dgrad);
  CHECK(gemm_of(GemmRole::wgrad_dy) == Gemm::wgrad);
  CHECK(partner_of(GemmRole::wgrad_x) == GemmRole::wgrad_dy);
  CHECK(reduction_axis(GemmRole::fwd_x) == 1);
  CHECK(reduction_axis(GemmRole::fwd_w) == 1);
  CHECK(reduction_axis(GemmRole::dgrad_dy) == 1);
  CHECK(reduction_axis(GemmRole::dgrad_w) == 0);
  CHECK(reduction_axis(GemmRole::wgrad_x) == 0);
  CHECK(reduction_axis(GemmRole::wgrad_dy) == 0);
}
