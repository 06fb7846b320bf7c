// Argument checks of gemm() and hardware_cvt_host() (every build), then the launchers.
#include <stdexcept>
#include <string>

#include "launch.hpp"
#include "lpx/kernels/cast.hpp"
#include "lpx/kernels/gemm.hpp"
#include "lpx/kernels/hw_cvt.hpp"

namespace lpx::kernels {

namespace {
bool is_fp8(GemmDtype d) { return d == GemmDtype::e4m3 || d == GemmDtype::e5m2; }
}  // namespace

void gemm(size_t m, size_t n, size_t k, const GemmOperand& x, const GemmOperand& w, void* y,
          GemmDtype out_dtype, void* stream) {
  if (m == 0 || n == 0 || k == 0) throw std::invalid_argument("lpx::kernels::gemm: a size is zero");
  detail::check_pointer(x.data, 1, "gemm: X");
  detail::check_pointer(w.data, 1, "gemm: W");
  detail::check_pointer(y, 1, "gemm: Y");
  if (out_dtype != GemmDtype::bf16 && out_dtype != GemmDtype::f32)
    throw std::invalid_argument("lpx::kernels::gemm: the output must be bf16 or f32");
  const bool both_bf16 = x.dtype == GemmDtype::bf16 && w.dtype == GemmDtype::bf16;
  const bool fp8 = is_fp8(x.dtype) && is_fp8(w.dtype);
  if (!both_bf16 && !fp8)
    throw std::invalid_argument("lpx::kernels::gemm: operands must be bf16 x bf16 or fp8 x fp8");
  if (fp8 && x.dtype == GemmDtype::e5m2 && w.dtype == GemmDtype::e5m2)
    throw std::invalid_argument("lpx::kernels::gemm: e5m2 x e5m2 is not supported by cuBLASLt");
  if (fp8 && k % 16 != 0)
    throw std::invalid_argument("lpx::kernels::gemm: FP8 needs k % 16 == 0, got k = " +
                                std::to_string(k));
  if (both_bf16 && (x.scale || w.scale))
    throw std::invalid_argument("lpx::kernels::gemm: scales apply to FP8 operands only");
  launch::gemm(m, n, k, x, w, y, out_dtype, stream);
}

bool hardware_cvt_host(std::span<const float> in, std::span<uint8_t> out, HwCvt which) {
  detail::check_sizes(in.size(), out.size(), "hardware_cvt_host");
  detail::check_pointer(in.data(), in.size(), "hardware_cvt_host: input");
  detail::check_pointer(out.data(), out.size(), "hardware_cvt_host: output");
  if (in.empty()) return true;
  return launch::hw_cvt_h2h(in.data(), out.data(), in.size(), which);
}

}  // namespace lpx::kernels
