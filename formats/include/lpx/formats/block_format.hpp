// Block (scaled) formats: an element format + a block shape + a scale format + a scale
// rule. MXFP8/6/4 and MXINT8 (OCP Microscaling Formats v1.0), NVFP4 (NVIDIA 2025), per-
// tensor FP8 (current and delayed scaling), DeepSeek-V3's 1x128 / 128x128 FP32-scaled
// blocks and 2-D 16x16 tiles are all values of one descriptor (docs/formats.md#block-formats):
// block size, axis and rule are parameters, never new code paths.
//
// Spec grammar (parse_block_format; names are case-sensitive, parts separated by ':'):
//
//   spec    := PRESET
//            | ELEMENT ':' BLOCK [':' SCALE [':' RULE]]
//   ELEMENT := any name format_by_name() accepts (e2m1, e4m3, float8_e5m2, mxint8, int4,
//              generic eXmY such as e1m2, e2m0, ...) of at most 8 bits that has a zero
//   BLOCK   := 'b' N        1xN blocks along the block axis (default the last), N >= 1
//            | R 'x' C      2-D tiles over the last two axes: R rows (axis -2) by C
//                           columns (axis -1); a 1-D tensor is one row
//            | 'row' | 'channel'   one block per line along the block axis (per-row
//                           scaling for axis -1, per-channel for axis 0)
//            | 'tensor'     one block holding the whole tensor (per-tensor scaling)
//   SCALE   := 'e8m0'       (default) unsigned power of two 2^-127..2^127, NaN = 0xFF
//            | 'pow2'       a power of two stored as float32, same rules as e8m0
//            | 'fp32'       float32 scale s_enc = max_elem / amax (Transformer Engine's
//                           current scaling); stored as the decode scale 1/s_enc
//            | 'e4m3'       NVFP4's two-level scale: E4M3 per block, FP32 per tensor
//   RULE    := 'floor' | 'rceil' | 'ceil' | 'even'   power-of-two scales only (e8m0,
//              pow2); default floor for e8m0 (OCP MX v1.0), rceil for pow2 (TE's
//              power-of-two scales, which never saturate). A RULE after fp32 or e4m3 is
//              an error: those scales are not powers of two.
//   PRESET  := mxfp8_e4m3 | mxfp8_e5m2 | mxfp6_e3m2 | mxfp6_e2m3 | mxfp4 | mxint8
//              (ELEMENT:b32:e8m0:floor) | nvfp4 (e2m1:b16:e4m3) | nvfp4_2d
//              (e2m1:16x16:e4m3) | fp8_tensor (e4m3:tensor:fp32) | fp8_block128
//              (e4m3:b128:fp32) | fp8_block128x128 (e4m3:128x128:fp32)
//
// Examples: `e2m1:b32:e8m0:rceil`, `e1m2:b16:e4m3`, `e2m0:16x16:e8m0`, `e4m3:tensor:fp32`,
// `e4m3:b128:pow2`. Any unknown or malformed part throws std::invalid_argument naming
// the part and the allowed values. The block axis is not part of the spec: it is
// BlockShape::axis (the CLI's --axis), default -1.
//
// Scale rules (power-of-two scales; amax = largest |x| of the block, emax = the element's
// largest exponent, max_elem its largest finite value). All four are computed from the
// float32 bits of amax with integer operations, so they are exact (no log2f):
//   floor  X = floor(log2 amax) - emax                    OCP MX v1.0 section 6.3
//   rceil  X = ceil(log2(amax / max_elem))                NVIDIA MXFP8 recipe, TE, cuBLAS
//   ceil   X = ceil(log2 amax) - emax                     torchao CEIL
//   even   X = floor(log2 round(amax)) - emax, where round() rounds amax to the element's
//          mantissa width by adding 2^(22 - mbits) to its float32 bits and clearing the
//          mantissa (torchao EVEN, AMD Quark); mbits = bits - 2 for integer elements
//          (MXINT8: 6, the fraction bits after the leading one).
// The block is then quantized as element = encode(x * 2^-X) (see quantize.hpp).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "lpx/formats/element_format.hpp"
#include "lpx/numerics/hd.hpp"

namespace lpx {

enum class ScaleRule : uint8_t { floor, rceil, ceil, even };
enum class ScaleFormat : uint8_t { e8m0, pow2, fp32, e4m3 };

// Scales are powers of two (e8m0, pow2: the scale rules apply) or not (fp32, e4m3), and
// stored as one-byte codes (e8m0, e4m3: QuantizedTensor::scale_codes) or as float32
// decode multipliers (pow2, fp32: scale_values). Every executor asks these two.
LPX_HD constexpr bool scale_is_power_of_two(ScaleFormat s) {
  return s == ScaleFormat::e8m0 || s == ScaleFormat::pow2;
}
LPX_HD constexpr bool scale_is_code(ScaleFormat s) {
  return s == ScaleFormat::e8m0 || s == ScaleFormat::e4m3;
}

struct BlockShape {
  enum class Kind : uint8_t {
    vector,   // 1 x length along `axis`
    tile,     // rows x cols over the last two axes
    channel,  // the whole `axis` (one scale per row / channel)
    tensor,   // the whole tensor
  };
  Kind kind = Kind::vector;
  int64_t length = 32;  // vector
  int64_t rows = 1;     // tile
  int64_t cols = 1;     // tile
  int axis = -1;        // vector, channel: the axis the block runs along (negative: from the end)
};

struct BlockFormat {
  ElementFormat element;
  BlockShape block;
  ScaleFormat scale = ScaleFormat::e8m0;
  ScaleRule rule = ScaleRule::floor;  // e8m0 and pow2 only
  std::string preset;                 // the preset name when made from one, else ""

  // The canonical spec (ELEMENT:BLOCK:SCALE[:RULE], canonical element name); parsing it
  // gives back this format, the axis aside.
  std::string spec() const;
  bool power_of_two_scale() const { return scale_is_power_of_two(scale); }
  bool scale_is_code() const { return lpx::scale_is_code(scale); }
  bool two_level() const { return scale == ScaleFormat::e4m3; }
};

std::span<const std::string_view> block_preset_names();
// A preset by name, else the grammar above. Throws std::invalid_argument.
BlockFormat parse_block_format(std::string_view spec);
// Rejects formats the quantizer cannot hold (element wider than 8 bits, element without
// a zero, block extents < 1, a rule on a non-power-of-two scale): std::invalid_argument.
void validate(const BlockFormat& f);

// How far one block of `b` reaches along `axis` (0: rows, 1: columns) of a matrix, with a
// vector's or channel's own axis read as quantize() reads it (negative: from the end); 0
// when the block spans the whole axis (a channel along it, or the tensor). A reach longer
// than the axis is one ragged block. quantize.hpp's block_extents() gives the same extents
// for a given shape.
int64_t block_reach(const BlockShape& b, int axis);

std::string_view scale_rule_name(ScaleRule r);
ScaleRule scale_rule_by_name(std::string_view name);  // throws, listing the valid names
std::string_view scale_format_name(ScaleFormat s);
ScaleFormat scale_format_by_name(std::string_view name);

}  // namespace lpx
