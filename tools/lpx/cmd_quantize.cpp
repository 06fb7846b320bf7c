// `lpx quantize` (float tensor -> block-scaled format, as fake-quantized values or as
// packed codes + scales) and `lpx dequantize` (packed form -> float32). The algorithms
// are formats/quantize.hpp's; this file reads, validates and writes files.
//
// Packed output, .safetensors (one file): tensors
//   "codes"         U8, 1-D: the element codes packed as packing.hpp says (metadata
//                   "packing"), in the C order of the logical shape
//   "scales"        U8 (e8m0 / e4m3 codes) or F32 (pow2 / fp32 decode scales), shaped as
//                   the scale grid
//   "tensor_scale"  F32 [1], the NVFP4 tensor decode scale s_dec (two-level formats only)
// and __metadata__: format (the canonical spec), shape ("D0xD1x..."; "" for 0-D), axis,
// packing, element_bits, headroom_3_4 ("0"/"1"), producer.
// Packed output, .npy: OUT holds the packed codes (uint8, 1-D), OUT with ".npy" replaced
// by ".scales.npy" the scales, and ".tensor_scale.npy" the tensor scale when there is
// one; .npy carries no metadata, so `lpx dequantize` then needs --format and --shape
// (and --axis / --headroom-3-4 when they were used). The two or three files are one
// output, committed together (io::commit_together: all written first, then renamed, the
// codes file last; a failure leaves the old set as it was).
// An input with no elements is refused ("empty input"), as by every tensor command.
#include <algorithm>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "cli_util.hpp"
#include "command.hpp"
#include "lpx/formats/block_format.hpp"
#include "lpx/formats/codec.hpp"
#include "lpx/formats/packing.hpp"
#include "lpx/formats/quantize.hpp"
#include "lpx/io/tensor_file.hpp"

namespace lpx::cli {
namespace {

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string s;
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? "x" : "") + std::to_string(shape[i]);
  return s;
}

// OUT.npy -> OUT.<what>.npy
std::string sibling(const std::string& out, const std::string& what) {
  return out.substr(0, out.size() - 4) + "." + what + ".npy";
}

struct QuantizeArgs {
  std::string format, scale_rule, round = "rne", shape, emit = "values", tensor, in, out;
  std::string random_words;  // --random-words FILE
  int64_t block = 0;
  int axis = 0;
  uint64_t seed = 0;
  uint32_t stream = 0;
  int sr_bits = kMaxSrBits;
  int threads = 0;
  bool headroom = false, flush = false;
};

// The block format from --format and the overriding options.
BlockFormat resolve_format(const QuantizeArgs& a, const CLI::App& cmd) {
  BlockFormat f = parse_block_format(a.format);
  const bool along_axis =
      f.block.kind == BlockShape::Kind::vector || f.block.kind == BlockShape::Kind::channel;
  if (cmd.count("--block")) {
    if (f.block.kind != BlockShape::Kind::vector)
      throw UsageError(fmt::format("--block applies to 1xN block formats, not '{}'", a.format));
    if (a.block < 1) throw UsageError("--block must be >= 1");
    f.block.length = a.block;
  }
  if (cmd.count("--axis")) {
    if (!along_axis)
      throw UsageError(fmt::format(
          "--axis applies to 1xN and per-channel blocks; '{}' has tiles or one block", a.format));
    f.block.axis = a.axis;
  }
  if (cmd.count("--scale-rule")) {
    if (!f.power_of_two_scale())
      throw UsageError(fmt::format("--scale-rule applies to e8m0 and pow2 scales, not {} ('{}')",
                                   scale_format_name(f.scale), a.format));
    f.rule = scale_rule_by_name(a.scale_rule);
  }
  f.preset.clear();
  return f;
}

// The float32 input (cli_util's read_float_input): float32 files stay memory-mapped,
// other float dtypes are converted exactly; `data` is the tensor in C order.
using Input = FloatInput;

// How the command streams a tensor through a small buffer: pieces made of whole
// `granule`-element units, each quantized as a tensor of its own (flat: 1-D; else: a
// few slices along axis 0, the other axes whole) whose blocks are exactly the whole
// tensor's, with sr keyed by the piece's first flat index (QuantizeOptions::index_offset)
// and tensor-wide scales (per-tensor blocks, NVFP4's tensor scale) from the whole
// tensor's amax, taken in a first pass (QuantizeOptions::whole_tensor_amax).
// granule 0: no such pieces (a 0-D tensor, or per-channel blocks along axis 0, each of
// which spans every slice).
struct Pieces {
  int64_t granule = 0;
  bool flat = false;
};

