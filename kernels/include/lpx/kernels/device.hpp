// Host API of the CUDA kernels. Every function exists with or without CUDA; without a
// device (or a CUDA build) they report that instead of failing.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "lpx/formats/element_format.hpp"

namespace lpx::kernels {

// True when lpx was built with CUDA and a device is present.
bool cuda_available();
// "NVIDIA H200 (sm_90)", or why there is none ("lpx was built without CUDA", ...).
std::string device_description();

// Decodes and re-encodes every code of `f` on the device with the shared LPX_HD codec
// and returns the codes it got back (one per code of the format) — compared by the
// tests with the CPU codec. Throws std::runtime_error without a device.
std::vector<uint32_t> device_codec_roundtrip(const ElementFormat& f);

}  // namespace lpx::kernels
