// The HDF5 run log's schema: what a training run writes (`lpx train --out run.h5`), in
// one place. The writer and the reader (run_log.hpp) take every name, type and shape
// from here; docs/runlog.md explains the layout for readers in other languages.
//
//   /                     attributes: format ("lpx-run-1"), lpx_version, model, recipe,
//                         recipe_json, config (the TrainConfig as JSON), param_table (JSON
//                         list of {"name", "offset", "shape"} into the flat checkpoint
//                         arrays), seed (int64)
//   /metrics/<column>     one row per training step, in step order (Metrics below)
//   /eval/<column>        one row per evaluation (Evals below)
//   /quant/layers, layer_kinds (L strings), roles (6 strings: the GEMM roles of
//                         recipes/recipe.hpp in their order)
//   /quant/<statistic>    (steps, L, 6): what each layer's quantizer did to each operand
//                         that step (QuantTable below); NaN (0 for clamped_blocks) where
//                         statistics were not collected or the operand was not quantized
//   /quant/applied/<field>  (L, 6): what each quantizer applied (recipes' AppliedOperand),
//                         written once from the first step with statistics; "" / -1 for
//                         an operand that was not quantized that step
//   /checkpoint           attribute current (int64, -1: none); slot0/ and slot1/ with
//                         attribute step (int64, -1 while being written) and params,
//                         adam_m, adam_v (float32, flat), and for stateful quantizers
//                         (delayed scaling) amax_history (L, 6, H) float32 NaN-padded,
//                         amax_history_count (L, 6) int64
//
// Versions: the format attribute is "lpx-run-" followed by kFormatVersion. A log of
// another version is refused with one line naming the file and both versions. Any change
// to a name, a type or a meaning bumps the version; adding an optional dataset does not.
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

