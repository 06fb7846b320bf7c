// The detectors of detectors.hpp twice: Monitor keeps trailing state and decides each
// step as it arrives; detect() walks the finished arrays. They share only the statistics
// helpers (median, MAD, trailing mean), so tests comparing them check the bookkeeping.
#include "lpx/divergence/detectors.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <deque>
#include <functional>
#include <map>
#include <stdexcept>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "lpx/io/json_input.hpp"

namespace lpx::divergence {

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
// MAD of a normal sample times 1.4826 estimates its standard deviation.
constexpr double kMadToSigma = 1.4826;

enum Det : int {
  nonfinite, loss_spike, grad_spike, reference_gap, adam_rms, update_drift, underflow_growth, saturation,
  attn_logit, output_logit, act_outlier, amax_staleness, loss_rise, grad_growth, update_size, fixed_batch_rise,
  ramp_rise, kDetCount
};
const char* const kDetNames[kDetCount] = {"nonfinite",    "loss_spike",   "grad_spike",       "reference_gap",
                                          "adam_rms",     "update_drift", "underflow_growth", "saturation",
                                          "attn_logit",   "output_logit", "act_outlier",      "amax_staleness",
                                          "loss_rise",    "grad_growth",  "update_size",      "fixed_batch_rise",
                                          "ramp_rise"};

// The growth detectors' thresholds, by detector.
double growth_factor(const Thresholds& t, int det) {
  return det == attn_logit     ? t.attn_logit_growth
         : det == output_logit ? t.output_logit_growth
         : det == grad_growth  ? t.grad_norm_growth
                               : t.act_outlier_growth;
}

// Median of values [first, last) (copied; even counts average the two middle values).
template <class It>
double median(It first, It last) {
  std::vector<double> v(first, last);
  if (v.empty()) return kNaN;
  const size_t h = v.size() / 2;
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(h), v.end());
  const double hi = v[h];
  if (v.size() % 2 == 1) return hi;
  const double lo = *std::max_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(h));
  return 0.5 * (lo + hi);
}

// Robust z-score of x against a history: (x - median) / max(1.4826 MAD, floor).
struct RobustZ {
  double z, med, mad;
};
template <class It>
RobustZ robust_z(double x, It first, It last, double floor_abs) {
  const double med = median(first, last);
  std::vector<double> dev;
  for (It i = first; i != last; ++i) dev.push_back(std::fabs(*i - med));
  const double mad = median(dev.begin(), dev.end());
  const double scale = std::max(kMadToSigma * mad, floor_abs);
  return {(x - med) / scale, med, mad};
}

// Trailing mean of the last min(n, count) values ending at `last` (summed in order).
template <class It>
double trailing_mean(It first, It last) {
  double s = 0;
  size_t n = 0;
  for (It i = first; i != last; ++i, ++n) s += *i;
  return n ? s / static_cast<double>(n) : kNaN;
}

int role_index(const std::vector<std::string>& roles, const std::string& name) {
  for (size_t i = 0; i < roles.size(); ++i)
    if (roles[i] == name) return static_cast<int>(i);
  return -1;
}

void check(const Thresholds& t) {
  auto positive = [](int v, const char* n) {
    if (v < 1) throw std::invalid_argument(fmt::format("thresholds: {} must be >= 1 (got {})", n, v));
  };
  positive(t.window, "window");
  positive(t.min_history, "min_history");
  positive(t.smooth, "smooth");
  positive(t.gap_patience, "gap_patience");
  positive(t.baseline_rows, "baseline_rows");
  positive(t.stat_smooth, "stat_smooth");
  positive(t.diverged_patience, "diverged_patience");
  positive(t.probe_baseline_rows, "probe_baseline_rows");
  positive(t.loss_rise_patience, "loss_rise_patience");
  positive(t.fixed_batch_rise_patience, "fixed_batch_rise_patience");
  positive(t.ramp_rise_patience, "ramp_rise_patience");
  if (t.ramp_rise_from < 0)
    throw std::invalid_argument(fmt::format("thresholds: ramp_rise_from must be >= 0 (got {})", t.ramp_rise_from));
  if (t.adam_rms_from < 0)
    throw std::invalid_argument(fmt::format("thresholds: adam_rms_from must be >= 0 (got {})", t.adam_rms_from));
  if (t.probe_baseline_from < 0)
    throw std::invalid_argument(fmt::format("thresholds: probe_baseline_from must be >= 0 (got {})", t.probe_baseline_from));
  if (t.smooth > t.min_history + t.window)
    throw std::invalid_argument("thresholds: smooth must not exceed min_history + window");
  if (t.min_history > t.window)
    throw std::invalid_argument(fmt::format("thresholds: min_history ({}) must not exceed window ({})",
                                            t.min_history, t.window));
}

Flag make_flag(int64_t step, int det, std::vector<std::pair<std::string, double>> ev,
               std::string layer = {}, std::string operand = {}) {
  return Flag{step, kDetNames[det], std::move(layer), std::move(operand), std::move(ev)};
}

// Rising edge of a condition: true once when `cond` turns on.
struct Episode {
  bool active = false;
  bool rise(bool cond) {
    const bool fire = cond && !active;
    active = cond;
    return fire;
  }
};

