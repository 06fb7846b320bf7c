// Tensor file I/O: .npy, .safetensors and raw float32 readers over a memory mapping, and
// atomic writers. Every size read from a file is checked (with overflow-checked
// arithmetic) against the bytes actually present before any tensor view is formed, so a
// hostile file gives a DataError, never an out-of-bounds view. The parsers work on a byte
// span so that the fuzz targets (tests/fuzz) exercise exactly the code the readers use.
#include "lpx/io/tensor_file.hpp"

#include <algorithm>
#include <array>
#include <bit>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <map>
#include <set>
#include <string_view>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "lpx/formats/codec.hpp"
#include "lpx/formats/element_format.hpp"

static_assert(std::endian::native == std::endian::little,
              "tensor files are little-endian and are viewed in place");

namespace lpx::io {

namespace {

constexpr std::string_view kNpyMagic = "\x93NUMPY";
// The safetensors reference implementation refuses headers above 100 MB; so do we, so
// that a corrupt length cannot make us parse (or allocate for) gigabytes of JSON.
constexpr uint64_t kMaxSafetensorsHeader = 100u * 1000u * 1000u;

// `source` (a path, or "<stdin>") is escaped as names from files are: a file name can come
// from a directory listing.
[[noreturn]] void fail(const std::string& source, const std::string& what) {
  throw DataError(printable(source) + ": " + what);
}

std::string shape_text(const std::vector<int64_t>& shape) {
  if (shape.size() == 1) return fmt::format("({},)", shape[0]);
  return fmt::format("({})", fmt::join(shape, ", "));
}

// Element count and byte size of a shape, or false when the shape is invalid
// (checked_numel) or its byte size overflows.
bool checked_sizes(const std::vector<int64_t>& shape, DType t, int64_t& numel, uint64_t& bytes) {
  const int64_t n = checked_numel(shape);
  if (n < 0) return false;
  uint64_t b = 0;
  if (__builtin_mul_overflow(static_cast<uint64_t>(n), static_cast<uint64_t>(dtype_size(t)), &b))
    return false;
  numel = n;
  bytes = b;
  return true;
}

uint64_t load_le(std::span<const std::byte> data, size_t offset, size_t width) {
  uint64_t v = 0;
  for (size_t i = 0; i < width; ++i)
    v |= static_cast<uint64_t>(std::to_integer<uint8_t>(data[offset + i])) << (8 * i);
  return v;
}

bool valid_utf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    size_t len = 0;
    uint32_t cp = 0;
    if (c < 0x80) {
      ++i;
      continue;
    } else if ((c & 0xE0) == 0xC0) {
      len = 2;
      cp = c & 0x1Fu;
    } else if ((c & 0xF0) == 0xE0) {
      len = 3;
      cp = c & 0x0Fu;
    } else if ((c & 0xF8) == 0xF0) {
      len = 4;
      cp = c & 0x07u;
    } else {
      return false;
    }
    if (s.size() - i < len) return false;
    for (size_t k = 1; k < len; ++k) {
      const auto cc = static_cast<unsigned char>(s[i + k]);
      if ((cc & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (cc & 0x3Fu);
    }
    // Overlong forms, surrogates and values past U+10FFFF are not UTF-8.
    static constexpr uint32_t kMin[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < kMin[len] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
    i += len;
  }
  return true;
}

// ---------------------------------------------------------------------------------------
// .npy header: a Python literal dict such as
//   {'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }
// parsed by a small recursive-descent reader of the literal subset numpy writes (strings,
// True/False/None, integers, tuples, lists, dicts). Nesting is bounded so a hostile header
// cannot exhaust the stack.

struct PyValue {
  enum class Kind { str, boolean, none, integer, tuple, list, dict } kind = Kind::none;
  std::string text;          // str
  bool flag = false;         // boolean
  int64_t number = 0;        // integer
  bool number_overflow = false;
  std::vector<PyValue> items;  // tuple, list; dict: key, value, key, value...
};

class PyLiteralParser {
 public:
  PyLiteralParser(std::string_view text, const std::string& source) : s_(text), source_(source) {}

  PyValue parse_document() {
    PyValue v = value(0);
    skip_space();
    if (pos_ != s_.size()) error("unexpected text after the header dict");
    return v;
  }

 private:
  static constexpr int kMaxDepth = 32;

  [[noreturn]] void error(const std::string& what) const {
    fail(source_, fmt::format("malformed .npy header at offset {}: {}", pos_, what));
  }
  void skip_space() {
    while (pos_ < s_.size() && (s_[pos_] == ' ' || s_[pos_] == '\t' || s_[pos_] == '\n' ||
                                s_[pos_] == '\r'))
      ++pos_;
  }
  bool eat(char c) {
    skip_space();
    if (pos_ < s_.size() && s_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  bool word(std::string_view w) {
    if (s_.substr(pos_, w.size()) != w) return false;
    const size_t end = pos_ + w.size();
    if (end < s_.size() && (std::isalnum(static_cast<unsigned char>(s_[end])) || s_[end] == '_'))
      return false;
    pos_ = end;
    return true;
  }

  PyValue value(int depth) {
    if (depth > kMaxDepth) error("nesting too deep");
    skip_space();
    if (pos_ >= s_.size()) error("unexpected end of header");
    const char c = s_[pos_];
    PyValue v;
    if (c == '\'' || c == '"') {
      v.kind = PyValue::Kind::str;
      v.text = string_literal();
    } else if (c == '(' || c == '[') {
      return sequence(depth);
    } else if (c == '{') {
      return dict(depth);
    } else if (c == '-' || c == '+' || (c >= '0' && c <= '9')) {
      v = integer();
    } else if (word("True")) {
      v.kind = PyValue::Kind::boolean;
      v.flag = true;
    } else if (word("False")) {
      v.kind = PyValue::Kind::boolean;
    } else if (word("None")) {
      v.kind = PyValue::Kind::none;
    } else {
      error(fmt::format("unexpected character '{}'", printable(c)));
    }
    return v;
  }

  static std::string printable(char c) {
    const auto u = static_cast<unsigned char>(c);
    return (u >= 0x20 && u < 0x7F) ? std::string(1, c) : fmt::format("\\x{:02x}", u);
  }

  std::string string_literal() {
    const char quote = s_[pos_++];
    std::string out;
    while (true) {
      if (pos_ >= s_.size()) error("unterminated string");
      const char c = s_[pos_++];
      if (c == quote) return out;
      if (c == '\n') error("newline inside a string");
      if (c == '\\') {
        // numpy's descr and keys never need escapes; keep the escaped character as is,
        // which is enough to reject or report whatever the string names.
        if (pos_ >= s_.size()) error("unterminated string");
        out.push_back(s_[pos_++]);
      } else {
        out.push_back(c);
      }
    }
  }

  PyValue integer() {
    PyValue v;
    v.kind = PyValue::Kind::integer;
    bool negative = false;
    if (s_[pos_] == '-' || s_[pos_] == '+') negative = s_[pos_++] == '-';
    const size_t start = pos_;
    uint64_t magnitude = 0;
    while (pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '9') {
      const auto digit = static_cast<uint64_t>(s_[pos_] - '0');
      if (magnitude > (UINT64_MAX - digit) / 10) v.number_overflow = true;
      else magnitude = magnitude * 10 + digit;
      ++pos_;
    }
    if (pos_ == start) error("expected digits");
    if (pos_ < s_.size() && (s_[pos_] == 'L' || s_[pos_] == 'l')) ++pos_;  // Python 2 long
    if (magnitude > static_cast<uint64_t>(INT64_MAX)) v.number_overflow = true;
    if (!v.number_overflow) {
      const auto m = static_cast<int64_t>(magnitude);
      v.number = negative ? -m : m;
    }
    return v;
  }

  PyValue sequence(int depth) {
    const char open = s_[pos_++];
    const char close = open == '(' ? ')' : ']';
    PyValue v;
    v.kind = open == '(' ? PyValue::Kind::tuple : PyValue::Kind::list;
    bool trailing_comma = false;
    while (true) {
      if (eat(close)) break;
      v.items.push_back(value(depth + 1));
      trailing_comma = eat(',');
      if (!trailing_comma) {
        if (eat(close)) break;
        error(fmt::format("expected ',' or '{}'", close));
      }
    }
    // Python: "(3)" is the integer 3, not a tuple; only "(3,)" is a 1-tuple.
    if (open == '(' && v.items.size() == 1 && !trailing_comma) {
      PyValue inner = std::move(v.items[0]);
      return inner;
    }
    return v;
  }

  PyValue dict(int depth) {
    ++pos_;  // '{'
    PyValue v;
    v.kind = PyValue::Kind::dict;
    while (true) {
      if (eat('}')) break;
      PyValue key = value(depth + 1);
      if (!eat(':')) error("expected ':' after a dict key");
      PyValue val = value(depth + 1);
      v.items.push_back(std::move(key));
      v.items.push_back(std::move(val));
      if (!eat(',')) {
        if (eat('}')) break;
        error("expected ',' or '}'");
      }
    }
    return v;
  }

  std::string_view s_;
  const std::string& source_;
  size_t pos_ = 0;
};

constexpr std::string_view kNpySupported =
    "'<f4' float32, '<f2' float16, '<V2' or '|V2' bfloat16 (ml_dtypes), '|u1' uint8, '<u2' uint16";

DType npy_dtype(const std::string& descr, const std::string& source) {
  if (descr == "<f4") return DType::f32;
  if (descr == "<f2") return DType::f16;
  if (descr == "|V2" || descr == "<V2") return DType::bf16;
  if (descr == "|u1") return DType::u8;
  if (descr == "<u2") return DType::u16;
  fail(source, fmt::format("unsupported .npy dtype '{}' (supported: {})", printable(descr),
                           kNpySupported));
}

const char* npy_descr(DType t) {
  switch (t) {
    case DType::f32: return "<f4";
    case DType::f16: return "<f2";
    // What np.save writes for an ml_dtypes.bfloat16 array (kind 'V', native order).
    case DType::bf16: return "<V2";
    case DType::u8: return "|u1";
    case DType::u16: return "<u2";
    case DType::f8_e4m3:
    case DType::f8_e5m2: return nullptr;
  }
  return nullptr;
}

// ---------------------------------------------------------------------------------------
// safetensors dtypes.

struct StDtype {
  const char* name;
  DType dtype;
};
constexpr std::array<StDtype, 7> kStDtypes{{{"F32", DType::f32},
                                            {"F16", DType::f16},
                                            {"BF16", DType::bf16},
                                            {"F8_E4M3", DType::f8_e4m3},
                                            {"F8_E5M2", DType::f8_e5m2},
                                            {"U8", DType::u8},
                                            {"U16", DType::u16}}};

const char* st_name(DType t) {
  for (const auto& d : kStDtypes)
    if (d.dtype == t) return d.name;
  return "?";
}

std::string st_supported() {
  std::vector<std::string> names;
  for (const auto& d : kStDtypes) names.emplace_back(d.name);
  return fmt::format("{}", fmt::join(names, ", "));
}

// ---------------------------------------------------------------------------------------
// Input: a read-only private mapping of the whole file, or the bytes of a pipe.

struct Input {
  std::span<const std::byte> bytes;
  std::shared_ptr<const void> storage;
};

Input owned_input(std::vector<std::byte> buffer) {
  auto owner = std::make_shared<std::vector<std::byte>>(std::move(buffer));
  Input in;
  in.bytes = std::span<const std::byte>(owner->data(), owner->size());
  in.storage = std::shared_ptr<const void>(owner, owner->data());
  return in;
}

std::vector<std::byte> read_all(int fd, const std::string& source) {
  std::vector<std::byte> buffer;
  size_t used = 0;
  while (true) {
    if (buffer.size() - used < 65536) buffer.resize(std::max<size_t>(buffer.size() * 2, 1 << 16));
    const ssize_t n = ::read(fd, buffer.data() + used, buffer.size() - used);
    if (n < 0) {
      if (errno == EINTR) continue;
      fail(source, fmt::format("cannot read: {}", std::strerror(errno)));
    }
    if (n == 0) break;
    used += static_cast<size_t>(n);
  }
  buffer.resize(used);
  return buffer;
}

Input map_file(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail(path, fmt::format("cannot open: {}", std::strerror(errno)));
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0) fail(path, fmt::format("cannot stat: {}", std::strerror(errno)));
  if (S_ISDIR(st.st_mode)) fail(path, "is a directory");
  // Pipes, FIFOs and character devices cannot be mapped: read them into memory.
  if (!S_ISREG(st.st_mode)) return owned_input(read_all(fd, path));
  const auto size = static_cast<size_t>(st.st_size);
  if (size == 0) return Input{};  // mmap of 0 bytes fails; an empty span says "empty".
  // MAP_POPULATE maps every page in one call (the callers read the whole tensor anyway):
  // one page fault per 4 KiB costs more than the emulation itself on a file in /dev/shm.
  void* addr = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE | MAP_POPULATE, fd, 0);
  if (addr == MAP_FAILED) fail(path, fmt::format("cannot map: {}", std::strerror(errno)));
  Input in;
  in.bytes = std::span<const std::byte>(static_cast<const std::byte*>(addr), size);
  in.storage = std::shared_ptr<const void>(addr, [size](const void* p) {
    ::munmap(const_cast<void*>(p), size);
  });
  return in;
}

bool ends_with_ci(const std::string& s, std::string_view suffix) {
  if (s.size() < suffix.size()) return false;
  return std::equal(suffix.begin(), suffix.end(), s.end() - static_cast<ptrdiff_t>(suffix.size()),
                    [](char a, char b) {
                      return std::tolower(static_cast<unsigned char>(a)) ==
                             std::tolower(static_cast<unsigned char>(b));
                    });
}

bool has_npy_magic(std::span<const std::byte> data) {
  return data.size() >= kNpyMagic.size() &&
         std::memcmp(data.data(), kNpyMagic.data(), kNpyMagic.size()) == 0;
}

// ---------------------------------------------------------------------------------------
// Output.

void write_all(int fd, std::span<const std::byte> bytes, const std::string& path) {
  const std::byte* p = bytes.data();
  size_t left = bytes.size();
  while (left > 0) {
    // Linux writes at most ~2 GiB per call; chunk so each call is a full request.
    const size_t chunk = std::min<size_t>(left, size_t{1} << 30);
    const ssize_t n = ::write(fd, p, chunk);
    if (n < 0) {
      if (errno == EINTR) continue;
      fail(path, fmt::format("cannot write: {}", std::strerror(errno)));
    }
    p += n;
    left -= static_cast<size_t>(n);
  }
}

std::span<const std::byte> as_bytes(std::string_view s) {
  return std::as_bytes(std::span<const char>(s.data(), s.size()));
}

// Runs `body(fd)` against stdout for "-", else against a temporary beside `path` that is
// renamed over `path` only once everything was written and synced.
template <class Body>
void write_atomically(const std::string& path, Body&& body) {
  if (path == "-") {
    body(STDOUT_FILENO, std::string("<stdout>"));
    return;
  }
  const std::string tmp = fmt::format("{}.tmp.{}", path, ::getpid());
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0666);
  if (fd < 0) fail(path, fmt::format("cannot create {}: {}", tmp, std::strerror(errno)));
  bool open_fd = true;
  try {
    body(fd, path);
    if (::fsync(fd) != 0) fail(path, fmt::format("cannot sync: {}", std::strerror(errno)));
    open_fd = false;
    if (::close(fd) != 0) fail(path, fmt::format("cannot close: {}", std::strerror(errno)));
    if (::rename(tmp.c_str(), path.c_str()) != 0)
      fail(path, fmt::format("cannot rename {} to it: {}", tmp, std::strerror(errno)));
  } catch (...) {
    if (open_fd) ::close(fd);
    ::unlink(tmp.c_str());
    throw;
  }
}

void check_tensor_out(const TensorOut& t, const char* who) {
  int64_t numel = 0;
  uint64_t bytes = 0;
  if (!checked_sizes(t.shape, t.dtype, numel, bytes))
    throw std::invalid_argument(
        fmt::format("{}: tensor '{}' has a negative or overflowing shape", who, t.name));
  if (bytes != t.bytes.size())
    throw std::invalid_argument(fmt::format(
        "{}: tensor '{}' of shape {} and dtype {} needs {} bytes, got {}", who, t.name,
        shape_text(t.shape), dtype_name(t.dtype), bytes, t.bytes.size()));
}

}  // namespace

// ---------------------------------------------------------------------------------------

size_t dtype_size(DType t) {
  switch (t) {
    case DType::f32: return 4;
    case DType::f16:
    case DType::bf16:
    case DType::u16: return 2;
    case DType::u8:
    case DType::f8_e4m3:
    case DType::f8_e5m2: return 1;
  }
  return 1;
}

const char* dtype_name(DType t) {
  switch (t) {
    case DType::f32: return "float32";
    case DType::f16: return "float16";
    case DType::bf16: return "bfloat16";
    case DType::u8: return "uint8";
    case DType::u16: return "uint16";
    case DType::f8_e4m3: return "float8_e4m3fn";
    case DType::f8_e5m2: return "float8_e5m2";
  }
  return "?";
}

int64_t TensorRef::numel() const { return checked_numel(shape); }

int64_t checked_numel(std::span<const int64_t> shape) {
  int64_t nonzero = 1;
  bool zero = false;
  for (int64_t d : shape) {
    if (d < 0) return -1;
    if (d == 0) zero = true;
    else if (__builtin_mul_overflow(nonzero, d, &nonzero)) return -1;
  }
  return zero ? 0 : nonzero;
}

std::string printable(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x20 || c == 0x7F) {
      out += fmt::format("\\x{:02x}", c);
      ++i;
    } else if (c == '\\') {
      out += "\\\\";
      ++i;
    } else if (c < 0x80) {
      out.push_back(static_cast<char>(c));
      ++i;
    } else {
      // One UTF-8 sequence (valid_utf8 decides), or one stray byte.
      size_t len = (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 0;
      if (len == 0 || s.size() - i < len || !valid_utf8(s.substr(i, len))) {
        out += fmt::format("\\x{:02x}", c);
        ++i;
        continue;
      }
      const auto c1 = static_cast<unsigned char>(s[i + 1]);
      if (len == 2 && c == 0xC2 && c1 < 0xA0) {  // U+0080..U+009F: C1 controls (0x9B is CSI)
        out += fmt::format("\\u{:04x}", c1);
      } else {
        out.append(s.substr(i, len));
      }
      i += len;
    }
  }
  return out;
}

