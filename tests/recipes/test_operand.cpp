// OperandQuantizer: the axis rule, Hadamard cancellation, the documented random keys,
// identity roles, high-precision layers, delayed scaling and the BitNet ternary quantizer.
#include <catch2/catch.hpp>

#include <bit>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "lpx/formats/cast.hpp"
#include "lpx/formats/quantize.hpp"
#include "lpx/numerics/hadamard.hpp"
#include "lpx/recipes/operand.hpp"

using namespace lpx;

namespace {

std::vector<float> random_matrix(int64_t rows, int64_t cols, uint32_t seed, float outlier = 0) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> m(static_cast<size_t>(rows * cols));
  for (auto& v : m) v = dist(gen);
  if (outlier != 0) m[7] = outlier;
  return m;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (std::bit_cast<uint32_t>(a[i]) != std::bit_cast<uint32_t>(b[i])) return false;
  return true;
}

std::vector<float> reference_quantize(const std::vector<float>& x, int64_t rows, int64_t cols, BlockFormat f,
                                      int axis, QuantizeOptions opt = {}) {
  f.block.axis = axis;
  const int64_t shape[2] = {rows, cols};
  std::vector<float> out(x.size());
  fake_quantize(TensorView<const float>{std::span<const float>(x), std::span<const int64_t>(shape, 2)}, out, f, opt);
  return out;
}

// C = A B^T for A (m,k), B (n,k), in double.
std::vector<double> gemm_abt(const std::vector<float>& a, const std::vector<float>& b, int64_t m, int64_t n,
                             int64_t k) {
  std::vector<double> c(static_cast<size_t>(m * n), 0.0);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double s = 0;
      for (int64_t p = 0; p < k; ++p) s += static_cast<double>(a[static_cast<size_t>(i * k + p)]) * b[static_cast<size_t>(j * k + p)];
      c[static_cast<size_t>(i * n + j)] = s;
    }
  return c;
}

std::vector<float> transpose(const std::vector<float>& a, int64_t rows, int64_t cols) {
  std::vector<float> t(a.size());
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) t[static_cast<size_t>(c * rows + r)] = a[static_cast<size_t>(r * cols + c)];
  return t;
}

double relative_error(const std::vector<double>& got, const std::vector<double>& want) {
  double num = 0, den = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    num += (got[i] - want[i]) * (got[i] - want[i]);
    den += want[i] * want[i];
  }
  return std::sqrt(num / den);
}

const LayerInfo kLayer{5, 12, LayerInfo::linear, "blocks.5.mlp.fc1"};
// nvfp4 keeps blocks 0-1 and 4-11 of 12 in BF16: block 2 is quantized.
const LayerInfo kNvLayer{2, 12, LayerInfo::linear, "blocks.2.mlp.fc1"};

std::vector<float> run(OperandQuantizer& q, GemmRole role, const std::vector<float>& x, int64_t rows, int64_t cols,
                       uint64_t step, OperandStats* st = nullptr) {
  std::vector<float> out(x.size());
  q.apply(role, x.data(), out.data(), rows, cols, step, st);
  return out;
}

}  // namespace

TEST_CASE("operand: each role is quantized along its GEMM's reduction axis", "[recipes]") {
  const Recipe& r = recipe_by_name("mxfp4-rne");
  OperandQuantizer q(r, kLayer, 1);
  const int64_t rows = 64, cols = 96;
  const auto x = random_matrix(rows, cols, 3, 40.0f);
  const BlockFormat mx = parse_block_format("mxfp4");
  const auto along1 = reference_quantize(x, rows, cols, mx, 1);
  const auto along0 = reference_quantize(x, rows, cols, mx, 0);
  REQUIRE(!same_bits(along0, along1));  // the outlier makes the axes differ
  for (GemmRole g : kAllGemmRoles) {
    INFO(role_name(g));
    OperandStats st;
    const auto y = run(q, g, x, rows, cols, 0, &st);
    CHECK(same_bits(y, reduction_axis(g) == 1 ? along1 : along0));
    CHECK(st.elements == rows * cols);
    CHECK(st.amax == 40.0f);
    CHECK(std::isfinite(st.sqnr_db));
    CHECK(st.sqnr_db > 5);
  }
  // 2-D tiles (nvfp4 weights) and 1x16 blocks: same rule.
  const Recipe& nv = recipe_by_name("nvfp4");
  OperandQuantizer qn(nv, kNvLayer, 1);
  REQUIRE(!qn.high_precision());
  const BlockFormat nv1 = parse_block_format("nvfp4"), nv2 = parse_block_format("nvfp4_2d");
  CHECK(same_bits(run(qn, GemmRole::fwd_w, x, rows, cols, 0), reference_quantize(x, rows, cols, nv2, 1)));
  CHECK(same_bits(run(qn, GemmRole::dgrad_w, x, rows, cols, 0), reference_quantize(x, rows, cols, nv2, 0)));
  CHECK(same_bits(run(qn, GemmRole::fwd_x, x, rows, cols, 0), reference_quantize(x, rows, cols, nv1, 1)));
  // In place gives the same bits.
  auto inplace = x;
  q.apply(GemmRole::dgrad_w, inplace.data(), inplace.data(), rows, cols, 0);
  CHECK(same_bits(inplace, along0));
}

