// The HDF5 run log (layout in run_log.hpp), on HDF5's C API.
#include "lpx/sim/run_log.hpp"

#include <hdf5.h>

#include <cmath>
#include <limits>
#include <stdexcept>

#include <fmt/format.h>

namespace lpx::sim {

namespace {

hid_t check(hid_t id, const char* what) {
  if (id < 0) throw std::runtime_error(fmt::format("HDF5: {} failed", what));
  return id;
}
void check_status(herr_t s, const char* what) {
  if (s < 0) throw std::runtime_error(fmt::format("HDF5: {} failed", what));
}

// Closes an HDF5 handle of any kind at scope exit.
struct Handle {
  hid_t id = -1;
  Handle() = default;
  explicit Handle(hid_t i) : id(i) {}
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
  Handle(Handle&& o) noexcept : id(o.id) { o.id = -1; }
  Handle& operator=(Handle&& o) noexcept {
    std::swap(id, o.id);
    return *this;
  }
  ~Handle() {
    if (id >= 0) H5Oclose(id);
  }
  operator hid_t() const { return id; }
};
// H5Oclose handles groups and datasets; types, spaces and attributes need their own.
struct Space {
  hid_t id;
  explicit Space(hid_t i) : id(check(i, "dataspace")) {}
  ~Space() { H5Sclose(id); }
  operator hid_t() const { return id; }
};
struct Type {
  hid_t id;
  explicit Type(hid_t i) : id(check(i, "datatype")) {}
  ~Type() { H5Tclose(id); }
  operator hid_t() const { return id; }
};
struct Attr {
  hid_t id;
  explicit Attr(hid_t i) : id(check(i, "attribute")) {}
  ~Attr() { H5Aclose(id); }
  operator hid_t() const { return id; }
};
struct Plist {
  hid_t id;
  explicit Plist(hid_t i) : id(check(i, "property list")) {}
  ~Plist() { H5Pclose(id); }
  operator hid_t() const { return id; }
};

void quiet_errors() { H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr); }

void set_string_attr(hid_t obj, const char* name, const std::string& value) {
  Type t(H5Tcopy(H5T_C_S1));
  check_status(H5Tset_size(t, std::max<size_t>(1, value.size())), "set string size");
  check_status(H5Tset_strpad(t, H5T_STR_NULLPAD), "set strpad");
  if (H5Aexists(obj, name) > 0) check_status(H5Adelete(obj, name), "delete attribute");
  Space s(H5Screate(H5S_SCALAR));
  Attr a(H5Acreate2(obj, name, t, s, H5P_DEFAULT, H5P_DEFAULT));
  std::string v = value.empty() ? std::string(1, '\0') : value;
  check_status(H5Awrite(a, t, v.data()), "write string attribute");
}
std::string get_string_attr(hid_t obj, const char* name) {
  if (H5Aexists(obj, name) <= 0) return {};
  Attr a(H5Aopen(obj, name, H5P_DEFAULT));
  Type t(H5Aget_type(a));
  if (H5Tget_class(t) != H5T_STRING) throw std::runtime_error(fmt::format("attribute {} is not a string", name));
  if (H5Tis_variable_str(t) > 0) {
    char* p = nullptr;
    Type mt(H5Tcopy(H5T_C_S1));
    H5Tset_size(mt, H5T_VARIABLE);
    check_status(H5Aread(a, mt, &p), "read string attribute");
    std::string out = p ? p : "";
    H5free_memory(p);
    return out;
  }
  std::string out(H5Tget_size(t), '\0');
  check_status(H5Aread(a, t, out.data()), "read string attribute");
  while (!out.empty() && out.back() == '\0') out.pop_back();
  return out;
}
void set_i64_attr(hid_t obj, const char* name, int64_t v) {
  if (H5Aexists(obj, name) > 0) {
    Attr a(H5Aopen(obj, name, H5P_DEFAULT));
    check_status(H5Awrite(a, H5T_NATIVE_INT64, &v), "write attribute");
    return;
  }
  Space s(H5Screate(H5S_SCALAR));
  Attr a(H5Acreate2(obj, name, H5T_STD_I64LE, s, H5P_DEFAULT, H5P_DEFAULT));
  check_status(H5Awrite(a, H5T_NATIVE_INT64, &v), "write attribute");
}
int64_t get_i64_attr(hid_t obj, const char* name, int64_t fallback) {
  if (H5Aexists(obj, name) <= 0) return fallback;
  Attr a(H5Aopen(obj, name, H5P_DEFAULT));
  int64_t v = 0;
  check_status(H5Aread(a, H5T_NATIVE_INT64, &v), "read attribute");
  return v;
}

// An extendible dataset of rows of `row` elements (rank 1 when row_dims is empty).
void create_extendible(hid_t group, const char* name, hid_t file_type,
                       const std::vector<hsize_t>& row_dims) {
  std::vector<hsize_t> dims{0}, maxdims{H5S_UNLIMITED}, chunk{256};
  for (hsize_t d : row_dims) {
    dims.push_back(d);
    maxdims.push_back(d);
    chunk.push_back(d);
  }
  if (!row_dims.empty()) chunk[0] = 16;
  Space s(H5Screate_simple(static_cast<int>(dims.size()), dims.data(), maxdims.data()));
  Plist p(H5Pcreate(H5P_DATASET_CREATE));
  check_status(H5Pset_chunk(p, static_cast<int>(chunk.size()), chunk.data()), "set chunk");
  Handle d(check(H5Dcreate2(group, name, file_type, s, H5P_DEFAULT, p, H5P_DEFAULT), name));
}

hsize_t rows_of(hid_t ds) {
  Space s(H5Dget_space(ds));
  hsize_t dims[4] = {};
  H5Sget_simple_extent_dims(s, dims, nullptr);
  return dims[0];
}

void append_row(hid_t group, const char* name, hid_t mem_type, const void* data) {
  Handle d(check(H5Dopen2(group, name, H5P_DEFAULT), name));
  Space fs0(H5Dget_space(d));
  const int rank = H5Sget_simple_extent_ndims(fs0);
  std::vector<hsize_t> dims(static_cast<size_t>(rank));
  H5Sget_simple_extent_dims(fs0, dims.data(), nullptr);
  std::vector<hsize_t> start(dims.size(), 0), count = dims;
  start[0] = dims[0];
  count[0] = 1;
  dims[0] += 1;
  check_status(H5Dset_extent(d, dims.data()), "extend dataset");
  Space fs(H5Dget_space(d));
  check_status(H5Sselect_hyperslab(fs, H5S_SELECT_SET, start.data(), nullptr, count.data(), nullptr), "select");
  Space ms(H5Screate_simple(rank, count.data(), nullptr));
  check_status(H5Dwrite(d, mem_type, ms, fs, H5P_DEFAULT, data), name);
}

void set_rows(hid_t group, const char* name, hsize_t rows) {
  Handle d(check(H5Dopen2(group, name, H5P_DEFAULT), name));
  Space fs(H5Dget_space(d));
  const int rank = H5Sget_simple_extent_ndims(fs);
  std::vector<hsize_t> dims(static_cast<size_t>(rank));
  H5Sget_simple_extent_dims(fs, dims.data(), nullptr);
  dims[0] = std::min(dims[0], rows);
  check_status(H5Dset_extent(d, dims.data()), "shrink dataset");
}

template <class T>
std::vector<T> read_all(hid_t group, const char* name, hid_t mem_type) {
  if (H5Lexists(group, name, H5P_DEFAULT) <= 0) return {};
  Handle d(check(H5Dopen2(group, name, H5P_DEFAULT), name));
  Space fs(H5Dget_space(d));
  const hssize_t n = H5Sget_simple_extent_npoints(fs);
  std::vector<T> out(static_cast<size_t>(n));
  if (n > 0) check_status(H5Dread(d, mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, out.data()), name);
  return out;
}

// Fixed-length strings, shape `dims` (default: one axis of v.size()).
void write_strings(hid_t group, const char* name, const std::vector<std::string>& v,
                   std::vector<hsize_t> dims = {}) {
  if (dims.empty()) dims.push_back(v.size());
  size_t len = 1;
  for (const auto& s : v) len = std::max(len, s.size());
  std::string buf(len * v.size(), '\0');
  for (size_t i = 0; i < v.size(); ++i) buf.replace(i * len, v[i].size(), v[i]);
  Type t(H5Tcopy(H5T_C_S1));
  H5Tset_size(t, len);
  H5Tset_strpad(t, H5T_STR_NULLPAD);
  Space s(H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr));
  Handle d(check(H5Dcreate2(group, name, t, s, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), name));
  if (!v.empty()) check_status(H5Dwrite(d, t, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf.data()), name);
}
std::vector<std::string> read_strings(hid_t group, const char* name) {
  if (H5Lexists(group, name, H5P_DEFAULT) <= 0) return {};
  Handle d(check(H5Dopen2(group, name, H5P_DEFAULT), name));
  Type t(H5Dget_type(d));
  const size_t len = H5Tget_size(t);
  Space fs(H5Dget_space(d));
  const auto n = static_cast<size_t>(H5Sget_simple_extent_npoints(fs));
  std::string buf(len * n, '\0');
  if (n > 0) check_status(H5Dread(d, t, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf.data()), name);
  std::vector<std::string> out;
  for (size_t i = 0; i < n; ++i) {
    std::string s = buf.substr(i * len, len);
    while (!s.empty() && s.back() == '\0') s.pop_back();
    out.push_back(s);
  }
  return out;
}

