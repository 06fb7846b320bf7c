// `lpx sweep` argument and spec errors (one stderr line, exit 2), the Slurm script and the
// dry run, and the input policy (docs/input-policy.md): range checks, JSON depth, size and
// duplicate keys, control characters, quoting in the Slurm script, locked run folders, write
// errors. The kill tests need the log reader: tests/divergence/test_cli_sweep_resume.cpp.
#include <catch2/catch.hpp>

#include <algorithm>
#include <sstream>

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

TEST_CASE("sweep: dry run lists the grid with a reference run per seed and baseline") {
  TempDir d;
  const auto r = run_lpx("sweep --recipes mxfp8,nvfp4 --seeds 2 --set lr=1e-3,3e-3 --steps 10 --dry-run --out " +
                             (d / "o").string(), d);
  REQUIRE(r.status == 0);
  int lines = 0;
  for (char c : r.out) lines += c == '\n';
  CHECK(lines == 2 * 2 + 2 * 2 * 2);  // a reference per seed and lr: fp32 at that lr
  CHECK(r.out.find("ref-fp32-lr0.003-s1 ") != std::string::npos);
  CHECK(r.out.find("ref-fp32-s1 ") == std::string::npos);
  CHECK(r.out.find("mxfp8-lr0.003-s1 ") != std::string::npos);
  CHECK(r.out.find("--recipe nvfp4") != std::string::npos);
  CHECK(std::filesystem::exists(d / "o" / "sweep.json"));
  // the GEMM order is a run key; its reference runs in the same order
  const auto g = run_lpx("sweep --recipes mxfp8 --set gemm=exact --steps 10 --dry-run --out " + (d / "g").string(), d);
  REQUIRE(g.status == 0);
  CHECK(g.out.find("mxfp8-gemmexact-s0 ") != std::string::npos);
  CHECK(g.out.find("ref-fp32-s0 ") != std::string::npos);
  CHECK(g.out.find("--gemm exact") != g.out.rfind("--gemm exact"));  // on both lines
  CHECK(run_lpx("sweep --recipes mxfp8 --set gemm=tf32 --dry-run --out " + (d / "t").string(), d).status == 2);
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

// ---- input policy (docs/input-policy.md) ----------------------------------------------

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <unistd.h>

#include <chrono>
#include <thread>

namespace {
namespace fs = std::filesystem;

// run_lpx under `timeout`, so a command that hangs fails the test (status 124) instead of
// holding it until ctest's limit.
CliResult run_lpx_t(const std::string& args, const TempDir& d, int seconds = 60) {
  const auto out = d / "stdout.txt", err = d / "stderr.txt";
  const std::string cmd = "timeout " + std::to_string(seconds) + " " + std::string(LPX_BINARY) + " " + args + " >" +
                          out.string() + " 2>" + err.string();
  const int raw = std::system(cmd.c_str());
  CliResult r;
  r.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : 128 + WTERMSIG(raw);
  r.out = slurp(out);
  r.err = slurp(err);
  return r;
}

// A word for /bin/sh: '...' with ' as '\''.
std::string sq(const std::string& s) {
  std::string o = "'";
  for (char c : s) o += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return o + "'";
}

// A child process holding an exclusive flock on `path` until it is killed.
pid_t hold_lock(const fs::path& path) {
  int ready[2];
  REQUIRE(pipe(ready) == 0);
  const pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    const int fd = open(path.c_str(), O_RDWR | O_CREAT, 0644);
    if (fd < 0 || flock(fd, LOCK_EX) != 0) _exit(1);
    if (write(ready[1], "x", 1) != 1) _exit(1);
    pause();
    _exit(0);
  }
  close(ready[1]);
  char c = 0;
  REQUIRE(read(ready[0], &c, 1) == 1);
  close(ready[0]);
  return pid;
}

void release(pid_t pid) {
  kill(pid, SIGKILL);
  waitpid(pid, nullptr, 0);
}

// The words sbatch makes of an "#SBATCH ..." line (its _get_argument): a backslash takes the
// next character as it is, '"' groups, an unescaped '#' starts a comment.
std::vector<std::string> sbatch_words(const std::string& line) {
  std::vector<std::string> words;
  std::string w;
  bool esc = false, quoted = false, any = false;
  for (char c : line) {
    if (esc) { w += c; esc = false; any = true; continue; }
    if (c == '\\') { esc = true; continue; }
    if (c == '"') { quoted = !quoted; continue; }
    if (c == '#' && !quoted) break;
    if (c == ' ' && !quoted) {
      if (any) words.push_back(w);
      w.clear();
      any = false;
      continue;
    }
    w += c;
    any = true;
  }
  if (any) words.push_back(w);
  return words;
}
}  // namespace

