// Did each catalogue recipe quantize the right operands the right way? Two independent
// checks:
//  1. The run log's /quant/applied (what the quantizer that ran reports, runlog/schema.hpp)
//     against expectations written here from the papers' recipes (the catalogue table of
//     docs/recipes.md), not from the recipe JSON files: element format, block shape
//     along the reduction axis, scale format and rule, rounding and transform per GEMM
//     role, and which layers stay in high precision.
//  2. The operands the GEMMs really multiplied, captured through QuantGemms'
//     operand_hook, checked for their structure: nvfp4's forward W lies, tile by 16x16
//     tile, on the E2M1 grid times one scale (its X does not: 1x16 blocks); dY is
//     stochastically rounded (same input, another step: other values; same step: the
//     same values) while X and W are deterministic; mxfp4-sr-rht's backward operands are
//     E2M1 times a power of two per 32-block and its forward operands are bfloat16.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>
#include <string>
#include <tuple>
#include <unistd.h>
#include <vector>

#include "lpx/runlog/run_log.hpp"
#include "lpx/sim/trainer.hpp"
#include "train_helpers.hpp"

using namespace lpx;
using namespace lpx::sim;

namespace {

// ------------------------------------------------------------------ expectations

struct Expect {
  std::string element, block, scale, tensor_scale, rule, rounding, transform;
  bool headroom = false;
};

constexpr GemmRole kRoles[] = {GemmRole::fwd_x, GemmRole::fwd_w, GemmRole::dgrad_dy, GemmRole::dgrad_w, GemmRole::wgrad_x, GemmRole::wgrad_dy};
using RoleTable = std::array<Expect, kGemmRoles>;

// 1xN vectors along each operand's reduction axis: K for fwd_x, fwd_w, dgrad_dy (axis 1),
// N for dgrad_w and M for the wgrad operands (axis 0).
std::string vec(GemmRole r, int n) {
  return reduction_axis(r) == 1 ? "1x" + std::to_string(n) : std::to_string(n) + "x1";
}
RoleTable all(const Expect& e) {
  RoleTable t;
  t.fill(e);
  return t;
}
RoleTable vectors(Expect e, int n) {
  RoleTable t;
  for (GemmRole r : kRoles) {
    t[static_cast<size_t>(r)] = e;
    t[static_cast<size_t>(r)].block = vec(r, n);
  }
  return t;
}
bool is_dy(GemmRole r) { return r == GemmRole::dgrad_dy || r == GemmRole::wgrad_dy; }
bool is_w(GemmRole r) { return r == GemmRole::fwd_w || r == GemmRole::dgrad_w; }
bool is_backward(GemmRole r) { return r != GemmRole::fwd_x && r != GemmRole::fwd_w; }

const Expect kFp32{"float32", "none", "none", "none", "none", "none", "none"};
const Expect kBf16{"bfloat16", "none", "none", "none", "none", "rne", "none"};

struct RecipeExpect {
  std::string name;
  int layers = 2;        // GPT depth for the test
  int quantized = 0;     // a block whose linears follow the roles
  std::vector<int> kept_blocks;  // blocks whose linears stay in high precision
  RoleTable linear;      // a quantized linear layer
  bool attention_kept, head_kept;
  Expect kept = kBf16;   // what kept layers' operands become
};

// From the catalogue table of docs/recipes.md (and the list for bf16, mxfp4-rne and the
// sub-4-bit recipe). "kept" columns: fp8-*: everything but linear GEMMs; fp8-blockwise:
// head and attention; mxfp8: attention BMMs and LM head; nvfp4: first 2 and last 8 of the
// blocks, head, attention; mxfp6, mxfp4-*, quartet: nothing listed.
std::vector<RecipeExpect> expectations() {
  std::vector<RecipeExpect> out;
  out.push_back({"fp32", 2, 0, {}, all(kFp32), false, false, kFp32});
  out.push_back({"bf16", 2, 0, {}, all(kBf16), true, true});
  {  // Micikevicius et al.: E4M3 X and W, E5M2 dY, per tensor, fp32 scale from the amax
     // history (1024 steps, max), RNE
    RoleTable t;
    for (GemmRole r : kRoles)
      t[static_cast<size_t>(r)] = {is_dy(r) ? "float8_e5m2" : "float8_e4m3fn", "tensor", "fp32", "none",
                                   "history_max:1024", "rne", "none"};
    out.push_back({"fp8-delayed", 2, 0, {}, t, true, true});
    for (auto& e : t) e.rule = "amax";  // current scaling
    out.push_back({"fp8-current", 2, 0, {}, t, true, true});
  }
  {  // DeepSeek-V3: X and dY in 1x128 tiles along the reduction, W in 128x128 blocks, E4M3,
     // fp32 scales from the online amax
    RoleTable t = vectors({"float8_e4m3fn", "", "fp32", "none", "amax", "rne", "none"}, 128);
    t[static_cast<size_t>(GemmRole::fwd_w)].block = "128x128";
    t[static_cast<size_t>(GemmRole::dgrad_w)].block = "128x128";
    out.push_back({"fp8-blockwise", 2, 0, {}, t, true, true});
  }
  out.push_back({"mxfp8", 2, 0, {}, vectors({"float8_e4m3fn", "", "e8m0", "none", "rceil", "rne", "none"}, 32), true, true});
  out.push_back({"mxfp6", 2, 0, {}, vectors({"float6_e3m2fn", "", "e8m0", "none", "floor", "rne", "none"}, 32), false, false});
  out.push_back({"mxfp4-rne", 2, 0, {}, vectors({"float4_e2m1fn", "", "e8m0", "none", "floor", "rne", "none"}, 32), false, false});
  {  // Tseng et al.: forward in BF16; dgrad and wgrad in MXFP4 with SR, the 3/4 trick and
     // a size-64 random Hadamard transform with fresh signs per call
    RoleTable t = vectors({"float4_e2m1fn", "", "e8m0", "none", "floor", "sr", "rht64:per_call", true}, 32);
    t[static_cast<size_t>(GemmRole::fwd_x)] = kBf16;
    t[static_cast<size_t>(GemmRole::fwd_w)] = kBf16;
    out.push_back({"mxfp4-sr-rht", 2, 0, {}, t, false, false});
  }
  {  // NVIDIA 2025: E2M1, 1x16 blocks with E4M3 scales and an fp32 tensor scale; W in
     // 16x16 tiles; SR on dY only; RHT 16 with one fixed sign vector on wgrad inputs only;
     // the first 2/62 and last 8/62 of the blocks kept: of 11 blocks, round(0.35) = 0 and
     // round(1.42) = 1, the last
    RoleTable t;
    for (GemmRole r : kRoles)
      t[static_cast<size_t>(r)] = {"float4_e2m1fn", is_w(r) ? "16x16" : vec(r, 16), "e4m3", "fp32", "amax",
                                   is_dy(r) ? "sr" : "rne",
                                   r == GemmRole::wgrad_x || r == GemmRole::wgrad_dy ? "rht16:fixed" : "none"};
    out.push_back({"nvfp4", 11, 2, {10}, t, true, true});
    // the sub-4-bit exploration: the same layout with E2M0 elements in 16-blocks
    for (auto& e : t) e.element = "e2m0";
    out.push_back({"sub4-e2m0", 11, 2, {10}, t, true, true});
  }
  {  // Quartet: MXFP4 with Hadamard 32 re-randomized each step; RTN forward, SR with the
     // 3/4 scale backward
    RoleTable t;
    for (GemmRole r : kRoles)
      t[static_cast<size_t>(r)] = {"float4_e2m1fn", vec(r, 32), "e8m0", "none", "floor",
                                   is_backward(r) ? "sr" : "rne", "rht32:per_call", is_backward(r)};
    out.push_back({"quartet-like", 2, 0, {}, t, false, false});
  }
  {  // BitNet b1.58: W ternary (absmean, per tensor), X int8 per token (one absmax scale
     // per row of X, 64 channels here); gradients stay high precision (BF16). The paper's
     // BitLinear replaces the linear layers only: attention and head stay high precision.
    RoleTable t = all(kBf16);
    t[static_cast<size_t>(GemmRole::fwd_x)] = {"int8", "1xK", "fp32", "none", "amax", "rne", "none"};
    t[static_cast<size_t>(GemmRole::fwd_w)] = {"ternary", "tensor", "absmean", "none", "none", "rne", "none"};
    t[static_cast<size_t>(GemmRole::dgrad_w)] = t[static_cast<size_t>(GemmRole::fwd_w)];
    out.push_back({"bitnet-b1.58", 2, 0, {}, t, true, true});
  }
  return out;
}

// Head size 64 (one head) and M = 128 rows: every block and Hadamard size of the
// catalogue fits along every reduction axis.
TrainConfig small_gpt(const std::string& recipe, int layers) {
  TrainConfig c = test::tiny_gpt(recipe, layers, 64, 1, 64, 2);
  c.seed = 11;
  c.steps = 1;
  return c;
}

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("lpx_roles_" + std::to_string(getpid()) + "_" + name)).string();
}

