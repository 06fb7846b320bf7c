// GPU benchmarks (bench.hpp). Cast and block-format paths (quantize, dequantize, fused
// fake_quantize for MXFP8, MXFP4, NVFP4, 1x128, per-tensor FP8; quantize_both, the row-wise and transposed
// column-wise codes from one read, for MXFP8, MXFP4, NVFP4) run on input_bytes of float32 (1 GiB by default)
// and are timed with CUDA events, median of `repetitions` runs after one warm-up; the
// device-to-device copy of the same input is measured first, and every path is reported
// as a fraction of its bandwidth (bytes read + written, the copy counted the same way).
// GEMMs: m = n = k = size, X·Wᵀ, FP8 (E4M3 x E4M3, E4M3 x E5M2, per-tensor scales) vs BF16,
// and MXFP8 / NVFP4 / MXFP4 quantized operands through gemm(QuantizedOperand) (the path
// the device takes is named in the row), bf16 output; float32 GEMMs in cuBLASLt's order
// and in the ordered kernel's (--gemm exact, limited accumulation). GEMM operands hold
// real values (the cast input's pattern, encoded to each operand's type; scales near 1),
// never zeros: a tensor core runs faster on zeros than on data. A GEMM that fails (a
// cuBLASLt status) is reported in its row's `error` and the benchmark goes on.
//
// Host code: it drives the public device API (the CUDA module's launchers) and times each
// path with the module's CUDA-event timer (backend.hpp, median_seconds).
#include <algorithm>
#include <functional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "backend.hpp"
#include "lpx/formats/block_format.hpp"
#include "lpx/formats/element_format.hpp"
#include "lpx/kernels/bench.hpp"
#include "lpx/kernels/cast.hpp"
#include "lpx/kernels/gemm.hpp"
#include "lpx/kernels/hadamard.hpp"
#include "lpx/kernels/memory.hpp"
#include "lpx/kernels/quantize.hpp"

