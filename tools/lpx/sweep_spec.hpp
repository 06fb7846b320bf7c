// The sweep spec of `lpx sweep` (the format is described at the top of cmd_sweep.cpp):
// parsing, checking every field, and expanding the grid into runs. No process is started
// and nothing is written here, so a fuzz target can call parse_sweep_spec on any bytes.
//
// Input policy (docs/input-policy.md): the text goes through io::parse_json (at most
// 16 MiB, 64 levels deep, no duplicate keys); every field is type- and range-checked, and
// a bad value is a UsageError (one line, exit 2), never replaced by a default. Strings
// that become paths or `lpx train` arguments (recipe files, data, out, names) may not hold
// control characters (newline, tab, NUL, ...): they would split lines of the generated
// Slurm script and of every log. Recipe files and data paths become absolute, so the runs
// (and a Slurm job submitted from another folder) find them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace lpx::cli {

inline constexpr int kMaxSweepJobs = 1024;        // --jobs / "jobs": 1 .. this
inline constexpr size_t kMaxSweepRuns = 10000;    // runs of one sweep, references included
inline constexpr int64_t kMaxSweepSteps = int64_t{1} << 40;  // as `lpx train --steps`
inline constexpr size_t kMaxSweepPathBytes = 4096;  // recipe files, data, out (PATH_MAX)
inline constexpr size_t kMaxSweepNameBytes = 200;   // run names become folder names

// What the command line adds to (or overrides in) the spec. Zero / empty: not given.
struct SweepOverrides {
  std::string recipes;            // --recipes a,b: grid key "recipe"
  std::string model, reference;   // --model, --reference
  int seeds = 0;                  // --seeds N: seeds 0..N-1
  int64_t steps = 0;              // --steps
  std::vector<std::string> set;   // --set KEY=V1,V2,...: grid keys
  std::string default_name = "sweep";  // "name" when the spec has none
};

struct SweepRun {
  std::string name, recipe, reference_run;
  uint64_t seed = 0;
  bool reference = false;
  nlohmann::ordered_json set;     // every train option of the run (key -> value)
  std::vector<std::string> args;  // after the binary: train --seed S --key value ...
};

struct SweepSpec {
  nlohmann::ordered_json spec;  // as given, with the overrides applied and the name filled in
  std::string name;
  std::vector<SweepRun> runs;   // the references (per seed and baseline: the grid's non-recipe keys) first
  std::string out;              // the spec's "out" ("" when it has none)
  int jobs = 0;                 // the spec's "jobs" (0 when it has none)
  nlohmann::ordered_json slurm;  // the spec's "slurm" object, its types checked (null when none)
};

// Parses and checks a spec (`origin` names it in errors: the file's path) and expands its
// runs. Throws UsageError (one line) for anything it refuses.
SweepSpec parse_sweep_spec(std::string_view text, const std::string& origin, const SweepOverrides& cli = {});

// The checks parse_sweep_spec applies to strings that become paths or arguments: throws a
// UsageError naming `what` when `s` is empty, longer than `max_bytes` or holds a control
// character.
void check_sweep_text(const std::string& what, const std::string& s, size_t max_bytes = kMaxSweepPathBytes);

// `s` for an error message: control characters as \n, \t, \xNN, cut after 200 bytes.
std::string printable(std::string_view s);

}  // namespace lpx::cli
