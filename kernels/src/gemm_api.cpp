// Argument checks of gemm() and the quantized-operand GEMM's path choice (every build),
// then the CUDA module's GEMM on views (gemm.cu), with the BF16 fallback decided here.
#include <cstdint>
#include <stdexcept>
#include <string>

#include "backend.hpp"
#include "lpx/kernels/cast.hpp"
#include "lpx/kernels/gemm.hpp"
#include "lpx/kernels/memory.hpp"

namespace lpx::kernels {

namespace {

bool is_fp8(GemmDtype d) { return d == GemmDtype::e4m3 || d == GemmDtype::e5m2; }

// cuBLASLt's FP8 and block-scaled GEMMs need every matrix 16-byte aligned.
bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }
// cuBLASLt's FP8 GEMMs need 16-byte aligned matrices, and per-tensor scale pointers
// aligned alike: on an H200 (CUDA 13.0), a scale at 4 bytes past an allocation's start
// made cublasLtMatmul return NOT_SUPPORTED after its heuristic had offered an algorithm.
// Block scales are copied into cuBLASLt's layouts first (gemm.cu), so only per-tensor
// scales, passed as they are, are checked.
bool per_tensor_scale_aligned(const QuantizedOperand& q) {
  return q.format.block.kind != BlockShape::Kind::tensor || q.scale_values == nullptr || aligned16(q.scale_values);
}
bool quantized_aligned(const QuantizedOperand& x, const QuantizedOperand& w, const void* y) {
  return aligned16(x.codes) && aligned16(w.codes) && aligned16(y) && per_tensor_scale_aligned(x) &&
         per_tensor_scale_aligned(w);
}
std::string misaligned_message(const char* path) {
  return std::string("lpx::kernels::gemm: the ") + path +
         " path needs X, W, Y and per-tensor scales 16-byte aligned (cuBLASLt's FP8 GEMMs)";
}

bool same_element(const ElementFormat& a, const ElementFormat& b) {
  return a.name_view() == b.name_view();
}
bool fp8_element(const ElementFormat& e) {
  return same_element(e, fmt8::e4m3fn) || same_element(e, fmt8::e5m2);
}
// 1xN blocks along k (the last axis of a (rows, k) operand).
bool along_k(const BlockFormat& f, int64_t length) {
  return f.block.kind == BlockShape::Kind::vector && f.block.length == length &&
         (f.block.axis == -1 || f.block.axis == 1);
}
bool is_mxfp8(const BlockFormat& f) {
  return along_k(f, 32) && f.scale == ScaleFormat::e8m0 && fp8_element(f.element);
}
bool is_nvfp4(const BlockFormat& f) {
  return along_k(f, 16) && f.scale == ScaleFormat::e4m3 && same_element(f.element, fmt4::e2m1);
}
bool is_mxfp4(const BlockFormat& f) {
  return along_k(f, 32) && f.scale == ScaleFormat::e8m0 && same_element(f.element, fmt4::e2m1);
}
// DeepSeek-V3's FP8 operands: 1x128 along k (activations, gradients) or 128x128 tiles
// (weights), with float32 decode multipliers (fp32 or power-of-two scales).
bool fp32_scaled_fp8(const BlockFormat& f) {
  return fp8_element(f.element) && (f.scale == ScaleFormat::fp32 || f.scale == ScaleFormat::pow2);
}
bool is_fp8_1x128(const BlockFormat& f) { return along_k(f, 128) && fp32_scaled_fp8(f); }
bool is_fp8_128x128(const BlockFormat& f) {
  return f.block.kind == BlockShape::Kind::tile && f.block.rows == 128 && f.block.cols == 128 &&
         fp32_scaled_fp8(f);
}
bool is_fp8_tensor(const BlockFormat& f) {
  return f.block.kind == BlockShape::Kind::tensor && f.scale == ScaleFormat::fp32 &&
         fp8_element(f.element);
}
bool both_e5m2(const BlockFormat& x, const BlockFormat& w) {
  return same_element(x.element, fmt8::e5m2) && same_element(w.element, fmt8::e5m2);
}
// What the device dequantize kernel (or a whole-matrix block) can expand to BF16.
bool dequantizable(const BlockFormat& f) {
  switch (f.block.kind) {
    case BlockShape::Kind::vector: return f.block.axis >= -2 && f.block.axis <= 1;
    case BlockShape::Kind::tile:
    case BlockShape::Kind::tensor: return true;
    default: return false;
  }
}

bool formats_fit(GemmPath p, const BlockFormat& x, const BlockFormat& w) {
  switch (p) {
    case GemmPath::automatic: return true;
    case GemmPath::mxfp8_block_scaled: return is_mxfp8(x) && is_mxfp8(w) && !both_e5m2(x, w);
    case GemmPath::nvfp4_block_scaled: return is_nvfp4(x) && is_nvfp4(w);
    case GemmPath::mxfp4_block_scaled: return is_mxfp4(x) && is_mxfp4(w);
    case GemmPath::fp8_tensor: return is_fp8_tensor(x) && is_fp8_tensor(w) && !both_e5m2(x, w);
    case GemmPath::fp8_block128_scaled:
      return is_fp8_1x128(x) && (is_fp8_1x128(w) || is_fp8_128x128(w)) && !both_e5m2(x, w);
    case GemmPath::bf16_fallback: return dequantizable(x) && dequantizable(w);
  }
  return false;
}

void check_operand(const QuantizedOperand& q, const char* what) {
  validate(q.format);
  const std::string w = std::string("gemm: ") + what;
  detail::check_pointer(q.codes, 1, (w + " codes").c_str());
  const bool coded = q.format.scale_is_code();
  detail::check_pointer(coded ? static_cast<const void*>(q.scale_codes) : q.scale_values, 1,
                        (w + " scales").c_str());
  if (q.format.two_level()) detail::check_pointer(q.tensor_scale, 1, (w + " tensor_scale").c_str());
}

void check_sizes(size_t m, size_t n, size_t k, GemmDtype out) {
  if (m == 0 || n == 0 || k == 0) throw std::invalid_argument("lpx::kernels::gemm: a size is zero");
  if (out != GemmDtype::bf16 && out != GemmDtype::f32)
    throw std::invalid_argument("lpx::kernels::gemm: the output must be bf16 or f32");
  if (k % 32 != 0)
    throw std::invalid_argument(
        "lpx::kernels::gemm: quantized operands need k % 32 == 0 (no ragged block along k), got k = " +
        std::to_string(k));
}

// The view of a raw operand (rows, k): bfloat16 bits, or FP8 codes with their per-tensor
// decode scale (null: 1).
DeviceTensor raw_view(const GemmOperand& o, size_t rows, size_t k) {
  const auto r = static_cast<int64_t>(rows), c = static_cast<int64_t>(k);
  if (o.dtype == GemmDtype::bf16) return DeviceTensor::bf16_bits(const_cast<void*>(o.data), r, c);
  DeviceTensor t =
      DeviceTensor::codes(o.data, r, c, o.dtype == GemmDtype::e5m2 ? fmt8::e5m2 : fmt8::e4m3fn);
  t.scales.present = true;
  t.scales.format = ScaleFormat::fp32;
  t.scales.block_rows = r;
  t.scales.block_cols = c;
  t.scales.values = const_cast<float*>(o.scale);
  return t;
}

// The view of a quantized operand (rows, k): codes and the scales of its format; a
// per-tensor block is one (rows, k) box.
DeviceTensor operand_view(const QuantizedOperand& q, size_t rows, size_t k) {
  const auto r = static_cast<int64_t>(rows), c = static_cast<int64_t>(k);
  DeviceTensor t = DeviceTensor::codes(q.codes, r, c, q.format.element);
  if (q.format.block.kind == BlockShape::Kind::tensor) {
    t.scales.present = true;
    t.scales.format = q.format.scale;
    t.scales.rule = q.format.rule;
    t.scales.block_rows = r;
    t.scales.block_cols = c;
  } else {
    t.scales = block_scales(q.format, 2, "gemm");
  }
  t.scales.codes = const_cast<uint8_t*>(q.scale_codes);
  t.scales.values = const_cast<float*>(q.scale_values);
  t.scales.tensor = const_cast<float*>(q.tensor_scale);
  t.scales.headroom_3_4 = q.headroom_3_4;
  return t;
}

DeviceTensor output_view(void* y, size_t m, size_t n, GemmDtype out) {
  const auto r = static_cast<int64_t>(m), c = static_cast<int64_t>(n);
  return out == GemmDtype::bf16 ? DeviceTensor::bf16_bits(y, r, c)
                                : DeviceTensor::values(static_cast<float*>(y), r, c);
}

// The quantized-operand GEMM on checked arguments: the path (automatic: the first that
// applies on this device), then the BF16 fallback when cuBLASLt has no algorithm.
GemmPath run_quantized(size_t m, size_t n, size_t k, const QuantizedOperand& x,
                       const QuantizedOperand& w, void* y, GemmDtype out_dtype, void* stream,
                       GemmPath path) {
  const backend::Table& t = backend::require();
  const bool automatic = path == GemmPath::automatic;
  GemmPath p = automatic ? choose_gemm_path(x.format, w.format, t.compute_capability()) : path;
  // A forced path was checked for alignment and k by the caller; the automatic choice of a
  // cuBLASLt FP8 path on misaligned buffers, or of the 128-block path with a ragged k,
  // takes the BF16 fallback (which copies the operands).
  if (!quantized_aligned(x, w, y) || (p == GemmPath::fp8_block128_scaled && k % 128 != 0))
    p = GemmPath::bf16_fallback;
  const DeviceTensor xv = operand_view(x, m, k), wv = operand_view(w, n, k),
                     yv = output_view(y, m, n, out_dtype);
  if (p != GemmPath::bf16_fallback && t.gemm(xv, wv, yv, p, stream)) return p;
  if (!automatic && p != GemmPath::bf16_fallback)
    throw std::runtime_error("lpx::kernels::gemm: cuBLASLt has no algorithm for the " +
                             std::string(gemm_path_name(p)) + " path on this device");
  if (!t.gemm(xv, wv, yv, GemmPath::bf16_fallback, stream))
    throw std::runtime_error("cuBLASLt has no BF16 GEMM algorithm for this shape on this device");
  return GemmPath::bf16_fallback;
}

}  // namespace

