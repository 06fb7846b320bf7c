// `lpx validate [--require-gpu] [--elements N] [--bench]`: every CUDA kernel against the
// CPU emulator, bit for bit (codes, scales and values compared as bits, never with a
// tolerance): element encode / fake-cast for every named format x rounding x overflow,
// decode of every code, block quantize / dequantize / fused fake_quantize (MX rows and
// columns under every scale rule, NVFP4 1x16 and 16x16, 1x128 / 128x128 fp32, ragged
// shapes, per-tensor FP8, SR with the 3/4 headroom and the subnormal flush) and quantize_both (both GEMM
// layouts in one read, against lpx::quantize of x and of its transpose) against lpx::quantize /
// dequantize / fake_quantize_values (a dequantized NaN equals any NaN: its payload is the
// executor's), the Hadamard transform against its CPU reference, and the emulator against
// the hardware's own cvt instructions where the device has them (FP8 on sm_89+; FP6, FP4,
// UE8M0 and the cvt.rs stochastic forms on sm_100a: kernels/hw_cvt.hpp). Inputs mix normal,
// heavy-tailed, subnormal, NaN/Inf, zero and exact-tie values. Prints one row per
// (kernel, format, mode). GEMMs over quantized operands (kernels::gemm_host, whichever path
// the device takes) are checked against dequantize-then-double on the CPU with an error
// bound, since accumulation order differs; float32 GEMMs in the exact and limited orders
// (kernels::gemm_f32_device) against sim's CPU gemm bit for bit, and cuBLASLt's float32
// GEMM against double with the worst-case bound of any order. Exits 1 on any mismatch. Without a device it
// validates nothing and says so (exit 0; 1 with --require-gpu). --bench also prints the
// GPU benchmarks (kernels/bench.hpp).
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "command.hpp"
#include "lpx/formats/codec.hpp"
#include "lpx/formats/quantize.hpp"
#include "lpx/kernels/bench.hpp"
#include "lpx/kernels/cast.hpp"
#include "lpx/kernels/device.hpp"
#include "lpx/kernels/gemm.hpp"
#include "lpx/kernels/hadamard.hpp"
#include "lpx/kernels/hw_cvt.hpp"
#include "lpx/kernels/quantize.hpp"
#include "lpx/kernels/memory.hpp"
#include "lpx/numerics/ordered_sum.hpp"
#include "lpx/numerics/philox.hpp"
#include "lpx/sim/gemm.hpp"

