// Block-scaled quantization (quantize.hpp): block layout, scale rules, the per-block
// kernels (amax, scale, cast) and their OpenMP driver. Element rounding is always the
// scalar codec's (lpx::encode / lpx::decode); this file only computes scales.
#include "lpx/formats/quantize.hpp"

#include <omp.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cfloat>
#include <cmath>
#include <stdexcept>

#include <fmt/format.h>

#include "lpx/formats/codec.hpp"
#include "lpx/numerics/float_bits.hpp"
#include "lpx/numerics/philox.hpp"
#include "codec_simd.hpp"
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
  for (int64_t d : L.shape)
    if (d < 0) throw std::invalid_argument("tensor shape has a negative dimension");
  L.kind = f.block.kind;
  L.ext.assign(r, 1);
  L.stride.assign(r, 1);
  for (size_t d = r - 1; d > 0; --d) L.stride[d - 1] = L.stride[d] * L.shape[d];
  L.numel = 1;
  for (int64_t d : L.shape) L.numel *= d;
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
    L.grid[d] = (L.shape[d] + L.ext[d] - 1) / L.ext[d];
    L.nblocks *= L.grid[d];
  }
  return L;
}

// ---------------------------------------------------------------------------------------
// Per-block kernels. These are the pieces a SIMD implementation replaces; each is a plain
// function of (input, box, context) so it can be swapped block by block.

Amax block_amax(const float* x, const Box& b, const QuantizeOptions& opt) {
  Amax a;
  for (int64_t r = 0; r < b.rows; ++r) {
    const float* row = x + b.base + r * b.row_stride;
    for (int64_t c = 0; c < b.cols; ++c)
      a.add(float_to_bits(prepare(row[c * b.col_stride], opt)) & kF32AbsMask);
  }
  return a;
}

void cast_block(const float* x, const Box& b, const BlockScale& s, const Context& ctx,
                uint8_t* codes, QuantizeStats& st) {
  const BlockFormat& f = *ctx.f;
  const QuantizeOptions& o = ctx.opt;
  const bool pow2 = f.power_of_two_scale();
  const bool two_level = f.two_level();
  for (int64_t r = 0; r < b.rows; ++r) {
    const int64_t row = b.base + r * b.row_stride;
    for (int64_t c = 0; c < b.cols; ++c) {
      const int64_t i = row + c * b.col_stride;
      const float xi = x[i];
      const auto [code, scaled] =
          block_scaling::quantize_element(xi, s, pow2, f.element, o, static_cast<uint64_t>(i));
      codes[i] = static_cast<uint8_t>(code);
      if (s.nan || !std::isfinite(xi)) continue;
      if (std::fabs(scaled) > ctx.lim.max_elem && !(two_level && s.dec == 0.0f)) ++st.saturated;
      if (xi != 0.0f &&
          dequant_value(code, s.dec, f.element, two_level, ctx.tensor_dec, o.headroom_3_4) == 0.0f)
        ++st.flushed;
    }
  }
}

