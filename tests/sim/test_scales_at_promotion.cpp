// DeepSeek-V3's GEMM with the block scales applied at promotion (recipes'
// Accumulation::scales_at_promotion, sim's gemm_scaled, numerics' ordered_dot_scaled).
// The references are independent of the new code: a hand computation; the existing
// limited GEMM on operands multiplied by power-of-two scales (where the two orders agree
// exactly); the quantizer's own dequantized output; and the same training run without
// the option.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <tuple>
#include <unistd.h>
#include <vector>

#include <fmt/format.h>

#include "lpx/formats/codec.hpp"
#include "lpx/formats/element_format.hpp"
#include "lpx/recipes/operand.hpp"
#include "lpx/recipes/recipe.hpp"
#include "lpx/sim/gemm.hpp"
#include "train_helpers.hpp"

using namespace lpx;
using namespace lpx::sim;

namespace {

const Accumulation kDeepSeek{true, 14, 128, true};

// Random finite float8_e4m3fn values: what the quantizer hands the GEMM.
std::vector<float> e4m3_values(size_t n, std::mt19937& g) {
  std::vector<float> v(n);
  std::uniform_int_distribution<uint32_t> code(0, 255);
  for (float& x : v) {
    do x = decode(code(g), fmt8::e4m3fn);
    while (std::isnan(x));
  }
  return v;
}

std::vector<float> pow2_scales(size_t n, std::mt19937& g) {
  std::vector<float> s(n);
  std::uniform_int_distribution<int> e(-20, 20);
  for (float& x : s) x = std::ldexp(1.0f, e(g));
  return s;
}

std::vector<float> fp32_scales(size_t n, std::mt19937& g) {
  std::vector<float> s(n);
  std::uniform_real_distribution<float> u(1e-4f, 1e-1f);
  for (float& x : s) x = u(g);
  return s;
}

// op(A) (m, k) of element values stored for `ta`, a_scales (m, runs), op(B) (k, n) for tb,
// b_scales (n, runs): each element of op(A) or op(B) times its run's scale.
struct Case {
  int64_t m, n, k;
  Trans ta, tb;
  std::vector<float> a, b, sa, sb;
  float a_at(int64_t i, int64_t kk) const { return ta == Trans::n ? a[i * k + kk] : a[kk * m + i]; }
  float b_at(int64_t kk, int64_t j) const { return tb == Trans::n ? b[kk * n + j] : b[j * k + kk]; }
  int64_t runs() const { return (k + kDeepSeek.promote_every - 1) / kDeepSeek.promote_every; }
};

Case make_case(int64_t m, int64_t n, int64_t k, Trans ta, Trans tb, bool pow2, std::mt19937& g) {
  Case c{m, n, k, ta, tb, e4m3_values(static_cast<size_t>(m * k), g), e4m3_values(static_cast<size_t>(k * n), g),
         {}, {}};
  const auto runs = static_cast<size_t>(c.runs());
  c.sa = pow2 ? pow2_scales(static_cast<size_t>(m) * runs, g) : fp32_scales(static_cast<size_t>(m) * runs, g);
  c.sb = pow2 ? pow2_scales(static_cast<size_t>(n) * runs, g) : fp32_scales(static_cast<size_t>(n) * runs, g);
  return c;
}

bool same_bits(float x, float y) { return std::memcmp(&x, &y, sizeof x) == 0; }

}  // namespace

TEST_CASE("scales at promotion round the unscaled partial sum: a case by hand", "[gemm][promotion]") {
  // k = 2, one run, 14 mantissa bits. Element values a = (1, 1), b = (1, 2^-15); scales
  // sa = 3, sb = 1.
  //  - at promotion: partial = 1 + 2^-15, a tie of the 14-bit grid at 1 (ulp 2^-14), goes
  //    to even: 1; total = fma(3 * 1, 1, 0) = 3.
  //  - scaled operands: products 3 and 3 * 2^-15 = 0.75 ulp of the grid at 3 (ulp 2^-13),
  //    more than half: the partial rounds up to 3 + 2^-13.
  const float a[2] = {1, 1}, b[2] = {1, std::ldexp(1.0f, -15)}, sa[1] = {3}, sb[1] = {1};
  float c = -1;
  gemm_scaled(Trans::n, Trans::n, a, sa, b, sb, &c, 1, 1, 2, kDeepSeek, false);
  CHECK(c == 3.0f);
  const float a3[2] = {3, 3};
  float d = -1;
  gemm(Trans::n, Trans::n, a3, b, &d, 1, 1, 2, Accumulation{true, 14, 128}, false);
  CHECK(d == 3.0f + std::ldexp(1.0f, -13));
  // the scalar definition says the same
  CHECK(ordered_dot_scaled(a, 1, b, 1, 2, LimitedSum{14, 128}, sa, 1, sb, 1, 0, false) == 3.0f);
}

