// Gradient checks by central finite differences: every layer kernel in double
// (layers.hpp), then the whole MLP and GPT in float32 through their quantized-GEMM
// wiring (identity quantizers), including the GPT's quantized-attention path.
#include <catch2/catch.hpp>

#include <bit>
#include <cmath>
#include <cstring>
#include <functional>
#include <initializer_list>
#include <vector>

#include "lpx/formats/cast.hpp"
#include "lpx/numerics/philox.hpp"
#include "lpx/sim/gemm.hpp"
#include "lpx/sim/layers.hpp"
#include "lpx/sim/model.hpp"

using namespace lpx;
using namespace lpx::sim;
namespace L = lpx::sim::layers;

namespace {

std::vector<double> randn(size_t n, uint32_t stream, double scale = 1.0) {
  std::vector<double> v(n);
  for (size_t i = 0; i < n; ++i) {
    const auto r = lpx::random_block(1234, stream, i);
    const double u1 = (r.v[0] + 1.0) / 4294967297.0, u2 = r.v[1] / 4294967296.0;
    v[i] = scale * std::sqrt(-2 * std::log(u1)) * std::cos(6.283185307179586 * u2);
  }
  return v;
}

double dot(const std::vector<double>& a, const std::vector<double>& b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

// Checks d/dx [R . f(x)] against `analytic` for every element of x.
void check_grad(std::vector<double>& x, const std::function<double()>& loss,
                const std::vector<double>& analytic, const char* what, double tol = 1e-6) {
  INFO(what);
  REQUIRE(x.size() == analytic.size());
  const double eps = 1e-6;
  double max_err = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    const double x0 = x[i];
    x[i] = x0 + eps;
    const double lp = loss();
    x[i] = x0 - eps;
    const double lm = loss();
    x[i] = x0;
    const double num = (lp - lm) / (2 * eps);
    const double err = std::fabs(num - analytic[i]) / std::max(1.0, std::fabs(num) + std::fabs(analytic[i]));
    max_err = std::max(max_err, err);
  }
  CHECK(max_err < tol);
}

}  // namespace

TEST_CASE("linear: dinp, dw, dbias in double", "[gradcheck]") {
  const int64_t n = 5, c = 7, oc = 4;
  auto x = randn(n * c, 1), w = randn(oc * c, 2), b = randn(oc, 3), r = randn(n * oc, 4);
  std::vector<double> out(n * oc);
  auto loss = [&] { L::linear_forward(out.data(), x.data(), w.data(), b.data(), n, c, oc); return dot(out, r); };
  std::vector<double> dx(x.size()), dw(w.size()), db(b.size());
  L::linear_backward(dx.data(), dw.data(), db.data(), r.data(), x.data(), w.data(), n, c, oc);
  check_grad(x, loss, dx, "dinp");
  check_grad(w, loss, dw, "dw");
  check_grad(b, loss, db, "dbias");
}

TEST_CASE("layernorm: dinp, dw, db in double", "[gradcheck]") {
  const int64_t n = 4, c = 9;
  auto x = randn(n * c, 5, 2.0), w = randn(c, 6), b = randn(c, 7), r = randn(n * c, 8);
  std::vector<double> out(n * c), mean(n), rstd(n);
  auto loss = [&] { L::layernorm_forward(out.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), n, c); return dot(out, r); };
  loss();
  std::vector<double> dx(x.size()), dw(w.size()), db(b.size());
  L::layernorm_backward(dx.data(), dw.data(), db.data(), r.data(), x.data(), w.data(), mean.data(), rstd.data(), n, c);
  check_grad(x, loss, dx, "dinp");
  check_grad(w, loss, dw, "dw");
  check_grad(b, loss, db, "db");
}

TEST_CASE("elementwise activations: gelu, relu, swiglu in double", "[gradcheck]") {
  const int64_t n = 6, h = 5;
  auto x = randn(n * 2 * h, 9, 1.5), r = randn(n * 2 * h, 10);
  std::vector<double> out(n * 2 * h);
  SECTION("gelu") {
    auto loss = [&] { L::gelu_forward(out.data(), x.data(), n * 2 * h); return dot(out, r); };
    std::vector<double> dx(x.size());
    L::gelu_backward(dx.data(), x.data(), r.data(), n * 2 * h);
    check_grad(x, loss, dx, "gelu");
  }
  SECTION("relu") {
    auto loss = [&] { L::relu_forward(out.data(), x.data(), n * 2 * h); return dot(out, r); };
    std::vector<double> dx(x.size());
    L::relu_backward(dx.data(), x.data(), r.data(), n * 2 * h);
    check_grad(x, loss, dx, "relu");
  }
  SECTION("swiglu") {
    std::vector<double> o(n * h), rr(r.begin(), r.begin() + n * h);
    auto loss = [&] { L::swiglu_forward(o.data(), x.data(), n, h); return dot(o, rr); };
    std::vector<double> dx(x.size());
    L::swiglu_backward(dx.data(), x.data(), rr.data(), n, h);
    check_grad(x, loss, dx, "swiglu");
  }
}

