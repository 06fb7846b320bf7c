// `lpx sweep` argument and spec errors (one stderr line, exit 2), the Slurm script and the
// dry run. The kill-and-rerun test needs the log reader: tests/divergence/test_cli_sweep_resume.cpp.
#include <catch2/catch.hpp>

#include "cli_runner.hpp"

using namespace lpx_test;

TEST_CASE("sweep: malformed specs are usage errors on one line") {
  TempDir d;
  auto spec = [&](const std::string& text) {
    std::ofstream(d / "spec.json") << text;
    return run_lpx("sweep " + (d / "spec.json").string() + " --out " + (d / "out").string(), d);
  };
  for (const char* bad : {"{", "[1,2]", R"({"grid": {"recipe": "mxfp8"}})", R"({"grid": {"recipe": ["mxfp8"]}, "colour": 1})",
                          R"({"grid": {"recipe": ["mxfp8"], "learning_rate": [1]}})", R"({"seeds": 2})",
                          R"({"grid": {"recipe": ["mxfp8"]}, "detectors": {"loss_spike": 3}})"}) {
    const auto r = spec(bad);
    INFO(bad << " -> " << r.err);
    CHECK(r.status == 2);
    CHECK(r.err_lines() == 1);
  }
  const auto r = spec(R"({"grid": {"recipe": ["mxfp8", "no-such-recipe"]}})");
  CHECK(r.status == 2);
  CHECK(r.err.find("unknown recipe 'no-such-recipe'; known: ") != std::string::npos);
  CHECK(run_lpx("sweep " + (d / "absent.json").string() + " --out x", d).status == 2);
}

TEST_CASE("sweep: unknown recipe and bad flags from the command line") {
  TempDir d;
  auto r = run_lpx("sweep --recipes mxfp9 --out " + (d / "o").string(), d);
  CHECK(r.status == 2);
  CHECK(r.err.find("unknown recipe 'mxfp9'") != std::string::npos);
  r = run_lpx("sweep --recipes mxfp8 --set lr --out " + (d / "o").string(), d);
  CHECK(r.status == 2);
  r = run_lpx("sweep --recipes mxfp8", d);
  CHECK(r.status == 2);
  CHECK(r.err.find("--out") != std::string::npos);
  r = run_lpx("sweep --recipes mxfp8 --out " + (d / "o").string() + " --submit", d);
  CHECK(r.status == 2);
}

TEST_CASE("sweep: dry run lists the grid with a reference run per seed") {
  TempDir d;
  const auto r = run_lpx("sweep --recipes mxfp8,nvfp4 --seeds 2 --set lr=1e-3,3e-3 --steps 10 --dry-run --out " +
                             (d / "o").string(), d);
  REQUIRE(r.status == 0);
  int lines = 0;
  for (char c : r.out) lines += c == '\n';
  CHECK(lines == 2 + 2 * 2 * 2);
  CHECK(r.out.find("ref-fp32-s1 ") != std::string::npos);
  CHECK(r.out.find("mxfp8-lr0.003-s1 ") != std::string::npos);
  CHECK(r.out.find("--recipe nvfp4") != std::string::npos);
  CHECK(std::filesystem::exists(d / "o" / "sweep.json"));
}

TEST_CASE("sweep: --launcher slurm writes a job array; --submit needs sbatch") {
  TempDir d;
  const auto out = (d / "o").string();
  const auto r = run_lpx("sweep --recipes mxfp8,bf16 --seeds 3 --steps 10 --jobs 4 --launcher slurm --out " + out, d);
  REQUIRE(r.status == 0);
  const std::string s = slurp(d / "o" / "sweep.sbatch");
  CHECK(s.find("#SBATCH --array=0-8%4") != std::string::npos);
  CHECK(s.find("--resume") != std::string::npos);
  CHECK(s.find("done.tmp") != std::string::npos);
  if (std::system("command -v sbatch >/dev/null 2>&1") != 0) {
    const auto s2 = run_lpx("sweep --recipes mxfp8 --steps 10 --launcher slurm --submit --out " + out, d);
    CHECK(s2.status == 1);
    CHECK(s2.err.find("needs sbatch") != std::string::npos);
  }
}
