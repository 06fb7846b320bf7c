// Tensor file I/O. Reader inputs for the format tests are built byte by byte here, from
// the format descriptions (numpy's NEP 1 .npy layout, the safetensors README), never with
// our own writers, so a writer bug and a matching reader bug cannot cancel out.
#include <catch2/catch.hpp>

#include <bit>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <span>
#include <sstream>
#include <string>
#include <vector>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lpx/io/tensor_file.hpp"

namespace fs = std::filesystem;
using lpx::io::DataError;
using lpx::io::DType;

namespace {

#define REQUIRE_DATA_ERROR(expr, fragment)                               \
  do {                                                                   \
    try {                                                                \
      (void)(expr);                                                      \
      FAIL("expected a DataError from " #expr);                          \
    } catch (const lpx::io::DataError& e) {                                  \
      INFO("message: " << e.what());                                     \
      CHECK_THAT(std::string(e.what()), Catch::Contains(fragment));      \
    }                                                                    \
  } while (0)

struct TempDir {
  fs::path path;
  TempDir() {
    std::string tmpl = (fs::temp_directory_path() / "lpx_tensor_io_XXXXXX").string();
    REQUIRE(::mkdtemp(tmpl.data()) != nullptr);
    path = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  std::string file(const std::string& name) const { return (path / name).string(); }
};

void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  REQUIRE(f.good());
}

std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

template <class T>
std::string le_bytes(const std::vector<T>& values) {
  std::string out(values.size() * sizeof(T), '\0');
  if (!values.empty()) std::memcpy(out.data(), values.data(), out.size());
  return out;
}

std::string u_le(uint64_t v, int width) {
  std::string out;
  for (int i = 0; i < width; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
  return out;
}

// A .npy file by the book: magic, version, header length (u16 for 1.0, u32 for 2.0/3.0),
// the header dict padded with spaces and a final '\n' to a multiple of 64, then the data.
std::string npy_bytes(int major, const std::string& dict, const std::string& data,
                      bool pad = true) {
  const size_t prefix = major == 1 ? 10 : 12;
  std::string header = dict;
  if (pad) {
    const size_t total = (prefix + header.size() + 1 + 63) / 64 * 64;
    header.append(total - prefix - header.size() - 1, ' ');
    header.push_back('\n');
  }
  std::string out = "\x93NUMPY";
  out.push_back(static_cast<char>(major));
  out.push_back('\0');
  out += u_le(header.size(), major == 1 ? 2 : 4);
  return out + header + data;
}

std::string st_bytes(const std::string& json, const std::string& data) {
  return u_le(json.size(), 8) + json + data;
}

std::span<const std::byte> span_of(const std::string& s) {
  return std::as_bytes(std::span<const char>(s.data(), s.size()));
}

lpx::io::TensorFile parse_npy(const std::string& s) { return lpx::io::parse_npy(span_of(s), "mem.npy"); }
lpx::io::TensorFile parse_st(const std::string& s, const std::vector<std::string>& names = {}) {
  return lpx::io::parse_safetensors(span_of(s), names, "mem.safetensors");
}
// The tensors point into the parsed bytes: for a temporary (parse_npy(npy_bytes(...))),
// those die with the full expression (AddressSanitizer: heap-use-after-free in to_float32),
// so these overloads keep them alive in `storage`.
lpx::io::TensorFile parse_npy(std::string&& s) {
  const auto owned = std::make_shared<const std::string>(std::move(s));
  lpx::io::TensorFile f = lpx::io::parse_npy(span_of(*owned), "mem.npy");
  f.storage = std::shared_ptr<const void>(owned, owned->data());
  return f;
}
lpx::io::TensorFile parse_st(std::string&& s, const std::vector<std::string>& names = {}) {
  const auto owned = std::make_shared<const std::string>(std::move(s));
  lpx::io::TensorFile f = lpx::io::parse_safetensors(span_of(*owned), names, "mem.safetensors");
  f.storage = std::shared_ptr<const void>(owned, owned->data());
  return f;
}

std::string bytes_of(const lpx::io::TensorRef& t) {
  return std::string(reinterpret_cast<const char*>(t.bytes.data()), t.bytes.size());
}

const std::string kF32Dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }";
const std::vector<float> kSix = {1.0f, -2.5f, 3.25f, 0.0f, -0.0f, 1e-30f};

// Runs `fn` with file descriptor 0 replaced by `path`.
template <class Fn>
void with_stdin(const std::string& path, Fn fn) {
  const int saved = ::dup(0);
  const int fd = ::open(path.c_str(), O_RDONLY);
  REQUIRE(fd >= 0);
  ::dup2(fd, 0);
  ::close(fd);
  try {
    fn();
  } catch (...) {
    ::dup2(saved, 0);
    ::close(saved);
    throw;
  }
  ::dup2(saved, 0);
  ::close(saved);
}

}  // namespace

TEST_CASE("dtype sizes and names") {
  CHECK(lpx::io::dtype_size(DType::f32) == 4);
  CHECK(lpx::io::dtype_size(DType::bf16) == 2);
  CHECK(lpx::io::dtype_size(DType::f16) == 2);
  CHECK(lpx::io::dtype_size(DType::u16) == 2);
  CHECK(lpx::io::dtype_size(DType::u8) == 1);
  CHECK(lpx::io::dtype_size(DType::f8_e4m3) == 1);
  CHECK(std::string(lpx::io::dtype_name(DType::bf16)) == "bfloat16");
  CHECK(std::string(lpx::io::dtype_name(DType::f8_e4m3)) == "float8_e4m3fn");
}

TEST_CASE("parse_shape") {
  CHECK(lpx::io::parse_shape("4x32x16") == std::vector<int64_t>{4, 32, 16});
  CHECK(lpx::io::parse_shape("7") == std::vector<int64_t>{7});
  for (const char* bad : {"", "x", "4x", "x4", "4xx3", "4x-3", "-4", "+4", "4X3", "4 x3", "a",
                          "0", "4x0", "99999999999999999999", "4294967296x4294967296"}) {
    INFO(bad);
    CHECK_THROWS_AS(lpx::io::parse_shape(bad), std::invalid_argument);
  }
}

TEST_CASE("npy v1, v2, v3 headers read float32") {
  const std::string data = le_bytes(kSix);
  for (int major : {1, 2, 3}) {
    INFO("version " << major);
    const auto f = parse_npy(npy_bytes(major, kF32Dict, data));
    REQUIRE(f.tensors.size() == 1);
    const auto& t = f.tensors[0];
    CHECK(t.name.empty());
    CHECK(t.dtype == DType::f32);
    CHECK(t.shape == std::vector<int64_t>{2, 3});
    CHECK(t.numel() == 6);
    CHECK(lpx::io::to_float32(t) == kSix);
  }
}

TEST_CASE("npy header variants numpy and friends write") {
  const std::string data = le_bytes(kSix);
  // Unpadded header (old writers), double quotes, other key order, Python 2 longs,
  // no trailing comma, tabs.
  CHECK(parse_npy(npy_bytes(1, kF32Dict, data, false)).tensors[0].numel() == 6);
  CHECK(parse_npy(npy_bytes(1, "{\"shape\": (6,), \"fortran_order\": False, \"descr\": \"<f4\"}",
                            data))
            .tensors[0]
            .shape == std::vector<int64_t>{6});
  CHECK(parse_npy(npy_bytes(1, "{'descr':'<f4','fortran_order':False,'shape':(2L,3L)}", data))
            .tensors[0]
            .shape == std::vector<int64_t>{2, 3});
  CHECK(parse_npy(npy_bytes(1, "{'descr':\t'<f4', 'fortran_order': False, 'shape': (1, 2, 3,)}",
                            data))
            .tensors[0]
            .shape == std::vector<int64_t>{1, 2, 3});
  // v3 (a UTF-8 header) with an ASCII header, which is UTF-8 too.
  CHECK(parse_npy(npy_bytes(3, kF32Dict, data)).tensors[0].numel() == 6);
}

TEST_CASE("npy scalar, empty and other dtypes") {
  const auto scalar = parse_npy(npy_bytes(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (), }",
                                          le_bytes(std::vector<float>{42.0f})));
  CHECK(scalar.tensors[0].shape.empty());
  CHECK(scalar.tensors[0].numel() == 1);
  CHECK(lpx::io::to_float32(scalar.tensors[0]) == std::vector<float>{42.0f});

