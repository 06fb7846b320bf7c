// What a training recipe is: for each operand of each GEMM of a linear layer, the number
// format it is quantized to (any block format of formats/, or fp32 / bf16), its rounding
// and its transform; which layers stay in high precision; the precision of the master
// weights, the optimizer state and the GEMM accumulation. A recipe is data (a JSON file);
// the catalogue of published recipes (recipes/catalogue/*.json, docs/recipes.md#catalogue) is compiled
// into the library, so `recipe_by_name("nvfp4")` works from anywhere.
//
// GEMMs of a linear layer Y = X W^T, X (M,K), W (N,K), Y (M,N) (docs/recipes.md#roles):
//   forward  Y  = X W^T     roles fwd_x, fwd_w       reduction over K
//   dgrad    dX = dY W      roles dgrad_dy, dgrad_w  reduction over N
//   wgrad    dW = dY^T X    roles wgrad_dy, wgrad_x  reduction over M
// Each operand is quantized along its GEMM's reduction dimension (reduction_axis()).
//
// JSON schema (every key below; unknown keys are errors; "default" keys may be left out):
//   {
//     "name":    "nvfp4",                       required, [a-z0-9._-]+
//     "summary": "one line",                    default ""
//     "source":  "paper / citation",            required, non-empty
//     "notes":   "free text",                   default ""
//     "roles": {                                required: all six roles
//       "fwd_x" | "fwd_w" | "dgrad_dy" | "dgrad_w" | "wgrad_x" | "wgrad_dy": {
//         "format":       "fp32"                no quantization
//                       | "bf16"                element cast to bfloat16 (overflow ieee)
//                       | "ternary_absmean"     BitNet b1.58 weights (operand.hpp)
//                       | any spec parse_block_format() accepts (block_format.hpp),
//                         e.g. "nvfp4", "mxfp4", "e4m3:tensor:fp32", "e2m0:b16:e4m3";
//                         block quantization saturates (Overflow::sat)      required
//         "scale_rule":   "floor" | "rceil" | "ceil" | "even"   power-of-two scales only;
//                         overrides the spec's rule                          default: the spec's
//         "round":        "rne" | "rna" | "rtz" | "rup" | "rdn" | "sr" | "rto" | "sr-fast" | "sr-rne" | "sr-odd"   default "rne"
//         "sr_bits":      1..32 (random bits per stochastic rounding)        default 32
//         "headroom_3_4": bool, block formats only (quantize.hpp)            default false
//         "margin":       int >= 0, fp32-scaled block formats only           default 0
//         "amax_history": null | {"length": int >= 1, "reduction": "max" | "most_recent"}
//                         delayed scaling; per-tensor fp32 scales only       default null
//         "transform":    "none" | {"kind": "rht", "size": 16|32|64|128,
//                                   "signs": "fixed" | "per_call"}           default "none"
//       } },
//     "high_precision": {                       layers that skip the roles above
//       "first_blocks": int >= 0, "last_blocks": int >= 0,   default 0, 0
//       "first_fraction", "last_fraction": number in [0, 1]: the same as fractions of
//                         the model's depth (instead of the count)          default absent
//       "blocks": [int >= 0, ...]  more blocks kept, by index (ablations)   default []
//       "embeddings": bool, "head": bool, "attention": bool, default false, false, false
//       "format": "bf16" | "fp32"  what those layers' operands become    default "bf16"
//     },
//     "master_weights":  "fp32" | "bf16_sr"     default "fp32"
//     "optimizer_state": "fp32" | "bf16" | "fp8_e4m3"   default "fp32"
//     "accumulation":    "fp32" | {"mantissa_bits": 1..23, "promote_every": int >= 1,
//                                      "scales": "operands" | "at_promotion"}
//                                               default "fp32"; "scales" default "operands"
//   }
// Both operands of one GEMM must have the same transform (it cancels only then).
// Errors are std::invalid_argument "ORIGIN: PATH: what is wrong; allowed: ...", PATH a
// JSON path such as roles.dgrad_dy.round, on one line.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "lpx/formats/block_format.hpp"
#include "lpx/formats/quantize.hpp"
#include "lpx/numerics/rounding.hpp"

