// A recipe whose backward operands are IEEE P3109 blocks with a stochastic variant
// (docs/formats.md#p3109, #stochastic-rounding-variants): the schema takes the names,
// the parsed roles carry them, and the canonical JSON round-trips.
#include <catch2/catch.hpp>

#include <string>

#include "lpx/recipes/recipe.hpp"

using namespace lpx;

namespace {
void replace_all(std::string& s, const std::string& from, const std::string& to) {
  for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size()))
    s.replace(at, from.size(), to);
}
}  // namespace

TEST_CASE("recipes take P3109 block elements and the SR variants") {
  std::string text = recipe_by_name("mxfp4-sr-rht").to_json();
  REQUIRE(text.find("\"format\": \"mxfp4\"") != std::string::npos);
  replace_all(text, "\"format\": \"mxfp4\"", "\"format\": \"p3109_k8p3se:b32:e8m0\"");
  replace_all(text, "\"round\": \"sr\"", "\"round\": \"sr-rne\"");
  const Recipe r = Recipe::from_json(text, "test");
  const RoleSpec& dy = r.role(GemmRole::dgrad_dy);
  REQUIRE(dy.kind == RoleSpec::Kind::block);
  CHECK(std::string(dy.block.element.name) == "p3109_k8p3se");
  CHECK(dy.round == Rounding::sr_rne);
  const std::string canonical = r.to_json();
  CHECK(canonical.find("sr-rne") != std::string::npos);
  CHECK(canonical.find("p3109_k8p3se") != std::string::npos);
  CHECK(Recipe::from_json(canonical, "round trip").to_json() == canonical);
  // An unknown P3109 parameter is refused with the recipe's key in the message.
  std::string bad = text;
  replace_all(bad, "p3109_k8p3se:b32", "p3109_k8p8se:b32");
  CHECK_THROWS_WITH(Recipe::from_json(bad, "test"), Catch::Contains("1 <= P < K"));
}
