// `lpx sweep [SPEC.json] [--recipes a,b] [--seeds N] [--model M] [--steps N] [--set k=v1,v2]...
//            [--jobs N] [--out DIR] [--launcher local|slurm] [--submit]`
// Runs a grid of `lpx train` processes (fork/exec of this binary), at most --jobs at a time,
// plus one reference run per seed. Each run writes DIR/<run>/run.h5 (and train.log), then a
// `done` marker written atomically (temporary + rename) when it finished. Rerunning the same
// sweep skips every run with a marker and resumes the others from their last checkpoint
// (`lpx train --resume`), restarting them when there is none. DIR/sweep.json records the
// spec and the expanded runs; `lpx report DIR` reads it.
//
// Sweep spec (JSON; every key optional except that some recipe must be given):
//   {
//     "name":      "fmt-scale",                 label (default: the file's stem)
//     "model":     "mlp" | "gpt",               default "mlp"
//     "steps":     200,                         default 200
//     "seeds":     3 | [0, 1, 2],               a count (0..N-1) or a list; default 1
//     "reference": "fp32",                      reference recipe, one run per seed and per
//                                               combination of the grid's other keys (the
//                                               fixed keys and that combination; the extra
//                                               "runs" get the fixed keys only); default "fp32"
//     "grid":      {"recipe": ["mxfp8", "mxfp4-rne"], "lr": [1e-3, 3e-3]},
//                                               key -> list; the runs are the product
//     "runs":      [{"name": "lr10", "recipe": "fp32", "lr": 0.01}],
//                                               extra single runs (each x every seed)
//     "fixed":     {"batch": 64, "threads": 1}, keys applied to every run (reference too)
//     "detectors": {"loss_spike_z": 6},         thresholds for lpx report (detectors.hpp)
//     "jobs": 2, "out": "runs/fmt-scale"        defaults for --jobs / --out
//     "slurm":     {"partition": "gpu", "time": "2:00:00", "mem": "8G", "account": "a",
//                   "cpus_per_task": 4, "sbatch_args": ["--qos=low"]}
//                                               defaults for --slurm-* / --sbatch-arg (README
//                                               "Sweeps on Slurm"); checked for any launcher
//   }
// Run keys are `lpx train` options: recipe model lr warmup batch steps eval_every
// checkpoint_every stats_every fixed_batches weight_decay hidden activation preset layers channels heads
// context threads data gemm, and the instability mechanisms (docs/recipes.md#instability-mechanisms):
// qk_norm z_loss adam_eps master_weights optimizer_state inject inject_step inject_layer
// inject_channel inject_magnitude.
// The spec is parsed and checked by parse_sweep_spec (sweep_spec.hpp): every value is
// range-checked as `lpx train` checks it, and a bad one is a usage error, never a default.
//
// Processes and files (docs/input-policy.md):
// - DIR/sweep.lock is held (flock) by the sweep for as long as it runs; a second sweep into
//   the same DIR exits 1 with one line and touches nothing.
// - DIR/<run>/run.lock is locked before the sweep touches the run's folder and is held by
//   the run's `lpx train` until it exits. A rerun never deletes or resumes a run whose lock
//   is held: it reports the run as locked, skips it, runs the others and exits 1.
// - Every run dies with the sweep (PR_SET_PDEATHSIG: SIGTERM), even when the sweep itself is
//   killed with SIGKILL; a rerun then resumes those runs from their checkpoints.
// - The Slurm script single-quotes every value it holds (one quoted word per argument);
//   control characters are refused in every path and argument before anything is written.
#include <fcntl.h>
#include <signal.h>
#include <sched.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <memory>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli_util.hpp"
#include "command.hpp"
#include "json_file.hpp"
#include "lpx/recipes/ablation.hpp"
#include "lpx/sim/model.hpp"
#include "stdout_write.hpp"
#include "sweep_spec.hpp"

