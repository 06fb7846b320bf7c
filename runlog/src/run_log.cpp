// The run log's writer and reader (run_log.hpp) on HDF5's C API. Every name and type
// comes from schema.hpp's visitors, so the layout is written down once.
#include "lpx/runlog/run_log.hpp"

#include <hdf5.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <type_traits>

#include <fmt/format.h>

namespace lpx::runlog {

std::string format_name(int version) { return fmt::format("{}{}", kFormatPrefix, version); }

namespace {

// HDF5 prints a stack of errors to stderr on every failed call unless told not to; every
// failure here becomes one exception line instead.
void quiet() { H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr); }

[[noreturn]] void fail(const std::string& path, const std::string& what) {
  throw LogError(fmt::format("{}: {}", path, what));
}

// Owns one HDF5 id of any kind and closes it with the matching call.
class Id {
 public:
  Id() = default;
  explicit Id(hid_t id) : id_(id) {}
  Id(const Id&) = delete;
  Id& operator=(const Id&) = delete;
  Id(Id&& o) noexcept : id_(o.id_) { o.id_ = -1; }
  Id& operator=(Id&& o) noexcept {
    std::swap(id_, o.id_);
    return *this;
  }
  ~Id() {
    if (id_ < 0) return;
    switch (H5Iget_type(id_)) {
      case H5I_FILE: H5Fclose(id_); break;
      case H5I_GROUP: H5Gclose(id_); break;
      case H5I_DATASET: H5Dclose(id_); break;
      case H5I_DATATYPE: H5Tclose(id_); break;
      case H5I_DATASPACE: H5Sclose(id_); break;
      case H5I_ATTR: H5Aclose(id_); break;
      case H5I_GENPROP_LST: H5Pclose(id_); break;
      default: break;
    }
  }
  operator hid_t() const { return id_; }
  bool ok() const { return id_ >= 0; }

