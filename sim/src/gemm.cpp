// GEMMs (Eigen in fixed row chunks, or the ordered loops of the exact and limited rules) and QuantGemms.
#include "lpx/sim/gemm.hpp"

#include <Eigen/Core>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <vector>

#include <fmt/format.h>

#include "enum_names.hpp"
#include "exact_gemm.hpp"
#include "limited_gemm.hpp"
#include "lpx/numerics/parallel.hpp"
#include "lpx/numerics/scratch.hpp"

namespace lpx::sim {

namespace {
using RowMat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using MapC = Eigen::Map<const RowMat, Eigen::Unaligned, Eigen::OuterStride<>>;
using Map = Eigen::Map<RowMat, Eigen::Unaligned, Eigen::OuterStride<>>;
}  // namespace

#ifdef __clang__
// the sanitized build (clang -O1) cannot vectorize the loop below and says so; that is fine
#pragma clang diagnostic ignored "-Wpass-failed"
#endif
namespace {
// pt[j] = fma(av, brow[j], pt[j]) for j < n: one product of a row of the exact fp32 order.
// The x86-64-v3/v4 clones have FMA instructions; the baseline clone calls fmaf (the same
// correctly rounded result, slower).
__attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default"))) void fma_row_step(
    float* __restrict pt, const float* __restrict brow, float av, int64_t n) {
#pragma omp simd
  for (int64_t j = 0; j < n; ++j) pt[j] = std::fma(av, brow[j], pt[j]);
}
}  // namespace

constexpr EnumNames<GemmOrder, 2> kGemmOrderNames{{"fast", "exact"}};

std::string_view gemm_order_name(GemmOrder o) { return kGemmOrderNames(o); }

GemmOrder gemm_order_by_name(std::string_view name) {
  if (const auto o = kGemmOrderNames.find(name)) return *o;
  throw std::invalid_argument(fmt::format("GEMM order '{}' is not fast or exact", name));
}

bool fast_gemm_is_exact() { return detail::exact_gemm_tiled(); }

float round_to_mantissa(double x, int mantissa_bits) {
  if (x == 0 || !std::isfinite(x)) return static_cast<float>(x);
  return static_cast<float>(round_mantissa_bits(x, mantissa_bits));
}

namespace {
// op(B) as a (K, N) row-major array, as the ordered loops read it: b itself for Trans::n,
// else a copy in the calling thread's scratch buffer (valid until its next call).
const float* b_as_kn(Trans tb, const float* b, int64_t n, int64_t k) {
  if (tb == Trans::n) return b;
  static thread_local ScratchBuffer<float> transposed;
  float* bt = transposed.get(static_cast<size_t>(k * n));
  for (int64_t j = 0; j < n; ++j)
    for (int64_t kk = 0; kk < k; ++kk) bt[kk * n + j] = b[j * k + kk];
  return bt;
}

// The limited rule's path of gemm() and gemm_scaled() (k >= 1, m, n >= 1): with `scaled`,
// each run's partial sum enters the total times its scale product (null scales are ones).
void limited_gemm(Trans ta, Trans tb, const float* a, const float* a_scales, const float* b,
                  const float* b_scales, float* c, int64_t m, int64_t n, int64_t k, const Accumulation& acc,
                  bool accumulate, bool scaled) {
  const int64_t every = acc.promote_every > 0 ? acc.promote_every : k;
  const int64_t a_si = ta == Trans::n ? k : 1, a_sk = ta == Trans::n ? 1 : m;
  const float* bk = b_as_kn(tb, b, n, k);
  const float* sa = nullptr;
  const float* sbk = nullptr;
  if (scaled) {
    // the loop reads op(B)'s scales as (runs, N) and wants both arrays present
    const int64_t runs = (k + every - 1) / every;
    static thread_local ScratchBuffer<float> scale_work;
    float* work = scale_work.get(static_cast<size_t>((a_scales ? 0 : m * runs) + runs * n));
    float* sb_t = work + (a_scales ? 0 : m * runs);
    if (!a_scales) std::fill(work, work + m * runs, 1.0f);
    for (int64_t j = 0; j < n; ++j)
      for (int64_t r = 0; r < runs; ++r) sb_t[r * n + j] = b_scales ? b_scales[j * runs + r] : 1.0f;
    sa = a_scales ? a_scales : work;
    sbk = sb_t;
  }
  const bool tiny = detail::tiny_operands(a, m * k, bk, k * n);
  const int64_t chunks = (m + kRowChunk - 1) / kRowChunk;
  parallel_for(chunks, threads_if(chunks > 1), [&](int64_t ci) {
    detail::limited_gemm_rows(a, a_si, a_sk, bk, c, ci * kRowChunk, std::min(m, (ci + 1) * kRowChunk), n, k,
                              acc.mantissa_bits, every, accumulate, tiny, sa, sbk);
  });
}
}  // namespace