void write_flat(hid_t group, const char* name, const std::vector<float>& v) {
  if (H5Lexists(group, name, H5P_DEFAULT) > 0) {
    Handle d(check(H5Dopen2(group, name, H5P_DEFAULT), name));
    if (rows_of(d) == v.size()) {
      check_status(H5Dwrite(d, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, v.data()), name);
      return;
    }
    throw std::runtime_error(fmt::format("checkpoint {}: size changed", name));
  }
  const hsize_t dims[1] = {std::max<size_t>(v.size(), 0)};
  Space s(H5Screate_simple(1, dims, nullptr));
  Handle d(check(H5Dcreate2(group, name, H5T_IEEE_F32LE, s, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), name));
  if (!v.empty()) check_status(H5Dwrite(d, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, v.data()), name);
}

// A fixed-shape dataset, overwritten in place when it exists with the same shape (so
// repeated checkpoints reuse the file's space), else (re)created.
void write_array(hid_t group, const char* name, hid_t file_type, hid_t mem_type,
                 const std::vector<hsize_t>& dims, const void* data) {
  if (H5Lexists(group, name, H5P_DEFAULT) > 0) {
    Handle d(check(H5Dopen2(group, name, H5P_DEFAULT), name));
    Space fs(H5Dget_space(d));
    std::vector<hsize_t> have(static_cast<size_t>(std::max(0, H5Sget_simple_extent_ndims(fs))));
    H5Sget_simple_extent_dims(fs, have.data(), nullptr);
    if (have == dims) {
      check_status(H5Dwrite(d, mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, data), name);
      return;
    }
  }
  if (H5Lexists(group, name, H5P_DEFAULT) > 0) check_status(H5Ldelete(group, name, H5P_DEFAULT), "delete dataset");
  Space sp(H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr));
  Handle d(check(H5Dcreate2(group, name, file_type, sp, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), name));
  check_status(H5Dwrite(d, mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, data), name);
}

