// The hardware's float32 -> low-precision conversions via inline PTX (hw_cvt.hpp).
// Thread t converts the group of four inputs [4t, 4t + 4) (lanes a, b, e, f): the x2
// forms as (a, b) and (e, f), each pair packed with the first input in the upper field;
// the x4 (cvt.rs) forms in one instruction with the group's rbits word.
//
// Which code has which instruction (checked with nvcc 13.0's ptxas):
//   cvt.rn.satfinite.{e4m3,e5m2}x2          sm_89 and later, every target
//   cvt.rn.satfinite.{e2m1,e2m3,e3m2}x2,    sm_100+ architecture- or family-specific code
//   cvt.{rz,rp}.satfinite.ue8m0x2           (100a, 100f, 103a, 120a, ...): __CUDA_ARCH__ >= 1000
//                                           with __CUDA_ARCH_SPECIFIC__ or _FAMILY_SPECIFIC__
//   cvt.rs.satfinite.*x4                    sm_100a / sm_103a only (__CUDA_ARCH_FEAT_SM100_ALL /
//                                           SM103_ALL; rejected for 100f, 110a, 120a)
// Elsewhere the instruction is compiled out. A probe kernel, built the same way, reports
// whether the code the driver loaded for this device has it (a device may run plain
// sm_100 code, which has none of the Blackwell forms); without a loadable image at all
// the probe's launch fails and the instruction counts as missing. The inputs and outputs
// are contiguous views (checked by the host side, hw_cvt_api.cpp).
#include <cuda_runtime.h>

#include "cuda_util.cuh"
#include "launch.hpp"

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
#define LPX_HW_FP8 1
#endif
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 1000 && \
    (defined(__CUDA_ARCH_SPECIFIC__) || defined(__CUDA_ARCH_FAMILY_SPECIFIC__))
#define LPX_HW_BLACKWELL 1
#endif
#if defined(__CUDA_ARCH_FEAT_SM100_ALL) || defined(__CUDA_ARCH_FEAT_SM103_ALL)
#define LPX_HW_RS 1
#endif

namespace lpx::kernels::module {

namespace {

enum class Kind { fp8, blackwell, rs };

__host__ __device__ constexpr Kind kind_of(HwCvt w) {
  switch (w) {
    case HwCvt::e4m3_rn_satfinite:
    case HwCvt::e5m2_rn_satfinite: return Kind::fp8;
    case HwCvt::e4m3_rs_satfinite:
    case HwCvt::e5m2_rs_satfinite:
    case HwCvt::e2m3_rs_satfinite:
    case HwCvt::e3m2_rs_satfinite:
    case HwCvt::e2m1_rs_satfinite: return Kind::rs;
    default: return Kind::blackwell;
  }
}

// Whether this compilation of the device code has the instruction.
__device__ bool compiled_in(HwCvt w) {
  switch (kind_of(w)) {
#if defined(LPX_HW_FP8)
    case Kind::fp8: return true;
#endif
#if defined(LPX_HW_BLACKWELL)
    case Kind::blackwell: return true;
#endif
#if defined(LPX_HW_RS)
    case Kind::rs: return true;
#endif
    default: return false;
  }
}

__global__ void probe_kernel(HwCvt which, int* ok) {
  if (blockIdx.x == 0 && threadIdx.x == 0) *ok = compiled_in(which) ? 1 : 0;
}

// The four codes of one group (right-aligned).
__device__ void convert_group(HwCvt which, const float x[4], uint32_t rbits, uint32_t c[4]) {
  unsigned short h0 = 0, h1 = 0;
  uint32_t w = 0;
  (void)rbits;
  switch (which) {
#if defined(LPX_HW_FP8)
    case HwCvt::e4m3_rn_satfinite:
      asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(h0) : "f"(x[0]), "f"(x[1]));
      asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(h1) : "f"(x[2]), "f"(x[3]));
      break;
    case HwCvt::e5m2_rn_satfinite:
      asm("cvt.rn.satfinite.e5m2x2.f32 %0, %1, %2;" : "=h"(h0) : "f"(x[0]), "f"(x[1]));
      asm("cvt.rn.satfinite.e5m2x2.f32 %0, %1, %2;" : "=h"(h1) : "f"(x[2]), "f"(x[3]));
      break;
#endif
#if defined(LPX_HW_BLACKWELL)
    case HwCvt::e2m1_rn_satfinite:
      // The destination is a .b8 (two nibbles): widen it to 16 bits for the operand.
      asm("{ .reg .b8 t; cvt.rn.satfinite.e2m1x2.f32 t, %1, %2; cvt.u16.u8 %0, t; }"
          : "=h"(h0) : "f"(x[0]), "f"(x[1]));
      asm("{ .reg .b8 t; cvt.rn.satfinite.e2m1x2.f32 t, %1, %2; cvt.u16.u8 %0, t; }"
          : "=h"(h1) : "f"(x[2]), "f"(x[3]));
      c[0] = (h0 >> 4) & 0xFu;
      c[1] = h0 & 0xFu;
      c[2] = (h1 >> 4) & 0xFu;
      c[3] = h1 & 0xFu;
      return;
    case HwCvt::e2m3_rn_satfinite:
      asm("cvt.rn.satfinite.e2m3x2.f32 %0, %1, %2;" : "=h"(h0) : "f"(x[0]), "f"(x[1]));
      asm("cvt.rn.satfinite.e2m3x2.f32 %0, %1, %2;" : "=h"(h1) : "f"(x[2]), "f"(x[3]));
      break;
    case HwCvt::e3m2_rn_satfinite:
      asm("cvt.rn.satfinite.e3m2x2.f32 %0, %1, %2;" : "=h"(h0) : "f"(x[0]), "f"(x[1]));
      asm("cvt.rn.satfinite.e3m2x2.f32 %0, %1, %2;" : "=h"(h1) : "f"(x[2]), "f"(x[3]));
      break;
    case HwCvt::ue8m0_rz_satfinite:
      asm("cvt.rz.satfinite.ue8m0x2.f32 %0, %1, %2;" : "=h"(h0) : "f"(x[0]), "f"(x[1]));
      asm("cvt.rz.satfinite.ue8m0x2.f32 %0, %1, %2;" : "=h"(h1) : "f"(x[2]), "f"(x[3]));
      break;
    case HwCvt::ue8m0_rp_satfinite:
      asm("cvt.rp.satfinite.ue8m0x2.f32 %0, %1, %2;" : "=h"(h0) : "f"(x[0]), "f"(x[1]));
      asm("cvt.rp.satfinite.ue8m0x2.f32 %0, %1, %2;" : "=h"(h1) : "f"(x[2]), "f"(x[3]));
      break;
#endif
#if defined(LPX_HW_RS)
    case HwCvt::e4m3_rs_satfinite:
      asm("cvt.rs.satfinite.e4m3x4.f32 %0, {%1, %2, %3, %4}, %5;"
          : "=r"(w) : "f"(x[0]), "f"(x[1]), "f"(x[2]), "f"(x[3]), "r"(rbits));
      break;
    case HwCvt::e5m2_rs_satfinite:
      asm("cvt.rs.satfinite.e5m2x4.f32 %0, {%1, %2, %3, %4}, %5;"
          : "=r"(w) : "f"(x[0]), "f"(x[1]), "f"(x[2]), "f"(x[3]), "r"(rbits));
      break;
    case HwCvt::e2m3_rs_satfinite:
      asm("cvt.rs.satfinite.e2m3x4.f32 %0, {%1, %2, %3, %4}, %5;"
          : "=r"(w) : "f"(x[0]), "f"(x[1]), "f"(x[2]), "f"(x[3]), "r"(rbits));
      break;
    case HwCvt::e3m2_rs_satfinite:
      asm("cvt.rs.satfinite.e3m2x4.f32 %0, {%1, %2, %3, %4}, %5;"
          : "=r"(w) : "f"(x[0]), "f"(x[1]), "f"(x[2]), "f"(x[3]), "r"(rbits));
      break;
    case HwCvt::e2m1_rs_satfinite:
      asm("cvt.rs.satfinite.e2m1x4.f32 %0, {%1, %2, %3, %4}, %5;"
          : "=h"(h0) : "f"(x[0]), "f"(x[1]), "f"(x[2]), "f"(x[3]), "r"(rbits));
      // d[15:12] = a, d[11:8] = b, d[7:4] = e, d[3:0] = f.
      for (int k = 0; k < 4; ++k) c[k] = (h0 >> (12 - 4 * k)) & 0xFu;
      return;
#endif
    default: break;
  }
  if (kind_of(which) == Kind::rs) {
    // d[31:24] = a, d[23:16] = b, d[15:8] = e, d[7:0] = f (fp6: the top 2 bits are 0).
    for (int k = 0; k < 4; ++k) c[k] = (w >> (24 - 8 * k)) & 0xFFu;
    return;
  }
  // x2 forms: the first input of each pair in the upper byte.
  c[0] = h0 >> 8;
  c[1] = h0 & 0xFFu;
  c[2] = h1 >> 8;
  c[3] = h1 & 0xFFu;
}

