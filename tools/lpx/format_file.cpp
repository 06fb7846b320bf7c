// `lpx --format-file F.json COMMAND ...`: user-defined element formats from descriptor
// files (docs/formats.md#format-descriptor-files), registered before the command runs so
// that their names go wherever a format name goes.
#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "json_file.hpp"
#include "lpx/io/format_descriptor.hpp"
#include "lpx/io/tensor_file.hpp"
#include "lpx/formats/format_registry.hpp"

namespace lpx::cli {

void load_format_file(const std::string& path) {
  const std::string where = path == "-" ? "<stdin>" : io::printable(path);
  register_format(io::format_from_descriptor_json(read_text_file(path, size_t{1} << 16), where));
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
