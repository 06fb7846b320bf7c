// Bit packing of element codes (packing.hpp).
#include "lpx/formats/packing.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace lpx {

Packing packing_for_bits(int bits) {
  if (bits >= 1 && bits <= 4) return Packing::nibble;
  if (bits >= 5 && bits <= 6) return Packing::six_bit;
  if (bits >= 7 && bits <= 8) return Packing::byte;
  throw std::invalid_argument("packing: codes of " + std::to_string(bits) +
                              " bits cannot be packed (1 to 8 bits)");
}

std::string_view packing_name(Packing p) {
  switch (p) {
    case Packing::nibble: return "fp4_nibbles_low_first";
    case Packing::six_bit: return "fp6_4in3_le";
    case Packing::byte: return "u8";
  }
  return "";
}

size_t packed_size(size_t n, Packing p) {
  switch (p) {
    case Packing::nibble: return (n + 1) / 2;
    case Packing::six_bit: return 3 * ((n + 3) / 4);
    case Packing::byte: return n;
  }
  return 0;
}

std::vector<uint8_t> pack(std::span<const uint8_t> codes, Packing p) {
  const size_t n = codes.size();
  if (p == Packing::byte) return {codes.begin(), codes.end()};
  const unsigned limit = p == Packing::nibble ? 16u : 64u;
  // The largest code first, in a loop without an early exit (it vectorizes); the scan for
  // the offending index runs only when there is one.
  uint8_t largest = 0;
  for (size_t i = 0; i < n; ++i) largest = std::max(largest, codes[i]);
  if (largest >= limit) {
    const size_t i = static_cast<size_t>(
        std::find_if(codes.begin(), codes.end(), [&](uint8_t c) { return c >= limit; }) - codes.begin());
    throw std::invalid_argument("pack: code " + std::to_string(codes[i]) + " at index " +
                                std::to_string(i) + " does not fit " + std::string(packing_name(p)));
  }
  std::vector<uint8_t> out(packed_size(n, p));
  switch (p) {
    case Packing::nibble:
      // Each byte written once: code 2k in the low nibble, code 2k + 1 in the high one.
      for (size_t k = 0; k < n / 2; ++k)
        out[k] = static_cast<uint8_t>(codes[2 * k] | (codes[2 * k + 1] << 4));
      if (n % 2 != 0) out[n / 2] = codes[n - 1];
      break;
    case Packing::six_bit:
      for (size_t g = 0; g < (n + 3) / 4; ++g) {
        uint32_t word = 0;
        for (size_t j = 0; j < 4 && 4 * g + j < n; ++j)
          word |= static_cast<uint32_t>(codes[4 * g + j]) << (6 * j);
        out[3 * g] = static_cast<uint8_t>(word);
        out[3 * g + 1] = static_cast<uint8_t>(word >> 8);
        out[3 * g + 2] = static_cast<uint8_t>(word >> 16);
      }
      break;
    case Packing::byte: break;  // returned above
  }
  return out;
}

std::vector<uint8_t> unpack(std::span<const uint8_t> packed, size_t n, Packing p) {
  if (packed.size() != packed_size(n, p))
    throw std::invalid_argument("unpack: " + std::to_string(packed.size()) + " bytes for " +
                                std::to_string(n) + " codes; " + std::string(packing_name(p)) +
                                " needs " + std::to_string(packed_size(n, p)));
  std::vector<uint8_t> out(n);
  switch (p) {
    case Packing::nibble:
      for (size_t i = 0; i < n; ++i) out[i] = static_cast<uint8_t>((packed[i / 2] >> (4 * (i % 2))) & 0xF);
      break;
    case Packing::six_bit:
      for (size_t i = 0; i < n; ++i) {
        const size_t g = i / 4;
        const uint32_t word = packed[3 * g] | (static_cast<uint32_t>(packed[3 * g + 1]) << 8) |
                              (static_cast<uint32_t>(packed[3 * g + 2]) << 16);
        out[i] = static_cast<uint8_t>((word >> (6 * (i % 4))) & 0x3F);
      }
      break;
    case Packing::byte: out.assign(packed.begin(), packed.end()); break;
  }
  return out;
}

}  // namespace lpx