TEST_CASE("operand: the documented keys reproduce SR and per-call Hadamard signs", "[recipes]") {
  const Recipe& r = recipe_by_name("mxfp4-sr-rht");
  const uint64_t seed = 0xC0FFEE;
  OperandQuantizer q(r, kLayer, seed);
  const int64_t rows = 128, cols = 64;
  const auto x = random_matrix(rows, cols, 11);
  for (GemmRole g : {GemmRole::dgrad_dy, GemmRole::dgrad_w, GemmRole::wgrad_x, GemmRole::wgrad_dy}) {
    INFO(role_name(g));
    const uint64_t step = 17;
    // The reference: signs from call_key(tag 8 + gemm), SR key from call_key(tag role).
    const CallKey sk = call_key(seed, kLayer, 8u + static_cast<uint32_t>(gemm_of(g)), step);
    const auto signs = hadamard_signs(64, sk.seed, sk.stream);
    CHECK(q.signs(g, step) == signs);
    auto v = x;
    hadamard_blocks(v.data(), rows, cols, reduction_axis(g), 64, signs);
    const CallKey rk = call_key(seed, kLayer, static_cast<uint32_t>(g), step);
    QuantizeOptions opt;
    opt.round = Rounding::sr;
    opt.seed = rk.seed;
    opt.stream = rk.stream;
    opt.headroom_3_4 = true;
    const auto want = reference_quantize(v, rows, cols, parse_block_format("mxfp4"), reduction_axis(g), opt);
    const auto got = run(q, g, x, rows, cols, step);
    CHECK(same_bits(got, want));
    // Same seed and step: same bits. Another step, seed or layer: different bits.
    CHECK(same_bits(run(q, g, x, rows, cols, step), got));
    CHECK(!same_bits(run(q, g, x, rows, cols, step + 1), got));
    // apply() keeps the last signs per role: going back a step must draw them again.
    CHECK(same_bits(run(q, g, x, rows, cols, step), got));
    OperandQuantizer other_seed(r, kLayer, seed + 1);
    CHECK(!same_bits(run(other_seed, g, x, rows, cols, step), got));
    OperandQuantizer other_layer(r, LayerInfo{5, 12, LayerInfo::linear, "blocks.5.mlp.fc2"}, seed);
    CHECK(!same_bits(run(other_layer, g, x, rows, cols, step), got));
  }
  // Both operands of a GEMM share the signs; GEMMs and steps do not.
  CHECK(q.signs(GemmRole::dgrad_dy, 3) == q.signs(GemmRole::dgrad_w, 3));
  CHECK(q.signs(GemmRole::wgrad_x, 3) == q.signs(GemmRole::wgrad_dy, 3));
  CHECK(q.signs(GemmRole::dgrad_dy, 3) != q.signs(GemmRole::wgrad_dy, 3));
  CHECK(q.signs(GemmRole::dgrad_dy, 3) != q.signs(GemmRole::dgrad_dy, 4));
  CHECK(q.signs(GemmRole::fwd_x, 3).empty());
  // Fixed signs (nvfp4 wgrad): one vector for every step and layer, keyed by the seed.
  OperandQuantizer n1(recipe_by_name("nvfp4"), kNvLayer, seed);
  OperandQuantizer n2(recipe_by_name("nvfp4"), LayerInfo{3, 12, LayerInfo::linear, "other"}, seed);
  CHECK(n1.signs(GemmRole::wgrad_x, 0) == hadamard_signs(16, seed, kFixedSignStream));
  CHECK(n1.signs(GemmRole::wgrad_x, 0) == n1.signs(GemmRole::wgrad_dy, 99));
  CHECK(n1.signs(GemmRole::wgrad_x, 0) == n2.signs(GemmRole::wgrad_x, 5));
}