namespace lpx::cli {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::ordered_json;

// The job settings of `--launcher slurm` (README "Sweeps on Slurm"); empty / 0: not given.
struct SlurmOptions {
  std::string partition, time, mem, account;
  int cpus = 0;                     // --slurm-cpus-per-task (default 1: Slurm's own default)
  std::vector<std::string> extra;   // --sbatch-arg, each one #SBATCH line
  bool partition_given = false, time_given = false, mem_given = false, account_given = false;  // even as ''
  bool any() const {
    return partition_given || time_given || mem_given || account_given || cpus > 0 || !extra.empty();
  }
};

struct SweepArgs {
  std::string spec, out, launcher = "local";
  std::vector<std::string> ablate;  // --ablate KIND RECIPE
  std::string ablate_units;         // --ablate-units a,b
  int jobs = 0;
  SweepOverrides o;
  SlurmOptions slurm;
  bool submit = false, dry_run = false;
  double progress_every = 5;  // seconds between progress lines on stderr when it is no terminal
};

bool matches(const std::string& s, const char* re) { return std::regex_match(s, std::regex(re)); }

// Checks the Slurm options before anything is read or written: one line each, exit 2
// (docs/input-policy.md). The formats are sbatch's own (man sbatch: --time, --mem); a name
// (partition, account) is a word of letters, digits and ._- (partitions: comma-separated).
// `s`: the command line's options over the spec's "slurm" object (merge_slurm).
void check_slurm_options(const SweepArgs& a, const SlurmOptions& s) {
  if (a.launcher != "slurm" && a.slurm.any())
    throw UsageError("sweep: --slurm-* and --sbatch-arg options need --launcher slurm");
  if (s.time_given && !matches(s.time, R"(\d{1,9}(:\d{1,2}){0,2}|\d{1,9}-\d{1,2}(:\d{1,2}){0,2}|UNLIMITED|INFINITE)"))
    throw UsageError(fmt::format("sweep: --slurm-time '{}' is not a Slurm time (MINUTES, MM:SS, HH:MM:SS, D-HH, "
                                 "D-HH:MM or D-HH:MM:SS)", printable(s.time)));
  if (s.mem_given && !matches(s.mem, R"(\d{1,12}[KMGT]?)"))
    throw UsageError(fmt::format("sweep: --slurm-mem '{}' is not a Slurm memory size (a whole number with an "
                                 "optional unit K, M, G or T; M when none)", printable(s.mem)));
  if (s.partition_given && !matches(s.partition, R"([A-Za-z0-9_.-]{1,200}(,[A-Za-z0-9_.-]{1,200}){0,63})"))
    throw UsageError(fmt::format("sweep: --slurm-partition '{}' is not a partition name (letters, digits, '._-'; "
                                 "several separated by commas)", printable(s.partition)));
  if (s.account_given && !matches(s.account, R"([A-Za-z0-9_.-]{1,200})"))
    throw UsageError(fmt::format("sweep: --slurm-account '{}' is not an account name (letters, digits, '._-')",
                                 printable(s.account)));
  for (const auto& x : s.extra) {
    check_sweep_text("--sbatch-arg", x, 1000);
    if (x.size() < 2 || x[0] != '-')
      throw UsageError(fmt::format("sweep: --sbatch-arg '{}' is not an sbatch option (write it as --name=value)",
                                   printable(x)));
    // the script sets these itself: the array, its logs and the CPUs that --threads follows
    const std::pair<const char*, const char*> own[] = {
        {"--array", "--jobs"}, {"-a", "--jobs"}, {"--output", ""}, {"-o", ""}, {"--error", ""}, {"-e", ""},
        {"--job-name", ""}, {"-J", ""}, {"--cpus-per-task", "--slurm-cpus-per-task"}, {"-c", "--slurm-cpus-per-task"},
        {"--partition", "--slurm-partition"}, {"-p", "--slurm-partition"}, {"--time", "--slurm-time"},
        {"-t", "--slurm-time"}, {"--mem", "--slurm-mem"}, {"--account", "--slurm-account"}, {"-A", "--slurm-account"}};
    for (const auto& [o, use] : own) {
      const std::string opt(o);
      const bool hit = opt.size() == 2 ? x.rfind(opt, 0) == 0 : x == opt || x.rfind(opt + "=", 0) == 0;
      if (hit)
        throw UsageError(fmt::format("sweep: --sbatch-arg '{}': the script sets {} itself{}", printable(x), opt,
                                     *use ? fmt::format(" (use {})", use) : std::string()));
    }
  }
  // before anything is written: nothing half-done when sbatch is missing
  if (a.submit && std::system("command -v sbatch >/dev/null 2>&1") != 0)
    throw std::runtime_error("sweep: --submit needs sbatch (Slurm) on PATH; nothing was written or submitted");
}

// The spec's "slurm" object (types checked by parse_sweep_spec) under the command line's
// options: a --slurm-* option replaces its key, --sbatch-arg options come after the spec's.
SlurmOptions merge_slurm(const SlurmOptions& cli, const nlohmann::ordered_json& spec) {
  SlurmOptions s = cli;
  if (!spec.is_object()) return s;
  auto take = [&](const char* key, std::string& v, bool& given) {
    if (!given && spec.contains(key)) {
      v = spec[key].get<std::string>();
      given = true;
    }
  };
  take("partition", s.partition, s.partition_given);
  take("time", s.time, s.time_given);
  take("mem", s.mem, s.mem_given);
  take("account", s.account, s.account_given);
  if (s.cpus == 0 && spec.contains("cpus_per_task")) s.cpus = spec["cpus_per_task"].get<int>();
  if (spec.contains("sbatch_args")) {
    std::vector<std::string> extra = spec["sbatch_args"].get<std::vector<std::string>>();
    extra.insert(extra.end(), cli.extra.begin(), cli.extra.end());
    s.extra = extra;
  }
  return s;
}

// A word of an #SBATCH line as sbatch reads it: a backslash takes the next character as
// it is (so spaces, quotes and '#' stay in the word).
std::string sbatch_word(const std::string& s) {
  std::string o;
  for (const unsigned char c : s) {
    if (std::isalnum(c) || std::strchr("/._-+=,:@%", c)) o += static_cast<char>(c);
    else o += std::string("\\") + static_cast<char>(c);
  }
  return o;
}

// The CPUs this process may use (its affinity mask: taskset, cgroups, Slurm), at least 1.
int usable_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0) return std::max(1, CPU_COUNT(&set));
  return std::max(1u, std::thread::hardware_concurrency());
}

