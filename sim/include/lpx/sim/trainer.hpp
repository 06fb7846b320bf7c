// A training run: data, model, recipe, AdamW, learning-rate schedule, evaluation,
// HDF5 logging and checkpoints (runlog/run_log.hpp). `lpx train` is a thin shell around it.
//
// Determinism: everything random is Philox keyed by (seed, stream, index) and every batch
// is a pure function of (seed, step), so a run is a function of its config: the same seed
// gives the same loss array bit for bit with any --threads, and a run resumed from a
// checkpoint continues exactly as the uninterrupted run would have.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "lpx/recipes/operand.hpp"
#include "lpx/recipes/recipe.hpp"
#include "lpx/runlog/run_log.hpp"
#include "lpx/sim/data.hpp"
#include "lpx/sim/device.hpp"
#include "lpx/sim/model.hpp"
#include "lpx/sim/optimizer.hpp"

namespace lpx::sim {

// A step's and an evaluation's metrics are what the run log stores (runlog/schema.hpp).
using runlog::EvalMetrics;
using runlog::StepMetrics;

struct TrainConfig {
  ModelConfig model;
  std::string recipe = "fp32";  // a catalogue name or a recipe .json file (recipes/)
  int64_t steps = 100;
  uint64_t seed = 0;
  float lr = 1e-3f;
  int batch = 0;             // 0: 128 for mlp, 16 for gpt
  int threads = 0;           // 0: OpenMP's default; results never depend on it
  std::string data;          // "" : the Debian package's location
  int64_t eval_every = 0;    // 0: only at the end
  int64_t eval_batches = 0;  // gpt: validation windows / batch (0: 8); mlp: whole test set
  // The loss on the same held-out batches at every step (StepMetrics::fixed_batch_loss),
  // measured on the step's weights before its update: the training loss without the batch
  // sampling noise, for the fixed_batch_rise detector (docs/recipes.md#divergence-signals).
  // 0: not measured. mlp: the first N test batches; gpt: the first N validation batches.
  int64_t fixed_batches = 0;
  int64_t checkpoint_every = 0;  // 0: only at the end (when there is a log)
  int64_t warmup = -1;       // -1: min(100, steps / 10)
  float min_lr_fraction = 0.1f;  // cosine decay to lr * this at the last step
  float weight_decay = 0.0f;
  float clip = 1.0f;         // global gradient-norm clipping; 0 disables
  int64_t stats_every = 1;   // per-operand quantizer statistics every N steps (rows are NaN between)
  Device device = Device::cpu;  // where the quantizers and GEMMs run (device.hpp)
  // The GEMMs' reduction order (sim/gemm.hpp): fast (the CPU's fastest product, which is
  // the exact order wherever the CPU has FMA; cuBLASLt on the GPU) or exact (one order on
  // both, so a CPU and a GPU run give the same losses bit for bit).
  GemmOrder gemm = GemmOrder::fast;
  // Instability mechanisms (docs/recipes.md#instability-mechanisms); the defaults change
  // nothing.
  float adam_eps = 1e-8f;
  std::string master_weights;   // "" : the recipe's; fp32 | bf16 (RNE updates) | bf16_sr
  std::string optimizer_state;  // "" : the recipe's; fp32 | bf16 | fp8_e4m3
  // An injected outlier: "" (none) | "activation" (from inject_step on, input channel
  // inject_channel of layer inject_layer is multiplied by inject_magnitude) | "weight" (at
  // inject_step, column inject_channel of that layer's weight is multiplied once).
  std::string inject;
  int64_t inject_step = 0, inject_channel = 0;
  std::string inject_layer;  // a quantized GEMM layer's name (fc1, h0.mlp.fc, lm_head, ...)
  float inject_magnitude = 1.0f;
  // The run log's "config" attribute: names as strings ("kind": "mlp", "device": "cpu").
  std::string to_json() const;
  static TrainConfig from_json(const std::string& json);
  // Throws std::invalid_argument naming the first field out of its range (a config from
  // a hand-edited or damaged run log as much as one built in code). 0 keeps meaning "the
  // default" where the field says so (batch, warmup -1, eval/checkpoint/stats every).
  void validate() const;
};

class Trainer {
 public:
  explicit Trainer(TrainConfig cfg);
  ~Trainer();
  // Logs to `path` (created, replacing an existing file), or resumes from the checkpoint
  // in `path` when `resume`: the config is read from the file (steps may be raised), and
  // rows logged after the checkpoint are dropped. Without a call, nothing is logged.
  void attach_log(const std::string& path);
  // `device` replaces the logged run's device (with the exact GEMM order the results do
  // not depend on it; with fast they may differ in the last bits).
  static std::unique_ptr<Trainer> resume(const std::string& path, std::optional<int64_t> steps,
                                         std::optional<Device> device = std::nullopt);