namespace lpx::cli {
namespace {

constexpr size_t kChunk = size_t{1} << 24;

// The input battery: element i of a chunk starting at `first`, for a format whose largest
// finite value is `top`. Categories by i % 8: 0-1 normal-ish, 2 heavy-tailed, 3 format
// subnormals and float32 subnormals, 4 specials (NaN, +-Inf, +-0, +-max), 5 exact ties
// between neighbouring codes, 6-7 random float32 bit patterns near the format's range.
float battery_value(uint64_t i, float top, const ElementFormat& f) {
  const Philox4x32 r = random_block(0x5eedull, 77, i);
  const float u = static_cast<float>(r.v[0] >> 8) * 0x1p-24f;          // [0, 1)
  const float sgn = (r.v[1] & 1) ? -1.0f : 1.0f;
  switch (i % 8) {
    case 0:
    case 1: {
      const float g = (u + static_cast<float>(r.v[2] >> 8) * 0x1p-24f - 1.0f) * 2.0f;
      return g * top * 0.5f;
    }
    case 2: return sgn * top * 0.01f * u / (1.0f - u + 1e-7f);
    case 3: {
      if (r.v[2] & 1) return bits_to_float((r.v[3] & 0x7fffffu) | (r.v[1] & 0x80000000u));
      const float sub = static_cast<float>(min_subnormal(f));
      return sgn * sub * static_cast<float>(r.v[3] % 64) * 0.25f;
    }
    case 4: {
      const float specials[] = {std::numeric_limits<float>::quiet_NaN(),
                                std::numeric_limits<float>::infinity(), 0.0f, top, top * 1.0625f};
      return sgn * specials[r.v[2] % 5];
    }
    case 5: {  // midpoint of two neighbouring codes (a tie for the nearest modes)
      const uint32_t c = r.v[2] & f.code_mask;
      const float a = decode(c, f), b = decode((c + 1) & f.code_mask, f);
      const float m = a * 0.5f + b * 0.5f;
      return std::isfinite(m) ? m : a;
    }
    default: {
      const int e = static_cast<int>(r.v[2] % 40) - 30 + static_cast<int>(std::ilogb(top));
      return sgn * std::ldexp(1.0f + u, e);
    }
  }
}

void fill(std::vector<float>& x, uint64_t first, const ElementFormat& f) {
  const float top = static_cast<float>(std::min(max_finite(f), 3.0e38));
  const int64_t n = static_cast<int64_t>(x.size());
#pragma omp parallel for
  for (int64_t i = 0; i < n; ++i)
    x[static_cast<size_t>(i)] = battery_value(first + static_cast<uint64_t>(i), top, f);
}

struct Row {
  std::string kernel, format, mode;
  uint64_t elements = 0, mismatches = 0;
};

uint64_t count_bits_differ(const std::vector<float>& a, const std::vector<float>& b) {
  uint64_t bad = 0;
  for (size_t i = 0; i < a.size(); ++i) bad += float_to_bits(a[i]) != float_to_bits(b[i]);
  return bad;
}

Row validate_cast(const ElementFormat& f, Rounding r, Overflow ov, uint64_t elements) {
  Row row{"encode+fake_cast", f.name, fmt::format("{}/{}", rounding_name(r), ov == Overflow::sat ? "sat" : "ieee")};
  CastOptions o;
  o.round = r;
  o.overflow = ov;
  o.seed = 0x0123456789abcdefull;
  o.stream = 5;
  o.sr_bits = r == Rounding::sr ? 23 : kMaxSrBits;
  for (uint64_t done = 0; done < elements;) {
    const size_t n = static_cast<size_t>(std::min<uint64_t>(kChunk, elements - done));
    std::vector<float> x(n), fake(n);
    fill(x, done, f);
    o.index_offset = done + 3;  // a misaligned offset: the two-Philox-block path
    std::vector<uint32_t> cpu(n);
#pragma omp parallel for
    for (int64_t i = 0; i < static_cast<int64_t>(n); ++i) {
      const uint64_t k = static_cast<uint64_t>(i);
      cpu[k] = encode(x[k], f, r, ov, random_bits(o.seed, o.stream, o.index_offset + k), o.sr_bits);
    }
    uint64_t bad = 0;
    if (f.bits <= 8) {
      std::vector<uint8_t> dev(n);
      kernels::encode_host(x, dev, f, o);
      for (size_t i = 0; i < n; ++i) bad += dev[i] != cpu[i];
    } else {
      std::vector<uint16_t> dev(n);
      kernels::encode_host(x, dev, f, o);
      for (size_t i = 0; i < n; ++i) bad += dev[i] != cpu[i];
    }
    kernels::fake_cast_host(x, fake, f, o);
    for (size_t i = 0; i < n; ++i) bad += float_to_bits(fake[i]) != float_to_bits(decode(cpu[i], f));
    row.mismatches += bad;
    row.elements += n;
    done += n;
  }
  return row;
}

Row validate_decode(const ElementFormat& f) {
  Row row{"decode", f.name, "every code"};
  const size_t n = size_t{f.code_mask} + 1;
  std::vector<float> dev(n), cpu(n);
  for (size_t i = 0; i < n; ++i) cpu[i] = decode(static_cast<uint32_t>(i), f);
  if (f.bits <= 8) {
    std::vector<uint8_t> c(n);
    for (size_t i = 0; i < n; ++i) c[i] = static_cast<uint8_t>(i);
    kernels::decode_host(c, dev, f);
  } else {
    std::vector<uint16_t> c(n);
    for (size_t i = 0; i < n; ++i) c[i] = static_cast<uint16_t>(i);
    kernels::decode_host(c, dev, f);
  }
  row.elements = n;
  row.mismatches = count_bits_differ(dev, cpu);
  return row;
}

// NaN values compare equal to any NaN: a dequantized NaN's payload is the executor's
// (kernels/quantize.hpp); every other value, and every code and scale, bit for bit.
uint64_t count_values_differ(const std::vector<float>& a, const std::vector<float>& b) {
  uint64_t bad = 0;
  for (size_t i = 0; i < a.size(); ++i)
    bad += float_to_bits(a[i]) != float_to_bits(b[i]) && !(std::isnan(a[i]) && std::isnan(b[i]));
  return bad;
}

uint64_t count_scales_differ(const QuantizedTensor& cpu, const QuantizedTensor& dev) {
  uint64_t bad = 0;
  for (size_t i = 0; i < cpu.scale_codes.size(); ++i) bad += cpu.scale_codes[i] != dev.scale_codes[i];
  for (size_t i = 0; i < cpu.scale_values.size(); ++i)
    bad += float_to_bits(cpu.scale_values[i]) != float_to_bits(dev.scale_values[i]);
  if (cpu.tensor_scale)
    bad += float_to_bits(*cpu.tensor_scale) != float_to_bits(dev.tensor_scale.value_or(0.0f));
  return bad;
}

// Block quantization, dequantization and fused fake quantization of one format against
// lpx::quantize / dequantize / fake_quantize_values: three rows.
std::vector<Row> validate_block(const std::string& spec, int axis, Rounding r, bool headroom,
                                uint64_t elements) {
  BlockFormat f = parse_block_format(spec);
  f.block.axis = axis;
  const std::string name = spec + (axis == 0 ? " (columns)" : "");
  const std::string mode = std::string(rounding_name(r)) + (headroom ? " 3/4+flush" : "");
  Row quant{"quantize", name, mode}, deq{"dequantize", name, mode}, fake{"fake_quantize", name, mode};
  QuantizeOptions o;
  o.round = r;
  o.seed = 99;
  o.stream = 1;
  o.headroom_3_4 = headroom;
  o.flush_subnormal_inputs = headroom;
  const int64_t cols = 1000 + 37;  // ragged for every block size
  for (uint64_t done = 0; done < elements;) {
    const int64_t rows = std::max<int64_t>(1, static_cast<int64_t>(std::min<uint64_t>(kChunk, elements - done)) / cols);
    const std::vector<int64_t> shape{rows + 3, cols};  // +3: ragged rows too
    std::vector<float> x(static_cast<size_t>(shape[0] * shape[1]));
    fill(x, done, f.element);
    for (size_t i = 0; i < static_cast<size_t>(cols) && i < x.size(); ++i) x[i] = 0.0f;  // zero blocks
    const QuantizedTensor cpu = quantize({x, shape}, f, o);
    const QuantizedTensor dev = kernels::quantize_host(x, shape, f, o);
    uint64_t bad = count_scales_differ(cpu, dev);
    for (size_t i = 0; i < x.size(); ++i) bad += cpu.codes[i] != dev.codes[i];
    quant.mismatches += bad;
    std::vector<float> want(x.size()), got(x.size());
    dequantize(cpu, want);
    kernels::dequantize_host(cpu, got);
    deq.mismatches += count_values_differ(want, got);
    const QuantizedTensor cpu_fq = fake_quantize_values({x, shape}, want, f, o);
    const QuantizedTensor dev_fq = kernels::fake_quantize_host(x, shape, got, f, o);
    fake.mismatches += count_values_differ(want, got) + count_scales_differ(cpu_fq, dev_fq);
    quant.elements += x.size();
    deq.elements += x.size();
    fake.elements += x.size();
    done += x.size();
  }
  return {quant, deq, fake};
}

// Both layouts in one read (kernels::quantize_both_host) against lpx::quantize of x and
// of its transpose, built here element by element: codes and scales of both, bit for bit.
// The two layouts draw SR bits from different streams, as a recipe's roles do.
Row validate_both(const std::string& spec, Rounding r, uint64_t elements) {
  const BlockFormat f = parse_block_format(spec);
  Row row{"quantize_both", spec + " (rows+cols)", std::string(rounding_name(r))};
  QuantizeOptions orow, ocol;
  orow.round = ocol.round = r;
  orow.seed = ocol.seed = 99;
  orow.stream = 1;
  ocol.stream = 2;
  const int64_t cols = 1000 + 37;  // ragged for every block size, both ways
  for (uint64_t done = 0; done < elements;) {
    const int64_t rows = 3 + std::max<int64_t>(1, static_cast<int64_t>(std::min<uint64_t>(kChunk, elements - done)) / cols);
    std::vector<float> x(static_cast<size_t>(rows * cols)), xt(x.size());
    fill(x, done, f.element);
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < cols; ++j)
        xt[static_cast<size_t>(j * rows + i)] = x[static_cast<size_t>(i * cols + j)];
    const std::vector<int64_t> shape{rows, cols}, shape_t{cols, rows};
    const QuantizedTensor want_r = quantize({x, shape}, f, orow), want_c = quantize({xt, shape_t}, f, ocol);
    const kernels::QuantizedPair got = kernels::quantize_both_host(x, rows, cols, f, orow, f, ocol);
    uint64_t bad = count_scales_differ(want_r, got.rows) + count_scales_differ(want_c, got.cols);
    for (size_t i = 0; i < x.size(); ++i)
      bad += (want_r.codes[i] != got.rows.codes[i]) + (want_c.codes[i] != got.cols.codes[i]);
    row.mismatches += bad;
    row.elements += x.size();
    done += x.size();
  }
  return row;
}

Row validate_hadamard(int n, uint64_t elements) {
  Row row{"hadamard", fmt::format("size {}", n), "philox signs"};
  const size_t total = std::max<size_t>(static_cast<size_t>(n), static_cast<size_t>(elements) / static_cast<size_t>(n) * static_cast<size_t>(n));
  std::vector<float> x(total), cpu(total), dev(total);
  fill(x, 0, fmt16::bf16);
  for (float& v : x) v = std::isfinite(v) ? v : 1.0f;
  const auto s = kernels::hadamard_signs(n, 17, 2);
  kernels::hadamard_cpu(x, cpu, n, s);
  kernels::hadamard_host(x, dev, n, {}, 17, 2);
  row.elements = total;
  row.mismatches = count_bits_differ(cpu, dev);
  return row;
}

// GEMM over quantized operands (kernels::gemm_host, whichever path the device takes)
// against the CPU: both operands dequantized by lpx::dequantize, the product in double.
// Accumulation order differs, so this is a tolerance check: err = |y - ref| / sum_k |x w|
// per output; an output beyond `bound` counts as a mismatch. The bound is 2^-10 where the
// operands reach the GEMM exactly (block-scaled paths; BF16 fallback of MX / NVFP4 /
// power-of-two formats) and 2^-7 where the fallback rounds fp32-scaled values to BF16.
struct GemmRow {
  Row row;
  double max_err = 0, bound = 0;
};

// Float32 GEMMs in a fixed order (kernels::gemm_f32_device with GemmOrder::exact, or
// limited accumulation) against sim's CPU gemm in that order, bit for bit, in all four
// stored layouts, accumulating and not; m, n, k ragged against the kernel's tiles. The
// operands are the battery's values (NaN and Inf included: the order fixes them too).
std::vector<float> device_gemm_f32(bool at, bool bt, const std::vector<float>& a, const std::vector<float>& b,
                                   const std::vector<float>& c0, int64_t m, int64_t n, int64_t k, LimitedSum acc,
                                   bool accumulate, GemmOrder order) {
  kernels::DeviceBuffer da(a.size() * 4), db(b.size() * 4), dc(c0.size() * 4);
  kernels::copy_to_device(da.get(), a.data(), a.size() * 4);
  kernels::copy_to_device(db.get(), b.data(), b.size() * 4);
  kernels::copy_to_device(dc.get(), c0.data(), c0.size() * 4);
  kernels::gemm_f32_device(at, bt, da.get<float>(), db.get<float>(), dc.get<float>(), m, n, k, acc, accumulate, order);
  std::vector<float> out(c0.size());
  kernels::copy_to_host(out.data(), dc.get(), out.size() * 4);
  return out;
}

Row validate_ordered_gemm(const Accumulation& acc, const std::string& label) {
  const int64_t m = 517, n = 389, k = 300;
  std::vector<float> a(static_cast<size_t>(m * k)), b(static_cast<size_t>(k * n)), c0(static_cast<size_t>(m * n));
  // operands of a few binades (products not exact in float32, so the order shows) with
  // the battery's specials at a sparse stride
  auto value = [](uint64_t seed, uint64_t i) {
    const Philox4x32 r = random_block(seed, 91, i);
    if (i % 4099 == 7) return battery_value(i * 8 + 4, 448.0f, fmt8::e4m3fn);  // NaN, Inf, 0, max
    return (static_cast<float>(r.v[0] >> 8) * 0x1p-23f - 1.0f) * std::ldexp(1.0f, static_cast<int>(r.v[1] % 9) - 4);
  };
  for (size_t i = 0; i < a.size(); ++i) a[i] = value(1, i);
  for (size_t i = 0; i < b.size(); ++i) b[i] = value(2, i);
  for (size_t i = 0; i < c0.size(); ++i) c0[i] = value(3, i);
  Row row{"gemm_f32", fmt::format("{}x{}x{} (4 layouts, +=)", m, n, k), label};
  const LimitedSum sum{acc.is_fp32() ? 23 : acc.mantissa_bits, acc.promote_every};
  for (bool at : {false, true})
    for (bool bt : {false, true})
      for (bool accumulate : {false, true}) {
        std::vector<float> want = c0;
        sim::gemm(at ? sim::Trans::t : sim::Trans::n, bt ? sim::Trans::t : sim::Trans::n, a.data(), b.data(),
                  want.data(), m, n, k, acc, accumulate, GemmOrder::exact);
        const std::vector<float> got = device_gemm_f32(at, bt, a, b, c0, m, n, k, sum, accumulate, GemmOrder::exact);
        // NaN equals NaN (the payload is the executor's); everything else as bits
        for (size_t i = 0; i < got.size(); ++i)
          row.mismatches += !(std::isnan(got[i]) && std::isnan(want[i])) && float_to_bits(got[i]) != float_to_bits(want[i]);
        row.elements += got.size();
      }
  return row;
}

// cuBLASLt's float32 GEMM (GemmOrder::fast) against a double-precision product, in all
// four stored layouts (the transposes are what the fast path maps onto TRANSA/TRANSB),
// accumulating and not, with the worst-case bound of a float32 sum in any order:
// (k + 2) 2^-24 of sum_k |a b| + |c| (the products, the sum, and the add into c).
struct FastGemmError {
  Row row;
  double max_err = 0, bound = 0;
};
FastGemmError validate_fast_gemm() {
  const int64_t m = 520, n = 264, k = 1024;
  // logical A (m, k) and B^T (n, k), row-major; stored as each layout needs
  std::vector<float> al(static_cast<size_t>(m * k)), bl(static_cast<size_t>(n * k)), c0(static_cast<size_t>(m * n));
  for (size_t i = 0; i < al.size(); ++i) al[i] = static_cast<float>(static_cast<int32_t>(random_bits(6, 0, i))) * 0x1p-31f;
  for (size_t i = 0; i < bl.size(); ++i) bl[i] = static_cast<float>(static_cast<int32_t>(random_bits(7, 0, i))) * 0x1p-31f;
  for (size_t i = 0; i < c0.size(); ++i) c0[i] = static_cast<float>(static_cast<int32_t>(random_bits(8, 0, i))) * 0x1p-27f;
  std::vector<float> at_store(al.size()), bn_store(bl.size());
  for (int64_t i = 0; i < m; ++i)
    for (int64_t t = 0; t < k; ++t) at_store[static_cast<size_t>(t * m + i)] = al[static_cast<size_t>(i * k + t)];
  for (int64_t j = 0; j < n; ++j)
    for (int64_t t = 0; t < k; ++t) bn_store[static_cast<size_t>(t * n + j)] = bl[static_cast<size_t>(j * k + t)];
  FastGemmError e{Row{"gemm_f32", fmt::format("{}x{}x{} (4 layouts, +=)", m, n, k), "fast (cuBLASLt)"}, 0,
                  (static_cast<double>(k) + 2) * 0x1p-24};
  for (bool at : {false, true})
    for (bool bt : {false, true})
      for (bool accumulate : {false, true}) {
        const std::vector<float> y = device_gemm_f32(at, bt, at ? at_store : al, bt ? bl : bn_store, c0, m, n, k,
                                                     LimitedSum{}, accumulate, GemmOrder::fast);
        for (int64_t i = 0; i < m; ++i)
          for (int64_t j = 0; j < n; ++j) {
            const auto ij = static_cast<size_t>(i * n + j);
            double ref = accumulate ? c0[ij] : 0.0, mag = std::fabs(ref);
            for (int64_t t = 0; t < k; ++t) {
              const double p = static_cast<double>(al[static_cast<size_t>(i * k + t)]) * bl[static_cast<size_t>(j * k + t)];
              ref += p;
              mag += std::fabs(p);
            }
            const double err = std::fabs(static_cast<double>(y[ij]) - ref) / mag;
            e.max_err = std::max(e.max_err, err);
            e.row.mismatches += !(err <= e.bound);
            ++e.row.elements;
          }
      }
  return e;
}

GemmRow validate_gemm(const std::string& xs, const std::string& ws, int axis, bool headroom_sr) {
  const int64_t m = 520, n = 264, k = 1024;  // m, n not multiples of 128: padded scale tiles
  BlockFormat fx = parse_block_format(xs), fw = parse_block_format(ws);
  if (fx.block.kind == BlockShape::Kind::vector) fx.block.axis = axis;
  if (fw.block.kind == BlockShape::Kind::vector) fw.block.axis = axis;
  QuantizeOptions o;
  if (headroom_sr) {
    o.round = Rounding::sr;
    o.headroom_3_4 = true;
    o.seed = 3;
  }
  std::vector<float> x(static_cast<size_t>(m * k)), w(static_cast<size_t>(n * k));
  fill(x, 0, fx.element);
  fill(w, 1u << 30, fw.element);
  for (float& v : x) v = std::isfinite(v) ? v : 1.0f;
  for (float& v : w) v = std::isfinite(v) ? v : -1.0f;
  const std::vector<int64_t> sx{m, k}, sw{n, k};
  const QuantizedTensor qx = quantize({x, sx}, fx, o), qw = quantize({w, sw}, fw, o);
  std::vector<float> dx(x.size()), dw(w.size()), y(static_cast<size_t>(m * n));
  dequantize(qx, dx);
  dequantize(qw, dw);
  const kernels::GemmPath path = kernels::gemm_host(qx, qw, y);
  GemmRow g;
  g.row = Row{"gemm", xs + " x " + ws + (axis == 0 ? " (columns)" : ""),
              std::string(kernels::gemm_path_name(path)) + (headroom_sr ? " sr 3/4" : "")};
  const bool rounded = path == kernels::GemmPath::bf16_fallback &&
                       (fx.scale == ScaleFormat::fp32 || fw.scale == ScaleFormat::fp32);
  g.bound = rounded ? 0x1p-7 : 0x1p-10;
  std::vector<double> err(y.size());
#pragma omp parallel for
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double ref = 0, mag = 0;
      const float* a = dx.data() + i * k;
      const float* b = dw.data() + j * k;
      for (int64_t t = 0; t < k; ++t) {
        const double p = static_cast<double>(a[t]) * static_cast<double>(b[t]);
        ref += p;
        mag += std::fabs(p);
      }
      const double e = std::fabs(static_cast<double>(y[static_cast<size_t>(i * n + j)]) - ref);
      err[static_cast<size_t>(i * n + j)] = mag > 0 ? e / mag : e;
    }
  for (double e : err) {
    g.max_err = std::max(g.max_err, std::isnan(e) ? 1e300 : e);
    g.row.mismatches += !(e <= g.bound);
  }
  g.row.elements = y.size();
  return g;
}

