// Entry point of `lpx`: builds the CLI11 app from the registered subcommands and maps
// every failure to one stderr line and an exit code (2 usage, 1 data).
#include <algorithm>
#include <csignal>
#include <cstdio>
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

}  // namespace lpx::cli

int main(int argc, char** argv) {
  using namespace lpx::cli;
  CLI::App app{
      "lpx: bit-exact emulation of low-precision number formats (FP8, FP6, FP4, MX, NVFP4,\n"
      "sub-4-bit) and stochastic rounding. `lpx COMMAND --help` shows each command's use."};
  app.require_subcommand(1);
  app.set_version_flag("--version", fmt::format("lpx {}", lpx::kVersion));
  // User-defined formats, registered before the command runs (option callbacks precede
  // the subcommand's): `lpx --format-file my.json cast --to my_format ...`.
  app.add_option("--format-file", "Format descriptor JSON (docs/formats.md); repeatable")
      ->each([](const std::string& path) { load_format_file(path); })
      ->type_name("FILE");
  auto& commands = registry();
  std::stable_sort(commands.begin(), commands.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  for (auto& [order, setup] : commands) setup(app);
  // A write past the file-size limit (ulimit -f) then fails with EFBIG, which the writers
  // report and clean up after, instead of SIGXFSZ killing lpx beside a half-written file.
  std::signal(SIGXFSZ, SIG_IGN);
  try {
    app.parse(argc, argv);
    finish_stdout();  // output that never reached stdout is an error, not exit 0
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "lpx: %s\n", e.what());
    return 2;
  } catch (const UsageError& e) {
    std::fprintf(stderr, "lpx: %s\n", e.what());
    return 2;
  } catch (const std::invalid_argument& e) {
    std::fprintf(stderr, "lpx: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "lpx: %s\n", e.what());
    return 1;
  }
  return 0;
}
