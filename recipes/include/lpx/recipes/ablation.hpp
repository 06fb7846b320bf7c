// Ablations of a recipe, for blame studies (`lpx sweep --ablate`, docs/recipes.md#ablations):
// for each unit (a GEMM role, a transformer block, a linear layer, or the output head) the recipe with only
// that unit quantized ("only") and with everything but that unit quantized ("without").
// A unit left unquantized takes the recipe's high_precision.format (bf16 or fp32) and keeps
// its transform, so the two operands of a GEMM still share one (recipe.hpp); a block or the
// head is kept through high_precision.blocks / .layers / .head.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "lpx/recipes/recipe.hpp"

namespace lpx {

struct AblationVariant {
  std::string unit;  // a role name ("dgrad_dy"), "block3", a layer ("mlp.fc", "h2.mlp.fc") or "head"
  std::string mode;  // "only" | "without"
  Recipe recipe;     // named ablation_recipe_name(base, mode, unit)
};

// Every role the recipe quantizes below BF16 (block formats and ternary), or the roles in
// `units` (names), each of which must be one. Throws std::invalid_argument (one line) for
// an unknown role, a role the recipe does not quantize, or a recipe that quantizes none.
std::vector<AblationVariant> ablate_roles(const Recipe& recipe, const std::vector<std::string>& units = {});

// The model's transformer blocks 0..blocks-1 that the recipe quantizes in a model of
// `blocks` blocks (`count` as LayerInfo counts them: blocks for a GPT, blocks + 1 for the
// MLP whose head is its last layer), and "head" when the recipe quantizes the head; or the
// units named in `units` ("block3", "head"), each of which must be one of those.
std::vector<AblationVariant> ablate_blocks(const Recipe& recipe, int blocks, int count,
                                           const std::vector<std::string>& units = {});

// Single linear layers of a model whose linear layers (the head excluded) are `linears`,
// in model order (sim::linear_layers gives a model's). The units are the quantized
// linears' names within a block ("attn.qkv": that linear in every block of a GPT; the
// MLP's layers have no block, so "fc0", "fc1", ...), and "head" when the recipe quantizes
// it; or those in `units`, which may also name one layer ("h2.mlp.fc"). A unit is kept
// through high_precision.layers. Throws std::invalid_argument as ablate_blocks does.
std::vector<AblationVariant> ablate_linears(const Recipe& recipe, const std::vector<LayerInfo>& linears,
                                            const std::vector<std::string>& units = {});

// "<base>.only-<unit>" / "<base>.without-<unit>", and back.
std::string ablation_recipe_name(const std::string& base, const std::string& mode, const std::string& unit);
struct AblationName {
  std::string base, mode, unit;
};
std::optional<AblationName> parse_ablation_recipe_name(const std::string& name);

}  // namespace lpx
