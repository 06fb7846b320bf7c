// hadamard_blocks (numerics/hadamard.hpp): the recipes' blocked random Hadamard transform
// on the CPU, bit for bit with hadamard_row, which defines it.
//
// Each block runs hadamard_row's arithmetic on doubles in 8-lane vectors (GCC/Clang vector
// extensions, compiled for AVX-512, AVX2 and the baseline with run-time dispatch): the
// same double products with the signs, the same butterflies stage by stage in ascending h
// (the order within a stage does not matter: every output depends only on its own two
// inputs), one multiply by 1/sqrt(n), one rounding to float32.
//   - axis 0 (down columns): the lanes are 8 neighbouring columns, so every butterfly is
//     one vector addition or subtraction between two rows of the block. For n = 16 the
//     block's rows stay in registers; for n >= 32 a strip of 16 columns (two vectors per
//     row) runs in two passes, the stages h = 1, 2, 4 on groups of 8 consecutive rows,
//     then h = 8 ... n/2 on the rows o, o + 8, o + 16, ... (n / 8 of them). Each value
//     still meets the stages in ascending h. Fixed sizes took the transform from 0.6-1.1
//     to 0.3-0.6 ns per element (one thread) next to a loop over a runtime n, which moved
//     every stage's vectors through memory. For n = 128 a band of rows is first copied
//     into a tile whose rows are 256 bytes apart (columns_n says why).
//   - axis 1 (along rows): the lanes are 8 consecutive elements of one block, so no
//     transposition is needed; the stages h = 1, 2, 4 pair lanes of one vector (a lane
//     shuffle, a sign flip and an addition), and h >= 8 pair whole vectors.
// Columns past the last multiple of 8 (axis 0) and blocks shorter than 8 (axis 1) take
// hadamard_row itself. Operands of 2^16 elements or more are split into pieces of rows
// (axis 1) or columns (axis 0) over OpenMP threads.
#include "lpx/numerics/hadamard.hpp"
#include "lpx/numerics/parallel.hpp"

#include <algorithm>
#include <cstring>

// The helpers take and give vectors by reference: a 64-byte vector passed by value to a
// function of the AVX2 or baseline clone is an ABI change Clang refuses (GCC warns).

