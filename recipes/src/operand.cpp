// OperandQuantizer: a recipe's transform + quantization of one layer's GEMM operands
// (operand.hpp states the semantics and the random-key derivation).
#include "lpx/recipes/operand.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "lpx/formats/block_scale.hpp"
#include "lpx/formats/cast.hpp"
#include "lpx/numerics/hadamard.hpp"
#include "lpx/numerics/philox.hpp"
#include "lpx/numerics/scratch.hpp"
#include "operand_stats.hpp"

namespace lpx {

uint32_t layer_key(const LayerInfo& layer) {
  uint32_t h = 2166136261u;
  for (unsigned char c : layer.name) {
    h ^= c;
    h *= 16777619u;
  }
  return h;
}

CallKey call_key(uint64_t seed, const LayerInfo& layer, uint32_t tag, uint64_t step) {
  const uint32_t word3 = (static_cast<uint32_t>(layer.index) << 8) |
                         (static_cast<uint32_t>(layer.kind) << 4) | (tag & 0xFu);
  const Philox4x32 k = philox4x32_10(
      Philox4x32{{static_cast<uint32_t>(step), static_cast<uint32_t>(step >> 32), layer_key(layer), word3}},
      static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32));
  return CallKey{k.v[0] | (static_cast<uint64_t>(k.v[1]) << 32), k.v[2]};
}

float fake_quantize_ternary_absmean(std::span<const float> in, std::span<float> out,
                                    int64_t* saturated, int64_t* flushed) {
  if (in.size() != out.size())
    throw std::invalid_argument(
        fmt::format("ternary_absmean: {} inputs but {} outputs", in.size(), out.size()));
  double sum = 0;
  for (float w : in) sum += std::fabs(static_cast<double>(w));
  const float mean = in.empty() ? 0.0f : static_cast<float>(sum / static_cast<double>(in.size()));
  const float gamma = std::max(mean, 1e-5f);
  const float s = 1.0f / gamma;
  int64_t sat = 0, flush = 0;
  for (size_t i = 0; i < in.size(); ++i) {
    const float w = in[i];
    const float r = std::nearbyint(w * s);  // the default rounding mode: ties to even
    sat += std::fabs(r) > 1.0f ? 1 : 0;
    const float q = std::clamp(r, -1.0f, 1.0f);
    const float y = q / s;
    flush += (w != 0 && y == 0) ? 1 : 0;
    out[i] = y;
  }
  if (saturated) *saturated = sat;
  if (flushed) *flushed = flush;
  return gamma;
}

namespace {

RoleSpec high_precision_spec(RoleSpec::Kind kind) {
  RoleSpec r;
  r.kind = kind;
  return r;
}

// The transformed (or, when in == out, copied) operand apply() quantizes from. It lives
// only through one call, so one buffer per thread serves every layer's quantizer: a
// model holds the largest operand once, not once per layer
// (docs/architecture.md#scratch-buffers).
ScratchBuffer<float>& transform_buffer() {
  static thread_local ScratchBuffer<float> buffer;
  return buffer;
}

// Small operands (attention's per-head products) are cast on the calling thread: an
// OpenMP region per tiny call costs more than it gives. Results never depend on it.
int threads_for(int64_t n) { return n < (int64_t{1} << 16) ? 1 : 0; }

// The block-format part of AppliedOperand, from the format the call quantized with (its
// axis already set to the reduction axis).
void describe_block(const BlockFormat& f, int64_t rows, int64_t cols, const RoleSpec& s,
                    AppliedOperand* a) {
  a->element = std::string(f.element.name_view());
  const int axis = f.block.axis < 0 ? f.block.axis + 2 : f.block.axis;
  switch (f.block.kind) {
    case BlockShape::Kind::vector:
      a->block = axis == 1 ? fmt::format("1x{}", f.block.length) : fmt::format("{}x1", f.block.length);
      break;
    case BlockShape::Kind::tile: a->block = fmt::format("{}x{}", f.block.rows, f.block.cols); break;
    case BlockShape::Kind::channel: a->block = axis == 1 ? fmt::format("1x{}", cols) : fmt::format("{}x1", rows); break;
    case BlockShape::Kind::tensor: a->block = "tensor"; break;
  }
  a->scale = std::string(scale_format_name(f.scale));
  a->tensor_scale = f.two_level() ? "fp32" : "none";
  if (f.power_of_two_scale()) a->scale_rule = std::string(scale_rule_name(f.rule));
  else if (s.amax_history)
    a->scale_rule = fmt::format("history_{}:{}",
                                s.amax_history->reduction == AmaxHistory::Reduction::max ? "max" : "most_recent",
                                s.amax_history->length);
  else a->scale_rule = "amax";
  a->headroom_3_4 = s.headroom_3_4;
  a->margin = s.margin;
}

}  // namespace

