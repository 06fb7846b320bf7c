// The array-cast paths that `lpx bench` and lpx_bench_cast (Google Benchmark) time, and
// the memcpy baseline they are compared with. Header-only so both binaries share one list.
//
// Bandwidth convention: a path that reads I and writes O bytes per element moves I + O
// bytes; its baseline is a memcpy of (I + O) / 2 bytes per element, which moves the same
// number of bytes (it reads and writes each), so ratio = memcpy time / path time.
#pragma once

#include <cstdint>
#include <algorithm>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include <omp.h>

#include "lpx/formats/block_format.hpp"
#include "lpx/formats/cast.hpp"
#include "lpx/formats/element_format.hpp"
#include "lpx/formats/quantize.hpp"

namespace lpx::bench {

struct Buffers {
  std::vector<float> in;       // inputs (deterministic, roughly N(0, 1) * 64)
  std::vector<uint8_t> codes8;  // codes of <= 8-bit formats (decode input too)
  std::vector<uint16_t> codes16;
  std::vector<float> out;      // decoded / fake-cast values

  explicit Buffers(size_t n) : in(n), codes8(n), codes16(n), out(n) {
    // A cheap hash per index: the same data for any thread count.
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < static_cast<int64_t>(n); ++i) {
      uint64_t z = static_cast<uint64_t>(i) * 0x9E3779B97F4A7C15ull;
      z = (z ^ (z >> 31)) * 0xBF58476D1CE4E5B9ull;
      z ^= z >> 29;
      // Sum of 4 uniforms: bell-shaped, mostly inside e4m3's range, some beyond e2m1's.
      float s = 0;
      for (int k = 0; k < 4; ++k) s += static_cast<float>((z >> (16 * k)) & 0xffff) / 65536.0f;
      in[static_cast<size_t>(i)] = (s - 2.0f) * 64.0f;
    }
  }
  size_t size() const { return in.size(); }
};

struct CastPath {
  std::string name;
  size_t in_bytes;   // per element
  size_t out_bytes;  // per element
  std::function<void(Buffers&, int threads)> run;
};

inline CastOptions cast_options(Rounding r, Overflow o, int threads) {
  CastOptions opt;
  opt.round = r;
  opt.overflow = o;
  opt.seed = 1234;
  opt.threads = threads;
  return opt;
}

inline constexpr ElementFormat kP3109K8P4SE = make_p3109_format(8, 4, true, true);
inline constexpr ElementFormat kP3109K8P3SF = make_p3109_format(8, 3, true, false);
inline constexpr ElementFormat kP3109K8P4UE = make_p3109_format(8, 4, false, true);

