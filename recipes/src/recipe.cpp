// Recipe parsing, validation and the canonical JSON (the schema is in recipe.hpp).
#include "lpx/recipes/recipe.hpp"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "lpx/io/json_input.hpp"

namespace lpx {

namespace {

using json = nlohmann::json;
using ordered_json = nlohmann::ordered_json;

constexpr std::array<std::string_view, kGemmRoles> kRoleNames = {
    "fwd_x", "fwd_w", "dgrad_dy", "dgrad_w", "wgrad_x", "wgrad_dy"};

std::string join(std::span<const std::string_view> names) {
  std::string s;
  for (auto n : names) {
    if (!s.empty()) s += ", ";
    s += n;
  }
  return s;
}

std::string join(std::initializer_list<std::string_view> names) {
  return join(std::span<const std::string_view>(names.begin(), names.size()));
}

// Every error of a recipe: "ORIGIN: PATH: MESSAGE" on one line.
class Parser {
 public:
  explicit Parser(std::string origin) : origin_(std::move(origin)) {}

  [[noreturn]] void fail(const std::string& path, const std::string& message) const {
    std::string m = message;
    std::replace(m.begin(), m.end(), '\n', ' ');
    throw std::invalid_argument(fmt::format("{}: {}: {}", origin_, path, m));
  }

  void expect_object(const json& j, const std::string& path) const {
    if (!j.is_object()) fail(path, fmt::format("expected an object, got {}", j.type_name()));
  }

  void check_keys(const json& j, const std::string& path,
                  std::initializer_list<std::string_view> allowed) const {
    for (const auto& [key, value] : j.items()) {
      if (std::find(allowed.begin(), allowed.end(), key) == allowed.end())
        fail(sub(path, key), fmt::format("unknown key; allowed keys: {}", join(allowed)));
    }
  }

  static std::string sub(const std::string& path, std::string_view key) {
    return path.empty() ? std::string(key) : path + "." + std::string(key);
  }

  std::string string_at(const json& j, const std::string& path, bool required,
                        std::string fallback = "") const {
    if (!j.contains(path_key(path))) {
      if (required) fail(path, "missing (required)");
      return fallback;
    }
    const json& v = j.at(path_key(path));
    if (!v.is_string()) fail(path, fmt::format("expected a string, got {}", v.type_name()));
    return v.get<std::string>();
  }

  // One of `allowed`, as its index.
  size_t choice(const json& v, const std::string& path,
                std::initializer_list<std::string_view> allowed) const {
    if (!v.is_string())
      fail(path, fmt::format("expected a string, got {}; allowed: {}", v.type_name(), join(allowed)));
    const std::string s = v.get<std::string>();
    const auto it = std::find(allowed.begin(), allowed.end(), s);
    if (it == allowed.end()) fail(path, fmt::format("'{}' is not allowed; allowed: {}", s, join(allowed)));
    return static_cast<size_t>(it - allowed.begin());
  }

  int64_t integer(const json& v, const std::string& path, int64_t lo, int64_t hi) const {
    const std::string range = hi == INT64_MAX ? fmt::format("an integer >= {}", lo)
                                              : fmt::format("an integer in {}..{}", lo, hi);
    if (!v.is_number_integer()) fail(path, fmt::format("expected {}, got {}", range, v.type_name()));
    const int64_t x = v.is_number_unsigned() ? static_cast<int64_t>(std::min<uint64_t>(
                                                   v.get<uint64_t>(), uint64_t{INT64_MAX}))
                                             : v.get<int64_t>();
    if (x < lo || x > hi) fail(path, fmt::format("{} is out of range; allowed: {}", x, range));
    return x;
  }

  // A number in [0, 1].
  double fraction(const json& v, const std::string& path) const {
    if (!v.is_number()) fail(path, fmt::format("expected a number in [0, 1], got {}", v.type_name()));
    const double x = v.get<double>();
    if (!(x >= 0.0 && x <= 1.0)) fail(path, fmt::format("{} is outside [0, 1]; allowed: a fraction of the model's depth", x));
    return x;
  }

  bool boolean(const json& v, const std::string& path) const {
    if (!v.is_boolean()) fail(path, fmt::format("expected true or false, got {}", v.type_name()));
    return v.get<bool>();
  }

