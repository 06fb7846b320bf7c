// GEMMs (Eigen in fixed row chunks, or the limited-accumulation loop) and QuantGemms.
#include "lpx/sim/gemm.hpp"

#include <Eigen/Core>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>

namespace lpx::sim {

namespace {
using RowMat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using MapC = Eigen::Map<const RowMat, Eigen::Unaligned, Eigen::OuterStride<>>;
using Map = Eigen::Map<RowMat, Eigen::Unaligned, Eigen::OuterStride<>>;
}  // namespace

float round_to_mantissa(double x, int mantissa_bits) {
  if (x == 0 || !std::isfinite(x)) return static_cast<float>(x);
  int e = 0;
  const double f = std::frexp(x, &e);  // x = f 2^e, 0.5 <= |f| < 1
  // keep mantissa_bits + 1 significant bits (RNE: nearbyint in the default rounding mode)
  const double scaled = std::ldexp(f, mantissa_bits + 1);
  const double r = std::nearbyint(scaled);
  return static_cast<float>(std::ldexp(r, e - mantissa_bits - 1));
}

void gemm(Trans ta, Trans tb, const float* a, const float* b, float* c, int64_t m, int64_t n,
          int64_t k, const Accumulation& acc, bool accumulate) {
  if (m <= 0 || n <= 0) return;
  if (k <= 0) {
    if (!accumulate) std::fill(c, c + m * n, 0.0f);
    return;
  }
  const int64_t chunks = (m + kRowChunk - 1) / kRowChunk;
  // One chunk (attention's per-head products, small layers) runs without opening a
  // parallel region: on a busy machine a region per tiny GEMM costs far more than it gives.
  if (acc.is_fp32()) {
#pragma omp parallel for schedule(static) if (chunks > 1)
    for (int64_t ci = 0; ci < chunks; ++ci) {
      const int64_t r0 = ci * kRowChunk;
      const int64_t rows = std::min(kRowChunk, m - r0);
      Map cm(c + r0 * n, rows, n, Eigen::OuterStride<>(n));
      // op(A) rows r0..r0+rows: for Trans::t they are columns of the stored (K,M) array.
      if (ta == Trans::n) {
        MapC am(a + r0 * k, rows, k, Eigen::OuterStride<>(k));
        if (tb == Trans::n) {
          MapC bm(b, k, n, Eigen::OuterStride<>(n));
          if (accumulate) cm.noalias() += am * bm; else cm.noalias() = am * bm;
        } else {
          MapC bm(b, n, k, Eigen::OuterStride<>(k));
          if (accumulate) cm.noalias() += am * bm.transpose(); else cm.noalias() = am * bm.transpose();
        }
      } else {
        MapC am(a + r0, k, rows, Eigen::OuterStride<>(m));
        if (tb == Trans::n) {
          MapC bm(b, k, n, Eigen::OuterStride<>(n));
          if (accumulate) cm.noalias() += am.transpose() * bm; else cm.noalias() = am.transpose() * bm;
        } else {
          MapC bm(b, n, k, Eigen::OuterStride<>(k));
          if (accumulate) cm.noalias() += am.transpose() * bm.transpose();
          else cm.noalias() = am.transpose() * bm.transpose();
        }
      }
    }
    return;
  }
  // Limited accumulation: scalar loop, each C element reduced in increasing k.
  const int64_t a_si = ta == Trans::n ? k : 1, a_sk = ta == Trans::n ? 1 : m;
  const int64_t b_sk = tb == Trans::n ? n : 1, b_sj = tb == Trans::n ? 1 : k;
  const int mb = acc.mantissa_bits;
  const int64_t every = acc.promote_every > 0 ? acc.promote_every : k;
#pragma omp parallel for schedule(static) if (chunks > 1)
  for (int64_t ci = 0; ci < chunks; ++ci) {
    const int64_t r1 = std::min(m, (ci + 1) * kRowChunk);
    for (int64_t i = ci * kRowChunk; i < r1; ++i)
      for (int64_t j = 0; j < n; ++j) {
        float total = accumulate ? c[i * n + j] : 0.0f;
        float partial = 0;
        for (int64_t kk = 0; kk < k; ++kk) {
          const float p = a[i * a_si + kk * a_sk] * b[kk * b_sk + j * b_sj];
          partial = round_to_mantissa(static_cast<double>(partial) + p, mb);
          if ((kk + 1) % every == 0 || kk + 1 == k) {
            total += partial;
            partial = 0;
          }
        }
        c[i * n + j] = total;
      }
  }
}

QuantGemms::QuantGemms(OperandQuantizer q, Accumulation acc) : q_(std::move(q)), acc_(acc) {}

const float* QuantGemms::quant(GemmRole r, const float* in, int64_t rows, int64_t cols,
                               uint64_t step, bool collect, std::vector<float>& buf) {
  OperandStats s;
  AppliedOperand a;
  const float* result = in;
  if (const AmaxHistory* h = q_.history(r); h && h->size() > 0) {
    // the scale comes from the history's amax (before this call pushes its own)
    float current = 0;
    const int64_t n = rows * cols;
    for (int64_t i = 0; i < n; ++i)
      if (std::isfinite(in[i])) current = std::max(current, std::fabs(in[i]));
    const double scale_amax = h->amax();
    if (scale_amax > 0) {
      const double ratio = static_cast<double>(current) / scale_amax;
      if (!(ratio <= probes.amax_staleness)) probes.amax_staleness = ratio;
    }
  }
  if (q_.is_identity(r)) {
    // nothing to compute: the GEMM multiplies the operand itself
    if (collect) q_.observe(r, in, rows, cols, &s, &a);
  } else {
    buf.resize(static_cast<size_t>(rows * cols));
    q_.apply(r, in, buf.data(), rows, cols, step, collect ? &s : nullptr, collect ? &a : nullptr);
    result = buf.data();
  }
  if (operand_hook) operand_hook(r, in, result, rows, cols, step);
  if (collect) {
    const auto i = static_cast<size_t>(r);
    if (merge && stats[i].elements > 0) {
      merge_into(stats[i], s);
      merge_into(applied[i], a);
    } else {
      stats[i] = s;
      applied[i] = a;
    }
  }
  return result;
}

const float* QuantGemms::inject(const float* x, int64_t m, int64_t k, uint64_t step) {
  if (!injection || static_cast<int64_t>(step) < injection->from_step || injection->channel >= k) return x;
  injected_.assign(x, x + m * k);
  for (int64_t i = 0; i < m; ++i) injected_[static_cast<size_t>(i * k + injection->channel)] *= injection->magnitude;
  return injected_.data();
}

namespace {
// Largest per-channel RMS over the RMS of the whole (M,K) operand, summed in double in
// index order (no dependence on the thread count); NaN for an all-zero operand.
double channel_outlier_ratio(const float* x, int64_t m, int64_t k) {
  std::vector<double> col(static_cast<size_t>(k), 0.0);
  double total = 0;
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < k; ++j) {
      const double v = x[i * k + j];
      col[static_cast<size_t>(j)] += v * v;
    }
  double largest = 0;
  for (double c : col) {
    total += c;
    largest = std::max(largest, c);
  }
  if (!(total > 0) || m == 0) return std::numeric_limits<double>::quiet_NaN();
  // (largest / m) / (total / (m k)), under a square root
  return std::sqrt(largest * static_cast<double>(k) / total);
}
}  // namespace

