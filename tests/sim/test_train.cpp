// Training runs at reduced scale: determinism (thread counts, repeated runs), resume
// equals an uninterrupted run, learning (GPT below the corpus's unigram entropy, bf16
// within 1% of fp32), each catalogue recipe trains and logs per-role statistics.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <string>
#include <unistd.h>

#include "lpx/recipes/operand.hpp"
#include "lpx/recipes/recipe.hpp"
#include "lpx/runlog/run_log.hpp"
#include "lpx/sim/trainer.hpp"
#include "train_helpers.hpp"

using namespace lpx;
using namespace lpx::sim;

namespace {

TrainConfig mlp_config(int64_t steps, int threads) {
  TrainConfig c;
  c.model.kind = ModelKind::mlp;
  c.model.hidden = {64};
  c.steps = steps;
  c.seed = 5;
  c.batch = 64;
  c.threads = threads;
  return c;
}

TrainConfig gpt_config(int64_t steps, int threads) {
  TrainConfig c = test::tiny_gpt("fp32", 2, 32, 2, 32, 8);
  c.steps = steps;
  c.seed = 9;
  c.threads = threads;
  return c;
}

using test::train_losses;

// Catalogue recipes whose quantizers keep state across steps (amax histories).
std::vector<std::string> stateful_recipes() {
  std::vector<std::string> out;
  for (std::string_view name : recipe_names()) {
    const OperandQuantizer q(recipe_by_name(name), LayerInfo{0, 2, LayerInfo::linear, "h0.attn.qkv"}, 0);
    bool stateful = false;
    for (GemmRole role : kAllGemmRoles) stateful = stateful || q.history(role) != nullptr;
    if (stateful) out.emplace_back(name);
  }
  return out;
}

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("lpx_sim_" + std::to_string(getpid()) + "_" + name)).string();
}

}  // namespace

TEST_CASE("the same seed gives bit-identical losses with 1 and 2 threads", "[determinism]") {
  SECTION("mlp") {
    const auto a = train_losses(mlp_config(12, 1));
    const auto b = train_losses(mlp_config(12, 2));
    const auto c = train_losses(mlp_config(12, 2));
    REQUIRE(a.size() == 12);
    CHECK(a == b);
    CHECK(b == c);
    TrainConfig other = mlp_config(12, 2);
    other.seed = 6;
    CHECK(train_losses(other) != a);
  }
  SECTION("gpt, fp32 and bf16 with swiglu") {
    for (const char* recipe : {"fp32", "bf16"}) {
      TrainConfig c = gpt_config(6, 1);
      c.recipe = recipe;
      c.model.activation = Activation::swiglu;
      const auto a = train_losses(c);
      c.threads = 2;
      const auto b = train_losses(c);
      INFO(recipe);
      CHECK(a == b);
    }
  }
}

