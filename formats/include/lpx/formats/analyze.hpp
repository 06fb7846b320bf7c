// What one format does to one tensor: the error statistics of `lpx analyze` (SQNR, MSE,
// max absolute and relative error, % flushed, % saturated, % of blocks whose scale
// clamped), computed here once so that the CLI and the Python package (python/,
// docs/python.md) give the same numbers from the same code.
//
// `format` is a block preset or spec (parse_block_format: fake_quantize with Overflow::sat
// and the block axis of the spec) or else an element format (format_by_name:
// fake_cast_array with Overflow::sat). Error statistics are over the finite inputs;
// non-finite inputs are only counted (nonfinite).
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "lpx/numerics/rounding.hpp"

namespace lpx {

// The formats `lpx analyze` and lpx.analyze() compare when none are given.
inline constexpr const char* kDefaultAnalyzeFormats =
    "mxfp8_e4m3,mxfp8_e5m2,mxfp6_e3m2,mxfp6_e2m3,mxfp4,nvfp4,fp8_tensor,fp8_block128,bfloat16";

// Throws std::invalid_argument "unknown format 'NAME' (block presets: ...; or an element
// format ...)" unless NAME is a block preset or spec or an element format.
void check_analyze_format(const std::string& format);

struct FormatErrors {
  int64_t elements = 0, nonfinite = 0;
  double sqnr_db = 0, mse = 0, max_abs = 0, max_rel = 0;
  double flushed_pct = 0, saturated_pct = 0, clamped_pct = 0;
  // Why the block format does not apply to this tensor (quantize()'s one-line
  // std::invalid_argument, e.g. a 2-D tile on a 1-D tensor); the numbers are then 0.
  std::string note;
};

// Throws std::invalid_argument for a name that is neither a block format nor an element
// format (format_by_name's message, listing the known names).
FormatErrors analyze_format(std::span<const float> x, std::span<const int64_t> shape,
                            const std::string& format, Rounding round, uint64_t seed);

}  // namespace lpx
