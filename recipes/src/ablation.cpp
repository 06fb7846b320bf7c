// Ablation variants of a recipe (ablation.hpp).
#include "lpx/recipes/ablation.hpp"

#include <algorithm>
#include <regex>
#include <stdexcept>

#include <fmt/format.h>

namespace lpx {
namespace {

bool below_bf16(const RoleSpec& s) {
  return s.kind == RoleSpec::Kind::block || s.kind == RoleSpec::Kind::ternary_absmean;
}

// The role as a kept layer would run it: the recipe's high-precision format, its transform kept.
RoleSpec unquantized(const Recipe& r, const RoleSpec& s) {
  RoleSpec u;
  u.kind = r.high_precision.format;
  u.transform = s.transform;
  return u;
}

Recipe renamed(Recipe r, const std::string& base, const std::string& mode, const std::string& unit) {
  r.name = ablation_recipe_name(base, mode, unit);
  r.summary = fmt::format("{} with {} {} quantized (ablation of {})", base, mode == "only" ? "only" : "all but", unit, base);
  r.notes = fmt::format("Written by lpx sweep --ablate from recipe {} (docs/recipes.md#ablations).", base);
  return r;
}

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : ", ") + x;
  return s;
}

// The name of a layer within its block: "h2.mlp.fc" -> "mlp.fc"; names outside blocks stay.
std::string within_block(const std::string& name) {
  const size_t dot = name.find('.');
  if (dot != std::string::npos && dot >= 2 && name[0] == 'h' &&
      std::all_of(name.begin() + 1, name.begin() + static_cast<std::ptrdiff_t>(dot), [](char c) { return c >= '0' && c <= '9'; }))
    return name.substr(dot + 1);
  return name;
}

void require_low_precision(const Recipe& recipe) {
  bool quantizes = false;
  for (GemmRole g : kAllGemmRoles) quantizes = quantizes || below_bf16(recipe.role(g));
  if (!quantizes)
    throw std::invalid_argument(fmt::format("recipe {} quantizes no GEMM operand below BF16: nothing to ablate", recipe.name));
}

// The units to ablate: every one of `possible` when `units` names none, else the named
// ones in order without repeats, each one of `possible` or accepted by `also`.
template <class Also>
std::vector<std::string> choose_units(const Recipe& recipe, const std::vector<std::string>& possible,
                                      const std::vector<std::string>& units, const char* kind, const Also& also) {
  std::vector<std::string> chosen = units.empty() ? possible : std::vector<std::string>();
  for (const std::string& u : units) {
    if (!also(u) && std::find(possible.begin(), possible.end(), u) == possible.end())
      throw std::invalid_argument(fmt::format("recipe {} does not quantize {}'{}' of this model; it quantizes: {}", recipe.name,
                                              kind, u, possible.empty() ? std::string("nothing") : join(possible)));
    if (std::find(chosen.begin(), chosen.end(), u) == chosen.end()) chosen.push_back(u);
  }
  if (chosen.empty())
    throw std::invalid_argument(fmt::format("recipe {} keeps every layer of this model in high precision: nothing to ablate", recipe.name));
  return chosen;
}

template <class T>
void sort_unique(std::vector<T>& v) {
  std::sort(v.begin(), v.end());
  v.erase(std::unique(v.begin(), v.end()), v.end());
}

}  // namespace

std::string ablation_recipe_name(const std::string& base, const std::string& mode, const std::string& unit) {
  return fmt::format("{}.{}-{}", base, mode, unit);
}

std::optional<AblationName> parse_ablation_recipe_name(const std::string& name) {
  // units: role names, blockN, head, and linear layers: the MLP's fcN, or dotted names
  // ("mlp.fc", "h2.mlp.fc")
  static const std::regex re(
      R"(^(.+)\.(only|without)-(fwd_x|fwd_w|dgrad_dy|dgrad_w|wgrad_x|wgrad_dy|block[0-9]+|head|fc[0-9]+|[a-z0-9_]+(?:\.[a-z0-9_]+)+)$)");
  std::smatch m;
  if (!std::regex_match(name, m, re)) return std::nullopt;
  return AblationName{m[1].str(), m[2].str(), m[3].str()};
}

