// SIMD block quantization (quantize.hpp) with Highway, compiled once per SIMD target and
// chosen at run time; bit-identical to the scalar per-block reference in quantize.cpp.
//
// Per block (a box whose rows are contiguous runs of float32):
//   1. amax: lane-wise max of |x'| as int32 bits (x' = x with the subnormal flush), then
//      one lane per block: along rows N blocks' maxima meet in a ConcatOdd/ConcatEven
//      tree (GroupAmax), down columns each lane is a block already; the general loop
//      takes a horizontal max. A block holding NaN/Inf takes the scalar block_amax (and
//      below, the scalar cast): those blocks are rare and their semantics are all
//      special cases.
//   2. scale: power-of-two scales in integer lanes, N blocks at once (Pow2ScaleLanes:
//      scale_exponent()'s four rules on the float32 fields and the same clamp; a
//      subnormal amax takes the scalar Pow2Scale), NVFP4's e4m3 scales in float lanes
//      with the reference's float32 steps (E4m3Scales); fp32 scales and the general loop
//      call the scalar block_scale() once per block. A scalar scale per 32 elements cost
//      a third of an MXFP4 cast.
//   3. cast: y = x'' * m with m = 2^-X (power-of-two scales) or s_enc (fp32, e4m3), one
//      float32 multiply per lane as the scalar code does; then the shared vector codec
//      (codec_hwy-inl.h: EncodeVec, DecodeVec, Philox) gives the code and, for
//      fake_quantize, decode(code) * dec (* s_dec) (/ 0.75) in the same pass.
//      Power-of-two scales: x'' * 2^-X is exact while the product is a normal float32 (or
//      x'' is 0); only below float32's normal range does the reference round to odd
//      (mul_pow2_exact). A vector with such a lane (|y| <= FLT_MIN, x'' != 0) goes to the
//      scalar reference whole; that needs |x| < amax * 2^-(emax + 126)-ish, which real
//      data almost never has.
// Stochastic rounding: the random words of each run of flat indices are drawn with the
// vector Philox into a small buffer (RandomFill) and read back lane by lane, so the
// word of element i is random_bits(seed, stream, index_offset + i) whatever the block
// alignment; along the last axis one fill serves a whole sub-group of consecutive blocks.
// Statistics (saturated, flushed) are counted in lanes and summed; they equal the
// scalar counts because they test the same float32 values.
// Scales over the whole tensor (NVFP4's tensor scale, per-tensor blocks) need the tensor
// amax first: RangeAmax over flat runs is that pass 1; per-tensor blocks then cast flat
// runs under their one scale (QuantizeRange).
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "quantize_hwy.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep

#include <hwy/cache_control.h>
#include <hwy/highway.h>

#include <algorithm>
#include <atomic>
#include <cstring>

#include "codec_hwy-inl.h"
#include "lpx/numerics/philox.hpp"
#include "quantize_internal.hpp"