TensorFile parse_npy(std::span<const std::byte> data, const std::string& source) {
  if (!has_npy_magic(data)) fail(source, "not a .npy file (bad magic; expected \\x93NUMPY)");
  if (data.size() < 10) fail(source, "truncated .npy preamble");
  const auto major = std::to_integer<unsigned>(data[6]);
  const auto minor = std::to_integer<unsigned>(data[7]);
  if (major < 1 || major > 3 || minor != 0)
    fail(source, fmt::format("unsupported .npy format version {}.{} (supported: 1.0, 2.0, 3.0)",
                             major, minor));
  const size_t prefix = major == 1 ? 10 : 12;
  if (data.size() < prefix) fail(source, "truncated .npy preamble");
  const uint64_t header_len = load_le(data, 8, major == 1 ? 2 : 4);
  if (header_len > data.size() - prefix)
    fail(source, fmt::format(".npy header length {} runs past the end of the file ({} bytes)",
                             header_len, data.size()));
  const std::string_view header(reinterpret_cast<const char*>(data.data()) + prefix,
                                static_cast<size_t>(header_len));
  // Version 3.0 exists only to allow UTF-8 field names; 1.0 and 2.0 are latin-1, where
  // every byte is a character, so only 3.0 has an encoding to check.
  if (major == 3 && !valid_utf8(header)) fail(source, ".npy v3 header is not valid UTF-8");

  const PyValue dict = PyLiteralParser(header, source).parse_document();
  if (dict.kind != PyValue::Kind::dict) fail(source, ".npy header is not a dict");
  const PyValue* descr = nullptr;
  const PyValue* fortran = nullptr;
  const PyValue* shape = nullptr;
  for (size_t i = 0; i + 1 < dict.items.size(); i += 2) {
    const PyValue& key = dict.items[i];
    const PyValue& value = dict.items[i + 1];
    if (key.kind != PyValue::Kind::str) fail(source, ".npy header has a key that is not a string");
    const PyValue** slot = key.text == "descr"           ? &descr
                           : key.text == "fortran_order" ? &fortran
                           : key.text == "shape"         ? &shape
                                                         : nullptr;
    if (slot == nullptr)
      fail(source, fmt::format(".npy header has an unexpected key '{}'", printable(key.text)));
    if (*slot != nullptr)
      fail(source, fmt::format(".npy header repeats the key '{}'", printable(key.text)));
    *slot = &value;
  }
  if (descr == nullptr || fortran == nullptr || shape == nullptr)
    fail(source, fmt::format(".npy header lacks the key '{}'",
                             descr == nullptr ? "descr" : fortran == nullptr ? "fortran_order" : "shape"));
  if (descr->kind != PyValue::Kind::str)
    fail(source, fmt::format("unsupported .npy dtype (a structured or non-string descr; "
                             "supported: {})", kNpySupported));
  const DType dtype = npy_dtype(descr->text, source);
  if (fortran->kind != PyValue::Kind::boolean) fail(source, ".npy fortran_order is not a bool");
  if (fortran->flag)
    fail(source, ".npy fortran_order is True: Fortran-ordered arrays are not supported "
                 "(save np.ascontiguousarray(a))");
  if (shape->kind != PyValue::Kind::tuple) fail(source, ".npy shape is not a tuple");

  TensorRef t;
  t.dtype = dtype;
  for (const PyValue& d : shape->items) {
    if (d.kind != PyValue::Kind::integer) fail(source, ".npy shape has a non-integer dimension");
    if (d.number_overflow) fail(source, ".npy shape has a dimension too large for int64");
    if (d.number < 0) fail(source, fmt::format(".npy shape has a negative dimension {}", d.number));
    t.shape.push_back(d.number);
  }
  int64_t numel = 0;
  uint64_t expected = 0;
  if (!checked_sizes(t.shape, dtype, numel, expected))
    fail(source, fmt::format(".npy shape {} overflows the element count", shape_text(t.shape)));
  const size_t offset = prefix + static_cast<size_t>(header_len);
  const uint64_t actual = data.size() - offset;
  if (actual != expected)
    fail(source, fmt::format("{} .npy data: shape {} of {} needs {} bytes, the file has {}",
                             actual < expected ? "truncated" : "trailing bytes after the",
                             shape_text(t.shape), dtype_name(dtype), expected, actual));
  t.bytes = data.subspan(offset, static_cast<size_t>(expected));
  TensorFile file;
  file.tensors.push_back(std::move(t));
  file.kind = FileKind::npy;
  return file;
}

