// Bit packing of element codes (one code per byte, right-aligned, as quantize() and the
// element casts produce them) into dense byte streams, and back.
//
// Layouts (little-endian throughout; a tail that does not fill a group is padded with
// zero bits):
//   1..4 bits  two codes per byte, low nibble first: code 2i in bits 0-3 and code 2i+1 in
//              bits 4-7 of byte i (the order of OCP MX FP4 and of NVIDIA's packed
//              e2m1x2: the first element in the low nibble). Codes under 4 bits keep
//              their nibble's high bits zero.
//   5..6 bits  four codes per three bytes: code j (0..3) of group g occupies bits
//              6j..6j+5 of the little-endian 24-bit word made of bytes 3g, 3g+1, 3g+2
//              (codes under 6 bits keep their field's high bits zero).
//   7..8 bits  one code per byte (a plain copy).
// So the packed size of n codes is ceil(n/2), 3*ceil(n/4) (4 codes -> 3 bytes, a
// partial group still takes 3 bytes) and n bytes respectively.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

namespace lpx {

enum class Packing : uint8_t { nibble, six_bit, byte };

// The packing used for codes of `bits` bits (1..8); std::invalid_argument otherwise.
Packing packing_for_bits(int bits);
std::string_view packing_name(Packing p);  // "fp4_nibbles_low_first", "fp6_4in3_le", "u8"
size_t packed_size(size_t n, Packing p);

// Codes must fit the packing's field (4 or 6 bits): std::invalid_argument otherwise.
std::vector<uint8_t> pack(std::span<const uint8_t> codes, Packing p);
// Unpacks `n` codes; `packed` must hold exactly packed_size(n, p) bytes
// (std::invalid_argument otherwise). Padding bits are ignored.
std::vector<uint8_t> unpack(std::span<const uint8_t> packed, size_t n, Packing p);

}  // namespace lpx
