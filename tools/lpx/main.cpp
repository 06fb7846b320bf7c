// Entry point of `lpx`: builds the CLI11 app from the registered subcommands and maps
// every failure to one stderr line and an exit code (2 usage, 1 data).
#include <csignal>
#include <cstdio>

#include "cli_util.hpp"
#include "command.hpp"

int main(int argc, char** argv) {
  using namespace lpx::cli;
  CLI::App app{
      "lpx: bit-exact emulation of low-precision number formats (FP8, FP6, FP4, MX, NVFP4,\n"
      "sub-4-bit) and stochastic rounding. `lpx COMMAND --help` shows each command's use."};
  build_app(app);
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
