// libFuzzer target: the run-log reader on files HDF5 itself writes. The input does not hold
// file bytes (fuzz_runlog does that) but choices: for every group, attribute and dataset of
// the schema (runlog/include/lpx/runlog/schema.hpp), whether it is there, its type (the
// schema's, another number type, fixed or variable-length strings), its rank and extents
// (up to 2^40 rows in a chunked dataset that stores nothing), its layout and its values.
// The file is built with HDF5's API in memory (the core driver), written to one scratch file
// per process and read with read_run and RunLog::open + read_checkpoint, as fuzz_runlog
// does. So every input is a well-formed HDF5 file: what is fuzzed is lpx's reading of
// datasets that are missing, mistyped, misshapen or oversized, never HDF5's own parser
// (which fuzz_runlog attacks, and which has bugs of its own: README, fuzzing).
//
// A LogError is the expected answer; anything else escaping is a finding.
#include <hdf5.h>
#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include <fuzzer/FuzzedDataProvider.h>

#include "lpx/runlog/run_log.hpp"
#include "scratch.hpp"

namespace {

std::string path;  // the scratch file (scratch.hpp)

// The element type of a dataset: index 0 is what the schema says for it.
enum class Kind { schema, i64, f32, f64, i8, fixed_string, vlen_string, kCount };

hid_t file_type(Kind k, bool schema_string, bool schema_float, hid_t& owned) {
  owned = -1;
  if (k == Kind::schema) k = schema_string ? Kind::fixed_string : schema_float ? Kind::f64 : Kind::i64;
  switch (k) {
    case Kind::i64: return H5T_STD_I64LE;
    case Kind::f32: return H5T_IEEE_F32LE;
    case Kind::f64: return H5T_IEEE_F64LE;
    case Kind::i8: return H5T_STD_I8LE;
    case Kind::fixed_string:
      owned = H5Tcopy(H5T_C_S1);
      H5Tset_size(owned, 4);
      return owned;
    default:
      owned = H5Tcopy(H5T_C_S1);
      H5Tset_size(owned, H5T_VARIABLE);
      return owned;
  }
}

struct Builder {
  FuzzedDataProvider& in;