Pieces stream_pieces(const std::vector<int64_t>& shape, const BlockFormat& f) {
  const int rank = static_cast<int>(shape.size());
  const BlockShape& b = f.block;
  if (rank == 0) return {};
  if (b.kind == BlockShape::Kind::tensor) return {1, true};
  const int axis = b.axis < 0 ? b.axis + rank : b.axis;
  // A block (or tile) longer than its axis is one ragged block of the whole axis
  // (docs/formats.md#edge-semantics): the extents below are clamped to the shape, which
  // changes no block and keeps the products within the element count.
  const int64_t length = std::min(b.length, shape[static_cast<size_t>(axis)]);
  // Blocks of L along the last axis tile the flat array when L divides the rows (not when
  // L is longer than the rows: each row is then one block).
  if (b.kind == BlockShape::Kind::vector && axis == rank - 1 &&
      (rank == 1 || shape.back() % b.length == 0))
    return {length, true};
  if (rank < 2) return {};
  int64_t slice = 1;
  for (int d = 1; d < rank; ++d) slice *= shape[static_cast<size_t>(d)];
  if (b.kind == BlockShape::Kind::tile)
    return {rank == 2 ? std::min(b.rows, shape[0]) * slice : slice, false};
  if (axis != 0) return {slice, false};  // blocks inside each slice along axis 0
  if (b.kind == BlockShape::Kind::vector) return {length * slice, false};  // L slices
  return {};
}

// Whether a scale depends on the whole tensor (the first pass of a streamed run).
bool tensor_wide_scale(const BlockFormat& f) {
  return f.two_level() || f.block.kind == BlockShape::Kind::tensor;
}

// Calls fn(piece, options) for pieces of about 2^20 elements (a multiple of `multiple`
// where whole units allow), in order; options carry the piece's index_offset.
template <class Fn>
void for_each_piece(const Input& in, const Pieces& pieces, size_t multiple,
                    const QuantizeOptions& opt, Fn fn) {
  const size_t n = in.data.size();
  const size_t granule = static_cast<size_t>(pieces.granule);
  size_t per_piece = std::max<size_t>(1, (size_t{1} << 20) / granule) * granule;
  while (per_piece % multiple != 0) per_piece += granule;
  for (size_t first = 0; first < n; first += per_piece) {
    const size_t count = std::min(per_piece, n - first);
    std::vector<int64_t> shape = in.shape;
    if (pieces.flat) {
      shape = {static_cast<int64_t>(count)};
    } else {
      shape[0] = static_cast<int64_t>(count) / (static_cast<int64_t>(n) / in.shape[0]);
    }
    QuantizeOptions o = opt;
    o.index_offset = first;
    fn(TensorView<const float>{in.data.subspan(first, count), shape}, o);
  }
}

// fake_quantize_values piece by piece into one reused buffer, each piece appended to
// OUT: no whole-tensor output buffer is allocated, faulted in or copied.
void quantize_values_streamed(const Input& in, const Pieces& pieces, const BlockFormat& f,
                              const QuantizeOptions& opt, const std::string& path,
                              const std::string& name) {
  std::vector<float> buffer;
  io::OutputFile out(path, io::DType::f32, in.shape, name);
  for_each_piece(in, pieces, 1, opt, [&](TensorView<const float> x, const QuantizeOptions& o) {
    buffer.resize(x.data.size());
    fake_quantize_values(x, buffer, f, o);
    out.append(as_bytes_of(buffer));
  });
  out.commit();
}

// The __metadata__ of a packed .safetensors file (see the header comment).
std::vector<std::pair<std::string, std::string>> packed_metadata(const BlockFormat& resolved,
                                                                 const std::vector<int64_t>& shape,
                                                                 Packing p, bool headroom) {
  return {{"format", resolved.spec()},
          {"shape", shape_text(shape)},
          {"axis", std::to_string(resolved.block.axis)},
          {"packing", std::string(packing_name(p))},
          {"element_bits", std::to_string(resolved.element.bits)},
          {"headroom_3_4", headroom ? "1" : "0"},
          {"producer", "lpx quantize"}};
}