HWY_BEFORE_NAMESPACE();
namespace lpx {
namespace simd {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;
namespace qd = lpx::quantize_detail;

// Everything a block kernel needs that does not change from block to block.
struct BlockConsts {
  detail::EncodeConsts ec;
  detail::DecodeConsts dc;
  detail::FastConsts fc;  // set when fast_path_ok (the short vector codec)
  detail::PhiloxConsts pc;
  detail::FastConsts scale_fc;  // e4m3 block scales (NVFP4): e4m3fn, rne, sat
  CastOptions co;
  bool flush = false, headroom = false, two_level = false;
  float max_elem = 0.0f, tensor_enc = 1.0f, tensor_dec = 1.0f;
};

inline BlockConsts make_block_consts(const qd::Context& ctx) {
  BlockConsts k;
  const QuantizeOptions& o = ctx.opt;
  k.co = qd::element_cast_options(o);
  k.ec = detail::make_encode_consts(ctx.f->element, k.co);
  k.dc = detail::make_decode_consts(ctx.f->element);
  if (detail::fast_path_ok(ctx.f->element, k.co)) k.fc = detail::make_fast_consts(ctx.f->element, k.co);
  if (is_stochastic(o.round)) k.pc = detail::make_philox_consts(o.seed);
  k.flush = o.flush_subnormal_inputs;
  k.headroom = o.headroom_3_4;
  k.two_level = ctx.f->two_level();
  k.max_elem = ctx.lim.max_elem;
  k.tensor_enc = ctx.tensor_enc;
  k.tensor_dec = ctx.tensor_dec;
  if (ctx.f->scale == ScaleFormat::e4m3) {
    CastOptions sc;
    sc.round = Rounding::rne;
    sc.overflow = Overflow::sat;
    k.scale_fc = detail::make_fast_consts(fmt8::e4m3fn, sc);
  }
  return k;
}

#if HWY_TARGET != HWY_SCALAR

// Random words per RandomFill: 8 KiB, inside L1 beside the 8 KiB of input being cast.
constexpr size_t kRandWords = 2048;

// out[k] = random_bits(seed, stream, index_offset + first + k) for k < n (n <=
// kRandWords): the vector Philox from the first multiple of 4, the scalar one for the
// up-to-3 words before it. On AVX-512 the bulk runs four chains at a time (PhiloxDraw8):
// 1-4% faster mxfp4 stochastic rounding on 1024 x 128 and 1024 x 512 operands than two
// chains (the same words; fake_quantize_values, sr with 3/4 headroom, one thread, a 2-core
// AMD EPYC).
HWY_INLINE void RandomFill(uint32_t* HWY_RESTRICT out, size_t n, uint64_t first,
                           const BlockConsts& k) {
  first += k.co.index_offset;
  const DU du;
  const size_t N = hn::Lanes(du);
  size_t i = 0;
  const size_t head = static_cast<size_t>((4 - first % 4) % 4);
  for (; i < head && i < n; ++i) out[i] = random_bits(k.co.seed, k.co.stream, first + i);
  if (i >= n) return;
  PhiloxLanes ph = PhiloxBegin((first + i) / 4, k.co.stream);
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX3
  for (; i + 8 * N <= n; i += 8 * N) PhiloxDraw8(ph, k.pc, out + i);
#endif
  for (; i + 4 * N <= n; i += 4 * N) {
    VI r0, r1, r2, r3;
    PhiloxDraw4(ph, k.pc, r0, r1, r2, r3);
    hn::StoreU(hn::BitCast(du, r0), du, out + i);
    hn::StoreU(hn::BitCast(du, r1), du, out + i + N);
    hn::StoreU(hn::BitCast(du, r2), du, out + i + 2 * N);
    hn::StoreU(hn::BitCast(du, r3), du, out + i + 3 * N);
  }
  // A tail of 2N words or more (a 32-column tile's row, for one) from one chain's both
  // halves: two PhiloxDraw1 would run two chains and keep half of each.
  if (i + 2 * N <= n) {
    VI r0, r1;
    PhiloxDraw2(ph, k.pc, r0, r1);
    hn::StoreU(hn::BitCast(du, r0), du, out + i);
    hn::StoreU(hn::BitCast(du, r1), du, out + i + N);
    i += 2 * N;
  }
  for (; i < n; i += N) {
    const VI r = PhiloxDraw1(ph, k.pc);
    if (i + N <= n) {
      hn::StoreU(hn::BitCast(du, r), du, out + i);
    } else {
      HWY_ALIGN uint32_t tmp[HWY_MAX_BYTES / 4];
      hn::Store(hn::BitCast(du, r), du, tmp);
      std::memcpy(out + i, tmp, (n - i) * sizeof(uint32_t));
    }
  }
}

// The random words of elements [first, first + n) of job.x: job.rnd's when given (the
// caller's QuantizeOptions::random_words, or the transposing axis-0 path's, keyed by the
// elements' original indices), else Philox.
HWY_INLINE void JobRandom(const qd::BlockJob& job, uint32_t* HWY_RESTRICT out, size_t n,
                          uint64_t first, const BlockConsts& k) {
  if (job.rnd != nullptr) {
    std::memcpy(out, job.rnd + first, n * sizeof(uint32_t));
    return;
  }
  RandomFill(out, n, first, k);
}

// x' (the subnormal flush) of one vector of float32 bits.
HWY_INLINE VI Prepare(VI bits, const BlockConsts& k) {
  if (!k.flush) return bits;
  const DI di;
  const VI abs = hn::And(bits, hn::Set(di, 0x7fffffff));
  return hn::IfThenElse(hn::Lt(abs, hn::Set(di, 0x00800000)),
                        hn::And(bits, hn::Set(di, static_cast<int32_t>(kF32SignMask))), bits);
}

// Loads lanes [0, cnt) of p (cnt <= N) as float32 bits, zero in the lanes past cnt.
HWY_INLINE VI LoadBits(const float* p, size_t cnt, size_t N) {
  const DI di;
  const DF df;
  if (cnt == N) return hn::BitCast(di, hn::LoadU(df, p));
  HWY_ALIGN float tmp[HWY_MAX_BYTES / 4] = {};
  std::memcpy(tmp, p, cnt * sizeof(float));
  return hn::BitCast(di, hn::Load(df, tmp));
}

// Max of |x'| bits over a run of n floats, lane-wise into vall (and over finite lanes
// into vfin when kFinite).
template <bool kFinite>
HWY_INLINE void RunAmax(const float* HWY_RESTRICT x, size_t n, const BlockConsts& k, VI& vall,
                        VI& vfin) {
  const DI di;
  const size_t N = hn::Lanes(di);
  const VI absmask = hn::Set(di, 0x7fffffff);
  const VI max_finite = hn::Set(di, 0x7f7fffff);  // |x| bits above it: Inf or NaN
  size_t c = 0;
  // Two accumulators: a block of 32 is 2-8 vectors, and max has a latency to hide.
  VI a0 = hn::Zero(di), a1 = hn::Zero(di);
  for (; c + 2 * N <= n; c += 2 * N) {
    const VI b0 = hn::And(Prepare(hn::BitCast(di, hn::LoadU(DF(), x + c)), k), absmask);
    const VI b1 = hn::And(Prepare(hn::BitCast(di, hn::LoadU(DF(), x + c + N)), k), absmask);
    a0 = hn::Max(a0, b0);
    a1 = hn::Max(a1, b1);
    if constexpr (kFinite) {
      vfin = hn::Max(vfin, hn::IfThenZeroElse(hn::Gt(b0, max_finite), b0));
      vfin = hn::Max(vfin, hn::IfThenZeroElse(hn::Gt(b1, max_finite), b1));
    }
  }
  for (; c < n; c += N) {
    const VI b = hn::And(Prepare(LoadBits(x + c, std::min(N, n - c), N), k), absmask);
    a0 = hn::Max(a0, b);
    if constexpr (kFinite) vfin = hn::Max(vfin, hn::IfThenZeroElse(hn::Gt(b, max_finite), b));
  }
  vall = hn::Max(vall, hn::Max(a0, a1));
}

HWY_INLINE uint32_t MaxLane(VI v) {
  return static_cast<uint32_t>(hn::GetLane(hn::MaxOfLanes(DI(), v)));
}

HWY_INLINE int64_t SumLanes(VI v) {
  const DI di;
  HWY_ALIGN int32_t lanes[HWY_MAX_BYTES / 4];
  hn::Store(v, di, lanes);
  int64_t s = 0;
  for (size_t l = 0; l < hn::Lanes(di); ++l) s += lanes[l];
  return s;
}

// Per-lane counters of saturated and flushed elements (each lane counts down by 1 per
// hit: a true mask is -1), flushed into 64-bit totals often enough not to overflow.
struct LaneCounts {
  VI sat, flushed;
  int64_t pending = 0;  // elements per lane since the last flush
};

HWY_INLINE void FlushCounts(LaneCounts& lc, QuantizeStats& st) {
  st.saturated -= SumLanes(lc.sat);
  st.flushed -= SumLanes(lc.flushed);
  lc.sat = hn::Zero(DI());
  lc.flushed = hn::Zero(DI());
  lc.pending = 0;
}

// Records `vectors` more vectors counted in the lanes; flushes long before a lane could
// overflow.
HWY_INLINE void CountVectors(LaneCounts& lc, QuantizeStats& st, int64_t vectors) {
  lc.pending += vectors;
  if (lc.pending > (int64_t{1} << 28)) FlushCounts(lc, st);
}

// A kernel's last flush and its statistics into the totals.
HWY_INLINE void FinishCounts(LaneCounts& lc, QuantizeStats& st, qd::BlockTotals& t) {
  FlushCounts(lc, st);
  t.add(st);
}

// Float32 bits of 2^(X - 126), or 0 below float32's subnormals: with power-of-two scales
// y = x'' * 2^-X lies at or below FLT_MIN (where the reference rounds to odd, and where
// a nonzero x'' can underflow to 0) exactly when 0 < |x''| <= 2^(X - 126).
inline int32_t tiny_threshold_bits(int x) {
  const int e = x - 126;
  if (e >= -126) return (e + 127) << 23;
  if (e >= -149) return 1 << (e + 149);
  return 0;
}

// One block's constants for the cast loop, broadcast once per block.
struct BlockVecs {
  hn::Vec<DF> mul, dec;
  VI tiny_thr;     // power-of-two scales: see tiny_threshold_bits
  bool count_sat;  // NVFP4 blocks whose scale underflowed to 0 do not count as saturated
};

template <bool kPow2>
HWY_INLINE BlockVecs MakeBlockVecs(const BlockConsts& k, const qd::BlockScale& s, float mul,
                                   float dec) {
  const DI di;
  const DF df;
  return {hn::Set(df, mul), hn::Set(df, dec),
          hn::Set(di, kPow2 ? tiny_threshold_bits(s.exponent) : 0),
          !(k.two_level && s.dec == 0.0f)};
}

// block_scale()'s e4m3 branch (NVFP4) for blocks [0, n) at once from their amax bits
// (finite; NaN/Inf blocks take the scalar block_scale): the same float32 steps in every
// lane, with the e4m3 rne-satfinite encode and its decode from the short vector codec
// (held bit-identical to the scalar codec by the cast tests). The arrays hold a whole
// number of vectors (lanes past n are computed and ignored).
HWY_INLINE void E4m3Scales(const uint32_t* HWY_RESTRICT amax_bits, size_t n, const BlockConsts& k,
                           uint8_t* HWY_RESTRICT code, float* HWY_RESTRICT enc,
                           float* HWY_RESTRICT dec) {
  const DI di;
  const DF df;
  const hn::Rebind<uint8_t, DI> d8;
  const size_t N = hn::Lanes(di);
  const VI zero = hn::Zero(di);
  for (size_t g = 0; g < n; g += N) {
    const auto amax = hn::BitCast(df, hn::LoadU(di, reinterpret_cast<const int32_t*>(amax_bits + g)));
    // s_dec_b = e4m3(amax_b * s_enc / max_elem), left to right in float32.
    const VI v = hn::BitCast(di, hn::Div(hn::Mul(amax, hn::Set(df, k.tensor_enc)),
                                         hn::Set(df, k.max_elem)));
    hn::StoreU(hn::DemoteTo(d8, FastEncodeVec<Rounding::rne>(v, zero, k.scale_fc)), d8, code + g);
    const auto d = hn::BitCast(df, FastFakeVec<Rounding::rne>(v, zero, k.scale_fc));
    hn::StoreU(d, df, dec + g);
    // s_enc_b = min(1 / (s_dec_b * s_dec), FLT_MAX): Inf (s_dec_b = 0) becomes FLT_MAX.
    const auto inv = hn::Div(hn::Set(df, 1.0f), hn::Mul(d, hn::Set(df, k.tensor_dec)));
    hn::StoreU(hn::Min(inv, hn::Set(df, FLT_MAX)), df, enc + g);
  }
}

// Casts the cnt <= N elements at flat index i (bits: their float32 bits, zero past cnt;
// r: their random words, sr only) under one block's scale: codes (when job.codes), the
// dequantized values (when job.out) and the statistics. kFast: the short vector codec
// (codec_simd.hpp: fast_path_ok), which gives the rounded value without decoding a code.
template <Rounding M, bool kInt, bool kPow2, bool kFast>
HWY_INLINE void CastVec(const qd::BlockJob& job, const BlockConsts& k, int64_t i, size_t cnt,
                        VI bits, VI r, const BlockVecs& bv, const qd::BlockScale& s,
                        LaneCounts& lc, QuantizeStats& st) {
  const DI di;
  const DF df;
  const hn::Rebind<uint8_t, DI> d8;
  const size_t N = hn::Lanes(di);
  auto p = hn::BitCast(df, Prepare(bits, k));
  if (k.headroom) p = hn::Mul(p, hn::Set(df, 0.75f));
  const auto y = hn::Mul(p, bv.mul);
  const VI ybits = hn::BitCast(di, y);
  if constexpr (kPow2) {
    // Below float32's normal range the reference rounds x * 2^-X to odd: scalar.
    const VI pabs = hn::And(hn::BitCast(di, p), hn::Set(di, 0x7fffffff));
    const auto tiny = hn::Lt(hn::BitCast(DU(), hn::Sub(pabs, hn::Set(di, 1))),
                             hn::BitCast(DU(), bv.tiny_thr));
    if (HWY_UNLIKELY(!hn::AllFalse(DU(), tiny))) {
      qd::scalar_run(job, i, static_cast<int64_t>(cnt), s, st);
      return;
    }
  }
  VI code = hn::Zero(di);
  hn::Vec<DF> v;
  if constexpr (kFast) {
    if (job.codes != nullptr) code = FastEncodeVec<M>(ybits, r, k.fc);
    v = hn::Mul(hn::BitCast(df, FastFakeVec<M>(ybits, r, k.fc)), bv.dec);
  } else {
    code = EncodeVec<M, kInt>(ybits, r, k.ec);
    v = hn::Mul(DecodeVec(code, k.dc), bv.dec);
  }
  if (k.two_level) v = hn::Mul(v, hn::Set(df, k.tensor_dec));
  if (k.headroom) v = hn::Div(v, hn::Set(df, 0.75f));
  auto fl = hn::RebindMask(di, hn::And(hn::Ne(hn::BitCast(df, bits), hn::Zero(df)),
                                       hn::Eq(v, hn::Zero(df))));
  auto sat = hn::RebindMask(di, hn::Gt(hn::Abs(y), hn::Set(df, k.max_elem)));
  if (cnt == N) {
    if (bv.count_sat) lc.sat = hn::Add(lc.sat, hn::VecFromMask(di, sat));
    lc.flushed = hn::Add(lc.flushed, hn::VecFromMask(di, fl));
    if (job.codes != nullptr)
      hn::StoreU(hn::DemoteTo(d8, code), d8, job.codes + i);  // codes are in [0, 255]: exact
    if (job.out != nullptr) hn::StoreU(v, df, job.out + i);
    return;
  }
  const auto valid = hn::FirstN(di, cnt);
  if (bv.count_sat) lc.sat = hn::Add(lc.sat, hn::VecFromMask(di, hn::And(sat, valid)));
  lc.flushed = hn::Add(lc.flushed, hn::VecFromMask(di, hn::And(fl, valid)));
  HWY_ALIGN uint8_t tc[HWY_MAX_BYTES / 4];
  HWY_ALIGN float tv[HWY_MAX_BYTES / 4];
  hn::Store(hn::DemoteTo(d8, code), d8, tc);
  hn::Store(v, df, tv);
  if (job.codes != nullptr) std::memcpy(job.codes + i, tc, cnt);
  if (job.out != nullptr) std::memcpy(job.out + i, tv, cnt * sizeof(float));
}

// Casts a run of n contiguous elements from flat index i0 under block scale s (CastVec
// per vector); rnd holds their random words (sr only).
template <Rounding M, bool kInt, bool kPow2, bool kFast>
HWY_INLINE void CastRun(const qd::BlockJob& job, const BlockConsts& k, int64_t i0, size_t n,
                        const qd::BlockScale& s, float mul, float dec,
                        const uint32_t* HWY_RESTRICT rnd, LaneCounts& lc, QuantizeStats& st) {
  const DI di;
  const size_t N = hn::Lanes(di);
  const BlockVecs bv = MakeBlockVecs<kPow2>(k, s, mul, dec);
  for (size_t c = 0; c < n; c += N) {
    const size_t cnt = std::min(N, n - c);
    VI r = hn::Zero(di);
    if constexpr (is_stochastic(M)) {
      if (cnt == N) {
        r = hn::LoadU(di, reinterpret_cast<const int32_t*>(rnd + c));
      } else {
        HWY_ALIGN uint32_t tmp[HWY_MAX_BYTES / 4] = {};
        std::memcpy(tmp, rnd + c, cnt * sizeof(uint32_t));
        r = hn::BitCast(di, hn::Load(DU(), tmp));
      }
    }
    CastVec<M, kInt, kPow2, kFast>(job, k, i0 + static_cast<int64_t>(c), cnt,
                                   LoadBits(job.x + i0 + c, cnt, N), r, bv, s, lc, st);
  }
  CountVectors(lc, st, static_cast<int64_t>((n + N - 1) / N));
}

// The vpb whole vectors of a contiguous block at flat index `base` under its scale (the
// cast half of the contiguous loops below); rnd holds the words of the elements from
// flat index rnd_first on (sr only).
template <Rounding M, bool kInt, bool kPow2, bool kFast>
HWY_INLINE void CastBlockVectors(const qd::BlockJob& job, const BlockConsts& k, int64_t base,
                                 int64_t vpb, const uint32_t* HWY_RESTRICT rnd, int64_t rnd_first,
                                 const BlockVecs& bv, const qd::BlockScale& s, LaneCounts& lc,
                                 QuantizeStats& st) {
  const DI di;
  const size_t N = hn::Lanes(di);
  for (int64_t j = 0; j < vpb; ++j) {
    const int64_t i = base + j * static_cast<int64_t>(N);
    VI r = hn::Zero(di);
    if constexpr (is_stochastic(M))
      r = hn::LoadU(di, reinterpret_cast<const int32_t*>(rnd + (i - rnd_first)));
    CastVec<M, kInt, kPow2, kFast>(job, k, i, N, hn::BitCast(di, hn::LoadU(DF(), job.x + i)), r,
                                   bv, s, lc, st);
  }
  CountVectors(lc, st, vpb);
}

// Lane-wise the largest |x'| bits over the vpb whole vectors of a contiguous block at x
// (pass 1 of the contiguous loops below).
HWY_INLINE VI BlockLaneMax(const float* HWY_RESTRICT x, int64_t vpb, const BlockConsts& k) {
  const DI di;
  const size_t N = hn::Lanes(di);
  const VI absmask = hn::Set(di, 0x7fffffff);
  VI a0 = hn::Zero(di);
  for (int64_t j = 0; j < vpb; ++j) {
    // The stream runs ahead of the hardware prefetcher's reach without this (2 KiB).
    hwy::Prefetch(x + j * static_cast<int64_t>(N) + 512);
    a0 = hn::Max(a0, hn::And(Prepare(hn::BitCast(di, hn::LoadU(DF(), x + j * N)), k), absmask));
  }
  return a0;
}

// block_scale()'s power-of-two branch, inlined (no call per block), for a block whose
// finite amax has the bits `amax`: the same scale_exponent() and clamp. The fields are
// written one by one: a BlockScale built on the stack and copied whole stalls on store
// forwarding (byte stores, then a 16-byte load).
HWY_INLINE void Pow2Scale(uint32_t amax, ScaleRule rule, const qd::ElementLimits& lim,
                          qd::BlockScale& s) {
  int xs = -127;  // all-zero block: 2^-127 (code 0x00)
  bool clamped = false;
  if (amax != 0) {
    const int raw = qd::scale_exponent(amax, rule, lim);
    xs = std::clamp(raw, -127, 127);
    clamped = xs != raw;
  }
  s.nan = false;
  s.clamped = clamped;
  s.exponent = xs;
  s.enc = 1.0f;
  s.dec = pow2f(xs);
  s.code = static_cast<uint8_t>(xs + 127);
}

// Float32 bits of 2^e for e in [-127, 127] in every lane (pow2f: 2^-127 is the one
// subnormal).
HWY_INLINE VI Pow2Bits(VI e) {
  const DI di;
  return hn::IfThenElse(hn::Eq(e, hn::Set(di, -127)), hn::Set(di, 0x00400000),
                        hn::ShiftLeft<23>(hn::Add(e, hn::Set(di, 127))));
}

// The power-of-two scales of N blocks at once, lane l from the finite amax bits am[l]
// (Pow2Scale in integer lanes: scale_exponent()'s four rules on the float32 fields, the
// same clamp). A float32-subnormal amax needs a leading-zero count: such lanes are
// flagged in `subnormal` and their caller runs Pow2Scale on them.
struct Pow2Lanes {
  VI exponent;     // X, clamped to [-127, 127]
  VI mul, dec;     // float32 bits of 2^-X and 2^X
  VI tiny_thr;     // tiny_threshold_bits(X)
  hn::Mask<DI> clamped, subnormal;
};

HWY_INLINE Pow2Lanes Pow2ScaleLanes(VI am, ScaleRule rule, const qd::ElementLimits& lim) {
  const DI di;
  // e - emax with e the unbiased exponent of a normal amax
  const VI biased = hn::ShiftRight<23>(am);
  const VI off = hn::Set(di, 127 + lim.emax);
  VI raw = hn::Sub(biased, off);
  // a true mask is -1 as a vector: subtracting it adds one
  switch (rule) {
    case ScaleRule::floor: break;
    case ScaleRule::ceil:  // + 1 unless amax is a power of two (a zero mantissa field)
      raw = hn::Sub(raw, hn::VecFromMask(di, hn::Ne(hn::And(am, hn::Set(di, 0x7fffff)), hn::Zero(di))));
      break;
    case ScaleRule::rceil: {  // + 1 iff the 24-bit significand exceeds max_elem's
      const VI sig = hn::Or(hn::And(am, hn::Set(di, 0x7fffff)), hn::Set(di, 0x800000));
      raw = hn::Sub(raw, hn::VecFromMask(di, hn::Gt(sig, hn::Set(di, static_cast<int32_t>(lim.max_sig)))));
      break;
    }
    case ScaleRule::even:  // half an ulp of 1 + mbits bits added to the bits, then the floor
      raw = hn::Sub(hn::ShiftRight<23>(hn::Add(am, hn::Set(di, int32_t{1} << (22 - lim.mbits)))), off);
      break;
  }
  const auto zero = hn::Eq(am, hn::Zero(di));
  const VI lo = hn::Set(di, -127), hi = hn::Set(di, 127);
  const VI x = hn::IfThenElse(zero, lo, hn::Min(hn::Max(raw, lo), hi));
  Pow2Lanes p;
  p.exponent = x;
  p.clamped = hn::AndNot(zero, hn::Ne(x, raw));
  p.subnormal = hn::AndNot(zero, hn::Lt(am, hn::Set(di, 0x00800000)));
  p.mul = Pow2Bits(hn::Neg(x));
  p.dec = Pow2Bits(x);
  // tiny_threshold_bits: (X + 1) << 23 for X >= 0, 1 << (X + 23) down to X = -23, else 0
  const VI sub_shift = hn::Min(hn::Max(hn::Add(x, hn::Set(di, 23)), hn::Zero(di)), hn::Set(di, 31));
  const VI sub_thr = hn::IfThenElseZero(hn::Gt(x, hn::Set(di, -24)), hn::Shl(hn::Set(di, 1), sub_shift));
  p.tiny_thr = hn::IfThenElse(hn::Gt(x, hn::Set(di, -1)), hn::ShiftLeft<23>(hn::Add(x, hn::Set(di, 1))), sub_thr);
  return p;
}

// Pow2ScaleLanes over blocks [0, n) (arrays padded to whole vectors; am finite in the
// lanes that count, which are those below n with am <= FLT_MAX's bits): X, 2^-X, 2^X and
// the tiny threshold per block, Pow2Scale on subnormal lanes. Returns how many of the
// counted blocks clamped.
HWY_INLINE int64_t Pow2Scales(const uint32_t* HWY_RESTRICT am, size_t n, ScaleRule rule,
                              const qd::ElementLimits& lim, int32_t* HWY_RESTRICT exponent,
                              float* HWY_RESTRICT mul, float* HWY_RESTRICT dec,
                              int32_t* HWY_RESTRICT thr) {
  const DI di;
  const DF df;
  const size_t N = hn::Lanes(di);
  int64_t clamped = 0;
  for (size_t g = 0; g < n; g += N) {
    const VI a = hn::LoadU(di, reinterpret_cast<const int32_t*>(am + g));
    const Pow2Lanes p = Pow2ScaleLanes(a, rule, lim);
    const auto counted = hn::And(hn::FirstN(di, n - g), hn::Lt(a, hn::Set(di, 0x7f800000)));
    hn::StoreU(p.exponent, di, exponent + g);
    hn::StoreU(hn::BitCast(df, p.mul), df, mul + g);
    hn::StoreU(hn::BitCast(df, p.dec), df, dec + g);
    hn::StoreU(p.tiny_thr, di, thr + g);
    // subnormal lanes are counted below, from Pow2Scale
    clamped += static_cast<int64_t>(hn::CountTrue(di, hn::AndNot(p.subnormal, hn::And(p.clamped, counted))));
    if (HWY_LIKELY(hn::AllFalse(di, hn::And(p.subnormal, counted)))) continue;
    for (size_t l = g; l < std::min(n, g + N); ++l) {
      if (am[l] == 0 || am[l] >= 0x00800000u) continue;
      qd::BlockScale s;
      Pow2Scale(am[l], rule, lim, s);
      exponent[l] = s.exponent;
      mul[l] = pow2f(-s.exponent);
      dec[l] = s.dec;
      thr[l] = tiny_threshold_bits(s.exponent);
      clamped += s.clamped ? 1 : 0;
    }
  }
  return clamped;
}

// Blocks per sub-group: pass 1 (amax and scale, with calls into the scalar block_scale)
// runs over a sub-group before pass 2 casts it, so the cast loop runs without calls
// between blocks and keeps its constants in registers; the sub-group's input is still
// in L1 for pass 2.
constexpr int64_t kSubBlocks = 64;

template <Rounding M, bool kInt, bool kPow2, bool kFast>
void QuantizeBlocksT(const qd::BlockJob& job, int64_t b0, int64_t b1, qd::BlockTotals& t);

// Lane j: the largest |x'| bits of block j of the n <= N contiguous blocks of vpb vectors
// at x (0 past n). Each block's lane-wise max, then a pairwise tree across the blocks:
// ConcatOdd/ConcatEven of two vectors halve the lanes each block holds and double the
// blocks a vector holds, so log2(N) levels leave one lane per block, in order. tree:
// N * N words of scratch.
HWY_INLINE VI GroupAmax(const float* HWY_RESTRICT x, size_t n, int64_t vpb, const BlockConsts& k,
                        int32_t* HWY_RESTRICT tree) {
  const DI di;
  const size_t N = hn::Lanes(di);
  for (size_t j = 0; j < N; ++j) {
    const VI a = j < n ? BlockLaneMax(x + static_cast<int64_t>(j) * vpb * static_cast<int64_t>(N), vpb, k)
                       : hn::Zero(di);
    hn::Store(a, di, tree + j * N);
  }
  for (size_t w = N / 2; w >= 1; w /= 2)
    for (size_t j = 0; j < w; ++j) {
      const VI lo = hn::Load(di, tree + 2 * j * N), hi = hn::Load(di, tree + (2 * j + 1) * N);
      hn::Store(hn::Max(hn::ConcatOdd(di, hi, lo), hn::ConcatEven(di, hi, lo)), di, tree + j * N);
    }
  return hn::Load(di, tree);
}

// The MX and NVFP4 cases in one tight loop: power-of-two or e4m3 (under a tensor scale)
// block scales, blocks along the last axis whose length is a multiple of the vector and
// divides the row (so blocks b0..b1 are one contiguous run), no precomputed amax. Per
// chunk of blocks held in L1: the amax of N blocks per vector (GroupAmax), their scales
// in vectors (Pow2Scales: scale_exponent() and the clamp in lanes; E4m3Scales), then
// CastVec per vector under each block's constants: no horizontal reduction and no scalar
// scale per block. sr: the chunk's random words are drawn at once. A block holding
// NaN/Inf goes to the general loop (QuantizeBlocksT) alone.
template <Rounding M, bool kInt, bool kPow2, bool kFast>
void QuantizeContiguousT(const qd::BlockJob& job, int64_t b0, int64_t b1, qd::BlockTotals& t) {
  const DI di;
  const DF df;
  const size_t N = hn::Lanes(di);
  const qd::Context& ctx = *job.ctx;
  const BlockConsts k = make_block_consts(ctx);
  const int64_t L = job.block_len;
  const int64_t vpb = L / static_cast<int64_t>(N);
  const int64_t chunk = std::clamp<int64_t>(static_cast<int64_t>(kRandWords) / L, 1, kSubBlocks);
  constexpr size_t kLanes = HWY_MAX_BYTES / 4;
  constexpr size_t kPad = kSubBlocks + kLanes;
  HWY_ALIGN uint32_t rnd[kRandWords];
  HWY_ALIGN int32_t tree[kLanes * kLanes];
  HWY_ALIGN uint32_t am[kPad];
  HWY_ALIGN int32_t xs[kPad], thr[kPad] = {};  // power-of-two scales only
  HWY_ALIGN uint8_t code[kPad];                // e4m3 scales only
  HWY_ALIGN float mul[kPad], dec[kPad];
  LaneCounts lc{hn::Zero(di), hn::Zero(di), 0};
  QuantizeStats st;
  uint32_t finite_max = 0;
  for (int64_t c0 = b0; c0 < b1; c0 += chunk) {
    const int64_t c1 = std::min(b1, c0 + chunk);
    const size_t n = static_cast<size_t>(c1 - c0);
    if constexpr (is_stochastic(M))
      JobRandom(job, rnd, n * static_cast<size_t>(L), static_cast<uint64_t>(c0 * L), k);
    for (size_t g = 0; g < n; g += N)
      hn::Store(GroupAmax(job.x + (c0 + static_cast<int64_t>(g)) * L, std::min(N, n - g), vpb, k, tree), di,
                reinterpret_cast<int32_t*>(am + g));
    if constexpr (kPow2) t.clamped += Pow2Scales(am, n, ctx.f->rule, ctx.lim, xs, mul, dec, thr);
    else E4m3Scales(am, n, k, code, mul, dec);
    for (size_t g = 0; g < n; ++g) {
      const int64_t b = c0 + static_cast<int64_t>(g);
      if (HWY_UNLIKELY(am[g] > 0x7f7fffffu)) {  // NaN or Inf in the block
        QuantizeBlocksT<M, kInt, kPow2, kFast>(job, b, b + 1, t);
        continue;
      }
      finite_max = std::max(finite_max, am[g]);
      // CastVec reads s only when it hands a vector to the scalar reference.
      qd::BlockScale s;
      s.dec = dec[g];
      if constexpr (kPow2) {
        s.exponent = xs[g];
        s.code = static_cast<uint8_t>(xs[g] + 127);
      } else {
        s.code = code[g];
        s.enc = mul[g];
        s.clamped = am[g] != 0 && s.dec == 0.0f;  // an e4m3 scale that underflowed
        if (s.clamped) ++t.clamped;
      }
      job.store_scale(b, s);
      // NVFP4 blocks whose scale underflowed to 0 do not count as saturated (BlockVecs)
      const BlockVecs bv{hn::Set(df, mul[g]), hn::Set(df, dec[g]), hn::Set(di, thr[g]),
                         !(k.two_level && s.dec == 0.0f)};
      CastBlockVectors<M, kInt, kPow2, kFast>(job, k, b * L, vpb, rnd, c0 * L, bv, s, lc, st);
    }
  }
  FinishCounts(lc, st, t);
  t.finite_max = std::max(t.finite_max, finite_max);
}

// DeepSeek-V3's 1x128 blocks (fp32 scales) in the same layout: per block its amax, the
// scalar block_scale(), then CastVec per vector while the block is in L1 (a scalar scale
// per 128 elements costs little).
template <Rounding M, bool kInt, bool kFast>
void QuantizeContiguousFp32T(const qd::BlockJob& job, int64_t b0, int64_t b1, qd::BlockTotals& t) {
  const DI di;
  const size_t N = hn::Lanes(di);
  const qd::Context& ctx = *job.ctx;
  const BlockConsts k = make_block_consts(ctx);
  const int64_t L = job.block_len;
  const int64_t vpb = L / static_cast<int64_t>(N);
  const int64_t chunk = std::max<int64_t>(1, static_cast<int64_t>(kRandWords) / L);
  HWY_ALIGN uint32_t rnd[kRandWords];
  LaneCounts lc{hn::Zero(di), hn::Zero(di), 0};
  QuantizeStats st;
  uint32_t finite_max = 0;
  for (int64_t c0 = b0; c0 < b1; c0 += chunk) {
    const int64_t c1 = std::min(b1, c0 + chunk);
    if constexpr (is_stochastic(M))
      JobRandom(job, rnd, static_cast<size_t>((c1 - c0) * L), static_cast<uint64_t>(c0 * L), k);
    for (int64_t b = c0; b < c1; ++b) {
      const int64_t base = b * L;
      const uint32_t amax = MaxLane(BlockLaneMax(job.x + base, vpb, k));
      if (HWY_UNLIKELY(amax > 0x7f7fffffu)) {  // NaN or Inf in the block
        QuantizeBlocksT<M, kInt, false, kFast>(job, b, b + 1, t);
        continue;
      }
      finite_max = std::max(finite_max, amax);
      qd::Amax a;
      a.all = a.finite = amax;
      const qd::BlockScale s = qd::block_scale(a, ctx);
      if (s.clamped) ++t.clamped;
      job.store_scale(b, s);
      const BlockVecs bv = MakeBlockVecs<false>(k, s, s.enc, qd::stored_dec(s, ctx.f->scale));
      CastBlockVectors<M, kInt, false, kFast>(job, k, base, vpb, rnd, c0 * L, bv, s, lc, st);
    }
  }
  FinishCounts(lc, st, t);
  t.finite_max = std::max(t.finite_max, finite_max);
}

// The widest tile QuantizeColumnsT takes (the strided strategy's tiles are at most 256
// columns wide for 32-row blocks, 512 for 16-row ones).
constexpr int64_t kMaxColumnLanes = 512;

// Blocks down the columns (the strided strategy's tiles: `rows` rows of `cols` columns
// from flat index `first`, rows `stride` apart; column j is block b_first + j) with the
// lanes along the row: lane l of a vector is column g + l of the tile, so one load per
// row feeds N blocks, a block's amax is a lane-wise max over its rows, and the values,
// codes and random words stay where the tensor keeps them: none of the transposing
// path's three transpositions. The arithmetic per element is CastVec's with the block's
// constants per lane (BlockVecs of per-lane mul, dec and tiny threshold), and the
// scales are Pow2Scale's or E4m3Scales': the same bits as the transposing path.
// Power-of-two and e4m3 (NVFP4) scales. A tile holding NaN or Inf, an element whose
// scaled value leaves float32's normal range (CastVec's scalar round-to-odd case), or an
// e4m3 scale that underflowed to 0 (found before anything is written) returns false
// untouched and takes the transposing path. rnd: room for cols words (sr only).
template <Rounding M, bool kInt, bool kPow2, bool kFast>
bool QuantizeColumnsT(const qd::BlockJob& job, int64_t first, int64_t rows, int64_t cols, int64_t stride,
                      int64_t b_first, uint32_t* HWY_RESTRICT rnd, qd::BlockTotals& t) {
  const DI di;
  const DU du;
  const DF df;
  const int64_t N = static_cast<int64_t>(hn::Lanes(di));
  const qd::Context& ctx = *job.ctx;
  if (cols % N != 0 || cols > kMaxColumnLanes || rows < 1) return false;
  if (!kPow2 && ctx.f->scale != ScaleFormat::e4m3) return false;
  const BlockConsts k = make_block_consts(ctx);
  if (kPow2 && k.two_level) return false;
  HWY_ALIGN uint32_t amax[kMaxColumnLanes], lo[kMaxColumnLanes];
  HWY_ALIGN float mul[kMaxColumnLanes], dec[kMaxColumnLanes];
  HWY_ALIGN int32_t thr[kMaxColumnLanes] = {};
  const VI absmask = hn::Set(di, 0x7fffffff);
  // Pass 1: per column, the largest |x'| and (power-of-two scales) the smallest |p| - 1
  // (p = x' under the headroom; zero wraps to the top), which CastVec compares with the
  // tiny threshold.
  for (int64_t g = 0; g < cols; g += N) {
    VI a = hn::Zero(di);
    hn::Vec<DU> l = hn::Set(du, ~0u);
    for (int64_t r = 0; r < rows; ++r) {
      const VI x = Prepare(hn::BitCast(di, hn::LoadU(df, job.x + first + r * stride + g)), k);
      a = hn::Max(a, hn::And(x, absmask));
      if constexpr (kPow2) {
        auto pv = hn::BitCast(df, x);
        if (k.headroom) pv = hn::Mul(pv, hn::Set(df, 0.75f));
        l = hn::Min(l, hn::BitCast(du, hn::Sub(hn::And(hn::BitCast(di, pv), absmask), hn::Set(di, 1))));
      }
    }
    hn::Store(hn::BitCast(du, a), du, amax + g);
    hn::Store(l, du, lo + g);
  }
  uint32_t finite_max = 0;
  int64_t clamped = 0;
  for (int64_t j = 0; j < cols; ++j) {
    if (amax[j] > 0x7f7fffffu) return false;  // NaN or Inf in the block
    finite_max = std::max(finite_max, amax[j]);
  }
  HWY_ALIGN int32_t xs[kMaxColumnLanes];
  HWY_ALIGN uint8_t code[kMaxColumnLanes];
  if constexpr (kPow2) {
    clamped = Pow2Scales(amax, static_cast<size_t>(cols), ctx.f->rule, ctx.lim, xs, mul, dec, thr);
    for (int64_t g = 0; g < cols; g += N)  // CastVec's scalar case
      if (!hn::AllFalse(du, hn::Lt(hn::Load(du, lo + g), hn::BitCast(du, hn::Load(di, thr + g))))) return false;
    if (job.scale_codes != nullptr)  // e8m0 (pow2 stores 2^X itself, below)
      for (int64_t j = 0; j < cols; ++j) code[j] = static_cast<uint8_t>(xs[j] + 127);
  } else {  // e4m3 scales (NVFP4): QuantizeContiguousT's, in vectors over the lanes
    E4m3Scales(amax, static_cast<size_t>(cols), k, code, mul, dec);
    for (int64_t j = 0; j < cols; ++j) {
      // A scale that underflowed to 0 under a nonzero amax: its block does not count
      // as saturated (BlockVecs::count_sat, one flag per vector): the transposing path.
      if (amax[j] != 0 && dec[j] == 0.0f) return false;
    }
  }
  // job.store_scale's two cases: e8m0 and e4m3 codes, or pow2's 2^X as a float
  if (job.scale_codes != nullptr) std::memcpy(job.scale_codes + b_first, code, static_cast<size_t>(cols));
  else std::memcpy(job.scale_values + b_first, dec, static_cast<size_t>(cols) * sizeof(float));
  // Pass 2: cast row by row under the per-lane constants, each row in the tensor's order
  // (x, codes and random words streamed; the constants are L1-resident arrays). Each
  // row's random words are drawn just before it is cast, so they stay in L1 too. The
  // constants are copied into a BlockConsts whose address never leaves this function
  // (k's went to store_scale), so they can stay in registers.
  const BlockConsts kc = k;
  const qd::BlockScale unused;
  LaneCounts lc{hn::Zero(di), hn::Zero(di), 0};
  QuantizeStats st;
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t row = first + r * stride;
    // Caller-given words (job.rnd) are read where they lie: the row's words are contiguous.
    const uint32_t* row_rnd = job.rnd != nullptr ? job.rnd + row : rnd;
    if constexpr (is_stochastic(M))
      if (job.rnd == nullptr) RandomFill(rnd, static_cast<size_t>(cols), static_cast<uint64_t>(row), k);
    for (int64_t g = 0; g < cols; g += N) {
      const BlockVecs bv{hn::Load(df, mul + g), hn::Load(df, dec + g), hn::Load(di, thr + g), true};
      VI rv = hn::Zero(di);
      if constexpr (is_stochastic(M)) rv = hn::LoadU(di, reinterpret_cast<const int32_t*>(row_rnd + g));
      // CastVec reads the scale only in the scalar case, which pass 1 excluded.
      CastVec<M, kInt, kPow2, kFast>(job, kc, row + g, static_cast<size_t>(N),
                                     hn::BitCast(di, hn::LoadU(df, job.x + row + g)), rv, bv, unused, lc, st);
    }
    CountVectors(lc, st, cols / N);
  }
  FinishCounts(lc, st, t);
  t.clamped += clamped;
  t.finite_max = std::max(t.finite_max, finite_max);
  return true;
}

template <Rounding M, bool kInt, bool kPow2, bool kFast>
void QuantizeBlocksT(const qd::BlockJob& job, int64_t b0, int64_t b1, qd::BlockTotals& t) {
  const DI di;
  {
    // Blocks of whole vectors that tile their rows: one contiguous run.
    const int64_t N = static_cast<int64_t>(hn::Lanes(di));
    if (job.last_axis && b1 - b0 > 1 && job.block_len % N == 0 &&
        job.row_len % job.block_len == 0) {
      if constexpr (kPow2) return QuantizeContiguousT<M, kInt, true, kFast>(job, b0, b1, t);
      if (job.ctx->f->scale == ScaleFormat::e4m3)
        return QuantizeContiguousT<M, kInt, false, kFast>(job, b0, b1, t);
      if (job.ctx->f->scale == ScaleFormat::fp32)
        return QuantizeContiguousFp32T<M, kInt, kFast>(job, b0, b1, t);
    }
  }
  const qd::Context& ctx = *job.ctx;
  const BlockConsts k = make_block_consts(ctx);
  const ScaleFormat sf = ctx.f->scale;
  const ScaleRule rule = ctx.f->rule;
  HWY_ALIGN uint32_t rnd[kRandWords];
  qd::Box boxes[kSubBlocks];
  qd::BlockScale scales[kSubBlocks];
  // e4m3 scales (NVFP4) are computed in vectors over the sub-group from these amaxes.
  const bool vec_scales = !kPow2 && sf == ScaleFormat::e4m3;
  constexpr size_t kPad = kSubBlocks + HWY_MAX_BYTES / 4;
  HWY_ALIGN uint32_t am[kPad] = {};
  HWY_ALIGN uint8_t sc_code[kPad];
  HWY_ALIGN float sc_enc[kPad], sc_dec[kPad];
  LaneCounts lc{hn::Zero(di), hn::Zero(di), 0};
  QuantizeStats st;
  for (int64_t bg = b0; bg < b1;) {
    // A sub-group: up to kSubBlocks blocks; along the last axis also at most kRandWords
    // elements (one random fill for all of them: consecutive blocks are contiguous).
    int64_t cnt = 0, elems = 0;
    // Along the last axis the boxes follow from (row, j) by increments: no division per
    // block (job.box() divides by per_row).
    int64_t row_i = 0, j = 0;
    if (job.last_axis) {
      row_i = bg / job.per_row;
      j = bg % job.per_row;
    }
    while (bg + cnt < b1 && cnt < kSubBlocks) {
      qd::Box bx;
      if (job.last_axis) {
        bx.base = row_i * job.row_len + j * job.block_len;
        bx.cols = std::min(job.block_len, job.row_len - j * job.block_len);
        if (++j == job.per_row) {
          j = 0;
          ++row_i;
        }
      } else {
        bx = job.box(bg + cnt);
      }
      if (cnt > 0 && elems + bx.size() > static_cast<int64_t>(kRandWords)) break;
      boxes[cnt++] = bx;
      elems += bx.size();
    }
    // Pass 1: amax and scale per block (e4m3 scales: amax here, the scales below).
    for (int64_t g = 0; g < cnt; ++g) {
      const int64_t b = bg + g;
      const qd::Box& box = boxes[g];
      qd::Amax a;
      VI vall = hn::Zero(di), unused = hn::Zero(di);
      for (int64_t r = 0; r < box.rows; ++r)
        RunAmax<false>(job.x + box.base + r * box.row_stride, static_cast<size_t>(box.cols), k,
                       vall, unused);
      a.all = a.finite = MaxLane(vall);
      if (a.nonfinite()) a = qd::block_amax(job.x, box, ctx.opt);
      t.finite_max = std::max(t.finite_max, a.finite);
      if (vec_scales && !a.nonfinite()) {
        am[g] = a.all;
        scales[g].nan = false;
        continue;
      }
      am[g] = 0;
      // Written in place (Pow2Scale: no BlockScale copied whole).
      qd::BlockScale& s = scales[g];
      if (kPow2 && !a.nonfinite()) {
        Pow2Scale(a.all, rule, ctx.lim, s);
      } else {
        s = qd::block_scale(a, ctx);
      }
      if (s.clamped) ++t.clamped;
      job.store_scale(b, s);
    }
    if (vec_scales) {
      E4m3Scales(am, static_cast<size_t>(cnt), k, sc_code, sc_enc, sc_dec);
      for (int64_t g = 0; g < cnt; ++g) {
        qd::BlockScale& s = scales[g];
        if (s.nan) continue;  // a NaN/Inf block: its scalar scale is stored above
        s.exponent = 0;
        s.code = sc_code[g];
        s.dec = sc_dec[g];
        s.enc = sc_enc[g];
        s.clamped = am[g] != 0 && s.dec == 0.0f;
        if (s.clamped) ++t.clamped;
        job.scale_codes[bg + g] = s.code;
      }
    }
    // Pass 2: cast (and dequantize).
    const bool group_rnd = is_stochastic(M) && job.last_axis &&
                           elems <= static_cast<int64_t>(kRandWords);
    if (group_rnd)
      JobRandom(job, rnd, static_cast<size_t>(elems), static_cast<uint64_t>(boxes[0].base), k);
    // Along the last axis the next sub-group's input follows this one: prefetch it while
    // this one is cast (pass 1 otherwise waits on memory at every sub-group).
    const float* next = job.x + boxes[cnt - 1].base + boxes[cnt - 1].cols;
    const int64_t next_lines = job.last_axis && bg + cnt < b1 ? (elems + 15) / 16 : 0;
    const int64_t lines_per_block = cnt > 0 ? (next_lines + cnt - 1) / cnt : 0;
    for (int64_t g = 0; g < cnt; ++g) {
      for (int64_t l = g * lines_per_block; l < std::min(next_lines, (g + 1) * lines_per_block);
           ++l)
        hwy::Prefetch(next + l * 16);
      const qd::Box& box = boxes[g];
      const qd::BlockScale& s = scales[g];
      if (s.nan) {
        qd::reference_cast(job, box, s, st);
        continue;
      }
      const float mul = kPow2 ? pow2f(-s.exponent) : s.enc;
      const float dec = qd::stored_dec(s, sf);
      if (group_rnd) {
        CastRun<M, kInt, kPow2, kFast>(job, k, box.base, static_cast<size_t>(box.cols), s, mul, dec,
                                rnd + (box.base - boxes[0].base), lc, st);
        continue;
      }
      for (int64_t r = 0; r < box.rows; ++r) {
        const int64_t row = box.base + r * box.row_stride;
        for (int64_t c = 0; c < box.cols; c += static_cast<int64_t>(kRandWords)) {
          const size_t n = static_cast<size_t>(std::min<int64_t>(kRandWords, box.cols - c));
          if constexpr (is_stochastic(M))
            JobRandom(job, rnd, n, static_cast<uint64_t>(row + c), k);
          CastRun<M, kInt, kPow2, kFast>(job, k, row + c, n, s, mul, dec, rnd, lc, st);
        }
      }
    }
    bg += cnt;
  }
  FinishCounts(lc, st, t);
}

// out[r * cols + c] = random_bits(seed, stream, first + r * stride + c): the words of a
// rows x cols tile of a row-major tensor.
void RandomRows(const qd::BlockJob* job, uint32_t* out, int64_t rows, int64_t cols,
                uint64_t first, int64_t stride) {
  const BlockConsts k = make_block_consts(*job->ctx);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; c += static_cast<int64_t>(kRandWords)) {
      const size_t n = static_cast<size_t>(std::min<int64_t>(kRandWords, cols - c));
      RandomFill(out + r * cols + c, n, first + static_cast<uint64_t>(r * stride + c), k);
    }
  }
}

