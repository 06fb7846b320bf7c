// `lpx bench` through the built binary: the --json rows carry what the README's tables
// are made of (rates, the ratio to memcpy, the scaling from one thread to all, each taken
// in one interleaved window), and bad arguments get the error contract. No time is
// asserted: these machines are shared and noisy.
#include <catch2/catch.hpp>

#include <string>

#include <nlohmann/json.hpp>

#include "cli_runner.hpp"

using lpx_test::run_lpx;
using lpx_test::TempDir;

TEST_CASE("lpx bench --json: one row per path and thread count, ratios consistent") {
  TempDir dir;
  const auto r = run_lpx("bench --size 70000 --reps 1 --threads 2 --json --filter "
                         "'^(cast e4m3fn rne sat|fake-quant mxfp4 sr)$'",
                         dir);
  INFO(r.err);
  REQUIRE(r.status == 0);
  const nlohmann::json rows = nlohmann::json::parse(r.out);
  REQUIRE(rows.is_array());
  REQUIRE(rows.size() == 4);  // two paths x (1 thread, 2 threads)
  for (size_t k = 0; k < rows.size(); ++k) {
    const auto& row = rows[k];
    INFO(row.dump());
    CHECK(row["threads"] == (k % 2 == 0 ? 1 : 2));
    CHECK(row["elements"] == 70000);
    const double s = row["seconds"], eps = row["elements_per_s"];
    REQUIRE(s > 0);
    CHECK(eps == Approx(70000.0 / s).epsilon(1e-4));
    CHECK(row["ratio_to_memcpy"].get<double>() ==
          Approx(row["gb_per_s"].get<double>() / row["memcpy_gb_per_s"].get<double>()).epsilon(1e-3));
    // The sr path carries its rate over the rne path of the same name (timed beside it).
    if (row["path"] == "fake-quant mxfp4 sr") CHECK(row["rate_over_rne"].get<double>() > 0);
    else CHECK(row["rate_over_rne"].is_null());
    if (k % 2 == 0) {
      // The one-thread row is the reference of the scaling columns.
      CHECK(row["speedup_over_1_thread"] == 1.0);
      CHECK(row["memcpy_speedup_over_1_thread"] == 1.0);
    } else {
      // The same path's one-thread time over this row's.
      CHECK(row["speedup_over_1_thread"].get<double>() ==
            Approx(rows[k - 1]["seconds"].get<double>() / s).epsilon(1e-3));
      CHECK(row["path"] == rows[k - 1]["path"]);
    }
  }
  CHECK(rows[0]["path"] == "cast e4m3fn rne sat");
  CHECK(rows[2]["path"] == "fake-quant mxfp4 sr");
}

TEST_CASE("lpx bench --train --json: fp32 is the baseline, every other row a paired ratio") {
  TempDir dir;
  const auto r = run_lpx("bench --train --models mlp --recipes fp32,bf16,mxfp8 --steps 3 --json", dir);
  INFO(r.err);
  REQUIRE(r.status == 0);
  const nlohmann::json rows = nlohmann::json::parse(r.out);
  REQUIRE(rows.size() == 3);
  for (size_t k = 0; k < rows.size(); ++k) {
    const auto& row = rows[k];
    INFO(row.dump());
    CHECK(row["model"] == "mlp");
    CHECK(row["recipe"] == std::vector<std::string>{"fp32", "bf16", "mxfp8"}[k]);
    CHECK(row["gemm"] == "fast");
    CHECK(row["stats_every"] == 1);  // as lpx train: every timed step collects them
    REQUIRE(row["seconds_per_step"].get<double>() > 0);
    CHECK(row["samples_per_second"].get<double>() > 0);
    const double ratio = row["ratio_to_fp32"];
    // fp32 in the fast order is the baseline itself; the others are medians of paired
    // ratios, positive and finite (their size is the machine's business)
    if (k == 0) CHECK(ratio == 1.0);
    else CHECK((ratio > 0 && ratio < 1e3));
    // three paired steps are too few for a 95% interval, and the baseline has none
    CHECK(row["ratio_to_fp32_ci95"].is_null());
  }
}

