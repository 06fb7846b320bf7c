// cuBLASLt GEMMs (gemm.hpp): Y (m, n) = X (m, k) · W (n, k)^T, row-major. In cuBLASLt's
// column-major terms that is D (n x m, ldd = n) = op(A) · B with A = W (k x n, lda = k,
// TRANSA = T) and B = X (k x m, ldb = k, TRANSB = N): the TN layout FP8 and the
// block-scaled kernels require. Compute type CUBLAS_COMPUTE_32F, scale type CUDA_R_32F,
// C = D type (bf16 or f32), beta = 0, alpha a host float.
//
// Scales: per-tensor FP8 decode scales go to CUBLASLT_MATMUL_DESC_A/B_SCALE_POINTER
// (float32 device scalars, the default SCALAR_32F mode). Block scales set
// CUBLASLT_MATMUL_DESC_A/B_SCALE_MODE to VEC32_UE8M0 (MXFP8, MXFP4) or VEC16_UE4M3 (NVFP4) and
// point A/B_SCALE_POINTER at the scale grid copied into the tiled layout of
// block_scale_tile_offset (gemm.hpp); Hopper's FP8 path with float32 128-blocks sets
// VEC128_32F (X, and W when 1x128) or BLK128x128_32F (W) and copies the grids into the
// layouts of vec128_scale_index / blk128_scale_index. FP4 data (CUDA_R_4F_E2M1) is two codes per byte,
// the lower k index in the low nibble.
//
// The host side (gemm_api.cpp) checks the operands, chooses the path (GemmPath::automatic
// never reaches the module) and falls back to the BF16 path when this returns false. The
// operands are contiguous views: x (m, k) and w (n, k) codes (code8), bfloat16 bits (raw
// BF16 GEMMs) or FP8 codes with a per-tensor scale in scales.values (raw FP8 GEMMs and the
// fp8_tensor path); y (m, n) f32 or bf16.
#include <cublasLt.h>
#include <cuda_runtime.h>

#include <mutex>
#include <stdexcept>
#include <string>
#include <utility>

#include "cuda_util.cuh"
#include "launch.hpp"
#include "lpx/kernels/gemm.hpp"