std::string_view gemm_path_name(GemmPath p) {
  switch (p) {
    case GemmPath::automatic: return "automatic";
    case GemmPath::mxfp8_block_scaled: return "mxfp8 block-scaled";
    case GemmPath::nvfp4_block_scaled: return "nvfp4 block-scaled";
    case GemmPath::mxfp4_block_scaled: return "mxfp4 block-scaled";
    case GemmPath::fp8_tensor: return "fp8 per-tensor";
    case GemmPath::bf16_fallback: return "bf16 fallback";
    case GemmPath::fp8_block128_scaled: return "fp8 1x128/128x128 block-scaled";
  }
  return "?";
}

GemmPath choose_gemm_path(const BlockFormat& x, const BlockFormat& w, int cc) {
  validate(x);
  validate(w);
  if (cc >= 100 && formats_fit(GemmPath::mxfp8_block_scaled, x, w)) return GemmPath::mxfp8_block_scaled;
  if (cc >= 100 && formats_fit(GemmPath::nvfp4_block_scaled, x, w)) return GemmPath::nvfp4_block_scaled;
  if (cc >= 100 && formats_fit(GemmPath::mxfp4_block_scaled, x, w)) return GemmPath::mxfp4_block_scaled;
  // cuBLASLt runs the float32 128-block scale modes on compute capability 9.0 only.
  if (cc == 90 && formats_fit(GemmPath::fp8_block128_scaled, x, w)) return GemmPath::fp8_block128_scaled;
  if (cc >= 89 && formats_fit(GemmPath::fp8_tensor, x, w)) return GemmPath::fp8_tensor;
  if (formats_fit(GemmPath::bf16_fallback, x, w)) return GemmPath::bf16_fallback;
  throw std::invalid_argument("lpx::kernels::gemm: no GEMM path takes " + x.spec() + " x " + w.spec() +
                              " (per-channel blocks are not supported)");
}

