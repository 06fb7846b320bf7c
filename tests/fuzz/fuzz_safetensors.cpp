// libFuzzer target: lpx::io::parse_safetensors, the parser behind read_tensor_file for
// .safetensors files, with and without a tensor selection. A DataError is the expected
// answer to garbage; anything else escaping is a finding.
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "lpx/io/tensor_file.hpp"

namespace {
void touch(const lpx::io::TensorFile& f) {
  for (const lpx::io::TensorRef& t : f.tensors) {
    // Touch every byte of the view so ASan checks that it lies inside the input.
    volatile uint8_t sink = 0;
    for (std::byte b : t.bytes) sink = static_cast<uint8_t>(sink ^ std::to_integer<uint8_t>(b));
    if (t.dtype != lpx::io::DType::u8 && t.dtype != lpx::io::DType::u16) (void)lpx::io::to_float32(t);
  }
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto bytes = std::as_bytes(std::span<const uint8_t>(data, size));
  try {
    const lpx::io::TensorFile f = lpx::io::parse_safetensors(bytes, {}, "fuzz.safetensors");
    touch(f);
    if (!f.tensors.empty()) {
      // Selecting the last tensor must give exactly that tensor.
      const lpx::io::TensorFile g = lpx::io::parse_safetensors(bytes, {f.tensors.back().name}, "fuzz");
      if (g.tensors.size() != 1 || g.tensors[0].bytes.data() != f.tensors.back().bytes.data())
        __builtin_trap();
    }
  } catch (const lpx::io::DataError&) {
  }
  return 0;
}