namespace lpx::kernels::module {

namespace {

void check_lt(cublasStatus_t s, const char* what) {
  if (s != CUBLAS_STATUS_SUCCESS)
    throw std::runtime_error(std::string("cuBLASLt ") + what + " failed (status " +
                             std::to_string(static_cast<int>(s)) + ")");
}

constexpr size_t kWorkspaceBytes = size_t{32} << 20;

// One handle and workspace per process (created on first use, never freed).
struct LtContext {
  cublasLtHandle_t handle = nullptr;
  void* workspace = nullptr;
};
LtContext& context() {
  static LtContext ctx;
  static std::once_flag once;
  std::call_once(once, [] {
    check_lt(cublasLtCreate(&ctx.handle), "create");
    cuda::check(cudaMalloc(&ctx.workspace, kWorkspaceBytes), "cudaMalloc workspace");
  });
  return ctx;
}

// RAII for the descriptors of one call.
struct Descriptors {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  cublasLtMatmulPreference_t pref = nullptr;
  ~Descriptors() {
    if (pref) cublasLtMatmulPreferenceDestroy(pref);
    if (c) cublasLtMatrixLayoutDestroy(c);
    if (b) cublasLtMatrixLayoutDestroy(b);
    if (a) cublasLtMatrixLayoutDestroy(a);
    if (op) cublasLtMatmulDescDestroy(op);
  }
};

// cuBLASLt's first algorithm for the descriptors, with the shared workspace (d.pref is
// created here); false when it has none (NOT_SUPPORTED: no kernel for this combination on
// this device, not an error).
bool first_algorithm(const LtContext& ctx, Descriptors& d, cublasLtMatmulHeuristicResult_t& out) {
  check_lt(cublasLtMatmulPreferenceCreate(&d.pref), "preference");
  check_lt(cublasLtMatmulPreferenceSetAttribute(d.pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                &kWorkspaceBytes, sizeof(kWorkspaceBytes)),
           "workspace preference");
  int found = 0;
  const cublasStatus_t hs = cublasLtMatmulAlgoGetHeuristic(ctx.handle, d.op, d.a, d.b, d.c, d.c,
                                                           d.pref, 1, &out, &found);
  if (hs == CUBLAS_STATUS_NOT_SUPPORTED || (hs == CUBLAS_STATUS_SUCCESS && found == 0)) return false;
  check_lt(hs, "heuristic");
  return true;
}

// One cublasLtMatmul: A = W (n, k), B = X (m, k), D = Y (m, n).
struct LtCall {
  size_t m = 0, n = 0, k = 0;
  const void* a = nullptr;
  cudaDataType_t a_type = CUDA_R_16BF;
  const void* b = nullptr;
  cudaDataType_t b_type = CUDA_R_16BF;
  const void* a_scale = nullptr;  // device pointers (null: none)
  const void* b_scale = nullptr;
  bool block_scaled = false;
  cublasLtMatmulMatrixScale_t a_scale_mode = CUBLASLT_MATMUL_MATRIX_SCALE_SCALAR_32F;
  cublasLtMatmulMatrixScale_t b_scale_mode = CUBLASLT_MATMUL_MATRIX_SCALE_SCALAR_32F;
  float alpha = 1.0f;
  void* d = nullptr;
  cudaDataType_t d_type = CUDA_R_32F;
};

// Runs the call; false (nothing launched) when cuBLASLt has no algorithm for it.
bool run_lt(const LtCall& call, cudaStream_t stream) {
  LtContext& ctx = context();
  Descriptors d;
  check_lt(cublasLtMatmulDescCreate(&d.op, CUBLAS_COMPUTE_32F, CUDA_R_32F), "matmul desc");
  const cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
  auto set = [&](cublasLtMatmulDescAttributes_t attr, const void* v, size_t bytes, const char* what) {
    check_lt(cublasLtMatmulDescSetAttribute(d.op, attr, v, bytes), what);
  };
  set(CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta), "TRANSA");
  set(CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb), "TRANSB");
  if (call.block_scaled) {
    set(CUBLASLT_MATMUL_DESC_A_SCALE_MODE, &call.a_scale_mode, sizeof(call.a_scale_mode), "A_SCALE_MODE");
    set(CUBLASLT_MATMUL_DESC_B_SCALE_MODE, &call.b_scale_mode, sizeof(call.b_scale_mode), "B_SCALE_MODE");
  }
  if (call.a_scale) set(CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &call.a_scale, sizeof(call.a_scale), "A_SCALE_POINTER");
  if (call.b_scale) set(CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &call.b_scale, sizeof(call.b_scale), "B_SCALE_POINTER");
  const auto u = [](size_t v) { return static_cast<uint64_t>(v); };
  const auto ld = [](size_t v) { return static_cast<int64_t>(v); };
  check_lt(cublasLtMatrixLayoutCreate(&d.a, call.a_type, u(call.k), u(call.n), ld(call.k)), "layout A");
  check_lt(cublasLtMatrixLayoutCreate(&d.b, call.b_type, u(call.k), u(call.m), ld(call.k)), "layout B");
  check_lt(cublasLtMatrixLayoutCreate(&d.c, call.d_type, u(call.n), u(call.m), ld(call.n)), "layout C/D");
  cublasLtMatmulHeuristicResult_t heuristic{};
  if (!first_algorithm(ctx, d, heuristic)) return false;
  const float beta = 0.0f;
  check_lt(cublasLtMatmul(ctx.handle, d.op, &call.alpha, call.a, d.a, call.b, d.b, &beta, call.d,
                          d.c, call.d, d.c, &heuristic.algo, ctx.workspace, kWorkspaceBytes, stream),
           "matmul");
  return true;
}