// --emit packed to .npy: the codes file (already written to `codes`, not committed),
// OUT.scales.npy and OUT.tensor_scale.npy when there is one, committed together with the
// codes file last (io::commit_together): every file is replaced or none is.
void commit_packed_npy(const std::string& path, io::OutputFile& codes, const io::TensorOut& scales,
                       const io::TensorOut* tensor_scale) {
  io::OutputFile scales_file(sibling(path, "scales"), scales.dtype, scales.shape);
  scales_file.append(scales.bytes);
  std::vector<io::OutputFile*> files = {&scales_file};
  std::unique_ptr<io::OutputFile> ts_file;
  if (tensor_scale != nullptr) {
    ts_file = std::make_unique<io::OutputFile>(sibling(path, "tensor_scale"), tensor_scale->dtype,
                                               tensor_scale->shape);
    ts_file->append(tensor_scale->bytes);
    files.push_back(ts_file.get());
  }
  files.push_back(&codes);
  io::commit_together(files);
}

// --emit packed piece by piece: each piece's codes are packed and appended at once; its
// scales, a 1/block-size stream, are kept and written after the codes (.safetensors: in
// the same file; .npy: the sibling files, before the codes file is committed). Pieces
// hold a multiple of 8 codes, so that each packs into whole bytes exactly as the whole
// tensor would.
void quantize_packed_streamed(const Input& in, const Pieces& pieces, const BlockFormat& f,
                              const QuantizeOptions& opt, const std::string& path) {
  const int rank = static_cast<int>(in.shape.size());
  const Packing p = packing_for_bits(f.element.bits);
  const std::vector<int64_t> grid = scale_grid_shape(in.shape, f);
  size_t nscales = 1;
  for (int64_t d : grid) nscales *= static_cast<size_t>(d);
  const bool coded = f.scale_is_code();
  BlockFormat resolved = f;  // the axis as quantize() reports it for the whole tensor
  if (f.block.kind == BlockShape::Kind::vector || f.block.kind == BlockShape::Kind::channel)
    resolved.block.axis = f.block.axis < 0 ? f.block.axis + rank : f.block.axis;
  const auto sized = [](size_t bytes) {  // a layout entry: only the size is read
    return std::span<const std::byte>(static_cast<const std::byte*>(nullptr), bytes);
  };
  const size_t code_bytes = packed_size(in.data.size(), p);
  const std::vector<int64_t> codes_shape = {static_cast<int64_t>(code_bytes)};
  const io::DType scale_dtype = coded ? io::DType::u8 : io::DType::f32;
  const bool npy = ends_with(path, ".npy");
  std::unique_ptr<io::OutputFile> out;
  if (npy) {
    out = std::make_unique<io::OutputFile>(path, io::DType::u8, codes_shape);
  } else {
    std::vector<io::TensorOut> layout = {
        {"codes", io::DType::u8, codes_shape, sized(code_bytes)},
        {"scales", scale_dtype, grid, sized(nscales * (coded ? 1 : 4))}};
    if (f.two_level()) layout.push_back({"tensor_scale", io::DType::f32, {1}, sized(4)});
    out = std::make_unique<io::OutputFile>(path, layout,
                                       packed_metadata(resolved, in.shape, p, opt.headroom_3_4));
  }
  std::vector<uint8_t> scale_codes;
  std::vector<float> scale_values, tensor_scale;
  for_each_piece(in, pieces, 8, opt, [&](TensorView<const float> x, const QuantizeOptions& o) {
    const QuantizedTensor q = quantize(x, f, o);
    if (p == Packing::byte) out->append(as_bytes_of(q.codes));  // packed already
    else out->append(as_bytes_of(pack(q.codes, p)));
    if (f.block.kind == BlockShape::Kind::tensor) {  // every piece's one scale is the whole's
      scale_codes.clear();
      scale_values.clear();
    }
    scale_codes.insert(scale_codes.end(), q.scale_codes.begin(), q.scale_codes.end());
    scale_values.insert(scale_values.end(), q.scale_values.begin(), q.scale_values.end());
    if (q.tensor_scale) tensor_scale = {*q.tensor_scale};  // every piece's is the whole's
  });
  if ((coded ? scale_codes.size() : scale_values.size()) != nscales ||
      tensor_scale.size() != (f.two_level() ? 1u : 0u))
    throw std::logic_error("quantize_packed_streamed: the pieces' scales do not tile the grid");
  const auto scale_bytes = coded ? as_bytes_of(scale_codes) : as_bytes_of(scale_values);
  if (!npy) {
    out->append(scale_bytes);
    if (f.two_level()) out->append(as_bytes_of(tensor_scale));
    out->commit();
    return;
  }
  // .npy: the codes file is committed together with its siblings, last.
  const io::TensorOut ts{"tensor_scale", io::DType::f32, {1}, as_bytes_of(tensor_scale)};
  commit_packed_npy(path, *out, io::TensorOut{"scales", scale_dtype, grid, scale_bytes},
                    f.two_level() ? &ts : nullptr);
}