TEST_CASE("float32 GELU and its derivative stay within a few ulp of double, tails included", "[gradcheck]") {
  // The float path (sim/src/activations.cpp) writes the tanh approximation as
  // x sigmoid(2u) with an exp of its own. Reference: the same function in double,
  // through std::exp. The bound grows with |u| because u itself is rounded to float32
  // before the exp (u = s (x + c x^3) carries a few ulp of its own, and each ulp of u moves
  // exp(-2u) by 2|u| ulp); below 1e-30 (past
  // x = -10, where float32 has only subnormals or 0) the error is taken as absolute. 1 + tanhf(u),
  // the earlier float formula, misses it by orders of magnitude in the negative tail
  // (cancellation: 2e-4 relative at x = -5).
  const double s = 0.7978845608028654, c = 0.044715, ulp = std::ldexp(1.0, -24);
  std::vector<float> x;
  for (int i = -12000; i <= 12000; ++i) x.push_back(static_cast<float>(i) * 1e-3f);
  for (float v : {1e-30f, -1e-30f, 3e-8f, -3e-8f, 0.0f, -0.0f, 20.0f, -12.5f}) x.push_back(v);
  const auto n = static_cast<int64_t>(x.size());
  std::vector<float> y(x.size()), dx(x.size(), 0.0f), ones(x.size(), 1.0f);
  L::gelu_forward(y.data(), x.data(), n);
  L::gelu_backward(dx.data(), x.data(), ones.data(), n);
  double worst_y = 0, worst_dx = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    const double xd = x[i], u = s * (xd + c * xd * xd * xd), g = 1.0 / (1.0 + std::exp(-2.0 * u));
    const double want_y = xd * g;
    const double slope = xd * g * (1.0 - g) * 2.0 * s * (1.0 + 3.0 * c * xd * xd), want_dx = g + slope;
    const double allowed = (16.0 + 8.0 * std::fabs(u)) * ulp;
    const double err_y = std::fabs(y[i] - want_y) / std::max(std::fabs(want_y), 1e-30);
    // the derivative crosses 0 near x = -0.75: measured against the size of its two terms
    const double err_dx = std::fabs(dx[i] - want_dx) / std::max(std::fabs(g) + std::fabs(slope), 1e-30);
    INFO("x " << x[i] << " y " << y[i] << " want " << want_y << " dx " << dx[i] << " want " << want_dx);
    REQUIRE(err_y <= allowed);
    REQUIRE(err_dx <= allowed);
    worst_y = std::max(worst_y, err_y / ulp);
    worst_dx = std::max(worst_dx, err_dx / ulp);
  }
  WARN("largest errors in units of 2^-24: GELU " << worst_y << ", derivative " << worst_dx);
  // non-finite inputs
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  const float special[2] = {inf, nan};
  float out[2], grad[2] = {0, 0}, one[2] = {1, 1};
  L::gelu_forward(out, special, 2);
  L::gelu_backward(grad, special, one, 2);
  CHECK(out[0] == inf);
  CHECK(std::isnan(out[1]));
  CHECK(std::isnan(grad[1]));
}

TEST_CASE("embedding: dwte, dwpe in double", "[gradcheck]") {
  const int64_t b = 2, t = 3, c = 4, v = 5;
  const std::vector<int32_t> tok{1, 4, 1, 0, 2, 4};
  auto wte = randn(v * c, 11), wpe = randn(t * c, 12), r = randn(b * t * c, 13);
  std::vector<double> out(b * t * c);
  auto loss = [&] { L::embedding_forward(out.data(), tok.data(), wte.data(), wpe.data(), b, t, c); return dot(out, r); };
  std::vector<double> dwte(wte.size()), dwpe(wpe.size());
  L::embedding_backward(dwte.data(), dwpe.data(), r.data(), tok.data(), b, t, c);
  check_grad(wte, loss, dwte, "dwte");
  check_grad(wpe, loss, dwpe, "dwpe");
}

TEST_CASE("causal attention: dqkv in double", "[gradcheck]") {
  const int64_t b = 2, t = 5, c = 8, nh = 2;
  auto qkv = randn(b * t * 3 * c, 14), r = randn(b * t * c, 15);
  std::vector<double> out(b * t * c), pre(b * nh * t * t), att(b * nh * t * t);
  auto loss = [&] { L::attention_forward(out.data(), pre.data(), att.data(), qkv.data(), b, t, c, nh); return dot(out, r); };
  loss();
  std::vector<double> dqkv(qkv.size()), dpre(pre.size()), datt(att.size());
  L::attention_backward(dqkv.data(), dpre.data(), datt.data(), r.data(), qkv.data(), att.data(), b, t, c, nh);
  check_grad(qkv, loss, dqkv, "dqkv");
}

TEST_CASE("softmax cross-entropy: dlogits in double", "[gradcheck]") {
  const int64_t n = 4, v = 6;
  auto logits = randn(n * v, 16, 2.0);
  const std::vector<int32_t> tgt{0, 5, 2, 2};
  std::vector<double> probs(n * v), losses(n);
  auto loss = [&] { return L::softmax_xent_forward(probs.data(), logits.data(), tgt.data(), n, v, losses.data()); };
  loss();
  std::vector<double> d(logits.size());
  L::softmax_xent_backward(d.data(), probs.data(), tgt.data(), n, v, 1.0 / n);
  check_grad(logits, loss, d, "dlogits");
}

TEST_CASE("QuantGemms with the identity quantizer equals the reference linear", "[gradcheck]") {
  const int64_t m = 70, k = 33, n = 12;  // m spans two row chunks
  auto xd = randn(m * k, 17), wd = randn(n * k, 18), bd = randn(n, 19), dyd = randn(m * n, 20);
  std::vector<float> x(xd.begin(), xd.end()), w(wd.begin(), wd.end()), b(bd.begin(), bd.end()), dy(dyd.begin(), dyd.end());
  QuantGemms g(OperandQuantizer(recipe_by_name("fp32"), LayerInfo{0, 1, LayerInfo::linear, "l"}, 0), Accumulation{});
  std::vector<float> y(m * n), yr(m * n), dx(m * k), dw(n * k, 0.f), db(n, 0.f), dxr(m * k, 0.f), dwr(n * k, 0.f), dbr(n, 0.f);
  g.forward(x.data(), w.data(), b.data(), y.data(), m, n, k, 0, true);
  L::linear_forward(yr.data(), x.data(), w.data(), b.data(), m, k, n);
  g.backward(dy.data(), x.data(), w.data(), dx.data(), dw.data(), db.data(), m, n, k, 0, true);
  L::linear_backward(dxr.data(), dwr.data(), dbr.data(), dy.data(), x.data(), w.data(), m, k, n);
  auto close = [](const std::vector<float>& a, const std::vector<float>& b2) {
    for (size_t i = 0; i < a.size(); ++i)
      if (std::fabs(a[i] - b2[i]) > 1e-4f * (1 + std::fabs(b2[i]))) return false;
    return true;
  };
  CHECK(close(y, yr));
  CHECK(close(dx, dxr));
  CHECK(close(dw, dwr));
  CHECK(close(db, dbr));
  CHECK(g.stats[0].elements == m * k);
  CHECK(std::isinf(g.stats[0].sqnr_db));
}

