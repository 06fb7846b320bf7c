// Internal: the plan of the block-quantization kernels that split a block over threads
// (docs/kernels.md#block-quantization-on-the-device): the tiled kernel (32 x 32 tiles, a
// warp's lanes per tile line) and the wide kernels (a warp per 1 x C block, a CTA per
// R x C block or per strip of R x 1 blocks). Shared by quantize.cu and the CPU mock module
// (tests/kernels/mock_cuda_module.cpp), which runs the same cuts as plain loops, so
// everything here but the shuffles and the shared memory is exercised in CPU-only CI:
// which calls take which kernel, how x is cut, the SR keys, the scale-grid and output
// indices, and each element's output word.
//
// Tiled: x is a contiguous float32 (rows, cols); tiles are 32 x 32. A pass writes one
// output, described in x's coordinates (r, c): the row pass has blocks of R x B (B along
// c, R = 1 for vectors, R > 1 for tiles such as NVFP4's 16 x 16), the column pass B x 1
// (B along r). B and R are powers of two up to 32, so that no block straddles a tile and
// a block's part of one tile line is an aligned group of B lanes. The wide kernels use
// the same Pass for their one output (wide_fits, wide_shape).
#pragma once

#include <cstddef>
#include <cstdint>

#include "lpx/formats/block_scale.hpp"
#include "lpx/formats/quantize.hpp"
#include "lpx/kernels/tensor.hpp"