// The growth detectors' baseline and current value over the first `n` finite values of a
// probe: current = median of the last `smooth`, baseline = median of the
// `probe_baseline_rows` just before them (a trailing baseline, so it follows healthy
// learning: the growth is a rate, not a distance from the run's first steps). The first
// `probe_baseline_from` values never enter a baseline. False while there are too few values.
template <class V>
bool trailing_growth(const V& vals, size_t n, const Thresholds& t, double& base, double& cur) {
  const auto sm = static_cast<size_t>(t.smooth), rows = static_cast<size_t>(t.probe_baseline_rows);
  if (n < static_cast<size_t>(t.probe_baseline_from) + rows + sm) return false;
  const auto b = vals.begin();
  const auto e = b + static_cast<std::ptrdiff_t>(n);
  cur = median(e - static_cast<std::ptrdiff_t>(sm), e);
  base = median(e - static_cast<std::ptrdiff_t>(sm + rows), e - static_cast<std::ptrdiff_t>(sm));
  return true;
}

// The update_drift quantity: update_ratio / lr (NaN where it is not a positive number).
double normalized_update(double update_ratio, double lr) {
  if (!(lr > 0) || !std::isfinite(update_ratio) || !(update_ratio > 0)) return kNaN;
  return update_ratio / lr;
}

}  // namespace

const std::vector<std::string>& detector_names() {
  static const std::vector<std::string> names(kDetNames, kDetNames + kDetCount);
  return names;
}

const std::vector<std::string>& default_detectors() {
  static const std::vector<std::string> names{"nonfinite", "attn_logit", "loss_rise", "update_size",
                                              "fixed_batch_rise", "ramp_rise"};
  return names;
}

std::vector<std::string> parse_detector_list(const std::string& list) {
  if (list.empty() || list == "default") return default_detectors();
  if (list == "all") return detector_names();
  std::vector<std::string> out;
  size_t p = 0;
  while (p <= list.size()) {
    const size_t q = std::min(list.find(',', p), list.size());
    const std::string name = list.substr(p, q - p);
    if (std::find(kDetNames, kDetNames + kDetCount, name) == kDetNames + kDetCount) {
      std::string all;
      for (const char* d : kDetNames) all += (all.empty() ? "" : ", ") + std::string(d);
      throw std::invalid_argument(fmt::format("unknown detector '{}'; known: {} (or all, or default)", name, all));
    }
    if (std::find(out.begin(), out.end(), name) == out.end()) out.push_back(name);
    p = q + 1;
  }
  return out;
}

std::vector<Flag> only(const std::vector<Flag>& flags, const std::vector<std::string>& enabled) {
  std::vector<Flag> out;
  for (const Flag& f : flags)
    if (std::find(enabled.begin(), enabled.end(), f.detector) != enabled.end()) out.push_back(f);
  return out;
}

bool Flag::operator==(const Flag& o) const {
  if (step != o.step || detector != o.detector || layer != o.layer || operand != o.operand ||
      evidence.size() != o.evidence.size())
    return false;
  for (size_t i = 0; i < evidence.size(); ++i)
    if (evidence[i].first != o.evidence[i].first ||
        std::bit_cast<uint64_t>(evidence[i].second) != std::bit_cast<uint64_t>(o.evidence[i].second))
      return false;
  return true;
}

std::string Flag::describe() const {
  std::string s = fmt::format("step {}: {}", step, detector);
  if (!layer.empty()) s += fmt::format(" {}", layer);
  if (!operand.empty()) s += fmt::format("/{}", operand);
  for (size_t i = 0; i < evidence.size(); ++i)
    s += fmt::format("{}{}={:.4g}", i ? ", " : " (", evidence[i].first, evidence[i].second);
  if (!evidence.empty()) s += ")";
  return s;
}

// ---------------------------------------------------------------------------------------
// Thresholds <-> JSON

#define LPX_DIV_FIELDS(X)                                                                   \
  X(window) X(min_history) X(loss_spike_z) X(grad_spike_z) X(loss_mad_floor) X(grad_mad_floor) \
  X(smooth) X(gap_rel) X(gap_patience) X(baseline_rows) X(stat_smooth) X(flushed_growth_pp) \
  X(saturated_pct) X(saturated_growth_pp) X(adam_rms) X(adam_rms_from) X(update_drift_factor) \
  X(probe_baseline_from) X(probe_baseline_rows) X(attn_logit_growth) X(output_logit_growth)       \
  X(act_outlier_growth) X(amax_staleness) X(loss_rise_factor) X(loss_rise_patience) X(grad_norm_growth) X(update_ratio_max) \
  X(fixed_batch_rise_factor) X(fixed_batch_rise_patience) X(ramp_rise_factor) \
  X(ramp_rise_patience) X(ramp_rise_from) X(diverged_factor) X(diverged_patience)