TEST_CASE("limited accumulation rounds partial sums and promotes to fp32", "[gemm]") {
  CHECK(round_to_mantissa(1.0 + std::ldexp(1.0, -12), 10) == 1.0f);
  CHECK(round_to_mantissa(1.0 + std::ldexp(1.0, -10), 10) == 1.0f + std::ldexp(1.0f, -10));
  CHECK(round_to_mantissa(1.5 * std::ldexp(1.0, -11) + 1.0, 10) == 1.0f + std::ldexp(1.0f, -10));
  // 1 + 4096 * 2^-12: with 10 mantissa bits each 2^-12 addend is lost (ties to even)
  const int64_t k = 4097;
  std::vector<float> a(k, 1.0f), b(k, std::ldexp(1.0f, -12));
  b[0] = 1.0f;
  float c = 0;
  gemm(Trans::n, Trans::t, a.data(), b.data(), &c, 1, 1, k, Accumulation{true, 10, 0}, false);
  CHECK(c == 1.0f);
  // promotion every 128: the first chunk still loses its 127 addends to the 1, every
  // later chunk's partial sum is exact, and the fp32 total keeps them
  gemm(Trans::n, Trans::t, a.data(), b.data(), &c, 1, 1, k, Accumulation{true, 10, 128}, false);
  CHECK(c == 1.0f + 3969.0f * std::ldexp(1.0f, -12));
  gemm(Trans::n, Trans::t, a.data(), b.data(), &c, 1, 1, k, Accumulation{}, false);
  CHECK(c == 2.0f);
}

namespace {
// The definition of the limited accumulator, written the slow way, one C element at a time
// in increasing k. reference_round: frexp, nearbyint (round half to even) and ldexp.
float reference_round(double x, int mb) {
  if (x == 0 || !std::isfinite(x)) return static_cast<float>(x);
  int e = 0;
  const double f = std::frexp(x, &e);
  return static_cast<float>(std::ldexp(std::nearbyint(std::ldexp(f, mb + 1)), e - mb - 1));
}

// x + y rounded once to mb + 1 significant bits (ties to even), then to float32, in
// integers rather than by ordered_sum.hpp's round to odd: the larger magnitude's 24-bit
// significand shifted up by 100 bits, the smaller's aligned below it and, where its bits
// fall off the end, truncated with a sticky 1 in the last place (the rounding point sits
// at least 80 bits higher, so that stands for anything strictly between), then the sum
// rounded on its integer bits.
__extension__ using I128 = __int128;  // a GCC and Clang extension, hence __extension__
float reference_round_sum(float x, float y, int mb) {
  if (!std::isfinite(x) || !std::isfinite(y) || x == 0 || y == 0) return reference_round(static_cast<double>(x) + y, mb);
  if (std::fabs(x) < std::fabs(y)) std::swap(x, y);
  int ex = 0, ey = 0;
  const auto mx = static_cast<I128>(std::ldexp(std::fabs(std::frexp(x, &ex)), 24));  // x = mx 2^(ex - 24)
  const auto my = static_cast<I128>(std::ldexp(std::fabs(std::frexp(y, &ey)), 24));
  const int shift = 100 - (ex - ey);  // y's significand in units of 2^(ex - 124)
  I128 ya = shift >= 0 ? my << shift : my >> std::min(-shift, 120);
  if (shift < 0 && (ya << std::min(-shift, 120)) != my) ya |= 1;  // sticky
  I128 sum = (mx << 100) + ((x < 0) == (y < 0) ? ya : -ya);  // >= 0: |x| >= |y|
  if (sum == 0) return 0.0f;
  const auto hi = static_cast<uint64_t>(sum >> 64), lo = static_cast<uint64_t>(sum);  // sum < 2^125
  const int len = hi != 0 ? 128 - __builtin_clzll(hi) : 64 - __builtin_clzll(lo);  // significant bits
  const int drop = std::max(0, len - (mb + 1));
  if (drop > 0) {
    const I128 rem = sum & ((I128{1} << drop) - 1), half = I128{1} << (drop - 1);
    sum >>= drop;
    if (rem > half || (rem == half && (sum & 1))) ++sum;
  }
  const double mag = std::ldexp(static_cast<double>(sum), ex - 124 + drop);  // sum < 2^(mb + 2): exact
  return static_cast<float>(x < 0 ? -mag : mag);
}
void reference_limited_gemm(Trans ta, Trans tb, const float* a, const float* b, float* c, int64_t m, int64_t n,
                            int64_t k, int mb, int64_t every, bool accumulate) {
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      float total = accumulate ? c[i * n + j] : 0.0f, partial = 0;
      for (int64_t kk = 0; kk < k; ++kk) {
        const float av = ta == Trans::n ? a[i * k + kk] : a[kk * m + i];
        const float bv = tb == Trans::n ? b[kk * n + j] : b[j * k + kk];
        const float p = av * bv;
        partial = reference_round_sum(partial, p, mb);
        if ((kk + 1) % (every > 0 ? every : k) == 0 || kk + 1 == k) total += partial, partial = 0;
      }
      c[i * n + j] = total;
    }
}

// gemm's limited accumulation against the definition in every layout, with and without
// accumulating into c0, bit for bit.
// An e4m3-like value from an LCG state: 4 significant bits, 16 binades, either sign.
float e4m3_like_code(uint64_t& state) {
  state = state * 6364136223846793005ull + 1442695040888963407ull;
  const auto r = static_cast<int>(state >> 33);
  return std::ldexp(static_cast<float>(8 + r % 8), r / 8 % 16 - 12) * ((r >> 20) & 1 ? -1.0f : 1.0f);
}

