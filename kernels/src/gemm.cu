// cuBLASLt GEMMs (gemm.hpp): Y (m, n) = X (m, k) · W (n, k)^T, row-major. In cuBLASLt's
// column-major terms that is D (n x m, ldd = n) = op(A) · B with A = W (k x n, lda = k,
// TRANSA = T) and B = X (k x m, ldb = k, TRANSB = N): the TN layout FP8 requires on Hopper.
// The FP8 decode scales go to CUBLASLT_MATMUL_DESC_A_SCALE_POINTER (W) and
// B_SCALE_POINTER (X), float32 device scalars; compute type CUBLAS_COMPUTE_32F, scale type
// CUDA_R_32F, C = D type (bf16 or f32), beta = 0.
#include <cublasLt.h>
#include <cuda_runtime.h>

#include <mutex>
#include <stdexcept>
#include <string>

#include "cuda_util.cuh"
#include "launch.hpp"

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

}  // namespace

namespace launch {

void gemm(size_t m, size_t n, size_t k, const GemmOperand& x, const GemmOperand& w, void* y,
          GemmDtype out_dtype, void* stream) {
  require_device();
  LtContext& ctx = context();
  Descriptors d;
  check_lt(cublasLtMatmulDescCreate(&d.op, CUBLAS_COMPUTE_32F, CUDA_R_32F), "matmul desc");
  const cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
  check_lt(cublasLtMatmulDescSetAttribute(d.op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta)), "TRANSA");
  check_lt(cublasLtMatmulDescSetAttribute(d.op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb)), "TRANSB");
  if (w.scale)
    check_lt(cublasLtMatmulDescSetAttribute(d.op, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &w.scale,
                                            sizeof(w.scale)), "A_SCALE_POINTER");
  if (x.scale)
    check_lt(cublasLtMatmulDescSetAttribute(d.op, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &x.scale,
                                            sizeof(x.scale)), "B_SCALE_POINTER");
  const auto u = [](size_t v) { return static_cast<uint64_t>(v); };
  const auto ld = [](size_t v) { return static_cast<int64_t>(v); };
  check_lt(cublasLtMatrixLayoutCreate(&d.a, to_cuda(w.dtype), u(k), u(n), ld(k)), "layout A");
  check_lt(cublasLtMatrixLayoutCreate(&d.b, to_cuda(x.dtype), u(k), u(m), ld(k)), "layout B");
  check_lt(cublasLtMatrixLayoutCreate(&d.c, to_cuda(out_dtype), u(n), u(m), ld(n)), "layout C/D");
  check_lt(cublasLtMatmulPreferenceCreate(&d.pref), "preference");
  check_lt(cublasLtMatmulPreferenceSetAttribute(d.pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                &kWorkspaceBytes, sizeof(kWorkspaceBytes)),
           "workspace preference");
  cublasLtMatmulHeuristicResult_t heuristic{};
  int found = 0;
  check_lt(cublasLtMatmulAlgoGetHeuristic(ctx.handle, d.op, d.a, d.b, d.c, d.c, d.pref, 1,
                                          &heuristic, &found),
           "heuristic");
  if (found == 0)
    throw std::runtime_error("cuBLASLt has no algorithm for this GEMM on this device (FP8 needs sm_89+)");
  const float alpha = 1.0f, beta = 0.0f;
  check_lt(cublasLtMatmul(ctx.handle, d.op, &alpha, w.data, d.a, x.data, d.b, &beta, y, d.c, y, d.c,
                          &heuristic.algo, ctx.workspace, kWorkspaceBytes,
                          static_cast<cudaStream_t>(stream)),
           "matmul");
}

}  // namespace launch

}  // namespace lpx::kernels
