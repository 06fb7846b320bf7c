// Kill a running `lpx sweep` (SIGKILL to its whole process group) after its first run has
// finished, rerun it: no finished run is repeated (done markers untouched) and every loss
// array equals an uninterrupted sweep's bit for bit. Real (tiny) `lpx train` runs.
#include <catch2/catch.hpp>

#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <thread>

#include "../tools/cli_runner.hpp"
#include "lpx/runlog/run_log.hpp"

using namespace lpx_test;
namespace fs = std::filesystem;

namespace {
const char* kGrid = "sweep --recipes bf16,mxfp8 --steps 24 --set batch=32 --set threads=1 --jobs 1 --out ";

bool same_bits(const std::vector<double>& a, const std::vector<double>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(double)) == 0;
}
}  // namespace

TEST_CASE("sweep: killed midway and rerun, finished runs are kept and results match") {
  TempDir d;
  const fs::path full = d / "full", cut = d / "cut";
  auto r = run_lpx(std::string(kGrid) + full.string(), d);
  REQUIRE(r.status == 0);
  const std::vector<std::string> runs = {"ref-fp32-s0", "bf16-batch32-threads1-s0", "mxfp8-batch32-threads1-s0"};
  for (const auto& n : runs) REQUIRE(fs::exists(full / n / "done"));

  // start the sweep in its own process group; kill the group once the first run is done
  const pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    setpgid(0, 0);
    const std::string cmd = std::string(LPX_BINARY) + " " + kGrid + cut.string() + " >/dev/null 2>&1";
    execl("/bin/sh", "sh", "-c", ("exec " + cmd).c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  setpgid(pid, pid);
  const auto t0 = std::chrono::steady_clock::now();
  while (!fs::exists(cut / runs[0] / "done") && std::chrono::steady_clock::now() - t0 < std::chrono::seconds(120))
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // into the second run
  kill(-pid, SIGKILL);
  int st = 0;
  waitpid(pid, &st, 0);
  REQUIRE(fs::exists(cut / runs[0] / "done"));
  const bool second_done = fs::exists(cut / runs[1] / "done");
  const auto mtime0 = fs::last_write_time(cut / runs[0] / "done");
  INFO("second run finished before the kill: " << second_done);

  r = run_lpx(std::string(kGrid) + cut.string(), d);
  REQUIRE(r.status == 0);
  CHECK(r.out.find("already done") != std::string::npos);
  CHECK(r.out.find(runs[0] + " finished") == std::string::npos);  // not run again
  CHECK(fs::last_write_time(cut / runs[0] / "done") == mtime0);
  for (const auto& n : runs) {
    INFO(n);
    REQUIRE(fs::exists(cut / n / "done"));
    const auto a = lpx::runlog::read_run((full / n / "run.h5").string());
    const auto b = lpx::runlog::read_run((cut / n / "run.h5").string());
    CHECK(b.metrics.step == a.metrics.step);
    CHECK(same_bits(a.metrics.loss, b.metrics.loss));
    CHECK(same_bits(a.metrics.grad_norm, b.metrics.grad_norm));
  }
}
