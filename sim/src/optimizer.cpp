// AdamW with fp32 or bf16-SR master weights and fp32 or bf16 moments.
#include "lpx/sim/optimizer.hpp"

#include <algorithm>
#include <cmath>
#include <span>

#include "lpx/formats/cast.hpp"
#include "lpx/formats/element_format.hpp"
#include "lpx/formats/quantize.hpp"

namespace lpx::sim {

namespace {
constexpr uint32_t kStreamMasterSr = 0x4d535452u;  // "MSTR": xor'ed with the step's low bits

void to_bf16(std::vector<float>& x, Rounding round, uint64_t seed, uint32_t stream) {
  CastOptions opt;
  opt.round = round;
  opt.overflow = Overflow::ieee;
  opt.seed = seed;
  opt.stream = stream;
  fake_cast_array(std::span<const float>(x), std::span<float>(x), fmt16::bf16, opt);
}
}  // namespace

AdamW::AdamW(const std::vector<ParamTensor>& tensors, size_t n, AdamWConfig cfg, MasterWeights master,
             OptimizerState moments, uint64_t seed)
    : decay_(n, 0), cfg_(cfg), master_(master), moments_(moments), seed_(seed), m_(n, 0.0f), v_(n, 0.0f),
      next_(n, 0.0f) {
  for (const ParamTensor& t : tensors) spans_.emplace_back(t.offset, t.size);
  for (const ParamTensor& t : tensors)
    if (t.decay)
      std::fill_n(decay_.begin() + t.offset, t.size, uint8_t{1});
}

void AdamW::round_master(std::vector<float>& w) const {
  if (master_ == MasterWeights::bf16_sr) to_bf16(w, Rounding::rne, 0, 0);
}

void AdamW::to_fp8_per_tensor() {
  // Per parameter tensor: m as E4M3 with an fp32 per-tensor scale (fp8_tensor, RNE), and
  // v through its square root (sqrt(v) quantized the same way, then squared), which halves
  // v's dynamic range in the exponent so that small second moments are not flushed.
  static const BlockFormat fmt = parse_block_format("fp8_tensor");
  for (const auto& [offset, size] : spans_) {
    const int64_t shape[1] = {size};
    const auto n = static_cast<size_t>(size);
    std::vector<float> in(m_.begin() + offset, m_.begin() + offset + size), out(n);
    fake_quantize(TensorView<const float>{in, shape}, out, fmt);
    std::copy(out.begin(), out.end(), m_.begin() + offset);
    for (size_t i = 0; i < n; ++i) in[i] = std::sqrt(v_[static_cast<size_t>(offset) + i]);
    fake_quantize(TensorView<const float>{in, shape}, out, fmt);
    for (size_t i = 0; i < n; ++i) v_[static_cast<size_t>(offset) + i] = out[i] * out[i];
  }
}

double AdamW::update(std::vector<float>& w, const std::vector<float>& g, float lr, uint64_t step) {
  const auto n = static_cast<int64_t>(w.size());
  const double t = static_cast<double>(step + 1);
  const float bc1 = static_cast<float>(1.0 - std::pow(double{cfg_.beta1}, t));
  const float bc2 = static_cast<float>(1.0 - std::pow(double{cfg_.beta2}, t));
  const float b1 = cfg_.beta1, b2 = cfg_.beta2, eps = cfg_.eps, wd = cfg_.weight_decay;
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    const float gi = g[static_cast<size_t>(i)];
    const float mi = b1 * m_[static_cast<size_t>(i)] + (1.0f - b1) * gi;
    const float vi = b2 * v_[static_cast<size_t>(i)] + (1.0f - b2) * gi * gi;
    m_[static_cast<size_t>(i)] = mi;
    v_[static_cast<size_t>(i)] = vi;
    const float mhat = mi / bc1, vhat = vi / bc2;
    const float wi = w[static_cast<size_t>(i)];
    const float decay = decay_[static_cast<size_t>(i)] ? wd * wi : 0.0f;
    next_[static_cast<size_t>(i)] = wi - lr * (mhat / (std::sqrt(vhat) + eps) + decay);
  }
  if (moments_ == OptimizerState::bf16) {
    to_bf16(m_, Rounding::rne, 0, 0);
    to_bf16(v_, Rounding::rne, 0, 0);
  } else if (moments_ == OptimizerState::fp8_e4m3) {
    to_fp8_per_tensor();
  }
  if (master_ == MasterWeights::bf16_sr && cfg_.bf16_master_rne)
    to_bf16(next_, Rounding::rne, 0, 0);
  else if (master_ == MasterWeights::bf16_sr)
    to_bf16(next_, Rounding::sr, seed_, kStreamMasterSr ^ static_cast<uint32_t>(step));
  // ||w_new - w_old|| and RMS(g^2 / v_hat), summed in double in index order so they do
  // not depend on the thread count.
  double du = 0, ratio = 0;
  const double eps2 = double{eps} * eps;
  for (int64_t i = 0; i < n; ++i) {
    const auto k = static_cast<size_t>(i);
    const double d = double{next_[k]} - double{w[k]};
    du += d * d;
    ratio += double{g[k]} * g[k] / (double{v_[k]} / bc2 + eps2);
  }
  adam_rms_ = n > 0 ? std::sqrt(ratio / static_cast<double>(n)) : 0;
  w.swap(next_);
  return std::sqrt(du);
}

}  // namespace lpx::sim
