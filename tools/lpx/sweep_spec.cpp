#include "sweep_spec.hpp"

#include <algorithm>
#include <cfloat>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <map>
#include <set>
#include <sstream>
#include <stdexcept>

#include <fmt/format.h>

#include "cli_util.hpp"
#include "command.hpp"
#include "lpx/divergence/detectors.hpp"
#include "lpx/io/json_input.hpp"
#include "lpx/recipes/recipe.hpp"

namespace lpx::cli {

std::string printable(std::string_view s) {
  std::string o;
  for (const unsigned char c : s) {
    if (o.size() >= 200) {
      o += "...";
      break;
    }
    if (c == '\n') o += "\\n";
    else if (c == '\t') o += "\\t";
    else if (c == '\r') o += "\\r";
    else if (c < 0x20 || c == 0x7f) o += fmt::format("\\x{:02x}", c);
    else o += static_cast<char>(c);
  }
  return o;
}

void check_sweep_text(const std::string& what, const std::string& s, size_t max_bytes) {
  if (s.empty()) throw UsageError(fmt::format("sweep: {}: empty", what));
  if (s.size() > max_bytes)
    throw UsageError(fmt::format("sweep: {}: '{}' is longer than {} bytes", what, printable(s), max_bytes));
  for (const unsigned char c : s)
    if (c < 0x20 || c == 0x7f)
      throw UsageError(fmt::format("sweep: {}: '{}' holds a control character, which paths, names and train "
                                   "arguments may not (docs/input-policy.md)",
                                   what, printable(s)));
}

namespace {

namespace fs = std::filesystem;
using json = nlohmann::ordered_json;

[[noreturn]] void fail(const std::string& where, const std::string& what) {
  throw UsageError(fmt::format("sweep: {}: {}", where, what));
}

// A JSON value in an error message: one line, at most ~200 bytes.
std::string shown(const json& v) { return printable(v.dump()); }

// ---- run keys: the `lpx train` options a sweep may set, with the ranges train accepts

enum class Kind { recipe, model, activation, path, positive, non_negative, integer, hidden, boolean, text,
                  master_weights, optimizer_state, inject, preset, gemm };
struct KeyRule {
  Kind kind;
  int64_t lo = 0, hi = 0;  // Kind::integer and the widths of Kind::hidden
};

constexpr int64_t kEvery = int64_t{1} << 40;  // eval/checkpoint/stats intervals, as train

const std::map<std::string, KeyRule>& run_keys() {
  static const std::map<std::string, KeyRule> k = {
      {"recipe", {Kind::recipe}},
      {"model", {Kind::model}},
      {"activation", {Kind::activation}},
      {"data", {Kind::path}},
      {"lr", {Kind::positive}},
      {"warmup", {Kind::integer, 0, kMaxSweepSteps}},
      {"weight_decay", {Kind::non_negative}},
      {"steps", {Kind::integer, 1, kMaxSweepSteps}},
      {"batch", {Kind::integer, 1, 1 << 16}},
      {"threads", {Kind::integer, 0, kMaxThreads}},
      {"eval_every", {Kind::integer, 0, kEvery}},
      {"checkpoint_every", {Kind::integer, 0, kEvery}},
      {"stats_every", {Kind::integer, 0, kEvery}},
      {"fixed_batches", {Kind::integer, 0, 1024}},
      {"layers", {Kind::integer, 1, 1024}},
      {"channels", {Kind::integer, 1, 1 << 16}},
      {"heads", {Kind::integer, 1, 1 << 16}},
      {"context", {Kind::integer, 1, 1 << 16}},
      {"hidden", {Kind::hidden, 1, 1 << 20}},
      // instability mechanisms (README "Divergence detection")
      {"qk_norm", {Kind::boolean}},
      {"z_loss", {Kind::non_negative}},
      {"adam_eps", {Kind::positive}},
      {"master_weights", {Kind::master_weights}},
      {"optimizer_state", {Kind::optimizer_state}},
      {"inject", {Kind::inject}},
      {"inject_step", {Kind::integer, 0, kMaxSweepSteps}},
      {"inject_layer", {Kind::text}},
      {"inject_channel", {Kind::integer, 0, 1 << 20}},
      {"inject_magnitude", {Kind::positive}},
      {"preset", {Kind::preset}},
      {"gemm", {Kind::gemm}},  // the GEMMs' order: a different order is a different reference
  };
  return k;
}

const KeyRule& check_key(const std::string& where, const std::string& k) {
  const auto it = run_keys().find(k);
  if (it != run_keys().end()) return it->second;
  std::string all;
  for (const auto& [name, rule] : run_keys()) all += (all.empty() ? "" : ", ") + name;
  fail(where, fmt::format("unknown key '{}'; allowed: {}", printable(k), all));
}

int64_t whole_number(const std::string& where, const json& v, int64_t lo, int64_t hi) {
  const auto out_of_range = [&] { fail(where, fmt::format("expected a whole number in [{}, {}], got {}", lo, hi, shown(v))); };
  if (v.is_number_unsigned()) {
    const uint64_t x = v.get<uint64_t>();
    if (x > static_cast<uint64_t>(hi) || static_cast<int64_t>(x) < lo) out_of_range();
    return static_cast<int64_t>(x);
  }
  if (!v.is_number_integer()) out_of_range();
  const int64_t x = v.get<int64_t>();
  if (x < lo || x > hi) out_of_range();
  return x;
}

// A catalogue name, or a .json file that exists (made absolute).
std::string check_recipe(const std::string& where, const json& v) {
  if (!v.is_string()) fail(where, fmt::format("expected a recipe name or .json file, got {}", shown(v)));
  const std::string r = v.get<std::string>();
  check_sweep_text(where, r);
  if (r.size() > 5 && r.ends_with(".json")) {
    std::error_code ec;
    if (!fs::is_regular_file(r, ec)) fail(where, fmt::format("recipe file '{}' does not exist", printable(r)));
    const std::string abs = fs::absolute(r).lexically_normal().string();
    check_sweep_text(where, abs);
    return abs;
  }
  std::string all;
  for (auto n : recipe_names()) {
    if (n == r) return r;
    all += (all.empty() ? "" : ", ") + std::string(n);
  }
  fail(where, fmt::format("unknown recipe '{}'; known: {}", printable(r), all));
}

std::string one_of(const std::string& where, const json& v, std::initializer_list<const char*> names) {
  std::string all;
  for (const char* n : names) {
    if (v.is_string() && v.get<std::string>() == n) return n;
    all += (all.empty() ? "" : ", ") + std::string(n);
  }
  fail(where, fmt::format("expected one of {}, got {}", all, shown(v)));
}

// The value of run key `key`, checked; recipe files come back absolute.
json check_run_value(const std::string& where, const std::string& key, const json& v) {
  const KeyRule& rule = check_key(where, key);
  switch (rule.kind) {
    case Kind::recipe:
      return check_recipe(where, v);
    case Kind::model:
      return one_of(where, v, {"mlp", "gpt"});
    case Kind::activation:
      return one_of(where, v, {"relu", "gelu", "swiglu"});
    case Kind::master_weights:
      return one_of(where, v, {"fp32", "bf16", "bf16_sr"});
    case Kind::optimizer_state:
      return one_of(where, v, {"fp32", "bf16", "fp8_e4m3"});
    case Kind::inject:
      return one_of(where, v, {"activation", "weight"});
    case Kind::boolean:
      if (!v.is_boolean()) fail(where, fmt::format("expected true or false, got {}", shown(v)));
      return v;
    case Kind::text:
      if (!v.is_string()) fail(where, fmt::format("expected a string, got {}", shown(v)));
      check_sweep_text(where, v.get<std::string>(), kMaxSweepNameBytes);
      return v;
    case Kind::preset:
      return one_of(where, v, {"gpt-tiny", "gpt-small", "gpt-medium"});  // sim::apply_gpt_preset
    case Kind::gemm:
      return one_of(where, v, {"fast", "exact"});  // sim::gemm_order_by_name
    case Kind::path: {
      if (!v.is_string()) fail(where, fmt::format("expected a path, got {}", shown(v)));
      check_sweep_text(where, v.get<std::string>());
      const std::string abs = fs::absolute(v.get<std::string>()).lexically_normal().string();
      check_sweep_text(where, abs);
      return abs;  // absolute, as recipe files: the runs may start elsewhere (Slurm)
    }
    case Kind::positive:
    case Kind::non_negative: {
      const bool zero_ok = rule.kind == Kind::non_negative;
      const double d = v.is_number() ? v.get<double>() : NAN;
      if (!std::isfinite(d) || d < 0 || (!zero_ok && d == 0) || d > FLT_MAX)
        fail(where, fmt::format("expected a finite number {} 0, got {}", zero_ok ? ">=" : ">", shown(v)));
      return v;
    }
    case Kind::integer:
      whole_number(where, v, rule.lo, rule.hi);
      return v;
    case Kind::hidden: {
      // 256, [256, 128] or "256,128"
      if (v.is_array()) {
        if (v.empty()) fail(where, "expected at least one width");
        for (const auto& w : v) whole_number(where, w, rule.lo, rule.hi);
        return v;
      }
      if (v.is_string()) {
        const std::string s = v.get<std::string>();
        check_sweep_text(where, s, 1000);
        std::stringstream ss(s);
        for (std::string piece; std::getline(ss, piece, ',');) {
          int64_t w = 0;
          const auto [p, ec] = std::from_chars(piece.data(), piece.data() + piece.size(), w);
          if (piece.empty() || ec != std::errc() || p != piece.data() + piece.size() || w < rule.lo || w > rule.hi)
            fail(where, fmt::format("expected widths in [{}, {}] separated by commas, got '{}'", rule.lo, rule.hi,
                                    printable(s)));
        }
        if (s.back() == ',') fail(where, fmt::format("expected widths separated by commas, got '{}'", printable(s)));
        return v;
      }
      whole_number(where, v, rule.lo, rule.hi);
      return v;
    }
  }
  return v;
}

std::string value_text(const json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_array()) {
    std::string s;
    for (const auto& x : v) s += (s.empty() ? "" : ",") + value_text(x);
    return s;
  }
  if (v.is_number_float()) return fmt::format("{}", v.get<double>());  // shortest text that reads back exactly
  return v.dump();
}

std::string safe_name(std::string s) {
  for (char& c : s)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '.' && c != '_') c = '_';
  return s;
}