  // A dataset at `path` (its group exists), present unless the input says otherwise.
  void dataset(hid_t loc, const char* name, bool is_string, bool is_float, int schema_rank) {
    if (in.ConsumeIntegralInRange<int>(0, 7) == 7) return;  // absent
    hid_t owned = -1;
    const auto kind = static_cast<Kind>(in.ConsumeIntegralInRange<int>(0, static_cast<int>(Kind::kCount) - 1));
    const hid_t type = file_type(kind, is_string, is_float, owned);
    int rank = schema_rank;
    if (in.ConsumeBool()) rank = in.ConsumeIntegralInRange<int>(0, 3);
    std::vector<hsize_t> dims(static_cast<size_t>(rank)), maxdims(dims.size()), chunk(dims.size());
    const bool huge = rank > 0 && in.ConsumeIntegralInRange<int>(0, 15) == 15;
    hsize_t count = 1;
    for (size_t i = 0; i < dims.size(); ++i) {
      dims[i] = in.ConsumeIntegralInRange<hsize_t>(0, 8);
      maxdims[i] = H5S_UNLIMITED;
      chunk[i] = in.ConsumeIntegralInRange<hsize_t>(1, 16);
    }
    if (huge) dims[0] = hsize_t{1} << in.ConsumeIntegralInRange<int>(20, 40);
    for (hsize_t d : dims) count *= d;
    const bool chunked = rank > 0 && (huge || in.ConsumeBool());
    hid_t space = rank == 0 ? H5Screate(H5S_SCALAR)
                            : H5Screate_simple(rank, dims.data(), chunked ? maxdims.data() : nullptr);
    hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    if (chunked) H5Pset_chunk(dcpl, rank, chunk.data());
    hid_t d = H5Dcreate2(loc, name, type, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    if (d >= 0 && !huge && count > 0 && in.ConsumeIntegralInRange<int>(0, 7) != 7) {
      if (H5Tis_variable_str(type) > 0) {
        std::vector<std::string> text(count);
        std::vector<const char*> p(count);
        for (size_t i = 0; i < count; ++i) {
          text[i] = in.ConsumeRandomLengthString(12);
          p[i] = text[i].c_str();
        }
        H5Dwrite(d, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, p.data());
      } else {
        std::vector<uint8_t> bytes(count * H5Tget_size(type));
        const std::vector<uint8_t> given = in.ConsumeBytes<uint8_t>(bytes.size());
        std::copy(given.begin(), given.end(), bytes.begin());
        H5Dwrite(d, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, bytes.data());
      }
    }
    if (d >= 0) H5Dclose(d);
    H5Pclose(dcpl);
    H5Sclose(space);
    if (owned >= 0) H5Tclose(owned);
  }

  void string_attr(hid_t obj, const char* name, const std::string& usual) {
    const int how = in.ConsumeIntegralInRange<int>(0, 7);
    if (how == 7) return;  // absent
    const std::string value = how < 4 ? usual : in.ConsumeRandomLengthString(24);
    hid_t space = H5Screate(H5S_SCALAR);
    if (how == 6) {  // a number where a string belongs
      const int64_t v = 1;
      hid_t a = H5Acreate2(obj, name, H5T_STD_I64LE, space, H5P_DEFAULT, H5P_DEFAULT);
      H5Awrite(a, H5T_NATIVE_INT64, &v);
      H5Aclose(a);
    } else {
      hid_t t = H5Tcopy(H5T_C_S1);
      if (how == 5) {  // variable length, as h5py writes it
        H5Tset_size(t, H5T_VARIABLE);
        const char* p = value.c_str();
        hid_t a = H5Acreate2(obj, name, t, space, H5P_DEFAULT, H5P_DEFAULT);
        H5Awrite(a, t, &p);
        H5Aclose(a);
      } else {
        H5Tset_size(t, std::max<size_t>(1, value.size()));
        hid_t a = H5Acreate2(obj, name, t, space, H5P_DEFAULT, H5P_DEFAULT);
        H5Awrite(a, t, value.empty() ? "" : value.data());
        H5Aclose(a);
      }
      H5Tclose(t);
    }
    H5Sclose(space);
  }

  void int_attr(hid_t obj, const char* name) {
    if (in.ConsumeIntegralInRange<int>(0, 7) == 7) return;
    const int64_t v = in.ConsumeIntegralInRange<int64_t>(-2, 3) == 3 ? in.ConsumeIntegral<int64_t>()
                                                                     : in.ConsumeIntegralInRange<int64_t>(-2, 3);
    hid_t space = H5Screate(H5S_SCALAR);
    hid_t a = H5Acreate2(obj, name, H5T_STD_I64LE, space, H5P_DEFAULT, H5P_DEFAULT);
    H5Awrite(a, H5T_NATIVE_INT64, &v);
    H5Aclose(a);
    H5Sclose(space);
  }

  hid_t group(hid_t parent, const char* name) {
    if (in.ConsumeIntegralInRange<int>(0, 7) == 7) return -1;
    return H5Gcreate2(parent, name, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  }

  void build(hid_t f) {
    using namespace lpx::runlog;
    Header h;
    visit_header_strings(h, [&](const char* name, std::string& v) {
      string_attr(f, name, std::string(name) == "format" ? format_name() : v);
    });
    int_attr(f, "seed");
    if (hid_t g = group(f, "metrics"); g >= 0) {
      Metrics m;
      visit_metrics(m, [&](const char* name, Presence, auto& column) {
        dataset(g, name, false, std::is_floating_point_v<typename std::decay_t<decltype(column)>::value_type>, 1);
      });
      H5Gclose(g);
    }
    if (hid_t g = group(f, "eval"); g >= 0) {
      Evals e;
      visit_eval(e, [&](const char* name, Presence, auto& column) {
        dataset(g, name, false, std::is_floating_point_v<typename std::decay_t<decltype(column)>::value_type>, 1);
      });
      H5Gclose(g);
    }
    if (hid_t g = group(f, "quant"); g >= 0) {
      for (const char* names : {"layers", "layer_kinds", "roles"}) dataset(g, names, true, false, 1);
      QuantTable q;
      visit_quant(q, [&](const char* name, Presence, auto& column) {
        dataset(g, name, false, std::is_floating_point_v<typename std::decay_t<decltype(column)>::value_type>, 3);
      });
      if (hid_t a = group(g, "applied"); a >= 0) {
        lpx::AppliedOperand probe;
        visit_applied_strings(probe, [&](const char* name, const std::string&) { dataset(a, name, true, false, 2); });
        visit_applied_ints(probe, [&](const char* name, const auto&) { dataset(a, name, false, false, 2); });
        H5Gclose(a);
      }
      H5Gclose(g);
    }
    if (hid_t g = group(f, "checkpoint"); g >= 0) {
      int_attr(g, "current");
      for (const char* slot : {"slot0", "slot1"}) {
        hid_t s = group(g, slot);
        if (s < 0) continue;
        int_attr(s, "step");
        for (const char* name : {"params", "adam_m", "adam_v"}) dataset(s, name, false, true, 1);
        dataset(s, "amax_history", false, true, 3);
        dataset(s, "amax_history_count", false, false, 2);
        H5Gclose(s);
      }
      H5Gclose(g);
    }
  }
};

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  path = lpx::fuzz::scratch_file("runlog-schema", ".h5");
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider in(data, size);
  // Build the file in memory and write its image: no file of this name is ever half made.
  hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
  H5Pset_fapl_core(fapl, 1 << 16, /*backing_store=*/false);
  hid_t f = H5Fcreate("lpx-fuzz-in-memory.h5", H5F_ACC_TRUNC, H5P_DEFAULT, fapl);
  H5Pclose(fapl);
  if (f < 0) __builtin_trap();
  Builder{in}.build(f);
  H5Fflush(f, H5F_SCOPE_GLOBAL);
  const ssize_t n = H5Fget_file_image(f, nullptr, 0);
  std::vector<char> image(static_cast<size_t>(std::max<ssize_t>(0, n)));
  if (n <= 0 || H5Fget_file_image(f, image.data(), image.size()) != n) __builtin_trap();
  H5Fclose(f);
  lpx::fuzz::write_input(path, reinterpret_cast<const uint8_t*>(image.data()), image.size());
  lpx::fuzz::read_log(path);
  return 0;
}
