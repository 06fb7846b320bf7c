// The MLP and GPT models: parameter tables, forward, hand-written backward.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numbers>
#include <stdexcept>

#include <fmt/format.h>

#include "lpx/numerics/philox.hpp"
#include "lpx/sim/layers.hpp"
#include "lpx/sim/model.hpp"
#include "enum_names.hpp"

namespace lpx::sim {

namespace L = layers;

namespace {
constexpr uint32_t kStreamInit = 0x494e4954u;  // "INIT"

// Normal(0, std) from Philox (Box-Muller on the element's 4 words), keyed by the flat index.
void init_normal(float* out, int64_t n, int64_t offset, float stdev, uint64_t seed) {
  for (int64_t i = 0; i < n; ++i) {
    const Philox4x32 r = random_block(seed, kStreamInit, static_cast<uint64_t>(offset + i));
    const double u1 = (static_cast<double>(r.v[0]) + 1.0) / 4294967297.0;  // (0, 1)
    const double u2 = static_cast<double>(r.v[1]) / 4294967296.0;
    const double z = std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
    out[i] = static_cast<float>(z * stdev);
  }
}

void zero(std::vector<float>& v) { std::fill(v.begin(), v.end(), 0.0f); }
void resize(std::vector<float>& v, int64_t n) { v.assign(static_cast<size_t>(n), 0.0f); }

int64_t argmax_correct(const float* logits, const int32_t* targets, int64_t n, int64_t v) {
  int64_t correct = 0;
  for (int64_t r = 0; r < n; ++r) {
    int64_t best = 0;
    for (int64_t i = 1; i < v; ++i)
      if (logits[r * v + i] > logits[r * v + best]) best = i;
    correct += best == targets[r];
  }
  return correct;
}

// Largest |logit| of a forward pass (the output-logit probe); NaN when one is not finite
// is kept as NaN so a blown-up run reads as such.
double largest_abs(const std::vector<float>& x) {
  double m = 0;
  for (float v : x) {
    if (!std::isfinite(v)) return std::numeric_limits<double>::quiet_NaN();
    m = std::max(m, static_cast<double>(std::fabs(v)));
  }
  return m;
}

// z-loss (Wortsman et al. 2023, docs/recipes.md#instability-mechanisms): coef * log(Z)^2
// per row, log Z = the row's log-sum-exp; its gradient 2 coef log(Z) softmax is added to
// dlogits (scaled like the mean cross-entropy). log Z is recovered from the row's loss:
// loss = log Z - logit[target].
void add_z_loss_gradient(float* dlogits, const float* probs, const float* logits, const float* losses,
                         const int32_t* targets, int64_t n, int64_t v, float coef, float scale) {
  if (coef == 0.0f) return;
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < n; ++r) {
    const float lse = losses[r] + logits[r * v + targets[r]];
    const float k = 2.0f * coef * lse * scale;
    for (int64_t i = 0; i < v; ++i) dlogits[r * v + i] += k * probs[r * v + i];
  }
}

// The recipe's pieces every layer needs.
struct LayerFactory {
  const Recipe& recipe;
  Execution exec;
  uint64_t seed;
  std::unique_ptr<QuantGemms> operator()(const LayerInfo& info) const {
    OperandQuantizer q(recipe, info, seed);
    q.set_backend(exec.quantizers);
    const Accumulation acc = q.high_precision() ? Accumulation{} : recipe.accumulation;
    return std::make_unique<QuantGemms>(std::move(q), acc, exec.gemms);
  }
};
}  // namespace

int64_t Model::add_tensor(std::string name, std::vector<int64_t> shape, bool decay) {
  int64_t size = 1;
  for (int64_t s : shape) size *= s;
  const int64_t offset = tensors_.empty() ? 0 : tensors_.back().offset + tensors_.back().size;
  tensors_.push_back(ParamTensor{std::move(name), offset, size, std::move(shape), decay});
  return offset;
}

void Model::allocate() {
  const int64_t n = tensors_.empty() ? 0 : tensors_.back().offset + tensors_.back().size;
  w_.assign(static_cast<size_t>(n), 0.0f);
  g_.assign(static_cast<size_t>(n), 0.0f);
}

std::vector<QuantGemms*> Model::gemm_layers() {
  std::vector<QuantGemms*> out;
  for (auto& g : gemms_) out.push_back(g.get());
  return out;
}

// ============================================================================ MLP

