// The detectors' series of a run log (series_from): columns a log lacks become NaN rows,
// so the detectors that read them stay silent, except adam_rms and the quantizer
// statistics, which stay empty (their detectors skip an empty series).
#include <catch2/catch.hpp>

#include <cmath>
#include <filesystem>

#include "lpx/divergence/detectors.hpp"
#include "lpx/runlog/run_log.hpp"

namespace fs = std::filesystem;
using namespace lpx;

TEST_CASE("series_from: absent columns become NaN rows or stay empty") {
  std::string tmpl = (fs::temp_directory_path() / "lpx-series-XXXXXX").string();
  const fs::path dir = mkdtemp(tmpl.data());
  runlog::Run w;
  w.header.model = "mlp";
  for (int t = 0; t < 5; ++t) {
    w.metrics.step.push_back(t);
    w.metrics.loss.push_back(2.0 - 0.1 * t);
    w.metrics.update_ratio.push_back(1e-3);
    w.metrics.lr.push_back(0.5f);
  }
  const std::string p = (dir / "run.h5").string();
  runlog::write_run(p, w);
  const divergence::Series s = divergence::series_from(runlog::read_run(p));
  REQUIRE(s.rows() == 5);
  CHECK(s.grad_norm.size() == 5);
  CHECK(std::isnan(s.grad_norm[0]));
  CHECK(s.lr == std::vector<double>(5, 0.5));
  CHECK(s.adam_rms.empty());
  CHECK(s.flushed_pct.empty());
  CHECK(s.layers.empty());
  // no flags from the missing gradient norms (NaN is not a spike)
  const auto flags = divergence::detect(s, divergence::Thresholds{}, nullptr);
  for (const auto& f : flags) CHECK(f.detector != "grad_spike");
  fs::remove_all(dir);
}
