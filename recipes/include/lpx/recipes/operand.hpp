// Applying a recipe to the operands of one layer's GEMMs: transform, then quantize
// ("fake-quantize": the output is float32 holding the dequantized values, as a GEMM of
// them in float32 would see).
//
// Per call apply(role, in, out, rows, cols, step):
//   1. The operand is row-major (rows x cols); its reduction axis is reduction_axis(role)
//      (recipe.hpp): for Y = X W^T with X (M,K), W (N,K): fwd_x and fwd_w along axis 1
//      (K); dgrad dX = dY W: dY (M,N) along axis 1, W (N,K) along axis 0; wgrad
//      dW = dY^T X: dY (M,N) and X (M,K) along axis 0 (M).
//   2. Transform (when the role has one): the random Hadamard transform of size n in
//      blocks of n along the reduction axis (numerics/hadamard.hpp, hadamard_blocks). It
//      is NOT undone: both operands of the GEMM get the same orthonormal transform (same
//      signs for a given (layer, gemm, step)), so their GEMM equals the GEMM of the
//      originals up to quantization. A reduction extent that is not a multiple of n
//      (e.g. a 10-class head) gets no transform; both operands of that GEMM share the
//      extent, so they skip it together.
//   3. Quantize: block formats via lpx::fake_quantize with the block axis set to the
//      reduction axis (1xN vectors and per-channel blocks run along it; 2-D tiles and
//      per-tensor blocks cover the same elements either way); bf16 via fake_cast_array;
//      ternary_absmean via fake_quantize_ternary_absmean below.
//
// Random keys (all from the constructor's `seed`; documented so that a GPU or another
// implementation reproduces them bit for bit):
//   layer_key   = FNV-1a 32 of LayerInfo::name's bytes (offset 2166136261, prime 16777619)
//   call_key(tag, step): (k0, k1, k2, k3) = philox4x32_10(
//                    counter = (uint32(step), uint32(step >> 32), layer_key,
//                               (uint32(index) << 8) | (kind << 4) | tag),
//                    key = (uint32(seed), uint32(seed >> 32)))
//                 gives call seed = k0 | (uint64(k1) << 32) and call stream = k2.
//                 (index = LayerInfo::index, kind = LayerInfo::Kind as 0..3.)
//   stochastic rounding of role r at step t: quantize / cast with (call seed, call stream)
//                 of call_key(tag = int(r) (0..5), t); element index = the element's flat
//                 row-major index in the operand (lpx::random_bits(seed, stream, i)).
//   RHT signs, per_call: s_j = -1 iff random_bits(call seed, call stream, j) >> 31 for
//                 call_key(tag = 8 + int(gemm_of(r)), t): the same for both roles of a GEMM.
//   RHT signs, fixed: s_j from random_bits(seed, kFixedSignStream, j) >> 31: one vector for
//                 the run (per seed), the same for every layer, GEMM and step.
//
// Delayed scaling (roles with amax_history, e.g. fp8-delayed): each such role keeps an
// AmaxHistory; apply() quantizes with the history's amax (the previous calls; the first
// call, with an empty history, uses scale 1 as Transformer Engine does) and then pushes
// this operand's amax. So apply() changes state: call it once per role per step, in step
// order. Calls for different roles may run concurrently; calls for the same role may not.
// (sim's evaluation puts the histories back after each forward, so evaluating never
// changes training.) The histories are the quantizer's only state (SR and RHT signs are
// keyed by step; the last signs kept per role are a cache of that key, not state):
// history_values() / restore_history() save and restore it, which is what makes a
// resumed training run (sim's checkpoints) bit-identical to an uninterrupted one.
//
// High-precision layers (keeps_high_precision): every role becomes the recipe's
// high_precision.format (bf16 cast with RNE, or fp32 = untouched), with no transform.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "lpx/formats/cast.hpp"
#include "lpx/formats/quantize.hpp"
#include "lpx/recipes/recipe.hpp"