Thresholds Thresholds::from_json(const std::string& text) {
  const nlohmann::json j = io::parse_json(text, "thresholds");  // size, depth, duplicate keys
  if (!j.is_object()) throw std::invalid_argument("thresholds: expected a JSON object");
  Thresholds t;
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string& k = it.key();
    const auto& v = it.value();
    if (!v.is_number())
      throw std::invalid_argument(fmt::format("thresholds: {} must be a number", k));
    bool known = false;
#define LPX_DIV_READ(name)                                                                   \
  if (k == #name) {                                                                          \
    known = true;                                                                            \
    if constexpr (std::is_same_v<decltype(t.name), int>) {                                   \
      if (!v.is_number_integer())                                                            \
        throw std::invalid_argument(fmt::format("thresholds: {} must be an integer", k));   \
      t.name = v.get<int>();                                                                 \
    } else {                                                                                 \
      t.name = v.get<double>();                                                              \
    }                                                                                        \
  }
    LPX_DIV_FIELDS(LPX_DIV_READ)
#undef LPX_DIV_READ
    if (!known) {
      std::string names;
#define LPX_DIV_NAME(name) names += std::string(names.empty() ? "" : ", ") + #name;
      LPX_DIV_FIELDS(LPX_DIV_NAME)
#undef LPX_DIV_NAME
      throw std::invalid_argument(fmt::format("thresholds: unknown key '{}'; allowed: {}", k, names));
    }
  }
  check(t);
  return t;
}

std::string Thresholds::to_json() const {
  nlohmann::ordered_json j;
#define LPX_DIV_WRITE(name) j[#name] = name;
  LPX_DIV_FIELDS(LPX_DIV_WRITE)
#undef LPX_DIV_WRITE
  return j.dump();
}

// ---------------------------------------------------------------------------------------
// Online

struct Monitor::State {
  Thresholds t;
  std::vector<std::string> layers, roles;
  int L = 0, R = 0;
  std::vector<Flag> flags;
  // spikes: trailing finite values before the current step
  std::deque<double> loss_hist, grad_hist;
  Episode ep[kDetCount];
  // reference gap
  std::deque<double> loss_win, ref_win;
  int gap_count = 0;
  // update drift: every finite normalized value
  std::vector<double> upd;
  // per (layer, role) statistics: finite values so far, episodes
  std::vector<std::vector<double>> flushed, saturated;
  std::vector<Episode> ep_flushed, ep_saturated;
  int dgrad_dy = -1, wgrad_dy = -1;
  // growth detectors: every finite value so far, by detector
  std::vector<double> probe[kDetCount];
  int64_t adam_seen = 0;  // finite adam_rms values so far
  // loss_rise, fixed_batch_rise and ramp_rise: the last `smooth` values, the lowest
  // trailing mean, steps above; the previous step's learning rate
  struct Rise {
    std::deque<double> win;
    double best = kNaN;
    int count = 0;
  } loss_rise_state, fixed_rise_state, ramp_rise_state;
  double prev_lr = kNaN;
  int64_t rows = 0;
};

Monitor::Monitor(Thresholds t, std::vector<std::string> layers, std::vector<std::string> roles)
    : s_(std::make_unique<State>()) {
  check(t);
  s_->t = t;
  s_->L = static_cast<int>(layers.size());
  s_->R = static_cast<int>(roles.size());
  s_->dgrad_dy = role_index(roles, "dgrad_dy");
  s_->wgrad_dy = role_index(roles, "wgrad_dy");
  s_->layers = std::move(layers);
  s_->roles = std::move(roles);
  const size_t n = static_cast<size_t>(s_->L) * static_cast<size_t>(s_->R);
  s_->flushed.resize(n);
  s_->saturated.resize(n);
  s_->ep_flushed.resize(n);
  s_->ep_saturated.resize(n);
}
Monitor::~Monitor() = default;
Monitor::Monitor(Monitor&&) noexcept = default;
Monitor& Monitor::operator=(Monitor&&) noexcept = default;
const std::vector<Flag>& Monitor::flags() const { return s_->flags; }

