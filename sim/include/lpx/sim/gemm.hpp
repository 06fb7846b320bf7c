// The simulator's GEMMs and the quantized linear layer built on them.
//
// Every GEMM is C (M,N) = sum_k A(i,k) B(k,j) over row-major float32 arrays, with A and B
// possibly transposed in memory, in one of two orders (lpx train --gemm):
//   fast   the CPU's fastest fp32 product. Where the CPU has FMA instructions (AVX2,
//          AVX-512) that is the exact order below, run in register tiles
//          (src/exact_gemm_hwy.cpp, 4.6-5.9x Eigen's product as sim compiled it), so fast and
//          exact give the same bits there. Elsewhere it is Eigen, whose order is its own
//          (a device GEMM cannot reproduce it). Either way C is computed in fixed chunks of
//          kRowChunk rows (Eigen's own threading is off): the chunks are spread over
//          OpenMP threads, but each chunk's arithmetic is the same whatever the thread
//          count, so results are bit-identical with 1 or 2 or 16 threads.
//   exact  numerics/ordered_sum.hpp's order: each element summed in increasing k with one
//          FMA per product, so that the device's ordered kernel (kernels/gemm.hpp,
//          gemm_f32_device) gives the same bits and CPU and GPU runs can be compared
//          bit for bit.
// Limited accumulation (recipes' Accumulation::limited) has one order only, ordered_sum's
// limited rule: it emulates a tensor core whose partial sums keep fewer mantissa bits,
// each product a*b formed in float32 (exact for the 8-bit and narrower operands recipes
// produce), added to the partial sum and the exact sum rounded once to `mantissa_bits`
// explicit bits (RNE, float32 exponent range) after every addition; every `promote_every` products
// the partial sum is added into a float32 accumulator and restarts from 0 (DeepSeek-V3's
// FP32 promotion every 128 elements). promote_every = 0 never promotes.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "lpx/numerics/ordered_sum.hpp"
#include "lpx/recipes/operand.hpp"
#include "lpx/recipes/recipe.hpp"