 private:
  hid_t id_ = -1;
};

// Every HDF5 call that can fail goes through one of these, with the file's path and what
// was being done in the message.
struct Io {
  std::string path;
  Id check(hid_t id, const std::string& what) const {
    if (id < 0) fail(path, fmt::format("HDF5: {} failed", what));
    return Id(id);
  }
  void check_status(herr_t s, const std::string& what) const {
    if (s < 0) fail(path, fmt::format("HDF5: {} failed", what));
  }
};

// Native (memory) and file types of the column element types, and what pads a short column.
template <class T>
struct Types;
template <>
struct Types<int64_t> {
  static hid_t mem() { return H5T_NATIVE_INT64; }
  static hid_t file() { return H5T_STD_I64LE; }
  static constexpr int64_t pad = -1;
};
template <>
struct Types<float> {
  static hid_t mem() { return H5T_NATIVE_FLOAT; }
  static hid_t file() { return H5T_IEEE_F32LE; }
  static constexpr float pad = std::numeric_limits<float>::quiet_NaN();
};
template <>
struct Types<double> {
  static hid_t mem() { return H5T_NATIVE_DOUBLE; }
  static hid_t file() { return H5T_IEEE_F64LE; }
  static constexpr double pad = std::numeric_limits<double>::quiet_NaN();
};
template <class V>
using Elem = typename std::remove_cvref_t<V>::value_type;

// "a/b/c" exists: H5Lexists on each prefix ("a/b" needs "a" first).
bool exists(hid_t loc, const std::string& path) {
  for (size_t pos = 0;;) {
    pos = path.find('/', pos + 1);
    if (H5Lexists(loc, path.substr(0, pos).c_str(), H5P_DEFAULT) <= 0) return false;
    if (pos == std::string::npos) return true;
  }
}

// ---- attributes ---------------------------------------------------------------------

void set_string_attr(const Io& io, hid_t obj, const char* name, const std::string& value) {
  Id t = io.check(H5Tcopy(H5T_C_S1), "string type");
  io.check_status(H5Tset_size(t, std::max<size_t>(1, value.size())), "string size");
  io.check_status(H5Tset_strpad(t, H5T_STR_NULLPAD), "string padding");
  if (H5Aexists(obj, name) > 0) io.check_status(H5Adelete(obj, name), fmt::format("delete attribute {}", name));
  Id s = io.check(H5Screate(H5S_SCALAR), "dataspace");
  Id a = io.check(H5Acreate2(obj, name, t, s, H5P_DEFAULT, H5P_DEFAULT), fmt::format("create attribute {}", name));
  const std::string v = value.empty() ? std::string(1, '\0') : value;
  io.check_status(H5Awrite(a, t, v.data()), fmt::format("write attribute {}", name));
}

// Fixed-length (what lpx writes) or variable-length (what h5py writes by default).
std::string get_string_attr(const Io& io, hid_t obj, const char* name, bool* found = nullptr) {
  if (found) *found = false;
  if (H5Aexists(obj, name) <= 0) return {};
  Id a = io.check(H5Aopen(obj, name, H5P_DEFAULT), fmt::format("open attribute {}", name));
  Id t = io.check(H5Aget_type(a), "attribute type");
  if (H5Tget_class(t) != H5T_STRING) return {};
  if (found) *found = true;
  if (H5Tis_variable_str(t) > 0) {
    char* p = nullptr;
    Id mt = io.check(H5Tcopy(H5T_C_S1), "string type");
    H5Tset_size(mt, H5T_VARIABLE);
    io.check_status(H5Aread(a, mt, &p), fmt::format("read attribute {}", name));
    std::string out = p ? p : "";
    H5free_memory(p);
    return out;
  }
  std::string out(H5Tget_size(t), '\0');
  io.check_status(H5Aread(a, t, out.data()), fmt::format("read attribute {}", name));
  while (!out.empty() && out.back() == '\0') out.pop_back();
  return out;
}

void set_i64_attr(const Io& io, hid_t obj, const char* name, int64_t v) {
  if (H5Aexists(obj, name) > 0) {
    Id a = io.check(H5Aopen(obj, name, H5P_DEFAULT), fmt::format("open attribute {}", name));
    io.check_status(H5Awrite(a, H5T_NATIVE_INT64, &v), fmt::format("write attribute {}", name));
    return;
  }
  Id s = io.check(H5Screate(H5S_SCALAR), "dataspace");
  Id a = io.check(H5Acreate2(obj, name, H5T_STD_I64LE, s, H5P_DEFAULT, H5P_DEFAULT),
                  fmt::format("create attribute {}", name));
  io.check_status(H5Awrite(a, H5T_NATIVE_INT64, &v), fmt::format("write attribute {}", name));
}

int64_t get_i64_attr(const Io& io, hid_t obj, const char* name, int64_t fallback) {
  if (H5Aexists(obj, name) <= 0) return fallback;
  Id a = io.check(H5Aopen(obj, name, H5P_DEFAULT), fmt::format("open attribute {}", name));
  int64_t v = fallback;
  io.check_status(H5Aread(a, H5T_NATIVE_INT64, &v), fmt::format("read attribute {}", name));
  return v;
}

// ---- datasets -----------------------------------------------------------------------

std::vector<hsize_t> dims_of(const Io& io, hid_t dataset) {
  Id s = io.check(H5Dget_space(dataset), "dataspace");
  const int rank = H5Sget_simple_extent_ndims(s);
  if (rank < 0) io.check_status(rank, "dataset rank");
  std::vector<hsize_t> dims(static_cast<size_t>(rank));
  H5Sget_simple_extent_dims(s, dims.data(), nullptr);
  return dims;
}

std::vector<hsize_t> dims_at(const Io& io, hid_t loc, const std::string& path) {
  Id d = io.check(H5Dopen2(loc, path.c_str(), H5P_DEFAULT), fmt::format("open /{}", path));
  return dims_of(io, d);
}

std::string shape_text(const std::vector<hsize_t>& dims) {
  if (dims.empty()) return "a scalar";
  std::string s;
  for (hsize_t d : dims) s += fmt::format("{}{}", s.empty() ? "" : "x", d);
  return s;
}

// An extendible dataset whose rows are `row` (rank 1 when row is empty).
void create_series(const Io& io, hid_t group, const std::string& name, hid_t file_type,
                   const std::vector<hsize_t>& row) {
  std::vector<hsize_t> dims{0}, maxdims{H5S_UNLIMITED}, chunk{row.empty() ? hsize_t{256} : hsize_t{16}};
  for (hsize_t d : row) {
    dims.push_back(d);
    maxdims.push_back(d);
    chunk.push_back(d);
  }
  Id s = io.check(H5Screate_simple(static_cast<int>(dims.size()), dims.data(), maxdims.data()), "dataspace");
  Id p = io.check(H5Pcreate(H5P_DATASET_CREATE), "property list");
  io.check_status(H5Pset_chunk(p, static_cast<int>(chunk.size()), chunk.data()), "chunking");
  io.check(H5Dcreate2(group, name.c_str(), file_type, s, H5P_DEFAULT, p, H5P_DEFAULT),
           fmt::format("create {}", name));
}

// Appends `rows` rows of `row` elements each. The dataset must have exactly that row
// shape: a log whose datasets were changed is refused instead of written past.
void append_rows(const Io& io, hid_t group, const std::string& name, hid_t mem_type,
                 const std::vector<hsize_t>& row, hsize_t rows, const void* data) {
  Id d = io.check(H5Dopen2(group, name.c_str(), H5P_DEFAULT), fmt::format("open {}", name));
  std::vector<hsize_t> dims = dims_of(io, d);
  if (dims.size() != row.size() + 1 || !std::equal(row.begin(), row.end(), dims.begin() + 1))
    fail(io.path, fmt::format("{} is {}, not rows of {}", name, shape_text(dims),
                              row.empty() ? std::string("one value") : shape_text(row)));
  if (rows == 0) return;
  std::vector<hsize_t> start(dims.size(), 0), count = dims;
  start[0] = dims[0];
  count[0] = rows;
  dims[0] += rows;
  io.check_status(H5Dset_extent(d, dims.data()), fmt::format("extend {}", name));
  Id fs = io.check(H5Dget_space(d), "dataspace");
  io.check_status(H5Sselect_hyperslab(fs, H5S_SELECT_SET, start.data(), nullptr, count.data(), nullptr),
                  "select rows");
  Id ms = io.check(H5Screate_simple(static_cast<int>(count.size()), count.data(), nullptr), "dataspace");
  io.check_status(H5Dwrite(d, mem_type, ms, fs, H5P_DEFAULT, data), fmt::format("write {}", name));
}

// Keeps the first `rows` rows.
void keep_rows(const Io& io, hid_t group, const std::string& name, hsize_t rows) {
  if (H5Lexists(group, name.c_str(), H5P_DEFAULT) <= 0) return;
  Id d = io.check(H5Dopen2(group, name.c_str(), H5P_DEFAULT), fmt::format("open {}", name));
  std::vector<hsize_t> dims = dims_of(io, d);
  if (dims.empty()) return;
  dims[0] = std::min(dims[0], rows);
  io.check_status(H5Dset_extent(d, dims.data()), fmt::format("shrink {}", name));
}

// A dataset's values must be in the file before a reader allocates room for them: a few
// bytes of metadata can claim 2^40 rows. Unfiltered data needs its bytes allocated in the
// file, less at most one chunk (up to 1 MiB) that may not be written yet; compressed data
// at most 1032 times its stored bytes (deflate's largest ratio). Anything else is a
// damaged file or one lpx did not write: a LogError naming the dataset.
void check_stored(const Io& io, hid_t d, const std::string& path, hssize_t n) {
  if (n <= 0) return;
  Id t = io.check(H5Dget_type(d), "datatype");
  Id p = io.check(H5Dget_create_plist(d), "dataset properties");
  const auto elem = static_cast<long double>(H5Tget_size(t));
  const auto stored = static_cast<long double>(H5Dget_storage_size(d));
  const bool filtered = H5Pget_nfilters(p) > 0;
  long double slack = 0;
  if (H5Pget_layout(p) == H5D_CHUNKED) {
    std::array<hsize_t, H5S_MAX_RANK> chunk{};
    const int rank = H5Pget_chunk(p, H5S_MAX_RANK, chunk.data());
    long double chunk_bytes = elem;
    for (int i = 0; i < rank; ++i) chunk_bytes *= static_cast<long double>(chunk[static_cast<size_t>(i)]);
    // Unfiltered chunks are stored whole: other sizes are a damaged chunk index, on which
    // HDF5 1.10 reads past its own buffer (a fuzz_runlog find).
    if (!filtered && (chunk_bytes < 1 || std::fmod(stored, chunk_bytes) != 0))
      fail(io.path, fmt::format("/{} stores {} bytes, not whole chunks of {} (a damaged file)", path,
                                H5Dget_storage_size(d), static_cast<double>(chunk_bytes)));
    slack = std::min(chunk_bytes, 1024.0L * 1024.0L);
  }
  const long double have = (filtered ? 1032.0L * stored : stored) + slack;
  if (static_cast<long double>(n) * elem > have)
    fail(io.path, fmt::format("/{} claims {} values, more than the file holds ({} bytes)", path, n,
                              H5Dget_storage_size(d)));
}

// The whole dataset at `path` (any rank, C order).
template <class T>
std::vector<T> read_all(const Io& io, hid_t loc, const std::string& path) {
  Id d = io.check(H5Dopen2(loc, path.c_str(), H5P_DEFAULT), fmt::format("open /{}", path));
  Id s = io.check(H5Dget_space(d), "dataspace");
  const hssize_t n = H5Sget_simple_extent_npoints(s);
  check_stored(io, d, path, n);
  std::vector<T> v(static_cast<size_t>(std::max<hssize_t>(0, n)));
  if (!v.empty()) io.check_status(H5Dread(d, Types<T>::mem(), H5S_ALL, H5S_ALL, H5P_DEFAULT, v.data()),
                                  fmt::format("read /{}", path));
  return v;
}

// A fixed-shape dataset, overwritten in place when it exists with the same shape (so
// repeated checkpoints reuse the file's space), else (re)created.
template <class T>
void write_fixed(const Io& io, hid_t group, const char* name, const std::vector<hsize_t>& dims,
                 const T* data) {
  if (H5Lexists(group, name, H5P_DEFAULT) > 0) {
    {
      Id d = io.check(H5Dopen2(group, name, H5P_DEFAULT), fmt::format("open {}", name));
      if (dims_of(io, d) == dims) {
        io.check_status(H5Dwrite(d, Types<T>::mem(), H5S_ALL, H5S_ALL, H5P_DEFAULT, data),
                        fmt::format("write {}", name));
        return;
      }
    }
    io.check_status(H5Ldelete(group, name, H5P_DEFAULT), fmt::format("delete {}", name));
  }
  Id s = io.check(H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr), "dataspace");
  Id d = io.check(H5Dcreate2(group, name, Types<T>::file(), s, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT),
                  fmt::format("create {}", name));
  hsize_t count = 1;
  for (hsize_t x : dims) count *= x;
  if (count > 0)
    io.check_status(H5Dwrite(d, Types<T>::mem(), H5S_ALL, H5S_ALL, H5P_DEFAULT, data), fmt::format("write {}", name));
}