namespace lpx::kernels {

namespace {

// x[i] = ((i % 2001) - 1000) * 0.37 for i < n, filled on the host in chunks and copied up.
void fill(float* x, size_t n) {
  const size_t chunk = size_t{1} << 24;
  std::vector<float> h(std::min(chunk, n));
  for (size_t first = 0; first < n; first += chunk) {
    const size_t len = std::min(chunk, n - first);
    for (size_t j = 0; j < len; ++j)
      h[j] = static_cast<float>(static_cast<int>((first + j) % 2001) - 1000) * 0.37f;
    copy_to_device(x + first, h.data(), len * sizeof(float));
  }
}

double median_seconds(int reps, const std::function<void()>& run) {
  return backend::require().median_seconds(
      reps, [](void* f) { (*static_cast<const std::function<void()>*>(f))(); },
      const_cast<std::function<void()>*>(&run));
}

}  // namespace

std::vector<GpuBenchRow> run_gpu_benchmarks(const GpuBenchOptions& opt) {
  backend::require();
  std::vector<GpuBenchRow> rows;
  const size_t n = opt.input_bytes / sizeof(float) / 128 * 128;  // whole Hadamard rows
  DeviceBuffer in(n * sizeof(float)), out(n * sizeof(float)), codes(n * 2);
  fill(in.get<float>(), n);
  double copy_gbps = 0;
  auto add = [&](std::string path, size_t bytes, const std::function<void()>& run) {
    GpuBenchRow r;
    r.path = std::move(path);
    r.bytes = bytes;
    r.seconds = median_seconds(opt.repetitions, run);
    r.gb_per_s = static_cast<double>(bytes) / r.seconds / 1e9;
    if (copy_gbps == 0) copy_gbps = r.gb_per_s;
    r.copy_fraction = r.gb_per_s / copy_gbps;
    rows.push_back(r);
  };
  add("copy d2d", 2 * n * sizeof(float), [&] { copy_on_device(out.get(), in.get(), n * sizeof(float)); });
  struct CastPath {
    const ElementFormat* f;
    Rounding round;
  };
  const CastPath paths[] = {{&fmt8::e4m3fn, Rounding::rne}, {&fmt8::e4m3fn, Rounding::sr},
                            {&fmt8::e5m2, Rounding::rne},   {&fmt4::e2m1, Rounding::rne},
                            {&fmt4::e2m1, Rounding::sr},    {&fmt16::bf16, Rounding::rne}};
  for (const CastPath& p : paths) {
    CastOptions o;
    o.round = p.round;
    o.seed = 1;
    const std::string tag = std::string(p.f->name) + " " + std::string(rounding_name(p.round));
    const size_t cb = code_bytes(*p.f);
    add("encode " + tag, n * (sizeof(float) + cb),
        [&] { encode_device(in.get<float>(), codes.get(), n, *p.f, o); });
    add("fake_cast " + tag, 2 * n * sizeof(float),
        [&] { fake_cast_device(in.get<float>(), out.get<float>(), n, *p.f, o); });
    if (p.round == Rounding::rne)
      add("decode " + std::string(p.f->name), n * (cb + sizeof(float)),
          [&] { decode_device(codes.get(), out.get<float>(), n, *p.f); });
  }
  // Block formats on an (n / 4096, 4096) matrix: bytes are the float32 input or output,
  // the codes and the scales (the two-level amax pass is not counted: it is the same
  // logical operation).
  struct BlockPath {
    const char* spec;
    Rounding round;
  };
  const size_t cols = n >= 4096 ? 4096 : n, mrows = n / cols, nq = mrows * cols;
  DeviceBuffer scales(nq / 16 * sizeof(float) + 2 * sizeof(float));  // + two tensor scales
  for (const BlockPath& p : {BlockPath{"mxfp8_e4m3", Rounding::rne}, BlockPath{"mxfp8_e4m3", Rounding::sr},
                             BlockPath{"mxfp4", Rounding::rne}, BlockPath{"mxfp4", Rounding::sr},
                             BlockPath{"nvfp4", Rounding::rne}, BlockPath{"nvfp4", Rounding::sr},
                             BlockPath{"fp8_block128", Rounding::rne}, BlockPath{"fp8_tensor", Rounding::rne}}) {
    const BlockFormat f = parse_block_format(p.spec);
    QuantizeOptions o;
    o.round = p.round;
    o.seed = 1;
    const bool coded = f.scale_is_code();
    const size_t nb = f.block.kind == BlockShape::Kind::tensor ? 1
                      : nq / static_cast<size_t>(f.block.kind == BlockShape::Kind::tile
                                                     ? f.block.rows * f.block.cols
                                                     : f.block.length);
    const size_t scale_bytes = nb * (coded ? 1 : sizeof(float));
    uint8_t* sc = coded ? scales.get<uint8_t>() : nullptr;
    float* sv = coded ? nullptr : scales.get<float>();
    float* ts = reinterpret_cast<float*>(scales.get<uint8_t>() + nq / 16 * sizeof(float));
    const std::string tag = std::string(p.spec) + " " + std::string(rounding_name(p.round));
    add("quantize " + tag, nq * (sizeof(float) + 1) + scale_bytes, [&] {
      quantize_device(in.get<float>(), mrows, cols, f, o, codes.get<uint8_t>(), sc, sv, ts);
    });
    if (p.round == Rounding::rne)
      add("dequantize " + std::string(p.spec), nq * (1 + sizeof(float)) + scale_bytes, [&] {
        dequantize_device(codes.get<uint8_t>(), sc, sv, ts, mrows, cols, f, false, out.get<float>());
      });
    add("fake_quantize " + tag, 2 * nq * sizeof(float) + scale_bytes, [&] {
      fake_quantize_device(in.get<float>(), mrows, cols, f, o, out.get<float>(), sc, sv, ts);
    });
    if (coded && f.block.kind == BlockShape::Kind::vector && f.block.length <= 32) {
      // Both GEMM layouts in one read: the row-wise codes and the column-wise codes of
      // the transpose (the wgrad operand), each with its scales.
      const DeviceTensor xv = DeviceTensor::values(in.get<float>(), mrows, cols);
      const DeviceTensor rv = quantized_view(codes.get<uint8_t>(), Storage::code8, mrows, cols, f,
                                             sc, nullptr, ts);
      const DeviceTensor cv = quantized_view(codes.get<uint8_t>() + nq, Storage::code8, cols, mrows,
                                             f, sc + nb, nullptr, ts + 1);
      add("quantize_both " + tag, nq * (sizeof(float) + 2) + 2 * scale_bytes,
          [&] { quantize_both_device(xv, rv, o, cv, o); });
    }
  }
  scales.reset();
  for (int h : {16, 128})
    add("hadamard " + std::to_string(h), 2 * n * sizeof(float), [&] {
      hadamard_device(in.get<float>(), out.get<float>(), n / static_cast<size_t>(h), h, nullptr, 1, 0);
    });
  in.reset();
  out.reset();
  codes.reset();

  for (size_t s : opt.gemm_sizes) {
    // tensor_scales: X's at word 0, W's at word 4 (cuBLASLt wants each 16-byte aligned)
    DeviceBuffer x(s * s * 2), w(s * s * 2), y(s * s * 2), yf(s * s * 4), tensor_scales(8 * sizeof(float)),
        src(s * s * 4);
    fill(src.get<float>(), s * s);
    // x and w: src's values as codes of `f` (FP8 / FP4 one per byte, BF16 bits)
    auto encode_operands = [&](const ElementFormat& f) {
      CastOptions o;
      encode_device(src.get<float>(), x.get(), s * s, f, o);
      encode_device(src.get<float>(), w.get(), s * s, f, o);
    };
    const float one[8] = {1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f};
    copy_to_device(tensor_scales.get(), one, sizeof(one));
    const double flops = 2.0 * static_cast<double>(s) * static_cast<double>(s) * static_cast<double>(s);
    auto add_gemm = [&](const std::string& name, const std::function<void()>& run) {
      GpuBenchRow r;
      r.path = name;  // quantized operands: completed with the path that ran, below
      try {
        r.seconds = median_seconds(opt.repetitions, run);
        r.tflops = flops / r.seconds / 1e12;
      } catch (const std::exception& e) {
        r.error = e.what();
      }
      rows.push_back(r);
    };
    struct Combo {
      const char* name;
      GemmDtype xd, wd;
    };
    for (const Combo& c : {Combo{"bf16xbf16", GemmDtype::bf16, GemmDtype::bf16},
                           Combo{"e4m3xe4m3", GemmDtype::e4m3, GemmDtype::e4m3},
                           Combo{"e4m3xe5m2", GemmDtype::e4m3, GemmDtype::e5m2}}) {
      const bool fp8 = c.xd != GemmDtype::bf16;
      encode_operands(fp8 ? fmt8::e4m3fn : fmt16::bf16);
      if (c.wd == GemmDtype::e5m2) {
        CastOptions o;
        encode_device(src.get<float>(), w.get(), s * s, fmt8::e5m2, o);
      }
      const GemmOperand xo{x.get(), c.xd, fp8 ? tensor_scales.get<float>() : nullptr};
      const GemmOperand wo{w.get(), c.wd, fp8 ? tensor_scales.get<float>() + 4 : nullptr};
      add_gemm(std::string("gemm ") + c.name + " " + std::to_string(s),
               [&] { gemm(s, s, s, xo, wo, y.get(), GemmDtype::bf16); });
      if (fp8)  // the same with a float32 output
        add_gemm(std::string("gemm ") + c.name + " f32-out " + std::to_string(s),
                 [&] { gemm(s, s, s, xo, wo, yf.get(), GemmDtype::f32); });
    }
    // Quantized operands through gemm(QuantizedOperand): whichever path this device takes
    // (named in the row), timed whole: scale tiling / FP4 packing or the BF16 dequantize
    // included. Codes of the pattern's values; every scale code or word near 1 (e8m0 127
    // is 1, e4m3 0x38 is 1, float32 0x3f3f3f3f is 0.75); NVFP4's tensor scales read 1. The
    // last pair is DeepSeek-V3's (X 1x128, W 128x128, float32 scales).
    const size_t scale_bytes = s * s / 16 * 2;  // covers every pair's two grids
    DeviceBuffer sc(scale_bytes);
    for (const auto& [xs, ws] : {std::pair{"mxfp8_e4m3", "mxfp8_e4m3"}, {"nvfp4", "nvfp4"},
                                 {"mxfp4", "mxfp4"}, {"fp8_block128", "fp8_block128x128"}}) {
      QuantizedOperand xq, wq;
      xq.format = parse_block_format(xs);
      wq.format = parse_block_format(ws);
      encode_operands(xq.format.element);
      const ScaleFormat sf = xq.format.scale;
      fill_device(sc.get(), sf == ScaleFormat::e8m0 ? 127 : sf == ScaleFormat::e4m3 ? 0x38 : 0x3f, scale_bytes);
      xq.codes = x.get<uint8_t>();
      wq.codes = w.get<uint8_t>();
      xq.scale_codes = sc.get<uint8_t>();
      wq.scale_codes = sc.get<uint8_t>() + s * s / 16;
      xq.scale_values = sc.get<float>();  // s * s / 128 words
      wq.scale_values = sc.get<float>() + s * s / 128;
      xq.tensor_scale = tensor_scales.get<float>();
      wq.tensor_scale = tensor_scales.get<float>() + 4;
      GemmPath path = GemmPath::automatic;
      add_gemm(std::string("gemm ") + xs + (std::string(xs) == ws ? "" : std::string(" x ") + ws) + " " +
                   std::to_string(s),
               [&] { path = gemm(s, s, s, xq, wq, y.get(), GemmDtype::bf16); });
      rows.back().path += " (" + std::string(gemm_path_name(path)) + ")";
    }
    // Float32 GEMMs (gemm_f32_device; X (s, s) . W (s, s)^T as the layers call them):
    // cuBLASLt's own order against the ordered kernel of --gemm exact and of limited
    // accumulation (13 mantissa bits, promoted every 128: a Hopper FP8 tensor core).
    DeviceBuffer fa(s * s * 4), fb(s * s * 4), fc(s * s * 4);
    fill(fa.get<float>(), s * s);
    fill(fb.get<float>(), s * s);
    const auto side = static_cast<int64_t>(s);
    for (const auto& [name, acc, order] :
         {std::tuple{"f32 fast (cuBLASLt)", LimitedSum{}, GemmOrder::fast},
          std::tuple{"f32 exact (ordered)", LimitedSum{}, GemmOrder::exact},
          std::tuple{"f32 limited 13b/128 (ordered)", LimitedSum{13, 128}, GemmOrder::exact}})
      add_gemm(std::string("gemm ") + name + " " + std::to_string(s), [&, acc = acc, order = order] {
        gemm_f32_device(false, true, fa.get<float>(), fb.get<float>(), fc.get<float>(), side, side, side, acc, false, order);
      });
  }
  return rows;
}

}  // namespace lpx::kernels