// out[i] = random_bits(seed, stream, first + i) for i < n (lpx::random_words).
void RandomWords(uint64_t seed, uint32_t stream, uint64_t first, uint32_t* out, size_t n) {
  BlockConsts k;
  k.co.seed = seed;
  k.co.stream = stream;
  k.pc = detail::make_philox_consts(seed);
  for (size_t i = 0; i < n; i += kRandWords)
    RandomFill(out + i, std::min(kRandWords, n - i), first + i, k);
}

// The Amax of the flat run [i0, i0 + n) (pass 1 of per-tensor and two-level scaling),
// lane-wise over all and over finite |x'|.
void RangeAmax(const qd::BlockJob* job, int64_t i0, int64_t n, qd::Amax* out) {
  const DI di;
  const BlockConsts k = make_block_consts(*job->ctx);
  VI vall = hn::Zero(di), vfin = hn::Zero(di);
  RunAmax<true>(job->x + i0, static_cast<size_t>(n), k, vall, vfin);
  out->all = MaxLane(vall);
  out->finite = MaxLane(vfin);
}

// One scale for a flat run of elements (per-tensor blocks, cut into work units): CastRun
// over pieces of kRandWords elements (one random fill each under sr).
template <Rounding M, bool kInt, bool kPow2, bool kFast>
void QuantizeRangeT(const qd::BlockJob& job, int64_t i0, int64_t n, const qd::BlockScale& s,
                    qd::BlockTotals& t) {
  const DI di;
  QuantizeStats st;
  if (s.nan) {
    qd::scalar_run(job, i0, n, s, st);
  } else {
    const BlockConsts k = make_block_consts(*job.ctx);
    const float mul = kPow2 ? pow2f(-s.exponent) : s.enc;
    const float dec = qd::stored_dec(s, job.ctx->f->scale);
    HWY_ALIGN uint32_t rnd[kRandWords];
    LaneCounts lc{hn::Zero(di), hn::Zero(di), 0};
    for (int64_t c = 0; c < n; c += static_cast<int64_t>(kRandWords)) {
      const size_t m = static_cast<size_t>(std::min<int64_t>(kRandWords, n - c));
      if constexpr (is_stochastic(M)) JobRandom(job, rnd, m, static_cast<uint64_t>(i0 + c), k);
      CastRun<M, kInt, kPow2, kFast>(job, k, i0 + c, m, s, mul, dec, rnd, lc, st);
    }
    FlushCounts(lc, st);
  }
  t.add(st);
}

