// The fp32 MLP reaches at least 87% Fashion-MNIST test accuracy in 2 epochs (784-256-10,
// ReLU, batch 128, AdamW lr 1e-3 with warmup and cosine decay: 936 steps).
#include <catch2/catch.hpp>

#include "lpx/sim/trainer.hpp"

using namespace lpx::sim;

TEST_CASE("fp32 MLP: >= 87% test accuracy after 2 epochs", "[learning][slow]") {
  TrainConfig c;
  c.model.kind = ModelKind::mlp;
  c.model.hidden = {256};
  c.batch = 128;
  c.steps = 2 * (60000 / 128);
  c.seed = 1;
  c.lr = 1e-3f;
  Trainer t(c);
  while (!t.done()) t.step();
  const EvalMetrics e = t.evaluate();
  INFO("test loss " << e.loss << " accuracy " << e.accuracy);
  CHECK(e.accuracy >= 0.87);
}
