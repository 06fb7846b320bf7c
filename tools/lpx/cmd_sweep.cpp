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
//     "reference": "fp32",                      reference recipe, one run per seed with the
//                                               fixed keys only; default "fp32"
//     "grid":      {"recipe": ["mxfp8", "mxfp4-rne"], "lr": [1e-3, 3e-3]},
//                                               key -> list; the runs are the product
//     "runs":      [{"name": "lr10", "recipe": "fp32", "lr": 0.01}],
//                                               extra single runs (each x every seed)
//     "fixed":     {"batch": 64, "threads": 1}, keys applied to every run (reference too)
//     "detectors": {"loss_spike_z": 6},         thresholds for lpx report (detectors.hpp)
//     "jobs": 2, "out": "runs/fmt-scale"        defaults for --jobs / --out
//   }
// Run keys are `lpx train` options: recipe lr batch steps eval_every checkpoint_every
// stats_every weight_decay hidden activation layers channels heads context threads data.
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "command.hpp"
#include "lpx/divergence/detectors.hpp"
#include "lpx/recipes/recipe.hpp"

namespace lpx::cli {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::ordered_json;

struct SweepArgs {
  std::string spec, recipes, model, out, launcher = "local", reference;
  int seeds = 0, jobs = 0;
  int64_t steps = 0;
  std::vector<std::string> set;
  bool submit = false, dry_run = false;
};

struct PlannedRun {
  std::string name, recipe, reference_run;
  int64_t seed = 0;
  bool reference = false;
  json set;                       // every train option of the run (key -> value)
  std::vector<std::string> args;  // after the binary: train ...
};

const std::set<std::string>& run_keys() {
  static const std::set<std::string> k = {"recipe", "lr", "batch", "steps", "eval_every", "checkpoint_every",
                                          "stats_every", "weight_decay", "hidden", "activation", "layers",
                                          "channels", "heads", "context", "threads", "data", "model"};
  return k;
}

void check_key(const std::string& where, const std::string& k) {
  if (run_keys().count(k)) return;
  std::string all;
  for (const auto& x : run_keys()) all += (all.empty() ? "" : ", ") + x;
  throw UsageError(fmt::format("sweep: {}: unknown key '{}'; allowed: {}", where, k, all));
}

void check_recipe(const std::string& r) {
  if (r.size() > 5 && r.ends_with(".json")) {
    if (!fs::exists(r)) throw UsageError(fmt::format("sweep: recipe file '{}' does not exist", r));
    return;
  }
  std::string all;
  for (auto n : recipe_names()) {
    if (n == r) return;
    all += (all.empty() ? "" : ", ") + std::string(n);
  }
  throw UsageError(fmt::format("sweep: unknown recipe '{}'; known: {}", r, all));
}

std::string value_text(const json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_array()) {
    std::string s;
    for (const auto& x : v) s += (s.empty() ? "" : ",") + value_text(x);
    return s;
  }
  if (v.is_number_float()) return fmt::format("{:g}", v.get<double>());
  return v.dump();
}

std::string safe_name(std::string s) {
  for (char& c : s)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '.' && c != '_') c = '_';
  return s;
}

// "1e-3" -> number, "mxfp8" -> string, "256,128" stays a string for --hidden.
json parse_value(const std::string& s) {
  try {
    size_t used = 0;
    const double d = std::stod(s, &used);
    if (used == s.size()) {
      if (s.find_first_of(".eE") == std::string::npos) return json(static_cast<int64_t>(d));
      return json(d);
    }
  } catch (const std::exception&) {
  }
  return json(s);
}

json read_spec(const std::string& path) {
  std::ifstream f(path);
  if (!f) throw UsageError(fmt::format("sweep: cannot read spec {}", path));
  json j;
  try {
    j = json::parse(f);
  } catch (const json::exception& e) {
    throw UsageError(fmt::format("sweep: {}: not JSON: {}", path, e.what()));
  }
  if (!j.is_object()) throw UsageError(fmt::format("sweep: {}: the spec must be a JSON object", path));
  static const std::set<std::string> top = {"name", "model", "steps", "seeds", "reference", "grid", "runs",
                                            "fixed", "detectors", "jobs", "out", "description"};
  for (auto it = j.begin(); it != j.end(); ++it)
    if (!top.count(it.key()))
      throw UsageError(fmt::format("sweep: {}: unknown key '{}'; allowed: name, model, steps, seeds, reference, grid, "
                                   "runs, fixed, detectors, jobs, out, description", path, it.key()));
  return j;
}