std::vector<Flag> Monitor::observe(const StepRecord& r) {
  State& s = *s_;
  const Thresholds& t = s.t;
  std::vector<Flag> out;
  const auto W = static_cast<size_t>(t.window);

  // nonfinite
  if (s.ep[nonfinite].rise(!std::isfinite(r.loss) || !std::isfinite(r.grad_norm)))
    out.push_back(make_flag(r.step, nonfinite, {{"loss", r.loss}, {"grad_norm", r.grad_norm}}));

  // loss_spike
  {
    bool cond = false;
    RobustZ z{};
    if (std::isfinite(r.loss) && s.loss_hist.size() >= static_cast<size_t>(t.min_history)) {
      const double med = median(s.loss_hist.begin(), s.loss_hist.end());
      z = robust_z(r.loss, s.loss_hist.begin(), s.loss_hist.end(), t.loss_mad_floor * std::fabs(med));
      cond = z.z > t.loss_spike_z;
    }
    if (s.ep[loss_spike].rise(cond))
      out.push_back(make_flag(r.step, loss_spike, {{"loss", r.loss}, {"median", z.med}, {"mad", z.mad}, {"z", z.z}}));
    if (std::isfinite(r.loss)) {
      s.loss_hist.push_back(r.loss);
      if (s.loss_hist.size() > W) s.loss_hist.pop_front();
    }
  }
  // grad_spike (on log grad_norm)
  {
    const double g = (std::isfinite(r.grad_norm) && r.grad_norm > 0) ? std::log(r.grad_norm) : kNaN;
    bool cond = false;
    RobustZ z{};
    if (std::isfinite(g) && s.grad_hist.size() >= static_cast<size_t>(t.min_history)) {
      z = robust_z(g, s.grad_hist.begin(), s.grad_hist.end(), t.grad_mad_floor);
      cond = z.z > t.grad_spike_z;
    }
    if (s.ep[grad_spike].rise(cond))
      out.push_back(make_flag(r.step, grad_spike,
                              {{"grad_norm", r.grad_norm}, {"median", std::exp(z.med)}, {"z", z.z}}));
    if (std::isfinite(g)) {
      s.grad_hist.push_back(g);
      if (s.grad_hist.size() > W) s.grad_hist.pop_front();
    }
  }
  // reference_gap
  {
    const auto n = static_cast<size_t>(t.smooth);
    s.loss_win.push_back(r.loss);
    s.ref_win.push_back(r.ref_loss);
    if (s.loss_win.size() > n) {
      s.loss_win.pop_front();
      s.ref_win.pop_front();
    }
    const double lm = trailing_mean(s.loss_win.begin(), s.loss_win.end());
    const double rm = trailing_mean(s.ref_win.begin(), s.ref_win.end());
    const double gap = (lm - rm) / std::fabs(rm);
    const bool above = std::isfinite(rm) && (!std::isfinite(lm) || gap > t.gap_rel);
    s.gap_count = above ? s.gap_count + 1 : 0;
    if (s.ep[reference_gap].rise(s.gap_count >= t.gap_patience))
      out.push_back(make_flag(r.step, reference_gap,
                              {{"gap", gap}, {"loss_mean", lm}, {"ref_mean", rm}, {"steps_above", s.gap_count}}));
  }
  // adam_rms (a non-finite value is not evaluated: the episode keeps its state)
  if (std::isfinite(r.adam_rms) && s.ep[adam_rms].rise(s.adam_seen++ >= t.adam_rms_from && r.adam_rms > t.adam_rms))
    out.push_back(make_flag(r.step, adam_rms, {{"rms_g2_over_v", r.adam_rms}}));
  // update_size (a non-finite ratio is not evaluated)
  if (std::isfinite(r.update_ratio) && s.ep[update_size].rise(r.update_ratio > t.update_ratio_max))
    out.push_back(make_flag(r.step, update_size, {{"update_ratio", r.update_ratio}, {"lr", r.lr}}));
  // update_drift
  {
    const double v = normalized_update(r.update_ratio, r.lr);
    if (std::isfinite(v)) {
      s.upd.push_back(v);
      const size_t need = static_cast<size_t>(t.min_history) + W;
      bool cond = false;
      double base = kNaN, cur = kNaN;
      if (s.upd.size() >= need) {
        base = median(s.upd.begin() + t.min_history, s.upd.begin() + static_cast<std::ptrdiff_t>(need));
        cur = median(s.upd.end() - t.smooth, s.upd.end());
        cond = cur > t.update_drift_factor * base;
      }
      if (s.ep[update_drift].rise(cond))
        out.push_back(make_flag(r.step, update_drift, {{"current", cur}, {"baseline", base}, {"ratio", cur / base}}));
    }
  }
  // growth of the mechanisms' signals over their early baseline
  auto growth_step = [&](double x, int det) {
    if (!std::isfinite(x)) return;  // not evaluated: the episode keeps its state
    auto& h = s.probe[det];
    h.push_back(x);
    bool cond = false;
    double base = kNaN, cur = kNaN;
    if (trailing_growth(h, h.size(), t, base, cur)) cond = cur > growth_factor(t, det) * base;
    if (s.ep[det].rise(cond)) out.push_back(make_flag(r.step, det, {{"current", cur}, {"baseline", base}, {"ratio", cur / base}}));
  };
  growth_step(r.attn_logit_max, attn_logit);
  growth_step(r.output_logit_max, output_logit);
  growth_step(r.act_outlier_ratio, act_outlier);
  growth_step(r.grad_norm, grad_growth);
  // loss_rise, fixed_batch_rise, ramp_rise: the trailing mean of the loss (of the
  // fixed-batch loss) above a factor of its lowest so far, for `patience` steps at which
  // `judge` holds (a step where it does not resets the count)
  const int64_t row = s.rows++;
  auto rise_step = [&](State::Rise& st, double x, int det, double factor, int patience, bool judge) {
    st.win.push_back(x);
    if (st.win.size() > static_cast<size_t>(t.smooth)) st.win.pop_front();
    const double lm = trailing_mean(st.win.begin(), st.win.end());
    if (!std::isfinite(lm)) return;  // a non-finite mean is not evaluated (nonfinite flags the loss)
    const bool judged = row >= t.min_history && std::isfinite(st.best) && judge;
    st.count = judged && lm > factor * st.best ? st.count + 1 : 0;
    if (s.ep[det].rise(st.count >= patience))
      out.push_back(make_flag(r.step, det,
                              {{"loss_mean", lm}, {"best", st.best}, {"ratio", lm / st.best}, {"steps_above", st.count}}));
    st.best = std::isfinite(st.best) ? std::min(st.best, lm) : lm;
  };
  // loss_rise stands down at a step that measured the fixed-batch loss: the same rise without
  // the batch noise, which is what made loss_rise flag healthy runs
  rise_step(s.loss_rise_state, r.loss, loss_rise, t.loss_rise_factor, t.loss_rise_patience,
            !std::isfinite(r.fixed_batch_loss));
  rise_step(s.fixed_rise_state, r.fixed_batch_loss, fixed_batch_rise, t.fixed_batch_rise_factor,
            t.fixed_batch_rise_patience, true);
  rise_step(s.ramp_rise_state, r.fixed_batch_loss, ramp_rise, t.ramp_rise_factor, t.ramp_rise_patience,
            row >= t.ramp_rise_from && r.lr > s.prev_lr);  // false while either lr is NaN
  s.prev_lr = r.lr;
  if (std::isfinite(r.amax_staleness) && s.ep[amax_staleness].rise(r.amax_staleness > t.amax_staleness))
    out.push_back(make_flag(r.step, amax_staleness, {{"amax_over_scale_amax", r.amax_staleness}}));
  // per-layer statistics: underflow_growth on the gradient operands, saturation on all
  auto stat_step = [&](const float* a, std::vector<std::vector<double>>& hist, std::vector<Episode>& eps,
                       int det, bool gradients_only) {
    if (!a) return;
    for (int l = 0; l < s.L; ++l)
      for (int ro = 0; ro < s.R; ++ro) {
        if (gradients_only && ro != s.dgrad_dy && ro != s.wgrad_dy) continue;
        const size_t k = static_cast<size_t>(l) * static_cast<size_t>(s.R) + static_cast<size_t>(ro);
        const double x = a[k];
        if (!std::isfinite(x)) continue;
        auto& h = hist[k];
        h.push_back(x);
        bool cond = false;
        double base = kNaN, cur = kNaN;
        if (h.size() >= static_cast<size_t>(t.baseline_rows + t.stat_smooth)) {
          base = median(h.begin(), h.begin() + t.baseline_rows);
          cur = median(h.end() - t.stat_smooth, h.end());
          cond = det == underflow_growth ? cur - base > t.flushed_growth_pp
                                         : cur > t.saturated_pct && cur - base > t.saturated_growth_pp;
        }
        if (eps[k].rise(cond))
          out.push_back(make_flag(r.step, det, {{"current_pct", cur}, {"baseline_pct", base}},
                                  s.layers[static_cast<size_t>(l)], s.roles[static_cast<size_t>(ro)]));
      }
  };
  stat_step(r.flushed_pct, s.flushed, s.ep_flushed, underflow_growth, true);
  stat_step(r.saturated_pct, s.saturated, s.ep_saturated, saturation, false);

  s.flags.insert(s.flags.end(), out.begin(), out.end());
  return out;
}

