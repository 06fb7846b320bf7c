// `lpx --format-file F.json COMMAND ...`: user-defined element formats from descriptor
// files (docs/formats.md#format-descriptor-files), registered before the command runs so
// that their names go wherever a format name goes.
#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "json_file.hpp"
#include "lpx/io/tensor_file.hpp"
#include "lpx/formats/format_registry.hpp"

namespace lpx::cli {

void load_format_file(const std::string& path) {
  const nlohmann::ordered_json j = read_json_file(path, io::JsonLimits{size_t{1} << 16, 8});
  const std::string where = path == "-" ? "<stdin>" : io::printable(path);
  const auto fail = [&](const std::string& why) {
    throw std::invalid_argument(fmt::format("{}: {}", where, why));
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
    } else if (key != "notes") {
      fail(fmt::format("unknown key \"{}\" (allowed: name, signed, exponent_bits, "
                       "mantissa_bits, bias, specials, notes)", io::printable(key)));
    }
  }
  for (const char* required : {"name", "exponent_bits", "mantissa_bits"})
    if (!j.contains(required)) fail(fmt::format("missing \"{}\"", required));
  try {
    register_format(make_described_format(d));
  } catch (const std::invalid_argument& e) {
    fail(e.what());
  }
}

void load_format_dir(const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::is_directory(dir, ec))
    throw std::invalid_argument(fmt::format("--format-dir {}: not a folder", io::printable(dir)));
  std::vector<fs::path> files;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec))
    if (it->path().extension() == ".json" && it->is_regular_file(ec)) files.push_back(it->path());
  if (ec) throw std::invalid_argument(fmt::format("--format-dir {}: {}", io::printable(dir), ec.message()));
  if (files.empty())
    throw std::invalid_argument(fmt::format("--format-dir {}: no format descriptor (*.json) in the folder", io::printable(dir)));
  std::sort(files.begin(), files.end());  // name order: the same registry on every machine
  for (const auto& f : files) load_format_file(f.string());
}

}  // namespace lpx::cli
