// Data: the Fashion-MNIST IDX reader (and its errors), the character corpus and its
// split, deterministic batching.
#include <catch2/catch.hpp>

#include <zlib.h>

#include <filesystem>
#include <fstream>
#include <cmath>
#include <string>
#include <unistd.h>

#include "lpx/sim/data.hpp"
#include "lpx/sim/trainer.hpp"

using namespace lpx::sim;

namespace {
std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("lpx_simdata_" + std::to_string(getpid()) + "_" + name)).string();
}
void write_gz(const std::string& path, const std::vector<uint8_t>& bytes) {
  gzFile f = gzopen(path.c_str(), "wb");
  REQUIRE(f);
  gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size()));
  gzclose(f);
}
}  // namespace

TEST_CASE("Fashion-MNIST loads from the Debian package with the published sizes", "[data]") {
  const auto train = cached_fashion_mnist(kFashionMnistDir, true);
  const auto test = cached_fashion_mnist(kFashionMnistDir, false);
  CHECK(train->n == 60000);
  CHECK(test->n == 10000);
  CHECK(train->rows == 28);
  CHECK(train->cols == 28);
  CHECK(train->images.size() == 60000u * 784u);
  std::vector<int> counts(10, 0);
  for (uint8_t l : train->labels) ++counts[l];
  for (int c : counts) CHECK(c == 6000);  // balanced classes
  double mean = 0;
  for (float x : train->images) mean += x;
  CHECK(std::fabs(mean / static_cast<double>(train->images.size())) < 0.01);  // normalised
}

TEST_CASE("IDX errors name the file and the problem", "[data]") {
  const std::string p = temp_path("bad.gz");
  SECTION("bad magic") {
    write_gz(p, {0, 0, 9, 1, 0, 0, 0, 1, 7});
    CHECK_THROWS_WITH(read_idx_gz(p), Catch::Contains("not an unsigned-byte IDX") && Catch::Contains(p));
  }
  SECTION("size mismatch") {
    write_gz(p, {0, 0, 8, 1, 0, 0, 0, 3, 7});
    CHECK_THROWS_WITH(read_idx_gz(p), Catch::Contains("promises 3 bytes"));
  }
  SECTION("good") {
    write_gz(p, {0, 0, 8, 2, 0, 0, 0, 2, 0, 0, 0, 1, 5, 6});
    const IdxFile f = read_idx_gz(p);
    CHECK(f.dims == std::vector<int64_t>{2, 1});
    CHECK(f.data == std::vector<uint8_t>{5, 6});
  }
  SECTION("missing") {
    CHECK_THROWS_WITH(load_fashion_mnist(temp_path("nodir"), true), Catch::Contains("dataset-fashion-mnist"));
  }
  std::filesystem::remove(p);
}

TEST_CASE("the fortunes corpus: vocabulary, split, entropy", "[data]") {
  const auto c = cached_char_corpus(kFortunesDir);
  CHECK(c->vocab_size() > 60);
  CHECK(c->vocab_size() < 256);
  CHECK(c->train.size() > 1000000);
  const double frac = static_cast<double>(c->val.size()) / static_cast<double>(c->train.size() + c->val.size());
  CHECK(std::fabs(frac - 0.1) < 0.001);
  const double h = unigram_entropy_nats(*c);
  CHECK(h > 2.5);
  CHECK(h < std::log(static_cast<double>(c->vocab_size())));
}

TEST_CASE("a text file corpus and its errors", "[data]") {
  const std::string p = temp_path("text.txt");
  {
    std::ofstream f(p);
    for (int i = 0; i < 200; ++i) f << "abcab ";
  }
  const CharCorpus c = load_char_corpus(p);
  CHECK(c.vocab == std::vector<uint8_t>{' ', 'a', 'b', 'c'});
  CHECK(c.train.size() + c.val.size() == 1200);
  CHECK(c.val.size() == 120);
  std::filesystem::remove(p);
  CHECK_THROWS_WITH(load_char_corpus(p), Catch::Contains("not found"));
}

TEST_CASE("batches are pure functions of (seed, step)", "[data]") {
  const auto train = cached_fashion_mnist(kFashionMnistDir, true);
  ImageBatcher a(*train, 32, 1), b(*train, 32, 1), other(*train, 32, 2);
  std::vector<float> xa(32 * 784), xb(32 * 784);
  std::vector<int32_t> ya(32), yb(32);
  a.batch(1900, xa.data(), ya.data());  // epoch 1
  b.batch(3, xb.data(), yb.data());
  b.batch(1900, xb.data(), yb.data());
  CHECK(xa == xb);
  CHECK(ya == yb);
  other.batch(1900, xb.data(), yb.data());
  CHECK(xa != xb);
  const auto c = cached_char_corpus(kFortunesDir);
  std::vector<int32_t> x1(4 * 16), y1(4 * 16), x2(4 * 16), y2(4 * 16);
  token_batch(c->train, 4, 16, 3, 77, x1.data(), y1.data());
  token_batch(c->train, 4, 16, 3, 77, x2.data(), y2.data());
  CHECK(x1 == x2);
  for (int t = 0; t + 1 < 16; ++t) CHECK(y1[t] == x1[t + 1]);
}