// Fixed-length NUL-padded strings of `dims` (default: one axis of v.size()).
void write_strings(const Io& io, hid_t group, const std::string& name, const std::vector<std::string>& v,
                   std::vector<hsize_t> dims = {}) {
  if (dims.empty()) dims.push_back(v.size());
  size_t width = 1;
  for (const auto& s : v) width = std::max(width, s.size());
  std::vector<char> buf(width * v.size(), '\0');
  for (size_t i = 0; i < v.size(); ++i) std::memcpy(buf.data() + i * width, v[i].data(), v[i].size());
  Id t = io.check(H5Tcopy(H5T_C_S1), "string type");
  io.check_status(H5Tset_size(t, width), "string size");
  io.check_status(H5Tset_strpad(t, H5T_STR_NULLPAD), "string padding");
  Id s = io.check(H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr), "dataspace");
  Id d = io.check(H5Dcreate2(group, name.c_str(), t, s, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT),
                  fmt::format("create {}", name));
  if (!v.empty()) io.check_status(H5Dwrite(d, t, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf.data()), fmt::format("write {}", name));
}

// Fixed-length (NUL- or space-padded) or variable-length strings.
std::vector<std::string> read_strings(const Io& io, hid_t loc, const std::string& path) {
  Id d = io.check(H5Dopen2(loc, path.c_str(), H5P_DEFAULT), fmt::format("open /{}", path));
  Id s = io.check(H5Dget_space(d), "dataspace");
  Id t = io.check(H5Dget_type(d), "datatype");
  const auto n = static_cast<size_t>(std::max<hssize_t>(0, H5Sget_simple_extent_npoints(s)));
  std::vector<std::string> out;
  if (n == 0) return out;
  check_stored(io, d, path, static_cast<hssize_t>(n));
  if (H5Tget_class(t) != H5T_STRING) fail(io.path, fmt::format("/{} is not a string dataset", path));
  if (H5Tis_variable_str(t) > 0) {
    std::vector<char*> p(n, nullptr);
    Id mt = io.check(H5Tcopy(H5T_C_S1), "string type");
    H5Tset_size(mt, H5T_VARIABLE);
    io.check_status(H5Dread(d, mt, H5S_ALL, H5S_ALL, H5P_DEFAULT, p.data()), fmt::format("read /{}", path));
    for (char* c : p) out.emplace_back(c ? c : "");
    H5Dvlen_reclaim(mt, s, H5P_DEFAULT, p.data());
    return out;
  }
  const size_t width = H5Tget_size(t);
  std::vector<char> buf(n * width);
  io.check_status(H5Dread(d, t, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf.data()), fmt::format("read /{}", path));
  for (size_t i = 0; i < n; ++i) {
    std::string x(buf.data() + i * width, width);
    while (!x.empty() && (x.back() == '\0' || x.back() == ' ')) x.pop_back();
    out.push_back(std::move(x));
  }
  return out;
}