std::vector<PlannedRun> plan(json& spec) {
  const std::string model = spec.value("model", std::string("mlp"));
  if (model != "mlp" && model != "gpt") throw UsageError(fmt::format("sweep: model '{}' is not mlp or gpt", model));
  std::vector<int64_t> seeds;
  if (!spec.contains("seeds")) seeds = {0};
  else if (spec["seeds"].is_number_integer())
    for (int64_t s = 0; s < spec["seeds"].get<int64_t>(); ++s) seeds.push_back(s);
  else if (spec["seeds"].is_array())
    for (const auto& s : spec["seeds"]) {
      if (!s.is_number_integer()) throw UsageError("sweep: seeds: expected integers");
      seeds.push_back(s.get<int64_t>());
    }
  else throw UsageError("sweep: seeds: expected a count or a list of integers");
  if (seeds.empty()) throw UsageError("sweep: seeds: at least one seed");
  const json fixed = spec.value("fixed", json::object());
  const json grid = spec.value("grid", json::object());
  const json extra = spec.value("runs", json::array());
  if (!fixed.is_object()) throw UsageError("sweep: fixed: expected an object");
  if (!grid.is_object()) throw UsageError("sweep: grid: expected an object of key -> list");
  if (!extra.is_array()) throw UsageError("sweep: runs: expected a list of objects");
  for (auto it = fixed.begin(); it != fixed.end(); ++it) check_key("fixed", it.key());
  for (auto it = grid.begin(); it != grid.end(); ++it) {
    check_key("grid", it.key());
    if (!it.value().is_array() || it.value().empty())
      throw UsageError(fmt::format("sweep: grid.{}: expected a non-empty list", it.key()));
  }
  if (spec.contains("detectors")) {
    try {
      (void)divergence::Thresholds::from_json(spec["detectors"].dump());
    } catch (const std::invalid_argument& e) {
      throw UsageError(fmt::format("sweep: detectors: {}", e.what()));
    }
  }
  const int64_t steps = spec.value("steps", int64_t{200});
  if (steps <= 0) throw UsageError("sweep: steps must be positive");
  const std::string ref_recipe = spec.value("reference", std::string("fp32"));
  check_recipe(ref_recipe);

  // the grid's points (product over keys in spec order), then the extra runs
  std::vector<json> points = {json::object()};
  for (auto it = grid.begin(); it != grid.end(); ++it) {
    std::vector<json> next;
    for (const auto& p : points)
      for (const auto& v : it.value()) {
        json q = p;
        q[it.key()] = v;
        next.push_back(q);
      }
    points = next;
  }
  if (grid.empty()) points.clear();
  std::vector<std::pair<std::string, json>> named;  // (explicit name or "", point)
  for (const auto& p : points) named.emplace_back("", p);
  for (const auto& r : extra) {
    if (!r.is_object()) throw UsageError("sweep: runs: expected a list of objects");
    json p = r;
    std::string name = p.value("name", std::string());
    p.erase("name");
    for (auto it = p.begin(); it != p.end(); ++it) check_key("runs", it.key());
    named.emplace_back(name, p);
  }
  if (named.empty()) throw UsageError("sweep: nothing to run: give grid.recipe (or --recipes) or runs");

  auto make = [&](const std::string& base, const json& point, int64_t seed, bool reference) {
    PlannedRun r;
    r.seed = seed;
    r.reference = reference;
    json set = json::object();
    set["model"] = model;
    set["steps"] = steps;
    for (auto it = fixed.begin(); it != fixed.end(); ++it) set[it.key()] = it.value();
    for (auto it = point.begin(); it != point.end(); ++it) set[it.key()] = it.value();
    if (!set.contains("recipe")) throw UsageError(fmt::format("sweep: run '{}' has no recipe", base));
    r.recipe = value_text(set["recipe"]);
    check_recipe(r.recipe);
    const int64_t run_steps = set["steps"].get<int64_t>();
    if (!set.contains("checkpoint_every")) set["checkpoint_every"] = std::max<int64_t>(1, run_steps / 5);
    r.set = set;
    std::string name = base;
    if (name.empty()) {
      name = fs::path(r.recipe).stem().string();
      for (auto it = point.begin(); it != point.end(); ++it)
        if (it.key() != "recipe") name += fmt::format("-{}{}", it.key(), value_text(it.value()));
    }
    r.name = safe_name(fmt::format("{}{}-s{}", reference ? "ref-" : "", name, seed));
    r.args = {"train", "--seed", std::to_string(seed)};
    for (auto it = set.begin(); it != set.end(); ++it) {
      std::string opt = "--" + it.key();
      std::replace(opt.begin(), opt.end(), '_', '-');
      r.args.push_back(opt);
      r.args.push_back(value_text(it.value()));
    }
    return r;
  };
  std::vector<PlannedRun> runs;
  for (int64_t seed : seeds) {
    PlannedRun ref = make(ref_recipe, json{{"recipe", ref_recipe}}, seed, true);
    runs.push_back(ref);
  }
  for (const auto& [name, point] : named)
    for (int64_t seed : seeds) {
      PlannedRun r = make(name, point, seed, false);
      for (const auto& x : runs)
        if (x.reference && x.seed == seed) r.reference_run = x.name;
      runs.push_back(r);
    }
  std::set<std::string> names;
  for (const auto& r : runs)
    if (!names.insert(r.name).second) throw UsageError(fmt::format("sweep: two runs named '{}': give them names", r.name));
  return runs;
}

