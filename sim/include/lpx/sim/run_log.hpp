// The HDF5 log of a training run (one file per run, written by `lpx train --out run.h5`).
//
// Layout (every dataset's first axis grows by one row per logged event):
//
//   /                         attributes (strings unless noted):
//       format                "lpx-run-1"
//       lpx_version           e.g. "0.1.0"
//       model                 "mlp" | "gpt"
//       recipe                the recipe's name
//       recipe_json           the recipe as JSON
//       config                the run's TrainConfig as JSON (model sizes, lr, batch, seed, ...)
//       seed                  int64
//       param_table           JSON list of {"name", "offset", "shape"} into the flat
//                             parameter arrays of /checkpoint
//   /metrics/                 one row per training step, in step order
//       step                  int64    0-based step index
//       loss                  float64  mean training loss of the step's batch
//       lr                    float32  learning rate used
//       grad_norm             float64  global L2 norm of the gradient (before clipping)
//       update_ratio          float64  ||w_new - w_old|| / ||w_old||
//       adam_rms              float64  sqrt(mean(g^2 / (v_hat + eps^2))) over all parameters,
//                                      v_hat the bias-corrected second moment after the
//                                      update (Wortsman et al. 2023: it grows before spikes)
//       step_time_s           float64  wall time of the step (not deterministic)
//   /eval/                    one row per evaluation
//       step                  int64    completed steps when evaluated
//       loss                  float64  validation / test loss
//       accuracy              float64  test accuracy (mlp), next-token accuracy (gpt)
//   /quant/                   per training step x GEMM layer x operand role; rows align
//                             with /metrics (NaN rows where statistics were not collected)
//       layers                fixed-length strings (L): layer names ("fc0", "h0.attn.qkv", ...)
//       layer_kinds           fixed-length strings (L): linear | attention_bmm | embedding | head
//       roles                 fixed-length strings (6): fwd_x fwd_w dgrad_dy dgrad_w wgrad_x wgrad_dy
//       amax                  float32 (steps, L, 6)  largest |x| of the operand
//       flushed_pct           float32 (steps, L, 6)  % of nonzero elements quantized to zero
//       saturated_pct         float32 (steps, L, 6)  % of elements clipped (or made non-finite)
//       sqnr_db               float32 (steps, L, 6)  10 log10(sum x^2 / sum (x - q(x))^2); inf if exact
//       clamped_blocks        int64   (steps, L, 6)  blocks whose scale was clamped
//   /checkpoint/              attribute `current` (int64): the slot holding the newest
//                             complete checkpoint (-1: none yet)
//       slot0/, slot1/        attribute `step` (int64, completed steps); datasets params,
//                             adam_m, adam_v (float32, flat, see param_table)
//
// Crash safety: checkpoints alternate between the two slots; a slot is written and the
// file flushed before `current` points at it, and flushed again after, so a run killed
// at any moment leaves the last complete checkpoint intact. Resuming drops the rows
// logged after that checkpoint and continues.
//
// Reading it: h5py.File("run.h5")["metrics/loss"][:]; the quant arrays are
// f["quant/sqnr_db"][:] with axes (step, layer, role) named by f["quant/layers"] and
// f["quant/roles"] (bytes: decode them).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "lpx/sim/quantizer.hpp"
#include "lpx/sim/trainer.hpp"

namespace lpx::sim {

struct RunHeader {
  std::string lpx_version, model, recipe, recipe_json, config_json, param_table;
  int64_t seed = 0;
  std::vector<std::string> layers, layer_kinds;
  int64_t param_count = 0;
};

struct CheckpointData {
  int64_t step = -1;  // -1: no checkpoint
  std::vector<float> params, adam_m, adam_v;
};

class RunLog {
 public:
  // Creates (replacing) `path` with the header's attributes and empty datasets.
  static std::unique_ptr<RunLog> create(const std::string& path, const RunHeader& header);
  // Opens an existing log for appending; throws std::runtime_error when it is not one.
  static std::unique_ptr<RunLog> open(const std::string& path);
  ~RunLog();
  RunLog(const RunLog&) = delete;
  RunLog& operator=(const RunLog&) = delete;

  std::string attribute(const std::string& name) const;
  void append_step(const StepMetrics& m, const std::vector<std::array<OperandStats, kNumRoles>>* stats);
  void append_eval(const EvalMetrics& e);
  void write_checkpoint(int64_t step, const std::vector<float>& params,
                        const std::vector<float>& m, const std::vector<float>& v);
  CheckpointData read_checkpoint() const;
  // Drops /metrics and /quant rows of steps >= `steps` and /eval rows after `steps`.
  void truncate(int64_t steps);
  void flush();

  struct Impl;

 private:
  explicit RunLog(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Everything in a log, for tests and tools.
struct RunData {
  std::vector<int64_t> steps;
  std::vector<double> loss, grad_norm, update_ratio, adam_rms;
  std::vector<float> lr;
  std::vector<int64_t> eval_steps;
  std::vector<double> eval_loss, eval_accuracy;
  std::vector<std::string> layers, roles;
  std::vector<float> amax, flushed_pct, saturated_pct, sqnr_db;  // (steps, L, 6)
  std::string model, recipe, config;
  int64_t checkpoint_step = -1;
};
RunData read_run_log(const std::string& path);

}  // namespace lpx::sim
