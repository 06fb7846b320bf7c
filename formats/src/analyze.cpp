// The statistics of `lpx analyze` (analyze.hpp); moved here from tools/lpx/cmd_analyze.cpp
// unchanged so that the Python package computes them with the same code.
#include "lpx/formats/analyze.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <vector>

#include "lpx/formats/block_format.hpp"
#include "lpx/formats/cast.hpp"
#include "lpx/formats/quantize.hpp"

namespace lpx {
namespace {

// Errors of y against x over the finite inputs (non-finite inputs are counted apart).
void error_stats(std::span<const float> x, std::span<const float> y, FormatErrors& r) {
  double signal = 0, noise = 0;
  int64_t finite = 0, nonzero = 0, flushed = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    if (!std::isfinite(x[i])) {
      ++r.nonfinite;
      continue;
    }
    ++finite;
    const double xv = x[i], err = static_cast<double>(y[i]) - xv;
    signal += xv * xv;
    noise += err * err;
    r.max_abs = std::max(r.max_abs, std::fabs(err));
    if (xv != 0) {
      ++nonzero;
      r.max_rel = std::max(r.max_rel, std::fabs(err / xv));
      flushed += y[i] == 0 ? 1 : 0;
    }
  }
  r.mse = finite ? noise / static_cast<double>(finite) : 0;
  r.sqnr_db = noise == 0 ? std::numeric_limits<double>::infinity() : 10 * std::log10(signal / noise);
  r.flushed_pct = nonzero ? 100.0 * static_cast<double>(flushed) / static_cast<double>(nonzero) : 0;
}

}  // namespace

void check_analyze_format(const std::string& f) {
  try {
    parse_block_format(f);
  } catch (const std::invalid_argument&) {
    try {
      format_by_name(f);
    } catch (const std::invalid_argument&) {
      std::string presets;
      for (std::string_view p : block_preset_names()) presets += (presets.empty() ? "" : ", ") + std::string(p);
      throw std::invalid_argument("unknown format '" + f + "' (block presets: " + presets +
                                  "; or an element format, `lpx formats` lists them; or a block "
                                  "spec such as e2m1:b32:e8m0:rceil)");
    }
  }
}

FormatErrors analyze_format(std::span<const float> x, std::span<const int64_t> shape,
                            const std::string& format, Rounding round, uint64_t seed) {
  FormatErrors r;
  r.elements = static_cast<int64_t>(x.size());
  std::vector<float> y(x.size());
  BlockFormat block;
  bool is_block = true;
  try {
    block = parse_block_format(format);
  } catch (const std::invalid_argument&) {
    is_block = false;
  }
  if (is_block) {
    QuantizeOptions opt;
    opt.round = round;
    opt.seed = seed;
    try {
      const QuantizedTensor q = fake_quantize({x, shape}, y, block, opt);
      int64_t blocks = 1;
      for (int64_t d : q.scale_shape) blocks *= d;
      r.clamped_pct = blocks ? 100.0 * static_cast<double>(q.stats.clamped_scales) / static_cast<double>(blocks) : 0;
      r.saturated_pct = x.empty() ? 0 : 100.0 * static_cast<double>(q.stats.saturated) / static_cast<double>(x.size());
    } catch (const std::invalid_argument& e) {
      r.note = e.what();
      return r;
    }
  } else {
    const ElementFormat f = format_by_name(format);  // throws with the known names
    CastOptions opt;
    opt.round = round;
    opt.overflow = Overflow::sat;
    opt.seed = seed;
    fake_cast_array(x, y, f, opt);
    const double top = max_finite(f);
    int64_t saturated = 0;
    for (float v : x) saturated += std::isfinite(v) && std::fabs(v) > top ? 1 : 0;
    r.saturated_pct = x.empty() ? 0 : 100.0 * static_cast<double>(saturated) / static_cast<double>(x.size());
  }
  error_stats(x, y, r);
  return r;
}

}  // namespace lpx
