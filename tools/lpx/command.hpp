// The `lpx` command line: each subcommand lives in its own cmd_*.cpp and registers
// itself here at static-initialisation time, so adding one touches no shared file.
//
// Error contract (docs/architecture.md#contracts-every-command-keeps): one line on stderr and a non-zero exit, never a crash or a
// half-written file. Usage errors (bad options, unknown format names, conflicting
// options) exit 2 via UsageError/CLI11; bad data (unreadable or malformed files,
// sizes that do not fit) exits 1 via lpx::io::DataError or any other std::exception.
#pragma once

#include <functional>
#include <stdexcept>
#include <string>

#include <CLI/CLI.hpp>

namespace lpx::cli {

struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Adds the subcommand to `app` and sets its callback.
using CommandSetup = std::function<void(CLI::App& app)>;

// `order` sorts the subcommands in --help; returns true so it can initialise a static.
bool register_command(int order, CommandSetup setup);

// The whole app: every registered subcommand with its options, in `order` (app.cpp).
// main() parses argv with it; the CLI fuzz targets (tests/fuzz) build it too.
void build_app(CLI::App& app);

}  // namespace lpx::cli