// Calls fn.template operator()<kInt, kPow2, kFast>() for the element format and scale of
// ctx under rounding M: the short vector codec where fast_path_ok, else the general one.
template <Rounding M, class Fn>
HWY_INLINE void WithKernel(const qd::Context& ctx, Fn&& fn) {
  const bool is_int = ctx.f->element.is_integer;
  const bool pow2 = ctx.f->power_of_two_scale();
  if constexpr (M == Rounding::rne || M == Rounding::rtz || M == Rounding::sr) {
    if (detail::fast_path_ok(ctx.f->element, qd::element_cast_options(ctx.opt))) {
      return pow2 ? fn.template operator()<false, true, true>()
                  : fn.template operator()<false, false, true>();
    }
  }
  if (is_int) {
    return pow2 ? fn.template operator()<true, true, false>()
                : fn.template operator()<true, false, false>();
  }
  return pow2 ? fn.template operator()<false, true, false>()
              : fn.template operator()<false, false, false>();
}

// Calls fn.template operator()<M>() for the rounding mode of ctx.
template <class Fn>
HWY_INLINE void WithRounding(const qd::Context& ctx, Fn&& fn) {
  switch (ctx.opt.round) {
    case Rounding::rne: return fn.template operator()<Rounding::rne>();
    case Rounding::rna: return fn.template operator()<Rounding::rna>();
    case Rounding::rtz: return fn.template operator()<Rounding::rtz>();
    case Rounding::rup: return fn.template operator()<Rounding::rup>();
    case Rounding::rdn: return fn.template operator()<Rounding::rdn>();
    case Rounding::sr: return fn.template operator()<Rounding::sr>();
    case Rounding::rto: return fn.template operator()<Rounding::rto>();
    case Rounding::sr_fast: return fn.template operator()<Rounding::sr_fast>();
    case Rounding::sr_rne: return fn.template operator()<Rounding::sr_rne>();
    case Rounding::sr_odd: return fn.template operator()<Rounding::sr_odd>();
  }
  HWY_ABORT("lpx: rounding mode %d has no vector loop", static_cast<int>(ctx.opt.round));
}

