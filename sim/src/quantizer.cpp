// Built-in recipes (fp32, bf16) and, when recipes/ is built, the adapter from the recipe
// catalogue's lpx::OperandQuantizer to the simulator's GemmQuantizer.
#include "lpx/sim/quantizer.hpp"

#include <cmath>
#include <limits>
#include <span>
#include <stdexcept>

#include <fmt/format.h>

#include "lpx/formats/cast.hpp"
#include "lpx/formats/element_format.hpp"

#ifdef LPX_SIM_HAVE_RECIPES
#include "device_backend.hpp"
#include "lpx/recipes/operand.hpp"
#include "lpx/recipes/recipe.hpp"
#endif

namespace lpx::sim {

std::string_view role_name(Role r) {
  switch (r) {
    case Role::fwd_x: return "fwd_x";
    case Role::fwd_w: return "fwd_w";
    case Role::dgrad_dy: return "dgrad_dy";
    case Role::dgrad_w: return "dgrad_w";
    case Role::wgrad_x: return "wgrad_x";
    case Role::wgrad_dy: return "wgrad_dy";
  }
  return "?";
}

void fill_stats_from_difference(const float* in, const float* out, int64_t n, OperandStats* stats) {
  if (!stats) return;
  float amax = 0;
  int64_t flushed = 0, saturated = 0;
  double sig = 0, err = 0;
  for (int64_t i = 0; i < n; ++i) {
    const float x = in[i], y = out[i];
    if (!std::isfinite(x)) continue;
    amax = std::max(amax, std::fabs(x));
    if (x != 0 && y == 0) ++flushed;
    if (!std::isfinite(y)) {
      ++saturated;
      continue;
    }
    sig += double{x} * x;
    const double d = double{x} - double{y};
    err += d * d;
  }
  stats->elements = n;
  stats->amax = amax;
  const double pct = n > 0 ? 100.0 / static_cast<double>(n) : 0.0;
  stats->flushed_pct = static_cast<double>(flushed) * pct;
  stats->saturated_pct = static_cast<double>(saturated) * pct;
  stats->sqnr_db = err > 0 ? 10.0 * std::log10(sig / err) : std::numeric_limits<double>::infinity();
  stats->clamped_blocks = 0;
  stats->applied = AppliedFormat{};
}

void GemmQuantizer::set_state(Role role, std::span<const float> values) {
  if (!values.empty())
    throw std::invalid_argument(fmt::format("quantizer state for {}: {} values, but the role keeps no state",
                                            role_name(role), values.size()));
}

namespace {

class IdentityQuantizer final : public GemmQuantizer {
 public:
  void apply(Role role, const float* in, float* out, int64_t rows, int64_t cols, uint64_t,
             OperandStats* stats) override {
    const int64_t n = rows * cols;
    if (out != in) std::copy(in, in + n, out);
    fill_stats_from_difference(in, out, n, stats);
    if (stats) stats->applied.axis = reduction_axis(role);
  }
  bool is_identity(Role) const override { return true; }
};

class Bf16Quantizer final : public GemmQuantizer {
 public:
  void apply(Role role, const float* in, float* out, int64_t rows, int64_t cols, uint64_t,
             OperandStats* stats) override {
    const auto n = static_cast<size_t>(rows * cols);
    CastOptions opt;
    opt.round = Rounding::rne;
    opt.overflow = Overflow::ieee;
    opt.threads = 1;  // callers parallelise over GEMM chunks, not inside a cast
    fake_cast_array(std::span<const float>(in, n), std::span<float>(out, n), fmt16::bf16, opt);
    fill_stats_from_difference(in, out, rows * cols, stats);
    if (stats) {
      stats->applied.element = "bfloat16";
      stats->applied.rounding = "rne";
      stats->applied.axis = reduction_axis(role);
    }
  }
  bool is_identity(Role) const override { return false; }
};

SimRecipe builtin_recipe(const std::string& name) {
  SimRecipe r;
  r.name = name;
  if (name == "fp32") {
    r.json = R"({"name": "fp32", "builtin": true, "operands": "fp32", "master_weights": "fp32", "optimizer_state": "fp32", "accumulation": "fp32"})";
    r.make_quantizer = [](const LayerInfo&, uint64_t) { return make_identity_quantizer(); };
    r.keeps_high_precision = [](const LayerInfo&) { return true; };
  } else if (name == "bf16") {
    r.json = R"({"name": "bf16", "builtin": true, "operands": "bfloat16 (RNE) for linear and head GEMMs", "master_weights": "fp32", "optimizer_state": "fp32", "accumulation": "fp32"})";
    auto keep = [](const LayerInfo& l) { return l.kind == LayerInfo::attention_bmm || l.kind == LayerInfo::embedding; };
    r.make_quantizer = [keep](const LayerInfo& l, uint64_t) { return keep(l) ? make_identity_quantizer() : make_bf16_quantizer(); };
    r.keeps_high_precision = keep;
  } else {
    throw std::invalid_argument(fmt::format("unknown recipe '{}'", name));
  }
  return r;
}

#ifdef LPX_SIM_HAVE_RECIPES
lpx::LayerInfo to_recipe_layer(const LayerInfo& l) {
  lpx::LayerInfo out;
  out.index = l.index;
  out.count = l.count;
  out.kind = static_cast<lpx::LayerInfo::Kind>(l.kind);
  out.name = l.name;
  return out;
}

class RecipeQuantizer final : public GemmQuantizer {
 public:
  RecipeQuantizer(const lpx::Recipe& r, const LayerInfo& l, uint64_t seed,
                  std::shared_ptr<lpx::OperandBackend> backend)
      : q_(r, to_recipe_layer(l), seed) {
    q_.set_backend(std::move(backend));
  }
  void apply(Role role, const float* in, float* out, int64_t rows, int64_t cols, uint64_t step,
             OperandStats* stats) override {
    const auto rr = static_cast<lpx::GemmRole>(role);
    if (!stats) {
      q_.apply(rr, in, out, rows, cols, step, nullptr);
      return;
    }
    lpx::OperandStats s;
    lpx::AppliedOperand a;
    q_.apply(rr, in, out, rows, cols, step, &s, &a);
    stats->applied = AppliedFormat{a.element, a.block,    a.scale, a.tensor_scale,
                                   a.scale_rule, a.rounding, a.transform, a.axis,
                                   a.sr_bits, a.headroom_3_4, a.margin};
    stats->elements = s.elements;
    stats->amax = s.amax;
    stats->flushed_pct = s.flushed_pct;
    stats->saturated_pct = s.saturated_pct;
    stats->sqnr_db = s.sqnr_db;
    stats->clamped_blocks = s.clamped_blocks;
  }
  bool is_identity(Role role) const override { return q_.is_identity(static_cast<lpx::GemmRole>(role)); }
  size_t state_capacity(Role role) const override {
    const lpx::AmaxHistory* h = q_.history(static_cast<lpx::GemmRole>(role));
    return h ? h->length() : 0;
  }
  std::vector<float> state(Role role) const override {
    return q_.history_values(static_cast<lpx::GemmRole>(role));
  }
  void set_state(Role role, std::span<const float> values) override {
    q_.restore_history(static_cast<lpx::GemmRole>(role), values);
  }

