// `lpx report` over synthetic sweep folders (logs written with runlog::write_run): the JSON
// verdicts, the Markdown text, the HTML page, and bad input (empty folder, a folder with a
// non-log file, a log of an older format, an unfinished sweep, one unreadable log among
// good ones, a deep or misshapen sweep.json, write errors). Lives here rather than in
// tests/tools because it writes HDF5 logs (lpx_divergence links the run-log library).
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>

#include "../tools/cli_runner.hpp"
#include "lpx/runlog/run_log.hpp"

using namespace lpx_test;
using namespace lpx::runlog;
namespace fs = std::filesystem;

namespace {
// A run of 120 steps; `blowup` >= 0 makes the loss climb from that step and turn NaN 30 later.
Run synthetic(const std::string& recipe, int64_t seed, double lr, int blowup) {
  Run r;
  r.header.model = "mlp";
  r.header.recipe = recipe;
  r.header.seed = seed;
  r.header.config_json = nlohmann::json{{"recipe", recipe}, {"seed", seed}, {"lr", lr}, {"steps", 120}, {"model", {{"kind", "mlp"}}}}.dump();
  auto& s = r.metrics;
  auto& q = r.quant;
  q.layers = {"fc0", "fc1"};
  q.roles = {"fwd_x", "fwd_w", "dgrad_dy", "dgrad_w", "wgrad_x", "wgrad_dy"};
  for (int t = 0; t < 120; ++t) {
    s.step.push_back(t);
    double loss = 0.5 + 2.0 * std::exp(-t / 20.0) + 0.01 * std::sin(t * 1.7 + static_cast<double>(seed));
    if (blowup >= 0 && t >= blowup) loss *= std::exp(0.15 * (t - blowup));
    if (blowup >= 0 && t >= blowup + 30) loss = std::numeric_limits<double>::quiet_NaN();
    s.loss.push_back(loss);
    s.grad_norm.push_back(1.0 + 0.05 * std::cos(t * 0.9));
    s.update_ratio.push_back(1e-3);
    s.lr.push_back(static_cast<float>(lr));
    for (int k = 0; k < 12; ++k) {
      q.flushed_pct.push_back(recipe == "fp32" ? 0.f : static_cast<float>(1 + (blowup >= 0 && t > blowup ? 0.5 * (t - blowup) : 0)));
      q.saturated_pct.push_back(recipe == "fp32" ? 0.f : 0.5f);
    }
  }
  return r;
}

void put(const fs::path& dir, const std::string& name, const Run& r) {
  fs::create_directories(dir / name);
  write_run((dir / name / "run.h5").string(), r);
}

std::string assets() { return (fs::path(LPX_TEST_DATA_DIR).parent_path().parent_path() / "tools" / "report").string(); }
}  // namespace

TEST_CASE("report: verdicts as JSON, text as Markdown") {
  TempDir d;
  const fs::path sw = d / "sweep";
  put(sw, "ref-fp32-s0", synthetic("fp32", 0, 1e-3, -1));
  put(sw, "mxfp8-lr0.001-s0", synthetic("mxfp8", 0, 1e-3, -1));
  put(sw, "mxfp4-lr0.01-s0", synthetic("mxfp4-rne", 0, 1e-2, 60));
  const auto r = run_lpx("report " + sw.string() + " --format json", d);
  REQUIRE(r.status == 0);
  const auto j = nlohmann::json::parse(r.out)["runs"];
  REQUIRE(j.size() == 3);
  std::map<std::string, nlohmann::json> by;
  for (const auto& x : j) by[x["run"].get<std::string>()] = x;
  const auto& bad = by["mxfp4-lr0.01-s0"];
  CHECK(bad["recipe"] == "mxfp4-rne");
  CHECK(bad["config"]["lr"].get<double>() == Approx(0.01));
  CHECK(bad["diverged"] == true);
  CHECK(bad["flagged"] == true);
  CHECK(bad["first_flag_step"].get<int64_t>() < bad["divergence_step"].get<int64_t>());
  CHECK(bad["lead_time"].get<int64_t>() > 0);
  for (const char* k : {"run", "recipe", "config", "final_loss", "gap_to_reference", "flagged", "first_flag_step",
                        "first_flag_detector", "diverged", "divergence_step"})
    CHECK(bad.contains(k));
  const auto& ok = by["mxfp8-lr0.001-s0"];
  CHECK(ok["diverged"] == false);
  CHECK(ok["flagged"] == false);
  CHECK(std::fabs(ok["gap_to_reference"].get<double>()) < 0.01);
  CHECK(by["ref-fp32-s0"]["reference"] == true);

  const auto md = run_lpx("report " + sw.string() + " --format md", d);
  REQUIRE(md.status == 0);
  CHECK(md.out.find("| mxfp4-lr0.01-s0 | mxfp4-rne | 0 | lr=0.01 |") != std::string::npos);
  // verdicts per configuration: the recipe with its swept settings
  CHECK(md.out.find("**mxfp4-rne (lr=0.01)**: DIVERGED in 1/1 runs") != std::string::npos);
  CHECK(md.out.find("**mxfp8 (lr=0.001)**: healthy in 1/1 runs") != std::string::npos);

  CHECK(run_lpx("report " + sw.string() + " --format pdf", d).status == 2);
  CHECK(run_lpx("report " + sw.string() + " --format json --reference nope", d).status == 2);
}