// Emulator vs the silicon (kernels/hw_cvt.hpp): lpx::encode with the form's rounding and
// Overflow::sat must equal the instruction's code. NaN inputs: the FP8 and UE8M0 forms
// must give a NaN code; the FP6/FP4 forms (no NaN in the format, the result unspecified
// by the PTX ISA) are left out of the count and their codes reported in `note`. UE8M0
// converts scales: inputs are made non-negative (|x|). Stochastic forms take one rbits
// word per four inputs; `equal_slices` makes every slice of a word the same (tests the
// rounding arithmetic whatever the slice-to-lane mapping), else the slices are
// independent (tests the mapping of cvt_rs_word too). False: not on this device.
bool validate_hardware(kernels::HwCvt which, bool equal_slices, uint64_t elements, Row& row,
                       std::string& note) {
  const kernels::HwCvtInfo info = kernels::hw_cvt_info(which);
  const ElementFormat& f = info.format;
  const bool scale = f.name_view() == fmt8::e8m0.name_view();
  const bool stochastic = info.sr_bits > 0;
  row = Row{"hw cvt", info.ptx,
            std::string(rounding_name(info.round)) + "/sat" +
                (stochastic ? (equal_slices ? " equal rbits" : " rbits slices") : "")};
  uint64_t nan_inputs = 0, nan_zero_code = 0;
  for (uint64_t done = 0; done < elements;) {
    const size_t n = static_cast<size_t>(std::min<uint64_t>(kChunk, elements - done));
    std::vector<float> x(n);
    fill(x, done, f);
    if (scale)
      for (float& v : x) v = std::fabs(v);
    std::vector<uint32_t> rbits(stochastic ? (n + 3) / 4 : 0);
    for (size_t g = 0; g < rbits.size(); ++g) {
      const uint32_t r = random_bits(0xc0ffee, 3, done / 4 + g);
      rbits[g] = !equal_slices ? r : info.sr_bits == 16 ? (r >> 16) * 0x00010001u : (r >> 24) * 0x01010101u;
    }
    std::vector<uint8_t> hw(n);
    const bool ran = stochastic ? kernels::hardware_cvt_host(x, rbits, hw, which)
                                : kernels::hardware_cvt_host(x, hw, which);
    if (!ran) return false;
    uint64_t bad = 0;
    for (size_t i = 0; i < n; ++i) {
      if (std::isnan(x[i])) {
        if (f.has_nan()) {
          bad += !is_nan_code(hw[i], f);
        } else {
          ++nan_inputs;
          nan_zero_code += (hw[i] & (f.code_mask >> 1)) == 0;
        }
        continue;
      }
      const uint32_t word = stochastic ? kernels::cvt_rs_word(which, rbits[i / 4], static_cast<int>(i % 4)) : 0u;
      bad += hw[i] != encode(x[i], f, info.round, Overflow::sat, word, stochastic ? info.sr_bits : kMaxSrBits);
    }
    row.mismatches += bad;
    row.elements += n;
    done += n;
  }
  note.clear();
  if (nan_inputs > 0)
    note = fmt::format("{}: {} NaN inputs not compared (no NaN in {}); {} gave a +-0 code", info.ptx,
                       nan_inputs, f.name, nan_zero_code);
  return true;
}

