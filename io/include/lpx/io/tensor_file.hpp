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
#include <string_view>
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

// What a tensor file is: chosen by the extension for a named file (.npy, .safetensors,
// anything else raw), by the content for stdin (detect_kind).
enum class FileKind : uint8_t { raw, npy, safetensors };

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
  FileKind kind = FileKind::raw;  // what read_tensor_file read it as
};

// Opens by extension: .npy, .safetensors, anything else is raw data of `raw_dtype`
// (float32 unless a caller reads raw codes) that takes `raw_shape` (empty: 1-D of the
// whole file). "-" reads stdin, whose kind detect_kind() tells from its first bytes.
// `names` selects safetensors tensors (empty: all); an unknown name is a DataError.
// `raw_shape` and `names` are ignored where they do not apply (TensorFile::kind says
// which kind was read, so a caller can refuse them).
// An empty raw file or empty stdin is a DataError ("empty input"); a .npy of shape (0,)
// is a valid tensor with numel() == 0.
TensorFile read_tensor_file(const std::string& path, const std::vector<int64_t>& raw_shape = {},
                            const std::vector<std::string>& names = {},
                            DType raw_dtype = DType::f32);

// The kind of a tensor file from its first bytes (how stdin is read):
//   npy          the magic "\x93NUMPY";
//   safetensors  an 8-byte little-endian header length N with 2 <= N <= the bytes that
//                follow and N <= 100 MB, then '{' as the header's first byte;
//   raw          anything else.
// Raw float32 data read as safetensors would have to start with a positive float32 below
// 2^-115 (whose bits are N), then +0.0, then a float32 whose low byte is 0x7B; read from
// a named file (any other extension) such data is always raw.
FileKind detect_kind(std::span<const std::byte> data);

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
// Raw little-endian elements of any dtype (parse_raw_f32 is dtype f32).
TensorFile parse_raw(std::span<const std::byte> data, DType dtype,
                     const std::vector<int64_t>& shape = {}, const std::string& source = "<memory>");

// A shape's element count, or -1 when it has a negative extent or when the product of
// its non-zero extents overflows int64 (numpy refuses such shapes too: a zero extent
// does not make (0, 2^62, 4) a valid shape). The readers refuse such shapes.
int64_t checked_numel(std::span<const int64_t> shape);

// `text` with every byte that could act on a terminal escaped: C0 controls and DEL as
// \xNN, C1 controls (U+0080..U+009F) as \u00NN, bytes that are not UTF-8 as \xNN, and the
// backslash itself as \\. Every name or string from a file that reaches a message or a
// printed table goes through it (tensor names, metadata, .npy descr).
std::string printable(std::string_view text);

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

  const std::string& path() const { return path_; }

 private:
  friend void commit_together(std::span<OutputFile* const> files);
  void open(const std::string& prefix);
  void finish();  // every byte appended, synced and closed; the temporary stays
  void discard() noexcept;
  std::string path_, tmp_;
  uint64_t remaining_ = 0;
  int fd_ = -1;
};

// Commits several OutputFiles as one output (`lpx quantize --emit packed` to .npy: the
// codes file and its .scales.npy and .tensor_scale.npy siblings), all or nothing, in two
// phases:
//   1. every file is finished (all bytes appended, synced, closed). A failure here
//      removes every temporary and leaves every target untouched.
//   2. the temporaries are renamed over their targets in the order given (put the main
//      file last: a reader that finds it finds its siblings), each existing target first
//      kept as a hard link "<target>.old.<pid>" (renamed there where the file system
//      has no hard links). A rename that fails rolls back the ones before it: their old
//      files are renamed back (targets that did not exist are removed), the remaining
//      temporaries are removed, and the DataError says "nothing was replaced". If a
//      rollback step fails too, the DataError names the files that no longer match and
//      where the old ones are kept, instead of leaving a mismatched set silently.
// On success the .old.<pid> links are removed. Only a crash between two renames of phase
// 2 can leave new and old files side by side (with the .old.<pid> links beside them).
// Files must be distinct paths other than "-" (std::invalid_argument).
void commit_together(std::span<OutputFile* const> files);

// Parses "4x32x16" into {4, 32, 16}; throws std::invalid_argument on bad syntax: empty
// text or dimension, anything but decimal digits and 'x', a zero dimension (a tensor
// read with --shape is never empty), or a product that overflows int64.
std::vector<int64_t> parse_shape(const std::string& text);

}  // namespace lpx::io
