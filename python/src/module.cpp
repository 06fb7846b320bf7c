// lpx._core: the C++ library under NumPy (docs/python.md). Every function here calls the
// same library functions as the `lpx` command line (tools/lpx/), so the bits are the
// CLI's; the pure-Python package (python/lpx/) checks dtypes, shapes and option ranges
// first and gives this module float32 (or code) arrays in C order only.
//
// Rules kept by every entry point:
//   - inputs are read in place (no copy) and outputs are written in place into arrays
//     allocated once (or the caller's `out=`), or moved out of the library's vectors;
//   - the GIL is released while the library works, so other Python threads run;
//   - a library error is one Python exception carrying the library's one-line message
//     (std::invalid_argument and lpx::io::DataError -> ValueError; see PYBIND11_MODULE).
#include <cmath>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <memory>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "lpx/divergence/detectors.hpp"
#include "lpx/formats/format_registry.hpp"
#include "lpx/formats/analyze.hpp"
#include "lpx/formats/block_format.hpp"
#include "lpx/formats/cast.hpp"
#include "lpx/formats/codec.hpp"
#include "lpx/formats/element_format.hpp"
#include "lpx/formats/packing.hpp"
#include "lpx/formats/quantize.hpp"
#include "lpx/io/format_descriptor.hpp"
#include "lpx/io/tensor_file.hpp"
#include "lpx/kernels/cast.hpp"
#include "lpx/kernels/device.hpp"
#include "lpx/kernels/quantize.hpp"
#include "lpx/kernels/tensor.hpp"
#include "lpx/numerics/hadamard.hpp"
#include "lpx/recipes/operand.hpp"
#include "lpx/recipes/recipe.hpp"
#include "lpx/runlog/run_log.hpp"
#include "lpx/version.hpp"

namespace py = pybind11;

namespace {

using Shape = std::vector<int64_t>;

// A bad argument in the CLI's words (the CLI's UsageError: one line, exit 2 there).
struct UsageError : std::invalid_argument {
  using std::invalid_argument::invalid_argument;
};

template <class T>
using CArray = py::array_t<T, py::array::c_style>;

Shape shape_of(const py::array& a) { return Shape(a.shape(), a.shape() + a.ndim()); }

std::string shape_text(const Shape& shape) {
  std::string s;
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? "x" : "") + std::to_string(shape[i]);
  return s.empty() ? "()" : s;
}

template <class T>
std::span<const T> view(const CArray<T>& a) {
  return {a.data(), static_cast<size_t>(a.size())};
}

// A NumPy array that owns `v` (moved, not copied): the library's result vectors become
// arrays without a copy.
template <class T>
py::array_t<T> adopt(std::vector<T>&& v, const Shape& shape) {
  auto* heap = new std::vector<T>(std::move(v));
  py::capsule owner(heap, [](void* p) { delete static_cast<std::vector<T>*>(p); });
  return py::array_t<T>(std::vector<py::ssize_t>(shape.begin(), shape.end()), heap->data(), owner);
}

// The output array: the caller's `out` (C-contiguous, of the right dtype and shape, not
// overlapping the input; checked in python/lpx/_arrays.py) or a new one.
template <class T>
CArray<T> output(const std::optional<py::array>& out, const Shape& shape) {
  if (out) return py::reinterpret_borrow<CArray<T>>(*out);
  return CArray<T>(std::vector<py::ssize_t>(shape.begin(), shape.end()));
}

lpx::Overflow overflow_by_name(const std::string& name) {
  if (name == "sat") return lpx::Overflow::sat;
  if (name == "ieee") return lpx::Overflow::ieee;
  throw UsageError("unknown overflow mode '" + name + "' (expected sat or ieee)");
}

// --- element formats ----------------------------------------------------------------

py::dict format_info(const std::string& name) {
  const lpx::ElementFormat f = lpx::format_by_name(name);
  py::dict d;
  d["name"] = std::string(f.name);
  py::list aliases;
  for (const lpx::FormatAlias& a : lpx::format_aliases())
    if (a.canonical == f.name_view()) aliases.append(std::string(a.alias));
  d["aliases"] = aliases;
  d["bits"] = int(f.bits);
  d["is_integer"] = f.is_integer;
  d["is_signed"] = f.is_signed;
  d["exponent_bits"] = int(f.exponent_bits);
  d["mantissa_bits"] = int(f.mantissa_bits);
  d["bias"] = int(f.bias);  // integers: the fraction bits (value = code * 2^-bias)
  d["emax"] = f.emax();
  d["emin"] = f.is_integer ? py::object(py::none()) : py::object(py::int_(f.emin()));
  d["max"] = lpx::max_finite(f);
  d["min_normal"] = f.is_integer ? py::object(py::none()) : py::object(py::float_(lpx::min_normal(f)));
  d["smallest_subnormal"] = lpx::min_subnormal(f);
  // finfo's eps: the gap from 1 to the next value up (floats: 2^-M); integers: the
  // resolution, one code step (2^-fraction bits).
  d["eps"] = std::ldexp(1.0, f.is_integer ? -f.bias : -static_cast<int>(f.mantissa_bits));
  uint32_t finite = 0;
  for (uint32_t c = 0; c <= f.code_mask; ++c) finite += std::isfinite(lpx::decode(c, f)) ? 1 : 0;
  d["finite_codes"] = finite;
  d["codes"] = f.code_mask + 1;
  d["specials"] = lpx::describe_specials(f);
  d["has_inf"] = f.has_inf();
  d["has_nan"] = f.has_nan();
  d["has_zero"] = f.has_zero;
  d["nan_code"] = f.has_nan() ? py::object(py::int_(f.nan_code)) : py::object(py::none());
  d["inf_code"] = f.has_inf() ? py::object(py::int_(f.inf_magnitude)) : py::object(py::none());
  return d;
}