void QuantizeBlocks(const qd::BlockJob* job, int64_t b0, int64_t b1, qd::BlockTotals* t) {
  WithRounding(*job->ctx, [&]<Rounding M>() {
    WithKernel<M>(*job->ctx, [&]<bool kInt, bool kPow2, bool kFast>() {
      QuantizeBlocksT<M, kInt, kPow2, kFast>(*job, b0, b1, *t);
    });
  });
}

void QuantizeRange(const qd::BlockJob* job, int64_t i0, int64_t n, const qd::BlockScale* s,
                   qd::BlockTotals* t) {
  WithRounding(*job->ctx, [&]<Rounding M>() {
    WithKernel<M>(*job->ctx, [&]<bool kInt, bool kPow2, bool kFast>() {
      QuantizeRangeT<M, kInt, kPow2, kFast>(*job, i0, n, *s, *t);
    });
  });
}

void QuantizeColumns(const qd::BlockJob* job, int64_t first, int64_t rows, int64_t cols, int64_t stride,
                     int64_t b_first, uint32_t* rnd, qd::BlockTotals* t, bool* done) {
  WithRounding(*job->ctx, [&]<Rounding M>() {
    WithKernel<M>(*job->ctx, [&]<bool kInt, bool kPow2, bool kFast>() {
      *done = QuantizeColumnsT<M, kInt, kPow2, kFast>(*job, first, rows, cols, stride, b_first, rnd, *t);
    });
  });
}