// The run's arguments without `--threads V` (a swept or fixed threads key), and V ("" when
// the run has none): the launchers add the thread count that fits the run's CPUs.
std::pair<std::vector<std::string>, std::string> split_threads(const std::vector<std::string>& args) {
  std::vector<std::string> rest;
  std::string threads;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--threads" && i + 1 < args.size()) threads = args[++i];
    else rest.push_back(args[i]);
  }
  return {rest, threads};
}

// Writes `text` to a temporary beside `p` and renames it over `p`; the temporary is removed
// when any write (or the close) fails.
void write_atomic(const fs::path& p, const std::string& text) {
  const fs::path tmp = p.string() + ".tmp";
  bool ok = false;
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    f << text;
    f.close();
    ok = static_cast<bool>(f);
  }
  std::error_code ec;
  if (ok) fs::rename(tmp, p, ec);
  if (!ok || ec) {
    const int e = ec ? ec.value() : errno;
    fs::remove(tmp, ec);
    throw std::runtime_error(fmt::format("sweep: cannot write {}: {}", printable(p.string()), std::strerror(e)));
  }
}

std::string self_exe() {
  std::error_code ec;
  auto p = fs::read_symlink("/proc/self/exe", ec);
  if (ec) throw std::runtime_error("sweep: cannot find the lpx binary (/proc/self/exe)");
  return p.string();
}

// One shell word: '...' with every ' written as '\''. The caller has refused control
// characters, so the word is one line.
std::string shell_quote(const std::string& s) {
  std::string o = "'";
  for (char c : s) o += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return o + "'";
}

bool shell_plain(const std::string& s) {
  if (s.empty()) return false;
  for (const unsigned char c : s)
    if (!std::isalnum(c) && !std::strchr("/._-+=,:@%", c)) return false;
  return true;
}

// For the dry run's listing: plain words as they are, others quoted.
std::string shell_word(const std::string& s) { return shell_plain(s) ? s : shell_quote(s); }

// A file name in an #SBATCH line: sbatch reads a backslash as "take the next character as
// it is" and '#' as a comment, and expands '%' patterns in --output ("%%" is one '%').
std::string sbatch_path(const std::string& s) {
  std::string o;
  for (const unsigned char c : s) {
    if (c == '%') o += "%%";
    else if (std::isalnum(c) || std::strchr("/._-+=,:@", c)) o += static_cast<char>(c);
    else o += std::string("\\") + static_cast<char>(c);
  }
  return o;
}

// An exclusive flock on `path` (created when absent), close-on-exec; -1 when another
// process holds it.
int try_lock(const fs::path& path) {
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0)
    throw std::runtime_error(fmt::format("sweep: cannot open {}: {}", printable(path.string()), std::strerror(errno)));
  if (::flock(fd, LOCK_EX | LOCK_NB) == 0) return fd;
  const int e = errno;
  ::close(fd);
  if (e == EWOULDBLOCK) return -1;
  throw std::runtime_error(fmt::format("sweep: cannot lock {}: {}", printable(path.string()), std::strerror(e)));
}

// DIR/sweep.lock for the life of this process, with its pid in the file for the message
// another sweep prints.
void lock_sweep_dir(const fs::path& dir) {
  const fs::path p = dir / "sweep.lock";
  const int fd = try_lock(p);
  if (fd < 0) {
    std::string pid;
    std::ifstream(p) >> pid;
    throw std::runtime_error(fmt::format("sweep: {} is in use by another lpx sweep ({} is locked{}); wait for it to "
                                         "end or stop it",
                                         printable(dir.string()), printable(p.string()),
                                         pid.empty() ? "" : ", by pid " + printable(pid)));
  }
  const std::string me = std::to_string(::getpid()) + "\n";
  if (::ftruncate(fd, 0) != 0 || ::write(fd, me.data(), me.size()) != static_cast<ssize_t>(me.size()))
    throw std::runtime_error(fmt::format("sweep: cannot write {}: {}", printable(p.string()), std::strerror(errno)));
  // fd stays open (and locked) until the process exits
}

volatile std::sig_atomic_t g_stop = 0;
void on_signal(int sig) { g_stop = sig; }

// fork/exec of `exe args` with stdout and stderr appended to `log`. The child holds
// `lock_fd` (the run's run.lock) across exec, so the lock lives exactly as long as the run,
// and gets SIGTERM when the sweep dies (also by SIGKILL).
pid_t start(const std::string& exe, const std::vector<std::string>& args, const fs::path& log, int lock_fd) {
  std::vector<char*> argv;
  argv.push_back(const_cast<char*>(exe.c_str()));
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  const pid_t parent = ::getpid();
  const pid_t pid = fork();
  if (pid < 0) throw std::runtime_error(fmt::format("sweep: fork failed: {}", std::strerror(errno)));
  if (pid == 0) {
    // the sweep's handlers would only set a flag in this copy of it
    ::signal(SIGTERM, SIG_DFL);
    ::signal(SIGINT, SIG_DFL);
    // idle OpenMP threads sleep rather than spin: runs that share cores would otherwise burn
    // them waiting (README "Sweeps that share a machine"); a value in the environment wins
    ::setenv("OMP_WAIT_POLICY", "passive", 0);
    if (::prctl(PR_SET_PDEATHSIG, SIGTERM) != 0 || ::getppid() != parent) _exit(127);  // the sweep is gone already
    const int fl = ::fcntl(lock_fd, F_GETFD);
    if (fl < 0 || ::fcntl(lock_fd, F_SETFD, fl & ~FD_CLOEXEC) != 0) _exit(127);
    const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd >= 0) {
      dup2(fd, STDOUT_FILENO);
      dup2(fd, STDERR_FILENO);
    }
    execv(exe.c_str(), argv.data());
    _exit(127);
  }
  return pid;
}

