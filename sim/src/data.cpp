// Fashion-MNIST (IDX via zlib), the character corpus, and Philox-keyed batching.
#include "lpx/sim/data.hpp"

#include <zlib.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <stdexcept>

#include <fmt/format.h>

#include "lpx/numerics/philox.hpp"

namespace lpx::sim {

namespace {
// Philox streams of the data order (the model's init and SR use others).
constexpr uint32_t kStreamEpochPerm = 0x44415441u;  // "DATA"
constexpr uint32_t kStreamTokenOffsets = 0x544f4b53u;  // "TOKS"

uint64_t random_u64(uint64_t seed, uint32_t stream, uint64_t i) {
  const Philox4x32 r = random_block(seed, stream, i);
  return (static_cast<uint64_t>(r.v[0]) << 32) | r.v[1];
}

// Uniform integer in [0, n) from 64 random bits (the bias of the modulo is below 2^-40
// for the sizes used here, and it is deterministic, which is what matters).
uint64_t below(uint64_t bits, uint64_t n) { return bits % n; }
}  // namespace

IdxFile read_idx_gz(const std::string& path) {
  gzFile f = gzopen(path.c_str(), "rb");
  if (!f) throw std::runtime_error(fmt::format("{}: cannot open", path));
  std::vector<uint8_t> bytes;
  uint8_t buf[1 << 16];
  for (;;) {
    const int got = gzread(f, buf, sizeof buf);
    if (got < 0) {
      int err = 0;
      const std::string msg = gzerror(f, &err);
      gzclose(f);
      throw std::runtime_error(fmt::format("{}: gzip error: {}", path, msg));
    }
    if (got == 0) break;
    bytes.insert(bytes.end(), buf, buf + got);
  }
  gzclose(f);
  if (bytes.size() < 4) throw std::runtime_error(fmt::format("{}: too short for an IDX header", path));
  // Magic: two zero bytes, the type (0x08 = unsigned byte), the number of dimensions.
  if (bytes[0] != 0 || bytes[1] != 0 || bytes[2] != 0x08 || bytes[3] < 1 || bytes[3] > 4)
    throw std::runtime_error(fmt::format(
        "{}: not an unsigned-byte IDX file (magic {:02x}{:02x}{:02x}{:02x})", path, bytes[0],
        bytes[1], bytes[2], bytes[3]));
  const size_t ndims = bytes[3];
  if (bytes.size() < 4 + 4 * ndims)
    throw std::runtime_error(fmt::format("{}: truncated IDX header", path));
  IdxFile out;
  int64_t count = 1;
  for (size_t d = 0; d < ndims; ++d) {
    const uint8_t* p = bytes.data() + 4 + 4 * d;
    const int64_t dim = (int64_t{p[0]} << 24) | (int64_t{p[1]} << 16) | (int64_t{p[2]} << 8) | p[3];
    if (dim <= 0) throw std::runtime_error(fmt::format("{}: dimension {} is {}", path, d, dim));
    out.dims.push_back(dim);
    count *= dim;
  }
  const size_t header = 4 + 4 * ndims;
  if (bytes.size() - header != static_cast<size_t>(count))
    throw std::runtime_error(fmt::format("{}: header promises {} bytes of data, file has {}",
                                         path, count, bytes.size() - header));
  out.data.assign(bytes.begin() + static_cast<std::ptrdiff_t>(header), bytes.end());
  return out;
}

ImageSet load_fashion_mnist(const std::string& dir, bool train) {
  const std::string prefix = dir + (train ? "/train" : "/t10k");
  const std::string ipath = prefix + "-images-idx3-ubyte.gz";
  const std::string lpath = prefix + "-labels-idx1-ubyte.gz";
  if (!std::filesystem::exists(ipath))
    throw std::runtime_error(fmt::format(
        "{}: not found (install the Debian package dataset-fashion-mnist, or pass --data DIR)",
        ipath));
  const IdxFile im = read_idx_gz(ipath);
  const IdxFile lb = read_idx_gz(lpath);
  if (im.dims.size() != 3) throw std::runtime_error(fmt::format("{}: expected 3 dimensions", ipath));
  if (lb.dims.size() != 1) throw std::runtime_error(fmt::format("{}: expected 1 dimension", lpath));
  if (im.dims[0] != lb.dims[0])
    throw std::runtime_error(fmt::format("{} has {} images but {} has {} labels", ipath,
                                         im.dims[0], lpath, lb.dims[0]));
  ImageSet s;
  s.n = im.dims[0];
  s.rows = im.dims[1];
  s.cols = im.dims[2];
  s.images.resize(im.data.size());
  for (size_t i = 0; i < im.data.size(); ++i)
    s.images[i] = (static_cast<float>(im.data[i]) / 255.0f - 0.2860f) / 0.3530f;
  s.labels = lb.data;
  for (uint8_t l : s.labels)
    if (l > 9) throw std::runtime_error(fmt::format("{}: label {} is not in 0..9", lpath, l));
  return s;
}

CharCorpus load_char_corpus(const std::string& path, double val_fraction) {
  namespace fs = std::filesystem;
  std::vector<fs::path> files;
  if (fs::is_directory(path)) {
    for (const auto& e : fs::directory_iterator(path)) {
      const std::string name = e.path().filename().string();
      if (name.empty() || name[0] == '.') continue;
      const std::string ext = e.path().extension().string();
      if (ext == ".dat" || ext == ".u8") continue;
      if (!fs::is_regular_file(e.path())) continue;  // follows symlinks
      files.push_back(e.path());
    }
    std::sort(files.begin(), files.end());
  } else if (fs::exists(path)) {
    files.push_back(path);
  } else {
    throw std::runtime_error(fmt::format(
        "{}: not found (install the Debian package fortunes, or pass --data FILE|DIR)", path));
  }
  std::string text;
  for (const auto& f : files) {
    std::ifstream in(f, std::ios::binary);
    if (!in) throw std::runtime_error(fmt::format("{}: cannot read", f.string()));
    text.append(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  if (text.size() < 1024)
    throw std::runtime_error(fmt::format("{}: only {} bytes of text (need at least 1024)", path,
                                         text.size()));
  if (!(val_fraction > 0 && val_fraction < 0.5))
    throw std::invalid_argument("load_char_corpus: val_fraction must be in (0, 0.5)");
  CharCorpus c;
  c.byte_to_token.assign(256, -1);
  bool seen[256] = {};
  for (char ch : text) seen[static_cast<uint8_t>(ch)] = true;
  for (int b = 0; b < 256; ++b)
    if (seen[b]) {
      c.byte_to_token[static_cast<size_t>(b)] = static_cast<int32_t>(c.vocab.size());
      c.vocab.push_back(static_cast<uint8_t>(b));
    }
  const size_t n_val = static_cast<size_t>(static_cast<double>(text.size()) * val_fraction);
  const size_t n_train = text.size() - n_val;
  c.train.reserve(n_train);
  c.val.reserve(n_val);
  for (size_t i = 0; i < text.size(); ++i) {
    const int32_t t = c.byte_to_token[static_cast<uint8_t>(text[i])];
    (i < n_train ? c.train : c.val).push_back(t);
  }
  return c;
}

double unigram_entropy_nats(const CharCorpus& c) {
  std::vector<double> counts(c.vocab.size(), 0.0);
  for (int32_t t : c.train) counts[static_cast<size_t>(t)] += 1;
  const double n = static_cast<double>(c.train.size());
  double h = 0;
  for (double k : counts)
    if (k > 0) h -= k / n * std::log(k / n);
  return h;
}

ImageBatcher::ImageBatcher(const ImageSet& set, int batch, uint64_t seed)
    : set_(set), batch_(batch), seed_(seed), per_epoch_(set.n / batch) {
  if (batch < 1 || per_epoch_ < 1)
    throw std::invalid_argument(fmt::format("batch size {} does not fit {} examples", batch, set.n));
}

void ImageBatcher::batch(uint64_t step, float* x, int32_t* y) {
  const int64_t epoch = static_cast<int64_t>(step / static_cast<uint64_t>(per_epoch_));
  if (epoch != epoch_) {
    // Fisher-Yates keyed by (seed, stream, epoch * n + i): a pure function of the epoch.
    perm_.resize(static_cast<size_t>(set_.n));
    for (int64_t i = 0; i < set_.n; ++i) perm_[static_cast<size_t>(i)] = i;
    const uint64_t base = static_cast<uint64_t>(epoch) * static_cast<uint64_t>(set_.n);
    for (int64_t i = set_.n - 1; i > 0; --i) {
      const uint64_t j = below(random_u64(seed_, kStreamEpochPerm, base + static_cast<uint64_t>(i)),
                               static_cast<uint64_t>(i) + 1);
      std::swap(perm_[static_cast<size_t>(i)], perm_[j]);
    }
    epoch_ = epoch;
  }
  const int64_t first = static_cast<int64_t>(step % static_cast<uint64_t>(per_epoch_)) * batch_;
  const int64_t f = set_.features();
  for (int b = 0; b < batch_; ++b) {
    const int64_t idx = perm_[static_cast<size_t>(first + b)];
    std::copy_n(set_.images.data() + idx * f, f, x + int64_t{b} * f);
    y[b] = set_.labels[static_cast<size_t>(idx)];
  }
}

void token_batch(const std::vector<int32_t>& tokens, int batch, int context, uint64_t seed,
                 uint64_t step, int32_t* x, int32_t* y) {
  const int64_t n = static_cast<int64_t>(tokens.size());
  if (n < context + 2)
    throw std::invalid_argument(fmt::format("{} tokens are too few for context {}", n, context));
  const uint64_t span = static_cast<uint64_t>(n - context - 1);
  for (int b = 0; b < batch; ++b) {
    const uint64_t start = below(
        random_u64(seed, kStreamTokenOffsets, step * static_cast<uint64_t>(batch) + static_cast<uint64_t>(b)),
        span + 1);
    for (int t = 0; t < context; ++t) {
      x[b * context + t] = tokens[start + static_cast<uint64_t>(t)];
      y[b * context + t] = tokens[start + static_cast<uint64_t>(t) + 1];
    }
  }
}

}  // namespace lpx::sim
