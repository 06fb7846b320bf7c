// Block format descriptor: presets, the spec grammar of block_format.hpp, validation.
#include "lpx/formats/block_format.hpp"

#include <array>
#include <charconv>
#include <stdexcept>
#include <string>

#include <fmt/format.h>

namespace lpx {

namespace {

constexpr std::array<std::string_view, 11> kPresets = {
    "mxfp8_e4m3", "mxfp8_e5m2", "mxfp6_e3m2",   "mxfp6_e2m3", "mxfp4",
    "mxint8",     "nvfp4",      "nvfp4_2d",     "fp8_tensor", "fp8_block128",
    "fp8_block128x128"};

constexpr std::array<std::string_view, 4> kRuleNames = {"floor", "rceil", "ceil", "even"};
constexpr std::array<std::string_view, 4> kScaleNames = {"e8m0", "pow2", "fp32", "e4m3"};

std::string join(std::span<const std::string_view> names) {
  std::string s;
  for (auto n : names) {
    if (n.empty()) continue;
    if (!s.empty()) s += ", ";
    s += n;
  }
  return s;
}

BlockShape vector_block(int64_t n) {
  BlockShape b;
  b.kind = BlockShape::Kind::vector;
  b.length = n;
  return b;
}
BlockShape tile_block(int64_t r, int64_t c) {
  BlockShape b;
  b.kind = BlockShape::Kind::tile;
  b.rows = r;
  b.cols = c;
  return b;
}

BlockFormat make(std::string_view preset, const ElementFormat& e, BlockShape b, ScaleFormat s,
                 ScaleRule r = ScaleRule::floor) {
  BlockFormat f;
  f.element = e;
  f.block = b;
  f.scale = s;
  f.rule = r;
  f.preset = std::string(preset);
  return f;
}

bool preset(std::string_view name, BlockFormat& out) {
  using K = BlockShape::Kind;
  BlockShape tensor;
  tensor.kind = K::tensor;
  const ScaleFormat e8 = ScaleFormat::e8m0;
  if (name == "mxfp8_e4m3") out = make(name, fmt8::e4m3fn, vector_block(32), e8);
  else if (name == "mxfp8_e5m2") out = make(name, fmt8::e5m2, vector_block(32), e8);
  else if (name == "mxfp6_e3m2") out = make(name, fmt6::e3m2, vector_block(32), e8);
  else if (name == "mxfp6_e2m3") out = make(name, fmt6::e2m3, vector_block(32), e8);
  else if (name == "mxfp4") out = make(name, fmt4::e2m1, vector_block(32), e8);
  else if (name == "mxint8") out = make(name, fmtint::mxint8, vector_block(32), e8);
  else if (name == "nvfp4") out = make(name, fmt4::e2m1, vector_block(16), ScaleFormat::e4m3);
  else if (name == "nvfp4_2d") out = make(name, fmt4::e2m1, tile_block(16, 16), ScaleFormat::e4m3);
  else if (name == "fp8_tensor") out = make(name, fmt8::e4m3fn, tensor, ScaleFormat::fp32);
  else if (name == "fp8_block128") out = make(name, fmt8::e4m3fn, vector_block(128), ScaleFormat::fp32);
  else if (name == "fp8_block128x128")
    out = make(name, fmt8::e4m3fn, tile_block(128, 128), ScaleFormat::fp32);
  else return false;
  return true;
}

// A positive decimal integer (the whole text), or -1.
int64_t parse_positive(std::string_view s) {
  int64_t v = 0;
  if (s.empty()) return -1;
  const auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc{} || p != s.data() + s.size() || v < 1) return -1;
  return v;
}

BlockShape parse_block(std::string_view s, std::string_view spec) {
  BlockShape b;
  if (s == "row" || s == "channel") {
    b.kind = BlockShape::Kind::channel;
    return b;
  }
  if (s == "tensor") {
    b.kind = BlockShape::Kind::tensor;
    return b;
  }
  if (!s.empty() && s[0] == 'b') {
    const int64_t n = parse_positive(s.substr(1));
    if (n > 0) return vector_block(n);
  }
  const size_t x = s.find('x');
  if (x != std::string_view::npos) {
    const int64_t r = parse_positive(s.substr(0, x)), c = parse_positive(s.substr(x + 1));
    if (r > 0 && c > 0) return tile_block(r, c);
  }
  throw std::invalid_argument(fmt::format(
      "block format '{}': bad block '{}' (allowed: bN, RxC, row, channel, tensor; e.g. b32, "
      "16x16)",
      spec, s));
}

}  // namespace

std::span<const std::string_view> block_preset_names() { return kPresets; }