// ---------------------------------------------------------------------------------------
// Offline

namespace {

// The reference run's loss at each of `run`'s steps (NaN where the reference has none).
std::vector<double> reference_loss_by_step(const Series& run, const Series* reference) {
  std::vector<double> ref(run.rows(), kNaN);
  if (!reference) return ref;
  std::map<int64_t, double> by_step;
  for (size_t i = 0; i < reference->rows(); ++i) by_step[reference->step[i]] = reference->loss[i];
  for (size_t i = 0; i < run.rows(); ++i)
    if (auto it = by_step.find(run.step[i]); it != by_step.end()) ref[i] = it->second;
  return ref;
}

// Rising edges of per-row conditions (nullopt: not evaluated at that row, state kept).
void edges(const std::vector<std::optional<bool>>& cond, const std::vector<int64_t>& step, int det,
           const std::function<std::vector<std::pair<std::string, double>>(size_t)>& evidence,
           std::vector<Flag>& out, const std::string& layer = {}, const std::string& operand = {}) {
  bool active = false;
  for (size_t i = 0; i < cond.size(); ++i) {
    if (!cond[i]) continue;
    if (*cond[i] && !active) out.push_back(make_flag(step[i], det, evidence(i), layer, operand));
    active = *cond[i];
  }
}

// Rows of `x` that are finite, as indices.
std::vector<size_t> finite_rows(const std::vector<double>& x) {
  std::vector<size_t> f;
  for (size_t i = 0; i < x.size(); ++i)
    if (std::isfinite(x[i])) f.push_back(i);
  return f;
}

// Spike detector over a whole series: robust z of x[i] against the `window` finite values
// before it.
void spikes(const std::vector<double>& x, const std::vector<int64_t>& step, const Thresholds& t, int det,
            bool relative_floor, double floor, double zmax, const std::vector<double>& shown,
            std::vector<Flag>& out) {
  const auto fin = finite_rows(x);
  std::vector<double> vals;
  for (size_t i : fin) vals.push_back(x[i]);
  std::vector<std::optional<bool>> cond(x.size(), false);
  std::vector<RobustZ> zs(x.size());
  for (size_t j = 0; j < fin.size(); ++j) {
    if (j < static_cast<size_t>(t.min_history)) continue;
    const size_t lo = j > static_cast<size_t>(t.window) ? j - static_cast<size_t>(t.window) : 0;
    const auto b = vals.begin() + static_cast<std::ptrdiff_t>(lo), e = vals.begin() + static_cast<std::ptrdiff_t>(j);
    const double fl = relative_floor ? floor * std::fabs(median(b, e)) : floor;
    zs[fin[j]] = robust_z(vals[j], b, e, fl);
    cond[fin[j]] = zs[fin[j]].z > zmax;
  }
  edges(cond, step, det, [&](size_t i) -> std::vector<std::pair<std::string, double>> {
    if (det == loss_spike) return {{"loss", shown[i]}, {"median", zs[i].med}, {"mad", zs[i].mad}, {"z", zs[i].z}};
    return {{"grad_norm", shown[i]}, {"median", std::exp(zs[i].med)}, {"z", zs[i].z}};
  }, out);
}

}  // namespace