void merge_into(OperandStats& t, const OperandStats& s) {
  const double n0 = static_cast<double>(t.elements), n1 = static_cast<double>(s.elements);
  t.flushed_pct = (t.flushed_pct * n0 + s.flushed_pct * n1) / (n0 + n1);
  t.saturated_pct = (t.saturated_pct * n0 + s.saturated_pct * n1) / (n0 + n1);
  t.sqnr_db = std::min(t.sqnr_db, s.sqnr_db);
  t.amax = std::max(t.amax, s.amax);
  t.elements += s.elements;
  t.clamped_blocks = t.clamped_blocks < 0 || s.clamped_blocks < 0 ? -1 : t.clamped_blocks + s.clamped_blocks;
}

void merge_into(AppliedOperand& t, const AppliedOperand& s) {
  auto join = [](std::string& a, const std::string& b) {
    if (a != b && ("|" + a + "|").find("|" + b + "|") == std::string::npos) a += "|" + b;
  };
  join(t.element, s.element);
  join(t.block, s.block);
  join(t.scale, s.scale);
  join(t.tensor_scale, s.tensor_scale);
  join(t.scale_rule, s.scale_rule);
  join(t.rounding, s.rounding);
  join(t.transform, s.transform);
}

OperandQuantizer::OperandQuantizer(const Recipe& recipe, const LayerInfo& layer, uint64_t seed)
    : layer_(layer), seed_(seed), high_precision_(keeps_high_precision(recipe, layer)) {
  for (GemmRole r : kAllGemmRoles) {
    const size_t i = static_cast<size_t>(r);
    specs_[i] = high_precision_ ? high_precision_spec(recipe.high_precision.format) : recipe.role(r);
    if (specs_[i].amax_history)
      histories_[i].emplace(specs_[i].amax_history->length, specs_[i].amax_history->reduction);
  }
}

std::vector<float> OperandQuantizer::signs(GemmRole role, uint64_t step) const {
  const Transform& t = spec(role).transform;
  if (t.kind == Transform::Kind::none) return {};
  if (t.signs == Transform::Signs::fixed) return hadamard_signs(t.size, seed_, kFixedSignStream);
  const CallKey k = call_key(seed_, layer_, 8u + static_cast<uint32_t>(gemm_of(role)), step);
  return hadamard_signs(t.size, k.seed, k.stream);
}

const std::vector<float>& OperandQuantizer::cached_signs(GemmRole role, uint64_t step) {
  CachedSigns& c = signs_cache_[static_cast<size_t>(role)];
  if (!c.valid || c.step != step) {
    c.signs = signs(role, step);
    c.step = step;
    c.valid = true;
  }
  return c.signs;
}

std::span<const uint32_t> OperandQuantizer::cached_words(GemmRole role, uint64_t step, const CallKey& key,
                                                         int64_t n) {
  if (n > kMaxCachedWords) return {};
  CachedWords& c = words_cache_[static_cast<size_t>(role)];
  if (!c.valid || c.step != step) {
    c.valid = true;
    c.step = step;
    c.calls = 0;
    c.words.clear();
  }
  if (++c.calls < 2) return {};
  const size_t have = c.words.size(), want = static_cast<size_t>(n);
  if (have < want) {
    c.words.resize(want);
    random_words(key.seed, key.stream, have, std::span<uint32_t>(c.words).subspan(have));
  }
  return c.words;
}

std::vector<float> OperandQuantizer::history_values(GemmRole role) const {
  const auto& h = histories_[static_cast<size_t>(role)];
  if (!h) return {};
  return {h->values().begin(), h->values().end()};
}

void OperandQuantizer::restore_history(GemmRole role, std::span<const float> values) {
  const size_t i = static_cast<size_t>(role);
  auto& h = histories_[i];
  if (!h) {
    if (values.empty()) return;
    throw std::invalid_argument(fmt::format("OperandQuantizer::restore_history({}): layer {} keeps no amax history",
                                            role_name(role), layer_.name));
  }
  if (values.size() > h->length())
    throw std::invalid_argument(fmt::format(
        "OperandQuantizer::restore_history({}): {} values for a history of length {} (layer {})",
        role_name(role), values.size(), h->length(), layer_.name));
  h.emplace(h->length(), h->reduction());
  for (float a : values) h->push(a);
}

void OperandQuantizer::observe(GemmRole role, const float* in, int64_t rows, int64_t cols,
                               OperandStats* stats, AppliedOperand* applied) const {
  if (!is_identity(role))
    throw std::logic_error(fmt::format("OperandQuantizer::observe({}): the role quantizes (layer {})",
                                       role_name(role), layer_.name));
  if (applied) {
    *applied = AppliedOperand{};
    applied->axis = reduction_axis(role);
  }
  if (stats) {
    *stats = OperandStats{};
    detail::identity_stats(in, rows * cols, *stats);
  }
}