  StepMetrics step();  // one training step (and eval / checkpoint when due)
  EvalMetrics evaluate();
  void checkpoint();
  bool done() const { return step_ >= cfg_.steps; }
  int64_t current_step() const { return step_; }
  // Runs to cfg.steps; `progress` is called after each step.
  void run(const std::function<void(const StepMetrics&, const std::optional<EvalMetrics>&)>& progress = {});

  const TrainConfig& config() const { return cfg_; }
  Model& model() { return *model_; }
  const Recipe& recipe() const { return recipe_; }
  const std::vector<double>& losses() const { return losses_; }
  const std::vector<EvalMetrics>& evals() const { return evals_; }
  int64_t samples_per_step() const;  // images (mlp) or tokens (gpt)
  float lr_at(int64_t step) const;

 private:
  void load_data();
  void next_batch(uint64_t step);
  void set_up_injection();
  void inject_weight_outlier();
  struct HeldOut {
    double loss = 0;
    int64_t correct = 0, count = 0;
  };
  HeldOut held_out_loss(int64_t batches, Batch& buffers);
  double fixed_batch_loss();
  void fill_held_out_batch(Batch& b, int64_t index) const;
  int injected_layer_ = -1;
  TrainConfig cfg_;
  Recipe recipe_;
  std::shared_ptr<OperandBackend> backend_;  // where the quantizers run (null: the CPU)
  std::shared_ptr<GemmBackend> gemm_backend_;  // where the GEMMs run (null: the CPU)
  std::shared_ptr<const ImageSet> train_set_, test_set_;
  std::shared_ptr<const CharCorpus> corpus_;
  std::unique_ptr<ImageBatcher> batcher_;
  std::unique_ptr<Model> model_;
  std::unique_ptr<AdamW> opt_;
  std::unique_ptr<runlog::RunLog> log_;
  Batch batch_;
  Batch fixed_batch_;  // fixed_batch_loss's buffers, kept between steps
  int64_t step_ = 0;
  std::vector<double> losses_;
  std::vector<EvalMetrics> evals_;
};

// Loaded data sets are cached per path for the life of the process (tests build many
// trainers over the same data).
std::shared_ptr<const ImageSet> cached_fashion_mnist(const std::string& dir, bool train);
std::shared_ptr<const CharCorpus> cached_char_corpus(const std::string& path);

// Seconds per training step (median of `steps` timed steps after one warm-up) for a model
// ("mlp" | "gpt" at their default sizes, or a GPT preset such as "gpt-small"; gpt with
// gelu), a recipe, a GEMM order and how often the per-operand statistics are collected
// (TrainConfig::stats_every; 1, `lpx train`'s default, times steps that all collect them):
// what `lpx bench --train` reports. bench_train_config is the trainer's configuration.
struct BenchResult {
  std::string model, recipe;
  double seconds_per_step = 0;
  double samples_per_second = 0;
  int64_t stats_every = 1;  // the timed trainer's own TrainConfig::stats_every
};
TrainConfig bench_train_config(const std::string& model, const std::string& recipe, int steps, int threads,
                               GemmOrder order, int64_t stats_every);
BenchResult bench_train_steps(const std::string& model, const std::string& recipe, int steps,
                              int threads = 0, GemmOrder order = GemmOrder::fast, int64_t stats_every = 1);

// A median and its distribution-free 95% confidence interval: the order statistics
// x(k) and x(n + 1 - k) of the sorted values, k the largest with P(B < k) <= 0.025 for
// B ~ Binomial(n, 1/2), so that the interval holds the true median with probability at
// least 95% whatever the distribution (the sign-test interval for a quantile, e.g.
// Conover, Practical Nonparametric Statistics). Fewer than 6 values cannot give 95% ([min, max] covers 1 - 2^(1-n)):
// lo and hi are NaN then. The median of an even count is the upper middle value.
struct MedianInterval {
  double median = 0;
  double lo = 0, hi = 0;
};
MedianInterval median_interval95(std::vector<double> values);

// A recipe's step against fp32's (fast GEMM order) on the same model, timed in
// alternation: step i of each, the first of the two alternating, so that the machine's
// speed drifting (a shared machine) moves both. ratio: the median over i of recipe / fp32,
// ratio_lo / ratio_hi its 95% interval (median_interval95; NaN below 6 steps).
struct BenchPair {
  BenchResult base, run;
  double ratio = 0;
  double ratio_lo = 0, ratio_hi = 0;
};
BenchPair bench_against_fp32(const std::string& model, const std::string& recipe, int steps, int threads = 0,
                             GemmOrder order = GemmOrder::fast, int64_t stats_every = 1);

}  // namespace lpx::sim
