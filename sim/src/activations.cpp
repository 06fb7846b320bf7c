// GELU in float32 for the models (layers.hpp, gelu_forward / gelu_backward with T = float),
// vectorized. The tanh approximation is written through the logistic function,
//   0.5 x (1 + tanh(u)) = x sigmoid(2u) = x / (1 + exp(-2u)),  u = sqrt(2/pi) (x + 0.044715 x^3),
// which needs one exp and no cancellation (1 + tanh(u) loses its relative accuracy where
// tanh(u) is near -1; the logistic form keeps it). exp is Cephes' expf algorithm (Cody-Waite
// reduction by ln 2 in two parts, a degree-6 polynomial on |r| <= ln(2)/2, the power of two
// put into the exponent bits), inlined so that GCC vectorizes the loops; the argument is
// clamped to [-87, 88], where 2^n stays a normal float, and is Inf past 88. Every step is an IEEE add,
// multiply, divide, min, max or integer operation (no FMA: the build compiles with
// -ffp-contract=off), so the AVX-512, AVX2 and baseline clones give the same bits.
// libm's tanhf (through expm1f) was a third of a gpt-small fp32 training step.
#include <algorithm>
#include <bit>
#include <cstdint>
#include <limits>

#include "lpx/numerics/parallel.hpp"
#include "lpx/sim/layers.hpp"

#ifdef __clang__
// the sanitized build (clang -O1) cannot vectorize the loops below and says so; that is fine
#pragma clang diagnostic ignored "-Wpass-failed"
#endif

namespace lpx::sim::layers {
namespace {

constexpr float kS = 0.7978845608028654f;  // sqrt(2/pi)
constexpr float kC = 0.044715f;
constexpr int64_t kChunk = 4096;  // elements per OpenMP work item

[[gnu::always_inline]] inline float exp_f32(float y_in) {
  const float y = std::min(std::max(y_in, -87.0f), 88.0f);
  // n = round(y / ln 2), left in t's low mantissa bits by adding 1.5 * 2^23
  const float t = y * 1.44269504088896341f + 12582912.0f;
  const float n = t - 12582912.0f;
  const float r = (y - n * 0.693359375f) - n * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * (r * r) + r + 1.0f;
  const int32_t n_int = std::bit_cast<int32_t>(t) - 0x4B400000;  // bits of 1.5 * 2^23
  const float e = p * std::bit_cast<float>((n_int + 127) << 23);
  // past 88, Inf: the gate is then 0 and x times it the -0 float32 rounds x sigmoid(2u)
  // to (exp(-87), the clamp's value below, leaves the gate at 1 exactly, as it should)
  return y_in > 88.0f ? std::numeric_limits<float>::infinity() : e;
}

// sigmoid(2u) for u of x
[[gnu::always_inline]] inline float gate(float x) {
  const float u = kS * (x + kC * x * x * x);
  return 1.0f / (1.0f + exp_f32(-2.0f * u));
}

__attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default"))) void forward_kernel(
    float* __restrict out, const float* __restrict inp, int64_t n) {
  // omp simd: the loop calls an inlined exp; the pragma vectorizes it whatever the
  // optimization level's cost model decides
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) out[i] = inp[i] * gate(inp[i]);
}

__attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default"))) void backward_kernel(
    float* __restrict dinp, const float* __restrict inp, const float* __restrict dout, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) {
    const float x = inp[i];
    const float g = gate(x);
    // d/dx x sigmoid(2u) = g + x g (1 - g) 2u', 2u' = 2 sqrt(2/pi) (1 + 3 * 0.044715 x^2)
    const float local = g + x * (g * (1.0f - g)) * ((2.0f * kS) * (1.0f + (3.0f * kC) * x * x));
    dinp[i] += local * dout[i];
  }
}

}  // namespace

void gelu_forward_f32(float* out, const float* inp, int64_t n) {
  parallel_for((n + kChunk - 1) / kChunk, threads_if(n > kChunk), [&](int64_t i) {
    const int64_t c = i * kChunk;
    forward_kernel(out + c, inp + c, std::min(kChunk, n - c));
  });
}

void gelu_backward_f32(float* dinp, const float* inp, const float* dout, int64_t n) {
  parallel_for((n + kChunk - 1) / kChunk, threads_if(n > kChunk), [&](int64_t i) {
    const int64_t c = i * kChunk;
    backward_kernel(dinp + c, inp + c, dout + c, std::min(kChunk, n - c));
  });
}

}  // namespace lpx::sim::layers