TEST_CASE("operand: a step's repeated calls (attention's per-head products) keep the documented SR words", "[recipes]") {
  // From a role's second call in a step, apply() hands the quantizer words it drew once
  // (operand.hpp, cached_words); every call must still equal the documented key's result,
  // computed here by the scalar reference from the transformed operand. The order below
  // grows the cached words (a larger operand after smaller ones), changes step and comes
  // back, and passes an operand above the cache's size.
  const Recipe& r = recipe_by_name("mxfp4-sr-rht");
  const uint64_t seed = 0xBEEF;
  const LayerInfo attn{3, 6, LayerInfo::attention_bmm, "h3.attn.bmm"};
  OperandQuantizer q(r, attn, seed);
  struct Call {
    int64_t rows, cols;
    uint64_t step;
    uint32_t data;
  };
  const Call calls[] = {{64, 64, 7, 1}, {64, 64, 7, 2}, {128, 64, 7, 3}, {64, 128, 7, 4}, {64, 64, 8, 5},
                        {128, 128, 7, 6}, {64, 64, 7, 7}, {512, 256, 7, 8}, {512, 256, 7, 9}};
  for (GemmRole g : {GemmRole::dgrad_dy, GemmRole::wgrad_x}) {
    for (const Call& c : calls) {
      INFO(role_name(g) << " " << c.rows << "x" << c.cols << " step " << c.step << " data " << c.data);
      const auto x = random_matrix(c.rows, c.cols, c.data);
      const CallKey sk = call_key(seed, attn, 8u + static_cast<uint32_t>(gemm_of(g)), c.step);
      auto v = x;
      hadamard_blocks(v.data(), c.rows, c.cols, reduction_axis(g), 64, hadamard_signs(64, sk.seed, sk.stream));
      const CallKey rk = call_key(seed, attn, static_cast<uint32_t>(g), c.step);
      QuantizeOptions opt;
      opt.round = Rounding::sr;
      opt.seed = rk.seed;
      opt.stream = rk.stream;
      opt.headroom_3_4 = true;
      opt.path = QuantizePath::reference;
      const auto want = reference_quantize(v, c.rows, c.cols, parse_block_format("mxfp4"), reduction_axis(g), opt);
      CHECK(same_bits(run(q, g, x, c.rows, c.cols, c.step), want));
    }
  }
}

