// Tensor files: .npy (versions 1-3), .safetensors, and raw little-endian .f32.
// Readers memory-map their input and never hold a file twice in memory; writers write
// to a temporary file beside the target and rename it, so an output is whole or absent.
// Every malformed input throws lpx::DataError with one line that names the file and
// what is wrong (truncated, absurd sizes, overlapping tensors, invalid JSON, ...).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

namespace lpx {

// Bad data (as opposed to bad usage): the CLI exits 1 on it, 2 on usage errors.
struct DataError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

enum class DType : uint8_t { f32, f16, bf16, u8, u16, f8_e4m3, f8_e5m2 };
size_t dtype_size(DType t);
const char* dtype_name(DType t);  // "float32", "float16", "bfloat16", "uint8", ...

// A read-only view of one tensor inside a mapped file (or owned memory).
struct TensorRef {
  std::string name;             // "" for .npy and raw files
  DType dtype = DType::f32;
  std::vector<int64_t> shape;   // C order
  std::span<const std::byte> bytes;
  int64_t numel() const;
};

// Keeps the mapping (or buffer) alive; tensors point into it.
class TensorFile {
 public:
  std::vector<TensorRef> tensors;
  std::shared_ptr<const void> storage;
};

// Opens by extension: .npy, .safetensors, anything else is raw float32 that needs
// `raw_shape` (empty: 1-D of the whole file). "-" reads stdin (raw or .npy by magic).
// `names` selects safetensors tensors (empty: all); an unknown name is a DataError.
TensorFile read_tensor_file(const std::string& path, const std::vector<int64_t>& raw_shape = {},
                            const std::vector<std::string>& names = {});

// Converts any float tensor (f32, f16, bf16, f8_e4m3, f8_e5m2) to float32, exactly.
std::vector<float> to_float32(const TensorRef& t);

// A tensor to write.
struct TensorOut {
  std::string name;
  DType dtype = DType::f32;
  std::vector<int64_t> shape;
  std::span<const std::byte> bytes;
};

// Atomic writers (temporary + rename). "-" writes stdout (npy/raw only).
void write_npy(const std::string& path, const TensorOut& t);
void write_safetensors(const std::string& path, const std::vector<TensorOut>& tensors,
                       const std::vector<std::pair<std::string, std::string>>& metadata = {});
void write_raw(const std::string& path, std::span<const std::byte> bytes);

// Parses "4x32x16" into {4, 32, 16}; throws std::invalid_argument on bad syntax.
std::vector<int64_t> parse_shape(const std::string& text);

}  // namespace lpx
