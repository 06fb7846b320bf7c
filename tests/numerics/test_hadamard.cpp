// numerics/hadamard.hpp: the fast Walsh-Hadamard transform, Philox sign vectors and the
// blocked application along either axis of a row-major matrix.
#include <catch2/catch.hpp>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <utility>
#include <vector>

#include <omp.h>

#include "lpx/numerics/hadamard.hpp"

namespace {

// H_n[i][j] = (-1)^popcount(i & j): the Sylvester matrix, computed independently.
int sylvester(int i, int j) { return (std::popcount(static_cast<unsigned>(i & j)) & 1) ? -1 : 1; }

// Column j of the normalized transform: the transform of the unit vector e_j.
template <class T>
std::vector<T> column(int n, int j) {
  std::vector<T> v(static_cast<size_t>(n), T(0));
  v[static_cast<size_t>(j)] = T(1);
  lpx::fwht(v.data(), n);
  return v;
}

}  // namespace

TEST_CASE("fwht: n = 2 and n = 4 are exact", "[hadamard]") {
  // n = 2: (a, b) -> ((a + b) / sqrt 2, (a - b) / sqrt 2)
  double v2[2] = {3.0, 1.0};
  lpx::fwht(v2, 2);
  const double r2 = 1.0 / std::sqrt(2.0);
  CHECK(v2[0] == 4.0 * r2);
  CHECK(v2[1] == 2.0 * r2);
  // n = 4: 1/sqrt(4) = 1/2 is exact, so float32 and double give the exact values.
  float v4[4] = {1.0f, 2.0f, 3.0f, 4.0f};
  lpx::fwht(v4, 4);
  // H_4 [1 2 3 4] = [10, -2, -4, 0]; halved.
  CHECK(v4[0] == 5.0f);
  CHECK(v4[1] == -1.0f);
  CHECK(v4[2] == -2.0f);
  CHECK(v4[3] == 0.0f);
  // hadamard_row with n = 16 on integers: exact butterflies, scale 1/4 exact.
  float x[16], y[16];
  for (int i = 0; i < 16; ++i) x[i] = static_cast<float>(i + 1);
  lpx::hadamard_row(x, y, 16, nullptr);
  for (int i = 0; i < 16; ++i) {
    int sum = 0;
    for (int j = 0; j < 16; ++j) sum += sylvester(i, j) * (j + 1);
    CHECK(y[i] == static_cast<float>(sum) / 4.0f);
  }
}

TEST_CASE("fwht: the matrix is the Sylvester Hadamard matrix and orthonormal", "[hadamard]") {
  for (int n : {2, 4, 8, 16, 32, 64, 128}) {
    const double scale = 1.0 / std::sqrt(static_cast<double>(n));
    std::vector<std::vector<double>> cd(static_cast<size_t>(n));
    std::vector<std::vector<float>> cf(static_cast<size_t>(n));
    for (int j = 0; j < n; ++j) {
      cd[static_cast<size_t>(j)] = column<double>(n, j);
      cf[static_cast<size_t>(j)] = column<float>(n, j);
      // Unnormalized in double: exactly +-1 entries of H_n.
      std::vector<double> u(static_cast<size_t>(n), 0.0);
      u[static_cast<size_t>(j)] = 1;
      lpx::fwht_unnormalized(u.data(), n);
      for (int i = 0; i < n; ++i) REQUIRE(u[static_cast<size_t>(i)] == sylvester(i, j));
      for (int i = 0; i < n; ++i) REQUIRE(cd[static_cast<size_t>(j)][static_cast<size_t>(i)] == sylvester(i, j) * scale);
    }
    // H H^T = I: exact in double for n a power of 4 (scale 2^-k); within float tolerance otherwise.
    const bool exact = (std::countr_zero(static_cast<unsigned>(n)) % 2) == 0;
    for (int a = 0; a < n; ++a)
      for (int b = 0; b < n; ++b) {
        double dd = 0, df = 0;
        for (int i = 0; i < n; ++i) {
          dd += cd[static_cast<size_t>(a)][static_cast<size_t>(i)] * cd[static_cast<size_t>(b)][static_cast<size_t>(i)];
          df += static_cast<double>(cf[static_cast<size_t>(a)][static_cast<size_t>(i)]) *
                cf[static_cast<size_t>(b)][static_cast<size_t>(i)];
        }
        const double want = a == b ? 1.0 : 0.0;
        if (exact)
          REQUIRE(dd == want);
        else
          REQUIRE(std::fabs(dd - want) < 1e-15);
        REQUIRE(std::fabs(df - want) < 1e-6);
      }
  }
}