void run_quantize(const QuantizeArgs& a, const CLI::App& cmd) {
  BlockFormat f = resolve_format(a, cmd);
  QuantizeOptions opt;
  opt.round = rounding_by_name(a.round);
  opt.seed = a.seed;
  opt.stream = a.stream;
  opt.sr_bits = a.sr_bits;
  opt.threads = a.threads;
  opt.headroom_3_4 = a.headroom;
  opt.flush_subnormal_inputs = a.flush;
  if ((cmd.count("--seed") || cmd.count("--sr-bits") || cmd.count("--stream")) &&
      !is_stochastic(opt.round))
    throw UsageError("--seed, --stream and --sr-bits need --round sr (or sr-fast, sr-rne, sr-odd)");
  if (a.emit != "values" && a.emit != "packed")
    throw UsageError("--emit must be values or packed, not '" + a.emit + "'");
  const bool given_words = cmd.count("--random-words") > 0;
  if (given_words && !is_stochastic(opt.round))
    throw UsageError("--random-words needs a stochastic --round (sr, sr-fast, sr-rne, sr-odd)");
  if (given_words && (cmd.count("--seed") || cmd.count("--stream")))
    throw UsageError("--random-words replaces the Philox stream: drop --seed and --stream");
  if (a.emit == "packed" && !ends_with(a.out, ".safetensors") && !ends_with(a.out, ".npy"))
    throw UsageError("--emit packed writes .safetensors or .npy; OUT must end so");

  const Input in = read_float_input(a.in, a.shape, a.tensor);
  std::vector<uint32_t> words;
  if (given_words) {
    words = read_random_words(a.random_words, in.data.size());
    opt.random_words = words.data();
    opt.random_words_count = words.size();
  }
  const int rank = static_cast<int>(in.shape.size());
  // A 1xN block longer than its axis is one ragged block (docs/formats.md#edge-semantics).
  // A 0-D tensor is one element with one axis, as in the library (axis 0 or -1).
  if (f.block.kind == BlockShape::Kind::vector || f.block.kind == BlockShape::Kind::channel) {
    const int axis = f.block.axis < 0 ? f.block.axis + std::max(rank, 1) : f.block.axis;
    if (axis < 0 || axis >= std::max(rank, 1))
      throw UsageError(fmt::format("--axis {} is out of range for a tensor of shape {} (rank {})",
                                   f.block.axis, shape_text(in.shape), rank));
  }
  const Pieces pieces = stream_pieces(in.shape, f);
  if (pieces.granule > 0 && tensor_wide_scale(f))
    opt.whole_tensor_amax = tensor_amax({in.data, in.shape}, f, opt);
  if (a.emit == "values") {
    // Fused: scale, cast and dequantize per block in one pass, no codes materialised
    // (bit-identical to dequantize(quantize(x)), formats_test_block_*).
    const std::string name = a.tensor.empty() ? "values" : a.tensor;
    if (pieces.granule > 0) {
      quantize_values_streamed(in, pieces, f, opt, a.out, name);
      return;
    }
    // Per-channel blocks along axis 0 (and 0-D tensors): one call. Not zero-filled
    // first: every element is written.
    const auto out = std::make_unique_for_overwrite<float[]>(in.data.size());
    const std::span<float> values(out.get(), in.data.size());
    fake_quantize_values({in.data, in.shape}, values, f, opt);
    io::OutputFile file(a.out, io::DType::f32, in.shape, name);
    file.append(std::as_bytes(values));
    file.commit();
    return;
  }
  if (pieces.granule > 0) {
    quantize_packed_streamed(in, pieces, f, opt, a.out);
    return;
  }
  const QuantizedTensor q = quantize({in.data, in.shape}, f, opt);
  const Packing p = packing_for_bits(q.format.element.bits);
  const std::vector<uint8_t> packed = pack(q.codes, p);
  const std::vector<int64_t> codes_shape = {static_cast<int64_t>(packed.size())};
  const bool coded = !q.scale_codes.empty() || q.scale_values.empty();
  const io::TensorOut scales = coded ? io::TensorOut{"scales", io::DType::u8, q.scale_shape, as_bytes_of(q.scale_codes)}
                                 : io::TensorOut{"scales", io::DType::f32, q.scale_shape, as_bytes_of(q.scale_values)};
  const std::vector<float> ts = q.tensor_scale ? std::vector<float>{*q.tensor_scale} : std::vector<float>{};
  const io::TensorOut codes{"codes", io::DType::u8, codes_shape, as_bytes_of(packed)};
  const io::TensorOut tensor_scale{"tensor_scale", io::DType::f32, {1}, as_bytes_of(ts)};
  if (ends_with(a.out, ".safetensors")) {
    std::vector<io::TensorOut> tensors = {codes, scales};
    if (q.tensor_scale) tensors.push_back(tensor_scale);
    io::write_safetensors(a.out, tensors, packed_metadata(q.format, q.shape, p, q.headroom_3_4));
    return;
  }
  // .npy: two or three files, committed together.
  io::OutputFile codes_file(a.out, io::DType::u8, codes_shape);
  codes_file.append(codes.bytes);
  commit_packed_npy(a.out, codes_file, scales, q.tensor_scale ? &tensor_scale : nullptr);
}

