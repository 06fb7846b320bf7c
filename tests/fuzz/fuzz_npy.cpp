// libFuzzer target: lpx::io::parse_npy, the parser behind read_tensor_file for .npy files.
// A DataError is the expected answer to garbage; anything else escaping (another
// exception, an ASan/UBSan report, a view past the input) is a finding.
#include <cstddef>
#include <cstdint>
#include <span>

#include "lpx/io/tensor_file.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto bytes = std::as_bytes(std::span<const uint8_t>(data, size));
  try {
    const lpx::io::TensorFile f = lpx::io::parse_npy(bytes, "fuzz.npy");
    for (const lpx::io::TensorRef& t : f.tensors) {
      // Touch every byte of the view so ASan checks that it lies inside the input.
      volatile uint8_t sink = 0;
      for (std::byte b : t.bytes) sink = static_cast<uint8_t>(sink ^ std::to_integer<uint8_t>(b));
      if (t.dtype != lpx::io::DType::u8 && t.dtype != lpx::io::DType::u16) (void)lpx::io::to_float32(t);
    }
  } catch (const lpx::io::DataError&) {
  }
  return 0;
}
