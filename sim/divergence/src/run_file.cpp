// run_file.hpp with the HDF5 C API: whole datasets are read into native arrays; strings
// may be fixed-length (what sim writes) or variable-length (what h5py writes by default).
#include "lpx/divergence/run_file.hpp"

#include <hdf5.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>

#include <fmt/format.h>

namespace lpx::div {

namespace {

struct H {  // closes any HDF5 id with the matching call
  hid_t id = -1;
  herr_t (*close)(hid_t) = nullptr;
  H(hid_t i, herr_t (*c)(hid_t)) : id(i), close(c) {}
  ~H() {
    if (id >= 0 && close) close(id);
  }
  H(const H&) = delete;
  H& operator=(const H&) = delete;
  operator hid_t() const { return id; }
};

void quiet() { H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr); }

bool exists(hid_t loc, const std::string& path) {
  // H5Lexists on each component: "a/b" needs "a" first
  size_t pos = 0;
  while (true) {
    pos = path.find('/', pos + 1);
    const std::string part = path.substr(0, pos);
    if (H5Lexists(loc, part.c_str(), H5P_DEFAULT) <= 0) return false;
    if (pos == std::string::npos) return true;
  }
}

std::string string_attr(hid_t obj, const char* name, bool* found = nullptr) {
  if (found) *found = false;
  if (H5Aexists(obj, name) <= 0) return {};
  H a(H5Aopen(obj, name, H5P_DEFAULT), H5Aclose);
  H t(H5Aget_type(a), H5Tclose);
  if (H5Tget_class(t) != H5T_STRING) return {};
  if (found) *found = true;
  if (H5Tis_variable_str(t) > 0) {
    char* p = nullptr;
    H mt(H5Tcopy(H5T_C_S1), H5Tclose);
    H5Tset_size(mt, H5T_VARIABLE);
    if (H5Aread(a, mt, &p) < 0) return {};
    std::string out = p ? p : "";
    H5free_memory(p);
    return out;
  }
  std::string out(H5Tget_size(t), '\0');
  if (H5Aread(a, t, out.data()) < 0) return {};
  while (!out.empty() && out.back() == '\0') out.pop_back();
  return out;
}

int64_t int_attr(hid_t obj, const char* name) {
  if (H5Aexists(obj, name) <= 0) return 0;
  H a(H5Aopen(obj, name, H5P_DEFAULT), H5Aclose);
  int64_t v = 0;
  if (H5Aread(a, H5T_NATIVE_INT64, &v) < 0) return 0;
  return v;
}

template <class T>
std::vector<T> read_array(hid_t f, const std::string& path, hid_t mem_type, const std::string& file) {
  H d(H5Dopen2(f, path.c_str(), H5P_DEFAULT), H5Dclose);
  if (d < 0) throw LogError(fmt::format("{}: cannot open /{}", file, path));
  H s(H5Dget_space(d), H5Sclose);
  const hssize_t n = H5Sget_simple_extent_npoints(s);
  std::vector<T> v(static_cast<size_t>(n < 0 ? 0 : n));
  if (!v.empty() && H5Dread(d, mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, v.data()) < 0)
    throw LogError(fmt::format("{}: cannot read /{}", file, path));
  return v;
}

std::vector<std::string> read_strings(hid_t f, const std::string& path, const std::string& file) {
  H d(H5Dopen2(f, path.c_str(), H5P_DEFAULT), H5Dclose);
  if (d < 0) throw LogError(fmt::format("{}: cannot open /{}", file, path));
  H s(H5Dget_space(d), H5Sclose);
  H t(H5Dget_type(d), H5Tclose);
  const auto n = static_cast<size_t>(std::max<hssize_t>(0, H5Sget_simple_extent_npoints(s)));
  std::vector<std::string> out;
  if (n == 0) return out;
  if (H5Tget_class(t) != H5T_STRING) throw LogError(fmt::format("{}: /{} is not a string dataset", file, path));
  if (H5Tis_variable_str(t) > 0) {
    std::vector<char*> p(n, nullptr);
    H mt(H5Tcopy(H5T_C_S1), H5Tclose);
    H5Tset_size(mt, H5T_VARIABLE);
    if (H5Dread(d, mt, H5S_ALL, H5S_ALL, H5P_DEFAULT, p.data()) < 0)
      throw LogError(fmt::format("{}: cannot read /{}", file, path));
    for (char* c : p) out.emplace_back(c ? c : "");
    H5Dvlen_reclaim(mt, s, H5P_DEFAULT, p.data());
    return out;
  }
  const size_t w = H5Tget_size(t);
  std::vector<char> buf(n * w);
  if (H5Dread(d, t, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf.data()) < 0)
    throw LogError(fmt::format("{}: cannot read /{}", file, path));
  for (size_t i = 0; i < n; ++i) {
    std::string x(buf.data() + i * w, w);
    while (!x.empty() && (x.back() == '\0' || x.back() == ' ')) x.pop_back();
    out.push_back(std::move(x));
  }
  return out;
}

// ---- writing -------------------------------------------------------------------------

void put_string_attr(hid_t obj, const char* name, const std::string& value) {
  H t(H5Tcopy(H5T_C_S1), H5Tclose);
  H5Tset_size(t, std::max<size_t>(1, value.size()));
  H5Tset_strpad(t, H5T_STR_NULLPAD);
  H s(H5Screate(H5S_SCALAR), H5Sclose);
  H a(H5Acreate2(obj, name, t, s, H5P_DEFAULT, H5P_DEFAULT), H5Aclose);
  std::string v = value.empty() ? std::string(1, '\0') : value;
  H5Awrite(a, t, v.data());
}

template <class T>
void put_array(hid_t g, const char* name, hid_t file_type, hid_t mem_type, const std::vector<T>& v,
               std::vector<hsize_t> dims) {
  H s(H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr), H5Sclose);
  H d(H5Dcreate2(g, name, file_type, s, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), H5Dclose);
  if (d < 0) throw LogError(fmt::format("cannot create dataset {}", name));
  if (!v.empty()) H5Dwrite(d, mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, v.data());
}