  const auto empty = parse_npy(npy_bytes(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (0,), }", ""));
  CHECK(empty.tensors[0].numel() == 0);
  CHECK(lpx::io::to_float32(empty.tensors[0]).empty());
  const auto empty2 = parse_npy(npy_bytes(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (3, 0), }", ""));
  CHECK(empty2.tensors[0].shape == std::vector<int64_t>{3, 0});

  const auto f16 = parse_npy(npy_bytes(1, "{'descr': '<f2', 'fortran_order': False, 'shape': (3,), }",
                                       le_bytes(std::vector<uint16_t>{0x3C00, 0xC000, 0x0001})));
  CHECK(f16.tensors[0].dtype == DType::f16);
  CHECK(lpx::io::to_float32(f16.tensors[0]) == std::vector<float>{1.0f, -2.0f, std::ldexp(1.0f, -24)});

  const auto u8 = parse_npy(npy_bytes(1, "{'descr': '|u1', 'fortran_order': False, 'shape': (4,), }",
                                      std::string("\x00\x01\x7f\xff", 4)));
  CHECK(u8.tensors[0].dtype == DType::u8);
  CHECK(bytes_of(u8.tensors[0]) == std::string("\x00\x01\x7f\xff", 4));
  REQUIRE_DATA_ERROR(lpx::io::to_float32(u8.tensors[0]), "codes");

  const auto u16 = parse_npy(npy_bytes(2, "{'descr': '<u2', 'fortran_order': False, 'shape': (2,), }",
                                       le_bytes(std::vector<uint16_t>{1, 65535})));
  CHECK(u16.tensors[0].dtype == DType::u16);
  REQUIRE_DATA_ERROR(lpx::io::to_float32(u16.tensors[0]), "codes");
}

TEST_CASE("npy bfloat16 saved by ml_dtypes as a 2-byte void") {
  // bf16 1.0 = 0x3F80, -3.0 = 0xC040, +inf = 0x7F80, smallest subnormal 0x0001 = 2^-133.
  const std::string data = le_bytes(std::vector<uint16_t>{0x3F80, 0xC040, 0x7F80, 0x0001});
  for (const char* descr : {"|V2", "<V2"}) {
    INFO(descr);
    const auto f = parse_npy(npy_bytes(
        1, std::string("{'descr': '") + descr + "', 'fortran_order': False, 'shape': (2, 2), }", data));
    const auto& t = f.tensors[0];
    CHECK(t.dtype == DType::bf16);
    const auto v = lpx::io::to_float32(t);
    CHECK(v[0] == 1.0f);
    CHECK(v[1] == -3.0f);
    CHECK(std::isinf(v[2]));
    CHECK(v[3] == std::ldexp(1.0f, -133));
  }
}

TEST_CASE("npy rejections") {
  const std::string data = le_bytes(kSix);
  REQUIRE_DATA_ERROR(parse_npy(""), "bad magic");
  REQUIRE_DATA_ERROR(parse_npy("\x93NUMPX\x01\x00\x10\x00"), "bad magic");
  REQUIRE_DATA_ERROR(parse_npy(std::string("\x93NUMPY\x01", 7)), "truncated");
  REQUIRE_DATA_ERROR(parse_npy(std::string("\x93NUMPY\x02\x00\x10", 9)), "truncated");
  REQUIRE_DATA_ERROR(parse_npy(std::string("\x93NUMPY\x04\x00\x10\x00", 10) + kF32Dict), "version 4.0");
  REQUIRE_DATA_ERROR(parse_npy(std::string("\x93NUMPY\x01\x01\x10\x00", 10) + kF32Dict), "version 1.1");
  // Header longer than the file.
  {
    std::string f = npy_bytes(1, kF32Dict, "");
    f[8] = '\xff';
    f[9] = '\x7f';
    REQUIRE_DATA_ERROR(parse_npy(f), "runs past the end");
    std::string g = npy_bytes(2, kF32Dict, "");
    g[11] = '\x7f';
    REQUIRE_DATA_ERROR(parse_npy(g), "runs past the end");
  }
  // Truncated header: the dict is cut off.
  REQUIRE_DATA_ERROR(parse_npy(npy_bytes(1, "{'descr': '<f4', 'fortran_order': False, 'sha", "", false)),
                     "malformed .npy header");
  REQUIRE_DATA_ERROR(parse_npy(npy_bytes(1, "{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3), }", data)),
                     "fortran_order");
  for (const char* dt : {"<f8", ">f4", "<i4", "|O", "<u1", "|b1", "|V1", "<c8"}) {
    INFO(dt);
    const auto text = std::string("{'descr': '") + dt + "', 'fortran_order': False, 'shape': (6,), }";
    try {
      parse_npy(npy_bytes(1, text, data));
      FAIL("accepted " << dt);
    } catch (const DataError& e) {
      const std::string msg = e.what();
      CHECK_THAT(msg, Catch::Contains(std::string("'") + dt + "'"));
      CHECK_THAT(msg, Catch::Contains("'<f4' float32"));
      CHECK_THAT(msg, Catch::Contains("bfloat16"));
    }
  }
  REQUIRE_DATA_ERROR(parse_npy(npy_bytes(1, "{'descr': [('a', '<f4'), ('b', '<f4')], 'fortran_order': False, 'shape': (3,), }", data)),
                     "structured");
  REQUIRE_DATA_ERROR(parse_npy(npy_bytes(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (-2, -3), }", data)),
                     "negative dimension");
  REQUIRE_DATA_ERROR(parse_npy(npy_bytes(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 4294967296), }", data)),
                     "overflows");
  REQUIRE_DATA_ERROR(parse_npy(npy_bytes(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (4611686018427387904,), }", data)),
                     "overflows");  // numel fits int64, bytes do not fit 64 bits
  REQUIRE_DATA_ERROR(parse_npy(npy_bytes(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,), }", data)),
                     "too large");
  REQUIRE_DATA_ERROR(parse_npy(npy_bytes(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (6), }", data)),
                     "not a tuple");
  REQUIRE_DATA_ERROR(parse_npy(npy_bytes(1, "{'descr': '<f4', 'fortran_order': False, 'shape': [6], }", data)),
                     "not a tuple");
  REQUIRE_DATA_ERROR(parse_npy(npy_bytes(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (6,), }", data.substr(0, 20))),
                     "truncated .npy data");
  REQUIRE_DATA_ERROR(parse_npy(npy_bytes(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (6,), }", data + "xy")),
                     "trailing bytes");
  REQUIRE_DATA_ERROR(parse_npy(npy_bytes(1, "{'descr': '<f4', 'shape': (6,), }", data)), "lacks the key 'fortran_order'");
  REQUIRE_DATA_ERROR(parse_npy(npy_bytes(1, "{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (6,)}", data)),
                     "repeats the key 'descr'");
  REQUIRE_DATA_ERROR(parse_npy(npy_bytes(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (6,), 'extra': 1}", data)),
                     "unexpected key 'extra'");
  REQUIRE_DATA_ERROR(parse_npy(npy_bytes(1, "['descr', '<f4']", data)), "not a dict");
  REQUIRE_DATA_ERROR(parse_npy(npy_bytes(1, std::string(200, '(') + std::string(200, ')'), data)), "too deep");
  REQUIRE_DATA_ERROR(parse_npy(npy_bytes(1, kF32Dict + " junk", data)), "unexpected text");
  REQUIRE_DATA_ERROR(parse_npy(npy_bytes(3, "{'descr': '<f4\xff', 'fortran_order': False, 'shape': (6,), }", data)),
                     "UTF-8");
}

namespace {
std::string st_entry(const std::string& name, const std::string& dtype, const std::string& shape,
                     uint64_t begin, uint64_t end) {
  return "\"" + name + "\":{\"dtype\":\"" + dtype + "\",\"shape\":" + shape +
         ",\"data_offsets\":[" + std::to_string(begin) + "," + std::to_string(end) + "]}";
}
}  // namespace

TEST_CASE("safetensors reads every dtype, metadata, selection, in data order") {
  // Header order differs from data order on purpose: b's bytes come first.
  std::string data;
  const std::string b_bytes = le_bytes(std::vector<uint16_t>{0x3F80, 0x4000});  // bf16 1, 2
  const std::string a_bytes = le_bytes(std::vector<float>{0.5f, -1.0f, 8.0f});
  const std::string h_bytes = le_bytes(std::vector<uint16_t>{0x3C00});         // f16 1
  const std::string e4_bytes = std::string("\x7e\x01\x38", 3);                  // 448, 2^-9, 1
  const std::string e5_bytes = std::string("\x7b\x7c\x01", 3);                  // 57344, inf, 2^-16
  const std::string u8_bytes = std::string("\x05", 1);
  const std::string u16_bytes = le_bytes(std::vector<uint16_t>{513});
  data = b_bytes + a_bytes + h_bytes + e4_bytes + e5_bytes + u8_bytes + u16_bytes;
  uint64_t o = 0;
  auto next = [&](size_t n) { const uint64_t b = o; o += n; return std::pair<uint64_t, uint64_t>(b, o); };
  const auto rb = next(4), ra = next(12), rh = next(2), r4 = next(3), r5 = next(3), ru = next(1), rw = next(2);
  const std::string json = "{\"__metadata__\":{\"format\":\"pt\",\"note\":\"x\"}," +
                           st_entry("a", "F32", "[3]", ra.first, ra.second) + "," +
                           st_entry("b", "BF16", "[1,2]", rb.first, rb.second) + "," +
                           st_entry("h", "F16", "[]", rh.first, rh.second) + "," +
                           st_entry("e4", "F8_E4M3", "[3]", r4.first, r4.second) + "," +
                           st_entry("e5", "F8_E5M2", "[3]", r5.first, r5.second) + "," +
                           st_entry("u", "U8", "[1]", ru.first, ru.second) + "," +
                           st_entry("w", "U16", "[1,1]", rw.first, rw.second) + "," +
                           st_entry("empty", "F32", "[0,4]", 4, 4) + "}";
  const std::string file = st_bytes(json, data);
  const auto f = parse_st(file);
  REQUIRE(f.tensors.size() == 8);
  std::vector<std::string> order;
  for (const auto& t : f.tensors) order.push_back(t.name);
  CHECK(order == std::vector<std::string>{"b", "empty", "a", "h", "e4", "e5", "u", "w"});
  CHECK(f.metadata == std::vector<std::pair<std::string, std::string>>{{"format", "pt"}, {"note", "x"}});
  CHECK(f.storage == nullptr);

  CHECK(lpx::io::to_float32(f.tensors[0]) == std::vector<float>{1.0f, 2.0f});
  CHECK(f.tensors[0].shape == std::vector<int64_t>{1, 2});
  CHECK(f.tensors[1].numel() == 0);
  CHECK(lpx::io::to_float32(f.tensors[2]) == std::vector<float>{0.5f, -1.0f, 8.0f});
  CHECK(lpx::io::to_float32(f.tensors[3]) == std::vector<float>{1.0f});
  CHECK(f.tensors[3].shape.empty());
  CHECK(lpx::io::to_float32(f.tensors[4]) == std::vector<float>{448.0f, std::ldexp(1.0f, -9), 1.0f});
  const auto e5 = lpx::io::to_float32(f.tensors[5]);
  CHECK(e5[0] == 57344.0f);
  CHECK(std::isinf(e5[1]));
  CHECK(e5[2] == std::ldexp(1.0f, -16));
  CHECK(f.tensors[6].dtype == DType::u8);
  CHECK(bytes_of(f.tensors[7]) == u16_bytes);

  const auto sel = parse_st(file, {"a", "u"});
  REQUIRE(sel.tensors.size() == 2);
  CHECK(sel.tensors[0].name == "a");
  CHECK(sel.tensors[1].name == "u");
  REQUIRE_DATA_ERROR(parse_st(file, {"a", "nope"}), "no tensor named 'nope' (available: a, b, e4, e5, empty, h, u, w)");

  // The same bytes through a file: the reader maps it and names the file in errors.
  TempDir dir;
  write_file(dir.file("m.safetensors"), file);
  const auto g = lpx::io::read_tensor_file(dir.file("m.safetensors"));
  CHECK(g.tensors.size() == 8);
  CHECK(g.storage != nullptr);
  CHECK(g.tensors[0].bytes.data() == static_cast<const std::byte*>(g.storage.get()) + 8 + json.size());
  REQUIRE_DATA_ERROR(lpx::io::read_tensor_file(dir.file("m.safetensors"), {}, {"zz"}),
                     dir.file("m.safetensors") + ": no tensor named 'zz'");
}

TEST_CASE("safetensors rejections") {
  const std::string d8(8, '\0');
  const auto one = [](const std::string& entry) { return "{" + entry + "}"; };
  // Built with += rather than "{" + temporary: GCC 12 warns falsely (-Wrestrict) on that.
  const auto two = [](const std::string& a, const std::string& b) {
    std::string s = "{";
    s += a;
    s += ',';
    s += b;
    s += '}';
    return s;
  };
  REQUIRE_DATA_ERROR(parse_st(""), "no 8-byte header length");
  REQUIRE_DATA_ERROR(parse_st("1234567"), "no 8-byte header length");
  REQUIRE_DATA_ERROR(parse_st(u_le(200'000'000, 8) + "{}"), "absurd");
  REQUIRE_DATA_ERROR(parse_st(u_le(~uint64_t{0}, 8) + "{}"), "absurd");
  REQUIRE_DATA_ERROR(parse_st(u_le(50, 8) + "{}"), "runs past the end");
  REQUIRE_DATA_ERROR(parse_st(st_bytes("", "")), "does not start with '{'");
  REQUIRE_DATA_ERROR(parse_st(st_bytes(" {}", "")), "does not start with '{'");
  REQUIRE_DATA_ERROR(parse_st(st_bytes("{\"a\":", "")), "invalid JSON");
  REQUIRE_DATA_ERROR(parse_st(st_bytes("{} []", "")), "invalid JSON");
  REQUIRE_DATA_ERROR(parse_st(st_bytes("{\"a\":\"\xff\"}", "")), "invalid JSON");
  REQUIRE_DATA_ERROR(parse_st(st_bytes("{\"a\":[1,2]}", "")), "tensor 'a': entry is not a JSON object");
  REQUIRE_DATA_ERROR(parse_st(st_bytes("{\"a\":{\"shape\":[2],\"data_offsets\":[0,8]}}", d8)), "missing key 'dtype'");
  REQUIRE_DATA_ERROR(parse_st(st_bytes("{\"a\":{\"dtype\":\"F32\",\"data_offsets\":[0,8]}}", d8)), "missing key 'shape'");
  REQUIRE_DATA_ERROR(parse_st(st_bytes("{\"a\":{\"dtype\":\"F32\",\"shape\":[2]}}", d8)), "missing key 'data_offsets'");
  REQUIRE_DATA_ERROR(parse_st(st_bytes(one(st_entry("a", "F64", "[1]", 0, 8)), d8)),
                     "unsupported dtype 'F64' (supported: F32, F16, BF16, F8_E4M3, F8_E5M2, U8, U16)");
  REQUIRE_DATA_ERROR(parse_st(st_bytes("{\"a\":{\"dtype\":7,\"shape\":[2],\"data_offsets\":[0,8]}}", d8)), "dtype is not a string");
  REQUIRE_DATA_ERROR(parse_st(st_bytes(one(st_entry("a", "F32", "[-2]", 0, 8)), d8)), "negative dimension");
  REQUIRE_DATA_ERROR(parse_st(st_bytes(one(st_entry("a", "F32", "[2.0]", 0, 8)), d8)), "not an integer");
  REQUIRE_DATA_ERROR(parse_st(st_bytes(one(st_entry("a", "F32", "2", 0, 8)), d8)), "shape is not an array");
  REQUIRE_DATA_ERROR(parse_st(st_bytes("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0]}}", d8)), "data_offsets");
  REQUIRE_DATA_ERROR(parse_st(st_bytes("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,-8]}}", d8)), "data_offsets");
  REQUIRE_DATA_ERROR(parse_st(st_bytes(one(st_entry("a", "F32", "[2]", 0, 16)), d8)), "past the data section");
  REQUIRE_DATA_ERROR(parse_st(st_bytes(one(st_entry("a", "F32", "[2]", 8, 0)), d8)), "begin 8 > end 0");
  REQUIRE_DATA_ERROR(parse_st(st_bytes(one(st_entry("a", "F32", "[3]", 0, 8)), d8)), "needs 12 bytes, data_offsets give 8");
  REQUIRE_DATA_ERROR(parse_st(st_bytes(one(st_entry("a", "F32", "[4294967296,4294967296]", 0, 8)), d8)), "overflows");
  REQUIRE_DATA_ERROR(parse_st(st_bytes(one(st_entry("a", "F32", "[18446744073709551615]", 0, 8)), d8)), "too large");
  REQUIRE_DATA_ERROR(parse_st(st_bytes(two(st_entry("a", "F32", "[2]", 0, 8), st_entry("b", "F32", "[1]", 4, 8)), d8)),
                     "tensors 'a' and 'b' overlap");
  REQUIRE_DATA_ERROR(parse_st(st_bytes(two(st_entry("a", "F32", "[2]", 0, 8), st_entry("b", "F32", "[0]", 4, 4)), d8)),
                     "overlap");
  REQUIRE_DATA_ERROR(parse_st(st_bytes(two(st_entry("a", "F32", "[1]", 0, 4), st_entry("b", "F32", "[1]", 8, 12)),
                                       std::string(12, '\0'))),
                     "bytes 4 to 8 of the data section belong to no tensor");
  REQUIRE_DATA_ERROR(parse_st(st_bytes(one(st_entry("a", "F32", "[1]", 0, 4)), d8)), "bytes 4 to 8 of the data section belong to no tensor");
  REQUIRE_DATA_ERROR(parse_st(st_bytes("{}", "x")), "bytes 0 to 1");
  REQUIRE_DATA_ERROR(parse_st(st_bytes(two(st_entry("a", "F32", "[1]", 0, 4), st_entry("a", "F32", "[1]", 4, 8)), d8)),
                     "repeats the key 'a'");
  REQUIRE_DATA_ERROR(parse_st(st_bytes("{\"__metadata__\":{\"k\":1}}", "")), "not a string");
  REQUIRE_DATA_ERROR(parse_st(st_bytes("{\"__metadata__\":[]}", "")), "__metadata__ is not an object");
  // Valid edge cases: no tensors at all, header padded with spaces.
  CHECK(parse_st(st_bytes("{}", "")).tensors.empty());
  CHECK(parse_st(st_bytes(one(st_entry("a", "U8", "[1]", 0, 1)) + "     ", "z")).tensors.size() == 1);
}

TEST_CASE("raw float32 files") {
  TempDir dir;
  const std::string path = dir.file("x.f32");
  write_file(path, le_bytes(kSix));
  const auto f = lpx::io::read_tensor_file(path);
  CHECK(f.tensors[0].shape == std::vector<int64_t>{6});
  CHECK(lpx::io::to_float32(f.tensors[0]) == kSix);
  CHECK(lpx::io::read_tensor_file(path, {3, 2}).tensors[0].shape == std::vector<int64_t>{3, 2});
  REQUIRE_DATA_ERROR(lpx::io::read_tensor_file(path, {4, 2}), "shape 4x2 does not match the 6 float32 values");
  REQUIRE_DATA_ERROR(lpx::io::read_tensor_file(path, {4294967296, 4294967296}), "does not match");

  write_file(dir.file("odd.bin"), "12345");
  REQUIRE_DATA_ERROR(lpx::io::read_tensor_file(dir.file("odd.bin")), "size 5 is not a multiple of 4 bytes");
  write_file(dir.file("empty.f32"), "");
  REQUIRE_DATA_ERROR(lpx::io::read_tensor_file(dir.file("empty.f32")), dir.file("empty.f32") + ": empty input");
  write_file(dir.file("empty.npy"), "");
  REQUIRE_DATA_ERROR(lpx::io::read_tensor_file(dir.file("empty.npy")), "bad magic");
  REQUIRE_DATA_ERROR(lpx::io::read_tensor_file(dir.file("missing.f32")), "No such file or directory");
  REQUIRE_DATA_ERROR(lpx::io::read_tensor_file(dir.path.string()), "is a directory");
  // The extension decides, case-insensitively; a .NPY that is not one says so.
  write_file(dir.file("UPPER.NPY"), le_bytes(kSix));
  REQUIRE_DATA_ERROR(lpx::io::read_tensor_file(dir.file("UPPER.NPY")), "bad magic");
}

TEST_CASE("stdin: raw, .npy by magic, empty") {
  TempDir dir;
  write_file(dir.file("raw"), le_bytes(kSix));
  with_stdin(dir.file("raw"), [] {
    const auto f = lpx::io::read_tensor_file("-", {2, 3});
    CHECK(f.tensors[0].shape == std::vector<int64_t>{2, 3});
    CHECK(lpx::io::to_float32(f.tensors[0]) == kSix);
    CHECK(f.storage != nullptr);
  });
  write_file(dir.file("npy"), npy_bytes(1, kF32Dict, le_bytes(kSix)));
  with_stdin(dir.file("npy"), [] {
    const auto f = lpx::io::read_tensor_file("-");
    CHECK(f.tensors[0].shape == std::vector<int64_t>{2, 3});
    CHECK(lpx::io::to_float32(f.tensors[0]) == kSix);
  });
  write_file(dir.file("empty"), "");
  with_stdin(dir.file("empty"), [] { REQUIRE_DATA_ERROR(lpx::io::read_tensor_file("-"), "<stdin>: empty input"); });
}

namespace {
// Independent reference: the value of a sign/exponent/mantissa code from its definition.
// `fn`: no Inf, only S.1..1 (all exponent and mantissa bits set) is NaN (OCP E4M3).
float reference_value(uint32_t code, int ebits, int mbits, bool fn) {
  const uint32_t m = code & ((1u << mbits) - 1);
  const uint32_t e = (code >> mbits) & ((1u << ebits) - 1);
  const bool negative = (code >> (ebits + mbits)) & 1u;
  const int bias = (1 << (ebits - 1)) - 1;
  const uint32_t emax_field = (1u << ebits) - 1;
  float v = 0;
  if (e == emax_field && !fn) {
    v = m == 0 ? INFINITY : NAN;
  } else if (fn && e == emax_field && m == (1u << mbits) - 1) {
    v = NAN;
  } else if (e == 0) {
    v = std::ldexp(static_cast<float>(m), 1 - bias - mbits);
  } else {
    v = std::ldexp(static_cast<float>(m + (1u << mbits)), static_cast<int>(e) - bias - mbits);
  }
  return negative ? -v : v;
}

void check_all_codes(const std::vector<float>& got, int ebits, int mbits, bool fn) {
  for (uint32_t c = 0; c < got.size(); ++c) {
    const float want = reference_value(c, ebits, mbits, fn);
    INFO("code " << c);
    if (std::isnan(want)) {
      REQUIRE(std::isnan(got[c]));
    } else {
      REQUIRE(std::bit_cast<uint32_t>(got[c]) == std::bit_cast<uint32_t>(want));
    }
  }
}
}  // namespace

TEST_CASE("to_float32 is exact for every 8- and 16-bit float code") {
  // Every code against its definition (reference_value), plus spot values; bf16 must keep
  // the exact bit pattern, NaN payloads included (it is the top half of a float32).
  std::vector<uint16_t> all(65536);
  for (uint32_t i = 0; i < 65536; ++i) all[i] = static_cast<uint16_t>(i);
  lpx::io::TensorRef t;
  t.dtype = DType::bf16;
  t.shape = {65536};
  const std::string b = le_bytes(all);
  t.bytes = span_of(b);
  const auto v = lpx::io::to_float32(t);
  for (uint32_t i = 0; i < 65536; ++i) REQUIRE(std::bit_cast<uint32_t>(v[i]) == i << 16);

  t.dtype = DType::f16;
  const auto h = lpx::io::to_float32(t);
  check_all_codes(h, 5, 10, false);
  CHECK(h[0x7BFF] == 65504.0f);
  CHECK(std::isinf(h[0x7C00]));
  CHECK(std::isnan(h[0x7E00]));
  CHECK(h[0x0400] == std::ldexp(1.0f, -14));
  CHECK(std::signbit(h[0x8000]));

  std::string codes(256, '\0');
  for (int i = 0; i < 256; ++i) codes[static_cast<size_t>(i)] = static_cast<char>(i);
  lpx::io::TensorRef e;
  e.dtype = DType::f8_e4m3;
  e.shape = {256};
  e.bytes = span_of(codes);
  const auto e4 = lpx::io::to_float32(e);
  check_all_codes(e4, 4, 3, true);
  CHECK(e4[0x7E] == 448.0f);
  CHECK(std::isnan(e4[0x7F]));
  CHECK(std::isnan(e4[0xFF]));
  CHECK(e4[0x78] == 256.0f);  // no Inf in e4m3fn: S.1111.000 is finite
  CHECK(e4[0x08] == std::ldexp(1.0f, -6));
  e.dtype = DType::f8_e5m2;
  const auto e5 = lpx::io::to_float32(e);
  check_all_codes(e5, 5, 2, false);
  CHECK(std::isinf(e5[0x7C]));
  CHECK(std::isnan(e5[0x7D]));
  CHECK(e5[0xFB] == -57344.0f);
}

TEST_CASE("write_npy round trips and lays out the file as numpy does") {
  TempDir dir;
  const std::string f32 = le_bytes(kSix);
  const std::string h16 = le_bytes(std::vector<uint16_t>{0x3C00, 0x0001, 0xFBFF});
  const std::string u8 = std::string("\x00\xff\x10", 3);
  struct Case {
    DType dtype;
    std::vector<int64_t> shape;
    const std::string* bytes;
    const char* descr;
  };
  const std::vector<Case> cases = {{DType::f32, {2, 3}, &f32, "'<f4'"}, {DType::f16, {3}, &h16, "'<f2'"},
                                   {DType::bf16, {3, 1}, &h16, "'<V2'"}, {DType::u16, {3}, &h16, "'<u2'"},
                                   {DType::u8, {3}, &u8, "'|u1'"},       {DType::f32, {}, &f32, "'<f4'"},
                                   {DType::f32, {0}, &f32, "'<f4'"}};
  for (const auto& c : cases) {
    lpx::io::TensorOut out;
    out.dtype = c.dtype;
    out.shape = c.shape;
    int64_t n = 1;
    for (auto d : c.shape) n *= d;
    out.bytes = span_of(*c.bytes).first(static_cast<size_t>(n) * lpx::io::dtype_size(c.dtype));
    const std::string path = dir.file("out.npy");
    lpx::io::write_npy(path, out);
    const std::string file = read_file(path);
    INFO(lpx::io::dtype_name(c.dtype) << " " << file.substr(10, 70));
    CHECK(file.substr(0, 8) == std::string("\x93NUMPY\x01\x00", 8));
    const size_t hlen = static_cast<unsigned char>(file[8]) | (static_cast<size_t>(static_cast<unsigned char>(file[9])) << 8);
    CHECK((10 + hlen) % 64 == 0);
    CHECK(file[10 + hlen - 1] == '\n');
    CHECK_THAT(file, Catch::Contains(std::string("'descr': ") + c.descr));
    CHECK(file.size() == 10 + hlen + out.bytes.size());
    const auto back = lpx::io::read_tensor_file(path);
    REQUIRE(back.tensors.size() == 1);
    CHECK(back.tensors[0].dtype == c.dtype);
    CHECK(back.tensors[0].shape == c.shape);
    CHECK(bytes_of(back.tensors[0]) == std::string(reinterpret_cast<const char*>(out.bytes.data()), out.bytes.size()));
  }
  // The exact header numpy 1.x/2.x writes for a (2, 3) float32 array.
  lpx::io::TensorOut out{"", DType::f32, {2, 3}, span_of(f32)};
  lpx::io::write_npy(dir.file("a.npy"), out);
  const std::string numpy_dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }";
  CHECK(read_file(dir.file("a.npy")).substr(10, numpy_dict.size()) == numpy_dict);
  // float8 has no .npy descr that reads back as itself.
  lpx::io::TensorOut f8{"", DType::f8_e4m3, {3}, span_of(u8)};
  REQUIRE_DATA_ERROR(lpx::io::write_npy(dir.file("f8.npy"), f8), "float8_e4m3fn");
  CHECK_FALSE(fs::exists(dir.file("f8.npy")));
  // Bytes that do not match the shape are a programming error.
  lpx::io::TensorOut bad{"", DType::f32, {7}, span_of(f32)};
  CHECK_THROWS_AS(lpx::io::write_npy(dir.file("bad.npy"), bad), std::invalid_argument);
  // A header too long for version 1.0's u16 length switches to 2.0.
  std::vector<int64_t> many(30000, 1);
  lpx::io::TensorOut wide{"", DType::f32, many, span_of(f32).first(4)};
  lpx::io::write_npy(dir.file("wide.npy"), wide);
  const std::string w = read_file(dir.file("wide.npy"));
  CHECK(w[6] == '\x02');
  CHECK(lpx::io::read_tensor_file(dir.file("wide.npy")).tensors[0].shape.size() == 30000);
}

TEST_CASE("write_safetensors round trips every dtype with metadata") {
  TempDir dir;
  const std::string f32 = le_bytes(kSix);
  const std::string b16 = le_bytes(std::vector<uint16_t>{0x3F80, 0xC040});
  const std::string c8 = std::string("\x7e\x01\x38", 3);
  std::vector<lpx::io::TensorOut> ts = {
      {"z.weight", DType::f32, {2, 3}, span_of(f32)}, {"bf", DType::bf16, {2}, span_of(b16)},
      {"half", DType::f16, {1, 2}, span_of(b16)},     {"e4", DType::f8_e4m3, {3}, span_of(c8)},
      {"e5", DType::f8_e5m2, {3}, span_of(c8)},       {"u8", DType::u8, {1, 3}, span_of(c8)},
      {"u16", DType::u16, {2}, span_of(b16)},         {"nothing", DType::f32, {0}, {}}};
  const std::string path = dir.file("t.safetensors");
  lpx::io::write_safetensors(path, ts, {{"format", "pt"}, {"lpx", "1"}});
  const std::string file = read_file(path);
  uint64_t n = 0;
  for (int i = 0; i < 8; ++i) n |= static_cast<uint64_t>(static_cast<unsigned char>(file[static_cast<size_t>(i)])) << (8 * i);
  CHECK(n % 8 == 0);
  CHECK(file[8] == '{');
  CHECK_THAT(file.substr(8, n), Catch::Contains("\"__metadata__\":{\"format\":\"pt\",\"lpx\":\"1\"}"));
  const auto back = lpx::io::read_tensor_file(path);
  // Written in the given order, so data-offset order equals it (the empty tensor sorts
  // before the tensor that starts at the same offset).
  std::vector<std::string> names;
  for (const auto& t : back.tensors) names.push_back(t.name);
  CHECK(names == std::vector<std::string>{"z.weight", "bf", "half", "e4", "e5", "u8", "u16", "nothing"});
  for (const auto& t : back.tensors) {
    const auto it = std::find_if(ts.begin(), ts.end(), [&](const auto& o) { return o.name == t.name; });
    REQUIRE(it != ts.end());
    CHECK(t.dtype == it->dtype);
    CHECK(t.shape == it->shape);
    CHECK(bytes_of(t) == std::string(reinterpret_cast<const char*>(it->bytes.data()), it->bytes.size()));
  }
  CHECK(back.metadata == std::vector<std::pair<std::string, std::string>>{{"format", "pt"}, {"lpx", "1"}});

  std::vector<lpx::io::TensorOut> dup = {ts[0], ts[0]};
  CHECK_THROWS_AS(lpx::io::write_safetensors(dir.file("d.safetensors"), dup), std::invalid_argument);
  std::vector<lpx::io::TensorOut> reserved = {{"__metadata__", DType::u8, {1}, span_of(c8).first(1)}};
  CHECK_THROWS_AS(lpx::io::write_safetensors(dir.file("r.safetensors"), reserved), std::invalid_argument);
  CHECK_FALSE(fs::exists(dir.file("d.safetensors")));
}

TEST_CASE("write_raw round trips and writers are atomic") {
  TempDir dir;
  const std::string f32 = le_bytes(kSix);
  const std::string path = dir.file("r.f32");
  write_file(path, "old contents");
  lpx::io::write_raw(path, span_of(f32));
  CHECK(read_file(path) == f32);
  CHECK(lpx::io::to_float32(lpx::io::read_tensor_file(path).tensors[0]) == kSix);

  // Unwritable destinations: a missing directory, a directory in the way of the rename,
  // and (when not running as root) a read-only directory. Nothing may be left behind.
  const std::string missing = dir.file("no/such/dir/out.npy");
  REQUIRE_DATA_ERROR(lpx::io::write_raw(missing, span_of(f32)), missing);
  lpx::io::TensorOut out{"", DType::f32, {6}, span_of(f32)};
  REQUIRE_DATA_ERROR(lpx::io::write_npy(missing, out), missing);
  REQUIRE_DATA_ERROR(lpx::io::write_safetensors(missing, {out}), missing);
  fs::create_directory(dir.file("blocker.npy"));
  REQUIRE_DATA_ERROR(lpx::io::write_npy(dir.file("blocker.npy"), out), dir.file("blocker.npy") + ": cannot rename");
  CHECK(fs::is_directory(dir.file("blocker.npy")));
  // procfs refuses new files even to root, so this case runs everywhere.
  REQUIRE_DATA_ERROR(lpx::io::write_raw("/proc/self/lpx_out.f32", span_of(f32)), "/proc/self/lpx_out.f32");
  CHECK_FALSE(fs::exists("/proc/self/lpx_out.f32"));
  if (::geteuid() != 0) {
    fs::create_directory(dir.file("ro"));
    fs::permissions(dir.file("ro"), fs::perms::owner_read | fs::perms::owner_exec);
    REQUIRE_DATA_ERROR(lpx::io::write_npy(dir.file("ro/out.npy"), out), dir.file("ro/out.npy"));
    CHECK(fs::is_empty(dir.file("ro")));
    fs::permissions(dir.file("ro"), fs::perms::owner_all);
  }
  for (const auto& entry : fs::directory_iterator(dir.path)) {
    INFO(entry.path());
    CHECK(entry.path().string().find(".tmp.") == std::string::npos);
  }
}

TEST_CASE("a 64 MiB file is mapped, not copied") {
  TempDir dir;
  const size_t n = size_t{64} << 20;
  std::vector<std::byte> big(n);
  for (size_t i = 0; i < n; i += 4096) big[i] = std::byte{0x3F};
  const std::string path = dir.file("big.f32");
  lpx::io::write_raw(path, big);
  big.clear();
  big.shrink_to_fit();

  const auto f = lpx::io::read_tensor_file(path);
  REQUIRE(f.storage != nullptr);
  const auto* data = f.tensors[0].bytes.data();
  CHECK(f.tensors[0].bytes.size() == n);
  CHECK(data == static_cast<const std::byte*>(f.storage.get()));
  // The kernel's own account: the tensor's bytes lie in a mapping of this very file.
  const auto address = reinterpret_cast<uintptr_t>(data);
  std::ifstream maps("/proc/self/maps");
  std::string line;
  bool found = false;
  while (std::getline(maps, line)) {
    uintptr_t lo = 0, hi = 0;
    if (std::sscanf(line.c_str(), "%lx-%lx", &lo, &hi) != 2) continue;
    if (address >= lo && address + n <= hi) {
      found = line.find(fs::canonical(path).string()) != std::string::npos;
      INFO(line);
      CHECK(line.find(" r--p ") != std::string::npos);  // read-only, private
      break;
    }
  }
  CHECK(found);

  // A .npy of the same size maps too, with the data at the 64-byte aligned offset.
  lpx::io::TensorOut out{"", DType::f32, {16, int64_t{1} << 20}, f.tensors[0].bytes};
  lpx::io::write_npy(dir.file("big.npy"), out);
  const auto g = lpx::io::read_tensor_file(dir.file("big.npy"));
  CHECK(g.tensors[0].bytes.data() == static_cast<const std::byte*>(g.storage.get()) + 128);
  CHECK(g.tensors[0].numel() == int64_t{16} << 20);
}

TEST_CASE("fuzz corpus and regression seeds parse or fail cleanly") {
  // The seeds under tests/fuzz/corpus, including inputs that once crashed a fuzzer, run
  // here too so that every build (not only the clang fuzz build) replays them.
  const fs::path root = fs::path(LPX_TEST_DATA_DIR).parent_path() / "fuzz" / "corpus";
  int files = 0;
  for (const char* kind : {"npy", "safetensors"}) {
    if (!fs::exists(root / kind)) continue;
    for (const auto& entry : fs::directory_iterator(root / kind)) {
      const std::string bytes = read_file(entry.path().string());
      const std::string name = entry.path().filename().string();
      INFO(entry.path());
      // Seeds named bad-* must be rejected, valid-* and v<N>-* accepted; regress-* (fuzzer
      // finds) only have to end in a value or a DataError, never in a crash.
      bool parsed = false;
      try {
        const auto f = std::string(kind) == "npy" ? parse_npy(bytes) : parse_st(bytes);
        for (const auto& t : f.tensors)
          if (t.dtype != DType::u8 && t.dtype != DType::u16) (void)lpx::io::to_float32(t);
        parsed = true;
      } catch (const DataError&) {
      }
      if (name.rfind("bad-", 0) == 0) CHECK_FALSE(parsed);
      if (name.rfind("valid-", 0) == 0 || name.rfind("v1-", 0) == 0 || name.rfind("v2-", 0) == 0 ||
          name.rfind("v3-", 0) == 0)
        CHECK(parsed);
      ++files;
    }
  }
  CHECK(files > 0);
}

TEST_CASE("OutputFile writes in pieces the bytes the whole-tensor writers write") {
  TempDir dir;
  std::vector<float> v(1000);
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i) * 0.25f - 7.0f;
  const std::vector<int64_t> shape = {10, 100};
  const auto bytes = std::as_bytes(std::span<const float>(v));
  for (const char* ext : {".npy", ".safetensors", ".f32"}) {
    INFO(ext);
    const std::string whole = dir.file(std::string("whole") + ext);
    const std::string pieces = dir.file(std::string("pieces") + ext);
    const lpx::io::TensorOut t{"values", lpx::io::DType::f32, shape, bytes};
    if (std::string(ext) == ".npy") lpx::io::write_npy(whole, t);
    else if (std::string(ext) == ".safetensors") lpx::io::write_safetensors(whole, {t});
    else lpx::io::write_raw(whole, bytes);
    {
      lpx::io::OutputFile out(pieces, lpx::io::DType::f32, shape, "values");
      out.append(bytes.subspan(0, 1234));  // not a whole element: pieces are plain bytes
      out.append(bytes.subspan(1234, 0));
      out.append(bytes.subspan(1234));
      out.commit();
    }
    CHECK(read_file(pieces) == read_file(whole));
  }
}

TEST_CASE("OutputFile's several-tensor form writes write_safetensors' bytes") {
  TempDir dir;
  std::vector<uint8_t> codes(300);
  for (size_t i = 0; i < codes.size(); ++i) codes[i] = static_cast<uint8_t>(i * 7);
  const std::vector<float> scales = {0.5f, 2.0f, 8.0f};
  const std::vector<lpx::io::TensorOut> tensors = {
      {"codes", lpx::io::DType::u8, {300}, std::as_bytes(std::span<const uint8_t>(codes))},
      {"scales", lpx::io::DType::f32, {3, 1}, std::as_bytes(std::span<const float>(scales))}};
  const std::vector<std::pair<std::string, std::string>> meta = {{"format", "e2m1:b32:e8m0"},
                                                                 {"shape", "300"}};
  const std::string whole = dir.file("whole.safetensors"), pieces = dir.file("pieces.safetensors");
  lpx::io::write_safetensors(whole, tensors, meta);
  {
    lpx::io::OutputFile out(pieces, tensors, meta);
    out.append(tensors[0].bytes.subspan(0, 100));
    out.append(tensors[0].bytes.subspan(100));
    out.append(tensors[1].bytes);
    out.commit();
  }
  CHECK(read_file(pieces) == read_file(whole));
  {
    lpx::io::OutputFile out(dir.file("short.safetensors"), tensors, meta);
    out.append(tensors[0].bytes);
    CHECK_THROWS_AS(out.commit(), std::invalid_argument);  // the scales never came
  }
  CHECK(!fs::exists(dir.file("short.safetensors")));
  CHECK_THROWS_AS(lpx::io::OutputFile(dir.file("two.npy"), tensors, meta), std::invalid_argument);
  CHECK(!fs::exists(dir.file("two.npy")));
}

TEST_CASE("OutputFile leaves no file behind unless every byte was appended and committed") {
  TempDir dir;
  const std::vector<float> v(16, 1.5f);
  const auto bytes = std::as_bytes(std::span<const float>(v));
  const std::string path = dir.file("out.npy");
  const auto no_files = [&] { return fs::is_empty(dir.path); };
  {
    lpx::io::OutputFile out(path, lpx::io::DType::f32, {16});
    out.append(bytes.subspan(0, 8));
  }  // destroyed before commit: the temporary is removed
  CHECK(no_files());
  {
    lpx::io::OutputFile out(path, lpx::io::DType::f32, {16});
    out.append(bytes.subspan(0, 60));
    CHECK_THROWS_AS(out.commit(), std::invalid_argument);  // 4 bytes short
  }
  CHECK(no_files());
  {
    lpx::io::OutputFile out(path, lpx::io::DType::f32, {16});
    CHECK_THROWS_AS(out.append(std::as_bytes(std::span<const float>(std::vector<float>(17)))),
                    std::invalid_argument);  // one element too many
  }
  CHECK(no_files());
  REQUIRE_DATA_ERROR(lpx::io::OutputFile(dir.file("f8.npy"), lpx::io::DType::f8_e4m3, {4}),
                     "no unambiguous .npy dtype");
  CHECK(no_files());
}

TEST_CASE("stdin: .safetensors is detected by its header, raw data is not mistaken for one") {
  // Before: stdin was .npy by magic or else raw float32, so a .safetensors piped in was
  // read as floats (its header bytes included) without a word.
  TempDir dir;
  std::string json = "{\"w\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,24]}}";
  json.append((8 - json.size() % 8) % 8, ' ');  // as writers pad it
  const std::string st = st_bytes(json, le_bytes(kSix));
  write_file(dir.file("st"), st);
  with_stdin(dir.file("st"), [] {
    const auto f = lpx::io::read_tensor_file("-");
    CHECK(f.kind == lpx::io::FileKind::safetensors);
    REQUIRE(f.tensors.size() == 1);
    CHECK(f.tensors[0].name == "w");
    CHECK(f.tensors[0].shape == std::vector<int64_t>{2, 3});
    CHECK(lpx::io::to_float32(f.tensors[0]) == kSix);
  });
  with_stdin(dir.file("st"), [] {
    REQUIRE_DATA_ERROR(lpx::io::read_tensor_file("-", {}, {"v"}), "<stdin>: no tensor named 'v'");
  });
  CHECK(lpx::io::detect_kind(span_of(st)) == lpx::io::FileKind::safetensors);
  CHECK(lpx::io::detect_kind(span_of(npy_bytes(1, kF32Dict, le_bytes(kSix)))) == lpx::io::FileKind::npy);
  // Raw float32 data: zeros, the sample, and near misses of the header rule.
  CHECK(lpx::io::detect_kind(span_of(le_bytes(std::vector<float>(64, 0.0f)))) == lpx::io::FileKind::raw);
  CHECK(lpx::io::detect_kind(span_of(le_bytes(kSix))) == lpx::io::FileKind::raw);
  CHECK(lpx::io::detect_kind(span_of(u_le(1, 8) + "{" + std::string(7, ' '))) == lpx::io::FileKind::raw);
  CHECK(lpx::io::detect_kind(span_of(u_le(40, 8) + "{}")) == lpx::io::FileKind::raw);  // runs past the end
  CHECK(lpx::io::detect_kind(span_of(u_le(2, 8) + " {")) == lpx::io::FileKind::raw);
  // A named raw file is raw whatever its bytes: the extension decides.
  write_file(dir.file("st.bin"), st);
  const auto raw = lpx::io::read_tensor_file(dir.file("st.bin"));
  CHECK(raw.kind == lpx::io::FileKind::raw);
  CHECK(raw.tensors[0].numel() == static_cast<int64_t>(st.size() / 4));
  write_file(dir.file("raw"), le_bytes(kSix));
  with_stdin(dir.file("raw"), [] { CHECK(lpx::io::read_tensor_file("-").kind == lpx::io::FileKind::raw); });
}

TEST_CASE("raw files of codes: uint8 and uint16 elements with a shape") {
  TempDir dir;
  write_file(dir.file("c.bin"), "\x01\x02\x03\x04\x05\x06");
  const auto u8 = lpx::io::read_tensor_file(dir.file("c.bin"), {2, 3}, {}, DType::u8);
  CHECK(u8.tensors[0].dtype == DType::u8);
  CHECK(u8.tensors[0].shape == std::vector<int64_t>{2, 3});
  const auto u16 = lpx::io::read_tensor_file(dir.file("c.bin"), {}, {}, DType::u16);
  CHECK(u16.tensors[0].shape == std::vector<int64_t>{3});
  write_file(dir.file("odd.bin"), "\x01\x02\x03");
  REQUIRE_DATA_ERROR(lpx::io::read_tensor_file(dir.file("odd.bin"), {}, {}, DType::u16),
                     "size 3 is not a multiple of 2 bytes");
  REQUIRE_DATA_ERROR(lpx::io::read_tensor_file(dir.file("c.bin"), {4}, {}, DType::u8),
                     "shape 4 does not match the 6 uint8 values");
}

TEST_CASE("shapes whose non-zero extents overflow int64 are refused even with a zero extent") {
  // numpy refuses them too; a zero extent must not hide an overflowing product from the
  // shape arithmetic downstream (strides, scale grids).
  CHECK(lpx::io::checked_numel(std::vector<int64_t>{0, INT64_MAX}) == 0);
  CHECK(lpx::io::checked_numel(std::vector<int64_t>{INT64_MAX, 0}) == 0);
  CHECK(lpx::io::checked_numel(std::vector<int64_t>{}) == 1);
  CHECK(lpx::io::checked_numel(std::vector<int64_t>{0, int64_t{1} << 62, 4}) == -1);
  CHECK(lpx::io::checked_numel(std::vector<int64_t>{int64_t{1} << 62, 4, 0}) == -1);
  CHECK(lpx::io::checked_numel(std::vector<int64_t>{3, -1}) == -1);
  const std::string zero_huge = "{'descr': '<f4', 'fortran_order': False, 'shape': (0, 9223372036854775807), }";
  const auto f = parse_npy(npy_bytes(1, zero_huge, ""));
  CHECK(f.tensors[0].numel() == 0);
  const std::string overflow = "{'descr': '<f4', 'fortran_order': False, 'shape': (4611686018427387904, 4, 0), }";
  REQUIRE_DATA_ERROR(parse_npy(npy_bytes(1, overflow, "")), "overflows the element count");
  REQUIRE_DATA_ERROR(parse_st(st_bytes("{\"a\":{\"dtype\":\"F32\",\"shape\":[0,4611686018427387904,4],"
                                       "\"data_offsets\":[0,0]}}", "")),
                     "overflows");
}

TEST_CASE("names and strings from a file are escaped in messages") {
  // A tensor name with ESC, BEL and a C1 CSI (U+009B) would drive the terminal that shows
  // the message; they come back as \x1b, \x07 and \u009b (and '\' as "\\").
  CHECK(lpx::io::printable("plain name.w") == "plain name.w");
  CHECK(lpx::io::printable("a\x1b[31mb\x07") == "a\\x1b[31mb\\x07");
  CHECK(lpx::io::printable("\x7f\\") == "\\x7f\\\\");
  CHECK(lpx::io::printable("\xc2\x9b" "2J") == "\\u009b2J");
  CHECK(lpx::io::printable("caf\xc3\xa9 \xe2\x82\xac") == "caf\xc3\xa9 \xe2\x82\xac");  // UTF-8 stays
  CHECK(lpx::io::printable("\xff\xc3") == "\\xff\\xc3");  // not UTF-8
  const std::string esc = "{\"e\\u001b[2J\":{\"dtype\":\"F64\",\"shape\":[1],\"data_offsets\":[0,8]}}";
  try {
    parse_st(st_bytes(esc, std::string(8, '\0')));
    FAIL("expected a DataError");
  } catch (const DataError& e) {
    const std::string m = e.what();
    CHECK(m.find('\x1b') == std::string::npos);
    CHECK_THAT(m, Catch::Contains("tensor 'e\\x1b[2J'"));
  }
  const std::string two = "{\"a\\u0007\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}";
  try {
    parse_st(st_bytes(two, std::string(4, '\0')), {"b\x1b"});
    FAIL("expected a DataError");
  } catch (const DataError& e) {
    const std::string m = e.what();
    CHECK(m.find('\x1b') == std::string::npos);
    CHECK(m.find('\x07') == std::string::npos);
    CHECK_THAT(m, Catch::Contains("no tensor named 'b\\x1b' (available: a\\x07)"));
  }
  REQUIRE_DATA_ERROR(parse_npy(npy_bytes(1, "{'descr': '<f4\x1b', 'fortran_order': False, 'shape': (1,), }",
                                         std::string(4, '\0'))),
                     "unsupported .npy dtype '<f4\\x1b'");
  // File names too (they can come from a directory listing).
  REQUIRE_DATA_ERROR(lpx::io::read_tensor_file("/nonexistent/a\x1b[2J.npy"), "/nonexistent/a\\x1b[2J.npy: cannot open");
}

namespace {
std::vector<std::string> leftovers(const TempDir& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(dir.path)) {
    const std::string name = e.path().filename().string();
    if (name.find(".tmp.") != std::string::npos || name.find(".old.") != std::string::npos)
      out.push_back(name);
  }
  return out;
}
}  // namespace

TEST_CASE("commit_together replaces a set of files all together or not at all") {
  TempDir dir;
  const std::vector<float> v(16, 1.5f);
  const auto bytes = std::as_bytes(std::span<const float>(v));
  const std::string a = dir.file("x.scales.npy"), b = dir.file("x.tensor_scale.npy"),
                    main = dir.file("x.npy");
  const auto fill = [&](lpx::io::OutputFile& f) { f.append(bytes); };
  const auto commit3 = [&](size_t main_bytes) {
    lpx::io::OutputFile fa(a, DType::f32, {16}), fb(b, DType::f32, {16}), fm(main, DType::f32, {16});
    fill(fa);
    fill(fb);
    fm.append(bytes.first(main_bytes));
    lpx::io::OutputFile* files[] = {&fa, &fb, &fm};
    lpx::io::commit_together(files);
  };
  // Success: all three written, nothing else left.
  commit3(64);
  CHECK(lpx::io::to_float32(lpx::io::read_tensor_file(main).tensors[0]) == v);
  CHECK(lpx::io::to_float32(lpx::io::read_tensor_file(a).tensors[0]) == v);
  CHECK(leftovers(dir).empty());

  // Phase 1 fails (the main file is short): no target changes.
  write_file(a, "old a");
  write_file(b, "old b");
  write_file(main, "old main");
  CHECK_THROWS_AS(commit3(60), std::invalid_argument);
  CHECK(read_file(a) == "old a");
  CHECK(read_file(b) == "old b");
  CHECK(read_file(main) == "old main");
  CHECK(leftovers(dir).empty());

  // Phase 2 fails on the main file (a directory is in its way) after both siblings were
  // renamed into place: they are rolled back to their old contents. Before, the new
  // siblings stayed (or were deleted) beside the old main file: a mismatched set.
  fs::remove(main);
  fs::create_directory(main);
  REQUIRE_DATA_ERROR(commit3(64), "nothing was replaced");
  CHECK(read_file(a) == "old a");
  CHECK(read_file(b) == "old b");
  CHECK(fs::is_directory(main));
  CHECK(leftovers(dir).empty());

  // A sibling that did not exist before is removed again by the rollback.
  fs::remove(b);
  REQUIRE_DATA_ERROR(commit3(64), "nothing was replaced");
  CHECK(read_file(a) == "old a");
  CHECK_FALSE(fs::exists(b));
  CHECK(leftovers(dir).empty());

  // Stdout and repeated paths are not a set of files.
  lpx::io::OutputFile s1(dir.file("s.f32"), DType::f32, {16}), s2(dir.file("s.f32"), DType::f32, {16});
  lpx::io::OutputFile* same[] = {&s1, &s2};
  CHECK_THROWS_AS(lpx::io::commit_together(same), std::invalid_argument);
}