namespace lpx {
namespace {

typedef double D8 __attribute__((vector_size(64)));
typedef float F8 __attribute__((vector_size(32)));

[[gnu::always_inline]] inline void load8(D8& v, const float* p) {
  F8 f;
  std::memcpy(&f, p, sizeof f);
  v = __builtin_convertvector(f, D8);
}

// static_cast<float>(v * scale) per lane: the product in double, one rounding.
[[gnu::always_inline]] inline void store8(float* p, const D8& v, double scale) {
  const F8 f = __builtin_convertvector(v * scale, F8);
  std::memcpy(p, &f, sizeof f);
}

// The stages h = 1, 2, 4 inside a vector: lane j with bit h clear gets x[j] + x[j + h],
// lane j with it set gets x[j - h] - x[j]. With t = x with partners swapped, both are
// t + (+-x): the sign flip is exact and a + b = b + a, so each stage is one shuffle, one
// xor and one addition, rounded once as hadamard_row's (a NaN's sign may differ: its
// payload is not part of the contract). Next to computing both sums and blending them it
// took the transform along rows from 0.62 to 0.47 ns per element for n = 32 and from
// 0.66-0.71 to 0.50-0.53 for n = 128 (lpx_bench_operand's hadamard/axis1/N, 1024 x 512,
// one thread, two runs each).
typedef long long L8 __attribute__((vector_size(64)));

[[gnu::always_inline]] inline void lane_stages(D8& x) {
  constexpr long long s = static_cast<long long>(0x8000000000000000ull);
  D8 t = __builtin_shufflevector(x, x, 1, 0, 3, 2, 5, 4, 7, 6);
  x = t + (D8)((L8)x ^ L8{0, s, 0, s, 0, s, 0, s});
  t = __builtin_shufflevector(x, x, 2, 3, 0, 1, 6, 7, 4, 5);
  x = t + (D8)((L8)x ^ L8{0, 0, s, s, 0, 0, s, s});
  t = __builtin_shufflevector(x, x, 4, 5, 6, 7, 0, 1, 2, 3);
  x = t + (D8)((L8)x ^ L8{0, 0, 0, 0, s, s, s, s});
}

// Butterflies between vectors: for h = 1, 2, ... < m (ascending), (v[j], v[j + h]) <-
// (v[j] + v[j + h], v[j] - v[j + h]). fwht_unnormalized's loop, written again so that it
// is always inlined and compiled into each target clone; with m known at compile time it
// unrolls and the vectors stay in registers.
[[gnu::always_inline]] inline void vector_stages(D8* v, int m) {
#pragma GCC unroll 128
  for (int h = 1; h < m; h *= 2)
#pragma GCC unroll 128
    for (int i = 0; i < m; i += 2 * h)
#pragma GCC unroll 128
      for (int j = i; j < i + h; ++j) {
        const D8 a = v[j], b = v[j + h];
        v[j] = a + b;
        v[j + h] = a - b;
      }
}

// Every block of N along each row, N in {8, ..., 128}.
template <int N>
[[gnu::always_inline]] inline void rows_n(const float* src, float* dst, int64_t rows, int64_t cols,
                                          const float* signs, double scale) {
  constexpr int M = N / 8;
  D8 sg[M];
  for (int q = 0; q < M; ++q)
    for (int l = 0; l < 8; ++l) sg[q][l] = signs ? static_cast<double>(signs[8 * q + l]) : 1.0;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; c += N) {
      const float* p = src + r * cols + c;
      D8 v[M];
      for (int q = 0; q < M; ++q) {
        load8(v[q], p + 8 * q);
        v[q] *= sg[q];
        lane_stages(v[q]);
      }
      vector_stages(v, M);
      for (int q = 0; q < M; ++q) store8(dst + r * cols + c + 8 * q, v[q], scale);
    }
}

// Rows [r0, r1), every block along each.
__attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default"))) void blocks_along_rows(
    const float* src, float* dst, int64_t r0, int64_t r1, int64_t cols, int n, const float* signs,
    double scale) {
  const float* first = src + r0 * cols;
  float* first_out = dst + r0 * cols;
  const int64_t rows = r1 - r0;
  switch (n) {
    case 8: return rows_n<8>(first, first_out, rows, cols, signs, scale);
    case 16: return rows_n<16>(first, first_out, rows, cols, signs, scale);
    case 32: return rows_n<32>(first, first_out, rows, cols, signs, scale);
    case 64: return rows_n<64>(first, first_out, rows, cols, signs, scale);
    case 128: return rows_n<128>(first, first_out, rows, cols, signs, scale);
    default:
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t c = 0; c < cols; c += n)
          hadamard_row(first + r * cols + c, first_out + r * cols + c, n, signs);
  }
}

// One 8-column strip of a band of N rows, N in {16, 32}: the block's N rows in registers
// (all 32 vectors for N = 32, AVX-512's register count), rows `stride` floats apart, into
// q (which may be p: the strip is read whole before it is written).
template <int N>
[[gnu::always_inline]] inline void strip8_n(const float* p, float* q, int64_t stride, const double (&sg)[N],
                                            double scale) {
  D8 v[N];
#pragma GCC unroll 32
  for (int i = 0; i < N; ++i) {
    load8(v[i], p + i * stride);
    v[i] *= sg[i];
  }
  vector_stages(v, N);
#pragma GCC unroll 32
  for (int i = 0; i < N; ++i) store8(q + i * stride, v[i], scale);
}

