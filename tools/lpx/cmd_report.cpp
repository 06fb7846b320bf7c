// `lpx report DIR [--format html|md|json] [--reference RUN] [--thresholds FILE]`: reads every
// run log in DIR (a sweep's output: DIR/<run>/run.h5, or loose DIR/*.h5), runs the offline
// divergence detectors (divergence/) against the reference run of the same seed, and
// writes DIR/report.html (one self-contained page: the run table with the layers each run
// kept in high precision, loss curves with the flags marked, per-layer heatmaps of flushed
// and saturated %, a verdict per configuration, seed statistics with 95% intervals and the
// blame tables of `lpx sweep --ablate`, report_study.hpp), or prints the same as Markdown,
// or as one JSON object {"runs", "configurations", "blame"} (and "corpus" with --corpus).
//
// The page inlines Vega, Vega-Lite and vega-embed from tools/report/node_modules (installed
// by tools/install-deps.sh with `npm ci`), found from --assets, $LPX_REPORT_ASSETS, or by
// walking up from the executable and the working directory to tools/report.
//
// Bad input (docs/input-policy.md): DIR/sweep.json and --thresholds are read under the JSON
// input policy (io/json_input.hpp; sweep.json up to kMaxPlanBytes) and sweep.json's shape is
// checked, each failure one line naming the file (sweep.json: exit 1, as data). A run log
// that cannot be read is listed under "Missing or incomplete" as "<run>: unreadable:
// <reason>" and the report covers the others; when no log at all can be read the command
// exits 1 with the first reason. A failed write (stdout, report.html) exits 1.
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "command.hpp"
#include "json_file.hpp"
#include "lpx/divergence/detectors.hpp"
#include "lpx/io/json_input.hpp"
#include "lpx/runlog/run_log.hpp"
#include "cli_util.hpp"  // compress_layer_names
#include "report_divergence.hpp"
#include "report_study.hpp"
#include "stdout_write.hpp"
#include "sweep_spec.hpp"  // printable

