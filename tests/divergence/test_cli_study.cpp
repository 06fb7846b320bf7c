// Recipe studies from the command line (README "Recipe studies"): `lpx sweep --ablate` and
// the blame and seed statistics of `lpx report`, on a small MLP; GPT presets and the
// precision line of `lpx train`; and the refusals, one stderr line each.
#include <catch2/catch.hpp>

#include <fstream>
#include <nlohmann/json.hpp>

#include "../tools/cli_runner.hpp"
#include "lpx/runlog/run_log.hpp"

using namespace lpx_test;

namespace {
// MXFP8 on five operands and E2M0 (values 0, 1, 2, 4 per block scale) on the weight
// gradient's dY: one operand far coarser than the others, so blame has a known answer.
constexpr const char* kLopsided = R"({
  "name": "lopsided",
  "source": "lpx test: one operand much coarser than the others",
  "roles": {
    "fwd_x": {"format": "mxfp8_e4m3"}, "fwd_w": {"format": "mxfp8_e4m3"},
    "dgrad_dy": {"format": "mxfp8_e4m3"}, "dgrad_w": {"format": "mxfp8_e4m3"},
    "wgrad_x": {"format": "mxfp8_e4m3"}, "wgrad_dy": {"format": "e2m0:b32:e8m0"}
  }
})";
}  // namespace

TEST_CASE("blame names the coarse operand, and removing it closes the largest share of the gap") {
  TempDir d;
  std::ofstream(d / "lopsided.json") << kLopsided;
  std::ofstream(d / "spec.json") << R"({"model": "mlp", "steps": 60, "seeds": 2, "intervals": true,
                                       "fixed": {"batch": 64, "threads": 1, "stats_every": 0}})";
  auto r = run_lpx("sweep " + (d / "spec.json").string() + " --ablate roles " + (d / "lopsided.json").string() +
                       " --ablate-units fwd_x,fwd_w,wgrad_dy --jobs 2 --out " + (d / "out").string(),
                   d);
  INFO(r.err);
  REQUIRE(r.status == 0);
  CHECK(std::filesystem::exists(d / "out" / "ablation" / "lopsided.only-wgrad_dy.json"));
  r = run_lpx("report " + (d / "out").string() + " --format json --intervals", d);
  INFO(r.err);
  REQUIRE(r.status == 0);
  const auto j = nlohmann::json::parse(r.out);
  REQUIRE(j["blame"].size() == 1);
  const auto& units = j["blame"][0]["units"];
  REQUIRE(units.size() == 3);
  CHECK(units[0]["unit"] == "wgrad_dy");  // ranked first by the gap it makes alone
  double best = -1e9;
  std::string best_unit;
  for (const auto& u : units)
    if (u["closed_share"]["mean"].get<double>() > best) best = u["closed_share"]["mean"].get<double>(), best_unit = u["unit"];
  CHECK(best_unit == "wgrad_dy");  // and not quantizing it closes the most
  CHECK(units[0]["only_share"]["ci95"].size() == 2);
  // seed statistics of every configuration
  REQUIRE(j["configurations"].size() == 7);
  for (const auto& c : j["configurations"]) {
    CHECK(c["seeds"] == 2);
    CHECK(c["gap_ci95"].size() == 2);
    CHECK(c["reference_seed_spread"].is_number());
  }
  CHECK(j["runs"].size() == 16);
  r = run_lpx("report " + (d / "out").string() + " --format md", d);
  CHECK(r.out.find("## Blame: lopsided") != std::string::npos);
  CHECK(r.out.find("## Seed statistics") != std::string::npos);
}

TEST_CASE("train: presets and the precision line") {
  TempDir d;
  auto r = run_lpx("train --preset gpt-tiny --layers 8 --recipe nvfp4 --steps 1", d);
  INFO(r.err);
  REQUIRE(r.status == 0);
  // nvfp4 keeps 8/62 of 8 blocks (the last) plus the head and the attention products in bf16
  CHECK(r.out.find("precision: 28 of 41 GEMM layers quantized; kept in bf16: h7.*, lm_head, attention products") !=
        std::string::npos);
  r = run_lpx("train --model gpt --recipe " + std::string(LPX_SOURCE_DIR) + "/tools/sweeps/recipes/nvfp4-counts-2-8.json --steps 1", d);
  REQUIRE(r.status == 0);
  CHECK(r.out.find("precision: WARNING: recipe nvfp4-counts-2-8 quantizes no GEMM of this model") != std::string::npos);
}