py::tuple format_table(const std::string& name) {
  const lpx::ElementFormat f = lpx::format_by_name(name);
  const size_t n = size_t{f.code_mask} + 1;
  std::vector<uint32_t> codes(n);
  std::vector<double> values(n);
  for (uint32_t c = 0; c < n; ++c) {
    codes[c] = c;
    values[c] = lpx::decode(c, f);
  }
  const Shape shape{static_cast<int64_t>(n)};
  return py::make_tuple(adopt(std::move(codes), shape), adopt(std::move(values), shape));
}

// --- element casts --------------------------------------------------------------------

lpx::CastOptions cast_options(const std::string& round, const std::string& overflow, uint64_t seed,
                              uint32_t stream, int sr_bits) {
  lpx::CastOptions opt;
  opt.round = lpx::rounding_by_name(round);
  opt.overflow = overflow_by_name(overflow);
  opt.seed = seed;
  opt.stream = stream;
  opt.sr_bits = sr_bits;
  return opt;
}

py::array cast(const CArray<float>& x, const std::string& to, const std::string& round,
               const std::string& overflow, uint64_t seed, uint32_t stream, int sr_bits,
               const std::string& emit, int threads, const std::optional<py::array>& out,
               const std::optional<CArray<uint32_t>>& random_words) {
  const lpx::ElementFormat f = lpx::format_by_name(to);
  lpx::CastOptions opt = cast_options(round, overflow, seed, stream, sr_bits);
  opt.threads = threads;
  if (random_words) {  // the library checks that they cover x (docs/formats.md#caller-given-random-bits)
    opt.random_words = random_words->data();
    opt.random_words_count = static_cast<uint64_t>(random_words->size());
  }
  const Shape shape = shape_of(x);
  const auto in = view(x);
  if (emit == "values") {
    CArray<float> y = output<float>(out, shape);
    const std::span<float> o(y.mutable_data(), in.size());
    {
      py::gil_scoped_release unlocked;
      lpx::fake_cast_array(in, o, f, opt);
    }
    return y;
  }
  if (emit != "codes") throw UsageError("emit must be codes or values, not '" + emit + "'");
  if (f.bits <= 8) {
    CArray<uint8_t> y = output<uint8_t>(out, shape);
    const std::span<uint8_t> o(y.mutable_data(), in.size());
    {
      py::gil_scoped_release unlocked;
      lpx::encode_array(in, o, f, opt);
    }
    return y;
  }
  CArray<uint16_t> y = output<uint16_t>(out, shape);
  const std::span<uint16_t> o(y.mutable_data(), in.size());
  {
    py::gil_scoped_release unlocked;
    lpx::encode_array(in, o, f, opt);
  }
  return y;
}

// A code with bits above the format's width is bad data (the CLI's message, without the
// file name).
template <class C>
void check_codes(std::span<const C> codes, const lpx::ElementFormat& f) {
  for (size_t i = 0; i < codes.size(); ++i)
    if (codes[i] & ~f.code_mask)
      throw lpx::io::DataError(fmt::format("code 0x{:X} at index {} does not fit {} ({} bits)",
                                           codes[i], i, f.name, f.bits));
}

py::array decode(const py::array& codes, const std::string& from, int threads,
                 const std::optional<py::array>& out) {
  const lpx::ElementFormat f = lpx::format_by_name(from);
  const Shape shape = shape_of(codes);
  CArray<float> y = output<float>(out, shape);
  const std::span<float> o(y.mutable_data(), static_cast<size_t>(codes.size()));
  if (f.bits > 8) {
    const auto c = py::reinterpret_borrow<CArray<uint16_t>>(codes);
    const auto in = view(c);
    py::gil_scoped_release unlocked;
    check_codes(in, f);
    lpx::decode_array(in, o, f, threads);
  } else {
    const auto c = py::reinterpret_borrow<CArray<uint8_t>>(codes);
    const auto in = view(c);
    py::gil_scoped_release unlocked;
    check_codes(in, f);
    lpx::decode_array(in, o, f, threads);
  }
  return y;
}

// --- block quantization -------------------------------------------------------------

struct QuantizeArgs {
  std::string format;
  std::optional<int64_t> block;
  std::optional<int> axis;
  std::optional<std::string> scale_rule;
  std::string round = "rne";
  uint64_t seed = 0;
  uint32_t stream = 0;
  int sr_bits = lpx::kMaxSrBits;
  bool headroom_3_4 = false, flush_subnormals = false;
  int threads = 0;
  std::optional<CArray<uint32_t>> random_words;  // replaces Philox's words when given
};

// The block format from the spec and the overriding options: tools/lpx/cmd_quantize.cpp's
// resolve_format() and axis check, with the keyword names for the option names.
lpx::BlockFormat resolve_format(const QuantizeArgs& a, const Shape& shape) {
  lpx::BlockFormat f = lpx::parse_block_format(a.format);
  using Kind = lpx::BlockShape::Kind;
  const bool along_axis = f.block.kind == Kind::vector || f.block.kind == Kind::channel;
  if (a.block) {
    if (f.block.kind != Kind::vector)
      throw UsageError(fmt::format("block applies to 1xN block formats, not '{}'", a.format));
    if (*a.block < 1) throw UsageError("block must be >= 1");
    f.block.length = *a.block;
  }
  if (a.axis) {
    if (!along_axis)
      throw UsageError(fmt::format(
          "axis applies to 1xN and per-channel blocks; '{}' has tiles or one block", a.format));
    f.block.axis = *a.axis;
  }
  if (a.scale_rule) {
    if (!f.power_of_two_scale())
      throw UsageError(fmt::format("scale_rule applies to e8m0 and pow2 scales, not {} ('{}')",
                                   lpx::scale_format_name(f.scale), a.format));
    f.rule = lpx::scale_rule_by_name(*a.scale_rule);
  }
  f.preset.clear();
  const int rank = static_cast<int>(shape.size());
  if (along_axis) {
    const int axis = f.block.axis < 0 ? f.block.axis + std::max(rank, 1) : f.block.axis;
    if (axis < 0 || axis >= std::max(rank, 1))
      throw UsageError(fmt::format("axis {} is out of range for a tensor of shape {} (rank {})",
                                   f.block.axis, shape_text(shape), rank));
  }
  return f;
}