TEST_CASE("sweep: every count, size and rate is range-checked; a bad value is an error, never a default") {
  TempDir d;
  const std::string out = (d / "o").string();
  // spec fields
  for (const std::string bad :
       {R"("jobs": 0)", R"("jobs": -4)", R"("jobs": 1025)", R"("jobs": "2")", R"("jobs": 2.5)", R"("steps": 0)",
        R"("steps": -1)", R"("steps": 1e30)", R"("seeds": 0)", R"("seeds": -1)", R"("seeds": [])", R"("seeds": [-1])",
        R"("seeds": [1.5])", R"("seeds": 100000)", R"("model": "cnn")", R"("out": "")", R"("name": 7)",
        R"("fixed": {"batch": 0})", R"("fixed": {"lr": -1e-3})", R"("fixed": {"lr": 0})", R"("fixed": {"threads": 2000})",
        R"("fixed": {"threads": -1})", R"("fixed": {"weight_decay": -0.1})", R"("fixed": {"hidden": "256,0"})",
        R"("fixed": {"hidden": []})", R"("fixed": {"eval_every": -5})", R"("fixed": {"activation": "tanh"})",
        R"("fixed": {"data": 3})", R"("fixed": {"heads": 0})", R"("grid": {"recipe": ["mxfp8"], "lr": [1e-3, "x"]})",
        R"("grid": {"recipe": ["mxfp8"], "batch": [64, 1e9]})", R"("runs": [{"recipe": "fp32", "stats_every": -1}])",
        R"("grid": {"recipe": ["mxfp8"], "lr": [1,2,3,4,5,6,7,8,9,10], "batch": [1,2,3,4,5,6,7,8,9,10],
           "layers": [1,2,3,4,5,6,7,8,9,10], "context": [1,2,3,4,5,6,7,8,9,10]})"}) {
    std::string text = "{" + bad + "}";
    if (bad.find("\"grid\"") == std::string::npos) text = R"({"grid": {"recipe": ["mxfp8"]}, )" + bad + "}";
    std::ofstream(d / "spec.json") << text;
    const auto s = run_lpx_t("sweep " + (d / "spec.json").string() + " --out " + out, d, 30);
    INFO(text << " -> " << s.status << ": " << s.err);
    CHECK(s.status == 2);
    CHECK(s.err_lines() == 1);
    CHECK(s.err.find("spec.json: ") != std::string::npos);
    CHECK_FALSE(fs::exists(out));  // refused before anything is written
  }
  // command-line options
  for (const char* bad : {"--jobs 0", "--jobs -4", "--jobs 5000", "--jobs 0x10", "--jobs 1e1", "--seeds 0", "--seeds -2",
                          "--steps 0", "--steps -5", "--steps 0b11",
                          "--set lr=-1", "--set lr=nan", "--set lr=inf", "--set batch=1.5", "--set batch=0",
                          "--set threads=99999", "--set hidden=256,,1", "--set steps=99999999999999999999",
                          "--model foo", "--launcher pbs", "--reference nope"}) {
    const auto r = run_lpx_t(std::string("sweep --recipes mxfp8 --dry-run ") + bad + " --out " + out, d, 30);
    INFO(bad << " -> " << r.status << ": " << r.err);
    CHECK(r.status == 2);
    CHECK(r.err_lines() == 1);
    CHECK_FALSE(fs::exists(out));
  }
  // the limits themselves are fine
  const auto ok = run_lpx_t("sweep --recipes mxfp8 --dry-run --jobs 1024 --seeds 2 --steps 1 --set threads=0,1024 --out " + out, d);
  CHECK(ok.status == 0);
  CHECK(ok.err.empty());
}

