// User-defined element formats (docs/formats.md#format-descriptor-files): a descriptor
// (sign, exponent and mantissa widths, bias, specials kind) becomes an ElementFormat with
// its own name, and once registered format_by_name finds it like a named format, so it
// goes wherever a format name goes (casts, block specs, recipes, info, table). The
// descriptor's fields are those of ElementFormat: a user format is a row of data like
// every named one, run by the same codec.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "lpx/formats/element_format.hpp"

namespace lpx {

struct FormatDescriptor {
  std::string name;
  bool is_signed = true;
  int exponent_bits = 0;
  int mantissa_bits = 0;
  std::optional<int> bias;  // default 2^(E-1) - 1 (+1 with fnuz), as the eXmY grammar
  // ieee | fn | fnuz | none | p3109e | p3109f. Unset: "none", or with code lists below,
  // the kind those lists describe.
  std::optional<std::string> specials;
  bool subnormals = true;
  // Codes listed one by one (both signs of a signed format). Given, they must be exactly
  // the NaN, Inf and reserved codes of one specials kind with reserved_top reserved
  // magnitudes (element_format.hpp): the codec runs every such layout, and no other.
  std::optional<std::vector<uint32_t>> nan_codes, inf_codes, reserved_codes;
};

// Validates and builds the format. std::invalid_argument (one line naming the format)
// for a bad name, widths (1 <= E <= 8, 0 <= M <= 15, at most 16 bits), specials kind,
// a sign-needing kind without a sign, values outside float32's range, or code lists that
// overlap, leave the range, list a code the kind makes finite, or fit no layout.
ElementFormat make_described_format(const FormatDescriptor& d);

// Adds f under its name for format_by_name. std::invalid_argument when the name is a
// named format, an alias, a generic or P3109 name, or already registered.
void register_format(const ElementFormat& f);

}  // namespace lpx