lpx::QuantizeOptions quantize_options(const QuantizeArgs& a) {
  lpx::QuantizeOptions opt;
  opt.round = lpx::rounding_by_name(a.round);
  opt.seed = a.seed;
  opt.stream = a.stream;
  opt.sr_bits = a.sr_bits;
  opt.threads = a.threads;
  opt.headroom_3_4 = a.headroom_3_4;
  opt.flush_subnormal_inputs = a.flush_subnormals;
  if (a.random_words) {
    opt.random_words = a.random_words->data();
    opt.random_words_count = static_cast<uint64_t>(a.random_words->size());
  }
  return opt;
}

py::dict stats_dict(const lpx::QuantizeStats& s) {
  py::dict d;
  d["clamped_scales"] = s.clamped_scales;
  d["saturated"] = s.saturated;
  d["flushed"] = s.flushed;
  return d;
}

// The fields of python/lpx/_quantized.py's QuantizedTensor, moved out of the library's.
py::dict quantize(const CArray<float>& x, const QuantizeArgs& a) {
  const Shape shape = shape_of(x);
  const lpx::BlockFormat f = resolve_format(a, shape);
  const lpx::QuantizeOptions opt = quantize_options(a);
  lpx::QuantizedTensor q;
  {
    py::gil_scoped_release unlocked;
    q = lpx::quantize({view(x), shape}, f, opt);
  }
  py::dict d;
  d["codes"] = adopt(std::move(q.codes), q.shape);
  if (q.format.scale_is_code())
    d["scales"] = adopt(std::move(q.scale_codes), q.scale_shape);
  else
    d["scales"] = adopt(std::move(q.scale_values), q.scale_shape);
  d["tensor_scale"] = q.tensor_scale ? py::object(py::float_(*q.tensor_scale)) : py::object(py::none());
  d["spec"] = q.format.spec();
  d["axis"] = q.format.block.axis;
  d["amax"] = q.amax;
  d["headroom_3_4"] = q.headroom_3_4;
  d["stats"] = stats_dict(q.stats);
  return d;
}

py::array fake_quantize(const CArray<float>& x, const QuantizeArgs& a,
                        const std::optional<py::array>& out) {
  const Shape shape = shape_of(x);
  const lpx::BlockFormat f = resolve_format(a, shape);
  const lpx::QuantizeOptions opt = quantize_options(a);
  CArray<float> y = output<float>(out, shape);
  const std::span<float> o(y.mutable_data(), static_cast<size_t>(x.size()));
  {
    py::gil_scoped_release unlocked;
    lpx::fake_quantize_values({view(x), shape}, o, f, opt);
  }
  return y;
}

// --- CUDA tensors through DLPack (docs/python.md#dlpack) ------------------------------
// A CUDA tensor reaches the kernels library's device API (kernels/include/lpx/kernels):
// the Python layer passes the input's and the output's "dltensor" capsules, this reads
// their pointers and shapes, and the kernels run on the default stream (DLPack's
// __dlpack__(stream=None) convention). lpx_kernels links no CUDA library; without the CUDA
// module or a device it throws "no CUDA device: ...", raised here as a ValueError.
//
// The structs a "dltensor" capsule points to, as the DLPack specification lays them out
// (the unversioned ABI that NumPy 1.24 and PyTorch 1.13 exchange).
struct DLDevice {
  int32_t device_type;  // 1 CPU, 2 CUDA
  int32_t device_id;
};
struct DLDataType {
  uint8_t code;  // 0 int, 1 uint, 2 float
  uint8_t bits;
  uint16_t lanes;
};
struct DLTensor {
  void* data;
  DLDevice device;
  int32_t ndim;
  DLDataType dtype;
  int64_t* shape;
  int64_t* strides;  // in elements; null: C order
  uint64_t byte_offset;
};
struct DLManagedTensor {
  DLTensor dl_tensor;
  void* manager_ctx;
  void (*deleter)(DLManagedTensor*);
};
constexpr int32_t kDLCUDA = 2;

struct CudaArray {
  void* data = nullptr;
  Shape shape;
  int64_t numel = 1;
};

// The CUDA tensor behind an unconsumed capsule (the capsule keeps it alive; its producer's
// destructor frees it). dtype: DLPack codes/bits accepted; C-contiguous only.
CudaArray cuda_array(const py::object& capsule, const char* what, std::initializer_list<DLDataType> dtypes,
                     const char* dtype_text) {
  auto* m = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(capsule.ptr(), "dltensor"));
  if (m == nullptr) {
    PyErr_Clear();
    throw py::value_error(fmt::format("{}: not a DLPack capsule (or one already used)", what));
  }
  const DLTensor& t = m->dl_tensor;
  if (t.device.device_type != kDLCUDA)
    throw py::value_error(fmt::format("{} is not a CUDA tensor (DLPack device type {})", what, t.device.device_type));
  bool ok = false;
  for (const DLDataType& d : dtypes) ok = ok || (t.dtype.code == d.code && t.dtype.bits == d.bits);
  if (!ok || t.dtype.lanes != 1)
    throw py::type_error(fmt::format("{} holds DLPack dtype (code {}, {} bits); it must be {}", what,
                                     t.dtype.code, t.dtype.bits, dtype_text));
  CudaArray a;
  a.shape.assign(t.shape, t.shape + t.ndim);
  int64_t expect = 1;
  for (int d = t.ndim - 1; d >= 0; --d) {
    if (t.strides != nullptr && t.shape[d] != 1 && t.strides[d] != expect)
      throw py::value_error(fmt::format("{} is not C-contiguous (make it contiguous first)", what));
    expect *= t.shape[d];
  }
  a.numel = expect;
  if (a.numel == 0) throw py::value_error("empty input (no elements)");
  a.data = static_cast<char*>(t.data) + t.byte_offset;
  return a;
}

