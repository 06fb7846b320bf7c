// Reading run logs: a written log reads back exactly; missing optional datasets are listed,
// not fatal; files that are not lpx logs, or logs of another format version, are clear
// errors naming the file.
#include <catch2/catch.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "lpx/divergence/run_file.hpp"

using namespace lpx::div;
namespace fs = std::filesystem;

namespace {
struct Tmp {
  fs::path dir;
  Tmp() {
    std::string t = (fs::temp_directory_path() / "lpx-div-XXXXXX").string();
    dir = mkdtemp(t.data());
  }
  ~Tmp() { fs::remove_all(dir); }
};

RunFile sample() {
  RunFile r;
  r.model = "mlp";
  r.recipe = "mxfp8";
  r.config_json = R"({"lr":0.001})";
  r.seed = 3;
  auto& s = r.series;
  s.layers = {"fc0", "fc1"};
  s.roles = {"fwd_x", "fwd_w", "dgrad_dy", "dgrad_w", "wgrad_x", "wgrad_dy"};
  for (int t = 0; t < 5; ++t) {
    s.step.push_back(t);
    s.loss.push_back(2.0 - 0.1 * t);
    s.grad_norm.push_back(1 + t);
    s.update_ratio.push_back(1e-3);
    s.lr.push_back(0.5);
    for (int k = 0; k < 12; ++k) {
      s.flushed_pct.push_back(static_cast<float>(t + k));
      s.saturated_pct.push_back(0.25f);
      r.amax.push_back(1);
      r.sqnr_db.push_back(30);
    }
  }
  r.eval_step = {5};
  r.eval_loss = {1.5};
  r.eval_accuracy = {0.7};
  return r;
}
}  // namespace

TEST_CASE("a written run log reads back") {
  Tmp t;
  const auto p = (t.dir / "run.h5").string();
  const RunFile w = sample();
  write_run_file(p, w);
  const RunFile r = read_run_file(p);
  CHECK(r.recipe == "mxfp8");
  CHECK(r.model == "mlp");
  CHECK(r.seed == 3);
  CHECK(r.config_json == w.config_json);
  CHECK(r.series.step == w.series.step);
  CHECK(r.series.loss == w.series.loss);
  CHECK(r.series.grad_norm == w.series.grad_norm);
  CHECK(r.series.lr == w.series.lr);
  CHECK(r.series.layers == w.series.layers);
  CHECK(r.series.roles == w.series.roles);
  CHECK(r.series.flushed_pct == w.series.flushed_pct);
  CHECK(r.eval_loss == w.eval_loss);
  CHECK(r.series.adam_rms.empty());
  CHECK(r.missing == std::vector<std::string>{"/metrics/adam_rms"});
}

TEST_CASE("optional datasets may be missing") {
  Tmp t;
  const auto p = (t.dir / "run.h5").string();
  RunFile w = sample();
  w.series.grad_norm.clear();
  w.series.layers.clear();
  w.eval_accuracy.clear();
  write_run_file(p, w);
  const RunFile r = read_run_file(p);
  CHECK(r.series.grad_norm.size() == 5);
  CHECK(std::isnan(r.series.grad_norm[0]));
  CHECK(r.series.flushed_pct.empty());
  CHECK(r.missing == std::vector<std::string>{"/metrics/grad_norm", "/metrics/adam_rms", "/quant"});
}

TEST_CASE("files that are not current lpx logs are clear errors naming the file") {
  Tmp t;
  const auto text = (t.dir / "notes.h5").string();
  std::ofstream(text) << "hello";
  auto msg = [](const std::string& p) {
    try {
      read_run_file(p);
    } catch (const LogError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  CHECK(msg(text) == text + ": not an HDF5 file (expected an lpx run log)");
  CHECK(msg((t.dir / "absent.h5").string()) == (t.dir / "absent.h5").string() + ": no such file");
  RunFile old = sample();
  old.format = "lpx-run-0";
  const auto po = (t.dir / "old.h5").string();
  write_run_file(po, old);
  CHECK(msg(po) == po + ": log written by an older lpx (format lpx-run-0); expected lpx-run-1");
  old.format = "lpx-run-2";
  write_run_file(po, old);
  CHECK(msg(po) == po + ": log written by a newer lpx (format lpx-run-2); expected lpx-run-1");
  old.format = "something";
  write_run_file(po, old);
  CHECK(msg(po).find("not an lpx run log") != std::string::npos);
}