// `abs_dir` and `exe` have been through check_sweep_text. The script is meant to be read:
// a header of #SBATCH lines, then one case entry per run (its name and its arguments, each
// a single-quoted word), then the few lines that run one task. `array_limit` 0: no %N.
void write_slurm(const fs::path& dir, const std::string& abs_dir, const std::vector<SweepRun>& runs, int array_limit,
                 const SlurmOptions& so, const std::string& exe, const std::string& name, bool submit,
                 double progress_every) {
  const int cpus = so.cpus > 0 ? so.cpus : 1;
  std::string s =
      "#!/bin/bash\n"
      "# Written by `lpx sweep --launcher slurm`: one array task per run. A task skips a run that\n"
      "# is done (done marker) or whose folder a live process holds (run.lock, locked while lpx\n"
      "# train runs), resumes an unfinished one from its checkpoint, and else starts it. Every\n"
      "# value is a single-quoted word and every path absolute: submit it from any folder.\n"
      "# Each run uses as many OpenMP threads as its task has CPUs (--threads), and writes its\n"
      "# output to DIR/<run>/train.log; Slurm's own output of task N is DIR/slurm-JOB_N.out.\n";
  s += fmt::format("#SBATCH --job-name=lpx-{}\n", sbatch_path(name));
  s += fmt::format("#SBATCH --array=0-{}{}\n", runs.size() - 1, array_limit > 0 ? fmt::format("%{}", array_limit) : "");
  s += fmt::format("#SBATCH --cpus-per-task={}\n", cpus);
  if (!so.partition.empty()) s += fmt::format("#SBATCH --partition={}\n", so.partition);
  if (!so.time.empty()) s += fmt::format("#SBATCH --time={}\n", so.time);
  if (!so.mem.empty()) s += fmt::format("#SBATCH --mem={}\n", so.mem);
  if (!so.account.empty()) s += fmt::format("#SBATCH --account={}\n", so.account);
  for (const auto& x : so.extra) s += fmt::format("#SBATCH {}\n", sbatch_word(x));
  s += fmt::format("#SBATCH --output={}/slurm-%A_%a.out\n", sbatch_path(abs_dir));
  s += fmt::format(
      "set -euo pipefail\n"
      "LPX={}\n"
      "DIR={}\n"
      "THREADS=\"${{SLURM_CPUS_PER_TASK:-{}}}\"\n"
      "# seconds between the progress lines each run writes to its train.log (--progress-every)\n"
      "PROGRESS={}\n"
      "# idle OpenMP threads sleep instead of spinning (README \"Sweeps that share a machine\")\n"
      "export OMP_WAIT_POLICY=\"${{OMP_WAIT_POLICY:-passive}}\"\n",
      shell_quote(exe), shell_quote(abs_dir), cpus, shell_quote(fmt::format("{}", progress_every)));
  s += "case \"${SLURM_ARRAY_TASK_ID:?run this script with sbatch: it is a Slurm job array}\" in\n";
  for (size_t i = 0; i < runs.size(); ++i) {
    const auto [rest, threads] = split_threads(runs[i].args);
    std::string args;
    for (const auto& x : rest) {
      args += ' ';
      args += shell_quote(x);
    }
    s += fmt::format("  {}) RUN={}{}\n     ARGS=({} ) ;;\n", i, shell_quote(runs[i].name),
                     threads.empty() ? "" : " THREADS=" + shell_quote(threads), args);
  }
  s += "  *) echo \"lpx sweep: no run $SLURM_ARRAY_TASK_ID in this array\" >&2; exit 1 ;;\nesac\n"
       "d=\"$DIR/$RUN\"\n"
       "echo \"lpx sweep: task $SLURM_ARRAY_TASK_ID, run $RUN, $THREADS threads, log $d/train.log\"\n"
       "[ -f \"$d/done\" ] && exit 0\n"
       "mkdir -p \"$d\"\n"
       "if command -v flock >/dev/null 2>&1; then\n"
       "  exec 9>>\"$d/run.lock\"\n"
       "  flock -n 9 || { echo \"lpx sweep: $d is locked by a live process (run.lock); skipped\" >&2; exit 1; }\n"
       "fi\n"
       "if [ -f \"$d/run.h5\" ] && \"$LPX\" train --out \"$d/run.h5\" --resume --threads \"$THREADS\" \\\n"
       "     --progress-every \"$PROGRESS\" >>\"$d/train.log\" 2>&1; then :\n"
       "else \"$LPX\" \"${ARGS[@]}\" --threads \"$THREADS\" --progress-every \"$PROGRESS\" --out \"$d/run.h5\" \\\n"
       "     >>\"$d/train.log\" 2>&1; fi\n"
       "echo '{\"launcher\": \"slurm\"}' >\"$d/done.tmp\" && mv -f \"$d/done.tmp\" \"$d/done\"\n";
  const fs::path script = dir / "sweep.sbatch";
  write_atomic(script, s);
  fs::permissions(script, fs::perms::owner_exec, fs::perm_options::add);
  write_stdout(fmt::format("sweep: wrote {} ({} array tasks{})\n", script.string(), runs.size(),
                           array_limit > 0 ? fmt::format(", at most {} at a time", array_limit) : ""),
               "sweep");
  if (submit) {
    const int rc = std::system(("sbatch " + shell_quote(script.string())).c_str());
    if (rc != 0) throw std::runtime_error("sweep: sbatch failed (its message is above); the script is written");
  }
}

