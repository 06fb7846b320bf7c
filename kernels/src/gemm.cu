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
// block_scale_tile_offset (gemm.hpp). FP4 data (CUDA_R_4F_E2M1) is two codes per byte,
// the lower k index in the low nibble.
#include <cublasLt.h>
#include <cuda_runtime.h>

#include <mutex>
#include <stdexcept>
#include <string>
#include <tuple>

#include "cuda_util.cuh"
#include "launch.hpp"
#include "lpx/kernels/gemm.hpp"

namespace lpx::kernels {

namespace {

void check_lt(cublasStatus_t s, const char* what) {
  if (s != CUBLAS_STATUS_SUCCESS)
    throw std::runtime_error(std::string("cuBLASLt ") + what + " failed (status " +
                             std::to_string(static_cast<int>(s)) + ")");
}

cudaDataType_t to_cuda(GemmDtype d) {
  switch (d) {
    case GemmDtype::bf16: return CUDA_R_16BF;
    case GemmDtype::e4m3: return CUDA_R_8F_E4M3;
    case GemmDtype::e5m2: return CUDA_R_8F_E5M2;
    case GemmDtype::f32: return CUDA_R_32F;
  }
  return CUDA_R_32F;
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
  cublasLtMatmulMatrixScale_t scale_mode = CUBLASLT_MATMUL_MATRIX_SCALE_SCALAR_32F;
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
    set(CUBLASLT_MATMUL_DESC_A_SCALE_MODE, &call.scale_mode, sizeof(call.scale_mode), "A_SCALE_MODE");
    set(CUBLASLT_MATMUL_DESC_B_SCALE_MODE, &call.scale_mode, sizeof(call.scale_mode), "B_SCALE_MODE");
  }
  if (call.a_scale) set(CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &call.a_scale, sizeof(call.a_scale), "A_SCALE_POINTER");
  if (call.b_scale) set(CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &call.b_scale, sizeof(call.b_scale), "B_SCALE_POINTER");
  const auto u = [](size_t v) { return static_cast<uint64_t>(v); };
  const auto ld = [](size_t v) { return static_cast<int64_t>(v); };
  check_lt(cublasLtMatrixLayoutCreate(&d.a, call.a_type, u(call.k), u(call.n), ld(call.k)), "layout A");
  check_lt(cublasLtMatrixLayoutCreate(&d.b, call.b_type, u(call.k), u(call.m), ld(call.k)), "layout B");
  check_lt(cublasLtMatrixLayoutCreate(&d.c, call.d_type, u(call.n), u(call.m), ld(call.n)), "layout C/D");
  check_lt(cublasLtMatmulPreferenceCreate(&d.pref), "preference");
  check_lt(cublasLtMatmulPreferenceSetAttribute(d.pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                &kWorkspaceBytes, sizeof(kWorkspaceBytes)),
           "workspace preference");
  cublasLtMatmulHeuristicResult_t heuristic{};
  int found = 0;
  const cublasStatus_t hs = cublasLtMatmulAlgoGetHeuristic(ctx.handle, d.op, d.a, d.b, d.c, d.c,
                                                           d.pref, 1, &heuristic, &found);
  // NOT_SUPPORTED: no kernel for this combination on this device (not an error here).
  if (hs == CUBLAS_STATUS_NOT_SUPPORTED || (hs == CUBLAS_STATUS_SUCCESS && found == 0)) return false;
  check_lt(hs, "heuristic");
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

cudaDataType_t fp8_type(const ElementFormat& e) {
  return e.name_view() == fmt8::e5m2.name_view() ? CUDA_R_8F_E5M2 : CUDA_R_8F_E4M3;
}

// The host-side factor an operand's dequantized BF16 / block-scaled values miss: its
// tensor scale (two-level, read back from the device) and the 4/3 of the headroom.
float operand_alpha(const QuantizedOperand& q, cudaStream_t s) {
  float a = 1.0f;
  if (q.format.two_level()) {
    cuda::check(cudaMemcpyAsync(&a, q.tensor_scale, sizeof(float), cudaMemcpyDeviceToHost, s),
                "cudaMemcpyAsync tensor scale");
    cuda::check(cudaStreamSynchronize(s), "tensor scale");
  }
  if (q.headroom_3_4) a = a / 0.75f;
  return a;
}

// The operand's scale grid in the tiled layout, in `buf` (block_scale_tile_bytes).
void tile_scales(const QuantizedOperand& q, size_t rows, size_t kblocks, uint8_t* buf,
                 cudaStream_t s) {
  const size_t total = block_scale_tile_bytes(rows, kblocks);
  tile_scales_kernel<<<cuda::grid_for(total, 256), 256, 0, s>>>(q.scale_codes, rows, kblocks, buf);
  cuda::check(cudaGetLastError(), "tile_scales_kernel launch");
}

// MXFP8 (VEC32_UE8M0 on FP8 data), NVFP4 (VEC16_UE4M3 on FP4) or MXFP4 (VEC32_UE8M0 on FP4).
bool run_block_scaled(size_t m, size_t n, size_t k, const QuantizedOperand& x,
                      const QuantizedOperand& w, void* y, GemmDtype out, cudaStream_t s,
                      GemmPath path) {
  const bool fp4 = path != GemmPath::mxfp8_block_scaled;
  const size_t block = path == GemmPath::nvfp4_block_scaled ? 16 : 32, kb = k / block;
  StreamBuffer sx(block_scale_tile_bytes(m, kb), s), sw(block_scale_tile_bytes(n, kb), s);
  tile_scales(x, m, kb, sx.get<uint8_t>(), s);
  tile_scales(w, n, kb, sw.get<uint8_t>(), s);
  LtCall c;
  c.m = m;
  c.n = n;
  c.k = k;
  c.block_scaled = true;
  c.a_scale = sw.get();
  c.b_scale = sx.get();
  c.d = y;
  c.d_type = to_cuda(out);
  c.alpha = operand_alpha(x, s) * operand_alpha(w, s);
  if (!fp4) {
    c.scale_mode = CUBLASLT_MATMUL_MATRIX_SCALE_VEC32_UE8M0;
    c.a = w.codes;
    c.a_type = fp8_type(w.format.element);
    c.b = x.codes;
    c.b_type = fp8_type(x.format.element);
    return run_lt(c, s);
  }
  c.scale_mode = path == GemmPath::nvfp4_block_scaled ? CUBLASLT_MATMUL_MATRIX_SCALE_VEC16_UE4M3
                                                      : CUBLASLT_MATMUL_MATRIX_SCALE_VEC32_UE8M0;
  StreamBuffer px(m * k / 2, s), pw(n * k / 2, s);
  pack_fp4_kernel<<<cuda::grid_for(m * k / 2, 256), 256, 0, s>>>(x.codes, m * k / 2, px.get<uint8_t>());
  pack_fp4_kernel<<<cuda::grid_for(n * k / 2, 256), 256, 0, s>>>(w.codes, n * k / 2, pw.get<uint8_t>());
  cuda::check(cudaGetLastError(), "pack_fp4_kernel launch");
  c.a = pw.get();
  c.a_type = CUDA_R_4F_E2M1;
  c.b = px.get();
  c.b_type = CUDA_R_4F_E2M1;
  return run_lt(c, s);
}

bool run_fp8_tensor(size_t m, size_t n, size_t k, const QuantizedOperand& x,
                    const QuantizedOperand& w, void* y, GemmDtype out, cudaStream_t s) {
  LtCall c;
  c.m = m;
  c.n = n;
  c.k = k;
  c.a = w.codes;
  c.a_type = fp8_type(w.format.element);
  c.b = x.codes;
  c.b_type = fp8_type(x.format.element);
  c.a_scale = w.scale_values;  // the per-tensor decode scale s_dec
  c.b_scale = x.scale_values;
  c.alpha = operand_alpha(x, s) * operand_alpha(w, s);
  c.d = y;
  c.d_type = to_cuda(out);
  return run_lt(c, s);
}

void run_bf16_fallback(size_t m, size_t n, size_t k, const QuantizedOperand& x,
                       const QuantizedOperand& w, void* y, GemmDtype out, cudaStream_t s) {
  StreamBuffer bx(m * k * 2, s), bw(n * k * 2, s);
  for (auto [q, rows, buf] : {std::tuple{&x, m, bx.get()}, std::tuple{&w, n, bw.get()}}) {
    const launch::BlockGeometry g = q->format.block.kind == BlockShape::Kind::tensor
                                        ? launch::BlockGeometry{rows, k}
                                        : launch::block_geometry(q->format, 2, "gemm");
    // Block scale only (no tensor scale, no headroom): exact in BF16 for every MX / NVFP4 /
    // power-of-two format; both factors go into alpha.
    launch::dequantize(q->codes, q->scale_codes, q->scale_values, nullptr, rows, k, g.br, g.bc,
                       q->format, false, buf, true, s);
  }
  LtCall c;
  c.m = m;
  c.n = n;
  c.k = k;
  c.a = bw.get();
  c.b = bx.get();
  c.alpha = operand_alpha(x, s) * operand_alpha(w, s);
  c.d = y;
  c.d_type = to_cuda(out);
  if (!run_lt(c, s))
    throw std::runtime_error("cuBLASLt has no BF16 GEMM algorithm for this shape on this device");
}

}  // namespace

namespace launch {

void gemm(size_t m, size_t n, size_t k, const GemmOperand& x, const GemmOperand& w, void* y,
          GemmDtype out_dtype, void* stream) {
  require_device();
  LtCall c;
  c.m = m;
  c.n = n;
  c.k = k;
  c.a = w.data;
  c.a_type = to_cuda(w.dtype);
  c.b = x.data;
  c.b_type = to_cuda(x.dtype);
  c.a_scale = w.scale;
  c.b_scale = x.scale;
  c.d = y;
  c.d_type = to_cuda(out_dtype);
  if (!run_lt(c, static_cast<cudaStream_t>(stream)))
    throw std::runtime_error("cuBLASLt has no algorithm for this GEMM on this device (FP8 needs sm_89+)");
}

GemmPath gemm_quantized(size_t m, size_t n, size_t k, const QuantizedOperand& x,
                        const QuantizedOperand& w, void* y, GemmDtype out_dtype, void* stream,
                        GemmPath path) {
  require_device();
  const auto s = static_cast<cudaStream_t>(stream);
  const bool automatic = path == GemmPath::automatic;
  const GemmPath p = automatic ? choose_gemm_path(x.format, w.format, compute_capability()) : path;
  bool ran = false;
  switch (p) {
    case GemmPath::mxfp8_block_scaled:
    case GemmPath::nvfp4_block_scaled:
    case GemmPath::mxfp4_block_scaled: ran = run_block_scaled(m, n, k, x, w, y, out_dtype, s, p); break;
    case GemmPath::fp8_tensor: ran = run_fp8_tensor(m, n, k, x, w, y, out_dtype, s); break;
    default: break;
  }
  if (ran) return p;
  if (!automatic && p != GemmPath::bf16_fallback)
    throw std::runtime_error("lpx::kernels::gemm: cuBLASLt has no algorithm for the " +
                             std::string(gemm_path_name(p)) + " path on this device");
  run_bf16_fallback(m, n, k, x, w, y, out_dtype, s);
  return GemmPath::bf16_fallback;
}

GemmPath gemm_quantized_h2h(const QuantizedTensor& x, const QuantizedTensor& w, float* y,
                            GemmPath path) {
  require_device();
  const size_t m = static_cast<size_t>(x.shape[0]), n = static_cast<size_t>(w.shape[0]),
               k = static_cast<size_t>(x.shape[1]);
  struct Upload {
    cuda::Buffer codes, sc, sv, ts;
    QuantizedOperand op;
  };
  auto upload = [](const QuantizedTensor& q) {
    Upload u;
    u.codes = cuda::Buffer(q.codes.size());
    cuda::to_device(u.codes.get(), q.codes.data(), q.codes.size());
    u.sc = cuda::Buffer(q.scale_codes.size());
    if (!q.scale_codes.empty()) cuda::to_device(u.sc.get(), q.scale_codes.data(), q.scale_codes.size());
    u.sv = cuda::Buffer(q.scale_values.size() * sizeof(float));
    if (!q.scale_values.empty())
      cuda::to_device(u.sv.get(), q.scale_values.data(), q.scale_values.size() * sizeof(float));
    u.ts = cuda::Buffer(sizeof(float));
    const float ts = q.tensor_scale.value_or(1.0f);
    cuda::to_device(u.ts.get(), &ts, sizeof(float));
    u.op.format = q.format;
    u.op.codes = u.codes.get<uint8_t>();
    u.op.scale_codes = u.sc.get<uint8_t>();
    u.op.scale_values = u.sv.get<float>();
    u.op.tensor_scale = u.ts.get<float>();
    u.op.headroom_3_4 = q.headroom_3_4;
    return u;
  };
  const Upload ux = upload(x), uw = upload(w);
  cuda::Buffer d_y(m * n * sizeof(float));
  const GemmPath ran = gemm_quantized(m, n, k, ux.op, uw.op, d_y.get(), GemmDtype::f32, nullptr, path);
  cuda::to_host(y, d_y.get(), m * n * sizeof(float));
  return ran;
}

}  // namespace launch

}  // namespace lpx::kernels