// A stream-ordered device allocation (cudaMallocAsync / cudaFreeAsync on `stream`), so
// scratch buffers of an asynchronous GEMM are freed after the kernels that use them.
class StreamBuffer {
 public:
  StreamBuffer(size_t bytes, cudaStream_t s) : stream_(s) {
    if (bytes > 0) cuda::check(cudaMallocAsync(&ptr_, bytes, s), "cudaMallocAsync");
  }
  StreamBuffer(const StreamBuffer&) = delete;
  StreamBuffer& operator=(const StreamBuffer&) = delete;
  ~StreamBuffer() {
    if (ptr_) cudaFreeAsync(ptr_, stream_);
  }
  template <class T = void>
  T* get() const { return static_cast<T*>(ptr_); }

 private:
  void* ptr_ = nullptr;
  cudaStream_t stream_;
};

// dst = the (rows, kblocks) row-major scale grid src in block_scale_tile_offset's layout,
// padding with 0 (one thread per destination byte).
__global__ void tile_scales_kernel(const uint8_t* __restrict__ src, size_t rows, size_t kblocks,
                                   uint8_t* __restrict__ dst) {
  const size_t prow = (rows + 127) / 128 * 128, pcol = (kblocks + 3) / 4 * 4;
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < prow * pcol;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    const size_t r = i / pcol, c = i % pcol;
    dst[block_scale_tile_offset(r, c, kblocks)] = r < rows && c < kblocks ? src[r * kblocks + c] : 0;
  }
}

// Two E2M1 codes per byte, element 2i in the low nibble (CUDA_R_4F_E2M1).
__global__ void pack_fp4_kernel(const uint8_t* __restrict__ codes, size_t pairs,
                                uint8_t* __restrict__ packed) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < pairs;
       i += static_cast<size_t>(gridDim.x) * blockDim.x)
    packed[i] = static_cast<uint8_t>((codes[2 * i] & 0xFu) | ((codes[2 * i + 1] & 0xFu) << 4));
}

// The cuBLASLt type of an operand as stored: bfloat16, or FP8 codes of e4m3fn / e5m2.
cudaDataType_t operand_type(const DeviceTensor& t) {
  if (t.storage == Storage::bf16) return CUDA_R_16BF;
  if (t.storage == Storage::f32) return CUDA_R_32F;
  return t.element.name_view() == fmt8::e5m2.name_view() ? CUDA_R_8F_E5M2 : CUDA_R_8F_E4M3;
}

// The host-side factor an operand's dequantized BF16 / block-scaled values miss: its
// tensor scale (two-level, read back from the device) and the 4/3 of the headroom.
float operand_alpha(const DeviceTensor& q, cudaStream_t s) {
  float a = 1.0f;
  if (q.scales.present && q.scales.format == ScaleFormat::e4m3) {
    cuda::check(cudaMemcpyAsync(&a, q.scales.tensor, sizeof(float), cudaMemcpyDeviceToHost, s),
                "cudaMemcpyAsync tensor scale");
    cuda::check(cudaStreamSynchronize(s), "tensor scale");
  }
  if (q.scales.present && q.scales.headroom_3_4) a = a / 0.75f;
  return a;
}

// The operand's scale grid in the tiled layout, in `buf` (block_scale_tile_bytes).
void tile_scales(const DeviceTensor& q, size_t kblocks, uint8_t* buf, cudaStream_t s) {
  const size_t rows = static_cast<size_t>(q.rows);
  const size_t total = block_scale_tile_bytes(rows, kblocks);
  tile_scales_kernel<<<cuda::grid_for(total, 256), 256, 0, s>>>(q.scales.codes, rows, kblocks, buf);
  cuda::check(cudaGetLastError(), "tile_scales_kernel launch");
}

LtCall make_call(const DeviceTensor& x, const DeviceTensor& w, const DeviceTensor& y) {
  LtCall c;
  c.m = static_cast<size_t>(x.rows);
  c.n = static_cast<size_t>(w.rows);
  c.k = static_cast<size_t>(x.cols);
  c.d = y.data;
  c.d_type = operand_type(y);
  return c;
}