// The sweep's progress lines: a failed write is remembered (the runs go on) and reported
// when the sweep ends.
struct Progress {
  int error = 0;
  bool failed = false;
  void say(const std::string& text) {
    errno = 0;
    if (std::fwrite(text.data(), 1, text.size(), stdout) != text.size() || std::fflush(stdout) != 0) {
      if (!failed) error = errno;
      failed = true;
      std::clearerr(stdout);
    }
  }
};

// --ablate roles|layers|linears RECIPE: writes the recipe's ablation variants (recipes/ablation.hpp)
// to OUT/ablation/<name>.json and returns the sweep's recipe list (the recipe, then each
// variant's file). The model's depth comes from the spec's runs (layers, preset, hidden).
std::string write_ablation_recipes(const SweepArgs& a, const std::string& text, const std::string& origin,
                                   const SweepOverrides& o) {
  const std::string& kind = a.ablate[0];
  const std::string& name = a.ablate[1];
  if (kind != "roles" && kind != "layers" && kind != "linears")
    throw UsageError(fmt::format("sweep: --ablate '{}' is not roles, layers or linears", printable(kind)));
  if (!o.recipes.empty()) throw UsageError("sweep: --ablate gives the recipe; leave out --recipes");
  SweepOverrides first = o;
  first.recipes = name;  // checks the recipe as --recipes would
  const SweepSpec probe = parse_sweep_spec(text, origin, first);
  for (const auto& r : probe.runs)
    if (!r.reference && r.recipe != probe.runs.back().recipe)
      throw UsageError("sweep: --ablate sweeps one recipe; the spec has other recipes (grid \"recipe\" or \"runs\")");
  const std::string out = !a.out.empty() ? a.out : probe.out;
  if (out.empty()) throw UsageError("sweep: --out DIR is required (or \"out\" in the spec)");
  Recipe recipe;
  try {
    recipe = load_recipe(probe.runs.back().recipe);
  } catch (const std::invalid_argument& e) {
    throw UsageError(fmt::format("sweep: --ablate: {}", e.what()));
  }
  std::vector<std::string> units;
  std::stringstream ss(a.ablate_units);
  for (std::string u; std::getline(ss, u, ',');)
    if (!u.empty()) units.push_back(u);
  std::vector<AblationVariant> variants;
  try {
    if (kind == "roles") {
      variants = ablate_roles(recipe, units);
    } else {
      // the depth of the model every run trains (the runs share it unless a grid sweeps it)
      const json& set = probe.runs.back().set;
      sim::ModelConfig m;
      m.kind = set.value("model", std::string("mlp")) == "gpt" ? sim::ModelKind::gpt : sim::ModelKind::mlp;
      if (set.contains("preset")) sim::apply_gpt_preset(m, set["preset"].get<std::string>());
      if (set.contains("layers")) m.layers = set["layers"].get<int>();
      for (const auto& r : probe.runs)
        if (r.set.value("layers", json()) != set.value("layers", json()) || r.set.value("preset", json()) != set.value("preset", json()) ||
            r.set.value("hidden", json()) != set.value("hidden", json()))
          throw UsageError(fmt::format("sweep: --ablate {} needs one model depth for every run and the reference: give layers, "
                                       "preset or hidden in the spec's \"fixed\" (a --set or grid key is not applied to the reference)",
                                       kind));
      int hidden_layers = static_cast<int>(m.hidden.size());
      if (set.contains("hidden")) {
        const json& h = set["hidden"];
        hidden_layers = h.is_array() ? static_cast<int>(h.size())
                        : h.is_string() ? static_cast<int>(std::count(h.get<std::string>().begin(), h.get<std::string>().end(), ',')) + 1
                                        : 1;
      }
      if (kind == "linears") {
        m.hidden.assign(static_cast<size_t>(hidden_layers), 1);  // only their number matters here
        variants = ablate_linears(recipe, sim::linear_layers(m), units);
      } else {
        variants = m.kind == sim::ModelKind::gpt ? ablate_blocks(recipe, m.layers, m.layers, units)
                                                 : ablate_blocks(recipe, hidden_layers, hidden_layers + 1, units);
      }
    }
  } catch (const std::invalid_argument& e) {
    throw UsageError(fmt::format("sweep: --ablate {}: {}", kind, e.what()));
  }
  const fs::path dir = fs::path(out) / "ablation";
  fs::create_directories(dir);
  std::string list = probe.runs.back().recipe;
  for (const AblationVariant& v : variants) {
    const fs::path file = dir / (v.recipe.name + ".json");
    write_atomic(file, v.recipe.to_json());
    list += "," + file.string();
  }
  return list;
}