namespace {

class Mlp final : public Model {
 public:
  Mlp(const ModelConfig& cfg, const LayerFactory& make_gemms, int batch, uint64_t seed)
      : Model(cfg), batch_(batch) {
    if (cfg.activation != Activation::relu && cfg.activation != Activation::gelu)
      throw std::invalid_argument(fmt::format("mlp: activation '{}' is not relu or gelu", activation_name(cfg.activation)));
    dims_.push_back(cfg.inputs);
    for (int h : cfg.hidden) dims_.push_back(h);
    dims_.push_back(cfg.classes);
    const int nl = static_cast<int>(dims_.size()) - 1;
    for (int i = 0; i < nl; ++i) {
      w_off_.push_back(add_tensor(fmt::format("fc{}.weight", i), {dims_[i + 1], dims_[i]}, true));
      b_off_.push_back(add_tensor(fmt::format("fc{}.bias", i), {dims_[i + 1]}, false));
    }
    allocate();
    for (int i = 0; i < nl; ++i) {
      const double fan_in = static_cast<double>(dims_[i]);
      const double stdev = (cfg.activation == Activation::relu && i + 1 < nl ? std::sqrt(2.0) : 1.0) / std::sqrt(fan_in);
      init_normal(p(w_off_[i]), dims_[i + 1] * dims_[i], w_off_[i], static_cast<float>(stdev), seed);
      LayerInfo info{i, nl, i + 1 == nl ? LayerInfo::head : LayerInfo::linear, fmt::format("fc{}", i)};
      gemms_.push_back(make_gemms(info));
      gemms_.back()->probe_outliers = i > 0;  // fc0's input is the images, not an activation
    }
    // activations: acts[i] is the input of layer i (B, dims[i]); pre[i] its output (B, dims[i+1])
    acts_.resize(static_cast<size_t>(nl));
    dacts_.resize(static_cast<size_t>(nl));
    pre_.resize(static_cast<size_t>(nl));
    dpre_.resize(static_cast<size_t>(nl));
    for (int i = 0; i < nl; ++i) {
      resize(acts_[i], int64_t{batch} * dims_[i]);
      resize(dacts_[i], int64_t{batch} * dims_[i]);
      resize(pre_[i], int64_t{batch} * dims_[i + 1]);
      resize(dpre_[i], int64_t{batch} * dims_[i + 1]);
    }
    resize(probs_, int64_t{batch} * cfg.classes);
    resize(losses_, batch);
  }

  double forward(const Batch& b, uint64_t step, bool collect) {
    if (b.batch != batch_ || b.x_f.size() != static_cast<size_t>(int64_t{batch_} * dims_[0]))
      throw std::invalid_argument("mlp: batch has the wrong shape");
    const int nl = static_cast<int>(gemms_.size());
    const int64_t bsz = batch_;
    std::copy(b.x_f.begin(), b.x_f.end(), acts_[0].begin());
    for (int i = 0; i < nl; ++i) {
      // pre[i] (B, d_out) = acts[i] (B, d_in) W_i^T + b_i
      gemms_[static_cast<size_t>(i)]->forward(acts_[i].data(), p(w_off_[i]), p(b_off_[i]),
                                              pre_[i].data(), bsz, dims_[i + 1], dims_[i], step, collect);
      if (i + 1 < nl) {
        if (cfg_.activation == Activation::relu) L::relu_forward(acts_[i + 1].data(), pre_[i].data(), bsz * dims_[i + 1]);
        else L::gelu_forward(acts_[i + 1].data(), pre_[i].data(), bsz * dims_[i + 1]);
      }
    }
    probes_.output_logit_max = largest_abs(pre_.back());
    // probs (B, 10) = softmax(logits)
    return L::softmax_xent_forward(probs_.data(), pre_.back().data(), b.y.data(), bsz,
                                   int64_t{cfg_.classes}, losses_.data());
  }

  double forward_backward(const Batch& b, uint64_t step, bool collect) override {
    zero(g_);
    const double loss = forward(b, step, collect);
    const int nl = static_cast<int>(gemms_.size());
    const int64_t bsz = batch_;
    L::softmax_xent_backward(dpre_.back().data(), probs_.data(), b.y.data(), bsz,
                             int64_t{cfg_.classes}, 1.0f / static_cast<float>(bsz));
    add_z_loss_gradient(dpre_.back().data(), probs_.data(), pre_.back().data(), losses_.data(), b.y.data(), bsz,
                        int64_t{cfg_.classes}, cfg_.z_loss, 1.0f / static_cast<float>(bsz));
    for (int i = nl - 1; i >= 0; --i) {
      // dacts[i] (B, d_in) = dpre[i] W_i; dW_i += dpre[i]^T acts[i]; db_i += sum dpre[i]
      gemms_[static_cast<size_t>(i)]->backward(dpre_[i].data(), acts_[i].data(), p(w_off_[i]),
                                               i > 0 ? dacts_[i].data() : nullptr, d(w_off_[i]),
                                               d(b_off_[i]), bsz, dims_[i + 1], dims_[i], step, collect);
      if (i > 0) {
        zero(dpre_[i - 1]);
        if (cfg_.activation == Activation::relu)
          L::relu_backward(dpre_[i - 1].data(), pre_[i - 1].data(), dacts_[i].data(), bsz * dims_[i]);
        else
          L::gelu_backward(dpre_[i - 1].data(), pre_[i - 1].data(), dacts_[i].data(), bsz * dims_[i]);
      }
    }
    return loss;
  }

