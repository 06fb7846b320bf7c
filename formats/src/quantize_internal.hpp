// Internal interface of the block quantizer (quantize.hpp): its scalar reference and
// public entry points (quantize.cpp), its strategies and their selector
// (quantize_strategies.cpp) and its SIMD kernels (quantize_hwy.cpp, Highway runtime
// dispatch). The scalar per-block functions declared here are the reference: the SIMD
// kernels call block_scale() (or, for power-of-two scales, its branch inlined) for every
// scale and hand every block or vector they do not take (NaN/Inf blocks, products that
// leave float32's normal range) to reference_cast().
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
  co.random_words = o.random_words;
  co.random_words_count = o.random_words_count;
  return co;
}

struct Context {
  const BlockFormat* f = nullptr;
  ElementLimits lim;
  QuantizeOptions opt;
  float tensor_enc = 1.0f, tensor_dec = 1.0f;  // e4m3 two-level: s_enc, s_dec
  float history_amax = 0.0f;
};

// The scalar reference's amax of one block (quantize.cpp).
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

// ---------------------------------------------------------------------------------------
// A job: the blocks of a tensor (or of one transposed tile of it), its input, outputs and
// scales, what the kernels below work on. The SIMD kernels take boxes with contiguous
// rows (col_stride 1: 1xN and per-row blocks along the last axis, tiles); the scalar
// reference takes any box.

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

  // Stores block b's scale where the format keeps it.
  void store_scale(int64_t b, const BlockScale& s) const {
    if (scale_codes != nullptr) scale_codes[b] = s.code;
    else scale_values[b] = s.dec;
  }
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

// What a strategy, a kernel or one thread's share of either adds up: QuantizeStats and
// the largest finite |x'|. Sums and a maximum, so merging in any order gives the same
// totals (what makes results independent of the thread count).
struct BlockTotals {
  int64_t clamped = 0, saturated = 0, flushed = 0;
  uint32_t finite_max = 0;  // bits of the largest finite |x'| seen

  void add(const QuantizeStats& st) {
    clamped += st.clamped_scales;
    saturated += st.saturated;
    flushed += st.flushed;
  }
  void merge(const BlockTotals& o) {
    clamped += o.clamped;
    saturated += o.saturated;
    flushed += o.flushed;
    finite_max = std::max(finite_max, o.finite_max);
  }
  QuantizeStats stats() const { return {clamped, saturated, flushed}; }
};

// ---------------------------------------------------------------------------------------
// SIMD kernels (quantize_hwy.cpp).

// Scale, cast (and with job.out, dequantize) blocks [b0, b1); stores scales and codes.
void simd_quantize_blocks(const BlockJob& job, int64_t b0, int64_t b1, BlockTotals& t);
// out[r * cols + c] = random_bits(seed, stream, first + r * stride + c) for a rows x cols
// tile of a row-major tensor (the options of job.ctx).
void simd_random_rows(const BlockJob& job, uint32_t* out, int64_t rows, int64_t cols,
                      uint64_t first, int64_t stride);
// The strided strategy's tile (rows x cols from flat index first, rows `stride` apart,
// column j is block b_first + j) with the lanes along the rows, without transposing:
// power-of-two scales, no NaN/Inf and no tiny scaled value in the tile (else it returns
// false having written nothing). Stores scales and codes, adds to t. rnd: room for
// cols words (sr: one row's words at a time).
bool simd_quantize_columns(const BlockJob& job, int64_t first, int64_t rows, int64_t cols, int64_t stride,
                           int64_t b_first, uint32_t* rnd, BlockTotals& t);
// How many tiles simd_quantize_columns has taken in this process (the others went back to
// the transposing path): tests/formats/test_block_simd.cpp reads it to check that data
// meant for the column-lane kernel reaches it.
int64_t column_kernel_tiles();
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

// ---------------------------------------------------------------------------------------
// The scalar reference (quantize.cpp). Each loop exists once: the reference strategies,
// the SIMD kernels' fallbacks and the HWY_SCALAR target all call these.