// One 16-column strip of a band of N rows, N in {32, 64, 128}, in two passes: the stages
// h = 1, 2, 4 on groups of 8 consecutive rows into mid (in L1), then h = 8 ... N/2 on the
// rows o, o + 8, o + 16, ... (N / 8 of them), each half of the strip on its own. Each value
// still meets the stages in ascending h. A row's 16 columns are one 64-byte line (for
// rows that start on a line), read whole by the first pass and written whole by the
// second: in the tensor the band's rows lie a whole row apart, a power of two bytes for
// the usual widths (2 KiB at 512 columns), so they fall into one or two sets of the L1
// cache and evict each other; an 8-column strip used half of each line and found it
// evicted when the next strip came for the other half. q may be p (the strip is read
// whole before it is written).
template <int N>
[[gnu::always_inline]] inline void strip16_n(const float* p, float* q, int64_t stride, const double (&sg)[N],
                                             double scale) {
  D8 mid[N][2];  // after stages 1, 2, 4
  for (int g = 0; g < N; g += 8) {
    D8 w0[8], w1[8];
#pragma GCC unroll 8
    for (int i = 0; i < 8; ++i) {
      load8(w0[i], p + (g + i) * stride);
      load8(w1[i], p + (g + i) * stride + 8);
      w0[i] *= sg[g + i];
      w1[i] *= sg[g + i];
    }
    vector_stages(w0, 8);
    vector_stages(w1, 8);
#pragma GCC unroll 8
    for (int i = 0; i < 8; ++i) {
      mid[g + i][0] = w0[i];
      mid[g + i][1] = w1[i];
    }
  }
  constexpr int kGroup = N / 8;  // rows o, o + 8, ...: stage h = 8 * h' pairs w[j] and w[j + h']
  for (int o = 0; o < 8; ++o)
#pragma GCC unroll 2
    for (int half = 0; half < 2; ++half) {
      D8 w[kGroup];
#pragma GCC unroll 16
      for (int m = 0; m < kGroup; ++m) w[m] = mid[o + 8 * m][half];
      vector_stages(w, kGroup);
#pragma GCC unroll 16
      for (int m = 0; m < kGroup; ++m) store8(q + (o + 8 * m) * stride + 8 * half, w[m], scale);
    }
}

// The widest column piece hadamard_blocks hands blocks_down_columns.
constexpr int64_t kColumnPiece = 64;

// Every block of N down the strips from c0 to vec_cols (a multiple of 8 columns, at most
// kColumnPiece of them), N in {16, ..., 128}. N = 16 takes strips of 8 columns: its 16
// rows share their sets without evicting each other. Larger N take strips of 16
// (strip16_n says why), and an 8-column strip for a width that leaves one. This took
// N = 32 from 0.79 to 0.39-0.41 ns per element on a 1024 x 512 operand and from 0.37-0.39
// to 0.32 on 1024 x 128 (gpt-small's width), next to 8-column strips that held all 32 rows
// in registers; N = 64 from 0.52 to 0.47-0.48 and from 0.50 to 0.37, next to copying each
// band into a tile and back (lpx_bench_operand's hadamard/axis0/N, one thread, two runs
// each). N = 128 still goes through the tile, whose rows are 256 bytes apart and fill
// whole lines of their own: straight from the tensor its 128 rows evict each other and
// the 16 KiB of mid, 0.72 ns per element against 0.57-0.59 with the tile.
template <int N>
[[gnu::always_inline]] inline void columns_n(const float* src, float* dst, int64_t rows, int64_t cols, int64_t c0,
                                             int64_t vec_cols, const float* signs, double scale) {
  double sg[N];
  for (int i = 0; i < N; ++i) sg[i] = signs ? static_cast<double>(signs[i]) : 1.0;
  for (int64_t r0 = 0; r0 < rows; r0 += N) {
    const float* p = src + r0 * cols;
    float* q = dst + r0 * cols;
    int64_t c = c0;
    if constexpr (N == 128) {
      alignas(64) float tile[N * kColumnPiece];
      const int64_t width = (vec_cols - c0) / 16 * 16;
      for (int i = 0; i < N; ++i) std::memcpy(tile + i * kColumnPiece, p + i * cols + c0, width * sizeof(float));
      for (int64_t t = 0; t < width; t += 16) strip16_n<N>(tile + t, tile + t, kColumnPiece, sg, scale);
      for (int i = 0; i < N; ++i) std::memcpy(q + i * cols + c0, tile + i * kColumnPiece, width * sizeof(float));
      c += width;
    } else if constexpr (N >= 32) {
      for (; c + 16 <= vec_cols; c += 16) strip16_n<N>(p + c, q + c, cols, sg, scale);
    }
    for (; c < vec_cols; c += 8) {
      if constexpr (N <= 32) {
        strip8_n<N>(p + c, q + c, cols, sg, scale);
      } else {  // a width's last 8 columns: every stage over the block's vectors (on the stack)
        D8 v[N];
        for (int i = 0; i < N; ++i) {
          load8(v[i], p + i * cols + c);
          v[i] *= sg[i];
        }
        vector_stages(v, N);
        for (int i = 0; i < N; ++i) store8(q + i * cols + c, v[i], scale);
      }
    }
  }
}