namespace lpx {

// The six GEMM operands; JSON names "fwd_x", "fwd_w", "dgrad_dy", "dgrad_w", "wgrad_x",
// "wgrad_dy". The numeric values are part of the random-key derivation (operand.hpp).
enum class GemmRole : uint8_t { fwd_x, fwd_w, dgrad_dy, dgrad_w, wgrad_x, wgrad_dy };
inline constexpr int kGemmRoles = 6;
inline constexpr std::array<GemmRole, kGemmRoles> kAllGemmRoles = {
    GemmRole::fwd_x,   GemmRole::fwd_w,   GemmRole::dgrad_dy,
    GemmRole::dgrad_w, GemmRole::wgrad_x, GemmRole::wgrad_dy};

enum class Gemm : uint8_t { fwd, dgrad, wgrad };  // values used in key derivation too

std::string_view role_name(GemmRole r);
GemmRole role_by_name(std::string_view name);  // throws std::invalid_argument listing the names
std::string_view gemm_name(Gemm g);             // "fwd", "dgrad", "wgrad"
constexpr Gemm gemm_of(GemmRole r) { return static_cast<Gemm>(static_cast<int>(r) / 2); }
// The axis of the row-major (rows x cols) operand that its GEMM reduces over:
// fwd_x, fwd_w, dgrad_dy: 1; dgrad_w, wgrad_x, wgrad_dy: 0.
constexpr int reduction_axis(GemmRole r) {
  return r == GemmRole::fwd_x || r == GemmRole::fwd_w || r == GemmRole::dgrad_dy ? 1 : 0;
}
// The other operand of the same GEMM.
constexpr GemmRole partner_of(GemmRole r) {
  return static_cast<GemmRole>(static_cast<int>(r) ^ 1);
}

// A random Hadamard transform along the reduction axis (numerics/hadamard.hpp).
struct Transform {
  enum class Kind : uint8_t { none, rht };
  enum class Signs : uint8_t {
    fixed,     // one sign vector for the whole run, keyed by the quantizer's seed only
    per_call,  // fresh signs for each (layer, gemm, step); both operands share them
  };
  Kind kind = Kind::none;
  int size = 0;  // 16, 32, 64 or 128 when kind == rht
  Signs signs = Signs::fixed;
  bool operator==(const Transform&) const = default;
};

// Delayed scaling's amax history (Micikevicius et al. 2022; Transformer Engine).
struct AmaxHistorySpec {
  size_t length = 1024;
  AmaxHistory::Reduction reduction = AmaxHistory::Reduction::max;
  bool operator==(const AmaxHistorySpec&) const = default;
};

// How one operand is quantized.
struct RoleSpec {
  enum class Kind : uint8_t {
    fp32,             // left as it is
    bf16,             // element cast to bfloat16 (Overflow::ieee, as PyTorch's .to(bf16))
    block,            // block quantization with `block` (formats/quantize.hpp), Overflow::sat
    ternary_absmean,  // BitNet b1.58 weight quantizer (operand.hpp), per tensor, RNE only
  };
  Kind kind = Kind::fp32;
  BlockFormat block;         // kind == block; the axis is set per call (reduction_axis)
  Rounding round = Rounding::rne;
  int sr_bits = kMaxSrBits;
  bool headroom_3_4 = false;                   // block only
  int margin = 0;                              // fp32-scaled block only
  std::optional<AmaxHistorySpec> amax_history;  // per-tensor fp32-scaled block only
  Transform transform;

