// Philox4x32-10 against Random123's published known-answer vectors (kat_vectors), and
// the keyed API's layout (which is cuRAND's curand_init(seed, subsequence, offset)).
#include <catch2/catch.hpp>

#include "lpx/numerics/philox.hpp"

using lpx::Philox4x32;

TEST_CASE("philox4x32_10 matches Random123's known answers") {
  struct Kat {
    Philox4x32 ctr;
    uint32_t key0, key1;
    Philox4x32 expected;
  };
  const Kat kats[] = {
      {{{0, 0, 0, 0}}, 0, 0, {{0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}}},
      {{{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff}}, 0xffffffff, 0xffffffff,
       {{0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}}},
      {{{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}}, 0xa4093822, 0x299f31d0,
       {{0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}}},
  };
  for (const Kat& k : kats) {
    const Philox4x32 out = lpx::philox4x32_10(k.ctr, k.key0, k.key1);
    for (int i = 0; i < 4; ++i) CHECK(out.v[i] == k.expected.v[i]);
  }
}

TEST_CASE("philox is usable in constant expressions") {
  constexpr Philox4x32 out = lpx::philox4x32_10(Philox4x32{{0, 0, 0, 0}}, 0, 0);
  STATIC_REQUIRE(out.v[0] == 0x6627e8d5u);
}

TEST_CASE("random_bits keys (seed, stream, index) as cuRAND's Philox state does") {
  // Element i uses counter (i/4, stream) and word i%4; the key is the 64-bit seed.
  const uint64_t seed = 0x0123456789abcdefULL;
  for (uint64_t i : {0ull, 1ull, 3ull, 4ull, 7ull, 1000001ull, (1ull << 33) + 2}) {
    const Philox4x32 block = lpx::philox4x32_10(
        Philox4x32{{static_cast<uint32_t>(i / 4), static_cast<uint32_t>((i / 4) >> 32), 5u, 0u}},
        0x89abcdefu, 0x01234567u);
    CHECK(lpx::random_bits(seed, 5, i) == block.v[i % 4]);
  }
  // Different streams and seeds give different bits.
  CHECK(lpx::random_bits(1, 0, 0) != lpx::random_bits(1, 1, 0));
  CHECK(lpx::random_bits(1, 0, 0) != lpx::random_bits(2, 0, 0));
}

TEST_CASE("random bits are uniform enough: bit balance over 2^20 draws") {
  int64_t ones[32] = {};
  const int n = 1 << 20;
  for (int i = 0; i < n; ++i) {
    const uint32_t r = lpx::random_bits(42, 0, static_cast<uint64_t>(i));
    for (int b = 0; b < 32; ++b) ones[b] += (r >> b) & 1;
  }
  // Each bit: mean n/2, sd sqrt(n)/2 = 512; 6 sd is a loose, failing-when-broken bound.
  for (int b = 0; b < 32; ++b) CHECK(std::abs(ones[b] - n / 2) < 6 * 512);
}
