// A CPU stand-in for the CUDA module (liblpx_cuda_mock.so), for machines without a GPU:
// it exports the same entry point and table (kernels/src/backend.hpp) with "device"
// memory in host memory and each launcher a plain loop that mirrors its kernel in
// kernels/src/*.cu (the same view addressing, block boxes, scale grids, SR keys and LPX_HD
// functions). tests/CMakeLists.txt runs the kernels tests, `lpx validate` and
// sim_test_gpu_train with LPX_CUDA_MODULE pointing here, so the loader's success path,
// every host-side wrapper, the views they build and sim's --device gpu backend are
// exercised bit for bit in CPU-only CI. What it cannot check is the CUDA code itself.
// Block quantization mirrors both of quantize.cu's kernels and its dispatch: the tiled
// path runs the plan of kernels/src/tiled_quantize.hpp (its tiles, lane groups, keys and
// indices), so only the shuffles and the shared memory of that kernel go unchecked here.
// GEMMs: the per-tensor (as stored) and BF16-fallback paths in double; the block-scaled
// paths report "no algorithm" (as on a device without them); float32 GEMMs by
// ordered_sum.hpp's rule (exact, limited) or in double (fast). Hardware cvt: not supported.
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

#include "../../kernels/src/backend.hpp"
#include "../../kernels/src/tiled_quantize.hpp"
#include "lpx/formats/block_scale.hpp"
#include "lpx/formats/codec.hpp"
#include "lpx/numerics/hadamard.hpp"
#include "lpx/numerics/ordered_sum.hpp"
#include "lpx/numerics/philox.hpp"