std::vector<std::string> role_names() {
  std::vector<std::string> roles;
  for (GemmRole r : kAllGemmRoles) roles.emplace_back(role_name(r));
  return roles;
}

// ---- the file as a whole --------------------------------------------------------------

// Opens `path` as an lpx run log of this format version, or throws the one-line LogError
// that says what the file is instead.
Id open_log(const Io& io, unsigned flags, Header& h) {
  quiet();
  if (!std::filesystem::is_regular_file(io.path)) fail(io.path, "no such file");
  if (!is_hdf5_file(io.path)) fail(io.path, "not an HDF5 file (expected an lpx run log)");
  Id f(H5Fopen(io.path.c_str(), flags, H5P_DEFAULT));
  if (!f.ok()) fail(io.path, "cannot open as an HDF5 file");
  bool has_format = false;
  h.format = get_string_attr(io, f, "format", &has_format);
  if (!has_format) fail(io.path, "not an lpx run log (no 'format' attribute)");
  const std::string expected = format_name();
  if (h.format != expected) {
    int version = -1;
    const std::string_view v = std::string_view(h.format).substr(
        h.format.rfind(kFormatPrefix, 0) == 0 ? kFormatPrefix.size() : h.format.size());
    if (!v.empty() && std::from_chars(v.data(), v.data() + v.size(), version).ec != std::errc()) version = -1;
    if (version >= 0 && version < kFormatVersion)
      fail(io.path, fmt::format("log written by an older lpx (format {}); expected {}", h.format, expected));
    if (version > kFormatVersion)
      fail(io.path, fmt::format("log written by a newer lpx (format {}); expected {}", h.format, expected));
    fail(io.path, fmt::format("not an lpx run log (format '{}'); expected {}", h.format, expected));
  }
  visit_header_strings(h, [&](const char* name, std::string& v) {
    if (std::strcmp(name, "format") != 0) v = get_string_attr(io, f, name);
  });
  h.seed = get_i64_attr(io, f, "seed", 0);
  return f;
}

void write_header(const Io& io, hid_t f, const Header& h) {
  visit_header_strings(h, [&](const char* name, const std::string& v) { set_string_attr(io, f, name, v); });
  set_i64_attr(io, f, "seed", h.seed);
}

Id create_group(const Io& io, hid_t parent, const char* name) {
  return io.check(H5Gcreate2(parent, name, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), fmt::format("create group {}", name));
}
Id open_group(const Io& io, hid_t parent, const char* name) {
  return io.check(H5Gopen2(parent, name, H5P_DEFAULT), fmt::format("open group /{}", name));
}

// /quant/applied from (L * R) records; "" and -1 for operands marked absent.
void write_applied(const Io& io, hid_t quant, const std::vector<AppliedOperand>& applied,
                   const std::vector<bool>& present, hsize_t L) {
  Id g = create_group(io, quant, "applied");
  const hsize_t R = kGemmRoles;
  const std::vector<hsize_t> dims{L, R};
  AppliedOperand probe;
  visit_applied_strings(probe, [&](const char* name, const std::string&) {
    std::vector<std::string> v(L * R);
    for (size_t i = 0; i < v.size(); ++i) {
      if (!present[i]) continue;
      AppliedOperand a = applied[i];
      visit_applied_strings(a, [&](const char* n, const std::string& s) {
        if (std::strcmp(n, name) == 0) v[i] = s;
      });
    }
    write_strings(io, g, name, v, dims);
  });
  visit_applied_ints(probe, [&](const char* name, const auto&) {
    std::vector<int64_t> v(L * R, -1);
    for (size_t i = 0; i < v.size(); ++i) {
      if (!present[i]) continue;
      visit_applied_ints(applied[i], [&](const char* n, const auto& x) {
        if (std::strcmp(n, name) == 0) v[i] = static_cast<int64_t>(x);
      });
    }
    write_fixed(io, g, name, dims, v.data());
  });
}