TEST_CASE("fwht: it is its own inverse", "[hadamard]") {
  for (int n : {2, 8, 64, 256, 1024}) {
    std::vector<float> x(static_cast<size_t>(n)), y;
    for (int i = 0; i < n; ++i) x[static_cast<size_t>(i)] = std::sin(0.37f * static_cast<float>(i)) * 3.0f;
    y = x;
    lpx::fwht(y.data(), n);
    lpx::fwht(y.data(), n);
    for (int i = 0; i < n; ++i) CHECK(y[static_cast<size_t>(i)] == Approx(x[static_cast<size_t>(i)]).margin(1e-5));
    // Exact in double for a power of 4 on small integers.
    if (n == 64 || n == 1024) {
      std::vector<double> d(static_cast<size_t>(n));
      for (int i = 0; i < n; ++i) d[static_cast<size_t>(i)] = i % 7 - 3;
      const auto d0 = d;
      lpx::fwht(d.data(), n);
      lpx::fwht(d.data(), n);
      CHECK(d == d0);
    }
  }
  // Random Hadamard: the inverse of H D is D H, and hadamard_row twice with signs applied
  // between gives back x (up to float rounding).
  const auto s = lpx::hadamard_signs(64, 7, 3);
  std::vector<float> x(64), y(64), z(64);
  for (int i = 0; i < 64; ++i) x[static_cast<size_t>(i)] = static_cast<float>(i) * 0.25f - 5.0f;
  lpx::hadamard_row(x.data(), y.data(), 64, s.data());
  lpx::hadamard_row(y.data(), z.data(), 64, nullptr);
  for (int i = 0; i < 64; ++i) CHECK(z[static_cast<size_t>(i)] * s[static_cast<size_t>(i)] == Approx(x[static_cast<size_t>(i)]).margin(1e-5));
  CHECK_THROWS_AS(lpx::fwht(x.data(), 48), std::invalid_argument);
}

TEST_CASE("hadamard signs: deterministic, from the top Philox bit, balanced", "[hadamard]") {
  const auto a = lpx::hadamard_signs(128, 42, 5);
  const auto b = lpx::hadamard_signs(128, 42, 5);
  CHECK(a == b);
  CHECK(a != lpx::hadamard_signs(128, 43, 5));
  CHECK(a != lpx::hadamard_signs(128, 42, 6));
  // lengths that end inside a Philox block take its first words only
  for (int n : {1, 2, 6}) {
    const auto short_signs = lpx::hadamard_signs(n, 42, 5);
    REQUIRE(short_signs.size() == static_cast<size_t>(n));
    for (int j = 0; j < n; ++j) CHECK(short_signs[static_cast<size_t>(j)] == a[static_cast<size_t>(j)]);
  }
  int neg = 0;
  for (int j = 0; j < 128; ++j) {
    const bool top = (lpx::random_bits(42, 5, static_cast<uint64_t>(j)) >> 31) != 0;
    CHECK(a[static_cast<size_t>(j)] == (top ? -1.0f : 1.0f));
    neg += top ? 1 : 0;
  }
  CHECK(neg > 32);
  CHECK(neg < 96);
  // Pinned: the first 8 signs of (seed 0, stream 0), from Philox4x32-10's known answer
  // for key 0 / counter 0 (Random123 kat: 6627e8d5 e169c58d bc57ac4c 9b00dbd8).
  const auto p = lpx::hadamard_signs(4, 0, 0);
  CHECK(p == std::vector<float>{1.0f, -1.0f, -1.0f, -1.0f});
}

