// `lpx analyze [--formats LIST] FILE...`: what each format does to each tensor — SQNR,
// MSE, max absolute and relative error, % flushed, % saturated, % of blocks whose scale
// clamped — as one aligned table sorted by worst SQNR, or --json.
#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "cli_util.hpp"
#include "command.hpp"
#include "lpx/formats/analyze.hpp"
#include "lpx/formats/block_format.hpp"
#include "lpx/formats/cast.hpp"
#include "lpx/formats/quantize.hpp"

namespace lpx::cli {
namespace {

constexpr const char* kDefaultFormats = kDefaultAnalyzeFormats;  // analyze.hpp

// One row of the table: a tensor of a file under one format (analyze.hpp computes the
// statistics, the same code as the Python package's lpx.analyze).
struct Row : FormatErrors {
  std::string file, tensor, format;
};

struct AnalyzeArgs {
  std::vector<std::string> files, tensors;
  std::string formats = kDefaultFormats, shape, round = "rne";
  uint64_t seed = 0;
  bool json = false;
};

Row analyze_one(std::span<const float> x, const std::vector<int64_t>& shape,
                const std::string& format_name, const AnalyzeArgs& a) {
  Row r;
  static_cast<FormatErrors&>(r) = analyze_format(x, shape, format_name, rounding_by_name(a.round), a.seed);
  r.format = format_name;
  return r;
}

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string s;
  for (int64_t d : shape) s += fmt::format("{}{}", s.empty() ? "" : "x", d);
  return s.empty() ? "scalar" : s;
}

std::vector<std::string> split_list(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  for (std::string item; std::getline(ss, item, ',');)
    if (!item.empty()) out.push_back(item);
  return out;
}

std::string json_number(double v) {
  if (std::isnan(v)) return "null";
  if (std::isinf(v)) return v > 0 ? "\"inf\"" : "\"-inf\"";
  return fmt::format("{}", v);
}

// A JSON string; besides what JSON requires (", \ and C0 controls), DEL and the C1
// controls U+0080..U+009F (UTF-8 C2 80..C2 9F) are written as \u escapes too, so that a
// tensor name from a file cannot drive the terminal that shows the output.
std::string json_string(const std::string& s) {
  std::string out = "\"";
  for (size_t i = 0; i < s.size(); ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20 || c == 0x7F) {
      out += fmt::format("\\u{:04x}", c);
    } else if (c == 0xC2 && i + 1 < s.size() && static_cast<unsigned char>(s[i + 1]) >= 0x80 &&
               static_cast<unsigned char>(s[i + 1]) < 0xA0) {
      out += fmt::format("\\u{:04x}", static_cast<unsigned char>(s[++i]));
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + "\"";
}

void run_analyze(const AnalyzeArgs& a, const CLI::App& cmd) {
  const std::vector<std::string> formats = split_list(a.formats);
  if (formats.empty()) throw UsageError("--formats needs at least one format");
  // As cast and quantize: the rounding mode is checked before any data is read, and a
  // seed without stochastic rounding is a conflict, not an option silently ignored.
  if (!is_stochastic(rounding_by_name(a.round)) && cmd.count("--seed"))
    throw UsageError("--seed needs --round sr (or sr-fast, sr-rne, sr-odd)");
  // Check every format name before reading any data, so a typo fails fast (exit 2).
  for (const std::string& f : formats) {
    try {
      check_analyze_format(f);
    } catch (const std::invalid_argument& e) {
      throw UsageError(e.what());
    }
  }
  std::vector<Row> rows;
  std::vector<int64_t> raw_shape;
  if (!a.shape.empty()) raw_shape = io::parse_shape(a.shape);
  for (const std::string& path : a.files) {
    const io::TensorFile file = io::read_tensor_file(path, raw_shape, a.tensors);
    check_input_options(file, path, !a.shape.empty(), !a.tensors.empty());
    const std::string shown = path == "-" ? "<stdin>" : io::printable(path);
    if (file.tensors.empty()) throw io::DataError(shown + ": no tensors in file");
    for (const io::TensorRef& t : file.tensors) {
      if (t.numel() == 0)
        throw io::DataError(t.name.empty() ? shown + ": empty input (no elements)"
                                           : fmt::format("{}: tensor '{}' is empty", shown,
                                                         io::printable(t.name)));
      std::vector<float> converted;
      std::span<const float> x;
      if (t.dtype == io::DType::f32) {
        x = {reinterpret_cast<const float*>(t.bytes.data()), static_cast<size_t>(t.numel())};
      } else {
        converted = io::to_float32(t);
        x = converted;
      }
      for (const std::string& f : formats) {
        Row r = analyze_one(x, t.shape, f, a);
        r.file = path;
        r.tensor = fmt::format("{}{}[{}]", t.name.empty() ? "" : t.name, t.name.empty() ? "" : " ",
                               shape_text(t.shape));
        rows.push_back(std::move(r));
      }
    }
  }
  // Worst SQNR first; rows where the format did not apply go last.
  std::stable_sort(rows.begin(), rows.end(), [](const Row& l, const Row& r) {
    if (l.note.empty() != r.note.empty()) return l.note.empty();
    return l.sqnr_db < r.sqnr_db;
  });
  if (a.json) {
    fmt::print("[\n");
    for (size_t i = 0; i < rows.size(); ++i) {
      const Row& r = rows[i];
      fmt::print("  {{\"file\": {}, \"tensor\": {}, \"format\": {}, \"elements\": {}, "
                 "\"nonfinite\": {}, \"sqnr_db\": {}, \"mse\": {}, \"max_abs_error\": {}, "
                 "\"max_rel_error\": {}, \"flushed_pct\": {}, \"saturated_pct\": {}, "
                 "\"clamped_blocks_pct\": {}, \"note\": {}}}{}\n",
                 json_string(r.file), json_string(r.tensor), json_string(r.format), r.elements,
                 r.nonfinite, json_number(r.sqnr_db), json_number(r.mse), json_number(r.max_abs),
                 json_number(r.max_rel), json_number(r.flushed_pct), json_number(r.saturated_pct),
                 json_number(r.clamped_pct), json_string(r.note), i + 1 < rows.size() ? "," : "");
    }
    fmt::print("]\n");
    return;
  }
  // The table shows names from files (and paths) with control characters escaped.
  const auto tensor_cell = [&](const Row& r) {
    return a.files.size() > 1 ? io::printable(r.file) + ":" + io::printable(r.tensor)
                              : io::printable(r.tensor);
  };
  size_t wt = 6, wf = 6;
  for (const Row& r : rows) {
    wt = std::max(wt, tensor_cell(r).size());
    wf = std::max(wf, r.format.size());
  }
  fmt::print("{:<{}}  {:<{}}  {:>8}  {:>10}  {:>10}  {:>9}  {:>8}  {:>8}  {:>8}\n", "tensor", wt,
             "format", wf, "SQNR dB", "MSE", "max |err|", "max rel", "flushed%", "satur.%",
             "clamped%");
  for (const Row& r : rows) {
    const std::string tensor = tensor_cell(r);
    if (!r.note.empty()) {
      fmt::print("{:<{}}  {:<{}}  n/a: {}\n", tensor, wt, r.format, wf, r.note);
      continue;
    }
    fmt::print("{:<{}}  {:<{}}  {:>8.2f}  {:>10.3e}  {:>10.3e}  {:>9.3e}  {:>8.3f}  {:>8.3f}  {:>8.3f}\n",
               tensor, wt, r.format, wf, r.sqnr_db, r.mse, r.max_abs, r.max_rel, r.flushed_pct,
               r.saturated_pct, r.clamped_pct);
  }
  for (const Row& r : rows)
    if (r.nonfinite > 0) {
      fmt::print("note: {} non-finite inputs in {} are excluded from the error statistics\n",
                 r.nonfinite, io::printable(r.tensor));
      break;
    }
}

const bool registered = register_command(50, [](CLI::App& app) {
  auto a = std::make_shared<AnalyzeArgs>();
  auto* cmd = app.add_subcommand("analyze", "Error table of formats over the tensors of files");
  cmd->add_option("--formats", a->formats,
                  "Comma-separated block presets, block specs or element formats")
      ->capture_default_str();
  cmd->add_option("--tensor", a->tensors, "Only these tensors of .safetensors inputs (repeatable)");
  cmd->add_option("--shape", a->shape, "Shape of raw .f32 inputs (all inputs raw), e.g. 64x128");
  cmd->add_option("--round", a->round, "Rounding of the elements: rne (default) ... sr");
  add_seed_option(cmd, a->seed, "Seed for --round sr (0..2^64-1)");
  cmd->add_flag("--json", a->json, "A JSON list of rows instead of the table");
  cmd->add_option("FILE", a->files, ".npy, .safetensors or raw .f32 files, or - (stdin: .npy "
                                    "and .safetensors by their first bytes, else raw)")->required();
  cmd->footer(
      "Examples:\n"
      "  lpx analyze model.safetensors\n"
      "  lpx analyze --formats mxfp4,nvfp4,e2m1:b32:e8m0:rceil --json acts.npy");
  cmd->callback([a, cmd] { run_analyze(*a, *cmd); });
});

}  // namespace
}  // namespace lpx::cli