void gemm(size_t m, size_t n, size_t k, const GemmOperand& x, const GemmOperand& w, void* y,
          GemmDtype out_dtype, void* stream) {
  if (m == 0 || n == 0 || k == 0) throw std::invalid_argument("lpx::kernels::gemm: a size is zero");
  detail::check_pointer(x.data, 1, "gemm: X");
  detail::check_pointer(w.data, 1, "gemm: W");
  detail::check_pointer(y, 1, "gemm: Y");
  if (out_dtype != GemmDtype::bf16 && out_dtype != GemmDtype::f32)
    throw std::invalid_argument("lpx::kernels::gemm: the output must be bf16 or f32");
  const bool both_bf16 = x.dtype == GemmDtype::bf16 && w.dtype == GemmDtype::bf16;
  const bool fp8 = is_fp8(x.dtype) && is_fp8(w.dtype);
  if (!both_bf16 && !fp8)
    throw std::invalid_argument("lpx::kernels::gemm: operands must be bf16 x bf16 or fp8 x fp8");
  if (fp8 && x.dtype == GemmDtype::e5m2 && w.dtype == GemmDtype::e5m2)
    throw std::invalid_argument("lpx::kernels::gemm: e5m2 x e5m2 is not supported by cuBLASLt");
  if (fp8 && k % 16 != 0)
    throw std::invalid_argument("lpx::kernels::gemm: FP8 needs k % 16 == 0, got k = " +
                                std::to_string(k));
  if (fp8 && !(aligned16(x.data) && aligned16(w.data) && aligned16(y) && (!x.scale || aligned16(x.scale)) &&
              (!w.scale || aligned16(w.scale))))
    throw std::invalid_argument(misaligned_message("fp8 per-tensor"));
  if (both_bf16 && (x.scale || w.scale))
    throw std::invalid_argument("lpx::kernels::gemm: scales apply to FP8 operands only");
  // The operands as stored: the module's fp8_tensor path (per-tensor scales where given).
  if (!backend::require().gemm(raw_view(x, m, k), raw_view(w, n, k), output_view(y, m, n, out_dtype),
                               GemmPath::fp8_tensor, stream))
    throw std::runtime_error("cuBLASLt has no algorithm for this GEMM on this device (FP8 needs sm_89+)");
}