TEST_CASE("with power-of-two scales, scales at promotion equal the limited GEMM of the scaled operands",
          "[gemm][promotion]") {
  // Scaling by a power of two commutes with every rounding of the limited rule (no sum
  // leaves the normal range here), so the two orders must agree bit for bit; the second
  // is gemm()'s limited loop, held to a 125-bit integer definition in test_gradcheck.
  std::mt19937 g(7);
  for (const auto& [m, n, k] : {std::tuple<int64_t, int64_t, int64_t>{9, 37, 300}, {16, 16, 128}, {3, 5, 1},
                                {20, 33, 257}, {1, 100, 512}}) {
    for (Trans ta : {Trans::n, Trans::t})
      for (Trans tb : {Trans::n, Trans::t}) {
        const Case c = make_case(m, n, k, ta, tb, true, g);
        const int64_t runs = c.runs();
        // the scaled operands, stored as the case stores its element values
        std::vector<float> as(c.a.size()), bs(c.b.size());
        for (int64_t i = 0; i < m; ++i)
          for (int64_t kk = 0; kk < k; ++kk) {
            const float v = c.a_at(i, kk) * c.sa[static_cast<size_t>(i * runs + kk / 128)];
            as[static_cast<size_t>(ta == Trans::n ? i * k + kk : kk * m + i)] = v;
          }
        for (int64_t kk = 0; kk < k; ++kk)
          for (int64_t j = 0; j < n; ++j) {
            const float v = c.b_at(kk, j) * c.sb[static_cast<size_t>(j * runs + kk / 128)];
            bs[static_cast<size_t>(tb == Trans::n ? kk * n + j : j * k + kk)] = v;
          }
        for (bool accumulate : {false, true}) {
          std::vector<float> c0(static_cast<size_t>(m * n));
          for (size_t i = 0; i < c0.size(); ++i) c0[i] = static_cast<float>(i % 7) - 3.0f;
          std::vector<float> scaled = c0, reference = c0;
          gemm_scaled(ta, tb, c.a.data(), c.sa.data(), c.b.data(), c.sb.data(), scaled.data(), m, n, k, kDeepSeek,
                      accumulate);
          gemm(ta, tb, as.data(), bs.data(), reference.data(), m, n, k, Accumulation{true, 14, 128}, accumulate);
          INFO("m " << m << " n " << n << " k " << k << " ta " << int(ta) << " tb " << int(tb) << " accumulate "
                    << accumulate);
          int64_t differ = 0;
          for (size_t i = 0; i < scaled.size(); ++i) differ += same_bits(scaled[i], reference[i]) ? 0 : 1;
          CHECK(differ == 0);
        }
      }
  }
}

TEST_CASE("the scaled GEMM's loop gives the scalar definition's bits, with fp32 scales", "[gemm][promotion]") {
  std::mt19937 g(11);
  for (const auto& [m, n, k] : {std::tuple<int64_t, int64_t, int64_t>{9, 37, 300}, {17, 16, 256}, {2, 3, 130}}) {
    for (Trans ta : {Trans::n, Trans::t})
      for (Trans tb : {Trans::n, Trans::t}) {
        Case c = make_case(m, n, k, ta, tb, false, g);
        if (ta == Trans::t && tb == Trans::t) {
          // one Inf and one NaN operand: the loop reruns those tiles another way
          c.a[0] = INFINITY;
          c.b[static_cast<size_t>(k)] = NAN;
        }
        const int64_t runs = c.runs();
        std::vector<float> out(static_cast<size_t>(m * n), 5.0f);
        gemm_scaled(ta, tb, c.a.data(), c.sa.data(), c.b.data(), c.sb.data(), out.data(), m, n, k, kDeepSeek, true);
        int64_t differ = 0;
        for (int64_t i = 0; i < m; ++i)
          for (int64_t j = 0; j < n; ++j) {
            std::vector<float> ar(static_cast<size_t>(k)), br(static_cast<size_t>(k)), sbr(static_cast<size_t>(runs));
            for (int64_t kk = 0; kk < k; ++kk) {
              ar[static_cast<size_t>(kk)] = c.a_at(i, kk);
              br[static_cast<size_t>(kk)] = c.b_at(kk, j);
            }
            for (int64_t r = 0; r < runs; ++r) sbr[static_cast<size_t>(r)] = c.sb[static_cast<size_t>(j * runs + r)];
            const float want = ordered_dot_scaled(ar.data(), 1, br.data(), 1, k, LimitedSum{14, 128},
                                                  c.sa.data() + i * runs, 1, sbr.data(), 1, 5.0f, true);
            const float got = out[static_cast<size_t>(i * n + j)];
            differ += same_bits(got, want) || (std::isnan(got) && std::isnan(want)) ? 0 : 1;
          }
        INFO("m " << m << " n " << n << " k " << k << " ta " << int(ta) << " tb " << int(tb));
        CHECK(differ == 0);
      }
  }
  // Null scales are ones; a k of 0 leaves c as it was (accumulating) or zero.
  const Case c = make_case(4, 5, 200, Trans::n, Trans::n, false, g);
  std::vector<float> ones(4 * 5, 0), plain(4 * 5, 0);
  gemm_scaled(Trans::n, Trans::n, c.a.data(), nullptr, c.b.data(), nullptr, ones.data(), 4, 5, 200, kDeepSeek, false);
  gemm(Trans::n, Trans::n, c.a.data(), c.b.data(), plain.data(), 4, 5, 200, Accumulation{true, 14, 128}, false);
  CHECK(ones == plain);
  std::vector<float> kept(20, 2.0f);
  gemm_scaled(Trans::n, Trans::n, c.a.data(), nullptr, c.b.data(), nullptr, kept.data(), 4, 5, 0, kDeepSeek, true);
  CHECK(kept == std::vector<float>(20, 2.0f));
  CHECK_THROWS_WITH(gemm_scaled(Trans::n, Trans::n, c.a.data(), nullptr, c.b.data(), nullptr, kept.data(), 4, 5, 200,
                                Accumulation{}, false),
                    Catch::Contains("limited accumulator"));
}

