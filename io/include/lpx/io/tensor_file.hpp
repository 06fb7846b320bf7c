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
#include <utility>
#include <vector>

namespace lpx::io {

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
// For a file, `storage` owns the read-only MAP_PRIVATE mapping and storage.get() is the
// mapping's base address (it munmaps when the last copy goes); for stdin it owns the bytes
// read; for the parse_* functions below it is null (the caller owns the bytes).
class TensorFile {
 public:
  std::vector<TensorRef> tensors;
  std::shared_ptr<const void> storage;
  // Safetensors "__metadata__" (string -> string) in key order; empty for other formats.
  std::vector<std::pair<std::string, std::string>> metadata;
};

// Opens by extension: .npy, .safetensors, anything else is raw float32 that needs
// `raw_shape` (empty: 1-D of the whole file). "-" reads stdin (raw or .npy by magic).
// `names` selects safetensors tensors (empty: all); an unknown name is a DataError.
// `raw_shape` is ignored for .npy and .safetensors (they carry their shapes).
// An empty raw file or empty stdin is a DataError ("empty input"); a .npy of shape (0,)
// is a valid tensor with numel() == 0.
TensorFile read_tensor_file(const std::string& path, const std::vector<int64_t>& raw_shape = {},
                            const std::vector<std::string>& names = {});

// The parsers behind read_tensor_file, on bytes in memory (the file readers map the file
// and call these; the fuzz targets call them directly). The returned tensors point into
// `data`, which the caller keeps alive; `storage` is null. `source` prefixes messages.
//
// .npy: versions 1.0, 2.0, 3.0; C order; descr '<f4', '<f2', '|u1', '<u2', and '<V2' or
// '|V2' read as bfloat16 (np.save writes an ml_dtypes.bfloat16 array as '<V2').
TensorFile parse_npy(std::span<const std::byte> data, const std::string& source = "<memory>");
// .safetensors: dtypes F32, F16, BF16, F8_E4M3, F8_E5M2, U8, U16. The data section must be
// covered exactly by the tensors (no holes, no overlaps, as the format requires). Tensors
// come back in data-offset order (the order of their bytes in the file), also when `names`
// selects some of them.
TensorFile parse_safetensors(std::span<const std::byte> data,
                             const std::vector<std::string>& names = {},
                             const std::string& source = "<memory>");
// Raw little-endian float32: one tensor of `shape` (empty: 1-D of all the values).
TensorFile parse_raw_f32(std::span<const std::byte> data, const std::vector<int64_t>& shape = {},
                         const std::string& source = "<memory>");

// Converts any float tensor (f32, f16, bf16, f8_e4m3, f8_e5m2) to float32, exactly.
std::vector<float> to_float32(const TensorRef& t);

// A tensor to write.
struct TensorOut {
  std::string name;
  DType dtype = DType::f32;
  std::vector<int64_t> shape;
  std::span<const std::byte> bytes;
};

// Atomic writers: they write "<path>.tmp.<pid>" beside the target, fsync it and rename()
// it over the target; on any failure the temporary is removed and a DataError naming
// `path` is thrown, so the target is whole or untouched. "-" writes stdout directly.
// A tensor whose bytes do not match its shape and dtype is std::invalid_argument.
//
// write_npy writes version 1.0 (2.0 when the header needs more than 65535 bytes) with the
// data starting at a multiple of 64 bytes, as numpy does. bfloat16 is written as '<V2',
// the 2-byte void descr that np.save writes for an ml_dtypes.bfloat16 array: numpy loads
// it as dtype('V2'), `.view(ml_dtypes.bfloat16)` restores it, and read_tensor_file reads
// it (and '|V2') back as bfloat16. float8 has no unambiguous .npy descr (both would be '<V1'),
// so write_npy rejects it with a DataError: use .safetensors or write the codes as uint8.
//
// write_safetensors keeps the given tensor order for the header and the data, writes
// "__metadata__" first when metadata is given, and pads the header with spaces to a
// multiple of 8 bytes. Duplicate or reserved ("__metadata__") names are std::invalid_argument.
void write_npy(const std::string& path, const TensorOut& t);
void write_safetensors(const std::string& path, const std::vector<TensorOut>& tensors,
                       const std::vector<std::pair<std::string, std::string>>& metadata = {});
void write_raw(const std::string& path, std::span<const std::byte> bytes);

// One tensor written as it is computed: the header first, then the data in pieces
// (append), so a command can fill a cache-sized buffer, append it and reuse it instead of
// holding the whole result in memory and copying it once more. The container follows the
// extension as for the writers above (.npy, .safetensors with one tensor called `name`,
// anything else raw bytes), with their atomicity: the bytes go to "<path>.tmp.<pid>",
// which commit() syncs and renames over `path` once every byte of the tensor was
// appended; an OutputFile destroyed before commit() removes it, so a failed command
// leaves no file behind. "-" writes stdout.
//
// The second form writes a .safetensors file of several tensors (and metadata) the same
// way: `layout` gives their names, dtypes, shapes and, by bytes.size(), their sizes (the
// bytes themselves are not read), and the appends then supply their data in that order.
class OutputFile {
 public:
  OutputFile(const std::string& path, DType dtype, std::vector<int64_t> shape,
             const std::string& name = "values");
  OutputFile(const std::string& path, const std::vector<TensorOut>& layout,
             const std::vector<std::pair<std::string, std::string>>& metadata);
  OutputFile(const OutputFile&) = delete;
  OutputFile& operator=(const OutputFile&) = delete;
  ~OutputFile();

  void append(std::span<const std::byte> bytes);  // more than the tensor holds: invalid_argument
  void commit();                                  // fewer: invalid_argument, file removed

 private:
  void open(const std::string& prefix);
  void discard() noexcept;
  std::string path_, tmp_;
  uint64_t remaining_ = 0;
  int fd_ = -1;
};

// Parses "4x32x16" into {4, 32, 16}; throws std::invalid_argument on bad syntax: empty
// text or dimension, anything but decimal digits and 'x', a zero dimension (a tensor
// read with --shape is never empty), or a product that overflows int64.
std::vector<int64_t> parse_shape(const std::string& text);

}  // namespace lpx::io
