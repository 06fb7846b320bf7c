// Block-scaled quantization: quantize / dequantize / fake_quantize of a float32 tensor to
// any BlockFormat (block_format.hpp). Every element goes through the scalar codec
// (codec.hpp: lpx::encode / lpx::decode); this file only chooses the scales.
//
// A tensor is a float32 array with a C-order shape. float16/bfloat16 inputs are converted
// exactly to float32 by the caller first (tensor_io's to_float32).
//
// Algorithm per block (amax = largest |x| over the block's elements):
//   power-of-two scales (e8m0, pow2): X from the scale rule (block_format.hpp), clamped to
//     [-127, 127]; element = encode(x * 2^-X, element, round, overflow, random_bits);
//     dequantized = decode(element) * 2^X in float32. x * 2^-X is formed exactly: when it
//     would fall below float32's normal range it is rounded to odd, which has enough bits
//     left that the element rounding afterwards is the same as on the exact value.
//   fp32 scales (current / delayed scaling, Transformer Engine's order):
//     s_enc = max_elem / amax in float32 (amax from the AmaxHistory for delayed scaling),
//     then s_enc = s_enc * 2^-margin, capped at FLT_MAX; s_enc = 1 when amax is 0.
//     Stored scale s_dec = 1 / s_enc (float32); element = encode(x * s_enc) with the
//     product in float32; dequantized = decode(element) * s_dec.
//   e4m3 scales (NVFP4 two-level, the operation order of docs/formats.md):
//     amax_t = largest finite |x| of the tensor;
//     s_enc = (max_elem * 448) / amax_t in float32, capped at FLT_MAX, 1 when amax_t is 0
//       (max_elem * 448 = 2688 for E2M1); s_dec = 1 / s_enc  (QuantizedTensor::tensor_scale);
//     s_dec_b = e4m3_rne_satfinite((amax_b * s_enc) / max_elem), evaluated left to right;
//     s_enc_b = min(1 / (float(s_dec_b) * s_dec), FLT_MAX);
//     element = encode(x * s_enc_b, round, overflow);
//     dequantized = (decode(element) * float(s_dec_b)) * s_dec   (block scale first).
//     Caution: Transformer Engine's sources differ from this order by kernel
//     and version: (amax_b / 6) * s_enc (transpose kernel, "to ensure exact match"),
//     (amax_b * float(1/6)) * s_enc, and amax_b * (s_enc * float(1/6)); each rounds
//     differently on some blocks. Which one to match is an open choice (a one-line
//     change in block_scale() in formats/block_scale.hpp and in the reference test).
//
// Edge semantics (each a deliberate choice; OCP MX v1.0 where it speaks):
//   all-zero block   e8m0: scale code 0x00 (2^-127, Transformer Engine's choice); pow2:
//                    2^-127; fp32: s_enc = s_dec = 1; e4m3: s_dec_b = 0 (the e4m3 rounding
//                    of 0). Elements are 0 (+0 codes for +0 inputs, -0 kept where the
//                    element has one). Not counted as clamped.
//   NaN or Inf       any NaN or +-Inf in a block makes the whole block NaN: e8m0 scale 0xFF
//                    (OCP MX v1.0 6.3), pow2/fp32 scale NaN, e4m3 scale 0x7F (its NaN); the
//                    element codes of such a block are 0; every element decodes to NaN.
//                    For NVFP4 the tensor amax ignores non-finite values, so other blocks
//                    keep their scales. With per-tensor scaling the block is the tensor.
//   scale range      X outside [-127, 127] clamps to the nearest end (microxcaling makes
//                    X > 127 NaN; we clamp: elements then saturate as they would with any
//                    too-small scale); each clamped block counts in stats.clamped_scales.
//                    fp32 scales: a capped s_enc (max_elem / amax > FLT_MAX) counts too;
//                    e4m3 (NVFP4): a block with amax_b > 0 whose s_dec_b rounds to 0 (the
//                    block scale underflows and the block dequantizes to zeros) counts.
//   block vs axis    a block longer than its axis (or a tile larger than the matrix) is
//                    one ragged block (the library and `lpx quantize` alike).
//   overflow         elements saturate to +-max finite by default (Overflow::sat);
//                    Overflow::ieee gives Inf/NaN per the element format.
//   subnormal input  float32 subnormals are quantized as they are, unless
//                    flush_subnormal_inputs (Rouhani et al. 2023) zeroes them (sign kept)
//                    before anything else.
//   ragged blocks    the last block along an axis (or tile edge) is shorter and takes its
//                    own amax over the elements it has.
//   headroom_3_4     (Tseng et al. 2025; Castro et al. 2025, Quartet) scales (and the
//                    NVFP4 tensor scale) are chosen from the amax of x as usual; then each
//                    element is cast from x' = float32(x * 0.75f) instead of x, i.e.
//                    element = encode(x' * 2^-X) (or x' * s_enc, x' * s_enc_b). Since
//                    |x| * 2^-X < 2^(emax+1) under floor, |x'| * 2^-X < 1.5 * 2^emax <= max
//                    for E2M1/E4M3, so stochastic rounding never clips. dequantize returns
//                    float32(v / 0.75f), v the value dequantized as above: the 4/3 is
//                    applied last, as one correctly rounded float32 division. The flush
//                    option (below) acts before both.
//
// Statistics (QuantizeStats), over finite inputs:
//   clamped_scales  blocks whose scale was clamped (see above)
//   saturated       elements whose scaled magnitude exceeds the element's largest finite
//                   value (the element overflowed and was clipped, or became Inf/NaN
//                   under Overflow::ieee); NVFP4 blocks with s_dec_b = 0 do not count
//   flushed         nonzero inputs that dequantize to zero (underflow, including inputs
//                   zeroed by flush_subnormal_inputs)
//
// Stochastic rounding keys its random bits as lpx::random_bits(seed, stream, i) where i
// is the element's flat C-order index in the tensor, so results are reproducible and
// independent of the thread count (blocks are processed in parallel with OpenMP, but
// every element's result depends only on its block and its index).
#pragma once

