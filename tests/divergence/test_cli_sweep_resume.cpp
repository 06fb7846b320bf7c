// Kill a running `lpx sweep` (SIGKILL to its whole process group) after its first run has
// finished, rerun it: no finished run is repeated (done markers untouched) and every loss
// array equals an uninterrupted sweep's bit for bit. Kill the sweep alone: its runs end too
// and release their folders' locks. Real (tiny) `lpx train` runs.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
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

namespace {
// Processes whose parent is `parent` (from /proc/<pid>/stat).
std::vector<pid_t> children_of(pid_t parent) {
  std::vector<pid_t> kids;
  for (const auto& e : fs::directory_iterator("/proc")) {
    const std::string name = e.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    const std::string stat = slurp(e.path() / "stat");
    const size_t close = stat.rfind(')');
    if (close == std::string::npos) continue;
    char state = 0;
    int ppid = 0;
    if (std::sscanf(stat.c_str() + close + 1, " %c %d", &state, &ppid) == 2 && ppid == parent)
      kids.push_back(static_cast<pid_t>(std::stol(name)));
  }
  return kids;
}

// Gone, or a zombie nobody has reaped yet.
bool dead(pid_t pid) {
  const std::string stat = slurp("/proc/" + std::to_string(pid) + "/stat");
  const size_t close = stat.rfind(')');
  return stat.empty() || close == std::string::npos || stat[close + 2] == 'Z' || stat[close + 2] == 'X';
}

bool locked(const fs::path& p) {
  const int fd = open(p.c_str(), O_RDWR);
  if (fd < 0) return false;
  const bool held = flock(fd, LOCK_EX | LOCK_NB) != 0;
  close(fd);
  return held;
}
}  // namespace

TEST_CASE("sweep: SIGKILL to the sweep alone ends its runs too, and frees their folders") {
  TempDir d;
  const fs::path out = d / "o";
  const pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    const int null = open("/dev/null", O_WRONLY);
    dup2(null, STDOUT_FILENO);
    dup2(null, STDERR_FILENO);
    const std::string o = out.string();
    execl(LPX_BINARY, LPX_BINARY, "sweep", "--recipes", "bf16", "--steps", "1000000", "--set", "threads=1", "--jobs",
          "2", "--out", o.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  std::vector<pid_t> kids;
  const auto t0 = std::chrono::steady_clock::now();
  while (kids.size() < 2 && std::chrono::steady_clock::now() - t0 < std::chrono::seconds(60)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    kids = children_of(pid);
  }
  REQUIRE(kids.size() == 2);
  // each run holds its folder's lock while it runs
  const auto t1 = std::chrono::steady_clock::now();
  while (!(locked(out / "ref-fp32-s0" / "run.lock") && locked(out / "bf16-threads1-s0" / "run.lock")) &&
         std::chrono::steady_clock::now() - t1 < std::chrono::seconds(30))
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  CHECK(locked(out / "ref-fp32-s0" / "run.lock"));
  CHECK(locked(out / "bf16-threads1-s0" / "run.lock"));

  kill(pid, SIGKILL);  // the sweep only, not its process group
  int st = 0;
  waitpid(pid, &st, 0);
  const auto t2 = std::chrono::steady_clock::now();
  bool all_dead = false;
  while (!all_dead && std::chrono::steady_clock::now() - t2 < std::chrono::seconds(10)) {
    all_dead = std::all_of(kids.begin(), kids.end(), dead);
    if (!all_dead) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  for (pid_t k : kids)
    if (!dead(k)) kill(k, SIGKILL);  // do not leave them behind when the check fails
  CHECK(all_dead);
  CHECK_FALSE(locked(out / "ref-fp32-s0" / "run.lock"));
  CHECK_FALSE(locked(out / "bf16-threads1-s0" / "run.lock"));
}