inline std::vector<CastPath> cast_paths() {
  std::vector<CastPath> p;
  struct Enc {
    const ElementFormat* f;
    const char* short_name;
    Rounding r;
    Overflow o;
  };
  const Enc encodes[] = {
      {&fmt8::e4m3fn, "e4m3fn", Rounding::rne, Overflow::ieee},
      {&fmt8::e4m3fn, "e4m3fn", Rounding::rne, Overflow::sat},
      {&fmt8::e4m3fn, "e4m3fn", Rounding::rtz, Overflow::ieee},
      {&fmt8::e4m3fn, "e4m3fn", Rounding::sr, Overflow::ieee},
      {&fmt8::e4m3fn, "e4m3fn", Rounding::sr, Overflow::sat},
      {&fmt4::e2m1, "e2m1", Rounding::rne, Overflow::ieee},
      {&fmt4::e2m1, "e2m1", Rounding::rne, Overflow::sat},
      {&fmt4::e2m1, "e2m1", Rounding::rtz, Overflow::sat},
      {&fmt4::e2m1, "e2m1", Rounding::sr, Overflow::sat},
      {&fmt8::e5m2, "e5m2", Rounding::rne, Overflow::ieee},
      {&fmtint::int8, "int8", Rounding::rne, Overflow::sat},
      // The rounding variants (docs/formats.md#stochastic-rounding-variants) on one format.
      {&fmt8::e4m3fn, "e4m3fn", Rounding::rto, Overflow::ieee},
      {&fmt8::e4m3fn, "e4m3fn", Rounding::sr_fast, Overflow::ieee},
      {&fmt8::e4m3fn, "e4m3fn", Rounding::sr_rne, Overflow::ieee},
      {&fmt8::e4m3fn, "e4m3fn", Rounding::sr_odd, Overflow::ieee},
      // IEEE P3109 (docs/formats.md#p3109): compare with the OCP 8-bit rows above.
      {&kP3109K8P4SE, "p3109_k8p4se", Rounding::rne, Overflow::ieee},
      {&kP3109K8P4SE, "p3109_k8p4se", Rounding::rne, Overflow::sat},
      {&kP3109K8P4SE, "p3109_k8p4se", Rounding::sr, Overflow::ieee},
      {&kP3109K8P3SF, "p3109_k8p3sf", Rounding::rne, Overflow::ieee},
      {&kP3109K8P4UE, "p3109_k8p4ue", Rounding::rne, Overflow::ieee},
  };
  for (const Enc& e : encodes) {
    const std::string name = std::string("cast ") + e.short_name + " " +
                             std::string(rounding_name(e.r)) +
                             (e.o == Overflow::sat ? " sat" : " ieee");
    p.push_back({name, 4, 1, [e](Buffers& b, int t) {
                   encode_array(b.in, b.codes8, *e.f, cast_options(e.r, e.o, t));
                 }});
  }
  p.push_back({"cast bf16 rne ieee", 4, 2, [](Buffers& b, int t) {
                 encode_array(b.in, b.codes16, fmt16::bf16,
                              cast_options(Rounding::rne, Overflow::ieee, t));
               }});
  p.push_back({"decode e4m3fn", 1, 4,
               [](Buffers& b, int t) { decode_array(b.codes8, b.out, fmt8::e4m3fn, t); }});
  p.push_back({"decode e2m1", 1, 4,
               [](Buffers& b, int t) { decode_array(b.codes8, b.out, fmt4::e2m1, t); }});
  p.push_back({"decode bf16", 2, 4,
               [](Buffers& b, int t) { decode_array(b.codes16, b.out, fmt16::bf16, t); }});
  for (const Enc& e : {Enc{&fmt8::e4m3fn, "e4m3fn", Rounding::rne, Overflow::ieee},
                       Enc{&fmt8::e4m3fn, "e4m3fn", Rounding::sr, Overflow::ieee},
                       Enc{&fmt4::e2m1, "e2m1", Rounding::rne, Overflow::sat},
                       Enc{&fmt4::e2m1, "e2m1", Rounding::sr, Overflow::sat}}) {
    const std::string name = std::string("fake-cast ") + e.short_name + " " +
                             std::string(rounding_name(e.r)) +
                             (e.o == Overflow::sat ? " sat" : " ieee");
    p.push_back({name, 4, 4, [e](Buffers& b, int t) {
                   fake_cast_array(b.in, b.out, *e.f, cast_options(e.r, e.o, t));
                 }});
  }
  // Block fake-quantization (scale + cast + dequantize in one call) over a 1-D tensor,
  // blocks along it: float32 in, float32 out.
  struct Block {
    const char* spec;
    Rounding r;
  };
  for (const Block& blk : {Block{"mxfp8_e4m3", Rounding::rne}, Block{"mxfp8_e4m3", Rounding::sr},
                           Block{"mxfp4", Rounding::rne}, Block{"mxfp4", Rounding::sr},
                           Block{"nvfp4", Rounding::rne}, Block{"nvfp4", Rounding::sr},
                           Block{"fp8_block128", Rounding::rne},
                           Block{"fp8_tensor", Rounding::rne}}) {
    const BlockFormat format = parse_block_format(blk.spec);
    const std::string name =
        std::string("fake-quant ") + blk.spec + " " + std::string(rounding_name(blk.r));
    p.push_back({name, 4, 4, [format, blk](Buffers& b, int t) {
                   QuantizeOptions opt;
                   opt.round = blk.r;
                   opt.seed = 1234;
                   opt.threads = t;
                   const int64_t shape[1] = {static_cast<int64_t>(b.size())};
                   fake_quantize_values({std::span<const float>(b.in), shape}, b.out, format, opt);
                 }});
  }
  // Block quantization to codes and scales (lpx::quantize, the call behind
  // `lpx quantize --emit packed` and Python's lpx.quantize): float32 in, one code byte per
  // element out, plus the scale grid. The QuantizedTensor is allocated and first touched
  // per call, as it is for lpx.quantize (python/bench.py compares the two).
  for (const char* spec : {"mxfp8_e4m3", "nvfp4"}) {
    const BlockFormat format = parse_block_format(spec);
    p.push_back({std::string("quantize ") + spec + " rne", 4, 1, [format](Buffers& b, int t) {
                   QuantizeOptions opt;
                   opt.threads = t;
                   const int64_t shape[1] = {static_cast<int64_t>(b.size())};
                   const QuantizedTensor q = quantize({std::span<const float>(b.in), shape}, format, opt);
                   b.codes8[0] = q.codes.empty() ? 0 : q.codes[0];  // keeps the result observable
                 }});
  }
  return p;
}

// memcpy of `bytes` from the input buffer to the output buffer (both hold >= 4n bytes),
// split over `threads` like the casts are.
inline void memcpy_baseline(Buffers& b, size_t bytes, int threads) {
  const auto* src = reinterpret_cast<const unsigned char*>(b.in.data());
  auto* dst = reinterpret_cast<unsigned char*>(b.out.data());
  const size_t chunk = size_t{1} << 20;
  const int64_t chunks = static_cast<int64_t>((bytes + chunk - 1) / chunk);
#pragma omp parallel for schedule(static) num_threads(threads) if (threads > 1)
  for (int64_t c = 0; c < chunks; ++c) {
    const size_t begin = static_cast<size_t>(c) * chunk;
    std::memcpy(dst + begin, src + begin, std::min(chunk, bytes - begin));
  }
}

}  // namespace lpx::bench
