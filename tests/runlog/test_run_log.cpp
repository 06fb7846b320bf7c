// Reading run logs: a written log reads back exactly; missing optional datasets are listed,
// not fatal; files that are not lpx logs, or logs of another format version, are clear
// errors naming the file. Appending refuses a log whose datasets do not have the schema's
// shapes instead of writing past them.
#include <catch2/catch.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>

#include "lpx/runlog/run_log.hpp"

using namespace lpx::runlog;
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

Run sample() {
  Run r;
  r.header.model = "mlp";
  r.header.recipe = "mxfp8";
  r.header.config_json = R"({"lr":0.001})";
  r.header.seed = 3;
  auto& s = r.metrics;
  auto& q = r.quant;
  q.layers = {"fc0", "fc1"};
  q.roles = {"fwd_x", "fwd_w", "dgrad_dy", "dgrad_w", "wgrad_x", "wgrad_dy"};
  for (int t = 0; t < 5; ++t) {
    s.step.push_back(t);
    s.loss.push_back(2.0 - 0.1 * t);
    s.grad_norm.push_back(1 + t);
    s.update_ratio.push_back(1e-3);
    s.lr.push_back(0.5);
    for (int k = 0; k < 12; ++k) {
      q.flushed_pct.push_back(static_cast<float>(t + k));
      q.saturated_pct.push_back(0.25f);
      q.amax.push_back(1);
      q.sqnr_db.push_back(30);
    }
  }
  r.eval.step = {5};
  r.eval.loss = {1.5};
  r.eval.accuracy = {0.7};
  return r;
}
}  // namespace

TEST_CASE("a written run log reads back") {
  Tmp t;
  const auto p = (t.dir / "run.h5").string();
  const Run w = sample();
  write_run(p, w);
  const Run r = read_run(p);
  CHECK(r.header.recipe == "mxfp8");
  CHECK(r.header.model == "mlp");
  CHECK(r.header.seed == 3);
  CHECK(r.header.config_json == w.header.config_json);
  CHECK(r.metrics.step == w.metrics.step);
  CHECK(r.metrics.loss == w.metrics.loss);
  CHECK(r.metrics.grad_norm == w.metrics.grad_norm);
  CHECK(r.metrics.lr == w.metrics.lr);
  CHECK(r.quant.layers == w.quant.layers);
  CHECK(r.quant.roles == w.quant.roles);
  CHECK(r.quant.flushed_pct == w.quant.flushed_pct);
  CHECK(r.eval.loss == w.eval.loss);
  CHECK(r.metrics.adam_rms.empty());
  CHECK(r.missing == std::vector<std::string>{"/metrics/adam_rms"});
}

TEST_CASE("optional datasets may be missing") {
  Tmp t;
  const auto p = (t.dir / "run.h5").string();
  Run w = sample();
  w.metrics.grad_norm.clear();
  w.quant.layers.clear();
  w.eval.accuracy.clear();
  write_run(p, w);
  const Run r = read_run(p);
  // absent columns stay empty here; the detectors' series NaN-fill them (divergence/)
  CHECK(r.metrics.grad_norm.empty());
  CHECK(r.quant.flushed_pct.empty());
  CHECK(r.missing == std::vector<std::string>{"/metrics/grad_norm", "/metrics/adam_rms", "/quant"});
}

