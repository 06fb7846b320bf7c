// The host API when lpx is built without CUDA: nothing runs on a device. The argument
// checks (api.cpp) run first in this build too; valid calls end here and throw.
#include <stdexcept>

#include "launch.hpp"
#include "lpx/kernels/device.hpp"

namespace lpx::kernels {

bool cuda_available() { return false; }
std::string device_description() { return "lpx was built without CUDA (nvcc not found)"; }
std::vector<uint32_t> device_codec_roundtrip(const ElementFormat&) {
  throw std::runtime_error("no CUDA device: lpx was built without CUDA");
}

namespace launch {
namespace {
[[noreturn]] void none() { throw std::runtime_error("no CUDA device: lpx was built without CUDA"); }
}  // namespace
void require_device() { none(); }
int compute_capability() { return 0; }
void encode(const float*, void*, size_t, const ElementFormat&, const CastOptions&, void*) { none(); }
void decode(const void*, float*, size_t, const ElementFormat&, void*) { none(); }
void fake_cast(const float*, float*, size_t, const ElementFormat&, const CastOptions&, void*) { none(); }
void encode_h2h(const float*, void*, size_t, const ElementFormat&, const CastOptions&) { none(); }
void decode_h2h(const void*, float*, size_t, const ElementFormat&) { none(); }
void fake_cast_h2h(const float*, float*, size_t, const ElementFormat&, const CastOptions&) { none(); }
void hadamard(const float*, float*, size_t, int, const float*, uint64_t, uint32_t, void*) { none(); }
void hadamard_h2h(const float*, float*, size_t, int, const float*, uint64_t, uint32_t) { none(); }
void quantize(const float*, size_t, size_t, size_t, size_t, const BlockFormat&, const QuantizeOptions&,
              uint8_t*, uint8_t*, float*, float*, void*) { none(); }
void quantize_h2h(const float*, size_t, size_t, size_t, size_t, const BlockFormat&,
                  const QuantizeOptions&, uint8_t*, uint8_t*, float*, float*) { none(); }
void fake_quantize(const float*, size_t, size_t, size_t, size_t, const BlockFormat&,
                   const QuantizeOptions&, float*, uint8_t*, float*, float*, void*) { none(); }
void fake_quantize_h2h(const float*, size_t, size_t, size_t, size_t, const BlockFormat&,
                       const QuantizeOptions&, float*, uint8_t*, float*, float*) { none(); }
void dequantize(const uint8_t*, const uint8_t*, const float*, const float*, size_t, size_t, size_t,
                size_t, const BlockFormat&, bool, void*, bool, void*) { none(); }
void dequantize_h2h(const uint8_t*, const uint8_t*, const float*, const float*, size_t, size_t,
                    size_t, size_t, const BlockFormat&, bool, float*) { none(); }
void gemm(size_t, size_t, size_t, const GemmOperand&, const GemmOperand&, void*, GemmDtype, void*) { none(); }
GemmPath gemm_quantized(size_t, size_t, size_t, const QuantizedOperand&, const QuantizedOperand&,
                        void*, GemmDtype, void*, GemmPath) { none(); }
GemmPath gemm_quantized_h2h(const QuantizedTensor&, const QuantizedTensor&, float*, GemmPath) { none(); }
bool hw_cvt_h2h(const float*, const uint32_t*, uint8_t*, size_t, HwCvt) { none(); }
}  // namespace launch

std::vector<GpuBenchRow> run_gpu_benchmarks(const GpuBenchOptions&) {
  throw std::runtime_error("no CUDA device: lpx was built without CUDA");
}

}  // namespace lpx::kernels
