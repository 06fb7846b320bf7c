// The registry of subcommands and the app built from it. Kept apart from main() so the
// CLI fuzz targets (tests/fuzz) link every subcommand with libFuzzer's main instead.
#include <algorithm>
#include <utility>
#include <vector>

#include <fmt/format.h>

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
  auto& commands = registry();
  std::stable_sort(commands.begin(), commands.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  for (auto& [order, setup] : commands) setup(app);
}

}  // namespace lpx::cli