// (L, R) records from /quant/applied; empty when the group has no field. A field that does
// not hold one value per layer and role is refused before the records are allocated.
std::vector<AppliedOperand> read_applied(const Io& io, hid_t f, size_t cells) {
  AppliedOperand probe;
  bool any = false;
  auto check_field = [&](const char* name) {
    const std::string path = std::string("quant/applied/") + name;
    if (!exists(f, path)) return;
    any = true;
    Id d = io.check(H5Dopen2(f, path.c_str(), H5P_DEFAULT), fmt::format("open /{}", path));
    Id s = io.check(H5Dget_space(d), "dataspace");
    const hssize_t count = H5Sget_simple_extent_npoints(s);
    check_stored(io, d, path, count);
    if (count < 0 || static_cast<size_t>(count) != cells)
      fail(io.path, fmt::format("/{} holds {} values, not one per layer and role ({})", path, count, cells));
  };
  visit_applied_strings(probe, [&](const char* name, const std::string&) { check_field(name); });
  visit_applied_ints(probe, [&](const char* name, const auto&) { check_field(name); });
  if (!any) return {};
  std::vector<AppliedOperand> out(cells);
  visit_applied_strings(probe, [&](const char* name, const std::string&) {
    const std::string path = std::string("quant/applied/") + name;
    if (!exists(f, path)) return;
    const std::vector<std::string> v = read_strings(io, f, path);
    for (size_t i = 0; i < std::min(cells, v.size()); ++i)
      visit_applied_strings(out[i], [&](const char* n, std::string& s) {
        if (std::strcmp(n, name) == 0) s = v[i];
      });
  });
  visit_applied_ints(probe, [&](const char* name, const auto&) {
    const std::string path = std::string("quant/applied/") + name;
    if (!exists(f, path)) return;
    const std::vector<int64_t> v = read_all<int64_t>(io, f, path);
    for (size_t i = 0; i < std::min(cells, v.size()); ++i)
      visit_applied_ints(out[i], [&](const char* n, auto& x) {
        using T = std::remove_reference_t<decltype(x)>;
        if (std::strcmp(n, name) != 0) return;
        if constexpr (std::is_same_v<T, bool>) x = v[i] > 0;  // -1: not quantized
        else x = static_cast<T>(v[i]);
      });
  });
  return out;
}

// A column of `rows` values: shorter ones padded, longer ones cut.
template <class V>
void fit(V& v, size_t rows) {
  v.resize(rows, Types<Elem<V>>::pad);
}

// The group `group` holding the columns a visitor lists (visit(fn) calls fn(name, presence,
// column) for each), `rows` rows each; empty optional columns are left out.
template <class Visit>
void write_columns(const Io& io, hid_t f, const char* group, size_t rows, Visit visit) {
  Id g = create_group(io, f, group);
  visit([&](const char* name, Presence p, const auto& column) {
    using T = Elem<decltype(column)>;
    if (column.empty() && p != Presence::required) return;
    if (column.size() != rows)
      throw std::invalid_argument(
          fmt::format("write_run: /{}/{} has {} rows, the group {}", group, name, column.size(), rows));
    create_series(io, g, name, Types<T>::file(), {});
    append_rows(io, g, name, Types<T>::mem(), {}, rows, column.data());
  });
}

}  // namespace

bool is_hdf5_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  char sig[8] = {};
  f.read(sig, 8);
  return f.gcount() == 8 && std::memcmp(sig, "\x89HDF\r\n\x1a\n", 8) == 0;
}

// ---- reading ---------------------------------------------------------------------------

Run read_run(const std::string& path) {
  const Io io{path};
  Run r;
  r.path = path;
  Id f = open_log(io, H5F_ACC_RDONLY, r.header);

  // /metrics: step and loss define the rows
  Metrics& m = r.metrics;
  for (const char* required : {"metrics/step", "metrics/loss"})
    if (!exists(f, required)) fail(path, fmt::format("lpx run log without /{}", required));
  visit_metrics(m, [&](const char* name, Presence p, auto& column) {
    const std::string at = std::string("metrics/") + name;
    if (exists(f, at)) column = read_all<Elem<decltype(column)>>(io, f, at);
    else if (p == Presence::optional) r.missing.push_back("/" + at);
  });
  const size_t n = std::min(m.step.size(), m.loss.size());
  visit_metrics(m, [&](const char*, Presence, auto& column) {
    if (!column.empty()) fit(column, n);
  });

  // /eval: optional as a group
  if (exists(f, "eval/step") && exists(f, "eval/loss")) {
    visit_eval(r.eval, [&](const char* name, Presence, auto& column) {
      const std::string at = std::string("eval/") + name;
      if (exists(f, at)) column = read_all<Elem<decltype(column)>>(io, f, at);
    });
    const size_t e = std::min(r.eval.step.size(), r.eval.loss.size());
    visit_eval(r.eval, [&](const char*, Presence, auto& column) {
      if (!column.empty()) fit(column, e);
    });
  } else {
    r.missing.push_back("/eval");
  }

  // /quant: statistics need the layer and role names that give their axes
  QuantTable& q = r.quant;
  if (exists(f, "quant/layers") && exists(f, "quant/roles")) {
    q.layers = read_strings(io, f, "quant/layers");
    q.roles = read_strings(io, f, "quant/roles");
    if (exists(f, "quant/layer_kinds")) q.layer_kinds = read_strings(io, f, "quant/layer_kinds");
    const size_t L = q.layers.size(), R = q.roles.size();
    visit_quant(q, [&](const char* name, Presence p, auto& column) {
      const std::string at = std::string("quant/") + name;
      if (!exists(f, at)) {
        if (p == Presence::optional) r.missing.push_back("/" + at);
        return;
      }
      // Rows of (layers, roles) as the names say (the appending writer keeps one row of
      // one layer for a model without quantized layers), one per step. The writer appends
      // a step's statistics after its metrics, so a run killed between the two is one row
      // short, which is padded; a statistic with no rows has nothing to pad.
      const std::vector<hsize_t> dims = dims_at(io, f, at);
      if (dims.size() != 3 || dims[1] != std::max<size_t>(L, 1) || dims[2] != R)
        fail(path, fmt::format("/{} is {}, not rows of {}x{} (/quant/layers x /quant/roles)", at,
                               shape_text(dims), L, R));
      if (dims[0] == 0) return;
      if (dims[0] + 1 < n) fail(path, fmt::format("/{} has {} rows for {} steps", at, dims[0], n));
      column = read_all<Elem<decltype(column)>>(io, f, at);
      fit(column, n * L * R);
    });
    if (exists(f, "quant/applied")) q.applied = read_applied(io, f, L * R);
  } else {
    r.missing.push_back("/quant");
  }

  if (exists(f, "checkpoint")) {
    Id g = open_group(io, f, "checkpoint");
    const int64_t current = get_i64_attr(io, g, "current", -1);
    const std::string slot = fmt::format("slot{}", current);
    if (current >= 0 && H5Lexists(g, slot.c_str(), H5P_DEFAULT) > 0) {
      Id s = open_group(io, g, slot.c_str());
      r.checkpoint_step = get_i64_attr(io, s, "step", -1);
    }
  }
  return r;
}

