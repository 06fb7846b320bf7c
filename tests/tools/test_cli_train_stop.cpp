// `lpx train --stop-on-divergence`: a run whose loss blows up ends early at the first
// online flag (after a checkpoint); a healthy run trains to the end.
#include <catch2/catch.hpp>

#include "cli_runner.hpp"

using namespace lpx_test;

TEST_CASE("train --stop-on-divergence ends a diverging run early and leaves healthy runs alone") {
  TempDir dir;
  const std::string log = (dir / "run.h5").string();
  CliResult r = run_lpx("train --model mlp --steps 200 --lr 20 --stop-on-divergence --out " + log, dir);
  REQUIRE(r.status == 0);
  CHECK_THAT(r.out, Catch::Contains("stopped at step"));
  CHECK_FALSE(r.out.find("stopped at step 200 ") != std::string::npos);
  CHECK(std::filesystem::exists(log));

  r = run_lpx("train --model mlp --steps 40 --stop-on-divergence", dir);
  REQUIRE(r.status == 0);
  CHECK(r.out.find("stopped") == std::string::npos);
  CHECK_THAT(r.out, Catch::Contains("step      40"));
}

TEST_CASE("train --thresholds: needs --stop-on-divergence, and a valid file") {
  TempDir dir;
  CliResult r = run_lpx("train --model mlp --steps 5 --thresholds x.json", dir);
  CHECK(r.status == 2);
  CHECK(r.err_lines() == 1);
  {
    std::ofstream f(dir / "bad.json");
    f << "{\"no_such_threshold\": 1}";
  }
  r = run_lpx("train --model mlp --steps 5 --stop-on-divergence --thresholds " + (dir / "bad.json").string(), dir);
  CHECK(r.status != 0);
  CHECK(r.err_lines() == 1);
  CHECK_THAT(r.err, Catch::Contains("no_such_threshold"));
}
