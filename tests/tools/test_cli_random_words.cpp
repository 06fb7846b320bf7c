// `--random-words FILE` (docs/formats.md#caller-given-random-bits) and the stochastic
// variants by name through the real binary: with caller-given words, `lpx cast` and
// `lpx quantize` equal the library fed the same words, and so reproduce a cast whose words
// came from Philox; a short file and words without a stochastic mode are one stderr line.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>

#include "cli_runner.hpp"
#include "lpx/formats/block_format.hpp"
#include "lpx/formats/cast.hpp"
#include "lpx/formats/codec.hpp"
#include "lpx/formats/quantize.hpp"
#include "lpx/numerics/philox.hpp"

using namespace lpx_test;

namespace {
bool same_bytes(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * 4) == 0;
}
std::vector<float> sample(size_t n) {
  std::vector<float> x;
  for (size_t i = 0; i < n; ++i)
    x.push_back(std::ldexp(static_cast<float>(lpx::random_bits(11, 0, i) % 20001) - 10000.f, -9));
  return x;
}
// Little-endian bytes of the words, whatever the host.
std::vector<uint8_t> le_bytes(const std::vector<uint32_t>& w) {
  std::vector<uint8_t> b;
  for (const uint32_t v : w)
    for (int k = 0; k < 4; ++k) b.push_back(static_cast<uint8_t>(v >> (8 * k)));
  return b;
}
}  // namespace

TEST_CASE("cast --random-words: the codec with the file's words, every stochastic mode") {
  TempDir dir;
  const auto x = sample(3000);
  write_file(dir / "x.f32", x);
  std::vector<uint32_t> words;
  for (size_t i = 0; i < x.size() + 5; ++i)  // a longer file is fine: word i is element i's
    words.push_back(lpx::random_bits(99, 4, i) ^ static_cast<uint32_t>(i * 2654435761u));
  write_file(dir / "w.bin", le_bytes(words));
  const lpx::ElementFormat f = lpx::format_by_name("e4m3");
  for (const char* mode : {"sr", "sr-fast", "sr-rne", "sr-odd"}) {
    for (const int bits : {3, 13, 32}) {
      INFO(mode << " " << bits);
      const auto r = run_lpx(std::string("cast --to e4m3 --round ") + mode + " --sr-bits " +
                                 std::to_string(bits) + " --random-words " +
                                 (dir / "w.bin").string() + " " + (dir / "x.f32").string() +
                                 " " + (dir / "c.bin").string(),
                             dir);
      REQUIRE(r.status == 0);
      const auto codes = read_file<uint8_t>(dir / "c.bin");
      REQUIRE(codes.size() == x.size());
      const lpx::Rounding m = lpx::rounding_by_name(mode);
      size_t bad = 0, differs_from_philox = 0;
      for (size_t i = 0; i < x.size(); ++i) {
        bad += codes[i] != lpx::encode(x[i], f, m, lpx::Overflow::ieee, words[i], bits) ? 1 : 0;
        differs_from_philox +=
            codes[i] != lpx::encode(x[i], f, m, lpx::Overflow::ieee, lpx::random_bits(0, 0, i), bits);
      }
      CHECK(bad == 0);
      CHECK(differs_from_philox > 0);  // the words were used, not the internal stream
    }
  }
  // Philox's own words given back reproduce the internal stream's cast (seed 5, stream 2).
  std::vector<uint32_t> philox;
  for (size_t i = 0; i < x.size(); ++i) philox.push_back(lpx::random_bits(5, 2, i));
  write_file(dir / "p.bin", le_bytes(philox));
  auto a = run_lpx("cast --to e2m1 --round sr --sr-bits 8 --seed 5 --stream 2 " +
                       (dir / "x.f32").string() + " " + (dir / "a.bin").string(), dir);
  auto b = run_lpx("cast --to e2m1 --round sr --sr-bits 8 --random-words " + (dir / "p.bin").string() +
                       " " + (dir / "x.f32").string() + " " + (dir / "b.bin").string(), dir);
  REQUIRE(a.status == 0);
  REQUIRE(b.status == 0);
  CHECK(read_file<uint8_t>(dir / "a.bin") == read_file<uint8_t>(dir / "b.bin"));
}