__global__ void hw_cvt_kernel(const float* __restrict__ in, const uint32_t* __restrict__ rbits,
                              uint8_t* __restrict__ out, size_t n, HwCvt which) {
  const size_t groups = (n + 3) / 4;
  for (size_t g = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; g < groups;
       g += static_cast<size_t>(gridDim.x) * blockDim.x) {
    float x[4];
    for (int k = 0; k < 4; ++k) x[k] = 4 * g + k < n ? in[4 * g + k] : 0.0f;
    uint32_t c[4] = {0, 0, 0, 0};
    convert_group(which, x, rbits != nullptr ? rbits[g] : 0u, c);
    for (int k = 0; k < 4; ++k)
      if (4 * g + k < n) out[4 * g + k] = static_cast<uint8_t>(c[k]);
  }
}

// Whether the code loaded for the current device has the instruction.
bool supported(HwCvt which) {
  cuda::Buffer flag(sizeof(int));
  cuda::check(cudaMemset(flag.get(), 0, sizeof(int)), "cudaMemset");
  probe_kernel<<<1, 1>>>(which, flag.get<int>());
  const cudaError_t e = cudaGetLastError();
  if (e == cudaErrorNoKernelImageForDevice || e == cudaErrorInvalidDeviceFunction) return false;
  cuda::check(e, "probe_kernel launch");
  int ok = 0;
  cuda::to_host(&ok, flag.get(), sizeof(int));
  return ok == 1;
}

}  // namespace

bool hw_cvt(const DeviceTensor& in, const uint32_t* rbits, const DeviceTensor& out, HwCvt which) {
  if (!supported(which)) return false;
  const size_t n = static_cast<size_t>(in.numel());
  const size_t groups = (n + 3) / 4;
  hw_cvt_kernel<<<cuda::grid_for(groups, 256), 256>>>(static_cast<const float*>(in.data), rbits,
                                                      static_cast<uint8_t*>(out.data), n, which);
  cuda::check(cudaGetLastError(), "hw_cvt_kernel launch");
  cuda::check(cudaDeviceSynchronize(), "hw_cvt_kernel");
  return true;
}

}  // namespace lpx::kernels::module