TEST_CASE("hadamard_blocks: along rows and columns equals hadamard_row per block", "[hadamard]") {
  const int64_t rows = 64, cols = 48;
  std::vector<float> m(static_cast<size_t>(rows * cols));
  for (size_t i = 0; i < m.size(); ++i) m[i] = std::cos(0.1f * static_cast<float>(i)) + 0.01f * static_cast<float>(i % 13);
  const auto s = lpx::hadamard_signs(16, 1, 2);
  // axis 1: blocks of 16 along each row.
  auto r = m;
  lpx::hadamard_blocks(r.data(), rows, cols, 1, 16, s);
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t c0 = 0; c0 < cols; c0 += 16) {
      float want[16];
      lpx::hadamard_row(m.data() + i * cols + c0, want, 16, s.data());
      for (int k = 0; k < 16; ++k) REQUIRE(r[static_cast<size_t>(i * cols + c0 + k)] == want[k]);
    }
  // axis 0: blocks of 32 down each column, bit-identical to the row transform of the column.
  const auto s32 = lpx::hadamard_signs(32, 1, 2);
  auto c = m;
  lpx::hadamard_blocks(c.data(), rows, cols, 0, 32, s32);
  for (int64_t j = 0; j < cols; ++j)
    for (int64_t r0 = 0; r0 < rows; r0 += 32) {
      float col[32], want[32];
      for (int k = 0; k < 32; ++k) col[k] = m[static_cast<size_t>((r0 + k) * cols + j)];
      lpx::hadamard_row(col, want, 32, s32.data());
      for (int k = 0; k < 32; ++k) REQUIRE(c[static_cast<size_t>((r0 + k) * cols + j)] == want[k]);
    }
  // Column counts that leave a partial group of lanes (down columns, hadamard_blocks
  // transforms 8 neighbouring columns at a time), more columns than one 64-column piece
  // (down columns, sizes 64 and 128 copy each piece's band into a tile), every size
  // (blocks shorter than 8 along rows take hadamard_row itself), with and without signs,
  // in place and from one array into another, values over many binades.
  for (int n : {1, 2, 4, 8, 16, 32, 64, 128}) {
    for (const auto& [nr, nc] : {std::pair<int64_t, int64_t>{n * 2, 13}, {n * 2, 150}, {11, n}, {n, 3}}) {
      INFO("n " << n << " rows " << nr << " cols " << nc);
      std::vector<float> x(static_cast<size_t>(nr * nc));
      for (size_t i = 0; i < x.size(); ++i)
        x[i] = std::ldexp(std::sin(0.37f * static_cast<float>(i)), static_cast<int>(i % 41) - 20);
      const auto sn = lpx::hadamard_signs(n, 5, 7);
      for (int axis : {0, 1}) {
        if ((axis == 0 ? nr : nc) % n != 0) continue;
        for (bool with_signs : {true, false})
          for (bool in_place : {true, false}) {
            const auto sg = with_signs ? std::span<const float>(sn) : std::span<const float>();
            auto got = x;
            if (in_place) {
              lpx::hadamard_blocks(got.data(), nr, nc, axis, n, sg);
            } else {  // from x into a different array: x must stay as it was
              std::fill(got.begin(), got.end(), 0.0f);
              const auto kept = x;
              lpx::hadamard_blocks(x.data(), got.data(), nr, nc, axis, n, sg);
              REQUIRE(x == kept);
            }
            const int64_t lines = axis == 1 ? nr : nc, len = axis == 1 ? nc : nr;
            for (int64_t a = 0; a < lines; ++a)
              for (int64_t b0 = 0; b0 < len; b0 += n) {
                float in[128], want[128];
                for (int k = 0; k < n; ++k) in[k] = x[static_cast<size_t>(axis == 1 ? a * nc + b0 + k : (b0 + k) * nc + a)];
                lpx::hadamard_row(in, want, n, with_signs ? sn.data() : nullptr);
                for (int k = 0; k < n; ++k)
                  REQUIRE(got[static_cast<size_t>(axis == 1 ? a * nc + b0 + k : (b0 + k) * nc + a)] == want[k]);
              }
          }
      }
    }
  }
  CHECK_THROWS_AS(lpx::hadamard_blocks(c.data(), rows, cols, 1, 32, s32), std::invalid_argument);  // 48 % 32
  CHECK_THROWS_AS(lpx::hadamard_blocks(c.data(), rows, cols, 1, 16, s32), std::invalid_argument);  // signs
  CHECK_THROWS_AS(lpx::hadamard_blocks(c.data(), rows, cols, 2, 16, s), std::invalid_argument);
}

