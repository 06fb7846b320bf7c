// Array casts: argument checks, then OpenMP over fixed chunks, each chunk handed to the
// SIMD kernels (cast_hwy.cpp, Highway runtime dispatch). Chunk boundaries sit at flat
// indices that are multiples of 4 (a Philox block) and depend only on the array length and
// index_offset, never on the thread count; the SR counter is the element's flat index, so
// the output is the same for any thread count, SIMD target or schedule.
#include "lpx/formats/cast.hpp"

#include <algorithm>
#include <stdexcept>

#include <omp.h>

#include "cast_simd.hpp"
#include "lpx/numerics/parallel.hpp"

namespace lpx {

namespace {

// 64 Ki elements: large enough to amortise the OpenMP fork, small enough to balance.
constexpr size_t kChunk = size_t{1} << 16;

// Arrays moving more bytes than this (input + output) are written with non-temporal
// stores: they cannot stay in the caches, and streaming saves reading every output line
// before overwriting it. Smaller results stay cached for the caller that reads them next.
constexpr size_t kStreamBytes = size_t{64} << 20;

// Calls kernel(begin, count) over [0, n) in chunks. The first chunk also takes the
// elements before the first flat index that is a multiple of 4.
template <class Kernel>
void for_each_chunk(size_t n, uint64_t index_offset, int threads, Kernel kernel) {
  if (n == 0) return;
  const size_t head = static_cast<size_t>((4 - index_offset % 4) % 4);
  const size_t body = n > head ? n - head : 0;
  const int64_t chunks = static_cast<int64_t>(std::max<size_t>(1, (body + kChunk - 1) / kChunk));
  // one chunk, or one thread: no OpenMP region (numerics/parallel.hpp)
  parallel_for(chunks, threads > 0 ? threads : omp_get_max_threads(), [&](int64_t c) {
    const size_t uc = static_cast<size_t>(c);
    const size_t begin = c == 0 ? 0 : head + uc * kChunk;
    const size_t end = std::min(n, head + (uc + 1) * kChunk);
    kernel(begin, end - begin);
  });
}

void check_sizes(size_t a, size_t b) {
  if (a != b) throw std::invalid_argument("cast: input and output sizes differ");
}

void check_random_words(size_t n, const CastOptions& opt) {
  if (opt.random_words == nullptr) return;
  if (!is_stochastic(opt.round))
    throw std::invalid_argument("cast: random words need a stochastic rounding mode "
                                "(sr, sr-fast, sr-rne, sr-odd)");
  if (opt.random_words_count < opt.index_offset + n)
    throw std::invalid_argument("cast: " + std::to_string(opt.random_words_count) +
                                " random words for elements up to index " +
                                std::to_string(opt.index_offset + n));
}

void check_code_width(size_t code_bytes, const ElementFormat& f) {
  if (static_cast<int>(code_bytes * 8) < f.bits)
    throw std::invalid_argument("cast: code array too narrow for this format");
}

}  // namespace

void encode_array(std::span<const float> in, std::span<uint8_t> out, const ElementFormat& f,
                  const CastOptions& opt) {
  check_code_width(sizeof(uint8_t), f);
  check_sizes(in.size(), out.size());
  check_random_words(in.size(), opt);
  const bool stream = in.size() * (sizeof(float) + sizeof(out[0])) >= kStreamBytes;
  for_each_chunk(in.size(), opt.index_offset, opt.threads, [&](size_t b, size_t k) {
    simd::encode_u8(in.data() + b, out.data() + b, k, opt.index_offset + b, f, opt, stream);
  });
}
void encode_array(std::span<const float> in, std::span<uint16_t> out, const ElementFormat& f,
                  const CastOptions& opt) {
  check_code_width(sizeof(uint16_t), f);
  check_sizes(in.size(), out.size());
  check_random_words(in.size(), opt);
  const bool stream = in.size() * (sizeof(float) + sizeof(out[0])) >= kStreamBytes;
  for_each_chunk(in.size(), opt.index_offset, opt.threads, [&](size_t b, size_t k) {
    simd::encode_u16(in.data() + b, out.data() + b, k, opt.index_offset + b, f, opt, stream);
  });
}
void decode_array(std::span<const uint8_t> in, std::span<float> out, const ElementFormat& f,
                  int threads) {
  check_sizes(in.size(), out.size());
  for_each_chunk(in.size(), 0, threads, [&](size_t b, size_t k) {
    simd::decode_u8(in.data() + b, out.data() + b, k, f);
  });
}
void decode_array(std::span<const uint16_t> in, std::span<float> out, const ElementFormat& f,
                  int threads) {
  check_sizes(in.size(), out.size());
  for_each_chunk(in.size(), 0, threads, [&](size_t b, size_t k) {
    simd::decode_u16(in.data() + b, out.data() + b, k, f);
  });
}
void fake_cast_array(std::span<const float> in, std::span<float> out, const ElementFormat& f,
                     const CastOptions& opt) {
  check_sizes(in.size(), out.size());
  check_random_words(in.size(), opt);
  const bool stream = in.size() * (sizeof(float) + sizeof(out[0])) >= kStreamBytes;
  for_each_chunk(in.size(), opt.index_offset, opt.threads, [&](size_t b, size_t k) {
    simd::fake_cast(in.data() + b, out.data() + b, k, opt.index_offset + b, f, opt, stream);
  });
}

}  // namespace lpx