void write_atomic(const fs::path& p, const std::string& text) {
  const fs::path tmp = p.string() + ".tmp";
  {
    std::ofstream f(tmp, std::ios::binary);
    f << text;
    if (!f) throw std::runtime_error(fmt::format("sweep: cannot write {}", tmp.string()));
  }
  fs::rename(tmp, p);
}

std::string self_exe() {
  std::error_code ec;
  auto p = fs::read_symlink("/proc/self/exe", ec);
  if (ec) throw std::runtime_error("sweep: cannot find the lpx binary (/proc/self/exe)");
  return p.string();
}

std::string shell_quote(const std::string& s) {
  std::string o = "'";
  for (char c : s) o += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return o + "'";
}

volatile std::sig_atomic_t g_stop = 0;
void on_signal(int sig) { g_stop = sig; }

pid_t start(const std::string& exe, const std::vector<std::string>& args, const fs::path& log) {
  const pid_t pid = fork();
  if (pid < 0) throw std::runtime_error("sweep: fork failed");
  if (pid == 0) {
    const int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (fd >= 0) {
      dup2(fd, STDOUT_FILENO);
      dup2(fd, STDERR_FILENO);
      close(fd);
    }
    std::vector<char*> argv;
    argv.push_back(const_cast<char*>(exe.c_str()));
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execv(exe.c_str(), argv.data());
    _exit(127);
  }
  return pid;
}

void write_slurm(const fs::path& dir, const std::vector<PlannedRun>& runs, int jobs, const std::string& exe,
                 const std::string& name, bool submit) {
  std::string s = "#!/bin/bash\n# Written by `lpx sweep --launcher slurm`: one array task per run; reruns skip\n"
                  "# finished runs (done marker) and resume unfinished ones, as the local launcher does.\n";
  s += fmt::format("#SBATCH --job-name=lpx-{}\n#SBATCH --array=0-{}%{}\n#SBATCH --cpus-per-task=2\n", safe_name(name),
                   runs.size() - 1, std::max(1, jobs));
  s += fmt::format("#SBATCH --output={}/slurm-%A_%a.out\nset -euo pipefail\nLPX={}\nDIR={}\nRUNS=(\n", dir.string(),
                   shell_quote(exe), shell_quote(fs::absolute(dir).string()));
  for (const auto& r : runs) s += "  " + shell_quote(r.name) + "\n";
  s += ")\nARGS=(\n";
  for (const auto& r : runs) {
    std::string a;
    for (const auto& x : r.args) a += (a.empty() ? "" : " ") + x;
    s += "  " + shell_quote(a) + "\n";
  }
  s += ")\ni=$SLURM_ARRAY_TASK_ID\nd=\"$DIR/${RUNS[$i]}\"\n[ -f \"$d/done\" ] && exit 0\nmkdir -p \"$d\"\n"
       "if [ -f \"$d/run.h5\" ] && \"$LPX\" train --out \"$d/run.h5\" --resume >>\"$d/train.log\" 2>&1; then :\n"
       "else \"$LPX\" ${ARGS[$i]} --out \"$d/run.h5\" >>\"$d/train.log\" 2>&1; fi\n"
       "echo '{\"launcher\": \"slurm\"}' >\"$d/done.tmp\" && mv \"$d/done.tmp\" \"$d/done\"\n";
  const fs::path script = dir / "sweep.sbatch";
  write_atomic(script, s);
  fs::permissions(script, fs::perms::owner_exec, fs::perm_options::add);
  fmt::print("sweep: wrote {} ({} array tasks)\n", script.string(), runs.size());
  if (submit) {
    if (std::system("command -v sbatch >/dev/null 2>&1") != 0)
      throw std::runtime_error("sweep: --submit needs sbatch (Slurm) on PATH; the script is written, submit it by hand");
    const int rc = std::system(("sbatch " + shell_quote(script.string())).c_str());
    if (rc != 0) throw std::runtime_error("sweep: sbatch failed");
  }
}

