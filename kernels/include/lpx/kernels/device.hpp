// Host API of the CUDA kernels: is there a device? Every function exists in every build.
// The CUDA code is a separate module (liblpx_cuda.so) that lpx_kernels loads on the first
// call that needs it (docs/kernels.md); without the module (a build without nvcc) or
// without a device, every entry point that needs one throws std::runtime_error with one
// line "no CUDA device: <why>".
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "lpx/formats/element_format.hpp"

namespace lpx::kernels {

// True when the CUDA module loads and a device is present (loads the module).
bool cuda_available();
// "NVIDIA H200 (sm_90)", or why there is none: "lpx was built without CUDA (nvcc not
// found)", "cannot load the CUDA module ...", "cudaGetDeviceCount: ...", ...
std::string device_description();

// The module file that was loaded ("" when none was); loads it on first call.
std::string cuda_module_path();
// Tries to load `path` as the CUDA module (entry point and interface version), without
// asking for a device: "" when it would do, else the one-line reason. For diagnostics and
// tests; the module used by the kernels is chosen as docs/kernels.md says.
std::string probe_cuda_module(const std::string& path);

// Decodes and re-encodes every code of `f` on the device with the shared LPX_HD codec
// and returns the codes it got back (one per code of the format) — compared by the
// tests with the CPU codec. Throws std::runtime_error without a device.
std::vector<uint32_t> device_codec_roundtrip(const ElementFormat& f);

}  // namespace lpx::kernels