void QuantGemms::forward(const float* x_in, const float* w, const float* bias, float* y, int64_t m,
                         int64_t n, int64_t k, uint64_t step, bool collect) {
  const float* x = inject(x_in, m, k, step);
  if (probe_outliers) {
    const double r = channel_outlier_ratio(x, m, k);
    if (!(r <= probes.outlier_ratio)) probes.outlier_ratio = r;
  }
  const float* xq = quant(GemmRole::fwd_x, x, m, k, step, collect, qa_);
  const float* wq = quant(GemmRole::fwd_w, w, n, k, step, collect, qb_);
  // y (M,N) = xq (M,K) wq (N,K)^T
  gemm(Trans::n, Trans::t, xq, wq, y, m, n, k, acc_, false);
  if (bias) {
#pragma omp parallel for schedule(static) if (m > kRowChunk)
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) y[i * n + j] += bias[j];
  }
}

void QuantGemms::backward(const float* dy, const float* x_in, const float* w, float* dx, float* dw,
                          float* dbias, int64_t m, int64_t n, int64_t k, uint64_t step,
                          bool collect, bool dx_accumulate) {
  const bool injected = injection && static_cast<int64_t>(step) >= injection->from_step && injection->channel < k;
  if (dx) {
    const float* dyq = quant(GemmRole::dgrad_dy, dy, m, n, step, collect, qa_);
    const float* wq = quant(GemmRole::dgrad_w, w, n, k, step, collect, qb_);
    // dx (M,K) = dyq (M,N) wq (N,K)
    if (injected && dx_accumulate) throw std::logic_error("an injected layer cannot accumulate its input gradient");
    gemm(Trans::n, Trans::n, dyq, wq, dx, m, k, n, acc_, dx_accumulate);
    if (injected)
      for (int64_t i = 0; i < m; ++i) dx[i * k + injection->channel] *= injection->magnitude;
  }
  const float* x = inject(x_in, m, k, step);
  const float* dyq = quant(GemmRole::wgrad_dy, dy, m, n, step, collect, qa_);
  const float* xq = quant(GemmRole::wgrad_x, x, m, k, step, collect, qb_);
  // dw (N,K) += dyq^T (N,M) xq (M,K)
  gemm(Trans::t, Trans::n, dyq, xq, dw, n, k, m, acc_, true);
  if (dbias) {
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) dbias[j] += dy[i * n + j];
  }
}

}  // namespace lpx::sim