void check_limited_layouts(const std::vector<float>& a, const std::vector<float>& b, const std::vector<float>& c0,
                           int64_t m, int64_t n, int64_t k, std::initializer_list<int> mbs,
                           std::initializer_list<int> everys) {
  for (int mb : mbs)
    for (int every : everys)
      for (Trans ta : {Trans::n, Trans::t})
        for (Trans tb : {Trans::n, Trans::t})
          for (bool acc : {false, true}) {
            INFO("mb " << mb << " every " << every << " ta " << int(ta) << " tb " << int(tb) << " acc " << acc);
            std::vector<float> got = c0, want = c0;
            gemm(ta, tb, a.data(), b.data(), got.data(), m, n, k, Accumulation{true, mb, every}, acc);
            reference_limited_gemm(ta, tb, a.data(), b.data(), want.data(), m, n, k, mb, every, acc);
            REQUIRE(std::memcmp(got.data(), want.data(), got.size() * sizeof(float)) == 0);
          }
}
}  // namespace

TEST_CASE("limited accumulation equals its slow definition bit for bit", "[gemm]") {
  // signs, magnitudes over many binades, ties: values k/8 and 2^-e
  std::vector<float> a(200 * 160), b(160 * 90), c0(200 * 90);
  for (size_t i = 0; i < a.size(); ++i) a[i] = std::ldexp(std::sin(1.7f * static_cast<float>(i)), static_cast<int>(i % 23) - 11);
  for (size_t i = 0; i < b.size(); ++i) b[i] = static_cast<float>(static_cast<int>(i % 17) - 8) / 8.0f;
  for (size_t i = 0; i < c0.size(); ++i) c0[i] = std::cos(static_cast<float>(i));
  const int64_t m = 200, n = 90, k = 160;
  check_limited_layouts(a, b, c0, m, n, k, {1, 3, 10, 14, 22}, {0, 7, 128});
  // round_to_mantissa itself over random doubles, both signs, down to float subnormals
  uint64_t state = 12345;
  for (int i = 0; i < 200000; ++i) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    const double x = std::ldexp(static_cast<double>(state >> 11) / 9007199254740992.0, static_cast<int>(state % 300) - 160) *
                     ((state >> 7) & 1 ? -1 : 1);
    for (int mb : {1, 10, 22}) REQUIRE(round_to_mantissa(x, mb) == reference_round(x, mb));
  }
}

// The CPU's limited loop sums in float32 lanes and repairs midpoints of the mb-bit grid
// with TwoSum (sim/src/limited_gemm_hwy.cpp); these cases aim at each of its branches.
TEST_CASE("the vectorized limited loop keeps the definition at midpoints, double roundings and range edges", "[gemm]") {
  const auto bits_equal = [](const std::vector<float>& x, const std::vector<float>& y) {
    return std::memcmp(x.data(), y.data(), x.size() * sizeof(float)) == 0;
  };
  SECTION("a midpoint plus a small first product: the exact sum decides") {
    // row i: a = {1, m_i}; column j: b = {d_j, 1}. The first product d_j is the partial
    // sum (one bit, kept); then s = fl(d_j + m_i) is the midpoint m_i whenever |d_j| is
    // below half its float32 ulp, and the definition rounds the exact sum d_j + m_i, even
    // where a double sum would have lost d_j and seen a tie.
    const int mb = 14;
    const float q = std::ldexp(1.0f, -15);  // half the grid step at 1
    const std::vector<float> mids = {1 + q, 1 + 3 * q, -(1 + q), -(1 + 3 * q)};
    const std::vector<double> ds = {0.0, 0x1p-60, -0x1p-60, 0x1p-53, -0x1p-53, 0x1p-52, -0x1p-52, 0x1p-40, -0x1p-40};
    const int64_t m = static_cast<int64_t>(mids.size()), k = 2, n = 48;  // past three 16-lane vectors
    std::vector<float> a(m * k), b(k * n), got(m * n), want(m * n);
    for (int64_t i = 0; i < m; ++i) a[i * k] = 1, a[i * k + 1] = mids[static_cast<size_t>(i)];
    for (int64_t j = 0; j < n; ++j) b[j] = static_cast<float>(ds[static_cast<size_t>(j) % ds.size()]), b[n + j] = 1;
    gemm(Trans::n, Trans::n, a.data(), b.data(), got.data(), m, n, k, Accumulation{true, mb, 0}, false);
    reference_limited_gemm(Trans::n, Trans::n, a.data(), b.data(), want.data(), m, n, k, mb, 0, false);
    CHECK(bits_equal(got, want));
    // by hand: 1 + q is a tie between 1 (even) and 1 + 2q
    CHECK(got[0 * n + 0] == 1.0f);               // d = 0: to even
    CHECK(got[0 * n + 1] == 1.0f + 2 * q);       // d = 2^-60: past the tie (a double sum would lose it), up
    CHECK(got[0 * n + 2] == 1.0f);               // d = -2^-60: short of the tie, down
    CHECK(got[0 * n + 3] == 1.0f + 2 * q);       // d = 2^-53: up (a tie in double)
    CHECK(got[0 * n + 5] == 1.0f + 2 * q);       // d = 2^-52: up
    CHECK(got[0 * n + 7] == 1.0f + 2 * q);       // d = 2^-40: up
    CHECK(got[1 * n + 0] == 1.0f + 4 * q);       // 1 + 3q: to even (up)
    CHECK(got[1 * n + 8] == 1.0f + 2 * q);       // 1 + 3q - 2^-40: down
    CHECK(got[3 * n + 8] == -(1.0f + 4 * q));    // -(1 + 3q) - 2^-40: away from zero
  }
  SECTION("subnormal, overflowing and non-finite sums") {
    const int64_t m = 37, n = 53, k = 70;
    std::vector<float> a(m * k), b(k * n), c0(m * n);
    for (size_t i = 0; i < a.size(); ++i) a[i] = std::sin(1.3f * static_cast<float>(i));
    for (size_t i = 0; i < b.size(); ++i) b[i] = std::cos(0.9f * static_cast<float>(i));
    for (size_t i = 0; i < c0.size(); ++i) c0[i] = std::sin(static_cast<float>(i));
    for (const auto& [scale, name] : {std::pair{-70, "subnormal"}, std::pair{-63, "near FLT_MIN"}, std::pair{63, "overflow"}}) {
      std::vector<float> as = a, bs = b;
      for (float& v : as) v = std::ldexp(v, scale);
      for (float& v : bs) v = std::ldexp(v, scale);
      if (scale > 0) as[5] = INFINITY, as[k + 3] = -INFINITY, bs[7 * n + 2] = NAN;
      for (int mb : {3, 14, 22})
        for (bool acc : {false, true}) {
          INFO(name << " mb " << mb << " acc " << acc);
          std::vector<float> got = c0, want = c0;
          gemm(Trans::n, Trans::n, as.data(), bs.data(), got.data(), m, n, k, Accumulation{true, mb, 16}, acc);
          reference_limited_gemm(Trans::n, Trans::n, as.data(), bs.data(), want.data(), m, n, k, mb, 16, acc);
          REQUIRE(bits_equal(got, want));
        }
    }
  }
  SECTION("finite sums too large for the splitting factor") {
    // partial sums above FLT_MAX / (2^(23 - mb) + 1), where the vector loop's Veltkamp
    // split overflows to NaN, yet every total is finite: the tile must be redone exactly
    const int64_t m = 21, n = 35, k = 70;
    std::vector<float> a(m * k), b(k * n), c0(m * n, 0.0f);
    for (size_t i = 0; i < a.size(); ++i) a[i] = std::ldexp(std::sin(1.3f * static_cast<float>(i)), 60);
    for (size_t i = 0; i < b.size(); ++i) b[i] = std::ldexp(std::cos(0.9f * static_cast<float>(i)), 60);
    for (int mb : {3, 14}) {
      INFO("mb " << mb);
      std::vector<float> got(m * n), want(m * n);
      gemm(Trans::n, Trans::n, a.data(), b.data(), got.data(), m, n, k, Accumulation{true, mb, 16}, false);
      reference_limited_gemm(Trans::n, Trans::n, a.data(), b.data(), want.data(), m, n, k, mb, 16, false);
      REQUIRE(bits_equal(got, want));
      float largest = 0;
      for (float v : got) {
        REQUIRE(std::isfinite(v));
        largest = std::max(largest, std::fabs(v));
      }
      CHECK(largest > std::ldexp(1.0f, 120));  // the split overflows past 2^119 at mb 14, 2^107 at mb 3
    }
  }
  SECTION("scaled 8-bit operands, as the FP8 recipes feed it, over ragged shapes") {
    // e4m3-like codes (4 significant bits) times float32 block scales: sums land on
    // midpoints often, and rows and columns do not fill whole tiles
    const int64_t m = 67, n = 77, k = 300;
    uint64_t state = 99;
    const auto code = [&] { return e4m3_like_code(state); };
    std::vector<float> a(m * k), b(k * n), c0(m * n);
    for (size_t i = 0; i < a.size(); ++i) a[i] = code() * (0.0137f + 0.001f * static_cast<float>(i / 128 % 5));
    for (size_t i = 0; i < b.size(); ++i) b[i] = code() * 0.731f;
    for (size_t i = 0; i < c0.size(); ++i) c0[i] = code();
    check_limited_layouts(a, b, c0, m, n, k, {8, 13, 14}, {0, 128});
  }
}

