// Block quantization against a separate, plain double-precision reference written from the
// specifications (OCP MX v1.0 scale rules, docs/formats.md for NVFP4, Transformer Engine's
// current scaling), not from quantize.cpp. Only the element cast (lpx::encode/decode) is
// shared, since the codec is verified on its own. Everything else here is independent:
// block membership from multi-indices, amax, scale exponents via frexp/ldexp in double,
// clamps, NVFP4 scales, ragged blocks, statistics and dequantized values. Results must
// agree bit for bit for every preset x scale rule x rounding x shape x axis x input.
#include <catch2/catch.hpp>

#include <cfloat>
#include <cmath>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "lpx/formats/block_format.hpp"
#include "lpx/formats/codec.hpp"
#include "lpx/formats/quantize.hpp"
#include "lpx/numerics/philox.hpp"

namespace {

using lpx::BlockFormat;
using lpx::BlockShape;
using lpx::ScaleFormat;
using lpx::ScaleRule;

uint32_t bits(float f) {
  uint32_t b;
  std::memcpy(&b, &f, 4);
  return b;
}
bool same(float a, float b) { return (std::isnan(a) && std::isnan(b)) || bits(a) == bits(b); }

// double -> float rounded to odd (used only where x * 2^-X is not a float: below float32's
// normal range). Round to odd keeps the sticky information for the coarser rounding after.
float to_float_odd(double v) {
  const float f = static_cast<float>(v);
  if (static_cast<double>(f) == v) return f;
  float t = f;
  if (std::fabs(static_cast<double>(f)) > std::fabs(v)) t = std::nextafter(f, 0.0f);
  return (bits(t) & 1u) ? t : std::nextafter(t, std::copysign(INFINITY, t));
}

struct RefResult {
  std::vector<uint8_t> codes;
  std::vector<float> values;           // dequantized
  std::vector<uint8_t> scale_codes;    // by block id (C order over the block grid)
  std::vector<float> scale_values;
  float tensor_dec = 1.0f;
  int64_t clamped = 0, saturated = 0, flushed = 0;
};

struct RefOptions {
  lpx::Rounding round = lpx::Rounding::rne;
  uint64_t seed = 0;
  uint32_t stream = 0;
  int sr_bits = 32;
  bool headroom = false;
  bool flush = false;
  float history_amax = -1;  // >= 0: delayed scaling with this amax
  int margin = 0;
};

// floor(log2 v) and "is a power of two" for v > 0, via frexp (v = m * 2^e, m in [0.5, 1)).
int ref_floor_log2(double v) {
  int e;
  std::frexp(v, &e);
  return e - 1;
}
int ref_ceil_log2(double v) {
  int e;
  const double m = std::frexp(v, &e);
  return m == 0.5 ? e - 1 : e;
}

RefResult reference(const std::vector<float>& x, const std::vector<int64_t>& shape,
                    const BlockFormat& f, const RefOptions& o) {
  const lpx::ElementFormat& el = f.element;
  const double max_elem = lpx::max_finite(el);
  const int emax = ref_floor_log2(max_elem);
  const int mbits = el.is_integer ? el.bits - 2 : el.mantissa_bits;
  const size_t r = shape.size();
  int64_t n = 1;
  for (auto d : shape) n *= d;
  // Block extents per axis, from the descriptor's meaning.
  std::vector<int64_t> ext(r, 1);
  const int axis = f.block.axis < 0 ? f.block.axis + static_cast<int>(r) : f.block.axis;
  switch (f.block.kind) {
    case BlockShape::Kind::vector: ext[axis] = f.block.length; break;
    case BlockShape::Kind::channel: ext[axis] = shape[axis]; break;
    case BlockShape::Kind::tile:
      ext[r - 1] = f.block.cols;
      if (r >= 2) ext[r - 2] = f.block.rows;
      break;
    case BlockShape::Kind::tensor: ext = shape; break;
  }
  std::vector<int64_t> grid(r);
  int64_t nblocks = 1;
  for (size_t d = 0; d < r; ++d) {
    grid[d] = (shape[d] + ext[d] - 1) / ext[d];
    nblocks *= grid[d];
  }
  // Members of each block, in flat order.
  std::vector<std::vector<int64_t>> members(static_cast<size_t>(nblocks));
  std::vector<int64_t> idx(r, 0);
  for (int64_t i = 0; i < n; ++i) {
    int64_t rem = i;
    for (size_t d = r; d-- > 0;) {
      idx[d] = rem % shape[d];
      rem /= shape[d];
    }
    int64_t b = 0;
    for (size_t d = 0; d < r; ++d) b = b * grid[d] + idx[d] / ext[d];
    members[static_cast<size_t>(b)].push_back(i);
  }
  auto pre = [&](float v) {
    return (o.flush && std::fabs(v) < FLT_MIN) ? std::copysign(0.0f, v) : v;
  };
  auto pre_elem = [&](float v) {
    const float p = pre(v);
    return o.headroom ? static_cast<float>(static_cast<double>(p) * 0.75) : p;
  };
  auto rnd = [&](int64_t i) {
    return o.round == lpx::Rounding::sr ? lpx::random_bits(o.seed, o.stream, static_cast<uint64_t>(i))
                                        : 0u;
  };
  RefResult res;
  res.codes.assign(static_cast<size_t>(n), 0);
  res.values.assign(static_cast<size_t>(n), 0.0f);
  res.scale_codes.assign(static_cast<size_t>(nblocks), 0);
  res.scale_values.assign(static_cast<size_t>(nblocks), 0.0f);

  // NVFP4-style tensor scale from the finite amax of the tensor.
  float s_enc_t = 1.0f, s_dec_t = 1.0f;
  if (f.scale == ScaleFormat::e4m3) {
    double amax_t = 0;
    for (float v : x)
      if (std::isfinite(v)) amax_t = std::max(amax_t, std::fabs(static_cast<double>(pre(v))));
    if (amax_t > 0) {
      const float num = static_cast<float>(max_elem * 448.0);
      s_enc_t = static_cast<float>(num / amax_t);
      if (s_enc_t > FLT_MAX) s_enc_t = FLT_MAX;
    }
    s_dec_t = static_cast<float>(1.0 / s_enc_t);
    res.tensor_dec = s_dec_t;
  }
  const double qnan = std::nan("");

  for (int64_t b = 0; b < nblocks; ++b) {
    const auto& mem = members[static_cast<size_t>(b)];
    bool nonfinite = false;
    double amax = 0;
    for (int64_t i : mem) {
      const float v = pre(x[static_cast<size_t>(i)]);
      if (!std::isfinite(v)) nonfinite = true;
      else amax = std::max(amax, std::fabs(static_cast<double>(v)));
    }
    if (nonfinite) {
      res.scale_codes[static_cast<size_t>(b)] = f.scale == ScaleFormat::e4m3 ? 0x7F : 0xFF;
      res.scale_values[static_cast<size_t>(b)] = static_cast<float>(qnan);
      for (int64_t i : mem) res.values[static_cast<size_t>(i)] = static_cast<float>(qnan);
      continue;
    }
    // Per element: the scaled float handed to encode, and the float32 dequantization.
    std::function<float(float)> scale_in;
    std::function<float(uint32_t)> deq;
    bool sat_counts = true;
    switch (f.scale) {
      case ScaleFormat::e8m0:
      case ScaleFormat::pow2: {
        int X = -127;
        if (amax > 0) {
          int raw = 0;
          switch (f.rule) {
            case ScaleRule::floor: raw = ref_floor_log2(amax) - emax; break;
            case ScaleRule::ceil: raw = ref_ceil_log2(amax) - emax; break;
            case ScaleRule::rceil: raw = ref_ceil_log2(amax / max_elem); break;
            case ScaleRule::even: {
              int fl;
              if (amax >= std::ldexp(1.0, -126)) {
                int e;
                const double m = std::frexp(amax, &e);  // amax = m * 2^e
                const double scaled = std::floor(std::ldexp(m, mbits + 1) + 0.5);
                fl = (scaled >= std::ldexp(1.0, mbits + 1)) ? e : e - 1;
              } else {
                // float32 subnormal: the bit addition carries into the exponent or not.
                fl = amax + std::ldexp(1.0, -127 - mbits) >= std::ldexp(1.0, -126)
                         ? -126
                         : ref_floor_log2(amax);
              }
              raw = fl - emax;
              break;
            }
          }
          X = std::min(127, std::max(-127, raw));
          if (X != raw) ++res.clamped;
        }
        res.scale_codes[static_cast<size_t>(b)] = static_cast<uint8_t>(X + 127);
        res.scale_values[static_cast<size_t>(b)] = static_cast<float>(std::ldexp(1.0, X));
        scale_in = [X](float v) { return to_float_odd(std::ldexp(static_cast<double>(v), -X)); };
        deq = [X, &el](uint32_t c) {
          return static_cast<float>(std::ldexp(static_cast<double>(lpx::decode(c, el)), X));
        };
        break;
      }
      case ScaleFormat::fp32: {
        const double am = o.history_amax >= 0 ? o.history_amax : amax;
        float enc = 1.0f;
        if (am > 0) {
          const double e = std::ldexp(static_cast<double>(static_cast<float>(max_elem / am)),
                                      -o.margin);
          if (e > FLT_MAX) {
            enc = FLT_MAX;
            ++res.clamped;
          } else {
            enc = static_cast<float>(e);
          }
        }
        const float dec = static_cast<float>(1.0 / enc);
        res.scale_values[static_cast<size_t>(b)] = dec;
        scale_in = [enc](float v) { return static_cast<float>(static_cast<double>(v) * enc); };
        deq = [dec, &el](uint32_t c) {
          return static_cast<float>(static_cast<double>(lpx::decode(c, el)) * dec);
        };
        break;
      }
      case ScaleFormat::e4m3: {
        const float t = static_cast<float>(amax * s_enc_t);
        const float v = static_cast<float>(static_cast<double>(t) / max_elem);
        const uint32_t code =
            lpx::encode(v, lpx::fmt8::e4m3fn, lpx::Rounding::rne, lpx::Overflow::sat);
        const float sdb = lpx::decode(code, lpx::fmt8::e4m3fn);
        const float prod = static_cast<float>(static_cast<double>(sdb) * s_dec_t);
        const float enc = std::min(static_cast<float>(1.0 / static_cast<double>(prod)), FLT_MAX);
        if (amax > 0 && sdb == 0.0f) ++res.clamped;
        sat_counts = sdb != 0.0f;
        res.scale_codes[static_cast<size_t>(b)] = static_cast<uint8_t>(code);
        scale_in = [enc](float u) { return static_cast<float>(static_cast<double>(u) * enc); };
        deq = [sdb, s_dec_t, &el](uint32_t c) {
          const float a = static_cast<float>(static_cast<double>(lpx::decode(c, el)) * sdb);
          return static_cast<float>(static_cast<double>(a) * s_dec_t);
        };
        break;
      }
    }
    for (int64_t i : mem) {
      const float xi = x[static_cast<size_t>(i)];
      const float s = scale_in(pre_elem(xi));
      const uint32_t code = lpx::encode(s, el, o.round, lpx::Overflow::sat, rnd(i), o.sr_bits);
      float v = deq(code);
      if (o.headroom) v = static_cast<float>(static_cast<double>(v) / 0.75);
      res.codes[static_cast<size_t>(i)] = static_cast<uint8_t>(code);
      res.values[static_cast<size_t>(i)] = v;
      if (sat_counts && std::fabs(static_cast<double>(s)) > max_elem) ++res.saturated;
      if (xi != 0.0f && v == 0.0f) ++res.flushed;
    }
  }
  return res;
}

// ---------------------------------------------------------------------------------------
// Inputs.

enum class Input { normal, heavy, subnormal, zero_blocks, nonfinite, huge_tiny, mixed };
const char* input_name(Input k) {
  switch (k) {
    case Input::normal: return "normal";
    case Input::heavy: return "heavy-tailed";
    case Input::subnormal: return "subnormal";
    case Input::zero_blocks: return "zero blocks";
    case Input::nonfinite: return "NaN/Inf";
    case Input::huge_tiny: return "huge/tiny";
    case Input::mixed: return "mixed";
  }
  return "";
}

std::vector<float> make_input(Input kind, int64_t n, uint64_t seed) {
  std::mt19937_64 g(seed);
  std::normal_distribution<double> normal(0.0, 1.0);
  std::uniform_int_distribution<int> pick(0, 99);
  std::vector<float> x(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    const double z = normal(g);
    float v = 0;
    Input k = kind;
    if (kind == Input::mixed) k = static_cast<Input>((i / 13) % 6);
    switch (k) {
      case Input::normal: v = static_cast<float>(z); break;
      case Input::heavy: v = static_cast<float>(std::copysign(std::exp(6.0 * normal(g)), z)); break;
      case Input::subnormal: v = static_cast<float>(z * 1e-41); break;
      case Input::zero_blocks: v = ((i / 17) % 3 == 0) ? (z < 0 ? -0.0f : 0.0f) : static_cast<float>(z); break;
      case Input::nonfinite: {
        const int p = pick(g);
        v = p == 0 ? NAN : p == 1 ? INFINITY : p == 2 ? -INFINITY : static_cast<float>(z);
        break;
      }
      case Input::huge_tiny:
        v = static_cast<float>(((i / 7) % 2 ? 3e38 : 1e-38) * std::tanh(z));
        if (pick(g) < 3) v = std::copysign(FLT_MAX, static_cast<float>(z));
        break;
      case Input::mixed: break;
    }
    x[static_cast<size_t>(i)] = v;
  }
  return x;
}

void compare(const RefResult& ref, const lpx::QuantizedTensor& q, const std::vector<float>& deq,
             const BlockFormat& f) {
  REQUIRE(q.codes.size() == ref.codes.size());
  // One assertion per tensor (not per element) keeps the sweep fast; the first mismatch
  // is reported with its index.
  size_t bad = ref.codes.size();
  for (size_t i = 0; i < ref.codes.size() && bad == ref.codes.size(); ++i)
    if (q.codes[i] != ref.codes[i] || !same(deq[i], ref.values[i])) bad = i;
  if (bad != ref.codes.size()) {
    INFO("first mismatch at element " << bad);
    CHECK(int(q.codes[bad]) == int(ref.codes[bad]));
    CHECK(deq[bad] == ref.values[bad]);
    FAIL("library and reference differ");
  }
  if (f.scale == ScaleFormat::e8m0 || f.scale == ScaleFormat::e4m3) {
    REQUIRE(q.scale_codes == ref.scale_codes);
  } else {
    REQUIRE(q.scale_values.size() == ref.scale_values.size());
    bool scales_equal = true;
    for (size_t b = 0; b < ref.scale_values.size(); ++b)
      scales_equal = scales_equal && same(q.scale_values[b], ref.scale_values[b]);
    REQUIRE(scales_equal);
  }
  if (f.scale == ScaleFormat::e4m3) {
    REQUIRE(q.tensor_scale.has_value());
    REQUIRE(bits(*q.tensor_scale) == bits(ref.tensor_dec));
  }
  CHECK(q.stats.clamped_scales == ref.clamped);
  CHECK(q.stats.saturated == ref.saturated);
  CHECK(q.stats.flushed == ref.flushed);
}

struct Case {
  std::string spec;
  std::vector<ScaleRule> rules;  // empty: the spec's own
};

std::vector<Case> all_cases() {
  const std::vector<ScaleRule> rules = {ScaleRule::floor, ScaleRule::rceil, ScaleRule::ceil,
                                        ScaleRule::even};
  return {
      {"mxfp8_e4m3", rules}, {"mxfp8_e5m2", rules},       {"mxfp6_e3m2", rules},
      {"mxfp6_e2m3", rules}, {"mxfp4", rules},            {"mxint8", rules},
      {"nvfp4", {}},         {"nvfp4_2d", {}},            {"fp8_tensor", {}},
      {"fp8_block128", {}},  {"fp8_block128x128", {}},    {"e1m2:b16:e4m3", {}},
      {"e2m0:16x16:e8m0", rules}, {"e4m3:b128:pow2", rules}, {"e2m1:channel:e8m0", {}},
      {"int4:b8:e8m0", rules}, {"e3m0:b5:e8m0:rceil", {}},
  };
}

}  // namespace