std::vector<AblationVariant> ablate_roles(const Recipe& recipe, const std::vector<std::string>& units) {
  std::vector<GemmRole> chosen;
  if (units.empty()) {
    for (GemmRole g : kAllGemmRoles)
      if (below_bf16(recipe.role(g))) chosen.push_back(g);
    if (chosen.empty())
      throw std::invalid_argument(fmt::format("recipe {} quantizes no GEMM operand below BF16: nothing to ablate", recipe.name));
  } else {
    for (const std::string& u : units) {
      const GemmRole g = role_by_name(u);  // throws, listing the role names
      if (!below_bf16(recipe.role(g)))
        throw std::invalid_argument(fmt::format("recipe {} does not quantize {} (it is {}): nothing to ablate there",
                                                recipe.name, u, recipe.role(g).format_name()));
      if (std::find(chosen.begin(), chosen.end(), g) == chosen.end()) chosen.push_back(g);
    }
  }
  std::vector<AblationVariant> out;
  for (GemmRole g : chosen) {
    const std::string unit(role_name(g));
    Recipe only = recipe, without = recipe;
    for (GemmRole h : kAllGemmRoles)
      if (h != g) only.role(h) = unquantized(recipe, recipe.role(h));
    without.role(g) = unquantized(recipe, recipe.role(g));
    out.push_back({unit, "only", renamed(only, recipe.name, "only", unit)});
    out.push_back({unit, "without", renamed(without, recipe.name, "without", unit)});
  }
  return out;
}

std::vector<AblationVariant> ablate_blocks(const Recipe& recipe, int blocks, int count,
                                           const std::vector<std::string>& units) {
  require_low_precision(recipe);
  std::vector<std::string> possible;
  std::vector<int> quantized_blocks;
  for (int b = 0; b < blocks; ++b)
    if (!keeps_high_precision(recipe, LayerInfo{b, count, LayerInfo::linear, "b"})) {
      possible.push_back(fmt::format("block{}", b));
      quantized_blocks.push_back(b);
    }
  if (!recipe.high_precision.head) possible.push_back("head");
  std::vector<AblationVariant> out;
  for (const std::string& unit : choose_units(recipe, possible, units, "", [](const std::string&) { return false; })) {
    Recipe only = recipe, without = recipe;
    auto& ho = only.high_precision;
    auto& hw = without.high_precision;
    if (unit == "head") {
      ho.blocks.insert(ho.blocks.end(), quantized_blocks.begin(), quantized_blocks.end());
      hw.head = true;
    } else {
      const int b = std::stoi(unit.substr(5));
      for (int q : quantized_blocks)
        if (q != b) ho.blocks.push_back(q);
      ho.head = true;
      hw.blocks.push_back(b);
    }
    sort_unique(ho.blocks);
    sort_unique(hw.blocks);
    out.push_back({unit, "only", renamed(only, recipe.name, "only", unit)});
    out.push_back({unit, "without", renamed(without, recipe.name, "without", unit)});
  }
  return out;
}

std::vector<AblationVariant> ablate_linears(const Recipe& recipe, const std::vector<LayerInfo>& linears,
                                            const std::vector<std::string>& units) {
  require_low_precision(recipe);
  std::vector<std::string> quantized;  // full names of the linears the recipe quantizes
  std::vector<std::string> possible;   // units: names within a block, then "head"
  for (const LayerInfo& l : linears)
    if (!keeps_high_precision(recipe, l)) {
      quantized.push_back(l.name);
      const std::string u = within_block(l.name);
      if (std::find(possible.begin(), possible.end(), u) == possible.end()) possible.push_back(u);
    }
  if (!recipe.high_precision.head) possible.push_back("head");
  const auto one_layer = [&](const std::string& u) { return std::find(quantized.begin(), quantized.end(), u) != quantized.end(); };
  std::vector<AblationVariant> out;
  for (const std::string& unit : choose_units(recipe, possible, units, "a layer ", one_layer)) {
    Recipe only = recipe, without = recipe;
    auto& ho = only.high_precision;
    auto& hw = without.high_precision;
    if (unit == "head") {
      ho.layers.insert(ho.layers.end(), quantized.begin(), quantized.end());
      hw.head = true;
    } else {
      for (const std::string& q : quantized)
        if (!layer_name_matches(unit, q)) ho.layers.push_back(q);
      ho.head = true;
      hw.layers.push_back(unit);
    }
    sort_unique(ho.layers);
    sort_unique(hw.layers);
    out.push_back({unit, "only", renamed(only, recipe.name, "only", unit)});
    out.push_back({unit, "without", renamed(without, recipe.name, "without", unit)});
  }
  return out;
}

}  // namespace lpx
