#include "cli_util.hpp"

#include <charconv>
#include <map>
#include <set>
#include <cmath>
#include <stdexcept>

#include <fmt/format.h>

#include "command.hpp"

namespace lpx::cli {

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

void check_input_options(const io::TensorFile& file, const std::string& path, bool shape_given,
                         bool tensor_given) {
  const char* what = file.kind == io::FileKind::npy ? "a .npy file" : "a .safetensors file";
  const std::string shown = path == "-" ? "<stdin>" : io::printable(path);
  if (shape_given && file.kind != io::FileKind::raw)
    throw UsageError(fmt::format("--shape applies to raw inputs only; {} is {} and carries its shape",
                                 shown, what));
  if (tensor_given && file.kind != io::FileKind::safetensors)
    throw UsageError(fmt::format("--tensor applies to .safetensors inputs only; {} is {} with one "
                                 "unnamed tensor",
                                 shown, file.kind == io::FileKind::npy ? "a .npy file" : "raw data"));
}

FloatInput read_float_input(const std::string& path, const std::string& shape_text,
                            const std::string& tensor_name) {
  std::vector<int64_t> raw_shape;
  if (!shape_text.empty()) raw_shape = io::parse_shape(shape_text);
  std::vector<std::string> names;
  if (!tensor_name.empty()) names.push_back(tensor_name);
  FloatInput in;
  in.file = io::read_tensor_file(path, raw_shape, names);
  check_input_options(in.file, path, !shape_text.empty(), !tensor_name.empty());
  const std::string shown = path == "-" ? "<stdin>" : io::printable(path);
  if (in.file.tensors.empty()) throw io::DataError(shown + ": no tensors in file");
  if (in.file.tensors.size() > 1)
    throw UsageError(fmt::format("{} holds {} tensors; choose one with --tensor", shown,
                                 in.file.tensors.size()));
  const io::TensorRef& t = in.file.tensors.front();
  in.shape = t.shape;
  if (t.dtype == io::DType::u8 || t.dtype == io::DType::u16)
    throw io::DataError(fmt::format("{}{}: holds {} codes, not float values (`lpx decode --from "
                                    "FORMAT` turns codes into floats)",
                                    shown, t.name.empty() ? "" : " (tensor '" + io::printable(t.name) + "')",
                                    io::dtype_name(t.dtype)));
  if (t.numel() == 0) throw io::DataError(shown + ": empty input (no elements)");
  if (t.dtype == io::DType::f32) {
    in.data = {reinterpret_cast<const float*>(t.bytes.data()), static_cast<size_t>(t.numel())};
  } else {
    in.values = io::to_float32(t);
    in.data = in.values;
  }
  return in;
}

void write_by_extension(const std::string& path, io::DType dtype, const std::vector<int64_t>& shape,
                        std::span<const std::byte> bytes, const std::string& name) {
  if (ends_with(path, ".npy")) {
    io::write_npy(path, io::TensorOut{name, dtype, shape, bytes});
  } else if (ends_with(path, ".safetensors")) {
    io::write_safetensors(path, {io::TensorOut{name, dtype, shape, bytes}});
  } else {
    io::write_raw(path, bytes);
  }
}

ElementFormat parse_format(const std::string& name) { return format_by_name(name); }

CLI::Option* add_threads_option(CLI::App* cmd, int& threads, const std::string& help) {
  return cmd->add_option("--threads", threads, help)->check(CLI::Range(0, kMaxThreads));
}

uint64_t parse_seed(const std::string& text, const std::string& name) {
  uint64_t v = 0;
  const char* end = text.data() + text.size();
  const bool digits = !text.empty() && text.find_first_not_of("0123456789") == std::string::npos;
  const auto [ptr, ec] = std::from_chars(text.data(), end, v);
  if (!digits || ec != std::errc() || ptr != end)
    throw UsageError(fmt::format("{} '{}' is not a whole number in [0, 18446744073709551615]", name,
                                 io::printable(text)));
  return v;
}

int64_t parse_int(const std::string& text, const std::string& name, int64_t lo, int64_t hi) {
  int64_t v = 0;
  const char* end = text.data() + text.size();
  const size_t digits_from = !text.empty() && text[0] == '-' ? 1 : 0;
  const bool digits = text.size() > digits_from &&
                      text.find_first_not_of("0123456789", digits_from) == std::string::npos;
  const auto [ptr, ec] = std::from_chars(text.data(), end, v);
  if (!digits || ec != std::errc() || ptr != end || v < lo || v > hi)
    throw UsageError(fmt::format("{} '{}' is not a whole number in [{}, {}]", name,
                                 io::printable(text), lo, hi));
  return v;
}

CLI::Option* add_seed_option(CLI::App* cmd, uint64_t& seed, const std::string& help, const std::string& name) {
  return cmd->add_option_function<std::string>(name, [&seed, name](const std::string& t) { seed = parse_seed(t, name); },
                                               help);
}

namespace {
CLI::Validator finite_check(bool allow_zero) {
  return CLI::Validator(
      [allow_zero](std::string& text) -> std::string {
        double v = 0;
        try {
          size_t used = 0;
          v = std::stod(text, &used);
          if (used != text.size()) return "'" + text + "' is not a number";
        } catch (const std::exception&) {
          return "'" + text + "' is not a number";
        }
        if (!std::isfinite(v) || v < 0 || (!allow_zero && v == 0))
          return "'" + text + "' must be a finite number " + (allow_zero ? ">= 0" : "> 0");
        return {};
      },
      allow_zero ? "FINITE >= 0" : "FINITE > 0");
}
}  // namespace

const CLI::Validator kFinitePositive = finite_check(false);
const CLI::Validator kFiniteNonNegative = finite_check(true);

Overflow parse_overflow(const std::string& name) {
  if (name == "sat") return Overflow::sat;
  if (name == "ieee") return Overflow::ieee;
  throw UsageError("unknown overflow mode '" + name + "' (expected sat or ieee)");
}

}  // namespace lpx::cli

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <iterator>

