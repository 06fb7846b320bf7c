// The instability mechanisms of lpx train (README "Divergence detection",
// docs/recipes.md#instability-mechanisms) and the probes the trainer logs for them: an
// injected outlier shows up in its metric at the chosen step, QK normalization bounds the
// attention logits that grow without it, z-loss holds the output logits down, and plain
// BF16 master weights lose updates that SR keeps.
#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

#include "lpx/recipes/recipe.hpp"
#include "lpx/sim/gemm.hpp"
#include "lpx/sim/trainer.hpp"
#include "train_helpers.hpp"

using namespace lpx::sim;

namespace {

std::vector<StepMetrics> run_steps(const TrainConfig& c) {
  Trainer t(c);
  std::vector<StepMetrics> out;
  while (!t.done()) out.push_back(t.step());
  return out;
}

TrainConfig small_mlp(const std::string& recipe, int64_t steps) {
  TrainConfig c;
  c.model.kind = ModelKind::mlp;
  c.model.hidden = {64};
  c.recipe = recipe;
  c.steps = steps;
  c.batch = 32;
  c.threads = 1;
  return c;
}

}  // namespace

TEST_CASE("an injected activation outlier shows up in act_outlier_ratio and amax_staleness at its step") {
  TrainConfig c = small_mlp("fp8-delayed", 12);
  c.inject = "activation";
  c.inject_layer = "fc1";
  c.inject_step = 8;
  c.inject_channel = 3;
  c.inject_magnitude = 100;
  const auto m = run_steps(c);
  const auto clean = run_steps(small_mlp("fp8-delayed", 12));
  for (int s = 0; s < 8; ++s) {
    INFO("step " << s);
    CHECK(m[static_cast<size_t>(s)].loss == clean[static_cast<size_t>(s)].loss);  // nothing before the step
  }
  CHECK(m[8].act_outlier_ratio > 2 * m[7].act_outlier_ratio);
  CHECK(m[8].amax_staleness > 20);  // the delayed scale was chosen from amaxes 100x smaller
  CHECK(m[7].amax_staleness < 2);
  // the fp32 recipe has no delayed scaling: no staleness to measure
  CHECK(std::isnan(clean[5].amax_staleness) == false);
  CHECK(std::isnan(run_steps(small_mlp("fp32", 3))[2].amax_staleness));
}

TEST_CASE("an injected weight outlier changes the weights once, at its step") {
  TrainConfig c = small_mlp("bf16", 6);
  c.inject = "weight";
  c.inject_layer = "fc0";
  c.inject_step = 4;
  c.inject_channel = 400;
  c.inject_magnitude = 1000;
  const auto m = run_steps(c);
  const auto clean = run_steps(small_mlp("bf16", 6));
  CHECK(m[3].loss == clean[3].loss);
  CHECK(m[4].output_logit_max > 10 * clean[4].output_logit_max);
  CHECK(m[4].loss > 2 * clean[4].loss);
}

TEST_CASE("bad mechanism settings are refused with a message") {
  TrainConfig c = small_mlp("fp32", 10);
  c.inject = "activation";
  c.inject_layer = "fc9";
  c.inject_magnitude = 10;
  CHECK_THROWS_WITH(Trainer(c), Catch::Contains("inject_layer 'fc9' is not a layer of this model (fc0, fc1)"));
  c.inject_layer = "fc1";
  c.inject_step = 10;
  CHECK_THROWS_WITH(Trainer(c), Catch::Contains("inject_step must be a step of the run"));
  c.inject = "gradient";
  CHECK_THROWS_WITH(Trainer(c), Catch::Contains("inject must be activation or weight"));
  TrainConfig q = small_mlp("fp32", 10);
  q.model.qk_norm = true;
  CHECK_THROWS_AS(Trainer(q), std::invalid_argument);
}

TEST_CASE("attention logits grow at a high learning rate; QK-norm bounds them, z-loss holds the output logits") {
  // a short GPT at lr 0.1 (33x the default): without QK-norm the largest attention logit
  // grows far past its early values (Wortsman et al. 2023); with it, it stays under
  // sqrt(head size)
  TrainConfig c = test::tiny_gpt("bf16", 1, 32, 2, 16, 8);
  c.steps = 60;
  c.lr = 0.1f;
  const auto plain = run_steps(c);
  c.model.qk_norm = true;
  c.model.z_loss = 1e-4f;
  const auto fixed = run_steps(c);
  const double bound = std::sqrt(16.0);
  double plain_max = 0, fixed_max = 0;
  for (size_t i = 0; i < plain.size(); ++i) {
    plain_max = std::max(plain_max, plain[i].attn_logit_max);
    fixed_max = std::max(fixed_max, fixed[i].attn_logit_max);
  }
  INFO("largest attention logit: plain " << plain_max << ", qk-norm " << fixed_max);
  CHECK(plain_max > 10 * bound);
  CHECK(fixed_max <= bound * 1.0001);
  CHECK(fixed.back().output_logit_max < plain.back().output_logit_max);
}

