// Internal: the interface between the always-built host side (lpx_kernels: argument
// checks, the loader, host-to-host wrappers, benchmarks) and the CUDA module
// liblpx_cuda.so (the .cu files), which the loader dlopen()s on first GPU use
// (docs/kernels.md).
//
// The module exports one symbol, extern "C" lpx_cuda_backend(abi_version), which returns
// its Table when abi_version equals its own kAbiVersion and null otherwise; the loader
// then compares Table::layout (the sizes of every struct that crosses the boundary) with
// its own, so a module from another build is refused with one line instead of crashing.
// Bump kAbiVersion whenever a signature below changes.
//
// Contracts. Every argument has been checked by the host side (views, formats, options,
// sizes), so the module only runs CUDA. Functions may throw std::runtime_error (a CUDA or
// cuBLASLt error; the module and the executable share libstdc++). The kernels are
// asynchronous on `stream` (a cudaStream_t; null: the default stream) unless said
// otherwise. The device queries never throw.
#pragma once

#include <cstddef>
#include <cstdint>

#include "lpx/formats/cast.hpp"
#include "lpx/formats/element_format.hpp"
#include "lpx/formats/quantize.hpp"
#include "lpx/kernels/gemm.hpp"
#include "lpx/kernels/hw_cvt.hpp"
#include "lpx/kernels/tensor.hpp"

namespace lpx::kernels::backend {

inline constexpr uint32_t kAbiVersion = 4;  // 2: ElementFormat gained subnormals, reserved_top;
                                            // 3: quantize_both; 4: gemm_f32
inline constexpr const char* kEntryPoint = "lpx_cuda_backend";
inline constexpr const char* kModuleFile = "liblpx_cuda.so";

enum class Copy : uint8_t { host_to_device, device_to_host, device_to_device };

struct Layout {
  uint32_t abi_version, table, tensor, element_format, cast_options, quantize_options, limited_sum;
  bool operator==(const Layout&) const = default;
};

struct Table {
  Layout layout;

  // --- Device queries (never throw).
  // The number of devices; 0 with the reason in why (NUL-terminated, at most why_bytes).
  int (*device_count)(char* why, size_t why_bytes);
  // "NVIDIA H200 (sm_90)" for the current device.
  void (*device_name)(char* out, size_t out_bytes);
  // major * 10 + minor of the current device; 0 without one.
  int (*compute_capability)();

  // --- Memory (synchronous where host memory is involved; see memory.hpp).
  void* (*allocate)(size_t bytes);
  void (*release)(void* p);  // never throws
  void (*copy)(void* dst, const void* src, size_t bytes, Copy kind, void* stream);
  void (*fill)(void* dst, int byte, size_t bytes, void* stream);
  void (*synchronize)(void* stream);

  // --- Kernels on views (tensor.hpp).
  // in f32 -> out code8/code16 (format out.element).
  void (*encode)(const DeviceTensor& in, const DeviceTensor& out, const CastOptions& opt,
                 void* stream);
  // in code8/code16 (format in.element) -> out f32.
  void (*decode)(const DeviceTensor& in, const DeviceTensor& out, void* stream);
  // in f32 -> out f32 on the grid of out.element.
  void (*fake_cast)(const DeviceTensor& in, const DeviceTensor& out, const CastOptions& opt,
                    void* stream);
  // x f32 -> out code8 (quantize) or f32 (fused fake_quantize: no codes); out.element and
  // out.scales give the format and where the scales go. amax_word: a device uint32 the
  // two-level (e4m3) amax pass may use; null: one allocated on the stream.
  void (*quantize)(const DeviceTensor& x, const DeviceTensor& out, const QuantizeOptions& opt,
                   uint32_t* amax_word, void* stream);
  // Both GEMM layouts of x in one read: out_rows (x's shape) as quantize(x, out_rows,
  // opt_rows) and out_cols (the transpose's shape) as quantize(x.transposed(), out_cols,
  // opt_cols), bit for bit. amax_words: two device uint32 the two-level passes may use
  // (null: allocated on the stream).
  void (*quantize_both)(const DeviceTensor& x, const DeviceTensor& out_rows,
                        const QuantizeOptions& opt_rows, const DeviceTensor& out_cols,
                        const QuantizeOptions& opt_cols, uint32_t* amax_words, void* stream);
  // q code8 with scales -> out f32 or bf16 (bf16: the tensor scale and headroom are not
  // applied; the BF16 GEMM path puts them into alpha).
  void (*dequantize)(const DeviceTensor& q, const DeviceTensor& out, void* stream);
  // Blocks of n along `axis` (0 or 1) of in -> out (same shape; may be the same memory).
  // signs: a device pointer to n floats, or null for the Philox signs of (seed, sign_stream).
  void (*hadamard)(const DeviceTensor& in, const DeviceTensor& out, int axis, int n,
                   const float* signs, uint64_t seed, uint32_t sign_stream, void* stream);
  // y (m, n) = x (m, k) . w (n, k)^T along `path` (never automatic, see gemm.cu); false
  // when cuBLASLt has no algorithm for it (nothing launched).
  bool (*gemm)(const DeviceTensor& x, const DeviceTensor& w, const DeviceTensor& y,
               GemmPath path, void* stream);
  // in f32 -> out code8 with the hardware's instruction; rbits: a device pointer (one word
  // per group of four) for the stochastic forms. Synchronous. False: the code loaded
  // for this device lacks the instruction.
  bool (*hw_cvt)(const DeviceTensor& in, const uint32_t* rbits, const DeviceTensor& out,
                 HwCvt which);
  // encode(decode(c)) for every code c of f on the device (kernels/device.hpp), into
  // host_out (code_mask + 1 words). Synchronous.
  void (*codec_roundtrip)(const ElementFormat& f, uint32_t* host_out);
  // The median time in seconds of `reps` runs of run(context) (after one warm-up), timed
  // with CUDA events on the default stream.
  double (*median_seconds)(int reps, void (*run)(void*), void* context);
  // gemm_f32_device (gemm.hpp) on checked arguments with m, n, k > 0: the ordered kernel
  // (ordered_gemm.cu) for exact or limited, cuBLASLt's SGEMM for fast fp32 (gemm.cu).
  void (*gemm_f32)(bool a_trans, bool b_trans, const float* a, const float* b, float* c,
                   int64_t m, int64_t n, int64_t k, LimitedSum acc, bool accumulate,
                   GemmOrder order, void* stream);
};

// This build's layout (the module fills Table::layout with its own).
constexpr Layout layout() {
  return Layout{kAbiVersion,
                static_cast<uint32_t>(sizeof(Table)),
                static_cast<uint32_t>(sizeof(DeviceTensor)),
                static_cast<uint32_t>(sizeof(ElementFormat)),
                static_cast<uint32_t>(sizeof(CastOptions)),
                static_cast<uint32_t>(sizeof(QuantizeOptions)),
                static_cast<uint32_t>(sizeof(LimitedSum))};
}

// --- Host side (loader.cpp).

// The module's table, loading it on first use; throws std::runtime_error("no CUDA
// device: <why>") when the module cannot be loaded or no device is present.
const Table& require();

}  // namespace lpx::kernels::backend

// The module's one exported symbol (module.cu).
extern "C" const lpx::kernels::backend::Table* lpx_cuda_backend(uint32_t abi_version);