TEST_CASE("the vectorized loop rounds every float32 of a binade as the definition does", "[gemm]") {
  // k = 1 and a = {1, -1}: each C element is one rounded sum, round(+-b_j), so the SIMD
  // rounding (Veltkamp's split, and the bit rounding at midpoints and where the split
  // overflows) meets every mantissa of a binade in both signs, against round_to_mantissa.
  // The binades: [1, 2), and the one where (2^(23 - mb) + 1) b crosses FLT_MAX.
  const int64_t n = int64_t{1} << 23;
  const float a[2] = {1.0f, -1.0f};
  std::vector<float> b(static_cast<size_t>(n)), got(static_cast<size_t>(2 * n));
  for (int mb = 1; mb <= 22; ++mb)
    for (int e : {0, 127 - (23 - mb)}) {
      INFO("mb " << mb << " binade 2^" << e);
      for (int64_t j = 0; j < n; ++j)
        b[static_cast<size_t>(j)] = std::bit_cast<float>(static_cast<uint32_t>((e + 127) << 23) | static_cast<uint32_t>(j));
      gemm(Trans::n, Trans::n, a, b.data(), got.data(), 2, n, 1, Accumulation{true, mb, 0}, false);
      int64_t wrong = 0;
      for (int64_t j = 0; j < n; ++j) {
        const float want = round_to_mantissa(b[static_cast<size_t>(j)], mb);
        wrong += std::bit_cast<uint32_t>(got[static_cast<size_t>(j)]) != std::bit_cast<uint32_t>(want);
        wrong += std::bit_cast<uint32_t>(got[static_cast<size_t>(n + j)]) != std::bit_cast<uint32_t>(-want);
      }
      REQUIRE(wrong == 0);
    }
}

// The claim behind the loop's rounding, over every normal float32 (both signs) and every
// width the recipes allow: Veltkamp's split rounds to nearest like round_to_mantissa
// wherever g stays finite, ties to even included, and where g overflows the result is not
// finite (so the loop's rerun catches it). About nine minutes on one core, so hidden from
// the suite: sim_test_gradcheck "[.exhaustive]".
TEST_CASE("Veltkamp's split rounds every normal float32 to nearest even", "[gemm][.exhaustive]") {
  for (int mb = 1; mb <= 22; ++mb) {
    const int drop = 23 - mb;
    const float split = static_cast<float>((1u << drop) + 1u);
    int64_t wrong = 0;
    for (uint32_t bits = 0x00800000u; bits < 0x7f800000u; ++bits) {
      for (const float s : {std::bit_cast<float>(bits), -std::bit_cast<float>(bits)}) {
        const float g = s * split;
        const float hi = g + (s - g);
        if (!std::isfinite(g)) wrong += std::isfinite(hi);
        else wrong += std::bit_cast<uint32_t>(hi) != std::bit_cast<uint32_t>(round_to_mantissa(s, mb));
      }
    }
    INFO("mb " << mb);
    REQUIRE(wrong == 0);
  }
}