namespace lpx::cli {

std::vector<std::byte> read_raw_bytes(const std::string& path) {
  std::vector<char> chars;
  if (path == "-") {
    chars.assign(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
  } else {
    std::ifstream file(path, std::ios::binary);
    if (!file) throw io::DataError(io::printable(path) + ": cannot open: " + std::strerror(errno));
    chars.assign(std::istreambuf_iterator<char>(file), std::istreambuf_iterator<char>());
    if (file.bad()) throw io::DataError(io::printable(path) + ": read error");
  }
  std::vector<std::byte> bytes(chars.size());
  // memcpy with a null pointer is undefined even for 0 bytes (UBSan: an empty file).
  if (!chars.empty()) std::memcpy(bytes.data(), chars.data(), chars.size());
  return bytes;
}

std::vector<uint32_t> read_random_words(const std::string& path, size_t elements) {
  const std::vector<std::byte> bytes = read_raw_bytes(path);
  const std::string shown = path == "-" ? "<stdin>" : io::printable(path);
  if (bytes.size() % 4 != 0)
    throw io::DataError(fmt::format("{}: {} bytes is not a whole number of 32-bit random words",
                                    shown, bytes.size()));
  if (bytes.size() / 4 < elements)
    throw io::DataError(fmt::format("{}: {} random words, but the input has {} elements", shown,
                                    bytes.size() / 4, elements));
  std::vector<uint32_t> words(bytes.size() / 4);
  for (size_t i = 0; i < words.size(); ++i) {  // little-endian whatever the host
    uint32_t w = 0;
    for (size_t b = 0; b < 4; ++b) w |= static_cast<uint32_t>(bytes[4 * i + b]) << (8 * b);
    words[i] = w;
  }
  return words;
}

void finish_stdout() {
  errno = 0;
  const bool flushed = std::fflush(stdout) == 0;
  const int e = errno;
  if (flushed && !std::ferror(stdout)) return;
  std::clearerr(stdout);
  throw io::DataError(fmt::format("cannot write to standard output: {}",
                                  e != 0 ? std::strerror(e) : "write error"));
}

}  // namespace lpx::cli

namespace lpx::cli {
std::string compress_layer_names(const std::vector<std::string>& some, const std::vector<std::string>& all) {
  const std::set<std::string> in(some.begin(), some.end());
  const auto block_of = [](const std::string& n) {
    const size_t dot = n.find('.');
    return dot == std::string::npos ? std::string() : n.substr(0, dot);
  };
  const auto is_bmm = [](const std::string& n) { return n.ends_with(".attn.bmm"); };
  bool all_bmm = false;
  for (const auto& n : all)
    if (is_bmm(n)) all_bmm = true;
  for (const auto& n : all)
    if (is_bmm(n) && !in.count(n)) all_bmm = false;
  // blocks whose every layer (attention products aside when they are all kept) is in `some`
  std::map<std::string, bool> whole;
  for (const auto& n : all) {
    const std::string b = block_of(n);
    if (b.empty() || (all_bmm && is_bmm(n))) continue;
    auto [it, fresh] = whole.emplace(b, true);
    if (!in.count(n)) it->second = false;
  }
  std::vector<std::string> parts;
  std::set<std::string> said;
  for (const auto& n : all) {
    if (!in.count(n)) continue;
    if (all_bmm && is_bmm(n)) continue;
    const std::string b = block_of(n);
    if (!b.empty() && whole[b]) {
      if (said.insert(b).second) parts.push_back(b + ".*");
      continue;
    }
    parts.push_back(n);
  }
  if (all_bmm) parts.push_back("attention products");
  std::string s;
  for (const auto& p : parts) s += (s.empty() ? "" : ", ") + p;
  return s;
}
}  // namespace lpx::cli
