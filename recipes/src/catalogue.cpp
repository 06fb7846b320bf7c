// The compiled-in catalogue: parsed once, on first use.
#include <stdexcept>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "catalogue_data.hpp"
#include "lpx/recipes/recipe.hpp"

namespace lpx {

namespace {
struct Catalogue {
  std::vector<std::string_view> names;
  std::vector<Recipe> recipes;
};

const Catalogue& catalogue() {
  static const Catalogue c = [] {
    Catalogue out;
    for (size_t i = 0; i < recipes_detail::kCatalogueSize; ++i) {
      const auto& e = recipes_detail::kCatalogue[i];
      Recipe r = Recipe::from_json(std::string(e.json), fmt::format("catalogue/{}.json", e.name));
      if (r.name != e.name)
        throw std::logic_error(fmt::format("catalogue/{}.json: name is '{}'", e.name, r.name));
      out.names.push_back(e.name);
      out.recipes.push_back(std::move(r));
    }
    return out;
  }();
  return c;
}
}  // namespace

std::span<const std::string_view> recipe_names() { return catalogue().names; }

const Recipe& recipe_by_name(std::string_view name) {
  const Catalogue& c = catalogue();
  for (size_t i = 0; i < c.names.size(); ++i)
    if (c.names[i] == name) return c.recipes[i];
  std::string list;
  for (auto n : c.names) list += (list.empty() ? "" : ", ") + std::string(n);
  throw std::invalid_argument(fmt::format("unknown recipe '{}' (catalogue: {})", name, list));
}

}  // namespace lpx