// ---- writing a whole run ----------------------------------------------------------------

void write_run(const std::string& path, const Run& r) {
  quiet();
  const std::string tmp = fmt::format("{}.tmp.{}", path, ::getpid());
  const Io io{tmp};
  const size_t n = r.metrics.rows();
  try {
    Id f = io.check(H5Fcreate(tmp.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT), "create file");
    write_header(io, f, r.header);
    write_columns(io, f, "metrics", n, [&](auto&& fn) { visit_metrics(r.metrics, fn); });
    write_columns(io, f, "eval", r.eval.rows(), [&](auto&& fn) { visit_eval(r.eval, fn); });
    const QuantTable& q = r.quant;
    if (!q.layers.empty()) {
      Id g = create_group(io, f, "quant");
      const std::vector<std::string> roles = q.roles.empty() ? role_names() : q.roles;
      write_strings(io, g, "layers", q.layers);
      if (!q.layer_kinds.empty()) write_strings(io, g, "layer_kinds", q.layer_kinds);
      write_strings(io, g, "roles", roles);
      const std::vector<hsize_t> row{q.layers.size(), roles.size()};
      visit_quant(q, [&](const char* name, Presence, const auto& column) {
        using T = Elem<decltype(column)>;
        if (column.size() != n * row[0] * row[1]) return;
        create_series(io, g, name, Types<T>::file(), row);
        append_rows(io, g, name, Types<T>::mem(), row, n, column.data());
      });
      if (q.applied.size() == row[0] * kGemmRoles && roles.size() == kGemmRoles)
        write_applied(io, g, q.applied, std::vector<bool>(q.applied.size(), true), row[0]);
    }
    Id g = create_group(io, f, "checkpoint");
    set_i64_attr(io, g, "current", -1);
  } catch (...) {
    std::error_code ec;
    std::filesystem::remove(tmp, ec);
    throw;
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    std::filesystem::remove(tmp, ec);
    fail(path, "cannot rename the written log into place");
  }
}

// ---- the appending writer --------------------------------------------------------------

struct RunLog::Impl {
  Io io;
  Id file;
  Header header;
  hsize_t layers = 0;  // L as the names say; the statistics rows hold max(L, 1)
  bool applied_written = false;
  std::vector<hsize_t> stat_row() const { return {std::max<hsize_t>(layers, 1), kGemmRoles}; }
};

RunLog::RunLog(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
RunLog::~RunLog() = default;
const Header& RunLog::header() const { return impl_->header; }
size_t RunLog::layers() const { return impl_->layers; }

std::unique_ptr<RunLog> RunLog::create(const std::string& path, const Header& header,
                                       const std::vector<std::string>& layers,
                                       const std::vector<std::string>& layer_kinds) {
  quiet();
  auto impl = std::make_unique<Impl>();
  impl->io.path = path;
  const Io& io = impl->io;
  impl->file = Id(H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT));
  if (!impl->file.ok()) fail(path, "cannot create HDF5 file");
  impl->header = header;
  impl->header.format = format_name();
  impl->layers = layers.size();
  const hid_t f = impl->file;
  write_header(io, f, impl->header);
  {
    Id g = create_group(io, f, "metrics");
    Metrics m;
    visit_metrics(m, [&](const char* name, Presence, const auto& column) {
      create_series(io, g, name, Types<Elem<decltype(column)>>::file(), {});
    });
  }
  {
    Id g = create_group(io, f, "eval");
    Evals e;
    visit_eval(e, [&](const char* name, Presence, const auto& column) {
      create_series(io, g, name, Types<Elem<decltype(column)>>::file(), {});
    });
  }
  {
    Id g = create_group(io, f, "quant");
    write_strings(io, g, "layers", layers);
    write_strings(io, g, "layer_kinds", layer_kinds);
    write_strings(io, g, "roles", role_names());
    QuantTable q;
    visit_quant(q, [&](const char* name, Presence, const auto& column) {
      create_series(io, g, name, Types<Elem<decltype(column)>>::file(), impl->stat_row());
    });
  }
  {
    Id g = create_group(io, f, "checkpoint");
    set_i64_attr(io, g, "current", -1);
  }
  io.check_status(H5Fflush(f, H5F_SCOPE_GLOBAL), "flush");
  return std::unique_ptr<RunLog>(new RunLog(std::move(impl)));
}