namespace lpx::cli {
#ifdef LPX_REPORT_EMBEDDED
std::string_view embedded_report_file(std::string_view name);  // report_assets.cpp.in (generated)
#endif
namespace {

namespace fs = std::filesystem;
using json = nlohmann::ordered_json;

struct ReportArgs {
  std::string dir, format = "html", reference, thresholds, assets;
  bool intervals = false;  // --intervals: every configuration must have 2 seeds or more
  std::string detectors;   // comma-separated detectors to run ("": all)
  bool corpus = false;     // labelled-corpus figures (report_divergence.hpp)
};

struct Run {
  std::string name;  // path of the log's folder relative to DIR ("mxfp8-s0"), or the file stem
  runlog::Run log;
  divergence::Series series;   // what the detectors read (divergence::series_from(log))
  json config_flat;            // the log's TrainConfig flattened ("model.hidden": ...)
  json swept;                  // the keys that differ between runs
  bool reference = false;
  bool finished = true;
  int64_t planned_steps = 0;
  const Run* ref = nullptr;    // the reference this run is compared with
  std::vector<divergence::Flag> flags;
  divergence::Outcome outcome;
  double final_loss = NAN, gap = NAN;
  double final_eval = NAN;  // the evaluation loss the run ended with (NaN: none)
  bool gap_on_eval = false;  // gap (and the study's figures) on final_eval, else on final_loss
};

struct Report {
  std::string dir;
  std::vector<std::unique_ptr<Run>> runs;
  std::vector<std::string> missing;  // lines about what is not there
  divergence::Thresholds thresholds;
  std::vector<ConfigStats> configs;  // seed statistics per configuration (report_study.hpp)
  std::vector<Blame> blames;         // per-operand / per-layer blame of ablation sweeps
};

std::vector<CorpusRun> corpus_runs(const Report& rep);

void flatten(const json& j, const std::string& prefix, json& out) {
  if (j.is_object()) {
    for (auto it = j.begin(); it != j.end(); ++it)
      flatten(it.value(), prefix.empty() ? it.key() : prefix + "." + it.key(), out);
  } else {
    out[prefix] = j;
  }
}

double tail_mean(const std::vector<double>& v, int n) {
  if (v.empty()) return NAN;
  const size_t k = std::min(v.size(), static_cast<size_t>(std::max(1, n)));
  double s = 0;
  for (size_t i = v.size() - k; i < v.size(); ++i) s += v[i];
  return s / static_cast<double>(k);
}

// JSON has no NaN/Inf: null instead.
json num(double x) { return std::isfinite(x) ? json(x) : json(nullptr); }

std::string fmt_num(double x, const char* f = "{:.4f}") {
  return std::isfinite(x) ? fmt::format(fmt::runtime(f), x) : (std::isnan(x) ? "nan" : (x > 0 ? "inf" : "-inf"));
}

// DIR/sweep.json is at most this long: a sweep has at most kMaxSweepRuns runs of a few KB.
constexpr size_t kMaxPlanBytes = size_t{256} << 20;

// DIR/sweep.json (null when there is none), its shape checked: what load() reads from it is
// there and of the right type.
json read_plan(const fs::path& path) {
  std::error_code ec;
  if (!fs::exists(path, ec)) return json();
  json plan;
  try {
    plan = read_json_file(path.string(), io::JsonLimits{kMaxPlanBytes, io::JsonLimits{}.max_depth});
  } catch (const io::JsonError& e) {
    throw std::runtime_error(fmt::format("report: {}", e.what()));
  }
  const auto bad = [&](const std::string& what) {
    throw std::runtime_error(
        fmt::format("report: {}: {} (lpx sweep writes this file; rerun it or remove the file)", printable(path.string()), what));
  };
  if (!plan.is_object()) bad("expected a JSON object");
  if (plan.contains("spec")) {
    if (!plan["spec"].is_object()) bad("spec: expected an object");
    if (plan["spec"].contains("detectors") && !plan["spec"]["detectors"].is_object())
      bad("spec.detectors: expected an object");
  }
  if (plan.contains("runs")) {
    if (!plan["runs"].is_array()) bad("runs: expected a list");
    for (size_t i = 0; i < plan["runs"].size(); ++i) {
      const json& r = plan["runs"][i];
      const std::string where = fmt::format("runs[{}]", i);
      if (!r.is_object()) bad(where + ": expected an object");
      if (!r.contains("name") || !r["name"].is_string() || r["name"].get<std::string>().empty() ||
          printable(r["name"].get<std::string>()) != r["name"].get<std::string>())
        bad(where + ".name: expected a run name");
      if (r.contains("reference") && !r["reference"].is_boolean()) bad(where + ".reference: expected true or false");
      if (r.contains("reference_run") && !r["reference_run"].is_string()) bad(where + ".reference_run: expected a string");
    }
  }
  return plan;
}

std::string config_text(const json& swept);

Report load(const ReportArgs& a) {
  Report rep;
  rep.dir = a.dir;
  if (!fs::is_directory(a.dir)) throw std::runtime_error(fmt::format("report: {}: not a directory", a.dir));
  // the sweep's plan (written by lpx sweep), when there is one
  const fs::path plan_path = fs::path(a.dir) / "sweep.json";
  const json plan = read_plan(plan_path);
  if (!a.thresholds.empty()) {
    std::string text;
    try {
      text = read_text_file(a.thresholds, io::JsonLimits{}.max_bytes);
    } catch (const io::JsonError& e) {
      throw UsageError(fmt::format("report: --thresholds {}", e.what()));
    }
    rep.thresholds = divergence::Thresholds::from_json(text);
  } else if (plan.contains("spec") && plan["spec"].contains("detectors")) {
    try {
      rep.thresholds = divergence::Thresholds::from_json(plan["spec"]["detectors"].dump());
    } catch (const std::invalid_argument& e) {
      throw std::runtime_error(fmt::format("report: {}: spec.detectors: {}", printable(plan_path.string()), e.what()));
    }
  }
  // every .h5 directly in DIR or one folder down
  std::vector<std::pair<std::string, fs::path>> logs;
  std::vector<std::string> ignored;
  std::vector<std::string> unreadable;  // "<run>: unreadable: <reason>"
  std::string first_error;              // the first unreadable log's error, whole
  std::set<std::string> have;           // runs with a log, readable or not
  for (const auto& e : fs::directory_iterator(a.dir)) {
    std::error_code ec;
    if (e.is_directory(ec)) {
      fs::directory_iterator sub(e.path(), ec);
      if (ec) {
        unreadable.push_back(fmt::format("{}: unreadable: {}", e.path().filename().string(), ec.message()));
        have.insert(e.path().filename().string());
        continue;
      }
      for (const auto& f : sub)
        if (f.is_regular_file(ec) && f.path().extension() == ".h5")
          logs.emplace_back(f.path().filename() == "run.h5" ? e.path().filename().string()
                                                              : e.path().filename().string() + "/" + f.path().stem().string(),
                            f.path());
    } else if (e.is_regular_file(ec) && e.path().extension() == ".h5") {
      logs.emplace_back(e.path().stem().string(), e.path());
    } else if (e.is_regular_file(ec) && e.path().filename() != "sweep.json" && e.path().filename() != "report.html" &&
               e.path().filename() != "sweep.sbatch" && e.path().filename() != "sweep.lock") {
      ignored.push_back(e.path().filename().string());
    }
  }
  std::sort(logs.begin(), logs.end());
  const size_t logs_found = logs.size();
  for (const auto& [name, path] : logs) {
    auto r = std::make_unique<Run>();
    r->name = name;
    have.insert(name);
    try {
      r->log = runlog::read_run(path.string());  // a LogError names the file
      r->series = divergence::series_from(r->log);
    } catch (const std::exception& e) {
      // one bad log (corrupt, truncated, of another version, being written) does not hide the others
      std::string why = e.what();
      if (why.rfind(path.string() + ": ", 0) == 0) why = why.substr(path.string().size() + 2);
      unreadable.push_back(fmt::format("{}: unreadable: {}", name, why));
      if (first_error.empty()) first_error = e.what();
      continue;
    }
    try {
      // the logged config is data too: the JSON input policy bounds its depth (flatten recurses)
      flatten(io::parse_json<json>(r->log.header.config_json, "config"), "", r->config_flat);
    } catch (const std::exception&) {
      r->config_flat = json::object();
    }
    if (r->config_flat.contains("steps") && r->config_flat["steps"].is_number_integer())
      r->planned_steps = r->config_flat["steps"].get<int64_t>();
    r->finished = r->planned_steps == 0 || static_cast<int64_t>(r->series.rows()) >= r->planned_steps;
    if (!r->finished)
      rep.missing.push_back(fmt::format("{}: unfinished ({} of {} steps logged)", name, r->series.rows(), r->planned_steps));
    for (const auto& m : r->log.missing)
      if (m != "/metrics/adam_rms") rep.missing.push_back(fmt::format("{}: no {} in the log", name, m));
    rep.runs.push_back(std::move(r));
  }
  rep.missing.insert(rep.missing.begin(), unreadable.begin(), unreadable.end());
  // runs the plan lists that have no log
  if (plan.contains("runs"))
    for (const auto& p : plan["runs"])
      if (!have.count(p["name"].get<std::string>()))
        rep.missing.push_back(fmt::format("{}: no run.h5 (not started)", p["name"].get<std::string>()));
  for (const auto& x : ignored) rep.missing.push_back(fmt::format("{}: not a run log (ignored)", x));
  if (rep.runs.empty() && logs_found > 0)
    throw std::runtime_error(fmt::format("report: {}: no readable run log: {}{}", a.dir, first_error,
                                         unreadable.size() > 1 ? fmt::format(" (and {} more)", unreadable.size() - 1)
                                                               : std::string()));
  if (rep.runs.empty()) {
    if (rep.missing.empty() || !plan.contains("runs"))
      throw std::runtime_error(fmt::format(
          "report: {}: no run logs (DIR/<run>/run.h5 or DIR/*.h5){}; run `lpx sweep` or `lpx train --out` first", a.dir,
          ignored.empty() ? "" : fmt::format(", only {} other file(s)", ignored.size())));
    return rep;  // a plan with nothing run yet: the report says what is missing
  }

  // the reference runs: --reference, else the plan's, else fp32, else bf16
  std::set<std::string> ref_names;
  if (!a.reference.empty()) {
    const std::string want = fs::path(a.reference).filename() == "run.h5" ? fs::path(a.reference).parent_path().filename().string()
                                                                          : a.reference;
    bool found = false;
    for (const auto& r : rep.runs)
      if (r->name == want || r->log.path == a.reference) ref_names.insert(r->name), found = true;
    if (!found) throw UsageError(fmt::format("report: --reference {}: no such run in {}", a.reference, a.dir));
  } else if (plan.contains("runs")) {
    for (const auto& p : plan["runs"])
      if (p.value("reference", false)) ref_names.insert(p["name"].get<std::string>());
  }
  if (ref_names.empty())
    for (const char* want : {"fp32", "bf16"}) {
      for (const auto& r : rep.runs)
        if (r->log.header.recipe == want) ref_names.insert(r->name);
      if (!ref_names.empty()) break;
    }
  for (auto& r : rep.runs) r->reference = ref_names.count(r->name) > 0;
  // each run's reference: same model and seed, else the first
  for (auto& r : rep.runs) {
    const Run* best = nullptr;
    for (const auto& c : rep.runs)
      if (c->reference && c.get() != r.get()) {
        if (!best) best = c.get();
        if (c->log.header.model == r->log.header.model && c->log.header.seed == r->log.header.seed) {
          best = c.get();
          break;
        }
      }
    r->ref = r->reference ? nullptr : best;
  }
  // the sweep's own pairing (run -> reference_run) wins, unless --reference was given
  if (a.reference.empty() && plan.contains("runs"))
    for (const auto& p : plan["runs"]) {
      const std::string rn = p.value("reference_run", std::string());
      if (rn.empty()) continue;
      Run* run = nullptr;
      const Run* ref = nullptr;
      for (auto& r : rep.runs) {
        if (r->name == p.value("name", std::string())) run = r.get();
        if (r->name == rn) ref = r.get();
      }
      if (run && ref) run->ref = ref;
    }
  // swept keys: config values that differ between runs
  std::set<std::string> keys;
  for (const auto& r : rep.runs)
    for (auto it = r->config_flat.begin(); it != r->config_flat.end(); ++it) keys.insert(it.key());
  for (const auto& k : keys) {
    if (k == "seed" || k == "recipe" || k == "threads" || k == "data") continue;
    std::set<std::string> vals;
    for (const auto& r : rep.runs) vals.insert(r->config_flat.contains(k) ? r->config_flat[k].dump() : "-");
    if (vals.size() > 1)
      for (auto& r : rep.runs) r->swept[k] = r->config_flat.contains(k) ? r->config_flat[k] : json(nullptr);
  }
  for (auto& r : rep.runs)
    if (r->swept.is_null()) r->swept = json::object();
  // detectors and verdicts
  std::vector<std::string> enabled;
  try {
    enabled = divergence::parse_detector_list(a.detectors);
  } catch (const std::invalid_argument& e) {
    throw UsageError(fmt::format("report: --detectors: {}", e.what()));
  }
  for (auto& r : rep.runs) {
    const divergence::Series* ref = r->ref ? &r->ref->series : nullptr;
    r->flags = divergence::only(divergence::detect(r->series, rep.thresholds, ref), enabled);
    r->outcome = divergence::judge(r->series, ref, rep.thresholds, r->flags);
    r->final_loss = tail_mean(r->series.loss, rep.thresholds.smooth);
  }
  // One gap per run, on the figure the gap verdict reads (report_divergence.hpp, gap_band):
  // the final evaluation loss where every reference of the model ended with one, else the
  // training loss's trailing mean. The seed statistics and blame below read the same figure.
  const std::vector<CorpusRun> corpus = corpus_runs(rep);
  std::map<std::string, GapBand> bands;
  for (size_t i = 0; i < rep.runs.size(); ++i) {
    Run& r = *rep.runs[i];
    auto band = bands.find(corpus[i].model);
    if (band == bands.end()) band = bands.emplace(corpus[i].model, gap_band(corpus, corpus[i].model)).first;
    r.final_eval = corpus[i].final_eval;
    r.gap_on_eval = band->second.eval;
    if (r.ref) r.gap = final_gap(corpus[i], band->second);
  }
  // seed statistics and blame over the finished runs
  std::vector<StudyRun> study;
  for (const auto& r : rep.runs) {
    if (!r->finished) continue;
    const auto figure = [&](const Run& x) { return r->gap_on_eval ? x.final_eval : x.final_loss; };
    study.push_back(StudyRun{r->name, r->log.header.recipe, config_text(r->swept),
                             static_cast<uint64_t>(r->log.header.seed), r->reference, figure(*r),
                             r->ref ? figure(*r->ref) : NAN, r->gap_on_eval});
  }
  rep.configs = config_stats(study);
  rep.blames = blame(study);
  if (a.intervals)
    for (const ConfigStats& c : rep.configs)
      if (c.gap.n < 2)
        throw UsageError(fmt::format("report: --intervals: {}{} has {} seed{} with a reference; 95% intervals need at least 2 "
                                     "(sweep with --seeds 3)",
                                     c.recipe, c.config == "-" ? "" : " (" + c.config + ")", c.gap.n, c.gap.n == 1 ? "" : "s"));
  return rep;
}

json run_json(const Run& r) {
  json j;
  j["run"] = r.name;
  j["recipe"] = r.log.header.recipe;
  j["model"] = r.log.header.model;
  j["seed"] = r.log.header.seed;
  j["config"] = r.swept;
  j["reference"] = r.reference;
  j["reference_run"] = r.ref ? json(r.ref->name) : json(nullptr);
  j["steps"] = r.series.rows();
  j["finished"] = r.finished;
  j["final_loss"] = num(r.final_loss);
  j["final_eval_loss"] = num(r.final_eval);
  j["gap_to_reference"] = num(r.gap);
  j["gap_on"] = r.gap_on_eval ? "evaluation loss" : "training loss";
  j["flagged"] = r.outcome.flagged;
  j["first_flag_step"] = r.outcome.flagged ? json(r.outcome.first_flag_step) : json(nullptr);
  j["first_flag_detector"] = r.outcome.flagged ? json(r.outcome.first_flag_detector) : json(nullptr);
  j["flags"] = r.flags.size();
  j["diverged"] = r.outcome.diverged;
  j["divergence_step"] = r.outcome.diverged ? json(r.outcome.divergence_step) : json(nullptr);
  j["divergence_reason"] = r.outcome.diverged ? json(r.outcome.reason) : json(nullptr);
  j["lead_time"] = r.outcome.lead_time ? json(*r.outcome.lead_time) : json(nullptr);
  return j;
}

std::string config_text(const json& swept) {
  std::string s;
  for (auto it = swept.begin(); it != swept.end(); ++it)
    s += fmt::format("{}{}={}", s.empty() ? "" : " ", it.key(),
                     it.value().is_string()         ? it.value().get<std::string>()
                     : it.value().is_number_float() ? fmt::format("{:.4g}", it.value().get<double>())
                                                    : it.value().dump());
  return s.empty() ? "-" : s;
}

// One line per configuration (a recipe with its swept settings): how many runs diverged or
// were flagged, the lead times.
std::vector<std::pair<std::string, std::string>> verdicts(const Report& rep) {
  std::map<std::string, std::vector<const Run*>> by;
  std::vector<std::string> order;
  for (const auto& r : rep.runs) {
    const std::string key =
        r->swept.empty() ? r->log.header.recipe : fmt::format("{} ({})", r->log.header.recipe, config_text(r->swept));
    if (!by.count(key)) order.push_back(key);
    by[key].push_back(r.get());
  }
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& name : order) {
    const auto& rs = by[name];
    int div = 0, flg = 0, early = 0;
    std::vector<int64_t> leads;
    double worst_gap = NAN;
    std::map<std::string, int> dets;
    for (const Run* r : rs) {
      div += r->outcome.diverged;
      flg += r->outcome.flagged;
      if (r->outcome.flagged) ++dets[r->outcome.first_flag_detector];
      if (r->outcome.lead_time) {
        leads.push_back(*r->outcome.lead_time);
        early += *r->outcome.lead_time > 0;
      }
      if (std::isfinite(r->gap) && !(r->gap <= worst_gap)) worst_gap = r->gap;
    }
    std::string first_dets;
    for (const auto& [d, c] : dets) first_dets += fmt::format("{}{} x{}", first_dets.empty() ? "" : ", ", d, c);
    std::string v;
    const size_t n = rs.size();
    if (rs.front()->reference) {
      v = fmt::format("reference ({} run{})", n, n > 1 ? "s" : "");
    } else if (div > 0) {
      std::sort(leads.begin(), leads.end());
      v = fmt::format("DIVERGED in {}/{} runs; flagged before divergence in {}/{}", div, n, early, div);
      if (!leads.empty()) v += fmt::format(" (lead time median {} steps)", leads[leads.size() / 2]);
      if (!first_dets.empty()) v += fmt::format("; first warnings: {}", first_dets);
    } else if (flg > 0) {
      v = fmt::format("flagged in {}/{} runs but did not diverge ({}); worst final gap to reference {}", flg, n,
                      first_dets, std::isfinite(worst_gap) ? fmt::format("{:+.1f}%", 100 * worst_gap) : "n/a");
    } else {
      v = fmt::format("healthy in {}/{} runs; worst final gap to reference {}", n, n,
                      std::isfinite(worst_gap) ? fmt::format("{:+.1f}%", 100 * worst_gap) : "n/a");
    }
    out.emplace_back(name, v);
  }
  return out;
}

// True when the log says what every quantizer applied and none went below BF16 (every
// layer kept in high precision, as sub4-e2m0 does on the 2-layer MLP): the run compares
// nothing low-precision, so the table says so (issue 16 item 6). fp32 and bf16 recipes
// mean to do exactly that and are not marked.
bool quantized_nothing(const Run& r) {
  const auto& applied = r.log.quant.applied;
  if (applied.empty() || r.log.header.recipe == "fp32" || r.log.header.recipe == "bf16") return false;
  for (const auto& a : applied)
    if (!a.element.empty() && a.element != "float32" && a.element != "bfloat16") return false;  // "": role not run
  return true;
}

// The layers a run kept in high precision while it quantized others ("h7.*, lm_head,
// attention products"), from /quant/applied; "" when it kept none or quantized none.
std::string kept_layers(const Run& r) {
  const auto& q = r.log.quant;
  const size_t nr = q.roles.size();
  if (q.applied.empty() || nr == 0 || q.applied.size() != q.layers.size() * nr || quantized_nothing(r)) return "";
  std::vector<std::string> kept;
  bool any_low = false;
  for (size_t l = 0; l < q.layers.size(); ++l) {
    bool high = true, ran = false;
    for (size_t k = 0; k < nr; ++k) {
      const std::string& e = q.applied[l * nr + k].element;
      if (e.empty()) continue;
      ran = true;
      if (e != "float32" && e != "bfloat16") high = false;
    }
    if (ran && high) kept.push_back(q.layers[l]);
    any_low = any_low || !high;
  }
  return any_low && !kept.empty() ? compress_layer_names(kept, q.layers) : "";
}

std::string table_row_cells(const Run& r) {
  const auto& o = r.outcome;
  const std::string kept = kept_layers(r);
  return fmt::format("{}|{}{}|{}|{}|{}|{}|{}|{}|{}|{}|{}", r.name, r.log.header.recipe,
                     quantized_nothing(r) ? " (nothing quantized below BF16)"
                     : kept.empty()       ? ""
                                          : fmt::format(" (kept high: {})", kept),
                     r.log.header.seed, config_text(r.swept),
                     fmt_num(r.final_loss), fmt_num(r.final_eval),
                     r.ref ? fmt::format("{:+.2f}%{}", 100 * r.gap, r.gap_on_eval ? "" : " (training loss)")
                           : (r.reference ? "reference" : "-"),
                     o.flagged ? fmt::format("{} ({})", o.first_flag_step, o.first_flag_detector) : "-",
                     o.diverged ? fmt::format("{} ({})", o.divergence_step, o.reason) : "-",
                     o.lead_time ? fmt::format("{}", *o.lead_time) : "-", r.finished ? "yes" : "no");
}
// "final loss" is the mean of the last `smooth` steps (tail_mean), and the header says so;
// the gap is on the final evaluation loss unless its cell says "(training loss)".
std::string header(const Report& rep) {
  return fmt::format("run|recipe|seed|swept config|final loss (mean of last {} steps)|final eval loss|"
                     "gap to reference (eval loss)|first flag|"
                     "divergence|lead time|finished",
                     std::max(1, rep.thresholds.smooth));
}

// The seed-statistics table and one blame table per ablated recipe, as '|'-separated rows
// (the first row is the header), for the Markdown and HTML pages.
std::vector<std::pair<std::string, std::vector<std::string>>> study_tables(const Report& rep) {
  std::vector<std::pair<std::string, std::vector<std::string>>> out;
  bool any_interval = false;
  for (const ConfigStats& c : rep.configs) any_interval = any_interval || c.gap.n >= 2;
  if (any_interval) {
    std::vector<std::string> rows = {"recipe|swept config|seeds|loss|mean gap to reference [95% interval]|reference "
                                     "seed-to-seed spread|verdict"};
    for (const ConfigStats& c : rep.configs)
      rows.push_back(fmt::format("{}|{}|{}|{}|{}|{}|{}{}", c.recipe, c.config, c.gap.n,
                                 c.on_eval ? "final eval" : "training (last steps)", gap_text(c.gap),
                                 std::isfinite(c.reference_spread) ? fmt::format("{:.2f}%", 100 * c.reference_spread) : "n/a",
                                 c.verdict, c.within_seed_spread ? " (within seed spread)" : ""));
    out.emplace_back("Seed statistics", rows);
  }
  for (const Blame& b : rep.blames) {
    std::vector<std::string> rows = {"rank|unit|seeds|gap with only this unit quantized (share of the recipe's gap)|gap "
                                     "closed by not quantizing it (share)"};
    int rank = 0;
    for (const BlameRow& r : b.rows)
      rows.push_back(fmt::format("{}|{}|{}|{}|{}", ++rank, r.unit, r.seeds, share_text(r.only_share), share_text(r.closed_share)));
    out.emplace_back(fmt::format("Blame: {}{} (gap {:.4f} [{:.4f}, {:.4f}] in loss)", b.recipe,
                                 b.config == "-" ? "" : " " + b.config, b.full_gap.mean, b.full_gap.lo, b.full_gap.hi),
                     rows);
  }
  return out;
}

std::string markdown(const Report& rep) {
  std::string o;
  const auto out = std::back_inserter(o);
  fmt::format_to(out, "# lpx report: {}\n\n", rep.dir);
  if (!rep.missing.empty()) {
    fmt::format_to(out, "## Missing or incomplete\n\n");
    for (const auto& m : rep.missing) fmt::format_to(out, "- {}\n", m);
    fmt::format_to(out, "\n");
  }
  if (rep.runs.empty()) return o;
  auto md_row = [](const std::string& cells) {
    std::string row;
    for (char c : cells) row += c == '|' ? std::string(" | ") : std::string(1, c);
    return "| " + row + " |\n";
  };
  fmt::format_to(out, "## Runs\n\n{}", md_row(header(rep)));
  std::string rule = "|";
  for (char c : header(rep) + "|") if (c == '|') rule += "---|";
  fmt::format_to(out, "{}\n", rule);
  for (const auto& r : rep.runs) fmt::format_to(out, "{}", md_row(table_row_cells(*r)));
  fmt::format_to(out, "\n## Verdicts\n\n");
  for (const auto& [recipe, v] : verdicts(rep)) fmt::format_to(out, "- **{}**: {}\n", recipe, v);
  for (const auto& [title, rows] : study_tables(rep)) {
    fmt::format_to(out, "\n## {}\n\n", title);
    for (size_t i = 0; i < rows.size(); ++i) {
      fmt::format_to(out, "{}", md_row(rows[i]));
      if (i == 0) {
        std::string rule2 = "|";
        for (char c : rows[0] + "|") if (c == '|') rule2 += "---|";
        fmt::format_to(out, "{}\n", rule2);
      }
    }
  }
  fmt::format_to(out, "\n## Flags\n\n");
  for (const auto& r : rep.runs) {
    if (r->flags.empty()) continue;
    fmt::format_to(out, "{}:\n", r->name);
    const size_t show = std::min<size_t>(r->flags.size(), 12);
    for (size_t i = 0; i < show; ++i) fmt::format_to(out, "  - {}\n", r->flags[i].describe());
    if (show < r->flags.size()) fmt::format_to(out, "  - ... {} more\n", r->flags.size() - show);
  }
  return o;
}

// ---- HTML ---------------------------------------------------------------------------

std::string esc(const std::string& s) {
  std::string o;
  for (char c : s) {
    switch (c) {
      case '<': o += "&lt;"; break;
      case '>': o += "&gt;"; break;
      case '&': o += "&amp;"; break;
      case '"': o += "&quot;"; break;
      default: o += c;
    }
  }
  return o;
}

std::string slurp(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  if (!f) throw std::runtime_error(fmt::format("report: cannot read {}", p.string()));
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// An asset of the report, by its path relative to tools/report: from `assets`, or from the
// copy embedded in the binary when `assets` is empty (see find_assets).
std::string asset(const fs::path& assets, const std::string& name) {
#ifdef LPX_REPORT_EMBEDDED
  if (assets.empty()) return std::string(embedded_report_file(name));
#endif
  return slurp(assets / name);
}

// tools/report (the template and node_modules), or an error that says how to install it.
// Order: --assets, $LPX_REPORT_ASSETS, a source tree's tools/report above the binary or the
// working folder, an installed share/lpx/report beside the binary (PREFIX/bin/lpx), and
// last the copy embedded in the binary (returned as an empty path).
fs::path find_assets(const std::string& option) {
  std::vector<fs::path> tried;
  auto ok = [](const fs::path& d) { return fs::exists(d / "node_modules" / "vega-embed" / "build" / "vega-embed.min.js"); };
  std::vector<fs::path> candidates;
  if (!option.empty()) candidates.emplace_back(option);
  if (const char* e = std::getenv("LPX_REPORT_ASSETS")) candidates.emplace_back(e);
  if (candidates.empty()) {
    std::error_code ec;
    const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
    for (fs::path start : {ec ? fs::path() : exe.parent_path(), fs::current_path()})
      for (fs::path d = start; !d.empty(); d = d.parent_path()) {
        candidates.push_back(d / "tools" / "report");
        if (d == d.parent_path()) break;
      }
    if (!ec) candidates.push_back(exe.parent_path().parent_path() / "share" / "lpx" / "report");
  }
  for (const auto& c : candidates) {
    if (ok(c) && fs::exists(c / "report.html.in")) return c;
    if (fs::exists(c / "package.json")) tried.push_back(c);
  }
#ifdef LPX_REPORT_EMBEDDED
  if (option.empty() && !std::getenv("LPX_REPORT_ASSETS")) return {};
#endif
  if (!option.empty() || std::getenv("LPX_REPORT_ASSETS"))
    throw std::runtime_error(fmt::format("report: {}: no tools/report with node_modules (vega, vega-lite, vega-embed) there; "
                                         "run tools/install-deps.sh (npm ci in tools/report)", candidates.front().string()));
#ifndef LPX_REPORT_EMBEDDED
  throw std::runtime_error(fmt::format(
      "report: the charting library (vega, vega-lite, vega-embed in tools/report/node_modules) is missing{}; "
      "run tools/install-deps.sh (npm ci in tools/report), or pass --assets DIR / set LPX_REPORT_ASSETS",
      tried.empty() ? "" : fmt::format(" in {}", tried.front().string())));
#else
  return {};
#endif
}

// Inline <script> text must not close its element: "</script" becomes "<\/script" (the
// same text inside a JS string, regular expression or JSON string).
std::string script_safe(std::string s) {
  for (size_t p = 0; (p = s.find("</", p)) != std::string::npos; p += 3) {
    std::string word = s.substr(p + 2, 6);
    for (char& c : word) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (word == "script") s.replace(p, 2, "<\\/");
  }
  return s;
}

// Every `stride`-th row (and the last), so a chart holds at most ~max points per run.
size_t stride_for(size_t n, size_t max) { return std::max<size_t>(1, (n + max - 1) / max); }

json loss_chart(const Report& rep) {
  json values = json::array(), flags = json::array();
  double ymax = 0, ymin = INFINITY;
  for (const auto& r : rep.runs) {
    const auto& s = r->series;
    const size_t st = stride_for(s.rows(), 400);
    // the trailing mean of `smooth` steps (the detectors' smoothing, detectors.hpp), from the
    // full series before the curve is thinned to ~400 points
    const size_t k = static_cast<size_t>(std::max(1, rep.thresholds.smooth));
    std::vector<double> smooth(s.rows(), NAN);
    double sum = 0;
    size_t finite = 0;
    for (size_t i = 0; i < s.rows(); ++i) {
      if (std::isfinite(s.loss[i])) sum += s.loss[i], ++finite;
      if (i >= k && std::isfinite(s.loss[i - k])) sum -= s.loss[i - k], --finite;
      if (finite == std::min(i + 1, k)) smooth[i] = sum / static_cast<double>(finite);
    }
    for (size_t i = 0; i < s.rows(); ++i) {
      if (i % st != 0 && i + 1 != s.rows()) continue;
      values.push_back({{"run", r->name}, {"step", s.step[i]}, {"loss", num(s.loss[i])}, {"smoothed", num(smooth[i])},
                        {"reference", r->reference}});
      if (std::isfinite(s.loss[i])) ymin = std::min(ymin, s.loss[i]);
    }
    if (r->reference || !r->ref)
      for (double x : s.loss)
        if (std::isfinite(x)) ymax = std::max(ymax, x);
    for (const auto& f : r->flags) {
      // mark at the run's loss of that step (clamped into the chart)
      size_t i = 0;
      while (i + 1 < s.rows() && s.step[i] < f.step) ++i;
      flags.push_back({{"run", r->name}, {"step", f.step}, {"loss", num(s.loss[i])}, {"detector", f.detector},
                       {"where", f.layer.empty() ? "" : f.layer + "/" + f.operand}, {"what", f.describe()}});
    }
  }
  if (!(ymax > 0)) ymax = 10;
  if (!std::isfinite(ymin)) ymin = 0;
  const json y = {{"field", "loss"}, {"type", "quantitative"}, {"title", "training loss"},
                  {"scale", {{"domain", {std::max(0.0, ymin * 0.9), ymax * 1.5}}, {"clamp", true}}}};
  // runs in distinct colours (10 before any repeats); the reference black, thick and dashed
  const json color = {{"field", "run"},
                      {"type", "nominal"},
                      {"scale", {{"scheme", "tableau10"}}},
                      {"condition", {{"test", "datum.reference"}, {"value", "black"}}}};
  json line;
  line["data"] = {{"values", values}};
  line["transform"] = json::array({json{{"filter", "isValid(datum.loss) && isFinite(datum.loss)"}}});
  line["mark"] = {{"type", "line"}, {"clip", true}};
  line["encoding"]["x"] = {{"field", "step"}, {"type", "quantitative"}};
  line["encoding"]["y"] = y;
  line["encoding"]["color"] = color;
  line["encoding"]["detail"] = {{"field", "run"}, {"type", "nominal"}};
  // the raw curve stays visible, faint, under the smoothed one (checkbox "smoothed")
  line["encoding"]["opacity"] = {{"condition", {{"test", "smoothed"}, {"value", 0.3}}}, {"value", 1}};
  line["encoding"]["strokeWidth"] = {{"condition", {{"test", "datum.reference"}, {"value", 2.5}}}, {"value", 1.2}};
  line["encoding"]["strokeDash"] = {{"condition", {{"test", "datum.reference"}, {"value", json::array({6, 3})}}},
                                    {"value", json::array({1, 0})}};
  line["encoding"]["tooltip"] = json::array({json{{"field", "run"}}, json{{"field", "step"}}, json{{"field", "loss"}}});
  const json params = json::array({json{{"name", "smoothed"},
                                     {"value", true},
                                     {"bind", {{"input", "checkbox"},
                                               {"name", fmt::format("smoothed (trailing mean of {} steps) ",
                                                                    std::max(1, rep.thresholds.smooth))}}}}});
  json smoothed;
  smoothed["data"] = {{"values", values}};
  smoothed["transform"] = json::array({json{{"filter", "smoothed && isValid(datum.smoothed) && isFinite(datum.smoothed)"}}});
  smoothed["mark"] = {{"type", "line"}, {"clip", true}};
  smoothed["encoding"] = line["encoding"];
  smoothed["encoding"].erase("opacity");
  smoothed["encoding"]["y"]["field"] = "smoothed";
  smoothed["encoding"]["tooltip"] =
      json::array({json{{"field", "run"}}, json{{"field", "step"}}, json{{"field", "smoothed"}}});
  json marks;
  marks["data"] = {{"values", flags}};
  marks["transform"] = json::array(
      {json{{"calculate", "isValid(datum.loss) && isFinite(datum.loss) ? datum.loss : 1e30"}, {"as", "y"}}});
  marks["mark"] = {{"type", "point"}, {"shape", "triangle-down"}, {"size", 80}, {"filled", true}, {"clip", true}};
  marks["encoding"]["x"] = {{"field", "step"}, {"type", "quantitative"}};
  marks["encoding"]["y"] = {{"field", "y"}, {"type", "quantitative"}, {"scale", y["scale"]}};
  marks["encoding"]["color"] = color;
  // one shape per detector, every one in the legend
  marks["encoding"]["shape"] = {{"field", "detector"}, {"type", "nominal"}, {"legend", {{"title", "flag (detector)"}}}};
  marks["encoding"]["tooltip"] = json::array({json{{"field", "what"}}});
  json spec;
  spec["$schema"] = "https://vega.github.io/schema/vega-lite/v6.json";
  spec["width"] = 760;
  spec["height"] = 360;
  spec["params"] = params;  // a variable (checkbox), so at the top of the layered spec
  spec["layer"] = json::array({line, smoothed});
  if (!flags.empty()) spec["layer"].push_back(marks);
  return spec;
}

// Heatmap of one statistic for one run: rows layer/operand, columns step bins (mean of the
// finite rows in the bin).
// `domain_max`: the largest value of this statistic over every run, so all maps of one
// quantity share one colour scale and read against each other.
std::optional<json> heatmap(const Run& r, const std::vector<float>& a, const char* title, double domain_max) {
  const auto& s = r.series;
  const size_t n = s.rows(), L = s.layers.size(), R = s.roles.size();
  if (a.size() < n * L * R || n == 0 || L * R == 0) return std::nullopt;
  const size_t bins = std::min<size_t>(n, 60);
  json values = json::array();
  bool any = false;
  for (size_t l = 0; l < L; ++l)
    for (size_t ro = 0; ro < R; ++ro)
      for (size_t b = 0; b < bins; ++b) {
        const size_t lo = b * n / bins, hi = (b + 1) * n / bins;
        double sum = 0;
        int cnt = 0;
        for (size_t i = lo; i < hi; ++i) {
          const float x = a[(i * L + l) * R + ro];
          if (std::isfinite(x)) sum += x, ++cnt;
        }
        if (!cnt) continue;
        any = any || sum > 0;  // an all-zero map (fp32, bf16) is left out
        values.push_back({{"operand", s.layers[l] + " " + s.roles[ro]}, {"step", s.step[lo]}, {"to", s.step[hi - 1]},
                          {"pct", sum / cnt}});
      }
  if (!any) return std::nullopt;
  json spec;
  spec["$schema"] = "https://vega.github.io/schema/vega-lite/v6.json";
  spec["title"] = fmt::format("{}: {}", r.name, title);
  spec["width"] = 360;
  spec["data"] = {{"values", values}};
  spec["mark"] = "rect";
  spec["encoding"]["x"] = {{"field", "step"}, {"type", "ordinal"}, {"axis", {{"labelOverlap", true}}}};
  spec["encoding"]["y"] = {{"field", "operand"}, {"type", "nominal"}, {"sort", nullptr}, {"title", nullptr}};
  spec["encoding"]["color"] = {{"field", "pct"}, {"type", "quantitative"}, {"title", "%"}, {"scale", {{"scheme", "orangered"}, {"domain", json::array({0, domain_max > 0 ? domain_max : 1})}}}};
  spec["encoding"]["tooltip"] = json::array({json{{"field", "operand"}}, json{{"field", "step"}}, json{{"field", "to"}},
                                             json{{"field", "pct"}, {"format", ".3f"}}});
  return spec;
}

void write_html(const Report& rep, const fs::path& assets) {
  const std::string templ = asset(assets, "report.html.in");
  std::string body;
  json charts = json::array();
  // the detector thresholds as a two-column table (folded), not one long JSON line
  std::string thr = "<details><summary>Detector thresholds</summary>\n<table class=\"thresholds\">\n"
                    "<tr><th>threshold</th><th>value</th></tr>\n";
  try {
    const json t = json::parse(rep.thresholds.to_json());
    for (auto it = t.begin(); it != t.end(); ++it)
      thr += fmt::format("<tr><td>{}</td><td>{}</td></tr>\n", esc(it.key()), esc(it.value().dump()));
  } catch (const json::exception&) {
    thr += fmt::format("<tr><td colspan=\"2\"><code>{}</code></td></tr>\n", esc(rep.thresholds.to_json()));
  }
  thr += "</table></details>\n";
  body += fmt::format("<h1>lpx report: {}</h1>\n<p class=\"muted\">{} run(s).</p>\n{}", esc(rep.dir),
                      rep.runs.size(), thr);
  if (!rep.missing.empty()) {
    body += "<h2>Missing or incomplete</h2>\n<ul class=\"missing\">\n";
    for (const auto& m : rep.missing) body += fmt::format("<li>{}</li>\n", esc(m));
    body += "</ul>\n";
  }
  if (!rep.runs.empty()) {
    body += "<h2>Verdicts</h2>\n<ul>\n";
    for (const auto& [recipe, v] : verdicts(rep)) body += fmt::format("<li><b>{}</b>: {}</li>\n", esc(recipe), esc(v));
    body += "</ul>\n";
    for (const auto& [title, rows] : study_tables(rep)) {
      body += fmt::format("<h2>{}</h2>\n<table>\n", esc(title));
      for (size_t i = 0; i < rows.size(); ++i) {
        body += "<tr>";
        std::stringstream cs(rows[i]);
        for (std::string c; std::getline(cs, c, '|');)
          body += i == 0 ? fmt::format("<th>{}</th>", esc(c)) : fmt::format("<td>{}</td>", esc(c));
        body += "</tr>\n";
      }
      body += "</table>\n";
    }
    body += "<h2>Runs</h2>\n<table>\n<tr>";
    std::stringstream hs(header(rep));
    for (std::string h; std::getline(hs, h, '|');) body += fmt::format("<th>{}</th>", esc(h));
    body += "</tr>\n";
    for (const auto& r : rep.runs) {
      const char* cls = r->reference ? "reference" : r->outcome.diverged ? "diverged" : r->outcome.flagged ? "flagged" : "";
      body += fmt::format("<tr class=\"{}\">", cls);
      std::stringstream cs(table_row_cells(*r));
      for (std::string c; std::getline(cs, c, '|');) body += fmt::format("<td>{}</td>", esc(c));
      body += "</tr>\n";
    }
    body += "</table>\n<h2>Loss curves (reference black, dashed; smoothed over the faint raw curve; shapes: flags by detector)</h2>\n<div id=\"chart-loss\"></div>\n";
    charts.push_back({{"id", "chart-loss"}, {"spec", loss_chart(rep)}});
    body += "<h2>Per-layer underflow (% of nonzero elements flushed to zero) and saturation (% clipped)</h2>\n";
    int k = 0;
    double max_flushed = 0, max_saturated = 0;  // one colour scale per quantity across runs
    for (const auto& r : rep.runs) {
      for (float x : r->series.flushed_pct)
        if (std::isfinite(x)) max_flushed = std::max(max_flushed, static_cast<double>(x));
      for (float x : r->series.saturated_pct)
        if (std::isfinite(x)) max_saturated = std::max(max_saturated, static_cast<double>(x));
    }
    for (const auto& r : rep.runs) {
      std::string row;
      for (auto [arr, title] : {std::pair{&r->series.flushed_pct, "flushed %"},
                                std::pair{&r->series.saturated_pct, "saturated %"}}) {
        if (auto spec = heatmap(*r, *arr, title, arr == &r->series.flushed_pct ? max_flushed : max_saturated)) {
          const std::string id = fmt::format("chart-heat-{}", k++);
          row += fmt::format("<div id=\"{}\"></div>", id);
          charts.push_back({{"id", id}, {"spec", *spec}});
        }
      }
      if (!row.empty()) body += "<div class=\"charts\">" + row + "</div>\n";
    }
    body += "<h2>Flags</h2>\n";
    for (const auto& r : rep.runs) {
      if (r->flags.empty()) continue;
      body += fmt::format("<details><summary>{}: {} flag(s)</summary><ul>", esc(r->name), r->flags.size());
      for (size_t i = 0; i < std::min<size_t>(r->flags.size(), 200); ++i)
        body += fmt::format("<li>{}</li>", esc(r->flags[i].describe()));
      body += "</ul></details>\n";
    }
  }
  const std::map<std::string, std::string> subst = {
      {"TITLE", esc("lpx report: " + rep.dir)},
      {"VEGA", script_safe(asset(assets, "node_modules/vega/build/vega.min.js"))},
      {"VEGA_LITE", script_safe(asset(assets, "node_modules/vega-lite/build/vega-lite.min.js"))},
      {"VEGA_EMBED", script_safe(asset(assets, "node_modules/vega-embed/build/vega-embed.min.js"))},
      {"BODY", body},
      {"CHARTS", script_safe(charts.dump(-1, ' ', false, json::error_handler_t::replace))}};
  // one pass over the template, so inlined text is never searched for markers
  std::string out;
  size_t p = 0;
  while (true) {
    const size_t a = templ.find("@@", p);
    if (a == std::string::npos) break;
    const size_t b = templ.find("@@", a + 2);
    if (b == std::string::npos) break;
    const auto it = subst.find(templ.substr(a + 2, b - a - 2));
    if (it == subst.end()) {
      out += templ.substr(p, a + 2 - p);
      p = a + 2;
      continue;
    }
    out += templ.substr(p, a - p) + it->second;
    p = b + 2;
  }
  out += templ.substr(p);
  const fs::path dst = fs::path(rep.dir) / "report.html", tmp = fs::path(rep.dir) / ".report.html.tmp";
  bool ok = false;
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    f << out;
    f.close();  // the last buffer is written here: a full disk shows up now, not never
    ok = static_cast<bool>(f);
  }
  std::error_code ec;
  if (ok) fs::rename(tmp, dst, ec);
  if (!ok || ec) {
    const int e = ec ? ec.value() : errno;
    fs::remove(tmp, ec);
    throw std::runtime_error(fmt::format("report: cannot write {}: {}", dst.string(), std::strerror(e)));
  }
  write_stdout(fmt::format("report: {} ({} runs, {} charts)\n", dst.string(), rep.runs.size(), charts.size()), "report");
}

// The loss of the evaluation a run ended with: its last /eval row, when that row was taken
// after the run's last logged step (lpx train evaluates when it finishes); NaN otherwise.
double final_eval_loss(const Run& r) {
  const auto& e = r.log.eval;
  if (e.step.empty() || r.series.step.empty() || e.step.back() != r.series.step.back() + 1) return NAN;
  return e.loss.back();
}

// The runs as report_divergence.hpp reads them.
std::vector<CorpusRun> corpus_runs(const Report& rep) {
  std::vector<CorpusRun> out;
  for (const auto& r : rep.runs) {
    CorpusRun c;
    c.name = r->name;
    c.model = r->log.header.model;
    c.seed = r->log.header.seed;
    c.reference = r->reference;
    c.series = &r->series;
    c.reference_run = r->ref ? r->ref->name : "";
    c.final_loss = r->final_loss;
    c.reference_final = r->ref ? tail_mean(r->ref->series.loss, rep.thresholds.smooth) : NAN;
    c.final_eval = final_eval_loss(*r);
    c.reference_eval = r->ref ? final_eval_loss(*r->ref) : NAN;
    c.flags = r->flags;
    c.outcome = r->outcome;
    // the injected outlier's step, for the "instant" class (report_divergence.hpp)
    const json cfg = json::parse(r->log.header.config_json, nullptr, /*allow_exceptions=*/false);
    if (cfg.is_object() && cfg.contains("inject") && cfg["inject"].is_string() && cfg.contains("inject_step") &&
        cfg["inject_step"].is_number_integer()) {
      c.inject = cfg["inject"].get<std::string>();
      c.inject_step = cfg["inject_step"].get<int64_t>();
    }
    out.push_back(std::move(c));
  }
  return out;
}

void run_report(const ReportArgs& a) {
  if (a.format != "html" && a.format != "md" && a.format != "json")
    throw UsageError(fmt::format("report: --format '{}' is not html, md or json", a.format));
  // find the assets before the work, so a missing install fails fast
  fs::path assets;
  if (a.format == "html") assets = find_assets(a.assets);
  const Report rep = load(a);
  const std::vector<CorpusRun> corpus = corpus_runs(rep);
  if (a.format == "json") {
    json doc;
    doc["runs"] = json::array();
    for (size_t i = 0; i < rep.runs.size(); ++i) {
      doc["runs"].push_back(run_json(*rep.runs[i]));
      const GapBand band = gap_band(corpus, corpus[i].model);
      json& run = doc["runs"].back();
      run["verdict"] = verdict(corpus[i], band);
      run["gap_band"] = num(band.band);
      run["gap_band_on"] = band.eval ? "evaluation loss" : "training loss";
      run["final_gap"] = num(final_gap(corpus[i], band));
    }
    doc["configurations"] = json::array();
    for (const ConfigStats& c : rep.configs) doc["configurations"].push_back(to_json(c));
    doc["blame"] = json::array();
    for (const Blame& b : rep.blames) doc["blame"].push_back(to_json(b));
    if (a.corpus) doc["corpus"] = corpus_summary(corpus, rep.thresholds, divergence::parse_detector_list(a.detectors));
    write_stdout(doc.dump(2, ' ', false, json::error_handler_t::replace) + "\n", "report");
    for (const auto& m : rep.missing) std::fprintf(stderr, "report: %s\n", m.c_str());
  } else if (a.format == "md") {
    std::string md = markdown(rep);
    if (a.corpus)
      md += "\n" + corpus_markdown(corpus_summary(corpus, rep.thresholds, divergence::parse_detector_list(a.detectors)));
    write_stdout(md, "report");
  } else {
    write_html(rep, assets);
  }
}

const bool registered = register_command(92, [](CLI::App& app) {
  auto a = std::make_shared<ReportArgs>();
  auto* cmd = app.add_subcommand("report", "Divergence report of a sweep: run table, loss curves, heatmaps, verdicts");
  cmd->add_option("DIR", a->dir, "A sweep's output folder (DIR/<run>/run.h5) or a folder of .h5 logs")->required();
  cmd->add_option("--format", a->format, "html (writes DIR/report.html) | md | json (to stdout)")->capture_default_str();
  cmd->add_option("--reference", a->reference, "The reference run (name or path); default: the sweep's, else fp32, else bf16");
  cmd->add_option("--thresholds", a->thresholds, "Detector thresholds as JSON (default: the sweep spec's \"detectors\")");
  cmd->add_option("--detectors", a->detectors, "Comma-separated detectors to run, or all (default: nonfinite,attn_logit,loss_rise,update_size,fixed_batch_rise,ramp_rise; README \"Divergence detection\")");
  cmd->add_flag("--corpus", a->corpus,
                "Labelled corpus: recall, false positives and lead times per mechanism (run-name prefix) and detector");
  cmd->add_option("--assets", a->assets, "tools/report folder holding node_modules (default: found from the binary)");
  cmd->add_flag("--intervals", a->intervals,
                "Require seed statistics: every configuration needs 2 or more seeds paired with a reference");
  cmd->footer(
      "Examples:\n"
      "  lpx report runs/fmt-scale\n"
      "  lpx report runs/fmt-scale --format json | jq '.runs[] | select(.diverged)'");
  cmd->callback([a] { run_report(*a); });
});

}  // namespace
}  // namespace lpx::cli