TEST_CASE("lpx bench --train: from 6 paired steps each ratio carries a 95% interval around it") {
  TempDir dir;
  const auto r = run_lpx("bench --train --models mlp --recipes fp32,mxfp8 --steps 6 --stats-every 50 --json", dir);
  INFO(r.err);
  REQUIRE(r.status == 0);
  const nlohmann::json rows = nlohmann::json::parse(r.out);
  REQUIRE(rows.size() == 2);
  // the timed trainers' own setting, so a flag that did not reach them reads 1 here
  CHECK(rows[0]["stats_every"] == 50);
  CHECK(rows[1]["stats_every"] == 50);
  CHECK(rows[0]["ratio_to_fp32_ci95"].is_null());
  const auto& ci = rows[1]["ratio_to_fp32_ci95"];
  INFO(rows[1].dump());
  REQUIRE(ci.is_array());
  REQUIRE(ci.size() == 2);
  const double ratio = rows[1]["ratio_to_fp32"];
  CHECK(ci[0].get<double>() > 0);
  CHECK(ci[0].get<double>() <= ratio);  // rounded to 4 places alike
  CHECK(ratio <= ci[1].get<double>());
  // the table prints it beside the ratio
  const auto t = run_lpx("bench --train --models mlp --recipes mxfp8 --steps 6", dir);
  REQUIRE(t.status == 0);
  CHECK(t.out.find("95% interval") != std::string::npos);
  // and above the table, which steps it times
  CHECK(t.out.starts_with("steps with per-operand statistics every step (--stats-every 1)\n"));
  const auto every50 = run_lpx("bench --train --models mlp --recipes fp32 --steps 1 --stats-every 50", dir);
  REQUIRE(every50.status == 0);
  CHECK(every50.out.starts_with("steps with per-operand statistics every 50 steps (--stats-every 50)\n"));
  const auto never = run_lpx("bench --train --models mlp --recipes fp32 --steps 1 --stats-every 0", dir);
  REQUIRE(never.status == 0);
  CHECK(never.out.starts_with("steps without per-operand statistics (--stats-every 0)\n"));
}

TEST_CASE("lpx bench: bad arguments exit non-zero with one stderr line") {
  TempDir dir;
  for (const std::string args : {"bench --size 0", "bench --reps 0", "bench --filter '('",
                                 "bench --train --models gpt-huge --recipes fp32", "bench --train --models cnn"}) {
    INFO(args);
    const auto r = run_lpx(args, dir);
    CHECK(r.status != 0);
    CHECK(r.out.empty());
    REQUIRE(!r.err.empty());
    CHECK(r.err.find('\n') == r.err.size() - 1);
  }
}

TEST_CASE("lpx bench: numbers out of range are usage errors, never defaults") {
  // Before: --threads 100000 ran (and crashes OpenMP on large sizes), --size -1 wrapped to
  // 2^64-1 ("cannot create std::vector larger than max_size()", exit 1), --size
  // 99999999999999999999 saturated, --reps had no upper end.
  TempDir dir;
  for (const std::string args :
       {"bench --threads 100000 --size 16", "bench --threads -1 --size 16", "bench --size -1",
        "bench --size 1e3", "bench --size 0x10", "bench --size 99999999999999999999",
        "bench --size 4294967297", "bench --reps 1001", "bench --reps -3 --size 16",
        "bench --train --steps 0", "bench --train --steps 100000", "bench --train --stats-every -1",
        "bench --train --stats-every 1e3", "bench --train --stats-every 1099511627777"}) {
    INFO(args);
    const auto r = run_lpx(args, dir);
    CHECK(r.status == 2);
    CHECK(r.out.empty());
    CHECK(r.err_lines() == 1);
  }
  // In range: runs.
  const auto r = run_lpx("bench --size 64 --reps 1 --threads 2 --filter 'decode e4m3fn'", dir);
  CHECK(r.status == 0);
}
