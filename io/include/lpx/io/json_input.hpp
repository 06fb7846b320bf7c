// JSON inputs under one policy (docs/input-policy.md): at most JsonLimits::max_bytes of
// text, nested at most JsonLimits::max_depth levels, and no key twice in one object.
// nlohmann-json on its own accepts any depth (and the recursive walks that follow, its own
// dump() included, overflow the stack on a document nested 30000 levels deep) and keeps the
// last of two duplicate keys without a word. Every JSON document lpx reads from a user or
// from a file goes through parse_json: recipes, detector thresholds, sweep specs, the
// configs in run logs.
#pragma once

#include <cstddef>
#include <stdexcept>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

#include <nlohmann/json.hpp>

namespace lpx::io {

struct JsonLimits {
  size_t max_bytes = size_t{16} << 20;
  int max_depth = 64;  // objects and arrays inside each other
};

// A document that breaks the policy or is not JSON: one line, prefixed by the origin.
// An invalid_argument, as a bad recipe or threshold file has always been (exit 2);
// callers reading a data file rethrow it as a data error.
struct JsonError : std::invalid_argument {
  using std::invalid_argument::invalid_argument;
};

// Json is nlohmann::json or nlohmann::ordered_json.
template <class Json = nlohmann::json>
Json parse_json(std::string_view text, const std::string& origin, const JsonLimits& limits = {}) {
  if (text.size() > limits.max_bytes)
    throw JsonError(origin + ": JSON of " + std::to_string(text.size()) + " bytes (at most " +
                    std::to_string(limits.max_bytes) + ")");
  std::vector<std::unordered_set<std::string>> keys;  // of each object being parsed
  const auto one_line = [](std::string t) {
    for (char& c : t)
      if (static_cast<unsigned char>(c) < 0x20) c = ' ';
    return t;
  };
  const auto check = [&](int depth, nlohmann::json::parse_event_t event, Json& parsed) {
    using E = nlohmann::json::parse_event_t;
    if ((event == E::object_start || event == E::array_start) && depth >= limits.max_depth)
      throw JsonError(origin + ": JSON nested deeper than " + std::to_string(limits.max_depth) + " levels");
    if (event == E::object_start) keys.emplace_back();
    if (event == E::object_end && !keys.empty()) keys.pop_back();
    if (event == E::key && !keys.empty() && !keys.back().insert(parsed.template get<std::string>()).second)
      throw JsonError(origin + ": duplicate key \"" + one_line(parsed.template get<std::string>()) +
                      "\" in a JSON object");
    return true;
  };
  try {
    return Json::parse(text.begin(), text.end(), check);
  } catch (const nlohmann::json::exception& e) {
    throw JsonError(origin + ": not valid JSON: " + one_line(e.what()));
  }
}

}  // namespace lpx::io