TEST_CASE("the vectorized limited loop keeps the definition on every SIMD target", "[gemm][simd]") {
  // the loop is compiled once per Highway target (4 to 16 float lanes, a different
  // midpoint test on AVX-512); each one the CPU supports is forced in turn
  const int64_t m = 23, n = 41, k = 150;
  uint64_t state = 5;
  const auto code = [&] { return e4m3_like_code(state); };
  std::vector<float> a(m * k), b(k * n), c0(m * n), a_big(m * k), b_big(k * n);
  for (size_t i = 0; i < a.size(); ++i) a[i] = code() * 0.0137f, a_big[i] = std::ldexp(std::sin(1.3f * static_cast<float>(i)), 60);
  for (size_t i = 0; i < b.size(); ++i) b[i] = code() * 0.731f, b_big[i] = std::ldexp(std::cos(0.9f * static_cast<float>(i)), 60);
  for (size_t i = 0; i < c0.size(); ++i) c0[i] = code();
  const auto targets = lpx::cast_testing::simd_targets();
  REQUIRE(!targets.empty());
  for (const auto& t : targets) {
    lpx::cast_testing::force_simd_target(t.id);
    INFO("forced target " << t.name);
    check_limited_layouts(a, b, c0, m, n, k, {1, 14, 22}, {0, 128});
    check_limited_layouts(a_big, b_big, c0, m, n, k, {3, 14}, {16});  // sums past the split's range
  }
  lpx::cast_testing::force_simd_target(0);
}

namespace {
// The exact fp32 order, written the slow way: one element at a time, std::fma per product.
void reference_exact_gemm(Trans ta, Trans tb, const float* a, const float* b, float* c, int64_t m, int64_t n,
                          int64_t k, bool accumulate) {
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      float s = 0;
      for (int64_t kk = 0; kk < k; ++kk)
        s = std::fma(ta == Trans::n ? a[i * k + kk] : a[kk * m + i], tb == Trans::n ? b[kk * n + j] : b[j * k + kk], s);
      c[i * n + j] = accumulate ? c[i * n + j] + s : s;
    }
}
}  // namespace

namespace {
void check_exact_layouts(int64_t m, int64_t n, int64_t k, lpx::GemmOrder order, bool expect_equal) {
  std::vector<float> a(m * k), b(k * n), c0(m * n);
  for (size_t i = 0; i < a.size(); ++i) a[i] = std::ldexp(std::sin(1.3f * static_cast<float>(i)), static_cast<int>(i % 13) - 6);
  for (size_t i = 0; i < b.size(); ++i) b[i] = std::cos(0.7f * static_cast<float>(i));
  for (size_t i = 0; i < c0.size(); ++i) c0[i] = std::sin(static_cast<float>(i));
  for (Trans ta : {Trans::n, Trans::t})
    for (Trans tb : {Trans::n, Trans::t})
      for (bool acc : {false, true}) {
        INFO("ta " << int(ta) << " tb " << int(tb) << " acc " << acc);
        INFO("m " << m << " n " << n << " k " << k << " order " << gemm_order_name(order));
        std::vector<float> got = c0, want = c0, dot = c0;
        gemm(ta, tb, a.data(), b.data(), got.data(), m, n, k, Accumulation{}, acc, order);
        reference_exact_gemm(ta, tb, a.data(), b.data(), want.data(), m, n, k, acc);
        REQUIRE((std::memcmp(got.data(), want.data(), got.size() * sizeof(float)) == 0) == expect_equal);
        if (!expect_equal) continue;
        // ordered_dot, the per-element rule the device kernel runs
        for (int64_t i = 0; i < m; ++i)
          for (int64_t j = 0; j < n; ++j) {
            const float* ai = ta == Trans::n ? a.data() + i * k : a.data() + i;
            const float* bj = tb == Trans::n ? b.data() + j : b.data() + j * k;
            dot[static_cast<size_t>(i * n + j)] = lpx::ordered_dot(ai, ta == Trans::n ? 1 : m, bj, tb == Trans::n ? n : 1, k,
                                                                   lpx::LimitedSum{}, c0[static_cast<size_t>(i * n + j)], acc);
          }
        REQUIRE(std::memcmp(dot.data(), want.data(), dot.size() * sizeof(float)) == 0);
      }
}
}  // namespace

TEST_CASE("the exact GEMM order is one fma per product in increasing k, on the CPU and in ordered_dot", "[gemm]") {
  // one rounding per product: (1 + 2^-12)^2 - 1 keeps its 2^-24 term (a product rounded
  // before its addition would lose it)
  const float e = std::ldexp(1.0f, -12);
  const float a2[2] = {1.0f, 1.0f + e}, b2[2] = {-1.0f, 1.0f + e};
  float c = 0;
  gemm(Trans::n, Trans::n, a2, b2, &c, 1, 1, 2, Accumulation{}, false, lpx::GemmOrder::exact);
  CHECK(c == std::ldexp(1.0f, -11) + std::ldexp(1.0f, -24));
  // every layout, ragged sizes past the 64-row chunks, accumulation
  check_exact_layouts(130, 70, 300, lpx::GemmOrder::exact, true);
}

TEST_CASE("the exact order's register tiles keep it on every SIMD target, and fast takes them there", "[gemm][simd]") {
  // the tiles are compiled per Highway target (8 rows x 2 vectors of 16 on AVX-512, 4 x 2
  // of 8 on AVX2; targets without FMA keep the fmaf loop); shapes that leave a partial
  // vector, a single-vector panel, rows past the last whole tile, and k = 1
  const auto targets = lpx::cast_testing::simd_targets();
  REQUIRE(!targets.empty());
  for (const auto& t : targets) {
    lpx::cast_testing::force_simd_target(t.id);
    INFO("forced target " << t.name);
    check_exact_layouts(23, 41, 37, lpx::GemmOrder::exact, true);
    check_exact_layouts(9, 16, 1, lpx::GemmOrder::exact, true);
    check_exact_layouts(70, 3, 5, lpx::GemmOrder::exact, true);
    // fast: the exact order's bits wherever the tiles run, Eigen's own order elsewhere
    // (which these operands tell apart: sums of products with many significant bits)
    check_exact_layouts(23, 41, 37, lpx::GemmOrder::fast, lpx::sim::fast_gemm_is_exact());
  }
  lpx::cast_testing::force_simd_target(0);
}