constexpr const char* kQuantFloat[] = {"amax", "flushed_pct", "saturated_pct", "sqnr_db"};

// /quant/applied: the string fields of AppliedFormat, then its integer fields.
constexpr const char* kAppliedStrings[] = {"element", "block", "scale", "tensor_scale",
                                           "scale_rule", "rounding", "transform"};
constexpr const char* kAppliedInts[] = {"axis", "sr_bits", "headroom_3_4", "margin"};

std::string* applied_string(AppliedFormat& a, int i) {
  std::string* f[] = {&a.element, &a.block, &a.scale, &a.tensor_scale, &a.scale_rule, &a.rounding, &a.transform};
  return f[i];
}

// Written once, from the first step with statistics: what each layer's quantizer applied
// to each operand. Operands that were not quantized that step (an MLP's first layer
// computes no dX) get "" and -1.
void write_applied(hid_t quant, const std::vector<std::array<OperandStats, kNumRoles>>& stats, size_t L) {
  Handle g(check(H5Gcreate2(quant, "applied", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), "applied"));
  for (int k = 0; k < 7; ++k) {
    std::vector<std::string> v(L * kNumRoles);
    for (size_t l = 0; l < std::min(L, stats.size()); ++l)
      for (size_t r = 0; r < kNumRoles; ++r) {
        AppliedFormat a = stats[l][r].applied;
        if (stats[l][r].elements > 0) v[l * kNumRoles + r] = *applied_string(a, k);
      }
    write_strings(g, kAppliedStrings[k], v, {L, kNumRoles});
  }
  for (int k = 0; k < 4; ++k) {
    std::vector<int64_t> v(L * kNumRoles, -1);
    for (size_t l = 0; l < std::min(L, stats.size()); ++l)
      for (size_t r = 0; r < kNumRoles; ++r) {
        const OperandStats& s = stats[l][r];
        if (s.elements == 0) continue;
        const int64_t vals[] = {s.applied.axis, s.applied.sr_bits, s.applied.headroom_3_4 ? 1 : 0, s.applied.margin};
        v[l * kNumRoles + r] = vals[k];
      }
    const hsize_t dims[2] = {L, kNumRoles};
    Space sp(H5Screate_simple(2, dims, nullptr));
    Handle d(check(H5Dcreate2(g, kAppliedInts[k], H5T_STD_I64LE, sp, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), kAppliedInts[k]));
    check_status(H5Dwrite(d, H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, v.data()), kAppliedInts[k]);
  }
}

}  // namespace