std::unique_ptr<RunLog> RunLog::open(const std::string& path, bool writable) {
  auto impl = std::make_unique<Impl>();
  impl->io.path = path;
  const Io& io = impl->io;
  impl->file = open_log(io, writable ? H5F_ACC_RDWR : H5F_ACC_RDONLY, impl->header);
  const hid_t f = impl->file;
  for (const char* group : {"metrics", "eval", "quant", "checkpoint"})
    if (!exists(f, group)) fail(path, fmt::format("lpx run log without /{} (not written by lpx train?)", group));
  if (!exists(f, "quant/layers")) fail(path, "lpx run log without /quant/layers");
  impl->layers = read_strings(io, f, "quant/layers").size();
  impl->applied_written = exists(f, "quant/applied");
  // Every appendable dataset must have the row shape this writer appends.
  auto check_rows = [&](const std::string& at, const std::vector<hsize_t>& row) {
    if (!exists(f, at)) fail(path, fmt::format("lpx run log without /{}", at));
    Id d = io.check(H5Dopen2(f, at.c_str(), H5P_DEFAULT), fmt::format("open /{}", at));
    const std::vector<hsize_t> dims = dims_of(io, d);
    if (dims.size() != row.size() + 1 || !std::equal(row.begin(), row.end(), dims.begin() + 1))
      fail(path, fmt::format("/{} is {}, not rows of {} (a log this lpx did not write)", at, shape_text(dims),
                             row.empty() ? std::string("one value") : shape_text(row)));
  };
  Metrics m;
  visit_metrics(m, [&](const char* name, Presence p, const auto& column) {
    const std::string at = std::string("metrics/") + name;
    if (p == Presence::informational && !exists(f, at)) {
      // a column added after this log was written (schema.hpp): a log opened to resume
      // gets it, NaN for the rows already there, so every column keeps one row per step
      if (!writable) return;
      using T = Elem<std::remove_cvref_t<decltype(column)>>;
      Id g = open_group(io, f, "metrics");
      create_series(io, g, name, Types<T>::file(), {});
      Id d = io.check(H5Dopen2(f, "metrics/step", H5P_DEFAULT), "open /metrics/step");
      const hsize_t rows = dims_of(io, d).at(0);
      const std::vector<T> pad(static_cast<size_t>(rows), Types<T>::pad);
      append_rows(io, g, name, Types<T>::mem(), {}, rows, pad.data());
      return;
    }
    check_rows(at, {});
  });
  Evals e;
  visit_eval(e, [&](const char* name, Presence, const auto&) { check_rows(std::string("eval/") + name, {}); });
  QuantTable q;
  visit_quant(q, [&](const char* name, Presence, const auto&) {
    check_rows(std::string("quant/") + name, impl->stat_row());
  });
  return std::unique_ptr<RunLog>(new RunLog(std::move(impl)));
}

void RunLog::append_step(const StepMetrics& m, std::span<const LayerStats> stats,
                         std::span<const LayerApplied> applied) {
  const Io& io = impl_->io;
  const hid_t f = impl_->file;
  {
    Id g = open_group(io, f, "metrics");
    visit_metrics(m, [&](const char* name, Presence, const auto& value) {
      append_rows(io, g, name, Types<std::remove_cvref_t<decltype(value)>>::mem(), {}, 1, &value);
    });
  }
  // One row of each statistic: NaN where nothing was collected (0 blocks clamped).
  const std::vector<hsize_t> row = impl_->stat_row();
  const size_t L = row[0], R = row[1], cells = L * R;
  if (!stats.empty() && stats.size() != impl_->layers)
    throw std::invalid_argument(fmt::format("{}: statistics of {} layers for a log of {}", io.path,
                                            stats.size(), impl_->layers));
  QuantTable q;
  visit_quant(q, [&](const char*, Presence, auto& column) {
    using T = Elem<decltype(column)>;
    column.assign(cells, std::is_integral_v<T> ? T{0} : Types<T>::pad);
  });
  std::vector<bool> present(cells, false);
  for (size_t l = 0; l < stats.size(); ++l)
    for (size_t r = 0; r < R; ++r) {
      const OperandStats& s = stats[l][r];
      if (s.elements == 0) continue;
      const size_t i = l * R + r;
      present[i] = true;
      std::vector<double> values;
      visit_quant(s, [&](const char*, Presence, const auto& v) { values.push_back(static_cast<double>(v)); });
      size_t k = 0;
      visit_quant(q, [&](const char*, Presence, auto& column) {
        column[i] = static_cast<Elem<decltype(column)>>(values[k++]);
      });
    }
  {
    Id g = open_group(io, f, "quant");
    visit_quant(q, [&](const char* name, Presence, const auto& column) {
      append_rows(io, g, name, Types<Elem<decltype(column)>>::mem(), row, 1, column.data());
    });
    if (!applied.empty() && !impl_->applied_written) {
      std::vector<AppliedOperand> flat(cells);
      for (size_t l = 0; l < std::min(applied.size(), L); ++l)
        for (size_t r = 0; r < R; ++r) flat[l * R + r] = applied[l][r];
      write_applied(io, g, flat, present, L);
      impl_->applied_written = true;
    }
  }
}

void RunLog::append_eval(const EvalMetrics& e) {
  const Io& io = impl_->io;
  Id g = open_group(io, impl_->file, "eval");
  visit_eval(e, [&](const char* name, Presence, const auto& value) {
    append_rows(io, g, name, Types<std::remove_cvref_t<decltype(value)>>::mem(), {}, 1, &value);
  });
}