  double evaluate(const Batch& b, uint64_t step, int64_t* correct) override {
    const double loss = forward(b, step, false);
    if (correct) *correct = argmax_correct(pre_.back().data(), b.y.data(), batch_, cfg_.classes);
    return loss;
  }

 private:
  int batch_;
  std::vector<int64_t> dims_;
  std::vector<int64_t> w_off_, b_off_;
  std::vector<std::vector<float>> acts_, dacts_, pre_, dpre_;
  std::vector<float> probs_, losses_;
};

// ============================================================================ GPT

class Gpt final : public Model {
  struct Block {
    int64_t ln1w, ln1b, qkvw, qkvb, projw, projb, ln2w, ln2b, fcw, fcb, fcprojw, fcprojb;
    QuantGemms *qkv, *proj, *fc, *fcproj, *attn;
    // activations, each for the B*T rows of the batch
    std::vector<float> qk_rstd;  // qk_norm: 1/RMS of each row's query and key per head (N, NH, 2)
    std::vector<float> ln1, ln1_mean, ln1_rstd, qkv_out, preatt, att, atty, res2, ln2,
        ln2_mean, ln2_rstd, fch, fch_act;
  };

 public:
  Gpt(const ModelConfig& cfg, const LayerFactory& make_gemms, int batch, uint64_t seed)
      : Model(cfg), B_(batch), T_(cfg.context), C_(cfg.channels), NH_(cfg.heads), V_(cfg.vocab) {
    if (V_ < 2) throw std::invalid_argument("gpt: vocabulary size must be at least 2");
    if (C_ % NH_ != 0) throw std::invalid_argument("gpt: channels must be a multiple of heads");
    if (cfg.activation != Activation::gelu && cfg.activation != Activation::swiglu)
      throw std::invalid_argument(fmt::format("gpt: activation '{}' is not gelu or swiglu", activation_name(cfg.activation)));
    swiglu_ = cfg.activation == Activation::swiglu;
    // SwiGLU hidden width ~ 8C/3 (same parameter count as a 4C GELU MLP), a multiple of 16
    H_ = swiglu_ ? (8 * C_ / 3 + 15) / 16 * 16 : 4 * C_;
    F_ = swiglu_ ? 2 * H_ : H_;
    const int nl = cfg.layers;
    wte_ = add_tensor("wte", {V_, C_}, true);
    wpe_ = add_tensor("wpe", {T_, C_}, true);
    blocks_.resize(static_cast<size_t>(nl));
    for (int l = 0; l < nl; ++l) {
      Block& k = blocks_[static_cast<size_t>(l)];
      const std::string h = fmt::format("h{}.", l);
      k.ln1w = add_tensor(h + "ln1.weight", {C_}, false);
      k.ln1b = add_tensor(h + "ln1.bias", {C_}, false);
      k.qkvw = add_tensor(h + "attn.qkv.weight", {3 * C_, C_}, true);
      k.qkvb = add_tensor(h + "attn.qkv.bias", {3 * C_}, false);
      k.projw = add_tensor(h + "attn.proj.weight", {C_, C_}, true);
      k.projb = add_tensor(h + "attn.proj.bias", {C_}, false);
      k.ln2w = add_tensor(h + "ln2.weight", {C_}, false);
      k.ln2b = add_tensor(h + "ln2.bias", {C_}, false);
      k.fcw = add_tensor(h + "mlp.fc.weight", {F_, C_}, true);
      k.fcb = add_tensor(h + "mlp.fc.bias", {F_}, false);
      k.fcprojw = add_tensor(h + "mlp.proj.weight", {C_, H_}, true);
      k.fcprojb = add_tensor(h + "mlp.proj.bias", {C_}, false);
    }
    lnfw_ = add_tensor("ln_f.weight", {C_}, false);
    lnfb_ = add_tensor("ln_f.bias", {C_}, false);
    head_ = add_tensor("lm_head.weight", {V_, C_}, true);
    allocate();
    // init (GPT-2): N(0, 0.02), residual projections 0.02/sqrt(2L), norms 1, biases 0
    const float resid_std = 0.02f / std::sqrt(2.0f * static_cast<float>(nl));
    for (const ParamTensor& t : tensors_) {
      const bool is_norm_w = t.name.ends_with("ln1.weight") || t.name.ends_with("ln2.weight") || t.name == "ln_f.weight";
      if (is_norm_w) std::fill_n(p(t.offset), t.size, 1.0f);
      else if (t.decay) {
        const bool resid = t.name.ends_with("attn.proj.weight") || t.name.ends_with("mlp.proj.weight");
        init_normal(p(t.offset), t.size, t.offset, resid ? resid_std : 0.02f, seed);
      }
    }
    // GEMM layers: index = block index, count = number of blocks (the head: count - 1)
    const int64_t N = int64_t{B_} * T_;
    for (int l = 0; l < nl; ++l) {
      Block& k = blocks_[static_cast<size_t>(l)];
      const std::string h = fmt::format("h{}.", l);
      auto add = [&](const std::string& name, LayerInfo::Kind kind) {
        gemms_.push_back(make_gemms(LayerInfo{l, nl, kind, h + name}));
        return gemms_.back().get();
      };
      k.qkv = add("attn.qkv", LayerInfo::linear);
      k.attn = add("attn.bmm", LayerInfo::attention_bmm);
      k.attn->merge = true;
      k.attn->probe_outliers = false;  // its operands are q, k, P and V, not a layer input
      // Attention products always run through the layer's quantizer and GEMMs (gather,
      // attention_forward_quant): kept in "bf16" the quantizer rounds Q, K, P, V and their
      // gradients to bfloat16 (RNE) and the GEMMs accumulate in fp32 (make_gemms gives kept
      // layers fp32 accumulation); kept in "fp32" the operands pass through untouched.
      k.proj = add("attn.proj", LayerInfo::linear);
      k.fc = add("mlp.fc", LayerInfo::linear);
      k.fcproj = add("mlp.proj", LayerInfo::linear);
      resize(k.ln1, N * C_); resize(k.ln1_mean, N); resize(k.ln1_rstd, N);
      resize(k.qkv_out, N * 3 * C_);
      if (cfg.qk_norm) resize(k.qk_rstd, N * NH_ * 2);
      resize(k.preatt, int64_t{B_} * NH_ * T_ * T_); resize(k.att, int64_t{B_} * NH_ * T_ * T_);
      resize(k.atty, N * C_); resize(k.res2, N * C_);
      resize(k.ln2, N * C_); resize(k.ln2_mean, N); resize(k.ln2_rstd, N);
      resize(k.fch, N * F_); resize(k.fch_act, N * H_);
    }
    gemms_.push_back(make_gemms(LayerInfo{nl - 1, nl, LayerInfo::head, "lm_head"}));
    head_gemm_ = gemms_.back().get();
    resid_.resize(static_cast<size_t>(nl) + 1);
    for (auto& r : resid_) resize(r, N * C_);
    resize(lnf_, N * C_); resize(lnf_mean_, N); resize(lnf_rstd_, N);
    resize(logits_, N * V_); resize(probs_, N * V_); resize(losses_, N);
    resize(dlogits_, N * V_);
    resize(dres_a_, N * C_); resize(dres_b_, N * C_); resize(dln_, N * C_);
    resize(dqkv_, N * 3 * C_); resize(datty_, N * C_);
    resize(dfch_, N * F_); resize(dfch_act_, N * H_);
  }

