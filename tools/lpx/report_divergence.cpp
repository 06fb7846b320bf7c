// Verdicts and labelled-corpus figures of `lpx report` (report_divergence.hpp).
#include "report_divergence.hpp"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <map>

#include <fmt/format.h>

#include "report_study.hpp"

namespace lpx::cli {

namespace {

using json = nlohmann::ordered_json;

json num(double x) { return std::isfinite(x) ? json(x) : json(nullptr); }

std::string mechanism_of(const std::string& name) { return name.substr(0, name.find('-')); }

// One set of runs judged with one set of detectors.
struct Figures {
  int diverged = 0, instant = 0, caught = 0, healthy = 0, healthy_flagged = 0, gap = 0, gap_flagged = 0;
  std::vector<int64_t> leads;
  std::vector<double> fractions;

  // `kind`: "instant", "diverged" (with an early window), "gap" or "ok".
  void add(const CorpusRun& r, const std::string& kind, const std::vector<divergence::Flag>& flags) {
    const divergence::Outcome& o = r.outcome;
    if (kind == "instant") {
      ++diverged;
      ++instant;
    } else if (kind == "diverged") {
      ++diverged;
      if (!flags.empty() && flags.front().step < o.divergence_step) {
        ++caught;
        const int64_t lead = o.divergence_step - flags.front().step;
        const int64_t first = r.series && r.series->rows() ? r.series->step.front() : 0;
        leads.push_back(lead);
        fractions.push_back(static_cast<double>(lead) / static_cast<double>(std::max<int64_t>(1, o.divergence_step - first)));
      }
    } else if (kind == "gap") {
      ++gap;
      gap_flagged += !flags.empty();
    } else {
      ++healthy;
      healthy_flagged += !flags.empty();
    }
  }

  static json interval(int k, int n) {
    if (n <= 0) return nullptr;
    const auto [lo, hi] = wilson_interval(k, n);
    return json::array({lo, hi});
  }

  static double median(std::vector<double> v) {
    if (v.empty()) return NAN;
    std::sort(v.begin(), v.end());
    const size_t h = v.size() / 2;
    return v.size() % 2 ? v[h] : 0.5 * (v[h - 1] + v[h]);
  }

