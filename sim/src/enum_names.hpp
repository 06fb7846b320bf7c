// sim-internal: the names of a small enum whose values are 0..N-1, as one table that
// serves both directions (value -> name, name -> value).
#pragma once

#include <array>
#include <cstddef>
#include <optional>
#include <string_view>

namespace lpx::sim {

template <class E, size_t N>
struct EnumNames {
  std::array<std::string_view, N> names;  // names[i] is the name of E(i)

  std::string_view operator()(E e) const {
    const auto i = static_cast<size_t>(e);
    return i < N ? names[i] : std::string_view("?");
  }
  std::optional<E> find(std::string_view name) const {
    for (size_t i = 0; i < N; ++i)
      if (names[i] == name) return static_cast<E>(i);
    return std::nullopt;
  }
};

}  // namespace lpx::sim