std::vector<Flag> detect(const Series& run, const Thresholds& t, const Series* reference) {
  check(t);
  const size_t n = run.rows();
  std::vector<Flag> out;
  // nonfinite
  {
    std::vector<std::optional<bool>> c(n);
    for (size_t i = 0; i < n; ++i) c[i] = !std::isfinite(run.loss[i]) || !std::isfinite(run.grad_norm[i]);
    edges(c, run.step, nonfinite, [&](size_t i) -> std::vector<std::pair<std::string, double>> {
      return {{"loss", run.loss[i]}, {"grad_norm", run.grad_norm[i]}};
    }, out);
  }
  spikes(run.loss, run.step, t, loss_spike, true, t.loss_mad_floor, t.loss_spike_z, run.loss, out);
  {
    std::vector<double> lg(n);
    for (size_t i = 0; i < n; ++i)
      lg[i] = (std::isfinite(run.grad_norm[i]) && run.grad_norm[i] > 0) ? std::log(run.grad_norm[i]) : kNaN;
    spikes(lg, run.step, t, grad_spike, false, t.grad_mad_floor, t.grad_spike_z, run.grad_norm, out);
  }
  // reference_gap: reference losses aligned by step number
  {
    const std::vector<double> ref = reference_loss_by_step(run, reference);
    std::vector<std::optional<bool>> c(n);
    std::vector<double> lm(n), rm(n), gap(n);
    std::vector<int> count(n);
    int k = 0;
    for (size_t i = 0; i < n; ++i) {
      const size_t lo = i + 1 > static_cast<size_t>(t.smooth) ? i + 1 - static_cast<size_t>(t.smooth) : 0;
      lm[i] = trailing_mean(run.loss.begin() + static_cast<std::ptrdiff_t>(lo), run.loss.begin() + static_cast<std::ptrdiff_t>(i + 1));
      rm[i] = trailing_mean(ref.begin() + static_cast<std::ptrdiff_t>(lo), ref.begin() + static_cast<std::ptrdiff_t>(i + 1));
      gap[i] = (lm[i] - rm[i]) / std::fabs(rm[i]);
      k = (std::isfinite(rm[i]) && (!std::isfinite(lm[i]) || gap[i] > t.gap_rel)) ? k + 1 : 0;
      count[i] = k;
      c[i] = k >= t.gap_patience;
    }
    edges(c, run.step, reference_gap, [&](size_t i) -> std::vector<std::pair<std::string, double>> {
      return {{"gap", gap[i]}, {"loss_mean", lm[i]}, {"ref_mean", rm[i]}, {"steps_above", count[i]}};
    }, out);
  }
  // adam_rms
  if (!run.adam_rms.empty()) {
    std::vector<std::optional<bool>> c(n);
    int64_t seen = 0;
    for (size_t i = 0; i < n && i < run.adam_rms.size(); ++i)
      if (std::isfinite(run.adam_rms[i])) c[i] = seen++ >= t.adam_rms_from && run.adam_rms[i] > t.adam_rms;
    edges(c, run.step, adam_rms, [&](size_t i) -> std::vector<std::pair<std::string, double>> {
      return {{"rms_g2_over_v", run.adam_rms[i]}};
    }, out);
  }
  // update_size
  {
    std::vector<std::optional<bool>> c(n);
    for (size_t i = 0; i < n; ++i)
      if (std::isfinite(run.update_ratio[i])) c[i] = run.update_ratio[i] > t.update_ratio_max;
    edges(c, run.step, update_size, [&](size_t i) -> std::vector<std::pair<std::string, double>> {
      return {{"update_ratio", run.update_ratio[i]}, {"lr", run.lr[i]}};
    }, out);
  }
  // update_drift
  {
    std::vector<double> v(n);
    for (size_t i = 0; i < n; ++i) v[i] = normalized_update(run.update_ratio[i], run.lr[i]);
    const auto fin = finite_rows(v);
    std::vector<double> vals;
    for (size_t i : fin) vals.push_back(v[i]);
    std::vector<std::optional<bool>> c(n);
    std::vector<double> base(n, kNaN), cur(n, kNaN);
    const size_t need = static_cast<size_t>(t.min_history + t.window);
    double b = kNaN;
    if (vals.size() >= need) b = median(vals.begin() + t.min_history, vals.begin() + static_cast<std::ptrdiff_t>(need));
    for (size_t j = 0; j < fin.size(); ++j) {
      c[fin[j]] = false;
      if (j + 1 < need) continue;
      const auto e = vals.begin() + static_cast<std::ptrdiff_t>(j + 1);
      base[fin[j]] = b;
      cur[fin[j]] = median(e - t.smooth, e);
      c[fin[j]] = cur[fin[j]] > t.update_drift_factor * b;
    }
    edges(c, run.step, update_drift, [&](size_t i) -> std::vector<std::pair<std::string, double>> {
      return {{"current", cur[i]}, {"baseline", base[i]}, {"ratio", cur[i] / base[i]}};
    }, out);
  }
  // per-layer statistics
  const size_t L = run.layers.size(), R = run.roles.size();
  auto stats = [&](const std::vector<float>& a, int det) {
    if (a.size() < n * L * R || L * R == 0) return;
    const int dy1 = role_index(run.roles, "dgrad_dy"), dy2 = role_index(run.roles, "wgrad_dy");
    for (size_t l = 0; l < L; ++l)
      for (size_t ro = 0; ro < R; ++ro) {
        if (det == underflow_growth && static_cast<int>(ro) != dy1 && static_cast<int>(ro) != dy2) continue;
        std::vector<double> x(n);
        for (size_t i = 0; i < n; ++i) x[i] = a[(i * L + l) * R + ro];
        const auto fin = finite_rows(x);
        std::vector<std::optional<bool>> c(n);
        std::vector<double> base(n, kNaN), cur(n, kNaN);
        const size_t need = static_cast<size_t>(t.baseline_rows + t.stat_smooth);
        for (size_t j = 0; j < fin.size(); ++j) {
          const size_t i = fin[j];
          c[i] = false;
          if (j + 1 < need) continue;
          std::vector<double> first, last;
          for (size_t q = 0; q < static_cast<size_t>(t.baseline_rows); ++q) first.push_back(x[fin[q]]);
          for (size_t q = j + 1 - static_cast<size_t>(t.stat_smooth); q <= j; ++q) last.push_back(x[fin[q]]);
          base[i] = median(first.begin(), first.end());
          cur[i] = median(last.begin(), last.end());
          c[i] = det == underflow_growth ? cur[i] - base[i] > t.flushed_growth_pp
                                         : cur[i] > t.saturated_pct && cur[i] - base[i] > t.saturated_growth_pp;
        }
        edges(c, run.step, det, [&](size_t i) -> std::vector<std::pair<std::string, double>> {
          return {{"current_pct", cur[i]}, {"baseline_pct", base[i]}};
        }, out, run.layers[l], run.roles[ro]);
      }
  };
  stats(run.flushed_pct, underflow_growth);
  stats(run.saturated_pct, saturation);
  // growth of the mechanisms' signals (rows where the value is not finite are skipped,
  // keeping the episode's state, as the monitor does)
  auto growth = [&](const std::vector<double>& x, int det) {
    if (x.empty()) return;
    const auto fin = finite_rows(x);
    std::vector<double> vals;
    for (size_t i : fin) vals.push_back(x[i]);
    std::vector<std::optional<bool>> c(n);
    std::vector<double> base(n, kNaN), cur(n, kNaN);
    for (size_t j = 0; j < fin.size() && fin[j] < n; ++j) {
      const size_t i = fin[j];
      c[i] = false;
      if (trailing_growth(vals, j + 1, t, base[i], cur[i])) c[i] = cur[i] > growth_factor(t, det) * base[i];
    }
    edges(c, run.step, det, [&](size_t i) -> std::vector<std::pair<std::string, double>> {
      return {{"current", cur[i]}, {"baseline", base[i]}, {"ratio", cur[i] / base[i]}};
    }, out);
  };
  growth(run.attn_logit_max, attn_logit);
  growth(run.output_logit_max, output_logit);
  growth(run.act_outlier_ratio, act_outlier);
  growth(run.grad_norm, grad_growth);
  // loss_rise, fixed_batch_rise, ramp_rise (as online: `judge(i)` gates step i)
  auto rise = [&](const std::vector<double>& x, int det, double factor, int patience,
                  const auto& judge) {
    std::vector<std::optional<bool>> c(n);
    std::vector<double> lm(n, kNaN), best(n, kNaN);
    std::vector<int> count(n);
    double b = kNaN;
    int k = 0;
    for (size_t i = 0; i < n && i < x.size(); ++i) {
      const size_t lo = i + 1 > static_cast<size_t>(t.smooth) ? i + 1 - static_cast<size_t>(t.smooth) : 0;
      lm[i] = trailing_mean(x.begin() + static_cast<std::ptrdiff_t>(lo), x.begin() + static_cast<std::ptrdiff_t>(i + 1));
      if (!std::isfinite(lm[i])) continue;
      const bool judged = i >= static_cast<size_t>(t.min_history) && std::isfinite(b) &&
                          judge(i);
      k = judged && lm[i] > factor * b ? k + 1 : 0;
      count[i] = k;
      best[i] = b;
      c[i] = k >= patience;
      b = std::isfinite(b) ? std::min(b, lm[i]) : lm[i];
    }
    edges(c, run.step, det, [&](size_t i) -> std::vector<std::pair<std::string, double>> {
      return {{"loss_mean", lm[i]}, {"best", best[i]}, {"ratio", lm[i] / best[i]}, {"steps_above", count[i]}};
    }, out);
  };
  const auto& fb = run.fixed_batch_loss;
  rise(run.loss, loss_rise, t.loss_rise_factor, t.loss_rise_patience,
       [&](size_t i) { return !(i < fb.size() && std::isfinite(fb[i])); });
  rise(fb, fixed_batch_rise, t.fixed_batch_rise_factor, t.fixed_batch_rise_patience, [](size_t) { return true; });
  rise(fb, ramp_rise, t.ramp_rise_factor, t.ramp_rise_patience,
       [&](size_t i) {
         return i >= static_cast<size_t>(t.ramp_rise_from) && i > 0 && i < run.lr.size() && run.lr[i] > run.lr[i - 1];
       });
  if (!run.amax_staleness.empty()) {
    std::vector<std::optional<bool>> c(n);
    for (size_t i = 0; i < n && i < run.amax_staleness.size(); ++i)
      if (std::isfinite(run.amax_staleness[i])) c[i] = run.amax_staleness[i] > t.amax_staleness;
    edges(c, run.step, amax_staleness, [&](size_t i) -> std::vector<std::pair<std::string, double>> {
      return {{"amax_over_scale_amax", run.amax_staleness[i]}};
    }, out);
  }

  // step order, then detector order; within a detector, layer-major as generated
  auto det_index = [](const std::string& d) {
    return std::find(kDetNames, kDetNames + kDetCount, d) - kDetNames;
  };
  std::stable_sort(out.begin(), out.end(), [&](const Flag& a, const Flag& b) {
    if (a.step != b.step) return a.step < b.step;
    return det_index(a.detector) < det_index(b.detector);
  });
  return out;
}