// The gap of a run, the seed statistics and the study tables read the evaluation loss each
// run ended with wherever every reference of the model has one (the held-out figure papers
// compare); otherwise every gap of that model falls back to the training loss's last steps.
TEST_CASE("report: gaps and seed statistics on the final evaluation loss, else the training loss") {
  TempDir d;
  const fs::path sw = d / "sweep";
  const auto with_eval = [](Run r, double eval_loss) {
    r.eval.step = {120};  // after the last step (119): the evaluation lpx train ends with
    r.eval.loss = {eval_loss};
    r.eval.accuracy = {0.5};
    return r;
  };
  // training losses: the same curve for every run of a seed (training gaps of 0%);
  // evaluation losses: mxfp6 is +10%, +12%, +14% above fp32 on seeds 0, 1, 2
  const double ref_eval[] = {1.00, 1.02, 0.98}, gap[] = {0.10, 0.12, 0.14};
  for (int s = 0; s < 3; ++s) {
    put(sw, "ref-fp32-s" + std::to_string(s), with_eval(synthetic("fp32", s, 1e-3, -1), ref_eval[s]));
    put(sw, "mxfp6-s" + std::to_string(s), with_eval(synthetic("mxfp6", s, 1e-3, -1), ref_eval[s] * (1 + gap[s])));
  }
  const auto j = nlohmann::json::parse(run_lpx("report " + sw.string() + " --format json", d).out);
  for (const auto& r : j["runs"]) {
    CHECK(r["gap_on"] == "evaluation loss");
    if (r["reference"] == true) continue;
    const int s = r["seed"].get<int>();
    CHECK(r["gap_to_reference"].get<double>() == Approx(gap[s]));
    CHECK(r["final_eval_loss"].get<double>() == Approx(ref_eval[s] * (1 + gap[s])));
  }
  REQUIRE(j["configurations"].size() == 1);
  const auto& c = j["configurations"][0];
  CHECK(c["gap_on"] == "evaluation loss");
  CHECK(c["mean_gap"].get<double>() == Approx(0.12));
  CHECK(c["verdict"] == "worse");
  const auto md = run_lpx("report " + sw.string() + " --format md", d);
  CHECK(md.out.find("| mxfp6 | - | 3 | final eval | +12.00% [") != std::string::npos);

  // one reference without its evaluation: every gap of the model is on the training loss,
  // where mxfp6 matches fp32
  put(sw, "ref-fp32-s1", synthetic("fp32", 1, 1e-3, -1));
  const auto f = nlohmann::json::parse(run_lpx("report " + sw.string() + " --format json", d).out);
  for (const auto& r : f["runs"]) {
    CHECK(r["gap_on"] == "training loss");
    if (r["reference"] == false) CHECK(std::fabs(r["gap_to_reference"].get<double>()) < 1e-9);
  }
  CHECK(f["configurations"][0]["gap_on"] == "training loss");
  CHECK(f["configurations"][0]["verdict"] == "not resolved");
}

