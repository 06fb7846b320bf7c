// Format descriptor files (docs/formats.md#format-descriptor-files): the JSON form of
// lpx::FormatDescriptor, read the same way by `lpx --format-file` and by Python's
// lpx.register_format, so both accept and refuse exactly the same documents.
#pragma once

#include <string>
#include <string_view>

#include "lpx/formats/element_format.hpp"

namespace lpx::io {

// Parses `text` (a JSON object under the JSON input policy) and builds the format with
// make_described_format; nothing is registered. std::invalid_argument with one line,
// prefixed by `origin`, for text that is not JSON, unknown or duplicate keys, wrong types,
// or a format make_described_format refuses.
ElementFormat format_from_descriptor_json(std::string_view text, const std::string& origin);

}  // namespace lpx::io