TEST_CASE("sweep: deep, large and duplicate-key specs are refused at once, with one line naming the file") {
  TempDir d;
  const std::string out = (d / "o").string();
  const std::string spec = (d / "spec.json").string();
  const auto refused = [&](const std::string& text, const std::string& why) {
    std::ofstream(spec, std::ios::trunc) << text;
    const auto t0 = std::chrono::steady_clock::now();
    const auto r = run_lpx_t("sweep " + spec + " --dry-run --out " + out, d, 30);
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    INFO(why << " -> " << r.status << ": " << r.err.substr(0, 300));
    CHECK(r.status == 2);
    CHECK(r.err_lines() == 1);
    CHECK(r.err.find(spec + ": " + why) != std::string::npos);
    CHECK(secs < 10);
    CHECK_FALSE(fs::exists(out));
  };
  const std::string deep = std::string(30000, '[') + std::string(30000, ']');
  refused(R"({"grid": {"recipe": ["mxfp8"]}, "fixed": {"data": )" + deep + "}}", "JSON nested deeper than 64 levels");
  refused(R"({"grid": {"recipe": ["mxfp8"]}, "description": )" + deep + "}", "JSON nested deeper than 64 levels");
  refused(R"({"grid": {"recipe": ["mxfp8"]}, "steps": 3, "steps": 5})", "duplicate key \"steps\"");
  refused(R"({"grid": {"recipe": ["mxfp8"], "recipe": ["bf16"]}})", "duplicate key \"recipe\"");
  refused(R"({"grid": {"recipe": ["mxfp8"]}})" + std::string((size_t{16} << 20) + 1, ' '), "more than 16777216 bytes");
}

TEST_CASE("sweep: control characters in paths and names are refused before anything is written") {
  TempDir d;
  const auto r = run_lpx_t("sweep --recipes mxfp8 --steps 2 --launcher slurm --out " +
                               sq((d / "s").string() + "\ntouch " + (d / "PWNED").string() + "\n#"),
                           d);
  CHECK(r.status == 2);
  CHECK(r.err_lines() == 1);
  CHECK(r.err.find("control character") != std::string::npos);
  CHECK(std::distance(fs::directory_iterator(d.path()), fs::directory_iterator()) == 2);  // stdout.txt, stderr.txt
  for (const std::string field : {R"("out": "a\nb")", R"("fixed": {"data": "x\ty"})", R"("name": "a\u0000b")",
                                  R"("runs": [{"name": "a\rb", "recipe": "fp32"}])"}) {
    std::ofstream(d / "spec.json", std::ios::trunc) << R"({"grid": {"recipe": ["mxfp8"]}, )" + field + "}";
    const auto s = run_lpx_t("sweep " + (d / "spec.json").string() + " --dry-run --out " + (d / "o").string(), d);
    INFO(field << " -> " << s.err);
    CHECK(s.status == 2);
    CHECK(s.err_lines() == 1);
    CHECK(s.err.find("control character") != std::string::npos);
    CHECK_FALSE(fs::exists(d / "o"));
  }
  // a recipe file whose name holds a newline
  std::ofstream(d / "a\nb.json") << "{}";
  const auto s = run_lpx_t("sweep --recipes " + sq((d / "a\nb.json").string()) + " --dry-run --out " + (d / "o").string(), d);
  CHECK(s.status == 2);
  CHECK(s.err_lines() == 1);
}

