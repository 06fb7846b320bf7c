// Bad input to the divergence options of lpx train and lpx report: one line, non-zero
// exit (docs/input-policy.md); and `lpx train --stop-on-divergence` stops at the flag the
// offline detectors (`lpx report`) put first on the same run.
#include <catch2/catch.hpp>

#include <fstream>

#include <nlohmann/json.hpp>

#include "cli_runner.hpp"

using namespace lpx_test;

namespace {
void write(const std::filesystem::path& p, const std::string& text) {
  std::ofstream f(p);
  f << text;
}
}  // namespace

TEST_CASE("train: unknown mechanism, layer, detector; injection past the run's end") {
  TempDir dir;
  struct Case {
    std::string args, says;
  };
  const Case cases[] = {
      {"--inject gradient --inject-step 2 --inject-layer fc1 --inject-magnitude 10", "is not a mechanism"},
      {"--inject activation --inject-step 50 --inject-layer fc1 --inject-magnitude 10", "past the run's end"},
      {"--inject activation --inject-step 2 --inject-layer fc7 --inject-magnitude 10", "is not a layer of this model"},
      {"--inject weight --inject-step 2 --inject-layer fc1", "needs --inject-step, --inject-layer and --inject-magnitude"},
      {"--inject-step 2", "need --inject activation|weight"},
      {"--stop-on-divergence --detectors loss_spike,no_such", "unknown detector 'no_such'"},
      {"--qk-norm", "needs --model gpt"},
      {"--master-weights bf8", "master-weights"},
      {"--optimizer-state fp4", "optimizer-state"},
      {"--fixed-batches 2000", "fixed-batches"},
      {"--fixed-batches -1", "fixed-batches"},
  };
  for (const auto& c : cases) {
    INFO(c.args);
    const CliResult r = run_lpx("train --model mlp --steps 20 --hidden 16 --batch 8 " + c.args, dir);
    CHECK(r.status == 2);
    CHECK(r.err_lines() == 1);
    CHECK_THAT(r.err, Catch::Contains(c.says));
  }
}

TEST_CASE("thresholds files: unknown keys and wrong types are one line each") {
  TempDir dir;
  write(dir / "unknown.json", R"({"attn_logit_growth": 2, "no_such_key": 1})");
  write(dir / "type.json", R"({"amax_staleness": "high"})");
  write(dir / "int.json", R"({"probe_baseline_rows": 2.5})");
  write(dir / "patience.json", R"({"fixed_batch_rise_patience": 0})");
  write(dir / "from.json", R"({"ramp_rise_from": -1})");
  for (const char* f : {"unknown.json", "type.json", "int.json", "patience.json", "from.json"}) {
    INFO(f);
    CliResult r = run_lpx(std::string("train --model mlp --steps 5 --hidden 16 --batch 8 --stop-on-divergence --thresholds ") +
                              (dir / f).string(),
                          dir);
    CHECK(r.status == 2);
    CHECK(r.err_lines() == 1);
  }
  // report refuses them as well (a run is needed first)
  std::filesystem::create_directories(dir / "runs");
  CliResult t = run_lpx("train --model mlp --steps 3 --hidden 16 --batch 8 --out " + (dir / "runs" / "run.h5").string(), dir);
  REQUIRE(t.status == 0);
  for (const char* f : {"unknown.json", "type.json"}) {
    const CliResult r = run_lpx("report " + (dir / "runs").string() + " --format json --thresholds " + (dir / f).string(), dir);
    CHECK(r.status != 0);
    CHECK(r.err_lines() == 1);
  }
  const CliResult r = run_lpx("report " + (dir / "runs").string() + " --format json --detectors nonfinite,bogus", dir);
  CHECK(r.status == 2);
  CHECK(r.err_lines() == 1);
  CHECK_THAT(r.err, Catch::Contains("unknown detector 'bogus'"));
}

