// The JSON input policy (io/json_input.hpp, docs/input-policy.md): depth, size and
// duplicate keys are refused with one line naming the origin; everything else parses as
// nlohmann-json would.
#include <catch2/catch.hpp>

#include <string>

#include "lpx/io/json_input.hpp"

using lpx::io::JsonError;
using lpx::io::JsonLimits;
using lpx::io::parse_json;

namespace {
std::string nested(int depth) { return std::string(static_cast<size_t>(depth), '[') + std::string(static_cast<size_t>(depth), ']'); }
std::string message(const std::string& text, JsonLimits limits = {}) {
  try {
    parse_json(text, "spec.json", limits);
  } catch (const JsonError& e) {
    return e.what();
  }
  return "parsed";
}
}  // namespace

TEST_CASE("json input: valid documents parse as they are") {
  const auto j = parse_json(R"({"a": [1, 2, {"b": null}], "c": "x"})", "t");
  CHECK(j["a"][2].contains("b"));
  CHECK(parse_json<nlohmann::ordered_json>(R"({"z": 1, "a": 2})", "t").begin().key() == "z");
  CHECK(message(nested(64)) == "parsed");  // the limit itself is allowed
  // the same key in two different objects is fine
  CHECK(message(R"({"a": {"k": 1}, "b": {"k": 2}})") == "parsed");
}

TEST_CASE("json input: too deep, too large, duplicate keys, not JSON") {
  CHECK(message(nested(65)) == "spec.json: JSON nested deeper than 64 levels");
  // 30000 levels: refused at once, no stack overflow, no 2 GB
  CHECK(message(nested(30000)) == "spec.json: JSON nested deeper than 64 levels");
  CHECK(message(R"({"x": {"a": 1, "a": 2}})") == "spec.json: duplicate key \"a\" in a JSON object");
  CHECK(message("{\"a\\n\": 1, \"a\\n\": 2}") == "spec.json: duplicate key \"a \" in a JSON object");
  CHECK(message(R"({"a": 1})", JsonLimits{4, 64}) == "spec.json: JSON of 8 bytes (at most 4)");
  const std::string bad = message("{\"a\": \n");
  CHECK(bad.rfind("spec.json: not valid JSON: ", 0) == 0);
  CHECK(bad.find('\n') == std::string::npos);
}