TEST_CASE("the exact order keeps Inf and NaN where the definition has them", "[gemm]") {
  const int64_t m = 11, n = 37, k = 20;
  std::vector<float> a(m * k), b(k * n);
  for (size_t i = 0; i < a.size(); ++i) a[i] = std::sin(1.7f * static_cast<float>(i));
  for (size_t i = 0; i < b.size(); ++i) b[i] = std::cos(0.3f * static_cast<float>(i));
  a[3 * k + 5] = std::numeric_limits<float>::infinity();   // row 3: every sum meets an infinite product
  b[7 * n + 36] = std::numeric_limits<float>::quiet_NaN();  // column 36, in the partial vector
  b[2 * n + 1] = std::numeric_limits<float>::max();         // column 1 overflows in some rows
  std::vector<float> got(m * n), want(m * n);
  gemm(Trans::n, Trans::n, a.data(), b.data(), got.data(), m, n, k, Accumulation{}, false, lpx::GemmOrder::exact);
  reference_exact_gemm(Trans::n, Trans::n, a.data(), b.data(), want.data(), m, n, k, false);
  CHECK(std::memcmp(got.data(), want.data(), got.size() * sizeof(float)) == 0);
  CHECK(std::isnan(got[static_cast<size_t>(5 * n + 36)]));
  CHECK(!std::isfinite(got[static_cast<size_t>(3 * n + 10)]));
}


// A GPU's arithmetic makes the NaN 0x7fffffff, whose widened payload has every kept bit
// set: rounding its bits would carry into the sign and leave -0, so a NaN product would
// vanish from the GPU's limited sum and not from the CPU's (x86 makes 0xffc00000). The
// definition (reference_round) passes every NaN through; so must every executor.
TEST_CASE("a NaN in a limited partial sum stays NaN, whatever its payload", "[gemm]") {
  const float gpu_nan = std::bit_cast<float>(0x7fffffffu), neg_nan = std::bit_cast<float>(0xffffffffu);
  for (int mb : {1, 3, 10, 13, 22}) {
    INFO("mb " << mb);
    CHECK(std::isnan(lpx::round_mantissa_bits(static_cast<double>(gpu_nan), mb)));
    CHECK(std::isnan(lpx::round_mantissa_bits(std::bit_cast<double>(0xffffffffffffffffull), mb)));
    CHECK(std::isnan(lpx::limited_add(0.0f, gpu_nan, 1.0f, mb)));
    CHECK(std::isnan(lpx::limited_add(2.0f, 1.0f, neg_nan, mb)));
  }
  // the vectorized loop, which reruns a tile whose total is not finite on the bits
  const int64_t m = 9, n = 37, k = 40;
  std::vector<float> a(m * k), b(k * n), c0(m * n, 0.5f);
  for (size_t i = 0; i < a.size(); ++i) a[i] = std::sin(1.7f * static_cast<float>(i));
  for (size_t i = 0; i < b.size(); ++i) b[i] = std::cos(0.3f * static_cast<float>(i));
  a[4 * k + 11] = gpu_nan;  // row 4
  b[3 * n + 20] = neg_nan;  // column 20
  for (int mb : {3, 13, 22})
    for (int64_t every : {int64_t{0}, int64_t{16}})
      for (bool acc : {false, true}) {
        INFO("mb " << mb << " every " << every << " acc " << acc);
        std::vector<float> got = c0, want = c0;
        gemm(Trans::n, Trans::n, a.data(), b.data(), got.data(), m, n, k, Accumulation{true, mb, static_cast<int>(every)}, acc);
        reference_limited_gemm(Trans::n, Trans::n, a.data(), b.data(), want.data(), m, n, k, mb, every, acc);
        for (int64_t i = 0; i < m; ++i)
          for (int64_t j = 0; j < n; ++j) {
            const auto at = static_cast<size_t>(i * n + j);
            const float dot = lpx::ordered_dot(a.data() + i * k, 1, b.data() + j, n, k, lpx::LimitedSum{mb, every},
                                               c0[at], acc);
            INFO("element " << i << ", " << j);
            REQUIRE(std::isnan(want[at]) == (i == 4 || j == 20));
            REQUIRE(std::isnan(got[at]) == std::isnan(want[at]));
            REQUIRE(std::isnan(dot) == std::isnan(want[at]));
            if (!std::isnan(want[at])) REQUIRE(std::bit_cast<uint32_t>(got[at]) == std::bit_cast<uint32_t>(want[at]));
          }
      }
}

TEST_CASE("ordered_dot's limited rule equals the limited accumulator's slow definition", "[gemm]") {
  const int64_t m = 40, n = 30, k = 260;
  std::vector<float> a(m * k), b(k * n), c0(m * n);
  for (size_t i = 0; i < a.size(); ++i) a[i] = std::ldexp(std::sin(1.7f * static_cast<float>(i)), static_cast<int>(i % 23) - 11);
  for (size_t i = 0; i < b.size(); ++i) b[i] = static_cast<float>(static_cast<int>(i % 17) - 8) / 8.0f;
  for (size_t i = 0; i < c0.size(); ++i) c0[i] = std::cos(static_cast<float>(i));
  for (int mb : {1, 10, 14})
    for (int64_t every : {int64_t{0}, int64_t{128}})
      for (bool acc : {false, true}) {
        INFO("mb " << mb << " every " << every << " acc " << acc);
        std::vector<float> want = c0;
        reference_limited_gemm(Trans::n, Trans::n, a.data(), b.data(), want.data(), m, n, k, mb, every, acc);
        for (int64_t i = 0; i < m; ++i)
          for (int64_t j = 0; j < n; ++j) {
            const auto at = static_cast<size_t>(i * n + j);
            const float got = lpx::ordered_dot(a.data() + i * k, 1, b.data() + j, n, k, lpx::LimitedSum{mb, every}, c0[at], acc);
            REQUIRE(std::bit_cast<uint32_t>(got) == std::bit_cast<uint32_t>(want[at]));
          }
      }
}