TensorFile parse_safetensors(std::span<const std::byte> data,
                             const std::vector<std::string>& names, const std::string& source) {
  using nlohmann::json;
  if (data.size() < 8) fail(source, "truncated .safetensors: no 8-byte header length");
  const uint64_t n = load_le(data, 0, 8);
  if (n > kMaxSafetensorsHeader)
    fail(source, fmt::format("absurd .safetensors header length {} (limit {} bytes)", n,
                             kMaxSafetensorsHeader));
  if (n > data.size() - 8)
    fail(source, fmt::format(".safetensors header length {} runs past the end of the file ({} bytes)",
                             n, data.size()));
  const auto* header_begin = reinterpret_cast<const char*>(data.data()) + 8;
  const std::string_view header(header_begin, static_cast<size_t>(n));
  if (header.empty() || header[0] != '{')
    fail(source, ".safetensors header does not start with '{'");

  // nlohmann keeps the last of duplicate keys silently; the callback sees every key, so a
  // stack of per-object key sets catches duplicates at any depth.
  std::vector<std::set<std::string>> keys;
  std::string duplicate;
  json root;
  try {
    root = json::parse(header.begin(), header.end(),
                       [&](int, json::parse_event_t event, json& parsed) {
                         if (event == json::parse_event_t::object_start) {
                           keys.emplace_back();
                         } else if (event == json::parse_event_t::object_end) {
                           if (!keys.empty()) keys.pop_back();
                         } else if (event == json::parse_event_t::key && !keys.empty()) {
                           const auto& k = parsed.get_ref<const std::string&>();
                           if (!keys.back().insert(k).second && duplicate.empty()) duplicate = k;
                         }
                         return true;
                       });
  } catch (const json::exception& e) {
    fail(source, fmt::format("invalid JSON in .safetensors header: {}", printable(e.what())));
  }
  if (!duplicate.empty())
    fail(source, fmt::format(".safetensors header repeats the key '{}'", printable(duplicate)));
  if (!root.is_object()) fail(source, ".safetensors header is not a JSON object");

  const uint64_t data_size = data.size() - 8 - n;
  const std::span<const std::byte> section = data.subspan(static_cast<size_t>(8 + n));
  struct Entry {
    TensorRef ref;
    uint64_t begin, end;
  };
  std::vector<Entry> entries;
  TensorFile file;
  file.kind = FileKind::safetensors;
  for (const auto& item : root.items()) {
    // Named variables, not a structured binding: clang 14 cannot capture bindings in `where`.
    const std::string& name = item.key();
    const json& info = item.value();
    if (name == "__metadata__") {
      if (!info.is_object()) fail(source, ".safetensors __metadata__ is not an object");
      for (const auto& [key, value] : info.items()) {
        if (!value.is_string())
          fail(source, fmt::format(".safetensors __metadata__ value of '{}' is not a string",
                                   printable(key)));
        file.metadata.emplace_back(key, value.get<std::string>());
      }
      continue;
    }
    const auto where = [&](const std::string& what) {
      fail(source, fmt::format("tensor '{}': {}", printable(name), what));
    };
    if (!info.is_object()) where("entry is not a JSON object");
    for (const char* key : {"dtype", "shape", "data_offsets"})
      if (!info.contains(key)) where(fmt::format("missing key '{}'", key));
    const json& jd = info["dtype"];
    if (!jd.is_string()) where("dtype is not a string");
    const auto& dname = jd.get_ref<const std::string&>();
    const auto it = std::find_if(kStDtypes.begin(), kStDtypes.end(),
                                 [&](const StDtype& d) { return dname == d.name; });
    if (it == kStDtypes.end())
      where(fmt::format("unsupported dtype '{}' (supported: {})", printable(dname), st_supported()));
    const json& js = info["shape"];
    if (!js.is_array()) where("shape is not an array");
    Entry e;
    e.ref.name = name;
    e.ref.dtype = it->dtype;
    for (const json& d : js) {
      if (d.is_number_integer() && !d.is_number_unsigned())
        where(fmt::format("negative dimension {}", d.get<int64_t>()));
      if (!d.is_number_unsigned()) where("shape has a dimension that is not an integer");
      const auto u = d.get<uint64_t>();
      if (u > static_cast<uint64_t>(INT64_MAX)) where("dimension too large");
      e.ref.shape.push_back(static_cast<int64_t>(u));
    }
    const json& jo = info["data_offsets"];
    if (!jo.is_array() || jo.size() != 2 || !jo[0].is_number_unsigned() ||
        !jo[1].is_number_unsigned())
      where("data_offsets is not [begin, end] of two non-negative integers");
    e.begin = jo[0].get<uint64_t>();
    e.end = jo[1].get<uint64_t>();
    if (e.begin > e.end) where(fmt::format("data_offsets begin {} > end {}", e.begin, e.end));
    if (e.end > data_size)
      where(fmt::format("data_offsets end {} is past the data section ({} bytes)", e.end, data_size));
    int64_t numel = 0;
    uint64_t bytes = 0;
    if (!checked_sizes(e.ref.shape, e.ref.dtype, numel, bytes))
      where(fmt::format("shape {} overflows the element count", shape_text(e.ref.shape)));
    if (bytes != e.end - e.begin)
      where(fmt::format("shape {} of {} needs {} bytes, data_offsets give {}",
                        shape_text(e.ref.shape), dname, bytes, e.end - e.begin));
    e.ref.bytes = section.subspan(static_cast<size_t>(e.begin), static_cast<size_t>(bytes));
    entries.push_back(std::move(e));
  }

  // The format requires the tensors to tile the data section exactly: no overlap (two
  // names for the same bytes) and no hole (unindexed bytes could hide a second file).
  std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  uint64_t pos = 0;
  const Entry* previous = nullptr;
  for (const Entry& e : entries) {
    if (e.begin < pos)
      fail(source, fmt::format("tensors '{}' and '{}' overlap (bytes {} to {} of the data section)",
                               printable(previous->ref.name), printable(e.ref.name), e.begin, pos));
    if (e.begin > pos)
      fail(source, fmt::format("bytes {} to {} of the data section belong to no tensor "
                               "(the safetensors format allows no holes)", pos, e.begin));
    pos = e.end;
    previous = &e;
  }
  if (pos != data_size)
    fail(source, fmt::format("bytes {} to {} of the data section belong to no tensor "
                             "(the safetensors format allows no holes)", pos, data_size));

  if (!names.empty()) {
    for (const std::string& wanted : names) {
      if (std::none_of(entries.begin(), entries.end(),
                       [&](const Entry& e) { return e.ref.name == wanted; })) {
        std::vector<std::string> available;
        for (const Entry& e : entries) available.push_back(printable(e.ref.name));
        std::sort(available.begin(), available.end());
        constexpr size_t kShown = 20;
        std::string more;
        if (available.size() > kShown) {
          more = fmt::format(", ... ({} more)", available.size() - kShown);
          available.resize(kShown);
        }
        fail(source, fmt::format("no tensor named '{}' (available: {}{})", printable(wanted),
                                 available.empty() ? "none" : fmt::format("{}", fmt::join(available, ", ")),
                                 more));
      }
    }
  }
  const std::set<std::string> selected(names.begin(), names.end());
  for (Entry& e : entries)
    if (selected.empty() || selected.count(e.ref.name) != 0) file.tensors.push_back(std::move(e.ref));
  return file;
}