TEST_CASE("files that are not current lpx logs are clear errors naming the file") {
  Tmp t;
  const auto text = (t.dir / "notes.h5").string();
  std::ofstream(text) << "hello";
  auto msg = [](const std::string& p) {
    try {
      read_run(p);
    } catch (const LogError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  CHECK(msg(text) == text + ": not an HDF5 file (expected an lpx run log)");
  CHECK(msg((t.dir / "absent.h5").string()) == (t.dir / "absent.h5").string() + ": no such file");
  Run old = sample();
  old.header.format = "lpx-run-0";
  const auto po = (t.dir / "old.h5").string();
  write_run(po, old);
  CHECK(msg(po) == po + ": log written by an older lpx (format lpx-run-0); expected lpx-run-1");
  old.header.format = "lpx-run-2";
  write_run(po, old);
  CHECK(msg(po) == po + ": log written by a newer lpx (format lpx-run-2); expected lpx-run-1");
  // a run to resume gets the same refusal before anything is written
  try {
    RunLog::open(po);
    FAIL("opened a log of a newer format");
  } catch (const LogError& e) {
    CHECK(std::string(e.what()) == po + ": log written by a newer lpx (format lpx-run-2); expected lpx-run-1");
  }
  old.header.format = "something";
  write_run(po, old);
  CHECK(msg(po).find("not an lpx run log") != std::string::npos);
}

namespace {
LayerStats stats_of(float amax) {
  LayerStats s{};
  for (auto& o : s) {
    o.elements = 64;
    o.amax = amax;
    o.sqnr_db = 20;
    o.clamped_blocks = 1;
  }
  return s;
}
}  // namespace

TEST_CASE("the appending writer: steps, evaluations, applied formats and checkpoints read back") {
  Tmp t;
  const auto p = (t.dir / "run.h5").string();
  Header h;
  h.model = "gpt";
  h.recipe = "nvfp4";
  h.seed = 7;
  {
    auto log = RunLog::create(p, h, {"h0.attn.qkv", "lm_head"}, {"linear", "head"});
    LayerApplied applied{};
    applied[1].element = "float4_e2m1fn";
    applied[1].block = "16x16";
    applied[1].headroom_3_4 = true;
    const std::vector<LayerStats> stats{stats_of(2), stats_of(3)};
    const std::vector<LayerApplied> app{applied, applied};
    for (int64_t s = 0; s < 4; ++s) {
      StepMetrics m;
      m.step = s;
      m.loss = 3.0 - static_cast<double>(s);
      m.lr = 0.25f;
      m.adam_rms = 1.5;
      if (s % 2 == 0) log->append_step(m, stats, app);
      else log->append_step(m);  // statistics not collected: NaN rows
    }
    log->append_eval(EvalMetrics{4, 1.25, 0.5});
    Checkpoint c;
    c.step = 4;
    c.params = {1, 2, 3};
    c.adam_m = {0, 0, 0};
    c.adam_v = {4, 5, 6};
    log->write_checkpoint(c);
  }
  const Run r = read_run(p);
  CHECK(r.header.format == "lpx-run-1");
  CHECK(r.header.recipe == "nvfp4");
  CHECK(r.metrics.step == std::vector<int64_t>{0, 1, 2, 3});
  CHECK(r.metrics.adam_rms == std::vector<double>{1.5, 1.5, 1.5, 1.5});
  CHECK(r.missing.empty());
  REQUIRE(r.quant.amax.size() == 4 * 2 * 6);
  CHECK(r.quant.amax[0] == 2.0f);
  CHECK(r.quant.amax[6] == 3.0f);
  CHECK(std::isnan(r.quant.amax[12]));         // step 1: not collected
  CHECK(r.quant.clamped_blocks[12] == 0);
  CHECK(r.quant.clamped_blocks[24] == 1);
  CHECK(r.quant.layer_kinds == std::vector<std::string>{"linear", "head"});
  REQUIRE(r.quant.applied.size() == 12);
  CHECK(r.quant.applied[1].element == "float4_e2m1fn");
  CHECK(r.quant.applied[1].block == "16x16");
  CHECK(r.quant.applied[1].headroom_3_4);
  CHECK(r.quant.applied[0].element == "float32");
  CHECK(!r.quant.applied[0].headroom_3_4);
  CHECK(r.eval.step == std::vector<int64_t>{4});
  CHECK(r.checkpoint_step == 4);
  const Checkpoint back = read_checkpoint(p);
  CHECK(back.step == 4);
  CHECK(back.adam_v == std::vector<float>{4, 5, 6});
  CHECK(!back.has_quantizer_state);

  // truncate to a checkpoint: the rows after it go, the rest stay
  RunLog::open(p)->truncate(2);
  const Run cut = read_run(p);
  CHECK(cut.metrics.step == std::vector<int64_t>{0, 1});
  CHECK(cut.quant.amax.size() == 2 * 2 * 6);
  CHECK(cut.eval.step.empty());
}

TEST_CASE("a log whose datasets do not match the schema is refused, not written past") {
  Tmp t;
  const auto p = (t.dir / "run.h5").string();
  // two layers written by a writer that believed in three statistics columns per role
  Run w = sample();
  w.metrics.adam_rms.assign(5, 1.0);
  w.metrics.step_time_s.assign(5, 0.01);
  w.quant.roles = {"fwd_x", "fwd_w", "dgrad_dy"};
  w.quant.flushed_pct.resize(5 * 2 * 3);
  w.quant.saturated_pct.resize(5 * 2 * 3);
  w.quant.amax.resize(5 * 2 * 3);
  w.quant.sqnr_db.resize(5 * 2 * 3);
  write_run(p, w);
  std::string message;
  try {
    RunLog::open(p);
  } catch (const LogError& e) {
    message = e.what();
  }
  CHECK(message.rfind(p + ": ", 0) == 0);
  CHECK(message.find("not rows of") != std::string::npos);
}

TEST_CASE("fuzz seeds and damaged logs read or fail with one LogError, never allocate what they claim") {
  // tests/fuzz/corpus/runlog (tests/fuzz/runlog_seeds.cpp, make_seeds.py): real logs of lpx
  // train and of the appending writer read and open to resume; those of write_run (no
  // checkpoint group) read; bad-* are refused by read_run or by RunLog::open +
  // read_checkpoint; regress-* (fuzzer finds) only have to end in a value or a LogError.
  const fs::path dir = fs::path(LPX_TEST_DATA_DIR).parent_path() / "fuzz" / "corpus" / "runlog";
  REQUIRE(fs::exists(dir));
  std::map<std::string, std::string> errors;  // seed -> the first error's text
  int files = 0;
  for (const auto& entry : fs::directory_iterator(dir)) {
    const std::string path = entry.path().string(), name = entry.path().filename().string();
    INFO(name);
    bool read = false, opened = false;
    try {
      const Run r = read_run(path);
      for (const auto* column : {&r.quant.amax, &r.quant.flushed_pct, &r.quant.saturated_pct, &r.quant.sqnr_db})
        if (!column->empty()) CHECK(column->size() == r.steps() * r.quant.layers.size() * r.quant.roles.size());
      if (!r.quant.applied.empty()) CHECK(r.quant.applied.size() == r.quant.layers.size() * r.quant.roles.size());
      read = true;
      (void)RunLog::open(path, /*writable=*/false)->read_checkpoint();
      opened = true;
    } catch (const LogError& e) {
      errors[name] = e.what();
      CHECK(std::string(e.what()).rfind(path + ": ", 0) == 0);
      CHECK(std::string(e.what()).find('\n') == std::string::npos);
    }
    if (name.rfind("bad-", 0) == 0) CHECK_FALSE(opened);
    if (name.rfind("write-run-", 0) == 0) CHECK(read);
    if (name.rfind("train-", 0) == 0 || name.rfind("append-", 0) == 0) CHECK(opened);
    ++files;
  }
  CHECK(files >= 10);
  // a column that claims 2^40 rows in a 48 kB file is refused before anything is allocated
  CHECK(errors["bad-huge-rows"].find("/metrics/loss claims 1099511627776 values, more than the file holds") !=
        std::string::npos);
  CHECK(errors["bad-quant-shape"].find("/quant/amax is 3x2x6, not rows of 3x6") != std::string::npos);
  CHECK(errors["bad-quant-rows"].find("/quant/amax has 1 rows for 3 steps") != std::string::npos);
  CHECK(errors["bad-applied-count"].find("/quant/applied/block holds 5 values, not one per layer and role (12)") !=
        std::string::npos);
  // one row of statistics short (killed between a step's metrics and its statistics): padded
  const Run killed = read_run((dir / "append-killed-before-quant-row").string());
  REQUIRE(killed.steps() == 2);
  REQUIRE(killed.quant.amax.size() == 2 * 6);
  CHECK(killed.quant.amax[0] == 2.0f);
  CHECK(std::isnan(killed.quant.amax[6]));
}
