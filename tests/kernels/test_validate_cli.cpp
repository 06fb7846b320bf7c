// `lpx validate` without a device: validates nothing, says why, exits 0; with
// --require-gpu exits 1 with one line on stderr. (On a GPU machine: a short real run.)
#include <catch2/catch.hpp>

#include <cstdio>
#include <sstream>
#include <string>

#include "../tools/cli_runner.hpp"
#include "lpx/kernels/device.hpp"

TEST_CASE("lpx validate reports a missing device") {
  lpx_test::TempDir dir;
  if (lpx::kernels::cuda_available()) {
    const auto r = lpx_test::run_lpx("validate --require-gpu --elements 200000", dir);
    CHECK(r.status == 0);
    CHECK(r.out.find("mismatches") != std::string::npos);
    // one line per kernel family, which add up to the total
    std::istringstream lines(r.out);
    std::string line;
    unsigned long long families = 0, family_sum = 0, total = 0;
    while (std::getline(lines, line)) {
      char name[64];
      unsigned long long n = 0, bad = 0;
      if (std::sscanf(line.c_str(), "family %63s %llu elements %llu mismatches", name, &n, &bad) == 3) {
        ++families;
        family_sum += n;
        CHECK(bad == 0);
      }
      std::sscanf(line.c_str(), "total: %llu elements", &total);
    }
    CHECK(families >= 5);  // casts, decode, block kernels, Hadamard, GEMMs at least
    CHECK(total > 0);
    CHECK(family_sum == total);
    return;
  }
  const auto plain = lpx_test::run_lpx("validate", dir);
  CHECK(plain.status == 0);
  CHECK(plain.out.find("validated nothing") != std::string::npos);
  CHECK(plain.out.find("no CUDA device") != std::string::npos);
  const auto strict = lpx_test::run_lpx("validate --require-gpu", dir);
  CHECK(strict.status == 1);
  CHECK(strict.err_lines() == 1);
  CHECK(strict.err.find("no CUDA device") != std::string::npos);
  CHECK(lpx_test::run_lpx("validate --elements 0", dir).status == 2);
}
