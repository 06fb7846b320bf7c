// Forward and hand-written backward passes of the simulator's layers, in the spirit of
// karpathy/llm.c's train_gpt2.c: plain loops over raw arrays, shapes in the comments,
// backward functions that ADD into their gradient outputs (+=), so a tensor used twice
// collects both gradients. Templates on the scalar type: the models instantiate float,
// the gradient checks (tests/sim/test_gradcheck.cpp) instantiate double.
//
// Determinism: loops that write disjoint outputs run in parallel (OpenMP); every
// reduction into a shared output (parameter gradients of LayerNorm, embeddings, biases)
// runs serially in a fixed order, so no result depends on the thread count.
//
// Notation: B batch, T time (context), C channels, NH heads, hs = C/NH, V vocabulary,
// N = B*T rows of a (B,T,C) tensor viewed as (N,C).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <type_traits>

namespace lpx::sim::layers {

// ---------------------------------------------------------------- elementwise

// float32 GELU, vectorized (src/activations.cpp): the same function written as
// x / (1 + exp(-2u)), with an exp of its own that gives the same bits on every SIMD target.
void gelu_forward_f32(float* out, const float* inp, int64_t n);
void gelu_backward_f32(float* dinp, const float* inp, const float* dout, int64_t n);

// GELU, tanh approximation (GPT-2's): out = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
// float runs gelu_*_f32; other types (the gradient checks' double) the loops below.
template <class T>
void gelu_forward(T* out, const T* inp, int64_t n) {
  if constexpr (std::is_same_v<T, float>) {
    gelu_forward_f32(out, inp, n);
    return;
  }
  const T s = static_cast<T>(0.7978845608028654);  // sqrt(2/pi)
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    const T x = inp[i];
    out[i] = T(0.5) * x * (T(1) + std::tanh(s * (x + T(0.044715) * x * x * x)));
  }
}
template <class T>
void gelu_backward(T* dinp, const T* inp, const T* dout, int64_t n) {
  if constexpr (std::is_same_v<T, float>) {
    gelu_backward_f32(dinp, inp, dout, n);
    return;
  }
  const T s = static_cast<T>(0.7978845608028654);
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    const T x = inp[i];
    const T u = s * (x + T(0.044715) * x * x * x);
    const T th = std::tanh(u);
    const T sech2 = T(1) - th * th;
    const T local = T(0.5) * (T(1) + th) + T(0.5) * x * sech2 * s * (T(1) + T(3) * T(0.044715) * x * x);
    dinp[i] += local * dout[i];
  }
}

template <class T>
void relu_forward(T* out, const T* inp, int64_t n) {
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) out[i] = inp[i] > T(0) ? inp[i] : T(0);
}
template <class T>
void relu_backward(T* dinp, const T* inp, const T* dout, int64_t n) {
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) dinp[i] += inp[i] > T(0) ? dout[i] : T(0);
}

// SwiGLU (Shazeer 2020): inp is (N, 2H) = [a | b], out is (N, H) = silu(a) * b,
// silu(a) = a * sigmoid(a).
template <class T>
void swiglu_forward(T* out, const T* inp, int64_t n, int64_t h) {
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < n; ++r) {
    const T* a = inp + r * 2 * h;
    const T* b = a + h;
    for (int64_t j = 0; j < h; ++j) {
      const T sig = T(1) / (T(1) + std::exp(-a[j]));
      out[r * h + j] = a[j] * sig * b[j];
    }
  }
}
template <class T>
void swiglu_backward(T* dinp, const T* inp, const T* dout, int64_t n, int64_t h) {
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < n; ++r) {
    const T* a = inp + r * 2 * h;
    const T* b = a + h;
    T* da = dinp + r * 2 * h;
    T* db = da + h;
    for (int64_t j = 0; j < h; ++j) {
      const T sig = T(1) / (T(1) + std::exp(-a[j]));
      const T silu = a[j] * sig;
      const T d = dout[r * h + j];
      da[j] += d * b[j] * sig * (T(1) + a[j] * (T(1) - sig));
      db[j] += d * silu;
    }
  }
}