  // The canonical "format" text: "fp32", "bf16", "ternary_absmean", the preset name when
  // the block format is a preset with its own rule, else BlockFormat::spec().
  std::string format_name() const;
  // True when the operand is neither transformed nor quantized.
  bool is_identity() const { return kind == Kind::fp32 && transform.kind == Transform::Kind::none; }
};

struct HighPrecisionLayers {
  int first_blocks = 0;  // transformer blocks [0, first_blocks) ...
  int last_blocks = 0;   // ... and [count - last_blocks, count) keep high precision
  // Or the same as fractions of depth (a recipe written for another depth, as NVIDIA's
  // "2 and 8 of 62 blocks"): a model of `count` blocks keeps round(fraction * count)
  // blocks, halves rounded up (docs/recipes.md#high-precision-layers). A fraction and its
  // count are exclusive.
  std::optional<double> first_fraction, last_fraction;
  std::vector<int> blocks;  // more blocks kept, by index, sorted and unique (ablations)
  // Single linear layers kept, by name (ablations): a layer's full name ("h2.mlp.fc",
  // "fc0") or its name within every transformer block ("mlp.fc" keeps h0.mlp.fc,
  // h1.mlp.fc, ...). See layer_name_matches.
  std::vector<std::string> layers;
  // The numbers of leading and trailing blocks kept in a model of `count` blocks.
  int first_count(int count) const;
  int last_count(int count) const;
  bool embeddings = false;
  bool head = false;
  bool attention = false;  // attention products (Q K^T, P V)
  RoleSpec::Kind format = RoleSpec::Kind::bf16;  // fp32 or bf16: what their operands become
};

enum class MasterWeights : uint8_t { fp32, bf16_sr };  // bf16_sr: BF16 weights, SR updates
enum class OptimizerState : uint8_t { fp32, bf16, fp8_e4m3 };

// The GEMM accumulator, for sim (which implements the GEMM). limited == false: FP32.
// limited: partial sums kept with `mantissa_bits` explicit mantissa bits and added into an
// FP32 accumulator every `promote_every` products (DeepSeek-V3 section 3.3.2).
// scales_at_promotion: the block-quantized operands enter the GEMM as their element values
// (the codes decoded, the block scale left out), and each partial sum is multiplied by the
// product of its two block scales as it is promoted, as DeepSeek-V3's tensor cores and
// CUDA cores share the work (section 3.3.2; docs/recipes.md#scales-at-promotion).
// Otherwise ("operands") the GEMM multiplies the dequantized operands.
struct Accumulation {
  bool limited = false;
  int mantissa_bits = 23;
  int promote_every = 0;
  bool scales_at_promotion = false;
  // 23 explicit bits are float32's own: such an accumulator is plain FP32.
  bool is_fp32() const { return !limited || mantissa_bits >= 23; }
  bool operator==(const Accumulation&) const = default;
};

struct Recipe {
  std::string name, summary, source, notes;
  std::array<RoleSpec, kGemmRoles> roles;  // indexed by GemmRole
  HighPrecisionLayers high_precision;
  MasterWeights master_weights = MasterWeights::fp32;
  OptimizerState optimizer_state = OptimizerState::fp32;
  Accumulation accumulation;

  const RoleSpec& role(GemmRole r) const { return roles[static_cast<size_t>(r)]; }
  RoleSpec& role(GemmRole r) { return roles[static_cast<size_t>(r)]; }

  // Parses and validates (schema above). `origin` (a file path, or "catalogue") prefixes
  // every error message. Throws std::invalid_argument.
  static Recipe from_json(const std::string& text, const std::string& origin);
  // The canonical JSON: every key in schema order, 2-space indent, trailing newline.
  // from_json(to_json()) gives back an equal recipe (same to_json()).
  std::string to_json() const;
  // One line: the format/rounding/transform of each role, compressed where roles agree.
  std::string describe() const;
};

std::string_view master_weights_name(MasterWeights m);
std::string_view optimizer_state_name(OptimizerState s);

// The catalogue, in the order of docs/recipes.md#catalogue. recipe_by_name throws std::invalid_argument listing
// the names.
std::span<const std::string_view> recipe_names();
const Recipe& recipe_by_name(std::string_view name);
// A catalogue name, else a path to a .json file (read and parsed; errors name the file).
Recipe load_recipe(const std::string& name_or_path);

// One linear (or attention product, embedding, head) of a model. `index` is the
// transformer block the layer belongs to (0-based) and `count` the number of blocks:
// first_blocks/last_blocks select on them. `name` must be unique within the model
// (e.g. "blocks.3.mlp.fc1"): it keys the layer's random streams (operand.hpp).
struct LayerInfo {
  int index = 0;
  int count = 1;
  enum Kind { linear, attention_bmm, embedding, head } kind = linear;
  std::string name;
};

std::string_view layer_kind_name(LayerInfo::Kind k);  // "linear" | "attention_bmm" | "embedding" | "head"

// linear: index < first_count(count), index >= count - last_count(count), index in
// high_precision.blocks, or a name in high_precision.layers; attention_bmm:
// high_precision.attention; embedding: .embeddings; head: .head.
bool keeps_high_precision(const Recipe& recipe, const LayerInfo& layer);

// Whether `pattern` names the layer `name`: the same name, or the name within a
// transformer block, which models prefix with "h<block>." ("mlp.fc" names "h3.mlp.fc").
bool layer_name_matches(std::string_view pattern, std::string_view name);

}  // namespace lpx
