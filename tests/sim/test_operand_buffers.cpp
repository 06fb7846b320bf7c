// QuantGemms' quantized operands live in one pair of buffers per thread, shared by every
// layer (docs/architecture.md#scratch-buffers): what a GEMM multiplies, seen through
// operand_hook, sits at the same address for two layers on one thread and at another on a
// second thread, and a layer's result does not depend on which layers ran before it.
#include <catch2/catch.hpp>

#include <cstdint>
#include <map>
#include <thread>
#include <vector>

#include "lpx/recipes/recipe.hpp"
#include "lpx/sim/gemm.hpp"

using namespace lpx;
using namespace lpx::sim;

namespace {

QuantGemms layer(int index) {
  QuantGemms g(OperandQuantizer(recipe_by_name("mxfp4-rne"), LayerInfo{index, 4, LayerInfo::linear, "l"}, 7),
               Accumulation{});
  g.probe_outliers = false;
  return g;
}

std::vector<float> ramp(int64_t n, float step) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = step * static_cast<float>((i * 37) % 101 - 50);
  return v;
}

}  // namespace

TEST_CASE("every layer's quantized operands share one pair of buffers per thread", "[sim][gemm]") {
  const int64_t m = 64, n = 32, k = 64;
  const std::vector<float> x = ramp(m * k, 0.01f), w = ramp(n * k, 0.003f);
  std::vector<float> y(static_cast<size_t>(m * n));

  std::map<int, std::map<GemmRole, const float*>> used;  // layer -> role -> address
  auto hook = [&used](int id) {
    return [&used, id](GemmRole r, const float* in, const float* q, int64_t, int64_t, uint64_t) {
      CHECK(q != in);  // mxfp4-rne quantizes every role
      used[id][r] = q;
    };
  };
  QuantGemms a = layer(0), b = layer(1);
  a.operand_hook = hook(0);
  b.operand_hook = hook(1);
  a.forward(x.data(), w.data(), nullptr, y.data(), m, n, k, 0, false);
  b.forward(x.data(), w.data(), nullptr, y.data(), m, n, k, 0, false);
  CHECK(used[0][GemmRole::fwd_x] == used[1][GemmRole::fwd_x]);
  CHECK(used[0][GemmRole::fwd_w] == used[1][GemmRole::fwd_w]);
  CHECK(used[0][GemmRole::fwd_x] != used[0][GemmRole::fwd_w]);

  // Another thread quantizes into buffers of its own.
  std::thread([&] {
    QuantGemms c = layer(2);
    c.operand_hook = hook(2);
    c.forward(x.data(), w.data(), nullptr, y.data(), m, n, k, 0, false);
  }).join();
  CHECK(used[2][GemmRole::fwd_x] != used[0][GemmRole::fwd_x]);
  CHECK(used[2][GemmRole::fwd_w] != used[0][GemmRole::fwd_w]);
}

TEST_CASE("a layer's GEMM results do not depend on what other layers left in the shared buffers",
          "[sim][gemm]") {
  // Layer a on a fresh thread (its buffers new and empty), then on this thread after other
  // layers ran larger operands (which grew and filled the buffers) and a smaller one: the
  // same bits in y, dx and dw.
  const int64_t m = 32, n = 16, k = 64;
  const std::vector<float> x = ramp(m * k, 0.02f), w = ramp(n * k, 0.004f), dy = ramp(m * n, 0.001f);
  auto run = [&](QuantGemms& g) {
    std::vector<float> y(static_cast<size_t>(m * n)), dx(static_cast<size_t>(m * k)),
        dw(static_cast<size_t>(n * k), 0.0f);
    g.forward(x.data(), w.data(), nullptr, y.data(), m, n, k, 3, false);
    g.backward(dy.data(), x.data(), w.data(), dx.data(), dw.data(), nullptr, m, n, k, 3, false);
    return std::vector<std::vector<float>>{y, dx, dw};
  };
  std::vector<std::vector<float>> expected;
  std::thread([&] {
    QuantGemms alone = layer(0);
    expected = run(alone);
  }).join();

  QuantGemms big = layer(1), small = layer(2), a = layer(0);
  {
    const int64_t bm = 128, bn = 64, bk = 96;
    const std::vector<float> bx = ramp(bm * bk, 5.0f), bw = ramp(bn * bk, -3.0f), bdy = ramp(bm * bn, 7.0f);
    std::vector<float> by(static_cast<size_t>(bm * bn)), bdx(static_cast<size_t>(bm * bk)),
        bdw(static_cast<size_t>(bn * bk), 0.0f);
    big.forward(bx.data(), bw.data(), nullptr, by.data(), bm, bn, bk, 3, false);
    big.backward(bdy.data(), bx.data(), bw.data(), bdx.data(), bdw.data(), nullptr, bm, bn, bk, 3, false);
    std::vector<float> sx = ramp(32 * 32, 1.0f), sw = ramp(8 * 32, 1.0f), sy(32 * 8);
    small.forward(sx.data(), sw.data(), nullptr, sy.data(), 32, 8, 32, 3, false);
  }
  const auto got = run(a);
  for (size_t i = 0; i < expected.size(); ++i) {
    INFO("array " << i);
    CHECK(got[i] == expected[i]);
  }
}
