// The labelled-corpus part of `lpx report` (README "Divergence detection"): each run's
// verdict (diverged | gap | ok) and, with --corpus, detection figures per mechanism and per
// detector: recall (diverged runs flagged before they diverge), the rate of healthy runs
// flagged, and lead times in steps and as a fraction of the steps to divergence.
//
// Labels: a run's mechanism is its name up to the first '-' ("attnlogit-lr0.1-s1" is
// "attnlogit"); the ground truth is judge() (divergence/detectors.hpp): the run's own
// history, never the reference. `gap` is a separate verdict: the run did not diverge but
// its final loss is above its reference's by more than the noise band, three times the
// seed-to-seed standard deviation of the reference runs' final losses (relative), so seed
// noise is never called a gap; with fewer than two reference seeds there is no band and
// no `gap` verdict.
#pragma once

#include <string>
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
  std::vector<divergence::Flag> flags;      // every detector's
  divergence::Outcome outcome;              // judge() over every detector's flags
};

// The relative noise band of the references (NaN when fewer than two reference seeds of a
// model): 3 x std / mean of their final losses, by model.
double gap_band(const std::vector<CorpusRun>& runs, const std::string& model);

// "diverged" | "gap" | "ok" | "reference".
std::string verdict(const CorpusRun& r, double band);

// The figures over `runs` (references left out) for the detectors in `enabled`.
nlohmann::ordered_json corpus_summary(const std::vector<CorpusRun>& runs, const divergence::Thresholds& t,
                                      const std::vector<std::string>& enabled);
// The same as Markdown tables, with every miss and false positive listed.
std::string corpus_markdown(const nlohmann::ordered_json& summary);

}  // namespace lpx::cli