  double forward(const Batch& b, uint64_t step, bool collect) {
    const int64_t N = int64_t{B_} * T_;
    if (b.batch != B_ || b.x_i.size() != static_cast<size_t>(N) || b.y.size() != static_cast<size_t>(N))
      throw std::invalid_argument("gpt: batch has the wrong shape");
    for (int32_t t : b.x_i)
      if (t < 0 || t >= V_) throw std::invalid_argument("gpt: token id out of range");
    // resid[0] (B,T,C) = wte[x] + wpe
    L::embedding_forward(resid_[0].data(), b.x_i.data(), p(wte_), p(wpe_), B_, T_, C_);
    probes_.attn_logit_max = -std::numeric_limits<double>::infinity();
    for (size_t l = 0; l < blocks_.size(); ++l) {
      Block& k = blocks_[l];
      const float* x = resid_[l].data();
      // ln1 (B,T,C)
      L::layernorm_forward(k.ln1.data(), k.ln1_mean.data(), k.ln1_rstd.data(), x, p(k.ln1w), p(k.ln1b), N, C_);
      // qkv (B,T,3C) = ln1 Wqkv^T + b
      k.qkv->forward(k.ln1.data(), p(k.qkvw), p(k.qkvb), k.qkv_out.data(), N, 3 * C_, C_, step, collect);
      if (cfg_.qk_norm) qk_norm_forward(k);
      // atty (B,T,C) = causal attention over qkv
      attention_forward_quant(k, step, collect);
      // res2 (B,T,C) = x + atty Wproj^T + b
      k.proj->forward(k.atty.data(), p(k.projw), p(k.projb), k.res2.data(), N, C_, C_, step, collect);
      for (int64_t i = 0; i < N * C_; ++i) k.res2[static_cast<size_t>(i)] += x[i];
      // ln2 (B,T,C); fch (B,T,F) = ln2 Wfc^T + b; fch_act (B,T,H)
      L::layernorm_forward(k.ln2.data(), k.ln2_mean.data(), k.ln2_rstd.data(), k.res2.data(), p(k.ln2w), p(k.ln2b), N, C_);
      k.fc->forward(k.ln2.data(), p(k.fcw), p(k.fcb), k.fch.data(), N, F_, C_, step, collect);
      if (swiglu_) L::swiglu_forward(k.fch_act.data(), k.fch.data(), N, H_);
      else L::gelu_forward(k.fch_act.data(), k.fch.data(), N * H_);
      // resid[l+1] (B,T,C) = res2 + fch_act Wfcproj^T + b
      float* y = resid_[l + 1].data();
      k.fcproj->forward(k.fch_act.data(), p(k.fcprojw), p(k.fcprojb), y, N, C_, H_, step, collect);
      for (int64_t i = 0; i < N * C_; ++i) y[i] += k.res2[static_cast<size_t>(i)];
    }
    // lnf (B,T,C); logits (B,T,V) = lnf Whead^T; probs (B,T,V)
    L::layernorm_forward(lnf_.data(), lnf_mean_.data(), lnf_rstd_.data(), resid_.back().data(), p(lnfw_), p(lnfb_), N, C_);
    head_gemm_->forward(lnf_.data(), p(head_), nullptr, logits_.data(), N, V_, C_, step, collect);
    probes_.output_logit_max = largest_abs(logits_);
    return L::softmax_xent_forward(probs_.data(), logits_.data(), b.y.data(), N, int64_t{V_}, losses_.data());
  }