// "1xK": one block per row of the operand, K its columns (the layer's input width)
void check_applied(const AppliedOperand& a, const Expect& e, GemmRole r, int64_t k = 0) {
  INFO("role " << role_name(r));
  CHECK(a.element == e.element);
  CHECK(a.block == (e.block == "1xK" ? "1x" + std::to_string(k) : e.block));
  CHECK(a.scale == e.scale);
  CHECK(a.tensor_scale == e.tensor_scale);
  CHECK(a.scale_rule == e.rule);
  CHECK(a.rounding == e.rounding);
  CHECK(a.transform == e.transform);
  CHECK(a.axis == reduction_axis(r));
  CHECK(a.sr_bits == (e.rounding == "sr" ? 32 : 0));
  CHECK(a.headroom_3_4 == e.headroom);
}

// ------------------------------------------------------------------ structure

constexpr float kE2m1[] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};

bool on_e2m1(float y, float tol) {
  for (float g : kE2m1)
    if (std::fabs(y - g) <= tol * std::max(g, 0.5f)) return true;
  return false;
}

// The values of one box (r0.., c0.., h x w) of a row-major (rows x cols) array, times
// `factor`, are one scale times E2M1 values: some scale c = amax / g, g an E2M1 value,
// maps each |v| to within 1e-6 (relative) of the grid. NVFP4 dequantizes as
// (e * s_dec_b) * s_dec in float32 and the 3/4 headroom divides by 0.75 last, so the
// values are the grid times c up to one rounding. `pow2`: c must be a power of two (MX).
bool one_scale_box(const std::vector<float>& v, int64_t cols, int64_t r0, int64_t c0, int64_t h,
                   int64_t w, bool pow2, double factor) {
  double amax = 0;
  for (int64_t i = r0; i < r0 + h; ++i)
    for (int64_t j = c0; j < c0 + w; ++j)
      amax = std::max(amax, std::fabs(v[static_cast<size_t>(i * cols + j)] * factor));
  if (amax == 0) return true;
  for (float g : kE2m1) {
    if (g == 0) continue;
    double c = amax / g;
    if (pow2) {
      const double p = std::exp2(std::round(std::log2(c)));
      if (std::fabs(c - p) > 1e-6 * p) continue;
      c = p;
    }
    bool ok = true;
    for (int64_t i = r0; ok && i < r0 + h; ++i)
      for (int64_t j = c0; ok && j < c0 + w; ++j)
        ok = on_e2m1(static_cast<float>(std::fabs(v[static_cast<size_t>(i * cols + j)] * factor) / c), 1e-6f);
    if (ok) return true;
  }
  return false;
}