namespace {
// UnscaledOperand's elements and run scales from q, an operand quantized with its codes.
void fill_unscaled(const QuantizedTensor& q, int64_t rows, int64_t cols, int axis, UnscaledOperand& u) {
  const BlockFormat& f = q.format;
  if (f.two_level() || q.headroom_3_4)
    throw std::invalid_argument(fmt::format("'{}'{} has no single scale per block to apply at promotion", f.spec(),
                                            q.headroom_3_4 ? " with the 3/4 headroom" : ""));
  // One block's extent along each axis (formats' block_reach; 0 is the whole axis).
  int64_t ext[2];
  for (int d = 0; d < 2; ++d) {
    const int64_t reach = block_reach(f.block, d);
    ext[d] = reach > 0 ? reach : std::max<int64_t>(d == 1 ? cols : rows, 1);
  }
  const int64_t extent = axis == 1 ? cols : rows, along = ext[axis];
  if (along % u.every != 0 && along < extent)
    throw std::invalid_argument(fmt::format("'{}' has blocks of {} along the reduction axis, not one scale per {} "
                                            "elements",
                                            f.spec(), along, u.every));
  // Element values: the codes decoded (vectorized; one thread, as the GEMM's caller runs)
  decode_array(q.codes, std::span<float>(u.elements, q.codes.size()), f.element, 1);
  // The scale of each line over each run of `every` elements along the reduction axis.
  const int64_t grid_cols = q.scale_shape.size() == 2 ? q.scale_shape[1] : 1;
  u.lines = axis == 1 ? rows : cols;
  u.runs = (extent + u.every - 1) / u.every;
  u.scales.resize(static_cast<size_t>(u.lines * u.runs));
  for (int64_t l = 0; l < u.lines; ++l)
    for (int64_t r = 0; r < u.runs; ++r) {
      const int64_t row = axis == 1 ? l : r * u.every, col = axis == 1 ? r * u.every : l;
      const size_t blk = static_cast<size_t>((row / ext[0]) * grid_cols + col / ext[1]);
      u.scales[static_cast<size_t>(l * u.runs + r)] =
          f.scale_is_code() ? block_scaling::decode_scale(f.scale, q.scale_codes[blk], 0.0f) : q.scale_values[blk];
    }
  u.scaled = true;
}
}  // namespace

