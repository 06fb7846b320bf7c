// Small training configurations and a loss-array runner shared by the sim tests.
#pragma once

#include <string>
#include <vector>

#include "lpx/sim/trainer.hpp"

namespace lpx::sim::test {

// A small GELU GPT (lr 3e-3) on one thread (results never depend on the thread count;
// tiny per-head GEMMs on a busy machine run faster without OpenMP barriers); callers set
// steps, seed and device, and threads where the thread count is what they test.
inline TrainConfig tiny_gpt(const std::string& recipe, int layers, int channels, int heads, int context,
                            int batch) {
  TrainConfig c;
  c.model.kind = ModelKind::gpt;
  c.model.activation = Activation::gelu;
  c.model.layers = layers;
  c.model.channels = channels;
  c.model.heads = heads;
  c.model.context = context;
  c.batch = batch;
  c.recipe = recipe;
  c.lr = 3e-3f;
  c.threads = 1;
  return c;
}

// The loss array of a run (no log).
inline std::vector<double> train_losses(const TrainConfig& c) {
  Trainer t(c);
  while (!t.done()) t.step();
  return t.losses();
}

}  // namespace lpx::sim::test