TEST_CASE("quantize --random-words: fake_quantize with the same words") {
  TempDir dir;
  const auto x = sample(8 * 64);
  write_file(dir / "x.f32", x);
  std::vector<uint32_t> words;
  for (size_t i = 0; i < x.size(); ++i) words.push_back(lpx::random_bits(1234, 9, i) * 7u + 3u);
  write_file(dir / "w.bin", le_bytes(words));
  for (const char* mode : {"sr", "sr-rne"}) {
    INFO(mode);
    const auto r = run_lpx(std::string("quantize --format mxfp4 --round ") + mode +
                               " --sr-bits 4 --shape 8x64 --random-words " +
                               (dir / "w.bin").string() + " " + (dir / "x.f32").string() + " " +
                               (dir / "v.f32").string(),
                           dir);
    REQUIRE(r.status == 0);
    lpx::QuantizeOptions opt;
    opt.round = lpx::rounding_by_name(mode);
    opt.sr_bits = 4;
    opt.random_words = words.data();
    opt.random_words_count = words.size();
    std::vector<float> want(x.size());
    const std::vector<int64_t> shape = {8, 64};
    lpx::fake_quantize({x, shape}, want, lpx::parse_block_format("mxfp4"), opt);
    CHECK(same_bytes(read_file<float>(dir / "v.f32"), want));
    // And the words matter: Philox's seed-0 result differs.
    std::vector<float> philox(x.size());
    lpx::QuantizeOptions po = opt;
    po.random_words = nullptr;
    po.random_words_count = 0;
    lpx::fake_quantize({x, shape}, philox, lpx::parse_block_format("mxfp4"), po);
    CHECK_FALSE(same_bytes(philox, want));
  }
}

TEST_CASE("--random-words errors: one stderr line, no output file") {
  TempDir dir;
  write_file(dir / "x.f32", std::vector<float>{1.f, 2.f, 3.f});
  write_file(dir / "short.bin", le_bytes({1u, 2u}));
  write_file(dir / "ragged.bin", std::vector<uint8_t>{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13});
  write_file(dir / "ok.bin", le_bytes({1u, 2u, 3u}));
  const std::string x = (dir / "x.f32").string(), out = (dir / "out.bin").string();
  struct Case {
    std::string args;
    int status;
    std::string message;
  };
  const std::string w = " --random-words ";
  const Case cases[] = {
      {"cast --to e4m3 --round sr" + w + (dir / "short.bin").string() + " " + x + " " + out, 1,
       "2 random words, but the input has 3 elements"},
      {"cast --to e4m3 --round sr" + w + (dir / "ragged.bin").string() + " " + x + " " + out, 1,
       "not a whole number"},
      {"cast --to e4m3" + w + (dir / "ok.bin").string() + " " + x + " " + out, 2,
       "--random-words needs a stochastic --round"},
      {"cast --to e4m3 --round rtz" + w + (dir / "ok.bin").string() + " " + x + " " + out, 2,
       "--random-words needs a stochastic --round"},
      {"cast --to e4m3 --round sr --seed 3" + w + (dir / "ok.bin").string() + " " + x + " " + out,
       2, "drop --seed"},
      {"cast --to e4m3 --round sr" + w + (dir / "missing.bin").string() + " " + x + " " + out, 1,
       "missing.bin"},
      {"quantize --format mxfp4 --round sr-odd" + w + (dir / "short.bin").string() + " " + x +
           " " + out, 1, "2 random words, but the input has 3 elements"},
      {"quantize --format mxfp4" + w + (dir / "ok.bin").string() + " " + x + " " + out, 2,
       "--random-words needs a stochastic --round"},
      {"cast --to e4m3 --round sr-maybe " + x + " " + out, 2, "sr-fast"},
  };
  for (const Case& c : cases) {
    INFO(c.args);
    const CliResult r = run_lpx(c.args, dir);
    CHECK(r.status == c.status);
    CHECK(r.err_lines() == 1);
    CHECK_THAT(r.err, Catch::Contains(c.message));
    CHECK_FALSE(std::filesystem::exists(out));
  }
  // The library refuses the same, with std::invalid_argument.
  const std::vector<float> xs = {1.f, 2.f, 3.f};
  std::vector<uint8_t> codes(3);
  const uint32_t two[] = {1u, 2u};
  lpx::CastOptions opt;
  opt.round = lpx::Rounding::sr;
  opt.random_words = two;
  opt.random_words_count = 2;
  CHECK_THROWS_AS(lpx::encode_array(xs, codes, lpx::fmt8::e4m3fn, opt), std::invalid_argument);
  opt.round = lpx::Rounding::rne;
  opt.random_words_count = 3;
  CHECK_THROWS_AS(lpx::encode_array(xs, codes, lpx::fmt8::e4m3fn, opt), std::invalid_argument);
}
