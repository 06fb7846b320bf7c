// libFuzzer target: lpx::cli::parse_sweep_spec (tools/lpx/sweep_spec.hpp), the reader of
// `lpx sweep SPEC.json`, on the input as the spec's text, once alone and once with the
// command line's overrides. It parses, checks and expands the grid; it starts no process
// and writes nothing (it only asks whether a recipe .json file exists).
// A UsageError (one line) is the expected answer to a bad spec; anything else escaping is a
// finding, and so is an accepted spec that breaks the header's promises: at most
// kMaxSweepRuns runs, run names of at most kMaxSweepNameBytes bytes, and no control
// character in a name or in any argument of a run's `lpx train` command line.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "command.hpp"
#include "sweep_spec.hpp"

namespace {

bool has_control(const std::string& s) {
  for (char c : s)
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) return true;
  return false;
}

void check(const lpx::cli::SweepSpec& spec) {
  if (spec.runs.size() > lpx::cli::kMaxSweepRuns) __builtin_trap();
  for (const lpx::cli::SweepRun& run : spec.runs) {
    if (run.name.empty() || run.name.size() > lpx::cli::kMaxSweepNameBytes || has_control(run.name))
      __builtin_trap();
    for (const std::string& a : run.args)
      if (has_control(a)) __builtin_trap();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    check(lpx::cli::parse_sweep_spec(text, "fuzz.json"));
  } catch (const lpx::cli::UsageError&) {
  }
  lpx::cli::SweepOverrides cli;
  cli.recipes = "fp32,mxfp8";
  cli.seeds = 2;
  cli.steps = 3;
  cli.set = {"lr=1e-3,3e-3"};
  try {
    check(lpx::cli::parse_sweep_spec(text, "fuzz.json", cli));
  } catch (const lpx::cli::UsageError&) {
  }
  return 0;
}
