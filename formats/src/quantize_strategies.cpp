// The strategies of block quantization (quantize_internal.hpp): how one quantize() or
// dequantize() call is cut into kernel calls and spread over threads, and
// select_strategy(), which picks one from the format, the block layout and the options.
// The kernels are the SIMD ones (quantize_hwy.cpp) or the scalar reference
// (quantize.cpp); a strategy only splits the work and merges the totals
// (BlockTotals::merge), and every block's result depends only on the block, so each
// strategy gives the reference's bits for any thread count.
#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "codec_simd.hpp"
#include "lpx/numerics/parallel.hpp"
#include "lpx/numerics/scratch.hpp"
#include "quantize_internal.hpp"

namespace lpx::quantize_detail {

namespace {

// Chunks of a per-tensor block (and of pass 1), so one huge block still uses every
// thread. The split never changes a result: amax is a max and elements are independent.
constexpr int64_t kChunk = int64_t{1} << 15;
// Below this many elements a parallel region costs more than it saves (and oversubscribed
// machines make OpenMP's spinning threads very slow); results are the same either way.
constexpr int64_t kParallelMin = int64_t{1} << 14;
// Elements per work unit: whole blocks adding up to about 8 Ki elements (32 KiB in, the
// working set of one unit stays in L1/L2).
constexpr int64_t kGroupElems = int64_t{1} << 13;

#pragma omp declare reduction(lpx_totals : BlockTotals : omp_out.merge(omp_in)) \
    initializer(omp_priv = BlockTotals{})
#pragma omp declare reduction(lpx_amax : Amax : omp_out.merge(omp_in)) initializer(omp_priv = Amax{})

// Chunk u of the flat run of numel elements.
Box chunk_box(int64_t u, int64_t numel) {
  Box b;
  b.base = u * kChunk;
  b.cols = std::min(kChunk, numel - b.base);
  return b;
}
int64_t chunk_count(int64_t numel) { return (numel + kChunk - 1) / kChunk; }

// Runs fn(u0, u1, totals) over units [0, units) of unit_elems elements each, in runs of
// whole units adding up to about kGroupElems elements, in parallel when c.parallel; the
// threads' totals are merged (lpx_totals). Every unit's result depends only on the unit,
// and the merges are sums and maxima, so the totals do not depend on the thread count or
// the schedule.
template <class Fn>
BlockTotals for_units(const TensorCall& c, int64_t units, int64_t unit_elems, Fn fn) {
  BlockTotals total;
  if (!c.parallel) {
    fn(int64_t{0}, units, total);  // no OpenMP region at all for small tensors
    return total;
  }
  const int64_t per = std::max<int64_t>(1, kGroupElems / std::max<int64_t>(1, unit_elems));
  const int64_t groups = (units + per - 1) / per;
#pragma omp parallel for schedule(static) num_threads(c.threads) reduction(lpx_totals : total)
  for (int64_t g = 0; g < groups; ++g) fn(g * per, std::min(units, (g + 1) * per), total);
  return total;
}

// Elements in a full block of L.
int64_t block_elems(const Layout& L) {
  int64_t n = 1;
  for (size_t d = 0; d < L.ext.size(); ++d) n *= std::min(L.ext[d], std::max<int64_t>(L.shape[d], 1));
  return n;
}

// for_units over the blocks of c's layout: fn(b0, b1, totals).
template <class Fn>
BlockTotals for_blocks(const TensorCall& c, Fn fn) {
  const Layout& L = *c.job.layout;
  return for_units(c, L.nblocks, block_elems(L), fn);
}

// for_units over the chunks of the flat tensor: fn(chunk's box, totals) per chunk.
template <class Fn>
BlockTotals for_chunks(const TensorCall& c, Fn fn) {
  const int64_t numel = c.job.layout->numel;
  return for_units(c, chunk_count(numel), kChunk, [&](int64_t u0, int64_t u1, BlockTotals& t) {
    for (int64_t u = u0; u < u1; ++u) fn(chunk_box(u, numel), t);
  });
}

// The strided strategy's tile transpositions, in bands of 8 rows: for each column the
// band's elements are 8 consecutive entries of the transposed side, and the band's rows
// are 8 cache lines of the row-major side, so both stay in L1 however tall the tile is
// (per-channel scales along axis 0 have tiles of thousands of rows).
constexpr int64_t kBand = 8;

// An 8 x 8 block of 4-byte elements: d[c * ds + r] = s[r * ss + c], in three rounds of
// shuffles (pairs of elements, then pairs of pairs, then halves) on 8-lane vectors, in
// place of 64 single-element loads and stores. Bits are moved, never converted.
typedef uint32_t W8 __attribute__((vector_size(32)));
[[gnu::always_inline]] inline void transpose_8x8(const uint32_t* src, int64_t ss, uint32_t* dst, int64_t ds) {
  W8 r[8], t[8], u[8], c[8];
  for (int i = 0; i < 8; ++i) std::memcpy(&r[i], src + i * ss, sizeof(W8));
  for (int i = 0; i < 8; i += 2) {
    t[i] = __builtin_shufflevector(r[i], r[i + 1], 0, 8, 1, 9, 2, 10, 3, 11);
    t[i + 1] = __builtin_shufflevector(r[i], r[i + 1], 4, 12, 5, 13, 6, 14, 7, 15);
  }
  for (int i = 0; i < 8; i += 4) {
    u[i] = __builtin_shufflevector(t[i], t[i + 2], 0, 1, 8, 9, 2, 3, 10, 11);
    u[i + 1] = __builtin_shufflevector(t[i], t[i + 2], 4, 5, 12, 13, 6, 7, 14, 15);
    u[i + 2] = __builtin_shufflevector(t[i + 1], t[i + 3], 0, 1, 8, 9, 2, 3, 10, 11);
    u[i + 3] = __builtin_shufflevector(t[i + 1], t[i + 3], 4, 5, 12, 13, 6, 7, 14, 15);
  }
  for (int i = 0; i < 4; ++i) {
    c[2 * i] = __builtin_shufflevector(u[i], u[i + 4], 0, 1, 2, 3, 8, 9, 10, 11);
    c[2 * i + 1] = __builtin_shufflevector(u[i], u[i + 4], 4, 5, 6, 7, 12, 13, 14, 15);
  }
  for (int i = 0; i < 8; ++i) std::memcpy(dst + i * ds, &c[i], sizeof(W8));
}

// `count` 8 x 8 blocks side by side: block b reads from s + b * s_step and writes to
// d + b * d_step. Cloned for AVX-512 and AVX2, where the shuffles are a few instructions
// each (compiled for the x86-64 baseline alone, GCC moves the elements through memory).
__attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default"))) void transpose_8x8_row(
    const uint32_t* s, int64_t ss, int64_t s_step, uint32_t* d, int64_t ds, int64_t d_step, int64_t count) {
  for (int64_t b = 0; b < count; ++b) transpose_8x8(s + b * s_step, ss, d + b * d_step, ds);
}

// dst[c * rows + r] = src[r * stride + c]
template <class T>
void transpose_in(const T* src, int64_t stride, T* dst, int64_t rows, int64_t cols) {
  for (int64_t r0 = 0; r0 < rows; r0 += kBand) {
    const int64_t r1 = std::min(rows, r0 + kBand);
    int64_t c = 0;
    if constexpr (sizeof(T) == 4)
      if (r1 - r0 == kBand) {
        c = cols / 8 * 8;
        transpose_8x8_row(reinterpret_cast<const uint32_t*>(src + r0 * stride), stride, 8,
                          reinterpret_cast<uint32_t*>(dst + r0), rows, 8 * rows, cols / 8);
      }
    for (; c < cols; ++c)
      for (int64_t r = r0; r < r1; ++r) dst[c * rows + r] = src[r * stride + c];
  }
}
// dst[r * stride + c] = src[c * rows + r]
template <class T>
void transpose_out(const T* src, T* dst, int64_t stride, int64_t rows, int64_t cols) {
  for (int64_t r0 = 0; r0 < rows; r0 += kBand) {
    const int64_t r1 = std::min(rows, r0 + kBand);
    int64_t c = 0;
    if constexpr (sizeof(T) == 4)
      if (r1 - r0 == kBand) {
        c = cols / 8 * 8;
        transpose_8x8_row(reinterpret_cast<const uint32_t*>(src + r0), rows, 8 * rows,
                          reinterpret_cast<uint32_t*>(dst + r0 * stride), stride, 8, cols / 8);
      }
    for (; c < cols; ++c)
      for (int64_t r = r0; r < r1; ++r) dst[r * stride + c] = src[c * rows + r];
  }
}

}  // namespace