TensorFile parse_raw_f32(std::span<const std::byte> data, const std::vector<int64_t>& shape,
                         const std::string& source) {
  return parse_raw(data, DType::f32, shape, source);
}

TensorFile parse_raw(std::span<const std::byte> data, DType dtype, const std::vector<int64_t>& shape,
                     const std::string& source) {
  if (data.empty()) fail(source, "empty input");
  const size_t size = dtype_size(dtype);
  if (data.size() % size != 0)
    fail(source, fmt::format("size {} is not a multiple of {} bytes", data.size(), size));
  const auto count = static_cast<int64_t>(data.size() / size);
  TensorRef t;
  t.dtype = dtype;
  if (shape.empty()) {
    t.shape = {count};
  } else {
    int64_t numel = 0;
    uint64_t bytes = 0;
    if (!checked_sizes(shape, dtype, numel, bytes) || numel != count)
      fail(source, fmt::format("shape {} does not match the {} {} values of the input",
                               fmt::join(shape, "x"), count, dtype_name(dtype)));
    t.shape = shape;
  }
  t.bytes = data;
  TensorFile file;
  file.tensors.push_back(std::move(t));
  return file;
}

FileKind detect_kind(std::span<const std::byte> data) {
  if (has_npy_magic(data)) return FileKind::npy;
  if (data.size() >= 10) {
    const uint64_t n = load_le(data, 0, 8);
    if (n >= 2 && n <= kMaxSafetensorsHeader && n <= data.size() - 8 &&
        std::to_integer<char>(data[8]) == '{')
      return FileKind::safetensors;
  }
  return FileKind::raw;
}