// Casts the elements of box b of job.x under their block's scale s: codes (when
// job.codes), the dequantized values (when job.out), and the statistics into st. The
// random words are job.rnd's when given, else drawn from the elements' flat indices.
void reference_cast(const BlockJob& job, const Box& b, const BlockScale& s, QuantizeStats& st);
// reference_cast() of the run of n contiguous elements from flat index i.
inline void scalar_run(const BlockJob& job, int64_t i, int64_t n, const BlockScale& s,
                       QuantizeStats& st) {
  Box b;
  b.base = i;
  b.cols = n;
  reference_cast(job, b, s, st);
}
// The scalar per-block loop over blocks [b0, b1) of job: amax, scale (stored), cast.
void reference_blocks(const BlockJob& job, int64_t b0, int64_t b1, BlockTotals& t);
// dequantize() of box b (job.codes -> job.out) under the decode multiplier dec.
void reference_dequantize(const BlockJob& job, const Box& b, float dec);

// ---------------------------------------------------------------------------------------
// Strategies (quantize_strategies.cpp): how one quantize() or dequantize() call is cut
// into kernel calls and threads. select_strategy() picks one from (format, layout,
// options); every strategy gives the bits of the scalar reference. Per-tensor blocks and
// two-level (NVFP4) formats need the tensor amax before any scale: quantize() takes it
// first (measure_tensor_amax, or QuantizeOptions::whole_tensor_amax) and sets the tensor
// scale in the Context, whichever strategy then runs.

enum class Strategy : uint8_t {
  contiguous,  // SIMD: blocks whose rows are contiguous (1xN and per-row blocks along the
               //   last axis, tiles), in groups of whole blocks per thread
  strided,     // SIMD: blocks along another axis, through transposed tiles (StridedView)
  per_tensor,  // one scale from the tensor amax; the cast in chunks (SIMD or scalar kernels)
  reference,   // the scalar per-block loop (reference_blocks), in groups of whole blocks
};

struct Selection {
  Strategy strategy = Strategy::reference;
  // The SIMD kernels run (the contiguous and strided strategies; per_tensor and the
  // tensor-wide pass 1 when the element format allows): then fake_quantize's values
  // are written in the same pass as the codes.
  bool simd = false;
};

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

// Whether the SIMD kernels can cast to f's element under opt (and opt asks for them).
bool simd_kernels_apply(const BlockFormat& f, const QuantizeOptions& opt);
// The strategy for this format, layout and options (the same for quantize and dequantize).
// The strided strategy is refused when one unit's buffer would pass 2^20 elements
// (per-channel blocks along a very long axis); the reference takes those.
Selection select_strategy(const BlockFormat& f, const Layout& L, const QuantizeOptions& opt);

// One call as the strategies see it: a job over the whole tensor (make_call: its layout,
// input, outputs, scales, and the Context of a quantization or the stored scales and
// element decode of a dequantization) and the threads it may use.
struct TensorCall {
  BlockJob job;
  int threads = 1;
  bool parallel = false;  // large enough for a parallel region
};
// The call over L's blocks with `threads` (0: OpenMP's default); the caller fills in
// the job's pointers and Context or dequantize fields.
TensorCall make_call(const Layout& L, int threads);

// Pass 1 of per-tensor and two-level scaling: the Amax of the whole tensor (chunks in
// parallel; a max, so the same bits for any split), with the SIMD or the scalar kernel.
Amax measure_tensor_amax(const TensorCall& c, bool simd);

// The strategies of quantize(): scales (stored), codes (when job.codes) and, for the
// SIMD ones, the dequantized values (when job.out). Their totals' finite_max is the
// tensor's (except per_tensor, whose caller has the tensor amax already).
BlockTotals quantize_contiguous(const TensorCall& c);
// Tiles of whole column blocks go through the column-lane kernel (simd_quantize_columns)
// where it applies; the others are transposed into a buffer, run through the last-axis
// kernel, and transposed back. Either way every element sees the same value and block
// scale, and under sr the random word of its original flat index (simd_random_rows, job.rnd).
BlockTotals quantize_strided(const TensorCall& c);
BlockTotals quantize_per_tensor(const TensorCall& c, const Amax& tensor, bool simd);
BlockTotals quantize_reference(const TensorCall& c);

// The strategies of dequantize(): job.codes -> job.out under the stored scales.
void dequantize_contiguous(const TensorCall& c);
void dequantize_strided(const TensorCall& c);
void dequantize_per_tensor(const TensorCall& c, bool simd);
void dequantize_reference(const TensorCall& c);

}  // namespace lpx::quantize_detail