TEST_CASE("online and offline detection agree on a run with the new detectors; --stop-on-divergence stops at the first flag") {
  TempDir dir;
  // an activation outlier under FP8 delayed scaling: amax_staleness (a new detector) fires at
  // the injection step. It is not in the default set (detectors.hpp, default_detectors), so
  // every detector is asked for.
  const std::string common = "train --model mlp --steps 40 --hidden 32 --batch 16 --threads 1 --recipe fp8-delayed "
                             "--inject activation --inject-step 30 --inject-layer fc1 --inject-magnitude 100 ";
  std::filesystem::create_directories(dir / "full");
  const CliResult full = run_lpx(common + "--out " + (dir / "full" / "run.h5").string(), dir);
  REQUIRE(full.status == 0);
  const CliResult rep = run_lpx("report " + (dir / "full").string() + " --format json --detectors all", dir);
  REQUIRE(rep.status == 0);
  const auto j = nlohmann::json::parse(rep.out)["runs"];
  REQUIRE(j.size() == 1);
  REQUIRE(j[0]["flagged"] == true);
  const int64_t first = j[0]["first_flag_step"].get<int64_t>();
  const std::string det = j[0]["first_flag_detector"].get<std::string>();
  CHECK(first == 30);
  // the outlier raises loss_spike and amax_staleness (a new detector) in the same step
  CHECK((det == "loss_spike" || det == "amax_staleness"));
  const CliResult stop = run_lpx(common + "--stop-on-divergence --detectors all --out " + (dir / "stop.h5").string(), dir);
  REQUIRE(stop.status == 0);
  CHECK_THAT(stop.out, Catch::Contains("stopped at step " + std::to_string(first + 1) + " of 40: step " +
                                       std::to_string(first) + ": " + det));
}

TEST_CASE("--fixed-batches: fixed_batch_rise flags the same step online and offline, with the default detectors") {
  TempDir dir;
  // a weight outlier at step 30 under BF16: the loss on the fixed held-out batches jumps at
  // that step (the outlier is in the weights it is measured on)
  const std::string common = "train --model mlp --steps 40 --hidden 32 --batch 16 --threads 1 --recipe bf16 "
                             "--inject weight --inject-step 30 --inject-layer fc0 --inject-magnitude 1000 ";
  std::filesystem::create_directories(dir / "full");
  REQUIRE(run_lpx(common + "--fixed-batches 2 --out " + (dir / "full" / "run.h5").string(), dir).status == 0);
  const CliResult rep = run_lpx("report " + (dir / "full").string() + " --format json", dir);
  REQUIRE(rep.status == 0);
  const auto j = nlohmann::json::parse(rep.out)["runs"];
  REQUIRE(j.size() == 1);
  REQUIRE(j[0]["flagged"] == true);
  CHECK(j[0]["first_flag_step"] == 30);
  CHECK(j[0]["first_flag_detector"] == "fixed_batch_rise");
  const CliResult stop = run_lpx(common + "--fixed-batches 2 --stop-on-divergence --out " + (dir / "stop.h5").string(), dir);
  REQUIRE(stop.status == 0);
  CHECK_THAT(stop.out, Catch::Contains("stopped at step 31 of 40: step 30: fixed_batch_rise"));
  // without the column the detector has nothing to read
  const CliResult plain = run_lpx(common + "--stop-on-divergence --out " + (dir / "plain.h5").string(), dir);
  REQUIRE(plain.status == 0);
  CHECK_THAT(plain.out, !Catch::Contains("fixed_batch_rise"));
  // ... and the run says so, once, where the default detectors include the two that read it
  const std::string note = "stay silent without --fixed-batches N";
  CHECK_THAT(plain.err, Catch::Contains(note));
  CHECK(plain.err_lines() == 1);
  CHECK_THAT(stop.err, !Catch::Contains(note));
  const CliResult spikes =
      run_lpx(common + "--stop-on-divergence --detectors loss_spike --out " + (dir / "spikes.h5").string(), dir);
  REQUIRE(spikes.status == 0);
  CHECK_THAT(spikes.err, !Catch::Contains(note));
}