void run_sweep(const SweepArgs& a) {
  json spec = a.spec.empty() ? json::object() : read_spec(a.spec);
  if (!spec.contains("name")) spec["name"] = a.spec.empty() ? "sweep" : fs::path(a.spec).stem().string();
  if (!a.model.empty()) spec["model"] = a.model;
  if (a.steps > 0) spec["steps"] = a.steps;
  if (a.seeds > 0) spec["seeds"] = a.seeds;
  if (!a.reference.empty()) spec["reference"] = a.reference;
  if (!spec.contains("grid")) spec["grid"] = json::object();
  if (!a.recipes.empty()) {
    json list = json::array();
    std::stringstream ss(a.recipes);
    for (std::string r; std::getline(ss, r, ',');)
      if (!r.empty()) list.push_back(r);
    spec["grid"]["recipe"] = list;
  }
  for (const auto& kv : a.set) {
    const auto eq = kv.find('=');
    if (eq == std::string::npos || eq == 0) throw UsageError(fmt::format("sweep: --set '{}': expected KEY=V1,V2,...", kv));
    const std::string k = kv.substr(0, eq);
    check_key("--set", k);
    json list = json::array();
    std::stringstream ss(kv.substr(eq + 1));
    if (k == "hidden") list.push_back(kv.substr(eq + 1));  // one comma-separated value
    else
      for (std::string v; std::getline(ss, v, ',');) list.push_back(parse_value(v));
    spec["grid"][k] = list;
  }
  const std::vector<PlannedRun> runs = plan(spec);
  const std::string out = !a.out.empty() ? a.out : spec.value("out", std::string());
  if (out.empty()) throw UsageError("sweep: --out DIR is required (or \"out\" in the spec)");
  const int jobs = a.jobs > 0 ? a.jobs : spec.value("jobs", 1);
  if (a.launcher != "local" && a.launcher != "slurm")
    throw UsageError(fmt::format("sweep: --launcher '{}' is not local or slurm", a.launcher));
  if (a.submit && a.launcher != "slurm") throw UsageError("sweep: --submit needs --launcher slurm");
  const fs::path dir(out);
  fs::create_directories(dir);
  json planned = {{"format", "lpx-sweep-1"}, {"spec", spec}, {"runs", json::array()}};
  for (const auto& r : runs)
    planned["runs"].push_back({{"name", r.name}, {"recipe", r.recipe}, {"seed", r.seed}, {"reference", r.reference},
                               {"reference_run", r.reference_run}, {"set", r.set}, {"args", r.args}});
  write_atomic(dir / "sweep.json", planned.dump(2) + "\n");
  const std::string exe = self_exe();
  if (a.dry_run) {
    for (const auto& r : runs) {
      std::string line = "lpx";
      for (const auto& x : r.args) line += " " + x;
      fmt::print("{:<32} {} --out {}\n", r.name, line, (dir / r.name / "run.h5").string());
    }
    return;
  }
  if (a.launcher == "slurm") return write_slurm(dir, runs, jobs, exe, spec["name"].get<std::string>(), a.submit);

  // local: a queue of runs, at most `jobs` children
  struct Task {
    const PlannedRun* run = nullptr;
    bool resumed = false, retried = false;
    std::chrono::steady_clock::time_point t0;
  };
  std::vector<const PlannedRun*> queue;
  int skipped = 0;
  for (const auto& r : runs) {
    if (fs::exists(dir / r.name / "done")) ++skipped;
    else queue.push_back(&r);
  }
  const size_t total = runs.size();
  fmt::print("sweep {}: {} runs ({} already done, {} to run), {} at a time -> {}\n", spec["name"].get<std::string>(),
             total, skipped, queue.size(), jobs, dir.string());
  std::fflush(stdout);
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGINT, &sa, nullptr);
  std::map<pid_t, Task> live;
  size_t next = 0, done = static_cast<size_t>(skipped);
  int failed = 0;
  const auto sweep_t0 = std::chrono::steady_clock::now();
  auto launch = [&](Task t, bool fresh) {
    const PlannedRun& r = *t.run;
    const fs::path rd = dir / r.name;
    fs::create_directories(rd);
    const fs::path log = rd / "run.h5";
    std::vector<std::string> args;
    if (!fresh && fs::exists(log)) {
      args = {"train", "--out", log.string(), "--resume"};
      t.resumed = true;
    } else {
      fs::remove(log);
      args = r.args;
      args.push_back("--out");
      args.push_back(log.string());
      t.resumed = false;
    }
    t.t0 = std::chrono::steady_clock::now();
    live[start(exe, args, rd / "train.log")] = t;
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
      launch(t, false);
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
    const PlannedRun& r = *t.run;
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t.t0).count();
    const bool ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
    if (!ok && t.resumed && !t.retried && !g_stop) {
      // no usable checkpoint: start the run again from scratch
      t.retried = true;
      launch(t, true);
      continue;
    }
    if (ok) {
      ++done;
      write_atomic(dir / r.name / "done", json{{"run", r.name}, {"seconds", secs}, {"resumed", t.resumed}}.dump() + "\n");
    } else if (!g_stop) {
      ++failed;
    }
    if (g_stop) continue;
    const double el = std::chrono::duration<double>(std::chrono::steady_clock::now() - sweep_t0).count();
    fmt::print("[{}/{} done, {} running, {} failed, {:.0f}s] {} {} in {:.1f}s{}\n", done, total, live.size(), failed, el,
               r.name, ok ? "finished" : "FAILED", secs,
               ok ? (t.resumed ? " (resumed)" : "") : fmt::format(" (see {})", (dir / r.name / "train.log").string()));
    std::fflush(stdout);
  }
  fmt::print("sweep: {} of {} runs done{}; `lpx report {}` writes the report\n", done, total,
             failed ? fmt::format(", {} failed", failed) : "", dir.string());
  if (failed) throw std::runtime_error(fmt::format("sweep: {} run(s) failed", failed));
}