void gemm(Trans ta, Trans tb, const float* a, const float* b, float* c, int64_t m, int64_t n,
          int64_t k, const Accumulation& acc, bool accumulate, GemmOrder order) {
  if (m <= 0 || n <= 0) return;
  if (k <= 0) {
    if (!accumulate) std::fill(c, c + m * n, 0.0f);
    return;
  }
  const int64_t chunks = (m + kRowChunk - 1) / kRowChunk;
  // One chunk (attention's per-head products, small layers), or one thread, runs without
  // opening a parallel region (numerics/parallel.hpp): a region per tiny GEMM costs far more
  // than it gives.
  const int threads = threads_if(chunks > 1);

  // fast fp32: the exact order's register tiles where the CPU has FMA instructions (its
  // fastest path, about 5x Eigen's; so fast and exact give the same bits there), Eigen's
  // blocked product elsewhere.
  if (acc.is_fp32() && order == GemmOrder::fast && !detail::exact_gemm_tiled()) {
    parallel_for(chunks, threads, [&](int64_t ci) {
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
    });
    return;
  }
  // The ordered rules (numerics/ordered_sum.hpp): each C element reduced in increasing k,
  // by fma (exact fp32) or with its partial sum rounded to mantissa_bits after every
  // product and added into the fp32 total every promote_every products (limited). op(B)
  // is first copied to a (K, N) row-major array so that the loops run along rows of C
  // (every element's own sequence of roundings, in the same order, vectorized).
  if (!acc.is_fp32()) {
    limited_gemm(ta, tb, a, nullptr, b, nullptr, c, m, n, k, acc, accumulate, /*scaled=*/false);
    return;
  }
  const int64_t a_si = ta == Trans::n ? k : 1, a_sk = ta == Trans::n ? 1 : m;
  // exact fp32: register tiles where the target has FMA instructions (exact_gemm_hwy.cpp,
  // which packs op(B) itself), else one fmaf per product along rows of C
  if (detail::exact_gemm_tiled()) {
    // one packing buffer per calling thread, grown and never zero-filled (Pack writes
    // every element, padding included)
    static thread_local ScratchBuffer<float> pack;
    float* packed = pack.get(detail::exact_gemm_packed_size(n, k));
    detail::exact_gemm_pack(b, tb == Trans::n ? n : 1, tb == Trans::n ? 1 : k, n, k, packed);
    parallel_for(chunks, threads, [&](int64_t ci) {
      detail::exact_gemm_rows(a, a_si, a_sk, packed, c, ci * kRowChunk, std::min(m, (ci + 1) * kRowChunk), n,
                              k, accumulate);
    });
    return;
  }
  const float* bk = b_as_kn(tb, b, n, k);
  parallel_for(chunks, threads, [&](int64_t ci) {
    std::vector<float> partial(static_cast<size_t>(n));
    const int64_t r1 = std::min(m, (ci + 1) * kRowChunk);
    for (int64_t i = ci * kRowChunk; i < r1; ++i) {
      float* pt = partial.data();
      std::fill(pt, pt + n, 0.0f);
      for (int64_t kk = 0; kk < k; ++kk) fma_row_step(pt, bk + kk * n, a[i * a_si + kk * a_sk], n);
      // the fp32 rule adds c after its sum
      if (accumulate)
        for (int64_t j = 0; j < n; ++j) c[i * n + j] += pt[j];
      else
        std::copy(pt, pt + n, c + i * n);
    }
  });
}

void gemm_scaled(Trans ta, Trans tb, const float* a, const float* a_scales, const float* b, const float* b_scales,
                 float* c, int64_t m, int64_t n, int64_t k, const Accumulation& acc, bool accumulate) {
  if (!acc.limited || acc.mantissa_bits < 1 || acc.mantissa_bits > 22 || acc.promote_every < 1)
    throw std::invalid_argument(fmt::format(
        "gemm_scaled: scales at promotion need a limited accumulator with 1..22 mantissa bits and promote_every "
        ">= 1, not {}{} mantissa bits promoted every {}",
        acc.limited ? "" : "fp32, ", acc.mantissa_bits, acc.promote_every));
  if (m <= 0 || n <= 0) return;
  if (k <= 0) {
    if (!accumulate) std::fill(c, c + m * n, 0.0f);
    return;
  }
  limited_gemm(ta, tb, a, a_scales, b, b_scales, c, m, n, k, acc, accumulate, /*scaled=*/true);
}

QuantGemms::QuantGemms(OperandQuantizer q, Accumulation acc, GemmExecution exec)
    : q_(std::move(q)), acc_(acc), exec_(std::move(exec)) {}

void QuantGemms::run(Trans ta, Trans tb, const float* a, const float* a_scales, const float* b,
                     const float* b_scales, float* c, int64_t m, int64_t n, int64_t k, bool accumulate) {
  // the device has no GEMM with the scales at promotion yet: those run here (sim/device.hpp)
  if (acc_.scales_at_promotion) gemm_scaled(ta, tb, a, a_scales, b, b_scales, c, m, n, k, acc_, accumulate);
  else if (exec_.backend) exec_.backend->gemm(ta, tb, a, b, c, m, n, k, acc_, accumulate, exec_.order);
  else gemm(ta, tb, a, b, c, m, n, k, acc_, accumulate, exec_.order);
}

