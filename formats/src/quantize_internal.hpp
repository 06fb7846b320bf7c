// Internal interface of the block quantizer (quantize.hpp) between its scalar reference
// and driver (quantize.cpp) and its SIMD kernels (quantize_hwy.cpp, Highway runtime
// dispatch). The scalar per-block functions declared here are the reference: the SIMD
// kernels call block_scale() (or, for power-of-two scales, its branch inlined) for every scale and hand every block or vector they do not
// take (NaN/Inf blocks, products that leave float32's normal range) to cast_block().
// kernels/src/quantize.cu mirrors these scalar functions line by line.
#pragma once

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <span>
#include <vector>

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

struct ElementLimits {
  float max_elem = 0;
  int emax = 0;          // floor(log2 max_elem)
  uint32_t max_sig = 0;  // significand24(max_elem)
  int mbits = 0;         // mantissa width for the `even` rule
};

// Scale rules from float32 bits (exact integer arithmetic; block_format.hpp). Inline so
// the SIMD kernels compute power-of-two scales without a call per block.

// floor(log2 a) of a positive finite float given by its bits (subnormals included).
inline int floor_log2_bits(uint32_t b) {
  const uint32_t biased = b >> 23;
  if (biased != 0) return static_cast<int>(biased) - kF32Bias;
  return static_cast<int>(std::bit_width(b)) - 1 - 149;  // b = m, value m * 2^-149
}
// The significand of a positive finite float, normalized to 24 bits (1.xxx * 2^23).
inline uint32_t significand24(uint32_t b) {
  if ((b >> 23) != 0) return (b & 0x7fffffu) | 0x800000u;
  return b << (24 - std::bit_width(b));
}

// The unclamped scale exponent X of a block with finite amax > 0 (amax_bits = its bits).
inline int scale_exponent(uint32_t amax_bits, ScaleRule rule, const ElementLimits& l) {
  const int e = floor_log2_bits(amax_bits);
  switch (rule) {
    case ScaleRule::floor: return e - l.emax;
    case ScaleRule::ceil: {
      // amax is a power of two iff its normalized significand is exactly 2^23.
      const bool pow2 = significand24(amax_bits) == 0x800000u;
      return e + (pow2 ? 0 : 1) - l.emax;
    }
    case ScaleRule::rceil:
      // amax / max_elem = (a / m) * 2^(e - emax) with a, m in [1, 2): the ceil of its
      // log2 is e - emax, plus one iff a > m (a == m is exact, a < m lies in (-1, 0)).
      return e - l.emax + (significand24(amax_bits) > l.max_sig ? 1 : 0);
    case ScaleRule::even: {
      // Round amax half-up to 1 + mbits significant bits by adding half an ulp of that
      // width to the float32 bits (a carry moves into the exponent field), then floor.
      const uint32_t rounded = amax_bits + (1u << (22 - l.mbits));
      const uint32_t biased = rounded >> 23;
      // A subnormal amax that stays subnormal keeps its own floor (its scale clamps).
      return (biased != 0 ? static_cast<int>(biased) - kF32Bias : e) - l.emax;
    }
  }
  return 0;
}

struct Context {
  const BlockFormat* f = nullptr;
  ElementLimits lim;
  QuantizeOptions opt;
  float tensor_enc = 1.0f, tensor_dec = 1.0f;  // e4m3 two-level: s_enc, s_dec
  float history_amax = 0.0f;
};

// Maxima of |x'| as float32 bits: over all elements (>= Inf bits: the block has a NaN or
// an Inf) and over finite elements only. Bits compare like magnitudes.
struct Amax {
  uint32_t all = 0, finite = 0;
  void add(uint32_t abs_bits) {
    all = std::max(all, abs_bits);
    if (abs_bits < kF32InfBits) finite = std::max(finite, abs_bits);
  }
  void merge(const Amax& o) {
    all = std::max(all, o.all);
    finite = std::max(finite, o.finite);
  }
  bool nonfinite() const { return all >= kF32InfBits; }
};