namespace lpx {

inline constexpr uint32_t kFixedSignStream = 0x52485446u;  // "RHTF"

struct OperandStats {
  int64_t elements = 0;
  float amax = 0;             // largest finite |v| of what the format saw (after the transform)
  double flushed_pct = 0;     // % of nonzero inputs that became zero
  double saturated_pct = 0;   // % of elements clipped at the format's largest value (NaN:
                              // not counted, by a backend that cannot)
  double sqnr_db = 0;         // 10 log10(sum v^2 / sum (q - v)^2), v = transformed input,
                              // q = output, over finite v; +inf when q == v
  int64_t clamped_blocks = 0;  // blocks whose scale was clamped (quantize.hpp); -1: not counted
};

// A block-quantized operand as a GEMM with the scales at promotion takes it (recipes'
// Accumulation::scales_at_promotion; docs/recipes.md#scales-at-promotion): each element's
// value with its block scale left out (decode(code): an FP8 code's own value), and the
// scale of each line of the operand over each run of `every` elements along its reduction
// axis. A line is a row for reduction axis 1 and a column for axis 0: the operand's index
// in the GEMM's output. The caller sets elements (rows * cols floats) and every.
struct UnscaledOperand {
  float* elements = nullptr;
  int64_t every = 0;
  // Written by apply(): scaled is false for a role that is not block-quantized (its GEMM
  // operand is `out` itself, scale 1). Otherwise scales holds lines x runs floats,
  // row-major, runs = ceil(reduction extent / every), each the decode scale of the block
  // that holds the run.
  bool scaled = false;
  std::vector<float> scales;
  int64_t lines = 0, runs = 0;
};

// What one apply() call did to its operand, in words: the run log stores it per layer
// and role (runlog/schema.hpp, /quant/applied), so a reader sees which format really ran.
struct AppliedOperand {
  std::string element = "float32";  // "float32" (not quantized), "bfloat16", "ternary", or
                                     // the block format's canonical element name
  // One block's extent in the operand's row-major (rows x cols) layout: "1x16" (a vector
  // along axis 1), "16x1" (along axis 0), "16x16" (a 2-D tile), "1xK" / "Mx1" (one scale
  // per row / column: per-channel), "tensor" (one scale); "none" for element casts.
  std::string block = "none";
  std::string scale = "none";         // "e8m0" | "pow2" | "fp32" | "e4m3" | "absmean" | "none"
  std::string tensor_scale = "none";  // "fp32": a second, per-tensor scale (NVFP4)
  // "floor" | "rceil" | "ceil" | "even" (power-of-two scales); "amax" (fp32 or e4m3 scales
  // from this tensor's amax); "history_max:N" | "history_most_recent:N" (delayed scaling
  // over N steps); "none".
  std::string scale_rule = "none";
  std::string rounding = "none";      // rounding_name(), "none" when nothing was rounded
  std::string transform = "none";     // "rht16:fixed", "rht64:per_call", ... or "none"
  int axis = -1;                      // the reduction axis the call used (0 or 1)
  int sr_bits = 0;                    // random bits per element with rounding "sr", else 0
  bool headroom_3_4 = false;
  int margin = 0;
  bool operator==(const AppliedOperand&) const = default;
};

// Several calls on the same operand role combined into one record (attention runs one
// GEMM pair per batch and head): elements summed, amax the largest, the percentages
// weighted by elements, SQNR the smallest, clamped blocks summed (-1 when either is not
// counted); applied strings that differ are joined with "|" ("rht64:per_call|none"), the
// integer fields are the first call's.
void merge_into(OperandStats& total, const OperandStats& call);
void merge_into(AppliedOperand& total, const AppliedOperand& call);

struct CallKey {
  uint64_t seed;
  uint32_t stream;
};
uint32_t layer_key(const LayerInfo& layer);  // FNV-1a 32 of the name
CallKey call_key(uint64_t seed, const LayerInfo& layer, uint32_t tag, uint64_t step);

// BitNet b1.58 weights (Ma et al. 2024, and the reference code of 1bitLLM/bitnet_b1_58):
//   gamma = max(float(sum |w| / count), 1e-5f)   (sum and division in double; per tensor)
//   s = 1.0f / gamma;  q = clamp(nearbyint(w * s), -1, 1)   (RNE; w * s in float32)
//   out = q / s                                               (float32)
// i.e. torch's `(w * s).round().clamp(-1, 1) / s`. Returns gamma. out may equal in.
// saturated / flushed (optional) count |nearbyint(w*s)| > 1 and nonzero w that became 0.
float fake_quantize_ternary_absmean(std::span<const float> in, std::span<float> out,
                                    int64_t* saturated = nullptr, int64_t* flushed = nullptr);

// Where apply() runs its three kernels. The default (a null backend) is the CPU: formats'
// fake_quantize_values and fake_cast_array, numerics' hadamard_blocks. Another executor
// (sim's CUDA backend, for `lpx train --device gpu`) must give the same bits; the
// quantizer keeps the keys, the signs, the order of the steps and the statistics, so an
// executor only computes.
class OperandBackend {
 public:
  virtual ~OperandBackend() = default;
  // hadamard_blocks(data, rows, cols, axis, n, signs), in place.
  virtual void hadamard(float* data, int64_t rows, int64_t cols, int axis, int n,
                        std::span<const float> signs) = 0;
  // fake_quantize_values(v, out, f, opt). A backend that cannot count saturated elements
  // or clamped scales sets stats.saturated / stats.clamped_scales to -1 (the quantizer
  // then reports them as NaN / -1); amax must be right when opt.history is set.
  virtual QuantizedTensor fake_quantize(TensorView<const float> v, std::span<float> out,
                                        const BlockFormat& f, const QuantizeOptions& opt) = 0;
  // fake_cast_array(in, out, f, opt).
  virtual void fake_cast(std::span<const float> in, std::span<float> out, const ElementFormat& f,
                         const CastOptions& opt) = 0;
  // Told of each block quantization the quantizer ran on the CPU instead (an operand for
  // a GEMM with the scales at promotion, whose codes the backend does not return).
  virtual void count_cpu_fallback() {}
};

class OperandQuantizer {
 public:
  // Keeps a copy of the recipe's role specs; `recipe` need not outlive it.
  OperandQuantizer(const Recipe& recipe, const LayerInfo& layer, uint64_t seed);