// ---------------------------------------------------------------------------------------
// Selection.

StridedView strided_view(const Layout& L) {
  StridedView v;
  const size_t a = static_cast<size_t>(L.col_axis);
  for (size_t d = 0; d < a; ++d) v.outer *= L.shape[d];
  v.R = L.shape[a];
  for (size_t d = a + 1; d < L.shape.size(); ++d) v.C *= L.shape[d];
  v.Lb = L.ext[a];
  v.G = L.grid[a];
  v.W = std::max<int64_t>(16, kGroupElems / std::max<int64_t>(v.Lb, 1));
  return v;
}

bool simd_kernels_apply(const BlockFormat& f, const QuantizeOptions& opt) {
  // The block kernels read caller-given words (job.rnd) where they would draw Philox's, so
  // unlike the array casts they take them: vectorizable() is asked without them.
  CastOptions co = element_cast_options(opt);
  co.random_words = nullptr;
  return opt.path == QuantizePath::fastest && simd::detail::vectorizable(f.element, co);
}

Selection select_strategy(const BlockFormat& f, const Layout& L, const QuantizeOptions& opt) {
  const bool simd = simd_kernels_apply(f, opt);
  if (L.kind == BlockShape::Kind::tensor) return {Strategy::per_tensor, simd};
  // (An amax history goes with per-tensor blocks only; quantize() rejects anything else.)
  if (!simd || opt.history != nullptr) return {Strategy::reference, false};
  // Tiles' rows are contiguous, and so are 1xN and per-row blocks along the last axis.
  if (L.kind == BlockShape::Kind::tile || L.col_axis == static_cast<int>(L.shape.size()) - 1)
    return {Strategy::contiguous, true};
  const StridedView v = strided_view(L);
  if (std::min(v.Lb, v.R) * std::min(v.W, v.C) <= (int64_t{1} << 20))
    return {Strategy::strided, true};
  return {Strategy::reference, false};
}