namespace {

using namespace lpx;
using kernels::DeviceTensor;
using kernels::Storage;
using kernels::GemmPath;
using kernels::HwCvt;
namespace backend = lpx::kernels::backend;
namespace bs = lpx::block_scaling;
namespace tiled = lpx::kernels::tiled;

template <class T>
T& at(const DeviceTensor& t, int64_t r, int64_t c) {
  return static_cast<T*>(t.data)[r * t.row_stride + c * t.col_stride];
}
uint32_t load_code(const DeviceTensor& t, int64_t r, int64_t c) {
  return t.storage == Storage::code8 ? at<uint8_t>(t, r, c) : at<uint16_t>(t, r, c);
}
void store_code(const DeviceTensor& t, int64_t r, int64_t c, uint32_t code) {
  if (t.storage == Storage::code8) at<uint8_t>(t, r, c) = static_cast<uint8_t>(code);
  else at<uint16_t>(t, r, c) = static_cast<uint16_t>(code);
}

void write(char* out, size_t bytes, const std::string& s) {
  const size_t n = std::min(bytes - 1, s.size());
  std::memcpy(out, s.data(), n);
  out[n] = '\0';
}

int device_count(char*, size_t) { return 1; }
void device_name(char* out, size_t bytes) { write(out, bytes, "lpx CPU mock of the CUDA module (sm_90)"); }
int compute_capability() { return 90; }

void* allocate(size_t bytes) { return bytes ? std::aligned_alloc(256, (bytes + 255) / 256 * 256) : nullptr; }
void release(void* p) { std::free(p); }
void copy(void* dst, const void* src, size_t bytes, backend::Copy, void*) { std::memmove(dst, src, bytes); }
void fill(void* dst, int byte, size_t bytes, void*) { std::memset(dst, byte, bytes); }
void synchronize(void*) {}

// cast.cu: element i of the logical row-major order, keyed index_offset + i.
template <class F>
void for_each(const DeviceTensor& t, F f) {
  for (int64_t r = 0; r < t.rows; ++r)
    for (int64_t c = 0; c < t.cols; ++c) f(r, c, static_cast<uint64_t>(r * t.cols + c));
}
uint32_t cast_code(float x, const ElementFormat& f, const CastOptions& o, uint64_t i) {
  const uint32_t r = is_stochastic(o.round) ? random_bits(o.seed, o.stream, o.index_offset + i) : 0u;
  return lpx::encode(x, f, o.round, o.overflow, r, o.sr_bits);
}
void encode(const DeviceTensor& in, const DeviceTensor& out, const CastOptions& o, void*) {
  for_each(in, [&](int64_t r, int64_t c, uint64_t i) {
    store_code(out, r, c, cast_code(at<float>(in, r, c), out.element, o, i));
  });
}
void decode(const DeviceTensor& in, const DeviceTensor& out, void*) {
  for_each(in, [&](int64_t r, int64_t c, uint64_t) {
    at<float>(out, r, c) = lpx::decode(load_code(in, r, c), in.element);
  });
}
void fake_cast(const DeviceTensor& in, const DeviceTensor& out, const CastOptions& o, void*) {
  for_each(in, [&](int64_t r, int64_t c, uint64_t i) {
    at<float>(out, r, c) = lpx::decode(cast_code(at<float>(in, r, c), out.element, o, i), out.element);
  });
}

// quantize.cu's tiled kernel (tiled_quantize.hpp): the same 32 x 32 tiles, passes and
// aligned lane groups (and, for tile formats, the block's other lines), with the lanes of
// a group run one after the other instead of reduced by shuffles.
void tiled_run(const DeviceTensor& x, const tiled::Pass& q, bool row_pass, size_t r0, size_t c0) {
  const auto rows = static_cast<size_t>(x.rows), cols = static_cast<size_t>(x.cols);
  const auto* xp = static_cast<const float*>(x.data);
  const auto block = static_cast<size_t>(q.block), across = static_cast<size_t>(q.block_across);
  // Element (r, c) of lane `lane` in tile line `line` (a row for the row pass).
  auto element = [&](size_t line, size_t lane) {
    return row_pass ? std::pair{r0 + line, c0 + lane} : std::pair{r0 + lane, c0 + line};
  };
  for (size_t line = 0; line < tiled::kTile; ++line)  // one warp's tile row (column)
    for (size_t g = 0; g < tiled::kTile; g += block) {  // one lane group
      bs::Amax a;
      for (size_t l = line - line % across; l < line - line % across + across; ++l)
        for (size_t lane = g; lane < g + block; ++lane)
          if (const auto [r, c] = element(l, lane); r < rows && c < cols)
            a.add(float_to_bits(bs::prepare(xp[r * cols + c], q.opt)) & kF32AbsMask);
      for (size_t lane = g; lane < g + block; ++lane) {
        const auto [r, c] = element(line, lane);
        if (r >= rows || c >= cols) continue;
        const bs::BlockScale s = bs::block_scale(a, q.scale);
        const size_t along = row_pass ? c : r, across_at = row_pass ? r : c;
        if (tiled::leads(q, along, across_at)) tiled::store_scale(q, s, along, across_at);
        tiled::store_word(q, r, c, tiled::element_word(q, xp[r * cols + c], s, r, c));
      }
    }
}
// flat_amax_kernel and the two-level passes' tensor scales (the tiled and wide paths).
void two_level_scales(const DeviceTensor& x, std::initializer_list<tiled::Pass*> passes, bool flush,
                      uint32_t* amax_word) {
  bool needed = false;
  for (const tiled::Pass* q : passes) needed = needed || (q->on && q->two_level);
  if (!needed) return;
  uint32_t amax = 0;
  for (int64_t i = 0; i < x.numel(); ++i) {
    uint32_t b = float_to_bits(static_cast<const float*>(x.data)[i]) & kF32AbsMask;
    if (flush && b < 0x800000u) b = 0;
    if (b < kF32InfBits) amax = std::max(amax, b);
  }
  if (amax_word) *amax_word = amax;
  for (tiled::Pass* q : passes)
    if (q->on && q->two_level) {
      tiled::set_tensor_scale(*q, amax);
      if (q->tensor_scale) *q->tensor_scale = q->scale.tensor_dec;
    }
}

void tiled_quantize(const DeviceTensor& x, tiled::Pass row, tiled::Pass col, bool flush, uint32_t* amax_word) {
  two_level_scales(x, {&row, &col}, flush, amax_word);
  for (int64_t r0 = 0; r0 < x.rows; r0 += tiled::kTile)
    for (int64_t c0 = 0; c0 < x.cols; c0 += tiled::kTile) {
      if (row.on) tiled_run(x, row, true, static_cast<size_t>(r0), static_cast<size_t>(c0));
      if (col.on) tiled_run(x, col, false, static_cast<size_t>(r0), static_cast<size_t>(c0));
    }
}

// quantize.cu's wide kernels: one warp per 1 x C block, or one CTA per strip of R rows x
// (C, or 32 R x 1 blocks side by side), as tiled::wide_shape cuts x.
void wide_quantize(const DeviceTensor& x, const DeviceTensor& out, const QuantizeOptions& opt,
                   uint32_t* amax_word) {
  const auto rows = static_cast<size_t>(x.rows), cols = static_cast<size_t>(x.cols);
  const auto* xp = static_cast<const float*>(x.data);
  tiled::Pass q = tiled::make_pass(out, rows, cols, opt, false);
  two_level_scales(x, {&q}, opt.flush_subnormal_inputs, amax_word);
  const tiled::WideShape w = tiled::wide_shape(q, rows, cols);
  // Quantizes the box [r0, r1) x [c0, c1) as one block whose first element is (r0, c0).
  auto block = [&](size_t r0, size_t r1, size_t c0, size_t c1) {
    bs::Amax a;
    for (size_t r = r0; r < r1; ++r)
      for (size_t c = c0; c < c1; ++c) a.add(float_to_bits(bs::prepare(xp[r * cols + c], q.opt)) & kF32AbsMask);
    const bs::BlockScale s = bs::block_scale(a, q.scale);
    tiled::store_scale(q, s, q.along_rows ? r0 : c0, q.along_rows ? c0 : r0);
    for (size_t r = r0; r < r1; ++r)
      for (size_t c = c0; c < c1; ++c) tiled::store_word(q, r, c, tiled::element_word(q, xp[r * cols + c], s, r, c));
  };
  for (size_t u = 0; u < w.units; ++u) {
    const size_t r0 = (u / w.per_row) * w.height, c0 = (u % w.per_row) * w.width;
    const size_t r1 = std::min(r0 + w.height, rows), c1 = std::min(c0 + w.width, cols);
    if (q.along_rows)  // 32 R x 1 blocks side by side
      for (size_t c = c0; c < c1; ++c) block(r0, r1, c, c + 1);
    else
      block(r0, r1, c0, c1);
  }
}

// quantize.cu: one block at a time, the two-level amax first.
bs::Amax block_amax(const DeviceTensor& x, int64_t r0, int64_t c0, int64_t br, int64_t bc,
                    const QuantizeOptions& o) {
  bs::Amax a;
  for (int64_t r = r0; r < std::min(r0 + br, x.rows); ++r)
    for (int64_t c = c0; c < std::min(c0 + bc, x.cols); ++c)
      a.add(float_to_bits(bs::prepare(at<float>(x, r, c), o)) & kF32AbsMask);
  return a;
}
void quantize(const DeviceTensor& x, const DeviceTensor& out, const QuantizeOptions& opt,
              uint32_t* amax_word, void*) {
  // The module's dispatch; a per-tensor box (its own kernels there) is one block below.
  if (!tiled::whole_tensor(x, out) && tiled::fits(x, out)) {
    const tiled::Pass q =
        tiled::make_pass(out, static_cast<size_t>(x.rows), static_cast<size_t>(x.cols), opt, false);
    const bool row = tiled::row_pass(out);
    tiled_quantize(x, row ? q : tiled::Pass{}, row ? tiled::Pass{} : q, opt.flush_subnormal_inputs, amax_word);
    return;
  }
  if (tiled::wide_fits(x, out)) {
    wide_quantize(x, out, opt, amax_word);
    return;
  }
  const int64_t br = out.scales.block_rows, bc = out.scales.block_cols;
  const int64_t gr = out.scales.grid_rows(x.rows), gc = out.scales.grid_cols(x.cols);
  bs::ScaleParams p = tiled::scale_params(out, opt);
  const bool two_level = p.scale == ScaleFormat::e4m3;
  if (two_level) {
    uint32_t amax = 0;
    for (int64_t b = 0; b < gr * gc; ++b)
      amax = std::max(amax, block_amax(x, (b / gc) * br, (b % gc) * bc, br, bc, opt).finite);
    if (amax_word) *amax_word = amax;
    p.tensor_enc = bs::tensor_encode_scale(bits_to_float(amax), p.lim.max_elem);
    p.tensor_dec = 1.0f / p.tensor_enc;
    if (out.scales.tensor) *out.scales.tensor = p.tensor_dec;
  }
  const bool pow2 = scale_is_power_of_two(p.scale), coded = scale_is_code(p.scale);
  for (int64_t b = 0; b < gr * gc; ++b) {
    const int64_t r0 = (b / gc) * br, c0 = (b % gc) * bc;
    const bs::BlockScale s = bs::block_scale(block_amax(x, r0, c0, br, bc, opt), p);
    if (coded && out.scales.codes) out.scales.codes[b] = s.code;
    if (!coded && out.scales.values) out.scales.values[b] = s.dec;
    const float dec = bs::stored_dec(s, p.scale);
    for (int64_t r = r0; r < std::min(r0 + br, x.rows); ++r)
      for (int64_t c = c0; c < std::min(c0 + bc, x.cols); ++c) {
        const auto i = static_cast<size_t>(r * x.cols + c);
        const uint32_t code = bs::quantize_element(at<float>(x, r, c), s, pow2, out.element, opt, i).code;
        if (out.storage == Storage::code8) at<uint8_t>(out, r, c) = static_cast<uint8_t>(code);
        else
          at<float>(out, r, c) =
              bs::dequant_value(code, dec, out.element, two_level, p.tensor_dec, opt.headroom_3_4);
      }
  }
}

// quantize.cu's quantize_both: one tiled read where it fits, else the two calls it fuses.
void quantize_both(const DeviceTensor& x, const DeviceTensor& out_rows, const QuantizeOptions& opt_rows,
                   const DeviceTensor& out_cols, const QuantizeOptions& opt_cols, uint32_t* amax_words,
                   void* stream) {
  if (tiled::both_fit(x, out_rows, opt_rows, out_cols, opt_cols)) {
    const auto rows = static_cast<size_t>(x.rows), cols = static_cast<size_t>(x.cols);
    const bool flush = tiled::both_flush(out_rows, opt_rows, opt_cols);
    tiled_quantize(x, tiled::make_pass(out_rows, rows, cols, opt_rows, false),
                   tiled::make_pass(out_cols.transposed(), rows, cols, opt_cols, true), flush, amax_words);
    return;
  }
  quantize(x, out_rows, opt_rows, amax_words, stream);
  quantize(x.transposed(), out_cols, opt_cols, amax_words ? amax_words + 1 : nullptr, stream);
}

float dequantized(const DeviceTensor& q, int64_t r, int64_t c) {
  const int64_t b = (r / q.scales.block_rows) * q.scales.grid_cols(q.cols) + c / q.scales.block_cols;
  const bool two_level = q.scales.format == ScaleFormat::e4m3;
  const float tensor_dec = two_level && q.scales.tensor ? *q.scales.tensor : 1.0f;
  const float dec = scale_is_code(q.scales.format)
                        ? bs::decode_scale(q.scales.format, q.scales.codes[b], 0.0f)
                        : q.scales.values[b];
  return bs::dequant_value(at<uint8_t>(q, r, c), dec, q.element, two_level, tensor_dec,
                           q.scales.headroom_3_4);
}
uint16_t to_bf16(float v) {
  return static_cast<uint16_t>(lpx::encode(v, fmt16::bf16, Rounding::rne, Overflow::ieee));
}
void dequantize(const DeviceTensor& q, const DeviceTensor& out, void*) {
  for_each(q, [&](int64_t r, int64_t c, uint64_t) {
    const float v = dequantized(q, r, c);
    if (out.storage == Storage::bf16) at<uint16_t>(out, r, c) = to_bf16(v);
    else at<float>(out, r, c) = v;
  });
}

// hadamard.cu: gather each vector through the strides, hadamard_row, scatter.
void hadamard(const DeviceTensor& in, const DeviceTensor& out, int axis, int n, const float* signs,
              uint64_t seed, uint32_t sign_stream, void*) {
  float s[kMaxHadamardRow], buf[kMaxHadamardRow];
  for (int j = 0; j < n; ++j)
    s[j] = signs ? signs[j] : hadamard_sign(seed, sign_stream, static_cast<uint32_t>(j));
  const int64_t dr = axis == 1 ? 0 : 1, dc = axis == 1 ? 1 : 0;
  for (int64_t r0 = 0; r0 < in.rows; r0 += axis == 1 ? 1 : n)
    for (int64_t c0 = 0; c0 < in.cols; c0 += axis == 1 ? n : 1) {
      for (int i = 0; i < n; ++i) buf[i] = at<float>(in, r0 + i * dr, c0 + i * dc);
      hadamard_row(buf, buf, n, s);
      for (int i = 0; i < n; ++i) at<float>(out, r0 + i * dr, c0 + i * dc) = buf[i];
    }
}

// gemm.cu's paths in double: fp8_tensor (operands as stored, per-tensor scales) and the
// BF16 fallback (block scale only, rounded to BF16; tensor scale and headroom as alpha).
float operand_alpha(const DeviceTensor& q) {
  float a = 1.0f;
  if (q.scales.present && q.scales.format == ScaleFormat::e4m3) a = *q.scales.tensor;
  if (q.scales.present && q.scales.headroom_3_4) a = a / 0.75f;
  return a;
}
bool gemm(const DeviceTensor& x, const DeviceTensor& w, const DeviceTensor& y, GemmPath path, void*) {
  if (path != GemmPath::fp8_tensor && path != GemmPath::bf16_fallback) return false;
  auto value = [path](const DeviceTensor& t, int64_t r, int64_t c) -> double {
    if (t.storage == Storage::bf16) return lpx::decode(at<uint16_t>(t, r, c), fmt16::bf16);
    if (path == GemmPath::fp8_tensor)
      return static_cast<double>(lpx::decode(at<uint8_t>(t, r, c), t.element)) *
             (t.scales.values ? *t.scales.values : 1.0f);
    DeviceTensor block_only = t;
    block_only.scales.tensor = nullptr;
    block_only.scales.headroom_3_4 = false;
    return lpx::decode(to_bf16(dequantized(block_only, r, c)), fmt16::bf16);
  };
  const double alpha = static_cast<double>(operand_alpha(x) * operand_alpha(w));
  std::vector<double> xs(static_cast<size_t>(x.numel())), ws(static_cast<size_t>(w.numel()));
  for_each(x, [&](int64_t r, int64_t c, uint64_t i) { xs[i] = value(x, r, c); });
  for_each(w, [&](int64_t r, int64_t c, uint64_t i) { ws[i] = value(w, r, c); });
  const int64_t k = x.cols;
  for (int64_t i = 0; i < x.rows; ++i)
    for (int64_t j = 0; j < w.rows; ++j) {
      double acc = 0;
      for (int64_t t = 0; t < k; ++t) acc += xs[static_cast<size_t>(i * k + t)] * ws[static_cast<size_t>(j * k + t)];
      const auto v = static_cast<float>(acc * alpha);
      if (y.storage == Storage::bf16) at<uint16_t>(y, i, j) = to_bf16(v);
      else at<float>(y, i, j) = v;
    }
  return true;
}

// ordered_gemm.cu's per-element rule (ordered_sum.hpp's ordered_dot, which the kernel
// runs in its tiles) for exact and limited; for fast fp32 (cuBLASLt's own order) a sum in
// double rounded once, so that tests see a fast mode that differs from exact.
void gemm_f32(bool a_trans, bool b_trans, const float* a, const float* b, float* c, int64_t m,
              int64_t n, int64_t k, LimitedSum acc, bool accumulate, GemmOrder order, void*) {
  const int64_t a_row = a_trans ? 1 : k, a_step = a_trans ? m : 1;
  const int64_t b_col = b_trans ? k : 1, b_step = b_trans ? 1 : n;
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      float& out = c[i * n + j];
      if (!acc.fp32() || order == GemmOrder::exact) {
        out = ordered_dot(a + i * a_row, a_step, b + j * b_col, b_step, k, acc, out, accumulate);
        continue;
      }
      double s = accumulate ? out : 0.0;
      for (int64_t t = 0; t < k; ++t)
        s += static_cast<double>(a[i * a_row + t * a_step]) * b[j * b_col + t * b_step];
      out = static_cast<float>(s);
    }
}