void RunLog::write_checkpoint(const Checkpoint& c) {
  const Io& io = impl_->io;
  const hid_t f = impl_->file;
  Id g = open_group(io, f, "checkpoint");
  const int64_t current = get_i64_attr(io, g, "current", -1);
  const int64_t slot = current == 0 ? 1 : 0;
  const std::string name = fmt::format("slot{}", slot);
  Id s = H5Lexists(g, name.c_str(), H5P_DEFAULT) > 0 ? open_group(io, g, name.c_str())
                                                     : create_group(io, g, name.c_str());
  set_i64_attr(io, s, "step", -1);  // incomplete while being written
  using Field = std::pair<const char*, const std::vector<float>*>;
  for (auto [key, v] : {Field{"params", &c.params}, Field{"adam_m", &c.adam_m}, Field{"adam_v", &c.adam_v}})
    write_fixed(io, s, key, {v->size()}, v->data());
  const QuantizerState& qs = c.quantizer;
  if (qs.length > 0) {
    const auto L = static_cast<hsize_t>(qs.layers), H = static_cast<hsize_t>(qs.length);
    if (qs.values.size() != L * kGemmRoles * H || qs.count.size() != L * kGemmRoles)
      throw std::invalid_argument("checkpoint: quantizer state arrays do not match their shape");
    write_fixed(io, s, "amax_history", {L, kGemmRoles, H}, qs.values.data());
    write_fixed(io, s, "amax_history_count", {L, kGemmRoles}, qs.count.data());
  } else {
    for (const char* n : {"amax_history", "amax_history_count"})
      if (H5Lexists(s, n, H5P_DEFAULT) > 0) io.check_status(H5Ldelete(s, n, H5P_DEFAULT), "delete dataset");
  }
  set_i64_attr(io, s, "step", c.step);
  io.check_status(H5Fflush(f, H5F_SCOPE_GLOBAL), "flush");
  set_i64_attr(io, g, "current", slot);
  io.check_status(H5Fflush(f, H5F_SCOPE_GLOBAL), "flush");
}

Checkpoint RunLog::read_checkpoint() const {
  const Io& io = impl_->io;
  Checkpoint c;
  Id g = open_group(io, impl_->file, "checkpoint");
  const int64_t current = get_i64_attr(io, g, "current", -1);
  if (current < 0) return c;
  const std::string name = fmt::format("slot{}", current);
  if (H5Lexists(g, name.c_str(), H5P_DEFAULT) <= 0) fail(io.path, fmt::format("checkpoint slot {} is missing", current));
  Id s = open_group(io, g, name.c_str());
  c.step = get_i64_attr(io, s, "step", -1);
  if (c.step < 0) fail(io.path, "checkpoint: the current slot is incomplete");
  const std::string at = "checkpoint/" + name + "/";
  using Field = std::pair<const char*, std::vector<float>*>;
  for (auto [key, v] : {Field{"params", &c.params}, Field{"adam_m", &c.adam_m}, Field{"adam_v", &c.adam_v}}) {
    if (!exists(impl_->file, at + key)) fail(io.path, fmt::format("checkpoint without /{}{}", at, key));
    *v = read_all<float>(io, impl_->file, at + key);
  }
  if (exists(impl_->file, at + "amax_history")) {
    Id d = io.check(H5Dopen2(s, "amax_history", H5P_DEFAULT), "open amax_history");
    const std::vector<hsize_t> dims = dims_of(io, d);
    if (dims.size() != 3 || dims[1] != kGemmRoles) fail(io.path, "checkpoint: amax_history is not (layers, 6, length)");
    c.has_quantizer_state = true;
    c.quantizer.layers = static_cast<int64_t>(dims[0]);
    c.quantizer.length = static_cast<int64_t>(dims[2]);
    c.quantizer.values = read_all<float>(io, impl_->file, at + "amax_history");
    if (!exists(impl_->file, at + "amax_history_count")) fail(io.path, "checkpoint: amax_history without its counts");
    c.quantizer.count = read_all<int64_t>(io, impl_->file, at + "amax_history_count");
    if (c.quantizer.count.size() != dims[0] * kGemmRoles) fail(io.path, "checkpoint: amax_history_count is not (layers, 6)");
  }
  return c;
}

void RunLog::truncate(int64_t steps) {
  const Io& io = impl_->io;
  const hid_t f = impl_->file;
  {
    Id g = open_group(io, f, "metrics");
    const auto step = read_all<int64_t>(io, f, "metrics/step");
    hsize_t keep = 0;
    while (keep < step.size() && step[keep] < steps) ++keep;
    Metrics m;
    visit_metrics(m, [&](const char* name, Presence, const auto&) { keep_rows(io, g, name, keep); });
    Id q = open_group(io, f, "quant");
    QuantTable t;
    visit_quant(t, [&](const char* name, Presence, const auto&) { keep_rows(io, q, name, keep); });
  }
  {
    Id g = open_group(io, f, "eval");
    const auto step = read_all<int64_t>(io, f, "eval/step");
    hsize_t keep = 0;
    while (keep < step.size() && step[keep] <= steps) ++keep;
    Evals e;
    visit_eval(e, [&](const char* name, Presence, const auto&) { keep_rows(io, g, name, keep); });
  }
  flush();
}

void RunLog::flush() { impl_->io.check_status(H5Fflush(impl_->file, H5F_SCOPE_GLOBAL), "flush"); }

Checkpoint read_checkpoint(const std::string& path) { return RunLog::open(path, /*writable=*/false)->read_checkpoint(); }

}  // namespace lpx::runlog
