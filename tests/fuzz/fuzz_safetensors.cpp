// libFuzzer target: lpx::parse_safetensors, the parser behind read_tensor_file for
// .safetensors files, with and without a tensor selection. A DataError is the expected
// answer to garbage; anything else escaping is a finding.
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "lpx/formats/tensor_io.hpp"

namespace {
void touch(const lpx::TensorFile& f) {
  for (const lpx::TensorRef& t : f.tensors) {
    // Touch every byte of the view so ASan checks that it lies inside the input.
    volatile uint8_t sink = 0;
    for (std::byte b : t.bytes) sink = static_cast<uint8_t>(sink ^ std::to_integer<uint8_t>(b));
    if (t.dtype != lpx::DType::u8 && t.dtype != lpx::DType::u16) (void)lpx::to_float32(t);
  }
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto bytes = std::as_bytes(std::span<const uint8_t>(data, size));
  try {
    const lpx::TensorFile f = lpx::parse_safetensors(bytes, {}, "fuzz.safetensors");
    touch(f);
    if (!f.tensors.empty()) {
      // Selecting the last tensor must give exactly that tensor.
      const lpx::TensorFile g = lpx::parse_safetensors(bytes, {f.tensors.back().name}, "fuzz");
      if (g.tensors.size() != 1 || g.tensors[0].bytes.data() != f.tensors.back().bytes.data())
        __builtin_trap();
    }
  } catch (const lpx::DataError&) {
  }
  return 0;
}