void same_shape(const CudaArray& in, const CudaArray& out) {
  if (in.shape != out.shape)
    throw py::value_error(fmt::format("out has shape {}; the result has shape {}", shape_text(out.shape),
                                      shape_text(in.shape)));
}

// Runs a kernels call; "no CUDA device: ..." (std::runtime_error) becomes a ValueError.
template <class F>
void on_device(F&& f) {
  try {
    py::gil_scoped_release unlocked;
    f();
  } catch (const std::invalid_argument&) {
    throw;
  } catch (const std::runtime_error& e) {
    throw py::value_error(e.what());
  }
}

constexpr DLDataType kF32{2, 32, 1};

void cuda_cast(const py::object& x, const py::object& out, const std::string& to, const std::string& round,
               const std::string& overflow, uint64_t seed, uint32_t stream, int sr_bits,
               const std::string& emit) {
  const lpx::ElementFormat f = lpx::format_by_name(to);
  const lpx::CastOptions opt = cast_options(round, overflow, seed, stream, sr_bits);
  const CudaArray in = cuda_array(x, "x", {kF32}, "float32");
  if (emit == "values") {
    const CudaArray o = cuda_array(out, "out", {kF32}, "float32");
    same_shape(in, o);
    on_device([&] {
      lpx::kernels::fake_cast_device(static_cast<const float*>(in.data), static_cast<float*>(o.data),
                                     static_cast<size_t>(in.numel), f, opt);
    });
    return;
  }
  if (emit != "codes") throw UsageError("emit must be codes or values, not '" + emit + "'");
  const uint8_t bits = f.bits <= 8 ? 8 : 16;
  const CudaArray o = cuda_array(out, "out", {{1, bits, 1}, {0, bits, 1}}, bits == 8 ? "uint8" : "uint16 or int16");
  same_shape(in, o);
  on_device([&] {
    lpx::kernels::encode_device(static_cast<const float*>(in.data), o.data, static_cast<size_t>(in.numel), f, opt);
  });
}

void cuda_decode(const py::object& codes, const py::object& out, const std::string& from) {
  const lpx::ElementFormat f = lpx::format_by_name(from);
  const uint8_t bits = f.bits <= 8 ? 8 : 16;
  const CudaArray in = cuda_array(codes, "codes", {{1, bits, 1}, {0, bits, 1}}, bits == 8 ? "uint8" : "uint16 or int16");
  const CudaArray o = cuda_array(out, "out", {kF32}, "float32");
  same_shape(in, o);
  on_device([&] {
    lpx::kernels::decode_device(in.data, static_cast<float*>(o.data), static_cast<size_t>(in.numel), f);
  });
}

void cuda_fake_quantize(const py::object& x, const py::object& out, const QuantizeArgs& a) {
  if (a.random_words) throw UsageError("random_words are host memory: a CUDA tensor takes seed and stream");
  const CudaArray in = cuda_array(x, "x", {kF32}, "float32");
  const CudaArray o = cuda_array(out, "out", {kF32}, "float32");
  same_shape(in, o);
  if (in.shape.size() > 2)
    throw UsageError(fmt::format("a CUDA tensor of shape {} has rank {}; the CUDA kernels take rank 1 or 2",
                                 shape_text(in.shape), in.shape.size()));
  const lpx::BlockFormat f = resolve_format(a, in.shape);
  const lpx::QuantizeOptions opt = quantize_options(a);
  const size_t rank = in.shape.size();
  const int64_t rows = rank == 2 ? in.shape[0] : 1, cols = in.shape.back();
  on_device([&] {
    namespace k = lpx::kernels;
    const k::DeviceTensor xt = k::DeviceTensor::values(static_cast<const float*>(in.data), rows, cols);
    const k::DeviceTensor ot = k::quantized_view(o.data, k::Storage::f32, rows, cols, f, nullptr, nullptr,
                                                 nullptr, a.headroom_3_4, rank);
    k::fake_quantize_device(xt, ot, opt);
  });
}