  double forward_backward(const Batch& b, uint64_t step, bool collect) override {
    zero(g_);
    for (auto& k : blocks_) k.attn->reset_stats();
    const double loss = forward(b, step, collect);
    const int64_t N = int64_t{B_} * T_;
    // dlogits (B,T,V) = (probs - onehot) / (B*T)
    L::softmax_xent_backward(dlogits_.data(), probs_.data(), b.y.data(), N, int64_t{V_}, 1.0f / static_cast<float>(N));
    add_z_loss_gradient(dlogits_.data(), probs_.data(), logits_.data(), losses_.data(), b.y.data(), N, int64_t{V_},
                        cfg_.z_loss, 1.0f / static_cast<float>(N));
    // dlnf (B,T,C) = dlogits Whead; dWhead += dlogits^T lnf
    head_gemm_->backward(dlogits_.data(), lnf_.data(), p(head_), dln_.data(), d(head_), nullptr, N, V_, C_, step, collect);
    // dres_a = dresid[L] (B,T,C)
    zero(dres_a_);
    L::layernorm_backward(dres_a_.data(), d(lnfw_), d(lnfb_), dln_.data(), resid_.back().data(), p(lnfw_), lnf_mean_.data(), lnf_rstd_.data(), N, C_);
    for (size_t li = blocks_.size(); li-- > 0;) {
      Block& k = blocks_[li];
      float* dy = dres_a_.data();  // d resid[l+1]
      // fcproj: dfch_act (B,T,H) = dy Wfcproj; dWfcproj += dy^T fch_act
      k.fcproj->backward(dy, k.fch_act.data(), p(k.fcprojw), dfch_act_.data(), d(k.fcprojw), d(k.fcprojb), N, C_, H_, step, collect);
      zero(dfch_);
      if (swiglu_) L::swiglu_backward(dfch_.data(), k.fch.data(), dfch_act_.data(), N, H_);
      else L::gelu_backward(dfch_.data(), k.fch.data(), dfch_act_.data(), N * H_);
      // fc: dln2 (B,T,C) = dfch Wfc
      k.fc->backward(dfch_.data(), k.ln2.data(), p(k.fcw), dln_.data(), d(k.fcw), d(k.fcb), N, F_, C_, step, collect);
      // dres2 (B,T,C) = dy + ln2 backward
      std::copy(dres_a_.begin(), dres_a_.end(), dres_b_.begin());
      L::layernorm_backward(dres_b_.data(), d(k.ln2w), d(k.ln2b), dln_.data(), k.res2.data(), p(k.ln2w), k.ln2_mean.data(), k.ln2_rstd.data(), N, C_);
      // proj: datty (B,T,C) = dres2 Wproj
      k.proj->backward(dres_b_.data(), k.atty.data(), p(k.projw), datty_.data(), d(k.projw), d(k.projb), N, C_, C_, step, collect);
      // attention: dqkv (B,T,3C)
      zero(dqkv_);
      attention_backward_quant(k, step, collect);
      if (cfg_.qk_norm) qk_norm_backward(k);
      // qkv: dln1 (B,T,C) = dqkv Wqkv
      k.qkv->backward(dqkv_.data(), k.ln1.data(), p(k.qkvw), dln_.data(), d(k.qkvw), d(k.qkvb), N, 3 * C_, C_, step, collect);
      // dresid[l] = dres2 + ln1 backward  (into dres_a_)
      std::copy(dres_b_.begin(), dres_b_.end(), dres_a_.begin());
      L::layernorm_backward(dres_a_.data(), d(k.ln1w), d(k.ln1b), dln_.data(), resid_[li].data(), p(k.ln1w), k.ln1_mean.data(), k.ln1_rstd.data(), N, C_);
    }
    L::embedding_backward(d(wte_), d(wpe_), dres_a_.data(), b.x_i.data(), B_, T_, C_);
    return loss;
  }

