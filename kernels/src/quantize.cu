// Block-quantization kernels over views (lpx/kernels/tensor.hpp): x is a (rows, cols)
// float32 view, any strides; blocks are the br x bc boxes of the output view's scales; the
// scale grid is (ceil(rows/br), ceil(cols/bc)), row-major. Stochastic rounding is keyed by
// the logical row-major index r * cols + c, whatever the strides. The scale rule, the
// element cast and the dequantized value are the LPX_HD functions of
// lpx/formats/block_scale.hpp, the very ones formats/src/quantize.cpp runs on the CPU (one
// codec, many executions). quantize writes codes; fused fake_quantize dequantizes each
// element's code at once (dequant_value with the stored scale) and writes only the float32
// value (lpx::fake_quantize_values). Which kernel runs depends on the view and the block
// box only (docs/kernels.md#block-quantization-on-the-device):
//
//   per tensor     a box covering the tensor (FP8 current scaling): a coalesced reduction
//                  of the largest |x|, then one thread per element.
//   tiled          a contiguous x with blocks of up to 32 x 32 (MX 1x32 and 32x1, NVFP4
//                  1x16 and 16x16, ...): 32x32 tiles through shared memory, loaded with
//                  coalesced 128-byte rows by a CTA of 8 warps. A row pass (warp per tile
//                  row, lane per column) and a column pass (warp per tile column, lane per
//                  row) each reduce a block's amax with shuffles inside the aligned group
//                  of B lanes that holds it (a tile format's rows combine their group
//                  maxima in shared memory) and quantize one element per lane. The column
//                  pass stages its words in shared memory and stores them in the order that
//                  is contiguous in its output, so the transposed layout of a wgrad operand
//                  is written with coalesced stores as well. Both passes from one load are
//                  quantize_both: the row-wise and the column-wise (transposed)
//                  quantizations of one tensor in one read. Its plan is tiled_quantize.hpp.
//   wide           a contiguous x with blocks 1 x C or R x C (C a multiple of 32) or R x 1
//                  (R > 32): DeepSeek-V3's 1x128 and 128x128 (below).
//   per block      everything else (strided views, odd block sizes): one thread per block,
//                  amax -> block_scale -> quantize_element per element, the order of
//                  lpx::quantize().
//   dequantize     one thread per element: the block's stored scale decoded
//                  (decode_scale) and dequant_value; float32 out, or bfloat16 (RNE) for
//                  the dequantize-then-BF16 GEMM path (gemm.cu).
// NVFP4's two-level scale needs the tensor amax first: pass 1 reduces the finite amax
// with atomicMax on float32 bits (bits of non-negative floats order like their values)
// into a device word (the caller's, or one allocated on the stream), pass 2 derives s_enc
// on the device (tensor_encode_scale) and scales and casts. Nothing synchronizes: the
// launches are ordered on the stream. The max is order-free, so every path gives the
// same bits.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "cuda_util.cuh"
#include "fixed_formats.cuh"
#include "launch.hpp"
#include "lpx/formats/block_scale.hpp"
#include "tiled_quantize.hpp"

