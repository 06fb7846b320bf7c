// The registry of named element formats, their aliases, and the generic eXmY grammar.
#include "lpx/formats/element_format.hpp"

#include <array>
#include <cctype>
#include <charconv>
#include <cmath>
#include <mutex>
#include <stdexcept>
#include <vector>

#include <fmt/format.h>

#include "lpx/formats/codec.hpp"
#include "lpx/formats/format_registry.hpp"

namespace lpx {

namespace {

constexpr std::array<const ElementFormat*, 20> kNamed = {
    &fmt8::e4m3fn,   &fmt8::e5m2,        &fmt8::e4m3fnuz, &fmt8::e5m2fnuz,
    &fmt8::e4m3b11fnuz, &fmt8::e4m3,     &fmt8::e3m4,     &fmt8::e8m0,
    &fmt6::e3m2,     &fmt6::e2m3,        &fmt4::e2m1,     &fmt16::bf16,
    &fmt16::f16,     &fmtint::int8,      &fmtint::int4,   &fmtint::int2,
    &fmtint::uint8,  &fmtint::uint4,     &fmtint::uint2,  &fmtint::mxint8,
};

constexpr std::array<FormatAlias, 18> kAliases = {{
    {"e4m3", "float8_e4m3fn"},   {"fp8_e4m3", "float8_e4m3fn"},
    {"e5m2", "float8_e5m2"},     {"fp8_e5m2", "float8_e5m2"},
    {"e8m0", "float8_e8m0fnu"},  {"e3m2", "float6_e3m2fn"},
    {"fp6_e3m2", "float6_e3m2fn"}, {"e2m3", "float6_e2m3fn"},
    {"fp6_e2m3", "float6_e2m3fn"}, {"e2m1", "float4_e2m1fn"},
    {"fp4", "float4_e2m1fn"},    {"fp4_e2m1", "float4_e2m1fn"},
    {"bf16", "bfloat16"},        {"fp16", "float16"},
    {"half", "float16"},         {"ue8m0", "float8_e8m0fnu"},
    {"float8_e8m0", "float8_e8m0fnu"}, {"mxint8", "mxint8_element"},
}};

bool parse_int(std::string_view& s, int& out) {
  const char* begin = s.data();
  const auto [ptr, ec] = std::from_chars(begin, begin + s.size(), out);
  if (ec != std::errc() || ptr == begin) return false;
  s.remove_prefix(static_cast<size_t>(ptr - begin));
  return true;
}

// [u]e<X>m<Y>[b<BIAS>][fn|fnuz|ieee]; returns false if the name is not of this form.
bool parse_generic(std::string_view name, ElementFormat& out, std::string& why) {
  std::string_view s = name;
  const bool is_unsigned = s.starts_with("u");
  if (is_unsigned) s.remove_prefix(1);
  int x = 0, y = 0;
  if (!s.starts_with("e")) return false;
  s.remove_prefix(1);
  if (!parse_int(s, x) || !s.starts_with("m")) return false;
  s.remove_prefix(1);
  if (!parse_int(s, y)) return false;
  bool has_bias = false;
  int bias = 0;
  if (s.starts_with("b")) {
    s.remove_prefix(1);
    if (!parse_int(s, bias)) return false;
    has_bias = true;
  }
  Specials specials = Specials::none;
  if (s == "fn") specials = Specials::fn;
  else if (s == "fnuz") specials = Specials::fnuz;
  else if (s == "ieee") specials = Specials::ieee;
  else if (!s.empty()) return false;
  const int total = x + y + (is_unsigned ? 0 : 1);
  if (x < 1 || x > 8 || y < 0 || y > 10 || total > 16 || total < 2) {
    why = fmt::format("'{}': need 1 <= X <= 8 exponent bits, 0 <= Y <= 10 mantissa bits and "
                      "at most 16 bits in all", name);
    return true;
  }
  if (specials == Specials::fnuz && is_unsigned) {
    why = fmt::format("'{}': fnuz needs a sign bit (its NaN is the -0 code)", name);
    return true;
  }
  if (!has_bias) bias = (1 << (x - 1)) - 1 + (specials == Specials::fnuz ? 1 : 0);
  ElementFormat f = make_float_format(name, x, y, bias, specials, !is_unsigned);
  // Every value must be a float32: largest exponent <= 127, smallest lsb >= 2^-149.
  if (f.emax() > 127 || 1 - bias - y < -149 || bias > 127) {
    why = fmt::format("'{}': bias {} puts values outside float32's range", name, bias);
    return true;
  }
  out = f;
  return true;
}

// p3109_k<K>p<P><s|u><e|f> (gfloat's names, docs/formats.md#p3109); returns false if the
// name is not of this form, true with `why` set if it is but the parameters are invalid.
bool parse_p3109(std::string_view name, ElementFormat& out, std::string& why) {
  std::string_view s = name;
  if (!s.starts_with("p3109_k")) return false;
  s.remove_prefix(7);
  int k = 0, p = 0;
  if (!parse_int(s, k) || !s.starts_with("p")) return false;
  s.remove_prefix(1);
  if (!parse_int(s, p) || s.size() != 2) return false;
  if ((s[0] != 's' && s[0] != 'u') || (s[1] != 'e' && s[1] != 'f')) return false;
  const bool is_signed = s[0] == 's', extended = s[1] == 'e';
  if (k < 2 || k > 16 || p < 1 || p >= k) {
    why = fmt::format("'{}': P3109 needs 2 <= K <= 16 bits and precision 1 <= P < K", name);
    return true;
  }
  const ElementFormat f = make_p3109_format(k, p, is_signed, extended);
  // Every value must be a float32 (K = 16 with few precision bits has too wide a range).
  if (f.emax() > 127 || f.emin() - f.mantissa_bits < -149) {
    why = fmt::format("'{}': values outside float32's range (exponent bias {})", name, f.bias);
    return true;
  }
  out = f;
  return true;
}

// Formats registered from descriptor files (register_format); read far more often than
// written, and written only at start-up, but guarded all the same.
std::mutex& registry_mutex() {
  static std::mutex m;
  return m;
}
std::vector<ElementFormat>& registry() {
  static std::vector<ElementFormat> formats;
  return formats;
}

std::string known_names() {
  std::string s;
  for (const ElementFormat* f : kNamed) s += fmt::format("{}{}", s.empty() ? "" : ", ", f->name);
  for (const FormatAlias& a : kAliases) s += fmt::format(", {}", a.alias);
  return s + ", or eXmY[bBIAS][fn|fnuz|ieee] (e.g. e2m0, e1m2, e3m2b2fn), or "
             "p3109_kKpP[s|u][e|f] (e.g. p3109_k8p4se)";
}

}  // namespace

std::span<const ElementFormat* const> named_formats() { return kNamed; }
std::span<const FormatAlias> format_aliases() { return kAliases; }

ElementFormat format_by_name(std::string_view name) {
  for (const ElementFormat* f : kNamed)
    if (f->name_view() == name) return *f;
  for (const FormatAlias& a : kAliases)
    if (a.alias == name) return format_by_name(a.canonical);
  {
    const std::lock_guard<std::mutex> lock(registry_mutex());
    for (const ElementFormat& r : registry())
      if (r.name_view() == name) return r;
  }
  ElementFormat f;
  std::string why;
  if (parse_p3109(name, f, why) || parse_generic(name, f, why)) {
    if (!why.empty()) throw std::invalid_argument("invalid format " + why);
    return f;
  }
  throw std::invalid_argument(
      fmt::format("unknown format '{}'; known formats: {}", name, known_names()));
}

double max_finite(const ElementFormat& f) {
  return static_cast<double>(decode(f.max_magnitude, f));
}

double min_normal(const ElementFormat& f) {
  if (f.is_integer) return std::ldexp(1.0, -f.bias);
  return f.has_zero ? std::ldexp(1.0, f.emin()) : std::ldexp(1.0, -f.bias);
}

double min_subnormal(const ElementFormat& f) {
  if (f.is_integer) return std::ldexp(1.0, -f.bias);
  // Without subnormals the first code above zero is the min normal's, 1 << M.
  return static_cast<double>(decode(f.has_zero ? (f.subnormals ? 1u : 1u << f.mantissa_bits) : 0u, f));
}

namespace {
std::string describe_kind(const ElementFormat& f) {
  switch (f.specials) {
    case Specials::ieee: return "Inf and NaN (IEEE: exponent all ones)";
    case Specials::fn:
      return f.is_signed ? "no Inf; NaN = S.1..1" : "unsigned, no zero; NaN = all ones";
    case Specials::fnuz: return "no Inf, no -0; NaN = the -0 code";
    case Specials::none: return "none: every code is finite";
    case Specials::p3109e:
      return f.is_signed ? "P3109 extended: one NaN = the -0 code, +-Inf = largest magnitude, no -0"
                         : "P3109 unsigned extended: NaN = all ones, +Inf = all ones - 1";
    case Specials::p3109f:
      return f.is_signed ? "P3109 finite: one NaN = the -0 code, no Inf, no -0"
                         : "P3109 unsigned finite: NaN = all ones, no Inf";
  }
  return "";
}
}  // namespace

std::string describe_specials(const ElementFormat& f) {
  if (f.is_integer) return f.is_signed ? (f.symmetric ? "symmetric two's complement" : "two's complement")
                                       : "unsigned";
  std::string s = describe_kind(f);
  if (f.reserved_top > 0)
    s += fmt::format("; {} reserved code{} (decode to NaN)", f.reserved_top * (f.is_signed ? 2 : 1),
                     f.reserved_top * (f.is_signed ? 2 : 1) == 1 ? "" : "s");
  if (!f.subnormals && f.mantissa_bits > 0) s += "; no subnormals";
  return s;
}

}  // namespace lpx