struct DequantizeArgs {
  std::string in, out, format, shape;
  int axis = -1;
  bool headroom = false;
  int threads = 0;
};

const io::TensorRef& find_tensor(const io::TensorFile& f, const std::string& name, const std::string& path) {
  for (const auto& t : f.tensors)
    if (t.name == name) return t;
  throw io::DataError(fmt::format("{}: no tensor '{}' (is it the output of `lpx quantize --emit packed`?)",
                              path, name));
}

void run_dequantize(const DequantizeArgs& a, const CLI::App& cmd) {
  const std::string shown = io::printable(a.in);  // the path as messages show it
  QuantizedTensor q;
  io::TensorFile file, scales_file, ts_file;
  const io::TensorRef* codes = nullptr;
  const io::TensorRef* scales = nullptr;
  const io::TensorRef* ts = nullptr;
  std::string packing;
  if (ends_with(a.in, ".safetensors")) {
    if (cmd.count("--format") || cmd.count("--shape") || cmd.count("--axis") || a.headroom)
      throw UsageError("--format, --shape, --axis and --headroom-3-4 apply to .npy inputs; a "
                       ".safetensors input carries them in its metadata");
    file = io::read_tensor_file(a.in);
    std::map<std::string, std::string> meta(file.metadata.begin(), file.metadata.end());
    for (const char* key : {"format", "shape", "axis", "packing"})
      if (!meta.count(key))
        throw io::DataError(fmt::format("{}: metadata lacks '{}' (not written by `lpx quantize "
                                    "--emit packed`?)",
                                    shown, key));
    try {
      q.format = parse_block_format(meta["format"]);
      q.format.block.axis = static_cast<int>(parse_int(meta["axis"], "axis", INT_MIN, INT_MAX));
      q.shape = meta["shape"].empty() ? std::vector<int64_t>{} : io::parse_shape(meta["shape"]);
      scale_grid_shape(q.shape, q.format);  // an axis beyond the shape's rank
    } catch (const std::exception& e) {
      throw io::DataError(fmt::format("{}: bad metadata: {}", shown, io::printable(e.what())));
    }
    q.headroom_3_4 = meta.count("headroom_3_4") && meta["headroom_3_4"] == "1";
    packing = meta["packing"];
    codes = &find_tensor(file, "codes", shown);
    scales = &find_tensor(file, "scales", shown);
    for (const auto& t : file.tensors)
      if (t.name == "tensor_scale") ts = &t;
  } else if (ends_with(a.in, ".npy")) {
    if (a.format.empty() || a.shape.empty())
      throw UsageError("a .npy packed input needs --format and --shape (.npy has no metadata)");
    q.format = parse_block_format(a.format);
    if (cmd.count("--axis")) q.format.block.axis = a.axis;
    q.shape = io::parse_shape(a.shape);
    q.headroom_3_4 = a.headroom;
    file = io::read_tensor_file(a.in);
    scales_file = io::read_tensor_file(sibling(a.in, "scales"));
    codes = &file.tensors.front();
    scales = &scales_file.tensors.front();
    if (q.format.two_level()) {
      ts_file = io::read_tensor_file(sibling(a.in, "tensor_scale"));
      ts = &ts_file.tensors.front();
    }
  } else {
    throw UsageError("dequantize reads the .safetensors or .npy written by `lpx quantize --emit packed`");
  }

  const ElementFormat& e = q.format.element;
  const Packing p = packing_for_bits(e.bits);
  if (!packing.empty() && packing != packing_name(p))
    throw io::DataError(fmt::format("{}: packing '{}' does not match {} ({})", shown,
                                    io::printable(packing), e.name_view(), packing_name(p)));
  int64_t numel = 1;
  for (auto d : q.shape) numel *= d;
  const size_t n = static_cast<size_t>(numel);
  if (codes->dtype != io::DType::u8 || codes->bytes.size() != packed_size(n, p))
    throw io::DataError(fmt::format("{}: codes must be {} uint8 bytes for shape {}, found {} bytes of {}",
                                shown, packed_size(n, p), shape_text(q.shape), codes->bytes.size(),
                                io::dtype_name(codes->dtype)));
  q.codes = unpack(std::span(reinterpret_cast<const uint8_t*>(codes->bytes.data()), codes->bytes.size()), n, p);
  for (size_t i = 0; i < n; ++i)
    if (q.codes[i] > e.code_mask)
      throw io::DataError(fmt::format("{}: code {} at element {} does not fit {} ({} bits)", shown,
                                  q.codes[i], i, e.name_view(), e.bits));
  const std::vector<int64_t> grid = scale_grid_shape(q.shape, q.format);
  int64_t nblocks = 1;
  for (auto d : grid) nblocks *= d;
  const bool coded = q.format.scale_is_code();
  const io::DType want = coded ? io::DType::u8 : io::DType::f32;
  if (scales->dtype != want || scales->numel() != nblocks)
    throw io::DataError(fmt::format("{}: scales must be {} {} values (grid {}), found {} of {}", shown,
                                nblocks, io::dtype_name(want), shape_text(grid), scales->numel(),
                                io::dtype_name(scales->dtype)));
  if (coded) {
    q.scale_codes.resize(static_cast<size_t>(nblocks));
    std::memcpy(q.scale_codes.data(), scales->bytes.data(), q.scale_codes.size());
  } else {
    q.scale_values = io::to_float32(*scales);
  }
  if (q.format.two_level()) {
    if (ts == nullptr || ts->dtype != io::DType::f32 || ts->numel() != 1)
      throw io::DataError(fmt::format("{}: a two-level format needs a float32 tensor_scale of one value", shown));
    q.tensor_scale = io::to_float32(*ts)[0];
  }
  std::vector<float> out(n);
  dequantize(q, out, a.threads);
  write_by_extension(a.out, io::DType::f32, q.shape, as_bytes_of(out));
}