namespace lpx::kernels::module {

namespace {

namespace bs = block_scaling;
using cuda::Addressing;

constexpr unsigned kThreads = 128;

struct Params {
  const float* x;  // (rows, cols) through ax
  Addressing ax;
  size_t rows, cols, br, bc, grid_cols, nblocks;
  ElementFormat element;
  bs::ScaleParams scale;  // tensor_enc / tensor_dec are set on the device (two-level)
  QuantizeOptions opt;    // history is null (checked on the host)
};

// The Amax of the block whose top-left element is (r0, c0).
__device__ inline bs::Amax block_amax(const Params& p, size_t r0, size_t c0) {
  bs::Amax a;
  const size_t r1 = min(r0 + p.br, p.rows), c1 = min(c0 + p.bc, p.cols);
  for (size_t r = r0; r < r1; ++r)
    for (size_t c = c0; c < c1; ++c)
      a.add(float_to_bits(bs::prepare(p.x[p.ax.offset(r, c)], p.opt)) & kF32AbsMask);
  return a;
}

__global__ void tensor_amax_kernel(Params p, uint32_t* amax_bits) {
  for (size_t b = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; b < p.nblocks;
       b += static_cast<size_t>(gridDim.x) * blockDim.x) {
    const bs::Amax a = block_amax(p, (b / p.grid_cols) * p.br, (b % p.grid_cols) * p.bc);
    atomicMax(amax_bits, a.finite);
  }
}

// One thread per block. codes (quantize) or out (fake_quantize) is null; scale_codes /
// scale_values / tensor_scale may be null (not stored).
__global__ void quantize_kernel(Params p, const uint32_t* tensor_amax_bits, uint8_t* codes,
                                float* out, Addressing aout, uint8_t* scale_codes,
                                float* scale_values, float* tensor_scale) {
  const bool two_level = p.scale.scale == ScaleFormat::e4m3;
  if (two_level) {
    p.scale.tensor_enc = bs::tensor_encode_scale(bits_to_float(*tensor_amax_bits),
                                                 p.scale.lim.max_elem);
    p.scale.tensor_dec = 1.0f / p.scale.tensor_enc;
    if (tensor_scale != nullptr && blockIdx.x == 0 && threadIdx.x == 0)
      *tensor_scale = p.scale.tensor_dec;
  }
  const bool pow2 = scale_is_power_of_two(p.scale.scale);
  const bool coded = scale_is_code(p.scale.scale);
  for (size_t b = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; b < p.nblocks;
       b += static_cast<size_t>(gridDim.x) * blockDim.x) {
    const size_t r0 = (b / p.grid_cols) * p.br, c0 = (b % p.grid_cols) * p.bc;
    const bs::BlockScale s = bs::block_scale(block_amax(p, r0, c0), p.scale);
    if (coded && scale_codes != nullptr) scale_codes[b] = s.code;
    if (!coded && scale_values != nullptr) scale_values[b] = s.dec;
    const float dec = bs::stored_dec(s, p.scale.scale);
    const size_t r1 = min(r0 + p.br, p.rows), c1 = min(c0 + p.bc, p.cols);
    for (size_t r = r0; r < r1; ++r)
      for (size_t c = c0; c < c1; ++c) {
        const size_t i = r * p.cols + c;  // the logical index (SR key)
        const uint32_t code =
            bs::quantize_element(p.x[p.ax.offset(r, c)], s, pow2, p.element, p.opt, i).code;
        if (codes != nullptr) codes[aout.offset(r, c)] = static_cast<uint8_t>(code);
        else
          out[aout.offset(r, c)] = bs::dequant_value(code, dec, p.element, two_level,
                                                     p.scale.tensor_dec, p.opt.headroom_3_4);
      }
  }
}

struct DequantParams {
  Addressing aq, aout;
  size_t br, bc, grid_cols;
  ElementFormat element;
  ScaleFormat scale;
  bool headroom;
};

// One thread per element; Out is float (float32) or uint16_t (bfloat16 bits, RNE).
template <class Out>
__global__ void dequantize_kernel(DequantParams p, const uint8_t* __restrict__ codes,
                                  const uint8_t* __restrict__ scale_codes,
                                  const float* __restrict__ scale_values,
                                  const float* __restrict__ tensor_scale, Out* __restrict__ out) {
  constexpr ElementFormat bf16 = fmt16::bf16;
  const bool two_level = p.scale == ScaleFormat::e4m3;
  // No tensor scale (the BF16 GEMM path applies it as alpha): the block scale only.
  const float tensor_dec = two_level && tensor_scale != nullptr ? *tensor_scale : 1.0f;
  const bool coded = scale_is_code(p.scale);
  const size_t n = p.aq.rows * p.aq.cols;
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    const size_t r = i / p.aq.cols, c = i % p.aq.cols;
    const size_t b = (r / p.br) * p.grid_cols + c / p.bc;
    const float dec = coded ? bs::decode_scale(p.scale, scale_codes[b], 0.0f) : scale_values[b];
    const float v = bs::dequant_value(codes[p.aq.offset(r, c)], dec, p.element, two_level,
                                      tensor_dec, p.headroom);
    if constexpr (sizeof(Out) == sizeof(float)) out[p.aout.offset(r, c)] = v;
    else out[p.aout.offset(r, c)] = static_cast<Out>(lpx::encode(v, bf16, Rounding::rne, Overflow::ieee));
  }
}

// The device word a tensor-amax pass reduces into: the caller's, or one allocated on the
// stream and freed after the kernels queued before the destructor (stream order). Zeroed
// on construction when needed.
class AmaxWord {
 public:
  AmaxWord(uint32_t* given, bool needed, cudaStream_t s) : word_(given), stream_(s) {
    if (!needed) return;
    if (word_ == nullptr) {
      cuda::check(cudaMallocAsync(reinterpret_cast<void**>(&word_), sizeof(uint32_t), s), "cudaMallocAsync");
      owned_ = true;
    }
    cuda::check(cudaMemsetAsync(word_, 0, sizeof(uint32_t), s), "cudaMemsetAsync");
  }
  AmaxWord(const AmaxWord&) = delete;
  AmaxWord& operator=(const AmaxWord&) = delete;
  ~AmaxWord() {
    if (owned_) cudaFreeAsync(word_, stream_);
  }
  uint32_t* get() const { return word_; }

