// Host-side names of the rounding modes.
#include <array>
#include <stdexcept>
#include <string>

#include "lpx/numerics/rounding.hpp"

namespace lpx {

namespace {
// In enum order (numerics/rounding.hpp).
constexpr std::array<std::string_view, 10> kRoundingNames = {
    "rne", "rna", "rtz", "rup", "rdn", "sr", "rto", "sr-fast", "sr-rne", "sr-odd"};
}

std::string_view rounding_name(Rounding mode) {
  return kRoundingNames[static_cast<size_t>(mode)];
}

Rounding rounding_by_name(std::string_view name) {
  for (size_t i = 0; i < kRoundingNames.size(); ++i)
    if (kRoundingNames[i] == name) return static_cast<Rounding>(i);
  throw std::invalid_argument("unknown rounding mode '" + std::string(name) +
                              "' (expected rne, rna, rtz, rup, rdn, sr, rto, sr-fast, sr-rne "
                              "or sr-odd)");
}

}  // namespace lpx