// ---------------------------------------------------------------- linear (reference)

// out (N,OC) = inp (N,C) W^T + bias; W is (OC,C), bias (OC) or null. The models run their
// linear layers through quantized GEMMs (gemm.hpp); this loop is the reference the
// gradient checks and the GEMM tests compare with.
template <class T>
void linear_forward(T* out, const T* inp, const T* w, const T* bias, int64_t n, int64_t c,
                    int64_t oc) {
  for (int64_t r = 0; r < n; ++r)
    for (int64_t o = 0; o < oc; ++o) {
      T acc = bias ? bias[o] : T(0);
      for (int64_t i = 0; i < c; ++i) acc += inp[r * c + i] * w[o * c + i];
      out[r * oc + o] = acc;
    }
}
// dinp (N,C) += dout W; dw (OC,C) += dout^T inp; dbias (OC) += sum over rows of dout.
template <class T>
void linear_backward(T* dinp, T* dw, T* dbias, const T* dout, const T* inp, const T* w,
                     int64_t n, int64_t c, int64_t oc) {
  for (int64_t r = 0; r < n; ++r)
    for (int64_t o = 0; o < oc; ++o) {
      const T d = dout[r * oc + o];
      for (int64_t i = 0; i < c; ++i) {
        dinp[r * c + i] += d * w[o * c + i];
        dw[o * c + i] += d * inp[r * c + i];
      }
      if (dbias) dbias[o] += d;
    }
}

// ---------------------------------------------------------------- LayerNorm

// out (N,C) = (inp - mean) * rstd * w + b; mean, rstd (N) are saved for backward.
template <class T>
void layernorm_forward(T* out, T* mean, T* rstd, const T* inp, const T* w, const T* b,
                       int64_t n, int64_t c) {
  const T eps = T(1e-5);
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < n; ++r) {
    const T* x = inp + r * c;
    T m = 0;
    for (int64_t i = 0; i < c; ++i) m += x[i];
    m /= static_cast<T>(c);
    T v = 0;
    for (int64_t i = 0; i < c; ++i) v += (x[i] - m) * (x[i] - m);
    v /= static_cast<T>(c);
    const T s = T(1) / std::sqrt(v + eps);
    for (int64_t i = 0; i < c; ++i) out[r * c + i] = (x[i] - m) * s * w[i] + b[i];
    mean[r] = m;
    rstd[r] = s;
  }
}
template <class T>
void layernorm_backward(T* dinp, T* dw, T* db, const T* dout, const T* inp, const T* w,
                        const T* mean, const T* rstd, int64_t n, int64_t c) {
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < n; ++r) {
    const T* x = inp + r * c;
    const T* d = dout + r * c;
    // dnorm = dout * w; dx = rstd * (dnorm - mean(dnorm) - norm * mean(dnorm * norm))
    T dnorm_mean = 0, dnorm_norm_mean = 0;
    for (int64_t i = 0; i < c; ++i) {
      const T norm = (x[i] - mean[r]) * rstd[r];
      const T dn = w[i] * d[i];
      dnorm_mean += dn;
      dnorm_norm_mean += dn * norm;
    }
    dnorm_mean /= static_cast<T>(c);
    dnorm_norm_mean /= static_cast<T>(c);
    for (int64_t i = 0; i < c; ++i) {
      const T norm = (x[i] - mean[r]) * rstd[r];
      const T dn = w[i] * d[i];
      dinp[r * c + i] += (dn - dnorm_mean - norm * dnorm_norm_mean) * rstd[r];
    }
  }
  // parameter gradients: a reduction over rows, serial in row order
  for (int64_t r = 0; r < n; ++r)
    for (int64_t i = 0; i < c; ++i) {
      const T norm = (inp[r * c + i] - mean[r]) * rstd[r];
      dw[i] += norm * dout[r * c + i];
      db[i] += dout[r * c + i];
    }
}

// ---------------------------------------------------------------- embeddings

