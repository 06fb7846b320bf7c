// `lpx train` end to end: a run killed after a checkpoint and resumed with --resume logs
// the same loss array, bit for bit, as an uninterrupted run; usage errors exit 2.
#include <catch2/catch.hpp>

#include <filesystem>
#include <string>
#include <sys/wait.h>
#include <unistd.h>

#include "lpx/sim/run_log.hpp"

using namespace lpx::sim;

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
  const std::string common = std::string(LPX_BINARY) +
      " train --model gpt --recipe bf16 --steps 24 --seed 3 --layers 1 --channels 32 --heads 2"
      " --context 32 --batch 4 --threads 2 --checkpoint-every 8 --eval-every 8";
  REQUIRE(sh(common + " --out " + full) == 0);
  // std::_Exit(3) after step 13: the file is not closed, the last checkpoint is step 8
  REQUIRE(sh(common + " --out " + cut + " --abort-after 13") == 3);
  REQUIRE(sh(std::string(LPX_BINARY) + " train --resume --out " + cut + " --threads 1") == 0);
  const RunData a = read_run_log(full), b = read_run_log(cut);
  REQUIRE(a.loss.size() == 24);
  CHECK(a.loss == b.loss);
  CHECK(a.eval_loss == b.eval_loss);
  CHECK(b.checkpoint_step == 24);
  CHECK(sh(std::string(LPX_BINARY) + " train --model cnn --steps 3") == 2);
  CHECK(sh(std::string(LPX_BINARY) + " train --model mlp --steps 3 --recipe nosuch") != 0);
  std::filesystem::remove_all(dir);
}
