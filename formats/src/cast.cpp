// Array casts: scalar codec per element, OpenMP over fixed chunks. The SR counter is
// the element's flat index, so the result does not depend on how chunks are scheduled.
#include "lpx/formats/cast.hpp"

#include <stdexcept>

#include <omp.h>

#include "lpx/formats/codec.hpp"
#include "lpx/numerics/philox.hpp"

namespace lpx {

namespace {

template <class In, class Out, class Fn>
void parallel_map(std::span<In> in, std::span<Out> out, int threads, Fn fn) {
  if (in.size() != out.size())
    throw std::invalid_argument("cast: input and output sizes differ");
  const int64_t n = static_cast<int64_t>(in.size());
  const int nthreads = threads > 0 ? threads : omp_get_max_threads();
#pragma omp parallel for schedule(static) num_threads(nthreads) if (n > 65536)
  for (int64_t i = 0; i < n; ++i) out[static_cast<size_t>(i)] = fn(in[static_cast<size_t>(i)], i);
}

template <class Code>
void encode_impl(std::span<const float> in, std::span<Code> out, const ElementFormat& f,
                 const CastOptions& opt) {
  if (static_cast<int>(sizeof(Code) * 8) < f.bits)
    throw std::invalid_argument("cast: code array too narrow for this format");
  const bool sr = opt.round == Rounding::sr;
  parallel_map(in, out, opt.threads, [&](float x, int64_t i) {
    const uint32_t r =
        sr ? random_bits(opt.seed, opt.stream, opt.index_offset + static_cast<uint64_t>(i)) : 0u;
    return static_cast<Code>(encode(x, f, opt.round, opt.overflow, r, opt.sr_bits));
  });
}

}  // namespace

void encode_array(std::span<const float> in, std::span<uint8_t> out, const ElementFormat& f,
                  const CastOptions& opt) {
  encode_impl(in, out, f, opt);
}
void encode_array(std::span<const float> in, std::span<uint16_t> out, const ElementFormat& f,
                  const CastOptions& opt) {
  encode_impl(in, out, f, opt);
}
void decode_array(std::span<const uint8_t> in, std::span<float> out, const ElementFormat& f,
                  int threads) {
  parallel_map(in, out, threads, [&](uint8_t c, int64_t) { return decode(c, f); });
}
void decode_array(std::span<const uint16_t> in, std::span<float> out, const ElementFormat& f,
                  int threads) {
  parallel_map(in, out, threads, [&](uint16_t c, int64_t) { return decode(c, f); });
}
void fake_cast_array(std::span<const float> in, std::span<float> out, const ElementFormat& f,
                     const CastOptions& opt) {
  const bool sr = opt.round == Rounding::sr;
  parallel_map(in, out, opt.threads, [&](float x, int64_t i) {
    const uint32_t r =
        sr ? random_bits(opt.seed, opt.stream, opt.index_offset + static_cast<uint64_t>(i)) : 0u;
    return decode(encode(x, f, opt.round, opt.overflow, r, opt.sr_bits), f);
  });
}

}  // namespace lpx