// Blocks along the last axis get the job's cheap box arithmetic (BlockJob::last_axis).
TensorCall make_call(const Layout& L, int threads) {
  TensorCall c;
  c.job.layout = &L;
  const int last = static_cast<int>(L.shape.size()) - 1;
  if ((L.kind == BlockShape::Kind::vector || L.kind == BlockShape::Kind::channel) &&
      L.col_axis == last) {
    c.job.last_axis = true;
    c.job.row_len = L.shape[static_cast<size_t>(last)];
    c.job.block_len = L.ext[static_cast<size_t>(last)];
    c.job.per_row = L.grid[static_cast<size_t>(last)];
  }
  c.threads = threads > 0 ? threads : omp_get_max_threads();
  c.parallel = L.numel >= kParallelMin && c.threads > 1;
  return c;
}

Amax measure_tensor_amax(const TensorCall& c, bool simd) {
  const int64_t numel = c.job.layout->numel;
  const int64_t units = chunk_count(numel);
  const auto unit_amax = [&](int64_t u) {
    const Box b = chunk_box(u, numel);
    return simd ? simd_range_amax(c.job, b.base, b.cols) : block_amax(c.job.x, b, c.job.ctx->opt);
  };
  Amax total;
  if (!c.parallel) {  // no OpenMP region at all (an if(false) region still costs a futex call)
    for (int64_t u = 0; u < units; ++u) total.merge(unit_amax(u));
    return total;
  }
#pragma omp parallel for schedule(static) num_threads(c.threads) reduction(lpx_amax : total)
  for (int64_t u = 0; u < units; ++u) total.merge(unit_amax(u));
  return total;
}