// ---------------------------------------------------------------------------------------
// Ground truth

Outcome judge(const Series& run, const Series* /*reference: not part of the definition*/, const Thresholds& t,
              const std::vector<Flag>& flags) {
  Outcome o;
  const size_t n = run.rows();
  for (size_t i = 0; i < n; ++i)
    if (!std::isfinite(run.loss[i])) {
      o.diverged = true;
      o.divergence_step = run.step[i];
      o.reason = "non-finite loss";
      break;
    }
  if (!o.diverged && n > 0) {
    // the run's own history: smoothed loss against the lowest smoothed loss before it
    double best = kNaN;
    size_t streak = 0;
    for (size_t i = 0; i < n; ++i) {
      const size_t lo = i + 1 > static_cast<size_t>(t.smooth) ? i + 1 - static_cast<size_t>(t.smooth) : 0;
      const double lm = trailing_mean(run.loss.begin() + static_cast<std::ptrdiff_t>(lo),
                                      run.loss.begin() + static_cast<std::ptrdiff_t>(i + 1));
      const bool above = std::isfinite(best) && lm > t.diverged_factor * best;
      best = std::isfinite(best) ? std::min(best, lm) : lm;
      streak = above ? streak + 1 : 0;
      if (streak > 0 && (streak >= static_cast<size_t>(t.diverged_patience) || i + 1 == n)) {
        o.diverged = true;
        o.divergence_step = run.step[i + 1 - streak];
        o.reason = fmt::format("loss > {:g} x its best", t.diverged_factor);
        break;
      }
    }
  }
  if (!flags.empty()) {
    const Flag* first = &flags.front();
    for (const auto& f : flags)
      if (f.step < first->step) first = &f;
    o.flagged = true;
    o.first_flag_step = first->step;
    o.first_flag_detector = first->detector;
  }
  if (o.diverged && o.flagged) o.lead_time = o.divergence_step - o.first_flag_step;
  return o;
}