TEST_CASE("a resumed run's loss array equals the uninterrupted run's", "[resume]") {
  // fp32, and every recipe whose quantizers keep state (delayed scaling's amax
  // histories): the checkpoint must carry that state for the resumed run to match.
  std::vector<std::string> recipes{"fp32"};
  for (const std::string& r : stateful_recipes()) recipes.push_back(r);
  REQUIRE(recipes.size() > 1);  // fp8-delayed at least
  for (const std::string& recipe : recipes) {
    INFO(recipe);
    const std::string full = temp_path("full.h5"), cut = temp_path("cut.h5");
    TrainConfig c = gpt_config(30, 2);
    c.recipe = recipe;
    c.checkpoint_every = 10;
    c.eval_every = 10;
    {
      Trainer t(c);
      t.attach_log(full);
      t.run();
    }
    {
      Trainer t(c);
      t.attach_log(cut);
      // stop at step 25, five steps after the last checkpoint (at 20)
      while (t.current_step() < 25) {
        t.step();
        if (t.current_step() % 10 == 0) {
          t.evaluate();
          t.checkpoint();
        }
      }
    }
    CHECK(runlog::read_run(cut).metrics.step.size() == 25);
    const runlog::Checkpoint at20 = runlog::read_checkpoint(cut);
    CHECK(at20.step == 20);
    if (recipe != "fp32") {
      // the histories are in the checkpoint: one amax per training step (evaluations do
      // not add to them) for every fp8 operand of block 0's qkv
      REQUIRE(at20.has_quantizer_state);
      CHECK(at20.quantizer.length >= 30);
      for (size_t r = 0; r < kGemmRoles; ++r) CHECK(at20.quantizer.count[r] == 20);  // h0.attn.qkv
    } else {
      CHECK_FALSE(at20.has_quantizer_state);
    }
    {
      auto t = Trainer::resume(cut, std::nullopt);
      CHECK(t->current_step() == 20);
      t->run();
    }
    const runlog::Run a = runlog::read_run(full), b = runlog::read_run(cut);
    REQUIRE(a.metrics.loss.size() == 30);
    CHECK(a.metrics.loss == b.metrics.loss);
    CHECK(a.metrics.step == b.metrics.step);
    CHECK(a.eval.step == b.eval.step);
    CHECK(a.eval.loss == b.eval.loss);
    CHECK(b.checkpoint_step == 30);
    CHECK(a.quant.amax == b.quant.amax);
    // the final checkpoints hold the same histories, bit for bit (NaN padding included)
    const runlog::Checkpoint fa = runlog::read_checkpoint(full), fb = runlog::read_checkpoint(cut);
    CHECK(fa.quantizer.count == fb.quantizer.count);
    REQUIRE(fa.quantizer.values.size() == fb.quantizer.values.size());
    // (memcmp of an empty vector's null data() is undefined behaviour: fp32 has no history)
    CHECK((fa.quantizer.values.empty() ||
           std::memcmp(fa.quantizer.values.data(), fb.quantizer.values.data(),
                       fa.quantizer.values.size() * sizeof(float)) == 0));
    std::filesystem::remove(full);
    std::filesystem::remove(cut);
  }
}

TEST_CASE("evaluating does not change a delayed-scaling run's training", "[resume]") {
  // Evaluation forwards read the amax histories but do not add to them, so the training
  // losses do not depend on how often the run is evaluated.
  if (stateful_recipes().empty()) return;
  TrainConfig c = gpt_config(8, 2);
  c.recipe = stateful_recipes().front();
  Trainer a(c), b(c);
  while (!a.done()) a.step();
  while (!b.done()) {
    b.step();
    if (b.current_step() % 2 == 0) b.evaluate();
  }
  CHECK(a.losses() == b.losses());
}

TEST_CASE("resuming restores the amax histories: without them the run would differ", "[resume]") {
  // The negative control of the test above: a quantizer whose history is emptied before
  // the same steps quantizes them differently, so restoring the histories is what the
  // bit-identical resume rests on.
  if (stateful_recipes().empty()) return;
  TrainConfig c = gpt_config(12, 2);
  c.recipe = stateful_recipes().front();
  Trainer a(c), b(c);
  for (int i = 0; i < 6; ++i) {
    a.step();
    b.step();
  }
  for (QuantGemms* q : b.model().gemm_layers())
    for (GemmRole r : kAllGemmRoles) q->quantizer().restore_history(r, {});
  while (!a.done()) a.step();
  while (!b.done()) b.step();
  CHECK(a.losses() != b.losses());
}

TEST_CASE("the run log holds config, metrics, evals and per-operand statistics", "[log]") {
  const std::string path = temp_path("log.h5");
  TrainConfig c = mlp_config(8, 2);
  c.eval_every = 4;
  c.recipe = "bf16";
  {
    Trainer t(c);
    t.attach_log(path);
    t.run();
  }
  const runlog::Run d = runlog::read_run(path);
  CHECK(d.header.model == "mlp");
  CHECK(d.header.recipe == "bf16");
  CHECK(TrainConfig::from_json(d.header.config_json).steps == 8);
  CHECK(d.metrics.loss.size() == 8);
  CHECK(d.eval.step == std::vector<int64_t>{4, 8});
  CHECK(d.eval.accuracy.back() > 0.3);
  REQUIRE(d.quant.layers == std::vector<std::string>{"fc0", "fc1"});
  REQUIRE(d.quant.roles.size() == 6);
  REQUIRE(d.quant.sqnr_db.size() == 8 * 2 * 6);
  // every operand rounded to bf16 (SQNR ~ 50 dB: inputs, weights and gradients are not
  // bf16 values), except fc0's dgrad operands: the input layer computes no dX (NaN rows)
  for (int l = 0; l < 2; ++l)
    for (int r = 0; r < 6; ++r) {
      INFO("layer " << l << " role " << d.quant.roles[r]);
      const float sqnr = d.quant.sqnr_db[l * 6 + r], amax = d.quant.amax[l * 6 + r];
      if (l == 0 && (r == 2 || r == 3)) {
        CHECK(std::isnan(sqnr));
        continue;
      }
      CHECK(sqnr > 40);
      CHECK(sqnr < 70);
      CHECK(amax > 0);
    }
  for (double g : d.metrics.grad_norm) CHECK(std::isfinite(g));
  for (double u : d.metrics.update_ratio) CHECK(u > 0);
  // RMS(g^2 / v_hat): logged every step; exactly the fraction of nonzero gradients at the
  // first step (v_hat = g^2 there), and of order 1 while training is healthy.
  REQUIRE(d.metrics.adam_rms.size() == d.metrics.step.size());
  CHECK(d.metrics.adam_rms.front() > 0);
  CHECK(d.metrics.adam_rms.front() <= 1.0 + 1e-6);
  for (double a : d.metrics.adam_rms) CHECK((a > 0.05 && a < 3.0));
  std::filesystem::remove(path);
}

