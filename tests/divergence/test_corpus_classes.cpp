// The classes of lpx report --corpus (tools/lpx/report_divergence.hpp): instant divergences
// (no flag can precede them) are listed apart and left out of the recall; a run that
// diverges with an early window and is not flagged first is a miss; non-diverged runs are
// healthy (false-positive rate) or gap.
#include <catch2/catch.hpp>

#include <cmath>
#include <tuple>
#include <vector>

#include <fmt/format.h>

#include "report_divergence.hpp"

using namespace lpx::divergence;
using lpx::cli::CorpusRun;

namespace {

Series steps(int n) {
  Series s;
  for (int i = 0; i < n; ++i) s.step.push_back(i);
  return s;
}

CorpusRun run(const std::string& name, const Series& s, int64_t diverged_at, int64_t flag_at) {
  CorpusRun r;
  r.name = name;
  r.model = "mlp";
  r.series = &s;
  r.final_loss = 1.0;
  r.reference_final = 1.0;
  if (diverged_at >= 0) {
    r.outcome.diverged = true;
    r.outcome.divergence_step = diverged_at;
    r.outcome.reason = "loss > 1.5 x its best";
  }
  if (flag_at >= 0) r.flags.push_back(Flag{flag_at, "loss_spike", "", "", {}});
  return r;
}

}  // namespace

TEST_CASE("corpus classes: instant divergences apart, recall over the runs with a window") {
  const Thresholds t;
  const Series s = steps(200);
  std::vector<CorpusRun> runs;
  runs.push_back(run("lr1000x-a", s, 0, 20));         // instant: the run's first step
  CorpusRun inj = run("injectweight-a", s, 80, 80);   // instant: the injection step
  inj.inject = "weight";
  inj.inject_step = 80;
  runs.push_back(inj);
  CorpusRun late = run("injectact-a", s, 83, -1);     // injected at 80, diverged at 83: a window
  late.inject = "activation";
  late.inject_step = 80;
  runs.push_back(late);
  runs.push_back(run("lrramp-a", s, 100, 60));        // caught, lead 40 (40% of 100 steps)
  runs.push_back(run("lrramp-b", s, 50, 50));         // a miss: flagged in the divergence step
  runs.push_back(run("healthy-a", s, -1, -1));
  runs.push_back(run("healthy-b", s, -1, 150));       // a false positive
  CHECK(lpx::cli::instant_reason(runs[0]).find("the run's first step") != std::string::npos);
  CHECK(lpx::cli::instant_reason(run("lr1000x-b", s, 2, -1)).empty());  // update_size could warn at 0 or 1
  CHECK(lpx::cli::instant_reason(runs[1]).find("weight outlier is injected") != std::string::npos);
  CHECK(lpx::cli::instant_reason(runs[2]).empty());
  const auto j = lpx::cli::corpus_summary(runs, t, detector_names());
  const auto& o = j["overall"];
  CHECK(o["diverged"] == 5);
  CHECK(o["instant"] == 2);
  CHECK(o["diverged_with_window"] == 3);
  CHECK(o["flagged_before_divergence"] == 1);
  CHECK(o["recall"].get<double>() == Approx(1.0 / 3));
  CHECK(o["recall_all_diverged"].get<double>() == Approx(1.0 / 5));
  CHECK(o["healthy"] == 2);
  CHECK(o["healthy_flagged"] == 1);
  CHECK(o["lead_median_steps"].get<double>() == 40);
  CHECK(o["lead_median_fraction"].get<double>() == Approx(0.4));
  CHECK(j["instant"].size() == 2);
  CHECK(j["misses"].size() == 2);  // injectact-a (no flag) and lrramp-b (flag at the divergence step)
  CHECK(j["false_positives"].size() == 1);
  CHECK(j["by_mechanism"]["lr1000x"]["instant"] == 1);
}