Series series_from(const runlog::Run& run) {
  Series s;
  const runlog::Metrics& m = run.metrics;
  const size_t n = m.rows();
  s.step = m.step;
  s.loss = m.loss;
  auto column = [n](const auto& v) {
    std::vector<double> out(v.begin(), v.end());
    out.resize(n, kNaN);
    return out;
  };
  s.grad_norm = column(m.grad_norm);
  s.update_ratio = column(m.update_ratio);
  s.lr = column(m.lr);
  if (!m.adam_rms.empty()) s.adam_rms = column(m.adam_rms);
  if (!m.attn_logit_max.empty()) s.attn_logit_max = column(m.attn_logit_max);
  if (!m.output_logit_max.empty()) s.output_logit_max = column(m.output_logit_max);
  if (!m.act_outlier_ratio.empty()) s.act_outlier_ratio = column(m.act_outlier_ratio);
  if (!m.fixed_batch_loss.empty()) s.fixed_batch_loss = column(m.fixed_batch_loss);
  if (!m.amax_staleness.empty()) s.amax_staleness = column(m.amax_staleness);
  s.layers = run.quant.layers;
  s.roles = run.quant.roles;
  s.flushed_pct = run.quant.flushed_pct;
  s.saturated_pct = run.quant.saturated_pct;
  return s;
}

}  // namespace lpx::divergence