// Fraction of the (h x w) boxes tiling a (rows x cols) array that pass one_scale_box.
double fraction_one_scale(const std::vector<float>& v, int64_t rows, int64_t cols, int64_t h, int64_t w,
                          bool pow2, double factor = 1.0) {
  int64_t ok = 0, n = 0;
  for (int64_t r = 0; r + h <= rows; r += h)
    for (int64_t c = 0; c + w <= cols; c += w) {
      ok += one_scale_box(v, cols, r, c, h, w, pow2, factor) ? 1 : 0;
      ++n;
    }
  return n ? static_cast<double>(ok) / static_cast<double>(n) : 0;
}

bool all_bf16(const std::vector<float>& v) {
  for (float x : v) {
    uint32_t b;
    std::memcpy(&b, &x, 4);
    if ((b & 0xFFFFu) != 0) return false;
  }
  return true;
}

struct Captured {
  std::vector<float> in, used;
  int64_t rows = 0, cols = 0;
};
// (layer, role, step) -> the operand
using Captures = std::map<std::tuple<std::string, GemmRole, uint64_t>, Captured>;

void capture(Model& m, const std::vector<std::string>& layers, Captures& out) {
  for (QuantGemms* q : m.gemm_layers()) {
    const std::string name = q->info().name;
    if (std::find(layers.begin(), layers.end(), name) == layers.end()) continue;
    q->operand_hook = [&out, name](GemmRole r, const float* in, const float* used, int64_t rows, int64_t cols,
                                   uint64_t step) {
      Captured& c = out[{name, r, step}];
      const auto n = static_cast<size_t>(rows * cols);
      c.in.assign(in, in + n);
      c.used.assign(used, used + n);
      c.rows = rows;
      c.cols = cols;
    };
  }
}

Batch token_batch_for(const Trainer& t) {
  Batch b;
  const TrainConfig& c = t.config();
  b.batch = c.batch;
  const size_t n = static_cast<size_t>(c.batch) * static_cast<size_t>(c.model.context);
  for (size_t i = 0; i < n; ++i) {
    b.x_i.push_back(static_cast<int32_t>((i * 7 + 3) % 50));
    b.y.push_back(static_cast<int32_t>((i * 11 + 5) % 50));
  }
  return b;
}

}  // namespace