// out (B,T,C) = wte[tokens] + wpe[t]; tokens (B,T), wte (V,C), wpe (maxT,C)
template <class T>
void embedding_forward(T* out, const int32_t* tokens, const T* wte, const T* wpe, int64_t b,
                       int64_t t, int64_t c) {
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < b * t; ++r) {
    const T* e = wte + static_cast<int64_t>(tokens[r]) * c;
    const T* p = wpe + (r % t) * c;
    for (int64_t i = 0; i < c; ++i) out[r * c + i] = e[i] + p[i];
  }
}
template <class T>
void embedding_backward(T* dwte, T* dwpe, const T* dout, const int32_t* tokens, int64_t b,
                        int64_t t, int64_t c) {
  for (int64_t r = 0; r < b * t; ++r) {
    T* de = dwte + static_cast<int64_t>(tokens[r]) * c;
    T* dp = dwpe + (r % t) * c;
    for (int64_t i = 0; i < c; ++i) {
      de[i] += dout[r * c + i];
      dp[i] += dout[r * c + i];
    }
  }
}

// ---------------------------------------------------------------- causal attention

// Row t1 of the (B,NH,T,T) score array `m` for batch row bi and head h.
template <class T>
T* score_row(T* m, int64_t bi, int64_t h, int64_t t1, int64_t nh, int64_t t) {
  return m + ((bi * nh + h) * t + t1) * t;
}

// fn(bi, h, t1) for every batch row, head and query position: one (batch, head) slice
// per OpenMP iteration, its query positions in order, so every write of the attention
// passes below stays inside its slice and each slice is reduced in a fixed order.
template <class F>
void for_each_query(int64_t b, int64_t nh, int64_t t, F&& fn) {
#pragma omp parallel for collapse(2) schedule(static)
  for (int64_t bi = 0; bi < b; ++bi)
    for (int64_t h = 0; h < nh; ++h)
      for (int64_t t1 = 0; t1 < t; ++t1) fn(bi, h, t1);
}