// MXFP8 (VEC32_UE8M0 on FP8 data), NVFP4 (VEC16_UE4M3 on FP4) or MXFP4 (VEC32_UE8M0 on FP4).
bool run_block_scaled(const DeviceTensor& x, const DeviceTensor& w, const DeviceTensor& y,
                      cudaStream_t s, GemmPath path) {
  LtCall c = make_call(x, w, y);
  const size_t m = c.m, n = c.n, k = c.k;
  const bool fp4 = path != GemmPath::mxfp8_block_scaled;
  const size_t block = path == GemmPath::nvfp4_block_scaled ? 16 : 32, kb = k / block;
  StreamBuffer sx(block_scale_tile_bytes(m, kb), s), sw(block_scale_tile_bytes(n, kb), s);
  tile_scales(x, kb, sx.get<uint8_t>(), s);
  tile_scales(w, kb, sw.get<uint8_t>(), s);
  c.block_scaled = true;
  c.a_scale = sw.get();
  c.b_scale = sx.get();
  c.alpha = operand_alpha(x, s) * operand_alpha(w, s);
  if (!fp4) {
    c.a_scale_mode = c.b_scale_mode = CUBLASLT_MATMUL_MATRIX_SCALE_VEC32_UE8M0;
    c.a = w.data;
    c.a_type = operand_type(w);
    c.b = x.data;
    c.b_type = operand_type(x);
    return run_lt(c, s);
  }
  c.a_scale_mode = c.b_scale_mode = path == GemmPath::nvfp4_block_scaled
                                        ? CUBLASLT_MATMUL_MATRIX_SCALE_VEC16_UE4M3
                                        : CUBLASLT_MATMUL_MATRIX_SCALE_VEC32_UE8M0;
  StreamBuffer px(m * k / 2, s), pw(n * k / 2, s);
  pack_fp4_kernel<<<cuda::grid_for(m * k / 2, 256), 256, 0, s>>>(
      static_cast<const uint8_t*>(x.data), m * k / 2, px.get<uint8_t>());
  pack_fp4_kernel<<<cuda::grid_for(n * k / 2, 256), 256, 0, s>>>(
      static_cast<const uint8_t*>(w.data), n * k / 2, pw.get<uint8_t>());
  cuda::check(cudaGetLastError(), "pack_fp4_kernel launch");
  c.a = pw.get();
  c.a_type = CUDA_R_4F_E2M1;
  c.b = px.get();
  c.b_type = CUDA_R_4F_E2M1;
  return run_lt(c, s);
}

// The (rows, kblocks) row-major float32 scale grid src into VEC128_32F's layout (vec128: the
// grid transposed, rows padded to 4) or BLK128x128_32F's (K-blocks padded to 4), zeros in
// the padding; one thread per destination word.
__global__ void fp32_scale_layout_kernel(const float* __restrict__ src, size_t rows, size_t kblocks,
                                         bool vec128, float* __restrict__ dst) {
  const size_t total = vec128 ? vec128_scale_count(rows, kblocks) : blk128_scale_count(rows, kblocks);
  const size_t rows_pad = (rows + 3) / 4 * 4, k_pad = (kblocks + 3) / 4 * 4;
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    const size_t r = vec128 ? i % rows_pad : i / k_pad, c = vec128 ? i / rows_pad : i % k_pad;
    dst[i] = r < rows && c < kblocks ? src[r * kblocks + c] : 0.0f;
  }
}

// The rows of an operand's float32 scale grid (rows for 1x128 blocks, row blocks for
// 128x128 tiles) and the words of its cuBLASLt layout.
size_t fp32_scale_rows(const DeviceTensor& q) {
  const size_t rows = static_cast<size_t>(q.rows);
  return q.scales.block_rows == 1 ? rows : (rows + 127) / 128;
}
size_t fp32_scale_words(const DeviceTensor& q, size_t kblocks) {
  return q.scales.block_rows == 1 ? vec128_scale_count(fp32_scale_rows(q), kblocks)
                                  : blk128_scale_count(fp32_scale_rows(q), kblocks);
}