// A QuantizedTensor rebuilt from arrays, checked as `lpx dequantize` checks a packed file
// (the CLI's messages without the file name). The codes are copied into the library's
// vector (lpx::QuantizedTensor owns its data).
lpx::QuantizedTensor rebuild(const py::array& codes, const py::array& scales,
                             std::optional<float> tensor_scale, const std::string& spec, int axis,
                             bool headroom) {
  lpx::QuantizedTensor q;
  q.format = lpx::parse_block_format(spec);
  q.format.block.axis = axis;
  q.shape = shape_of(codes);
  q.headroom_3_4 = headroom;
  const Shape grid = lpx::scale_grid_shape(q.shape, q.format);  // checks the axis
  const lpx::ElementFormat& e = q.format.element;
  if (!py::isinstance<CArray<uint8_t>>(codes) || !(codes.flags() & py::array::c_style))
    throw lpx::io::DataError(fmt::format("codes must be a C-contiguous uint8 array, found {}",
                                         std::string(py::str(codes.dtype()))));
  const auto c = py::reinterpret_borrow<CArray<uint8_t>>(codes);
  q.codes.assign(c.data(), c.data() + c.size());
  for (size_t i = 0; i < q.codes.size(); ++i)
    if (q.codes[i] > e.code_mask)
      throw lpx::io::DataError(fmt::format("code {} at element {} does not fit {} ({} bits)",
                                           q.codes[i], i, e.name_view(), e.bits));
  int64_t nblocks = 1;
  for (int64_t d : grid) nblocks *= d;
  const bool coded = q.format.scale_is_code();
  const char* want = coded ? "uint8" : "float32";
  const bool dtype_ok = coded ? py::isinstance<CArray<uint8_t>>(scales) : py::isinstance<CArray<float>>(scales);
  if (!dtype_ok || scales.size() != nblocks)
    throw lpx::io::DataError(fmt::format("scales must be {} {} values (grid {}), found {} of {}",
                                         nblocks, want, shape_text(grid), scales.size(),
                                         std::string(py::str(scales.dtype()))));
  if (shape_of(scales) != grid)
    throw lpx::io::DataError(fmt::format("scales have shape {}, not the scale grid {}",
                                         shape_text(shape_of(scales)), shape_text(grid)));
  const py::array sc = py::array::ensure(scales, py::array::c_style);
  if (coded) {
    const auto* p = static_cast<const uint8_t*>(sc.data());
    q.scale_codes.assign(p, p + nblocks);
  } else {
    const auto* p = static_cast<const float*>(sc.data());
    q.scale_values.assign(p, p + nblocks);
  }
  if (q.format.two_level() != tensor_scale.has_value())
    throw lpx::io::DataError(q.format.two_level()
                                 ? "a two-level format needs a float32 tensor_scale of one value"
                                 : "tensor_scale is for two-level (e4m3-scaled) formats only, not " +
                                       q.format.spec());
  q.tensor_scale = tensor_scale;
  return q;
}

py::array dequantize(const py::array& codes, const py::array& scales,
                     std::optional<float> tensor_scale, const std::string& spec, int axis,
                     bool headroom, int threads, bool check_only) {
  const lpx::QuantizedTensor q = rebuild(codes, scales, tensor_scale, spec, axis, headroom);
  if (check_only) return py::none();
  CArray<float> y(std::vector<py::ssize_t>(q.shape.begin(), q.shape.end()));
  const std::span<float> o(y.mutable_data(), static_cast<size_t>(y.size()));
  {
    py::gil_scoped_release unlocked;
    lpx::dequantize(q, o, threads);
  }
  return y;
}

py::tuple pack(const CArray<uint8_t>& codes, int bits) {
  const lpx::Packing p = lpx::packing_for_bits(bits);
  std::vector<uint8_t> packed;
  {
    py::gil_scoped_release unlocked;
    packed = lpx::pack(view(codes), p);
  }
  const Shape shape{static_cast<int64_t>(packed.size())};
  return py::make_tuple(adopt(std::move(packed), shape), std::string(lpx::packing_name(p)));
}

py::array unpack(const CArray<uint8_t>& packed, int64_t n, int bits) {
  const lpx::Packing p = lpx::packing_for_bits(bits);
  std::vector<uint8_t> codes = lpx::unpack(view(packed), static_cast<size_t>(n), p);
  return adopt(std::move(codes), Shape{n});
}

// --- Hadamard ---------------------------------------------------------------------------

py::array hadamard(const CArray<float>& x, int64_t rows, int64_t cols, int axis, int n,
                   const std::optional<CArray<float>>& signs) {
  CArray<float> y(std::vector<py::ssize_t>(x.shape(), x.shape() + x.ndim()));
  std::memcpy(y.mutable_data(), x.data(), static_cast<size_t>(x.size()) * sizeof(float));
  std::span<const float> s;
  if (signs) s = view(*signs);
  {
    py::gil_scoped_release unlocked;
    lpx::hadamard_blocks(y.mutable_data(), rows, cols, axis, n, s);
  }
  return y;
}

py::array hadamard_signs(int n, uint64_t seed, uint32_t stream) {
  if (n < 1 || n > (1 << 20)) throw UsageError(fmt::format("n {} is not in [1, 1048576]", n));
  return adopt(lpx::hadamard_signs(n, seed, stream), Shape{n});
}

// --- analyze --------------------------------------------------------------------------

py::list analyze(const CArray<float>& x, const std::vector<std::string>& formats,
                 const std::string& round, uint64_t seed) {
  const Shape shape = shape_of(x);
  const lpx::Rounding r = lpx::rounding_by_name(round);
  for (const std::string& f : formats) lpx::check_analyze_format(f);  // all before any work
  std::vector<lpx::FormatErrors> rows(formats.size());
  {
    py::gil_scoped_release unlocked;
    for (size_t k = 0; k < formats.size(); ++k)
      rows[k] = lpx::analyze_format(view(x), shape, formats[k], r, seed);
  }
  py::list out;
  for (size_t k = 0; k < formats.size(); ++k) {
    const lpx::FormatErrors& e = rows[k];
    py::dict d;
    d["format"] = formats[k];
    d["elements"] = e.elements;
    d["nonfinite"] = e.nonfinite;
    d["sqnr_db"] = e.sqnr_db;
    d["mse"] = e.mse;
    d["max_abs_error"] = e.max_abs;
    d["max_rel_error"] = e.max_rel;
    d["flushed_pct"] = e.flushed_pct;
    d["saturated_pct"] = e.saturated_pct;
    d["clamped_blocks_pct"] = e.clamped_pct;
    d["note"] = e.note;
    out.append(d);
  }
  return out;
}

// --- tensor files ------------------------------------------------------------------------

