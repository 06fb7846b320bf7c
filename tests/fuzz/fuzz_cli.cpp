// libFuzzer target: the option parsing of the `lpx` command line. The input is argv after
// "lpx", split on NUL bytes ("cast\0--to\0e4m3\0x.f32\0y.bin"). The app is the one `lpx`
// runs (tools/lpx/app.cpp: build_app, every registered subcommand with its options and
// validators). The main app's parse-complete callback, which CLI11 calls after every
// option is converted and checked and before any subcommand's callback, ends the parse with
// an exception, so a command line that parses runs nothing: no file is read or written, no
// training starts. (Removing the subcommands' callbacks instead would free the option
// storage their lambdas own.)
//
// Parsing may end in what main() reports as a usage error (exit 2): CLI::ParseError
// (--help and --version included), lpx::cli::UsageError or std::invalid_argument thrown by
// an option's own parser. Anything else escaping (another exception, which main() would
// report as a data error, exit 1; an ASan/UBSan report; a timeout) is a finding.
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "command.hpp"

namespace {
struct Parsed {};  // thrown where the subcommand's callback would run
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::vector<std::string> args{"lpx"};
  std::string current;
  for (size_t i = 0; i < size; ++i) {
    if (data[i] == 0) {
      args.push_back(current);
      current.clear();
    } else {
      current.push_back(static_cast<char>(data[i]));
    }
  }
  if (size > 0) args.push_back(current);
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);

  CLI::App app{"lpx (fuzz)"};
  lpx::cli::build_app(app);
  app.parse_complete_callback([] { throw Parsed{}; });
  try {
    app.parse(static_cast<int>(args.size()), argv.data());
    __builtin_trap();  // the callback above always throws
  } catch (const Parsed&) {
  } catch (const CLI::CallForHelp&) {
    (void)app.help();  // what `lpx ... --help` prints, formatted but not printed
  } catch (const CLI::ParseError&) {
  } catch (const lpx::cli::UsageError&) {
  } catch (const std::invalid_argument&) {
  }
  return 0;
}