// ---------------------------------------------------------------------------------------
// quantize().

BlockTotals quantize_contiguous(const TensorCall& c) {
  return for_blocks(c, [&](int64_t b0, int64_t b1, BlockTotals& t) {
    simd_quantize_blocks(c.job, b0, b1, t);
  });
}

BlockTotals quantize_strided(const TensorCall& c) {
  // Per unit (slab o, block row rb, W columns), the R_b x W tile is transposed into a
  // buffer whose rows are the unit's blocks, cast by the last-axis kernel, and its values
  // (and codes, and scales) put back where the tensor keeps them.
  const BlockJob& whole = c.job;
  const Context& ctx = *whole.ctx;
  const StridedView v = strided_view(*whole.layout);
  const int64_t R = v.R, C = v.C, Lb = v.Lb, W = std::min(v.W, C);
  const int64_t chunks = (C + W - 1) / W, units = v.outer * v.G * chunks;
  const size_t tile = static_cast<size_t>(std::min(Lb, R) * W);
  const bool sr = is_stochastic(ctx.opt.round);
  // Each thread's share of the units into its own totals t and scratch buffers, merged at
  // the end (sums and maxima: the same totals in any order). A call that is not parallel
  // opens no OpenMP region at all (numerics/parallel.hpp).
  BlockTotals total;
  parallel_for_threads(units, c.parallel ? c.threads : 1, [&](auto&& each) {
    BlockTotals t;
    // The column-lane kernel needs only rows_rnd (sr); the transposing path's buffers are
    // sized when a tile first takes it (most tiles of finite data never do).
    ScratchBuffer<uint32_t> rows_rnd_buf;
    uint32_t* const rows_rnd = sr ? rows_rnd_buf.get(tile) : nullptr;  // written before it is read
    std::vector<float> in, vals;
    std::vector<uint8_t> codes;
    std::vector<uint32_t> rnd;  // sr: the tile's words drawn in the tensor's order, then transposed with it
    std::vector<uint8_t> sc;
    std::vector<float> sv;
    BlockJob job;  // the tile's blocks: the rows of the buffer
    job.last_axis = true;
    job.per_row = 1;
    job.ctx = &ctx;
    const auto transposing_buffers = [&] {
      in.resize(tile);
      vals.resize(whole.out != nullptr ? tile : 0);
      codes.resize(whole.codes != nullptr ? tile : 0);
      rnd.resize(sr ? tile : 0);
      sc.resize(static_cast<size_t>(W));
      sv.resize(static_cast<size_t>(W));
      job.x = in.data();
      job.rnd = sr ? rnd.data() : nullptr;
      job.codes = whole.codes != nullptr ? codes.data() : nullptr;
      job.out = whole.out != nullptr ? vals.data() : nullptr;
      if (whole.scale_codes != nullptr) job.scale_codes = sc.data();
      else job.scale_values = sv.data();
    };
    const auto unit = [&](int64_t u) {
      const int64_t slab_row = u / chunks, c0 = (u % chunks) * W;  // slab_row = o * G + rb
      const int64_t o = slab_row / v.G, rb = slab_row % v.G;
      const int64_t r0 = rb * Lb, nr = std::min(Lb, R - r0), nc = std::min(W, C - c0);
      const int64_t first = (o * R + r0) * C + c0;  // flat index of the tile's (0, 0)
      if (simd_quantize_columns(whole, first, nr, nc, C, slab_row * C + c0, rows_rnd, t)) return;
      if (in.empty()) transposing_buffers();
      job.row_len = nr;
      job.block_len = nr;
      transpose_in(whole.x + first, C, in.data(), nr, nc);
      if (sr) {
        simd_random_rows(whole, rows_rnd, nr, nc, static_cast<uint64_t>(first), C);  // whole: its job.rnd
        transpose_in(rows_rnd, nc, rnd.data(), nr, nc);
      }
      simd_quantize_blocks(job, 0, nc, t);
      for (int64_t col = 0; col < nc; ++col) {
        const size_t b = static_cast<size_t>(slab_row * C + c0 + col);
        if (whole.scale_codes != nullptr) whole.scale_codes[b] = sc[static_cast<size_t>(col)];
        else whole.scale_values[b] = sv[static_cast<size_t>(col)];
      }
      if (whole.out != nullptr) transpose_out(vals.data(), whole.out + first, C, nr, nc);
      if (whole.codes != nullptr) transpose_out(codes.data(), whole.codes + first, C, nr, nc);
    };
    each(unit);
#pragma omp critical(lpx_quantize_strided_totals)
    total.merge(t);
  });
  return total;
}