TEST_CASE("nvfp4 on the largest preset: NVFP4 where the recipe quantizes, and the report names the bf16 layers") {
  TempDir d;
  std::filesystem::create_directories(d / "runs");
  const auto t = run_lpx("train --preset gpt-medium --recipe nvfp4 --steps 1 --batch 2 --out " + (d / "runs" / "nvfp4.h5").string(), d);
  INFO(t.err);
  REQUIRE(t.status == 0);
  const auto run = lpx::runlog::read_run((d / "runs" / "nvfp4.h5").string());
  const auto& q = run.quant;
  REQUIRE(q.applied.size() == q.layers.size() * q.roles.size());
  int nvfp4 = 0, bf16 = 0;
  for (size_t l = 0; l < q.layers.size(); ++l) {
    const std::string& name = q.layers[l];
    // 8 blocks: the last (8/62 of the depth) stays bf16, with the head and attention
    const bool kept = name.rfind("h7.", 0) == 0 || name == "lm_head" || name.ends_with(".attn.bmm");
    for (size_t k = 0; k < q.roles.size(); ++k) {
      INFO(name << " " << q.roles[k]);
      CHECK(q.applied[l * q.roles.size() + k].element == (kept ? "bfloat16" : "float4_e2m1fn"));
      (kept ? bf16 : nvfp4)++;
    }
  }
  CHECK(nvfp4 == 28 * 6);
  CHECK(bf16 == 13 * 6);
  const auto r = run_lpx("report " + (d / "runs").string() + " --format md", d);
  REQUIRE(r.status == 0);
  CHECK(r.out.find("| nvfp4 | nvfp4 (kept high: h7.*, lm_head, attention products) |") != std::string::npos);
}

