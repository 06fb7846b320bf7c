// `lpx formats`, `lpx info FORMAT`, `lpx table FORMAT`: what a format is, from its
// descriptor and the codec (nothing here is a second source of truth).
#include <cmath>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "cli_util.hpp"
#include "command.hpp"
#include "lpx/formats/codec.hpp"

namespace lpx::cli {
namespace {

// Shortest decimal that round-trips a double, plus 2^k form for powers of two.
std::string value_text(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  std::string s = fmt::format("{}", v);
  int e = 0;
  const double m = std::frexp(std::fabs(v), &e);
  if (v != 0 && m == 0.5 && (e - 1 < -8 || e - 1 > 16)) s += fmt::format(" (2^{})", e - 1);
  return s;
}

std::string aliases_of(const ElementFormat& f) {
  std::string s;
  for (const FormatAlias& a : format_aliases())
    if (a.canonical == f.name_view()) s += fmt::format("{}{}", s.empty() ? "" : ", ", a.alias);
  return s;
}

std::string layout_of(const ElementFormat& f) {
  if (f.is_integer)
    return f.bias ? fmt::format("int{}, value = code * 2^-{}", f.bits, f.bias)
                  : fmt::format("{}int{}", f.is_signed ? "" : "u", f.bits);
  return fmt::format("{}e{}m{}", f.is_signed ? "s" : "u", f.exponent_bits, f.mantissa_bits);
}

uint32_t count_finite(const ElementFormat& f) {
  uint32_t n = 0;
  for (uint32_t c = 0; c <= f.code_mask; ++c) n += std::isfinite(decode(c, f)) ? 1 : 0;
  return n;
}

}  // namespace

void print_info(const ElementFormat& f) {
  const auto row = [](const char* k, const std::string& v) { fmt::print("{:<16}{}\n", k, v); };
  row("format", f.name);
  const std::string aliases = aliases_of(f);
  if (!aliases.empty()) row("aliases", aliases);
  row("bits", fmt::format("{} ({})", f.bits, layout_of(f)));
  if (!f.is_integer) {
    row("bias", std::to_string(f.bias));
    row("emax", std::to_string(f.emax()));
  }
  row("max finite", value_text(max_finite(f)));
  if (!f.is_integer) row("min normal", value_text(min_normal(f)));
  row("min positive", value_text(min_subnormal(f)));
  row("finite codes", fmt::format("{} of {}", count_finite(f), f.code_mask + 1));
  row("specials", describe_specials(f));
  if (f.has_nan()) row("NaN code", fmt::format("0x{:0{}X}", f.nan_code, (f.bits + 3) / 4));
  if (f.has_inf()) row("Inf code", fmt::format("0x{:0{}X}", f.inf_magnitude, (f.bits + 3) / 4));
}

void print_table(const ElementFormat& f) {
  const int hex_digits = (f.bits + 3) / 4;
  fmt::print("{:<{}}  {:<{}}  {}\n", "code", hex_digits + 2, "bits", f.bits, "value");
  for (uint32_t c = 0; c <= f.code_mask; ++c) {
    std::string binary;
    for (int b = f.bits - 1; b >= 0; --b) binary += ((c >> b) & 1) ? '1' : '0';
    const uint32_t mag = c & ~f.sign_mask;
    const bool unused_subnormal = !f.is_integer && !f.subnormals && f.has_zero &&
                                  (mag >> f.mantissa_bits) == 0 && mag != 0;
    const char* note = f.is_reserved_magnitude(mag) ? " (reserved)"
                       : unused_subnormal           ? " (unused: no subnormals)"
                                                    : "";
    fmt::print("0x{:0{}X}  {}  {}{}\n", c, hex_digits, binary, value_text(decode(c, f)), note);
  }
}

void print_formats() {
  fmt::print("{:<20} {:>4}  {:<8} {:>5} {:>14} {:>14} {:>14}  {}\n", "format", "bits", "layout",
             "bias", "max", "min normal", "min positive", "specials");
  for (const ElementFormat* f : named_formats()) {
    fmt::print("{:<20} {:>4}  {:<8} {:>5} {:>14} {:>14} {:>14}  {}\n", f->name, f->bits,
               f->is_integer ? (f->is_signed ? "int" : "uint") : layout_of(*f),
               f->is_integer ? "-" : std::to_string(f->bias), value_text(max_finite(*f)),
               f->is_integer ? "-" : value_text(min_normal(*f)), value_text(min_subnormal(*f)),
               describe_specials(*f));
  }
  fmt::print("\nAliases:");
  for (const FormatAlias& a : format_aliases()) fmt::print(" {}={}", a.alias, a.canonical);
  fmt::print("\nGeneric: [u]e<X>m<Y>[b<BIAS>][fn|fnuz|ieee], e.g. e2m0, e1m2, e3m0, e3m2b2fn.\n");
  fmt::print("IEEE P3109: p3109_k<K>p<P><s|u><e|f> (2 <= K <= 16, 1 <= P < K), e.g. "
             "p3109_k8p4se, p3109_k6p3sf, p3109_k8p3ue.\n");
}

namespace {
const bool registered = register_command(10, [](CLI::App& app) {
  auto* formats = app.add_subcommand("formats", "List every named format and its limits");
  formats->footer("Example: lpx formats");
  formats->callback([] { print_formats(); });

  auto* info = app.add_subcommand("info", "Properties of one format (bits, bias, limits, specials)");
  auto info_name = std::make_shared<std::string>();
  info->add_option("FORMAT", *info_name, "Format name or alias, or a generic eXmY")->required();
  info->footer("Examples:\n  lpx info e4m3\n  lpx info float6_e2m3fn\n  lpx info e2m0\n"
               "  lpx info p3109_k8p4se");
  info->callback([info_name] { print_info(parse_format(*info_name)); });

  auto* table = app.add_subcommand("table", "Every code of a format with its value");
  auto table_name = std::make_shared<std::string>();
  table->add_option("FORMAT", *table_name, "Format name or alias")->required();
  table->footer("Examples:\n  lpx table e2m1\n  lpx table e8m0 | head");
  table->callback([table_name] { print_table(parse_format(*table_name)); });
});

}  // namespace
}  // namespace lpx::cli