bool hw_cvt(const DeviceTensor&, const uint32_t*, const DeviceTensor&, HwCvt) { return false; }

void codec_roundtrip(const ElementFormat& f, uint32_t* out) {
  for (uint32_t code = 0; code <= f.code_mask; ++code) {
    const float v = lpx::decode(code, f);
    const uint32_t r = random_bits(0, 0, code);
    uint32_t back = lpx::encode(v, f, Rounding::rne, Overflow::ieee, r);
    for (Rounding mode : {Rounding::rna, Rounding::rtz, Rounding::rup, Rounding::rdn, Rounding::sr,
                          Rounding::rto, Rounding::sr_fast, Rounding::sr_rne, Rounding::sr_odd})
      if (lpx::encode(v, f, mode, Overflow::ieee, r) != back) back |= 0x80000000u;
    out[code] = back;
  }
}

double median_seconds(int reps, void (*run)(void*), void* context) {
  run(context);
  std::vector<double> t;
  for (int i = 0; i < std::max(reps, 1); ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    run(context);
    t.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

const backend::Table kTable = {
    backend::layout(), device_count, device_name, compute_capability, allocate, release, copy, fill,
    synchronize, encode, decode, fake_cast, quantize, quantize_both, dequantize, hadamard, gemm, hw_cvt,
    codec_roundtrip, median_seconds, gemm_f32,
};

}  // namespace

extern "C" __attribute__((visibility("default"))) const lpx::kernels::backend::Table*
lpx_cuda_backend(uint32_t abi_version) {
  return abi_version == lpx::kernels::backend::kAbiVersion ? &kTable : nullptr;
}