// The cases where rounding a double sum and rounding the exact sum part: a midpoint of
// the grid plus a partial sum 2^-25 to 2^-200 of it, which a double sum loses or keeps
// only in its last bit. limited_add rounds the double sum to odd first; the reference
// does the arithmetic in integers.
TEST_CASE("limited_add rounds the exact sum once, however small the partial sum beside a midpoint", "[gemm]") {
  uint64_t state = 77;
  int64_t checked = 0;
  for (int mb : {1, 7, 10, 14, 21, 22})
    for (int i = 0; i < 20000; ++i) {
      state = state * 6364136223846793005ull + 1442695040888963407ull;
      const auto r = static_cast<uint32_t>(state >> 32);
      // a midpoint of the mb-bit grid (or a grid point, one time in four), either sign
      const uint32_t grid = (r & 0x7fffu) << (23 - std::min(mb, 15));
      uint32_t bits = (static_cast<uint32_t>(100 + r % 40) << 23) | (grid & 0x7fffffu);
      if ((r >> 28) % 4 != 0) bits |= uint32_t{1} << (22 - mb);
      const float mid = std::bit_cast<float>(bits | ((r >> 31) << 31));
      // a small partial sum: 2^-25 .. 2^-200 of it, but at least 2^-140 (a float32 subnormal), either sign
      const float small = std::ldexp((r >> 30) & 1 ? -1.0f : 1.0f, std::max(-140, std::ilogb(mid) - 25 - static_cast<int>(r % 176)));
      for (const auto& [partial, a] : {std::pair{small, mid}, std::pair{mid, small}}) {
        INFO("mb " << mb << " partial " << partial << " product " << a);
        REQUIRE(std::bit_cast<uint32_t>(lpx::limited_add(partial, a, 1.0f, mb)) ==
                std::bit_cast<uint32_t>(reference_round_sum(partial, a, mb)));
        ++checked;
      }
    }
  CHECK(checked == 240000);
  // by hand: 1 + 2^-15 is a tie of the 14-bit grid; 2^-80 beside it decides
  CHECK(lpx::limited_add(0x1p-80f, 1.0f + 0x1p-15f, 1.0f, 14) == 1.0f + 0x1p-14f);
  CHECK(lpx::limited_add(-0x1p-80f, 1.0f + 0x1p-15f, 1.0f, 14) == 1.0f);
  CHECK(lpx::limited_add(0.0f, 1.0f + 0x1p-15f, 1.0f, 14) == 1.0f);
}

namespace {
// Every operand untouched; attention kept in (fp32) high precision or not.
Recipe identity_recipe(bool keep_attention) {
  Recipe r = recipe_by_name("fp32");
  r.high_precision.attention = keep_attention;
  r.high_precision.format = RoleSpec::Kind::fp32;
  return r;
}

// Central differences in float32 on the largest-gradient coordinates of each tensor.
void check_model(Model& m, const Batch& b, float eps) {
  m.forward_backward(b, 0, false);
  const std::vector<float> g = m.grads();
  auto& w = m.params();
  for (const ParamTensor& t : m.tensors()) {
    INFO(t.name);
    int64_t best = t.offset;
    for (int64_t i = t.offset; i < t.offset + t.size; ++i)
      if (std::fabs(g[i]) > std::fabs(g[best])) best = i;
    for (int64_t i : {best, t.offset + t.size / 2}) {
      const float w0 = w[i];
      w[i] = w0 + eps;
      const double lp = m.evaluate(b, 0, nullptr);
      w[i] = w0 - eps;
      const double lm = m.evaluate(b, 0, nullptr);
      w[i] = w0;
      const double num = (lp - lm) / (2.0 * eps);
      INFO("index " << i << " analytic " << g[i] << " numeric " << num);
      CHECK(std::fabs(num - g[i]) <= 2e-2 * std::fabs(g[i]) + 2e-4);
    }
  }
}
}  // namespace

TEST_CASE("MLP gradients (float32, whole model)", "[gradcheck]") {
  for (Activation act : {Activation::relu, Activation::gelu}) {
    ModelConfig c;
    c.kind = ModelKind::mlp;
    c.inputs = 12;
    c.hidden = {16, 8};
    c.activation = act;
    auto m = make_model(c, identity_recipe(true), {}, 4, 7);
    Batch b;
    b.batch = 4;
    auto x = randn(48, 21);
    b.x_f.assign(x.begin(), x.end());
    b.y = {0, 3, 9, 3};
    check_model(*m, b, 1e-3f);  // small: ReLU's kink
  }
}

TEST_CASE("GPT gradients (float32, whole model)", "[gradcheck]") {
  for (int variant = 0; variant < 3; ++variant) {
    ModelConfig c;
    c.kind = ModelKind::gpt;
    c.vocab = 11;
    c.context = 6;
    c.layers = 2;
    c.channels = 16;
    c.heads = 2;
    c.activation = variant == 1 ? Activation::swiglu : Activation::gelu;
    INFO("variant " << variant);
    // variant 2: attention products through QuantGemms (the quantized-attention path)
    auto m = make_model(c, identity_recipe(variant != 2), {}, 2, 8);
    // larger weights than GPT-2's init so that every gradient is well above float noise
    for (const ParamTensor& t : m->tensors())
      if (t.decay)
        for (int64_t i = 0; i < t.size; ++i) m->params()[t.offset + i] *= 10.0f;
    Batch b;
    b.batch = 2;
    b.x_i = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 0, 1};
    b.y = {2, 3, 4, 5, 6, 7, 8, 9, 10, 0, 1, 2};
    check_model(*m, b, 1e-2f);
  }
}