// Decodes the n codes at `in` into `out`, times decs[c] (per element) or, when decs is
// null, dec; then the tensor scale and the 3/4 headroom as the job says (dequant_value).
HWY_INLINE void DequantizeRun(const qd::BlockJob& job, const detail::DecodeConsts& dc,
                              const uint8_t* HWY_RESTRICT in, float* HWY_RESTRICT out, size_t n,
                              const float* HWY_RESTRICT decs, float dec) {
  const DI di;
  const DF df;
  const hn::Rebind<uint8_t, DI> d8;
  const size_t N = hn::Lanes(di);
  for (size_t c = 0; c < n; c += N) {
    const size_t cnt = std::min(N, n - c);
    HWY_ALIGN uint8_t tc[HWY_MAX_BYTES / 4] = {};
    HWY_ALIGN float td[HWY_MAX_BYTES / 4] = {};
    if (cnt < N) {
      std::memcpy(tc, in + c, cnt);
      if (decs != nullptr) std::memcpy(td, decs + c, cnt * sizeof(float));
    }
    const VI code = hn::PromoteTo(di, cnt == N ? hn::LoadU(d8, in + c) : hn::Load(d8, tc));
    const auto d = decs == nullptr ? hn::Set(df, dec)
                                   : (cnt == N ? hn::LoadU(df, decs + c) : hn::Load(df, td));
    auto v = hn::Mul(DecodeVec(code, dc), d);
    if (job.two_level) v = hn::Mul(v, hn::Set(df, job.tensor_dec));
    if (job.headroom) v = hn::Div(v, hn::Set(df, 0.75f));
    if (cnt == N) {
      hn::StoreU(v, df, out + c);
    } else {
      HWY_ALIGN float tv[HWY_MAX_BYTES / 4];
      hn::Store(v, df, tv);
      std::memcpy(out + c, tv, cnt * sizeof(float));
    }
  }
}