TEST_CASE("sweep: the Slurm script quotes every value; run from another folder, it passes each argument whole") {
  TempDir d;
  // a recipe file and an output folder with spaces, quotes, $(...), '#' and '%' in their paths
  const fs::path rdir = d / "my recipes 'x'";
  fs::create_directories(rdir);
  const fs::path recipe = rdir / "it's $(touch PWNED) #1.json";
  std::ofstream(recipe) << R"({"name": "mine", "base": "mxfp8"})";
  const fs::path out = d / "out dir 'q' $(touch PWNED) #%A";
  const auto r = run_lpx_t("sweep --recipes " + sq(recipe.string()) + ",bf16 --steps 2 --launcher slurm --out " +
                               sq(out.string()), d);
  REQUIRE(r.status == 0);
  const fs::path script = out / "sweep.sbatch";
  REQUIRE(fs::exists(script));
  CHECK(std::system(("bash -n " + sq(script.string())).c_str()) == 0);
  const std::string text = slurp(script);
  // every #SBATCH line is one option word as sbatch reads it; --output is the folder, '%' doubled
  std::stringstream lines(text);
  bool saw_output = false;
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("#SBATCH ", 0) != 0) continue;
    const auto words = sbatch_words(line.substr(8));
    INFO(line);
    CHECK(words.size() == 1);
    if (!words.empty() && words[0].rfind("--output=", 0) == 0) {
      saw_output = true;
      std::string want = "--output=";
      for (char c : out.string()) want += c == '%' ? std::string("%%") : std::string(1, c);
      want += "/slurm-%A_%a.out";
      CHECK(words[0] == want);
    }
  }
  CHECK(saw_output);

  // run task 1 (the recipe file's run) with a stand-in for lpx that records its arguments,
  // from another working directory
  const fs::path stub = d / "stub.sh", args_file = d / "args.txt";
  std::ofstream(stub) << "#!/bin/sh\nfor a in \"$@\"; do printf '%s\\n' \"$a\"; done >" << sq(args_file.string()) << "\n";
  fs::permissions(stub, fs::perms::owner_all);
  std::string patched;
  std::stringstream all(text);
  for (std::string line; std::getline(all, line);)
    patched += (line.rfind("LPX=", 0) == 0 ? "LPX=" + sq(stub.string()) : line) + "\n";
  std::ofstream(d / "patched.sbatch") << patched;
  fs::create_directories(d / "elsewhere");
  const int rc = std::system(("cd " + sq((d / "elsewhere").string()) + " && SLURM_ARRAY_TASK_ID=1 bash " +
                              sq((d / "patched.sbatch").string()) + " >/dev/null 2>&1")
                                 .c_str());
  CHECK(rc == 0);
  std::vector<std::string> got;
  std::stringstream as(slurp(args_file));
  for (std::string a; std::getline(as, a);) got.push_back(a);
  const std::string run = "it_s___touch_PWNED___1-s0";
  const std::vector<std::string> want = {"train", "--seed", "0", "--model", "mlp", "--steps", "2",
                                         "--recipe", fs::absolute(recipe).lexically_normal().string(),
                                         "--checkpoint-every", "1", "--threads", "1", "--progress-every", "5",
                                         "--out", (out / run / "run.h5").string()};
  CHECK(got == want);
  CHECK(fs::exists(out / run / "done"));
  for (const auto& e : fs::recursive_directory_iterator(d.path())) CHECK(e.path().filename() != "PWNED");
}

TEST_CASE("sweep: a run folder locked by a live process is left alone; so is a folder another sweep holds") {
  TempDir d;
  const fs::path out = d / "o";
  const std::string grid = "sweep --recipes bf16 --steps 2 --set batch=16 --set threads=1 --out " + out.string();
  fs::create_directories(out / "ref-fp32-s0");
  std::ofstream(out / "ref-fp32-s0" / "run.h5") << "sentinel";
  const pid_t holder = hold_lock(out / "ref-fp32-s0" / "run.lock");
  auto r = run_lpx_t(grid, d, 300);
  CHECK(r.status == 1);
  CHECK(r.err_lines() == 1);
  CHECK(r.err.find("skipped because a live process holds their folder (ref-fp32-s0)") != std::string::npos);
  CHECK(r.out.find("ref-fp32-s0 SKIPPED") != std::string::npos);
  CHECK(slurp(out / "ref-fp32-s0" / "run.h5") == "sentinel");  // neither deleted nor resumed
  CHECK_FALSE(fs::exists(out / "ref-fp32-s0" / "done"));
  CHECK(fs::exists(out / "bf16-batch16-threads1-s0" / "done"));  // the others ran
  release(holder);
  // once the holder is gone, the rerun takes the run over (not a log: started afresh)
  r = run_lpx_t(grid, d, 300);
  CHECK(r.status == 0);
  CHECK(fs::exists(out / "ref-fp32-s0" / "done"));
  CHECK(slurp(out / "ref-fp32-s0" / "run.h5") != "sentinel");

  // a second sweep into a folder a sweep is running in: one line, nothing touched
  const std::string plan = slurp(out / "sweep.json");
  const pid_t sweep = hold_lock(out / "sweep.lock");
  r = run_lpx_t("sweep --recipes mxfp8 --steps 2 --dry-run --out " + out.string(), d);
  release(sweep);
  CHECK(r.status == 1);
  CHECK(r.err_lines() == 1);
  CHECK(r.err.find("in use by another lpx sweep") != std::string::npos);
  CHECK(slurp(out / "sweep.json") == plan);
}