TEST_CASE("report: one self-contained HTML page") {
  if (!fs::exists(assets() + "/node_modules/vega-embed/build/vega-embed.min.js")) {
    WARN("SKIPPED: tools/report/node_modules missing (run tools/install-deps.sh)");
    return;
  }
  TempDir d;
  const fs::path sw = d / "sweep";
  put(sw, "ref-fp32-s0", synthetic("fp32", 0, 1e-3, -1));
  put(sw, "mxfp4-s0", synthetic("mxfp4-rne", 0, 1e-2, 60));
  const auto r = run_lpx("report " + sw.string() + " --assets " + assets(), d);
  REQUIRE(r.status == 0);
  const std::string html = slurp(sw / "report.html");
  CHECK(html.find("vegaEmbed") != std::string::npos);
  for (const char* m : {"@@TITLE@@", "@@VEGA@@", "@@VEGA_LITE@@", "@@VEGA_EMBED@@", "@@BODY@@", "@@CHARTS@@"})
    CHECK(html.find(m) == std::string::npos);
  CHECK(html.find("src=\"http") == std::string::npos);  // nothing loaded from the network
  CHECK(html.find("mxfp4-s0") != std::string::npos);
  // "final loss" says what it is; the thresholds are a table, one row per threshold
  CHECK(html.find("<th>final loss (mean of last 8 steps)</th>") != std::string::npos);
  CHECK(html.find("<table class=\"thresholds\">") != std::string::npos);
  CHECK(html.find("<tr><td>smooth</td><td>8</td></tr>") != std::string::npos);
  // a smoothing toggle over the raw curves, the reference apart, flags in the legend, and
  // heatmaps of one quantity on one colour scale
  CHECK(html.find("smoothed (trailing mean of 8 steps)") != std::string::npos);
  CHECK(html.find("\"strokeDash\"") != std::string::npos);
  CHECK(html.find("flag (detector)") != std::string::npos);
  CHECK(html.find("\"domain\":[0,") != std::string::npos);
  // a missing library is a clear error
  const auto e = run_lpx("report " + sw.string() + " --assets " + d.path().string(), d);
  CHECK(e.status == 1);
  CHECK(e.err.find("install-deps.sh") != std::string::npos);
}

TEST_CASE("report: bad input") {
  TempDir d;
  fs::create_directories(d / "empty");
  auto r = run_lpx("report " + (d / "empty").string() + " --format md", d);
  CHECK(r.status == 1);
  CHECK(r.err_lines() == 1);
  CHECK(r.err.find("no run logs") != std::string::npos);

  fs::create_directories(d / "notes");
  std::ofstream(d / "notes" / "README.txt") << "hello";
  r = run_lpx("report " + (d / "notes").string() + " --format md", d);
  CHECK(r.status == 1);
  CHECK(r.err.find("only 1 other file") != std::string::npos);

  fs::create_directories(d / "fake");
  std::ofstream(d / "fake" / "run.h5") << "not hdf5";
  r = run_lpx("report " + (d / "fake").string() + " --format json", d);
  CHECK(r.status == 1);
  CHECK(r.err.find((d / "fake" / "run.h5").string() + ": not an HDF5 file") != std::string::npos);

  Run old = synthetic("mxfp8", 0, 1e-3, -1);
  old.header.format = "lpx-run-0";
  put(d / "old", "a", old);
  r = run_lpx("report " + (d / "old").string() + " --format json", d);
  CHECK(r.status == 1);
  CHECK(r.err_lines() == 1);
  CHECK(r.err.find((d / "old" / "a" / "run.h5").string() +
                   ": log written by an older lpx (format lpx-run-0); expected lpx-run-1") != std::string::npos);

  // a partial sweep: one run missing, one unfinished, a stray file
  const fs::path sw = d / "partial";
  put(sw, "ref-fp32-s0", synthetic("fp32", 0, 1e-3, -1));
  Run half = synthetic("mxfp8", 0, 1e-3, -1);
  half.header.config_json = R"({"recipe":"mxfp8","steps":240})";
  put(sw, "mxfp8-s0", half);
  std::ofstream(sw / "notes.txt") << "x";
  std::ofstream(sw / "sweep.json") << R"({"runs":[{"name":"ref-fp32-s0","reference":true},{"name":"mxfp8-s0"},{"name":"nvfp4-s0"}]})";
  r = run_lpx("report " + sw.string() + " --format md", d);
  REQUIRE(r.status == 0);
  CHECK(r.out.find("nvfp4-s0: no run.h5 (not started)") != std::string::npos);
  CHECK(r.out.find("mxfp8-s0: unfinished (120 of 240 steps logged)") != std::string::npos);
  CHECK(r.out.find("notes.txt: not a run log (ignored)") != std::string::npos);
}

