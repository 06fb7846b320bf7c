// Host side of the hardware conversions (hw_cvt.hpp): the table, the SR random-word
// mapping, argument checks (every build), then the CUDA module's launcher (hw_cvt.cu) on
// views of device copies.
#include <array>
#include <stdexcept>
#include <string>

#include "backend.hpp"
#include "lpx/kernels/cast.hpp"
#include "lpx/kernels/hw_cvt.hpp"
#include "lpx/kernels/memory.hpp"

namespace lpx::kernels {

namespace {
constexpr std::array<HwCvt, 12> kAll = {
    HwCvt::e4m3_rn_satfinite,  HwCvt::e5m2_rn_satfinite,  HwCvt::e2m1_rn_satfinite,
    HwCvt::e2m3_rn_satfinite,  HwCvt::e3m2_rn_satfinite,  HwCvt::ue8m0_rz_satfinite,
    HwCvt::ue8m0_rp_satfinite, HwCvt::e4m3_rs_satfinite,  HwCvt::e5m2_rs_satfinite,
    HwCvt::e2m3_rs_satfinite,  HwCvt::e3m2_rs_satfinite,  HwCvt::e2m1_rs_satfinite};
}  // namespace

std::span<const HwCvt> all_hw_cvts() { return kAll; }

HwCvtInfo hw_cvt_info(HwCvt which) {
  switch (which) {
    case HwCvt::e4m3_rn_satfinite: return {"cvt.rn.satfinite.e4m3x2.f32", fmt8::e4m3fn, Rounding::rne, 0, 89};
    case HwCvt::e5m2_rn_satfinite: return {"cvt.rn.satfinite.e5m2x2.f32", fmt8::e5m2, Rounding::rne, 0, 89};
    case HwCvt::e2m1_rn_satfinite: return {"cvt.rn.satfinite.e2m1x2.f32", fmt4::e2m1, Rounding::rne, 0, 100};
    case HwCvt::e2m3_rn_satfinite: return {"cvt.rn.satfinite.e2m3x2.f32", fmt6::e2m3, Rounding::rne, 0, 100};
    case HwCvt::e3m2_rn_satfinite: return {"cvt.rn.satfinite.e3m2x2.f32", fmt6::e3m2, Rounding::rne, 0, 100};
    case HwCvt::ue8m0_rz_satfinite: return {"cvt.rz.satfinite.ue8m0x2.f32", fmt8::e8m0, Rounding::rtz, 0, 100};
    case HwCvt::ue8m0_rp_satfinite: return {"cvt.rp.satfinite.ue8m0x2.f32", fmt8::e8m0, Rounding::rup, 0, 100};
    case HwCvt::e4m3_rs_satfinite: return {"cvt.rs.satfinite.e4m3x4.f32", fmt8::e4m3fn, Rounding::sr, 16, 100};
    case HwCvt::e5m2_rs_satfinite: return {"cvt.rs.satfinite.e5m2x4.f32", fmt8::e5m2, Rounding::sr, 16, 100};
    case HwCvt::e2m3_rs_satfinite: return {"cvt.rs.satfinite.e2m3x4.f32", fmt6::e2m3, Rounding::sr, 16, 100};
    case HwCvt::e3m2_rs_satfinite: return {"cvt.rs.satfinite.e3m2x4.f32", fmt6::e3m2, Rounding::sr, 16, 100};
    case HwCvt::e2m1_rs_satfinite: return {"cvt.rs.satfinite.e2m1x4.f32", fmt4::e2m1, Rounding::sr, 8, 100};
  }
  throw std::invalid_argument("lpx::kernels: unknown HwCvt " + std::to_string(static_cast<int>(which)));
}

uint32_t cvt_rs_word(HwCvt which, uint32_t rbits, int lane) {
  const int bits = hw_cvt_info(which).sr_bits;
  if (lane < 0 || lane > 3)
    throw std::invalid_argument("lpx::kernels::cvt_rs_word: lane " + std::to_string(lane) +
                                " (0..3 = a, b, e, f)");
  if (bits == 16) return lane < 2 ? rbits & 0xFFFF0000u : rbits << 16;  // a, b: [31:16]
  if (bits == 8) {
    static constexpr int kShift[4] = {24, 8, 16, 0};  // a [31:24], b [15:8], e [23:16], f [7:0]
    return ((rbits >> kShift[lane]) & 0xFFu) << 24;
  }
  return 0;
}

namespace {
bool run(std::span<const float> in, std::span<const uint32_t> rbits, bool with_rbits,
         std::span<uint8_t> out, HwCvt which) {
  const HwCvtInfo info = hw_cvt_info(which);
  detail::check_sizes(in.size(), out.size(), "hardware_cvt_host");
  detail::check_pointer(in.data(), in.size(), "hardware_cvt_host: input");
  detail::check_pointer(out.data(), out.size(), "hardware_cvt_host: output");
  if (info.sr_bits > 0 && !with_rbits)
    throw std::invalid_argument(std::string("lpx::kernels::hardware_cvt_host: ") + info.ptx +
                                " needs one rbits word per group of four inputs");
  if (info.sr_bits == 0 && with_rbits)
    throw std::invalid_argument(std::string("lpx::kernels::hardware_cvt_host: ") + info.ptx +
                                " takes no random bits");
  if (with_rbits) detail::check_sizes((in.size() + 3) / 4, rbits.size(), "hardware_cvt_host: rbits");
  if (in.empty()) return true;
  const backend::Table& t = backend::require();
  const size_t n = in.size();
  DeviceBuffer d_in(n * sizeof(float)), d_out(n), d_rbits(rbits.size() * sizeof(uint32_t));
  copy_to_device(d_in.get(), in.data(), n * sizeof(float));
  copy_to_device(d_rbits.get(), rbits.data(), rbits.size() * sizeof(uint32_t));
  const auto cols = static_cast<int64_t>(n);
  if (!t.hw_cvt(DeviceTensor::values(d_in.get<float>(), 1, cols),
                with_rbits ? d_rbits.get<uint32_t>() : nullptr,
                DeviceTensor::codes(d_out.get(), 1, cols, info.format), which))
    return false;
  copy_to_host(out.data(), d_out.get(), n);
  return true;
}
}  // namespace

bool hardware_cvt_host(std::span<const float> in, std::span<uint8_t> out, HwCvt which) {
  return run(in, {}, false, out, which);
}

bool hardware_cvt_host(std::span<const float> in, std::span<const uint32_t> rbits,
                       std::span<uint8_t> out, HwCvt which) {
  return run(in, rbits, true, out, which);
}

}  // namespace lpx::kernels