TEST_CASE("the log records, per layer and operand, the formats each recipe applied", "[recipes][roles]") {
  for (const RecipeExpect& x : expectations()) {
    INFO("recipe " << x.name);
    const std::string path = temp_path(x.name + ".h5");
    {
      Trainer t(small_gpt(x.name, x.layers));
      t.attach_log(path);
      t.step();  // /quant/applied is written from the first step's quantizer calls
    }
    const runlog::Run d = runlog::read_run(path);
    std::filesystem::remove(path);
    REQUIRE(d.quant.applied.size() == d.quant.layers.size() * kGemmRoles);
    auto row = [&](const std::string& layer) {
      const auto it = std::find(d.quant.layers.begin(), d.quant.layers.end(), layer);
      REQUIRE(it != d.quant.layers.end());
      return static_cast<size_t>(it - d.quant.layers.begin());
    };
    const std::string q = "h" + std::to_string(x.quantized) + ".";
    for (const char* lin : {"attn.qkv", "attn.proj", "mlp.fc", "mlp.proj"}) {
      INFO("layer " << q << lin);
      const size_t l = row(q + lin);
      const int64_t k = std::string(lin) == "mlp.proj" ? 4 * 64 : 64;  // input widths (GELU: 4C)
      for (GemmRole r : kRoles)
        check_applied(d.quant.applied[l * kGemmRoles + static_cast<size_t>(r)], x.linear[static_cast<size_t>(r)], r, k);
      for (int kb : x.kept_blocks) {
        INFO("kept block " << kb);
        const size_t lk = row(std::string("h").append(std::to_string(kb)).append(".").append(lin));
        for (GemmRole r : kRoles) check_applied(d.quant.applied[lk * kGemmRoles + static_cast<size_t>(r)], x.kept, r);
      }
    }
    {
      INFO("layer " << q << "attn.bmm");
      const size_t l = row(q + "attn.bmm");
      for (GemmRole r : kRoles)
        check_applied(d.quant.applied[l * kGemmRoles + static_cast<size_t>(r)],
                      x.attention_kept ? x.kept : x.linear[static_cast<size_t>(r)], r);
    }
    {
      INFO("layer lm_head");
      const size_t l = row("lm_head");
      for (GemmRole r : kRoles)
        check_applied(d.quant.applied[l * kGemmRoles + static_cast<size_t>(r)],
                      x.head_kept ? x.kept : x.linear[static_cast<size_t>(r)], r);
    }
  }
}

TEST_CASE("nvfp4's GEMM operands: W in 16x16 tiles, X in 1x16 blocks, SR only on dY", "[recipes][roles][structure]") {
  // nvfp4 with NVIDIA's counts taken literally (2 and 8 blocks): block 2 is quantized,
  // blocks 3..10 bf16, so block 2's dY is the same at every step (deterministic)
  Trainer t(small_gpt(std::string(LPX_SOURCE_DIR) + "/tools/sweeps/recipes/nvfp4-counts-2-8.json", 11));
  Captures cap;
  capture(t.model(), {"h2.mlp.proj"}, cap);
  const Batch b = token_batch_for(t);
  t.model().forward_backward(b, 5, false);
  t.model().forward_backward(b, 6, false);
  const Captures at6 = cap;
  t.model().forward_backward(b, 6, false);  // the same step again
  auto get = [&](const Captures& c, GemmRole r, uint64_t s) -> const Captured& { return c.at({"h2.mlp.proj", r, s}); };

  // W (64, 256) as multiplied in the forward GEMM: each 16x16 tile is E2M1 times one scale
  const Captured& w = get(cap, GemmRole::fwd_w, 5);
  REQUIRE(w.rows == 64);
  REQUIRE(w.cols == 256);
  CHECK(w.used != w.in);
  CHECK(fraction_one_scale(w.used, w.rows, w.cols, 16, 16, false) == 1.0);
  // the same W in the dgrad GEMM: the same tiles, so the same values
  CHECK(get(cap, GemmRole::dgrad_w, 5).used == w.used);
  // X (128, 256): 1x16 blocks along K pass, 16x16 tiles mostly do not (a control that
  // the tile check can fail)
  const Captured& x = get(cap, GemmRole::fwd_x, 5);
  CHECK(fraction_one_scale(x.used, x.rows, x.cols, 1, 16, false) == 1.0);
  CHECK(fraction_one_scale(x.used, x.rows, x.cols, 16, 16, false) < 0.5);
  // dY (128, 64) in dgrad: 1x16 blocks along N
  const Captured& dy = get(cap, GemmRole::dgrad_dy, 5);
  CHECK(fraction_one_scale(dy.used, dy.rows, dy.cols, 1, 16, false) == 1.0);

  for (GemmRole r : kRoles) {
    INFO("role " << role_name(r));
    const Captured &a = get(cap, r, 5), &c = get(at6, r, 6), &again = get(cap, r, 6);
    // block 2's mlp.proj sees the same inputs at both steps: its X comes from the
    // forward pass and its dY from bf16 blocks above it
    REQUIRE(a.in == c.in);
    if (is_dy(r)) CHECK(a.used != c.used);  // stochastic rounding keyed by the step
    else CHECK(a.used == c.used);           // RNE (and the fixed-sign RHT): deterministic
    CHECK(again.used == c.used);            // the same step reproduces its random bits
  }
}