const bool registered_quantize = register_command(40, [](CLI::App& app) {
  auto args = std::make_shared<QuantizeArgs>();
  CLI::App* cmd = app.add_subcommand(
      "quantize", "quantize a float tensor to a block-scaled format (MX, NVFP4, FP8 blocks, ...)");
  cmd->add_option("--format", args->format,
                  "block format: a preset (mxfp8_e4m3, mxfp8_e5m2, mxfp6_e3m2, mxfp6_e2m3, mxfp4, "
                  "mxint8, nvfp4, nvfp4_2d, fp8_tensor, fp8_block128, fp8_block128x128) or "
                  "ELEMENT:BLOCK[:SCALE[:RULE]] with BLOCK bN|RxC|row|tensor, SCALE "
                  "e8m0|pow2|fp32|e4m3, RULE floor|rceil|ceil|even")
      ->required();
  add_int_option(cmd, "--block", args->block, 1, INT64_MAX,
                 "block length N >= 1 of a 1xN format (overrides the format's; a block longer "
                 "than its axis is one ragged block)");
  add_int_option(cmd, "--axis", args->axis, INT_MIN, INT_MAX,
                 "axis the 1xN blocks run along (default -1, the last; -rank..rank-1)");
  cmd->add_option("--scale-rule", args->scale_rule, "floor|rceil|ceil|even (e8m0 and pow2 scales)");
  cmd->add_option("--round", args->round, "element rounding: rne (default), rna, rtz, rup, rdn, rto, sr, sr-fast, sr-rne, sr-odd");
  add_seed_option(cmd, args->seed, "stochastic rounding seed (with --round sr; 0..2^64-1)");
  add_int_option(cmd, "--stream", args->stream, 0, UINT32_MAX,
                 "stochastic rounding stream (with --round sr; 0..2^32-1)");
  add_int_option(cmd, "--sr-bits", args->sr_bits, 1, kMaxSrBits,
                 "random bits per stochastic rounding (1-32)");
  cmd->add_option("--random-words", args->random_words,
                  "file of one little-endian uint32 per element, used instead of Philox (the "
                  "top --sr-bits bits are r)");
  cmd->add_option("--shape", args->shape, "shape of a raw float32 input, e.g. 128x4096");
  cmd->add_option("--emit", args->emit,
                  "values: fake-quantized float32 (.npy, .safetensors or raw by OUT's extension); "
                  "packed: packed codes + scales (.safetensors, or .npy + .scales.npy)");
  cmd->add_option("--tensor", args->tensor, "the tensor to read from a .safetensors input");
  add_threads_option(cmd, args->threads, "threads (0: all, at most 1024; results never depend on it)");
  cmd->add_flag("--headroom-3-4", args->headroom,
                "multiply elements by 3/4 after choosing the scale (SR never clips); dequantize "
                "divides by 0.75");
  cmd->add_flag("--flush-subnormals", args->flush, "zero float32-subnormal inputs first");
  cmd->add_option("IN", args->in, "input tensor (.f32 raw, .npy, .safetensors; - for stdin)")->required();
  cmd->add_option("OUT", args->out, "output file")->required();
  cmd->footer(
      "Examples:\n"
      "  lpx quantize --format mxfp4 --shape 64x4096 x.f32 xq.f32\n"
      "  lpx quantize --format mxfp8_e4m3 --scale-rule rceil --axis 0 w.npy wq.npy\n"
      "  lpx quantize --format nvfp4 --round sr --seed 7 g.npy gq.npy\n"
      "  lpx quantize --format e2m1:b32:e8m0:rceil --emit packed x.npy x.mxfp4.safetensors\n"
      "  lpx dequantize x.mxfp4.safetensors x_back.npy\n");
  cmd->callback([args, cmd] { run_quantize(*args, *cmd); });
  return;
});