struct RunLog::Impl {
  hid_t file = -1;
  hsize_t layers = 0;
  bool applied_written = false;
  ~Impl() {
    if (file >= 0) H5Fclose(file);
  }
};

RunLog::RunLog(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
RunLog::~RunLog() = default;

std::unique_ptr<RunLog> RunLog::create(const std::string& path, const RunHeader& h) {
  quiet_errors();
  auto impl = std::make_unique<Impl>();
  impl->file = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  if (impl->file < 0) throw std::runtime_error(fmt::format("{}: cannot create HDF5 file", path));
  const hid_t f = impl->file;
  set_string_attr(f, "format", "lpx-run-1");
  set_string_attr(f, "lpx_version", h.lpx_version);
  set_string_attr(f, "model", h.model);
  set_string_attr(f, "recipe", h.recipe);
  set_string_attr(f, "recipe_json", h.recipe_json);
  set_string_attr(f, "config", h.config_json);
  set_string_attr(f, "param_table", h.param_table);
  set_i64_attr(f, "seed", h.seed);
  {
    Handle g(check(H5Gcreate2(f, "metrics", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), "metrics"));
    create_extendible(g, "step", H5T_STD_I64LE, {});
    create_extendible(g, "loss", H5T_IEEE_F64LE, {});
    create_extendible(g, "lr", H5T_IEEE_F32LE, {});
    create_extendible(g, "grad_norm", H5T_IEEE_F64LE, {});
    create_extendible(g, "update_ratio", H5T_IEEE_F64LE, {});
    create_extendible(g, "adam_rms", H5T_IEEE_F64LE, {});
    create_extendible(g, "step_time_s", H5T_IEEE_F64LE, {});
  }
  {
    Handle g(check(H5Gcreate2(f, "eval", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), "eval"));
    create_extendible(g, "step", H5T_STD_I64LE, {});
    create_extendible(g, "loss", H5T_IEEE_F64LE, {});
    create_extendible(g, "accuracy", H5T_IEEE_F64LE, {});
  }
  impl->layers = h.layers.size();
  {
    Handle g(check(H5Gcreate2(f, "quant", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), "quant"));
    write_strings(g, "layers", h.layers);
    write_strings(g, "layer_kinds", h.layer_kinds);
    std::vector<std::string> roles;
    for (int r = 0; r < kNumRoles; ++r) roles.emplace_back(role_name(static_cast<Role>(r)));
    write_strings(g, "roles", roles);
    const std::vector<hsize_t> row{std::max<hsize_t>(impl->layers, 1), kNumRoles};
    for (const char* n : kQuantFloat) create_extendible(g, n, H5T_IEEE_F32LE, row);
    create_extendible(g, "clamped_blocks", H5T_STD_I64LE, row);
  }
  {
    Handle g(check(H5Gcreate2(f, "checkpoint", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), "checkpoint"));
    set_i64_attr(g, "current", -1);
  }
  check_status(H5Fflush(f, H5F_SCOPE_GLOBAL), "flush");
  return std::unique_ptr<RunLog>(new RunLog(std::move(impl)));
}

std::unique_ptr<RunLog> RunLog::open(const std::string& path, bool writable) {
  quiet_errors();
  auto impl = std::make_unique<Impl>();
  impl->file = H5Fopen(path.c_str(), writable ? H5F_ACC_RDWR : H5F_ACC_RDONLY, H5P_DEFAULT);
  if (impl->file < 0) throw std::runtime_error(fmt::format("{}: cannot open as an HDF5 file", path));
  if (get_string_attr(impl->file, "format") != "lpx-run-1")
    throw std::runtime_error(fmt::format("{}: not an lpx run log", path));
  Handle g(check(H5Gopen2(impl->file, "quant", H5P_DEFAULT), "quant"));
  impl->layers = read_strings(g, "layers").size();
  impl->applied_written = H5Lexists(g, "applied", H5P_DEFAULT) > 0;
  return std::unique_ptr<RunLog>(new RunLog(std::move(impl)));
}

std::string RunLog::attribute(const std::string& name) const {
  return get_string_attr(impl_->file, name.c_str());
}

void RunLog::append_step(const StepMetrics& m,
                         const std::vector<std::array<OperandStats, kNumRoles>>* stats) {
  const hid_t f = impl_->file;
  {
    Handle g(check(H5Gopen2(f, "metrics", H5P_DEFAULT), "metrics"));
    append_row(g, "step", H5T_NATIVE_INT64, &m.step);
    append_row(g, "loss", H5T_NATIVE_DOUBLE, &m.loss);
    append_row(g, "lr", H5T_NATIVE_FLOAT, &m.lr);
    append_row(g, "grad_norm", H5T_NATIVE_DOUBLE, &m.grad_norm);
    append_row(g, "update_ratio", H5T_NATIVE_DOUBLE, &m.update_ratio);
    append_row(g, "adam_rms", H5T_NATIVE_DOUBLE, &m.adam_rms);
    append_row(g, "step_time_s", H5T_NATIVE_DOUBLE, &m.step_time_s);
  }
  const size_t L = std::max<size_t>(impl_->layers, 1);
  std::vector<float> rows[4];
  std::vector<int64_t> clamped(L * kNumRoles, 0);
  for (auto& r : rows) r.assign(L * kNumRoles, std::numeric_limits<float>::quiet_NaN());
  if (stats)
    for (size_t l = 0; l < std::min(L, stats->size()); ++l)
      for (size_t r = 0; r < kNumRoles; ++r) {
        const OperandStats& s = (*stats)[l][r];
        if (s.elements == 0) continue;
        const size_t i = l * kNumRoles + r;
        rows[0][i] = s.amax;
        rows[1][i] = static_cast<float>(s.flushed_pct);
        rows[2][i] = static_cast<float>(s.saturated_pct);
        rows[3][i] = static_cast<float>(s.sqnr_db);
        clamped[i] = s.clamped_blocks;
      }
  Handle g(check(H5Gopen2(f, "quant", H5P_DEFAULT), "quant"));
  for (int k = 0; k < 4; ++k) append_row(g, kQuantFloat[k], H5T_NATIVE_FLOAT, rows[k].data());
  append_row(g, "clamped_blocks", H5T_NATIVE_INT64, clamped.data());
  if (stats && !impl_->applied_written) {
    write_applied(g, *stats, L);
    impl_->applied_written = true;
  }
}

void RunLog::append_eval(const EvalMetrics& e) {
  Handle g(check(H5Gopen2(impl_->file, "eval", H5P_DEFAULT), "eval"));
  append_row(g, "step", H5T_NATIVE_INT64, &e.step);
  append_row(g, "loss", H5T_NATIVE_DOUBLE, &e.loss);
  append_row(g, "accuracy", H5T_NATIVE_DOUBLE, &e.accuracy);
}

void RunLog::write_checkpoint(int64_t step, const std::vector<float>& params,
                              const std::vector<float>& m, const std::vector<float>& v,
                              const QuantizerState& quantizer) {
  const hid_t f = impl_->file;
  Handle g(check(H5Gopen2(f, "checkpoint", H5P_DEFAULT), "checkpoint"));
  const int64_t current = get_i64_attr(g, "current", -1);
  const int64_t slot = current == 0 ? 1 : 0;
  const std::string name = fmt::format("slot{}", slot);
  Handle s(H5Lexists(g, name.c_str(), H5P_DEFAULT) > 0
               ? check(H5Gopen2(g, name.c_str(), H5P_DEFAULT), "slot")
               : check(H5Gcreate2(g, name.c_str(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), "slot"));
  set_i64_attr(s, "step", -1);  // incomplete while being written
  write_flat(s, "params", params);
  write_flat(s, "adam_m", m);
  write_flat(s, "adam_v", v);
  if (quantizer.length > 0) {
    const auto L = static_cast<hsize_t>(quantizer.layers), H = static_cast<hsize_t>(quantizer.length);
    if (quantizer.values.size() != L * kNumRoles * H || quantizer.count.size() != L * kNumRoles)
      throw std::invalid_argument("checkpoint: quantizer state arrays do not match their shape");
    write_array(s, "amax_history", H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, {L, kNumRoles, H}, quantizer.values.data());
    write_array(s, "amax_history_count", H5T_STD_I64LE, H5T_NATIVE_INT64, {L, kNumRoles}, quantizer.count.data());
  } else {
    for (const char* n : {"amax_history", "amax_history_count"})
      if (H5Lexists(s, n, H5P_DEFAULT) > 0) check_status(H5Ldelete(s, n, H5P_DEFAULT), "delete dataset");
  }
  set_i64_attr(s, "step", step);
  check_status(H5Fflush(f, H5F_SCOPE_GLOBAL), "flush");
  set_i64_attr(g, "current", slot);
  check_status(H5Fflush(f, H5F_SCOPE_GLOBAL), "flush");
}

CheckpointData RunLog::read_checkpoint() const {
  CheckpointData c;
  Handle g(check(H5Gopen2(impl_->file, "checkpoint", H5P_DEFAULT), "checkpoint"));
  const int64_t current = get_i64_attr(g, "current", -1);
  if (current < 0) return c;
  const std::string name = fmt::format("slot{}", current);
  Handle s(check(H5Gopen2(g, name.c_str(), H5P_DEFAULT), "slot"));
  c.step = get_i64_attr(s, "step", -1);
  if (c.step < 0) throw std::runtime_error("checkpoint: the current slot is incomplete");
  c.params = read_all<float>(s, "params", H5T_NATIVE_FLOAT);
  c.adam_m = read_all<float>(s, "adam_m", H5T_NATIVE_FLOAT);
  c.adam_v = read_all<float>(s, "adam_v", H5T_NATIVE_FLOAT);
  if (H5Lexists(s, "amax_history", H5P_DEFAULT) > 0) {
    Handle d(check(H5Dopen2(s, "amax_history", H5P_DEFAULT), "amax_history"));
    Space fs(H5Dget_space(d));
    hsize_t dims[3] = {};
    if (H5Sget_simple_extent_ndims(fs) != 3 || (H5Sget_simple_extent_dims(fs, dims, nullptr), dims[1] != kNumRoles))
      throw std::runtime_error("checkpoint: amax_history is not (layers, 6, length)");
    c.has_quantizer_state = true;
    c.quantizer.layers = static_cast<int64_t>(dims[0]);
    c.quantizer.length = static_cast<int64_t>(dims[2]);
    c.quantizer.values = read_all<float>(s, "amax_history", H5T_NATIVE_FLOAT);
    c.quantizer.count = read_all<int64_t>(s, "amax_history_count", H5T_NATIVE_INT64);
    if (c.quantizer.count.size() != dims[0] * kNumRoles)
      throw std::runtime_error("checkpoint: amax_history_count is not (layers, 6)");
  }
  return c;
}

void RunLog::truncate(int64_t steps) {
  const hid_t f = impl_->file;
  {
    Handle g(check(H5Gopen2(f, "metrics", H5P_DEFAULT), "metrics"));
    const auto step = read_all<int64_t>(g, "step", H5T_NATIVE_INT64);
    hsize_t keep = 0;
    while (keep < step.size() && step[keep] < steps) ++keep;
    for (const char* n : {"step", "loss", "lr", "grad_norm", "update_ratio", "adam_rms", "step_time_s"})
      set_rows(g, n, keep);
    Handle q(check(H5Gopen2(f, "quant", H5P_DEFAULT), "quant"));
    for (const char* n : kQuantFloat) set_rows(q, n, keep);
    set_rows(q, "clamped_blocks", keep);
  }
  {
    Handle g(check(H5Gopen2(f, "eval", H5P_DEFAULT), "eval"));
    const auto step = read_all<int64_t>(g, "step", H5T_NATIVE_INT64);
    hsize_t keep = 0;
    while (keep < step.size() && step[keep] <= steps) ++keep;
    for (const char* n : {"step", "loss", "accuracy"}) set_rows(g, n, keep);
  }
  flush();
}

CheckpointData read_run_checkpoint(const std::string& path) {
  return RunLog::open(path, /*writable=*/false)->read_checkpoint();
}

void RunLog::flush() { check_status(H5Fflush(impl_->file, H5F_SCOPE_GLOBAL), "flush"); }

RunData read_run_log(const std::string& path) {
  quiet_errors();
  const hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  if (f < 0) throw std::runtime_error(fmt::format("{}: cannot open as an HDF5 file", path));
  RunData d;
  try {
    d.model = get_string_attr(f, "model");
    d.recipe = get_string_attr(f, "recipe");
    d.config = get_string_attr(f, "config");
    {
      Handle g(check(H5Gopen2(f, "metrics", H5P_DEFAULT), "metrics"));
      d.steps = read_all<int64_t>(g, "step", H5T_NATIVE_INT64);
      d.loss = read_all<double>(g, "loss", H5T_NATIVE_DOUBLE);
      d.lr = read_all<float>(g, "lr", H5T_NATIVE_FLOAT);
      d.grad_norm = read_all<double>(g, "grad_norm", H5T_NATIVE_DOUBLE);
      d.update_ratio = read_all<double>(g, "update_ratio", H5T_NATIVE_DOUBLE);
      d.adam_rms = read_all<double>(g, "adam_rms", H5T_NATIVE_DOUBLE);
    }
    {
      Handle g(check(H5Gopen2(f, "eval", H5P_DEFAULT), "eval"));
      d.eval_steps = read_all<int64_t>(g, "step", H5T_NATIVE_INT64);
      d.eval_loss = read_all<double>(g, "loss", H5T_NATIVE_DOUBLE);
      d.eval_accuracy = read_all<double>(g, "accuracy", H5T_NATIVE_DOUBLE);
    }
    {
      Handle g(check(H5Gopen2(f, "quant", H5P_DEFAULT), "quant"));
      d.layers = read_strings(g, "layers");
      d.roles = read_strings(g, "roles");
      d.amax = read_all<float>(g, "amax", H5T_NATIVE_FLOAT);
      d.flushed_pct = read_all<float>(g, "flushed_pct", H5T_NATIVE_FLOAT);
      d.saturated_pct = read_all<float>(g, "saturated_pct", H5T_NATIVE_FLOAT);
      d.sqnr_db = read_all<float>(g, "sqnr_db", H5T_NATIVE_FLOAT);
      if (H5Lexists(g, "applied", H5P_DEFAULT) > 0) {
        Handle a(check(H5Gopen2(g, "applied", H5P_DEFAULT), "applied"));
        const size_t n = d.layers.size() * kNumRoles;
        d.applied.assign(n, AppliedFormat{});
        for (int k = 0; k < 7; ++k) {
          const std::vector<std::string> v = read_strings(a, kAppliedStrings[k]);
          for (size_t i = 0; i < std::min(n, v.size()); ++i) *applied_string(d.applied[i], k) = v[i];
        }
        for (int k = 0; k < 4; ++k) {
          const std::vector<int64_t> v = read_all<int64_t>(a, kAppliedInts[k], H5T_NATIVE_INT64);
          for (size_t i = 0; i < std::min(n, v.size()); ++i) {
            AppliedFormat& x = d.applied[i];
            const int iv = static_cast<int>(v[i]);
            if (k == 0) x.axis = iv;
            else if (k == 1) x.sr_bits = iv;
            else if (k == 2) x.headroom_3_4 = iv > 0;
            else x.margin = iv;
          }
        }
      }
    }
    {
      Handle g(check(H5Gopen2(f, "checkpoint", H5P_DEFAULT), "checkpoint"));
      const int64_t cur = get_i64_attr(g, "current", -1);
      if (cur >= 0) {
        Handle s(check(H5Gopen2(g, fmt::format("slot{}", cur).c_str(), H5P_DEFAULT), "slot"));
        d.checkpoint_step = get_i64_attr(s, "step", -1);
      }
    }
  } catch (...) {
    H5Fclose(f);
    throw;
  }
  H5Fclose(f);
  return d;
}

}  // namespace lpx::sim
