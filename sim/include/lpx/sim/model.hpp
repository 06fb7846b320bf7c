// The simulator's models: an MLP classifier for Fashion-MNIST and a small decoder-only
// transformer (GPT) for character-level language modelling. Forward and backward are
// written out by hand (layers.hpp); every linear layer runs its three GEMMs through its
// QuantGemms (gemm.hpp) so each operand goes through the recipe's quantizer for its role.
//
// Parameters live in one flat float32 array (params()) with a table of named tensors, and
// gradients in a second array of the same layout, which keeps the optimizer, gradient
// norms and checkpoints independent of the model.
#pragma once

#include <array>
#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "lpx/recipes/operand.hpp"
#include "lpx/recipes/recipe.hpp"
#include "lpx/sim/gemm.hpp"

namespace lpx::sim {

struct ParamTensor {
  std::string name;
  int64_t offset = 0, size = 0;
  std::vector<int64_t> shape;
  bool decay = false;  // weight decay applies (matrices, not biases / norms)
};

// One training or evaluation batch. MLP: x_f (B, 784), y (B). GPT: x_i, y (B, T).
struct Batch {
  int batch = 0;
  std::vector<float> x_f;
  std::vector<int32_t> x_i, y;
};

enum class ModelKind : uint8_t { mlp, gpt };
// mlp: relu | gelu; gpt: gelu | swiglu (the MLP block's nonlinearity).
enum class Activation : uint8_t { relu, gelu, swiglu };
std::string_view model_kind_name(ModelKind k);       // "mlp" | "gpt"
ModelKind model_kind_by_name(std::string_view name);  // throws std::invalid_argument
std::string_view activation_name(Activation a);      // "relu" | "gelu" | "swiglu"
Activation activation_by_name(std::string_view name);

struct ModelConfig {
  ModelKind kind = ModelKind::mlp;
  // mlp
  int inputs = 784, classes = 10;
  std::vector<int> hidden{256};
  Activation activation = Activation::relu;
  // gpt
  int vocab = 0, context = 64, layers = 2, channels = 64, heads = 4;
  // Stability options of Wortsman et al. 2023 (docs/recipes.md#instability-mechanisms):
  // qk_norm (gpt) normalizes each head's queries and keys to unit RMS before their dot
  // product, which bounds the attention logits by sqrt(head size); z_loss (both models)
  // adds z_loss * log(Z)^2 per row to the training objective (Z the softmax normalizer),
  // which keeps the output logits from drifting. The logged loss stays the cross-entropy.
  bool qk_norm = false;
  float z_loss = 0.0f;
};

// What the last forward pass saw, for the divergence detectors (NaN: not measured).
struct ForwardProbes {
  double attn_logit_max = std::numeric_limits<double>::quiet_NaN();    // largest scaled q.k (gpt)
  double output_logit_max = std::numeric_limits<double>::quiet_NaN();  // largest |logit| of the head
};

// Named GPT sizes (docs/recipes.md#model-presets): "gpt-tiny" (the default: 2 blocks,
// width 64, 4 heads, context 64), "gpt-small" (6 blocks, width 128, 4 heads, context 64:
// the orderings study's model) and "gpt-medium" (8 blocks, width 192, 6 heads, context
// 128). Sets kind, layers, channels, heads and context of `cfg`; throws
// std::invalid_argument naming the presets for any other name.
void apply_gpt_preset(ModelConfig& cfg, std::string_view name);

// The linear layers (the head and attention products excluded) a model of `cfg` builds, in
// model order, with the LayerInfo their quantizers get: a GPT's "h<b>.attn.qkv",
// "h<b>.attn.proj", "h<b>.mlp.fc", "h<b>.mlp.proj" (index b, count = blocks); the MLP's
// "fc<i>" (count = hidden layers + 1). For layer ablations (recipes/ablation.hpp) without
// building the model; tests/sim hold it to Model::gemm_layers().
std::vector<LayerInfo> linear_layers(const ModelConfig& cfg);
std::string_view gpt_preset_names();  // "gpt-tiny | gpt-small | gpt-medium"

class Model {
 public:
  virtual ~Model() = default;
  const ModelConfig& config() const { return cfg_; }
  std::vector<float>& params() { return w_; }
  std::vector<float>& grads() { return g_; }
  const std::vector<ParamTensor>& tensors() const { return tensors_; }
  // Quantized GEMM layers, in model order (the rows of the per-layer statistics).
  std::vector<QuantGemms*> gemm_layers();

  // Zeroes the gradients, runs forward and backward on the batch, returns the mean loss.
  // `collect` fills each layer's QuantGemms::stats.
  virtual double forward_backward(const Batch& b, uint64_t step, bool collect) = 0;
  // Forward only: mean loss, and the number of correct argmax predictions (classifier
  // accuracy for the MLP, next-token accuracy for the GPT).
  virtual double evaluate(const Batch& b, uint64_t step, int64_t* correct) = 0;
  const ForwardProbes& probes() const { return probes_; }

 protected:
  explicit Model(ModelConfig cfg) : cfg_(std::move(cfg)) {}
  int64_t add_tensor(std::string name, std::vector<int64_t> shape, bool decay);
  void allocate();  // after all add_tensor calls
  float* p(int64_t offset) { return w_.data() + offset; }
  float* d(int64_t offset) { return g_.data() + offset; }
  ModelConfig cfg_;
  std::vector<ParamTensor> tensors_;
  std::vector<float> w_, g_;
  std::vector<std::unique_ptr<QuantGemms>> gemms_;
  ForwardProbes probes_;
};

// Builds a model with parameters initialised from Philox keyed by `seed` (normal init,
// std 1/sqrt(fan_in) for the MLP's layers (sqrt(2/fan_in) with ReLU), 0.02 for the GPT's
// with residual projections scaled by 1/sqrt(2 * layers), as GPT-2). Every layer gets the
// recipe's OperandQuantizer, keyed by `seed`, running its kernels on exec.quantizers (null: the
// CPU) and its GEMMs as exec.gemms says; layers the recipe keeps in high precision
// accumulate in fp32.
struct Execution {
  std::shared_ptr<OperandBackend> quantizers;  // null: the CPU
  GemmExecution gemms;                         // backend null: the CPU; order fast or exact
};
std::unique_ptr<Model> make_model(const ModelConfig& cfg, const Recipe& recipe, Execution exec,
                                  int batch, uint64_t seed);

}  // namespace lpx::sim
