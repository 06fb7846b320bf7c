// The simulator's view of a training recipe: which operand of which GEMM goes through
// which quantizer, and the precisions of accumulation, master weights and optimizer state.
//
// GEMM roles (RECIPES.md): forward Y = X W^T with X (M,K), W (N,K); dgrad dX = dY W;
// wgrad dW = dY^T X. The simulator passes every operand in its natural row-major layout
// (X as (M,K), W as (N,K), dY as (M,N)) and the quantizer picks the axis from the role:
// fwd_x, fwd_w along K; dgrad_dy, dgrad_w along N; wgrad_dy, wgrad_x along M. Transforms
// (Hadamard) are applied to both operands of a GEMM and not undone, so the simulator
// multiplies the two returned operands as they are.
//
// Recipes come from recipes/ (the catalogue and lpx::OperandQuantizer) when that target is
// built (LPX_SIM_HAVE_RECIPES); two built-in recipes exist in every build: "fp32" (every
// operand untouched) and "bf16" (every linear-layer operand rounded to bfloat16, RNE).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <span>
#include <string_view>
#include <vector>

#include "lpx/sim/device.hpp"

namespace lpx::sim {

enum class Role : uint8_t { fwd_x, fwd_w, dgrad_dy, dgrad_w, wgrad_x, wgrad_dy };
inline constexpr int kNumRoles = 6;
std::string_view role_name(Role r);  // "fwd_x", ...
// The axis of the row-major operand its GEMM reduces over: 1 for fwd_x, fwd_w, dgrad_dy.
constexpr int reduction_axis(Role r) {
  return r == Role::fwd_x || r == Role::fwd_w || r == Role::dgrad_dy ? 1 : 0;
}

struct LayerInfo {
  enum Kind : uint8_t { linear, attention_bmm, embedding, head };
  int index = 0;  // position among the model's layers, 0-based
  int count = 1;  // number of layers of the model
  Kind kind = linear;
  std::string name;  // "h0.attn.qkv", "fc1", ...
};

// What format a quantizer call applied to an operand, in words, filled by the quantizer
// that ran (recipes/operand.hpp, lpx::AppliedOperand, defines the fields; the run log
// stores them under /quant/applied, run_log.hpp). An operand left as it is reads
// element "float32", block/scale/rounding "none".
struct AppliedFormat {
  std::string element = "float32";  // "float32" | "bfloat16" | "ternary" | element name
  std::string block = "none";       // "1x16", "16x1", "16x16", "1xK", "tensor", "none"
  std::string scale = "none";       // "e8m0" | "pow2" | "fp32" | "e4m3" | "absmean" | "none"
  std::string tensor_scale = "none";  // "fp32" for two-level scaling
  std::string scale_rule = "none";  // "floor".."even" | "amax" | "history_max:N" | "none"
  std::string rounding = "none";    // "rne" | "sr" | ... | "none"
  std::string transform = "none";   // "rht16:fixed" | "rht64:per_call" | "none"
  int axis = -1;                    // the reduction axis (0 or 1)
  int sr_bits = 0;
  bool headroom_3_4 = false;
  int margin = 0;
  bool operator==(const AppliedFormat&) const = default;
};

// What one quantizer call did to one operand (filled by the quantizer; the identity
// reports amax and zeros, with an infinite SQNR).
struct OperandStats {
  int64_t elements = 0;
  float amax = 0;
  double flushed_pct = 0, saturated_pct = 0, sqnr_db = 0;
  int64_t clamped_blocks = 0;
  AppliedFormat applied;
};

// Quantizes the operands of one layer's GEMMs. `step` keys stochastic rounding and
// per-step transforms; stats may be null.
//
// State: a quantizer may keep state across calls (delayed scaling's amax history, the
// only kind today). state_capacity(role) is the most floats state(role) can hold (0: the
// role is stateless); checkpoints save state() and resuming calls set_state() with it,
// which must leave the quantizer exactly as it was when state() was read.
class GemmQuantizer {
 public:
  virtual ~GemmQuantizer() = default;
  virtual void apply(Role role, const float* in, float* out, int64_t rows, int64_t cols,
                     uint64_t step, OperandStats* stats) = 0;
  virtual bool is_identity(Role role) const = 0;
  virtual size_t state_capacity(Role) const { return 0; }
  virtual std::vector<float> state(Role) const { return {}; }
  // Throws std::invalid_argument when `values` does not fit (more than state_capacity).
  virtual void set_state(Role role, std::span<const float> values);
};

// GEMM accumulation: fp32, or partial sums rounded (RNE) to `mantissa_bits` explicit
// mantissa bits after every addition and promoted into an fp32 accumulator every
// `promote_every` products along K (DeepSeek-V3's FP32 promotion).
struct Accumulation {
  int mantissa_bits = 23;  // 23: plain fp32
  int promote_every = 0;   // 0: never (the whole K in the limited accumulator)
  bool is_fp32() const { return mantissa_bits >= 23; }
};

struct Numerics {
  enum class Master : uint8_t { fp32, bf16_sr };
  enum class Moments : uint8_t { fp32, bf16, fp8_e4m3 };
  Master master = Master::fp32;
  Moments moments = Moments::fp32;
  Accumulation accumulation;
};

struct SimRecipe {
  std::string name;
  Device device = Device::cpu;  // where the quantizers run (device.hpp)
  std::string json;  // the recipe as JSON (what the run log stores)
  Numerics numerics;
  // A quantizer for one layer; `seed` keys its randomness.
  std::function<std::unique_ptr<GemmQuantizer>(const LayerInfo&, uint64_t seed)> make_quantizer;
  std::function<bool(const LayerInfo&)> keeps_high_precision;
};

// A catalogue name or a .json path (recipes/), or without recipes/ a built-in ("fp32",
// "bf16"). Throws std::invalid_argument for unknown names. A recipe's quantizer handles
// the layers it keeps in high precision itself (the recipe's high-precision format);
// the simulator only switches their accumulation back to fp32. Attention products kept
// in "bf16" therefore get bfloat16 operands (RNE, formats' codec) with fp32 accumulation;
// kept in "fp32" their operands pass through untouched.
// With Device::gpu the catalogue recipes' quantizers run their kernels on the CUDA
// device (device.hpp; throws "no CUDA device: ..." without one); the built-ins run on
// the CPU.
SimRecipe load_sim_recipe(const std::string& name_or_path, Device device = Device::cpu);
bool have_recipe_catalogue();  // true when built with recipes/

// The identity quantizer (reports amax only) and the bf16 one, for tests and built-ins.
std::unique_ptr<GemmQuantizer> make_identity_quantizer();
std::unique_ptr<GemmQuantizer> make_bf16_quantizer();

// Fills stats for out = quantized(in) from the two arrays: amax of in, % of nonzero finite
// inputs that became zero (flushed), % of finite inputs that became non-finite (the
// only saturation visible from outside a quantizer), SQNR = 10 log10(sum in^2 / sum
// (in - out)^2) in dB (+inf when out == in).
void fill_stats_from_difference(const float* in, const float* out, int64_t n, OperandStats* stats);

}  // namespace lpx::sim
