// The random Hadamard transform: the CPU reference against the definition
// (1/sqrt(n)) H diag(s) x with H[i][j] = (-1)^popcount(i & j), its orthogonality, the
// argument checks, and on a device the kernel against the reference bit for bit.
#include <catch2/catch.hpp>

#include <bit>
#include <cmath>
#include <stdexcept>
#include <vector>

#include "lpx/kernels/device.hpp"
#include "lpx/kernels/hadamard.hpp"
#include "lpx/numerics/float_bits.hpp"
#include "lpx/numerics/philox.hpp"

using namespace lpx;

namespace {
std::vector<float> rows_of(size_t rows, int n) {
  std::vector<float> x(rows * static_cast<size_t>(n));
  for (size_t i = 0; i < x.size(); ++i)
    x[i] = static_cast<float>(static_cast<int32_t>(random_bits(1, 2, i))) * 0x1p-28f;
  return x;
}
}  // namespace

TEST_CASE("CPU Hadamard equals the O(n^2) definition and is orthonormal") {
  for (int n : {16, 32, 64, 128}) {
    INFO("n = " << n);
    const auto x = rows_of(3, n);
    const auto s = kernels::hadamard_signs(n, 42, 0);
    std::vector<float> y(x.size()), back(x.size());
    kernels::hadamard_cpu(x, y, n, s);
    for (size_t r = 0; r < 3; ++r)
      for (int i = 0; i < n; ++i) {
        double acc = 0;
        for (int j = 0; j < n; ++j)
          acc += (std::popcount(static_cast<unsigned>(i & j)) % 2 ? -1.0 : 1.0) * s[static_cast<size_t>(j)] *
                 x[r * static_cast<size_t>(n) + static_cast<size_t>(j)];
        acc /= std::sqrt(static_cast<double>(n));
        CHECK(std::abs(y[r * static_cast<size_t>(n) + static_cast<size_t>(i)] - acc) <= 1e-6 * (1 + std::abs(acc)));
      }
    // H is symmetric and orthonormal: H (H diag(s) x) = diag(s) x, so undo the signs.
    kernels::hadamard_cpu(y, back, n, {});
    for (size_t i = 0; i < x.size(); ++i)
      CHECK(std::abs(back[i] * s[i % static_cast<size_t>(n)] - x[i]) <= 1e-5f * (1 + std::abs(x[i])));
  }
}

TEST_CASE("Hadamard arguments are checked before any CUDA call") {
  std::vector<float> x(64), y(64);
  CHECK_THROWS_AS(kernels::hadamard_cpu(x, y, 8, {}), std::invalid_argument);
  CHECK_THROWS_AS(kernels::hadamard_cpu(std::span<const float>(x).first(40), std::span<float>(y).first(40), 16, {}),
                  std::invalid_argument);
  CHECK_THROWS_AS(kernels::hadamard_host(x, y, 256, {}, 0, 0), std::invalid_argument);
  CHECK_THROWS_AS(kernels::hadamard_host(x, y, 32, std::vector<float>(16, 1.0f), 0, 0), std::invalid_argument);
  CHECK_THROWS_AS(kernels::hadamard_device(nullptr, y.data(), 2, 32, nullptr, 0, 0), std::invalid_argument);
  CHECK_THROWS_AS(kernels::hadamard_device(x.data(), y.data(), 2, 48, nullptr, 0, 0), std::invalid_argument);
  if (!kernels::cuda_available())
    CHECK_THROWS_AS(kernels::hadamard_host(x, y, 32, {}, 0, 0), std::runtime_error);
}

TEST_CASE("device Hadamard equals the CPU reference bit for bit") {
  if (!kernels::cuda_available()) {
    WARN("skipped: no CUDA device (" << kernels::device_description() << ")");
    return;
  }
  for (int n : {16, 32, 64, 128}) {
    INFO("n = " << n);
    const auto x = rows_of(1001, n);
    std::vector<float> cpu(x.size()), dev(x.size());
    const auto s = kernels::hadamard_signs(n, 9, 4);
    kernels::hadamard_cpu(x, cpu, n, s);
    kernels::hadamard_host(x, dev, n, {}, 9, 4);  // Philox signs drawn on the device
    size_t bad = 0;
    for (size_t i = 0; i < x.size(); ++i) bad += float_to_bits(cpu[i]) != float_to_bits(dev[i]);
    CHECK(bad == 0);
    kernels::hadamard_host(x, dev, n, s, 0, 0);  // given signs
    bad = 0;
    for (size_t i = 0; i < x.size(); ++i) bad += float_to_bits(cpu[i]) != float_to_bits(dev[i]);
    CHECK(bad == 0);
  }
}