TensorFile read_tensor_file(const std::string& path, const std::vector<int64_t>& raw_shape,
                            const std::vector<std::string>& names, DType raw_dtype) {
  Input in;
  std::string source = path;
  FileKind kind = FileKind::raw;
  if (path == "-") {
    source = "<stdin>";
    in = owned_input(read_all(STDIN_FILENO, source));
    if (in.bytes.empty()) fail(source, "empty input");
    kind = detect_kind(in.bytes);
  } else {
    in = map_file(path);
    kind = ends_with_ci(path, ".npy")           ? FileKind::npy
           : ends_with_ci(path, ".safetensors") ? FileKind::safetensors
                                                : FileKind::raw;
  }
  TensorFile file = kind == FileKind::npy           ? parse_npy(in.bytes, source)
                    : kind == FileKind::safetensors ? parse_safetensors(in.bytes, names, source)
                                                    : parse_raw(in.bytes, raw_dtype, raw_shape, source);
  file.storage = std::move(in.storage);
  file.kind = kind;
  return file;
}

std::vector<float> to_float32(const TensorRef& t) {
  const auto n = static_cast<size_t>(t.numel());
  if (t.bytes.size() != n * dtype_size(t.dtype))
    throw std::invalid_argument("to_float32: tensor bytes do not match its shape");
  std::vector<float> out(n);
  const auto* p = reinterpret_cast<const uint8_t*>(t.bytes.data());
  // Views into a file need not be aligned for their dtype (.npy v1 headers from old numpy
  // align to 16, safetensors to nothing), so elements are loaded bytewise.
  const auto u16 = [p](size_t i) {
    return static_cast<uint32_t>(p[2 * i] | (static_cast<uint32_t>(p[2 * i + 1]) << 8));
  };
  const auto decode8 = [&](const ElementFormat& f) {
    std::array<float, 256> table{};
    for (uint32_t c = 0; c < 256; ++c) table[c] = decode(c, f);
    for (size_t i = 0; i < n; ++i) out[i] = table[p[i]];
  };
  switch (t.dtype) {
    case DType::f32:
      if (n != 0) std::memcpy(out.data(), p, n * 4);
      break;
    case DType::bf16:
      // bfloat16 is the top half of a float32: the shift is exact, NaN payloads included.
      for (size_t i = 0; i < n; ++i) out[i] = std::bit_cast<float>(u16(i) << 16);
      break;
    case DType::f16:
      for (size_t i = 0; i < n; ++i) out[i] = decode(u16(i), fmt16::f16);
      break;
    case DType::f8_e4m3: decode8(fmt8::e4m3fn); break;
    case DType::f8_e5m2: decode8(fmt8::e5m2); break;
    case DType::u8:
    case DType::u16:
      throw DataError(fmt::format("tensor '{}' holds {} codes, not floats; decode them with a format",
                                  printable(t.name), dtype_name(t.dtype)));
  }
  return out;
}