TEST_CASE("block quantization equals the double-precision reference bit for bit") {
  const std::vector<std::vector<int64_t>> shapes = {{7, 45}, {33, 17}, {1, 1}, {130, 3},
                                                    {64, 64}, {200, 150}, {3, 5, 40}, {50}};
  const std::vector<Input> inputs = {Input::normal,      Input::heavy,     Input::subnormal,
                                     Input::zero_blocks, Input::nonfinite, Input::huge_tiny,
                                     Input::mixed};
  struct Mode {
    lpx::Rounding round;
    int sr_bits;
  };
  const std::vector<Mode> modes = {{lpx::Rounding::rne, 32}, {lpx::Rounding::rtz, 32},
                                   {lpx::Rounding::sr, 32}, {lpx::Rounding::sr, 8}};
  int64_t checked = 0;
  for (const Case& c : all_cases()) {
    BlockFormat base = lpx::parse_block_format(c.spec);
    std::vector<ScaleRule> rules = c.rules.empty() ? std::vector<ScaleRule>{base.rule} : c.rules;
    for (ScaleRule rule : rules) {
      for (const auto& shape : shapes) {
        const bool big = shape[0] * (shape.size() > 1 ? shape[1] : 1) > 10000;
        // 128x128 tiles and 1x128 blocks need the big shape; others use it sparingly.
        std::vector<int> axes = {-1};
        if (base.block.kind == BlockShape::Kind::vector || base.block.kind == BlockShape::Kind::channel)
          for (int a = 0; a + 1 < static_cast<int>(shape.size()); ++a) axes.push_back(a);
        for (int axis : axes) {
          BlockFormat f = base;
          f.rule = rule;
          f.block.axis = axis;
          for (Input in : inputs) {
            // The big shape is there for 1x128 / 128x128 blocks on non-multiples.
            const bool wide_block = base.block.length >= 128 || base.block.rows >= 128;
            if (big && (!wide_block || (in != Input::mixed && in != Input::normal))) continue;
            int64_t n = 1;
            for (auto d : shape) n *= d;
            const std::vector<float> x = make_input(in, n, static_cast<uint64_t>(n * 7 + int(in)));
            for (const Mode& m : modes) {
              if (big && m.round == lpx::Rounding::rtz) continue;
              lpx::QuantizeOptions opt;
              opt.round = m.round;
              opt.sr_bits = m.sr_bits;
              opt.seed = 0x1234abcdULL;
              opt.stream = 3;
              opt.threads = 1;  // thread-count independence is tested in test_block_pinned
              RefOptions ro;
              ro.round = m.round;
              ro.sr_bits = m.sr_bits;
              ro.seed = opt.seed;
              ro.stream = opt.stream;
              INFO(f.spec() << " axis " << axis << " shape " << shape[0] << "x"
                            << (shape.size() > 1 ? shape[1] : 0) << " input " << input_name(in)
                            << " round " << int(m.round) << " sr_bits " << m.sr_bits);
              std::vector<float> out(static_cast<size_t>(n));
              const auto q = lpx::fake_quantize({x, shape}, out, f, opt);
              compare(reference(x, shape, f, ro), q, out, f);
              ++checked;
            }
          }
        }
      }
    }
  }
  INFO("configurations checked: " << checked);
  CHECK(checked > 1000);
}