// ---- input policy (docs/input-policy.md) ----------------------------------------------

namespace {
// The command line of run_lpx under `timeout` with our own redirections, for the tests that
// need them (stdout to /dev/full, a file-size limit) or must not hang.
int run_sh(const std::string& script) {
  const int raw = std::system(("timeout 60 sh -c '" + script + "'").c_str());
  return WIFEXITED(raw) ? WEXITSTATUS(raw) : 128 + WTERMSIG(raw);
}
}  // namespace

TEST_CASE("report: one unreadable log is listed, and the report covers the others") {
  TempDir d;
  const fs::path sw = d / "sweep";
  put(sw, "ref-fp32-s0", synthetic("fp32", 0, 1e-3, -1));
  put(sw, "mxfp8-s0", synthetic("mxfp8", 0, 1e-3, -1));
  fs::create_directories(sw / "nvfp4-s0");
  std::ofstream(sw / "nvfp4-s0" / "run.h5") << "not hdf5";
  Run old = synthetic("mxfp4-rne", 0, 1e-3, -1);
  old.header.format = "lpx-run-0";
  put(sw, "mxfp4-s0", old);
  std::ofstream(sw / "sweep.json") << R"({"runs":[{"name":"ref-fp32-s0","reference":true},{"name":"mxfp8-s0"},)"
                                      R"({"name":"nvfp4-s0"},{"name":"mxfp4-s0"}]})";
  auto r = run_lpx("report " + sw.string() + " --format md", d);
  REQUIRE(r.status == 0);
  CHECK(r.out.find("- nvfp4-s0: unreadable: not an HDF5 file") != std::string::npos);
  CHECK(r.out.find("- mxfp4-s0: unreadable: log written by an older lpx") != std::string::npos);
  CHECK(r.out.find("nvfp4-s0: no run.h5") == std::string::npos);  // it has one: it is unreadable
  CHECK(r.out.find("| mxfp8-s0 | mxfp8 | 0 |") != std::string::npos);
  CHECK(r.out.find("**mxfp8**: healthy in 1/1 runs") != std::string::npos);

  r = run_lpx("report " + sw.string() + " --format json", d);
  REQUIRE(r.status == 0);
  const auto j = nlohmann::json::parse(r.out)["runs"];
  CHECK(j.size() == 2);
  CHECK(r.err.find("report: nvfp4-s0: unreadable: ") != std::string::npos);

  if (fs::exists(assets() + "/node_modules/vega-embed/build/vega-embed.min.js")) {
    r = run_lpx("report " + sw.string() + " --assets " + assets(), d);
    REQUIRE(r.status == 0);
    CHECK(slurp(sw / "report.html").find("nvfp4-s0: unreadable: not an HDF5 file") != std::string::npos);
  }
}

TEST_CASE("report: a deep, duplicate-key or misshapen sweep.json is one line naming it") {
  TempDir d;
  const fs::path sw = d / "sweep";
  put(sw, "ref-fp32-s0", synthetic("fp32", 0, 1e-3, -1));
  const std::string deep = std::string(30000, '[') + std::string(30000, ']');
  const std::string plan = (sw / "sweep.json").string();
  for (const auto& [text, why] : std::vector<std::pair<std::string, std::string>>{
           {R"({"spec": )" + deep + "}", "JSON nested deeper than 64 levels"},
           {R"({"runs": [], "runs": []})", "duplicate key \"runs\""},
           {R"({"runs": [{"name": 5}]})", "runs[0].name: expected a run name"},
           {R"({"runs": [{"name": "a", "reference": "yes"}]})", "runs[0].reference: expected true or false"},
           {R"({"runs": {}})", "runs: expected a list"},
           {R"({"spec": {"detectors": {"loss_spike_z": "high"}}})", "spec.detectors: thresholds: loss_spike_z must be a number"},
           {R"([1])", "expected a JSON object"},
           {R"({"runs": [)", "not valid JSON"}}) {
    std::ofstream(plan, std::ios::trunc) << text;
    const auto r = run_lpx("report " + sw.string() + " --format json", d);
    INFO(text.substr(0, 80) << " -> " << r.status << ": " << r.err.substr(0, 300));
    CHECK(r.status == 1);
    CHECK(r.err_lines() == 1);
    CHECK(r.err.find(plan + ": " + why) != std::string::npos);
  }
  // --thresholds: a usage error (exit 2), a file too large is refused without reading it all
  fs::remove(plan);
  std::ofstream(d / "t.json") << "{}" << std::string((size_t{16} << 20) + 1, ' ');
  auto r = run_lpx("report " + sw.string() + " --format json --thresholds " + (d / "t.json").string(), d);
  CHECK(r.status == 2);
  CHECK(r.err_lines() == 1);
  CHECK(r.err.find("t.json: more than 16777216 bytes") != std::string::npos);
  std::ofstream(d / "t.json", std::ios::trunc) << R"({"window": 8, "window": 9})";
  r = run_lpx("report " + sw.string() + " --format json --thresholds " + (d / "t.json").string(), d);
  CHECK(r.status == 2);
  CHECK(r.err_lines() == 1);
  CHECK(r.err.find("duplicate key \"window\"") != std::string::npos);
}