namespace {

// Everything of a .npy file before the data (magic, version, length, padded dict).
std::string npy_prefix(const std::string& path, const TensorOut& t) {
  const char* descr = npy_descr(t.dtype);
  if (descr == nullptr)
    fail(path, fmt::format("{} has no unambiguous .npy dtype; write .safetensors, or the codes "
                           "as uint8", dtype_name(t.dtype)));
  std::string dict = fmt::format("{{'descr': '{}', 'fortran_order': False, 'shape': {}, }}", descr,
                                 shape_text(t.shape));
  // numpy pads with spaces and ends the header with '\n' so that the data starts at a
  // multiple of 64 bytes (aligned for any dtype, and for mmap'd views).
  const auto padded_total = [&](size_t prefix_size) {
    return (prefix_size + dict.size() + 1 + 63) / 64 * 64;
  };
  // Version 2.0 only when the header outgrows version 1.0's 16-bit length, as numpy does.
  const size_t prefix = padded_total(10) - 10 > 65535 ? 12 : 10;
  std::string preamble(kNpyMagic);
  const size_t total = padded_total(prefix);
  dict.append(total - prefix - dict.size() - 1, ' ');
  dict.push_back('\n');
  const size_t hlen = dict.size();
  if (prefix == 10) {
    preamble += {'\x01', '\x00', static_cast<char>(hlen & 0xFF), static_cast<char>(hlen >> 8)};
  } else {
    preamble += {'\x02', '\x00'};
    for (int i = 0; i < 4; ++i) preamble.push_back(static_cast<char>((hlen >> (8 * i)) & 0xFF));
  }
  return preamble + dict;
}

// Everything of a .safetensors file before the data: the 8-byte length and the header.
std::string safetensors_prefix(const std::vector<TensorOut>& tensors,
                               const std::vector<std::pair<std::string, std::string>>& metadata) {
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) {
    nlohmann::ordered_json meta = nlohmann::ordered_json::object();
    for (const auto& [k, v] : metadata) meta[k] = v;
    header["__metadata__"] = std::move(meta);
  }
  uint64_t offset = 0;
  std::set<std::string> seen;
  for (const TensorOut& t : tensors) {
    check_tensor_out(t, "write_safetensors");
    if (t.name == "__metadata__")
      throw std::invalid_argument("write_safetensors: '__metadata__' is not a tensor name");
    if (!seen.insert(t.name).second)
      throw std::invalid_argument(fmt::format("write_safetensors: duplicate tensor name '{}'", t.name));
    const uint64_t end = offset + t.bytes.size();
    header[t.name] = {{"dtype", st_name(t.dtype)},
                      {"shape", t.shape},
                      {"data_offsets", {offset, end}}};
    offset = end;
  }
  std::string text;
  try {
    text = header.dump();
  } catch (const nlohmann::json::exception& e) {
    // Names and metadata must be UTF-8 to be JSON.
    throw std::invalid_argument(fmt::format("write_safetensors: {}", e.what()));
  }
  // Padding the header to a multiple of 8 aligns the data section for every dtype.
  text.append((8 - text.size() % 8) % 8, ' ');
  std::string out(8, '\0');
  for (size_t i = 0; i < 8; ++i) out[i] = static_cast<char>((text.size() >> (8 * i)) & 0xFF);
  return out + text;
}

}  // namespace

