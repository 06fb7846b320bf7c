// The formats the CUDA kernels are compiled for as constants (kernels/src/fixed_formats.cuh).
// A kernel instantiated for one runs that format whatever the view says, so the choice
// must take a view's format only when it equals the fixed one in every field: a format
// that shares a name or a bit width but differs anywhere else must get the generic kernel.
#include <catch2/catch.hpp>

#include <cstring>

#include "../../kernels/src/fixed_formats.cuh"
#include "lpx/formats/block_format.hpp"
#include "lpx/formats/element_format.hpp"

using lpx::ElementFormat;
using lpx::kernels::module::fixed_format;
using lpx::kernels::module::fixed_format_index;
using lpx::kernels::module::kFixedFormats;
using lpx::kernels::module::kGenericFormat;

TEST_CASE("each fixed format is chosen for itself and for nothing else") {
  const ElementFormat* named[] = {&lpx::fmt8::e4m3fn, &lpx::fmt8::e5m2, &lpx::fmt4::e2m1,
                                  &lpx::fmt6::e3m2,   &lpx::fmt6::e2m3, &lpx::fmt16::bf16};
  REQUIRE(std::size(named) == static_cast<size_t>(kFixedFormats));
  for (int i = 0; i < kFixedFormats; ++i) {
    INFO(named[i]->name);
    CHECK(fixed_format_index(*named[i]) == i);
    CHECK(fixed_format(i).name_view() == named[i]->name_view());
    CHECK(fixed_format(i).max_magnitude == named[i]->max_magnitude);
  }
  // 8-bit codes for 0-4, 16-bit for 5 (the launchers pick the code width by this)
  for (int i = 0; i < kFixedFormats; ++i) CHECK((fixed_format(i).bits <= 8) == (i != 5));
  // the same widths with other semantics
  for (const ElementFormat* other : {&lpx::fmt8::e4m3fnuz, &lpx::fmt8::e5m2fnuz, &lpx::fmt8::e4m3,
                                     &lpx::fmt8::e3m4, &lpx::fmt8::e8m0, &lpx::fmt8::e4m3b11fnuz}) {
    INFO(other->name);
    CHECK(fixed_format_index(*other) == kGenericFormat);
  }
}

TEST_CASE("a format that differs from a fixed one in any field gets the generic kernel") {
  const ElementFormat base = lpx::fmt8::e4m3fn;
  REQUIRE(fixed_format_index(base) == 0);
  auto differs = [&](auto change) {
    ElementFormat f = base;
    change(f);
    return fixed_format_index(f);
  };
  CHECK(differs([](ElementFormat& f) { f.bias = 8; }) == kGenericFormat);
  CHECK(differs([](ElementFormat& f) { f.subnormals = false; }) == kGenericFormat);
  CHECK(differs([](ElementFormat& f) { f.reserved_top = 1; }) == kGenericFormat);
  CHECK(differs([](ElementFormat& f) { f.max_magnitude -= 1; }) == kGenericFormat);
  CHECK(differs([](ElementFormat& f) { f.nan_code = 0x80; }) == kGenericFormat);
  CHECK(differs([](ElementFormat& f) { f.specials = lpx::Specials::ieee; }) == kGenericFormat);
  CHECK(differs([](ElementFormat& f) { f.symmetric = true; }) == kGenericFormat);
  CHECK(differs([](ElementFormat& f) { std::strcpy(f.name, "custom_e4m3"); }) == kGenericFormat);
}

TEST_CASE("the catalogue's block formats reach the fixed kernels") {
  // parsed specs carry element formats equal to the named ones, so real runs take the
  // compiled-in kernels rather than falling back to the generic ones
  CHECK(fixed_format_index(lpx::parse_block_format("mxfp8_e4m3").element) == 0);
  CHECK(fixed_format_index(lpx::parse_block_format("mxfp8_e5m2").element) == 1);
  CHECK(fixed_format_index(lpx::parse_block_format("mxfp4").element) == 2);
  CHECK(fixed_format_index(lpx::parse_block_format("nvfp4").element) == 2);
  CHECK(fixed_format_index(lpx::parse_block_format("mxfp6_e3m2").element) == 3);
  CHECK(fixed_format_index(lpx::parse_block_format("mxfp6_e2m3").element) == 4);
  CHECK(fixed_format_index(lpx::parse_block_format("e4m3:b32:e8m0:rceil").element) == 0);
}
