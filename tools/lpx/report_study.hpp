// Seed statistics and per-operand / per-layer blame for `lpx report` (README "Recipe
// studies", docs/recipes.md#studies). Pure functions over the numbers the report has read
// from the run logs, so the statistics are tested on their own (tests/tools/test_report_study.cpp).
//
// Seed statistics. A configuration is a recipe with its swept settings, over seeds. Each
// seed s is paired with the reference run of the same seed (same initial weights and the
// same batches), and its gap is relative: g_s = (L_s - R_s) / R_s, L and R the final losses:
// the evaluation loss each run ends with where every reference of the model has one (the
// held-out figure papers compare), else the training loss's mean over the last steps (the
// caller, cmd_report.cpp, chooses per model, as the gap verdict does). The configuration's
// gap is the mean of g_s with a 95% Student t interval over its n seeds (n - 1 degrees of
// freedom). The verdict is "worse" or "better" when the interval excludes 0, else "not
// resolved". The reference's own seed-to-seed spread is the relative standard deviation of
// R_s across the seeds; a mean gap inside it is marked within_seed_spread (the size of
// difference that changing the seed alone makes).
//
// Blame. `lpx sweep --ablate roles|layers RECIPE` runs the recipe, and for each unit u (a
// GEMM role, or a transformer block) the recipe with only u quantized ("only") and with
// everything but u quantized ("without"). In loss units, per seed: full_s = L_s - R_s,
// only_s = L(only u)_s - R_s, closed_s = L_s - L(without u)_s (the gap that not quantizing
// u removes). Shares are mean(only) / mean(full) and mean(closed) / mean(full), with the t
// intervals of the numerators divided by mean(full) (the denominator is taken as known).
// Units are ranked by their "only" share.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace lpx::cli {

// The standard normal's 0.975 quantile: the z of every two-sided 95% interval here (Student's t
// beyond its table, Wilson's interval of a rate in report_divergence).
inline constexpr double kNormalQuantile975 = 1.959963984540054;

// The two-sided 95% quantile of Student's t with `df` degrees of freedom (df >= 1).
double t_quantile_975(int df);

struct Interval {
  double mean = 0, lo = 0, hi = 0;  // lo = hi = NaN with one value
  int n = 0;
};
// Mean and 95% t interval of `values` (NaN entries are skipped).
Interval t_interval(const std::vector<double>& values);

// One run as the study sees it.
struct StudyRun {
  std::string name, recipe;  // recipe: the log's recipe name
  std::string config;        // the swept settings other than the seed and the recipe ("lr=0.003")
  uint64_t seed = 0;
  bool reference = false;
  double final_loss = 0;      // NaN when the run has none
  double reference_loss = 0;  // the paired reference's final loss; NaN without one
  bool on_eval = false;       // the losses are the final evaluation's (else the training loss's last steps)
};

struct ConfigStats {
  std::string recipe, config;
  std::vector<std::string> runs;
  Interval gap;                  // relative gap to the reference (0.01 = 1%)
  double reference_spread = 0;   // relative sd of the reference losses of these seeds (NaN: < 2)
  bool within_seed_spread = false;
  std::string verdict;           // "worse" | "better" | "not resolved" | "one seed"
  bool on_eval = false;          // every seed's gap is on the final evaluation loss
};
std::vector<ConfigStats> config_stats(const std::vector<StudyRun>& runs);

struct BlameRow {
  std::string unit;
  Interval only_share, closed_share;  // fractions of the recipe's gap (intervals as above)
  int seeds = 0;
};
struct Blame {
  std::string recipe, config;
  Interval full_gap;  // the whole recipe's gap in loss units
  std::vector<BlameRow> rows;  // ranked by only_share.mean, largest first
};
// Blame tables for every base recipe that has ablation runs (recipe names as
// recipes/ablation.hpp writes them). Runs of one seed pair up by
// (config, seed); units missing either variant are left out.
std::vector<Blame> blame(const std::vector<StudyRun>& runs);

nlohmann::ordered_json to_json(const ConfigStats& c);
nlohmann::ordered_json to_json(const Blame& b);
// "+1.23% [+0.80, +1.66]" (relative, in %) or "+1.23% (one seed)".
std::string gap_text(const Interval& g);
// "62% [40, 84]" for a share.
std::string share_text(const Interval& s);

}  // namespace lpx::cli
