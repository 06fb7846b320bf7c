// The per-operand statistics loops (recipes/src/operand_stats.hpp): the AVX-512 loop against
// the portable one bit for bit, and both against the statistics written out by hand.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "operand_stats.hpp"

using namespace lpx;

namespace {

// v: normal values, every 5th far smaller, exact zeros, NaN and +-Inf (every 11th and 13th
// element, or with rare_nonfinite every 397th and 401st: most groups of 16 then hold none,
// the AVX-512 loop's common case); q: v with a relative error, flushed to zero at every
// 7th element, and at every 29th a tiny v beside a q far above it (stochastic rounding can
// do that: q - v then needs more than 26 bits, so its square is not exact in double, and a
// fused multiply-add would round the sum differently); with_inf: q turned into +-Inf at
// every 17th element and the last but one (beside finite v and beside Inf and NaN v), and
// into NaN where v is Inf or NaN at every 23rd.
void make_operand(int64_t n, uint32_t seed, bool with_inf, std::vector<float>& v, std::vector<float>& q,
                  bool rare_nonfinite = false) {
  const int64_t nan_every = rare_nonfinite ? 397 : 11, inf_every = rare_nonfinite ? 401 : 13;
  std::mt19937 gen(seed);
  std::normal_distribution<float> normal;
  v.resize(static_cast<size_t>(n));
  q.resize(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    const size_t k = static_cast<size_t>(i);
    v[k] = normal(gen) * (i % 5 ? 3.0f : 3e-3f);
    q[k] = i % 7 == 0 ? 0.0f : v[k] * (1.0f + 0.01f * normal(gen));
    if (i % nan_every == 3) v[k] = std::numeric_limits<float>::quiet_NaN();
    if (i % inf_every == 4) v[k] = i % 2 ? std::numeric_limits<float>::infinity() : -std::numeric_limits<float>::infinity();
    if (i % 19 == 6) v[k] = 0.0f;
    if (i % 29 == 8) {
      v[k] = normal(gen) * 1e-4f;
      q[k] = 3.0f;
    }
  }
  if (!with_inf) return;
  for (int64_t i = 0; i < n; i += 17)
    q[static_cast<size_t>(i)] = (i % 2 ? -1 : 1) * std::numeric_limits<float>::infinity();
  for (int64_t i = 0; i < n; i += 23)
    if (!std::isfinite(v[static_cast<size_t>(i)])) q[static_cast<size_t>(i)] = std::numeric_limits<float>::quiet_NaN();
  if (n > 2) q[static_cast<size_t>(n - 2)] = std::numeric_limits<float>::infinity();
}

// The count error_stats returns, written out by hand: finite v, q Inf or NaN.
int64_t overflowed_by_hand(const std::vector<float>& v, const std::vector<float>& q) {
  int64_t count = 0;
  for (size_t i = 0; i < v.size(); ++i) count += std::isfinite(v[i]) && !std::isfinite(q[i]);
  return count;
}

bool same_bits(const OperandStats& a, const OperandStats& b) {
  return a.elements == b.elements && std::memcmp(&a.amax, &b.amax, sizeof a.amax) == 0 &&
         std::memcmp(&a.sqnr_db, &b.sqnr_db, sizeof a.sqnr_db) == 0 &&
         std::memcmp(&a.flushed_pct, &b.flushed_pct, sizeof a.flushed_pct) == 0;
}

}  // namespace

TEST_CASE("error_stats: the AVX-512 loop gives the portable loop's bits", "[recipes]") {
  std::vector<float> v, q;
  OperandStats probe;
  int64_t probe_count = 0;
  if (!detail::error_stats_avx512(nullptr, nullptr, 0, probe, probe_count)) {
    WARN("skipped: no AVX-512F on this CPU (the portable loop is the only one that runs)");
    return;
  }
  // every length from 0 to 48 (partial groups of 8 and 16 at the end), and longer runs
  std::vector<int64_t> lengths;
  for (int64_t n = 0; n <= 48; ++n) lengths.push_back(n);
  for (int64_t n : {1003, 4096, 65537, 1000003}) lengths.push_back(n);
  for (int64_t n : lengths)
    for (bool with_inf : {false, true})
      for (bool rare : {false, true}) {
        make_operand(n, static_cast<uint32_t>(n) * 2 + with_inf, with_inf, v, q, rare);
        OperandStats a, b;
        int64_t overflowed = -1;
        const int64_t by_hand = overflowed_by_hand(v, q);
        CHECK(detail::error_stats_portable(v.data(), q.data(), n, a) == by_hand);
        REQUIRE(detail::error_stats_avx512(v.data(), q.data(), n, b, overflowed));
        INFO("n = " << n << ", q with Inf: " << with_inf << ", rare non-finite: " << rare << ", SQNR "
                    << a.sqnr_db << " and " << b.sqnr_db);
        CHECK(same_bits(a, b));
        CHECK(overflowed == by_hand);
      }
}

TEST_CASE("error_stats: amax, SQNR and flushed share as written out by hand, on either loop", "[recipes]") {
  std::vector<float> v, q;
  const int64_t n = 100003;
  OperandStats st;
  for (bool rare : {false, true}) {
    INFO("rare non-finite v: " << rare);
    make_operand(n, 7, false, v, q, rare);
    double signal = 0, noise = 0;
    float amax = 0;
    int64_t nonzero = 0, flushed = 0;
    for (size_t i = 0; i < v.size(); ++i) {
      if (!std::isfinite(v[i])) continue;
      amax = std::max(amax, std::fabs(v[i]));
      signal += static_cast<double>(v[i]) * v[i];
      noise += (static_cast<double>(q[i]) - v[i]) * (static_cast<double>(q[i]) - v[i]);
      nonzero += v[i] != 0;
      flushed += v[i] != 0 && q[i] == 0;
    }
    REQUIRE(flushed > 0);
    CHECK(detail::error_stats(v.data(), q.data(), n, st) == 0);  // the loop this CPU runs
    CHECK(st.elements == n);
    CHECK(st.amax == amax);
    CHECK(st.sqnr_db == Approx(10 * std::log10(signal / noise)).epsilon(1e-12));
    CHECK(st.flushed_pct == Approx(100.0 * static_cast<double>(flushed) / static_cast<double>(nonzero)).epsilon(1e-15));
    OperandStats portable;
    detail::error_stats_portable(v.data(), q.data(), n, portable);
    CHECK(same_bits(st, portable));
  }
  // a q that overflowed beside a finite v makes the noise infinite, and is counted
  make_operand(n, 7, true, v, q);
  const int64_t by_hand = overflowed_by_hand(v, q);
  REQUIRE(by_hand > 1000);
  CHECK(detail::error_stats(v.data(), q.data(), n, st) == by_hand);
  CHECK(st.sqnr_db == -std::numeric_limits<double>::infinity());
  // a NaN q beside a finite v counts too (and leaves no SQNR), on either loop
  const std::vector<float> x = {1.0f, 2.0f, std::numeric_limits<float>::quiet_NaN(), 4.0f},
                           y = {1.0f, std::numeric_limits<float>::quiet_NaN(), 0.0f, std::numeric_limits<float>::infinity()};
  CHECK(detail::error_stats(x.data(), y.data(), 4, st) == 2);
  CHECK(std::isnan(st.sqnr_db));
  CHECK(detail::error_stats_portable(x.data(), y.data(), 4, st) == 2);
}