  double evaluate(const Batch& b, uint64_t step, int64_t* correct) override {
    const double loss = forward(b, step, false);
    if (correct) *correct = argmax_correct(logits_.data(), b.y.data(), int64_t{B_} * T_, V_);
    return loss;
  }

 private:
  // QK normalization (Wortsman et al. 2023; docs/recipes.md#instability-mechanisms), without
  // learned gains: each head's query and key rows of qkv_out are divided by their RMS
  // (eps 1e-6) in place, and the backward pass maps their gradients back through it:
  // dx = rstd (dxhat - xhat mean(dxhat xhat)).
  void qk_norm_forward(Block& k) {
    const int64_t N = int64_t{B_} * T_, hs = C_ / NH_, c3 = 3 * C_;
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < N; ++r)
      for (int64_t h = 0; h < NH_; ++h)
        for (int64_t part = 0; part < 2; ++part) {
          float* x = k.qkv_out.data() + r * c3 + part * C_ + h * hs;
          float ss = 0;
          for (int64_t i = 0; i < hs; ++i) ss += x[i] * x[i];
          const float rstd = 1.0f / std::sqrt(ss / static_cast<float>(hs) + 1e-6f);
          for (int64_t i = 0; i < hs; ++i) x[i] *= rstd;
          k.qk_rstd[static_cast<size_t>((r * NH_ + h) * 2 + part)] = rstd;
        }
  }
  void qk_norm_backward(Block& k) {
    const int64_t N = int64_t{B_} * T_, hs = C_ / NH_, c3 = 3 * C_;
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < N; ++r)
      for (int64_t h = 0; h < NH_; ++h)
        for (int64_t part = 0; part < 2; ++part) {
          const float* xhat = k.qkv_out.data() + r * c3 + part * C_ + h * hs;
          float* d = dqkv_.data() + r * c3 + part * C_ + h * hs;
          float dot = 0;
          for (int64_t i = 0; i < hs; ++i) dot += d[i] * xhat[i];
          dot /= static_cast<float>(hs);
          const float rstd = k.qk_rstd[static_cast<size_t>((r * NH_ + h) * 2 + part)];
          for (int64_t i = 0; i < hs; ++i) d[i] = rstd * (d[i] - xhat[i] * dot);
        }
  }

  // Attention with its two batched GEMMs through the layer's quantizer, one (batch, head)
  // at a time: S (T,T) = q k^T (X = q, W = k), O (T,hs) = P V (X = P, W = V^T (hs,T)).
  void gather(const Block& k, int64_t bi, int64_t h) {
    const int64_t hs = C_ / NH_, c3 = 3 * C_;
    qh_.resize(static_cast<size_t>(T_ * hs)); kh_.resize(qh_.size()); vt_.resize(qh_.size());
    for (int64_t t = 0; t < T_; ++t)
      for (int64_t i = 0; i < hs; ++i) {
        const float* row = k.qkv_out.data() + (bi * T_ + t) * c3 + h * hs + i;
        qh_[static_cast<size_t>(t * hs + i)] = row[0];
        kh_[static_cast<size_t>(t * hs + i)] = row[C_];
        vt_[static_cast<size_t>(i * T_ + t)] = row[2 * C_];
      }
  }
  void attention_forward_quant(Block& k, uint64_t step, bool collect) {
    const int64_t hs = C_ / NH_;
    const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
    s_.resize(static_cast<size_t>(T_ * T_)); oh_.resize(static_cast<size_t>(T_ * hs));
    for (int64_t bi = 0; bi < B_; ++bi)
      for (int64_t h = 0; h < NH_; ++h) {
        gather(k, bi, h);
        k.attn->forward(qh_.data(), kh_.data(), nullptr, s_.data(), T_, T_, hs, step, collect);
        float* pre = k.preatt.data() + (bi * NH_ + h) * T_ * T_;
        float* a = k.att.data() + (bi * NH_ + h) * T_ * T_;
        for (int64_t t1 = 0; t1 < T_; ++t1) {
          float maxv = -1e30f;
          for (int64_t t2 = 0; t2 <= t1; ++t2) {
            pre[t1 * T_ + t2] = s_[static_cast<size_t>(t1 * T_ + t2)] * scale;
            maxv = std::max(maxv, pre[t1 * T_ + t2]);
          }
          if (!(maxv <= probes_.attn_logit_max)) probes_.attn_logit_max = maxv;  // NaN sticks
          float sum = 0;
          for (int64_t t2 = 0; t2 <= t1; ++t2) sum += (a[t1 * T_ + t2] = std::exp(pre[t1 * T_ + t2] - maxv));
          for (int64_t t2 = 0; t2 < T_; ++t2) a[t1 * T_ + t2] = t2 <= t1 ? a[t1 * T_ + t2] / sum : 0.0f;
        }
        // oh (T,hs) = P (T,T) (V^T (hs,T))^T
        k.attn->forward(a, vt_.data(), nullptr, oh_.data(), T_, hs, T_, step, collect);
        for (int64_t t = 0; t < T_; ++t)
          std::copy_n(oh_.data() + t * hs, hs, k.atty.data() + (bi * T_ + t) * C_ + h * hs);
      }
  }
  void attention_backward_quant(Block& k, uint64_t step, bool collect) {
    const int64_t hs = C_ / NH_, c3 = 3 * C_;
    const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
    std::vector<float> dout(static_cast<size_t>(T_ * hs)), dp(static_cast<size_t>(T_ * T_)),
        ds(static_cast<size_t>(T_ * T_)), dvt(static_cast<size_t>(hs * T_)), dq(static_cast<size_t>(T_ * hs)),
        dk(static_cast<size_t>(T_ * hs));
    for (int64_t bi = 0; bi < B_; ++bi)
      for (int64_t h = 0; h < NH_; ++h) {
        gather(k, bi, h);
        const float* a = k.att.data() + (bi * NH_ + h) * T_ * T_;
        for (int64_t t = 0; t < T_; ++t)
          std::copy_n(datty_.data() + (bi * T_ + t) * C_ + h * hs, hs, dout.data() + t * hs);
        // O = P V^T^T: dP (T,T) = dO (T,hs) V^T (hs,T); dV^T (hs,T) += dO^T P
        std::fill(dvt.begin(), dvt.end(), 0.0f);
        k.attn->backward(dout.data(), a, vt_.data(), dp.data(), dvt.data(), nullptr, T_, hs, T_, step, collect);
        // softmax backward, then the 1/sqrt(hs) scale
        for (int64_t t1 = 0; t1 < T_; ++t1) {
          float s = 0;
          for (int64_t t2 = 0; t2 <= t1; ++t2) s += a[t1 * T_ + t2] * dp[static_cast<size_t>(t1 * T_ + t2)];
          for (int64_t t2 = 0; t2 < T_; ++t2)
            ds[static_cast<size_t>(t1 * T_ + t2)] =
                t2 <= t1 ? a[t1 * T_ + t2] * (dp[static_cast<size_t>(t1 * T_ + t2)] - s) * scale : 0.0f;
        }
        // S = q k^T: dq (T,hs) = dS k; dk (T,hs) += dS^T q
        std::fill(dk.begin(), dk.end(), 0.0f);
        k.attn->backward(ds.data(), qh_.data(), kh_.data(), dq.data(), dk.data(), nullptr, T_, T_, hs, step, collect);
        for (int64_t t = 0; t < T_; ++t)
          for (int64_t i = 0; i < hs; ++i) {
            float* row = dqkv_.data() + (bi * T_ + t) * c3 + h * hs + i;
            row[0] += dq[static_cast<size_t>(t * hs + i)];
            row[C_] += dk[static_cast<size_t>(t * hs + i)];
            row[2 * C_] += dvt[static_cast<size_t>(i * T_ + t)];
          }
      }
  }

  int B_, T_, C_, NH_, V_;
  int64_t H_ = 0, F_ = 0;
  bool swiglu_ = false;
  int64_t wte_, wpe_, lnfw_ = 0, lnfb_ = 0, head_ = 0;
  std::vector<Block> blocks_;
  QuantGemms* head_gemm_ = nullptr;
  std::vector<std::vector<float>> resid_;
  std::vector<float> lnf_, lnf_mean_, lnf_rstd_, logits_, probs_, losses_, dlogits_;
  std::vector<float> dres_a_, dres_b_, dln_, dqkv_, datty_, dfch_, dfch_act_;
  std::vector<float> qh_, kh_, vt_, s_, oh_;
};

}  // namespace