namespace lpx::sim {

inline constexpr int64_t kRowChunk = 64;

// x rounded to `mantissa_bits` explicit mantissa bits (RNE), exponent range of float32.
float round_to_mantissa(double x, int mantissa_bits);

std::string_view gemm_order_name(GemmOrder o);    // "fast" | "exact"
GemmOrder gemm_order_by_name(std::string_view);  // throws std::invalid_argument naming both

enum class Trans : uint8_t { n, t };
// C (M,N) (+)= op(A) op(B), op(A) (M,K), op(B) (K,N). A is stored (M,K) for Trans::n and
// (K,M) for Trans::t; B is stored (K,N) for Trans::n and (N,K) for Trans::t.
// GemmOrder::fast with fp32 accumulation runs the CPU's fastest product: the exact order's
// register tiles where the CPU has FMA instructions (so fast and exact give the same bits
// there), Eigen's blocked product elsewhere (docs/kernels.md#ordered-gemms).
void gemm(Trans ta, Trans tb, const float* a, const float* b, float* c, int64_t m, int64_t n,
          int64_t k, const Accumulation& acc, bool accumulate, GemmOrder order = GemmOrder::fast);

// Limited accumulation with the block scales applied at promotion (recipes'
// Accumulation::scales_at_promotion; numerics/ordered_sum.hpp, ordered_dot_scaled): op(A)
// and op(B) hold element values, a_scales (M, runs) and b_scales (N, runs) row-major the
// scale of row i of op(A) and of column j of op(B) over each run of promote_every
// products, runs = ceil(k / promote_every); a null array is all ones. acc must be limited
// with 1 <= mantissa_bits <= 22 and promote_every >= 1, else std::invalid_argument.
// Bit-identical for every thread count.
void gemm_scaled(Trans ta, Trans tb, const float* a, const float* a_scales, const float* b,
                 const float* b_scales, float* c, int64_t m, int64_t n, int64_t k, const Accumulation& acc,
                 bool accumulate);

// Whether gemm()'s fast fp32 order is the exact order on this CPU (it has FMA instructions).
bool fast_gemm_is_exact();

// Another executor of gemm() (sim's device backend, for lpx train --device gpu). With
// GemmOrder::exact or limited accumulation it must give gemm()'s bits; with fast fp32
// accumulation it may sum in its own order.
class GemmBackend {
 public:
  virtual ~GemmBackend() = default;
  virtual void gemm(Trans ta, Trans tb, const float* a, const float* b, float* c, int64_t m,
                    int64_t n, int64_t k, const Accumulation& acc, bool accumulate, GemmOrder order) = 0;
};

// Where and in which order a layer runs its GEMMs (backend null: gemm() on the CPU).
struct GemmExecution {
  std::shared_ptr<GemmBackend> backend;
  GemmOrder order = GemmOrder::fast;
};

// One layer's quantized GEMMs: Y = X W^T (+ bias), dX = dY W, dW = dY^T X, each operand
// through the layer's recipe quantizer (recipes/operand.hpp) for its role first, along
// the role's reduction axis. With Accumulation::scales_at_promotion the GEMMs are
// gemm_scaled() of the operands' element values and block scales, on the CPU even with a
// device backend (sim/device.hpp). stats[role] and applied[role] hold what the last call
// did to that operand (when stats are collected).
class QuantGemms {
 public:
  QuantGemms(OperandQuantizer q, Accumulation acc, GemmExecution exec = {});
  // y (M,N) = Q(fwd_x, x (M,K)) Q(fwd_w, w (N,K))^T + bias (N, or null)
  void forward(const float* x, const float* w, const float* bias, float* y, int64_t m,
               int64_t n, int64_t k, uint64_t step, bool collect);
  // dx (M,K) = Q(dgrad_dy, dy) Q(dgrad_w, w)  (set, or added when dx_accumulate)
  // dw (N,K) += Q(wgrad_dy, dy)^T Q(wgrad_x, x); dbias (N) += column sums of dy (fp32)
  void backward(const float* dy, const float* x, const float* w, float* dx, float* dw,
                float* dbias, int64_t m, int64_t n, int64_t k, uint64_t step, bool collect,
                bool dx_accumulate = false);
  const LayerInfo& info() const { return q_.layer(); }
  OperandQuantizer& quantizer() { return q_; }
  const OperandQuantizer& quantizer() const { return q_; }
  std::array<OperandStats, kGemmRoles> stats{};
  std::array<AppliedOperand, kGemmRoles> applied{};
  // Merges several calls' stats (attention runs one GEMM pair per batch and head):
  // when `merge` is on, each call is combined into stats and applied (merge_into,
  // recipes/operand.hpp) instead of replacing them.
  bool merge = false;
  void reset_stats() {
    stats = {};
    applied = {};
  }
  // What the layer's operands looked like this step, for the divergence detectors' early
  // signals (docs/recipes.md#divergence-signals). NaN where not measured. reset_probes()
  // starts a step; calls within a step keep the largest value.
  //   outlier_ratio   largest per-channel RMS of fwd_x over the RMS of the whole operand
  //                   (channels: the reduction dimension K): a channel that grows out of
  //                   its peers (SwiGLU outlier channels, Fishman et al. 2024) raises it
  //   amax_staleness  for roles with delayed scaling: this call's amax (the largest finite
  //                   |x| the quantizer measured and pushed, after its transform if any)
  //                   over the amax the scale was chosen from (the history's before the
  //                   push); above 1 the operand saturates
  struct Probes {
    double outlier_ratio = std::numeric_limits<double>::quiet_NaN();
    double amax_staleness = std::numeric_limits<double>::quiet_NaN();
  };
  Probes probes;
  bool probe_outliers = true;  // false for the data's own input layer and attention products
  void reset_probes() { probes = {}; }
  // An injected activation outlier (lpx train --inject activation): from `from_step` on,
  // input channel `channel` of X is multiplied by `magnitude` before the layer uses it, in
  // the forward GEMM and the weight-gradient GEMM, and its input gradient is multiplied by
  // the same factor, so the layer is exactly y = (x * s) W^T with s one on other channels.
  struct Injection {
    int64_t from_step = 0, channel = 0;
    float magnitude = 1;
  };
  std::optional<Injection> injection;
  // Test hook: when set, called with every operand right before its GEMM uses it: `in`
  // the operand as the layer passed it, `used` what the GEMM multiplies (the quantizer's
  // output, or `in` itself for an identity role; with scales at promotion a block role's
  // element values), both row-major (rows x cols).
  std::function<void(GemmRole role, const float* in, const float* used, int64_t rows, int64_t cols,
                     uint64_t step)>
      operand_hook;

 private:
  // The operand the GEMM multiplies: `in` itself for an identity role, else its quantized
  // copy in this thread's operand buffer `slot` (0: the GEMM's A, 1: its B), which the
  // next GEMM on the thread overwrites. With scales at promotion a block role's operand
  // is its element values instead, and *scales its run scales (gemm_scaled's a_scales or
  // b_scales, in the same thread's buffers); null for every other operand.
  const float* quant(GemmRole r, const float* in, int64_t rows, int64_t cols, uint64_t step,
                     bool collect, int slot, const float** scales);
  void run(Trans ta, Trans tb, const float* a, const float* a_scales, const float* b, const float* b_scales,
           float* c, int64_t m, int64_t n, int64_t k, bool accumulate);
  OperandQuantizer q_;
  Accumulation acc_;
  GemmExecution exec_;
  std::vector<float> injected_;
  const float* inject(const float* x, int64_t m, int64_t k, uint64_t step);
};

}  // namespace lpx::sim
