// User-defined element formats (docs/formats.md#format-descriptor-files): a descriptor
// (sign, exponent and mantissa widths, bias, specials kind) becomes an ElementFormat with
// its own name, and once registered format_by_name finds it like a named format, so it
// goes wherever a format name goes (casts, block specs, recipes, info, table). The
// descriptor's fields are those of ElementFormat: a user format is a row of data like
// every named one, run by the same codec.
#pragma once

#include <optional>
#include <string>

#include "lpx/formats/element_format.hpp"

namespace lpx {

struct FormatDescriptor {
  std::string name;
  bool is_signed = true;
  int exponent_bits = 0;
  int mantissa_bits = 0;
  std::optional<int> bias;        // default 2^(E-1) - 1 (+1 with fnuz), as the eXmY grammar
  std::string specials = "none";  // ieee | fn | fnuz | none | p3109e | p3109f
};

// Validates and builds the format. std::invalid_argument (one line naming the format)
// for a bad name, widths (1 <= E <= 8, 0 <= M <= 15, at most 16 bits), specials kind,
// a sign-needing kind without a sign, or values outside float32's range.
ElementFormat make_described_format(const FormatDescriptor& d);

// Adds f under its name for format_by_name. std::invalid_argument when the name is a
// named format, an alias, a generic or P3109 name, or already registered.
void register_format(const ElementFormat& f);

}  // namespace lpx