 private:
  uint32_t* word_;
  cudaStream_t stream_;
  bool owned_ = false;
};

// ---------------------------------------------------------------------------------------
// The tiled path (header comment; its plan, shared with the CPU mock module, is
// tiled_quantize.hpp).

using tiled::kTile;
constexpr int kWarpsPerTile = 8;  // CTA of 32 x 8 threads
constexpr unsigned kFullMask = 0xffffffffu;

struct TiledParams {
  const float* x;  // contiguous (rows, cols)
  size_t rows, cols, tiles_c, ntiles;
  tiled::Pass row, col;
};

// The coalesced tensor amax of a contiguous x (NVFP4's first pass on the tiled path):
// each thread's max, a warp's max by shuffles, one atomicMax per warp.
__global__ void flat_amax_kernel(const float* __restrict__ x, size_t n, bool flush,
                                 uint32_t* amax_bits) {
  uint32_t m = 0;
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    uint32_t b = float_to_bits(x[i]) & kF32AbsMask;
    if (flush && b < 0x800000u) b = 0;  // bs::prepare's flush
    if (b < kF32InfBits && b > m) m = b;
  }
  for (int off = 16; off > 0; off /= 2) {
    const uint32_t o = __shfl_xor_sync(kFullMask, m, off);
    m = o > m ? o : m;
  }
  if ((threadIdx.x & 31u) == 0 && m != 0) atomicMax(amax_bits, m);
}

// One element of a pass, lane-parallel: the amax of its block (the aligned group of
// q.block lanes; lanes past the tensor's edge add nothing but still take part in the
// shuffles), the block's scale (stored by the group's first lane), and the element's
// output word. along / across: (r, c) in the pass's block coordinates.
// The amax of v's part of its block in this tile line: the aligned group of q.block lanes
// (lanes past the tensor's edge add nothing but still take part in the shuffles).
__device__ inline bs::Amax group_amax(const tiled::Pass& q, float v, bool valid) {
  bs::Amax a;
  if (valid) a.add(float_to_bits(bs::prepare(v, q.opt)) & kF32AbsMask);
  for (int off = q.block / 2; off > 0; off /= 2) {
    bs::Amax o;
    o.all = __shfl_xor_sync(kFullMask, a.all, off);
    o.finite = __shfl_xor_sync(kFullMask, a.finite, off);
    a.merge(o);
  }
  return a;
}

// One element given its block's amax: the scale (stored by the block's first element) and
// the element's output word. kFixed: the pass's element format as a constant
// (fixed_formats.cuh), or kGenericFormat to read it from q.
template <int kFixed>
__device__ inline uint32_t tiled_element(const tiled::Pass& q, float v, const bs::Amax& a, size_t r,
                                         size_t c, size_t along, size_t across) {
  const bs::BlockScale s = bs::block_scale(a, q.scale);
  if (tiled::leads(q, along, across)) tiled::store_scale(q, s, along, across);
  if constexpr (kFixed != kGenericFormat) {
    constexpr ElementFormat f = fixed_format(kFixed);
    return tiled::element_word(q, f, v, s, r, c);
  } else {
    return tiled::element_word(q, v, s, r, c);
  }
}

