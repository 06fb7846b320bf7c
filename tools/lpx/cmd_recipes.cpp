// `lpx recipes`                 the catalogue: name, summary, formats/rounding/transform per role, source
// `lpx recipes show NAME|FILE`  the recipe as canonical JSON
// `lpx recipes check FILE`      validates a recipe file; exit 2 with the key path on error
#include <memory>
#include <string>

#include <fmt/format.h>

#include "command.hpp"
#include "lpx/recipes/recipe.hpp"

namespace lpx::cli {
namespace {

void list_recipes() {
  for (std::string_view name : recipe_names()) {
    const Recipe& r = recipe_by_name(name);
    fmt::print("{:<14} {}\n", r.name, r.summary);
    fmt::print("{:<14} roles: {}\n", "", r.describe());
    std::string kept;
    const auto& hp = r.high_precision;
    if (hp.first_fraction) kept += fmt::format("first {:.3g} of the blocks, ", *hp.first_fraction);
    else if (hp.first_blocks) kept += fmt::format("first {} blocks, ", hp.first_blocks);
    if (hp.last_fraction) kept += fmt::format("last {:.3g} of the blocks, ", *hp.last_fraction);
    else if (hp.last_blocks) kept += fmt::format("last {} blocks, ", hp.last_blocks);
    for (int b : hp.blocks) kept += fmt::format("block {}, ", b);
    if (hp.embeddings) kept += "embeddings, ";
    if (hp.head) kept += "head, ";
    if (hp.attention) kept += "attention, ";
    std::string extra = fmt::format("master {}, optimizer state {}", master_weights_name(r.master_weights),
                                    optimizer_state_name(r.optimizer_state));
    if (r.accumulation.limited)
      extra += fmt::format(", accumulation {} mantissa bits promoted every {}{}", r.accumulation.mantissa_bits,
                           r.accumulation.promote_every,
                           r.accumulation.scales_at_promotion ? ", scales at promotion" : "");
    if (!kept.empty()) extra += fmt::format("; kept {}: {}", hp.format == RoleSpec::Kind::fp32 ? "fp32" : "bf16",
                                            kept.substr(0, kept.size() - 2));
    fmt::print("{:<14} {}\n", "", extra);
    fmt::print("{:<14} source: {}\n\n", "", r.source);
  }
}

struct RecipesArgs {
  std::string target;
};

const bool registered = register_command(80, [](CLI::App& app) {
  auto* cmd = app.add_subcommand("recipes", "The recipe catalogue (docs/recipes.md); show or check a recipe");
  auto args = std::make_shared<RecipesArgs>();
  auto* show = cmd->add_subcommand("show", "Print a recipe (catalogue NAME or a .json FILE) as canonical JSON");
  show->add_option("recipe", args->target, "catalogue name or recipe file")->required();
  auto* check = cmd->add_subcommand("check", "Validate a recipe file; errors name the key path (exit 2)");
  check->add_option("file", args->target, "recipe file")->required();
  cmd->require_subcommand(0, 1);
  cmd->callback([show, check, args] {
    if (show->parsed()) {
      fmt::print("{}", load_recipe(args->target).to_json());
    } else if (check->parsed()) {
      const Recipe r = load_recipe(args->target);
      fmt::print("{}: ok (recipe '{}')\n", args->target, r.name);
    } else {
      list_recipes();
    }
  });
});

}  // namespace
}  // namespace lpx::cli