TEST_CASE("corpus classes: with two reference seeds, a run ending worse than the band is gap, not healthy") {
  const Thresholds t;
  const Series s = steps(100);
  std::vector<CorpusRun> runs;
  for (int k = 0; k < 2; ++k) {
    CorpusRun ref = run("ref-fp32-s" + std::to_string(k), s, -1, -1);
    ref.reference = true;
    ref.final_loss = 1.0 + 0.01 * k;  // band = 3 x std / mean ~ 2.1%
    runs.push_back(ref);
  }
  CorpusRun worse = run("lrhigh-a", s, -1, 40);
  worse.final_loss = 1.3;
  runs.push_back(worse);
  runs.push_back(run("healthy-a", s, -1, -1));
  const auto j = lpx::cli::corpus_summary(runs, t, detector_names());
  CHECK(j["overall"]["gap"] == 1);
  CHECK(j["overall"]["gap_flagged"] == 1);
  CHECK(j["overall"]["healthy"] == 1);
  CHECK(j["overall"]["healthy_flagged"] == 0);
  CHECK(j["overall"]["not_diverged_flag_rate"].get<double>() == Approx(0.5));
  CHECK(j["gap_flagged"].size() == 1);
  CHECK(j["false_positives"].empty());
}

// Reference values from outside the code under test: the Wilson intervals Newcombe published
// for his four examples (Statistics in Medicine 17:857, 1998, table II: 81/263, 15/148, 0/20,
// 1/29, to four places), and the closed forms at k = 0 ([0, z^2 / (n + z^2)]) and k = n.
TEST_CASE("corpus figures: 95% Wilson intervals on recall and the false-positive rate") {
  const double z2 = 1.959963984540054 * 1.959963984540054;
  const auto none = lpx::cli::wilson_interval(0, 20);
  CHECK(none.first == 0.0);
  CHECK(none.second == Approx(z2 / (20 + z2)).epsilon(1e-12));  // 0.1611: one run in 20 is inside
  const auto all = lpx::cli::wilson_interval(17, 17);
  CHECK(all.first == Approx(17 / (17 + z2)).epsilon(1e-12));
  CHECK(all.second == 1.0);
  const std::vector<std::tuple<int, int, double, double>> newcombe = {{81, 263, 0.2553, 0.3662},
                                                                      {15, 148, 0.0624, 0.1605},
                                                                      {0, 20, 0.0, 0.1611},
                                                                      {1, 29, 0.0061, 0.1718}};
  for (const auto& [k, n, lo, hi] : newcombe) {
    const auto ci = lpx::cli::wilson_interval(k, n);
    CHECK(ci.first == Approx(lo).margin(6e-5));
    CHECK(ci.second == Approx(hi).margin(6e-5));
  }
  const auto most = lpx::cli::wilson_interval(16, 17);
  const auto mirror = lpx::cli::wilson_interval(1, 17);  // k and n - k mirror about 1/2
  CHECK(mirror.first == Approx(1 - most.second).epsilon(1e-12));
  CHECK(mirror.second == Approx(1 - most.first).epsilon(1e-12));
  CHECK(std::isnan(lpx::cli::wilson_interval(0, 0).first));

  // the summary carries them: 1 of 3 caught, 1 of 2 healthy runs flagged
  const Thresholds t;
  const Series s = steps(200);
  std::vector<CorpusRun> runs;
  runs.push_back(run("lrramp-a", s, 100, 60));
  runs.push_back(run("lrramp-b", s, 100, -1));
  runs.push_back(run("lrramp-c", s, 100, 120));
  runs.push_back(run("healthy-a", s, -1, -1));
  runs.push_back(run("healthy-b", s, -1, 150));
  const auto j = lpx::cli::corpus_summary(runs, t, detector_names());
  const auto r = lpx::cli::wilson_interval(1, 3);
  CHECK(j["overall"]["recall_ci95"][0].get<double>() == r.first);
  CHECK(j["overall"]["recall_ci95"][1].get<double>() == r.second);
  CHECK(j["overall"]["false_positive_rate_ci95"][0].get<double>() ==
        Approx(1 - j["overall"]["false_positive_rate_ci95"][1].get<double>()));
  CHECK(j["by_detector"]["loss_spike"]["recall_ci95"].is_null() == false);
  const std::string md = lpx::cli::corpus_markdown(j);
  CHECK(md.find(fmt::format("1/3 (33%, {:.0f}-{:.0f}%)", 100 * r.first, 100 * r.second)) !=
        std::string::npos);
}