TEST_CASE("sweep: a failed write to standard output is an error") {
  TempDir d;
  const std::string cmd = "timeout 60 " + std::string(LPX_BINARY) + " sweep --recipes mxfp8 --dry-run --out " +
                          (d / "o").string() + " >/dev/full 2>" + (d / "err.txt").string();
  const int raw = std::system(cmd.c_str());
  CHECK(WIFEXITED(raw));
  CHECK(WEXITSTATUS(raw) == 1);
  CHECK(slurp(d / "err.txt").find("cannot write to standard output") != std::string::npos);
}

// ---- Slurm job settings (README "Sweeps on Slurm") -------------------------------------

TEST_CASE("sweep: Slurm job settings reach the script; the array is unlimited unless --jobs asks") {
  TempDir d;
  const fs::path out = d / "o";
  const auto r = run_lpx_t("sweep --recipes mxfp8 --seeds 2 --steps 2 --launcher slurm --slurm-partition gpu,cpu "
                           "--slurm-time 1-02:30:00 --slurm-mem 4G --slurm-account proj_1 --slurm-cpus-per-task 3 "
                           "--sbatch-arg=--qos=low --sbatch-arg '--comment=a b' --out " + out.string(), d);
  REQUIRE(r.status == 0);
  const std::string s = slurp(out / "sweep.sbatch");
  for (const char* want : {"#SBATCH --array=0-3\n", "#SBATCH --cpus-per-task=3\n", "#SBATCH --partition=gpu,cpu\n",
                           "#SBATCH --time=1-02:30:00\n", "#SBATCH --mem=4G\n", "#SBATCH --account=proj_1\n",
                           "#SBATCH --qos=low\n", "#SBATCH --comment=a\\ b\n", "THREADS=\"${SLURM_CPUS_PER_TASK:-3}\"",
                           "--threads \"$THREADS\"", "OMP_WAIT_POLICY"}) {
    INFO(want);
    CHECK(s.find(want) != std::string::npos);
  }
  CHECK(std::system(("bash -n " + sq((out / "sweep.sbatch").string())).c_str()) == 0);
  // a swept threads value is the run's own, not appended twice
  const auto t = run_lpx_t("sweep --recipes mxfp8 --steps 2 --set threads=2 --launcher slurm --jobs 2 --out " +
                           (d / "t").string(), d);
  REQUIRE(t.status == 0);
  const std::string st = slurp(d / "t" / "sweep.sbatch");
  CHECK(st.find("#SBATCH --array=0-1%2\n") != std::string::npos);
  CHECK(st.find("THREADS='2'") != std::string::npos);
  CHECK(st.find("'--threads'") == std::string::npos);
}

