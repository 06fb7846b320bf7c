// Internal to the CUDA module (liblpx_cuda.so): the launchers the .cu files define and
// module.cu puts into the backend table (backend.hpp, which documents each). They take
// device tensor views (lpx/kernels/tensor.hpp) whose arguments the host side has checked.
// Nothing here is exported: the module's only visible symbol is lpx_cuda_backend.
#pragma once

#include <cstddef>
#include <cstdint>

#include "backend.hpp"

namespace lpx::kernels::module {

// cast.cu
void encode(const DeviceTensor& in, const DeviceTensor& out, const CastOptions& opt, void* stream);
void decode(const DeviceTensor& in, const DeviceTensor& out, void* stream);
void fake_cast(const DeviceTensor& in, const DeviceTensor& out, const CastOptions& opt,
               void* stream);
// quantize.cu
void quantize(const DeviceTensor& x, const DeviceTensor& out, const QuantizeOptions& opt,
              uint32_t* amax_word, void* stream);
void quantize_both(const DeviceTensor& x, const DeviceTensor& out_rows, const QuantizeOptions& opt_rows,
                   const DeviceTensor& out_cols, const QuantizeOptions& opt_cols,
                   uint32_t* amax_words, void* stream);
void dequantize(const DeviceTensor& q, const DeviceTensor& out, void* stream);
// hadamard.cu
void hadamard(const DeviceTensor& in, const DeviceTensor& out, int axis, int n,
              const float* signs, uint64_t seed, uint32_t sign_stream, void* stream);
// gemm.cu
bool gemm(const DeviceTensor& x, const DeviceTensor& w, const DeviceTensor& y, GemmPath path,
          void* stream);
void gemm_sgemm(bool a_trans, bool b_trans, const float* a, const float* b, float* c, int64_t m,
                int64_t n, int64_t k, bool accumulate, void* stream);
// ordered_gemm.cu
void gemm_f32(bool a_trans, bool b_trans, const float* a, const float* b, float* c, int64_t m,
              int64_t n, int64_t k, LimitedSum acc, bool accumulate, GemmOrder order, void* stream);
// hw_cvt.cu
bool hw_cvt(const DeviceTensor& in, const uint32_t* rbits, const DeviceTensor& out, HwCvt which);
// module.cu
int compute_capability();
void codec_roundtrip(const ElementFormat& f, uint32_t* host_out);

}  // namespace lpx::kernels::module