TEST_CASE("report: a failed write (full disk, file-size limit) is an error, exit 1 and one line") {
  TempDir d;
  const fs::path sw = d / "sweep";
  put(sw, "ref-fp32-s0", synthetic("fp32", 0, 1e-3, -1));
  for (const char* recipe : {"mxfp8", "mxfp6", "nvfp4", "bf16"}) put(sw, std::string(recipe) + "-s0", synthetic(recipe, 0, 1e-3, -1));
  const std::string lpx = std::string(LPX_BINARY) + " report " + sw.string();
  const std::string err = (d / "err.txt").string();
  for (const char* format : {"md", "json"}) {
    INFO(format);
    CHECK(run_sh(lpx + " --format " + format + " >/dev/full 2>" + err) == 1);
    CHECK(slurp(err).find("report: cannot write to standard output: No space left on device") != std::string::npos);
    // past `ulimit -f` (1 block of 512 bytes): EFBIG, not a SIGXFSZ kill
    CHECK(run_sh("ulimit -f 1; " + lpx + " --format " + format + " >" + (d / "out.txt").string() + " 2>" + err) == 1);
    CHECK(slurp(err).find("report: cannot write to standard output: File too large") != std::string::npos);
  }
  if (fs::exists(assets() + "/node_modules/vega-embed/build/vega-embed.min.js")) {
    // the page is larger than the limit: no report.html, no temporary left behind
    CHECK(run_sh("ulimit -f 64; " + lpx + " --assets " + assets() + " >/dev/null 2>" + err) == 1);
    CHECK(slurp(err).find("report: cannot write " + (sw / "report.html").string()) != std::string::npos);
    CHECK_FALSE(fs::exists(sw / "report.html"));
    CHECK_FALSE(fs::exists(sw / ".report.html.tmp"));
  }
}

TEST_CASE("report: a run whose recipe quantized nothing below BF16 is marked, and kept layers are listed") {
  TempDir d;
  // NVIDIA's 2 + 8 blocks taken as counts keep every layer of a 2-layer MLP in BF16; the
  // catalogue's sub4-e2m0 (fractions of depth) quantizes fc0 and keeps the head fc1
  const std::string counts = std::string(LPX_SOURCE_DIR) + "/tools/sweeps/recipes/nvfp4-counts-2-8.json";
  const auto s = run_lpx("sweep --recipes sub4-e2m0,mxfp8," + counts + " --steps 3 --set hidden=8 --set batch=8 --progress-every 0 "
                         "--out " + (d / "s").string(), d);
  REQUIRE(s.status == 0);
  const auto r = run_lpx("report " + (d / "s").string() + " --format md", d);
  REQUIRE(r.status == 0);
  CHECK(r.out.find("| nvfp4-counts-2-8 (nothing quantized below BF16) |") != std::string::npos);
  CHECK(r.out.find("| sub4-e2m0 (kept high: fc1) |") != std::string::npos);
  CHECK(r.out.find("| mxfp8 (nothing") == std::string::npos);
  CHECK(r.out.find("| fp32 (nothing") == std::string::npos);
}