// The tensors of a .npy / .safetensors file (io/tensor_file.hpp, the CLI's reader and its
// checks): {name: array}, float tensors as float32 (float16/bfloat16/float8 converted
// exactly, as the CLI converts them), uint8/uint16 tensors as codes. Copied out of the
// mapping (which is closed on return). A .npy tensor is named "".
py::dict load_tensors(const std::string& path, const std::vector<std::string>& names) {
  if (path != "-" && !(path.size() > 4 && (path.ends_with(".npy") || path.ends_with(".safetensors"))))
    throw UsageError(path + ": lpx.load reads .npy and .safetensors files");
  lpx::io::TensorFile file;
  {
    py::gil_scoped_release unlocked;
    file = lpx::io::read_tensor_file(path, {}, names);
  }
  py::dict out;
  for (const lpx::io::TensorRef& t : file.tensors) {
    const Shape shape = t.shape;
    const auto n = static_cast<size_t>(t.numel());
    if (t.dtype == lpx::io::DType::u8) {
      std::vector<uint8_t> v(n);
      if (n) std::memcpy(v.data(), t.bytes.data(), n);
      out[py::str(t.name)] = adopt(std::move(v), shape);
    } else if (t.dtype == lpx::io::DType::u16) {
      std::vector<uint16_t> v(n);
      if (n) std::memcpy(v.data(), t.bytes.data(), n * 2);
      out[py::str(t.name)] = adopt(std::move(v), shape);
    } else {
      out[py::str(t.name)] = adopt(lpx::io::to_float32(t), shape);
    }
  }
  return out;
}

// --- recipes and run logs -----------------------------------------------------------------

py::dict recipe_summary(const std::string& name_or_path) {
  const lpx::Recipe r = lpx::load_recipe(name_or_path);
  py::dict d;
  d["name"] = r.name;
  d["summary"] = r.summary;
  d["source"] = r.source;
  d["describe"] = r.describe();
  d["json"] = r.to_json();
  return d;
}

template <class T>
py::array_t<T> column(std::vector<T>& v) {
  const Shape shape{static_cast<int64_t>(v.size())};
  return adopt(std::move(v), shape);
}

py::dict read_run(const std::string& path) {
  lpx::runlog::Run run;
  {
    py::gil_scoped_release unlocked;
    run = lpx::runlog::read_run(path);
  }
  py::dict d;
  d["path"] = run.path;
  py::dict header;
  lpx::runlog::visit_header_strings(run.header, [&](const char* name, std::string& v) { header[name] = v; });
  header["seed"] = run.header.seed;
  d["header"] = header;
  py::dict metrics, eval;
  lpx::runlog::visit_metrics(run.metrics, [&](const char* name, auto, auto& v) { metrics[name] = column(v); });
  lpx::runlog::visit_eval(run.eval, [&](const char* name, auto, auto& v) { eval[name] = column(v); });
  d["metrics"] = metrics;
  d["eval"] = eval;
  lpx::runlog::QuantTable& q = run.quant;
  py::dict quant;
  const int64_t layers = static_cast<int64_t>(q.layers.size());
  const int64_t roles = static_cast<int64_t>(q.roles.size());
  quant["layers"] = q.layers;
  quant["layer_kinds"] = q.layer_kinds;
  quant["roles"] = q.roles;
  lpx::runlog::visit_quant(q, [&](const char* name, auto, auto& v) {
    const int64_t per_step = layers * roles;
    if (per_step > 0 && static_cast<int64_t>(v.size()) % per_step == 0)
      quant[name] = adopt(std::move(v), Shape{static_cast<int64_t>(v.size()) / per_step, layers, roles});
    else
      quant[name] = column(v);
  });
  py::list applied;
  for (lpx::AppliedOperand& a : q.applied) {
    py::dict row;
    lpx::runlog::visit_applied_strings(a, [&](const char* name, std::string& v) { row[name] = v; });
    lpx::runlog::visit_applied_ints(a, [&](const char* name, auto& v) { row[name] = v; });
    applied.append(row);
  }
  quant["applied"] = applied;  // L * 6 records, layer-major
  d["quant"] = quant;
  d["checkpoint_step"] = run.checkpoint_step;
  d["missing"] = run.missing;
  return d;
}

// --- recipes on a user's model (python/lpx/torch.py) ------------------------------------

lpx::LayerInfo::Kind layer_kind_by_name(const std::string& name) {
  for (auto k : {lpx::LayerInfo::linear, lpx::LayerInfo::attention_bmm, lpx::LayerInfo::embedding,
                 lpx::LayerInfo::head})
    if (lpx::layer_kind_name(k) == name) return k;
  throw UsageError("unknown layer kind '" + name + "' (expected linear, attention_bmm, embedding or head)");
}

// The C++ trainer's per-layer quantizer (recipes/operand.hpp), unchanged: the same keys,
// signs, delayed-scaling histories and high-precision layers as `lpx train`.
class Quantizer {
 public:
  Quantizer(const std::string& recipe, const std::string& name, int index, int count,
            const std::string& kind, uint64_t seed)
      : q_(lpx::load_recipe(recipe), lpx::LayerInfo{index, count, layer_kind_by_name(kind), name}, seed) {}

  // The role's operand, row-major (rows x cols) as operand.hpp says, quantized (a new
  // array), with the statistics and the applied record of the call.
  py::tuple apply(int role, const CArray<float>& x, uint64_t step) {
    if (role < 0 || role >= lpx::kGemmRoles) throw UsageError(fmt::format("role {} is not in [0, 5]", role));
    if (x.ndim() != 2) throw UsageError(fmt::format("an operand is 2-D (rows x cols), not {}-D", x.ndim()));
    const int64_t rows = x.shape(0), cols = x.shape(1);
    CArray<float> y(std::vector<py::ssize_t>{rows, cols});
    lpx::OperandStats stats;
    lpx::AppliedOperand applied;
    {
      py::gil_scoped_release unlocked;
      q_.apply(static_cast<lpx::GemmRole>(role), x.data(), y.mutable_data(), rows, cols, step, &stats,
               &applied);
    }
    return py::make_tuple(y, stats, applied);
  }
  std::vector<float> history(int role) const { return q_.history_values(static_cast<lpx::GemmRole>(role)); }
  void restore_history(int role, const std::vector<float>& v) {
    q_.restore_history(static_cast<lpx::GemmRole>(role), v);
  }
  bool high_precision() const { return q_.high_precision(); }
  std::string role_format(int role) const { return q_.spec(static_cast<lpx::GemmRole>(role)).format_name(); }