void run_sweep(const SweepArgs& a) {
  if (a.submit && a.launcher != "slurm") throw UsageError("sweep: --submit needs --launcher slurm");
  if (a.launcher != "slurm" && a.slurm.any())  // before the spec is read: the first thing wrong
    throw UsageError("sweep: --slurm-* and --sbatch-arg options need --launcher slurm");
  std::string text = "{}", origin = "the command line";
  SweepOverrides o = a.o;
  if (!a.spec.empty()) {
    try {
      text = read_text_file(a.spec, io::JsonLimits{}.max_bytes);
    } catch (const io::JsonError& e) {
      throw UsageError(fmt::format("sweep: {}", e.what()));
    }
    origin = printable(a.spec);
    o.default_name = fs::path(a.spec).stem().string();
  }
  if (!a.ablate_units.empty() && a.ablate.empty()) throw UsageError("sweep: --ablate-units needs --ablate");
  if (!a.ablate.empty()) o.recipes = write_ablation_recipes(a, text, origin, o);
  const SweepSpec spec = parse_sweep_spec(text, origin, o);
  // the whole spec's Slurm settings are checked even for a local sweep, so a spec that will
  // go to the cluster later is refused now rather than there
  const SlurmOptions slurm = merge_slurm(a.slurm, spec.slurm);
  check_slurm_options(a, slurm);
  const std::vector<SweepRun>& runs = spec.runs;
  const std::string out = !a.out.empty() ? a.out : spec.out;
  if (out.empty()) throw UsageError("sweep: --out DIR is required (or \"out\" in the spec)");
  check_sweep_text("--out", out);
  const int jobs = a.jobs > 0 ? a.jobs : spec.jobs > 0 ? spec.jobs : 1;
  const std::string exe = self_exe();
  const fs::path dir(out);
  const std::string abs_dir = fs::absolute(dir).lexically_normal().string();
  if (a.launcher == "slurm" && !a.dry_run) {  // both go into the script
    check_sweep_text("the lpx binary's path", exe);
    check_sweep_text("--out (absolute)", abs_dir);
  }
  fs::create_directories(dir);
  lock_sweep_dir(dir);
  json planned = {{"format", "lpx-sweep-1"}, {"spec", spec.spec}, {"runs", json::array()}};
  for (const auto& r : runs)
    planned["runs"].push_back({{"name", r.name}, {"recipe", r.recipe}, {"seed", r.seed}, {"reference", r.reference},
                               {"reference_run", r.reference_run}, {"set", r.set}, {"args", r.args}});
  write_atomic(dir / "sweep.json", planned.dump(2, ' ', false, json::error_handler_t::replace) + "\n");
  if (a.dry_run) {
    std::string listing;
    for (const auto& r : runs) {
      std::string line = "lpx";
      for (const auto& x : r.args) line += " " + shell_word(x);
      listing += fmt::format("{:<32} {} --out {}\n", r.name, line, shell_word((dir / r.name / "run.h5").string()));
    }
    return write_stdout(listing, "sweep");
  }
  // a Slurm array runs as many tasks at once as the cluster gives unless --jobs asks for fewer
  if (a.launcher == "slurm") return write_slurm(dir, abs_dir, runs, a.jobs, slurm, exe, spec.name, a.submit, a.progress_every);

  // local: a queue of runs, at most `jobs` children
  struct Task {
    const SweepRun* run = nullptr;
    bool resumed = false, retried = false;
    std::chrono::steady_clock::time_point t0;
  };
  Progress progress;
  std::vector<const SweepRun*> queue;
  int skipped = 0;
  for (const auto& r : runs) {
    if (fs::exists(dir / r.name / "done")) ++skipped;
    else queue.push_back(&r);
  }
  const size_t total = runs.size();
  const int cores = usable_cpus();
  progress.say(fmt::format("sweep {}: {} runs ({} already done, {} to run), {} at a time, {} threads each unless set "
                           "-> {}\n", spec.name, total, skipped, queue.size(), jobs, std::max(1, cores / jobs),
                           dir.string()));
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGINT, &sa, nullptr);
  std::map<pid_t, Task> live;
  size_t next = 0, done = static_cast<size_t>(skipped);
  int failed = 0;
  std::vector<std::string> locked;
  const auto sweep_t0 = std::chrono::steady_clock::now();
  // Starts the run (resumed from its log unless `fresh`); false when another process holds
  // its folder's lock, in which case nothing in the folder is touched.
  auto launch = [&](Task t, bool fresh) {
    const SweepRun& r = *t.run;
    const fs::path rd = dir / r.name;
    fs::create_directories(rd);
    const int lock = try_lock(rd / "run.lock");
    if (lock < 0) return false;
    const fs::path log = rd / "run.h5";
    std::vector<std::string> args;
    // each child gets its share of the cores (cores / --jobs) unless the run sets threads;
    // results never depend on the thread count (sim/trainer.hpp)
    auto [rest, threads] = split_threads(r.args);
    if (threads.empty()) threads = std::to_string(std::max(1, cores / jobs));
    try {
      if (!fresh && fs::exists(log)) {
        args = {"train", "--out", log.string(), "--resume", "--threads", threads};
        args.push_back("--progress-every");
        args.push_back(fmt::format("{}", a.progress_every));
        t.resumed = true;
      } else {
        fs::remove(log);
        args = rest;
        args.push_back("--threads");
        args.push_back(threads);
        args.push_back("--progress-every");  // the runs' train.log shows progress as often as the sweep
        args.push_back(fmt::format("{}", a.progress_every));
        args.push_back("--out");
        args.push_back(log.string());
        t.resumed = false;
      }
      t.t0 = std::chrono::steady_clock::now();
      live[start(exe, args, rd / "train.log", lock)] = t;
    } catch (...) {
      ::close(lock);
      throw;
    }
    ::close(lock);  // the child holds it now
    return true;
  };
  auto elapsed = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - sweep_t0).count(); };
  // every --progress-every seconds when stderr is no terminal (a log, Slurm, CI): one plain
  // line with the counts, each live run's step and loss (from its train.log's last
  // progress line, which lpx train writes there every few seconds), runs/min and an ETA
  const bool tty = isatty(STDERR_FILENO) != 0;
  double next_line = a.progress_every;
  const size_t done_before = done;
  auto progress_line = [&] {
    const double el = elapsed();
    std::string live_text;
    for (const auto& [pid, t] : live) {
      std::string step = "starting";
      std::ifstream f(dir / t.run->name / "train.log", std::ios::binary);
      f.seekg(0, std::ios::end);
      const auto size = static_cast<std::streamoff>(f.tellg());
      f.seekg(std::max<std::streamoff>(0, size - 4096));
      std::string tail((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
      const size_t at = tail.rfind("progress: step ");
      if (at != std::string::npos) {
        const size_t end = tail.find("  ", tail.find("loss", at) + 5);
        step = tail.substr(at + 10, (end == std::string::npos ? tail.size() : end) - at - 10);
      }
      live_text += fmt::format("{}{} ({})", live_text.empty() ? "" : ", ", t.run->name, step);
    }
    const size_t finished = done - done_before + static_cast<size_t>(failed);
    const double per_min = el > 0 ? 60.0 * static_cast<double>(finished) / el : 0;
    const size_t left = total - done - static_cast<size_t>(failed);
    std::fprintf(stderr, "progress: %zu/%zu done, %zu running, %d failed, %.1f runs/min, elapsed %.0fs, ETA %s%s%s\n",
                 done, total, live.size(), failed, per_min, el,
                 finished > 0 ? fmt::format("{:.0f}s", el / static_cast<double>(finished) * static_cast<double>(left)).c_str()
                              : "unknown",
                 live_text.empty() ? "" : "; ", live_text.c_str());
    std::fflush(stderr);
  };
  while (next < queue.size() || !live.empty()) {
    if (g_stop) {
      for (const auto& [pid, t] : live) kill(pid, SIGTERM);
      for (const auto& [pid, t] : live) waitpid(pid, nullptr, 0);
      std::fprintf(stderr, "sweep: stopped by signal %d; rerun the same command to resume\n", static_cast<int>(g_stop));
      std::fflush(stdout);
      std::_Exit(128 + g_stop);
    }
    while (next < queue.size() && live.size() < static_cast<size_t>(jobs)) {
      Task t;
      t.run = queue[next++];
      if (!launch(t, false)) {
        locked.push_back(t.run->name);
        progress.say(fmt::format("[{}/{} done, {} running, {} failed, {:.0f}s] {} SKIPPED: {} is locked by a live "
                                 "process (an earlier sweep's run?)\n",
                                 done, total, live.size(), failed, elapsed(), t.run->name,
                                 (dir / t.run->name / "run.lock").string()));
      }
    }
    if (!tty && a.progress_every > 0 && elapsed() >= next_line) {
      progress_line();
      next_line = elapsed() + a.progress_every;
    }
    int status = 0;
    const pid_t pid = waitpid(-1, &status, WNOHANG);
    if (pid <= 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      continue;
    }
    auto it = live.find(pid);
    if (it == live.end()) continue;
    Task t = it->second;
    live.erase(it);
    const SweepRun& r = *t.run;
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t.t0).count();
    const bool ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
    if (!ok && t.resumed && !t.retried && !g_stop) {
      // no usable checkpoint: start the run again from scratch
      t.retried = true;
      if (launch(t, true)) continue;
      locked.push_back(r.name);
      continue;
    }
    if (ok) {
      ++done;
      write_atomic(dir / r.name / "done", json{{"run", r.name}, {"seconds", secs}, {"resumed", t.resumed}}.dump() + "\n");
    } else if (!g_stop) {
      ++failed;
    }
    if (g_stop) continue;
    progress.say(fmt::format("[{}/{} done, {} running, {} failed, {:.0f}s] {} {} in {:.1f}s{}\n", done, total,
                             live.size(), failed, elapsed(), r.name, ok ? "finished" : "FAILED", secs,
                             ok ? (t.resumed ? " (resumed)" : "")
                                : fmt::format(" (see {})", (dir / r.name / "train.log").string())));
  }
  progress.say(fmt::format("sweep: {} of {} runs done{}{}; `lpx report {}` writes the report\n", done, total,
                           failed ? fmt::format(", {} failed", failed) : "",
                           locked.empty() ? "" : fmt::format(", {} skipped (locked)", locked.size()), dir.string()));
  std::vector<std::string> problems;
  if (failed) problems.push_back(fmt::format("{} run(s) failed", failed));
  if (!locked.empty())
    problems.push_back(fmt::format("{} run(s) skipped because a live process holds their folder ({}{}); rerun when it "
                                   "has ended",
                                   locked.size(), locked.front(), locked.size() > 1 ? ", ..." : ""));
  if (progress.failed)
    problems.push_back(fmt::format("cannot write to standard output: {}",
                                   progress.error ? std::strerror(progress.error) : "write error"));
  if (!problems.empty()) {
    std::string line;
    for (const auto& p : problems) line += (line.empty() ? "" : "; ") + p;
    throw std::runtime_error("sweep: " + line);
  }
}