namespace {
// The quantized A and B operands of the GEMM in flight, one pair per thread and not per
// layer: a GEMM reads them only while it runs, so every layer's GEMMs can share them, and
// a model holds the largest operand pair once instead of once per layer (a gpt-medium
// quartet-like run peaked at 878 MB with a pair per layer, at 500 MB with this and the
// quantizers' shared transform buffer: docs/architecture.md#scratch-buffers).
ScratchBuffer<float>& operand_buffer(int slot) {
  static thread_local ScratchBuffer<float> buffers[2];
  return buffers[slot];
}
// With scales at promotion, the element values and run scales of the same operands.
ScratchBuffer<float>& element_buffer(int slot) {
  static thread_local ScratchBuffer<float> buffers[2];
  return buffers[slot];
}
UnscaledOperand& unscaled_operand(int slot) {
  static thread_local UnscaledOperand operands[2];
  return operands[slot];
}
}  // namespace

const float* QuantGemms::quant(GemmRole r, const float* in, int64_t rows, int64_t cols,
                               uint64_t step, bool collect, int slot, const float** scales) {
  *scales = nullptr;
  OperandStats s;
  AppliedOperand a;
  const float* result = in;
  // The scale comes from the history's amax before this call; apply() measures the
  // operand's own amax (the largest finite |x|) and pushes it, so staleness reads it back
  // instead of scanning the operand a second time.
  const AmaxHistory* h = q_.history(r);
  const double scale_amax = h && h->size() > 0 ? h->amax() : 0.0;
  if (q_.is_identity(r)) {
    // nothing to compute: the GEMM multiplies the operand itself
    if (collect) q_.observe(r, in, rows, cols, &s, &a);
  } else {
    float* q = operand_buffer(slot).get(static_cast<size_t>(rows * cols));
    UnscaledOperand* u = nullptr;
    if (acc_.scales_at_promotion) {
      u = &unscaled_operand(slot);
      u->elements = element_buffer(slot).get(static_cast<size_t>(rows * cols));
      u->every = acc_.promote_every;
    }
    q_.apply(r, in, q, rows, cols, step, collect ? &s : nullptr, collect ? &a : nullptr, u);
    result = q;
    if (u && u->scaled) {
      result = u->elements;
      *scales = u->scales.data();
    }
    if (scale_amax > 0 && h->size() > 0) {
      const double ratio = static_cast<double>(h->values().back()) / scale_amax;
      if (!(ratio <= probes.amax_staleness)) probes.amax_staleness = ratio;
    }
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
  const float *xs, *ws;
  const float* xq = quant(GemmRole::fwd_x, x, m, k, step, collect, 0, &xs);
  const float* wq = quant(GemmRole::fwd_w, w, n, k, step, collect, 1, &ws);
  // y (M,N) = xq (M,K) wq (N,K)^T
  run(Trans::n, Trans::t, xq, xs, wq, ws, y, m, n, k, false);
  if (bias) {
    parallel_for(m, threads_if(m > kRowChunk), [&](int64_t i) {
      for (int64_t j = 0; j < n; ++j) y[i * n + j] += bias[j];
    });
  }
}

void QuantGemms::backward(const float* dy, const float* x_in, const float* w, float* dx, float* dw,
                          float* dbias, int64_t m, int64_t n, int64_t k, uint64_t step,
                          bool collect, bool dx_accumulate) {
  const bool injected = injection && static_cast<int64_t>(step) >= injection->from_step && injection->channel < k;
  if (dx) {
    const float *dys, *ws;
    const float* dyq = quant(GemmRole::dgrad_dy, dy, m, n, step, collect, 0, &dys);
    const float* wq = quant(GemmRole::dgrad_w, w, n, k, step, collect, 1, &ws);
    // dx (M,K) = dyq (M,N) wq (N,K)
    if (injected && dx_accumulate) throw std::logic_error("an injected layer cannot accumulate its input gradient");
    run(Trans::n, Trans::n, dyq, dys, wq, ws, dx, m, k, n, dx_accumulate);
    if (injected)
      for (int64_t i = 0; i < m; ++i) dx[i * k + injection->channel] *= injection->magnitude;
  }
  const float* x = inject(x_in, m, k, step);
  const float *dys, *xs;
  const float* dyq = quant(GemmRole::wgrad_dy, dy, m, n, step, collect, 0, &dys);
  const float* xq = quant(GemmRole::wgrad_x, x, m, k, step, collect, 1, &xs);
  // dw (N,K) += dyq^T (N,M) xq (M,K)
  run(Trans::t, Trans::n, dyq, dys, xq, xs, dw, n, k, m, true);
  if (dbias) {
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) dbias[j] += dy[i * n + j];
  }
}

}  // namespace lpx::sim