GemmPath gemm(size_t m, size_t n, size_t k, const QuantizedOperand& x, const QuantizedOperand& w,
              void* y, GemmDtype out_dtype, void* stream, GemmPath path) {
  check_sizes(m, n, k, out_dtype);
  check_operand(x, "X");
  check_operand(w, "W");
  detail::check_pointer(y, 1, "gemm: Y");
  choose_gemm_path(x.format, w.format, 0);  // throws when no path takes the formats
  if (!formats_fit(path, x.format, w.format))
    throw std::invalid_argument("lpx::kernels::gemm: the " + std::string(gemm_path_name(path)) +
                                " path does not take " + x.format.spec() + " x " + w.format.spec());
  if (path != GemmPath::automatic && path != GemmPath::bf16_fallback && !quantized_aligned(x, w, y))
    throw std::invalid_argument(misaligned_message(std::string(gemm_path_name(path)).c_str()));
  if (path == GemmPath::fp8_block128_scaled && k % 128 != 0)
    throw std::invalid_argument("lpx::kernels::gemm: the fp8 1x128/128x128 block-scaled path needs k % 128 == 0, got k = " +
                                std::to_string(k));
  return run_quantized(m, n, k, x, w, y, out_dtype, stream, path);
}

GemmPath gemm_host(const QuantizedTensor& x, const QuantizedTensor& w, std::span<float> y,
                   GemmPath path) {
  if (x.shape.size() != 2 || w.shape.size() != 2)
    throw std::invalid_argument("lpx::kernels::gemm_host: X and W must be 2-D (m, k) and (n, k)");
  if (x.shape[1] != w.shape[1])
    throw std::invalid_argument("lpx::kernels::gemm_host: X has k = " + std::to_string(x.shape[1]) +
                                " but W has k = " + std::to_string(w.shape[1]));
  const size_t m = static_cast<size_t>(x.shape[0]), n = static_cast<size_t>(w.shape[0]),
               k = static_cast<size_t>(x.shape[1]);
  check_sizes(m, n, k, GemmDtype::f32);
  detail::check_sizes(m * n, y.size(), "gemm_host: output");
  for (const QuantizedTensor* q : {&x, &w}) {
    detail::check_sizes(q->codes.size(), static_cast<size_t>(q->shape[0] * q->shape[1]),
                        "gemm_host: codes vs shape");
    size_t nb = 1;
    for (int64_t d : scale_grid_shape(q->shape, q->format)) nb *= static_cast<size_t>(d);
    const bool coded = q->format.scale_is_code();
    detail::check_sizes(coded ? q->scale_codes.size() : q->scale_values.size(), nb,
                        "gemm_host: scales vs scale grid");
    if (q->format.two_level() && !q->tensor_scale)
      throw std::invalid_argument("lpx::kernels::gemm_host: a two-level (e4m3) operand needs its tensor scale");
  }
  choose_gemm_path(x.format, w.format, 0);
  if (!formats_fit(path, x.format, w.format))
    throw std::invalid_argument("lpx::kernels::gemm_host: the " + std::string(gemm_path_name(path)) +
                                " path does not take " + x.format.spec() + " x " + w.format.spec());
  backend::require();
  // Upload both operands (codes, scales, tensor scale), run, copy Y back.
  struct Upload {
    DeviceBuffer codes, scale_codes, scale_values, tensor_scale;
    QuantizedOperand op;
  };
  auto upload = [](const QuantizedTensor& q) {
    Upload u;
    u.codes.reserve(q.codes.size());
    copy_to_device(u.codes.get(), q.codes.data(), q.codes.size());
    u.scale_codes.reserve(q.scale_codes.size());
    copy_to_device(u.scale_codes.get(), q.scale_codes.data(), q.scale_codes.size());
    u.scale_values.reserve(q.scale_values.size() * sizeof(float));
    copy_to_device(u.scale_values.get(), q.scale_values.data(), q.scale_values.size() * sizeof(float));
    u.tensor_scale.reserve(sizeof(float));
    const float ts = q.tensor_scale.value_or(1.0f);
    copy_to_device(u.tensor_scale.get(), &ts, sizeof(float));
    u.op.format = q.format;
    u.op.codes = u.codes.get<uint8_t>();
    u.op.scale_codes = u.scale_codes.get<uint8_t>();
    u.op.scale_values = u.scale_values.get<float>();
    u.op.tensor_scale = u.tensor_scale.get<float>();
    u.op.headroom_3_4 = q.headroom_3_4;
    return u;
  };
  const Upload ux = upload(x), uw = upload(w);
  DeviceBuffer d_y(m * n * sizeof(float));
  const GemmPath ran = run_quantized(m, n, k, ux.op, uw.op, d_y.get(), GemmDtype::f32, nullptr, path);
  copy_to_host(y.data(), d_y.get(), m * n * sizeof(float));
  return ran;
}