void scalar_run(const BlockJob& job, int64_t i, int64_t n, const BlockScale& s,
                QuantizeStats& st) {
  // cast_block's per-element steps, with the random words of job.rnd when given, the
  // codes when wanted and the dequantized values when wanted.
  const Context& ctx = *job.ctx;
  const BlockFormat& f = *ctx.f;
  const QuantizeOptions& o = ctx.opt;
  const bool pow2 = f.power_of_two_scale();
  const bool two_level = f.two_level();
  const float dec = stored_dec(s, f.scale);
  for (int64_t k = i; k < i + n; ++k) {
    const float xi = job.x[k];
    uint32_t rnd = 0;
    if (o.round == Rounding::sr)
      rnd = job.rnd != nullptr ? job.rnd[k]
                               : random_bits(o.seed, o.stream, o.index_offset + static_cast<uint64_t>(k));
    const auto [code, scaled] = block_scaling::quantize_element_rnd(xi, s, pow2, f.element, o, rnd);
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

namespace {

std::atomic<bool> g_force_scalar{false};

int thread_count(int requested) { return requested > 0 ? requested : omp_get_max_threads(); }

// Chunks of a per-tensor block, so one huge block still uses every thread. The split
// never changes a result: amax is a max and elements are independent.
constexpr int64_t kChunk = int64_t{1} << 15;
// Below this many elements a parallel region costs more than it saves (and oversubscribed
// machines make OpenMP's spinning threads very slow); results are the same either way.
constexpr int64_t kParallelMin = int64_t{1} << 14;
// Elements per work unit of the SIMD path: whole blocks adding up to about 8 Ki elements
// (32 KiB in, the working set of one unit stays in L1/L2).
constexpr int64_t kGroupElems = int64_t{1} << 13;

// Runs fn(b0, b1, acc) over [0, nblocks) in units of whole blocks, in parallel when
// `parallel`; each thread accumulates into its own Acc, merged with merge(total, acc).
// Every block's result depends only on the block, and the merges are sums and maxima,
// so the totals do not depend on the thread count or the schedule.
template <class Acc, class Fn, class Merge>
Acc for_block_groups(int64_t nblocks, int64_t block_elems, int threads, bool parallel, Fn fn,
                     Merge merge) {
  Acc total{};
  if (!parallel) {
    fn(int64_t{0}, nblocks, total);  // no OpenMP region at all for small tensors
    return total;
  }
  const int64_t per = std::max<int64_t>(1, kGroupElems / std::max<int64_t>(1, block_elems));
  const int64_t groups = (nblocks + per - 1) / per;
#pragma omp parallel num_threads(threads)
  {
    Acc mine{};
#pragma omp for schedule(static)
    for (int64_t g = 0; g < groups; ++g) fn(g * per, std::min(nblocks, (g + 1) * per), mine);
#pragma omp critical(lpx_quantize_merge)
    merge(total, mine);
  }
  return total;
}

// The strided path's tile transpositions, in bands of 8 rows: for each column the band's
// elements are 8 consecutive entries of the transposed side, and the band's rows are 8
// cache lines of the row-major side, so both stay in L1 however tall the tile is (per
// channel scales along axis 0 have tiles of thousands of rows).
constexpr int64_t kBand = 8;
// dst[c * rows + r] = src[r * stride + c]
template <class T>
void transpose_in(const T* src, int64_t stride, T* dst, int64_t rows, int64_t cols) {
  for (int64_t r0 = 0; r0 < rows; r0 += kBand) {
    const int64_t r1 = std::min(rows, r0 + kBand);
    for (int64_t c = 0; c < cols; ++c)
      for (int64_t r = r0; r < r1; ++r) dst[c * rows + r] = src[r * stride + c];
  }
}
// dst[r * stride + c] = src[c * rows + r]
template <class T>
void transpose_out(const T* src, T* dst, int64_t stride, int64_t rows, int64_t cols) {
  for (int64_t r0 = 0; r0 < rows; r0 += kBand) {
    const int64_t r1 = std::min(rows, r0 + kBand);
    for (int64_t c = 0; c < cols; ++c)
      for (int64_t r = r0; r < r1; ++r) dst[r * stride + c] = src[c * rows + r];
  }
}

// A SIMD job over layout L: runs along the last axis get the cheap box arithmetic.
BlockJob make_job(const Layout& L) {
  BlockJob job;
  job.layout = &L;
  const int last = static_cast<int>(L.shape.size()) - 1;
  if ((L.kind == BlockShape::Kind::vector || L.kind == BlockShape::Kind::channel) &&
      L.col_axis == last) {
    job.last_axis = true;
    job.row_len = L.shape[static_cast<size_t>(last)];
    job.block_len = L.ext[static_cast<size_t>(last)];
    job.per_row = L.grid[static_cast<size_t>(last)];
  }
  return job;
}

// Pass 1 of per-tensor and two-level scaling: the Amax of all numel elements of job.x,
// over chunks of kChunk in parallel (a max: the same bits for any split).
Amax simd_tensor_amax(const BlockJob& job, int64_t numel, int threads, bool parallel) {
  const int64_t units = (numel + kChunk - 1) / kChunk;
  Amax total;
#pragma omp parallel num_threads(threads) if (parallel)
  {
    Amax mine;
#pragma omp for schedule(static)
    for (int64_t u = 0; u < units; ++u)
      mine.merge(simd_range_amax(job, u * kChunk, std::min(kChunk, numel - u * kChunk)));
#pragma omp critical(lpx_quantize_merge)
    total.merge(mine);
  }
  return total;
}

Amax given_amax(const TensorAmax& t) {
  Amax a;
  a.all = t.all_bits;
  a.finite = t.finite_bits;
  return a;
}

int64_t block_elems(const Layout& L) {
  int64_t n = 1;
  for (size_t d = 0; d < L.ext.size(); ++d) n *= std::min(L.ext[d], std::max<int64_t>(L.shape[d], 1));
  return n;
}

}  // namespace

}  // namespace quantize_detail

using namespace quantize_detail;

namespace quantize_testing {
void force_scalar(bool on) { g_force_scalar.store(on); }
bool scalar_forced() { return g_force_scalar.load(); }
}  // namespace quantize_testing

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

// NVFP4's tensor scale (RECIPES.md): s_enc = (max_elem * 448) / amax_t over finite
// values, capped at FLT_MAX, 1 when amax_t is 0; the decode scale is 1 / s_enc.
void set_tensor_scale(float amax_t, Context& ctx, QuantizedTensor& q) {
  const float enc = block_scaling::tensor_encode_scale(amax_t, ctx.lim.max_elem);
  ctx.tensor_enc = enc;
  ctx.tensor_dec = 1.0f / enc;
  q.tensor_scale = ctx.tensor_dec;
}

// quantize(), and with `out` (fake_quantize) the dequantized values as well when the
// SIMD path runs (then `fused` is set; else the caller dequantizes).
// With skip_codes (fake_quantize_values) the SIMD path writes no codes and q.codes stays
// empty; the scalar path fills them as usual.
QuantizedTensor quantize_impl(TensorView<const float> x, const BlockFormat& format,
                              const QuantizeOptions& opt, float* out, bool& fused,
                              bool skip_codes = false) {
  fused = false;
  validate(format);
  const Layout L = make_layout(x.shape, format);
  if (static_cast<int64_t>(x.data.size()) != L.numel)
    throw std::invalid_argument(fmt::format(
        "quantize: the shape has {} elements but the data has {}", L.numel, x.data.size()));
  if (opt.history != nullptr &&
      (format.block.kind != BlockShape::Kind::tensor || format.scale != ScaleFormat::fp32))
    throw std::invalid_argument(
        "quantize: delayed scaling (an amax history) needs per-tensor blocks with fp32 scales");
  if (opt.sr_bits < 1 || opt.sr_bits > kMaxSrBits)
    throw std::invalid_argument(fmt::format("quantize: sr_bits must be in [1, {}]", kMaxSrBits));

  QuantizedTensor q;
  q.shape.assign(x.shape.begin(), x.shape.end());
  q.format = format;
  if (format.block.kind == BlockShape::Kind::vector ||
      format.block.kind == BlockShape::Kind::channel)
    q.format.block.axis = L.col_axis;
  q.scale_shape = L.grid;
  if (x.shape.empty()) q.scale_shape.clear();  // 0-D in, 0-D scale
  q.headroom_3_4 = opt.headroom_3_4;
  const bool simd = !g_force_scalar.load(std::memory_order_relaxed) &&
                    simd_supported(format, L, opt);
  const bool simd_strided = !simd && !g_force_scalar.load(std::memory_order_relaxed) &&
                            simd_strided_supported(format, L, opt);
  const bool simd_tensor = !g_force_scalar.load(std::memory_order_relaxed) &&
                           simd_tensor_supported(format, L, opt);
  skip_codes = skip_codes && (simd || simd_strided || simd_tensor) && out != nullptr;
  if (!skip_codes) q.codes.assign(static_cast<size_t>(L.numel), 0);
  const bool coded_scale = format.scale_is_code();
  const size_t nb = static_cast<size_t>(L.nblocks);
  if (coded_scale) q.scale_codes.assign(nb, 0);
  else q.scale_values.assign(nb, 0.0f);
  if (L.numel == 0) return q;

  Context ctx;
  ctx.f = &format;
  ctx.lim = limits_of(format.element);
  ctx.opt = opt;
  if (opt.history != nullptr) ctx.history_amax = opt.history->amax();
  const float* xp = x.data.data();
  uint8_t* codes = skip_codes ? nullptr : q.codes.data();
  const int threads = thread_count(opt.threads);
  const bool per_tensor = format.block.kind == BlockShape::Kind::tensor;
  const bool parallel = L.numel >= kParallelMin && threads > 1;
  // The amax tensor-wide scales come from: the caller's when x is a piece of a larger
  // tensor, else pass 1 over x.
  const auto whole_amax = [&](const BlockJob& job) {
    return opt.whole_tensor_amax ? given_amax(*opt.whole_tensor_amax)
                                 : simd_tensor_amax(job, L.numel, threads, parallel);
  };

  if (simd) {
    BlockJob job = make_job(L);
    job.x = xp;
    job.codes = codes;
    job.out = out;
    job.ctx = &ctx;
    if (coded_scale) job.scale_codes = q.scale_codes.data();
    else job.scale_values = q.scale_values.data();
    const int64_t be = block_elems(L);
    if (format.two_level()) {
      // Pass 1: the tensor amax, which every block scale needs before any cast. Pass 2
      // takes each block's amax again, from L1 (cheaper than storing them all).
      const float amax_t = bits_to_float(whole_amax(job).finite);
      set_tensor_scale(amax_t, ctx, q);
      q.amax = amax_t;
    }
    const BlockTotals t = for_block_groups<BlockTotals>(
        L.nblocks, be, threads, parallel,
        [&](int64_t b0, int64_t b1, BlockTotals& acc) { simd_quantize_blocks(job, b0, b1, acc); },
        [](BlockTotals& a, const BlockTotals& b) {
          a.clamped += b.clamped;
          a.saturated += b.saturated;
          a.flushed += b.flushed;
          a.finite_max = std::max(a.finite_max, b.finite_max);
        });
    if (!format.two_level()) q.amax = bits_to_float(t.finite_max);
    q.stats.clamped_scales = t.clamped;
    q.stats.saturated = t.saturated;
    q.stats.flushed = t.flushed;
    fused = out != nullptr;
    return q;
  }
  if (simd_tensor) {
    // Per-tensor blocks: pass 1 the tensor amax, then one scale, pass 2 the cast, both
    // over chunks of kChunk elements in parallel.
    BlockJob job;
    job.x = xp;
    job.codes = codes;
    job.out = out;
    job.ctx = &ctx;
    const Amax total = whole_amax(job);
    q.amax = bits_to_float(total.finite);
    if (format.two_level()) set_tensor_scale(q.amax, ctx, q);
    const BlockScale s = block_scale(total, ctx);
    q.stats.clamped_scales = s.clamped ? 1 : 0;
    if (coded_scale) q.scale_codes[0] = s.code;
    else q.scale_values[0] = s.dec;
    const int64_t units = (L.numel + kChunk - 1) / kChunk;
    int64_t saturated = 0, flushed = 0;
#pragma omp parallel num_threads(threads) if (parallel)
    {
      BlockTotals mine;
#pragma omp for schedule(static)
      for (int64_t u = 0; u < units; ++u)
        simd_quantize_range(job, u * kChunk, std::min(kChunk, L.numel - u * kChunk), s, mine);
#pragma omp critical(lpx_quantize_merge)
      {
        saturated += mine.saturated;
        flushed += mine.flushed;
      }
    }
    q.stats.saturated = saturated;
    q.stats.flushed = flushed;
    fused = out != nullptr;
    return q;
  }
  if (simd_strided) {
    // Blocks along a non-last axis: per unit (slab o, block row rb, W columns), the
    // R_b x W tile is transposed into a buffer whose rows are the unit's blocks, cast by
    // the last-axis kernel, and its values (and codes) transposed back.
    const StridedView v = strided_view(L);
    const int64_t R = v.R, C = v.C, Lb = v.Lb, W = std::min(v.W, C);
    const int64_t chunks = (C + W - 1) / W, units = v.outer * v.G * chunks;
    const size_t tile = static_cast<size_t>(std::min(Lb, R) * W);
    const bool sr = opt.round == Rounding::sr;
    if (format.two_level()) {
      BlockJob whole;
      whole.x = xp;
      whole.ctx = &ctx;
      q.amax = bits_to_float(whole_amax(whole).finite);
      set_tensor_scale(q.amax, ctx, q);
    }
    uint32_t finite_max = 0;
    int64_t clamped = 0, saturated = 0, flushed = 0;
#pragma omp parallel num_threads(threads) if (parallel)
    {
      std::vector<float> in(tile), vals;
      std::vector<uint8_t> cbuf;
      // sr: the tile's random words drawn in the tensor's order, then transposed with it.
      std::vector<uint32_t> rows_rnd, rnd;
      if (sr) {
        rows_rnd.resize(tile);
        rnd.resize(tile);
      }
      if (out != nullptr) vals.resize(tile);
      if (codes != nullptr) cbuf.resize(tile);
      std::vector<uint8_t> sc(static_cast<size_t>(W));
      std::vector<float> sv(static_cast<size_t>(W));
      BlockTotals mine;
#pragma omp for schedule(static)
      for (int64_t u = 0; u < units; ++u) {
        const int64_t slab_row = u / chunks, c0 = (u % chunks) * W;  // slab_row = o * G + rb
        const int64_t o = slab_row / v.G, rb = slab_row % v.G;
        const int64_t r0 = rb * Lb, nr = std::min(Lb, R - r0), nc = std::min(W, C - c0);
        const int64_t first = (o * R + r0) * C + c0;  // flat index of the tile's (0, 0)
        transpose_in(xp + first, C, in.data(), nr, nc);
        BlockJob job;
        job.last_axis = true;
        job.row_len = nr;
        job.block_len = nr;
        job.per_row = 1;
        job.x = in.data();
        job.ctx = &ctx;
        if (sr) {
          simd_random_rows(job, rows_rnd.data(), nr, nc, static_cast<uint64_t>(first), C);
          transpose_in(rows_rnd.data(), nc, rnd.data(), nr, nc);
          job.rnd = rnd.data();
        }
        job.codes = codes != nullptr ? cbuf.data() : nullptr;
        job.out = out != nullptr ? vals.data() : nullptr;
        if (coded_scale) job.scale_codes = sc.data();
        else job.scale_values = sv.data();
        simd_quantize_blocks(job, 0, nc, mine);
        for (int64_t c = 0; c < nc; ++c) {
          const size_t b = static_cast<size_t>(slab_row * C + c0 + c);
          if (coded_scale) q.scale_codes[b] = sc[static_cast<size_t>(c)];
          else q.scale_values[b] = sv[static_cast<size_t>(c)];
        }
        if (out != nullptr) transpose_out(vals.data(), out + first, C, nr, nc);
        if (codes != nullptr) transpose_out(cbuf.data(), codes + first, C, nr, nc);
      }
#pragma omp critical(lpx_quantize_merge)
      {
        clamped += mine.clamped;
        saturated += mine.saturated;
        flushed += mine.flushed;
        finite_max = std::max(finite_max, mine.finite_max);
      }
    }
    if (!format.two_level()) q.amax = bits_to_float(finite_max);
    q.stats.clamped_scales = clamped;
    q.stats.saturated = saturated;
    q.stats.flushed = flushed;
    fused = out != nullptr;
    return q;
  }
  int64_t clamped = 0, saturated = 0, flushed = 0;

  auto store_scale = [&](int64_t b, const BlockScale& s) {
    if (s.clamped) ++clamped;
    if (coded_scale) q.scale_codes[static_cast<size_t>(b)] = s.code;
    else q.scale_values[static_cast<size_t>(b)] = s.dec;
  };

  if (!per_tensor && !format.two_level()) {
    // The common case (MX, 1x128, 128x128, per-row): one pass per block, amax -> scale -> cast.
    uint32_t finite_max = 0;
#pragma omp parallel for schedule(dynamic, 64) num_threads(threads) if (parallel) \
    reduction(+ : clamped, saturated, flushed) reduction(max : finite_max)
    for (int64_t b = 0; b < L.nblocks; ++b) {
      const Box box = L.box(b);
      const Amax a = block_amax(xp, box, opt);
      finite_max = std::max(finite_max, a.finite);
      const BlockScale s = block_scale(a, ctx);
      if (s.clamped) ++clamped;
      if (coded_scale) q.scale_codes[static_cast<size_t>(b)] = s.code;
      else q.scale_values[static_cast<size_t>(b)] = s.dec;
      QuantizeStats st;
      cast_block(xp, box, s, ctx, codes, st);
      saturated += st.saturated;
      flushed += st.flushed;
    }
    q.amax = bits_to_float(finite_max);
  } else {
    // Per-tensor blocks and NVFP4's two-level scale need an amax over the whole tensor
    // before any element is cast: pass 1 amax per work unit, pass 2 scale and cast.
    const int64_t units = per_tensor ? (L.numel + kChunk - 1) / kChunk : L.nblocks;
    auto unit_box = [&](int64_t u) {
      if (!per_tensor) return L.box(u);
      Box b;
      b.base = u * kChunk;
      b.cols = std::min(kChunk, L.numel - b.base);
      return b;
    };
    // (A per-tensor piece given the whole tensor's amax needs no pass 1.)
    const bool pass1 = !(per_tensor && opt.whole_tensor_amax);
    std::vector<Amax> amax(pass1 ? static_cast<size_t>(units) : 0);
#pragma omp parallel for schedule(dynamic, 64) num_threads(threads) if (parallel && pass1)
    for (int64_t u = 0; u < (pass1 ? units : 0); ++u)
      amax[static_cast<size_t>(u)] = block_amax(xp, unit_box(u), opt);
    Amax total;
    for (const Amax& a : amax) total.merge(a);
    if (opt.whole_tensor_amax) total = given_amax(*opt.whole_tensor_amax);
    q.amax = bits_to_float(total.finite);
    if (format.two_level()) set_tensor_scale(bits_to_float(total.finite), ctx, q);
    std::vector<BlockScale> scales;
    if (per_tensor) {
      scales.push_back(block_scale(total, ctx));
      store_scale(0, scales[0]);
    } else {
      scales.resize(nb);
      for (int64_t b = 0; b < L.nblocks; ++b) {
        scales[static_cast<size_t>(b)] = block_scale(amax[static_cast<size_t>(b)], ctx);
        store_scale(b, scales[static_cast<size_t>(b)]);
      }
    }
#pragma omp parallel for schedule(dynamic, 64) num_threads(threads) if (parallel) \
    reduction(+ : saturated, flushed)
    for (int64_t u = 0; u < units; ++u) {
      QuantizeStats st;
      cast_block(xp, unit_box(u), scales[per_tensor ? 0 : static_cast<size_t>(u)], ctx, codes, st);
      saturated += st.saturated;
      flushed += st.flushed;
    }
  }
  q.stats.clamped_scales = clamped;
  q.stats.saturated = saturated;
  q.stats.flushed = flushed;
  return q;
}

}  // namespace