// The seventh pass (docs/divergence.md): where every reference ended with an evaluation, the
// gap verdict reads the evaluation loss, whose seed-to-seed spread is the model's; the
// training loss's trailing mean spreads with the minibatches and hides real gaps.
TEST_CASE("corpus classes: the gap verdict reads the final evaluation loss where every reference has one") {
  const Thresholds t;
  const Series s = steps(100);
  std::vector<CorpusRun> runs;
  for (int k = 0; k < 3; ++k) {
    CorpusRun ref = run("ref-fp32-s" + std::to_string(k), s, -1, -1);
    ref.reference = true;
    ref.final_loss = 1.0 + 0.1 * k;  // training loss: a band of 3 x 0.1 / 1.1 = 27%
    ref.final_eval = 0.5 + 0.005 * k;  // evaluation loss: a band of 3 x 0.005 / 0.505 = 3.0%
    runs.push_back(ref);
  }
  // 10% worse on the evaluation, inside the training loss's band: a gap, flagged
  CorpusRun worse = run("optstate-a", s, -1, 40);
  worse.final_loss = 1.15, worse.reference_final = 1.0;
  worse.final_eval = 0.55, worse.reference_eval = 0.5;
  runs.push_back(worse);
  // 2% worse on the evaluation, 20% on the training loss: within the noise band, healthy
  CorpusRun noisy = run("healthy-a", s, -1, -1);
  noisy.final_loss = 1.2, noisy.reference_final = 1.0;
  noisy.final_eval = 0.51, noisy.reference_eval = 0.5;
  runs.push_back(noisy);

  const lpx::cli::GapBand b = lpx::cli::gap_band(runs, "mlp");
  CHECK(b.eval);
  CHECK(b.band == Approx(3 * 0.005 / 0.505).epsilon(1e-9));
  CHECK(lpx::cli::final_gap(worse, b) == Approx(0.1));
  CHECK(lpx::cli::verdict(worse, b) == "gap");
  CHECK(lpx::cli::verdict(noisy, b) == "ok");
  const auto j = lpx::cli::corpus_summary(runs, t, detector_names());
  CHECK(j["overall"]["gap"] == 1);
  CHECK(j["overall"]["gap_flagged"] == 1);
  CHECK(j["overall"]["healthy"] == 1);
  CHECK(j["gap_bands"]["mlp"]["on"] == "evaluation loss");
  CHECK(j["gap_flagged"][0]["final_gap"].get<double>() == Approx(0.1));

  // one reference without an evaluation: every verdict of the model falls back to the
  // training loss (a band from one figure never judges a run on the other)
  runs[1].final_eval = NAN;
  const lpx::cli::GapBand fallback = lpx::cli::gap_band(runs, "mlp");
  CHECK_FALSE(fallback.eval);
  CHECK(fallback.band == Approx(3 * 0.1 / 1.1).epsilon(1e-9));
  CHECK(lpx::cli::verdict(worse, fallback) == "ok");
  CHECK(lpx::cli::final_gap(noisy, fallback) == Approx(0.2));
  // a run whose evaluation loss overflowed is a gap, never ok
  CorpusRun overflowed = worse;
  overflowed.final_eval = INFINITY;
  CHECK(lpx::cli::verdict(overflowed, b) == "gap");
}
