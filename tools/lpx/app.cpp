// The registry of subcommands and the app built from it. Kept apart from main() so the
// CLI fuzz targets (tests/fuzz) link every subcommand with libFuzzer's main instead.
#include <algorithm>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "cli_util.hpp"
#include "command.hpp"
#include "lpx/version.hpp"

namespace lpx::cli {

namespace {
std::vector<std::pair<int, CommandSetup>>& registry() {
  static std::vector<std::pair<int, CommandSetup>> commands;
  return commands;
}
}  // namespace

bool register_command(int order, CommandSetup setup) {
  registry().emplace_back(order, std::move(setup));
  return true;
}

void build_app(CLI::App& app) {
  app.require_subcommand(1);
  app.set_version_flag("--version", fmt::format("lpx {}", lpx::kVersion));
  // User-defined formats, registered before the command runs (option callbacks precede
  // the subcommand's): `lpx --format-file my.json cast --to my_format ...`.
  app.add_option("--format-file", "Format descriptor JSON (docs/formats.md); repeatable")
      ->each([](const std::string& path) { load_format_file(path); })
      ->type_name("FILE");
  app.add_option("--format-dir", "A folder of format descriptors: every *.json in it, in name order; repeatable")
      ->each([](const std::string& dir) { load_format_dir(dir); })
      ->type_name("DIR");
  auto& commands = registry();
  std::stable_sort(commands.begin(), commands.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  for (auto& [order, setup] : commands) setup(app);
}

}  // namespace lpx::cli