void DequantizeBlocks(const qd::BlockJob* job, int64_t b0, int64_t b1) {
  const detail::DecodeConsts dc = detail::make_decode_consts(job->element);
  for (int64_t b = b0; b < b1; ++b) {
    const qd::Box box = job->box(b);
    const float dec = job->dec_of(b);
    for (int64_t r = 0; r < box.rows; ++r) {
      const int64_t row = box.base + r * box.row_stride;
      DequantizeRun(*job, dc, job->codes + row, job->out + row, static_cast<size_t>(box.cols),
                    nullptr, dec);
    }
  }
}

// dequantize() of the rows x cols run from flat index i0 (row-major, contiguous): element
// (r, c) is decoded and multiplied by decs[c] (strided blocks: one block row's
// scales), or by dec when decs is null (per-tensor scales).
void DequantizeRows(const qd::BlockJob* job, int64_t i0, int64_t rows, int64_t cols,
                    const float* decs, float dec) {
  const detail::DecodeConsts dc = detail::make_decode_consts(job->element);
  for (int64_t r = 0; r < rows; ++r)
    DequantizeRun(*job, dc, job->codes + i0 + r * cols, job->out + i0 + r * cols,
                  static_cast<size_t>(cols), decs, dec);
}

#else  // HWY_SCALAR: one lane; the scalar reference does the work.