const bool registered_dequantize = register_command(41, [](CLI::App& app) {
  auto args = std::make_shared<DequantizeArgs>();
  CLI::App* cmd = app.add_subcommand(
      "dequantize", "packed codes + scales (from `lpx quantize --emit packed`) to float32");
  cmd->add_option("--format", args->format, "block format (.npy inputs only)");
  cmd->add_option("--shape", args->shape, "logical shape D0xD1x... (.npy inputs only)");
  add_int_option(cmd, "--axis", args->axis, INT_MIN, INT_MAX,
                 "block axis used when quantizing (.npy inputs only)");
  cmd->add_flag("--headroom-3-4", args->headroom, "the input was quantized with --headroom-3-4 (.npy only)");
  add_threads_option(cmd, args->threads, "threads (0: all, at most 1024)");
  cmd->add_option("IN", args->in, "packed .safetensors (or codes .npy beside its .scales.npy)")->required();
  cmd->add_option("OUT", args->out, "float32 output (.npy, .safetensors or raw by extension)")->required();
  cmd->footer(
      "Examples:\n"
      "  lpx dequantize x.mxfp4.safetensors x_back.f32\n"
      "  lpx dequantize --format mxfp4 --shape 64x4096 codes.npy x_back.npy   (codes.scales.npy beside)\n");
  cmd->callback([args, cmd] { run_dequantize(*args, *cmd); });
});

}  // namespace
}  // namespace lpx::cli
