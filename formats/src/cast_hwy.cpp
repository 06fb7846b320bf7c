// SIMD array casts: the scalar codec (codec.hpp) over arrays with Highway, compiled once
// per SIMD target (foreach_target) and chosen at run time. The vector codec itself (encode,
// decode, Philox on lanes, and why 32-bit lanes suffice) is codec_hwy-inl.h, shared with the
// block quantizer; this file holds the array loops and their dispatch.
//
// Fallbacks to the scalar codec: the first up-to-3 elements of an SR chunk whose flat
// index is not a multiple of 4 (with streamed stores: the elements before the first
// aligned output), the ragged tail of every chunk (< one vector), SR with
// sr_bits outside [1, 32], formats with |bias| > 1024, and everything on HWY_SCALAR
// (Highway's one-lane baseline target, used only on CPUs without SSSE3).
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "cast_hwy.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep

#include <hwy/cache_control.h>
#include <hwy/highway.h>
#if HWY_ARCH_X86
#include <immintrin.h>  // _mm_sfence (Highway 1.0 has no portable stream fence)
#endif

#include <string>
#include <type_traits>
#include <vector>

#include "cast_simd.hpp"
#include "lpx/formats/codec.hpp"
#include "lpx/numerics/philox.hpp"

#include "codec_hwy-inl.h"

