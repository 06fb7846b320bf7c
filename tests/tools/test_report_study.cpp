// Seed statistics and blame of lpx report (tools/lpx/report_study.hpp), against values
// worked out by hand from the definitions (and Student's t tables).
#include <algorithm>
#include <cmath>

#include <catch2/catch.hpp>

#include "report_study.hpp"

using namespace lpx::cli;

TEST_CASE("t quantiles are the table's two-sided 95% values") {
  CHECK(t_quantile_975(1) == Approx(12.706));
  CHECK(t_quantile_975(2) == Approx(4.303));
  CHECK(t_quantile_975(10) == Approx(2.228));
  CHECK(t_quantile_975(30) == Approx(2.042));
  CHECK(t_quantile_975(60) == Approx(2.000).margin(0.002));   // tables: 2.000
  CHECK(t_quantile_975(120) == Approx(1.980).margin(0.002));  // tables: 1.980
  CHECK(std::isnan(t_quantile_975(0)));
}

TEST_CASE("t_interval: mean and 95% interval; one value has no interval") {
  const Interval i = t_interval({1.0, 2.0, 3.0});  // mean 2, sd 1
  CHECK(i.n == 3);
  CHECK(i.mean == Approx(2.0));
  CHECK(i.hi - i.mean == Approx(4.303 / std::sqrt(3.0)));
  CHECK(i.mean - i.lo == Approx(4.303 / std::sqrt(3.0)));
  const Interval one = t_interval({5.0, NAN});
  CHECK(one.n == 1);
  CHECK(one.mean == 5.0);
  CHECK(std::isnan(one.lo));
  CHECK(gap_text(one) == "+500.00% (one seed)");
}

namespace {
StudyRun run(std::string recipe, uint64_t seed, double loss, double ref, std::string config = "-") {
  return StudyRun{recipe + "-s" + std::to_string(seed), recipe, std::move(config), seed, false, loss, ref};
}
}  // namespace

TEST_CASE("config_stats pairs each seed with its reference and calls the verdict from the interval") {
  std::vector<StudyRun> runs;
  // reference losses 2.0, 2.1, 1.9 (relative sd 0.05)
  const double ref[] = {2.0, 2.1, 1.9};
  runs.push_back(StudyRun{"ref-s0", "fp32", "-", 0, true, 2.0, NAN});
  for (uint64_t s = 0; s < 3; ++s) {
    runs.push_back(run("bad", s, ref[s] * (1.10 + 0.01 * static_cast<double>(s)), ref[s]));  // +10, +11, +12 %
    runs.push_back(run("noise", s, ref[s] * (1.0 + (s == 0 ? 0.01 : s == 1 ? -0.01 : 0.0)), ref[s]));
    runs.push_back(run("good", s, ref[s] * (0.95 - 0.01 * static_cast<double>(s)), ref[s]));
  }
  runs.push_back(run("single", 0, 2.2, 2.0));
  const auto stats = config_stats(runs);
  REQUIRE(stats.size() == 4);
  CHECK(stats[0].recipe == "bad");
  CHECK(stats[0].gap.n == 3);
  CHECK(stats[0].gap.mean == Approx(0.11));
  CHECK(stats[0].gap.hi - stats[0].gap.mean == Approx(4.303 * 0.01 / std::sqrt(3.0)));
  CHECK(stats[0].verdict == "worse");
  CHECK(stats[0].reference_spread == Approx(0.1 / 2.0));
  CHECK_FALSE(stats[0].within_seed_spread);
  CHECK(stats[1].verdict == "not resolved");
  CHECK(stats[1].within_seed_spread);
  CHECK(stats[2].verdict == "better");
  CHECK(stats[3].verdict == "one seed");
  CHECK(stats[3].gap.n == 1);
  const auto j = to_json(stats[0]);
  CHECK(j["seeds"] == 3);
  CHECK(j["distinguishable"] == true);
  CHECK(j["gap_ci95"].size() == 2);
  CHECK(to_json(stats[3])["gap_ci95"].is_null());
}

TEST_CASE("blame: shares of the gap per unit, ranked by the only-this-unit share") {
  // Reference 2.0 for both seeds; the recipe is 0.10 above it. Unit A alone makes 0.08 of it
  // and removing it closes 0.07; unit B alone makes 0.01 and removing it closes 0.02.
  std::vector<StudyRun> runs;
  for (uint64_t s = 0; s < 2; ++s) {
    const double d = s == 0 ? 0.0 : 0.002;  // a little seed noise
    runs.push_back(StudyRun{"ref", "fp32", "-", s, true, 2.0, NAN});
    runs.push_back(run("r", s, 2.10 + d, 2.0));
    runs.push_back(run("r.only-fwd_x", s, 2.08 + d, 2.0));
    runs.push_back(run("r.without-fwd_x", s, 2.03 + d, 2.0));
    runs.push_back(run("r.only-block1", s, 2.01, 2.0));
    runs.push_back(run("r.without-block1", s, 2.08 + d, 2.0));
  }
  const auto b = blame(runs);
  REQUIRE(b.size() == 1);
  CHECK(b[0].recipe == "r");
  CHECK(b[0].full_gap.mean == Approx(0.101));
  REQUIRE(b[0].rows.size() == 2);
  CHECK(b[0].rows[0].unit == "fwd_x");
  CHECK(b[0].rows[0].only_share.mean == Approx(0.081 / 0.101));
  CHECK(b[0].rows[0].closed_share.mean == Approx(0.07 / 0.101));
  CHECK(b[0].rows[1].unit == "block1");
  CHECK(b[0].rows[1].only_share.mean == Approx(0.01 / 0.101));
  CHECK(b[0].rows[1].seeds == 2);
  // no ablation runs: no blame table
  runs.erase(std::remove_if(runs.begin(), runs.end(), [](const StudyRun& r) { return r.recipe != "r" && !r.reference; }),
             runs.end());
  CHECK(blame(runs).empty());
}
