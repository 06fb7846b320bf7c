// The run log: one writer and one reader of the HDF5 layout in schema.hpp, for the
// trainer (sim/), the detectors and reports (divergence/, `lpx report`), and anything that
// reads a run (docs/runlog.md).
//
// Writing: RunLog appends as a run goes (a step, an evaluation, a checkpoint) and can be
// reopened to resume; write_run() writes a whole run held in memory (synthetic runs for
// tests), atomically. Both put every dataset where schema.hpp says.
//
// Reading: read_run() is strict about what a file is and tolerant about what it holds. A
// missing file, a file that is not HDF5, an HDF5 file without the format attribute, or a
// log of another format version is a LogError with one line naming the file, e.g.
//   "a/run.h5: log written by an older lpx (format lpx-run-0); expected lpx-run-1".
// Only /metrics/step and /metrics/loss are required. Optional datasets that are absent are
// left empty and named in Run::missing ("/metrics/grad_norm", "/eval", "/quant", ...), so
// a log of a run still in progress, or one written with statistics off, still reads. A
// column shorter than /metrics/step (a run killed between two appends) is padded with
// NaN (-1 for integers); rows past the shortest of step and loss are dropped. A dataset
// that claims more values than the file stores for it, /quant statistics whose rows are
// not /quant/layers x /quant/roles or that lack more than one row, and /quant/applied
// fields without one value per layer and role are LogErrors (docs/runlog.md#reading-it).
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "lpx/recipes/operand.hpp"
#include "lpx/recipes/recipe.hpp"
#include "lpx/runlog/schema.hpp"

namespace lpx::runlog {

// A file that is not a readable lpx run log (one line, naming the file).
struct LogError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// /quant of a whole run: statistics (steps, L, R) and what was applied (L, R).
struct QuantTable {
  std::vector<std::string> layers, layer_kinds, roles;
  std::vector<float> amax, flushed_pct, saturated_pct, sqnr_db;
  std::vector<int64_t> clamped_blocks;
  std::vector<AppliedOperand> applied;  // empty when the log has none
};

// Everything a log holds but the checkpoints.
struct Run {
  std::string path;
  Header header;
  Metrics metrics;
  Evals eval;
  QuantTable quant;
  int64_t checkpoint_step = -1;      // completed steps of the newest checkpoint, -1: none
  std::vector<std::string> missing;  // optional datasets absent from the file
  size_t steps() const { return metrics.rows(); }
};

// True when `path` starts with the HDF5 signature (a cheap test before reading).
bool is_hdf5_file(const std::string& path);

Run read_run(const std::string& path);  // throws LogError
// Writes `run` (header.format as given, so tests can write other versions) without
// checkpoints: empty optional columns are left out. Temporary file + rename.
void write_run(const std::string& path, const Run& run);

// The state of every layer's quantizer (OperandQuantizer's amax histories), as
// checkpointed: (L, 6, H) values, oldest first, NaN-padded, and (L, 6) counts.
struct QuantizerState {
  int64_t layers = 0;          // L
  int64_t length = 0;          // H: the longest history (0: nothing to save)
  std::vector<float> values;
  std::vector<int64_t> count;
};

struct Checkpoint {
  int64_t step = -1;  // completed steps; -1: no checkpoint
  std::vector<float> params, adam_m, adam_v;
  bool has_quantizer_state = false;  // the slot holds amax_history datasets
  QuantizerState quantizer;
};

// One operand role of each layer, per layer: what the trainer collects each step.
using LayerStats = std::array<OperandStats, kGemmRoles>;
using LayerApplied = std::array<AppliedOperand, kGemmRoles>;

class RunLog {
 public:
  // Creates (replacing) `path` with the header's attributes and empty datasets for a
  // model whose quantized layers are `layers` (names) of `layer_kinds`.
  static std::unique_ptr<RunLog> create(const std::string& path, const Header& header,
                                        const std::vector<std::string>& layers,
                                        const std::vector<std::string>& layer_kinds);
  // Opens a log to append to (resume) or only to read its checkpoint. Refuses, with a
  // LogError naming the file, anything read_run() refuses and a log whose datasets do not
  // have the shapes schema.hpp gives (so appending can never write past a row).
  static std::unique_ptr<RunLog> open(const std::string& path, bool writable = true);
  ~RunLog();
  RunLog(const RunLog&) = delete;
  RunLog& operator=(const RunLog&) = delete;

  const Header& header() const;
  size_t layers() const;
  // One step. stats / applied: one entry per layer, or empty when statistics were not
  // collected this step (NaN rows). An operand with stats.elements == 0 was not
  // quantized that step. applied is written once, at the first step that has it.
  void append_step(const StepMetrics& m, std::span<const LayerStats> stats = {},
                   std::span<const LayerApplied> applied = {});
  void append_eval(const EvalMetrics& e);
  // Into the slot that is not current, flushed, then made current: a run killed at any
  // moment keeps its last complete checkpoint.
  void write_checkpoint(const Checkpoint& c);
  Checkpoint read_checkpoint() const;
  // Drops /metrics and /quant rows of steps >= `steps` and /eval rows of steps > `steps`.
  void truncate(int64_t steps);
  void flush();

  struct Impl;

 private:
  explicit RunLog(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// The newest complete checkpoint of a log (step -1 when there is none).
Checkpoint read_checkpoint(const std::string& path);

}  // namespace lpx::runlog