void OperandQuantizer::apply(GemmRole role, const float* in, float* out, int64_t rows, int64_t cols,
                             uint64_t step, OperandStats* stats, AppliedOperand* applied,
                             UnscaledOperand* unscaled) {
  if (rows < 0 || cols < 0)
    throw std::invalid_argument(fmt::format("OperandQuantizer::apply({}): negative shape {}x{}",
                                            role_name(role), rows, cols));
  const size_t i_role = static_cast<size_t>(role);
  const RoleSpec& s = specs_[i_role];
  const int64_t n = rows * cols;
  const size_t count = static_cast<size_t>(n);
  const int axis = reduction_axis(role);
  if (unscaled) {
    unscaled->scaled = false;
    if (unscaled->every < 1 || !unscaled->elements)
      throw std::invalid_argument(fmt::format("OperandQuantizer::apply({}): an UnscaledOperand needs its elements "
                                              "buffer and every >= 1", role_name(role)));
  }

  // 1. The quantizer's input v: the operand, transformed when the role says so. v must not
  //    alias out when a quantizer follows (quantize/cast do not promise in == out).
  const float* v = in;
  // A reduction extent that is not a multiple of the transform size (a 10-class head, say)
  // gets no transform. Both operands of a GEMM share the reduction extent, so they skip
  // it together and the product stays consistent.
  const int64_t extent = axis == 1 ? cols : rows;
  const bool transformed = s.transform.kind == Transform::Kind::rht && extent % s.transform.size == 0;
  if (applied) {
    *applied = AppliedOperand{};
    applied->axis = axis;
    if (transformed)
      applied->transform = fmt::format("rht{}:{}", s.transform.size,
                                       s.transform.signs == Transform::Signs::fixed ? "fixed" : "per_call");
    if (s.kind != RoleSpec::Kind::fp32) {
      applied->rounding = std::string(rounding_name(s.round));
      applied->sr_bits = is_stochastic(s.round) ? s.sr_bits : 0;
    }
  }
  if (transformed) {
    const std::vector<float>& sg = cached_signs(role, step);
    // An fp32 role's result is the transform itself, written to out; a quantizer reads
    // it from the transform buffer (it may not alias out).
    float* t = out;
    if (s.kind != RoleSpec::Kind::fp32) t = transform_buffer().get(count);
    try {
      if (backend_) {
        if (t != in) std::memcpy(t, in, count * sizeof(float));
        backend_->hadamard(t, rows, cols, axis, s.transform.size, sg);
      } else {
        hadamard_blocks(in, t, rows, cols, axis, s.transform.size, sg);
      }
    } catch (const std::invalid_argument& e) {
      throw std::invalid_argument(fmt::format("OperandQuantizer::apply({}): {}", role_name(role), e.what()));
    }
    v = t;
  } else if (s.kind != RoleSpec::Kind::fp32 && in == out) {
    float* copy = transform_buffer().get(count);
    std::memcpy(copy, in, count * sizeof(float));
    v = copy;
  }

  // 2. Quantize v into out.
  const CallKey key = call_key(seed_, layer_, static_cast<uint32_t>(role), step);
  int64_t saturated = 0, clamped = 0;
  switch (s.kind) {
    case RoleSpec::Kind::fp32:
      if (v != out) std::memcpy(out, v, count * sizeof(float));
      break;
    case RoleSpec::Kind::bf16: {
      CastOptions opt;
      opt.round = s.round;
      opt.overflow = Overflow::ieee;
      opt.threads = threads_for(n);
      opt.seed = key.seed;
      opt.stream = key.stream;
      opt.sr_bits = s.sr_bits;
      if (backend_) backend_->fake_cast(std::span<const float>(v, count), std::span<float>(out, count), fmt16::bf16, opt);
      else fake_cast_array(std::span<const float>(v, count), std::span<float>(out, count), fmt16::bf16, opt);
      if (applied) applied->element = "bfloat16";
      break;
    }
    case RoleSpec::Kind::ternary_absmean:
      fake_quantize_ternary_absmean(std::span<const float>(v, count), std::span<float>(out, count), &saturated);
      if (applied) {
        applied->element = "ternary";
        applied->block = "tensor";
        applied->scale = "absmean";
        applied->rounding = "rne";
      }
      break;
    case RoleSpec::Kind::block: {
      BlockFormat f = s.block;
      f.block.axis = axis;
      QuantizeOptions opt;
      opt.round = s.round;
      opt.overflow = Overflow::sat;
      opt.threads = threads_for(n);
      opt.seed = key.seed;
      opt.stream = key.stream;
      opt.sr_bits = s.sr_bits;
      // The CPU's quantizer takes a step's repeated words from the cache; a backend draws
      // its own (the CUDA kernels refuse caller-given words).
      if (is_stochastic(s.round) && !backend_) {
        const std::span<const uint32_t> words = cached_words(role, step, key, n);
        opt.random_words = words.empty() ? nullptr : words.data();
        opt.random_words_count = words.size();
      }
      opt.headroom_3_4 = s.headroom_3_4;
      opt.margin = s.margin;
      auto& history = histories_[i_role];
      opt.history = history ? &*history : nullptr;
      const int64_t shape[2] = {rows, cols};
      const TensorView<const float> view{std::span<const float>(v, count), std::span<const int64_t>(shape, 2)};
      // With unscaled the codes are wanted too: fake_quantize writes them beside out, on
      // the CPU (a backend returns no codes).
      if (unscaled && backend_) backend_->count_cpu_fallback();
      const QuantizedTensor q = unscaled   ? fake_quantize(view, std::span<float>(out, count), f, opt)
                                : backend_ ? backend_->fake_quantize(view, std::span<float>(out, count), f, opt)
                                           : fake_quantize_values(view, std::span<float>(out, count), f, opt);
      if (unscaled) {
        try {
          fill_unscaled(q, rows, cols, axis, *unscaled);
        } catch (const std::invalid_argument& e) {
          throw std::invalid_argument(fmt::format("OperandQuantizer::apply({}): {}", role_name(role), e.what()));
        }
      }
      if (applied) describe_block(f, rows, cols, s, applied);
      if (history) {
        history->push(q.amax);
      }
      saturated = q.stats.saturated;
      clamped = q.stats.clamped_scales;
      break;
    }
  }

  if (stats) {
    // v was overwritten only when it is out (fp32 role with a transform): then q == v.
    *stats = OperandStats{};
    if (s.kind == RoleSpec::Kind::fp32) {
      detail::identity_stats(out, n, *stats);
    } else {
      const int64_t overflowed = detail::error_stats(v, out, n, *stats);
      // a BF16 cast (IEEE overflow) saturates by overflowing to Inf; counted in the same pass
      if (s.kind == RoleSpec::Kind::bf16) saturated = overflowed;
    }
    stats->saturated_pct = saturated < 0 ? std::numeric_limits<double>::quiet_NaN()  // not counted
                           : n ? 100.0 * static_cast<double>(saturated) / static_cast<double>(n) : 0;
    stats->clamped_blocks = clamped;
  }
}

}  // namespace lpx