void put_strings(hid_t g, const char* name, const std::vector<std::string>& v) {
  size_t w = 1;
  for (const auto& x : v) w = std::max(w, x.size());
  std::vector<char> buf(v.size() * w, '\0');
  for (size_t i = 0; i < v.size(); ++i) std::memcpy(buf.data() + i * w, v[i].data(), v[i].size());
  H t(H5Tcopy(H5T_C_S1), H5Tclose);
  H5Tset_size(t, w);
  H5Tset_strpad(t, H5T_STR_NULLPAD);
  hsize_t dims[1] = {v.size()};
  H s(H5Screate_simple(1, dims, nullptr), H5Sclose);
  H d(H5Dcreate2(g, name, t, s, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), H5Dclose);
  if (!v.empty()) H5Dwrite(d, t, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf.data());
}

}  // namespace

bool is_hdf5_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  char sig[8] = {};
  f.read(sig, 8);
  return f.gcount() == 8 && std::memcmp(sig, "\x89HDF\r\n\x1a\n", 8) == 0;
}

RunFile read_run_file(const std::string& path) {
  quiet();
  if (!std::filesystem::is_regular_file(path)) throw LogError(fmt::format("{}: no such file", path));
  if (!is_hdf5_file(path)) throw LogError(fmt::format("{}: not an HDF5 file (expected an lpx run log)", path));
  H f(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), H5Fclose);
  if (f < 0) throw LogError(fmt::format("{}: cannot open as an HDF5 file", path));
  RunFile r;
  r.path = path;
  bool has_format = false;
  r.format = string_attr(f, "format", &has_format);
  if (!has_format) throw LogError(fmt::format("{}: not an lpx run log (no 'format' attribute)", path));
  if (r.format != kRunFormat) {
    int version = -1;
    if (r.format.rfind("lpx-run-", 0) == 0) std::sscanf(r.format.c_str() + 8, "%d", &version);
    if (version >= 0 && version < 1)
      throw LogError(fmt::format("{}: log written by an older lpx (format {}); expected {}", path, r.format, kRunFormat));
    if (version > 1)
      throw LogError(fmt::format("{}: log written by a newer lpx (format {}); expected {}", path, r.format, kRunFormat));
    throw LogError(fmt::format("{}: not an lpx run log (format '{}'); expected {}", path, r.format, kRunFormat));
  }
  r.lpx_version = string_attr(f, "lpx_version");
  r.model = string_attr(f, "model");
  r.recipe = string_attr(f, "recipe");
  r.recipe_json = string_attr(f, "recipe_json");
  r.config_json = string_attr(f, "config");
  r.seed = int_attr(f, "seed");

  for (const char* req : {"metrics/step", "metrics/loss"})
    if (!exists(f, req)) throw LogError(fmt::format("{}: lpx run log without /{}", path, req));
  Series& s = r.series;
  s.step = read_array<int64_t>(f, "metrics/step", H5T_NATIVE_INT64, path);
  s.loss = read_array<double>(f, "metrics/loss", H5T_NATIVE_DOUBLE, path);
  const size_t n = std::min(s.step.size(), s.loss.size());
  s.step.resize(n);
  s.loss.resize(n);
  // optional per-step series: NaN-filled to n rows when absent or short
  auto opt = [&](const char* name, std::vector<double>& v, bool keep_empty) {
    if (exists(f, name)) {
      v = read_array<double>(f, name, H5T_NATIVE_DOUBLE, path);
    } else {
      r.missing.push_back(std::string("/") + name);
      if (keep_empty) return;
    }
    v.resize(n, std::numeric_limits<double>::quiet_NaN());
  };
  opt("metrics/grad_norm", s.grad_norm, false);
  opt("metrics/update_ratio", s.update_ratio, false);
  opt("metrics/lr", s.lr, false);
  opt("metrics/adam_rms", s.adam_rms, true);
  if (exists(f, "eval/step") && exists(f, "eval/loss")) {
    r.eval_step = read_array<int64_t>(f, "eval/step", H5T_NATIVE_INT64, path);
    r.eval_loss = read_array<double>(f, "eval/loss", H5T_NATIVE_DOUBLE, path);
    if (exists(f, "eval/accuracy")) r.eval_accuracy = read_array<double>(f, "eval/accuracy", H5T_NATIVE_DOUBLE, path);
  } else {
    r.missing.push_back("/eval");
  }
  if (exists(f, "quant/layers") && exists(f, "quant/roles")) {
    s.layers = read_strings(f, "quant/layers", path);
    s.roles = read_strings(f, "quant/roles", path);
    const size_t cells = n * s.layers.size() * s.roles.size();
    auto q = [&](const char* name, std::vector<float>& v) {
      if (!exists(f, name)) {
        r.missing.push_back(std::string("/") + name);
        return;
      }
      v = read_array<float>(f, name, H5T_NATIVE_FLOAT, path);
      v.resize(cells, std::numeric_limits<float>::quiet_NaN());  // rows beyond n are dropped
    };
    q("quant/flushed_pct", s.flushed_pct);
    q("quant/saturated_pct", s.saturated_pct);
    q("quant/amax", r.amax);
    q("quant/sqnr_db", r.sqnr_db);
  } else {
    r.missing.push_back("/quant");
  }
  return r;
}