TensorAmax tensor_amax(TensorView<const float> x, const BlockFormat& format,
                       const QuantizeOptions& opt) {
  validate(format);
  const Layout L = make_layout(x.shape, format);
  if (static_cast<int64_t>(x.data.size()) != L.numel)
    throw std::invalid_argument(fmt::format(
        "tensor_amax: the shape has {} elements but the data has {}", L.numel, x.data.size()));
  const int threads = thread_count(opt.threads);
  const bool parallel = L.numel >= kParallelMin && threads > 1;
  Amax total;
  if (!g_force_scalar.load(std::memory_order_relaxed) &&
      simd::detail::vectorizable(format.element, element_cast_options(opt))) {
    Context ctx;
    ctx.f = &format;
    ctx.lim = limits_of(format.element);
    ctx.opt = opt;
    BlockJob job;
    job.x = x.data.data();
    job.ctx = &ctx;
    total = simd_tensor_amax(job, L.numel, threads, parallel);
  } else {
    const int64_t units = (L.numel + kChunk - 1) / kChunk;
#pragma omp parallel num_threads(threads) if (parallel)
    {
      Amax mine;
#pragma omp for schedule(static)
      for (int64_t u = 0; u < units; ++u) {
        Box b;
        b.base = u * kChunk;
        b.cols = std::min(kChunk, L.numel - b.base);
        mine.merge(block_amax(x.data.data(), b, opt));
      }
#pragma omp critical(lpx_quantize_merge)
      total.merge(mine);
    }
  }
  return TensorAmax{total.all, total.finite};
}

