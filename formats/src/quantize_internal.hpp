// Internal interface of the block quantizer (quantize.hpp) between its scalar reference
// and driver (quantize.cpp) and its SIMD kernels (quantize_hwy.cpp, Highway runtime
// dispatch). The scalar per-block functions declared here are the reference: the SIMD
// kernels call block_scale() (or, for power-of-two scales, its branch inlined) for every scale and hand every block or vector they do not
// take (NaN/Inf blocks, products that leave float32's normal range) to cast_block().
#pragma once

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <span>
#include <vector>

#include "lpx/formats/block_scale.hpp"
#include "lpx/formats/cast.hpp"
#include "lpx/formats/codec.hpp"
#include "lpx/formats/quantize.hpp"
#include "lpx/numerics/float_bits.hpp"

namespace lpx::quantize_detail {

// ---------------------------------------------------------------------------------------
// Layout: blocks are boxes of the C-order tensor. Every block kind reduces to a 2-D
// strided box (rows x cols), so one kernel serves 1xN along any axis, tiles and tensors.

struct Box {
  int64_t base = 0;  // flat index of the first element
  int64_t rows = 1, row_stride = 0;
  int64_t cols = 0, col_stride = 1;
  int64_t size() const { return rows * cols; }
};

struct Layout {
  std::vector<int64_t> shape, ext, grid, stride;
  BlockShape::Kind kind = BlockShape::Kind::vector;
  int row_axis = -1, col_axis = -1;
  int64_t numel = 1, nblocks = 1;

  Box box(int64_t b) const {
    Box out;
    if (kind == BlockShape::Kind::tensor) {
      out.cols = numel;
      return out;
    }
    for (int d = static_cast<int>(shape.size()) - 1; d >= 0; --d) {
      const int64_t c = b % grid[d];
      b /= grid[d];
      const int64_t start = c * ext[d];
      out.base += start * stride[d];
      const int64_t n = std::min(ext[d], shape[d] - start);
      if (d == row_axis) {
        out.rows = n;
        out.row_stride = stride[d];
      }
      if (d == col_axis) {
        out.cols = n;
        out.col_stride = stride[d];
      }
    }
    return out;
  }
};

Layout make_layout(std::span<const int64_t> shape, const BlockFormat& f);

// The scale rule itself (ElementLimits, scale_exponent, Amax, BlockScale, block_scale,
// mul_pow2_exact, prepare, dequant_value, ...) is lpx/formats/block_scale.hpp: LPX_HD code
// shared with the CUDA kernels.
using block_scaling::Amax;
using block_scaling::BlockScale;
using block_scaling::dequant_value;
using block_scaling::ElementLimits;
using block_scaling::floor_log2_bits;
using block_scaling::limits_of;
using block_scaling::mul_pow2_exact;
using block_scaling::prepare;
using block_scaling::prepare_element;
using block_scaling::scale_exponent;
using block_scaling::significand24;
using block_scaling::stored_dec;

// The element-cast options a block quantization runs its elements under.
inline CastOptions element_cast_options(const QuantizeOptions& o) {
  CastOptions co;
  co.round = o.round;
  co.overflow = o.overflow;
  co.seed = o.seed;
  co.stream = o.stream;
  co.sr_bits = o.sr_bits;
  co.index_offset = o.index_offset;
  return co;
}

struct Context {
  const BlockFormat* f = nullptr;
  ElementLimits lim;
  QuantizeOptions opt;
  float tensor_enc = 1.0f, tensor_dec = 1.0f;  // e4m3 two-level: s_enc, s_dec
  float history_amax = 0.0f;
};

// The scalar per-block reference (quantize.cpp).
Amax block_amax(const float* x, const Box& b, const QuantizeOptions& opt);
inline BlockScale block_scale(const Amax& a, const Context& ctx) {
  block_scaling::ScaleParams p;
  p.scale = ctx.f->scale;
  p.rule = ctx.f->rule;
  p.lim = ctx.lim;
  p.margin = ctx.opt.margin;
  p.fixed_amax = ctx.opt.history != nullptr;
  p.history_amax = ctx.history_amax;
  p.tensor_enc = ctx.tensor_enc;
  p.tensor_dec = ctx.tensor_dec;
  return block_scaling::block_scale(a, p);
}
void cast_block(const float* x, const Box& b, const BlockScale& s, const Context& ctx,
                uint8_t* codes, QuantizeStats& st);

// ---------------------------------------------------------------------------------------
// SIMD kernels (quantize_hwy.cpp). A job is a range of blocks whose boxes have contiguous
// rows (col_stride 1): 1xN blocks and per-row blocks along the last axis, and tiles.

struct BlockJob {
  const Layout* layout = nullptr;
  // Blocks along the last axis: block b is element run (b / per_row) * row_len +
  // (b % per_row) * block_len, of length min(block_len, row_len - ...). Else layout->box.
  bool last_axis = false;
  int64_t row_len = 0, block_len = 0, per_row = 0;
  const float* x = nullptr;
  uint8_t* codes = nullptr;
  float* out = nullptr;       // fake_quantize: the dequantized values too (else nullptr)
  const Context* ctx = nullptr;
  // sr: the random words of job.x's elements when the caller drew them (the axis-0 path
  // keys them by the elements' original flat indices); nullptr: drawn from job.x's.
  const uint32_t* rnd = nullptr;
  uint8_t* scale_codes = nullptr;  // e8m0 / e4m3
  float* scale_values = nullptr;   // pow2 / fp32
  // dequantize: the stored scales are read back (scale_codes / scale_values above, const
  // there), the element format, the two-level tensor scale and the 3/4 headroom.
  ScaleFormat scale_format = ScaleFormat::e8m0;
  ElementFormat element;
  float tensor_dec = 1.0f;
  bool two_level = false;
  bool headroom = false;

