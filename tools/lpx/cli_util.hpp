// Helpers shared by the subcommands: reading float inputs and writing outputs by file
// extension (.npy, .safetensors, else raw little-endian), and option validators.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "lpx/formats/element_format.hpp"
#include "lpx/io/tensor_file.hpp"
#include "lpx/numerics/rounding.hpp"

namespace lpx::cli {

bool ends_with(const std::string& s, const std::string& suffix);

// A float32 tensor read from IN (raw .f32 with optional --shape, .npy float32/16/bf16,
// or one tensor of a .safetensors file; stdin by its content, io::detect_kind).
// --shape on an input that carries its shape and --tensor on one without named tensors
// are UsageErrors (check_input_options); an input with no elements is an io::DataError
// ("empty input (no elements)"), as it is for every tensor command.
struct FloatInput {
  std::vector<int64_t> shape;
  std::vector<float> values;  // only when a conversion was needed
  std::span<const float> data;
  io::TensorFile file;            // keeps the mapping alive when no conversion was needed
};
FloatInput read_float_input(const std::string& path, const std::string& shape_text,
                            const std::string& tensor_name = "");

// Writes `bytes` of `dtype` with `shape` as .npy / .safetensors (one tensor named
// `name`) / raw, chosen by OUT's extension. Atomic (temporary + rename).
void write_by_extension(const std::string& path, io::DType dtype, const std::vector<int64_t>& shape,
                        std::span<const std::byte> bytes, const std::string& name = "values");

// Parses a format name into a format (std::invalid_argument lists the valid names).
ElementFormat parse_format(const std::string& name);
Overflow parse_overflow(const std::string& name);

// --shape applies to raw inputs only (.npy and .safetensors carry their shapes), --tensor
// to .safetensors inputs only (a .npy or raw input holds one unnamed tensor): either on
// another kind of input is a UsageError. Checked on what was read, so stdin counts as
// the kind its content shows.
void check_input_options(const io::TensorFile& file, const std::string& path, bool shape_given,
                         bool tensor_given);

template <class T>
std::span<const std::byte> as_bytes_of(const std::vector<T>& v) {
  return std::as_bytes(std::span<const T>(v));
}

}  // namespace lpx::cli

namespace lpx::cli {
// The option checks every subcommand shares (docs/input-policy.md): a value out of its
// range is a usage error (one line, exit 2), never replaced by a default.

// --threads: 0 (OpenMP's default) up to kMaxThreads. More threads than that cannot help
// and exhaust the process (100000 OpenMP threads crash it).
inline constexpr int kMaxThreads = 1024;
CLI::Option* add_threads_option(CLI::App* cmd, int& threads, const std::string& help);
// --seed: a decimal integer in [0, 2^64 - 1]. "-1", "1e23", "0x10", "" and values above
// 2^64 - 1 are errors (a plain uint64 option wraps or saturates them without a word).
CLI::Option* add_seed_option(CLI::App* cmd, uint64_t& seed, const std::string& help,
                             const std::string& name = "--seed");
uint64_t parse_seed(const std::string& text, const std::string& name = "--seed");
// Every other whole-number option: decimal digits with an optional leading '-', in
// [lo, hi]. "0x10", "1e3", "+3", " 3", "" and values out of range are usage errors that
// name the option and the range (CLI11 alone reads hex and octal, and saturates an int64
// overflow to the largest value without a word).
int64_t parse_int(const std::string& text, const std::string& name, int64_t lo, int64_t hi);
template <class T>
CLI::Option* add_int_option(CLI::App* cmd, const std::string& name, T& value, int64_t lo, int64_t hi,
                            const std::string& help) {
  return cmd
      ->add_option_function<std::string>(
          name, [&value, name, lo, hi](const std::string& t) { value = static_cast<T>(parse_int(t, name, lo, hi)); },
          help)
      ->type_name("INT");
}
// Validators for numeric options: finite and > 0, finite and >= 0 (NaN and Inf fail
// both, which CLI::Range would let through).
extern const CLI::Validator kFinitePositive;
extern const CLI::Validator kFiniteNonNegative;
}  // namespace lpx::cli

namespace lpx::cli {
// `--format-file F.json` (format_file.cpp): reads a format descriptor and registers its
// format (docs/formats.md#format-descriptor-files); std::invalid_argument, one line.
void load_format_file(const std::string& path);
// `lpx --format-dir DIR`: load_format_file on every *.json directly in DIR, in name order (a
// registry of a group's formats). std::invalid_argument for a missing or empty folder.
void load_format_dir(const std::string& dir);

// Whole file (or stdin for "-") as bytes; for small inputs such as code files.
std::vector<std::byte> read_raw_bytes(const std::string& path);

// --random-words FILE (docs/formats.md#caller-given-random-bits): one little-endian uint32
// per element, for `elements` elements. io::DataError (exit 1, one line) when the file is
// not whole words or holds fewer words than the input has elements.
std::vector<uint32_t> read_random_words(const std::string& path, size_t elements);

// Flushes stdout and throws io::DataError (exit 1, one line) when anything written to it
// was lost: a full disk (/dev/full), a file-size limit (ulimit -f), a closed stdout. The
// error flag is sticky, so a failure anywhere in the command is caught here; main() calls
// it after every command that succeeded.
void finish_stdout();
}  // namespace lpx::cli

namespace lpx::cli {
// Printers of `lpx formats`, `lpx info` and `lpx table` (also used by `lpx tour`).
void print_formats();
void print_info(const ElementFormat& f);
void print_table(const ElementFormat& f);
}  // namespace lpx::cli

namespace lpx::cli {
// `some` (a subset of `all`, both GEMM layer names as the models name them: "h3.mlp.fc",
// "h3.attn.bmm", "lm_head", "fc0") in few words: a block whose layers are all in `some`
// becomes "h3.*", the attention products of every block "attention products", the rest
// stay by name. For `lpx train`'s and `lpx report`'s "kept in high precision" lists.
std::string compress_layer_names(const std::vector<std::string>& some, const std::vector<std::string>& all);
}  // namespace lpx::cli