TEST_CASE("operand: Hadamard transforms cancel in every GEMM", "[recipes]") {
  // fp32 operands with transforms on every role, so only the transform acts.
  const std::string text = R"({"name": "rht-only", "source": "test", "roles": {
      "fwd_x": {"format": "fp32", "transform": {"kind": "rht", "size": 32, "signs": "per_call"}},
      "fwd_w": {"format": "fp32", "transform": {"kind": "rht", "size": 32, "signs": "per_call"}},
      "dgrad_dy": {"format": "fp32", "transform": {"kind": "rht", "size": 64, "signs": "fixed"}},
      "dgrad_w": {"format": "fp32", "transform": {"kind": "rht", "size": 64, "signs": "fixed"}},
      "wgrad_x": {"format": "fp32", "transform": {"kind": "rht", "size": 16, "signs": "per_call"}},
      "wgrad_dy": {"format": "fp32", "transform": {"kind": "rht", "size": 16, "signs": "per_call"}}}})";
  const Recipe r = Recipe::from_json(text, "test");
  OperandQuantizer q(r, kLayer, 9);
  CHECK(!q.is_identity(GemmRole::fwd_x));
  const int64_t M = 48, N = 64, K = 96;
  const auto X = random_matrix(M, K, 1), W = random_matrix(N, K, 2), dY = random_matrix(M, N, 3);
  const uint64_t step = 4;
  // forward Y = X W^T
  {
    const auto want = gemm_abt(X, W, M, N, K);
    const auto got = gemm_abt(run(q, GemmRole::fwd_x, X, M, K, step), run(q, GemmRole::fwd_w, W, N, K, step), M, N, K);
    CHECK(relative_error(got, want) < 1e-5);
    CHECK(!same_bits(run(q, GemmRole::fwd_x, X, M, K, step), X));
  }
  // dgrad dX = dY W = dY (W^T)^T: reduction over N
  {
    const auto Wt = transpose(W, N, K);
    const auto want = gemm_abt(dY, Wt, M, K, N);
    const auto tW = run(q, GemmRole::dgrad_w, W, N, K, step);
    const auto got = gemm_abt(run(q, GemmRole::dgrad_dy, dY, M, N, step), transpose(tW, N, K), M, K, N);
    CHECK(relative_error(got, want) < 1e-5);
  }
  // wgrad dW = dY^T X: reduction over M
  {
    const auto want = gemm_abt(transpose(dY, M, N), transpose(X, M, K), N, K, M);
    const auto tdY = run(q, GemmRole::wgrad_dy, dY, M, N, step), tX = run(q, GemmRole::wgrad_x, X, M, K, step);
    const auto got = gemm_abt(transpose(tdY, M, N), transpose(tX, M, K), N, K, M);
    CHECK(relative_error(got, want) < 1e-5);
  }
  // A reduction extent that is not a multiple of the size (40 for size 32) gets no
  // transform: these fp32 roles then return their input bit for bit, for both operands.
  const auto odd_x = random_matrix(M, 40, 7), odd_w = random_matrix(N, 40, 8);
  CHECK(same_bits(run(q, GemmRole::fwd_x, odd_x, M, 40, step), odd_x));
  CHECK(same_bits(run(q, GemmRole::fwd_w, odd_w, N, 40, step), odd_w));
  // ... while an extent that is a multiple is transformed.
  CHECK_FALSE(same_bits(run(q, GemmRole::fwd_x, X, M, K, step), X));
}

TEST_CASE("operand: identity roles and high-precision layers leave data untouched", "[recipes]") {
  const int64_t rows = 32, cols = 48;
  auto x = random_matrix(rows, cols, 5);
  x[3] = -0.0f;
  x[4] = 1e-40f;  // a float32 subnormal
  OperandQuantizer q(recipe_by_name("fp32"), kLayer, 1);
  for (GemmRole g : kAllGemmRoles) {
    CHECK(q.is_identity(g));
    OperandStats st;
    CHECK(same_bits(run(q, g, x, rows, cols, 0, &st), x));
    CHECK(std::isinf(st.sqnr_db));
    auto inplace = x;
    q.apply(g, inplace.data(), inplace.data(), rows, cols, 0);
    CHECK(same_bits(inplace, x));
  }
  // nvfp4 with NVIDIA's counts (2 and 8 blocks) keeps blocks 0-1 and 4-11 of 12,
  // embeddings, head and attention in BF16.
  Recipe counts = recipe_by_name("nvfp4");
  counts.high_precision.first_fraction.reset();
  counts.high_precision.last_fraction.reset();
  counts.high_precision.first_blocks = 2;
  counts.high_precision.last_blocks = 8;
  Recipe hp32 = counts;
  hp32.high_precision.format = RoleSpec::Kind::fp32;
  std::vector<float> bf16(x.size());
  CastOptions copt;
  fake_cast_array(x, bf16, fmt16::bf16, copt);
  for (const LayerInfo& layer : {LayerInfo{0, 12, LayerInfo::linear, "b0"}, LayerInfo{11, 12, LayerInfo::linear, "b11"},
                                 LayerInfo{0, 12, LayerInfo::embedding, "emb"}, LayerInfo{0, 12, LayerInfo::head, "head"},
                                 LayerInfo{3, 12, LayerInfo::attention_bmm, "b3.qk"}}) {
    INFO(layer.name);
    OperandQuantizer untouched(hp32, layer, 1), kept(counts, layer, 1);
    CHECK(untouched.high_precision());
    for (GemmRole g : kAllGemmRoles) {
      CHECK(untouched.is_identity(g));
      CHECK(same_bits(run(untouched, g, x, rows, cols, 0), x));
      CHECK(same_bits(run(kept, g, x, rows, cols, 0), bf16));
    }
  }
  OperandQuantizer low(counts, LayerInfo{2, 12, LayerInfo::linear, "b2"}, 1);
  CHECK(!low.high_precision());
  CHECK(!same_bits(run(low, GemmRole::fwd_x, x, rows, cols, 0), bf16));
}