TEST_CASE("sweep: bad Slurm settings are one line each, exit 2, nothing written or submitted") {
  TempDir d;
  const std::string base = "sweep --recipes mxfp8 --steps 2 --launcher slurm --out " + (d / "o").string() + " ";
  for (const std::string bad :
       {"--slurm-time 25h", "--slurm-time 1:2:3:4", "--slurm-time ''", "--slurm-mem 4GB", "--slurm-mem -1",
        "--slurm-mem 1.5G", "--slurm-partition 'a b'", "--slurm-partition '$(touch PWNED)'", "--slurm-account 'x;y'",
        "--slurm-cpus-per-task 0", "--slurm-cpus-per-task 1e3", "--sbatch-arg=qos", "--sbatch-arg=--array=0-3",
        "--sbatch-arg=--output=/tmp/x", "--sbatch-arg=-c4", "--sbatch-arg=--time=10", "--slurm-nodes 2",
        "--slurm-time"}) {
    const auto r = run_lpx_t(base + bad, d);
    INFO(bad << " -> " << r.err);
    CHECK(r.status == 2);
    CHECK(r.err_lines() == 1);
    CHECK_FALSE(fs::exists(d / "o"));
  }
  const auto local = run_lpx_t("sweep --recipes mxfp8 --steps 2 --slurm-mem 4G --out " + (d / "o").string(), d);
  CHECK(local.status == 2);
  CHECK(local.err.find("need --launcher slurm") != std::string::npos);
  CHECK_FALSE(fs::exists(d / "o"));
  // --submit with no sbatch on PATH: one line, exit 1, not even the script
  const std::string cmd = "env PATH=/nonexistent " + std::string(LPX_BINARY) + " " + base +
                          "--submit >" + (d / "so").string() + " 2>" + (d / "se").string();
  const int raw = std::system(cmd.c_str());
  CHECK(WEXITSTATUS(raw) == 1);
  const std::string err = slurp(d / "se");
  CHECK(err.find("needs sbatch") != std::string::npos);
  CHECK(std::count(err.begin(), err.end(), '\n') == 1);
  CHECK_FALSE(fs::exists(d / "o"));
  for (const auto& e : fs::recursive_directory_iterator(d.path())) CHECK(e.path().filename() != "PWNED");
}

TEST_CASE("sweep: under a fake sbatch that runs every array task, hostile names create nothing outside the sweep") {
  TempDir d;
  // a recipe file and a data folder (a link to Fashion-MNIST) whose paths hold quotes, $(), ;, #, % and spaces
  const fs::path rdir = d / "rec 'x' $(touch PWNED1); #";
  fs::create_directories(rdir);
  const fs::path recipe = rdir / "r'; touch PWNED2 #%a $HOME `id`.json";
  fs::copy_file(fs::path(LPX_TEST_DATA_DIR).parent_path().parent_path() / "recipes" / "catalogue" / "bf16.json", recipe);
  const fs::path data = d / "data \"q\" $(touch PWNED3) ;x";
  fs::create_directory_symlink("/usr/share/datasets/fashion-mnist", data);
  const fs::path fake = d / "bin";
  fs::create_directories(fake);
  // runs each task of the array the way Slurm would: SLURM_ARRAY_TASK_ID set, from another folder
  std::ofstream(fake / "sbatch") << "#!/bin/bash\nset -e\nscript=\"$1\"\n"
                                    "n=$(sed -n 's/^#SBATCH --array=0-\\([0-9]*\\).*/\\1/p' \"$script\")\n"
                                    "cd /\nfor i in $(seq 0 \"$n\"); do SLURM_ARRAY_TASK_ID=$i bash \"$script\" "
                                    ">/dev/null; done\necho \"Submitted batch job 1\"\n";
  fs::permissions(fake / "sbatch", fs::perms::owner_all);
  const fs::path out = d / "sweep $(touch PWNED4) 'o' ;#%A";
  std::vector<std::string> before;
  for (const auto& e : fs::recursive_directory_iterator(d.path())) before.push_back(e.path().string());
  const std::string cmd = "cd / && env PATH=" + sq(fake.string()) + ":\"$PATH\" " + std::string(LPX_BINARY) +
                          " sweep --recipes " + sq(recipe.string()) + " --steps 2 --set hidden=8 --set data=" +
                          sq(data.string()) + " --set batch=8,16 --launcher slurm --submit --out " + sq(out.string()) +
                          " >" + sq((d / "so").string()) + " 2>" + sq((d / "se").string());
  const int raw = std::system(cmd.c_str());
  INFO(slurp(d / "se"));
  REQUIRE(WEXITSTATUS(raw) == 0);
  CHECK(std::system(("bash -n " + sq((out / "sweep.sbatch").string())).c_str()) == 0);
  int done = 0;
  for (const auto& e : fs::directory_iterator(out))
    if (fs::exists(e.path() / "done")) ++done;
  CHECK(done == 4);  // both batch sizes and the fp32 reference at each
  // nothing new outside the sweep folder, apart from this test's stdout and stderr files
  for (const auto& e : fs::recursive_directory_iterator(d.path())) {
    const std::string p = e.path().string();
    if (p.rfind(out.string(), 0) == 0 || e.path() == d / "so" || e.path() == d / "se") continue;
    INFO(p);
    CHECK(std::find(before.begin(), before.end(), p) != before.end());
  }
}