// inp is (B,T,3C) = [q | k | v], each (B,T,NH,hs); out is (B,T,C);
// preatt, att are (B,NH,T,T): scores before / after the causal softmax (entries above the
// diagonal are 0 in att and unused in preatt).
template <class T>
void attention_forward(T* out, T* preatt, T* att, const T* inp, int64_t b, int64_t t, int64_t c,
                       int64_t nh) {
  const int64_t hs = c / nh, c3 = 3 * c;
  const T scale = T(1) / std::sqrt(static_cast<T>(hs));
  for_each_query(b, nh, t, [&](int64_t bi, int64_t h, int64_t t1) {
    const T* q = inp + bi * t * c3 + t1 * c3 + h * hs;
    T* pre = score_row(preatt, bi, h, t1, nh, t);
    T* a = score_row(att, bi, h, t1, nh, t);
    T maxv = -1e30f;
    for (int64_t t2 = 0; t2 <= t1; ++t2) {
      const T* k = inp + bi * t * c3 + t2 * c3 + h * hs + c;
      T dot = 0;
      for (int64_t i = 0; i < hs; ++i) dot += q[i] * k[i];
      dot *= scale;
      pre[t2] = dot;
      maxv = std::max(maxv, dot);
    }
    T sum = 0;
    for (int64_t t2 = 0; t2 <= t1; ++t2) {
      const T e = std::exp(pre[t2] - maxv);
      a[t2] = e;
      sum += e;
    }
    const T inv = T(1) / sum;
    for (int64_t t2 = 0; t2 < t; ++t2) a[t2] = t2 <= t1 ? a[t2] * inv : T(0);
    T* o = out + bi * t * c + t1 * c + h * hs;
    for (int64_t i = 0; i < hs; ++i) o[i] = 0;
    for (int64_t t2 = 0; t2 <= t1; ++t2) {
      const T* v = inp + bi * t * c3 + t2 * c3 + h * hs + 2 * c;
      for (int64_t i = 0; i < hs; ++i) o[i] += a[t2] * v[i];
    }
  });
}
// dinp (B,T,3C) +=; datt, dpreatt (B,NH,T,T) are scratch (overwritten).
template <class T>
void attention_backward(T* dinp, T* dpreatt, T* datt, const T* dout, const T* inp, const T* att,
                        int64_t b, int64_t t, int64_t c, int64_t nh) {
  const int64_t hs = c / nh, c3 = 3 * c;
  const T scale = T(1) / std::sqrt(static_cast<T>(hs));
  // every write below stays inside the (bi, h) slice of dinp (for_each_query)
  for_each_query(b, nh, t, [&](int64_t bi, int64_t h, int64_t t1) {
    const T* a = score_row(att, bi, h, t1, nh, t);
    T* da = score_row(datt, bi, h, t1, nh, t);
    T* dpre = score_row(dpreatt, bi, h, t1, nh, t);
    const T* q = inp + bi * t * c3 + t1 * c3 + h * hs;
    T* dq = dinp + bi * t * c3 + t1 * c3 + h * hs;
    const T* dout_bth = dout + bi * t * c + t1 * c + h * hs;
    // out = att v: datt = dout . v, dv += att * dout
    for (int64_t t2 = 0; t2 <= t1; ++t2) {
      const T* v = inp + bi * t * c3 + t2 * c3 + h * hs + 2 * c;
      T* dv = dinp + bi * t * c3 + t2 * c3 + h * hs + 2 * c;
      T dot = 0;
      for (int64_t i = 0; i < hs; ++i) {
        dot += v[i] * dout_bth[i];
        dv[i] += a[t2] * dout_bth[i];
      }
      da[t2] = dot;
    }
    // softmax: dpre = att * (datt - sum(att * datt))
    T s = 0;
    for (int64_t t2 = 0; t2 <= t1; ++t2) s += a[t2] * da[t2];
    for (int64_t t2 = 0; t2 <= t1; ++t2) dpre[t2] = a[t2] * (da[t2] - s);
    // pre = scale q . k
    for (int64_t t2 = 0; t2 <= t1; ++t2) {
      const T* k = inp + bi * t * c3 + t2 * c3 + h * hs + c;
      T* dk = dinp + bi * t * c3 + t2 * c3 + h * hs + c;
      for (int64_t i = 0; i < hs; ++i) {
        dq[i] += k[i] * dpre[t2] * scale;
        dk[i] += q[i] * dpre[t2] * scale;
      }
    }
  });
}

// ---------------------------------------------------------------- softmax cross-entropy

// logits (N,V), targets (N): probs (N,V) = softmax(logits); returns the mean loss over N,
// summed in double in row order.
template <class T>
double softmax_xent_forward(T* probs, const T* logits, const int32_t* targets, int64_t n,
                            int64_t v, T* losses /* (N) */) {
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < n; ++r) {
    const T* l = logits + r * v;
    T* p = probs + r * v;
    T maxv = l[0];
    for (int64_t i = 1; i < v; ++i) maxv = std::max(maxv, l[i]);
    T sum = 0;
    for (int64_t i = 0; i < v; ++i) {
      p[i] = std::exp(l[i] - maxv);
      sum += p[i];
    }
    const T inv = T(1) / sum;
    for (int64_t i = 0; i < v; ++i) p[i] *= inv;
    // -log p[target] computed from the logits, which stays finite when p underflows
    losses[r] = std::log(sum) + maxv - l[targets[r]];
  }
  double total = 0;
  for (int64_t r = 0; r < n; ++r) total += static_cast<double>(losses[r]);
  return total / static_cast<double>(n);
}
// dlogits (N,V) = (probs - onehot(targets)) * scale   (scale = 1/N for the mean loss); set.
template <class T>
void softmax_xent_backward(T* dlogits, const T* probs, const int32_t* targets, int64_t n,
                           int64_t v, T scale) {
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < n; ++r)
    for (int64_t i = 0; i < v; ++i)
      dlogits[r * v + i] = (probs[r * v + i] - (i == targets[r] ? T(1) : T(0))) * scale;
}

}  // namespace lpx::sim::layers