TEST_CASE("the limited loop keeps the definition on element values over 40 binades", "[gemm][promotion]") {
  // What the scales at promotion feed the loop: element values, here times powers of two
  // over 40 binades. Their short products land on the grid's midpoints often. The
  // reference is the scalar definition, which sums in double rounded to odd.
  std::mt19937 g(5);
  for (const auto& [m, n, k] : {std::tuple<int64_t, int64_t, int64_t>{9, 37, 300}, {16, 32, 129}, {5, 7, 2}})
    for (int mb : {3, 10, 14, 21}) {
      std::vector<float> a = e4m3_values(static_cast<size_t>(m * k), g), b = e4m3_values(static_cast<size_t>(k * n), g);
      const std::vector<float> sa = pow2_scales(a.size(), g), sb = pow2_scales(b.size(), g);
      for (size_t i = 0; i < a.size(); ++i) a[i] *= sa[i];
      for (size_t i = 0; i < b.size(); ++i) b[i] *= sb[i];
      const Accumulation acc{true, mb, 64};
      std::vector<float> got(static_cast<size_t>(m * n), 1.5f);
      gemm(Trans::n, Trans::n, a.data(), b.data(), got.data(), m, n, k, acc, true);
      int64_t differ = 0;
      for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < n; ++j) {
          const float want = ordered_dot(a.data() + i * k, 1, b.data() + j, n, k, LimitedSum{mb, 64}, 1.5f, true);
          differ += same_bits(got[static_cast<size_t>(i * n + j)], want) ? 0 : 1;
        }
      INFO("m " << m << " n " << n << " k " << k << " mb " << mb);
      CHECK(differ == 0);
    }
}

