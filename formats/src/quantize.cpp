// Block-scaled quantization (quantize.hpp): the block layout, the scalar reference (amax,
// scale, cast, dequantize of one block) and the public entry points, which check their
// arguments, pick a strategy (select_strategy, quantize_strategies.cpp) and run it.
// Element rounding is always the scalar codec's (lpx::encode / lpx::decode) or the SIMD
// codec held bit-identical to it; the scale rules are block_scale.hpp's.
#include "lpx/formats/quantize.hpp"

#include <algorithm>
#include <bit>
#include <cfloat>
#include <cmath>
#include <stdexcept>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "lpx/formats/codec.hpp"
#include "lpx/numerics/float_bits.hpp"
#include "lpx/numerics/philox.hpp"
#include "quantize_internal.hpp"

namespace lpx {

// ---------------------------------------------------------------------------------------
// Amax history (delayed scaling).

AmaxHistory::AmaxHistory(size_t length, Reduction reduction)
    : length_(length == 0 ? 1 : length), reduction_(reduction) {}

void AmaxHistory::push(float amax) {
  values_.push_back(amax);
  while (values_.size() > length_) values_.pop_front();
}

float AmaxHistory::amax() const {
  if (values_.empty()) return 0.0f;
  if (reduction_ == Reduction::most_recent) return values_.back();
  float m = 0.0f;
  for (float v : values_) m = std::max(m, v);
  return m;
}

namespace quantize_detail {

// ---------------------------------------------------------------------------------------
// Layout (quantize_internal.hpp).

namespace {
int resolve_axis(int axis, size_t rank) {
  const int r = static_cast<int>(rank);
  const int a = axis < 0 ? axis + r : axis;
  if (a < 0 || a >= r)
    throw std::invalid_argument(
        fmt::format("block axis {} is out of range for a tensor of rank {}", axis, rank));
  return a;
}

}  // namespace

Layout make_layout(std::span<const int64_t> shape_in, const BlockFormat& f) {
  Layout L;
  L.shape.assign(shape_in.begin(), shape_in.end());
  if (L.shape.empty()) L.shape.push_back(1);  // a 0-D tensor is one element
  const size_t r = L.shape.size();
  // The product of the non-zero extents must fit int64 (as numpy requires): then every
  // stride, element count, grid extent and block count below does too, also for a
  // zero-element tensor such as [0, 2^63 - 1].
  int64_t nonzero = 1;
  bool zero = false;
  for (int64_t d : L.shape) {
    if (d < 0) throw std::invalid_argument("tensor shape has a negative dimension");
    if (d == 0) zero = true;
    else if (__builtin_mul_overflow(nonzero, d, &nonzero))
      throw std::invalid_argument(fmt::format(
          "tensor shape [{}] has more elements than int64 counts", fmt::join(L.shape, ", ")));
  }
  L.kind = f.block.kind;
  L.ext.assign(r, 1);
  L.stride.assign(r, 1);
  for (size_t d = r - 1; d > 0; --d) L.stride[d - 1] = L.stride[d] * L.shape[d];
  L.numel = zero ? 0 : nonzero;
  switch (f.block.kind) {
    case BlockShape::Kind::vector:
      L.col_axis = resolve_axis(f.block.axis, r);
      L.ext[L.col_axis] = f.block.length;
      break;
    case BlockShape::Kind::channel:
      L.col_axis = resolve_axis(f.block.axis, r);
      L.ext[L.col_axis] = std::max<int64_t>(L.shape[L.col_axis], 1);
      break;
    case BlockShape::Kind::tile:
      L.col_axis = static_cast<int>(r) - 1;
      L.ext[L.col_axis] = f.block.cols;
      if (r >= 2) {
        L.row_axis = static_cast<int>(r) - 2;
        L.ext[L.row_axis] = f.block.rows;
      }
      break;
    case BlockShape::Kind::tensor:
      for (size_t d = 0; d < r; ++d) L.ext[d] = std::max<int64_t>(L.shape[d], 1);
      break;
  }
  L.grid.resize(r);
  L.nblocks = 1;
  for (size_t d = 0; d < r; ++d) {
    // ceil(shape / ext) without shape + ext - 1, which overflows for extents near 2^63.
    L.grid[d] = L.shape[d] / L.ext[d] + (L.shape[d] % L.ext[d] != 0 ? 1 : 0);
    L.nblocks *= L.grid[d];
  }
  return L;
}

// ---------------------------------------------------------------------------------------
// The scalar reference (quantize_internal.hpp): plain functions of (input, box, scale),
// the pieces the SIMD kernels replace and fall back to. Each loop exists once.

Amax block_amax(const float* x, const Box& b, const QuantizeOptions& opt) {
  Amax a;
  for (int64_t r = 0; r < b.rows; ++r) {
    const float* row = x + b.base + r * b.row_stride;
    for (int64_t c = 0; c < b.cols; ++c)
      a.add(float_to_bits(prepare(row[c * b.col_stride], opt)) & kF32AbsMask);
  }
  return a;
}

void reference_cast(const BlockJob& job, const Box& b, const BlockScale& s, QuantizeStats& st) {
  const Context& ctx = *job.ctx;
  const BlockFormat& f = *ctx.f;
  const QuantizeOptions& o = ctx.opt;
  const bool pow2 = f.power_of_two_scale();
  const bool two_level = f.two_level();
  const float dec = stored_dec(s, f.scale);
  for (int64_t r = 0; r < b.rows; ++r) {
    const int64_t row = b.base + r * b.row_stride;
    for (int64_t c = 0; c < b.cols; ++c) {
      const int64_t k = row + c * b.col_stride;
      const float xi = job.x[k];
      uint32_t rnd = 0;
      if (is_stochastic(o.round))
        rnd = job.rnd != nullptr
                  ? job.rnd[k]
                  : random_bits(o.seed, o.stream, o.index_offset + static_cast<uint64_t>(k));
      const auto [code, scaled] =
          block_scaling::quantize_element_rnd(xi, s, pow2, f.element, o, rnd);
      if (job.codes != nullptr) job.codes[k] = static_cast<uint8_t>(code);
      if (job.out != nullptr)
        job.out[k] = dequant_value(code, dec, f.element, two_level, ctx.tensor_dec, o.headroom_3_4);
      if (s.nan || !std::isfinite(xi)) continue;
      if (std::fabs(scaled) > ctx.lim.max_elem && !(two_level && s.dec == 0.0f)) ++st.saturated;
      if (xi != 0.0f &&
          dequant_value(code, s.dec, f.element, two_level, ctx.tensor_dec, o.headroom_3_4) == 0.0f)
        ++st.flushed;
    }
  }
}

void reference_blocks(const BlockJob& job, int64_t b0, int64_t b1, BlockTotals& t) {
  const Context& ctx = *job.ctx;
  QuantizeStats st;
  for (int64_t b = b0; b < b1; ++b) {
    const Box box = job.box(b);
    const Amax a = block_amax(job.x, box, ctx.opt);
    t.finite_max = std::max(t.finite_max, a.finite);
    const BlockScale s = block_scale(a, ctx);
    if (s.clamped) ++t.clamped;
    job.store_scale(b, s);
    reference_cast(job, box, s, st);
  }
  t.add(st);
}

void reference_dequantize(const BlockJob& job, const Box& b, float dec) {
  for (int64_t r = 0; r < b.rows; ++r)
    for (int64_t c = 0; c < b.cols; ++c) {
      const int64_t i = b.base + r * b.row_stride + c * b.col_stride;
      job.out[i] = dequant_value(job.codes[i], dec, job.element, job.two_level, job.tensor_dec,
                                 job.headroom);
    }
}

}  // namespace quantize_detail

using namespace quantize_detail;

// ---------------------------------------------------------------------------------------

std::vector<int64_t> block_extents(std::span<const int64_t> shape, const BlockFormat& format) {
  validate(format);
  return make_layout(shape, format).ext;
}

std::vector<int64_t> scale_grid_shape(std::span<const int64_t> shape, const BlockFormat& format) {
  validate(format);
  return make_layout(shape, format).grid;
}

namespace {

// The layout of x under format, after the checks every entry point makes.
Layout checked_layout(TensorView<const float> x, const BlockFormat& format, const char* what) {
  validate(format);
  Layout L = make_layout(x.shape, format);
  if (static_cast<int64_t>(x.data.size()) != L.numel)
    throw std::invalid_argument(fmt::format("{}: the shape has {} elements but the data has {}",
                                            what, L.numel, x.data.size()));
  return L;
}

Context make_context(const BlockFormat& format, const QuantizeOptions& opt) {
  Context ctx;
  ctx.f = &format;
  ctx.lim = limits_of(format.element);
  ctx.opt = opt;
  if (opt.history != nullptr) ctx.history_amax = opt.history->amax();
  return ctx;
}

Amax given_amax(const TensorAmax& t) {
  Amax a;
  a.all = t.all_bits;
  a.finite = t.finite_bits;
  return a;
}

// NVFP4's tensor scale (docs/formats.md): s_enc = (max_elem * 448) / amax_t over finite
// values, capped at FLT_MAX, 1 when amax_t is 0; the decode scale is 1 / s_enc.
void set_tensor_scale(float amax_t, Context& ctx, QuantizedTensor& q) {
  const float enc = block_scaling::tensor_encode_scale(amax_t, ctx.lim.max_elem);
  ctx.tensor_enc = enc;
  ctx.tensor_dec = 1.0f / enc;
  q.tensor_scale = ctx.tensor_dec;
}

struct QuantizeResult {
  QuantizedTensor q;
  bool values_written = false;  // out holds dequantize(q) already
};

// quantize(), and with `out` (fake_quantize) the dequantized values too where the strategy
// runs the SIMD kernels, which write them in the same pass (values_written; else the
// caller dequantizes). Without codes_wanted (fake_quantize_values) those kernels write no
// codes and q.codes stays empty; the scalar reference fills them as usual.
QuantizeResult quantize_blocks(TensorView<const float> x, const BlockFormat& format,
                               const QuantizeOptions& opt, float* out = nullptr,
                               bool codes_wanted = true) {
  const Layout L = checked_layout(x, format, "quantize");
  if (opt.history != nullptr &&
      (format.block.kind != BlockShape::Kind::tensor || format.scale != ScaleFormat::fp32))
    throw std::invalid_argument(
        "quantize: delayed scaling (an amax history) needs per-tensor blocks with fp32 scales");
  if (opt.sr_bits < 1 || opt.sr_bits > kMaxSrBits)
    throw std::invalid_argument(fmt::format("quantize: sr_bits must be in [1, {}]", kMaxSrBits));
  if (opt.random_words != nullptr && !is_stochastic(opt.round))
    throw std::invalid_argument("quantize: random words need a stochastic rounding mode "
                                "(sr, sr-fast, sr-rne, sr-odd)");
  if (opt.random_words != nullptr &&
      opt.random_words_count < opt.index_offset + static_cast<uint64_t>(L.numel))
    throw std::invalid_argument(fmt::format("quantize: {} random words for elements up to index {}",
                                            opt.random_words_count,
                                            opt.index_offset + static_cast<uint64_t>(L.numel)));

  QuantizedTensor q;
  q.shape.assign(x.shape.begin(), x.shape.end());
  q.format = format;
  if (format.block.kind == BlockShape::Kind::vector ||
      format.block.kind == BlockShape::Kind::channel)
    q.format.block.axis = L.col_axis;
  q.scale_shape = L.grid;
  if (x.shape.empty()) q.scale_shape.clear();  // 0-D in, 0-D scale
  q.headroom_3_4 = opt.headroom_3_4;
  const Selection sel = select_strategy(format, L, opt);
  if (!sel.simd) out = nullptr;  // the reference writes codes only
  if (codes_wanted || out == nullptr) q.codes.assign(static_cast<size_t>(L.numel), 0);
  const bool coded_scale = format.scale_is_code();
  if (coded_scale) q.scale_codes.assign(static_cast<size_t>(L.nblocks), 0);
  else q.scale_values.assign(static_cast<size_t>(L.nblocks), 0.0f);
  if (L.numel == 0) {
    // No elements, but a whole result: tensor-wide scales of amax 0 (or of the whole
    // tensor's amax, for an empty piece), so a two-level format has its tensor scale
    // (s_enc = 1, docs/formats.md#nvfp4) and dequantize() accepts the result.
    if (L.kind == BlockShape::Kind::tensor || format.two_level()) {
      q.amax = opt.whole_tensor_amax ? bits_to_float(opt.whole_tensor_amax->finite_bits) : 0.0f;
      if (format.two_level()) {
        Context ctx = make_context(format, opt);
        set_tensor_scale(q.amax, ctx, q);
      }
    }
    return {std::move(q), false};
  }

  Context ctx = make_context(format, opt);
  TensorCall c = make_call(L, opt.threads);
  c.job.x = x.data.data();
  c.job.codes = q.codes.empty() ? nullptr : q.codes.data();
  c.job.out = out;
  c.job.ctx = &ctx;
  // Caller-given words: every strategy, SIMD or reference, reads element k's word from
  // job.rnd[k] instead of drawing it.
  if (opt.random_words != nullptr) c.job.rnd = opt.random_words + opt.index_offset;
  if (coded_scale) c.job.scale_codes = q.scale_codes.data();
  else c.job.scale_values = q.scale_values.data();

  // Per-tensor blocks and two-level (NVFP4) formats scale from the amax of the whole
  // tensor, so it comes first: the caller's when x is a piece of a larger tensor, else
  // pass 1 over x.
  const bool tensor_wide = L.kind == BlockShape::Kind::tensor || format.two_level();
  Amax tensor;
  if (tensor_wide) {
    tensor = opt.whole_tensor_amax ? given_amax(*opt.whole_tensor_amax)
                                   : measure_tensor_amax(c, sel.simd);
    q.amax = bits_to_float(tensor.finite);
    if (format.two_level()) set_tensor_scale(q.amax, ctx, q);
  }
  BlockTotals t;
  switch (sel.strategy) {
    case Strategy::contiguous: t = quantize_contiguous(c); break;
    case Strategy::strided: t = quantize_strided(c); break;
    case Strategy::per_tensor: t = quantize_per_tensor(c, tensor, sel.simd); break;
    case Strategy::reference: t = quantize_reference(c); break;
  }
  if (!tensor_wide) q.amax = bits_to_float(t.finite_max);
  q.stats = t.stats();
  return {std::move(q), out != nullptr};
}

// fake_quantize() (codes_wanted) and fake_quantize_values().
QuantizedTensor fake_quantize_into(TensorView<const float> x, std::span<float> out,
                                   const BlockFormat& format, const QuantizeOptions& opt,
                                   bool codes_wanted) {
  if (out.size() != x.data.size())
    throw std::invalid_argument(fmt::format(
        "fake_quantize: the input has {} elements but the output {}", x.data.size(), out.size()));
  QuantizeResult r = quantize_blocks(x, format, opt, out.data(), codes_wanted);
  if (!r.values_written) dequantize(r.q, out, opt.threads, opt.path);
  if (!codes_wanted) {
    r.q.codes.clear();
    r.q.codes.shrink_to_fit();
  }
  return std::move(r.q);
}

}  // namespace

TensorAmax tensor_amax(TensorView<const float> x, const BlockFormat& format,
                       const QuantizeOptions& opt) {
  const Layout L = checked_layout(x, format, "tensor_amax");
  const Context ctx = make_context(format, opt);
  TensorCall c = make_call(L, opt.threads);
  c.job.x = x.data.data();
  c.job.ctx = &ctx;
  const Amax a = measure_tensor_amax(c, simd_kernels_apply(format, opt));
  return TensorAmax{a.all, a.finite};
}

QuantizedTensor quantize(TensorView<const float> x, const BlockFormat& format,
                         const QuantizeOptions& opt) {
  return quantize_blocks(x, format, opt).q;
}

void dequantize(const QuantizedTensor& q, std::span<float> out, int threads, QuantizePath path) {
  const BlockFormat& f = q.format;
  validate(f);
  const Layout L = make_layout(q.shape, f);
  if (static_cast<int64_t>(out.size()) != L.numel || static_cast<int64_t>(q.codes.size()) != L.numel)
    throw std::invalid_argument(fmt::format(
        "dequantize: the shape has {} elements but the codes have {} and the output {}", L.numel,
        q.codes.size(), out.size()));
  const size_t nscales = f.scale_is_code() ? q.scale_codes.size() : q.scale_values.size();
  if (static_cast<int64_t>(nscales) != L.nblocks)
    throw std::invalid_argument(fmt::format(
        "dequantize: {} block scales for {} blocks", nscales, L.nblocks));
  if (f.two_level() && !q.tensor_scale)
    throw std::invalid_argument("dequantize: a two-level (e4m3) format needs its tensor scale");
  if (L.numel == 0) return;

  QuantizeOptions opt;
  opt.path = path;
  const Selection sel = select_strategy(f, L, opt);
  TensorCall c = make_call(L, threads);
  // The kernels only read the codes and scales here (BlockJob's pointers are shared with
  // quantize, which writes them).
  c.job.codes = const_cast<uint8_t*>(q.codes.data());
  c.job.scale_codes = const_cast<uint8_t*>(q.scale_codes.data());
  c.job.scale_values = const_cast<float*>(q.scale_values.data());
  c.job.out = out.data();
  c.job.scale_format = f.scale;
  c.job.element = f.element;
  c.job.tensor_dec = q.tensor_scale.value_or(1.0f);
  c.job.two_level = f.two_level();
  c.job.headroom = q.headroom_3_4;
  switch (sel.strategy) {
    case Strategy::contiguous: return dequantize_contiguous(c);
    case Strategy::strided: return dequantize_strided(c);
    case Strategy::per_tensor: return dequantize_per_tensor(c, sel.simd);
    case Strategy::reference: return dequantize_reference(c);
  }
}

QuantizedTensor fake_quantize(TensorView<const float> x, std::span<float> out,
                              const BlockFormat& format, const QuantizeOptions& opt) {
  return fake_quantize_into(x, out, format, opt, /*codes_wanted=*/true);
}

QuantizedTensor fake_quantize_values(TensorView<const float> x, std::span<float> out,
                                     const BlockFormat& format, const QuantizeOptions& opt) {
  return fake_quantize_into(x, out, format, opt, /*codes_wanted=*/false);
}

}  // namespace lpx