void QuantizeBlocks(const qd::BlockJob* job, int64_t b0, int64_t b1, qd::BlockTotals* t) {
  qd::reference_blocks(*job, b0, b1, *t);
}

void RandomRows(const qd::BlockJob* job, uint32_t* out, int64_t rows, int64_t cols,
                uint64_t first, int64_t stride) {
  const QuantizeOptions& o = job->ctx->opt;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c)
      out[r * cols + c] =
          random_bits(o.seed, o.stream, o.index_offset + first + static_cast<uint64_t>(r * stride + c));
}

void RandomWords(uint64_t seed, uint32_t stream, uint64_t first, uint32_t* out, size_t n) {
  for (size_t i = 0; i < n; ++i) out[i] = random_bits(seed, stream, first + i);
}

void QuantizeColumns(const qd::BlockJob*, int64_t, int64_t, int64_t, int64_t, int64_t, uint32_t*,
                     qd::BlockTotals*, bool* done) {
  *done = false;  // the transposing path and the scalar reference do the work
}

void RangeAmax(const qd::BlockJob* job, int64_t i0, int64_t n, qd::Amax* out) {
  qd::Box box;
  box.base = i0;
  box.cols = n;
  *out = qd::block_amax(job->x, box, job->ctx->opt);
}

void QuantizeRange(const qd::BlockJob* job, int64_t i0, int64_t n, const qd::BlockScale* s,
                   qd::BlockTotals* t) {
  QuantizeStats st;
  qd::scalar_run(*job, i0, n, *s, st);
  t->add(st);
}

void DequantizeBlocks(const qd::BlockJob* job, int64_t b0, int64_t b1) {
  for (int64_t b = b0; b < b1; ++b) qd::reference_dequantize(*job, job->box(b), job->dec_of(b));
}

void DequantizeRows(const qd::BlockJob* job, int64_t i0, int64_t rows, int64_t cols,
                    const float* decs, float dec) {
  qd::Box box;
  box.base = i0;
  box.rows = rows;
  box.row_stride = cols;
  box.cols = cols;
  if (decs == nullptr) return qd::reference_dequantize(*job, box, dec);
  box.cols = 1;  // per-column scales: column c is `rows` elements `cols` apart
  for (int64_t c = 0; c < cols; ++c, ++box.base) qd::reference_dequantize(*job, box, decs[c]);
}

#endif  // HWY_TARGET != HWY_SCALAR

}  // namespace HWY_NAMESPACE
}  // namespace simd
}  // namespace lpx
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace lpx::simd {

HWY_EXPORT(QuantizeBlocks);
HWY_EXPORT(RangeAmax);
HWY_EXPORT(RandomRows);
HWY_EXPORT(RandomWords);
HWY_EXPORT(QuantizeColumns);
HWY_EXPORT(QuantizeRange);
HWY_EXPORT(DequantizeBlocks);
HWY_EXPORT(DequantizeRows);

}  // namespace lpx::simd

namespace lpx::quantize_detail {

// HWY_DYNAMIC_DISPATCH(F) names F relative to the calling namespace: a dispatch table
// F...DispatchTable with several targets, but N_<TARGET>::F when only one target is
// compiled (HWY_COMPILE_ONLY_STATIC, _EMU128, _SCALAR, or a -march baseline that leaves
// one), where "simd::F" would become N_<TARGET>::simd::F, which does not exist. The
// using-directive lets the unqualified names resolve to lpx::simd's in both cases.
using namespace lpx::simd;

void simd_quantize_blocks(const BlockJob& job, int64_t b0, int64_t b1, BlockTotals& t) {
  HWY_DYNAMIC_DISPATCH(QuantizeBlocks)(&job, b0, b1, &t);
}
void simd_random_rows(const BlockJob& job, uint32_t* out, int64_t rows, int64_t cols,
                      uint64_t first, int64_t stride) {
  if (job.rnd != nullptr) {  // caller-given words: the tile's rows of them
    for (int64_t r = 0; r < rows; ++r)
      std::memcpy(out + r * cols, job.rnd + first + static_cast<uint64_t>(r * stride),
                  static_cast<size_t>(cols) * sizeof(uint32_t));
    return;
  }
  HWY_DYNAMIC_DISPATCH(RandomRows)(&job, out, rows, cols, first, stride);
}
namespace {
std::atomic<int64_t> column_tiles{0};  // one relaxed add per tile of 32 x up to 256 elements
}  // namespace

bool simd_quantize_columns(const BlockJob& job, int64_t first, int64_t rows, int64_t cols, int64_t stride,
                           int64_t b_first, uint32_t* rnd, BlockTotals& t) {
  bool done = false;
  HWY_DYNAMIC_DISPATCH(QuantizeColumns)(&job, first, rows, cols, stride, b_first, rnd, &t, &done);
  if (done) column_tiles.fetch_add(1, std::memory_order_relaxed);
  return done;
}
int64_t column_kernel_tiles() { return column_tiles.load(std::memory_order_relaxed); }
Amax simd_range_amax(const BlockJob& job, int64_t i0, int64_t n) {
  Amax a;
  HWY_DYNAMIC_DISPATCH(RangeAmax)(&job, i0, n, &a);
  return a;
}
void simd_quantize_range(const BlockJob& job, int64_t i0, int64_t n, const BlockScale& s,
                         BlockTotals& t) {
  HWY_DYNAMIC_DISPATCH(QuantizeRange)(&job, i0, n, &s, &t);
}
void simd_dequantize_rows(const BlockJob& job, int64_t i0, int64_t rows, int64_t cols,
                          const float* decs, float dec) {
  HWY_DYNAMIC_DISPATCH(DequantizeRows)(&job, i0, rows, cols, decs, dec);
}
void simd_dequantize_blocks(const BlockJob& job, int64_t b0, int64_t b1) {
  HWY_DYNAMIC_DISPATCH(DequantizeBlocks)(&job, b0, b1);
}

}  // namespace lpx::quantize_detail

namespace lpx {
void random_words(uint64_t seed, uint32_t stream, uint64_t first, std::span<uint32_t> out) {
  using namespace lpx::simd;  // HWY_DYNAMIC_DISPATCH's names, as above
  HWY_DYNAMIC_DISPATCH(RandomWords)(seed, stream, first, out.data(), out.size());
}
}  // namespace lpx
#endif  // HWY_ONCE