  // in and out are row-major (rows x cols) float32; out may equal in (in place); they
  // must not otherwise overlap. stats, when given, is filled (see OperandStats); so is
  // applied (what this call did).
  // unscaled, when given, also receives the operand as a GEMM with the scales at
  // promotion takes it (UnscaledOperand); out still holds the dequantized values. A block
  // role then needs one scale per run of unscaled->every along its reduction axis
  // (Recipe::from_json checks that for a recipe with scales at promotion), else
  // std::invalid_argument; it is quantized on the CPU even with a backend.
  void apply(GemmRole role, const float* in, float* out, int64_t rows, int64_t cols,
             uint64_t step, OperandStats* stats = nullptr, AppliedOperand* applied = nullptr,
             UnscaledOperand* unscaled = nullptr);

  // fp32 role without a transform: apply() would copy in to out unchanged.
  bool is_identity(GemmRole role) const { return spec(role).is_identity(); }
  // For an identity role: the stats and applied record apply() would give, without an
  // output (the caller uses `in` as it is). Throws std::logic_error for other roles.
  void observe(GemmRole role, const float* in, int64_t rows, int64_t cols, OperandStats* stats,
               AppliedOperand* applied) const;
  // The spec apply() uses for the role (the high-precision one in a kept layer).
  const RoleSpec& spec(GemmRole role) const { return specs_[static_cast<size_t>(role)]; }
  bool high_precision() const { return high_precision_; }
  const LayerInfo& layer() const { return layer_; }
  // Runs apply()'s kernels on `backend` (null: the CPU).
  void set_backend(std::shared_ptr<OperandBackend> backend) { backend_ = std::move(backend); }
  // The sign vector (length n) the role's transform uses at `step`; empty without one.
  std::vector<float> signs(GemmRole role, uint64_t step) const;
  // The delayed-scaling history of a role, or null.
  const AmaxHistory* history(GemmRole role) const {
    const auto& h = histories_[static_cast<size_t>(role)];
    return h ? &*h : nullptr;
  }
  // The amax values the role's history holds, oldest first (at most its length; empty
  // without a history).
  std::vector<float> history_values(GemmRole role) const;
  // Replaces the role's history with `values` (oldest first), as if they had been pushed
  // in order. Throws std::invalid_argument when the role keeps no history and values is
  // not empty, or when there are more values than the history's length.
  void restore_history(GemmRole role, std::span<const float> values);

 private:
  std::array<RoleSpec, kGemmRoles> specs_;
  std::array<std::optional<AmaxHistory>, kGemmRoles> histories_;
  LayerInfo layer_;
  uint64_t seed_;
  bool high_precision_;
  std::shared_ptr<OperandBackend> backend_;
  // The last sign vector apply() drew per role and its step: per-call signs are keyed by
  // (layer, GEMM, step), so attention's per-head products, which call apply() once per
  // (sequence, head) with the same key, draw them once a step.
  struct CachedSigns {
    bool valid = false;
    uint64_t step = 0;
    std::vector<float> signs;
  };
  std::array<CachedSigns, kGemmRoles> signs_cache_;
  const std::vector<float>& cached_signs(GemmRole role, uint64_t step);
  // Stochastic rounding's words per role, likewise: keyed by (layer, role, step) and the
  // element's flat index, so every (sequence, head) product of a step takes the same words
  // for its indices. From a role's second call in a step (a layer called once a step never
  // pays for the copy) the words of the first n indices are drawn once and handed to the
  // quantizer (QuantizeOptions::random_words) instead of drawn per call. Operands of up to
  // kMaxCachedWords elements only: the per-head products, not whole layers.
  static constexpr int64_t kMaxCachedWords = int64_t{1} << 16;
  struct CachedWords {
    bool valid = false;
    uint64_t step = 0;
    int calls = 0;  // apply() calls for the role at `step`
    std::vector<uint32_t> words;
  };
  std::array<CachedWords, kGemmRoles> words_cache_;
  // The cached words (at least n) for the role's n-element operand at `step` under `key`,
  // or none when the call should draw its own (first call of the step, or a large operand).
  std::span<const uint32_t> cached_words(GemmRole role, uint64_t step, const CallKey& key, int64_t n);
};

}  // namespace lpx