__device__ inline void tiled_two_level(tiled::Pass& q, const uint32_t* tensor_amax_bits) {
  if (!q.on || !q.two_level) return;
  tiled::set_tensor_scale(q, *tensor_amax_bits);
  if (q.tensor_scale != nullptr && blockIdx.x == 0 && threadIdx.x == 0 && threadIdx.y == 0)
    *q.tensor_scale = q.scale.tensor_dec;
}

// kFixed: both passes' element format as a constant, or kGenericFormat (launch_tiled).
template <int kFixed>
__global__ void __launch_bounds__(kTile * kWarpsPerTile, 4)
    tiled_quantize_kernel(TiledParams p, const uint32_t* tensor_amax_bits) {
  __shared__ float tile[kTile][kTile + 1];       // +1: column reads hit 32 banks
  __shared__ uint32_t staged[kTile][kTile + 1];  // the column pass's words
  // Tile formats (R x B, R > 1): each tile row's group amaxes, [row][group], for the rows
  // of a block to combine (its rows belong to different warps).
  __shared__ uint32_t line_all[kTile][kTile], line_finite[kTile][kTile];
  tiled_two_level(p.row, tensor_amax_bits);
  tiled_two_level(p.col, tensor_amax_bits);
  static_assert(kTile % kWarpsPerTile == 0);
  const int lane = static_cast<int>(threadIdx.x), warp = static_cast<int>(threadIdx.y);
  // The column pass's stores run down its output's contiguous axis.
  const bool col_store_down = p.col.out_r == 1 || p.col.out_r == -1;
  for (size_t t = blockIdx.x; t < p.ntiles; t += gridDim.x) {
    const size_t r0 = (t / p.tiles_c) * kTile, c0 = (t % p.tiles_c) * kTile;
    for (int i = warp; i < kTile; i += kWarpsPerTile) {
      const size_t r = r0 + i, c = c0 + lane;
      tile[i][lane] = r < p.rows && c < p.cols ? p.x[r * p.cols + c] : 0.0f;
    }
    __syncthreads();
    if (p.row.on && p.row.block_across == 1)
      for (int i = warp; i < kTile; i += kWarpsPerTile) {
        const size_t r = r0 + i, c = c0 + lane;
        const bool valid = r < p.rows && c < p.cols;
        const bs::Amax a = group_amax(p.row, tile[i][lane], valid);
        if (valid) tiled::store_word(p.row, r, c, tiled_element<kFixed>(p.row, tile[i][lane], a, r, c, c, r));
      }
    if (p.row.on && p.row.block_across > 1) {
      for (int i = warp; i < kTile; i += kWarpsPerTile) {
        const bool valid = r0 + i < p.rows && c0 + lane < p.cols;
        const bs::Amax a = group_amax(p.row, tile[i][lane], valid);
        if (lane % p.row.block == 0) {
          line_all[i][lane / p.row.block] = a.all;
          line_finite[i][lane / p.row.block] = a.finite;
        }
      }
      __syncthreads();
      for (int i = warp; i < kTile; i += kWarpsPerTile) {
        const size_t r = r0 + i, c = c0 + lane;
        if (r >= p.rows || c >= p.cols) continue;
        bs::Amax a;
        const int first = i - i % p.row.block_across, g = lane / p.row.block;
        for (int k = first; k < first + p.row.block_across; ++k) {
          a.all = line_all[k][g] > a.all ? line_all[k][g] : a.all;
          a.finite = line_finite[k][g] > a.finite ? line_finite[k][g] : a.finite;
        }
        tiled::store_word(p.row, r, c, tiled_element<kFixed>(p.row, tile[i][lane], a, r, c, c, r));
      }
    }
    if (p.col.on) {
      for (int j = warp; j < kTile; j += kWarpsPerTile) {
        const size_t r = r0 + lane, c = c0 + j;
        const bool valid = r < p.rows && c < p.cols;
        const bs::Amax a = group_amax(p.col, tile[lane][j], valid);
        staged[lane][j] = valid ? tiled_element<kFixed>(p.col, tile[lane][j], a, r, c, r, c) : 0u;
      }
      __syncthreads();
      for (int k = warp; k < kTile; k += kWarpsPerTile) {
        const int i = col_store_down ? lane : k, j = col_store_down ? k : lane;
        const size_t r = r0 + i, c = c0 + j;
        if (r < p.rows && c < p.cols) tiled::store_word(p.col, r, c, staged[i][j]);
      }
    }
    __syncthreads();  // the tile is reloaded next
  }
}

