// The training loop, evaluation, checkpoints and the step-time benchmark.
#include "lpx/sim/trainer.hpp"

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <limits>
#include <cmath>
#include <map>
#include <mutex>
#include <numbers>
#include <stdexcept>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "device_backend.hpp"
#include "lpx/io/json_input.hpp"
#include "lpx/version.hpp"

namespace lpx::sim {

using json = nlohmann::json;

std::string TrainConfig::to_json() const {
  json j;
  j["model"] = {{"kind", model_kind_name(model.kind)}, {"inputs", model.inputs}, {"classes", model.classes},
                {"hidden", model.hidden}, {"activation", activation_name(model.activation)},
                {"vocab", model.vocab},     {"context", model.context}, {"layers", model.layers},
                {"channels", model.channels}, {"heads", model.heads}, {"qk_norm", model.qk_norm},
                {"z_loss", model.z_loss}};
  j["recipe"] = recipe;
  j["steps"] = steps;
  j["seed"] = seed;
  j["lr"] = lr;
  j["batch"] = batch;
  j["data"] = data;
  j["eval_every"] = eval_every;
  j["eval_batches"] = eval_batches;
  j["fixed_batches"] = fixed_batches;
  j["checkpoint_every"] = checkpoint_every;
  j["warmup"] = warmup;
  j["min_lr_fraction"] = min_lr_fraction;
  j["weight_decay"] = weight_decay;
  j["clip"] = clip;
  j["stats_every"] = stats_every;
  j["device"] = device_name(device);
  j["gemm"] = gemm_order_name(gemm);
  j["adam_eps"] = adam_eps;
  j["master_weights"] = master_weights;
  j["optimizer_state"] = optimizer_state;
  j["inject"] = inject;
  j["inject_step"] = inject_step;
  j["inject_layer"] = inject_layer;
  j["inject_channel"] = inject_channel;
  j["inject_magnitude"] = inject_magnitude;
  return j.dump();
}

TrainConfig TrainConfig::from_json(const std::string& text) {
  const json j = io::parse_json(text, "training config");
  TrainConfig c;
  const json& m = j.at("model");
  c.model.kind = model_kind_by_name(m.at("kind").get<std::string>());
  c.model.inputs = m.at("inputs");
  c.model.classes = m.at("classes");
  c.model.hidden = m.at("hidden").get<std::vector<int>>();
  c.model.activation = activation_by_name(m.at("activation").get<std::string>());
  c.model.vocab = m.at("vocab");
  c.model.context = m.at("context");
  c.model.layers = m.at("layers");
  c.model.channels = m.at("channels");
  c.model.heads = m.at("heads");
  c.recipe = j.at("recipe");
  c.steps = j.at("steps");
  c.seed = j.at("seed");
  c.lr = j.at("lr");
  c.batch = j.at("batch");
  c.data = j.at("data");
  c.eval_every = j.at("eval_every");
  c.eval_batches = j.at("eval_batches");
  c.checkpoint_every = j.at("checkpoint_every");
  c.warmup = j.at("warmup");
  c.min_lr_fraction = j.at("min_lr_fraction");
  c.weight_decay = j.at("weight_decay");
  c.clip = j.at("clip");
  c.stats_every = j.at("stats_every");
  c.device = device_by_name(j.value("device", std::string("cpu")));  // logs written before --device: cpu
  c.gemm = gemm_order_by_name(j.value("gemm", std::string("fast")));  // before --gemm: fast
  // logs written before the instability mechanisms: their defaults
  c.model.qk_norm = m.value("qk_norm", false);
  c.model.z_loss = m.value("z_loss", 0.0f);
  c.adam_eps = j.value("adam_eps", 1e-8f);
  c.master_weights = j.value("master_weights", std::string());
  c.optimizer_state = j.value("optimizer_state", std::string());
  c.inject = j.value("inject", std::string());
  c.inject_step = j.value("inject_step", int64_t{0});
  c.inject_layer = j.value("inject_layer", std::string());
  c.inject_channel = j.value("inject_channel", int64_t{0});
  c.inject_magnitude = j.value("inject_magnitude", 1.0f);
  c.fixed_batches = j.value("fixed_batches", int64_t{0});  // logs written before it: not measured
  return c;
}

std::shared_ptr<const ImageSet> cached_fashion_mnist(const std::string& dir, bool train) {
  static std::mutex mu;
  static std::map<std::pair<std::string, bool>, std::shared_ptr<const ImageSet>> cache;
  std::lock_guard lock(mu);
  auto& slot = cache[{dir, train}];
  if (!slot) slot = std::make_shared<const ImageSet>(load_fashion_mnist(dir, train));
  return slot;
}

std::shared_ptr<const CharCorpus> cached_char_corpus(const std::string& path) {
  static std::mutex mu;
  static std::map<std::string, std::shared_ptr<const CharCorpus>> cache;
  std::lock_guard lock(mu);
  auto& slot = cache[path];
  if (!slot) slot = std::make_shared<const CharCorpus>(load_char_corpus(path));
  return slot;
}

namespace {
// Validation windows for the GPT come from their own seed, the same for every run.
constexpr uint64_t kValSeed = 0x56414c;  // "VAL"
}

void TrainConfig::validate() const {
  auto require = [](bool ok, const char* field, const std::string& allowed) {
    if (!ok) throw std::invalid_argument(fmt::format("training config: {} must be {}", field, allowed));
  };
  const ModelConfig& m = model;
  require(steps >= 0, "steps", ">= 0");
  require(std::isfinite(lr) && lr > 0, "lr", "finite and > 0");
  require(batch >= 0 && batch <= (1 << 16), "batch", "in [0, 65536] (0: the model's default)");
  require(threads >= 0 && threads <= 1024, "threads", "in [0, 1024]");
  require(eval_every >= 0 && eval_batches >= 0 && checkpoint_every >= 0 && stats_every >= 0,
          "eval_every, eval_batches, checkpoint_every and stats_every", ">= 0");
  require(fixed_batches >= 0 && fixed_batches <= 1024, "fixed_batches", "in [0, 1024]");
  require(warmup >= -1, "warmup", ">= -1 (-1: the default)");
  require(std::isfinite(min_lr_fraction) && min_lr_fraction >= 0 && min_lr_fraction <= 1, "min_lr_fraction",
          "in [0, 1]");
  require(std::isfinite(weight_decay) && weight_decay >= 0, "weight_decay", "finite and >= 0");
  require(std::isfinite(clip) && clip >= 0, "clip", "finite and >= 0 (0: no clipping)");
  require(std::isfinite(adam_eps) && adam_eps > 0, "adam_eps", "finite and > 0");
  require(master_weights.empty() || master_weights == "fp32" || master_weights == "bf16" || master_weights == "bf16_sr",
          "master_weights", "fp32, bf16 or bf16_sr");
  require(optimizer_state.empty() || optimizer_state == "fp32" || optimizer_state == "bf16" ||
              optimizer_state == "fp8_e4m3",
          "optimizer_state", "fp32, bf16 or fp8_e4m3");
  require(std::isfinite(model.z_loss) && model.z_loss >= 0, "model.z_loss", "finite and >= 0");
  require(inject.empty() || inject == "activation" || inject == "weight", "inject",
          "activation or weight (an outlier mechanism)");
  if (!inject.empty()) {
    require(inject_step >= 0 && inject_step < steps, "inject_step",
            fmt::format("a step of the run, in [0, {}]", steps > 0 ? steps - 1 : 0));
    require(!inject_layer.empty(), "inject_layer", "a layer name");
    require(inject_channel >= 0, "inject_channel", ">= 0");
    require(std::isfinite(inject_magnitude) && inject_magnitude > 0, "inject_magnitude", "finite and > 0");
  }
  require(!model.qk_norm || model.kind == ModelKind::gpt, "model.qk_norm", "off for the mlp (it has no attention)");
  if (m.kind == ModelKind::mlp) {
    require(!m.hidden.empty() && std::all_of(m.hidden.begin(), m.hidden.end(), [](int h) { return h >= 1 && h <= (1 << 20); }),
            "model.hidden", "one or more widths in [1, 1048576]");
  } else {
    require(m.layers >= 1 && m.layers <= 1024, "model.layers", "in [1, 1024]");
    require(m.channels >= 1 && m.channels <= (1 << 16), "model.channels", "in [1, 65536]");
    require(m.heads >= 1 && m.channels % m.heads == 0, "model.heads", ">= 1 and divide model.channels");
    require(m.context >= 1 && m.context <= (1 << 16), "model.context", "in [1, 65536]");
  }
}

Trainer::Trainer(TrainConfig cfg) : cfg_(std::move(cfg)) {
  cfg_.validate();
  if (cfg_.threads > 0) omp_set_num_threads(cfg_.threads);
  const bool gpt = cfg_.model.kind == ModelKind::gpt;
  if (cfg_.batch == 0) cfg_.batch = gpt ? 16 : 128;
  if (cfg_.warmup < 0) cfg_.warmup = std::min<int64_t>(100, cfg_.steps / 10);
  recipe_ = load_recipe(cfg_.recipe);
  const DeviceBackends device = make_device_backends(cfg_.device);
  backend_ = device.quantizers;
  gemm_backend_ = device.gemms;
  load_data();
  model_ = make_model(cfg_.model, recipe_, Execution{backend_, GemmExecution{gemm_backend_, cfg_.gemm}},
                      cfg_.batch, cfg_.seed);
  AdamWConfig ac;
  ac.weight_decay = cfg_.weight_decay;
  ac.beta2 = gpt ? 0.95f : 0.999f;
  ac.eps = cfg_.adam_eps;
  MasterWeights master = recipe_.master_weights;
  if (!cfg_.master_weights.empty()) {
    ac.bf16_master_rne = cfg_.master_weights == "bf16";
    master = cfg_.master_weights == "fp32" ? MasterWeights::fp32 : MasterWeights::bf16_sr;
  }
  OptimizerState moments = recipe_.optimizer_state;
  if (!cfg_.optimizer_state.empty())
    moments = cfg_.optimizer_state == "fp32" ? OptimizerState::fp32
              : cfg_.optimizer_state == "bf16" ? OptimizerState::bf16 : OptimizerState::fp8_e4m3;
  opt_ = std::make_unique<AdamW>(model_->tensors(), model_->params().size(), ac, master, moments, cfg_.seed);
  opt_->round_master(model_->params());
  set_up_injection();
}

Trainer::~Trainer() = default;

void Trainer::load_data() {
  if (cfg_.model.kind == ModelKind::mlp) {
    const std::string dir = cfg_.data.empty() ? kFashionMnistDir : cfg_.data;
    train_set_ = cached_fashion_mnist(dir, true);
    test_set_ = cached_fashion_mnist(dir, false);
    cfg_.model.inputs = static_cast<int>(train_set_->features());
    cfg_.model.classes = 10;
    batcher_ = std::make_unique<ImageBatcher>(*train_set_, cfg_.batch, cfg_.seed);
  } else {
    corpus_ = cached_char_corpus(cfg_.data.empty() ? kFortunesDir : cfg_.data);
    // Padded to a multiple of 128 (as llm.c pads GPT-2's vocabulary) so that the LM head's
    // operands fit every block size and Hadamard size of the catalogue; the extra token
    // ids never occur in the data, and the softmax learns to give them no mass.
    cfg_.model.vocab = (corpus_->vocab_size() + 127) / 128 * 128;
  }
}

int64_t Trainer::samples_per_step() const {
  return cfg_.model.kind == ModelKind::gpt ? int64_t{cfg_.batch} * cfg_.model.context : cfg_.batch;
}

float Trainer::lr_at(int64_t step) const {
  // linear warmup, then cosine decay from lr to lr * min_lr_fraction at the last step
  if (step < cfg_.warmup) return cfg_.lr * static_cast<float>(step + 1) / static_cast<float>(cfg_.warmup);
  const int64_t span = std::max<int64_t>(1, cfg_.steps - cfg_.warmup);
  const double progress = std::min(1.0, static_cast<double>(step - cfg_.warmup) / static_cast<double>(span));
  const double cosine = 0.5 * (1.0 + std::cos(std::numbers::pi * progress));
  const double frac = cfg_.min_lr_fraction + (1.0 - cfg_.min_lr_fraction) * cosine;
  return static_cast<float>(cfg_.lr * frac);
}

void Trainer::next_batch(uint64_t step) {
  batch_.batch = cfg_.batch;
  if (cfg_.model.kind == ModelKind::mlp) {
    batch_.x_f.resize(static_cast<size_t>(cfg_.batch * train_set_->features()));
    batch_.y.resize(static_cast<size_t>(cfg_.batch));
    batcher_->batch(step, batch_.x_f.data(), batch_.y.data());
  } else {
    const size_t n = static_cast<size_t>(cfg_.batch) * static_cast<size_t>(cfg_.model.context);
    batch_.x_i.resize(n);
    batch_.y.resize(n);
    token_batch(corpus_->train, cfg_.batch, cfg_.model.context, cfg_.seed, step, batch_.x_i.data(), batch_.y.data());
  }
}

void Trainer::set_up_injection() {
  if (cfg_.inject.empty()) return;
  const std::vector<QuantGemms*> layers = model_->gemm_layers();
  std::string names;
  for (size_t i = 0; i < layers.size(); ++i) {
    if (layers[i]->info().kind == LayerInfo::attention_bmm) continue;  // no weight, no layer input
    if (layers[i]->info().name == cfg_.inject_layer) injected_layer_ = static_cast<int>(i);
    names += (names.empty() ? "" : ", ") + layers[i]->info().name;
  }
  if (injected_layer_ < 0)
    throw std::invalid_argument(
        fmt::format("training config: inject_layer '{}' is not a layer of this model ({})", cfg_.inject_layer, names));
  const std::string weight = cfg_.inject_layer + ".weight";
  const auto t = std::find_if(model_->tensors().begin(), model_->tensors().end(),
                              [&](const ParamTensor& p) { return p.name == weight; });
  if (t == model_->tensors().end() || t->shape.size() != 2)
    throw std::invalid_argument(fmt::format("training config: layer '{}' has no weight matrix", cfg_.inject_layer));
  if (cfg_.inject_channel >= t->shape[1])
    throw std::invalid_argument(fmt::format("training config: inject_channel {} is not below layer '{}''s {} input channels",
                                            cfg_.inject_channel, cfg_.inject_layer, t->shape[1]));
  if (cfg_.inject == "activation")
    layers[static_cast<size_t>(injected_layer_)]->injection =
        QuantGemms::Injection{cfg_.inject_step, cfg_.inject_channel, cfg_.inject_magnitude};
}

// The weight outlier: column inject_channel of the layer's weight (N, K) times the
// magnitude, once, before step inject_step (the master weights and so every later step
// carry it; a resumed run past that step has it in its checkpoint).
void Trainer::inject_weight_outlier() {
  const std::string weight = cfg_.inject_layer + ".weight";
  for (const ParamTensor& t : model_->tensors())
    if (t.name == weight) {
      float* w = model_->params().data() + t.offset;
      for (int64_t r = 0; r < t.shape[0]; ++r) w[r * t.shape[1] + cfg_.inject_channel] *= cfg_.inject_magnitude;
    }
}

StepMetrics Trainer::step() {
  const auto t0 = std::chrono::steady_clock::now();
  StepMetrics m;
  m.step = step_;
  const auto s = static_cast<uint64_t>(step_);
  next_batch(s);
  const bool collect = cfg_.stats_every > 0 && step_ % cfg_.stats_every == 0;
  if (cfg_.inject == "weight" && step_ == cfg_.inject_step) inject_weight_outlier();
  if (cfg_.fixed_batches > 0) m.fixed_batch_loss = fixed_batch_loss();
  for (QuantGemms* q : model_->gemm_layers()) q->reset_probes();
  m.loss = model_->forward_backward(batch_, s, collect);
  m.attn_logit_max = model_->probes().attn_logit_max;
  m.output_logit_max = model_->probes().output_logit_max;
  for (const QuantGemms* q : model_->gemm_layers()) {
    // the largest over layers; NaN only where no layer measured it
    if (!(q->probes.outlier_ratio <= m.act_outlier_ratio) && !std::isnan(q->probes.outlier_ratio))
      m.act_outlier_ratio = q->probes.outlier_ratio;
    if (!(q->probes.amax_staleness <= m.amax_staleness) && !std::isnan(q->probes.amax_staleness))
      m.amax_staleness = q->probes.amax_staleness;
  }
  auto& g = model_->grads();
  auto& w = model_->params();
  double gn = 0, wn = 0;
  for (size_t i = 0; i < g.size(); ++i) {
    gn += double{g[i]} * g[i];
    wn += double{w[i]} * w[i];
  }
  m.grad_norm = std::sqrt(gn);
  if (cfg_.clip > 0 && m.grad_norm > cfg_.clip) {
    const auto scale = static_cast<float>(cfg_.clip / m.grad_norm);
    for (float& x : g) x *= scale;
  }
  m.lr = lr_at(step_);
  const double du = opt_->update(w, g, m.lr, s);
  m.adam_rms = opt_->last_adam_rms();
  m.update_ratio = wn > 0 ? du / std::sqrt(wn) : 0;
  ++step_;
  losses_.push_back(m.loss);
  m.step_time_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (log_) {
    std::vector<runlog::LayerStats> stats;
    std::vector<runlog::LayerApplied> applied;
    if (collect)
      for (const QuantGemms* q : model_->gemm_layers()) {
        stats.push_back(q->stats);
        applied.push_back(q->applied);
      }
    log_->append_step(m, stats, applied);
  }
  return m;
}

namespace {
using runlog::QuantizerState;
QuantizerState save_quantizer_state(Model& model);
void set_quantizer_state(Model& model, const QuantizerState& s);
}  // namespace

// Held-out batch `index`: mlp, test images [index * batch, (index + 1) * batch); gpt, the
// index-th validation batch (windows from kValSeed, the same for every run).
void Trainer::fill_held_out_batch(Batch& b, int64_t index) const {
  b.batch = cfg_.batch;
  if (cfg_.model.kind == ModelKind::mlp) {
    const int64_t f = test_set_->features(), first = index * cfg_.batch;
    b.x_f.resize(static_cast<size_t>(cfg_.batch * f));
    b.y.resize(static_cast<size_t>(cfg_.batch));
    std::copy_n(test_set_->images.data() + first * f, cfg_.batch * f, b.x_f.data());
    for (int i = 0; i < cfg_.batch; ++i) b.y[static_cast<size_t>(i)] = test_set_->labels[static_cast<size_t>(first + i)];
  } else {
    const size_t n = static_cast<size_t>(cfg_.batch) * static_cast<size_t>(cfg_.model.context);
    b.x_i.resize(n);
    b.y.resize(n);
    token_batch(corpus_->val, cfg_.batch, cfg_.model.context, kValSeed, static_cast<uint64_t>(index), b.x_i.data(),
                b.y.data());
  }
}

// Mean loss over the first `nb` held-out batches at the current weights, and the number of
// correct predictions and of predictions. It reads the quantizers' state (delayed scaling
// quantizes with the training history) but does not add to it: each batch's forward would
// push its amax, so the history is put back after every batch, and training never depends
// on how often the held-out loss is measured.
Trainer::HeldOut Trainer::held_out_loss(int64_t nb, Batch& b) {
  const QuantizerState trained = save_quantizer_state(*model_);
  HeldOut h;
  double loss = 0;
  for (int64_t i = 0; i < nb; ++i) {
    fill_held_out_batch(b, i);
    int64_t c = 0;
    loss += model_->evaluate(b, static_cast<uint64_t>(step_), &c);
    if (trained.length > 0) set_quantizer_state(*model_, trained);
    h.correct += c;
    h.count += static_cast<int64_t>(b.y.size());
  }
  h.loss = nb > 0 ? loss / static_cast<double>(nb) : runlog::kNoValue;
  return h;
}

EvalMetrics Trainer::evaluate() {
  const int64_t nb = cfg_.model.kind == ModelKind::mlp ? test_set_->n / cfg_.batch
                                                        : (cfg_.eval_batches > 0 ? cfg_.eval_batches : 8);
  Batch b;
  const HeldOut h = held_out_loss(nb, b);
  EvalMetrics e;
  e.step = step_;
  e.loss = nb > 0 ? h.loss : 0;
  e.accuracy = h.count ? static_cast<double>(h.correct) / static_cast<double>(h.count) : 0;
  evals_.push_back(e);
  if (log_) log_->append_eval(e);
  return e;
}

// The loss on the first cfg.fixed_batches held-out batches, on the weights the step is
// about to update: the same batches at every step, so the series moves only with the weights.
double Trainer::fixed_batch_loss() {
  const int64_t nb = cfg_.model.kind == ModelKind::mlp ? std::min(cfg_.fixed_batches, test_set_->n / cfg_.batch)
                                                        : cfg_.fixed_batches;
  return held_out_loss(nb, fixed_batch_).loss;
}

namespace {

// Every layer's quantizer state (delayed scaling's amax histories, the only state a
// recipe quantizer keeps) for a checkpoint, and back.
QuantizerState save_quantizer_state(Model& model) {
  const std::vector<QuantGemms*> layers = model.gemm_layers();
  constexpr size_t R = kGemmRoles;
  QuantizerState s;
  s.layers = static_cast<int64_t>(layers.size());
  for (const QuantGemms* q : layers)
    for (GemmRole r : kAllGemmRoles)
      if (const AmaxHistory* h = q->quantizer().history(r))
        s.length = std::max<int64_t>(s.length, static_cast<int64_t>(h->length()));
  if (s.length == 0) return s;
  const auto H = static_cast<size_t>(s.length);
  s.values.assign(layers.size() * R * H, std::numeric_limits<float>::quiet_NaN());
  s.count.assign(layers.size() * R, 0);
  for (size_t l = 0; l < layers.size(); ++l)
    for (GemmRole r : kAllGemmRoles) {
      const size_t i = l * R + static_cast<size_t>(r);
      const std::vector<float> v = layers[l]->quantizer().history_values(r);
      if (v.size() > H) throw std::logic_error("quantizer state longer than its capacity");
      std::copy(v.begin(), v.end(), s.values.begin() + static_cast<std::ptrdiff_t>(i * H));
      s.count[i] = static_cast<int64_t>(v.size());
    }
  return s;
}

void restore_quantizer_state(Model& model, const runlog::Checkpoint& ck, const std::string& path,
                             const std::string& recipe) {
  const std::vector<QuantGemms*> layers = model.gemm_layers();
  const QuantizerState expected = save_quantizer_state(model);  // the shape this model needs
  if (!ck.has_quantizer_state) {
    if (expected.length > 0)
      throw std::runtime_error(fmt::format(
          "{}: the checkpoint holds no amax histories, which recipe '{}' keeps (delayed scaling); "
          "it cannot be resumed bit for bit",
          path, recipe));
    return;
  }
  const QuantizerState& s = ck.quantizer;
  if (s.layers != static_cast<int64_t>(layers.size()) || s.length != expected.length)
    throw std::runtime_error(fmt::format(
        "{}: checkpoint quantizer state is ({}, 6, {}) but the model needs ({}, 6, {})", path,
        s.layers, s.length, layers.size(), expected.length));
  for (const int64_t n : s.count)
    if (n < 0 || n > s.length)
      throw std::runtime_error(fmt::format("{}: checkpoint amax_history_count {} out of range", path, n));
  try {
    set_quantizer_state(model, s);
  } catch (const std::invalid_argument& e) {
    throw std::runtime_error(fmt::format("{}: {}", path, e.what()));
  }
}

// Puts back what save_quantizer_state returned (same model).
void set_quantizer_state(Model& model, const QuantizerState& s) {
  const std::vector<QuantGemms*> layers = model.gemm_layers();
  const auto H = static_cast<size_t>(s.length);
  for (size_t l = 0; l < layers.size(); ++l)
    for (GemmRole r : kAllGemmRoles) {
      const size_t i = l * kGemmRoles + static_cast<size_t>(r);
      layers[l]->quantizer().restore_history(
          r, std::span<const float>(s.values.data() + i * H, static_cast<size_t>(s.count[i])));
    }
}

}  // namespace

void Trainer::checkpoint() {
  if (!log_) return;
  runlog::Checkpoint c;
  c.step = step_;
  c.params = model_->params();
  c.adam_m = opt_->m();
  c.adam_v = opt_->v();
  c.quantizer = save_quantizer_state(*model_);
  log_->write_checkpoint(c);
}

void Trainer::attach_log(const std::string& path) {
  runlog::Header h;
  h.lpx_version = kVersion;
  h.model = std::string(model_kind_name(cfg_.model.kind));
  h.recipe = recipe_.name;
  h.recipe_json = recipe_.to_json();
  h.config_json = cfg_.to_json();
  h.seed = static_cast<int64_t>(cfg_.seed);
  json table = json::array();
  for (const ParamTensor& t : model_->tensors())
    table.push_back({{"name", t.name}, {"offset", t.offset}, {"shape", t.shape}});
  h.param_table = table.dump();
  std::vector<std::string> layers, kinds;
  for (const QuantGemms* q : model_->gemm_layers()) {
    layers.push_back(q->info().name);
    kinds.emplace_back(layer_kind_name(q->info().kind));
  }
  log_ = runlog::RunLog::create(path, h, layers, kinds);
}

std::unique_ptr<Trainer> Trainer::resume(const std::string& path, std::optional<int64_t> steps,
                                         std::optional<Device> device) {
  auto log = runlog::RunLog::open(path);
  TrainConfig cfg;
  try {
    cfg = TrainConfig::from_json(log->header().config_json);
  } catch (const std::exception& e) {  // not JSON, over the JSON limits, or keys missing
    throw std::runtime_error(fmt::format("{}: the logged config is not a training config: {}", path, e.what()));
  }
  if (steps) cfg.steps = *steps;
  if (device) cfg.device = *device;
  try {
    cfg.validate();
  } catch (const std::invalid_argument& e) {  // the log is bad data, not a usage error
    throw std::runtime_error(fmt::format("{}: {}", path, e.what()));
  }
  const runlog::Checkpoint ck = log->read_checkpoint();
  if (ck.step < 0) throw std::runtime_error(fmt::format("{}: no checkpoint to resume from", path));
  auto t = std::make_unique<Trainer>(cfg);
  if (ck.params.size() != t->model_->params().size() || ck.adam_m.size() != ck.params.size() ||
      ck.adam_v.size() != ck.params.size())
    throw std::runtime_error(fmt::format("{}: checkpoint does not match the model", path));
  t->model_->params() = ck.params;
  t->opt_->m() = ck.adam_m;
  t->opt_->v() = ck.adam_v;
  restore_quantizer_state(*t->model_, ck, path, t->recipe_.name);
  t->step_ = ck.step;
  log->truncate(ck.step);
  const runlog::Run d = runlog::read_run(path);
  t->losses_ = d.metrics.loss;
  for (size_t i = 0; i < d.eval.rows(); ++i)
    t->evals_.push_back(EvalMetrics{d.eval.step[i], d.eval.loss[i], d.eval.accuracy[i]});
  t->log_ = std::move(log);
  return t;
}

void Trainer::run(const std::function<void(const StepMetrics&, const std::optional<EvalMetrics>&)>& progress) {
  while (!done()) {
    const StepMetrics m = step();
    std::optional<EvalMetrics> e;
    if ((cfg_.eval_every > 0 && step_ % cfg_.eval_every == 0) || done()) e = evaluate();
    if ((cfg_.checkpoint_every > 0 && step_ % cfg_.checkpoint_every == 0) || done()) checkpoint();
    if (progress) progress(m, e);
  }
}

namespace {
double median(std::vector<double> v) { return median_interval95(std::move(v)).median; }

BenchResult bench_result(const std::string& model, const Trainer& t, double seconds) {
  BenchResult r;
  r.model = model;
  r.recipe = t.recipe().name;
  r.seconds_per_step = seconds;
  r.stats_every = t.config().stats_every;
  r.samples_per_second = seconds > 0 ? static_cast<double>(t.samples_per_step()) / seconds : 0;
  return r;
}
}  // namespace

TrainConfig bench_train_config(const std::string& model, const std::string& recipe, int steps, int threads,
                               GemmOrder order, int64_t stats_every) {
  TrainConfig c;
  if (model.starts_with("gpt-")) apply_gpt_preset(c.model, model);  // a GPT size (model.hpp)
  else c.model.kind = model_kind_by_name(model);
  if (c.model.kind == ModelKind::gpt) c.model.activation = Activation::gelu;
  c.recipe = recipe;
  c.steps = steps + 1;
  c.threads = threads;
  c.gemm = order;
  c.stats_every = stats_every;
  return c;
}

MedianInterval median_interval95(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
  MedianInterval m{n ? v[n / 2] : 0, kNaN, kNaN};
  // P(B <= j) for B ~ Binomial(n, 1/2), summed in log space so that large n cannot overflow
  double log_term = -static_cast<double>(n) * std::log(2.0);  // log P(B = 0)
  double below = 0;                                            // P(B < k)
  size_t k = 0;
  while (k < n) {
    const double next = below + std::exp(log_term);  // P(B <= k) = P(B < k + 1)
    if (next > 0.025) break;
    below = next;
    ++k;
    log_term += std::log(static_cast<double>(n - k + 1) / static_cast<double>(k));
  }
  // k: the largest count with P(B < k) <= 0.025; x(k) is v[k - 1]
  if (k >= 1 && 2 * k <= n) {
    m.lo = v[k - 1];
    m.hi = v[n - k];
  }
  return m;
}

BenchResult bench_train_steps(const std::string& model, const std::string& recipe, int steps,
                              int threads, GemmOrder order, int64_t stats_every) {
  Trainer t(bench_train_config(model, recipe, steps, threads, order, stats_every));
  t.step();  // warm-up: first-touch allocations, OpenMP pool
  std::vector<double> times;
  for (int i = 0; i < steps; ++i) times.push_back(t.step().step_time_s);
  return bench_result(model, t, median(times));
}

BenchPair bench_against_fp32(const std::string& model, const std::string& recipe, int steps, int threads,
                             GemmOrder order, int64_t stats_every) {
  Trainer base(bench_train_config(model, "fp32", steps, threads, GemmOrder::fast, stats_every));
  Trainer run(bench_train_config(model, recipe, steps, threads, order, stats_every));
  base.step();  // warm-up: first-touch allocations, OpenMP pool
  run.step();
  std::vector<double> tb, tr, ratios;
  for (int i = 0; i < steps; ++i) {
    // alternate which goes first, so that a drift in the machine's speed hits both alike
    double b = 0, r = 0;
    if (i % 2 == 0) b = base.step().step_time_s, r = run.step().step_time_s;
    else r = run.step().step_time_s, b = base.step().step_time_s;
    tb.push_back(b);
    tr.push_back(r);
    if (b > 0) ratios.push_back(r / b);
  }
  const MedianInterval r = median_interval95(ratios);
  return BenchPair{bench_result(model, base, median(tb)), bench_result(model, run, median(tr)), r.median, r.lo, r.hi};
}

}  // namespace lpx::sim