 private:
  lpx::OperandQuantizer q_;
};

// The run-log writer (runlog/run_log.hpp) for runs driven from Python.
class RunWriter {
 public:
  RunWriter(const std::string& path, const py::dict& header, const std::vector<std::string>& layers,
            const std::vector<std::string>& kinds) {
    lpx::runlog::Header h;
    h.lpx_version = lpx::kVersion;
    lpx::runlog::visit_header_strings(h, [&](const char* name, std::string& v) {
      if (header.contains(name)) v = py::cast<std::string>(header[name]);
    });
    if (header.contains("seed")) h.seed = py::cast<int64_t>(header["seed"]);
    h.format = lpx::runlog::format_name();
    log_ = lpx::runlog::RunLog::create(path, h, layers, kinds);
  }
  void append_step(int64_t step, double loss, float lr, double grad_norm, double update_ratio,
                   double adam_rms, double step_time_s,
                   const std::vector<lpx::runlog::LayerStats>& stats,
                   const std::vector<lpx::runlog::LayerApplied>& applied) {
    lpx::runlog::StepMetrics m{step, loss, lr, grad_norm, update_ratio, adam_rms, step_time_s};
    log_->append_step(m, stats, applied);
  }
  void append_eval(int64_t step, double loss, double accuracy) { log_->append_eval({step, loss, accuracy}); }
  void flush() { log_->flush(); }

 private:
  std::unique_ptr<lpx::runlog::RunLog> log_;
};

// The online divergence detectors (divergence/detectors.hpp), fed one step at a time as
// `lpx train` feeds them.
class Monitor {
 public:
  // detectors: as `lpx train --detectors` ("" the default set, "all", or a list).
  Monitor(const std::vector<std::string>& layers, const std::string& thresholds_json, const std::string& detectors)
      : layers_(layers.size()),
        m_(thresholds_json.empty() ? lpx::divergence::Thresholds{}
                                   : lpx::divergence::Thresholds::from_json(thresholds_json),
           layers, roles()),
        enabled_(lpx::divergence::parse_detector_list(detectors)) {}
  // flushed / saturated: (layers x 6) percentages of this step, or empty (not collected).
  py::list observe(int64_t step, double loss, double grad_norm, double update_ratio, double lr,
                   double adam_rms, const std::vector<float>& flushed, const std::vector<float>& saturated) {
    lpx::divergence::StepRecord r;
    r.step = step;
    r.loss = loss;
    r.grad_norm = grad_norm;
    r.update_ratio = update_ratio;
    r.lr = lr;
    r.adam_rms = adam_rms;
    const size_t cells = layers_ * lpx::kGemmRoles;
    if (!flushed.empty() || !saturated.empty()) {
      if (flushed.size() != cells || saturated.size() != cells)
        throw UsageError(fmt::format("statistics must hold {} values (layers x 6)", cells));
      r.flushed_pct = flushed.data();
      r.saturated_pct = saturated.data();
    }
    py::list out;
    for (const lpx::divergence::Flag& f : lpx::divergence::only(m_.observe(r), enabled_)) {
      py::dict d;
      d["step"] = f.step;
      d["detector"] = f.detector;
      d["layer"] = f.layer;
      d["operand"] = f.operand;
      d["evidence"] = f.evidence;
      d["describe"] = f.describe();
      out.append(d);
    }
    return out;
  }

 private:
  static std::vector<std::string> roles() {
    std::vector<std::string> v;
    for (lpx::GemmRole r : lpx::kAllGemmRoles) v.emplace_back(lpx::role_name(r));
    return v;
  }
  size_t layers_;
  lpx::divergence::Monitor m_;
  std::vector<std::string> enabled_;
};

}  // namespace