void write_npy(const std::string& path, const TensorOut& t) {
  check_tensor_out(t, "write_npy");
  const std::string prefix = npy_prefix(path, t);
  write_atomically(path, [&](int fd, const std::string& where) {
    write_all(fd, as_bytes(prefix), where);
    write_all(fd, t.bytes, where);
  });
}

void write_safetensors(const std::string& path, const std::vector<TensorOut>& tensors,
                       const std::vector<std::pair<std::string, std::string>>& metadata) {
  const std::string prefix = safetensors_prefix(tensors, metadata);
  write_atomically(path, [&](int fd, const std::string& where) {
    write_all(fd, as_bytes(prefix), where);
    for (const TensorOut& t : tensors) write_all(fd, t.bytes, where);
  });
}

void write_raw(const std::string& path, std::span<const std::byte> bytes) {
  write_atomically(path, [&](int fd, const std::string& where) { write_all(fd, bytes, where); });
}

// ---------------------------------------------------------------------------------------
// OutputFile

OutputFile::OutputFile(const std::string& path, DType dtype, std::vector<int64_t> shape,
                       const std::string& name)
    : path_(path) {
  int64_t numel = 0;
  uint64_t bytes = 0;
  if (!checked_sizes(shape, dtype, numel, bytes))
    throw std::invalid_argument(fmt::format("OutputFile: tensor '{}' has a negative or "
                                            "overflowing shape", name));
  remaining_ = bytes;
  // The header comes from a TensorOut of the right size; its bytes are never read.
  const TensorOut t{name, dtype, shape,
                    std::span<const std::byte>(static_cast<const std::byte*>(nullptr), bytes)};
  std::string prefix;
  if (path.size() >= 4 && path.compare(path.size() - 4, 4, ".npy") == 0) {
    prefix = npy_prefix(path, t);
  } else if (path.size() >= 12 && path.compare(path.size() - 12, 12, ".safetensors") == 0) {
    prefix = safetensors_prefix({t}, {});
  }
  open(prefix);
}

OutputFile::OutputFile(const std::string& path, const std::vector<TensorOut>& layout,
                       const std::vector<std::pair<std::string, std::string>>& metadata)
    : path_(path) {
  if (path.size() < 12 || path.compare(path.size() - 12, 12, ".safetensors") != 0)
    throw std::invalid_argument("OutputFile: several tensors need a .safetensors path, not " + path);
  for (const TensorOut& t : layout) remaining_ += t.bytes.size();
  open(safetensors_prefix(layout, metadata));
}

void OutputFile::open(const std::string& prefix) {
  if (path_ == "-") {
    fd_ = STDOUT_FILENO;
  } else {
    tmp_ = fmt::format("{}.tmp.{}", path_, ::getpid());
    fd_ = ::open(tmp_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0666);
    if (fd_ < 0) fail(path_, fmt::format("cannot create {}: {}", tmp_, std::strerror(errno)));
  }
  try {
    write_all(fd_, as_bytes(prefix), path_);
  } catch (...) {
    discard();
    throw;
  }
}

void OutputFile::discard() noexcept {
  if (!tmp_.empty()) {  // else stdout, which stays open
    if (fd_ >= 0) ::close(fd_);
    ::unlink(tmp_.c_str());  // also once finish()ed: commit_together renames it or not
    tmp_.clear();
  }
  fd_ = -1;
}

OutputFile::~OutputFile() { discard(); }

void OutputFile::append(std::span<const std::byte> bytes) {
  if (fd_ < 0) throw std::logic_error("OutputFile::append after commit or failure");
  if (bytes.size() > remaining_)
    throw std::invalid_argument(fmt::format("OutputFile: {} more bytes than the tensor holds",
                                            bytes.size() - remaining_));
  try {
    write_all(fd_, bytes, path_);
  } catch (...) {
    discard();
    throw;
  }
  remaining_ -= bytes.size();
}

void OutputFile::finish() {
  if (fd_ < 0) throw std::logic_error("OutputFile::commit after commit or failure");
  if (remaining_ != 0) {
    discard();
    throw std::invalid_argument(fmt::format("OutputFile: {} bytes of the tensor never written",
                                            remaining_));
  }
  const int fd = fd_;
  fd_ = -1;
  if (tmp_.empty()) return;  // stdout
  const auto give_up = [&](const std::string& why) {
    ::unlink(tmp_.c_str());
    tmp_.clear();
    fail(path_, why);
  };
  if (::fsync(fd) != 0) {
    const int e = errno;
    ::close(fd);
    give_up(fmt::format("cannot sync: {}", std::strerror(e)));
  }
  if (::close(fd) != 0) give_up(fmt::format("cannot close: {}", std::strerror(errno)));
}

