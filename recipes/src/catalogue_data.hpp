// The catalogue JSON texts, compiled in from recipes/catalogue/*.json by
// recipes/CMakeLists.txt (catalogue_data.cpp in the build folder).
#pragma once

#include <cstddef>
#include <string_view>

namespace lpx::recipes_detail {
struct CatalogueEntry {
  std::string_view name;
  std::string_view json;
};
extern const CatalogueEntry kCatalogue[];
extern const size_t kCatalogueSize;
}  // namespace lpx::recipes_detail
