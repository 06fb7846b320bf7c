// The hardware's own float32 -> FP8 conversion instructions (PTX `cvt.rn.satfinite.
// e4m3x2.f32` / `e5m2x2.f32`, sm_89+), so `lpx validate` can check the emulator against the
// silicon: they must equal lpx::encode(x, fmt, rne, Overflow::sat) on every non-NaN input
// (a NaN input gives the hardware's canonical NaN, 0x7F).
#pragma once

#include <cstdint>
#include <span>

namespace lpx::kernels {

enum class HwCvt : uint8_t { e4m3_rn_satfinite, e5m2_rn_satfinite };

// Host to host. Returns false (writing nothing) when the device lacks the instruction
// (compute capability below 8.9); std::invalid_argument on a size mismatch;
// std::runtime_error without a device.
bool hardware_cvt_host(std::span<const float> in, std::span<uint8_t> out, HwCvt which);

}  // namespace lpx::kernels
