// Seed statistics and blame for lpx report (report_study.hpp).
#include "report_study.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <tuple>

#include <fmt/format.h>

#include "lpx/recipes/ablation.hpp"

namespace lpx::cli {

double t_quantile_975(int df) {
  // Student's t, two-sided 95% (the 0.975 quantile), df 1..30 from the standard tables.
  static constexpr double kTable[] = {12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
                                      2.201,  2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
                                      2.080,  2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042};
  if (df < 1) return NAN;
  if (df <= 30) return kTable[df - 1];
  // Beyond the table, the first terms of the Cornish-Fisher expansion around the normal
  // quantile z: t = z + (z^3 + z) / (4 df) (error below 1e-3 for df > 30).
  const double z = kNormalQuantile975;
  return z + (z * z * z + z) / (4.0 * df);
}

Interval t_interval(const std::vector<double>& values) {
  Interval out;
  double sum = 0;
  std::vector<double> v;
  for (double x : values)
    if (std::isfinite(x)) v.push_back(x), sum += x;
  out.n = static_cast<int>(v.size());
  if (v.empty()) {
    out.mean = out.lo = out.hi = NAN;
    return out;
  }
  out.mean = sum / out.n;
  if (out.n < 2) {
    out.lo = out.hi = NAN;
    return out;
  }
  double ss = 0;
  for (double x : v) ss += (x - out.mean) * (x - out.mean);
  const double half = t_quantile_975(out.n - 1) * std::sqrt(ss / (out.n - 1)) / std::sqrt(double(out.n));
  out.lo = out.mean - half;
  out.hi = out.mean + half;
  return out;
}

namespace {
double rel_sd(const std::vector<double>& v) {
  if (v.size() < 2) return NAN;
  double m = 0;
  for (double x : v) m += x;
  m /= static_cast<double>(v.size());
  double ss = 0;
  for (double x : v) ss += (x - m) * (x - m);
  return std::sqrt(ss / static_cast<double>(v.size() - 1)) / std::fabs(m);
}
}  // namespace

std::vector<ConfigStats> config_stats(const std::vector<StudyRun>& runs) {
  std::vector<ConfigStats> out;
  std::map<std::pair<std::string, std::string>, size_t> index;
  std::vector<std::vector<double>> gaps, refs;
  for (const StudyRun& r : runs) {
    if (r.reference) continue;
    const auto key = std::make_pair(r.recipe, r.config);
    auto it = index.find(key);
    if (it == index.end()) {
      it = index.emplace(key, out.size()).first;
      ConfigStats c;
      c.recipe = r.recipe;
      c.config = r.config;
      c.on_eval = true;
      out.push_back(std::move(c));
      gaps.emplace_back();
      refs.emplace_back();
    }
    ConfigStats& c = out[it->second];
    c.runs.push_back(r.name);
    c.on_eval = c.on_eval && r.on_eval;
    if (std::isfinite(r.final_loss) && std::isfinite(r.reference_loss) && r.reference_loss != 0) {
      gaps[it->second].push_back((r.final_loss - r.reference_loss) / std::fabs(r.reference_loss));
      refs[it->second].push_back(r.reference_loss);
    }
  }
  for (size_t i = 0; i < out.size(); ++i) {
    ConfigStats& c = out[i];
    c.gap = t_interval(gaps[i]);
    c.reference_spread = rel_sd(refs[i]);
    c.within_seed_spread = std::isfinite(c.reference_spread) && std::fabs(c.gap.mean) <= c.reference_spread;
    if (c.gap.n < 2) c.verdict = c.gap.n == 1 ? "one seed" : "no gap";
    else if (c.gap.lo > 0) c.verdict = "worse";
    else if (c.gap.hi < 0) c.verdict = "better";
    else c.verdict = "not resolved";
  }
  return out;
}

std::vector<Blame> blame(const std::vector<StudyRun>& runs) {
  // (base, config) -> seed -> full gap in loss units; (base, config, unit, mode) -> seed -> loss
  using Key = std::pair<std::string, std::string>;
  std::map<Key, std::map<uint64_t, std::pair<double, double>>> full;  // seed -> (L, R)
  std::map<Key, std::map<std::string, std::map<std::string, std::map<uint64_t, double>>>> var;
  std::vector<Key> order;
  std::map<Key, std::vector<std::string>> unit_order;
  for (const StudyRun& r : runs) {
    if (r.reference || !std::isfinite(r.final_loss)) continue;
    if (auto a = parse_ablation_recipe_name(r.recipe)) {
      const Key k{a->base, r.config};
      auto& units = var[k];
      if (!units.count(a->unit)) unit_order[k].push_back(a->unit);
      units[a->unit][a->mode][r.seed] = r.final_loss;
    }
  }
  for (const StudyRun& r : runs) {
    if (r.reference || parse_ablation_recipe_name(r.recipe)) continue;
    const Key k{r.recipe, r.config};
    if (!var.count(k) || !std::isfinite(r.final_loss) || !std::isfinite(r.reference_loss)) continue;
    if (!full.count(k)) order.push_back(k);
    full[k][r.seed] = {r.final_loss, r.reference_loss};
  }
  std::vector<Blame> out;
  for (const Key& k : order) {
    Blame b;
    b.recipe = k.first;
    b.config = k.second;
    std::vector<double> f;
    for (const auto& [seed, lr] : full[k]) f.push_back(lr.first - lr.second);
    b.full_gap = t_interval(f);
    for (const std::string& unit : unit_order[k]) {
      auto& modes = var[k][unit];
      std::vector<double> only, closed;
      for (const auto& [seed, lr] : full[k]) {
        if (!modes["only"].count(seed) || !modes["without"].count(seed)) continue;
        only.push_back(modes["only"][seed] - lr.second);
        closed.push_back(lr.first - modes["without"][seed]);
      }
      if (only.empty()) continue;
      BlameRow row;
      row.unit = unit;
      row.seeds = static_cast<int>(only.size());
      const auto share = [&](const std::vector<double>& v) {
        Interval i = t_interval(v);
        const double d = b.full_gap.mean;
        i.mean /= d, i.lo /= d, i.hi /= d;
        if (d < 0) std::swap(i.lo, i.hi);
        return i;
      };
      row.only_share = share(only);
      row.closed_share = share(closed);
      b.rows.push_back(row);
    }
    std::stable_sort(b.rows.begin(), b.rows.end(),
                     [](const BlameRow& x, const BlameRow& y) { return x.only_share.mean > y.only_share.mean; });
    out.push_back(std::move(b));
  }
  return out;
}

namespace {
nlohmann::ordered_json num(double x) { return std::isfinite(x) ? nlohmann::ordered_json(x) : nlohmann::ordered_json(nullptr); }
nlohmann::ordered_json interval_json(const Interval& i) {
  nlohmann::ordered_json j;
  j["mean"] = num(i.mean);
  j["ci95"] = i.n >= 2 ? nlohmann::ordered_json::array({num(i.lo), num(i.hi)}) : nlohmann::ordered_json(nullptr);
  j["n"] = i.n;
  return j;
}
}  // namespace

nlohmann::ordered_json to_json(const ConfigStats& c) {
  nlohmann::ordered_json j;
  j["recipe"] = c.recipe;
  j["config"] = c.config;
  j["seeds"] = c.gap.n;
  j["gap_on"] = c.on_eval ? "evaluation loss" : "training loss";
  j["runs"] = c.runs;
  j["mean_gap"] = num(c.gap.mean);
  j["gap_ci95"] = c.gap.n >= 2 ? nlohmann::ordered_json::array({num(c.gap.lo), num(c.gap.hi)}) : nlohmann::ordered_json(nullptr);
  j["reference_seed_spread"] = num(c.reference_spread);
  j["within_seed_spread"] = c.within_seed_spread;
  j["distinguishable"] = c.verdict == "worse" || c.verdict == "better";
  j["verdict"] = c.verdict;
  return j;
}

nlohmann::ordered_json to_json(const Blame& b) {
  nlohmann::ordered_json j;
  j["recipe"] = b.recipe;
  j["config"] = b.config;
  j["gap"] = interval_json(b.full_gap);
  j["units"] = nlohmann::ordered_json::array();
  for (const BlameRow& r : b.rows) {
    nlohmann::ordered_json u;
    u["unit"] = r.unit;
    u["seeds"] = r.seeds;
    u["only_share"] = interval_json(r.only_share);
    u["closed_share"] = interval_json(r.closed_share);
    j["units"].push_back(u);
  }
  return j;
}

std::string gap_text(const Interval& g) {
  if (!std::isfinite(g.mean)) return "n/a";
  if (g.n < 2) return fmt::format("{:+.2f}% (one seed)", 100 * g.mean);
  return fmt::format("{:+.2f}% [{:+.2f}, {:+.2f}]", 100 * g.mean, 100 * g.lo, 100 * g.hi);
}

std::string share_text(const Interval& s) {
  if (!std::isfinite(s.mean)) return "n/a";
  if (s.n < 2) return fmt::format("{:.0f}%", 100 * s.mean);
  return fmt::format("{:.0f}% [{:.0f}, {:.0f}]", 100 * s.mean, 100 * s.lo, 100 * s.hi);
}

}  // namespace lpx::cli