// Columns [c0, c1) of every block down the columns; c0 a multiple of 8.
__attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default"))) void blocks_down_columns(
    const float* src, float* dst, int64_t rows, int64_t cols, int64_t c0, int64_t c1, int n,
    const float* signs, double scale) {
  const int64_t vec_cols = c1 - (c1 - c0) % 8;
  switch (n) {
    case 16: columns_n<16>(src, dst, rows, cols, c0, vec_cols, signs, scale); break;
    case 32: columns_n<32>(src, dst, rows, cols, c0, vec_cols, signs, scale); break;
    case 64: columns_n<64>(src, dst, rows, cols, c0, vec_cols, signs, scale); break;
    case 128: columns_n<128>(src, dst, rows, cols, c0, vec_cols, signs, scale); break;
    default:  // sizes no recipe uses: the same butterflies over a runtime n
      for (int64_t r0 = 0; r0 < rows; r0 += n) {
        const float* p = src + r0 * cols;
        float* q = dst + r0 * cols;
        for (int64_t c = c0; c < vec_cols; c += 8) {
          D8 v[kMaxHadamardRow];
          for (int i = 0; i < n; ++i) {
            load8(v[i], p + i * cols + c);
            v[i] *= signs ? static_cast<double>(signs[i]) : 1.0;
          }
          vector_stages(v, n);
          for (int i = 0; i < n; ++i) store8(q + i * cols + c, v[i], scale);
        }
      }
  }
  for (int64_t r0 = 0; r0 < rows; r0 += n) {
    const float* p = src + r0 * cols;
    float* q = dst + r0 * cols;
    for (int64_t c = vec_cols; c < c1; ++c) {
      float col[kMaxHadamardRow];
      for (int i = 0; i < n; ++i) col[i] = p[i * cols + c];
      hadamard_row(col, col, n, signs);
      for (int i = 0; i < n; ++i) q[i * cols + c] = col[i];
    }
  }
}

}  // namespace

void hadamard_blocks(float* data, int64_t rows, int64_t cols, int axis, int n, std::span<const float> signs) {
  hadamard_blocks(data, data, rows, cols, axis, n, signs);
}

void hadamard_blocks(const float* in, float* out, int64_t rows, int64_t cols, int axis, int n,
                     std::span<const float> signs) {
  if (!is_power_of_two(n) || n > kMaxHadamardRow)
    throw std::invalid_argument("hadamard_blocks: size " + std::to_string(n) + " is not a power of two <= 128");
  if (axis != 0 && axis != 1)
    throw std::invalid_argument("hadamard_blocks: axis " + std::to_string(axis) + " is not 0 or 1");
  if (!signs.empty() && signs.size() != static_cast<size_t>(n))
    throw std::invalid_argument("hadamard_blocks: " + std::to_string(signs.size()) + " signs for size " +
                                std::to_string(n));
  const int64_t extent = axis == 1 ? cols : rows;
  if (extent % n != 0)
    throw std::invalid_argument("hadamard_blocks: the extent " + std::to_string(extent) + " along axis " +
                                std::to_string(axis) + " is not a multiple of the Hadamard size " +
                                std::to_string(n));
  const float* s = signs.empty() ? nullptr : signs.data();
  const double scale = 1.0 / std::sqrt(static_cast<double>(n));  // hadamard_row's
  // Large operands in pieces over OpenMP threads (outside the clones: a parallel region
  // inside one would be outlined before cloning and run the baseline code). Every block
  // is computed alone, so the thread count never changes a bit.
  // (Small operands, or one thread: no OpenMP region at all, numerics/parallel.hpp.)
  const int threads = threads_if(rows * cols >= (int64_t{1} << 16));
  if (axis == 1) {
    constexpr int64_t kRows = 16;
    const int64_t pieces = (rows + kRows - 1) / kRows;
    parallel_for(pieces, threads, [&](int64_t i) {
      blocks_along_rows(in, out, i * kRows, std::min(rows, (i + 1) * kRows), cols, n, s, scale);
    });
  } else {
    const int64_t pieces = (cols + kColumnPiece - 1) / kColumnPiece;
    parallel_for(pieces, threads, [&](int64_t i) {
      blocks_down_columns(in, out, rows, cols, i * kColumnPiece, std::min(cols, (i + 1) * kColumnPiece), n, s,
                          scale);
    });
  }
}

}  // namespace lpx