TEST_CASE("the GPT learns: validation loss well below the corpus's unigram entropy", "[learning]") {
  TrainConfig c = gpt_config(300, 1);  // 1 thread: many small parallel loops cost more than they give on a busy 2-core machine
  c.model.channels = 64;
  c.model.heads = 4;
  c.model.context = 64;
  c.batch = 16;
  Trainer t(c);
  const double h = unigram_entropy_nats(*cached_char_corpus(kFortunesDir));
  while (!t.done()) t.step();
  const EvalMetrics e = t.evaluate();
  INFO("unigram entropy " << h << " nats, validation loss " << e.loss);
  CHECK(h > 2.5);
  CHECK(e.loss < h - 0.6);
}

TEST_CASE("the bf16 recipe ends within 1% of fp32's loss (MLP)", "[learning]") {
  TrainConfig c = mlp_config(300, 1);
  c.model.hidden = {128};
  c.eval_every = 0;
  double loss[2];
  for (int i = 0; i < 2; ++i) {
    c.recipe = i == 0 ? "fp32" : "bf16";
    Trainer t(c);
    while (!t.done()) t.step();
    loss[i] = t.evaluate().loss;
  }
  INFO("fp32 " << loss[0] << " bf16 " << loss[1]);
  CHECK(std::fabs(loss[1] - loss[0]) < 0.01 * loss[0]);
}

TEST_CASE("the master-weight and moment precisions of a recipe are applied", "[optimizer]") {
  TrainConfig c = mlp_config(3, 2);
  Trainer t(c);
  AdamW opt(t.model().tensors(), t.model().params().size(), AdamWConfig{}, MasterWeights::bf16_sr,
            OptimizerState::bf16, 1);
  std::vector<float> w = t.model().params(), g(w.size(), 1e-3f);
  opt.round_master(w);
  auto is_bf16 = [](float x) { uint32_t b; std::memcpy(&b, &x, 4); return (b & 0xFFFF) == 0; };
  for (int s = 0; s < 3; ++s) {
    opt.update(w, g, 1e-4f, static_cast<uint64_t>(s));
    bool all = true;
    for (size_t i = 0; i < w.size(); ++i) all = all && is_bf16(w[i]) && is_bf16(opt.m()[i]) && is_bf16(opt.v()[i]);
    CHECK(all);
  }
}