// ---------------------------------------------------------------------------------------
// Per-tensor blocks (FP8 current scaling): the whole tensor is one block. Pass 1 reduces
// the largest prepared |x| over every element (NaN and Inf included, as Amax::all: bits at
// or above Inf's make the block non-finite, and below them it equals the finite amax that
// block_scale reads); pass 2 derives the one scale in every thread and casts element by
// element, coalesced along the view's logical order.

__global__ void all_amax_kernel(const float* __restrict__ x, Addressing ax, size_t n, bool flush,
                                uint32_t* amax_bits) {
  uint32_t m = 0;
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    uint32_t b = float_to_bits(x[ax.at(i)]) & kF32AbsMask;
    if (flush && b < 0x800000u) b = 0;  // bs::prepare's flush
    m = b > m ? b : m;
  }
  for (int off = 16; off > 0; off /= 2) {
    const uint32_t o = __shfl_xor_sync(kFullMask, m, off);
    m = o > m ? o : m;
  }
  if ((threadIdx.x & 31u) == 0 && m != 0) atomicMax(amax_bits, m);
}

__global__ void per_tensor_kernel(Params p, const uint32_t* amax_bits, uint8_t* codes, float* out,
                                  Addressing aout, uint8_t* scale_code, float* scale_value) {
  bs::Amax a;
  a.all = *amax_bits;
  a.finite = a.all < kF32InfBits ? a.all : 0;  // block_scale reads `all` only
  const bs::BlockScale s = bs::block_scale(a, p.scale);
  const bool pow2 = scale_is_power_of_two(p.scale.scale), coded = scale_is_code(p.scale.scale);
  if (blockIdx.x == 0 && threadIdx.x == 0) {
    if (coded && scale_code != nullptr) *scale_code = s.code;
    if (!coded && scale_value != nullptr) *scale_value = s.dec;
  }
  const float dec = bs::stored_dec(s, p.scale.scale);
  const size_t n = p.rows * p.cols;
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    const uint32_t code = bs::quantize_element(p.x[p.ax.at(i)], s, pow2, p.element, p.opt, i).code;
    if (codes != nullptr) codes[aout.at(i)] = static_cast<uint8_t>(code);
    else out[aout.at(i)] = bs::dequant_value(code, dec, p.element, false, 1.0f, p.opt.headroom_3_4);
  }
}

void launch_per_tensor(const DeviceTensor& x, const DeviceTensor& out, const Params& p,
                       uint32_t* amax_word, cudaStream_t s) {
  const AmaxWord amax(amax_word, true, s);
  const size_t n = p.rows * p.cols;
  all_amax_kernel<<<std::min(cuda::grid_for(n, 256), 4096u), 256, 0, s>>>(
      p.x, p.ax, n, p.opt.flush_subnormal_inputs, amax.get());
  const bool fake = out.storage == Storage::f32;
  per_tensor_kernel<<<cuda::grid_for(n, 256), 256, 0, s>>>(
      p, amax.get(), fake ? nullptr : static_cast<uint8_t*>(out.data),
      fake ? static_cast<float*>(out.data) : nullptr, cuda::addressing(out), out.scales.codes,
      out.scales.values);
  cuda::check(cudaGetLastError(), "per-tensor quantize launch");
}

