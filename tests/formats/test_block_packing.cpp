// Packing of element codes (packing.hpp): pinned byte layouts, and pack/unpack round trips
// for 4-, 6- and 8-bit codes of odd lengths.
#include <catch2/catch.hpp>

#include <cstdint>
#include <random>
#include <vector>

#include "lpx/formats/packing.hpp"

TEST_CASE("FP4: two codes per byte, low nibble first, odd tail padded with zero") {
  const std::vector<uint8_t> codes = {0x1, 0x2, 0x3, 0xF, 0x7};
  const auto p = lpx::pack(codes, lpx::Packing::nibble);
  CHECK(p == std::vector<uint8_t>{0x21, 0xF3, 0x07});
  CHECK(lpx::unpack(p, 5, lpx::Packing::nibble) == codes);
}

TEST_CASE("FP6: code j of a group at bits 6j..6j+5 of the little-endian 24-bit word") {
  const std::vector<uint8_t> codes = {0x01, 0x02, 0x03, 0x3F, 0x05};
  // word = 1 | 2 << 6 | 3 << 12 | 63 << 18 = 0xFC3081
  const auto p = lpx::pack(codes, lpx::Packing::six_bit);
  CHECK(p == std::vector<uint8_t>{0x81, 0x30, 0xFC, 0x05, 0x00, 0x00});
  CHECK(lpx::unpack(p, 5, lpx::Packing::six_bit) == codes);
}

TEST_CASE("pack/unpack round trip for 4, 6 and 8 bits, odd lengths") {
  std::mt19937 g(7);
  for (int bits : {1, 2, 3, 4, 5, 6, 7, 8}) {
    const lpx::Packing p = lpx::packing_for_bits(bits);
    for (size_t n : {size_t{0}, size_t{1}, size_t{2}, size_t{3}, size_t{5}, size_t{7},
                     size_t{33}, size_t{1001}}) {
      std::vector<uint8_t> codes(n);
      for (auto& c : codes) c = static_cast<uint8_t>(g() & ((1u << bits) - 1));
      const auto packed = lpx::pack(codes, p);
      CHECK(packed.size() == lpx::packed_size(n, p));
      CHECK(lpx::unpack(packed, n, p) == codes);
    }
  }
  CHECK(lpx::packed_size(5, lpx::Packing::six_bit) == 6);
  CHECK(lpx::packed_size(5, lpx::Packing::nibble) == 3);
}

TEST_CASE("packing errors") {
  CHECK_THROWS_AS(lpx::packing_for_bits(9), std::invalid_argument);
  CHECK_THROWS_AS(lpx::pack(std::vector<uint8_t>{16}, lpx::Packing::nibble), std::invalid_argument);
  CHECK_THROWS_AS(lpx::pack(std::vector<uint8_t>{64}, lpx::Packing::six_bit), std::invalid_argument);
  CHECK_THROWS_AS(lpx::unpack(std::vector<uint8_t>{1, 2}, 5, lpx::Packing::nibble),
                  std::invalid_argument);
}
