// The element codec compiled for the device: one thread per code decodes it and encodes
// the value back under every rounding mode, with the very LPX_HD functions of
// formats/codec.hpp. Compiled whenever nvcc exists (CI included), so the codec stays
// device-clean from the first day.
#include <cuda_runtime.h>

#include <stdexcept>
#include <string>

#include "lpx/formats/codec.hpp"
#include "lpx/kernels/device.hpp"
#include "lpx/numerics/philox.hpp"

namespace lpx::kernels {

namespace {

// out[c] = encode(decode(c)) under rne with ieee overflow; the other modes must agree on
// exact values, so any disagreement is folded into bit 31 for the host to see.
__global__ void roundtrip_kernel(ElementFormat f, uint32_t* out) {
  const uint32_t code = blockIdx.x * blockDim.x + threadIdx.x;
  if (code > f.code_mask) return;
  const float v = decode(code, f);
  const uint32_t r = random_bits(0, 0, code);
  uint32_t back = encode(v, f, Rounding::rne, Overflow::ieee, r);
  for (Rounding mode : {Rounding::rna, Rounding::rtz, Rounding::rup, Rounding::rdn, Rounding::sr})
    if (encode(v, f, mode, Overflow::ieee, r) != back) back |= 0x80000000u;
  out[code] = back;
}

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(e));
}

}  // namespace

bool cuda_available() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
}

std::string device_description() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) return "no CUDA device found";
  cudaDeviceProp p{};
  check(cudaGetDeviceProperties(&p, 0), "cudaGetDeviceProperties");
  return std::string(p.name) + " (sm_" + std::to_string(p.major) + std::to_string(p.minor) + ")";
}

namespace launch {
int compute_capability() {
  int dev = 0, major = 0, minor = 0;
  if (!cuda_available() || cudaGetDevice(&dev) != cudaSuccess) return 0;
  check(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev), "attribute");
  check(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev), "attribute");
  return major * 10 + minor;
}
}  // namespace launch

std::vector<uint32_t> device_codec_roundtrip(const ElementFormat& f) {
  if (!cuda_available()) throw std::runtime_error("no CUDA device found");
  const uint32_t n = f.code_mask + 1;
  uint32_t* d = nullptr;
  check(cudaMalloc(&d, n * sizeof(uint32_t)), "cudaMalloc");
  roundtrip_kernel<<<(n + 255) / 256, 256>>>(f, d);
  std::vector<uint32_t> host(n);
  const cudaError_t launched = cudaGetLastError();
  const cudaError_t copied = cudaMemcpy(host.data(), d, n * sizeof(uint32_t), cudaMemcpyDeviceToHost);
  cudaFree(d);
  check(launched, "roundtrip_kernel launch");
  check(copied, "cudaMemcpy");
  return host;
}

}  // namespace lpx::kernels
