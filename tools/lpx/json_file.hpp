// Reading a JSON document from a file under the JSON input policy (io/json_input.hpp,
// docs/input-policy.md): the file is read up to the size limit and no further (a larger
// one is refused without being read whole), then parsed by io::parse_json (depth limit,
// no duplicate keys). Errors are io::JsonError (an invalid_argument: exit 2) with one line
// naming the file; a caller reading a data file rethrows them as a data error (exit 1).
#pragma once

#include <cstddef>
#include <string>

#include <nlohmann/json.hpp>

#include "lpx/io/json_input.hpp"

namespace lpx::cli {

// The bytes of `path` ("-": standard input); io::JsonError when it cannot be read or holds
// more than `max_bytes`.
std::string read_text_file(const std::string& path, size_t max_bytes);

// read_text_file + io::parse_json, errors prefixed by the path.
nlohmann::ordered_json read_json_file(const std::string& path, const io::JsonLimits& limits = {});

}  // namespace lpx::cli