BlockTotals quantize_per_tensor(const TensorCall& c, const Amax& tensor, bool simd) {
  const BlockScale s = block_scale(tensor, *c.job.ctx);
  c.job.store_scale(0, s);
  BlockTotals total = for_chunks(c, [&](const Box& b, BlockTotals& t) {
    if (simd) {
      simd_quantize_range(c.job, b.base, b.cols, s, t);
    } else {
      QuantizeStats st;
      reference_cast(c.job, b, s, st);
      t.add(st);
    }
  });
  total.clamped = s.clamped ? 1 : 0;
  return total;
}

BlockTotals quantize_reference(const TensorCall& c) {
  return for_blocks(c, [&](int64_t b0, int64_t b1, BlockTotals& t) {
    reference_blocks(c.job, b0, b1, t);
  });
}

// ---------------------------------------------------------------------------------------
// dequantize().

void dequantize_contiguous(const TensorCall& c) {
  for_blocks(c, [&](int64_t b0, int64_t b1, BlockTotals&) { simd_dequantize_blocks(c.job, b0, b1); });
}

void dequantize_strided(const TensorCall& c) {
  // Row r of a slab takes block row r / Lb of the slab's scales, contiguous over the columns.
  const StridedView v = strided_view(*c.job.layout);
  const int64_t rows = v.outer * v.G;  // block rows, over all slabs
  // each thread with its own row of scale values; no region when the call is not parallel
  parallel_for_threads(rows, c.parallel ? c.threads : 1, [&](auto&& each) {
    std::vector<float> decs(static_cast<size_t>(v.C));
    const auto row = [&](int64_t br) {
      const int64_t slab = br / v.G, r0 = (br % v.G) * v.Lb;
      for (int64_t col = 0; col < v.C; ++col)
        decs[static_cast<size_t>(col)] = c.job.dec_of(br * v.C + col);
      simd_dequantize_rows(c.job, (slab * v.R + r0) * v.C, std::min(v.Lb, v.R - r0), v.C,
                           decs.data(), 1.0f);
    };
    each(row);
  });
}

void dequantize_per_tensor(const TensorCall& c, bool simd) {
  const float dec = c.job.dec_of(0);
  for_chunks(c, [&](const Box& b, BlockTotals&) {
    if (simd) simd_dequantize_rows(c.job, b.base, 1, b.cols, nullptr, dec);
    else reference_dequantize(c.job, b, dec);
  });
}

void dequantize_reference(const TensorCall& c) {
  for_blocks(c, [&](int64_t b0, int64_t b1, BlockTotals&) {
    for (int64_t b = b0; b < b1; ++b) reference_dequantize(c.job, c.job.box(b), c.job.dec_of(b));
  });
}

}  // namespace lpx::quantize_detail
