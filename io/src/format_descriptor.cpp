#include "lpx/io/format_descriptor.hpp"

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "lpx/formats/format_registry.hpp"
#include "lpx/io/json_input.hpp"
#include "lpx/io/tensor_file.hpp"

namespace lpx::io {

ElementFormat format_from_descriptor_json(std::string_view text, const std::string& origin) {
  // A descriptor is a few lines; 64 KiB holds every code of a 12-bit format listed.
  const nlohmann::ordered_json j = parse_json<nlohmann::ordered_json>(text, origin, JsonLimits{size_t{1} << 16, 8});
  const auto fail = [&](const std::string& why) {
    throw std::invalid_argument(fmt::format("{}: {}", origin, why));
  };
  if (!j.is_object()) fail("a format descriptor is a JSON object");
  FormatDescriptor d;
  for (const auto& item : j.items()) {
    // named, not a structured binding: clang 14 (the fuzz build) cannot capture those
    const std::string& key = item.key();
    const nlohmann::ordered_json& v = item.value();
    const auto want_int = [&]() {
      if (!v.is_number_integer()) fail(fmt::format("\"{}\" must be an integer", key));
      const auto x = v.get<int64_t>();
      if (x < -100000 || x > 100000) fail(fmt::format("\"{}\" is out of range", key));
      return static_cast<int>(x);
    };
    // A code list: integers, or strings "0x7F" for the hexadecimal a format's table shows.
    const auto want_codes = [&]() {
      if (!v.is_array()) fail(fmt::format("\"{}\" must be a list of codes", key));
      std::vector<uint32_t> codes;
      for (const auto& c : v) {
        int64_t x = -1;
        if (c.is_number_integer()) {
          x = c.get<int64_t>();
        } else if (c.is_string()) {
          const std::string t = c.get<std::string>();
          size_t used = 0;
          if (t.size() > 2 && t.size() <= 6 && t[0] == '0' && (t[1] == 'x' || t[1] == 'X')) {
            try {
              x = std::stoll(t.substr(2), &used, 16);
            } catch (const std::exception&) {
              x = -1;
            }
            if (used != t.size() - 2) x = -1;
          }
          if (x < 0) fail(fmt::format("\"{}\" holds \"{}\", not a code (an integer or \"0x..\")", key, printable(t)));
        } else {
          fail(fmt::format("\"{}\" must hold integers or \"0x..\" strings", key));
        }
        if (x < 0 || x > 0xFFFF) fail(fmt::format("\"{}\" holds {}, outside 0..0xFFFF", key, x));
        codes.push_back(static_cast<uint32_t>(x));
      }
      return codes;
    };
    if (key == "name") {
      if (!v.is_string()) fail("\"name\" must be a string");
      d.name = v.get<std::string>();
    } else if (key == "signed") {
      if (!v.is_boolean()) fail("\"signed\" must be true or false");
      d.is_signed = v.get<bool>();
    } else if (key == "exponent_bits") {
      d.exponent_bits = want_int();
    } else if (key == "mantissa_bits") {
      d.mantissa_bits = want_int();
    } else if (key == "bias") {
      d.bias = want_int();
    } else if (key == "specials") {
      if (!v.is_string()) fail("\"specials\" must be a string");
      d.specials = v.get<std::string>();
    } else if (key == "subnormals") {
      if (!v.is_boolean()) fail("\"subnormals\" must be true or false");
      d.subnormals = v.get<bool>();
    } else if (key == "nan_codes") {
      d.nan_codes = want_codes();
    } else if (key == "inf_codes") {
      d.inf_codes = want_codes();
    } else if (key == "reserved_codes") {
      d.reserved_codes = want_codes();
    } else if (key != "notes") {
      fail(fmt::format("unknown key \"{}\" (allowed: name, signed, exponent_bits, mantissa_bits, "
                       "bias, specials, subnormals, nan_codes, inf_codes, reserved_codes, notes)",
                       printable(key)));
    }
  }
  for (const char* required : {"name", "exponent_bits", "mantissa_bits"})
    if (!j.contains(required)) fail(fmt::format("missing \"{}\"", required));
  try {
    return make_described_format(d);
  } catch (const std::invalid_argument& e) {
    fail(e.what());
  }
  return {};
}

}  // namespace lpx::io
