// `lpx train` end to end: a run killed after a checkpoint and resumed with --resume logs
// the same loss array, bit for bit, as an uninterrupted run (for bf16 and for every
// recipe with delayed scaling); usage errors exit 2.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>
#include <sys/wait.h>
#include <unistd.h>

#include "lpx/kernels/device.hpp"
#include "lpx/recipes/recipe.hpp"
#include "lpx/runlog/run_log.hpp"
#include "lpx/sim/gemm.hpp"
#include "lpx/sim/trainer.hpp"

namespace {
int sh(const std::string& cmd) {
  const int s = std::system((cmd + " >/dev/null 2>&1").c_str());
  return WIFEXITED(s) ? WEXITSTATUS(s) : -1;
}
}  // namespace

TEST_CASE("lpx train: abrupt exit, --resume, identical losses", "[cli][resume]") {
  const auto dir = std::filesystem::temp_directory_path() / ("lpx_cli_train_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  const std::string full = (dir / "full.h5").string(), cut = (dir / "cut.h5").string();
  // bf16, and every catalogue recipe with stateful quantizers (delayed scaling's amax
  // histories, which the checkpoint must carry)
  std::vector<std::string> recipes{"bf16"};
  for (std::string_view name : lpx::recipe_names())
    for (lpx::GemmRole r : lpx::kAllGemmRoles)
      if (lpx::recipe_by_name(name).role(r).amax_history) {
        recipes.emplace_back(name);
        break;
      }
  CHECK(recipes.size() > 1);
  for (const std::string& recipe : recipes) {
    INFO(recipe);
    const std::string common = std::string(LPX_BINARY) + " train --model gpt --recipe " + recipe +
        " --steps 24 --seed 3 --layers 1 --channels 32 --heads 2"
        " --context 32 --batch 4 --threads 2 --checkpoint-every 8 --eval-every 8";
    REQUIRE(sh(common + " --out " + full) == 0);
    // std::_Exit(3) after step 13: the file is not closed, the last checkpoint is step 8
    REQUIRE(sh(common + " --out " + cut + " --abort-after 13") == 3);
    const lpx::runlog::Checkpoint killed = lpx::runlog::read_checkpoint(cut);
    CHECK(killed.step == 8);
    CHECK(killed.has_quantizer_state == (recipe != "bf16"));
    REQUIRE(sh(std::string(LPX_BINARY) + " train --resume --out " + cut + " --threads 1") == 0);
    const lpx::runlog::Run a = lpx::runlog::read_run(full), b = lpx::runlog::read_run(cut);
    REQUIRE(a.metrics.loss.size() == 24);
    CHECK(a.metrics.loss == b.metrics.loss);
    CHECK(a.eval.loss == b.eval.loss);
    CHECK(b.checkpoint_step == 24);
  }
  CHECK(sh(std::string(LPX_BINARY) + " train --model cnn --steps 3") == 2);
  CHECK(sh(std::string(LPX_BINARY) + " train --model mlp --steps 3 --recipe nosuch") != 0);
  std::filesystem::remove_all(dir);
}

TEST_CASE("lpx train --device: gpu without a device is one clear error line", "[cli][gpu]") {
  const auto dir = std::filesystem::temp_directory_path() / ("lpx_cli_device_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  const std::string err = (dir / "err.txt").string();
  const std::string cmd = std::string(LPX_BINARY) + " train --model gpt --layers 1 --channels 32 --heads 2"
                          " --context 32 --batch 2 --steps 2 --recipe mxfp8 --device gpu";
  const int s = std::system((cmd + " >/dev/null 2>" + err).c_str());
  const int rc = WIFEXITED(s) ? WEXITSTATUS(s) : -1;
  std::ifstream f(err);
  std::vector<std::string> lines;
  for (std::string line; std::getline(f, line);) lines.push_back(line);
  if (lpx::kernels::cuda_available()) {
    CHECK(rc == 0);
  } else {
    CHECK(rc == 1);
    REQUIRE(lines.size() == 1);
    CHECK(lines[0].rfind("lpx: no CUDA device: ", 0) == 0);
  }
  CHECK(sh(std::string(LPX_BINARY) + " train --model mlp --steps 1 --device tpu") == 2);
  std::filesystem::remove_all(dir);
}

TEST_CASE("lpx train --gemm exact: logged, kept on --resume, and another order than fast", "[cli][resume]") {
  const auto dir = std::filesystem::temp_directory_path() / ("lpx_cli_gemm_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  const std::string full = (dir / "full.h5").string(), cut = (dir / "cut.h5").string(),
                    fast = (dir / "fast.h5").string();
  const std::string common = std::string(LPX_BINARY) + " train --model gpt --recipe fp32 --seed 5 --layers 1"
                             " --channels 32 --heads 2 --context 32 --batch 4 --checkpoint-every 4";
  REQUIRE(sh(common + " --steps 8 --gemm exact --out " + full) == 0);
  REQUIRE(sh(common + " --steps 8 --gemm exact --out " + cut + " --abort-after 5") == 3);  // checkpoint: step 4
  REQUIRE(sh(std::string(LPX_BINARY) + " train --resume --out " + cut) == 0);
  REQUIRE(sh(common + " --steps 8 --out " + fast) == 0);
  const lpx::runlog::Run a = lpx::runlog::read_run(full), b = lpx::runlog::read_run(cut), f = lpx::runlog::read_run(fast);
  CHECK(a.header.config_json.find("\"gemm\":\"exact\"") != std::string::npos);
  CHECK(f.header.config_json.find("\"gemm\":\"fast\"") != std::string::npos);
  REQUIRE(a.metrics.loss.size() == 8);
  CHECK(a.metrics.loss == b.metrics.loss);  // the resumed run kept the exact order
  // fp32 products: Eigen's order differs in the last bits; where the CPU has FMA, fast runs
  // the exact order's tiles (sim/gemm.hpp) and must give its bits
  if (lpx::sim::fast_gemm_is_exact()) CHECK(a.metrics.loss == f.metrics.loss);
  else CHECK(a.metrics.loss != f.metrics.loss);
  // usage errors: an unknown order, and an order given with --resume (the log's is kept)
  CHECK(sh(common + " --steps 1 --gemm tf32") == 2);
  CHECK(sh(std::string(LPX_BINARY) + " train --resume --out " + cut + " --gemm fast") == 2);
  std::filesystem::remove_all(dir);
}

TEST_CASE("lpx train --resume refuses a log of another format version in one line", "[cli][resume]") {
  const auto dir = std::filesystem::temp_directory_path() / ("lpx_cli_future_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  const std::string log = (dir / "future.h5").string(), err = (dir / "err.txt").string();
  // a run a later lpx wrote: a format version this one does not know
  lpx::runlog::Run r;
  r.header.format = "lpx-run-7";
  r.header.model = "mlp";
  r.metrics.step = {0, 1};
  r.metrics.loss = {2.0, 1.9};
  lpx::runlog::write_run(log, r);
  const int s = std::system((std::string(LPX_BINARY) + " train --resume --out " + log + " >/dev/null 2>" + err).c_str());
  CHECK((WIFEXITED(s) ? WEXITSTATUS(s) : -1) == 1);
  std::ifstream f(err);
  std::vector<std::string> lines;
  for (std::string line; std::getline(f, line);) lines.push_back(line);
  REQUIRE(lines.size() == 1);
  CHECK(lines[0] == "lpx: " + log + ": log written by a newer lpx (format lpx-run-7); expected lpx-run-1");
  std::filesystem::remove_all(dir);
}

TEST_CASE("lpx train: out-of-range numbers are usage errors, never replaced by defaults", "[cli]") {
  const auto dir = std::filesystem::temp_directory_path() / ("lpx_cli_ranges_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  const std::string out = (dir / "run.h5").string(), err = (dir / "err.txt").string();
  for (const char* bad : {"--lr -1", "--lr nan", "--lr inf", "--batch 0", "--heads 0", "--context 0",
                          "--layers -1", "--channels 0", "--hidden 0", "--hidden 64,0", "--seed -1",
                          "--seed 18446744073709551616", "--seed 1e23", "--seed 0x10", "--steps 0",
                          "--steps -5", "--threads 100000", "--threads -1", "--weight-decay nan",
                          "--weight-decay -0.1", "--eval-every -1", "--checkpoint-every -2",
                          "--stats-every -1", "--progress-every -1", "--progress-every nan"}) {
    INFO(bad);
    const std::string cmd = std::string(LPX_BINARY) + " train --model gpt --steps 2 --out " + out + " " + bad;
    const int s = std::system((cmd + " >/dev/null 2>" + err).c_str());
    CHECK((WIFEXITED(s) ? WEXITSTATUS(s) : -1) == 2);
    std::ifstream f(err);
    std::vector<std::string> lines;
    for (std::string line; std::getline(f, line);) lines.push_back(line);
    CHECK(lines.size() == 1);
    CHECK_FALSE(std::filesystem::exists(out));  // refused before anything was written
  }
  // the largest seed is a seed like any other
  CHECK(sh(std::string(LPX_BINARY) + " train --model mlp --steps 1 --hidden 8 --batch 4 --seed 18446744073709551615") == 0);
  std::filesystem::remove_all(dir);
}

TEST_CASE("lpx train --resume refuses a logged config out of range as bad data", "[cli][resume]") {
  const auto dir = std::filesystem::temp_directory_path() / ("lpx_cli_badcfg_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  const std::string log = (dir / "run.h5").string(), err = (dir / "err.txt").string();
  // a real config, then one field made impossible (as a hand-edited log would have it)
  lpx::sim::TrainConfig c;
  c.batch = 8;
  std::string json = c.to_json();
  const std::string field = "\"batch\":8";
  REQUIRE(json.find(field) != std::string::npos);
  json.replace(json.find(field), field.size(), "\"batch\":-5");
  lpx::runlog::Header h;
  h.model = "mlp";
  h.config_json = json;
  lpx::runlog::RunLog::create(log, h, {"fc0", "fc1"}, {"linear", "head"});
  const int s = std::system((std::string(LPX_BINARY) + " train --resume --out " + log + " >/dev/null 2>" + err).c_str());
  CHECK((WIFEXITED(s) ? WEXITSTATUS(s) : -1) == 1);
  std::ifstream f(err);
  std::vector<std::string> lines;
  for (std::string line; std::getline(f, line);) lines.push_back(line);
  REQUIRE(lines.size() == 1);
  CHECK(lines[0] == "lpx: " + log + ": training config: batch must be in [0, 65536] (0: the model's default)");
  std::filesystem::remove_all(dir);
}

TEST_CASE("lpx train: with stderr in a file, a plain progress line every --progress-every seconds", "[cli]") {
  const auto dir = std::filesystem::temp_directory_path() / ("lpx_cli_progress_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  const std::string err = (dir / "err.txt").string();
  auto lines_of = [&](const std::string& every) {
    const std::string cmd = std::string(LPX_BINARY) + " train --model mlp --steps 40 --threads 1 --progress-every " +
                            every + " >/dev/null 2>" + err;
    REQUIRE(std::system(cmd.c_str()) == 0);
    std::ifstream f(err);
    std::vector<std::string> lines;
    for (std::string line; std::getline(f, line);) lines.push_back(line);
    return lines;
  };
  const auto lines = lines_of("0.05");
  REQUIRE_FALSE(lines.empty());  // 40 steps of the 256-wide MLP take well over 0.05 s
  for (const auto& l : lines) {
    INFO(l);
    CHECK(l.rfind("progress: step ", 0) == 0);  // plain lines: no \r, no escape codes
    CHECK(l.find('\r') == std::string::npos);
    CHECK(l.find("/40  loss ") != std::string::npos);
    CHECK(l.find(" img/s  elapsed ") != std::string::npos);
    CHECK(l.find("  ETA ") != std::string::npos);
  }
  CHECK(lines_of("0").empty());
  std::filesystem::remove_all(dir);
}
