// The hardware's float32 -> FP8 conversions via inline PTX (hw_cvt.hpp).
// `cvt.rn.satfinite.{e4m3x2,e5m2x2}.f32 d, a, b` (PTX ISA, sm_89+) packs cvt(a) into the
// upper and cvt(b) into the lower byte of the 16-bit d. Compiled for every target arch;
// below sm_89 the kernel body is empty and the host refuses before launching it.
#include <cuda_runtime.h>

#include "cuda_util.cuh"
#include "launch.hpp"

namespace lpx::kernels {

namespace {

__global__ void hw_cvt_kernel(const float* __restrict__ in, uint8_t* __restrict__ out, size_t n,
                              HwCvt which) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    const float a = 0.0f, b = in[i];
    unsigned short d = 0;
    if (which == HwCvt::e4m3_rn_satfinite)
      asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(d) : "f"(a), "f"(b));
    else
      asm("cvt.rn.satfinite.e5m2x2.f32 %0, %1, %2;" : "=h"(d) : "f"(a), "f"(b));
    out[i] = static_cast<uint8_t>(d & 0xffu);  // b is the low byte
  }
#else
  (void)in; (void)out; (void)n; (void)which;
#endif
}

}  // namespace

namespace launch {

bool hw_cvt_h2h(const float* in, uint8_t* out, size_t n, HwCvt which) {
  require_device();
  int dev = 0, major = 0, minor = 0;
  cuda::check(cudaGetDevice(&dev), "cudaGetDevice");
  cuda::check(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev), "attribute");
  cuda::check(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev), "attribute");
  if (major * 10 + minor < 89) return false;
  cuda::Buffer d_in(n * sizeof(float)), d_out(n);
  cuda::to_device(d_in.get(), in, n * sizeof(float));
  hw_cvt_kernel<<<cuda::grid_for(n, 256), 256>>>(d_in.get<float>(), d_out.get<uint8_t>(), n, which);
  cuda::check(cudaGetLastError(), "hw_cvt_kernel launch");
  cuda::to_host(out, d_out.get(), n);
  return true;
}

}  // namespace launch

}  // namespace lpx::kernels
