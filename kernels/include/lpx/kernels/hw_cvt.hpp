// The hardware's own float32 -> low-precision conversion instructions (PTX `cvt`), so
// `lpx validate` can check the emulator against the silicon:
//
//   HwCvt               PTX                                   devices              emulator equivalent
//   e4m3_rn_satfinite   cvt.rn.satfinite.e4m3x2.f32           sm_89+               encode(x, e4m3fn, rne, sat)
//   e5m2_rn_satfinite   cvt.rn.satfinite.e5m2x2.f32           sm_89+               encode(x, e5m2,   rne, sat)
//   e2m1_rn_satfinite   cvt.rn.satfinite.e2m1x2.f32           sm_100+ (a/f code)   encode(x, e2m1,   rne, sat)
//   e2m3_rn_satfinite   cvt.rn.satfinite.e2m3x2.f32           sm_100+ (a/f code)   encode(x, e2m3,   rne, sat)
//   e3m2_rn_satfinite   cvt.rn.satfinite.e3m2x2.f32           sm_100+ (a/f code)   encode(x, e3m2,   rne, sat)
//   ue8m0_rz_satfinite  cvt.rz.satfinite.ue8m0x2.f32          sm_100+ (a/f code)   encode(x, e8m0,   rtz, sat)
//   ue8m0_rp_satfinite  cvt.rp.satfinite.ue8m0x2.f32          sm_100+ (a/f code)   encode(x, e8m0,   rup, sat)
//   e4m3_rs_satfinite   cvt.rs.satfinite.e4m3x4.f32 + rbits   sm_100a / sm_103a    encode(x, e4m3fn, sr, sat, word, 16)
//   e5m2_rs_satfinite   cvt.rs.satfinite.e5m2x4.f32 + rbits   sm_100a / sm_103a    encode(x, e5m2,   sr, sat, word, 16)
//   e2m3_rs_satfinite   cvt.rs.satfinite.e2m3x4.f32 + rbits   sm_100a / sm_103a    encode(x, e2m3,   sr, sat, word, 16)
//   e3m2_rs_satfinite   cvt.rs.satfinite.e3m2x4.f32 + rbits   sm_100a / sm_103a    encode(x, e3m2,   sr, sat, word, 16)
//   e2m1_rs_satfinite   cvt.rs.satfinite.e2m1x4.f32 + rbits   sm_100a / sm_103a    encode(x, e2m1,   sr, sat, word, 8)
//
// (a/f code: the instructions exist only in architecture- or family-specific code, i.e.
// a build with 100a-real / 100f-real; cvt.rs only in sm_100a / sm_103a code. Whether
// the code loaded for the present device has them is probed at run time.)
//
// Stochastic rounding. The PTX ISA (9.0, cvt) gives each element a slice of the 32-bit
// rbits operand of its group of four inputs {a, b, e, f}: for the 8- and 6-bit formats,
// bits [31:16] for a and b and bits [15:0] for e and f (a and b share their random
// bits, as do e and f); for e2m1x4, bits [31:24] for a, [15:8] for b, [23:16] for e,
// [7:0] for f (our reading of "upper 8 bits of both 16-bit halves for a, b"). The ISA
// does not say how those bits meet the discarded fraction. lpx's SR (numerics/rounding.hpp)
// rounds up iff the top N discarded bits plus the top N random bits carry out (N =
// sr_bits); a unit that adds its N random bits to the top N discarded bits and truncates
// does exactly that with the slice placed at the top of the random word (cvt_rs_word)
// and sr_bits = N. That is the hypothesis `lpx validate` tests bit for bit: once with
// rbits whose slices are all equal (the arithmetic alone, whatever the slice mapping)
// and once with independent slices (the mapping above). Until a run on sm_100a confirms
// it, treat the equivalence as unverified.
//
// NaN inputs: the FP8 forms give a NaN code; the FP6/FP4 forms have no NaN and the ISA
// does not say what they give (lpx follows ml_dtypes: +NaN -> -0, -NaN -> +0), so
// validate compares them separately and does not count them as mismatches.
#pragma once

#include <cstdint>
#include <span>

#include "lpx/formats/element_format.hpp"
#include "lpx/numerics/rounding.hpp"

namespace lpx::kernels {

enum class HwCvt : uint8_t {
  e4m3_rn_satfinite,
  e5m2_rn_satfinite,
  e2m1_rn_satfinite,
  e2m3_rn_satfinite,
  e3m2_rn_satfinite,
  ue8m0_rz_satfinite,
  ue8m0_rp_satfinite,
  e4m3_rs_satfinite,
  e5m2_rs_satfinite,
  e2m3_rs_satfinite,
  e3m2_rs_satfinite,
  e2m1_rs_satfinite,
};

// Every HwCvt, in table order.
std::span<const HwCvt> all_hw_cvts();

struct HwCvtInfo {
  const char* ptx;              // the instruction, e.g. "cvt.rs.satfinite.e2m1x4.f32"
  ElementFormat format;         // the emulator's format
  Rounding round;               // the emulator's rounding mode (Overflow::sat)
  int sr_bits;                  // stochastic forms: random bits per element (16 or 8), else 0
  int min_cc;                   // the lowest compute capability that has it (89 or 100)
};
HwCvtInfo hw_cvt_info(HwCvt which);

// The emulator's random word for lane `lane` (0..3 = a, b, e, f) of a group converted with
// `rbits` by a stochastic form: its slice of rbits (mapping above) at the top of the word.
// 0 for the deterministic forms.
uint32_t cvt_rs_word(HwCvt which, uint32_t rbits, int lane);

// Host to host, one code per byte (right-aligned). Deterministic forms take no rbits;
// stochastic forms take one rbits word per group of four inputs (rbits.size() ==
// ceil(in.size() / 4)), element i in lane i % 4 of group i / 4. Returns false (writing
// nothing) when the device, or the code built for it, lacks the instruction;
// std::invalid_argument on a size mismatch or rbits given to / missing from a form;
// std::runtime_error without a device.
bool hardware_cvt_host(std::span<const float> in, std::span<uint8_t> out, HwCvt which);
bool hardware_cvt_host(std::span<const float> in, std::span<const uint32_t> rbits,
                       std::span<uint8_t> out, HwCvt which);

}  // namespace lpx::kernels
