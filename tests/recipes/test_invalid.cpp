// Invalid recipe files: each bad key or value gives a std::invalid_argument naming the
// origin, the JSON path of the key and the allowed values, on one line.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "lpx/recipes/recipe.hpp"

using namespace lpx;
using json = nlohmann::json;

namespace {

// A valid recipe (nvfp4's canonical JSON) to break one key at a time.
json base() { return json::parse(recipe_by_name("nvfp4").to_json()); }

std::string error_of(const json& j) {
  try {
    Recipe::from_json(j.dump(), "bad.json");
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "(no error)";
}

struct Case {
  const char* what;
  json recipe;
  std::vector<std::string> must_contain;
};

}  // namespace

TEST_CASE("invalid recipes name the key path and the allowed values", "[recipes]") {
  std::vector<Case> cases;
  auto add = [&](const char* what, auto edit, std::vector<std::string> needles) {
    json j = base();
    edit(j);
    cases.push_back(Case{what, j, std::move(needles)});
  };
  add("bad rounding", [](json& j) { j["roles"]["dgrad_dy"]["round"] = "stochastic"; },
      {"roles.dgrad_dy.round", "'stochastic'", "rne, rna, rtz, rup, rdn, sr"});
  add("rounding not a string", [](json& j) { j["roles"]["dgrad_dy"]["round"] = 3; },
      {"roles.dgrad_dy.round", "rne, rna, rtz, rup, rdn, sr"});
  add("bad format", [](json& j) { j["roles"]["fwd_w"]["format"] = "nvfp5"; },
      {"roles.fwd_w.format", "nvfp5", "mxfp4", "fp32, bf16, ternary_absmean"});
  add("format missing", [](json& j) { j["roles"]["fwd_w"].erase("format"); },
      {"roles.fwd_w.format", "missing", "fp32, bf16"});
  add("unknown role key", [](json& j) { j["roles"]["wgrad_x"]["rounding"] = "sr"; },
      {"roles.wgrad_x.rounding", "unknown key", "format, scale_rule, round, sr_bits"});
  add("unknown role", [](json& j) { j["roles"]["bwd_x"] = j["roles"]["fwd_x"]; },
      {"roles.bwd_x", "fwd_x, fwd_w, dgrad_dy, dgrad_w, wgrad_x, wgrad_dy"});
  add("missing role", [](json& j) { j["roles"].erase("wgrad_dy"); },
      {"roles.wgrad_dy", "missing", "fwd_x, fwd_w, dgrad_dy"});
  add("unknown top-level key", [](json& j) { j["master_weight"] = "fp32"; },
      {"master_weight", "unknown key", "master_weights, optimizer_state, accumulation"});
  add("sr_bits out of range", [](json& j) { j["roles"]["dgrad_dy"]["sr_bits"] = 40; },
      {"roles.dgrad_dy.sr_bits", "1..32"});
  add("headroom not bool", [](json& j) { j["roles"]["dgrad_dy"]["headroom_3_4"] = "yes"; },
      {"roles.dgrad_dy.headroom_3_4", "true or false"});
  add("headroom on bf16", [](json& j) {
        j["roles"]["fwd_x"]["format"] = "bf16";
        j["roles"]["fwd_x"]["headroom_3_4"] = true;
      },
      {"roles.fwd_x.headroom_3_4", "block formats"});
  add("scale rule on e4m3 scales", [](json& j) { j["roles"]["fwd_x"]["scale_rule"] = "rceil"; },
      {"roles.fwd_x.scale_rule", "e8m0, pow2"});
  add("bad scale rule", [](json& j) {
        j["roles"]["fwd_x"]["format"] = "mxfp4";
        j["roles"]["fwd_x"]["scale_rule"] = "round";
      },
      {"roles.fwd_x.scale_rule", "floor, rceil, ceil, even"});
  add("bad transform size", [](json& j) { j["roles"]["wgrad_x"]["transform"]["size"] = 24; },
      {"roles.wgrad_x.transform.size", "16, 32, 64, 128"});
  add("bad transform signs", [](json& j) { j["roles"]["wgrad_x"]["transform"]["signs"] = "random"; },
      {"roles.wgrad_x.transform.signs", "fixed, per_call"});
  add("bad transform kind", [](json& j) { j["roles"]["wgrad_x"]["transform"]["kind"] = "dct"; },
      {"roles.wgrad_x.transform.kind", "rht"});
  add("bad transform string", [](json& j) { j["roles"]["wgrad_x"]["transform"] = "hadamard"; },
      {"roles.wgrad_x.transform", "\"none\"", "per_call"});
  add("transform on one operand only", [](json& j) { j["roles"]["wgrad_dy"]["transform"] = "none"; },
      {"roles.wgrad_dy.transform", "roles.wgrad_x.transform", "wgrad"});
  add("amax history on a block format", [](json& j) { j["roles"]["fwd_x"]["amax_history"] = {{"length", 16}}; },
      {"roles.fwd_x.amax_history", "per-tensor"});
  add("bad amax reduction", [](json& j) {
        j["roles"]["fwd_x"]["format"] = "e4m3:tensor:fp32";
        j["roles"]["fwd_x"]["amax_history"] = {{"length", 16}, {"reduction", "mean"}};
      },
      {"roles.fwd_x.amax_history.reduction", "max, most_recent"});
  add("ternary with SR", [](json& j) {
        j["roles"]["fwd_w"]["format"] = "ternary_absmean";
        j["roles"]["fwd_w"]["round"] = "sr";
      },
      {"roles.fwd_w.round", "allowed: rne"});
  add("bad master weights", [](json& j) { j["master_weights"] = "fp16"; }, {"master_weights", "fp32, bf16_sr"});
  add("bad optimizer state", [](json& j) { j["optimizer_state"] = "int8"; },
      {"optimizer_state", "fp32, bf16, fp8_e4m3"});
  add("bad accumulation", [](json& j) { j["accumulation"] = "fp16"; }, {"accumulation", "mantissa_bits", "promote_every"});
  add("accumulation bits", [](json& j) { j["accumulation"] = {{"mantissa_bits", 30}, {"promote_every", 128}}; },
      {"accumulation.mantissa_bits", "1..23"});
  add("accumulation promote", [](json& j) { j["accumulation"] = {{"mantissa_bits", 14}}; },
      {"accumulation.promote_every", "missing"});
  add("bad accumulation scales", [](json& j) {
        j["accumulation"] = {{"mantissa_bits", 14}, {"promote_every", 128}, {"scales", "late"}};
      },
      {"accumulation.scales", "operands, at_promotion"});
  add("scales at promotion with blocks of 16", [](json& j) {
        j["accumulation"] = {{"mantissa_bits", 14}, {"promote_every", 128}, {"scales", "at_promotion"}};
      },
      {"roles.fwd_x.format", "blocks of 16", "promote_every (128)"});
  add("scales at promotion with two-level scales", [](json& j) {
        j["accumulation"] = {{"mantissa_bits", 14}, {"promote_every", 16}, {"scales", "at_promotion"}};
      },
      {"roles.fwd_x.format", "two-level"});
  add("scales at promotion with the 3/4 headroom", [](json& j) {
        for (const char* r : {"fwd_x", "fwd_w", "dgrad_dy", "dgrad_w", "wgrad_x", "wgrad_dy"})
          j["roles"][r]["format"] = "e4m3:b128:fp32";
        j["roles"]["fwd_x"]["headroom_3_4"] = true;
        j["accumulation"] = {{"mantissa_bits", 14}, {"promote_every", 128}, {"scales", "at_promotion"}};
      },
      {"roles.fwd_x.headroom_3_4", "at_promotion"});
  add("scales at promotion with 23 bits", [](json& j) {
        j["accumulation"] = {{"mantissa_bits", 23}, {"promote_every", 128}, {"scales", "at_promotion"}};
      },
      {"accumulation.mantissa_bits", "1..22"});
  add("bad high-precision format", [](json& j) { j["high_precision"]["format"] = "fp16"; },
      {"high_precision.format", "bf16, fp32"});
  add("negative first blocks", [](json& j) { j["high_precision"]["first_blocks"] = -1; },
      {"high_precision.first_blocks", "out of range", "0.."});
  add("high-precision unknown key", [](json& j) { j["high_precision"]["norms"] = true; },
      {"high_precision.norms", "first_blocks, last_blocks, first_fraction, last_fraction, blocks, layers, embeddings, head, attention, format"});
  add("layers not a list", [](json& j) { j["high_precision"]["layers"] = 3; },
      {"high_precision.layers", "expected a list of layer names"});
  add("layer name with capitals", [](json& j) { j["high_precision"]["layers"] = {"mlp.fc", "H0.mlp.fc"}; },
      {"high_precision.layers[1]", "a layer name is 1-64 of a-z"});
  add("layer name not a string", [](json& j) { j["high_precision"]["layers"] = {1}; },
      {"high_precision.layers[0]", "expected a string"});
  add("fraction above 1", [](json& j) { j["high_precision"]["last_fraction"] = 1.5; },
      {"high_precision.last_fraction", "outside [0, 1]"});
  add("negative fraction", [](json& j) { j["high_precision"]["first_fraction"] = -0.1; },
      {"high_precision.first_fraction", "outside [0, 1]"});
  add("fraction as text", [](json& j) { j["high_precision"]["first_fraction"] = "10%"; },
      {"high_precision.first_fraction", "expected a number in [0, 1]"});
  add("fraction and count", [](json& j) { j["high_precision"]["first_fraction"] = 0.1; j["high_precision"]["first_blocks"] = 2; },
      {"high_precision.first_fraction", "not both"});
  add("blocks not a list", [](json& j) { j["high_precision"]["blocks"] = 3; },
      {"high_precision.blocks", "list of block indices"});
  add("negative block", [](json& j) { j["high_precision"]["blocks"] = {0, -2}; },
      {"high_precision.blocks[1]", "out of range"});
  add("missing source", [](json& j) { j.erase("source"); }, {"source", "missing"});
  add("bad name", [](json& j) { j["name"] = "My Recipe"; }, {"name", "a-z"});

  for (const Case& c : cases) {
    INFO(c.what);
    const std::string e = error_of(c.recipe);
    INFO(e);
    CHECK(e.rfind("bad.json: ", 0) == 0);
    CHECK(e.find('\n') == std::string::npos);
    for (const auto& needle : c.must_contain) CHECK(e.find(needle) != std::string::npos);
  }
}

TEST_CASE("invalid recipes: not JSON, not an object", "[recipes]") {
  CHECK_THROWS_WITH(Recipe::from_json("{\"name\": ", "x.json"), Catch::StartsWith("x.json: not valid JSON"));
  CHECK_THROWS_WITH(Recipe::from_json("[1, 2]", "x.json"), Catch::Contains("expected an object"));
  CHECK_THROWS_AS(Recipe::from_json("{}", "x.json"), std::invalid_argument);
}

TEST_CASE("defaults: a minimal recipe", "[recipes]") {
  const std::string text = R"({
    "name": "mini", "source": "test",
    "roles": {"fwd_x": {"format": "mxfp4"}, "fwd_w": {"format": "e2m1:b32:e8m0:rceil"},
              "dgrad_dy": {"format": "bf16", "round": "sr", "sr_bits": 8},
              "dgrad_w": {"format": "fp32"}, "wgrad_x": {"format": "fp8_tensor"},
              "wgrad_dy": {"format": "mxfp4", "scale_rule": "even"}}})";
  const Recipe r = Recipe::from_json(text, "mini.json");
  CHECK(r.role(GemmRole::fwd_x).round == Rounding::rne);
  CHECK(r.role(GemmRole::fwd_x).sr_bits == 32);
  CHECK(r.role(GemmRole::fwd_w).block.rule == ScaleRule::rceil);
  CHECK(r.role(GemmRole::dgrad_dy).sr_bits == 8);
  CHECK(r.role(GemmRole::wgrad_dy).block.rule == ScaleRule::even);
  CHECK(r.role(GemmRole::dgrad_w).is_identity());
  CHECK(!r.accumulation.limited);
  CHECK(r.master_weights == MasterWeights::fp32);
  CHECK(r.high_precision.format == RoleSpec::Kind::bf16);
  CHECK(!r.high_precision.embeddings);
  // Canonical form round-trips, with the rule override kept.
  const Recipe back = Recipe::from_json(r.to_json(), "back");
  CHECK(back.to_json() == r.to_json());
  CHECK(back.role(GemmRole::wgrad_dy).block.rule == ScaleRule::even);
}

TEST_CASE("invalid recipes: duplicate keys and deep nesting are refused in one line", "[recipes]") {
  CHECK_THROWS_WITH(Recipe::from_json(R"({"name": "a", "name": "b"})", "x.json"),
                    "x.json: duplicate key \"name\" in a JSON object");
  const std::string deep = std::string(5000, '[') + std::string(5000, ']');
  CHECK_THROWS_WITH(Recipe::from_json("{\"notes\": " + deep + "}", "x.json"),
                    "x.json: JSON nested deeper than 64 levels");
}