void gemm_f32_device(bool a_trans, bool b_trans, const float* a, const float* b, float* c,
                     int64_t m, int64_t n, int64_t k, LimitedSum acc, bool accumulate,
                     GemmOrder order, void* stream) {
  if (m < 0 || n < 0 || k < 0)
    throw std::invalid_argument("lpx::kernels::gemm_f32_device: negative size " + std::to_string(m) + " x " +
                                std::to_string(n) + " x " + std::to_string(k));
  if (acc.mantissa_bits < 1 || acc.mantissa_bits > 23)
    throw std::invalid_argument("lpx::kernels::gemm_f32_device: mantissa_bits " +
                                std::to_string(acc.mantissa_bits) + " is not in [1, 23]");
  if (acc.promote_every < 0)
    throw std::invalid_argument("lpx::kernels::gemm_f32_device: promote_every is negative");
  const auto count = [](int64_t r, int64_t s) { return static_cast<size_t>(r) * static_cast<size_t>(s); };
  detail::check_pointer(a, count(m, k), "gemm_f32_device: a");
  detail::check_pointer(b, count(k, n), "gemm_f32_device: b");
  detail::check_pointer(c, count(m, n), "gemm_f32_device: c");
  const backend::Table& t = backend::require();
  if (m == 0 || n == 0) return;
  if (k == 0) {  // an empty sum: c = 0, or c unchanged
    if (!accumulate) t.fill(c, 0, count(m, n) * sizeof(float), stream);
    return;
  }
  t.gemm_f32(a_trans, b_trans, a, b, c, m, n, k, acc, accumulate, order, stream);
}

}  // namespace lpx::kernels