// x and the tensor amax (when a pass needs it) -> the tiled kernel; amax_word as quantize().
void launch_tiled(const DeviceTensor& x, const tiled::Pass& row, const tiled::Pass& col, bool flush,
                  uint32_t* amax_word, cudaStream_t s) {
  TiledParams p{};
  p.x = static_cast<const float*>(x.data);
  p.rows = static_cast<size_t>(x.rows);
  p.cols = static_cast<size_t>(x.cols);
  p.tiles_c = (p.cols + kTile - 1) / kTile;
  p.ntiles = ((p.rows + kTile - 1) / kTile) * p.tiles_c;
  p.row = row;
  p.col = col;
  const bool two_level = (row.on && row.two_level) || (col.on && col.two_level);
  const AmaxWord amax(amax_word, two_level, s);
  if (two_level) {
    const size_t n = p.rows * p.cols;
    flat_amax_kernel<<<std::min(cuda::grid_for(n, 256), 4096u), 256, 0, s>>>(p.x, n, flush, amax.get());
    cuda::check(cudaGetLastError(), "flat_amax_kernel launch");
  }
  // one fixed format when every pass that runs has it (the MX and NVFP4 element formats)
  const int fr = row.on ? fixed_format_index(row.element) : kGenericFormat;
  const int fc = col.on ? fixed_format_index(col.element) : kGenericFormat;
  const int fixed = !row.on ? fc : !col.on ? fr : fr == fc ? fr : kGenericFormat;
  const unsigned grid = cuda::grid_for(p.ntiles, 1);
  const dim3 block(kTile, kWarpsPerTile);
  switch (fixed) {
    case 0: tiled_quantize_kernel<0><<<grid, block, 0, s>>>(p, amax.get()); break;
    case 1: tiled_quantize_kernel<1><<<grid, block, 0, s>>>(p, amax.get()); break;
    case 2: tiled_quantize_kernel<2><<<grid, block, 0, s>>>(p, amax.get()); break;
    case 3: tiled_quantize_kernel<3><<<grid, block, 0, s>>>(p, amax.get()); break;
    case 4: tiled_quantize_kernel<4><<<grid, block, 0, s>>>(p, amax.get()); break;
    default: tiled_quantize_kernel<kGenericFormat><<<grid, block, 0, s>>>(p, amax.get()); break;
  }
  cuda::check(cudaGetLastError(), "tiled_quantize_kernel launch");
}

// ---------------------------------------------------------------------------------------
// Wide blocks (DeepSeek-V3's 1x128 and 128x128, 128x1 column blocks; plan in
// tiled_quantize.hpp): no shared tile, x is read twice (amax, then cast), the second time
// from cache.
//   1 x C (C % 32 == 0)    one warp per block: lane l takes elements l, l + 32, ... of it
//                          (coalesced), the amax is a full-warp shuffle reduction.
//   R x C, R x 1 (R > 32)  one CTA of 8 warps per strip of R rows x W columns (W = C, or
//                          32 column blocks side by side for R x 1): warps take rows, lanes
//                          columns; the warps' maxima meet in shared memory, for the whole
//                          strip (one R x C block) or per lane (one R x 1 block each).

struct WideParams {
  const float* x;  // contiguous (rows, cols)
  size_t rows, cols;
  tiled::Pass q;
  tiled::WideShape w;  // the units: blocks (warp kernel) or strips (strip kernel)
};

__device__ inline bs::Amax warp_amax(bs::Amax a) {
  for (int off = 16; off > 0; off /= 2) {
    bs::Amax o;
    o.all = __shfl_xor_sync(kFullMask, a.all, off);
    o.finite = __shfl_xor_sync(kFullMask, a.finite, off);
    a.merge(o);
  }
  return a;
}

__global__ void wide_warp_kernel(WideParams p, const uint32_t* tensor_amax_bits) {
  if (p.q.two_level) tiled::set_tensor_scale(p.q, *tensor_amax_bits);
  if (p.q.two_level && p.q.tensor_scale != nullptr && blockIdx.x == 0 && threadIdx.x == 0)
    *p.q.tensor_scale = p.q.scale.tensor_dec;
  const size_t lane = threadIdx.x & 31u, block = static_cast<size_t>(p.q.block);
  const size_t warps = static_cast<size_t>(gridDim.x) * (blockDim.x / 32);
  for (size_t b = (blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x) / 32; b < p.w.units; b += warps) {
    const size_t r = b / p.w.per_row, c0 = (b % p.w.per_row) * block;
    const float* row = p.x + r * p.cols;
    bs::Amax a;
    for (size_t c = c0 + lane; c < c0 + block && c < p.cols; c += 32)
      a.add(float_to_bits(bs::prepare(row[c], p.q.opt)) & kF32AbsMask);
    a = warp_amax(a);
    const bs::BlockScale s = bs::block_scale(a, p.q.scale);
    if (lane == 0) tiled::store_scale(p.q, s, c0, r);
    for (size_t c = c0 + lane; c < c0 + block && c < p.cols; c += 32)
      tiled::store_word(p.q, r, c, tiled::element_word(p.q, row[c], s, r, c));
  }
}