void write_run_file(const std::string& path, const RunFile& r) {
  quiet();
  const std::string tmp = path + ".tmp";
  {
    H f(H5Fcreate(tmp.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT), H5Fclose);
    if (f < 0) throw LogError(fmt::format("{}: cannot create", tmp));
    put_string_attr(f, "format", r.format);
    put_string_attr(f, "lpx_version", r.lpx_version);
    put_string_attr(f, "model", r.model);
    put_string_attr(f, "recipe", r.recipe);
    put_string_attr(f, "recipe_json", r.recipe_json);
    put_string_attr(f, "config", r.config_json);
    {
      H sp(H5Screate(H5S_SCALAR), H5Sclose);
      H a(H5Acreate2(f, "seed", H5T_STD_I64LE, sp, H5P_DEFAULT, H5P_DEFAULT), H5Aclose);
      H5Awrite(a, H5T_NATIVE_INT64, &r.seed);
    }
    const Series& s = r.series;
    const hsize_t n = s.rows();
    {
      H g(H5Gcreate2(f, "metrics", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), H5Gclose);
      put_array(g, "step", H5T_STD_I64LE, H5T_NATIVE_INT64, s.step, {n});
      put_array(g, "loss", H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, s.loss, {n});
      std::vector<float> lr(s.lr.begin(), s.lr.end());
      if (!s.lr.empty()) put_array(g, "lr", H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, lr, {n});
      if (!s.grad_norm.empty()) put_array(g, "grad_norm", H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, s.grad_norm, {n});
      if (!s.update_ratio.empty())
        put_array(g, "update_ratio", H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, s.update_ratio, {n});
      if (!s.adam_rms.empty()) put_array(g, "adam_rms", H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, s.adam_rms, {n});
    }
    {
      H g(H5Gcreate2(f, "eval", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), H5Gclose);
      const hsize_t e = r.eval_step.size();
      put_array(g, "step", H5T_STD_I64LE, H5T_NATIVE_INT64, r.eval_step, {e});
      put_array(g, "loss", H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, r.eval_loss, {e});
      if (r.eval_accuracy.size() == e) put_array(g, "accuracy", H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, r.eval_accuracy, {e});
    }
    if (!s.layers.empty()) {
      H g(H5Gcreate2(f, "quant", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), H5Gclose);
      put_strings(g, "layers", s.layers);
      put_strings(g, "roles", s.roles);
      const std::vector<hsize_t> dims = {n, s.layers.size(), s.roles.size()};
      auto q = [&](const char* name, const std::vector<float>& v) {
        if (v.size() == n * s.layers.size() * s.roles.size()) put_array(g, name, H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, v, dims);
      };
      q("flushed_pct", s.flushed_pct);
      q("saturated_pct", s.saturated_pct);
      q("amax", r.amax);
      q("sqnr_db", r.sqnr_db);
    }
  }
  std::filesystem::rename(tmp, path);
}

}  // namespace lpx::div