TEST_CASE("studies: bad input is one line and a usage error") {
  TempDir d;
  std::ofstream(d / "one-seed.json") << R"({"grid": {"recipe": ["mxfp8"]}, "intervals": true})";
  std::ofstream(d / "mlp-preset.json") << R"({"grid": {"recipe": ["mxfp8"]}, "fixed": {"preset": "gpt-small"}})";
  std::ofstream(d / "bad-fraction.json") << R"({"name": "f", "source": "t", "roles": {
    "fwd_x": {"format": "mxfp8_e4m3"}, "fwd_w": {"format": "mxfp8_e4m3"}, "dgrad_dy": {"format": "mxfp8_e4m3"},
    "dgrad_w": {"format": "mxfp8_e4m3"}, "wgrad_x": {"format": "mxfp8_e4m3"}, "wgrad_dy": {"format": "mxfp8_e4m3"}},
    "high_precision": {"last_fraction": 1.25}})";
  const std::string out = " --out " + (d / "o").string();
  const std::pair<std::string, std::string> cases[] = {
      {"sweep --ablate colours mxfp4-rne" + out, "is not roles, layers or linears"},
      {"sweep --ablate linears mxfp4-rne --model gpt --ablate-units mlp.gate" + out,
       "does not quantize a layer 'mlp.gate' of this model; it quantizes: attn.qkv, attn.proj, mlp.fc, mlp.proj, head"},
      {"sweep --ablate roles mxfp4-sr-rht --ablate-units fwd_x" + out, "does not quantize fwd_x"},
      {"sweep --ablate roles bf16" + out, "quantizes no GEMM operand below BF16"},
      {"sweep --ablate-units fwd_x --recipes mxfp8" + out, "--ablate-units needs --ablate"},
      {"sweep --ablate roles mxfp8 --recipes nvfp4" + out, "leave out --recipes"},
      {"sweep " + (d / "one-seed.json").string() + out, "95% intervals need at least 2 seeds"},
      {"sweep " + (d / "mlp-preset.json").string() + out, "is a GPT size"},
      {"train --preset gpt-huge --steps 1", "unknown preset 'gpt-huge'"},
      {"train --preset gpt-small --model mlp --steps 1", "is a GPT size; --model is mlp"},
      {"recipes check " + (d / "bad-fraction.json").string(), "high_precision.last_fraction: 1.25 is outside [0, 1]"},
  };
  for (const auto& [args, want] : cases) {
    const auto r = run_lpx(args, d);
    INFO(args << " -> " << r.err);
    CHECK(r.status == 2);
    CHECK(r.err_lines() == 1);
    CHECK(r.err.find(want) != std::string::npos);
  }
  // --ablate linears on the default GPT: the four linears of a block and the head, each
  // quantized alone and left out, as recipe files the sweep runs
  {
    auto lin = run_lpx("sweep --ablate linears mxfp4-rne --model gpt --seeds 2 --dry-run --out " + (d / "lin").string(), d);
    REQUIRE(lin.status == 0);
    size_t files = 0;
    for (const auto& e : std::filesystem::directory_iterator(d / "lin" / "ablation")) files += e.path().extension() == ".json";
    CHECK(files == 10);
    CHECK(lin.out.find("mxfp4-rne.without-mlp.proj-s1") != std::string::npos);
    std::ifstream f(d / "lin" / "ablation" / "mxfp4-rne.without-attn.qkv.json");
    const auto rec = nlohmann::json::parse(f);
    CHECK(rec["high_precision"]["layers"] == nlohmann::json::array({"attn.qkv"}));
  }
  // lpx report --intervals over a sweep of one seed
  auto r = run_lpx("sweep --recipes mxfp8 --steps 3 --set batch=16,8" + out, d);
  REQUIRE(r.status == 0);
  // one reference per swept baseline: each batch size is compared with fp32 at that size
  {
    std::ifstream f(d / "o" / "sweep.json");
    const auto plan = nlohmann::json::parse(f);
    int refs = 0;
    for (const auto& run : plan["runs"]) {
      if (run["reference"]) {
        ++refs;
        continue;
      }
      for (const auto& ref : plan["runs"])
        if (ref["name"] == run["reference_run"]) CHECK(ref["set"]["batch"] == run["set"]["batch"]);
    }
    CHECK(refs == 2);
  }
  r = run_lpx("report " + (d / "o").string() + " --format json --intervals", d);
  CHECK(r.status == 2);
  CHECK(r.err_lines() == 1);
  CHECK(r.err.find("--intervals: mxfp8 (batch=16) has 1 seed") != std::string::npos);
  CHECK(r.err.find("95% intervals need at least 2") != std::string::npos);
  // without --intervals the same report carries "one seed" verdicts
  r = run_lpx("report " + (d / "o").string() + " --format json", d);
  REQUIRE(r.status == 0);
  CHECK(nlohmann::json::parse(r.out)["configurations"][0]["verdict"] == "one seed");
}

TEST_CASE("every committed sweep spec expands to its runs (dry run)") {
  // tools/sweeps/*.json are the README's studies: a spec that stops parsing (a renamed key,
  // a recipe dropped from the catalogue) fails here, not when someone reruns a study.
  TempDir d;
  // Specs name recipe files relative to the repository root, where the README runs them.
  const auto cwd = std::filesystem::current_path();
  std::filesystem::current_path(LPX_SOURCE_DIR);
  int specs = 0;
  for (const auto& e : std::filesystem::directory_iterator(std::string(LPX_SOURCE_DIR) + "/tools/sweeps")) {
    if (e.path().extension() != ".json") continue;
    const std::string name = e.path().stem().string();
    INFO(name);
    const nlohmann::json spec = nlohmann::json::parse(std::ifstream(e.path()));
    // blame-* specs name the runs through --ablate.
    const std::string ablate = name.rfind("blame-", 0) == 0 ? " --ablate linears mxfp4-rne" : "";
    auto r = run_lpx("sweep " + e.path().string() + ablate + " --dry-run --out " + (d / name).string(), d);
    INFO(r.err);
    CHECK(r.status == 0);
    CHECK(r.err.empty());
    if (spec.contains("runs") && spec.contains("seeds") && spec["seeds"].is_array()) {
      // one line per run and seed, plus one reference run per seed
      size_t lines = 0;
      for (char c : r.out) lines += c == '\n';
      CHECK(lines == (spec["runs"].size() + 1) * spec["seeds"].size());
    }
    ++specs;
  }
  std::filesystem::current_path(cwd);
  CHECK(specs >= 5);
}
