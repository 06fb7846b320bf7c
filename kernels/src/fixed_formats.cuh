// The element formats that the cast, decode and tiled quantize kernels are compiled for
// with the format's fields as constants (docs/kernels.md, "Formats compiled as constants").
//
// The element codec (lpx/formats/codec.hpp) takes its format as data. With the fields
// unknown at compile time a kernel runs the codec's branches and shifts for every kind of
// format, and on an H200 Nsight Compute found the cast, decode and tiled quantize kernels
// issue-bound (SM throughput 80-94%, DRAM 5-34%). A kernel instantiated for one of these
// formats copies it into a local constexpr value and calls the same LPX_HD functions,
// which the compiler then folds: the function is the same, so are the bits (lpx validate
// compares both kinds of kernel with the CPU). Any other format takes the generic
// instantiation (kGenericFormat), which reads the format from its arguments. Plain C++
// outside nvcc, so tests/kernels/test_fixed_formats.cpp checks the choice on the CPU.
#pragma once

#include "lpx/formats/element_format.hpp"
#include "lpx/numerics/hd.hpp"

namespace lpx::kernels::module {

inline constexpr int kGenericFormat = -1;
inline constexpr int kFixedFormats = 6;  // indices 0-4 have 8-bit codes, 5 (bfloat16) 16-bit

LPX_HD constexpr ElementFormat fixed_format(int i) {
  switch (i) {
    case 0: return fmt8::e4m3fn;
    case 1: return fmt8::e5m2;
    case 2: return fmt4::e2m1;
    case 3: return fmt6::e3m2;
    case 4: return fmt6::e2m3;
    default: return fmt16::bf16;
  }
}

// The fixed format equal to f in every field (ElementFormat's operator==), or kGenericFormat.
inline int fixed_format_index(const ElementFormat& f) {
  for (int i = 0; i < kFixedFormats; ++i)
    if (fixed_format(i) == f) return i;
  return kGenericFormat;
}

}  // namespace lpx::kernels::module