namespace lpx {

namespace {
template <class Fail>
Specials specials_by_name(const std::string& name, const Fail& fail) {
  if (name == "ieee") return Specials::ieee;
  if (name == "fn") return Specials::fn;
  if (name == "fnuz") return Specials::fnuz;
  if (name == "none") return Specials::none;
  if (name == "p3109e") return Specials::p3109e;
  if (name == "p3109f") return Specials::p3109f;
  fail(fmt::format("specials '{}' is not one of ieee, fn, fnuz, none, p3109e, p3109f", name));
  return Specials::none;
}
}  // namespace

ElementFormat make_described_format(const FormatDescriptor& d) {
  const std::string& n = d.name;
  const auto fail = [&](const std::string& why) {
    throw std::invalid_argument(fmt::format("format descriptor '{}': {}", n, why));
  };
  if (n.empty() || n.size() > 31) fail("the name needs 1 to 31 characters");
  for (const char c : n)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.'))
      fail("the name may hold letters, digits, '_', '-' and '.' only");
  const int E = d.exponent_bits, M = d.mantissa_bits;
  const int bits = E + M + (d.is_signed ? 1 : 0);
  if (E < 1 || E > 8) fail(fmt::format("exponent_bits {} is outside 1..8", E));
  if (M < 0 || M > 15) fail(fmt::format("mantissa_bits {} is outside 0..15", M));
  if (bits > 16) fail(fmt::format("{} bits in all; at most 16", bits));
  if (bits < 2) fail("at least 2 bits in all");
  const std::optional<Specials> given_kind = d.specials ? std::optional(specials_by_name(*d.specials, fail))
                                                       : std::nullopt;
  const bool lists = d.nan_codes || d.inf_codes || d.reserved_codes;
  const uint32_t code_mask = (1u << bits) - 1;
  const auto hex = [&](uint32_t c) { return fmt::format("0x{:0{}X}", c, (bits + 3) / 4); };
  // The listed codes as one class per code (0: finite), refusing codes out of range,
  // listed twice, or in two lists.
  std::vector<uint8_t> listed(size_t{code_mask} + 1, 0);
  constexpr const char* kClass[] = {"finite", "NaN", "Inf", "reserved"};
  const auto take = [&](const std::optional<std::vector<uint32_t>>& codes, uint8_t cls, const char* key) {
    if (!codes) return;
    for (const uint32_t c : *codes) {
      if (c > code_mask) fail(fmt::format("{} holds {}, beyond the {}-bit codes", key, c, bits));
      if (listed[c] == cls) fail(fmt::format("{} lists {} twice", key, hex(c)));
      if (listed[c] != 0)
        fail(fmt::format("{} is listed both as {} and as {}", hex(c), kClass[listed[c]], kClass[cls]));
      listed[c] = cls;
    }
  };
  take(d.nan_codes, 1, "nan_codes");
  take(d.inf_codes, 2, "inf_codes");
  take(d.reserved_codes, 3, "reserved_codes");
  const size_t reserved_count = d.reserved_codes ? d.reserved_codes->size() : 0;
  if (d.is_signed && reserved_count % 2 != 0)
    fail(fmt::format("reserved_codes lists {} codes; a signed format reserves magnitudes, so both signs of each",
                     reserved_count));
  const uint32_t reserved_top = static_cast<uint32_t>(d.is_signed ? reserved_count / 2 : reserved_count);

  // Builds the format of one kind, or says why that kind cannot be.
  const auto build = [&](Specials sp, std::string& why) -> std::optional<ElementFormat> {
    if (sp == Specials::fnuz && !d.is_signed) {
      why = "fnuz needs a sign bit (its NaN is the -0 code)";
      return std::nullopt;
    }
    if (sp == Specials::ieee && E < 2) {
      why = "ieee specials need at least 2 exponent bits";
      return std::nullopt;
    }
    const int bias = d.bias ? *d.bias : (1 << (E - 1)) - 1 + (sp == Specials::fnuz ? 1 : 0);
    if (bias < -149 || bias > 255) {
      why = fmt::format("bias {} is outside -149..255", bias);
      return std::nullopt;
    }
    ElementFormat f = make_float_format(n, E, M, bias, sp, d.is_signed);
    if (reserved_top >= f.max_magnitude) {
      why = fmt::format("{} reserved codes leave no finite nonzero value", reserved_count);
      return std::nullopt;
    }
    f.reserved_top = static_cast<uint16_t>(reserved_top);
    f.subnormals = d.subnormals;
    return finalize(f);
  };
  // The class of every code of f, as the codec sees it.
  const auto classes = [&](const ElementFormat& f) {
    std::vector<uint8_t> cls(size_t{code_mask} + 1, 0);
    for (uint32_t c = 0; c <= code_mask; ++c) {
      const uint32_t mag = c & ~f.sign_mask;
      const float v = decode(c, f);
      cls[c] = f.is_reserved_magnitude(mag) ? 3 : v != v ? 1 : std::isinf(v) ? 2 : 0;
    }
    return cls;
  };

  ElementFormat f;
  if (!lists) {
    std::string why;
    const std::optional<ElementFormat> built = build(given_kind.value_or(Specials::none), why);
    if (!built) fail(why);
    f = *built;
  } else {
    // The kind the lists describe: the given one, or the first (in this order) whose NaN,
    // Inf and reserved codes are exactly the listed ones.
    const std::vector<Specials> kinds =
        given_kind ? std::vector<Specials>{*given_kind}
                   : std::vector<Specials>{Specials::none, Specials::ieee, Specials::fn, Specials::fnuz,
                                           Specials::p3109e, Specials::p3109f};
    std::optional<ElementFormat> match;
    std::string why_given;
    const std::string with_reserved =
        reserved_count ? fmt::format(" and {} reserved code{}", reserved_count, reserved_count == 1 ? "" : "s") : "";
    for (const Specials sp : kinds) {
      std::string why;
      const std::optional<ElementFormat> g = build(sp, why);
      if (!g) {
        why_given = why;
        continue;
      }
      const std::vector<uint8_t> cls = classes(*g);
      if (cls == listed) {
        match = g;
        break;
      }
      // With the kind given, name the first code the lists and the kind disagree on.
      for (uint32_t c = 0; given_kind && c <= code_mask && why_given.empty(); ++c)
        if (cls[c] != listed[c])
          why_given = listed[c] == 0
                          ? fmt::format("{} is {} under specials '{}'{}, but not listed", hex(c), kClass[cls[c]],
                                        *d.specials, with_reserved)
                          : fmt::format("{} is listed as {} but is {} under specials '{}'{}", hex(c),
                                        kClass[listed[c]], kClass[cls[c]], *d.specials, with_reserved);
    }
    if (!match) {
      if (given_kind) fail(why_given);
      fail("the listed codes fit no layout the codec runs: NaN and Inf codes of one specials "
           "kind (ieee, fn, fnuz, none, p3109e, p3109f), reserved codes the largest finite "
           "magnitudes below them, the same for both signs (docs/formats.md#format-descriptor-files)");
    }
    f = *match;
  }
  if (f.max_magnitude == 0 && !f.has_inf()) fail("no finite nonzero value");
  // Every value must be a float32, and the codec's float32-subnormal reading needs
  // emin >= -127 (docs/formats.md#rounding-grid).
  if (f.emax() > 127 || f.emin() - M < -149 || f.emin() < -127)
    fail(fmt::format("bias {} puts values outside float32's range", f.bias));
  return f;
}

void register_format(const ElementFormat& f) {
  const std::string_view name = f.name_view();
  bool taken = false;
  for (const ElementFormat* g : kNamed) taken = taken || g->name_view() == name;
  for (const FormatAlias& a : kAliases) taken = taken || a.alias == name;
  ElementFormat parsed;
  std::string why;
  taken = taken || parse_p3109(name, parsed, why) || parse_generic(name, parsed, why);
  const std::lock_guard<std::mutex> lock(registry_mutex());
  for (const ElementFormat& r : registry()) taken = taken || r.name_view() == name;
  if (taken)
    throw std::invalid_argument(fmt::format(
        "format descriptor '{}': the name is taken (a named format, alias, generic or P3109 "
        "name, or another descriptor)", name));
  registry().push_back(f);
}

}  // namespace lpx
