// Where the simulator runs its recipe quantizers and GEMMs: the CPU (the reference), or
// the CUDA device for `lpx train --device gpu`.
//
// With Device::gpu every layer's OperandQuantizer (recipes/operand.hpp) runs its three
// kernels, and every layer's QuantGemms its GEMMs, through kernels/' device API
// (docs/kernels.md); the layers' other arithmetic, the optimizer and the statistics stay
// on the CPU. One backend, shared by every layer, keeps a grow-only device workspace
// (allocated once per size reached, never per call); each call copies the operands'
// values up, runs one kernel, and copies the values back, nothing else:
//   block quantization  kernels::fake_quantize_device, fused (no codes, no scales leave
//                       the device), bit-identical to lpx::fake_quantize_values
//   element casts       kernels::fake_cast_device (bf16 operands, SR keyed as on the CPU)
//   Hadamard transform  kernels::hadamard_device along the reduction axis, 0 or 1, in
//                       place: the kernel reads columns through the view's strides, the
//                       host never transposes
//   GEMMs               kernels::gemm_f32_device: with GemmOrder::exact (and for limited
//                       accumulation) the ordered kernel, bit-identical to sim's gemm() in
//                       that order; with fast, cuBLASLt (docs/kernels.md#ordered-gemms)
// Fallbacks to the CPU, for what the device does not implement (kernels/quantize.hpp):
// per-channel blocks (bitnet's per-token int8) and delayed scaling's amax history
// (fp8-delayed; fp8-current's per-tensor current scaling runs on the device); the ternary
// absmean quantizer (CPU only); and a recipe with the scales at promotion (fp8-blockwise):
// its block quantizations, which must return codes, and its GEMMs, for which kernels/ has
// no kernel yet (docs/recipes.md#scales-at-promotion). The quantizer's keys, signs and
// statistics are computed as on the CPU, so with --gemm exact a --device gpu run's loss
// array is bit-identical to --device cpu's; only saturated_pct and clamped_blocks of
// device-quantized operands are not counted (NaN and -1 in the log).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace lpx::sim {

// emulated: for tests without a GPU, the gpu backend's own code (workspace, views, copies,
// fallbacks) with host memory for device memory and CPU stand-ins for the kernels
// (lpx::fake_quantize_values, fake_cast_array, hadamard_blocks, sim's gemm). Not offered
// by the CLI.
enum class Device : uint8_t { cpu, gpu, emulated };
std::string_view device_name(Device d);   // "cpu" | "gpu" | "emulated"
Device device_by_name(std::string_view);  // throws std::invalid_argument naming cpu and gpu

// Throws std::runtime_error("no CUDA device: ...") unless a CUDA device can be used.
void require_device(Device d);

// Calls made by every GPU backend of this process (for tests and the end-of-run line).
struct DeviceCounts {
  int64_t device = 0;    // kernel calls on the GPU (quantizers and GEMMs)
  int64_t fallback = 0;  // block quantizations that ran on the CPU instead
};
DeviceCounts device_counts();

}  // namespace lpx::sim
