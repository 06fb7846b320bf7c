// The CUDA module's entry point (docs/kernels.md): liblpx_cuda.so exports only
// lpx_cuda_backend, which hands the loader (loader.cpp) the table of backend.hpp: the
// device queries, device memory, CUDA-event timing and the launchers of the other .cu
// files. Also here: the element codec compiled for the device (codec_roundtrip: one
// thread per code decodes it and encodes the value back under every rounding mode, with
// the very LPX_HD functions of formats/codec.hpp), compiled whenever nvcc exists (CI
// included), so the codec stays device-clean.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "cuda_util.cuh"
#include "launch.hpp"
#include "lpx/formats/codec.hpp"
#include "lpx/numerics/philox.hpp"

namespace lpx::kernels::module {

namespace {

// out[c] = encode(decode(c)) under rne with ieee overflow; the other modes must agree on
// exact values, so any disagreement is folded into bit 31 for the host to see.
__global__ void roundtrip_kernel(ElementFormat f, uint32_t* out) {
  const uint32_t code = blockIdx.x * blockDim.x + threadIdx.x;
  if (code > f.code_mask) return;
  const float v = lpx::decode(code, f);
  const uint32_t r = random_bits(0, 0, code);
  uint32_t back = lpx::encode(v, f, Rounding::rne, Overflow::ieee, r);
  for (Rounding mode : {Rounding::rna, Rounding::rtz, Rounding::rup, Rounding::rdn, Rounding::sr,
                        Rounding::rto, Rounding::sr_fast, Rounding::sr_rne, Rounding::sr_odd})
    if (lpx::encode(v, f, mode, Overflow::ieee, r) != back) back |= 0x80000000u;
  out[code] = back;
}

void write(char* out, size_t bytes, const std::string& s) {
  if (bytes == 0) return;
  const size_t n = std::min(bytes - 1, s.size());
  std::memcpy(out, s.data(), n);
  out[n] = '\0';
}

int device_count(char* why, size_t why_bytes) {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    write(why, why_bytes, std::string("cudaGetDeviceCount: ") + cudaGetErrorString(e));
    cudaGetLastError();  // clear it, so that no later call reports it
    return 0;
  }
  if (n == 0) write(why, why_bytes, "cudaGetDeviceCount found no device");
  return n;
}

void device_name(char* out, size_t out_bytes) {
  int dev = 0;
  cudaDeviceProp p{};
  if (cudaGetDevice(&dev) != cudaSuccess || cudaGetDeviceProperties(&p, dev) != cudaSuccess) {
    write(out, out_bytes, "an unnamed CUDA device");
    return;
  }
  write(out, out_bytes,
        std::string(p.name) + " (sm_" + std::to_string(p.major) + std::to_string(p.minor) + ")");
}

void* allocate(size_t bytes) {
  void* p = nullptr;
  if (bytes > 0) cuda::check(cudaMalloc(&p, bytes), ("cudaMalloc of " + std::to_string(bytes) + " bytes").c_str());
  return p;
}

void release(void* p) {
  if (p) cudaFree(p);
}

void copy(void* dst, const void* src, size_t bytes, backend::Copy kind, void* stream) {
  const auto s = static_cast<cudaStream_t>(stream);
  const cudaMemcpyKind k = kind == backend::Copy::host_to_device   ? cudaMemcpyHostToDevice
                           : kind == backend::Copy::device_to_host ? cudaMemcpyDeviceToHost
                                                                   : cudaMemcpyDeviceToDevice;
  cuda::check(cudaMemcpyAsync(dst, src, bytes, k, s), "cudaMemcpyAsync");
  if (kind != backend::Copy::device_to_device)
    cuda::check(cudaStreamSynchronize(s), "cudaMemcpy (synchronize)");
}

void fill(void* dst, int byte, size_t bytes, void* stream) {
  cuda::check(cudaMemsetAsync(dst, byte, bytes, static_cast<cudaStream_t>(stream)), "cudaMemsetAsync");
}

void synchronize(void* stream) {
  cuda::check(cudaStreamSynchronize(static_cast<cudaStream_t>(stream)), "cudaStreamSynchronize");
}

double median_seconds(int reps, void (*run)(void*), void* context) {
  cudaEvent_t start, stop;
  cuda::check(cudaEventCreate(&start), "cudaEventCreate");
  cuda::check(cudaEventCreate(&stop), "cudaEventCreate");
  struct Events {
    cudaEvent_t a, b;
    ~Events() {
      cudaEventDestroy(a);
      cudaEventDestroy(b);
    }
  } events{start, stop};
  run(context);  // warm-up
  cuda::check(cudaDeviceSynchronize(), "warm-up");
  std::vector<double> t;
  for (int r = 0; r < std::max(reps, 1); ++r) {
    cuda::check(cudaEventRecord(start), "cudaEventRecord");
    run(context);
    cuda::check(cudaEventRecord(stop), "cudaEventRecord");
    cuda::check(cudaEventSynchronize(stop), "cudaEventSynchronize");
    float ms = 0;
    cuda::check(cudaEventElapsedTime(&ms, start, stop), "cudaEventElapsedTime");
    t.push_back(ms * 1e-3);
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

const backend::Table kTable = {
    backend::layout(),
    device_count,
    device_name,
    compute_capability,
    allocate,
    release,
    copy,
    fill,
    synchronize,
    encode,
    decode,
    fake_cast,
    quantize,
    quantize_both,
    dequantize,
    hadamard,
    gemm,
    hw_cvt,
    codec_roundtrip,
    median_seconds,
    gemm_f32,
};

}  // namespace

int compute_capability() {
  int dev = 0, major = 0, minor = 0;
  if (cudaGetDevice(&dev) != cudaSuccess ||
      cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess ||
      cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev) != cudaSuccess)
    return 0;
  return major * 10 + minor;
}

void codec_roundtrip(const ElementFormat& f, uint32_t* host_out) {
  const uint32_t n = f.code_mask + 1;
  cuda::Buffer d(n * sizeof(uint32_t));
  roundtrip_kernel<<<(n + 255) / 256, 256>>>(f, d.get<uint32_t>());
  cuda::check(cudaGetLastError(), "roundtrip_kernel launch");
  cuda::to_host(host_out, d.get(), n * sizeof(uint32_t));
}

}  // namespace lpx::kernels::module

extern "C" __attribute__((visibility("default"))) const lpx::kernels::backend::Table*
lpx_cuda_backend(uint32_t abi_version) {
  return abi_version == lpx::kernels::backend::kAbiVersion ? &lpx::kernels::module::kTable : nullptr;
}