__global__ void __launch_bounds__(256) wide_strip_kernel(WideParams p, const uint32_t* tensor_amax_bits) {
  __shared__ uint32_t part_all[8][32], part_finite[8][32];
  if (p.q.two_level) tiled::set_tensor_scale(p.q, *tensor_amax_bits);
  if (p.q.two_level && p.q.tensor_scale != nullptr && blockIdx.x == 0 && threadIdx.x == 0)
    *p.q.tensor_scale = p.q.scale.tensor_dec;
  const int lane = static_cast<int>(threadIdx.x & 31u), warp = static_cast<int>(threadIdx.x / 32);
  const bool columns = p.q.along_rows;  // R x 1: each lane's column is its own block
  for (size_t t = blockIdx.x; t < p.w.units; t += gridDim.x) {
    const size_t r0 = (t / p.w.per_row) * p.w.height, c0 = (t % p.w.per_row) * p.w.width;
    const size_t r1 = min(r0 + p.w.height, p.rows), c1 = min(c0 + p.w.width, p.cols);
    bs::Amax a;
    for (size_t r = r0 + warp; r < r1; r += 8)
      for (size_t c = c0 + lane; c < c1; c += 32)
        a.add(float_to_bits(bs::prepare(p.x[r * p.cols + c], p.q.opt)) & kF32AbsMask);
    if (!columns) a = warp_amax(a);
    part_all[warp][lane] = a.all;
    part_finite[warp][lane] = a.finite;
    __syncthreads();
    for (int w = 0; w < 8; ++w) {  // the strip's block (lane 0's column of maxima) or the lane's
      const int from = columns ? lane : 0;
      a.all = part_all[w][from] > a.all ? part_all[w][from] : a.all;
      a.finite = part_finite[w][from] > a.finite ? part_finite[w][from] : a.finite;
    }
    const bs::BlockScale s = bs::block_scale(a, p.q.scale);
    if (warp == 0 && (columns ? c0 + lane < c1 : lane == 0))
      tiled::store_scale(p.q, s, columns ? r0 : c0, columns ? c0 + lane : r0);
    for (size_t r = r0 + warp; r < r1; r += 8)
      for (size_t c = c0 + lane; c < c1; c += 32)
        tiled::store_word(p.q, r, c, tiled::element_word(p.q, p.x[r * p.cols + c], s, r, c));
    __syncthreads();  // part_* are refilled for the next strip
  }
}

void launch_wide(const DeviceTensor& x, const DeviceTensor& out, const QuantizeOptions& opt,
                 uint32_t* amax_word, cudaStream_t s) {
  WideParams p{};
  p.x = static_cast<const float*>(x.data);
  p.rows = static_cast<size_t>(x.rows);
  p.cols = static_cast<size_t>(x.cols);
  p.q = tiled::make_pass(out, p.rows, p.cols, opt, false);
  p.w = tiled::wide_shape(p.q, p.rows, p.cols);
  const AmaxWord amax(amax_word, p.q.two_level, s);
  if (p.q.two_level) {
    const size_t n = p.rows * p.cols;
    flat_amax_kernel<<<std::min(cuda::grid_for(n, 256), 4096u), 256, 0, s>>>(
        p.x, n, opt.flush_subnormal_inputs, amax.get());
    cuda::check(cudaGetLastError(), "flat_amax_kernel launch");
  }
  if (p.w.warp_per_block)
    wide_warp_kernel<<<cuda::grid_for(p.w.units, 8), 256, 0, s>>>(p, amax.get());
  else
    wide_strip_kernel<<<cuda::grid_for(p.w.units, 1), 256, 0, s>>>(p, amax.get());
  cuda::check(cudaGetLastError(), "wide quantize launch");
}

Params make_params(const DeviceTensor& x, const DeviceTensor& out, const QuantizeOptions& opt) {
  Params p{};
  p.x = static_cast<const float*>(x.data);
  p.ax = cuda::addressing(x);
  p.rows = static_cast<size_t>(x.rows);
  p.cols = static_cast<size_t>(x.cols);
  p.br = static_cast<size_t>(out.scales.block_rows);
  p.bc = static_cast<size_t>(out.scales.block_cols);
  p.grid_cols = (p.cols + p.bc - 1) / p.bc;
  p.nblocks = ((p.rows + p.br - 1) / p.br) * p.grid_cols;
  p.element = out.element;
  p.scale = tiled::scale_params(out, opt);
  p.opt = opt;
  p.opt.history = nullptr;
  return p;
}

}  // namespace

