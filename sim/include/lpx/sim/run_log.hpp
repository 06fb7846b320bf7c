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
//       config                the run's TrainConfig as JSON (model sizes, lr, batch, seed, device, ...)
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
//       saturated_pct         float32 (steps, L, 6)  % of elements clipped (or made non-finite);
//                                              NaN where not counted (operands quantized on
//                                              the GPU with --device gpu, sim/device.hpp)
//       sqnr_db               float32 (steps, L, 6)  10 log10(sum x^2 / sum (x - q(x))^2); inf if exact
//       clamped_blocks        int64   (steps, L, 6)  blocks whose scale was clamped (-1: not
//                                              counted, as saturated_pct)
//       applied/              what each layer's quantizer applied to each operand, written
//                             once from the first step with statistics by the quantizer
//                             that ran (recipes/operand.hpp, AppliedOperand). Each dataset
//                             is (L, 6), rows /quant/layers, columns /quant/roles; ""
//                             (strings) or -1 (integers) where the operand was not
//                             quantized that step (an MLP's first layer computes no dX):
//         element             fixed-length strings: "float32" (left as it is), "bfloat16",
//                             "ternary" (BitNet absmean), or the block format's element
//                             ("float4_e2m1fn", "float8_e4m3fn", ...)
//         block               one block's extent in the operand's (rows x cols) layout:
//                             "1x16" (along axis 1), "16x1" (along axis 0), "16x16" (2-D
//                             tile), "1xK" / "Mx1" (per row / column), "tensor", "none"
//         scale               block scale: "e8m0" | "pow2" | "fp32" | "e4m3" | "absmean" | "none"
//         tensor_scale        "fp32" for a second per-tensor scale (NVFP4), else "none"
//         scale_rule          "floor" | "rceil" | "ceil" | "even" (power-of-two scales),
//                             "amax" (scale from this tensor), "history_max:N" (delayed
//                             scaling over N steps), "none"
//         rounding            "rne" | "sr" | ... | "none" (not rounded)
//         transform           "none" | "rht16:fixed" | "rht64:per_call" | ... (as applied)
//         axis                int64: the reduction axis the operand was quantized along
//         sr_bits             int64: random bits per element with rounding "sr", else 0
//         headroom_3_4        int64: 1 when x was scaled by 3/4 before SR
//         margin              int64: fp32-scale margin (2^-margin)
//                             Attention's layer (attn.bmm) runs two GEMM pairs (Q K^T and
//                             P V); where they applied different things the values are
//                             joined with "|".
//   /checkpoint/              attribute `current` (int64): the slot holding the newest
//                             complete checkpoint (-1: none yet)
//       slot0/, slot1/        attribute `step` (int64, completed steps); datasets params,
//                             adam_m, adam_v (float32, flat, see param_table); and, when
//                             the recipe has stateful quantizers (delayed scaling):
//           amax_history        float32 (L, 6, H): per layer (/quant/layers) and role
//                               (/quant/roles) the quantizer's amax history, oldest first,
//                               NaN after its count; H the longest history length
//           amax_history_count  int64 (L, 6): entries of each history (0: none / stateless)
//                             Resuming restores them, so the run continues bit for bit.
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

// The state of every layer's quantizer (GemmQuantizer::state), as checkpointed.
struct QuantizerState {
  int64_t layers = 0;          // L
  int64_t length = 0;          // H: the largest state capacity (0: nothing to save)
  std::vector<float> values;   // (L, 6, H), oldest first, NaN-padded
  std::vector<int64_t> count;  // (L, 6)
};

struct CheckpointData {
  int64_t step = -1;  // -1: no checkpoint
  std::vector<float> params, adam_m, adam_v;
  bool has_quantizer_state = false;  // the slot holds amax_history datasets
  QuantizerState quantizer;
};

class RunLog {
 public:
  // Creates (replacing) `path` with the header's attributes and empty datasets.
  static std::unique_ptr<RunLog> create(const std::string& path, const RunHeader& header);
  // Opens an existing log for appending (or only reading); throws std::runtime_error
  // when it is not one.
  static std::unique_ptr<RunLog> open(const std::string& path, bool writable = true);
  ~RunLog();
  RunLog(const RunLog&) = delete;
  RunLog& operator=(const RunLog&) = delete;

  std::string attribute(const std::string& name) const;
  void append_step(const StepMetrics& m, const std::vector<std::array<OperandStats, kNumRoles>>* stats);
  void append_eval(const EvalMetrics& e);
  void write_checkpoint(int64_t step, const std::vector<float>& params,
                        const std::vector<float>& m, const std::vector<float>& v,
                        const QuantizerState& quantizer = {});
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
  std::vector<AppliedFormat> applied;                             // (L, 6); empty if absent
  std::string model, recipe, config;
  int64_t checkpoint_step = -1;
};
RunData read_run_log(const std::string& path);
// The newest complete checkpoint of a log (step -1 when there is none).
CheckpointData read_run_checkpoint(const std::string& path);

}  // namespace lpx::sim