namespace lpx::runlog {

inline constexpr int kFormatVersion = 1;
inline constexpr std::string_view kFormatPrefix = "lpx-run-";
std::string format_name(int version = kFormatVersion);  // "lpx-run-1"

// Whether a reader needs a dataset. Optional ones are listed in Run::missing when absent;
// informational ones (wall times) are not.
enum class Presence : uint8_t { required, optional, informational };

// --- /metrics: one row per training step -------------------------------------------

inline constexpr double kNoValue = std::numeric_limits<double>::quiet_NaN();

// One step (what the trainer appends) ...
struct StepMetrics {
  int64_t step = 0;         // 0-based index of the step
  double loss = 0;          // mean training loss of the step's batch
  float lr = 0;             // learning rate used
  double grad_norm = 0;     // global L2 norm of the gradient, before clipping
  double update_ratio = 0;  // ||w_new - w_old|| / ||w_old||
  double adam_rms = 0;      // sqrt(mean(g^2 / (v_hat + eps^2))), v_hat after the update:
                            // it grows before loss spikes (Wortsman et al. 2023)
  double step_time_s = 0;   // wall time of the step (not deterministic)
  // Early signals of instability mechanisms (docs/runlog.md; NaN where not measured):
  double attn_logit_max = kNoValue;     // largest scaled attention logit q.k/sqrt(d) (gpt)
  double output_logit_max = kNoValue;   // largest |output logit| of the step's batch
  double act_outlier_ratio = kNoValue;  // largest per-channel RMS / RMS of a layer input
  double amax_staleness = kNoValue;     // largest current amax / the delayed scale's amax
  double fixed_batch_loss = kNoValue;   // loss on fixed held-out batches, before the update
};
// ... and every step of a run (what a reader gets): the same names, one array each.
struct Metrics {
  std::vector<int64_t> step;
  std::vector<double> loss;
  std::vector<float> lr;
  std::vector<double> grad_norm, update_ratio, adam_rms, step_time_s;
  std::vector<double> attn_logit_max, output_logit_max, act_outlier_ratio, amax_staleness;
  std::vector<double> fixed_batch_loss;
  size_t rows() const { return step.size(); }
};
// The columns, in file order: f(name, presence, member) for a StepMetrics or a Metrics.
template <class M, class F>
void visit_metrics(M& m, F&& f) {
  f("step", Presence::required, m.step);
  f("loss", Presence::required, m.loss);
  f("lr", Presence::optional, m.lr);
  f("grad_norm", Presence::optional, m.grad_norm);
  f("update_ratio", Presence::optional, m.update_ratio);
  f("adam_rms", Presence::optional, m.adam_rms);
  f("step_time_s", Presence::informational, m.step_time_s);
  // Added after lpx-run-1 was fixed: logs written before them lack these datasets, which
  // readers leave empty (and do not list as missing); their detectors stay silent.
  f("attn_logit_max", Presence::informational, m.attn_logit_max);
  f("output_logit_max", Presence::informational, m.output_logit_max);
  f("act_outlier_ratio", Presence::informational, m.act_outlier_ratio);
  f("amax_staleness", Presence::informational, m.amax_staleness);
  f("fixed_batch_loss", Presence::informational, m.fixed_batch_loss);
}

// --- /eval: one row per evaluation --------------------------------------------------

struct EvalMetrics {
  int64_t step = 0;     // completed training steps when evaluated
  double loss = 0;      // validation / test loss
  double accuracy = 0;  // test accuracy (mlp), next-token accuracy (gpt)
};
struct Evals {
  std::vector<int64_t> step;
  std::vector<double> loss, accuracy;
  size_t rows() const { return step.size(); }
};
// The group is optional as a whole (Run::missing says "/eval" when step or loss is
// absent); accuracy is informational.
template <class E, class F>
void visit_eval(E& e, F&& f) {
  f("step", Presence::required, e.step);
  f("loss", Presence::required, e.loss);
  f("accuracy", Presence::informational, e.accuracy);
}

// --- /quant: per step x layer x operand role ----------------------------------------

// The statistics of recipes' OperandStats that the log keeps, with their file types:
// f(name, presence, member) over an OperandStats (one operand) or a QuantTable.
//   amax            float32  largest finite |x| the format saw (after any transform)
//   flushed_pct     float32  % of nonzero elements quantized to zero
//   saturated_pct   float32  % of elements clipped (NaN: not counted, device quantizers)
//   sqnr_db         float32  10 log10(sum x^2 / sum (x - q(x))^2); inf when exact
//   clamped_blocks  int64    blocks whose scale was clamped (-1: not counted)
template <class Q, class F>
void visit_quant(Q& q, F&& f) {
  f("amax", Presence::optional, q.amax);
  f("flushed_pct", Presence::optional, q.flushed_pct);
  f("saturated_pct", Presence::optional, q.saturated_pct);
  f("sqnr_db", Presence::optional, q.sqnr_db);
  f("clamped_blocks", Presence::informational, q.clamped_blocks);
}

// /quant/applied: the fields of recipes' AppliedOperand, strings then integers
// (headroom_3_4 is stored as 0 / 1). f(name, member) over an AppliedOperand.
template <class A, class F>
void visit_applied_strings(A& a, F&& f) {
  f("element", a.element);
  f("block", a.block);
  f("scale", a.scale);
  f("tensor_scale", a.tensor_scale);
  f("scale_rule", a.scale_rule);
  f("rounding", a.rounding);
  f("transform", a.transform);
}
template <class A, class F>
void visit_applied_ints(A& a, F&& f) {
  f("axis", a.axis);
  f("sr_bits", a.sr_bits);
  f("headroom_3_4", a.headroom_3_4);
  f("margin", a.margin);
}

// --- / (attributes) -------------------------------------------------------------------

struct Header {
  std::string format = format_name();
  std::string lpx_version, model, recipe, recipe_json, config_json, param_table;
  int64_t seed = 0;
};
// The string attributes: f(attribute name, member).
template <class H, class F>
void visit_header_strings(H& h, F&& f) {
  f("format", h.format);
  f("lpx_version", h.lpx_version);
  f("model", h.model);
  f("recipe", h.recipe);
  f("recipe_json", h.recipe_json);
  f("config", h.config_json);
  f("param_table", h.param_table);
}

}  // namespace lpx::runlog