TEST_CASE("options: headroom 3/4, flush subnormals, delayed scaling, margin") {
  const std::vector<int64_t> shape = {33, 40};
  for (const char* spec : {"mxfp4", "mxfp8_e4m3", "nvfp4", "fp8_tensor", "fp8_block128", "mxint8"}) {
    for (Input in : {Input::normal, Input::mixed, Input::subnormal}) {
      const auto x = make_input(in, 33 * 40, 99);
      for (int variant = 0; variant < 4; ++variant) {
        BlockFormat f = lpx::parse_block_format(spec);
        lpx::QuantizeOptions opt;
        RefOptions ro;
        opt.round = ro.round = lpx::Rounding::sr;
        opt.seed = ro.seed = 77;
        lpx::AmaxHistory hist(4, lpx::AmaxHistory::Reduction::max);
        if (variant == 0) opt.headroom_3_4 = ro.headroom = true;
        if (variant == 1) opt.flush_subnormal_inputs = ro.flush = true;
        if (variant == 2 && f.block.kind == BlockShape::Kind::tensor) {
          hist.push(0.5f);
          hist.push(1.25f);
          opt.history = &hist;
          ro.history_amax = 1.25f;
          opt.margin = ro.margin = 1;
        }
        if (variant == 3) {
          opt.headroom_3_4 = ro.headroom = true;
          opt.flush_subnormal_inputs = ro.flush = true;
        }
        INFO(spec << " input " << input_name(in) << " variant " << variant);
        std::vector<float> out(x.size());
        const auto q = lpx::fake_quantize({x, shape}, out, f, opt);
        compare(reference(x, shape, f, ro), q, out, f);
      }
    }
  }
}
