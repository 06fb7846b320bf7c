// Writes the run-log seeds of tests/fuzz/corpus/runlog that `lpx train` does not: small
// runs through write_run (the whole-run writer) and through RunLog (the appending writer
// with a checkpoint holding quantizer state), logs of other format versions, and
// near-valid files written with HDF5's C API (a dataset that claims far more rows than it
// stores, a string dataset where numbers belong, a checkpoint slot that is incomplete,
// statistics whose shape does not match the layer and role names). Seeds named bad-* are
// refused by read_run or by RunLog::open + read_checkpoint; the others read
// (tests/runlog/test_run_log.cpp replays them all).
//
//   runlog_seeds OUT_DIR        (tests/fuzz/make_seeds.py --build DIR runs it)
#include <hdf5.h>

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "lpx/runlog/run_log.hpp"

using namespace lpx::runlog;

namespace {

Run small_run(int steps, bool with_quant) {
  Run r;
  r.header.model = "mlp";
  r.header.recipe = "mxfp8";
  r.header.recipe_json = "{}";
  r.header.config_json = R"({"lr":0.001})";
  r.header.param_table = R"([{"name":"fc0.w","offset":0,"shape":[2,3]}])";
  r.header.seed = 3;
  for (int t = 0; t < steps; ++t) {
    r.metrics.step.push_back(t);
    r.metrics.loss.push_back(2.0 - 0.1 * t);
    r.metrics.lr.push_back(1e-3f);
    r.metrics.grad_norm.push_back(1.0 + t);
    r.metrics.update_ratio.push_back(1e-3);
    r.metrics.adam_rms.push_back(0.5);
    r.metrics.step_time_s.push_back(0.01);
  }
  r.eval.step = {steps};
  r.eval.loss = {1.5};
  r.eval.accuracy = {0.5};
  if (with_quant) {
    r.quant.layers = {"fc0", "fc1"};
    r.quant.layer_kinds = {"linear", "head"};
    for (int t = 0; t < steps; ++t)
      for (int k = 0; k < 2 * lpx::kGemmRoles; ++k) {
        r.quant.amax.push_back(1.0f + static_cast<float>(k));
        r.quant.flushed_pct.push_back(0.5f);
        r.quant.saturated_pct.push_back(0.0f);
        r.quant.sqnr_db.push_back(30.0f);
        r.quant.clamped_blocks.push_back(k % 2);
      }
    lpx::AppliedOperand a;
    a.element = "float8_e4m3fn";
    a.block = "1x32";
    a.scale = "e8m0";
    a.scale_rule = "floor";
    a.rounding = "rne";
    a.axis = 1;
    r.quant.applied.assign(2 * lpx::kGemmRoles, a);
  }
  return r;
}

// The appending writer, as the trainer uses it: two steps, an evaluation and a checkpoint
// with delayed scaling's amax histories.
void appended(const std::string& path, bool complete_checkpoint) {
  Header h;
  h.model = "gpt";
  h.recipe = "fp8-delayed";
  h.seed = 1;
  auto log = RunLog::create(path, h, {"blocks.0.fc1"}, {"linear"});
  for (int64_t t = 0; t < 2; ++t) {
    StepMetrics m;
    m.step = t;
    m.loss = 3.0 - 0.5 * static_cast<double>(t);
    LayerStats stats{};
    LayerApplied applied{};
    for (auto& s : stats) {
      s.elements = 64;
      s.amax = 2;
      s.sqnr_db = 25;
    }
    log->append_step(m, std::span<const LayerStats>(&stats, 1), std::span<const LayerApplied>(&applied, 1));
  }
  log->append_eval(EvalMetrics{2, 2.5, 0.1});
  Checkpoint c;
  c.step = 2;
  c.params = {0.5f, -1.0f, 2.0f};
  c.adam_m = {0.0f, 0.1f, 0.2f};
  c.adam_v = {1e-4f, 1e-4f, 1e-4f};
  c.quantizer.layers = 1;
  c.quantizer.length = 2;
  c.quantizer.values.assign(lpx::kGemmRoles * 2, 1.0f);
  c.quantizer.count.assign(lpx::kGemmRoles, 2);
  log->write_checkpoint(c);
  if (!complete_checkpoint) {
    // The trainer killed while writing the next checkpoint: the current slot says step -1.
    log.reset();
    hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
    hid_t g = H5Gopen2(f, "checkpoint/slot0", H5P_DEFAULT);
    hid_t a = H5Aopen(g, "step", H5P_DEFAULT);
    const int64_t incomplete = -1;
    H5Awrite(a, H5T_NATIVE_INT64, &incomplete);
    H5Aclose(a);
    H5Gclose(g);
    H5Fclose(f);
  }
}

// A run whose /metrics/loss claims 2^40 rows (chunked, nothing stored past the first): a
// reader must not believe a size it has not checked.
void huge_rows(const std::string& path) {
  write_run(path, small_run(2, false));
  hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  hid_t d = H5Dopen2(f, "metrics/loss", H5P_DEFAULT);
  const hsize_t rows = hsize_t{1} << 40;
  H5Dset_extent(d, &rows);
  H5Dclose(d);
  H5Fclose(f);
}

// /quant/layers written as numbers and /metrics/step as strings: types that another tool
// writing a file of the same layout might choose.
void wrong_types(const std::string& path) {
  write_run(path, small_run(2, true));
  hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  H5Ldelete(f, "quant/layers", H5P_DEFAULT);
  const hsize_t n = 2;
  hid_t s = H5Screate_simple(1, &n, nullptr);
  hid_t d = H5Dcreate2(f, "quant/layers", H5T_IEEE_F64LE, s, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  const double v[2] = {1, 2};
  H5Dwrite(d, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, v);
  H5Dclose(d);
  H5Ldelete(f, "metrics/step", H5P_DEFAULT);
  hid_t t = H5Tcopy(H5T_C_S1);
  H5Tset_size(t, 4);
  d = H5Dcreate2(f, "metrics/step", t, s, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  H5Dwrite(d, t, H5S_ALL, H5S_ALL, H5P_DEFAULT, "0\0\0\0001\0\0\0");
  H5Dclose(d);
  H5Tclose(t);
  H5Sclose(s);
  H5Fclose(f);
}

// Opens `path` for writing with HDF5's C API, runs `change` on the file and closes it.
template <class F>
void edit(const std::string& path, F change) {
  hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  change(f);
  H5Fclose(f);
}

void set_rows(hid_t f, const char* dataset, hsize_t rows) {
  hid_t d = H5Dopen2(f, dataset, H5P_DEFAULT);
  hid_t s = H5Dget_space(d);
  hsize_t dims[H5S_MAX_RANK];
  H5Sget_simple_extent_dims(s, dims, nullptr);
  dims[0] = rows;
  H5Dset_extent(d, dims);
  H5Sclose(s);
  H5Dclose(d);
}

// Replaces a dataset with `n` fixed-length strings "x".
void replace_strings(hid_t f, const char* dataset, hsize_t n) {
  H5Ldelete(f, dataset, H5P_DEFAULT);
  hid_t t = H5Tcopy(H5T_C_S1);
  H5Tset_size(t, 1);
  hid_t s = H5Screate_simple(1, &n, nullptr);
  hid_t d = H5Dcreate2(f, dataset, t, s, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  const std::string x(n, 'x');
  H5Dwrite(d, t, H5S_ALL, H5S_ALL, H5P_DEFAULT, x.data());
  H5Dclose(d);
  H5Sclose(s);
  H5Tclose(t);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: runlog_seeds OUT_DIR\n");
    return 2;
  }
  const std::string dir = argv[1];
  write_run(dir + "/write-run-quant", small_run(3, true));
  write_run(dir + "/write-run-minimal", small_run(1, false));
  Run old = small_run(1, false);
  old.header.format = "lpx-run-0";
  write_run(dir + "/bad-older-version", old);
  Run newer = small_run(1, false);
  newer.header.format = "lpx-run-7";
  write_run(dir + "/bad-newer-version", newer);
  appended(dir + "/append-checkpoint-amax", true);
  appended(dir + "/bad-incomplete-checkpoint", false);
  huge_rows(dir + "/bad-huge-rows");
  wrong_types(dir + "/bad-wrong-types");
  // /quant statistics that do not match the names of their axes, or miss rows
  write_run(dir + "/bad-quant-shape", small_run(3, true));
  edit(dir + "/bad-quant-shape", [](hid_t f) { replace_strings(f, "quant/layers", 3); });
  write_run(dir + "/bad-quant-rows", small_run(3, true));
  edit(dir + "/bad-quant-rows", [](hid_t f) { set_rows(f, "quant/amax", 1); });
  write_run(dir + "/bad-applied-count", small_run(3, true));
  edit(dir + "/bad-applied-count", [](hid_t f) { replace_strings(f, "quant/applied/block", 5); });
  // a run killed after appending a step's metrics and before its statistics: one row short
  appended(dir + "/append-killed-before-quant-row", true);
  edit(dir + "/append-killed-before-quant-row", [](hid_t f) {
    for (const char* q : {"quant/amax", "quant/flushed_pct", "quant/saturated_pct", "quant/sqnr_db",
                          "quant/clamped_blocks"})
      set_rows(f, q, 1);
  });
  return 0;
}