TEST_CASE("hadamard_blocks: large operands split over threads give the same bits", "[hadamard]") {
  // at least 2^16 elements run in pieces over OpenMP threads; a ragged column count
  const int64_t rows = 256, cols = 520;
  std::vector<float> x(static_cast<size_t>(rows * cols));
  for (size_t i = 0; i < x.size(); ++i) x[i] = std::ldexp(std::sin(0.37f * static_cast<float>(i)), static_cast<int>(i % 29) - 14);
  const auto s = lpx::hadamard_signs(32, 3, 4);
  for (int axis : {0, 1}) {
    INFO("axis " << axis);
    const int64_t c = axis == 1 ? 512 : cols;  // along rows the extent must be a multiple of 32
    std::vector<float> base(x.begin(), x.begin() + rows * c);
    std::vector<float> one = base, two = base;
    omp_set_num_threads(1);
    lpx::hadamard_blocks(one.data(), rows, c, axis, 32, s);
    omp_set_num_threads(2);
    lpx::hadamard_blocks(two.data(), rows, c, axis, 32, s);
    REQUIRE(std::memcmp(one.data(), two.data(), one.size() * sizeof(float)) == 0);
    const int64_t lines = axis == 1 ? rows : c, len = axis == 1 ? c : rows;
    for (int64_t a = 0; a < lines; ++a)
      for (int64_t b0 = 0; b0 < len; b0 += 32) {
        float in[32], want[32];
        for (int k = 0; k < 32; ++k) in[k] = base[static_cast<size_t>(axis == 1 ? a * c + b0 + k : (b0 + k) * c + a)];
        lpx::hadamard_row(in, want, 32, s.data());
        for (int k = 0; k < 32; ++k)
          REQUIRE(std::bit_cast<uint32_t>(two[static_cast<size_t>(axis == 1 ? a * c + b0 + k : (b0 + k) * c + a)]) ==
                  std::bit_cast<uint32_t>(want[k]));
      }
  }
}

TEST_CASE("hadamard_blocks: the recipe sizes down columns, with NaN and Inf, bit for bit", "[hadamard]") {
  // Sizes 16-128 down columns keep a block's rows in registers (64 and 128 in two passes
  // of stages): several row blocks, three whole strips of 8 columns and a ragged tail,
  // values over 60 binades, and a NaN, an Inf and a -Inf that reach exactly the outputs of
  // their block's column.
  for (int n : {16, 32, 64, 128}) {
    INFO("n " << n);
    const int64_t rows = 3 * n, cols = 27;
    std::vector<float> x(static_cast<size_t>(rows * cols));
    for (size_t i = 0; i < x.size(); ++i)
      x[i] = std::ldexp(std::cos(0.61f * static_cast<float>(i)), static_cast<int>(i % 61) - 30);
    x[static_cast<size_t>(5 * cols + 3)] = std::numeric_limits<float>::quiet_NaN();
    x[static_cast<size_t>((n + 7) * cols + 12)] = std::numeric_limits<float>::infinity();
    x[static_cast<size_t>((2 * n + n - 1) * cols + 20)] = -std::numeric_limits<float>::infinity();
    const auto s = lpx::hadamard_signs(n, 9, 1);
    std::vector<float> got(x.size(), 0.0f);
    lpx::hadamard_blocks(x.data(), got.data(), rows, cols, 0, n, s);
    int64_t nans = 0;
    for (int64_t j = 0; j < cols; ++j)
      for (int64_t r0 = 0; r0 < rows; r0 += n) {
        float col[128], want[128];
        for (int k = 0; k < n; ++k) col[k] = x[static_cast<size_t>((r0 + k) * cols + j)];
        lpx::hadamard_row(col, want, n, s.data());
        for (int k = 0; k < n; ++k) {
          const float g = got[static_cast<size_t>((r0 + k) * cols + j)];
          if (std::isnan(want[k])) {  // a NaN's payload is not part of the contract
            REQUIRE(std::isnan(g));
            ++nans;
          } else {
            REQUIRE(std::bit_cast<uint32_t>(g) == std::bit_cast<uint32_t>(want[k]));
          }
        }
      }
    REQUIRE(nans == n);  // the NaN's column of its block; a lone Inf gives +-Inf, checked bitwise above
  }
}