// --set values: "3" -> 3, "1e-3" -> 0.001, "mxfp8" -> "mxfp8" (checked by the key's rule after).
json parse_value(const std::string& s) {
  if (s.empty()) return json(s);
  int64_t i = 0;
  const char* end = s.data() + s.size();
  if (auto [p, ec] = std::from_chars(s.data(), end, i); ec == std::errc() && p == end) return json(i);
  double d = 0;
  if (auto [p, ec] = std::from_chars(s.data(), end, d); ec == std::errc() && p == end && std::isfinite(d)) return json(d);
  return json(s);
}

// The command line's values are checked here (errors name the option) and stored as
// given; the spec's checks below see them again.
void apply_overrides(json& spec, const std::string& origin, const SweepOverrides& cli) {
  if (!spec.contains("name")) spec["name"] = cli.default_name;
  if (!cli.model.empty()) spec["model"] = check_run_value("--model", "model", json(cli.model));
  if (cli.steps != 0) spec["steps"] = cli.steps;
  if (cli.seeds != 0) spec["seeds"] = cli.seeds;
  if (!cli.reference.empty()) {
    check_recipe("--reference", json(cli.reference));
    spec["reference"] = cli.reference;
  }
  if (!cli.recipes.empty() || !cli.set.empty()) {
    if (!spec.contains("grid")) spec["grid"] = json::object();
    if (!spec["grid"].is_object()) fail(origin + ": grid", "expected an object of key -> list");
  }
  if (!cli.recipes.empty()) {
    json list = json::array();
    std::stringstream ss(cli.recipes);
    for (std::string r; std::getline(ss, r, ',');)
      if (!r.empty()) {
        check_recipe("--recipes", json(r));
        list.push_back(r);
      }
    if (list.empty()) fail("--recipes", "expected recipe names separated by commas");
    spec["grid"]["recipe"] = list;
  }
  for (const auto& kv : cli.set) {
    const auto eq = kv.find('=');
    if (eq == std::string::npos || eq == 0) fail("--set", fmt::format("'{}': expected KEY=V1,V2,...", printable(kv)));
    const std::string k = kv.substr(0, eq), values = kv.substr(eq + 1);
    const std::string where = "--set " + printable(k);
    check_key("--set", k);
    json list = json::array();
    if (k == "hidden") {
      list.push_back(check_run_value(where, k, json(values)));  // one comma-separated value
    } else {
      std::stringstream ss(values);
      for (std::string v; std::getline(ss, v, ',');) list.push_back(check_run_value(where, k, parse_value(v)));
      if (list.empty()) fail(where, "expected at least one value");
    }
    spec["grid"][k] = list;
  }
}