std::string_view scale_rule_name(ScaleRule r) { return kRuleNames[static_cast<size_t>(r)]; }
ScaleRule scale_rule_by_name(std::string_view name) {
  for (size_t i = 0; i < kRuleNames.size(); ++i)
    if (kRuleNames[i] == name) return static_cast<ScaleRule>(i);
  throw std::invalid_argument(
      fmt::format("unknown scale rule '{}' (allowed: {})", name, join(kRuleNames)));
}
std::string_view scale_format_name(ScaleFormat s) { return kScaleNames[static_cast<size_t>(s)]; }
ScaleFormat scale_format_by_name(std::string_view name) {
  for (size_t i = 0; i < kScaleNames.size(); ++i)
    if (kScaleNames[i] == name) return static_cast<ScaleFormat>(i);
  throw std::invalid_argument(
      fmt::format("unknown scale format '{}' (allowed: {})", name, join(kScaleNames)));
}

std::string BlockFormat::spec() const {
  std::string b;
  switch (block.kind) {
    case BlockShape::Kind::vector: b = fmt::format("b{}", block.length); break;
    case BlockShape::Kind::tile: b = fmt::format("{}x{}", block.rows, block.cols); break;
    case BlockShape::Kind::channel: b = "channel"; break;
    case BlockShape::Kind::tensor: b = "tensor"; break;
  }
  std::string s = fmt::format("{}:{}:{}", element.name_view(), b, scale_format_name(scale));
  if (power_of_two_scale()) s += fmt::format(":{}", scale_rule_name(rule));
  return s;
}

void validate(const BlockFormat& f) {
  const ElementFormat& e = f.element;
  if (e.bits == 0 || e.bits > 8)
    throw std::invalid_argument(fmt::format(
        "block format: element '{}' has {} bits; block formats hold elements of 1 to 8 bits",
        e.name_view(), e.bits));
  if (!e.has_zero)
    throw std::invalid_argument(fmt::format(
        "block format: element '{}' has no zero and cannot be a block element", e.name_view()));
  const BlockShape& b = f.block;
  if ((b.kind == BlockShape::Kind::vector && b.length < 1) ||
      (b.kind == BlockShape::Kind::tile && (b.rows < 1 || b.cols < 1)))
    throw std::invalid_argument("block format: block extents must be >= 1");
}

int64_t block_reach(const BlockShape& b, int axis) {
  const int own = b.axis < 0 ? b.axis + 2 : b.axis;
  switch (b.kind) {
    case BlockShape::Kind::vector: return own == axis ? b.length : 1;
    case BlockShape::Kind::tile: return axis == 1 ? b.cols : b.rows;
    case BlockShape::Kind::channel: return own == axis ? 0 : 1;
    case BlockShape::Kind::tensor: return 0;
  }
  return 1;
}

BlockFormat parse_block_format(std::string_view spec) {
  BlockFormat f;
  if (preset(spec, f)) return f;
  std::array<std::string_view, 5> parts{};
  size_t n = 0;
  for (size_t start = 0;;) {
    const size_t colon = spec.find(':', start);
    if (n == parts.size()) {
      n = parts.size() + 1;
      break;
    }
    parts[n++] = spec.substr(start, colon == std::string_view::npos ? colon : colon - start);
    if (colon == std::string_view::npos) break;
    start = colon + 1;
  }
  if (n < 2 || n > 4)
    throw std::invalid_argument(fmt::format(
        "unknown block format '{}' (allowed: a preset {} or ELEMENT:BLOCK[:SCALE[:RULE]], e.g. "
        "e2m1:b32:e8m0:rceil)",
        spec, join(kPresets)));
  try {
    f.element = format_by_name(parts[0]);
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(
        fmt::format("block format '{}': bad element: {}", spec, e.what()));
  }
  f.block = parse_block(parts[1], spec);
  if (n >= 3) {
    try {
      f.scale = scale_format_by_name(parts[2]);
    } catch (const std::invalid_argument& e) {
      throw std::invalid_argument(fmt::format("block format '{}': {}", spec, e.what()));
    }
  }
  f.rule = f.scale == ScaleFormat::pow2 ? ScaleRule::rceil : ScaleRule::floor;
  if (n == 4) {
    if (!f.power_of_two_scale())
      throw std::invalid_argument(fmt::format(
          "block format '{}': scale rule '{}' applies to power-of-two scales only (e8m0, pow2), "
          "not {}",
          spec, parts[3], parts[2]));
    try {
      f.rule = scale_rule_by_name(parts[3]);
    } catch (const std::invalid_argument& e) {
      throw std::invalid_argument(fmt::format("block format '{}': {}", spec, e.what()));
    }
  }
  validate(f);
  return f;
}

}  // namespace lpx