void run(bool require_gpu, uint64_t elements, bool bench, size_t bench_bytes) {
  if (!kernels::cuda_available()) {
    const std::string why = kernels::device_description();
    if (require_gpu) throw std::runtime_error("no CUDA device: " + why);
    std::printf("lpx validate: validated nothing: no CUDA device: %s\n", why.c_str());
    return;
  }
  std::printf("lpx validate on %s\n", kernels::device_description().c_str());
  const Rounding modes[] = {Rounding::rne, Rounding::rna, Rounding::rtz, Rounding::rup, Rounding::rdn, Rounding::sr};
  const char* specs[] = {"mxfp8_e4m3", "mxfp8_e5m2", "mxfp6_e3m2", "mxfp6_e2m3", "mxfp4", "mxint8",
                         "e4m3:b32:e8m0:rceil", "e2m1:b32:e8m0:rceil", "e2m1:b32:e8m0:ceil",
                         "e2m1:b32:e8m0:even", "nvfp4", "nvfp4_2d", "fp8_block128",
                         "fp8_block128x128", "e4m3:b128:pow2", "e2m0:16x16:e8m0", "fp8_tensor"};
  const auto formats = named_formats();
  // Budget: the element casts take 3/4 of the elements, the block kernels 1/5, the rest
  // the Hadamard and hardware checks.
  const uint64_t cast_combos = formats.size() * 6 * 2;
  const uint64_t per_cast = std::max<uint64_t>(1024, elements * 3 / 4 / cast_combos);
  // Block combos: every spec x {rows, columns} x {rne, sr}, plus 3 headroom runs; each
  // compares quantize, dequantize and fake_quantize (3 rows of per_quant elements); plus
  // the 5 quantize_both rows (about two rows' work each).
  const uint64_t block_combos = std::size(specs) * 2 * 2 + 3 + 4;
  const uint64_t per_quant = std::max<uint64_t>(4096, elements / 5 / (block_combos * 3));
  const uint64_t per_other = std::max<uint64_t>(4096, elements / 20 / 24);  // 4 Hadamard + 17 hw rows
  std::vector<Row> rows;
  auto report = [&](const Row& r) {
    rows.push_back(r);
    std::printf("%-20s %-28s %-14s %14llu %10llu\n", r.kernel.c_str(), r.format.c_str(), r.mode.c_str(),
                static_cast<unsigned long long>(r.elements), static_cast<unsigned long long>(r.mismatches));
    std::fflush(stdout);
  };
  std::printf("%-20s %-28s %-14s %14s %10s\n", "kernel", "format", "mode", "elements", "mismatches");
  for (const ElementFormat* f : formats) {
    report(validate_decode(*f));
    for (Rounding r : modes)
      for (Overflow ov : {Overflow::sat, Overflow::ieee}) report(validate_cast(*f, r, ov, per_cast));
  }
  for (const char* spec : specs)
    for (int axis : {-1, 0})
      for (Rounding r : {Rounding::rne, Rounding::sr})
        for (const Row& row : validate_block(spec, axis, r, false, per_quant)) report(row);
  // The 3/4 headroom and the subnormal flush (Tseng et al.; Rouhani et al.) with SR.
  for (const char* spec : {"mxfp4", "nvfp4", "mxfp8_e4m3"})
    for (const Row& row : validate_block(spec, -1, Rounding::sr, true, per_quant)) report(row);
  for (const auto& [spec, r] : {std::pair{"mxfp8_e4m3", Rounding::rne}, {"mxfp8_e4m3", Rounding::sr},
                                {"mxfp4", Rounding::sr}, {"nvfp4", Rounding::rne}, {"nvfp4", Rounding::sr}})
    report(validate_both(spec, r, per_quant));
  for (int n : {16, 32, 64, 128}) report(validate_hadamard(n, per_other));
  report(validate_ordered_gemm(Accumulation{}, "exact fp32"));
  report(validate_ordered_gemm(Accumulation{true, 13, 128}, "limited 13b/128"));
  report(validate_ordered_gemm(Accumulation{true, 10, 0}, "limited 10b"));
  std::vector<std::string> notes;
  for (kernels::HwCvt w : kernels::all_hw_cvts()) {
    const bool stochastic = kernels::hw_cvt_info(w).sr_bits > 0;
    for (bool equal : {true, false}) {
      if (!stochastic && !equal) continue;
      Row hw;
      std::string note;
      if (!validate_hardware(w, equal, per_other, hw, note)) {
        std::printf("%-20s %-28s not supported on this device (or by the code built for it)\n",
                    "hw cvt", kernels::hw_cvt_info(w).ptx);
        break;
      }
      report(hw);
      if (!note.empty()) notes.push_back(note);
    }
  }
  for (const std::string& n : notes) std::printf("note: %s\n", n.c_str());
  std::printf("\n%-20s %-40s %-24s %10s %10s %12s %10s\n", "kernel", "X x W", "path", "outputs",
              "beyond", "max err", "bound");
  struct GemmCase {
    const char *x, *w;
    int axis;
    bool headroom_sr;
  };
  for (const GemmCase& c :
       {GemmCase{"mxfp8_e4m3", "mxfp8_e4m3", -1, false}, GemmCase{"mxfp8_e4m3", "mxfp8_e5m2", -1, false},
        GemmCase{"mxfp8_e5m2", "mxfp8_e5m2", -1, false}, GemmCase{"mxfp8_e4m3", "mxfp8_e4m3", 0, false},
        GemmCase{"nvfp4", "nvfp4", -1, false}, GemmCase{"nvfp4", "nvfp4", -1, true},
        GemmCase{"nvfp4_2d", "nvfp4_2d", -1, false}, GemmCase{"mxfp4", "mxfp4", -1, false},
        GemmCase{"mxfp6_e3m2", "mxfp6_e3m2", -1, false}, GemmCase{"mxint8", "mxint8", -1, false},
        GemmCase{"fp8_tensor", "fp8_tensor", -1, false}, GemmCase{"fp8_block128", "fp8_block128x128", -1, false}}) {
    const GemmRow g = validate_gemm(c.x, c.w, c.axis, c.headroom_sr);
    rows.push_back(g.row);
    std::printf("%-20s %-40s %-24s %10llu %10llu %12.3e %10.3e\n", g.row.kernel.c_str(),
                g.row.format.c_str(), g.row.mode.c_str(), static_cast<unsigned long long>(g.row.elements),
                static_cast<unsigned long long>(g.row.mismatches), g.max_err, g.bound);
    std::fflush(stdout);
  }
  {
    const FastGemmError g = validate_fast_gemm();
    rows.push_back(g.row);
    std::printf("%-20s %-40s %-24s %10llu %10llu %12.3e %10.3e\n", g.row.kernel.c_str(), g.row.format.c_str(),
                g.row.mode.c_str(), static_cast<unsigned long long>(g.row.elements),
                static_cast<unsigned long long>(g.row.mismatches), g.max_err, g.bound);
  }
  uint64_t total = 0, bad = 0;
  // Per kernel family (the rows' first column, in order of appearance): a claim of "N
  // elements per family" reads off these lines, not the total.
  std::vector<Row> families;
  for (const Row& r : rows) {
    total += r.elements;
    bad += r.mismatches;
    auto it = std::find_if(families.begin(), families.end(), [&](const Row& f) { return f.kernel == r.kernel; });
    if (it == families.end()) it = families.insert(families.end(), Row{r.kernel, "", "", 0, 0});
    it->elements += r.elements;
    it->mismatches += r.mismatches;
  }
  for (const Row& f : families)
    std::printf("family %-20s %14llu elements %10llu mismatches\n", f.kernel.c_str(),
                static_cast<unsigned long long>(f.elements), static_cast<unsigned long long>(f.mismatches));
  std::printf("total: %llu elements, %llu mismatches\n", static_cast<unsigned long long>(total),
              static_cast<unsigned long long>(bad));
  if (bench) {
    kernels::GpuBenchOptions bo;
    bo.input_bytes = bench_bytes;
    std::printf("\n%-36s %14s %12s %10s %12s %10s\n", "path", "bytes", "seconds", "GB/s", "x copy", "TFLOP/s");
    for (const kernels::GpuBenchRow& r : kernels::run_gpu_benchmarks(bo))
      if (!r.error.empty()) std::printf("%-36s failed: %s\n", r.path.c_str(), r.error.c_str());
      else std::printf("%-36s %14zu %12.6f %10.1f %12.3f %10.1f\n", r.path.c_str(), r.bytes, r.seconds,
                  r.gb_per_s, r.copy_fraction, r.tflops);
  }
  if (bad != 0) throw std::runtime_error(fmt::format("validate: {} mismatches", bad));
}

const bool registered = register_command(70, [](CLI::App& app) {
  auto* cmd = app.add_subcommand("validate", "every CUDA kernel against the CPU emulator, bit for bit");
  auto require_gpu = std::make_shared<bool>(false);
  auto bench = std::make_shared<bool>(false);
  auto elements = std::make_shared<uint64_t>(1000000000ull);
  auto bench_bytes = std::make_shared<size_t>(size_t{1} << 30);
  cmd->add_flag("--require-gpu", *require_gpu, "exit 1 when no CUDA device is found");
  cmd->add_option("--elements", *elements, "elements compared in all (default 1e9)")->check(CLI::PositiveNumber);
  cmd->add_flag("--bench", *bench, "also run the GPU benchmarks (cast bandwidth vs copy, FP8 vs BF16 GEMM)");
  cmd->add_option("--bench-bytes", *bench_bytes, "float32 input bytes per benchmarked cast (default 1 GiB)")
      ->check(CLI::PositiveNumber);
  cmd->callback([=] { run(*require_gpu, *elements, *bench, *bench_bytes); });
});

}  // namespace
}  // namespace lpx::cli