TEST_CASE("an operand's element values times its run scales give the quantizer's dequantized values",
          "[promotion]") {
  // fp8-blockwise's roles: 1x128 tiles along the reduction axis (either axis) and 128x128
  // blocks, on shapes with ragged last blocks; the run scale of every element must be the
  // scale of its block, so element * scale is the dequantized value the quantizer wrote.
  const Recipe recipe = recipe_by_name("fp8-blockwise");
  OperandQuantizer q(recipe, LayerInfo{0, 1, LayerInfo::linear, "l"}, 1);
  std::mt19937 g(3);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (GemmRole role : {GemmRole::fwd_x, GemmRole::fwd_w, GemmRole::dgrad_w, GemmRole::wgrad_dy})
    for (const auto& [rows, cols] : {std::pair<int64_t, int64_t>{200, 300}, {128, 64}, {1, 1}}) {
      std::vector<float> in(static_cast<size_t>(rows * cols)), out(in.size()), el(in.size());
      // rows of very different magnitudes, so that blocks get different scales
      for (int64_t i = 0; i < rows; ++i)
        for (int64_t j = 0; j < cols; ++j)
          in[static_cast<size_t>(i * cols + j)] = normal(g) * std::ldexp(1.0f, static_cast<int>((i + j / 50) % 9) - 4);
      UnscaledOperand u;
      u.elements = el.data();
      u.every = 128;
      q.apply(role, in.data(), out.data(), rows, cols, 0, nullptr, nullptr, &u);
      REQUIRE(u.scaled);
      const int axis = reduction_axis(role);
      const int64_t extent = axis == 1 ? cols : rows;
      CHECK(u.lines == (axis == 1 ? rows : cols));
      CHECK(u.runs == (extent + 127) / 128);
      int64_t wrong = 0, off_grid = 0;
      for (int64_t i = 0; i < rows; ++i)
        for (int64_t j = 0; j < cols; ++j) {
          const auto at = static_cast<size_t>(i * cols + j);
          const int64_t line = axis == 1 ? i : j, run = (axis == 1 ? j : i) / 128;
          const float s = u.scales[static_cast<size_t>(line * u.runs + run)];
          wrong += same_bits(el[at] * s, out[at]) ? 0 : 1;
          off_grid += decode(encode(el[at], fmt8::e4m3fn, Rounding::rne, Overflow::sat), fmt8::e4m3fn) == el[at] ? 0 : 1;
        }
      INFO("role " << role_name(role) << " " << rows << "x" << cols);
      CHECK(wrong == 0);
      CHECK(off_grid == 0);
    }
  // A role that is not block-quantized leaves its operand as it is: scaled is false.
  const Recipe bf16 = recipe_by_name("bf16");
  OperandQuantizer qb(bf16, LayerInfo{0, 1, LayerInfo::linear, "l"}, 1);
  std::vector<float> in(256, 0.5f), out(256), el(256);
  UnscaledOperand u;
  u.elements = el.data();
  u.every = 128;
  qb.apply(GemmRole::fwd_x, in.data(), out.data(), 2, 128, 0, nullptr, nullptr, &u);
  CHECK_FALSE(u.scaled);
  // blocks of 32 cannot be scaled per run of 128
  const Recipe mx = recipe_by_name("mxfp8");
  OperandQuantizer qm(mx, LayerInfo{0, 1, LayerInfo::linear, "l"}, 1);
  CHECK_THROWS_WITH(qm.apply(GemmRole::fwd_x, in.data(), out.data(), 2, 128, 0, nullptr, nullptr, &u),
                    Catch::Contains("blocks of 32"));
}

namespace {
// fp8-blockwise with its scales made `scale` (pow2 or fp32) and the scales applied at
// promotion or not, written as a recipe file.
std::string blockwise_variant(ScaleFormat scale, bool at_promotion, const std::filesystem::path& dir) {
  Recipe r = recipe_by_name("fp8-blockwise");
  r.name = fmt::format("fp8-blockwise-{}-{}", scale == ScaleFormat::pow2 ? "pow2" : "fp32",
                       at_promotion ? "promotion" : "operands");
  for (RoleSpec& s : r.roles) {
    s.block.scale = scale;
    s.block.rule = ScaleRule::rceil;
    s.block.preset.clear();
  }
  r.accumulation.scales_at_promotion = at_promotion;
  const std::string path = (dir / (r.name + ".json")).string();
  std::ofstream(path) << r.to_json();
  return path;
}
}  // namespace

TEST_CASE("training with the scales at promotion: power-of-two scales change no bit, fp32 scales change some",
          "[promotion][train]") {
  const auto dir = std::filesystem::temp_directory_path() / ("lpx_promotion_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  // width 128 and an MLP of 512, 256 tokens a step: every GEMM has whole runs of 128
  auto config = [](const std::string& recipe) {
    TrainConfig c = test::tiny_gpt(recipe, 1, 128, 2, 32, 8);
    c.steps = 4;
    c.seed = 5;
    return c;
  };
  const std::vector<double> pow2_operands = test::train_losses(config(blockwise_variant(ScaleFormat::pow2, false, dir)));
  const std::vector<double> pow2_promotion = test::train_losses(config(blockwise_variant(ScaleFormat::pow2, true, dir)));
  CHECK(pow2_promotion == pow2_operands);

  Trainer operands(config(blockwise_variant(ScaleFormat::fp32, false, dir)));
  Trainer promotion(config(blockwise_variant(ScaleFormat::fp32, true, dir)));
  while (!operands.done()) operands.step();
  while (!promotion.done()) promotion.step();
  // the option reaches the GEMMs (the first loss is a forward pass of the same weights
  // through the other GEMM), and the losses part by little
  CHECK(promotion.losses() != operands.losses());
  for (size_t i = 0; i < operands.losses().size(); ++i)
    CHECK(std::fabs(promotion.losses()[i] - operands.losses()[i]) < 0.01 * operands.losses()[i]);
  std::filesystem::remove_all(dir);
}