// One block's scale: how to encode (x -> scaled) and how to decode (v * dec).
struct BlockScale {
  bool nan = false;
  bool clamped = false;
  int exponent = 0;     // power-of-two scales: X
  float enc = 1.0f;     // fp32 / e4m3: the encode multiplier
  float dec = 1.0f;     // decode multiplier: 2^X, s_dec, float(s_dec_b); NaN for NaN blocks
  uint8_t code = 0;     // e8m0 / e4m3 code
};

// The scalar per-block reference (quantize.cpp).
float mul_pow2_exact(float x, int k);
Amax block_amax(const float* x, const Box& b, const QuantizeOptions& opt);
BlockScale block_scale(const Amax& a, const Context& ctx);
void cast_block(const float* x, const Box& b, const BlockScale& s, const Context& ctx,
                uint8_t* codes, QuantizeStats& st);

// The input as the scale sees it: float32 subnormals zeroed when the option says so.
inline float prepare(float x, const QuantizeOptions& opt) {
  if (opt.flush_subnormal_inputs && (float_to_bits(x) & kF32AbsMask) < 0x800000u)
    x = std::copysign(0.0f, x);
  return x;
}
// The input as the element cast sees it: the 3/4 headroom is applied after the scale was
// chosen from the unscaled amax, so |x * 3/4| / scale stays below the element's max and
// stochastic rounding cannot clip (Tseng et al. 2025, section 3.2).
inline float prepare_element(float x, const QuantizeOptions& opt) {
  const float p = prepare(x, opt);
  return opt.headroom_3_4 ? p * 0.75f : p;
}

// The float32 value of one element code under its block scale (quantize.hpp).
inline float dequant_value(uint32_t code, float dec, const ElementFormat& e, bool two_level,
                           float tensor_dec, bool headroom) {
  float v = decode(code, e) * dec;
  if (two_level) v = v * tensor_dec;
  if (headroom) v = v / 0.75f;
  return v;
}

// The decode multiplier dequantize() reads back from a stored scale.
inline float stored_dec(const BlockScale& s, ScaleFormat f) {
  switch (f) {
    case ScaleFormat::e8m0: return decode(s.code, fmt8::e8m0);
    case ScaleFormat::e4m3: return decode(s.code, fmt8::e4m3fn);
    default: return s.dec;
  }
}

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
  const Amax* amax = nullptr;  // two-level: the per-block amax of pass 1, else nullptr
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
    switch (scale_format) {
      case ScaleFormat::e8m0: return decode(scale_codes[i], fmt8::e8m0);  // 0xFF: NaN
      case ScaleFormat::e4m3: return decode(scale_codes[i], fmt8::e4m3fn);
      default: return scale_values[i];
    }
  }
};

struct BlockTotals {
  int64_t clamped = 0, saturated = 0, flushed = 0;
  uint32_t finite_max = 0;  // bits of the largest finite |x'| seen
};

// Whether the SIMD kernels take this quantization (format, layout and options).
bool simd_supported(const BlockFormat& f, const Layout& L, const QuantizeOptions& opt);
// Whether the axis-0 path takes it: a 2-D tensor with 1xN blocks along axis 0, rounding
// other than sr (sr keys its random bits by the original flat index), one-level scales.
// Tiles of whole column blocks are transposed into a buffer, run through the last-axis
// kernel, and transposed back: every element sees the same value and block scale.
bool simd_axis0_supported(const BlockFormat& f, const Layout& L, const QuantizeOptions& opt);
// Scale, cast (and with job.out, dequantize) blocks [b0, b1); stores scales and codes.
void simd_quantize_blocks(const BlockJob& job, int64_t b0, int64_t b1, BlockTotals& t);
// Pass 1 of two-level scaling: the Amax of blocks [b0, b1) into amax[b].
void simd_block_amax(const BlockJob& job, int64_t b0, int64_t b1, Amax* amax);
// dequantize() of blocks [b0, b1): codes -> out with the stored scales.
void simd_dequantize_blocks(const BlockJob& job, int64_t b0, int64_t b1);

// The scalar reference for one run of `n` contiguous elements from flat index `i` (its
// block's scale `s`): codes, and with out, the dequantized values. The SIMD kernels' fallback.
void scalar_run(const BlockJob& job, int64_t i, int64_t n, const BlockScale& s,
                QuantizeStats& st);

}  // namespace lpx::quantize_detail
