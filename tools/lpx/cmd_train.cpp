// `lpx train`: a training run of the simulator (sim/trainer.hpp) with an HDF5 log
// (runlog/schema.hpp, docs/runlog.md), checkpoints in the same file and --resume.
// --device gpu runs the recipe's quantizers and the GEMMs on the CUDA device
// (sim/device.hpp); without one it exits 1 with "no CUDA device: ...". --gemm exact pins
// the GEMMs' reduction order so that CPU and GPU runs give the same losses bit for bit.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>

#include <fmt/format.h>
#include <omp.h>

#include "cli_util.hpp"
#include "command.hpp"
#include "lpx/divergence/detectors.hpp"
#include "lpx/sim/device.hpp"
#include "lpx/sim/trainer.hpp"

namespace lpx::cli {
namespace {

// One line on what the recipe does to this model's GEMM layers: how many it quantizes below
// BF16 and which it keeps in high precision (a recipe written for a 62-block model can keep
// every layer of a small one: docs/recipes.md#high-precision-layers), or that it quantizes
// none.
std::string precision_line(sim::Trainer& t) {
  std::vector<std::string> all, kept;
  int quantized = 0;
  for (const sim::QuantGemms* g : t.model().gemm_layers()) {
    const OperandQuantizer& q = g->quantizer();
    all.push_back(q.layer().name);
    if (q.high_precision()) kept.push_back(q.layer().name);
    bool low = false;
    for (GemmRole r : kAllGemmRoles)
      low = low || q.spec(r).kind == RoleSpec::Kind::block || q.spec(r).kind == RoleSpec::Kind::ternary_absmean;
    quantized += low;
  }
  const Recipe& r = t.recipe();
  const char* kept_as = r.high_precision.format == RoleSpec::Kind::fp32 ? "fp32" : "bf16";
  bool recipe_quantizes = false;
  for (GemmRole role : kAllGemmRoles)
    recipe_quantizes = recipe_quantizes || r.role(role).kind == RoleSpec::Kind::block ||
                       r.role(role).kind == RoleSpec::Kind::ternary_absmean;
  if (!recipe_quantizes) return fmt::format("precision: no GEMM quantized below BF16 (recipe {} keeps its operands in {})", r.name, r.describe());
  if (quantized == 0)
    return fmt::format("precision: WARNING: recipe {} quantizes no GEMM of this model: its high_precision rules keep all {} "
                       "GEMM layers in {}, so this run measures {}, not the recipe's format",
                       r.name, all.size(), kept_as, kept_as);
  return fmt::format("precision: {} of {} GEMM layers quantized; kept in {}: {}", quantized, all.size(), kept_as,
                     kept.empty() ? std::string("none") : compress_layer_names(kept, all));
}

struct TrainArgs {
  std::string model = "mlp", recipe = "fp32", out, data, activation, device, preset, gemm;
  bool model_given = false;
  int64_t steps = 0, eval_every = 0, checkpoint_every = 0, stats_every = 1, abort_after = -1, fixed_batches = 0;
  bool stop_on_divergence = false;
  std::string thresholds;  // JSON file of divergence thresholds (defaults otherwise)
  std::string detectors;   // comma-separated detectors that may stop the run ("": all)
  // instability mechanisms (README "Divergence detection")
  bool qk_norm = false;
  float z_loss = 0, adam_eps = 0, inject_magnitude = 0;
  std::string master_weights, optimizer_state, inject, inject_layer;
  int64_t inject_step = -1, inject_channel = 0;
  int64_t warmup = -1;  // -1: the trainer's default, min(100, steps / 10)
  uint64_t seed = 0;
  float lr = 0, weight_decay = 0;
  int batch = 0, threads = 0, layers = 0, channels = 0, heads = 0, context = 0;
  std::vector<int> hidden;
  bool resume = false;
  double progress_every = 5;  // seconds between plain progress lines when stderr is no terminal
};

std::string hms(double s) {
  const auto t = static_cast<int64_t>(s + 0.5);
  return t >= 3600 ? fmt::format("{}:{:02}:{:02}", t / 3600, t / 60 % 60, t % 60)
                   : fmt::format("{}:{:02}", t / 60, t % 60);
}

void run_train(const TrainArgs& a) {
  if (a.out.empty() && a.resume) throw UsageError("train: --resume needs --out FILE (the run to continue)");
  if (a.resume && !a.gemm.empty())
    throw UsageError("train: --gemm cannot be given with --resume (the run keeps its logged GEMM order)");
  if (!a.device.empty() && a.device != "cpu" && a.device != "gpu")
    throw UsageError(fmt::format("train: --device '{}' is not cpu or gpu", a.device));
  const std::optional<sim::Device> device =
      a.device.empty() ? std::nullopt : std::optional<sim::Device>(sim::device_by_name(a.device));
  std::unique_ptr<sim::Trainer> trainer;
  if (a.resume) {
    trainer = sim::Trainer::resume(a.out, a.steps > 0 ? std::optional<int64_t>(a.steps) : std::nullopt, device);
  } else {
    if (a.model != "mlp" && a.model != "gpt") throw UsageError(fmt::format("train: --model '{}' is not mlp or gpt", a.model));
    if (a.steps <= 0) throw UsageError("train: --steps must be positive");
    sim::TrainConfig c;
    // a preset implies --model gpt; an explicit --model mlp with one is an error (below)
    c.model.kind = !a.preset.empty() && !a.model_given ? sim::ModelKind::gpt : sim::model_kind_by_name(a.model);
    const bool gpt = c.model.kind == sim::ModelKind::gpt;
    c.recipe = a.recipe;
    c.steps = a.steps;
    c.seed = a.seed;
    c.lr = a.lr > 0 ? a.lr : (gpt ? 3e-3f : 1e-3f);
    if (a.warmup >= 0) c.warmup = a.warmup;
    c.batch = a.batch;
    c.threads = a.threads;
    c.data = a.data;
    c.eval_every = a.eval_every;
    c.checkpoint_every = a.checkpoint_every;
    c.stats_every = a.stats_every;
    c.fixed_batches = a.fixed_batches;
    c.weight_decay = a.weight_decay;
    if (device) c.device = *device;
    if (!a.gemm.empty()) c.gemm = sim::gemm_order_by_name(a.gemm);
    if (gpt) c.model.activation = sim::Activation::gelu;
    if (!a.activation.empty()) {
      try {
        c.model.activation = sim::activation_by_name(a.activation);
      } catch (const std::invalid_argument& e) {
        throw UsageError(fmt::format("train: --activation: {}", e.what()));
      }
    }
    if (!a.hidden.empty()) c.model.hidden = a.hidden;
    if (!a.preset.empty()) {
      if (!gpt) throw UsageError(fmt::format("train: --preset {} is a GPT size; --model is {}", a.preset, a.model));
      try {
        sim::apply_gpt_preset(c.model, a.preset);
      } catch (const std::invalid_argument& e) {
        throw UsageError(fmt::format("train: --preset: {}", e.what()));
      }
    }
    if (a.layers > 0) c.model.layers = a.layers;
    if (a.channels > 0) c.model.channels = a.channels;
    if (a.heads > 0) c.model.heads = a.heads;
    if (a.context > 0) c.model.context = a.context;
    c.model.qk_norm = a.qk_norm;
    c.model.z_loss = a.z_loss;
    if (a.adam_eps > 0) c.adam_eps = a.adam_eps;
    c.master_weights = a.master_weights;
    c.optimizer_state = a.optimizer_state;
    if (!a.inject.empty() && a.inject != "activation" && a.inject != "weight")
      throw UsageError(fmt::format("train: --inject '{}' is not a mechanism (activation | weight)", a.inject));
    if (a.inject.empty() && (a.inject_step >= 0 || !a.inject_layer.empty() || a.inject_magnitude > 0))
      throw UsageError("train: --inject-step, --inject-layer and --inject-magnitude need --inject activation|weight");
    if (!a.inject.empty()) {
      if (a.inject_step < 0 || a.inject_layer.empty() || !(a.inject_magnitude > 0))
        throw UsageError("train: --inject needs --inject-step, --inject-layer and --inject-magnitude");
      if (a.inject_step >= a.steps)
        throw UsageError(fmt::format("train: --inject-step {} is past the run's end (steps 0..{})", a.inject_step,
                                     a.steps - 1));
      c.inject = a.inject;
      c.inject_step = a.inject_step;
      c.inject_layer = a.inject_layer;
      c.inject_channel = a.inject_channel;
      c.inject_magnitude = a.inject_magnitude;
    }
    if (a.qk_norm && !gpt) throw UsageError("train: --qk-norm needs --model gpt (the mlp has no attention)");
    trainer = std::make_unique<sim::Trainer>(c);
    if (!a.out.empty()) trainer->attach_log(a.out);
  }
  // --threads applies to a resumed run too: results never depend on it
  if (a.resume && a.threads > 0) omp_set_num_threads(a.threads);
  const auto& cfg = trainer->config();
  const bool tty = isatty(STDERR_FILENO) != 0;
  const bool gpt = cfg.model.kind == sim::ModelKind::gpt;
  const char* unit = gpt ? "tok/s" : "img/s";
  const int64_t first = trainer->current_step();
  fmt::print("lpx train: {} with recipe {} for {} steps (seed {}){}\n", sim::model_kind_name(cfg.model.kind),
             trainer->recipe().name, cfg.steps, cfg.seed,
             first > 0 ? fmt::format(", resumed at step {}", first) : "");
  fmt::print("{}\n", precision_line(*trainer));
  std::fflush(stdout);
  // --stop-on-divergence: the online run-level detectors (non-finite values, loss and
  // gradient-norm spikes, update-ratio drift) watch every step; the first flag ends the
  // run after a checkpoint, so the log holds everything up to the flagged step.
  struct StopRun {
    divergence::Flag flag;
  };
  std::optional<divergence::Monitor> monitor;
  std::vector<std::string> enabled;  // the detectors that may stop the run
  if (!a.thresholds.empty() && !a.stop_on_divergence)
    throw UsageError("train: --thresholds needs --stop-on-divergence");
  if (!a.detectors.empty() && !a.stop_on_divergence)
    throw UsageError("train: --detectors needs --stop-on-divergence");
  std::vector<std::string> layer_names, role_names;
  for (const sim::QuantGemms* q : trainer->model().gemm_layers()) layer_names.push_back(q->info().name);
  for (GemmRole r : kAllGemmRoles) role_names.emplace_back(role_name(r));
  if (a.stop_on_divergence) {
    try {
      enabled = divergence::parse_detector_list(a.detectors);
    } catch (const std::invalid_argument& e) {
      throw UsageError(fmt::format("train: --detectors: {}", e.what()));
    }
    divergence::Thresholds t;
    if (!a.thresholds.empty()) {
      const std::vector<std::byte> text = read_raw_bytes(a.thresholds);
      try {
        t = divergence::Thresholds::from_json(std::string(reinterpret_cast<const char*>(text.data()), text.size()));
      } catch (const std::invalid_argument& e) {
        throw UsageError(fmt::format("train: --thresholds {}: {}", a.thresholds, e.what()));
      }
    }
    monitor.emplace(t, layer_names, role_names);
    // Two of the default detectors read the fixed-batch loss; without it they cannot fire,
    // and a user who did not ask for them should know the run is watched by fewer.
    const bool wants_fixed = std::any_of(enabled.begin(), enabled.end(), [](const std::string& d) {
      return d == "fixed_batch_rise" || d == "ramp_rise";
    });
    if (wants_fixed && trainer->config().fixed_batches == 0)  // a resumed run keeps its own
      std::fprintf(stderr,
                   "train: note: fixed_batch_rise and ramp_rise read the loss on fixed held-out batches and stay "
                   "silent without --fixed-batches N (README \"Divergence detection\"; loss_rise watches the "
                   "training loss instead)\n");
  }
  const auto t0 = std::chrono::steady_clock::now();
  double next_line = a.progress_every;
  try {
  trainer->run([&](const sim::StepMetrics& m, const std::optional<sim::EvalMetrics>& e) {
    const double el = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const int64_t done = m.step + 1 - first;
    const double rate = el > 0 ? static_cast<double>(done * trainer->samples_per_step()) / el : 0;
    const double eta = done > 0 ? el / static_cast<double>(done) * static_cast<double>(cfg.steps - m.step - 1) : 0;
    if (tty) {
      std::fprintf(stderr, "\r\033[Kstep %lld/%lld  loss %.4f  lr %.2e  %.0f %s  ETA %s",
                   static_cast<long long>(m.step + 1), static_cast<long long>(cfg.steps), m.loss,
                   static_cast<double>(m.lr), rate, unit, hms(eta).c_str());
    } else if (a.progress_every > 0 && el >= next_line) {
      // a log file (a sweep's train.log, Slurm's output): one plain line every few seconds,
      // so the log shows where a long run is (README "Training runs")
      std::fprintf(stderr, "progress: step %lld/%lld  loss %.4f  %.0f %s  elapsed %s  ETA %s\n",
                   static_cast<long long>(m.step + 1), static_cast<long long>(cfg.steps), m.loss, rate, unit,
                   hms(el).c_str(), hms(eta).c_str());
      std::fflush(stderr);
      next_line = el + a.progress_every;
    }
    if (e) {
      if (tty) std::fprintf(stderr, "\r\033[K");
      fmt::print("step {:>7}  train loss {:.4f}  eval loss {:.4f}  {} {:.2f}%\n", e->step, m.loss,
                 e->loss, gpt ? "next-token acc" : "test acc", 100.0 * e->accuracy);
      std::fflush(stdout);
    }
    if (a.abort_after >= 0 && m.step + 1 >= a.abort_after) {
      // a simulated crash for the resume tests: no final checkpoint, no file close
      std::fflush(stdout);
      std::_Exit(3);
    }
    if (monitor) {
      divergence::StepRecord r;
      r.step = m.step;
      r.loss = m.loss;
      r.grad_norm = m.grad_norm;
      r.update_ratio = m.update_ratio;
      r.lr = static_cast<double>(m.lr);
      r.adam_rms = m.adam_rms;
      r.attn_logit_max = m.attn_logit_max;
      r.output_logit_max = m.output_logit_max;
      r.act_outlier_ratio = m.act_outlier_ratio;
      r.amax_staleness = m.amax_staleness;
      r.fixed_batch_loss = m.fixed_batch_loss;
      // the quantizer statistics as the log stores them (float32; NaN for a step without
      // statistics and for an operand the step did not quantize), so the online flags are
      // the offline ones
      std::vector<float> flushed, saturated;
      if (cfg.stats_every > 0 && m.step % cfg.stats_every == 0) {
        for (const sim::QuantGemms* q : trainer->model().gemm_layers())
          for (const OperandStats& st : q->stats) {
            flushed.push_back(st.elements ? static_cast<float>(st.flushed_pct) : NAN);
            saturated.push_back(st.elements ? static_cast<float>(st.saturated_pct) : NAN);
          }
        r.flushed_pct = flushed.data();
        r.saturated_pct = saturated.data();
      }
      const std::vector<divergence::Flag> flags = divergence::only(monitor->observe(r), enabled);
      if (!flags.empty()) throw StopRun{flags.front()};
    }
  });
  } catch (const StopRun& stop) {
    if (tty) std::fprintf(stderr, "\r\033[K");
    if (!a.out.empty()) trainer->checkpoint();
    fmt::print("stopped at step {} of {}: {}\n", stop.flag.step + 1, cfg.steps, stop.flag.describe());
  }
  if (tty) std::fprintf(stderr, "\r\033[K");
  if (cfg.device == sim::Device::gpu) {
    const sim::DeviceCounts n = sim::device_counts();
    fmt::print("device: {} kernel calls on the GPU (quantizers and GEMMs), {} block quantizations on "
               "the CPU (per-channel or delayed scaling: not on the device)\n",
               n.device, n.fallback);
  }
  if (!a.out.empty()) fmt::print("log: {}\n", a.out);
}

const bool registered = register_command(90, [](CLI::App& app) {
  auto a = std::make_shared<TrainArgs>();
  auto* cmd = app.add_subcommand("train", "Train an MLP (Fashion-MNIST) or a small GPT (characters) under a recipe");
  cmd->add_option("--model", a->model, "mlp | gpt")->capture_default_str()->each([a](const std::string&) { a->model_given = true; });
  cmd->add_option("--recipe", a->recipe, "A catalogue name (lpx recipes) or a .json file")->capture_default_str();
  // Every number is range-checked (docs/input-policy.md); 0 in the struct means "not given".
  cmd->add_option("--steps", a->steps, "Training steps (with --resume: the new total)")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 40));
  add_seed_option(cmd, a->seed, "Seed of init, data order and stochastic rounding (default 0)");
  cmd->add_option("--out", a->out, "HDF5 log and checkpoints (run.h5)");
  cmd->add_option("--lr", a->lr, "Peak learning rate (default 1e-3 mlp, 3e-3 gpt); warmup then cosine")
      ->check(kFinitePositive);
  cmd->add_option("--warmup", a->warmup, "Linear warmup steps before the cosine decay (default min(100, steps / 10))")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 40));
  cmd->add_option("--batch", a->batch, "Batch size (default 128 mlp, 16 gpt)")->check(CLI::Range(1, 1 << 16));
  add_threads_option(cmd, a->threads, "OpenMP threads (0: OpenMP's default; results do not depend on it)");
  cmd->add_option("--device", a->device,
                  "cpu (default) | gpu: run the recipe's quantizers and the GEMMs with the CUDA kernels "
                  "(layers and optimizer stay on the CPU)");
  cmd->add_option("--gemm", a->gemm,
                  "fast (default: the CPU's fastest product, the exact order where it has FMA; cuBLASLt on "
                  "the GPU) | exact: one reduction order on "
                  "both, so CPU and GPU losses are the same bit for bit (docs/kernels.md#ordered-gemms)")
      ->check(CLI::IsMember({"fast", "exact"}));
  cmd->add_option("--data", a->data, "Fashion-MNIST directory (mlp) or text file/directory (gpt)");
  cmd->add_option("--fixed-batches", a->fixed_batches,
                  "Log the loss on the first N held-out batches at every step (0: off; for the fixed_batch_rise and ramp_rise detectors)")
      ->check(CLI::Range(int64_t{0}, int64_t{1024}));
  cmd->add_option("--eval-every", a->eval_every, "Evaluate every N steps (and at the end; 0: only at the end)")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 40));
  cmd->add_option("--checkpoint-every", a->checkpoint_every,
                  "Checkpoint every N steps (and at the end; 0: only at the end)")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 40));
  cmd->add_option("--stats-every", a->stats_every, "Quantizer statistics every N steps (0: never)")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 40));
  cmd->add_option("--weight-decay", a->weight_decay, "AdamW weight decay of matrices")
      ->capture_default_str()
      ->check(kFiniteNonNegative);
  cmd->add_option("--hidden", a->hidden, "mlp hidden widths (default 256)")
      ->delimiter(',')
      ->check(CLI::Range(1, 1 << 20));
  cmd->add_option("--activation", a->activation, "mlp: relu | gelu; gpt: gelu | swiglu");
  cmd->add_option("--preset", a->preset,
                  "A GPT size: gpt-tiny (the default sizes), gpt-small (6 blocks x 128, context 64), "
                  "gpt-medium (8 x 192, context 128); implies --model gpt; --layers etc. override it");
  cmd->add_option("--layers", a->layers, "gpt blocks (default 2)")->check(CLI::Range(1, 1024));
  cmd->add_option("--channels", a->channels, "gpt width (default 64)")->check(CLI::Range(1, 1 << 16));
  cmd->add_option("--heads", a->heads, "gpt heads (default 4; must divide the width)")->check(CLI::Range(1, 1 << 16));
  cmd->add_option("--context", a->context, "gpt context (default 64)")->check(CLI::Range(1, 1 << 16));
  cmd->add_option("--progress-every", a->progress_every,
                  "Seconds between progress lines when stderr is not a terminal (0: none)")
      ->capture_default_str()
      ->check(kFiniteNonNegative);
  cmd->add_flag("--resume", a->resume, "Continue the run in --out from its last checkpoint");
  cmd->add_flag("--stop-on-divergence", a->stop_on_divergence,
                "End the run (after a checkpoint) at the first online divergence flag");
  cmd->add_option("--thresholds", a->thresholds, "JSON file of divergence thresholds (with --stop-on-divergence)");
  cmd->add_option("--detectors", a->detectors,
                  "Comma-separated detectors that may stop the run, or all (with --stop-on-divergence; default: nonfinite,attn_logit,loss_rise,update_size,fixed_batch_rise,ramp_rise)");
  // Instability mechanisms (README "Divergence detection", docs/recipes.md#instability-mechanisms)
  cmd->add_flag("--qk-norm", a->qk_norm, "gpt: normalize queries and keys per head (bounds attention logits)");
  cmd->add_option("--z-loss", a->z_loss, "Add COEF * log(Z)^2 per row to the objective (keeps output logits bounded)")
      ->check(kFiniteNonNegative);
  cmd->add_option("--adam-eps", a->adam_eps, "Adam epsilon (default 1e-8)")->check(kFinitePositive);
  cmd->add_option("--master-weights", a->master_weights,
                  "Override the recipe's master weights: fp32 | bf16 (RNE updates) | bf16_sr")
      ->check(CLI::IsMember({"fp32", "bf16", "bf16_sr"}));
  cmd->add_option("--optimizer-state", a->optimizer_state, "Override the recipe's Adam moments: fp32 | bf16 | fp8_e4m3")
      ->check(CLI::IsMember({"fp32", "bf16", "fp8_e4m3"}));
  cmd->add_option("--inject", a->inject, "Inject an outlier: activation | weight");
  cmd->add_option("--inject-step", a->inject_step, "Step the outlier appears at (0-based)")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 40));
  cmd->add_option("--inject-layer", a->inject_layer, "Layer of the outlier (fc1, h0.mlp.fc, lm_head, ...)");
  cmd->add_option("--inject-channel", a->inject_channel, "Input channel of the outlier (default 0)")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 20));
  cmd->add_option("--inject-magnitude", a->inject_magnitude, "Factor the channel is multiplied by")->check(kFinitePositive);
  cmd->add_option("--abort-after", a->abort_after, "Testing: exit abruptly after step N")
      ->group("")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 40));
  cmd->footer(
      "Examples:\n"
      "  lpx train --model mlp --recipe fp32 --steps 938 --eval-every 469 --out mlp.h5\n"
      "  lpx train --model gpt --recipe mxfp8 --steps 500 --checkpoint-every 100 --out gpt.h5\n"
      "  lpx train --out gpt.h5 --resume");
  cmd->callback([a] { run_train(*a); });
});

}  // namespace
}  // namespace lpx::cli