// a * b and a + b, saturating at SIZE_MAX
size_t mul_sat(size_t a, size_t b) { return a != 0 && b > SIZE_MAX / a ? SIZE_MAX : a * b; }
size_t add_sat(size_t a, size_t b) { return b > SIZE_MAX - a ? SIZE_MAX : a + b; }

}  // namespace

SweepSpec parse_sweep_spec(std::string_view text, const std::string& origin, const SweepOverrides& cli) {
  json spec;
  try {
    spec = io::parse_json<json>(text, origin);
  } catch (const io::JsonError& e) {
    throw UsageError(fmt::format("sweep: {}", e.what()));
  }
  if (!spec.is_object()) fail(origin, "the spec must be a JSON object");
  static const std::vector<std::string> top = {"name",   "description", "model", "steps", "seeds",
                                               "reference", "grid", "runs", "fixed", "detectors",
                                               "jobs",   "out",   "slurm", "intervals"};
  for (auto it = spec.begin(); it != spec.end(); ++it)
    if (std::find(top.begin(), top.end(), it.key()) == top.end()) {
      std::string all;
      for (const auto& k : top) all += (all.empty() ? "" : ", ") + k;
      fail(origin, fmt::format("unknown key '{}'; allowed: {}", printable(it.key()), all));
    }
  apply_overrides(spec, origin, cli);
  const auto at = [&](const std::string& field) { return fmt::format("{}: {}", origin, field); };

  SweepSpec out;
  if (!spec["name"].is_string()) fail(at("name"), fmt::format("expected a string, got {}", shown(spec["name"])));
  out.name = spec["name"].get<std::string>();
  check_sweep_text(at("name"), out.name, kMaxSweepNameBytes);
  if (spec.contains("description") && !spec["description"].is_string())
    fail(at("description"), "expected a string");
  if (spec.contains("out")) {
    if (!spec["out"].is_string()) fail(at("out"), fmt::format("expected a folder path, got {}", shown(spec["out"])));
    out.out = spec["out"].get<std::string>();
    check_sweep_text(at("out"), out.out);
  }
  if (spec.contains("jobs")) out.jobs = static_cast<int>(whole_number(at("jobs"), spec["jobs"], 1, kMaxSweepJobs));
  // "slurm": the job settings of --launcher slurm (types here; formats in cmd_sweep.cpp,
  // after the command line's --slurm-* options have overridden them)
  if (spec.contains("slurm")) {
    const json& sl = spec["slurm"];
    if (!sl.is_object()) fail(at("slurm"), fmt::format("expected an object, got {}", shown(sl)));
    for (auto it = sl.begin(); it != sl.end(); ++it) {
      const std::string k = it.key(), where = at("slurm." + printable(k));
      if (k == "partition" || k == "time" || k == "mem" || k == "account") {
        if (!it.value().is_string()) fail(where, fmt::format("expected a string, got {}", shown(it.value())));
        check_sweep_text(where, it.value().get<std::string>(), 1000);
      } else if (k == "cpus_per_task") {
        whole_number(where, it.value(), 1, 4096);
      } else if (k == "sbatch_args") {
        if (!it.value().is_array()) fail(where, fmt::format("expected a list of strings, got {}", shown(it.value())));
        if (it.value().size() > 100) fail(where, "more than 100 options");
        for (const auto& x : it.value()) {
          if (!x.is_string()) fail(where, fmt::format("expected a list of strings, got {}", shown(x)));
          check_sweep_text(where, x.get<std::string>(), 1000);
        }
      } else {
        fail(at("slurm"), fmt::format("unknown key '{}'; allowed: partition, time, mem, account, cpus_per_task, "
                                      "sbatch_args", printable(k)));
      }
    }
    out.slurm = sl;
  }
  const std::string model = spec.contains("model") ? one_of(at("model"), spec["model"], {"mlp", "gpt"}) : "mlp";
  const int64_t steps = spec.contains("steps") ? whole_number(at("steps"), spec["steps"], 1, kMaxSweepSteps) : 200;
  // the reference's run name comes from the recipe as written ("ref-fp32-s0")
  const std::string ref_recipe =
      spec.contains("reference") ? check_recipe(at("reference"), spec["reference"]) : std::string("fp32");
  const std::string ref_base = spec.contains("reference") ? spec["reference"].get<std::string>() : ref_recipe;

  std::vector<uint64_t> seeds;
  if (!spec.contains("seeds")) {
    seeds = {0};
  } else if (const json& s = spec["seeds"]; s.is_number()) {
    const int64_t n = whole_number(at("seeds"), s, 1, static_cast<int64_t>(kMaxSweepRuns));
    for (int64_t i = 0; i < n; ++i) seeds.push_back(static_cast<uint64_t>(i));
  } else if (s.is_array()) {
    if (s.empty()) fail(at("seeds"), "at least one seed");
    if (s.size() > kMaxSweepRuns) fail(at("seeds"), fmt::format("more than {} seeds", kMaxSweepRuns));
    for (const auto& x : s) {
      if (!x.is_number_unsigned())
        fail(at("seeds"), fmt::format("expected whole numbers in [0, 2^64-1], got {}", shown(x)));
      seeds.push_back(x.get<uint64_t>());
    }
  } else {
    fail(at("seeds"), "expected a count or a list of whole numbers");
  }
  // "intervals": true asks lpx report for seed statistics (95% intervals of each gap), which
  // need at least two seeds per configuration.
  if (spec.contains("intervals")) {
    if (!spec["intervals"].is_boolean()) fail(at("intervals"), fmt::format("expected true or false, got {}", shown(spec["intervals"])));
    if (spec["intervals"].get<bool>() && seeds.size() < 2)
      fail(at("intervals"), fmt::format("95% intervals need at least 2 seeds, and the sweep has {} (set \"seeds\": 3)", seeds.size()));
  }

  // fixed, grid and runs: every key a train option, every value checked
  json fixed = json::object(), grid = json::object(), extra = json::array();
  if (spec.contains("fixed")) {
    if (!spec["fixed"].is_object()) fail(at("fixed"), "expected an object");
    for (auto it = spec["fixed"].begin(); it != spec["fixed"].end(); ++it)
      fixed[it.key()] = check_run_value(at("fixed." + printable(it.key())), it.key(), it.value());
  }
  if (spec.contains("grid")) {
    if (!spec["grid"].is_object()) fail(at("grid"), "expected an object of key -> list");
    for (auto it = spec["grid"].begin(); it != spec["grid"].end(); ++it) {
      const std::string where = at("grid." + printable(it.key()));
      check_key(at("grid"), it.key());
      if (!it.value().is_array() || it.value().empty()) fail(where, "expected a non-empty list");
      json list = json::array();
      for (size_t i = 0; i < it.value().size(); ++i)
        list.push_back(check_run_value(fmt::format("{}[{}]", where, i), it.key(), it.value()[i]));
      grid[it.key()] = list;
    }
  }
  std::vector<std::pair<std::string, json>> named;  // (explicit name or "", point) of the runs list
  if (spec.contains("runs")) {
    if (!spec["runs"].is_array()) fail(at("runs"), "expected a list of objects");
    for (size_t i = 0; i < spec["runs"].size(); ++i) {
      const json& r = spec["runs"][i];
      const std::string where = fmt::format("runs[{}]", i);
      if (!r.is_object()) fail(at(where), "expected an object");
      std::string name;
      json p = json::object();
      for (auto it = r.begin(); it != r.end(); ++it) {
        if (it.key() == "name") {
          if (!it.value().is_string()) fail(at(where + ".name"), "expected a string");
          name = it.value().get<std::string>();
          check_sweep_text(at(where + ".name"), name, kMaxSweepNameBytes);
        } else {
          p[it.key()] = check_run_value(at(where + "." + printable(it.key())), it.key(), it.value());
        }
      }
      named.emplace_back(name, p);
    }
  }
  if (spec.contains("detectors")) {
    if (!spec["detectors"].is_object()) fail(at("detectors"), "expected an object of thresholds");
    try {
      (void)divergence::Thresholds::from_json(spec["detectors"].dump());
    } catch (const std::invalid_argument& e) {
      fail(at("detectors"), e.what());
    }
  }

  // how many runs, before making any
  size_t points = grid.empty() ? 0 : 1;
  for (auto it = grid.begin(); it != grid.end(); ++it) points = mul_sat(points, it.value().size());
  const size_t per_seed = add_sat(points, named.size());
  if (per_seed == 0) fail(origin, "nothing to run: give grid.recipe (or --recipes) or runs");
  const size_t total = mul_sat(seeds.size(), add_sat(per_seed, 1));
  if (total > kMaxSweepRuns)
    fail(origin, fmt::format("{} runs ({} per seed and a reference, {} seed(s)); at most {}: split the sweep",
                             total == SIZE_MAX ? std::string("too many") : std::to_string(total), per_seed,
                             seeds.size(), kMaxSweepRuns));

  // the grid's points (product over keys in spec order), then the extra runs
  std::vector<json> grid_points = {json::object()};
  for (auto it = grid.begin(); it != grid.end(); ++it) {
    std::vector<json> next;
    for (const auto& p : grid_points)
      for (const auto& v : it.value()) {
        json q = p;
        q[it.key()] = v;
        next.push_back(q);
      }
    grid_points = next;
  }
  if (grid.empty()) grid_points.clear();
  std::vector<std::pair<std::string, json>> all;
  for (const auto& p : grid_points) all.emplace_back("", p);
  all.insert(all.end(), named.begin(), named.end());

  auto make = [&](const std::string& base, const json& point, uint64_t seed, bool reference) {
    SweepRun r;
    r.seed = seed;
    r.reference = reference;
    json set = json::object();
    set["model"] = model;
    set["steps"] = steps;
    for (auto it = fixed.begin(); it != fixed.end(); ++it) set[it.key()] = it.value();
    for (auto it = point.begin(); it != point.end(); ++it) set[it.key()] = it.value();
    if (!set.contains("recipe"))
      fail(origin, fmt::format("run '{}' has no recipe", printable(base.empty() ? point.dump() : base)));
    if (set.contains("preset") && model != "gpt")
      fail(origin, fmt::format("preset '{}' is a GPT size; the sweep's model is {} (set \"model\": \"gpt\")",
                               value_text(set["preset"]), model));
    r.recipe = value_text(set["recipe"]);
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
    if (r.name.size() > kMaxSweepNameBytes)
      fail(origin, fmt::format("run name '{}' is longer than {} bytes: name the run (runs[].name)", printable(r.name),
                               kMaxSweepNameBytes));
    r.args = {"train", "--seed", std::to_string(seed)};
    for (auto it = set.begin(); it != set.end(); ++it) {
      std::string opt = "--" + it.key();
      std::replace(opt.begin(), opt.end(), '_', '-');
      if (it.value().is_boolean()) {  // a flag of lpx train: --qk-norm=true | --qk-norm=false
        r.args.push_back(opt + (it.value().get<bool>() ? "=true" : "=false"));
        continue;
      }
      r.args.push_back(opt);
      r.args.push_back(value_text(it.value()));
    }
    return r;
  };
  // One reference per seed and distinct baseline: a grid point's keys that change what is
  // trained, other than the recipe (a sweep over lr compares each lr with fp32 at that lr;
  // threads and the eval, checkpoint and statistics intervals change no result). The
  // reference also takes the first such point's other keys (its threads, say). The extra
  // "runs" compare with the baseline of the fixed keys. With one baseline the reference
  // keeps its plain name, ref-<reference>-s<seed>.
  auto baseline_of = [](const json& point) {
    json b = point;
    for (const char* k : {"recipe", "threads", "eval_every", "checkpoint_every", "stats_every"}) b.erase(k);
    return b;
  };
  std::vector<std::pair<json, json>> baselines;  // (baseline, the reference's point)
  for (const auto& [name, point] : all) {
    const json b = name.empty() ? baseline_of(point) : json::object();
    const bool seen = std::any_of(baselines.begin(), baselines.end(), [&](const auto& x) { return x.first == b; });
    if (seen) continue;
    json ref_point = name.empty() ? point : json::object();
    ref_point["recipe"] = ref_recipe;
    baselines.emplace_back(b, ref_point);
  }
  if (mul_sat(seeds.size(), add_sat(per_seed, baselines.size())) > kMaxSweepRuns)
    fail(origin, fmt::format("{} runs with a reference per seed and baseline; at most {}: split the sweep",
                             mul_sat(seeds.size(), add_sat(per_seed, baselines.size())), kMaxSweepRuns));
  std::map<std::pair<size_t, std::string>, std::string> ref_name;  // (seed index, baseline) -> run
  for (size_t k = 0; k < seeds.size(); ++k)
    for (const auto& [b, ref_point] : baselines) {
      std::string base = ref_base;
      if (baselines.size() > 1)
        for (auto it = b.begin(); it != b.end(); ++it) base += fmt::format("-{}{}", it.key(), value_text(it.value()));
      SweepRun ref = make(base, ref_point, seeds[k], true);
      ref_name[{k, b.dump()}] = ref.name;
      out.runs.push_back(ref);
    }
  for (const auto& [name, point] : all)
    for (size_t k = 0; k < seeds.size(); ++k) {
      SweepRun r = make(name, point, seeds[k], false);
      r.reference_run = ref_name.at({k, (name.empty() ? baseline_of(point) : json::object()).dump()});
      out.runs.push_back(r);
    }
  std::set<std::string> names;
  for (const auto& r : out.runs)
    if (!names.insert(r.name).second)
      fail(origin, fmt::format("two runs named '{}': give them names (runs[].name) or distinct seeds", r.name));
  out.spec = std::move(spec);
  return out;
}

}  // namespace lpx::cli
