// Ablation variants of recipes (recipes/ablation.hpp): which operands, blocks and linear layers each
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

TEST_CASE("ablate_linears: one kind of linear (or one layer, or the head) at a time") {
  // mxfp4-rne quantizes every layer; a 3-block GPT's linears as the model names them
  std::vector<LayerInfo> gpt;
  for (int b = 0; b < 3; ++b)
    for (const char* n : {"attn.qkv", "attn.proj", "mlp.fc", "mlp.proj"})
      gpt.push_back(LayerInfo{b, 3, LayerInfo::linear, "h" + std::to_string(b) + "." + n});
  const Recipe& base = recipe_by_name("mxfp4-rne");
  const auto v = ablate_linears(base, gpt);
  REQUIRE(v.size() == 10);  // four kinds and the head, two variants each
  const Recipe& only_fc = find(v, "mlp.fc", "only").recipe;
  const Recipe& without_fc = find(v, "mlp.fc", "without").recipe;
  CHECK(only_fc.name == "mxfp4-rne.only-mlp.fc");
  for (const LayerInfo& l : gpt) {
    const bool fc = l.name.ends_with(".mlp.fc");
    CHECK(keeps_high_precision(only_fc, l) == !fc);
    CHECK(keeps_high_precision(without_fc, l) == fc);
  }
  CHECK(keeps_high_precision(only_fc, LayerInfo{2, 3, LayerInfo::head, "lm_head"}));
  CHECK_FALSE(keeps_high_precision(without_fc, LayerInfo{2, 3, LayerInfo::head, "lm_head"}));
  const Recipe& only_head = find(v, "head", "only").recipe;
  for (const LayerInfo& l : gpt) CHECK(keeps_high_precision(only_head, l));
  CHECK_FALSE(keeps_high_precision(only_head, LayerInfo{2, 3, LayerInfo::head, "lm_head"}));
  for (const auto& x : v) CHECK(Recipe::from_json(x.recipe.to_json(), "t").to_json() == x.recipe.to_json());
  // one layer by its full name: only h1.attn.proj is quantized
  const auto one = ablate_linears(base, gpt, {"h1.attn.proj"});
  REQUIRE(one.size() == 2);
  for (const LayerInfo& l : gpt) CHECK(keeps_high_precision(find(one, "h1.attn.proj", "only").recipe, l) == (l.name != "h1.attn.proj"));
  CHECK(parse_ablation_recipe_name(one[0].recipe.name)->unit == "h1.attn.proj");
  // nvfp4 on 3 blocks keeps no block (2/62 and 8/62 of 3 round to 0) but keeps the head
  const Recipe& nv = recipe_by_name("nvfp4");
  CHECK(ablate_linears(nv, gpt).size() == 8);  // the head is kept by the recipe
  CHECK_THROWS_WITH(ablate_linears(nv, gpt, {"head"}), Catch::Contains("does not quantize a layer 'head'"));
  CHECK_THROWS_WITH(ablate_linears(base, gpt, {"mlp.gate"}), Catch::Contains("mlp.gate") && Catch::Contains("attn.qkv"));
  CHECK_THROWS_WITH(ablate_linears(recipe_by_name("bf16"), gpt), Catch::Contains("quantizes no GEMM operand below BF16"));
  // the MLP's layers have no block: each is a unit
  const std::vector<LayerInfo> mlp = {{0, 3, LayerInfo::linear, "fc0"}, {1, 3, LayerInfo::linear, "fc1"}};
  const auto m = ablate_linears(base, mlp);
  REQUIRE(m.size() == 6);
  CHECK(keeps_high_precision(find(m, "fc1", "only").recipe, mlp[0]));
  CHECK_FALSE(keeps_high_precision(find(m, "fc1", "only").recipe, mlp[1]));
}

TEST_CASE("layer names in high_precision.layers match a layer or its name in every block") {
  CHECK(layer_name_matches("mlp.fc", "h12.mlp.fc"));
  CHECK(layer_name_matches("h1.mlp.fc", "h1.mlp.fc"));
  CHECK(layer_name_matches("fc0", "fc0"));
  CHECK_FALSE(layer_name_matches("mlp.fc", "h1.mlp.fc2"));
  CHECK_FALSE(layer_name_matches("fc", "h1.mlp.fc"));
  CHECK_FALSE(layer_name_matches("mlp.fc", "hx.mlp.fc"));
  CHECK_FALSE(layer_name_matches("fc0", "h1.fc0x"));
  Recipe r = recipe_by_name("mxfp8");
  r.high_precision.layers = {"Bad Name"};
  CHECK_THROWS_WITH(Recipe::from_json(r.to_json(), "t"), Catch::Contains("high_precision.layers[0]"));
}

TEST_CASE("ablation names parse back, and other names do not") {
  CHECK(parse_ablation_recipe_name("r.only-h3.attn.qkv")->unit == "h3.attn.qkv");
  CHECK(parse_ablation_recipe_name("r.without-fc2")->unit == "fc2");
  CHECK(parse_ablation_recipe_name("bitnet-b1.58.only-block12")->base == "bitnet-b1.58");
  CHECK(parse_ablation_recipe_name("x.without-head")->unit == "head");
  CHECK_FALSE(parse_ablation_recipe_name("mxfp4-rne"));
  CHECK_FALSE(parse_ablation_recipe_name("r.only-fwd_z"));
  CHECK_FALSE(parse_ablation_recipe_name(".only-fwd_x"));
}
