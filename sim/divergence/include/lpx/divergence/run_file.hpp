// Reading the HDF5 run logs that `lpx train --out run.h5` writes (the layout is documented
// in sim/include/lpx/sim/run_log.hpp, format "lpx-run-1"), for the detectors and reports.
//
// Tolerant: only /metrics/step and /metrics/loss are required; every other dataset is
// optional and listed in RunFile::missing when absent, so a log from a run still in
// progress, or one whose statistics were switched off, still reads. Strict about what a
// file is: a file that is not HDF5, an HDF5 file without the `format` attribute, or a log
// of another format version is a LogError naming the file, e.g.
//   "a/run.h5: log written by an older lpx (format lpx-run-0); expected lpx-run-1".
//
// write_run_file() writes the same layout (without checkpoints) from arrays: synthetic
// sweeps for tests and the browser check of `lpx report`.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "lpx/divergence/detectors.hpp"

namespace lpx::div {

inline constexpr const char* kRunFormat = "lpx-run-1";

struct LogError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct RunFile {
  std::string path;
  std::string format = kRunFormat, lpx_version, model, recipe, recipe_json, config_json;
  int64_t seed = 0;
  Series series;  // /metrics and /quant (flushed_pct, saturated_pct), /metrics/adam_rms
  std::vector<int64_t> eval_step;
  std::vector<double> eval_loss, eval_accuracy;
  std::vector<float> amax, sqnr_db;  // (steps, L, R) like the series' statistics
  std::vector<std::string> missing;  // optional datasets absent from the file ("/eval/loss", ...)
};

// True when `path` starts with the HDF5 signature (a cheap test before reading).
bool is_hdf5_file(const std::string& path);

RunFile read_run_file(const std::string& path);                // throws LogError
void write_run_file(const std::string& path, const RunFile& run);  // atomic (temp + rename)

}  // namespace lpx::div