TEST_CASE("sweep: with stderr in a file, progress lines name the done count, the runs' steps and an ETA") {
  TempDir d;
  // 400 MLP steps train for about 2.5 s, so each run writes a dozen progress lines to its
  // train.log while the sweep looks: at 40 steps a run trained for 0.25 s, wrote at most
  // one, and the sweep's line missed it about one time in five. The limit is generous:
  // the sanitized build on a busy 2-core machine took over 120 s (2026-12-05).
  const auto r = run_lpx_t("sweep --recipes bf16 --steps 400 --set threads=1 --progress-every 0.2 --out " +
                           (d / "o").string(), d, 480);
  REQUIRE(r.status == 0);
  std::stringstream ss(r.err);
  int n = 0;
  for (std::string line; std::getline(ss, line);) {
    INFO(line);
    CHECK(line.rfind("progress: ", 0) == 0);
    CHECK(line.find(" done, ") != std::string::npos);
    CHECK(line.find(" running, ") != std::string::npos);
    CHECK(line.find(" runs/min, elapsed ") != std::string::npos);
    CHECK(line.find(", ETA ") != std::string::npos);
    ++n;
  }
  CHECK(n >= 1);  // two runs of 400 steps take well over 0.2 s
  CHECK(r.err.find("(step ") != std::string::npos);  // a live run's step, read from its train.log
}

TEST_CASE("sweep: the spec's slurm object sets the job; the command line overrides it; it is checked for any launcher") {
  TempDir d;
  std::ofstream(d / "spec.json") << R"({"grid": {"recipe": ["mxfp8"]}, "steps": 2,
    "slurm": {"partition": "p1", "time": "30", "mem": "2G", "account": "acc", "cpus_per_task": 2,
              "sbatch_args": ["--qos=low"]}})";
  const auto r = run_lpx_t("sweep " + (d / "spec.json").string() + " --launcher slurm --slurm-time 45 "
                           "--sbatch-arg=--comment=x --out " + (d / "o").string(), d);
  REQUIRE(r.status == 0);
  const std::string s = slurp(d / "o" / "sweep.sbatch");
  for (const char* want : {"#SBATCH --partition=p1\n", "#SBATCH --time=45\n", "#SBATCH --mem=2G\n",
                           "#SBATCH --account=acc\n", "#SBATCH --cpus-per-task=2\n", "#SBATCH --qos=low\n",
                           "#SBATCH --comment=x\n"}) {
    INFO(want);
    CHECK(s.find(want) != std::string::npos);
  }
  for (const std::string bad : {R"("slurm": {"time": "1h"})", R"("slurm": {"mem": 4})", R"("slurm": {"nodes": 2})",
                                R"("slurm": {"cpus_per_task": 0})", R"("slurm": {"sbatch_args": ["--array=1"]})",
                                R"("slurm": {"sbatch_args": "--qos=low"})", R"("slurm": [])"}) {
    std::ofstream(d / "bad.json", std::ios::trunc) << R"({"grid": {"recipe": ["mxfp8"]}, )" + bad + "}";
    const auto b = run_lpx_t("sweep " + (d / "bad.json").string() + " --steps 2 --out " + (d / "b").string(), d);
    INFO(bad << " -> " << b.err);
    CHECK(b.status == 2);
    CHECK(b.err_lines() == 1);
    CHECK_FALSE(fs::exists(d / "b"));
  }
}