  json to_json() const {
    json j;
    const int window = diverged - instant;
    j["diverged"] = diverged;
    j["instant"] = instant;
    j["diverged_with_window"] = window;
    j["flagged_before_divergence"] = caught;
    j["recall"] = window ? num(static_cast<double>(caught) / window) : json(nullptr);
    j["recall_ci95"] = interval(caught, window);
    j["recall_all_diverged"] = diverged ? num(static_cast<double>(caught) / diverged) : json(nullptr);
    j["healthy"] = healthy;
    j["healthy_flagged"] = healthy_flagged;
    j["false_positive_rate"] = healthy ? num(static_cast<double>(healthy_flagged) / healthy) : json(nullptr);
    j["false_positive_rate_ci95"] = interval(healthy_flagged, healthy);
    j["gap"] = gap;
    j["gap_flagged"] = gap_flagged;
    j["not_diverged_flag_rate"] =
        healthy + gap ? num(static_cast<double>(healthy_flagged + gap_flagged) / (healthy + gap)) : json(nullptr);
    std::vector<double> l(leads.begin(), leads.end());
    j["lead_median_steps"] = num(median(l));
    j["lead_worst_steps"] = leads.empty() ? json(nullptr) : json(*std::min_element(leads.begin(), leads.end()));
    j["lead_median_fraction"] = num(median(fractions));
    j["lead_worst_fraction"] =
        fractions.empty() ? json(nullptr) : num(*std::min_element(fractions.begin(), fractions.end()));
    return j;
  }
};

std::string pct(const json& x) { return x.is_null() ? "-" : fmt::format("{:.0f}%", 100 * x.get<double>()); }
// "94%, 73-99%": a rate with its 95% interval
std::string pct_ci(const json& x, const json& ci) {
  if (x.is_null()) return "-";
  return fmt::format("{}, {:.0f}-{:.0f}%", pct(x), 100 * ci[0].get<double>(),
                     100 * ci[1].get<double>());
}
std::string steps(const json& x) { return x.is_null() ? "-" : fmt::format("{:g}", x.get<double>()); }

}  // namespace

std::pair<double, double> wilson_interval(int k, int n) {
  if (n <= 0) return {NAN, NAN};
  const double z = kNormalQuantile975;
  const double nn = n, p = static_cast<double>(k) / nn, z2 = z * z;
  const double center = (p + z2 / (2 * nn)) / (1 + z2 / nn);
  const double half = z / (1 + z2 / nn) * std::sqrt(p * (1 - p) / nn + z2 / (4 * nn * nn));
  return {std::max(0.0, center - half), std::min(1.0, center + half)};
}

GapBand gap_band(const std::vector<CorpusRun>& runs, const std::string& model) {
  GapBand b;
  std::vector<double> evals, trains;
  bool every_eval = true;
  for (const auto& r : runs) {
    if (!r.reference || r.model != model) continue;
    every_eval = every_eval && std::isfinite(r.final_eval);
    if (std::isfinite(r.final_eval)) evals.push_back(r.final_eval);
    if (std::isfinite(r.final_loss)) trains.push_back(r.final_loss);
  }
  b.eval = every_eval && !evals.empty();  // one reference: no band, but its runs' gaps are on the evaluation
  const std::vector<double>& finals = b.eval ? evals : trains;
  if (finals.size() < 2) return b;
  double mean = 0;
  for (double x : finals) mean += x;
  mean /= static_cast<double>(finals.size());
  double var = 0;
  for (double x : finals) var += (x - mean) * (x - mean);
  var /= static_cast<double>(finals.size() - 1);
  b.band = 3.0 * std::sqrt(var) / std::fabs(mean);
  return b;
}

double final_gap(const CorpusRun& r, const GapBand& b) {
  const double run = b.eval ? r.final_eval : r.final_loss, ref = b.eval ? r.reference_eval : r.reference_final;
  if (!std::isfinite(ref) || std::isnan(run)) return NAN;
  return (run - ref) / std::fabs(ref);  // +Inf for a run whose loss overflowed
}

std::string verdict(const CorpusRun& r, const GapBand& b) {
  if (r.reference) return "reference";
  if (r.outcome.diverged) return "diverged";
  if (std::isfinite(b.band) && final_gap(r, b) > b.band) return "gap";
  return "ok";
}

std::string instant_reason(const CorpusRun& r) {
  const divergence::Outcome& o = r.outcome;
  if (!o.diverged) return "";
  const int64_t first = r.series && r.series->rows() ? r.series->step.front() : 0;
  if (o.divergence_step <= first)
    return fmt::format("diverged at step {}, the run's first step: no step precedes it", o.divergence_step);
  if (!r.inject.empty() && o.divergence_step == r.inject_step)
    return fmt::format("diverged at step {}, the step the {} outlier is injected: the cause and the blow-up are the "
                       "same step, so no flag can precede it",
                       o.divergence_step, r.inject);
  return "";
}

json corpus_summary(const std::vector<CorpusRun>& runs, const divergence::Thresholds& t,
                    const std::vector<std::string>& enabled) {
  Figures all;
  std::map<std::string, Figures> by_mech, by_det;
  json misses = json::array(), false_positives = json::array(), instant = json::array(), gap_flagged = json::array();
  std::map<std::string, GapBand> bands;
  int n = 0;
  for (const auto& r : runs) {
    if (r.reference) continue;
    ++n;
    if (!bands.count(r.model)) bands[r.model] = gap_band(runs, r.model);
    const std::vector<divergence::Flag> flags = divergence::only(r.flags, enabled);
    const std::string why_instant = instant_reason(r);
    const std::string v = verdict(r, bands[r.model]);
    const std::string kind = !why_instant.empty() ? "instant" : v == "diverged" ? "diverged" : v == "gap" ? "gap" : "ok";
    all.add(r, kind, flags);
    by_mech[mechanism_of(r.name)].add(r, kind, flags);
    for (const auto& d : enabled) by_det[d].add(r, kind, divergence::only(r.flags, {d}));
    const divergence::Outcome& o = r.outcome;
    if (kind == "instant") {
      json m;
      m["run"] = r.name;
      m["divergence_step"] = o.divergence_step;
      m["divergence_reason"] = o.reason;
      m["why"] = why_instant;
      m["first_flag"] = flags.empty() ? json(nullptr) : json(flags.front().describe());
      instant.push_back(m);
    }
    if (kind == "diverged" && (flags.empty() || flags.front().step >= o.divergence_step)) {
      json m;
      m["run"] = r.name;
      m["divergence_step"] = o.divergence_step;
      m["divergence_reason"] = o.reason;
      m["first_flag"] = flags.empty() ? json(nullptr) : json(flags.front().describe());
      m["why"] = flags.empty() ? fmt::format("no detector fired in {} steps", r.series ? r.series->rows() : 0)
                               : fmt::format("first flag {} step(s) after the divergence step",
                                             flags.front().step - o.divergence_step);
      misses.push_back(m);
    }
    if ((kind == "ok" || kind == "gap") && !flags.empty()) {
      json f;
      f["run"] = r.name;
      f["first_flag"] = flags.front().describe();
      f["flags"] = flags.size();
      if (kind == "gap") {
        f["final_gap"] = num(final_gap(r, bands[r.model]));
        f["final_gap_on"] = bands[r.model].eval ? "evaluation loss" : "training loss";
        gap_flagged.push_back(f);
      } else {
        false_positives.push_back(f);
      }
    }
  }
  json j;
  j["runs"] = n;
  j["detectors"] = enabled;
  j["definition"] = fmt::format(
      "diverged: a non-finite loss, or the {}-step trailing mean of the loss above {:g} x its own lowest value so far "
      "for {} steps; instant: diverged at the run's first step or at the step an outlier is injected (no flag can "
      "precede it; recall is over the other diverged runs); gap: not diverged, final evaluation loss (or, where "
      "a reference lacks one, final training loss) above the reference's by more than the reference seeds' noise "
      "band; healthy: neither",
      t.smooth, t.diverged_factor, t.diverged_patience);
  j["gap_bands"] = json::object();
  for (const auto& [model, b] : bands)
    j["gap_bands"][model] = {{"band", num(b.band)}, {"on", b.eval ? "evaluation loss" : "training loss"}};
  j["overall"] = all.to_json();
  j["by_mechanism"] = json::object();
  for (const auto& [k, v] : by_mech) j["by_mechanism"][k] = v.to_json();
  j["by_detector"] = json::object();
  for (const auto& d : enabled) j["by_detector"][d] = by_det[d].to_json();
  j["instant"] = instant;
  j["misses"] = misses;
  j["false_positives"] = false_positives;
  j["gap_flagged"] = gap_flagged;
  return j;
}

std::string corpus_markdown(const json& s) {
  std::string o;
  auto out = std::back_inserter(o);
  fmt::format_to(out, "## Detection on the labelled runs\n\n{} runs; {}.\n\n", s["runs"].get<int>(),
                 s["definition"].get<std::string>());
  for (auto it = s["gap_bands"].begin(); it != s["gap_bands"].end(); ++it)
    fmt::format_to(out, "- noise band of the {} references: {} on the {}\n", it.key(),
                   it.value()["band"].is_null() ? "none (fewer than two seeds)"
                                                : fmt::format("{:.1f}%", 100 * it.value()["band"].get<double>()),
                   it.value()["on"].get<std::string>());
  if (!s["gap_bands"].empty()) fmt::format_to(out, "\n");
  const auto row = [&](const std::string& name, const json& f) {
    fmt::format_to(out, "| {} | {}/{} ({}) | {} | {}/{} ({}) | {}/{} | {} | {} | {} | {} |\n", name,
                   f["flagged_before_divergence"].get<int>(), f["diverged_with_window"].get<int>(),
                   pct_ci(f["recall"], f["recall_ci95"]), f["instant"].get<int>(),
                   f["healthy_flagged"].get<int>(), f["healthy"].get<int>(),
                   pct_ci(f["false_positive_rate"], f["false_positive_rate_ci95"]),
                   f["gap_flagged"].get<int>(), f["gap"].get<int>(), steps(f["lead_median_steps"]),
                   steps(f["lead_worst_steps"]), pct(f["lead_median_fraction"]),
                   pct(f["lead_worst_fraction"]));
  };
  const char* head =
      "| {} | diverged runs with an early window flagged before divergence (recall, 95% interval) | "
      "instant divergences | healthy runs flagged (rate, 95% interval) | gap runs flagged | "
      "median lead (steps) | worst lead (steps) | median lead (fraction of steps to divergence) | "
      "worst lead (fraction) |\n"
      "|---|---|---|---|---|---|---|---|---|\n";
  fmt::format_to(out, fmt::runtime(head), "mechanism");
  for (auto it = s["by_mechanism"].begin(); it != s["by_mechanism"].end(); ++it) row(it.key(), it.value());
  row("**all**", s["overall"]);
  fmt::format_to(out, "\n");
  fmt::format_to(out, fmt::runtime(head), "detector (alone)");
  for (auto it = s["by_detector"].begin(); it != s["by_detector"].end(); ++it) row(it.key(), it.value());
  fmt::format_to(out, "\nInstant divergences (no flag can precede them; not in the recall):\n\n");
  if (s["instant"].empty()) fmt::format_to(out, "- none\n");
  for (const auto& m : s["instant"])
    fmt::format_to(out, "- {}: {} ({}){}\n", m["run"].get<std::string>(), m["why"].get<std::string>(),
                   m["divergence_reason"].get<std::string>(),
                   m["first_flag"].is_null() ? "" : "; first flag " + m["first_flag"].get<std::string>());
  fmt::format_to(out, "\nMisses (diverged with an early window, not flagged before):\n\n");
  if (s["misses"].empty()) fmt::format_to(out, "- none\n");
  for (const auto& m : s["misses"])
    fmt::format_to(out, "- {}: diverged at step {} ({}); {}{}\n", m["run"].get<std::string>(),
                   m["divergence_step"].get<int64_t>(), m["divergence_reason"].get<std::string>(),
                   m["why"].get<std::string>(),
                   m["first_flag"].is_null() ? "" : " (" + m["first_flag"].get<std::string>() + ")");
  fmt::format_to(out, "\nFalse positives (healthy: did not diverge, no gap, flagged):\n\n");
  if (s["false_positives"].empty()) fmt::format_to(out, "- none\n");
  for (const auto& f : s["false_positives"])
    fmt::format_to(out, "- {}: {} ({} flag(s))\n", f["run"].get<std::string>(), f["first_flag"].get<std::string>(),
                   f["flags"].get<size_t>());
  fmt::format_to(out, "\nFlagged gap runs (did not diverge, end worse than the reference beyond the noise band):\n\n");
  if (s["gap_flagged"].empty()) fmt::format_to(out, "- none\n");
  for (const auto& f : s["gap_flagged"])
    fmt::format_to(out, "- {}: final gap {}; {} ({} flag(s))\n", f["run"].get<std::string>(), pct(f["final_gap"]),
                   f["first_flag"].get<std::string>(), f["flags"].get<size_t>());
  return o;
}

}  // namespace lpx::cli
