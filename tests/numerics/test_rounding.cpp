// The rounding primitive on integer significands: every mode's tie and direction rule.
#include <catch2/catch.hpp>

#include "lpx/numerics/rounding.hpp"

using lpx::Rounding;
using lpx::round_shift_right;

TEST_CASE("round_shift_right: nearest modes at and around ties") {
  // 0b1010.1 (ties between 10 and 11), shift 1
  CHECK(round_shift_right(0b10101, 1, Rounding::rne, false, 0) == 0b1010);
  CHECK(round_shift_right(0b10111, 1, Rounding::rne, false, 0) == 0b1100);
  CHECK(round_shift_right(0b10101, 1, Rounding::rna, false, 0) == 0b1011);
  CHECK(round_shift_right(0b101011, 2, Rounding::rne, false, 0) == 0b1011);  // .11 > half
  CHECK(round_shift_right(0b101001, 2, Rounding::rne, false, 0) == 0b1010);  // .01 < half
}

TEST_CASE("round_shift_right: directed modes depend on the sign") {
  CHECK(round_shift_right(0b1001, 2, Rounding::rtz, false, 0) == 0b10);
  CHECK(round_shift_right(0b1001, 2, Rounding::rup, false, 0) == 0b11);
  CHECK(round_shift_right(0b1001, 2, Rounding::rup, true, 0) == 0b10);
  CHECK(round_shift_right(0b1001, 2, Rounding::rdn, true, 0) == 0b11);
  CHECK(round_shift_right(0b1000, 2, Rounding::rup, false, 0) == 0b10);  // exact stays
}

TEST_CASE("round_shift_right: stochastic rounding thresholds") {
  // rem = 1 of a gap of 4 (shift 2): up iff top-32 fraction (1/4 * 2^32) + r >= 2^32.
  CHECK(round_shift_right(0b1001, 2, Rounding::sr, false, 0xBFFFFFFFu) == 0b10);
  CHECK(round_shift_right(0b1001, 2, Rounding::sr, false, 0xC0000000u) == 0b11);
  // Exact values never move.
  CHECK(round_shift_right(0b1000, 2, Rounding::sr, false, 0xFFFFFFFFu) == 0b10);
  // With 1 random bit, a fraction of 1/4 truncates to 0: never rounds up.
  CHECK(round_shift_right(0b1001, 2, Rounding::sr, false, 0xFFFFFFFFu, 1) == 0b10);
  // ... and 3/4 truncates to 1/2: rounds up iff the top bit is set.
  CHECK(round_shift_right(0b1011, 2, Rounding::sr, false, 0x80000000u, 1) == 0b11);
  CHECK(round_shift_right(0b1011, 2, Rounding::sr, false, 0x7FFFFFFFu, 1) == 0b10);
}

TEST_CASE("rounding names round-trip and reject unknown names") {
  for (auto m : {Rounding::rne, Rounding::rna, Rounding::rtz, Rounding::rup, Rounding::rdn,
                 Rounding::sr})
    CHECK(lpx::rounding_by_name(lpx::rounding_name(m)) == m);
  CHECK_THROWS_WITH(lpx::rounding_by_name("nearest"), Catch::Contains("rne, rna"));
}

TEST_CASE("round_shift_right: round to odd and the stochastic variants by hand") {
  // rto: truncate, then an inexact result gets its lowest bit set.
  CHECK(round_shift_right(0b1000, 2, Rounding::rto, false, 0) == 0b10);  // exact stays even
  CHECK(round_shift_right(0b1001, 2, Rounding::rto, false, 0) == 0b11);
  CHECK(round_shift_right(0b1011, 2, Rounding::rto, true, 0) == 0b11);
  CHECK(round_shift_right(0b1101, 2, Rounding::rto, false, 0) == 0b11);  // already odd
  // delta = 1/4 (rem 1 of a gap of 4), N = 1 (r = the word's top bit).
  const uint32_t r0 = 0, r1 = 0x80000000u;
  CHECK(round_shift_right(0b1001, 2, Rounding::sr, false, r1, 1) == 0b10);       // 0 + 1 < 2
  CHECK(round_shift_right(0b1001, 2, Rounding::sr_fast, false, r1, 1) == 0b11);  // 1 + 2 + 1 >= 4
  CHECK(round_shift_right(0b1001, 2, Rounding::sr_fast, false, r0, 1) == 0b10);  // 1 + 0 + 1 < 4
  CHECK(round_shift_right(0b1001, 2, Rounding::sr_rne, false, r1, 1) == 0b10);   // 0.5 -> 0
  CHECK(round_shift_right(0b1001, 2, Rounding::sr_odd, false, r1, 1) == 0b11);   // 0.5 -> 1
  CHECK(round_shift_right(0b1001, 2, Rounding::sr_odd, false, r0, 1) == 0b10);
  // delta = 3/4, N = 1: d = 1.5.
  CHECK(round_shift_right(0b1011, 2, Rounding::sr_rne, false, r0, 1) == 0b11);  // 1.5 -> 2
  CHECK(round_shift_right(0b1011, 2, Rounding::sr_odd, false, r0, 1) == 0b10);  // 1.5 -> 1
  CHECK(round_shift_right(0b1011, 2, Rounding::sr_odd, false, r1, 1) == 0b11);
  CHECK(round_shift_right(0b1011, 2, Rounding::sr, false, r0, 1) == 0b10);
  CHECK(round_shift_right(0b1011, 2, Rounding::sr_fast, false, r0, 1) == 0b11);  // 3 + 0 + 1 >= 4
  // N = 32 and shift 40: sr-fast's sum needs 34 bits.
  const uint64_t sig = (uint64_t{5} << 40) | (uint64_t{1} << 39);  // delta = 1/2
  CHECK(round_shift_right(sig, 40, Rounding::sr_fast, false, 0x7FFFFFFFu, 32) == 5);
  CHECK(round_shift_right(sig, 40, Rounding::sr_fast, false, 0x80000000u, 32) == 6);
  // Exact values never move.
  for (const Rounding m : {Rounding::rto, Rounding::sr_fast, Rounding::sr_rne, Rounding::sr_odd})
    CHECK(round_shift_right(0b1100, 2, m, false, 0xFFFFFFFFu, 3) == 0b11u);
  CHECK(lpx::rounding_by_name("sr-fast") == Rounding::sr_fast);
  CHECK(lpx::rounding_name(Rounding::sr_odd) == "sr-odd");
  CHECK(lpx::is_stochastic(Rounding::sr_rne));
  CHECK_FALSE(lpx::is_stochastic(Rounding::rto));
}