QuantizedTensor quantize(TensorView<const float> x, const BlockFormat& format,
                         const QuantizeOptions& opt) {
  bool fused = false;
  return quantize_impl(x, format, opt, nullptr, fused);
}

void dequantize(const QuantizedTensor& q, std::span<float> out, int threads) {
  const BlockFormat& f = q.format;
  validate(f);
  const Layout L = make_layout(q.shape, f);
  if (static_cast<int64_t>(out.size()) != L.numel || static_cast<int64_t>(q.codes.size()) != L.numel)
    throw std::invalid_argument(fmt::format(
        "dequantize: the shape has {} elements but the codes have {} and the output {}", L.numel,
        q.codes.size(), out.size()));
  const bool coded_scale = f.scale_is_code();
  const size_t nscales = coded_scale ? q.scale_codes.size() : q.scale_values.size();
  if (static_cast<int64_t>(nscales) != L.nblocks)
    throw std::invalid_argument(fmt::format(
        "dequantize: {} block scales for {} blocks", nscales, L.nblocks));
  if (f.two_level() && !q.tensor_scale)
    throw std::invalid_argument("dequantize: a two-level (e4m3) format needs its tensor scale");
  const float tensor_dec = q.tensor_scale.value_or(1.0f);
  const bool two_level = f.two_level();
  auto block_dec = [&](int64_t b) -> float {
    const size_t i = static_cast<size_t>(b);
    return coded_scale ? block_scaling::decode_scale(f.scale, q.scale_codes[i], 0.0f)
                       : q.scale_values[i];
  };
  const uint8_t* codes = q.codes.data();
  float* o = out.data();
  const ElementFormat e = f.element;
  const bool headroom = q.headroom_3_4;
  auto run_box = [&](const Box& b, float dec) {
    for (int64_t r = 0; r < b.rows; ++r)
      for (int64_t c = 0; c < b.cols; ++c) {
        const int64_t i = b.base + r * b.row_stride + c * b.col_stride;
        o[i] = dequant_value(codes[i], dec, e, two_level, tensor_dec, headroom);
      }
  };
  const int nt = thread_count(threads);
  const bool parallel = L.numel >= kParallelMin && nt > 1;
  const bool simd_ok = L.numel > 0 && !g_force_scalar.load(std::memory_order_relaxed);
  BlockJob rows_job;  // simd_dequantize_rows: codes, out and the element decode
  rows_job.codes = const_cast<uint8_t*>(codes);
  rows_job.out = o;
  rows_job.element = e;
  rows_job.tensor_dec = tensor_dec;
  rows_job.two_level = two_level;
  rows_job.headroom = headroom;
  if (simd_ok && simd_tensor_supported(f, L, QuantizeOptions{})) {
    const float dec = block_dec(0);
    const int64_t units = (L.numel + kChunk - 1) / kChunk;
#pragma omp parallel for schedule(static) num_threads(nt) if (parallel)
    for (int64_t u = 0; u < units; ++u)
      simd_dequantize_rows(rows_job, u * kChunk, 1, std::min(kChunk, L.numel - u * kChunk),
                           nullptr, dec);
    return;
  }
  if (simd_ok && simd_strided_supported(f, L, QuantizeOptions{})) {
    // Blocks along a non-last axis: row r of a slab takes block row r / Lb of the slab's
    // scales, contiguous over the columns.
    const StridedView v = strided_view(L);
    const int64_t rows = v.outer * v.G;  // block rows, over all slabs
#pragma omp parallel num_threads(nt) if (parallel)
    {
      std::vector<float> decs(static_cast<size_t>(v.C));
#pragma omp for schedule(static)
      for (int64_t br = 0; br < rows; ++br) {
        const int64_t slab = br / v.G, r0 = (br % v.G) * v.Lb;
        for (int64_t c = 0; c < v.C; ++c) decs[static_cast<size_t>(c)] = block_dec(br * v.C + c);
        simd_dequantize_rows(rows_job, (slab * v.R + r0) * v.C, std::min(v.Lb, v.R - r0), v.C,
                             decs.data(), 1.0f);
      }
    }
    return;
  }
  if (simd_ok && simd_supported(f, L, QuantizeOptions{})) {
    BlockJob job = make_job(L);
    // The kernel only reads the scales and codes in dequantize (BlockJob's pointers are
    // shared with quantize, which writes them).
    job.codes = const_cast<uint8_t*>(codes);
    job.scale_codes = const_cast<uint8_t*>(q.scale_codes.data());
    job.scale_values = const_cast<float*>(q.scale_values.data());
    job.out = o;
    job.scale_format = f.scale;
    job.element = e;
    job.tensor_dec = tensor_dec;
    job.two_level = two_level;
    job.headroom = headroom;
    struct None {};
    for_block_groups<None>(
        L.nblocks, block_elems(L), nt, parallel,
        [&](int64_t b0, int64_t b1, None&) { simd_dequantize_blocks(job, b0, b1); },
        [](None&, const None&) {});
    return;
  }
  if (f.block.kind == BlockShape::Kind::tensor) {
    const float dec = L.numel > 0 ? block_dec(0) : 1.0f;
    const int64_t units = (L.numel + kChunk - 1) / kChunk;
#pragma omp parallel for schedule(static) num_threads(nt) if (parallel)
    for (int64_t u = 0; u < units; ++u) {
      Box b;
      b.base = u * kChunk;
      b.cols = std::min(kChunk, L.numel - b.base);
      run_box(b, dec);
    }
  } else {
#pragma omp parallel for schedule(dynamic, 64) num_threads(nt) if (parallel)
    for (int64_t b = 0; b < L.nblocks; ++b) run_box(L.box(b), block_dec(b));
  }
}

QuantizedTensor fake_quantize(TensorView<const float> x, std::span<float> out,
                              const BlockFormat& format, const QuantizeOptions& opt) {
  if (out.size() != x.data.size())
    throw std::invalid_argument(fmt::format(
        "fake_quantize: the input has {} elements but the output {}", x.data.size(), out.size()));
  bool fused = false;
  QuantizedTensor q = quantize_impl(x, format, opt, out.data(), fused);
  if (!fused) dequantize(q, out, opt.threads);
  return q;
}

QuantizedTensor fake_quantize_values(TensorView<const float> x, std::span<float> out,
                                     const BlockFormat& format, const QuantizeOptions& opt) {
  if (out.size() != x.data.size())
    throw std::invalid_argument(fmt::format(
        "fake_quantize: the input has {} elements but the output {}", x.data.size(), out.size()));
  bool fused = false;
  QuantizedTensor q = quantize_impl(x, format, opt, out.data(), fused, /*skip_codes=*/true);
  if (!fused) dequantize(q, out, opt.threads);
  q.codes.clear();
  q.codes.shrink_to_fit();
  return q;
}

}  // namespace lpx