 private:
  lpx::OperandQuantizer q_;
};

Numerics numerics_from_recipe(const lpx::Recipe& r) {
  Numerics n;
  n.master = r.master_weights == lpx::MasterWeights::bf16_sr ? Numerics::Master::bf16_sr
                                                             : Numerics::Master::fp32;
  switch (r.optimizer_state) {
    case lpx::OptimizerState::fp32: n.moments = Numerics::Moments::fp32; break;
    case lpx::OptimizerState::bf16: n.moments = Numerics::Moments::bf16; break;
    case lpx::OptimizerState::fp8_e4m3: n.moments = Numerics::Moments::fp8_e4m3; break;
  }
  if (r.accumulation.limited) {
    n.accumulation.mantissa_bits = r.accumulation.mantissa_bits;
    n.accumulation.promote_every = r.accumulation.promote_every;
  }
  return n;
}
#endif

}  // namespace

std::unique_ptr<GemmQuantizer> make_identity_quantizer() { return std::make_unique<IdentityQuantizer>(); }
std::unique_ptr<GemmQuantizer> make_bf16_quantizer() { return std::make_unique<Bf16Quantizer>(); }

#ifdef LPX_SIM_HAVE_RECIPES
bool have_recipe_catalogue() { return true; }
#else
bool have_recipe_catalogue() { return false; }
#endif

SimRecipe load_sim_recipe(const std::string& name_or_path, Device device) {
  require_device(device);
#ifdef LPX_SIM_HAVE_RECIPES
  {
    // The catalogue (or a file); it has fp32 and bf16 too.
    auto recipe = std::make_shared<lpx::Recipe>(lpx::load_recipe(name_or_path));
    std::shared_ptr<lpx::OperandBackend> backend = make_operand_backend(device);
    SimRecipe r;
    r.name = recipe->name;
    r.device = device;
    r.json = recipe->to_json();
    r.numerics = numerics_from_recipe(*recipe);
    r.make_quantizer = [recipe, backend](const LayerInfo& l, uint64_t seed) -> std::unique_ptr<GemmQuantizer> {
      return std::make_unique<RecipeQuantizer>(*recipe, l, seed, backend);
    };
    r.keeps_high_precision = [recipe](const LayerInfo& l) {
      return lpx::keeps_high_precision(*recipe, to_recipe_layer(l));
    };
    return r;
  }
#endif
  return builtin_recipe(name_or_path);
}

}  // namespace lpx::sim