#include <cstdint>
#include <deque>
#include <optional>
#include <span>
#include <vector>

#include "lpx/formats/block_format.hpp"
#include "lpx/numerics/rounding.hpp"

namespace lpx {

// A float32 tensor: data in C order, and its shape (product = data.size()).
template <class T>
struct TensorView {
  std::span<T> data;
  std::span<const int64_t> shape;
};

// Delayed scaling (Micikevicius et al. 2022; Transformer Engine's DelayedScaling): the
// amax of the last `length` steps, reduced by max or most_recent. quantize() only reads
// it; the caller pushes QuantizedTensor::amax after each step. An empty history reduces
// to 0, which gives scale 1 (TE's initial scale).
class AmaxHistory {
 public:
  enum class Reduction : uint8_t { max, most_recent };
  explicit AmaxHistory(size_t length = 1024, Reduction reduction = Reduction::max);
  void push(float amax);  // drops the oldest entry beyond `length`
  float amax() const;     // the reduction over the history
  size_t size() const { return values_.size(); }
  size_t length() const { return length_; }
  Reduction reduction() const { return reduction_; }
  // The amaxes held, oldest first: what a checkpoint saves (pushing them in order into a
  // fresh history of the same length and reduction restores it exactly).
  const std::deque<float>& values() const { return values_; }