std::unique_ptr<Model> make_model(const ModelConfig& cfg, const Recipe& recipe, Execution exec,
                                  int batch, uint64_t seed) {
  const LayerFactory make_gemms{recipe, std::move(exec), seed};
  switch (cfg.kind) {
    case ModelKind::mlp: return std::make_unique<Mlp>(cfg, make_gemms, batch, seed);
    case ModelKind::gpt: return std::make_unique<Gpt>(cfg, make_gemms, batch, seed);
  }
  throw std::invalid_argument("unknown model kind");
}

namespace {
constexpr EnumNames<ModelKind, 2> kModelKindNames{{"mlp", "gpt"}};
constexpr EnumNames<Activation, 3> kActivationNames{{"relu", "gelu", "swiglu"}};
}  // namespace

namespace {
struct GptPreset {
  std::string_view name;
  int layers, channels, heads, context;
};
constexpr GptPreset kGptPresets[] = {
    {"gpt-tiny", 2, 64, 4, 64},
    {"gpt-small", 6, 128, 4, 64},
    {"gpt-medium", 8, 192, 6, 128},
};
}  // namespace

void apply_gpt_preset(ModelConfig& cfg, std::string_view name) {
  for (const GptPreset& p : kGptPresets)
    if (p.name == name) {
      cfg.kind = ModelKind::gpt;
      cfg.layers = p.layers;
      cfg.channels = p.channels;
      cfg.heads = p.heads;
      cfg.context = p.context;
      return;
    }
  throw std::invalid_argument(fmt::format("unknown preset '{}' ({})", name, gpt_preset_names()));
}