namespace lpx::kernels::tiled {

namespace bs = block_scaling;

inline constexpr int kTile = 32;  // tile edge = warp width

struct Pass {
  bool on = false;
  int block = 32;        // B: the block's extent along the pass's lanes
  int block_across = 1;  // R: its extent across them (row pass of a tile format)
  bool along_rows = false;  // blocks run along r (column pass: B x 1 over x, or the transpose's rows)
  ElementFormat element;
  bs::ScaleParams scale;  // tensor_enc / tensor_dec set from the amax (two-level)
  QuantizeOptions opt;    // history and random_words null (checked on the host)
  bool pow2 = false, coded = false, two_level = false;
  uint8_t* codes = nullptr;  // one of codes / values (fake quantization)
  float* values = nullptr;
  int64_t out_r = 0, out_c = 0;   // element (r, c) is at out_r * r + out_c * c
  uint64_t key_r = 0, key_c = 0;  // its SR key: r * key_r + c * key_c
  // The scale of the block holding (r, c): across * scale_across + (along / B) *
  // scale_along, where along is the coordinate the block runs along and across the other.
  size_t scale_across = 0, scale_along = 0;
  uint8_t* scale_codes = nullptr;
  float* scale_values = nullptr;
  float* tensor_scale = nullptr;
};

// What block_scale() reads for the output view `out` (every quantize path; the two-level
// tensor scales are set later, from the amax pass).
inline bs::ScaleParams scale_params(const DeviceTensor& out, const QuantizeOptions& opt) {
  bs::ScaleParams p;
  p.scale = out.scales.format;
  p.rule = out.scales.rule;
  p.lim = bs::limits_of(out.element);
  p.margin = opt.margin;
  return p;
}

inline bool block_fits(int64_t b) { return b >= 1 && b <= kTile && (b & (b - 1)) == 0; }

// Whether quantize(x, out) takes the tiled path: x contiguous, a block of up to 32 x 32
// (powers of two) of any shape. Which kernel runs never changes a bit.
inline bool fits(const DeviceTensor& x, const DeviceTensor& out) {
  return x.contiguous() && block_fits(out.scales.block_rows) && block_fits(out.scales.block_cols);
}
// Whether `out`'s block box covers x (a per-tensor format), which the per-tensor kernels
// take unless its scales are two-level.
inline bool whole_tensor(const DeviceTensor& x, const DeviceTensor& out) {
  return out.scales.block_rows >= x.rows && out.scales.block_cols >= x.cols &&
         out.scales.format != ScaleFormat::e4m3;
}

// Whether quantize(x, out) takes the wide-block kernels instead (DeepSeek-V3's 1x128 and
// 128x128, and column blocks longer than a tile): x contiguous, and blocks 1 x C or R x C
// with C a multiple of 32, or R x 1 with R > 32.
inline bool wide_fits(const DeviceTensor& x, const DeviceTensor& out) {
  const int64_t br = out.scales.block_rows, bc = out.scales.block_cols;
  constexpr int64_t kWidest = int64_t{1} << 20;  // larger boxes are per-tensor ones
  return x.contiguous() && !fits(x, out) && !whole_tensor(x, out) && br <= kWidest && bc <= kWidest &&
         (bc % kTile == 0 || (bc == 1 && br > kTile));
}

// Which pass quantize(x, out) runs on that path: the column pass for B x 1 vectors (lanes
// down the columns), the row pass for everything else.
inline bool row_pass(const DeviceTensor& out) {
  return out.scales.block_rows == 1 || out.scales.block_cols > 1;
}

// Whether quantize_both(x, out_rows, out_cols) fuses its two calls into one tiled read:
// x contiguous, both outputs with blocks of up to 32 along their rows, and, when both are
// two-level, one tensor amax for both (both prepare x alike).
inline bool both_fit(const DeviceTensor& x, const DeviceTensor& out_rows, const QuantizeOptions& opt_rows,
                     const DeviceTensor& out_cols, const QuantizeOptions& opt_cols) {
  const bool two_level_both = out_rows.scales.format == ScaleFormat::e4m3 &&
                              out_cols.scales.format == ScaleFormat::e4m3;
  return x.contiguous() && out_rows.scales.block_rows == 1 && block_fits(out_rows.scales.block_cols) &&
         out_cols.scales.block_rows == 1 && block_fits(out_cols.scales.block_cols) &&
         (!two_level_both || opt_rows.flush_subnormal_inputs == opt_cols.flush_subnormal_inputs);
}

// The flush flag of the fused read's tensor amax: the two-level output's (both_fit makes
// the two agree when both are two-level; with neither, no tensor amax is taken).
inline bool both_flush(const DeviceTensor& out_rows, const QuantizeOptions& opt_rows,
                       const QuantizeOptions& opt_cols) {
  return out_rows.scales.format == ScaleFormat::e4m3 ? opt_rows.flush_subnormal_inputs
                                                     : opt_cols.flush_subnormal_inputs;
}

// The pass that writes `out` (a view in x's coordinates, blocks br x bc with one of them
// 1) for x of (rows, cols). transposed_keys: the output is the quantization of x's
// transpose (quantize_both's column output, passed as out_cols.transposed()), so SR keys
// and the scale grid are the transpose's.
inline Pass make_pass(const DeviceTensor& out, size_t rows, size_t cols, const QuantizeOptions& opt,
                      bool transposed_keys) {
  Pass q;
  q.on = true;
  const bool along_cols = row_pass(out) && !transposed_keys;
  q.block = static_cast<int>(along_cols ? out.scales.block_cols : out.scales.block_rows);
  q.block_across = static_cast<int>(along_cols ? out.scales.block_rows : 1);
  q.along_rows = !along_cols;
  q.element = out.element;
  q.scale = scale_params(out, opt);
  q.opt = opt;
  q.opt.history = nullptr;
  q.opt.random_words = nullptr;
  q.pow2 = scale_is_power_of_two(q.scale.scale);
  q.coded = scale_is_code(q.scale.scale);
  q.two_level = q.scale.scale == ScaleFormat::e4m3;
  if (out.storage == Storage::f32) q.values = static_cast<float*>(out.data);
  else q.codes = static_cast<uint8_t*>(out.data);
  q.out_r = out.row_stride;
  q.out_c = out.col_stride;
  const size_t b = static_cast<size_t>(q.block);
  if (along_cols) {  // R x B over x: key r * cols + c, grid (ceil(rows / R), ceil(cols / B))
    q.key_r = cols;
    q.key_c = 1;
    q.scale_across = (cols + b - 1) / b;
    q.scale_along = 1;
  } else if (!transposed_keys) {  // B x 1 over x: key r * cols + c, grid (ceil(rows / B), cols)
    q.key_r = cols;
    q.key_c = 1;
    q.scale_across = 1;
    q.scale_along = cols;
  } else {  // 1 x B over x^T: key c * rows + r, grid (cols, ceil(rows / B))
    q.key_r = 1;
    q.key_c = rows;
    q.scale_across = (rows + b - 1) / b;
    q.scale_along = 1;
  }
  q.scale_codes = out.scales.codes;
  q.scale_values = out.scales.values;
  q.tensor_scale = out.scales.tensor;
  return q;
}

// How the wide kernels cut x for pass q (made by make_pass): units of height x width
// elements, `per_row` of them side by side, `units` in all; unit u starts at row
// (u / per_row) * height, column (u % per_row) * width. A unit is one 1 x C block (one
// warp each), one R x C block, or 32 R x 1 blocks side by side (one CTA each).
struct WideShape {
  bool warp_per_block = false;
  size_t height = 1, width = 1, units = 0, per_row = 0;
};
inline WideShape wide_shape(const Pass& q, size_t rows, size_t cols) {
  WideShape w;
  w.warp_per_block = !q.along_rows && q.block_across == 1;
  w.height = q.along_rows ? static_cast<size_t>(q.block) : static_cast<size_t>(q.block_across);
  w.width = q.along_rows ? static_cast<size_t>(kTile) : static_cast<size_t>(q.block);
  w.per_row = (cols + w.width - 1) / w.width;
  w.units = (rows + w.height - 1) / w.height * w.per_row;
  return w;
}

// The two-level pass's tensor scales from the finite amax bits of x (as the per-block
// kernel derives them).
LPX_HD inline void set_tensor_scale(Pass& q, uint32_t amax_bits) {
  q.scale.tensor_enc = bs::tensor_encode_scale(bits_to_float(amax_bits), q.scale.lim.max_elem);
  q.scale.tensor_dec = 1.0f / q.scale.tensor_enc;
}

// The block's scale, stored by the first element of its block; (along, across) is that
// element in the pass's coordinates.
LPX_HD inline void store_scale(const Pass& q, const bs::BlockScale& s, size_t along, size_t across) {
  const size_t b = (across / static_cast<size_t>(q.block_across)) * q.scale_across +
                   (along / static_cast<size_t>(q.block)) * q.scale_along;
  if (q.coded && q.scale_codes != nullptr) q.scale_codes[b] = s.code;
  if (!q.coded && q.scale_values != nullptr) q.scale_values[b] = s.dec;
}

// Whether (along, across) is its block's first element, the one that stores the scale.
LPX_HD inline bool leads(const Pass& q, size_t along, size_t across) {
  return along % static_cast<size_t>(q.block) == 0 && across % static_cast<size_t>(q.block_across) == 0;
}

// Element (r, c) of a block with scale s: its code, or the float32 bits of its
// dequantized value (fake quantization).
// `element` is q.element, or the same format as a compile-time constant (fixed_formats.cuh).
LPX_HD inline uint32_t element_word(const Pass& q, const ElementFormat& element, float v, const bs::BlockScale& s,
                                    size_t r, size_t c) {
  const uint64_t key = r * q.key_r + c * q.key_c;
  const uint32_t code = bs::quantize_element(v, s, q.pow2, element, q.opt, key).code;
  if (q.codes != nullptr) return code;
  return float_to_bits(bs::dequant_value(code, bs::stored_dec(s, q.scale.scale), element,
                                         q.two_level, q.scale.tensor_dec, q.opt.headroom_3_4));
}
LPX_HD inline uint32_t element_word(const Pass& q, float v, const bs::BlockScale& s, size_t r, size_t c) {
  return element_word(q, q.element, v, s, r, c);
}

LPX_HD inline void store_word(const Pass& q, size_t r, size_t c, uint32_t word) {
  const int64_t at = static_cast<int64_t>(r) * q.out_r + static_cast<int64_t>(c) * q.out_c;
  if (q.codes != nullptr) q.codes[at] = static_cast<uint8_t>(word);
  else q.values[at] = bits_to_float(word);
}

}  // namespace lpx::kernels::tiled