HWY_BEFORE_NAMESPACE();
namespace lpx {
namespace simd {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;
using detail::DecodeConsts;
using detail::EncodeConsts;
using detail::FastConsts;
using detail::PhiloxConsts;

#if HWY_TARGET != HWY_SCALAR

// Stores one vector of output lanes: unaligned, or (stream) non-temporal to an aligned p.
template <class D>
HWY_INLINE void Put(hn::Vec<D> v, D d, hn::TFromD<D>* p, bool stream) {
  if (stream) hn::Stream(v, d, p);
  else hn::StoreU(v, d, p);
}

// Stores one vector of codes (or, for float output, their decoded values).
HWY_INLINE void StoreOut(VI code, uint8_t* p, const DecodeConsts&, bool stream) {
  const hn::Rebind<uint8_t, DI> d8;
  Put(hn::DemoteTo(d8, code), d8, p, stream);  // codes are in [0, 255]: exact
}
HWY_INLINE void StoreOut(VI code, uint16_t* p, const DecodeConsts&, bool stream) {
  const hn::Rebind<uint16_t, DI> d16;
  Put(hn::DemoteTo(d16, code), d16, p, stream);  // codes are in [0, 65535]: exact
}
HWY_INLINE void StoreOut(VI code, float* p, const DecodeConsts& dc, bool stream) {
  Put(DecodeVec(code, dc), DF(), p, stream);
}

// One vector of codes, from the short path (kFast, codec_simd.hpp: fast_path_ok) or the
// general vector codec.
template <Rounding M, bool kInt, bool kFast>
HWY_INLINE VI EncodeCodes(VI bits, VI rnd, const EncodeConsts& ec, const FastConsts& fc) {
  if constexpr (kFast && !kInt) return FastEncodeVec<M>(bits, rnd, fc);
  else return EncodeVec<M, kInt>(bits, rnd, ec);
}

// One vector of results: codes (integer outputs) or decoded values (float output).
template <Rounding M, bool kInt, bool kFast, class Out>
HWY_INLINE void EncodeStore(VI bits, VI rnd, Out* p, const EncodeConsts& ec,
                            const FastConsts& fc, const DecodeConsts& dc, bool stream) {
  if constexpr (kFast && !kInt && std::is_same_v<Out, float>) {
    Put(hn::BitCast(DF(), FastFakeVec<M>(bits, rnd, fc)), DF(), p, stream);
  } else {
    StoreOut(EncodeCodes<M, kInt, kFast>(bits, rnd, ec, fc), p, dc, stream);
  }
}

#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX3
template <class Out>
constexpr bool kPack4 = std::is_same_v<Out, uint8_t>;  // EncodeStore4 stores 4N bytes at once
#else
template <class Out>
constexpr bool kPack4 = false;
#endif

// Four vectors of results from in[0, 4N), with random words r0..r3 (sr only). On AVX-512,
// byte codes are packed four vectors at a time: two 32-to-16 and one 16-to-8 saturating
// pack (exact: codes are in [0, 255]) leave each 128-bit block holding a 4-byte group of
// each vector, and one permutation puts them in order: 4 operations for 64 codes instead
// of 4 per vector.
template <Rounding M, bool kInt, bool kFast, class Out>
HWY_INLINE void EncodeStore4(const float* HWY_RESTRICT in, VI r0, VI r1, VI r2, VI r3,
                             Out* p, const EncodeConsts& ec, const FastConsts& fc,
                             const DecodeConsts& dc, bool stream) {
  const DI di;
  const DF df;
  const size_t N = hn::Lanes(di);
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX3
  if constexpr (kPack4<Out>) {
    const VI c0 = EncodeCodes<M, kInt, kFast>(hn::BitCast(di, hn::LoadU(df, in)), r0, ec, fc);
    const VI c1 = EncodeCodes<M, kInt, kFast>(hn::BitCast(di, hn::LoadU(df, in + N)), r1, ec, fc);
    const VI c2 = EncodeCodes<M, kInt, kFast>(hn::BitCast(di, hn::LoadU(df, in + 2 * N)), r2, ec, fc);
    const VI c3 = EncodeCodes<M, kInt, kFast>(hn::BitCast(di, hn::LoadU(df, in + 3 * N)), r3, ec, fc);
    const __m512i b = _mm512_packus_epi16(_mm512_packus_epi32(c0.raw, c1.raw),
                                          _mm512_packus_epi32(c2.raw, c3.raw));
    // Block j of b holds dword j of c0, c1, c2, c3: dword 4k + j of the output is 4j + k.
    const __m512i order = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
    const hn::Repartition<uint8_t, DI> d8;
    // The zero-masked form with every lane kept is the same vpermd; the plain intrinsic's
    // undefined fill makes GCC 12 warn of an uninitialized __Y (GCC bug 105593).
    Put(hn::Vec<decltype(d8)>{_mm512_maskz_permutexvar_epi32(0xFFFF, order, b)}, d8, p, stream);
    return;
  }
#endif
  EncodeStore<M, kInt, kFast>(hn::BitCast(di, hn::LoadU(df, in)), r0, p, ec, fc, dc, stream);
  EncodeStore<M, kInt, kFast>(hn::BitCast(di, hn::LoadU(df, in + N)), r1, p + N, ec, fc, dc, stream);
  EncodeStore<M, kInt, kFast>(hn::BitCast(di, hn::LoadU(df, in + 2 * N)), r2, p + 2 * N, ec, fc, dc,
                              stream);
  EncodeStore<M, kInt, kFast>(hn::BitCast(di, hn::LoadU(df, in + 3 * N)), r3, p + 3 * N, ec, fc, dc,
                              stream);
}
#endif  // HWY_TARGET != HWY_SCALAR


// Large (streamed) arrays: the input is prefetched this far ahead of the vector loop.
constexpr size_t kPrefetchFloats = 512;

template <class Out>
HWY_INLINE Out ScalarOut(uint32_t code, const ElementFormat& f) {
  if constexpr (std::is_same_v<Out, float>) {
    return decode(code, f);
  } else {
    return static_cast<Out>(code);
  }
}

template <Rounding M, bool kInt, bool kFast, class Out>
void EncodeLoop(const float* HWY_RESTRICT in, Out* HWY_RESTRICT out, size_t n,
                uint64_t first_index, const ElementFormat& f, const CastOptions& opt,
                bool want_stream) {
  const DI di;
  const DF df;
  const size_t N = hn::Lanes(di);
  auto scalar_one = [&](size_t k) {
    const uint32_t r =
        is_stochastic(M) ? random_bits(opt.seed, opt.stream, first_index + k) : 0u;
    out[k] = ScalarOut<Out>(encode(in[k], f, M, opt.overflow, r, opt.sr_bits), f);
  };
  size_t i = 0;
#if HWY_TARGET == HWY_SCALAR
  // One-lane target (Highway's baseline in this build): the vector loop would be the
  // scalar codec in disguise, and one lane cannot hold a Philox block.
  (void)di;
  (void)df;
  (void)N;
  (void)want_stream;
#else
  const EncodeConsts ec = detail::make_encode_consts(f, opt);
  const DecodeConsts dc = detail::make_decode_consts(f);
  const FastConsts fc = kFast ? detail::make_fast_consts(f, opt) : FastConsts{};
  // Non-temporal stores need the output aligned to the stored vector (N outputs, 4N when
  // packed four at a time); sr also needs a flat index that is a multiple of 4. Start the
  // vector loop at the first element where both hold (none within reach: plain stores).
  // A stored vector narrower than 16 bytes (byte codes on AVX2 and SSE4: N = 8 or 4) is
  // never streamed: Highway 1.0's Stream of a partial vector is a full 16-byte
  // _mm_stream_si128, which faults on an address aligned to less and writes past the
  // vector's bytes.
  bool stream = false;
  size_t head = is_stochastic(M) ? static_cast<size_t>((4 - first_index % 4) % 4) : 0;
  const size_t vec_bytes = (kPack4<Out> ? 4 * N : N) * sizeof(Out);
  if (want_stream && vec_bytes >= 16) {
    for (size_t h = head; h < head + 4 * vec_bytes && h < n; ++h) {
      if (reinterpret_cast<uintptr_t>(out + h) % vec_bytes == 0 &&
          (!is_stochastic(M) || (first_index + h) % 4 == 0)) {
        head = h;
        stream = true;
        break;
      }
    }
  }
  for (; i < head && i < n; ++i) scalar_one(i);
  if constexpr (is_stochastic(M)) {
    // Vector loop from a flat index that is a multiple of 4 (a Philox block boundary).
    const PhiloxConsts pc = detail::make_philox_consts(opt.seed);
    PhiloxLanes ph = PhiloxBegin((first_index + i) / 4, opt.stream);
    // Software-pipelined: the words for the next 4N elements are drawn before these 4N
    // are encoded. The Philox rounds are one long dependency chain; placed ahead of encode
    // work that is ready to run, they leave the out-of-order core that work to fill the
    // chain's latency with (drawing then encoding the same 4N serializes the two).
    if (i + 4 * N <= n) {
      VI r0, r1, r2, r3;
      PhiloxDraw4(ph, pc, r0, r1, r2, r3);
      for (;;) {
        if (stream)
          for (size_t l = 0; l < 4; ++l) hwy::Prefetch(in + i + kPrefetchFloats + l * N);
        const bool more = i + 8 * N <= n;
        VI s0 = r0, s1 = r1, s2 = r2, s3 = r3;
        if (more) PhiloxDraw4(ph, pc, s0, s1, s2, s3);
        EncodeStore4<M, kInt, kFast>(in + i, r0, r1, r2, r3, out + i, ec, fc, dc, stream);
        i += 4 * N;
        if (!more) break;
        r0 = s0;
        r1 = s1;
        r2 = s2;
        r3 = s3;
      }
    }
    for (; i + N <= n; i += N) {
      const VI bits = hn::BitCast(di, hn::LoadU(df, in + i));
      const VI rnd = PhiloxDraw1(ph, pc);
      EncodeStore<M, kInt, kFast>(bits, rnd, out + i, ec, fc, dc, stream);
    }
  } else {
    const VI zero = hn::Zero(di);
    for (; i + 4 * N <= n; i += 4 * N) {
      if (stream)
        for (size_t l = 0; l < 4; ++l) hwy::Prefetch(in + i + kPrefetchFloats + l * N);
      EncodeStore4<M, kInt, kFast>(in + i, zero, zero, zero, zero, out + i, ec, fc, dc, stream);
    }
    for (; i + N <= n; i += N) {
      if (stream) hwy::Prefetch(in + i + kPrefetchFloats);
      const VI bits = hn::BitCast(di, hn::LoadU(df, in + i));
      EncodeStore<M, kInt, kFast>(bits, zero, out + i, ec, fc, dc, stream);
    }
  }
#if HWY_ARCH_X86
  if (stream) _mm_sfence();  // order the non-temporal stores before any later read
#endif
#endif
  for (; i < n; ++i) scalar_one(i);
}

template <class Out>
void EncodeDispatch(const float* in, Out* out, size_t n, uint64_t first_index,
                    const ElementFormat* fp, const CastOptions* op, bool stream) {
  const ElementFormat& f = *fp;
  const CastOptions& opt = *op;
  const bool i = f.is_integer;
  const bool fast = detail::fast_path_ok(f, opt);
  switch (opt.round) {
    case Rounding::rne:
      if (fast) return EncodeLoop<Rounding::rne, false, true>(in, out, n, first_index, f, opt, stream);
      return i ? EncodeLoop<Rounding::rne, true, false>(in, out, n, first_index, f, opt, stream)
               : EncodeLoop<Rounding::rne, false, false>(in, out, n, first_index, f, opt, stream);
    case Rounding::rna:
      return i ? EncodeLoop<Rounding::rna, true, false>(in, out, n, first_index, f, opt, stream)
               : EncodeLoop<Rounding::rna, false, false>(in, out, n, first_index, f, opt, stream);
    case Rounding::rtz:
      if (fast) return EncodeLoop<Rounding::rtz, false, true>(in, out, n, first_index, f, opt, stream);
      return i ? EncodeLoop<Rounding::rtz, true, false>(in, out, n, first_index, f, opt, stream)
               : EncodeLoop<Rounding::rtz, false, false>(in, out, n, first_index, f, opt, stream);
    case Rounding::rup:
      return i ? EncodeLoop<Rounding::rup, true, false>(in, out, n, first_index, f, opt, stream)
               : EncodeLoop<Rounding::rup, false, false>(in, out, n, first_index, f, opt, stream);
    case Rounding::rdn:
      return i ? EncodeLoop<Rounding::rdn, true, false>(in, out, n, first_index, f, opt, stream)
               : EncodeLoop<Rounding::rdn, false, false>(in, out, n, first_index, f, opt, stream);
    case Rounding::sr:
      if (fast) return EncodeLoop<Rounding::sr, false, true>(in, out, n, first_index, f, opt, stream);
      return i ? EncodeLoop<Rounding::sr, true, false>(in, out, n, first_index, f, opt, stream)
               : EncodeLoop<Rounding::sr, false, false>(in, out, n, first_index, f, opt, stream);
    case Rounding::rto:
      return i ? EncodeLoop<Rounding::rto, true, false>(in, out, n, first_index, f, opt, stream)
               : EncodeLoop<Rounding::rto, false, false>(in, out, n, first_index, f, opt, stream);
    case Rounding::sr_fast:
      return i ? EncodeLoop<Rounding::sr_fast, true, false>(in, out, n, first_index, f, opt, stream)
               : EncodeLoop<Rounding::sr_fast, false, false>(in, out, n, first_index, f, opt, stream);
    case Rounding::sr_rne:
      return i ? EncodeLoop<Rounding::sr_rne, true, false>(in, out, n, first_index, f, opt, stream)
               : EncodeLoop<Rounding::sr_rne, false, false>(in, out, n, first_index, f, opt, stream);
    case Rounding::sr_odd:
      return i ? EncodeLoop<Rounding::sr_odd, true, false>(in, out, n, first_index, f, opt, stream)
               : EncodeLoop<Rounding::sr_odd, false, false>(in, out, n, first_index, f, opt, stream);
  }
  HWY_ABORT("lpx: rounding mode %d has no vector loop", static_cast<int>(opt.round));
}

void EncodeU8(const float* in, uint8_t* out, size_t n, uint64_t first_index,
              const ElementFormat* f, const CastOptions* opt, bool stream) {
  EncodeDispatch(in, out, n, first_index, f, opt, stream);
}
void EncodeU16(const float* in, uint16_t* out, size_t n, uint64_t first_index,
              const ElementFormat* f, const CastOptions* opt, bool stream) {
  EncodeDispatch(in, out, n, first_index, f, opt, stream);
}
void FakeCast(const float* in, float* out, size_t n, uint64_t first_index,
              const ElementFormat* f, const CastOptions* opt, bool stream) {
  EncodeDispatch(in, out, n, first_index, f, opt, stream);
}

template <class Code>
void DecodeLoop(const Code* HWY_RESTRICT in, float* HWY_RESTRICT out, size_t n,
                const ElementFormat* fp) {
  size_t i = 0;
#if HWY_TARGET != HWY_SCALAR
  const DI di;
  const DF df;
  const hn::Rebind<Code, DI> dc_in;
  const size_t N = hn::Lanes(di);
  const DecodeConsts dc = detail::make_decode_consts(*fp);
  for (; i + N <= n; i += N) {
    const VI code = hn::PromoteTo(di, hn::LoadU(dc_in, in + i));
    hn::StoreU(DecodeVec(code, dc), df, out + i);
  }
#endif
  for (; i < n; ++i) out[i] = decode(in[i], *fp);
}
void DecodeU8(const uint8_t* in, float* out, size_t n, const ElementFormat* f) {
  DecodeLoop(in, out, n, f);
}
void DecodeU16(const uint16_t* in, float* out, size_t n, const ElementFormat* f) {
  DecodeLoop(in, out, n, f);
}

int64_t TargetId() { return HWY_TARGET; }

}  // namespace HWY_NAMESPACE
}  // namespace simd
}  // namespace lpx
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace lpx::simd {

HWY_EXPORT(EncodeU8);
HWY_EXPORT(EncodeU16);
HWY_EXPORT(FakeCast);
HWY_EXPORT(DecodeU8);
HWY_EXPORT(DecodeU16);
HWY_EXPORT(TargetId);

namespace {
// The scalar codec over a chunk: the fallback for inputs the vector loops do not accept.
template <class Out>
void scalar_encode(const float* in, Out* out, size_t n, uint64_t first_index,
                   const ElementFormat& f, const CastOptions& opt) {
  for (size_t k = 0; k < n; ++k) {
    const uint32_t r = !is_stochastic(opt.round) ? 0u
                       : opt.random_words != nullptr
                           ? opt.random_words[first_index + k]
                           : random_bits(opt.seed, opt.stream, first_index + k);
    const uint32_t code = encode(in[k], f, opt.round, opt.overflow, r, opt.sr_bits);
    if constexpr (std::is_same_v<Out, float>) {
      out[k] = decode(code, f);
    } else {
      out[k] = static_cast<Out>(code);
    }
  }
}
}  // namespace

void encode_u8(const float* in, uint8_t* out, size_t n, uint64_t first_index,
               const ElementFormat& f, const CastOptions& opt, bool stream) {
  if (!detail::vectorizable(f, opt)) return scalar_encode(in, out, n, first_index, f, opt);
  HWY_DYNAMIC_DISPATCH(EncodeU8)(in, out, n, first_index, &f, &opt, stream);
}
void encode_u16(const float* in, uint16_t* out, size_t n, uint64_t first_index,
               const ElementFormat& f, const CastOptions& opt, bool stream) {
  if (!detail::vectorizable(f, opt)) return scalar_encode(in, out, n, first_index, f, opt);
  HWY_DYNAMIC_DISPATCH(EncodeU16)(in, out, n, first_index, &f, &opt, stream);
}
void fake_cast(const float* in, float* out, size_t n, uint64_t first_index,
               const ElementFormat& f, const CastOptions& opt, bool stream) {
  if (!detail::vectorizable(f, opt)) return scalar_encode(in, out, n, first_index, f, opt);
  HWY_DYNAMIC_DISPATCH(FakeCast)(in, out, n, first_index, &f, &opt, stream);
}
void decode_u8(const uint8_t* in, float* out, size_t n, const ElementFormat& f) {
  HWY_DYNAMIC_DISPATCH(DecodeU8)(in, out, n, &f);
}
void decode_u16(const uint16_t* in, float* out, size_t n, const ElementFormat& f) {
  HWY_DYNAMIC_DISPATCH(DecodeU16)(in, out, n, &f);
}
int64_t dispatched_target_id() { return HWY_DYNAMIC_DISPATCH(TargetId)(); }

}  // namespace lpx::simd

namespace lpx::cast_testing {

std::vector<SimdTarget> simd_targets() {
  std::vector<SimdTarget> out;
  for (const int64_t t : hwy::SupportedAndGeneratedTargets()) out.push_back({t, hwy::TargetName(t)});
  return out;
}
void force_simd_target(int64_t target) { hwy::SetSupportedTargetsForTest(target); }
std::string dispatched_simd_target() { return hwy::TargetName(simd::dispatched_target_id()); }

}  // namespace lpx::cast_testing
#endif  // HWY_ONCE