PYBIND11_MODULE(_core, m) {
  m.doc() = "lpx's C++ library (python/src/module.cpp); use the lpx package, not this module";
  m.attr("__version__") = std::string(lpx::kVersion);
  // Bad data is a ValueError like a bad argument: both carry the library's one line.
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const lpx::io::DataError& e) {
      PyErr_SetString(PyExc_ValueError, e.what());
    } catch (const lpx::runlog::LogError& e) {
      PyErr_SetString(PyExc_ValueError, e.what());
    }
  });

  m.def("format_names", [] {
    std::vector<std::string> names;
    for (const lpx::ElementFormat* f : lpx::named_formats()) names.emplace_back(f->name);
    return names;
  });
  m.def("format_aliases", [] {
    std::vector<std::pair<std::string, std::string>> v;
    for (const lpx::FormatAlias& a : lpx::format_aliases()) v.emplace_back(a.alias, a.canonical);
    return v;
  });
  m.def("block_presets", [] {
    std::vector<std::string> v;
    for (std::string_view s : lpx::block_preset_names()) v.emplace_back(s);
    return v;
  });
  m.def("canonical_block_spec", [](const std::string& spec) { return lpx::parse_block_format(spec).spec(); });
  m.def("element_bits", [](const std::string& spec) { return int(lpx::parse_block_format(spec).element.bits); });
  m.def("format_bits", [](const std::string& name) { return int(lpx::format_by_name(name).bits); });
  m.def("register_format_json", [](const std::string& text, const std::string& origin) {
    const lpx::ElementFormat f = lpx::io::format_from_descriptor_json(text, origin);
    lpx::register_format(f);
    return std::string(f.name);
  });
  m.def("format_info", &format_info);
  m.def("format_table", &format_table);
  m.def("rounding_check", [](const std::string& r) { lpx::rounding_by_name(r); });
  m.def("cast", &cast, py::arg("x"), py::arg("to"), py::arg("round"), py::arg("overflow"),
        py::arg("seed"), py::arg("stream"), py::arg("sr_bits"), py::arg("emit"), py::arg("threads"),
        py::arg("out"), py::arg("random_words"));
  m.def("decode", &decode, py::arg("codes"), py::arg("fmt"), py::arg("threads"), py::arg("out"));

  py::class_<QuantizeArgs>(m, "QuantizeArgs")
      .def(py::init<>())
      .def_readwrite("format", &QuantizeArgs::format)
      .def_readwrite("block", &QuantizeArgs::block)
      .def_readwrite("axis", &QuantizeArgs::axis)
      .def_readwrite("scale_rule", &QuantizeArgs::scale_rule)
      .def_readwrite("round", &QuantizeArgs::round)
      .def_readwrite("seed", &QuantizeArgs::seed)
      .def_readwrite("stream", &QuantizeArgs::stream)
      .def_readwrite("sr_bits", &QuantizeArgs::sr_bits)
      .def_readwrite("headroom_3_4", &QuantizeArgs::headroom_3_4)
      .def_readwrite("flush_subnormals", &QuantizeArgs::flush_subnormals)
      .def_readwrite("threads", &QuantizeArgs::threads)
      .def_readwrite("random_words", &QuantizeArgs::random_words);
  m.def("quantize", &quantize);
  m.def("cuda_available", [] { return lpx::kernels::cuda_available(); });
  m.def("cuda_cast", &cuda_cast);
  m.def("cuda_decode", &cuda_decode);
  m.def("cuda_fake_quantize", &cuda_fake_quantize);
  m.def("fake_quantize", &fake_quantize);
  m.def("dequantize", &dequantize, py::arg("codes"), py::arg("scales"), py::arg("tensor_scale"),
        py::arg("spec"), py::arg("axis"), py::arg("headroom_3_4"), py::arg("threads"),
        py::arg("check_only"));
  m.def("pack", &pack);
  m.def("unpack", &unpack);
  m.def("hadamard", &hadamard);
  m.def("hadamard_signs", &hadamard_signs);
  m.def("analyze", &analyze);
  m.attr("default_analyze_formats") = std::string(lpx::kDefaultAnalyzeFormats);
  m.def("recipe_names", [] {
    std::vector<std::string> v;
    for (std::string_view s : lpx::recipe_names()) v.emplace_back(s);
    return v;
  });
  m.def("recipe_summary", &recipe_summary);
  m.def("recipe_from_json", [](const std::string& text, const std::string& origin) {
    return lpx::Recipe::from_json(text, origin).to_json();
  });
  m.def("read_run", &read_run);
  m.def("load_tensors", &load_tensors);

  py::class_<lpx::OperandStats>(m, "OperandStats")
      .def(py::init<>())
      .def_readonly("elements", &lpx::OperandStats::elements)
      .def_readonly("amax", &lpx::OperandStats::amax)
      .def_readonly("flushed_pct", &lpx::OperandStats::flushed_pct)
      .def_readonly("saturated_pct", &lpx::OperandStats::saturated_pct)
      .def_readonly("sqnr_db", &lpx::OperandStats::sqnr_db)
      .def_readonly("clamped_blocks", &lpx::OperandStats::clamped_blocks);
  py::class_<lpx::AppliedOperand> applied(m, "AppliedOperand");
  applied.def(py::init<>()).def("as_dict", [](lpx::AppliedOperand& a) {
    py::dict d;
    lpx::runlog::visit_applied_strings(a, [&](const char* name, std::string& v) { d[name] = v; });
    lpx::runlog::visit_applied_ints(a, [&](const char* name, auto& v) { d[name] = v; });
    return d;
  });
  m.def("merge_stats", [](lpx::OperandStats total, const lpx::OperandStats& call) {
    lpx::merge_into(total, call);
    return total;
  });
  m.def("role_names", [] {
    std::vector<std::string> v;
    for (lpx::GemmRole r : lpx::kAllGemmRoles) v.emplace_back(lpx::role_name(r));
    return v;
  });
  // operand.hpp's call_key: the (seed, stream) of a role's SR (tag = role) or of a GEMM's
  // per-call RHT signs (tag = 8 + gemm) at a step; documented there so that other
  // implementations can reproduce them, and tested from Python against the quantizer.
  m.def("call_key", [](uint64_t seed, const std::string& name, int index, int count, const std::string& kind,
                       uint32_t tag, uint64_t step) {
    const lpx::CallKey k = lpx::call_key(seed, lpx::LayerInfo{index, count, layer_kind_by_name(kind), name}, tag, step);
    return py::make_tuple(k.seed, k.stream);
  });
  m.attr("fixed_sign_stream") = lpx::kFixedSignStream;
  py::class_<Quantizer>(m, "Quantizer")
      .def(py::init<const std::string&, const std::string&, int, int, const std::string&, uint64_t>())
      .def("apply", &Quantizer::apply)
      .def("history", &Quantizer::history)
      .def("restore_history", &Quantizer::restore_history)
      .def("high_precision", &Quantizer::high_precision)
      .def("role_format", &Quantizer::role_format);
  py::class_<Monitor>(m, "Monitor")
      .def(py::init<const std::vector<std::string>&, const std::string&, const std::string&>())
      .def("observe", &Monitor::observe);
  py::class_<RunWriter>(m, "RunWriter")
      .def(py::init<const std::string&, const py::dict&, const std::vector<std::string>&,
                    const std::vector<std::string>&>())
      .def("append_step", &RunWriter::append_step)
      .def("append_eval", &RunWriter::append_eval)
      .def("flush", &RunWriter::flush);
}