std::string_view gpt_preset_names() { return "gpt-tiny | gpt-small | gpt-medium"; }

std::vector<LayerInfo> linear_layers(const ModelConfig& cfg) {
  std::vector<LayerInfo> out;
  if (cfg.kind == ModelKind::gpt) {
    for (int b = 0; b < cfg.layers; ++b)
      for (const char* name : {"attn.qkv", "attn.proj", "mlp.fc", "mlp.proj"})  // as GptModel names them
        out.push_back(LayerInfo{b, cfg.layers, LayerInfo::linear, fmt::format("h{}.{}", b, name)});
  } else {
    const int nl = static_cast<int>(cfg.hidden.size()) + 1;
    for (int i = 0; i + 1 < nl; ++i) out.push_back(LayerInfo{i, nl, LayerInfo::linear, fmt::format("fc{}", i)});
  }
  return out;
}

std::string_view model_kind_name(ModelKind k) { return kModelKindNames(k); }

ModelKind model_kind_by_name(std::string_view name) {
  if (const auto k = kModelKindNames.find(name)) return *k;
  throw std::invalid_argument(fmt::format("unknown model '{}' (mlp | gpt)", name));
}

std::string_view activation_name(Activation a) { return kActivationNames(a); }

Activation activation_by_name(std::string_view name) {
  if (const auto a = kActivationNames.find(name)) return *a;
  throw std::invalid_argument(fmt::format("unknown activation '{}' (relu | gelu | swiglu)", name));
}

}  // namespace lpx::sim