TEST_CASE("plain BF16 master weights lose small updates that fp32 and SR master weights keep") {
  TrainConfig c = small_mlp("fp32", 40);
  c.lr = 1e-5f;  // updates far below half a BF16 step of most weights
  const auto fp32 = run_steps(c);
  c.master_weights = "bf16";
  const auto rne = run_steps(c);
  c.master_weights = "bf16_sr";
  const auto sr = run_steps(c);
  // RNE rounds nearly every update away: the weights (and the update ratio) stand still
  CHECK(rne.back().update_ratio < 0.1 * fp32.back().update_ratio);
  CHECK(sr.back().update_ratio > 0.3 * fp32.back().update_ratio);
}

TEST_CASE("amax_staleness is the largest finite |x| over the history's amax, NaN and Inf left out") {
  // fwd_x of fp8-delayed keeps an amax history; the weights are small and ordinary.
  QuantGemms g(lpx::OperandQuantizer(lpx::recipe_by_name("fp8-delayed"),
                                     lpx::LayerInfo{0, 1, lpx::LayerInfo::linear, "l"}, 0),
               lpx::Accumulation{});
  g.probe_outliers = false;
  const int64_t m = 5, n = 3, k = 37;  // 185 elements: not a whole number of vectors
  std::vector<float> x(static_cast<size_t>(m * k)), w(static_cast<size_t>(n * k), 0.25f),
      y(static_cast<size_t>(m * n));
  for (size_t i = 0; i < x.size(); ++i) x[i] = 0.01f * static_cast<float>(i % 13) - 0.05f;
  x[100] = -2.0f;  // step 0's amax: the history holds 2 from here on
  g.forward(x.data(), w.data(), nullptr, y.data(), m, n, k, 0, false);
  CHECK(std::isnan(g.probes.amax_staleness));  // an empty history chose no scale
  x[100] = 0.0f;
  x[184] = -7.0f;  // the last element, in the partial vector
  x[3] = NAN;
  x[50] = -INFINITY;
  g.reset_probes();
  g.forward(x.data(), w.data(), nullptr, y.data(), m, n, k, 1, false);
  CHECK(g.probes.amax_staleness == 3.5);
}

TEST_CASE("the fixed-batch loss is the held-out loss of the step's weights before its update, and changes no training bit") {
  // GPT: evaluate() over the first N validation batches, called between two steps, is what
  // the next step measures as its fixed-batch loss (the same batches, the same weights).
  TrainConfig c = test::tiny_gpt("fp8-delayed", 1, 32, 2, 16, 6);
  c.fixed_batches = 2;
  c.eval_batches = 2;
  Trainer t(c);
  const StepMetrics m0 = t.step();
  CHECK(std::isfinite(m0.fixed_batch_loss));
  const double held_out = t.evaluate().loss;
  const StepMetrics m1 = t.step();
  CHECK(m1.fixed_batch_loss == held_out);
  CHECK(m1.fixed_batch_loss != m0.fixed_batch_loss);  // the weights moved
  // Delayed scaling keeps a history the probe's forwards must not add to: the training
  // losses are those of a run that measures nothing, bit for bit, on both models.
  TrainConfig gpt = test::tiny_gpt("fp8-delayed", 1, 32, 2, 16, 6);
  gpt.steps = 6;
  for (const TrainConfig& base : {gpt, small_mlp("fp8-delayed", 6)}) {
    TrainConfig probed = base;
    probed.fixed_batches = 3;
    const auto a = run_steps(base), b = run_steps(probed);
    REQUIRE(a.size() == b.size());
    for (size_t i = 0; i < a.size(); ++i) {
      INFO("step " << i);
      CHECK(a[i].loss == b[i].loss);
      CHECK(std::isnan(a[i].fixed_batch_loss));
      CHECK(std::isfinite(b[i].fixed_batch_loss));
    }
  }
  TrainConfig bad = small_mlp("fp32", 2);
  bad.fixed_batches = 2000;
  CHECK_THROWS_WITH(bad.validate(), Catch::Contains("fixed_batches must be in [0, 1024]"));
}