TEST_CASE("operand: fp8-delayed scales from the previous steps' amax history", "[recipes]") {
  OperandQuantizer q(recipe_by_name("fp8-delayed"), kLayer, 1);
  const int64_t rows = 16, cols = 32;
  const BlockFormat f = parse_block_format("e4m3:tensor:fp32");
  AmaxHistory h(1024);
  for (uint64_t step = 0; step < 4; ++step) {
    const auto x = random_matrix(rows, cols, static_cast<uint32_t>(step), static_cast<float>(step + 1) * 100.0f);
    QuantizeOptions opt;
    opt.history = &h;
    const auto want = reference_quantize(x, rows, cols, f, 1, opt);
    CHECK(same_bits(run(q, GemmRole::fwd_x, x, rows, cols, step), want));
    h.push(static_cast<float>(step + 1) * 100.0f);
    REQUIRE(q.history(GemmRole::fwd_x) != nullptr);
    CHECK(q.history(GemmRole::fwd_x)->size() == step + 1);
    CHECK(q.history(GemmRole::fwd_x)->amax() == h.amax());
  }
  CHECK(q.history(GemmRole::dgrad_dy)->size() == 0);
  CHECK(OperandQuantizer(recipe_by_name("fp8-current"), kLayer, 1).history(GemmRole::fwd_x) == nullptr);
}

TEST_CASE("ternary absmean (BitNet b1.58)", "[recipes]") {
  const std::vector<float> w = {0.5f, -1.5f, 0.1f, 0.0f, 2.0f, -0.2f};
  std::vector<float> out(w.size());
  int64_t sat = 0, flushed = 0;
  const float gamma = fake_quantize_ternary_absmean(w, out, &sat, &flushed);
  CHECK(gamma == static_cast<float>((0.5 + 1.5 + double(0.1f) + 2.0 + double(0.2f)) / 6.0));
  const float s = 1.0f / gamma;
  const std::vector<float> want = {1 / s, -1 / s, 0.0f, 0.0f, 1 / s, -0.0f};
  CHECK(same_bits(out, want));
  CHECK(sat == 2);      // -1.5 and 2.0 round beyond +-1
  CHECK(flushed == 2);  // 0.1 and -0.2
  // An all-zero tensor uses gamma = 1e-5 and stays zero.
  std::vector<float> z(4, 0.0f), zo(4);
  CHECK(fake_quantize_ternary_absmean(z, zo) == 1e-5f);
  CHECK(zo == z);
  // Through the recipe: fwd_w and dgrad_w give the same ternary weights (per tensor).
  OperandQuantizer q(recipe_by_name("bitnet-b1.58"), kLayer, 1);
  const auto W = random_matrix(16, 32, 8);
  std::vector<float> tw(W.size());
  fake_quantize_ternary_absmean(W, tw);
  CHECK(same_bits(run(q, GemmRole::fwd_w, W, 16, 32, 0), tw));
  CHECK(same_bits(run(q, GemmRole::dgrad_w, W, 16, 32, 0), tw));
  const float gw = fake_quantize_ternary_absmean(W, tw);
  for (float v : tw) CHECK((v == 0.0f || std::fabs(v) == 1.0f / (1.0f / gw)));
  // Activations: int8 absmax per token (per row along K).
  const auto X = random_matrix(8, 64, 9);
  const auto qx = run(q, GemmRole::fwd_x, X, 8, 64, 0);
  for (int64_t r = 0; r < 8; ++r) {
    float amax = 0;
    for (int64_t c = 0; c < 64; ++c) amax = std::max(amax, std::fabs(X[static_cast<size_t>(r * 64 + c)]));
    const float s_enc = 127.0f / amax;
    for (int64_t c = 0; c < 64; ++c) {
      const float code = std::nearbyint(X[static_cast<size_t>(r * 64 + c)] * s_enc);
      CHECK(qx[static_cast<size_t>(r * 64 + c)] == code * (1.0f / s_enc));
    }
  }
}