// The operand's float32 scale grid into dst in the layout of its cuBLASLt scale mode;
// returns the mode.
cublasLtMatmulMatrixScale_t fp32_block_scales(const DeviceTensor& q, size_t kblocks, float* dst,
                                              cudaStream_t s) {
  const bool vec128 = q.scales.block_rows == 1;
  const size_t total = fp32_scale_words(q, kblocks);
  fp32_scale_layout_kernel<<<cuda::grid_for(total, 256), 256, 0, s>>>(
      q.scales.values, fp32_scale_rows(q), kblocks, vec128, dst);
  cuda::check(cudaGetLastError(), "fp32_scale_layout_kernel launch");
  return vec128 ? CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F : CUBLASLT_MATMUL_MATRIX_SCALE_BLK128x128_32F;
}

// Hopper's FP8 GEMM with float32 scales per 1x128 (X) and per 128x128 or 1x128 (W) block,
// accumulated by cuBLASLt with the scales applied per K-block (DeepSeek-V3's recipe).
// k % 128 != 0 never reaches here (gemm_api.cpp); false again if it did.
bool run_fp8_block128(const DeviceTensor& x, const DeviceTensor& w, const DeviceTensor& y,
                      cudaStream_t s) {
  LtCall c = make_call(x, w, y);
  if (c.k % 128 != 0) return false;
  const size_t kb = c.k / 128;
  StreamBuffer sx(fp32_scale_words(x, kb) * sizeof(float), s),
      sw(fp32_scale_words(w, kb) * sizeof(float), s);
  c.block_scaled = true;
  c.b_scale_mode = fp32_block_scales(x, kb, sx.get<float>(), s);
  c.a_scale_mode = fp32_block_scales(w, kb, sw.get<float>(), s);
  c.a = w.data;
  c.a_type = operand_type(w);
  c.b = x.data;
  c.b_type = operand_type(x);
  c.a_scale = sw.get();
  c.b_scale = sx.get();
  c.alpha = operand_alpha(x, s) * operand_alpha(w, s);  // the 4/3 of the headroom, if any
  return run_lt(c, s);
}

// The operands as stored (BF16, or FP8 with per-tensor decode scales in scales.values).
bool run_direct(const DeviceTensor& x, const DeviceTensor& w, const DeviceTensor& y, cudaStream_t s) {
  LtCall c = make_call(x, w, y);
  c.a = w.data;
  c.a_type = operand_type(w);
  c.b = x.data;
  c.b_type = operand_type(x);
  c.a_scale = w.scales.values;  // the per-tensor decode scale s_dec (null: 1)
  c.b_scale = x.scales.values;
  c.alpha = operand_alpha(x, s) * operand_alpha(w, s);
  return run_lt(c, s);
}

bool run_bf16_fallback(const DeviceTensor& x, const DeviceTensor& w, const DeviceTensor& y,
                       cudaStream_t s) {
  const size_t m = static_cast<size_t>(x.rows), n = static_cast<size_t>(w.rows),
               k = static_cast<size_t>(x.cols);
  StreamBuffer bx(m * k * 2, s), bw(n * k * 2, s);
  for (const auto& [q, buf] : {std::pair{&x, bx.get()}, std::pair{&w, bw.get()}}) {
    // Block scale only (no tensor scale, no headroom): exact in BF16 for every MX / NVFP4 /
    // power-of-two format; both factors go into alpha.
    DeviceTensor src = *q;
    src.scales.tensor = nullptr;
    src.scales.headroom_3_4 = false;
    dequantize(src, DeviceTensor::bf16_bits(buf, q->rows, q->cols), s);
  }
  LtCall c = make_call(x, w, y);
  c.a = bw.get();
  c.b = bx.get();
  c.alpha = operand_alpha(x, s) * operand_alpha(w, s);
  return run_lt(c, s);
}

}  // namespace