void quantize(const DeviceTensor& x, const DeviceTensor& out, const QuantizeOptions& opt,
              uint32_t* amax_word, void* stream) {
  const auto s = static_cast<cudaStream_t>(stream);
  if (tiled::whole_tensor(x, out)) {
    launch_per_tensor(x, out, make_params(x, out, opt), amax_word, s);
    return;
  }
  if (tiled::fits(x, out)) {
    const tiled::Pass q =
        tiled::make_pass(out, static_cast<size_t>(x.rows), static_cast<size_t>(x.cols), opt, false);
    const bool row = tiled::row_pass(out);
    launch_tiled(x, row ? q : tiled::Pass{}, row ? tiled::Pass{} : q, opt.flush_subnormal_inputs,
                 amax_word, s);
    return;
  }
  if (tiled::wide_fits(x, out)) {
    launch_wide(x, out, opt, amax_word, s);
    return;
  }
  const Params p = make_params(x, out, opt);
  const unsigned grid = cuda::grid_for(p.nblocks, kThreads);
  const bool two_level = out.scales.format == ScaleFormat::e4m3;
  const AmaxWord amax(amax_word, two_level, s);
  if (two_level) {
    tensor_amax_kernel<<<grid, kThreads, 0, s>>>(p, amax.get());
    cuda::check(cudaGetLastError(), "tensor_amax_kernel launch");
  }
  const bool fake = out.storage == Storage::f32;
  quantize_kernel<<<grid, kThreads, 0, s>>>(
      p, amax.get(), fake ? nullptr : static_cast<uint8_t*>(out.data),
      fake ? static_cast<float*>(out.data) : nullptr, cuda::addressing(out), out.scales.codes,
      out.scales.values, out.scales.tensor);
  cuda::check(cudaGetLastError(), "quantize_kernel launch");
}

void dequantize(const DeviceTensor& q, const DeviceTensor& out, void* stream) {
  DequantParams p{};
  p.aq = cuda::addressing(q);
  p.aout = cuda::addressing(out);
  p.br = static_cast<size_t>(q.scales.block_rows);
  p.bc = static_cast<size_t>(q.scales.block_cols);
  p.grid_cols = (p.aq.cols + p.bc - 1) / p.bc;
  p.element = q.element;
  p.scale = q.scales.format;
  p.headroom = q.scales.headroom_3_4;
  const unsigned grid = cuda::grid_for(static_cast<size_t>(q.numel()), 256);
  const auto s = static_cast<cudaStream_t>(stream);
  const auto* codes = static_cast<const uint8_t*>(q.data);
  if (out.storage == Storage::bf16)
    dequantize_kernel<<<grid, 256, 0, s>>>(p, codes, q.scales.codes, q.scales.values,
                                           q.scales.tensor, static_cast<uint16_t*>(out.data));
  else
    dequantize_kernel<<<grid, 256, 0, s>>>(p, codes, q.scales.codes, q.scales.values,
                                           q.scales.tensor, static_cast<float*>(out.data));
  cuda::check(cudaGetLastError(), "dequantize_kernel launch");
}

void quantize_both(const DeviceTensor& x, const DeviceTensor& out_rows, const QuantizeOptions& opt_rows,
                   const DeviceTensor& out_cols, const QuantizeOptions& opt_cols,
                   uint32_t* amax_words, void* stream) {
  if (tiled::both_fit(x, out_rows, opt_rows, out_cols, opt_cols)) {
    const size_t rows = static_cast<size_t>(x.rows), cols = static_cast<size_t>(x.cols);
    const bool flush = tiled::both_flush(out_rows, opt_rows, opt_cols);
    launch_tiled(x, tiled::make_pass(out_rows, rows, cols, opt_rows, false),
                 tiled::make_pass(out_cols.transposed(), rows, cols, opt_cols, true), flush, amax_words,
                 static_cast<cudaStream_t>(stream));
    return;
  }
  quantize(x, out_rows, opt_rows, amax_words, stream);
  quantize(x.transposed(), out_cols, opt_cols, amax_words == nullptr ? nullptr : amax_words + 1, stream);
}

}  // namespace lpx::kernels::module