TEST_CASE("every catalogue recipe trains a few steps and logs its formats per role", "[recipes]") {
  for (const std::string name : {"fp32", "bf16", "fp8-delayed", "fp8-current", "fp8-blockwise", "mxfp8",
                                 "mxfp6", "mxfp4-rne", "mxfp4-sr-rht", "nvfp4", "quartet-like",
                                 "bitnet-b1.58", "sub4-e2m0"}) {
    INFO(name);
    const std::string path = temp_path(name + ".h5");
    TrainConfig c = gpt_config(3, 2);
    c.recipe = name;
    c.model.layers = 2;
    c.model.channels = 64;  // block sizes of 128 and Hadamard sizes need wide operands
    c.model.context = 64;
    c.model.heads = 1;  // head size 64: mxfp4-sr-rht's Hadamard 64 runs along it in attention
    {
      Trainer t(c);
      t.attach_log(path);
      t.run();
    }
    const runlog::Run d = runlog::read_run(path);
    for (double l : d.metrics.loss) CHECK(std::isfinite(l));
    // layer rows: h0.attn.qkv = 0 (a linear of block 0); role columns fwd_x.. wgrad_dy
    const size_t L = d.quant.layers.size();
    REQUIRE(d.quant.layers[0] == "h0.attn.qkv");
    const OperandQuantizer q(load_recipe(name), LayerInfo{0, 2, LayerInfo::linear, "h0.attn.qkv"}, 0);
    for (int role = 0; role < 6; ++role) {
      INFO("role " << d.quant.roles[role]);
      const float sqnr = d.quant.sqnr_db[(2 * L + 0) * 6 + role];  // step 2, layer 0
      if (q.is_identity(static_cast<GemmRole>(role))) CHECK(std::isinf(sqnr));
      else CHECK(sqnr < 80.0f);
    }
    std::filesystem::remove(path);
  }
}

TEST_CASE("median_interval95 takes the order statistics of the binomial tables", "[bench]") {
  // The 95% distribution-free intervals for the median, worked by hand from the
  // binomial(n, 1/2) distribution (P(B <= 5) = 0.0207 for n = 20, P(B <= 6) = 0.058; the
  // textbook sign-test tables give the same ranks): n = 6 and 7 give
  // [x(1), x(n)], n = 10 gives [x(2), x(9)], n = 20 gives [x(6), x(15)], n = 30 gives
  // [x(10), x(21)]. The values are 1..n shuffled, so x(k) = k.
  struct Case {
    size_t n, lo, hi;
  };
  for (const Case c : {Case{6, 1, 6}, Case{7, 1, 7}, Case{10, 2, 9}, Case{20, 6, 15}, Case{30, 10, 21}}) {
    INFO("n = " << c.n);
    std::vector<double> v;
    for (size_t i = 0; i < c.n; ++i) v.push_back(static_cast<double>((i * 11 + 3) % c.n + 1));
    const MedianInterval m = median_interval95(v);
    CHECK(m.lo == static_cast<double>(c.lo));
    CHECK(m.hi == static_cast<double>(c.hi));
    CHECK(m.median == static_cast<double>(c.n / 2 + 1));  // the upper middle value
  }
  // Five values cannot give 95%: [min, max] covers 1 - 2/32 = 93.75%
  for (size_t n : {0, 1, 5}) {
    const MedianInterval m = median_interval95(std::vector<double>(n, 1.5));
    CHECK(std::isnan(m.lo));
    CHECK(std::isnan(m.hi));
  }
}

TEST_CASE("bench_train_config: the timed trainer collects the statistics as often as bench --stats-every says") {
  // What `lpx bench --train --stats-every N` times: with 0 no step fills a layer's
  // statistics, with 1 every layer's forward roles hold the step's. The rest of the
  // configuration is the bench's: the model, the recipe, one warm-up step more.
  for (const int64_t every : {int64_t{0}, int64_t{1}}) {
    INFO("stats_every " << every);
    const TrainConfig c = bench_train_config("gpt-small", "mxfp8", 3, 1, GemmOrder::fast, every);
    CHECK(c.stats_every == every);
    CHECK(c.recipe == "mxfp8");
    CHECK(c.steps == 4);
    CHECK(c.model.kind == ModelKind::gpt);
    CHECK(c.model.activation == Activation::gelu);
    Trainer t(bench_train_config("mlp", "mxfp8", 3, 1, GemmOrder::fast, every));
    t.step();
    // (the first layer has no dgrad, so only the forward roles are filled in every layer)
    int64_t filled = 0, forward_filled = 0, layers = 0;
    for (const QuantGemms* q : t.model().gemm_layers()) {
      ++layers;
      for (const OperandStats& s : q->stats) filled += s.elements > 0;
      forward_filled += q->stats[static_cast<size_t>(GemmRole::fwd_x)].elements > 0 &&
                        q->stats[static_cast<size_t>(GemmRole::fwd_w)].elements > 0;
    }
    REQUIRE(layers > 0);
    if (every == 0) CHECK(filled == 0);
    else CHECK(forward_filled == layers);
  }
}