bool gemm(const DeviceTensor& x, const DeviceTensor& w, const DeviceTensor& y, GemmPath path,
          void* stream) {
  const auto s = static_cast<cudaStream_t>(stream);
  switch (path) {
    case GemmPath::mxfp8_block_scaled:
    case GemmPath::nvfp4_block_scaled:
    case GemmPath::mxfp4_block_scaled: return run_block_scaled(x, w, y, s, path);
    case GemmPath::fp8_tensor: return run_direct(x, w, y, s);
    case GemmPath::fp8_block128_scaled: return run_fp8_block128(x, w, y, s);
    case GemmPath::bf16_fallback: return run_bf16_fallback(x, w, y, s);
    case GemmPath::automatic: break;
  }
  throw std::invalid_argument("lpx::kernels: the module's gemm takes a concrete path");
}

}  // namespace lpx::kernels::module

namespace lpx::kernels::module {

// gemm_f32_device's fast order (gemm.hpp): row-major c (m, n) (+)= op(a) op(b) is
// column-major cᵀ (n x m, ldc = n) = op(b)ᵀ op(a)ᵀ, so cuBLASLt's A is b and its B is a.
// b stored (k, n) row-major is column-major (n x k, ld n): TRANSA = N; stored (n, k) it is
// (k x n, ld k): TRANSA = T. a stored (m, k) is column-major (k x m, ld k): TRANSB = N;
// stored (k, m) it is (m x k, ld m): TRANSB = T. CUBLAS_COMPUTE_32F keeps float32
// products (no TF32); beta = 1 accumulates.
void gemm_sgemm(bool a_trans, bool b_trans, const float* a, const float* b, float* c, int64_t m,
                int64_t n, int64_t k, bool accumulate, void* stream) {
  LtContext& ctx = context();
  Descriptors d;
  check_lt(cublasLtMatmulDescCreate(&d.op, CUBLAS_COMPUTE_32F, CUDA_R_32F), "matmul desc");
  const cublasOperation_t ta = b_trans ? CUBLAS_OP_T : CUBLAS_OP_N, tb = a_trans ? CUBLAS_OP_T : CUBLAS_OP_N;
  check_lt(cublasLtMatmulDescSetAttribute(d.op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta)), "TRANSA");
  check_lt(cublasLtMatmulDescSetAttribute(d.op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb)), "TRANSB");
  const auto u = [](int64_t v) { return static_cast<uint64_t>(v); };
  if (b_trans) check_lt(cublasLtMatrixLayoutCreate(&d.a, CUDA_R_32F, u(k), u(n), k), "layout A");
  else check_lt(cublasLtMatrixLayoutCreate(&d.a, CUDA_R_32F, u(n), u(k), n), "layout A");
  if (a_trans) check_lt(cublasLtMatrixLayoutCreate(&d.b, CUDA_R_32F, u(m), u(k), m), "layout B");
  else check_lt(cublasLtMatrixLayoutCreate(&d.b, CUDA_R_32F, u(k), u(m), k), "layout B");
  check_lt(cublasLtMatrixLayoutCreate(&d.c, CUDA_R_32F, u(n), u(m), n), "layout C/D");
  cublasLtMatmulHeuristicResult_t heuristic{};
  if (!first_algorithm(ctx, d, heuristic))
    throw std::runtime_error("cuBLASLt has no float32 GEMM algorithm for this device");
  const float alpha = 1.0f, beta = accumulate ? 1.0f : 0.0f;
  check_lt(cublasLtMatmul(ctx.handle, d.op, &alpha, b, d.a, a, d.b, &beta, c, d.c, c, d.c, &heuristic.algo,
                          ctx.workspace, kWorkspaceBytes, static_cast<cudaStream_t>(stream)),
           "matmul");
}

}  // namespace lpx::kernels::module
