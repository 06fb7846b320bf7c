// The labelled-corpus part of `lpx report` (README "Divergence detection"): each run's
// verdict (diverged | gap | ok) and, with --corpus, detection figures per mechanism and per
// detector: recall (diverged runs flagged before they diverge), the rate of healthy runs
// flagged, and lead times in steps and as a fraction of the steps to divergence. Recall and
// the false-positive rate carry 95% Wilson score intervals: a held-out set has tens of runs,
// where one run moves a rate by several points, so a target is read against the interval.
//
// Classes of the labelled runs (each non-reference run is in exactly one):
//   diverged, with an early window  judge() found a divergence step d, and a flag could have
//                                    come before it: recall and lead times are over these.
//   instant                          diverged before any detector can warn: d is the run's
//                                    first step (nothing precedes it), or the step an outlier
//                                    is injected (the cause and the blow-up are one step).
//                                    A divergence in the first `min_history` steps is NOT
//                                    instant: update_size, adam_rms and amax_staleness need
//                                    little or no history. Listed with d and the reason,
//                                    never counted as a catch; recall over all diverged runs
//                                    is reported too.
//   gap                              not diverged, but ends worse than its reference by more
//                                    than the noise band (below): flags on these are listed
//                                    apart, and also counted in the not-diverged flag rate.
//   healthy (verdict ok)             the false-positive rate is over these.
//
// Labels: a run's mechanism is its name up to the first '-' ("attnlogit-lr0.1-s1" is
// "attnlogit"); the ground truth is judge() (divergence/detectors.hpp): the run's own
// history, never the reference. `gap` is a separate verdict: the run did not diverge but
// its final quality is worse than its reference's by more than the noise band, three times
// the seed-to-seed standard deviation of the reference runs' final figures (relative), so
// seed noise is never called a gap; with fewer than two reference seeds there is no band
// and no `gap` verdict. The figure is the loss of the evaluation every run ends with (the
// whole test set of the mlp, the validation batches of the gpt) where every reference of
// the model has one, else the training loss's trailing mean. The training loss is one
// minibatch per step: on the mlp its trailing mean spreads by 28% (3 sigma) from seed to
// seed, the test loss by 4%, so only the evaluation can tell a run 10% worse from noise
// (docs/divergence.md, seventh pass).
#pragma once

#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "lpx/divergence/detectors.hpp"

namespace lpx::cli {

struct CorpusRun {
  std::string name, model;
  int64_t seed = 0;
  bool reference = false;
  const divergence::Series* series = nullptr;
  std::string reference_run;                // "" when none
  double final_loss = 0, reference_final = 0;  // mean of the last `smooth` steps (NaN: none)
  // the evaluation loss at the run's (its reference's) last step; NaN when it has none
  double final_eval = NAN, reference_eval = NAN;
  int64_t inject_step = -1;                 // the step an outlier is injected (-1: none)
  std::string inject;                       // "activation" | "weight" | ""
  std::vector<divergence::Flag> flags;      // every detector's
  divergence::Outcome outcome;              // judge() over every detector's flags
};

// The noise band of one model's references and the figure it is measured on.
struct GapBand {
  double band = NAN;  // 3 x std / mean of the references' final figures; NaN: fewer than two
  bool eval = false;  // the figure: the final evaluation loss (true), the training loss's trailing mean
};
GapBand gap_band(const std::vector<CorpusRun>& runs, const std::string& model);

// The run's final figure above its reference's, relative, on the band's figure (NaN when
// either lacks it).
double final_gap(const CorpusRun& r, const GapBand& b);

// "diverged" | "gap" | "ok" | "reference".
std::string verdict(const CorpusRun& r, const GapBand& b);

// Why a diverged run has no early window ("" when it has one, or did not diverge).
std::string instant_reason(const CorpusRun& r);

// The 95% Wilson score interval of k successes in n trials (Wilson 1927, JASA 22:209),
// {lo, hi} within [0, 1]; {NaN, NaN} for n = 0. Unlike the normal approximation it stays
// inside [0, 1] and is not empty at k = 0 or k = n, the cases a detector aims for.
std::pair<double, double> wilson_interval(int k, int n);

// The figures over `runs` (references left out) for the detectors in `enabled`.
nlohmann::ordered_json corpus_summary(const std::vector<CorpusRun>& runs, const divergence::Thresholds& t,
                                      const std::vector<std::string>& enabled);
// The same as Markdown tables, with every miss and false positive listed.
std::string corpus_markdown(const nlohmann::ordered_json& summary);

}  // namespace lpx::cli
