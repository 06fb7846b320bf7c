// Ablation variants of recipes (recipes/ablation.hpp): which operands and blocks each
// variant quantizes, that every variant is a valid recipe, and the refusals.
#include <catch2/catch.hpp>

#include "lpx/recipes/ablation.hpp"

using namespace lpx;

namespace {
bool low(const RoleSpec& s) { return s.kind == RoleSpec::Kind::block || s.kind == RoleSpec::Kind::ternary_absmean; }
const AblationVariant& find(const std::vector<AblationVariant>& v, const std::string& unit, const std::string& mode) {
  for (const auto& x : v)
    if (x.unit == unit && x.mode == mode) return x;
  FAIL("no variant " << mode << " " << unit);
  return v.front();
}
}  // namespace

TEST_CASE("ablate_roles: only u quantizes u alone, without u quantizes the other five") {
  const Recipe& base = recipe_by_name("mxfp4-rne");
  const auto v = ablate_roles(base);
  REQUIRE(v.size() == 12);
  for (GemmRole u : kAllGemmRoles) {
    const std::string name(role_name(u));
    const Recipe& only = find(v, name, "only").recipe;
    const Recipe& without = find(v, name, "without").recipe;
    CHECK(only.name == "mxfp4-rne.only-" + name);
    for (GemmRole g : kAllGemmRoles) {
      CHECK(low(only.role(g)) == (g == u));
      CHECK(low(without.role(g)) == (g != u));
      if (g != u) CHECK(only.role(g).kind == base.high_precision.format);
    }
    // a valid recipe: its canonical JSON parses back to itself
    CHECK(Recipe::from_json(only.to_json(), "t").to_json() == only.to_json());
    CHECK(Recipe::from_json(without.to_json(), "t").to_json() == without.to_json());
    const auto parsed = parse_ablation_recipe_name(without.name);
    REQUIRE(parsed);
    CHECK(parsed->base == "mxfp4-rne");
    CHECK(parsed->mode == "without");
    CHECK(parsed->unit == name);
  }
}

TEST_CASE("ablate_roles keeps each GEMM's shared transform on the unquantized partner") {
  const Recipe& base = recipe_by_name("mxfp4-sr-rht");  // RHT 64 on the four backward operands; forward bf16
  const auto v = ablate_roles(base);
  REQUIRE(v.size() == 8);  // the four backward roles
  const Recipe& only = find(v, "wgrad_dy", "only").recipe;
  CHECK(only.role(GemmRole::wgrad_x).transform == base.role(GemmRole::wgrad_x).transform);
  CHECK(only.role(GemmRole::wgrad_x).transform.kind == Transform::Kind::rht);
  CHECK_FALSE(low(only.role(GemmRole::wgrad_x)));
  CHECK(Recipe::from_json(only.to_json(), "t").to_json() == only.to_json());
  CHECK_THROWS_WITH(ablate_roles(base, {"fwd_x"}), Catch::Contains("does not quantize fwd_x") && Catch::Contains("bf16"));
  CHECK_THROWS_WITH(ablate_roles(base, {"fwd_y"}), Catch::Contains("unknown GEMM role 'fwd_y'"));
  CHECK_THROWS_WITH(ablate_roles(recipe_by_name("bf16")), Catch::Contains("quantizes no GEMM operand below BF16"));
  CHECK(ablate_roles(base, {"dgrad_dy", "dgrad_dy"}).size() == 2);
}

TEST_CASE("ablate_blocks: one block (or the head) at a time, on top of the recipe's own kept layers") {
  // nvfp4 on 8 blocks keeps block 7 (8/62 of the depth) and the head: units are blocks 0-6
  const Recipe& nv = recipe_by_name("nvfp4");
  const auto v = ablate_blocks(nv, 8, 8);
  REQUIRE(v.size() == 14);
  const Recipe& only3 = find(v, "block3", "only").recipe;
  const Recipe& without3 = find(v, "block3", "without").recipe;
  for (int b = 0; b < 8; ++b) {
    CHECK(keeps_high_precision(only3, LayerInfo{b, 8, LayerInfo::linear, "l"}) == (b != 3));
    CHECK(keeps_high_precision(without3, LayerInfo{b, 8, LayerInfo::linear, "l"}) == (b == 3 || b == 7));
  }
  CHECK(Recipe::from_json(only3.to_json(), "t").to_json() == only3.to_json());
  // mxfp4-rne quantizes the head too; on the 2-layer MLP (count 2: fc0 and the head fc1)
  const auto m = ablate_blocks(recipe_by_name("mxfp4-rne"), 1, 2);
  REQUIRE(m.size() == 4);
  const Recipe& only_head = find(m, "head", "only").recipe;
  CHECK(keeps_high_precision(only_head, LayerInfo{0, 2, LayerInfo::linear, "fc0"}));
  CHECK_FALSE(keeps_high_precision(only_head, LayerInfo{1, 2, LayerInfo::head, "fc1"}));
  CHECK(keeps_high_precision(find(m, "head", "without").recipe, LayerInfo{1, 2, LayerInfo::head, "fc1"}));
  CHECK(keeps_high_precision(find(m, "block0", "only").recipe, LayerInfo{1, 2, LayerInfo::head, "fc1"}));
  CHECK_THROWS_WITH(ablate_blocks(nv, 8, 8, {"block7"}), Catch::Contains("does not quantize 'block7'"));
  CHECK_THROWS_WITH(ablate_blocks(nv, 8, 8, {"head"}), Catch::Contains("does not quantize 'head'"));
  CHECK(ablate_blocks(nv, 8, 8, {"block0"}).size() == 2);
}

TEST_CASE("ablation names parse back, and other names do not") {
  CHECK(parse_ablation_recipe_name("bitnet-b1.58.only-block12")->base == "bitnet-b1.58");
  CHECK(parse_ablation_recipe_name("x.without-head")->unit == "head");
  CHECK_FALSE(parse_ablation_recipe_name("mxfp4-rne"));
  CHECK_FALSE(parse_ablation_recipe_name("r.only-fwd_z"));
  CHECK_FALSE(parse_ablation_recipe_name(".only-fwd_x"));
}
