// `lpx cast` (float32 -> codes or fake-quantized values) and `lpx decode` (codes ->
// float32): element casts over whole files, through the array executions of the codec.
#include <algorithm>
#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "cli_util.hpp"
#include "command.hpp"
#include "lpx/formats/cast.hpp"
#include "lpx/formats/codec.hpp"

namespace lpx::cli {
namespace {

struct CastArgs {
  std::string to, round = "rne", overflow = "ieee", emit = "codes", shape, tensor, in, out;
  std::string random_words;  // --random-words FILE
  uint64_t seed = 0;
  uint32_t stream = 0;
  int sr_bits = kMaxSrBits;
  int threads = 0;
};

// Runs cast(x, y, options) over pieces of 2^20 elements into one reused buffer and
// appends each piece to the output file. options.index_offset keys stochastic rounding
// by each element's flat index in the whole tensor, so the bits equal one whole-tensor
// call; each piece still runs on every thread.
template <class Out, class Cast>
void cast_streamed(const FloatInput& in, const std::string& path, io::DType dtype,
                   const std::string& name, const CastOptions& opt, Cast cast) {
  constexpr size_t kPiece = size_t{1} << 20;
  const size_t n = in.data.size();
  std::vector<Out> buffer(std::min(n, kPiece));
  io::OutputFile out(path, dtype, in.shape, name);
  for (size_t first = 0; first < n; first += kPiece) {
    const size_t count = std::min(kPiece, n - first);
    CastOptions o = opt;
    o.index_offset = opt.index_offset + first;
    const std::span<Out> piece(buffer.data(), count);
    cast(in.data.subspan(first, count), piece, o);
    out.append(std::as_bytes(piece));
  }
  out.commit();
}

void run_cast(const CastArgs& a, const CLI::App& cmd) {
  const ElementFormat f = parse_format(a.to);
  CastOptions opt;
  opt.round = rounding_by_name(a.round);
  opt.overflow = parse_overflow(a.overflow);
  opt.seed = a.seed;
  opt.stream = a.stream;
  opt.sr_bits = a.sr_bits;
  opt.threads = a.threads;
  const bool sr_options = cmd.count("--seed") || cmd.count("--sr-bits") || cmd.count("--stream");
  if (sr_options && !is_stochastic(opt.round))
    throw UsageError("--seed, --stream and --sr-bits need --round sr (or sr-fast, sr-rne, sr-odd)");
  if (a.emit != "codes" && a.emit != "values")
    throw UsageError("--emit must be codes or values, not '" + a.emit + "'");
  const bool given_words = cmd.count("--random-words") > 0;
  if (given_words && !is_stochastic(opt.round))
    throw UsageError("--random-words needs a stochastic --round (sr, sr-fast, sr-rne, sr-odd)");
  if (given_words && (cmd.count("--seed") || cmd.count("--stream")))
    throw UsageError("--random-words replaces the Philox stream: drop --seed and --stream");

  const FloatInput in = read_float_input(a.in, a.shape, a.tensor);
  std::vector<uint32_t> words;
  if (given_words) {
    words = read_random_words(a.random_words, in.data.size());
    opt.random_words = words.data();
    opt.random_words_count = words.size();
  }
  // The result goes to the file in cache-sized pieces (tensor_io: io::OutputFile): the input
  // is memory-mapped and no whole-tensor buffer is allocated, zeroed or copied.
  if (a.emit == "values") {
    cast_streamed<float>(in, a.out, io::DType::f32, "values", opt,
                         [&](auto x, auto y, const CastOptions& o) { fake_cast_array(x, y, f, o); });
  } else if (f.bits <= 8) {
    cast_streamed<uint8_t>(in, a.out, io::DType::u8, "codes", opt,
                           [&](auto x, auto y, const CastOptions& o) { encode_array(x, y, f, o); });
  } else {
    cast_streamed<uint16_t>(in, a.out, io::DType::u16, "codes", opt,
                            [&](auto x, auto y, const CastOptions& o) { encode_array(x, y, f, o); });
  }
}

struct DecodeArgs {
  std::string from, shape, tensor, in, out;
};

// Codes: raw (one byte per code, or little-endian uint16 for formats wider than 8 bits),
// a .npy of uint8/uint16, or a U8/U16 tensor of a .safetensors file (--tensor picks one);
// stdin by its content (io::detect_kind). A float tensor holds values, not codes, and a
// code with bits above the format's width is bad data.
void run_decode(const DecodeArgs& a) {
  const ElementFormat f = parse_format(a.from);
  const bool wide = f.bits > 8;
  const io::DType want = wide ? io::DType::u16 : io::DType::u8;
  std::vector<int64_t> raw_shape;
  if (!a.shape.empty()) raw_shape = io::parse_shape(a.shape);
  std::vector<std::string> names;
  if (!a.tensor.empty()) names.push_back(a.tensor);
  const io::TensorFile file = io::read_tensor_file(a.in, raw_shape, names, want);
  check_input_options(file, a.in, !a.shape.empty(), !a.tensor.empty());
  const std::string shown = a.in == "-" ? "<stdin>" : io::printable(a.in);
  if (file.tensors.empty()) throw io::DataError(shown + ": no tensors in file");
  if (file.tensors.size() > 1)
    throw UsageError(fmt::format("{} holds {} tensors; choose one with --tensor", shown,
                                 file.tensors.size()));
  const io::TensorRef& t = file.tensors.front();
  const std::string tensor = t.name.empty() ? "" : fmt::format(" (tensor '{}')", io::printable(t.name));
  if (t.dtype != want) {
    const bool values = t.dtype != io::DType::u8 && t.dtype != io::DType::u16;
    throw io::DataError(fmt::format("{}{}: holds {}, but the codes of {} are {}{}", shown, tensor,
                                    io::dtype_name(t.dtype), f.name, io::dtype_name(want),
                                    values ? " (a float tensor holds values, not codes)" : ""));
  }
  const auto n = static_cast<size_t>(t.numel());
  if (n == 0) throw io::DataError(shown + ": empty input (no codes)");
  std::vector<float> out(n);
  if (wide) {
    std::vector<uint16_t> codes(n);
    std::memcpy(codes.data(), t.bytes.data(), n * 2);  // views need not be 2-byte aligned
    for (size_t i = 0; i < n; ++i)
      if (codes[i] & ~f.code_mask)
        throw io::DataError(fmt::format("{}: code 0x{:X} at index {} does not fit {} ({} bits)",
                                        shown, codes[i], i, f.name, f.bits));
    decode_array(codes, out, f);
  } else {
    const std::span<const uint8_t> codes(reinterpret_cast<const uint8_t*>(t.bytes.data()), n);
    for (size_t i = 0; i < n; ++i)
      if (codes[i] & ~f.code_mask)
        throw io::DataError(fmt::format("{}: code 0x{:X} at index {} does not fit {} ({} bits)",
                                        shown, codes[i], i, f.name, f.bits));
    decode_array(codes, out, f);
  }
  write_by_extension(a.out, io::DType::f32, t.shape, as_bytes_of(out));
}

const bool registered = register_command(20, [](CLI::App& app) {
  auto a = std::make_shared<CastArgs>();
  auto* cast = app.add_subcommand("cast", "Cast float32 elements to a format (codes or values)");
  cast->add_option("--to", a->to, "Target format (lpx formats lists them)")->required();
  cast->add_option("--round", a->round, "rne (default), rna, rtz, rup, rdn, rto (to odd), or stochastic: sr, sr-fast, sr-rne, sr-odd (docs/formats.md)");
  cast->add_option("--overflow", a->overflow,
                   "ieee (default: Inf/NaN as ml_dtypes) or sat (clamp to +-max as CUDA satfinite)");
  add_seed_option(cast, a->seed, "Seed of the stochastic-rounding Philox stream (0..2^64-1)");
  add_int_option(cast, "--stream", a->stream, 0, UINT32_MAX,
                 "Philox stream (subsequence) for --round sr (0..2^32-1)");
  add_int_option(cast, "--sr-bits", a->sr_bits, 1, kMaxSrBits,
                 "Random bits per stochastic rounding (1..32)");
  cast->add_option("--random-words", a->random_words,
                   "File of one little-endian uint32 per element, used instead of Philox "
                   "(the top --sr-bits bits are r)");
  cast->add_option("--emit", a->emit, "codes (default: one per byte, uint16 for 16-bit formats) "
                                      "or values (float32 after the round trip)");
  cast->add_option("--shape", a->shape, "Shape of a raw .f32 input, e.g. 64x128");
  cast->add_option("--tensor", a->tensor, "Tensor to read from a .safetensors input");
  add_threads_option(cast, a->threads, "Threads (0: all, at most 1024)");
  cast->add_option("IN", a->in,
                   "Input: raw .f32, .npy (float32/float16/bfloat16), .safetensors, or - (stdin: "
                   ".npy and .safetensors by their first bytes, else raw)")
      ->required();
  cast->add_option("OUT", a->out, "Output: raw, .npy or .safetensors by extension, or -")->required();
  cast->footer(
      "Examples:\n"
      "  lpx cast --to e4m3 x.f32 x.e4m3           codes as ml_dtypes' float8_e4m3fn cast gives\n"
      "  lpx cast --to e2m1 --overflow sat --emit values x.npy y.npy\n"
      "  lpx cast --to e2m1 --round sr --seed 7 --sr-bits 8 x.f32 codes.npy");
  cast->callback([a, cast] { run_cast(*a, *cast); });

  auto d = std::make_shared<DecodeArgs>();
  auto* dec = app.add_subcommand("decode", "Decode codes of a format to float32");
  dec->add_option("--from", d->from, "Format of the codes")->required();
  dec->add_option("--shape", d->shape, "Shape of a raw input, e.g. 64x128");
  dec->add_option("--tensor", d->tensor, "Tensor to read from a .safetensors input");
  dec->add_option("IN", d->in, "Codes: raw (one per byte; 16-bit formats little-endian uint16), "
                               ".npy or .safetensors of uint8/uint16, or - (stdin: .npy and "
                               ".safetensors by their first bytes, else raw)")->required();
  dec->add_option("OUT", d->out, "float32 output: raw, .npy or .safetensors by extension")->required();
  dec->footer("Example:\n  lpx cast --to e5m2 x.f32 c.bin && lpx decode --from e5m2 c.bin y.f32");
  dec->callback([d] { run_decode(*d); });
});

}  // namespace
}  // namespace lpx::cli
