// Training data for the simulator, all of it from Debian packages so that runs need no
// network: Fashion-MNIST (package dataset-fashion-mnist, gzipped IDX files) and a
// character-level corpus (default: the plain-text fortune files of package `fortunes`).
//
// Batches are pure functions of (seed, step): the data-order state of a run is its step
// number, which is what makes resumed runs bit-identical to uninterrupted ones.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace lpx::sim {

inline constexpr const char* kFashionMnistDir = "/usr/share/datasets/fashion-mnist";
inline constexpr const char* kFortunesDir = "/usr/share/games/fortunes";

// One split of an image classification set. images is (n, rows*cols), normalised as
// (pixel/255 - 0.2860) / 0.3530 (Fashion-MNIST's training mean and std).
struct ImageSet {
  int64_t n = 0, rows = 0, cols = 0;
  std::vector<float> images;   // (n, rows*cols)
  std::vector<uint8_t> labels;  // (n,), 0..9
  int64_t features() const { return rows * cols; }
};

// Reads `dir`/{train,t10k}-{images-idx3,labels-idx1}-ubyte.gz. The IDX header is checked
// (magic 0x00000803 / 0x00000801, sizes consistent with each other and the file length);
// any problem throws std::runtime_error naming the file and what is wrong.
ImageSet load_fashion_mnist(const std::string& dir, bool train);
// One IDX file (gzipped or not; zlib reads both). Returns the dims and the payload bytes.
struct IdxFile {
  std::vector<int64_t> dims;
  std::vector<uint8_t> data;
};
IdxFile read_idx_gz(const std::string& path);

// A byte-level corpus with a vocabulary of the bytes that occur in it (sorted).
struct CharCorpus {
  std::vector<uint8_t> vocab;          // token id -> byte
  std::vector<int32_t> byte_to_token;  // 256 entries, -1 where the byte does not occur
  std::vector<int32_t> train, val;     // token ids
  int vocab_size() const { return static_cast<int>(vocab.size()); }
};
// `path` is a text file or a directory. A directory contributes its regular files in name
// order, skipping *.dat and *.u8 (fortune's index and UTF-8 copies) and hidden files.
// The last `val_fraction` of the text is the validation split (a contiguous tail, so no
// validation window overlaps a training window). Throws when there is too little text.
CharCorpus load_char_corpus(const std::string& path, double val_fraction = 0.1);
// Unigram entropy of the training split in nats per token (the loss of the best model
// that ignores context), the yardstick the GPT must beat.
double unigram_entropy_nats(const CharCorpus& c);

// Deterministic batches. Image batches: each epoch is a Philox-keyed permutation of the
// training set (Fisher-Yates), and batch `step` is the (step % per_epoch)-th slice of
// epoch step / per_epoch's permutation (the last partial batch of an epoch is dropped).
class ImageBatcher {
 public:
  ImageBatcher(const ImageSet& set, int batch, uint64_t seed);
  // x is (batch, features), y is (batch,)
  void batch(uint64_t step, float* x, int32_t* y);
  int64_t batches_per_epoch() const { return per_epoch_; }

 private:
  const ImageSet& set_;
  int batch_;
  uint64_t seed_;
  int64_t per_epoch_;
  int64_t epoch_ = -1;
  std::vector<int64_t> perm_;
};

// Token batches: window b of batch `step` starts at a Philox-drawn offset into the
// training tokens. x and y are (batch, context); y is x shifted by one.
void token_batch(const std::vector<int32_t>& tokens, int batch, int context, uint64_t seed,
                 uint64_t step, int32_t* x, int32_t* y);

}  // namespace lpx::sim