TEST_CASE("operand stats: amax, SQNR and flushed share over the finite inputs, as written out by hand", "[recipes]") {
  // 1003 elements (not a multiple of the 8 running sums), small values that MXFP4 flushes
  // beside a large one, exact zeros
  const int64_t rows = 17, cols = 59;
  auto x = random_matrix(rows, cols, 21, 300.0f);
  for (size_t i = 0; i < x.size(); i += 5) x[i] *= 1e-3f;
  for (size_t i = 2; i < x.size(); i += 37) x[i] = 0.0f;
  OperandQuantizer q(recipe_by_name("mxfp4-rne"), kLayer, 1);
  OperandStats st;
  const auto y = run(q, GemmRole::fwd_w, x, rows, cols, 0, &st);
  double signal = 0, noise = 0;
  float amax = 0;
  int64_t nonzero = 0, flushed = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    amax = std::max(amax, std::fabs(x[i]));
    signal += static_cast<double>(x[i]) * x[i];
    noise += (static_cast<double>(y[i]) - x[i]) * (static_cast<double>(y[i]) - x[i]);
    nonzero += x[i] != 0;
    flushed += x[i] != 0 && y[i] == 0;
  }
  REQUIRE(flushed > 0);
  CHECK(st.elements == rows * cols);
  CHECK(st.amax == amax);
  CHECK(st.sqnr_db == Approx(10 * std::log10(signal / noise)).epsilon(1e-12));
  CHECK(st.flushed_pct == Approx(100.0 * static_cast<double>(flushed) / static_cast<double>(nonzero)).epsilon(1e-15));
  // NaN and Inf inputs are left out of every figure (an identity role: q == v)
  auto bad = x;
  bad[3] = NAN;
  bad[10] = INFINITY;
  bad[1000] = -INFINITY;
  OperandQuantizer id(recipe_by_name("fp32"), kLayer, 1);
  OperandStats si;
  run(id, GemmRole::fwd_x, bad, rows, cols, 0, &si);
  CHECK(si.elements == rows * cols);
  CHECK(si.amax == amax);
  CHECK(std::isinf(si.sqnr_db));
  CHECK(si.sqnr_db > 0);
  CHECK(si.flushed_pct == 0);
  // observe(), the path an unquantized GEMM operand takes, gives the same figures
  OperandStats so;
  id.observe(GemmRole::fwd_x, bad.data(), rows, cols, &so, nullptr);
  CHECK(so.elements == si.elements);
  CHECK(so.amax == si.amax);
  CHECK(so.sqnr_db == si.sqnr_db);
  CHECK(so.flushed_pct == si.flushed_pct);
  // an operand of nothing but Inf and NaN has no finite value to measure
  const std::vector<float> none = {INFINITY, NAN, -INFINITY, -NAN};
  id.observe(GemmRole::fwd_x, none.data(), 2, 2, &so, nullptr);
  CHECK(so.amax == 0.0f);
}

TEST_CASE("operand stats: a BF16 role counts the finite inputs its cast turned into Inf", "[recipes]") {
  // 1003 elements (a partial vector at the end); overflows scattered, the last element
  // among them, beside NaN and Inf inputs that are not counted
  const int64_t rows = 17, cols = 59;
  auto x = random_matrix(rows, cols, 23);
  const float past_bf16 = 3.399e38f;  // above BF16's largest finite value: RNE gives Inf
  for (size_t i = 4; i < x.size(); i += 97) x[i] = (i % 2 ? -1 : 1) * past_bf16;
  x.back() = past_bf16;
  x[5] = NAN;
  x[6] = INFINITY;
  x[7] = 3.38e38f;  // rounds down to BF16's largest finite value
  OperandQuantizer q(recipe_by_name("bf16"), kLayer, 1);
  OperandStats st;
  const auto y = run(q, GemmRole::fwd_x, x, rows, cols, 0, &st);
  int64_t overflowed = 0;
  for (size_t i = 0; i < x.size(); ++i) overflowed += std::isfinite(x[i]) && std::isinf(y[i]);
  REQUIRE(overflowed == 12);  // 11 scattered and the last
  CHECK(std::isfinite(y[7]));
  CHECK(st.saturated_pct == Approx(100.0 * 12 / static_cast<double>(x.size())).epsilon(1e-15));
}