const bool registered = register_command(91, [](CLI::App& app) {
  auto a = std::make_shared<SweepArgs>();
  auto* cmd = app.add_subcommand("sweep", "Run a grid of training runs (recipes x seeds x settings) with a reference");
  cmd->add_option("SPEC", a->spec, "Sweep spec (JSON; see tools/sweeps/*.json)");
  cmd->add_option("--recipes", a->recipes, "Recipes to sweep, comma-separated (grid key recipe)");
  cmd->add_option("--seeds", a->seeds, "Number of seeds (0..N-1)");
  cmd->add_option("--model", a->model, "mlp | gpt");
  cmd->add_option("--steps", a->steps, "Training steps per run");
  cmd->add_option("--set", a->set, "Grid key: KEY=V1,V2,... (repeatable; lpx train option names)");
  cmd->add_option("--reference", a->reference, "Reference recipe (default fp32), one run per seed");
  cmd->add_option("--jobs", a->jobs, "Runs at a time (default 1)");
  cmd->add_option("--out", a->out, "Output folder: DIR/<run>/run.h5, DIR/sweep.json");
  cmd->add_option("--launcher", a->launcher, "local (fork/exec here) | slurm (writes DIR/sweep.sbatch)")->capture_default_str();
  cmd->add_flag("--submit", a->submit, "With --launcher slurm: sbatch the script");
  cmd->add_flag("--dry-run", a->dry_run, "Print the runs' commands, run nothing");
  cmd->footer(
      "Examples:\n"
      "  lpx sweep --recipes mxfp8,mxfp4-rne --seeds 3 --steps 300 --set lr=1e-3,3e-3 --jobs 2 --out runs/a\n"
      "  lpx sweep tools/sweeps/sr-on-off.json --out runs/sr && lpx report runs/sr");
  cmd->callback([a] { run_sweep(*a); });
});

}  // namespace
}  // namespace lpx::cli