void OutputFile::commit() {
  finish();
  if (tmp_.empty()) return;  // stdout
  const std::string tmp = std::move(tmp_);
  tmp_.clear();
  if (::rename(tmp.c_str(), path_.c_str()) != 0) {
    const int e = errno;
    ::unlink(tmp.c_str());
    fail(path_, fmt::format("cannot rename {} to it: {}", tmp, std::strerror(e)));
  }
}

namespace {
bool exists_no_follow(const std::string& path) {
  struct stat st {};
  return ::lstat(path.c_str(), &st) == 0;
}
}  // namespace

void commit_together(std::span<OutputFile* const> files) {
  std::set<std::string> paths;
  for (const OutputFile* f : files) {
    if (f == nullptr || f->path_ == "-" || !paths.insert(f->path_).second)
      throw std::invalid_argument("commit_together: the files must be distinct paths, not stdout");
  }
  const auto discard_all = [&] {
    for (OutputFile* f : files) f->discard();
  };
  // Phase 1: every byte written and synced, or nothing is touched.
  try {
    for (OutputFile* f : files) f->finish();
  } catch (...) {
    discard_all();
    throw;
  }
  // Phase 2: the old targets kept aside, then the renames in order.
  struct Step {
    std::string target, tmp, backup;  // backup empty: the target did not exist
  };
  std::vector<Step> steps;
  for (OutputFile* f : files) steps.push_back({f->path_, f->tmp_, ""});
  for (OutputFile* f : files) f->tmp_.clear();  // owned by `steps` from here on
  const auto remove_temporaries = [&](size_t from) {
    for (size_t k = from; k < steps.size(); ++k) ::unlink(steps[k].tmp.c_str());
  };
  const auto remove_backups = [&] {
    for (const Step& st : steps)
      if (!st.backup.empty()) ::unlink(st.backup.c_str());
  };
  for (Step& st : steps) {
    struct stat info {};
    if (::lstat(st.target.c_str(), &info) != 0 || !(S_ISREG(info.st_mode) || S_ISLNK(info.st_mode)))
      continue;  // nothing to keep (a directory in the way fails its rename below)
    const std::string backup = fmt::format("{}.old.{}", st.target, ::getpid());
    ::unlink(backup.c_str());  // a stale one of a dead process with our pid
    if (::link(st.target.c_str(), backup.c_str()) != 0 &&
        ::rename(st.target.c_str(), backup.c_str()) != 0) {
      const int e = errno;
      // Renamed aside targets go back; nothing new was renamed yet.
      for (Step& done : steps) {
        if (done.backup.empty()) continue;
        if (!exists_no_follow(done.target)) ::rename(done.backup.c_str(), done.target.c_str());
        else ::unlink(done.backup.c_str());
      }
      remove_temporaries(0);
      fail(st.target, fmt::format("cannot keep the old file as {}: {}; nothing was replaced",
                                  backup, std::strerror(e)));
    }
    st.backup = backup;
  }
  for (size_t i = 0; i < steps.size(); ++i) {
    if (::rename(steps[i].tmp.c_str(), steps[i].target.c_str()) == 0) continue;
    const int e = errno;
    remove_temporaries(i);
    // Roll back: the targets renamed so far get their old files back (or go).
    std::vector<std::string> unrestored;
    for (size_t j = 0; j < steps.size(); ++j) {
      const Step& st = steps[j];
      if (j < i) {
        const bool ok = st.backup.empty() ? ::unlink(st.target.c_str()) == 0
                                          : ::rename(st.backup.c_str(), st.target.c_str()) == 0;
        if (!ok) unrestored.push_back(st.target);
      } else if (!st.backup.empty() && !exists_no_follow(st.target)) {
        // Renamed aside (no hard links) and not replaced: put it back.
        if (::rename(st.backup.c_str(), st.target.c_str()) != 0) unrestored.push_back(st.target);
      } else if (!st.backup.empty()) {
        ::unlink(st.backup.c_str());
      }
    }
    if (!unrestored.empty())
      fail(steps[i].target,
           fmt::format("cannot rename {} to it: {}; restoring the files renamed before it failed "
                       "too, so {} no longer match it (their old versions are kept as *.old.{})",
                       steps[i].tmp, std::strerror(e), fmt::join(unrestored, ", "), ::getpid()));
    fail(steps[i].target, fmt::format("cannot rename {} to it: {}; nothing was replaced",
                                      steps[i].tmp, std::strerror(e)));
  }
  remove_backups();
}

std::vector<int64_t> parse_shape(const std::string& text) {
  if (text.empty()) throw std::invalid_argument("empty shape (expected e.g. 4x32x16)");
  std::vector<int64_t> shape;
  int64_t product = 1;
  size_t start = 0;
  while (true) {
    const size_t end = std::min(text.find('x', start), text.size());
    const std::string_view part(text.data() + start, end - start);
    if (part.empty())
      throw std::invalid_argument(fmt::format("bad shape '{}': empty dimension", text));
    if (!std::all_of(part.begin(), part.end(), [](char c) { return c >= '0' && c <= '9'; }))
      throw std::invalid_argument(
          fmt::format("bad shape '{}': '{}' is not a positive decimal number", text, part));
    int64_t d = 0;
    const auto [ptr, ec] = std::from_chars(part.data(), part.data() + part.size(), d);
    if (ec != std::errc() || ptr != part.data() + part.size())
      throw std::invalid_argument(fmt::format("bad shape '{}': dimension '{}' is too large", text, part));
    if (d == 0) throw std::invalid_argument(fmt::format("bad shape '{}': zero dimension", text));
    if (__builtin_mul_overflow(product, d, &product))
      throw std::invalid_argument(fmt::format("bad shape '{}': too many elements", text));
    shape.push_back(d);
    if (end == text.size()) break;
    start = end + 1;
  }
  return shape;
}

}  // namespace lpx::io