 private:
  size_t length_;
  Reduction reduction_;
  std::deque<float> values_;
};

// The amax a whole tensor's tensor-wide scales are chosen from (per-tensor blocks and
// NVFP4's tensor scale): float32 bits of the largest |x'| over all elements (a NaN or Inf
// included, which makes a per-tensor scale NaN) and over the finite ones.
struct TensorAmax {
  uint32_t all_bits = 0, finite_bits = 0;
};

// Which implementation quantize(), fake_quantize(), dequantize() and tensor_amax() run.
// Both give the same bits (tests/formats/test_block_simd.cpp holds them to it, on every
// SIMD target); the reference is there to be compared with.
enum class QuantizePath : uint8_t {
  // The SIMD kernels (Highway runtime dispatch, see cast_testing::force_simd_target)
  // where the format, block layout and options allow, else the scalar reference.
  fastest,
  // The scalar per-block reference everywhere; fake_quantize() then dequantizes in a
  // second pass, with the scalar reference too.
  reference,
};

struct QuantizeOptions {
  Rounding round = Rounding::rne;
  Overflow overflow = Overflow::sat;  // block quantization saturates (docs/formats.md)
  uint64_t seed = 0;                  // stochastic rounding: random_bits(seed, stream,
  uint32_t stream = 0;                //   index_offset + i) for element i (flat, C order)
  int sr_bits = kMaxSrBits;
  // The flat index of x[0] in a larger tensor that is quantized piece by piece: the
  // pieces' random bits then equal one whole-tensor call's.
  uint64_t index_offset = 0;
  bool headroom_3_4 = false;           // x * 3/4 before quantizing; see the header comment
  bool flush_subnormal_inputs = false;  // zero float32-subnormal inputs first
  // fp32 scales only: s_enc = max_elem / amax / 2^margin. With `history` (per-tensor
  // blocks only) amax is history->amax() (delayed scaling) instead of the tensor's.
  int margin = 0;
  const AmaxHistory* history = nullptr;
  // Set when x is one piece of a larger tensor quantized piece by piece (with
  // index_offset; `lpx quantize` streams so): tensor_amax() of the whole tensor. Per-tensor
  // scales and NVFP4's tensor scale then come from it instead of from x, so every piece's
  // scales equal one whole-tensor call's, and QuantizedTensor::amax reports it. Block
  // scales still come from their blocks. CPU only (the kernels reject it).
  std::optional<TensorAmax> whole_tensor_amax;
  int threads = 0;  // 0: OpenMP's default; results never depend on it
  QuantizePath path = QuantizePath::fastest;  // results never depend on it either
  // Caller-given random words, as CastOptions' (docs/formats.md#caller-given-random-bits):
  // element i (flat index in x) takes random_words[index_offset + i]. CPU only; the SIMD
  // block kernels read them in place of Philox (random_words() below draws Philox's own,
  // for a caller that quantizes several tensors under one key).
  const uint32_t* random_words = nullptr;
  uint64_t random_words_count = 0;
};

struct QuantizeStats {
  int64_t clamped_scales = 0;
  int64_t saturated = 0;
  int64_t flushed = 0;
};

struct QuantizedTensor {
  std::vector<int64_t> shape;     // the logical (input) shape, C order
  BlockFormat format;             // with the block axis resolved to a non-negative axis
  std::vector<uint8_t> codes;     // one element code per input element, same C order
  // The scale grid: shape with each axis divided (rounded up) by the block extent along it.
  // Scale (b0, b1, ...) belongs to the block of elements whose index along axis d lies in
  // [b_d * extent_d, (b_d + 1) * extent_d).
  std::vector<int64_t> scale_shape;
  std::vector<uint8_t> scale_codes;  // e8m0 (2^(code-127), 0xFF NaN) or e4m3 codes
  std::vector<float> scale_values;   // pow2 / fp32: the decode scale (multiplier)
  std::optional<float> tensor_scale;  // e4m3 (NVFP4): the float32 decode scale s_dec
  float amax = 0;                     // largest finite |x| of the input (after the flush)
  bool headroom_3_4 = false;
  QuantizeStats stats;
};

// Throws std::invalid_argument on a shape/size mismatch, a shape whose non-zero extents
// multiply past int64 (even with a zero extent beside them), an axis out of range, an
// invalid format (validate()), or a history with blocks that are not per-tensor or scales
// that are not fp32. A 0-D tensor (empty shape) is one element. A tensor with a zero
// extent has no elements and a scale grid with a zero extent (no scales); its tensor
// scale, for two-level formats, is that of amax 0 (s_enc = 1), so dequantize() takes it.
QuantizedTensor quantize(TensorView<const float> x, const BlockFormat& format,
                         const QuantizeOptions& opt = {});
// out.data.size() must equal the product of q.shape; also std::invalid_argument when the
// codes or scales do not match the shapes.
void dequantize(const QuantizedTensor& q, std::span<float> out, int threads = 0,
                QuantizePath path = QuantizePath::fastest);
// dequantize(quantize(x)) into out (same size as x).
QuantizedTensor fake_quantize(TensorView<const float> x, std::span<float> out,
                              const BlockFormat& format, const QuantizeOptions& opt = {});

// fake_quantize() for callers that only need the values: the same out, scales, tensor
// scale, amax and statistics, but q.codes is left empty (the SIMD path never writes or
// allocates the element codes).
QuantizedTensor fake_quantize_values(TensorView<const float> x, std::span<float> out,
                                     const BlockFormat& format, const QuantizeOptions& opt = {});

// Pass 1 of a per-tensor or two-level quantization on its own, over the whole tensor
// (threaded and vectorized like quantize()): what QuantizeOptions::whole_tensor_amax
// wants before the pieces of a streamed tensor are quantized. The same checks as
// quantize().
TensorAmax tensor_amax(TensorView<const float> x, const BlockFormat& format,
                       const QuantizeOptions& opt = {});

// out[i] = random_bits(seed, stream, first + i) (numerics/philox.hpp), drawn in vector
// lanes: the words stochastic rounding takes under (seed, stream), for
// QuantizeOptions::random_words.
void random_words(uint64_t seed, uint32_t stream, uint64_t first, std::span<uint32_t> out);

// The block extents of `format` for a tensor of `shape` (one per axis), and the resulting
// scale grid shape; the same checks as quantize().
std::vector<int64_t> block_extents(std::span<const int64_t> shape, const BlockFormat& format);
std::vector<int64_t> scale_grid_shape(std::span<const int64_t> shape, const BlockFormat& format);

}  // namespace lpx