TEST_CASE("mxfp4-sr-rht's GEMM operands: bf16 forward, E2M1 x 2^k backward with SR", "[recipes][roles][structure]") {
  Trainer t(small_gpt("mxfp4-sr-rht", 2));
  Captures cap;
  capture(t.model(), {"lm_head"}, cap);  // the head's dY (dlogits) does not depend on SR
  const Batch b = token_batch_for(t);
  t.model().forward_backward(b, 5, false);
  t.model().forward_backward(b, 6, false);
  auto get = [&](GemmRole r, uint64_t s) -> const Captured& { return cap.at({"lm_head", r, s}); };
  for (GemmRole r : {GemmRole::fwd_x, GemmRole::fwd_w}) {
    INFO("role " << role_name(r));
    CHECK(all_bf16(get(r, 5).used));
    CHECK_FALSE(all_bf16(get(r, 5).in));
    CHECK(get(r, 5).used == get(r, 6).used);
  }
  // E2M1 times 2^k per 32-block along the reduction axis, divided by 3/4 (the headroom).
  // (No transposed-shape control here: with power-of-two scales, values of neighbouring
  // blocks often share a grid, so such a control would not fail reliably.)
  const Captured& dy = get(GemmRole::dgrad_dy, 5);  // (128, V): 1x32 blocks along V
  CHECK(fraction_one_scale(dy.used, dy.rows, dy.cols, 1, 32, true, 0.75) == 1.0);
  CHECK(fraction_one_scale(dy.used, dy.rows, dy.cols, 1, 32, true, 1.0) < 0.5);  // the 3/4 is there
  const Captured& wdy = get(GemmRole::wgrad_dy, 5);  // 32x1 blocks along M
  CHECK(fraction_one_scale(wdy.used, wdy.rows, wdy.cols, 32, 1, true, 0.75) == 1.0);
  const Captured& wx = get(GemmRole::wgrad_x, 5);
  CHECK(fraction_one_scale(wx.used, wx.rows, wx.cols, 32, 1, true, 0.75) == 1.0);
  for (GemmRole r : {GemmRole::dgrad_dy, GemmRole::wgrad_dy}) {
    INFO("role " << role_name(r));
    REQUIRE(get(r, 5).in == get(r, 6).in);
    CHECK(get(r, 5).used != get(r, 6).used);
  }
}

TEST_CASE("linear_layers names the linears each model builds, in model order", "[recipes][roles]") {
  // the names and LayerInfo that layer ablations (recipes/ablation.hpp) and
  // high_precision.layers use must be the ones the models give their quantizers
  for (const bool gpt : {true, false}) {
    ModelConfig c;
    if (gpt) {
      c.kind = ModelKind::gpt;
      c.vocab = 11;
      c.context = 4;
      c.layers = 3;
      c.channels = 8;
      c.heads = 2;
      c.activation = Activation::gelu;
    } else {
      c.inputs = 12;
      c.hidden = {16, 8};
    }
    auto m = make_model(c, recipe_by_name("mxfp4-rne"), {}, 2, 1);
    std::vector<LayerInfo> built;
    for (QuantGemms* q : m->gemm_layers())
      if (q->info().kind == LayerInfo::linear) built.push_back(q->info());
    const std::vector<LayerInfo> named = linear_layers(c);
    REQUIRE(named.size() == built.size());
    CHECK(named.size() == (gpt ? 12u : 2u));
    for (size_t i = 0; i < named.size(); ++i) {
      CHECK(named[i].name == built[i].name);
      CHECK(named[i].index == built[i].index);
      CHECK(named[i].count == built[i].count);
    }
  }
}