const bool registered = register_command(91, [](CLI::App& app) {
  auto a = std::make_shared<SweepArgs>();
  auto* cmd = app.add_subcommand("sweep", "Run a grid of training runs (recipes x seeds x settings) with a reference");
  cmd->add_option("SPEC", a->spec, "Sweep spec (JSON; see tools/sweeps/*.json)");
  cmd->add_option("--recipes", a->o.recipes, "Recipes to sweep, comma-separated (grid key recipe)");
  // whole numbers in range or a usage error (cli_util.hpp: no hex, exponents or defaults)
  add_int_option(cmd, "--seeds", a->o.seeds, 1, static_cast<int64_t>(kMaxSweepRuns), "Number of seeds (0..N-1)");
  cmd->add_option("--model", a->o.model, "mlp | gpt");
  add_int_option(cmd, "--steps", a->o.steps, 1, kMaxSweepSteps, "Training steps per run");
  cmd->add_option("--set", a->o.set, "Grid key: KEY=V1,V2,... (repeatable; lpx train option names)");
  cmd->add_option("--reference", a->o.reference,
                  "Reference recipe (default fp32): one run per seed and per value of the other grid keys (--set)");
  cmd->add_option("--ablate", a->ablate,
                  "KIND RECIPE: blame study of RECIPE (KIND roles, layers or linears): the recipe, and for each role "
                  "(block and the head; linear layer and the head) the recipe with only it quantized and with all but it "
                  "(lpx report ranks them)")
      ->expected(2);
  cmd->add_option("--ablate-units", a->ablate_units,
                  "With --ablate: only these roles (fwd_x,...), blocks (block0,...,head) or linears (mlp.fc: in every "
                  "block; h2.mlp.fc: one layer; head)");
  add_int_option(cmd, "--jobs", a->jobs, 1, kMaxSweepJobs,
                 "Runs at a time (local: default 1; slurm: the array's %N, default no limit)");
  cmd->add_option("--out", a->out, "Output folder: DIR/<run>/run.h5, DIR/sweep.json");
  cmd->add_option("--launcher", a->launcher, "local (fork/exec here) | slurm (writes DIR/sweep.sbatch)")
      ->capture_default_str()
      ->check(CLI::IsMember({"local", "slurm"}));
  cmd->add_flag("--submit", a->submit, "With --launcher slurm: sbatch the script");
  auto* partition =
      cmd->add_option("--slurm-partition", a->slurm.partition, "Slurm partition(s) of the array (#SBATCH --partition)");
  auto* time = cmd->add_option("--slurm-time", a->slurm.time, "Time limit per task: MINUTES, HH:MM:SS or D-HH:MM:SS");
  auto* mem = cmd->add_option("--slurm-mem", a->slurm.mem, "Memory per task: a whole number with K, M, G or T (e.g. 4G)");
  auto* account = cmd->add_option("--slurm-account", a->slurm.account, "Slurm account to charge");
  add_int_option(cmd, "--slurm-cpus-per-task", a->slurm.cpus, 1, 4096,
                 "CPUs per task (default 1); each run gets as many --threads");
  cmd->add_option("--sbatch-arg", a->slurm.extra, "Another #SBATCH option, as --name=value (repeatable)")
      ->allow_extra_args(false);
  cmd->add_flag("--dry-run", a->dry_run, "Print the runs' commands, run nothing");
  cmd->add_option("--progress-every", a->progress_every,
                  "Seconds between progress lines on stderr when it is not a terminal, and in each run's train.log (0: none)")
      ->capture_default_str()
      ->check(kFiniteNonNegative);
  cmd->footer(
      "A rerun skips finished runs and resumes the others; a run folder locked by a live process\n"
      "(DIR/<run>/run.lock) is left alone and reported. Runs die with the sweep.\n"
      "Examples:\n"
      "  lpx sweep --recipes mxfp8,mxfp4-rne --seeds 3 --steps 300 --set lr=1e-3,3e-3 --jobs 2 --out runs/a\n"
      "  lpx sweep tools/sweeps/sr-on-off.json --out runs/sr && lpx report runs/sr\n"
      "  lpx sweep --ablate roles mxfp4-rne --model gpt --seeds 3 --steps 200 --jobs 2 --out runs/blame");
  cmd->callback([a, partition, time, mem, account] {
    a->slurm.partition_given = partition->count() > 0;
    a->slurm.time_given = time->count() > 0;
    a->slurm.mem_given = mem->count() > 0;
    a->slurm.account_given = account->count() > 0;
    run_sweep(*a);
  });
});

}  // namespace
}  // namespace lpx::cli