  Box box(int64_t b) const {
    if (!last_axis) return layout->box(b);
    Box bx;
    const int64_t j = b % per_row;
    bx.base = (b / per_row) * row_len + j * block_len;
    bx.cols = std::min(block_len, row_len - j * block_len);
    return bx;
  }
  // The decode multiplier of block b as dequantize() reads it from the stored scale.
  float dec_of(int64_t b) const {
    const size_t i = static_cast<size_t>(b);
    return scale_is_code(scale_format)
               ? block_scaling::decode_scale(scale_format, scale_codes[i], 0.0f)
               : scale_values[i];
  }
};

struct BlockTotals {
  int64_t clamped = 0, saturated = 0, flushed = 0;
  uint32_t finite_max = 0;  // bits of the largest finite |x'| seen
};

// Whether the SIMD kernels take this quantization (format, layout and options).
bool simd_supported(const BlockFormat& f, const Layout& L, const QuantizeOptions& opt);
// Blocks along an axis other than the last (1xN along a middle axis or axis 0, and
// per-channel blocks off the last axis): the tensor is viewed as outer x R x C, R the
// block axis and C the product of the axes after it, so every block is a column of one
// R x C slab with elements C apart.
struct StridedView {
  int64_t outer = 1, R = 0, C = 1;  // the view's extents
  int64_t Lb = 0, G = 0;            // block length along R and blocks per column
  // Columns per work unit: whole blocks adding up to about 8 Ki elements, at least 16.
  int64_t W = 0;
};
StridedView strided_view(const Layout& L);
// Whether the strided path takes it. Tiles of whole column blocks are transposed into a
// buffer, run through the last-axis kernel, and transposed back: every element sees the
// same value and block scale, and under sr the random word of its original flat index
// (simd_random_rows, job.rnd). Refused when one unit's buffer would pass 2^20 elements
// (per-channel blocks along a very long axis), which the scalar path then takes.
bool simd_strided_supported(const BlockFormat& f, const Layout& L, const QuantizeOptions& opt);
// Scale, cast (and with job.out, dequantize) blocks [b0, b1); stores scales and codes.
void simd_quantize_blocks(const BlockJob& job, int64_t b0, int64_t b1, BlockTotals& t);
// Whether per-tensor blocks take the SIMD kernels (simd_range_amax, simd_quantize_range).
bool simd_tensor_supported(const BlockFormat& f, const Layout& L, const QuantizeOptions& opt);
// out[r * cols + c] = random_bits(seed, stream, first + r * stride + c) for a rows x cols
// tile of a row-major tensor (the options of job.ctx).
void simd_random_rows(const BlockJob& job, uint32_t* out, int64_t rows, int64_t cols,
                      uint64_t first, int64_t stride);
// Pass 1 of per-tensor and two-level (NVFP4) scaling: the Amax of the flat run
// [i0, i0 + n) of job.x.
Amax simd_range_amax(const BlockJob& job, int64_t i0, int64_t n);
// Per-tensor blocks: cast (and with job.out, dequantize) the flat run [i0, i0 + n) under
// the one scale s; adds to t's saturated and flushed counts.
void simd_quantize_range(const BlockJob& job, int64_t i0, int64_t n, const BlockScale& s,
                         BlockTotals& t);
// dequantize() of blocks [b0, b1): codes -> out with the stored scales.
void simd_dequantize_blocks(const BlockJob& job, int64_t b0, int64_t b1);
// dequantize() of a rows x cols row-major run from flat index i0 whose column c has the
// decode multiplier decs[c] (strided blocks: one block row of a slab), or dec for every element
// when decs is null (per-tensor scales).
void simd_dequantize_rows(const BlockJob& job, int64_t i0, int64_t rows, int64_t cols,
                          const float* decs, float dec);

// The scalar reference for one run of `n` contiguous elements from flat index `i` (its
// block's scale `s`): codes, and with out, the dequantized values. The SIMD kernels' fallback.
void scalar_run(const BlockJob& job, int64_t i, int64_t n, const BlockScale& s,
                QuantizeStats& st);

}  // namespace lpx::quantize_detail