 private:
  // string_at takes the full path for messages; the key is its last component.
  static std::string path_key(const std::string& path) {
    const size_t dot = path.rfind('.');
    return dot == std::string::npos ? path : path.substr(dot + 1);
  }
  std::string origin_;
};

Transform parse_transform(const Parser& p, const json& v, const std::string& path) {
  Transform t;
  if (v.is_string()) {
    if (v.get<std::string>() != "none")
      p.fail(path, fmt::format("'{}' is not allowed; allowed: \"none\" or "
                               "{{\"kind\": \"rht\", \"size\": 16|32|64|128, \"signs\": \"fixed\"|\"per_call\"}}",
                               v.get<std::string>()));
    return t;
  }
  if (!v.is_object())
    p.fail(path, fmt::format("expected \"none\" or an object {{\"kind\": \"rht\", \"size\": 16|32|64|128, "
                             "\"signs\": \"fixed\"|\"per_call\"}}, got {}",
                             v.type_name()));
  p.check_keys(v, path, {"kind", "size", "signs"});
  if (!v.contains("kind")) p.fail(path + ".kind", "missing (required); allowed: rht");
  p.choice(v["kind"], path + ".kind", {"rht"});
  t.kind = Transform::Kind::rht;
  if (!v.contains("size")) p.fail(path + ".size", "missing (required); allowed: 16, 32, 64, 128");
  const json& size = v["size"];
  if (!size.is_number_integer() ||
      (size != 16 && size != 32 && size != 64 && size != 128))
    p.fail(path + ".size", fmt::format("{} is not allowed; allowed: 16, 32, 64, 128", size.dump()));
  t.size = size.get<int>();
  if (!v.contains("signs")) p.fail(path + ".signs", "missing (required); allowed: fixed, per_call");
  t.signs = p.choice(v["signs"], path + ".signs", {"fixed", "per_call"}) == 0
                ? Transform::Signs::fixed
                : Transform::Signs::per_call;
  return t;
}

RoleSpec parse_format(const Parser& p, const std::string& text, const std::string& path) {
  RoleSpec r;
  if (text == "fp32" || text == "float32") {
    r.kind = RoleSpec::Kind::fp32;
  } else if (text == "bf16" || text == "bfloat16") {
    r.kind = RoleSpec::Kind::bf16;
  } else if (text == "ternary_absmean") {
    r.kind = RoleSpec::Kind::ternary_absmean;
  } else {
    r.kind = RoleSpec::Kind::block;
    try {
      r.block = parse_block_format(text);
      validate(r.block);
    } catch (const std::invalid_argument& e) {
      p.fail(path, fmt::format("{}; or one of fp32, bf16, ternary_absmean", e.what()));
    }
  }
  return r;
}

RoleSpec parse_role(const Parser& p, const json& v, const std::string& path) {
  p.expect_object(v, path);
  p.check_keys(v, path, {"format", "scale_rule", "round", "sr_bits", "headroom_3_4", "margin",
                         "amax_history", "transform"});
  const std::string fpath = path + ".format";
  if (!v.contains("format"))
    p.fail(fpath, "missing (required); allowed: fp32, bf16, ternary_absmean or a block format spec");
  if (!v["format"].is_string())
    p.fail(fpath, fmt::format("expected a string, got {}", v["format"].type_name()));
  RoleSpec r = parse_format(p, v["format"].get<std::string>(), fpath);
  const bool block = r.kind == RoleSpec::Kind::block;
  const std::string fname = v["format"].get<std::string>();

  if (v.contains("scale_rule")) {
    const std::string spath = path + ".scale_rule";
    if (!block || !r.block.power_of_two_scale())
      p.fail(spath, fmt::format("not applicable to format '{}': only block formats with power-of-two "
                                "scales (e8m0, pow2) take a scale rule",
                                fname));
    r.block.rule = static_cast<ScaleRule>(p.choice(v["scale_rule"], spath, {"floor", "rceil", "ceil", "even"}));
  }
  if (v.contains("round")) {
    const std::string rpath = path + ".round";
    if (r.kind == RoleSpec::Kind::ternary_absmean)
      r.round = static_cast<Rounding>(p.choice(v["round"], rpath, {"rne"}));
    else
      r.round = static_cast<Rounding>(p.choice(v["round"], rpath, {"rne", "rna", "rtz", "rup", "rdn", "sr", "rto", "sr-fast", "sr-rne", "sr-odd"}));
  }
  if (v.contains("sr_bits")) r.sr_bits = static_cast<int>(p.integer(v["sr_bits"], path + ".sr_bits", 1, 32));
  if (v.contains("headroom_3_4")) {
    r.headroom_3_4 = p.boolean(v["headroom_3_4"], path + ".headroom_3_4");
    if (r.headroom_3_4 && !block)
      p.fail(path + ".headroom_3_4", fmt::format("true is only allowed with block formats, not '{}'", fname));
  }
  const bool fp32_scale = block && r.block.scale == ScaleFormat::fp32;
  if (v.contains("margin")) {
    r.margin = static_cast<int>(p.integer(v["margin"], path + ".margin", 0, 127));
    if (r.margin != 0 && !fp32_scale)
      p.fail(path + ".margin", fmt::format("only block formats with fp32 scales take a margin, not '{}'", fname));
  }
  if (v.contains("amax_history") && !v["amax_history"].is_null()) {
    const std::string hpath = path + ".amax_history";
    if (!fp32_scale || r.block.block.kind != BlockShape::Kind::tensor)
      p.fail(hpath, fmt::format("only per-tensor fp32-scaled formats (e.g. e4m3:tensor:fp32) take an "
                                "amax history, not '{}'",
                                fname));
    const json& h = v["amax_history"];
    p.expect_object(h, hpath);
    p.check_keys(h, hpath, {"length", "reduction"});
    AmaxHistorySpec spec;
    if (h.contains("length"))
      spec.length = static_cast<size_t>(p.integer(h["length"], hpath + ".length", 1, 1 << 24));
    if (h.contains("reduction"))
      spec.reduction = p.choice(h["reduction"], hpath + ".reduction", {"max", "most_recent"}) == 0
                           ? AmaxHistory::Reduction::max
                           : AmaxHistory::Reduction::most_recent;
    r.amax_history = spec;
  }
  if (v.contains("transform")) r.transform = parse_transform(p, v["transform"], path + ".transform");
  return r;
}

ordered_json transform_json(const Transform& t) {
  if (t.kind == Transform::Kind::none) return "none";
  ordered_json j;
  j["kind"] = "rht";
  j["size"] = t.size;
  j["signs"] = t.signs == Transform::Signs::fixed ? "fixed" : "per_call";
  return j;
}

ordered_json role_json(const RoleSpec& r) {
  ordered_json j;
  j["format"] = r.format_name();
  const bool block = r.kind == RoleSpec::Kind::block;
  if (block && r.block.power_of_two_scale()) j["scale_rule"] = std::string(scale_rule_name(r.block.rule));
  j["round"] = std::string(rounding_name(r.round));
  j["sr_bits"] = r.sr_bits;
  j["headroom_3_4"] = r.headroom_3_4;
  if (block && r.block.scale == ScaleFormat::fp32) {
    j["margin"] = r.margin;
    if (r.amax_history) {
      ordered_json h;
      h["length"] = r.amax_history->length;
      h["reduction"] = r.amax_history->reduction == AmaxHistory::Reduction::max ? "max" : "most_recent";
      j["amax_history"] = h;
    }
  }
  j["transform"] = transform_json(r.transform);
  return j;
}

std::string short_format(const RoleSpec& r) {
  switch (r.kind) {
    case RoleSpec::Kind::fp32: return "fp32";
    case RoleSpec::Kind::bf16: return "bf16";
    case RoleSpec::Kind::ternary_absmean: return "ternary";
    case RoleSpec::Kind::block: return r.format_name();
  }
  return "?";
}

std::string describe_role(const RoleSpec& r) {
  std::string s = short_format(r);
  if (r.round != Rounding::rne) s += fmt::format(" {}", rounding_name(r.round));
  if (r.headroom_3_4) s += " 3/4";
  if (r.amax_history) s += fmt::format(" hist{}", r.amax_history->length);
  if (r.transform.kind == Transform::Kind::rht)
    s += fmt::format(" rht{}{}", r.transform.size,
                     r.transform.signs == Transform::Signs::per_call ? "/call" : "/fixed");
  return s;
}

}  // namespace

std::string_view role_name(GemmRole r) { return kRoleNames[static_cast<size_t>(r)]; }

GemmRole role_by_name(std::string_view name) {
  for (size_t i = 0; i < kRoleNames.size(); ++i)
    if (kRoleNames[i] == name) return static_cast<GemmRole>(i);
  throw std::invalid_argument(
      fmt::format("unknown GEMM role '{}' (allowed: {})", name, join(std::span(kRoleNames))));
}

std::string_view gemm_name(Gemm g) {
  switch (g) {
    case Gemm::fwd: return "fwd";
    case Gemm::dgrad: return "dgrad";
    case Gemm::wgrad: return "wgrad";
  }
  return "?";
}

std::string_view master_weights_name(MasterWeights m) {
  return m == MasterWeights::fp32 ? "fp32" : "bf16_sr";
}

std::string_view optimizer_state_name(OptimizerState s) {
  switch (s) {
    case OptimizerState::fp32: return "fp32";
    case OptimizerState::bf16: return "bf16";
    case OptimizerState::fp8_e4m3: return "fp8_e4m3";
  }
  return "?";
}

std::string RoleSpec::format_name() const {
  switch (kind) {
    case Kind::fp32: return "fp32";
    case Kind::bf16: return "bf16";
    case Kind::ternary_absmean: return "ternary_absmean";
    case Kind::block: break;
  }
  if (!block.preset.empty()) {
    // The preset name only while the descriptor is still the preset's (a scale_rule
    // override is written as its own key, which from_json applies after the preset).
    return block.preset;
  }
  return block.spec();
}

namespace {
// Scales at promotion multiply one scale per operand into each partial sum, so every
// block-quantized role needs one plain scale per promote_every products along its
// reduction axis: its blocks span a multiple of promote_every there (or the whole axis),
// its scale is one number (not NVFP4's two levels), and no 3/4 headroom divides the
// dequantized value (docs/recipes.md#scales-at-promotion).
void check_scales_at_promotion(const Parser& p, const Recipe& r) {
  const int every = r.accumulation.promote_every;
  if (r.accumulation.mantissa_bits > 22)
    p.fail("accumulation.mantissa_bits", "23 is not allowed with \"scales\": \"at_promotion\"; allowed: 1..22");
  for (size_t i = 0; i < kRoleNames.size(); ++i) {
    const RoleSpec& s = r.roles[i];
    if (s.kind != RoleSpec::Kind::block) continue;
    const std::string path = fmt::format("roles.{}", kRoleNames[i]);
    // the quantizer runs a vector or channel block along the role's reduction axis
    BlockShape b = s.block.block;
    b.axis = reduction_axis(static_cast<GemmRole>(i));
    const int64_t extent = block_reach(b, b.axis);  // 0: the whole axis
    if (extent % every != 0)
      p.fail(path + ".format",
             fmt::format("'{}' has blocks of {} along the reduction axis, which accumulation.scales "
                         "\"at_promotion\" cannot scale per {} products; allowed: blocks of a multiple of "
                         "promote_every ({}) along it, or \"scales\": \"operands\"",
                         s.format_name(), extent, every, every));
    if (s.block.two_level())
      p.fail(path + ".format", fmt::format("'{}' has two-level scales; accumulation.scales \"at_promotion\" "
                                           "allows one scale per block (e8m0, pow2, fp32)",
                                           s.format_name()));
    if (s.headroom_3_4)
      p.fail(path + ".headroom_3_4",
             "true is not allowed with accumulation.scales \"at_promotion\" (the 4/3 is no block scale)");
  }
}
}  // namespace

Recipe Recipe::from_json(const std::string& text, const std::string& origin) {
  const Parser p(origin);
  const json j = io::parse_json(text, origin);  // size, depth and duplicate-key limits
  if (!j.is_object()) p.fail("(top level)", fmt::format("expected an object, got {}", j.type_name()));
  p.check_keys(j, "", {"name", "summary", "source", "notes", "roles", "high_precision",
                       "master_weights", "optimizer_state", "accumulation"});
  Recipe r;
  r.name = p.string_at(j, "name", true);
  if (r.name.empty() || !std::all_of(r.name.begin(), r.name.end(), [](char c) {
        return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '.' || c == '_';
      }))
    p.fail("name", fmt::format("'{}' is not allowed; allowed: a non-empty name of a-z, 0-9, '-', '.', '_'", r.name));
  r.summary = p.string_at(j, "summary", false);
  r.source = p.string_at(j, "source", true);
  if (r.source.empty()) p.fail("source", "must not be empty: cite the paper or implementation");
  r.notes = p.string_at(j, "notes", false);

  if (!j.contains("roles"))
    p.fail("roles", fmt::format("missing (required): an object with the roles {}", join(std::span(kRoleNames))));
  const json& roles = j["roles"];
  p.expect_object(roles, "roles");
  p.check_keys(roles, "roles", {"fwd_x", "fwd_w", "dgrad_dy", "dgrad_w", "wgrad_x", "wgrad_dy"});
  for (size_t i = 0; i < kRoleNames.size(); ++i) {
    const std::string path = fmt::format("roles.{}", kRoleNames[i]);
    if (!roles.contains(kRoleNames[i]))
      p.fail(path, fmt::format("missing (required); every role must be given: {}", join(std::span(kRoleNames))));
    r.roles[i] = parse_role(p, roles[std::string(kRoleNames[i])], path);
  }
  // Both operands of a GEMM must share the transform, or it does not cancel.
  for (size_t i = 0; i < kRoleNames.size(); i += 2)
    if (!(r.roles[i].transform == r.roles[i + 1].transform))
      p.fail(fmt::format("roles.{}.transform", kRoleNames[i + 1]),
             fmt::format("must equal roles.{}.transform: both operands of the {} GEMM need the same "
                         "Hadamard transform for it to cancel",
                         kRoleNames[i], gemm_name(static_cast<Gemm>(i / 2))));

  if (j.contains("high_precision")) {
    const json& h = j["high_precision"];
    p.expect_object(h, "high_precision");
    p.check_keys(h, "high_precision", {"first_blocks", "last_blocks", "first_fraction", "last_fraction", "blocks",
                                       "layers", "embeddings", "head", "attention", "format"});
    auto& hp = r.high_precision;
    if (h.contains("first_blocks"))
      hp.first_blocks = static_cast<int>(p.integer(h["first_blocks"], "high_precision.first_blocks", 0, 1 << 20));
    if (h.contains("last_blocks"))
      hp.last_blocks = static_cast<int>(p.integer(h["last_blocks"], "high_precision.last_blocks", 0, 1 << 20));
    for (const char* end : {"first", "last"}) {
      const std::string key = fmt::format("{}_fraction", end), path = "high_precision." + key;
      if (!h.contains(key)) continue;
      const double f = p.fraction(h[key], path);
      if (h.contains(fmt::format("{}_blocks", end)) && h[fmt::format("{}_blocks", end)] != 0)
        p.fail(path, fmt::format("give {}_blocks or {}_fraction, not both", end, end));
      (end[0] == 'f' ? hp.first_fraction : hp.last_fraction) = f;
    }
    if (h.contains("blocks")) {
      const json& b = h["blocks"];
      if (!b.is_array()) p.fail("high_precision.blocks", fmt::format("expected a list of block indices, got {}", b.type_name()));
      for (size_t i = 0; i < b.size(); ++i)
        hp.blocks.push_back(static_cast<int>(p.integer(b[i], fmt::format("high_precision.blocks[{}]", i), 0, 1 << 20)));
      std::sort(hp.blocks.begin(), hp.blocks.end());
      hp.blocks.erase(std::unique(hp.blocks.begin(), hp.blocks.end()), hp.blocks.end());
    }
    if (h.contains("layers")) {
      const json& l = h["layers"];
      if (!l.is_array()) p.fail("high_precision.layers", fmt::format("expected a list of layer names, got {}", l.type_name()));
      for (size_t i = 0; i < l.size(); ++i) {
        const std::string path = fmt::format("high_precision.layers[{}]", i);
        if (!l[i].is_string()) p.fail(path, fmt::format("expected a string, got {}", l[i].type_name()));
        const std::string name = l[i].get<std::string>();
        const bool ok = !name.empty() && name.size() <= 64 && std::all_of(name.begin(), name.end(), [](char c) {
          return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '.';
        });
        if (!ok) p.fail(path, "a layer name is 1-64 of a-z, 0-9, '_' and '.' (\"h2.mlp.fc\", \"mlp.fc\", \"fc0\")");
        hp.layers.push_back(name);
      }
      std::sort(hp.layers.begin(), hp.layers.end());
      hp.layers.erase(std::unique(hp.layers.begin(), hp.layers.end()), hp.layers.end());
    }
    if (h.contains("embeddings")) hp.embeddings = p.boolean(h["embeddings"], "high_precision.embeddings");
    if (h.contains("head")) hp.head = p.boolean(h["head"], "high_precision.head");
    if (h.contains("attention")) hp.attention = p.boolean(h["attention"], "high_precision.attention");
    if (h.contains("format"))
      hp.format = p.choice(h["format"], "high_precision.format", {"bf16", "fp32"}) == 0 ? RoleSpec::Kind::bf16
                                                                                       : RoleSpec::Kind::fp32;
  }
  if (j.contains("master_weights"))
    r.master_weights = static_cast<MasterWeights>(p.choice(j["master_weights"], "master_weights", {"fp32", "bf16_sr"}));
  if (j.contains("optimizer_state"))
    r.optimizer_state =
        static_cast<OptimizerState>(p.choice(j["optimizer_state"], "optimizer_state", {"fp32", "bf16", "fp8_e4m3"}));
  if (j.contains("accumulation")) {
    const json& a = j["accumulation"];
    constexpr const char* kAllowed =
        "allowed: \"fp32\" or {\"mantissa_bits\": 1..23, \"promote_every\": integer >= 1, "
        "\"scales\": \"operands\" | \"at_promotion\"}";
    if (a.is_string()) {
      if (a.get<std::string>() != "fp32")
        p.fail("accumulation", fmt::format("'{}' is not allowed; {}", a.get<std::string>(), kAllowed));
    } else if (a.is_object()) {
      p.check_keys(a, "accumulation", {"mantissa_bits", "promote_every", "scales"});
      if (!a.contains("mantissa_bits")) p.fail("accumulation.mantissa_bits", "missing (required); allowed: 1..23");
      if (!a.contains("promote_every"))
        p.fail("accumulation.promote_every", "missing (required); allowed: an integer >= 1");
      r.accumulation.limited = true;
      r.accumulation.mantissa_bits =
          static_cast<int>(p.integer(a["mantissa_bits"], "accumulation.mantissa_bits", 1, 23));
      r.accumulation.promote_every =
          static_cast<int>(p.integer(a["promote_every"], "accumulation.promote_every", 1, INT32_MAX));
      if (a.contains("scales")) {
        r.accumulation.scales_at_promotion =
            p.choice(a["scales"], "accumulation.scales", {"operands", "at_promotion"}) == 1;
        if (r.accumulation.scales_at_promotion) check_scales_at_promotion(p, r);
      }
    } else {
      p.fail("accumulation", fmt::format("expected a string or an object, got {}; {}", a.type_name(), kAllowed));
    }
  }
  return r;
}

std::string Recipe::to_json() const {
  ordered_json j;
  j["name"] = name;
  j["summary"] = summary;
  j["source"] = source;
  j["notes"] = notes;
  ordered_json roles_json = ordered_json::object();
  for (size_t i = 0; i < kRoleNames.size(); ++i) roles_json[std::string(kRoleNames[i])] = role_json(roles[i]);
  j["roles"] = roles_json;
  ordered_json h;
  h["first_blocks"] = high_precision.first_blocks;
  h["last_blocks"] = high_precision.last_blocks;
  if (high_precision.first_fraction) h["first_fraction"] = *high_precision.first_fraction;
  if (high_precision.last_fraction) h["last_fraction"] = *high_precision.last_fraction;
  if (!high_precision.blocks.empty()) h["blocks"] = high_precision.blocks;
  if (!high_precision.layers.empty()) h["layers"] = high_precision.layers;
  h["embeddings"] = high_precision.embeddings;
  h["head"] = high_precision.head;
  h["attention"] = high_precision.attention;
  h["format"] = high_precision.format == RoleSpec::Kind::fp32 ? "fp32" : "bf16";
  j["high_precision"] = h;
  j["master_weights"] = std::string(master_weights_name(master_weights));
  j["optimizer_state"] = std::string(optimizer_state_name(optimizer_state));
  if (accumulation.limited) {
    ordered_json a;
    a["mantissa_bits"] = accumulation.mantissa_bits;
    a["promote_every"] = accumulation.promote_every;
    if (accumulation.scales_at_promotion) a["scales"] = "at_promotion";
    j["accumulation"] = a;
  } else {
    j["accumulation"] = "fp32";
  }
  return j.dump(2) + "\n";
}

std::string Recipe::describe() const {
  // Groups: forward (fwd_x, fwd_w), then each backward role; equal neighbours merge.
  std::vector<std::pair<std::string, std::string>> parts;
  for (size_t i = 0; i < kRoleNames.size(); ++i) {
    const std::string d = describe_role(roles[i]);
    if (!parts.empty() && parts.back().second == d)
      parts.back().first.append(",").append(kRoleNames[i]);
    else
      parts.emplace_back(std::string(kRoleNames[i]), d);
  }
  std::string s;
  for (const auto& [who, what] : parts) s += fmt::format("{}{}={}", s.empty() ? "" : "; ", who, what);
  return s;
}

std::string_view layer_kind_name(LayerInfo::Kind k) {
  switch (k) {
    case LayerInfo::linear: return "linear";
    case LayerInfo::attention_bmm: return "attention_bmm";
    case LayerInfo::embedding: return "embedding";
    case LayerInfo::head: return "head";
  }
  return "?";
}

bool keeps_high_precision(const Recipe& recipe, const LayerInfo& layer) {
  const auto& hp = recipe.high_precision;
  switch (layer.kind) {
    case LayerInfo::embedding: return hp.embeddings;
    case LayerInfo::head: return hp.head;
    case LayerInfo::attention_bmm: return hp.attention;
    case LayerInfo::linear: break;
  }
  return layer.index < hp.first_count(layer.count) || layer.index >= layer.count - hp.last_count(layer.count) ||
         std::binary_search(hp.blocks.begin(), hp.blocks.end(), layer.index) ||
         std::any_of(hp.layers.begin(), hp.layers.end(),
                     [&](const std::string& p) { return layer_name_matches(p, layer.name); });
}

bool layer_name_matches(std::string_view pattern, std::string_view name) {
  if (pattern == name) return true;
  // "h<digits>." + pattern
  if (name.size() < pattern.size() + 3 || name[0] != 'h') return false;
  const size_t dot = name.size() - pattern.size() - 1;
  if (name[dot] != '.' || name.substr(dot + 1) != pattern) return false;
  return std::all_of(name.begin() + 1, name.begin() + static_cast<std::ptrdiff_t>(dot),
                     [](char c) { return c >= '0' && c <= '9'; });
}

namespace {
// round(fraction * count), halves up; the product is nudged by a few ulps first so that a
// fraction written as a ratio (2/62 as 0.03225806451612903) gives back its count exactly.
int blocks_of(double fraction, int count) {
  const double x = fraction * static_cast<double>(count);
  return static_cast<int>(std::floor(x * (1.0 + 1e-12) + 0.5));
}
}  // namespace

int HighPrecisionLayers::first_count(int count) const {
  return first_fraction ? blocks_of(*first_fraction, count) : first_blocks;
}
int HighPrecisionLayers::last_count(int count) const {
  return last_fraction ? blocks_of(*last_fraction, count) : last_blocks;
}

Recipe load_recipe(const std::string& name_or_path) {
  const auto names = recipe_names();
  if (std::find(names.begin(), names.end(), name_or_path) != names.end()) return recipe_by_name(name_or_path);
  std::ifstream f(name_or_path, std::ios::binary);
  if (!f) {
    std::string list;
    for (auto n : names) list += (list.empty() ? "" : ", ") + std::string(n);
    throw std::invalid_argument(fmt::format(
        "'{}' is neither a catalogue recipe ({}) nor a readable recipe file", name_or_path, list));
  }
  std::ostringstream text;
  text << f.rdbuf();
  return Recipe::from_json(text.str(), name_or_path);
}

}  // namespace lpx
