// AdamW (Loshchilov & Hutter 2019) over the model's flat parameter array, with the
// recipe's master-weight and optimizer-state precisions:
//   master fp32      w = w - lr (m_hat / (sqrt(v_hat) + eps) + wd w)  in float32
//   master bf16_sr   the weights are kept as bfloat16 values: the float32 update above is
//                    rounded back to bfloat16 stochastically, with random bits
//                    lpx::random_bits(seed, stream = 0x4d535452 ("MSTR") xor the step's
//                    low 32 bits, index = flat parameter index)
//                    through lpx's codec (fake_cast_array, Rounding::sr), so the result
//                    never depends on the thread count
//   master bf16      (AdamWConfig::bf16_master_rne) the same with round to nearest even
//   moments bf16     m and v are stored as bfloat16 (round to nearest even after each
//                    update); fp32 keeps them in float32
//   moments fp8_e4m3 per parameter tensor, m as E4M3 with an fp32 per-tensor scale
//                    (lpx::fake_quantize, preset fp8_tensor, RNE) and v as the square of
//                    sqrt(v) quantized the same way (so small v are not flushed to zero)
// Weight decay applies to tensors marked `decay` (matrices and embeddings).
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "lpx/recipes/recipe.hpp"
#include "lpx/sim/model.hpp"

namespace lpx::sim {

struct AdamWConfig {
  float beta1 = 0.9f, beta2 = 0.95f, eps = 1e-8f, weight_decay = 0.0f;
  // With master bf16_sr: round the updated weights to bfloat16 to nearest even instead of
  // stochastically (plain BF16 master weights: updates smaller than half a BF16 step of
  // the weight are lost, docs/recipes.md#instability-mechanisms).
  bool bf16_master_rne = false;
};

class AdamW {
 public:
  // master and moments are the recipe's master_weights and optimizer_state.
  AdamW(const std::vector<ParamTensor>& tensors, size_t n, AdamWConfig cfg, MasterWeights master,
        OptimizerState moments, uint64_t seed);
  // One update with learning rate lr at 0-based step `step`; returns ||delta w|| (the
  // update norm, for the update/weight ratio).
  double update(std::vector<float>& w, const std::vector<float>& g, float lr, uint64_t step);
  // Rounds freshly initialised weights to the master precision (bf16: RNE).
  void round_master(std::vector<float>& w) const;
  // sqrt(mean(g^2 / (v_hat + eps^2))) of the last update, with v_hat the stored (possibly
  // rounded) second moment, bias-corrected: about 1 while v tracks g^2, large when the
  // second moment under-estimates the gradient (Wortsman et al. 2023).
  double last_adam_rms() const { return adam_rms_; }
  std::vector<float>& m() { return m_; }
  std::vector<float>& v() { return v_; }

 private:
  void to_fp8_per_tensor();
  std::vector<std::pair<int64_t, int64_t>> spans_;  // (offset, size) of each tensor
  std::vector<uint8_t> decay_;
  AdamWConfig cfg_;
  MasterWeights master_;
  OptimizerState moments_;
  uint64_t seed_;
  std::vector<float> m_, v_, next_;
  double adam_rms_ = 0;
};

}  // namespace lpx::sim
