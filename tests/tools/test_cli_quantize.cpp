// `lpx quantize` and `lpx dequantize` through the built binary: values against the
// library, packed -> dequantize equal to --emit values bit for bit, and the error contract
// (non-zero exit, one stderr line, no output file) on bad input.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "cli_runner.hpp"
#include "lpx/formats/block_format.hpp"
#include "lpx/formats/packing.hpp"
#include "lpx/formats/quantize.hpp"
#include "lpx/io/tensor_file.hpp"

using lpx_test::read_file;
using lpx_test::CliResult;
using lpx_test::run_lpx;
using lpx_test::TempDir;
using lpx_test::write_file;

namespace {

std::vector<float> sample(size_t n) {
  std::vector<float> x(n);
  for (size_t i = 0; i < n; ++i)
    x[i] = static_cast<float>(std::sin(static_cast<double>(i) * 0.7) *
                              std::exp(static_cast<double>(i % 9) - 4.0));
  return x;
}

bool same_bytes(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * 4) == 0;
}

}  // namespace

TEST_CASE("lpx quantize --emit values on a raw .f32 equals the library's fake_quantize") {
  TempDir dir;
  const auto x = sample(8 * 70);
  write_file(dir / "x.f32", x);
  for (const char* spec : {"mxfp4", "nvfp4", "fp8_tensor", "e2m1:b32:e8m0:rceil"}) {
    INFO(spec);
    const auto r = run_lpx(std::string("quantize --format ") + spec + " --shape 8x70 " +
                               (dir / "x.f32").string() + " " + (dir / "v.f32").string(),
                           dir);
    REQUIRE(r.status == 0);
    std::vector<float> want(x.size());
    const std::vector<int64_t> shape = {8, 70};
    lpx::fake_quantize({x, shape}, want, lpx::parse_block_format(spec));
    CHECK(same_bytes(read_file<float>(dir / "v.f32"), want));
  }
  // Axis 0 with a rule override and SR: also the library's result.
  const auto r = run_lpx("quantize --format mxfp8_e4m3 --axis 0 --scale-rule rceil --round sr "
                         "--seed 9 --shape 70x8 " +
                             (dir / "x.f32").string() + " " + (dir / "v.npy").string(),
                         dir);
  REQUIRE(r.status == 0);
  lpx::BlockFormat f = lpx::parse_block_format("mxfp8_e4m3");
  f.block.axis = 0;
  f.rule = lpx::ScaleRule::rceil;
  lpx::QuantizeOptions opt;
  opt.round = lpx::Rounding::sr;
  opt.seed = 9;
  std::vector<float> want(x.size());
  const std::vector<int64_t> shape = {70, 8};
  lpx::fake_quantize({x, shape}, want, f, opt);
  const auto file = lpx::io::read_tensor_file((dir / "v.npy").string());
  REQUIRE(file.tensors.size() == 1);
  CHECK(file.tensors[0].shape == shape);
  CHECK(same_bytes(lpx::io::to_float32(file.tensors[0]), want));
}

TEST_CASE("lpx quantize streams large tensors in pieces equal to one call") {
  // Over 2^20 elements: the command quantizes pieces of whole blocks (flat runs, rows,
  // 128-row tiles, slices) keyed by their first flat index, tensor-wide scales from a
  // first pass over the whole tensor; the values file, and the packed codes and scales
  // (.safetensors and .npy), must equal the library's whole-tensor result, sr included.
  TempDir dir;
  struct Case {
    const char* spec;
    std::vector<int64_t> shape;
    bool sr;
    int axis = -1;
  };
  const std::vector<Case> cases = {
      {"mxfp4", {(int64_t{1} << 20) + 5}, true},          // flat; a last piece of 5
      {"mxfp8_e4m3", {1100, 1024}, true},                 // flat: rows hold whole blocks
      {"e4m3:b32:e8m0", {1100, 1000}, true},              // rows: 1000 is not a multiple of 32
      {"fp8_block128x128", {1100, 1000}, false},          // 128-row tiles
      {"e4m3:row:fp32", {3, 400, 1000}, true},            // slices along axis 0
      {"nvfp4", {1100, 1024}, true},                      // flat; the tensor scale
      {"nvfp4_2d", {1100, 1000}, false},                  // 16-row tiles; the tensor scale
      {"fp8_tensor", {(int64_t{1} << 20) + 7}, true},     // per-tensor: one scale
      {"mxfp8_e4m3", {1100, 1000}, true, 0},              // 32 slices along axis 0 at a time
      {"mxfp4", {3, 1000, 400}, true, 1},                 // blocks along the middle axis
  };
  for (const Case& c : cases) {
    INFO(c.spec << " axis " << c.axis);
    size_t n = 1;
    std::string shape_arg;
    for (int64_t d : c.shape) {
      n *= static_cast<size_t>(d);
      shape_arg += (shape_arg.empty() ? "" : "x") + std::to_string(d);
    }
    auto x = sample(n);
    // A magnitude that grows along the tensor: pieces' own amaxes differ from the whole's.
    for (size_t i = 0; i < n; ++i) x[i] *= 1.0f + 3.0f * static_cast<float>(i) / static_cast<float>(n);
    write_file(dir / "x.f32", x);
    std::string sr = c.sr ? " --round sr --seed 4 --stream 3" : "";
    if (c.axis >= 0) {
      sr += " --axis ";
      sr += std::to_string(c.axis);
    }
    const auto r = run_lpx(std::string("quantize --format ") + c.spec + sr + " --shape " +
                               shape_arg + " " + (dir / "x.f32").string() + " " +
                               (dir / "v.f32").string(),
                           dir);
    REQUIRE(r.status == 0);
    lpx::QuantizeOptions opt;
    if (c.sr) {
      opt.round = lpx::Rounding::sr;
      opt.seed = 4;
      opt.stream = 3;
    }
    std::vector<float> want(n);
    lpx::BlockFormat f = lpx::parse_block_format(c.spec);
    f.block.axis = c.axis;
    const lpx::QuantizedTensor q = lpx::fake_quantize({x, c.shape}, want, f, opt);
    CHECK(same_bytes(read_file<float>(dir / "v.f32"), want));

    const auto quantize_packed = [&](const std::string& out) {
      return run_lpx(std::string("quantize --emit packed --format ") + c.spec + sr + " --shape " +
                         shape_arg + " " + (dir / "x.f32").string() + " " + out,
                     dir)
          .status;
    };
    const std::string packed = (dir / "q.safetensors").string();
    REQUIRE(quantize_packed(packed) == 0);
    const auto file = lpx::io::read_tensor_file(packed);
    REQUIRE(file.tensors.size() == (q.tensor_scale ? 3u : 2u));
    const auto named = [](const lpx::io::TensorFile& tf, const std::string& name) {
      for (const auto& t : tf.tensors)
        if (t.name == name) return t;
      FAIL("no tensor " << name);
      return tf.tensors[0];
    };
    const std::vector<uint8_t> codes = lpx::pack(q.codes, lpx::packing_for_bits(f.element.bits));
    const auto scale_bytes = q.scale_codes.empty()
                                 ? std::as_bytes(std::span<const float>(q.scale_values))
                                 : std::as_bytes(std::span<const uint8_t>(q.scale_codes));
    const auto check_packed = [&](const lpx::io::TensorRef& got_codes, const lpx::io::TensorRef& got_scales) {
      REQUIRE(got_codes.bytes.size() == codes.size());
      CHECK(std::memcmp(got_codes.bytes.data(), codes.data(), codes.size()) == 0);
      CHECK(got_scales.shape == q.scale_shape);
      REQUIRE(got_scales.bytes.size() == scale_bytes.size());
      CHECK(std::memcmp(got_scales.bytes.data(), scale_bytes.data(), scale_bytes.size()) == 0);
    };
    const auto check_tensor_scale = [&](const lpx::io::TensorRef& t) {
      REQUIRE(t.bytes.size() == 4);
      float ts = 0;
      std::memcpy(&ts, t.bytes.data(), 4);
      CHECK(ts == *q.tensor_scale);
    };
    check_packed(named(file, "codes"), named(file, "scales"));
    if (q.tensor_scale) check_tensor_scale(named(file, "tensor_scale"));
    // And lpx dequantize reads it back (metadata included) to the same values.
    REQUIRE(run_lpx("dequantize " + packed + " " + (dir / "d.f32").string(), dir).status == 0);
    CHECK(same_bytes(read_file<float>(dir / "d.f32"), want));

    // .npy: the codes file and its .scales.npy (and .tensor_scale.npy) siblings.
    const std::string npy = (dir / "q.npy").string();
    REQUIRE(quantize_packed(npy) == 0);
    check_packed(lpx::io::read_tensor_file(npy).tensors.at(0),
                 lpx::io::read_tensor_file((dir / "q.scales.npy").string()).tensors.at(0));
    if (q.tensor_scale)
      check_tensor_scale(lpx::io::read_tensor_file((dir / "q.tensor_scale.npy").string()).tensors.at(0));
  }
}

TEST_CASE("lpx quantize --emit packed then lpx dequantize equals --emit values bit for bit") {
  TempDir dir;
  const auto x = sample(33 * 45);
  write_file(dir / "x.f32", x);
  const std::string in = (dir / "x.f32").string();
  for (const char* spec : {"mxfp4", "mxfp6_e3m2", "mxfp6_e2m3", "mxfp8_e5m2", "mxint8", "nvfp4",
                           "nvfp4_2d", "fp8_tensor", "fp8_block128x128", "e2m0:16x16:e8m0",
                           "e4m3:b16:pow2"}) {
    for (const char* ext : {".safetensors", ".npy"}) {
      INFO(spec << " " << ext);
      const std::string opts = std::string("--format ") + spec + " --shape 33x45 --round sr --seed 3 ";
      REQUIRE(run_lpx("quantize " + opts + in + " " + (dir / "v.f32").string(), dir).status == 0);
      const std::string packed = (dir / (std::string("p") + ext)).string();
      REQUIRE(run_lpx("quantize --emit packed " + opts + in + " " + packed, dir).status == 0);
      const std::string deq_opts =
          std::string(ext) == ".npy" ? std::string("--format ") + spec + " --shape 33x45 " : "";
      const auto r = run_lpx("dequantize " + deq_opts + packed + " " + (dir / "d.f32").string(), dir);
      INFO(r.err);
      REQUIRE(r.status == 0);
      CHECK(same_bytes(read_file<float>(dir / "d.f32"), read_file<float>(dir / "v.f32")));
    }
  }
  // The packed safetensors holds codes, scales and the metadata.
  REQUIRE(run_lpx("quantize --emit packed --format nvfp4 --shape 33x45 " + in + " " +
                      (dir / "n.safetensors").string(),
                  dir)
              .status == 0);
  const auto f = lpx::io::read_tensor_file((dir / "n.safetensors").string());
  std::vector<std::string> names;
  for (const auto& t : f.tensors) names.push_back(t.name);
  CHECK(std::find(names.begin(), names.end(), "codes") != names.end());
  CHECK(std::find(names.begin(), names.end(), "scales") != names.end());
  CHECK(std::find(names.begin(), names.end(), "tensor_scale") != names.end());
  bool has_format = false;
  for (const auto& [k, v] : f.metadata)
    if (k == "format") has_format = v == "float4_e2m1fn:b16:e4m3";
  CHECK(has_format);
}

TEST_CASE("lpx quantize: bad input exits non-zero with one stderr line and no output") {
  TempDir dir;
  const auto x = sample(8 * 64);
  write_file(dir / "x.f32", x);
  std::vector<char> bytes(8 * 64 * 4 - 2, 0);
  write_file(dir / "trunc.f32", bytes);
  const std::string in = (dir / "x.f32").string();
  const std::string out = (dir / "out.f32").string();
  struct Bad {
    std::string args, says;
  };
  const std::vector<Bad> cases = {
      {"quantize --format mxfp4 --shape 8x65 " + in + " " + out, "8x65"},
      {"quantize --format mxfp5 --shape 8x64 " + in + " " + out, "mxfp8_e4m3"},
      {"quantize --format mxfp4 " + (dir / "trunc.f32").string() + " " + out, "trunc.f32"},
      {"quantize --format mxfp4 --shape 8x64 --axis 2 " + in + " " + out, "axis"},
      {"quantize --format mxfp4 --shape 8x64 --scale-rule round " + in + " " + out, "rceil"},
      {"quantize --format fp8_tensor --shape 8x64 --scale-rule floor " + in + " " + out, "scale-rule"},
      {"quantize --format e2m1:b32:e9m0 --shape 8x64 " + in + " " + out, "e9m0"},
      // Numbers out of range are usage errors, never a default or a saturated value.
      {"quantize --format mxfp4 --shape 8x64 --threads 100000 " + in + " " + out, "--threads"},
      {"quantize --format mxfp4 --shape 8x64 --threads -1 " + in + " " + out, "--threads"},
      {"quantize --format mxfp4 --shape 8x64 --round sr --seed -1 " + in + " " + out, "--seed '-1'"},
      {"quantize --format mxfp4 --shape 8x64 --round sr --seed 18446744073709551616 " + in + " " + out, "--seed"},
      {"quantize --format mxfp4 --shape 8x64 --round sr --seed 1e23 " + in + " " + out, "--seed '1e23'"},
      {"quantize --format mxfp4 --shape 8x64 --round sr --stream -1 " + in + " " + out, "--stream"},
      {"quantize --format mxfp4 --shape 8x64 --round sr --stream 0x10 " + in + " " + out, "--stream"},
      {"quantize --format mxfp4 --shape 8x64 --round sr --sr-bits 0 " + in + " " + out, "--sr-bits"},
      {"quantize --format mxfp4 --shape 8x64 --round sr --sr-bits 0x10 " + in + " " + out, "--sr-bits"},
      {"quantize --format mxfp4 --shape 8x64 --block 0 " + in + " " + out, "--block '0'"},
      {"quantize --format mxfp4 --shape 8x64 --block 99999999999999999999 " + in + " " + out, "--block"},
      {"quantize --format mxfp4 --shape 8x64 --block 1e1 " + in + " " + out, "--block '1e1'"},
      {"quantize --format mxfp4 --shape 8x64 --axis 99999999999 " + in + " " + out, "--axis"},
      {"dequantize --threads 100000 " + in + " " + out, "--threads"},
      {"dequantize " + in + " " + out, "dequantize"},
      {"dequantize " + (dir / "missing.safetensors").string() + " " + out, "missing"},
  };
  for (const Bad& c : cases) {
    INFO(c.args);
    const auto r = run_lpx(c.args, dir);
    INFO(r.err);
    CHECK(r.status != 0);
    CHECK(r.err_lines() == 1);
    CHECK(r.err.find(c.says) != std::string::npos);
    CHECK(!std::filesystem::exists(out));
  }
  // Usage errors exit 2, data errors 1.
  CHECK(run_lpx("quantize --format mxfp5 --shape 8x64 " + in + " " + out, dir).status == 2);
  CHECK(run_lpx("quantize --format mxfp4 --shape 8x64 --block 0 " + in + " " + out, dir).status == 2);
  CHECK(run_lpx("quantize --format mxfp4 --shape 8x64 --round sr --seed -1 " + in + " " + out, dir).status == 2);
  CHECK(run_lpx("quantize --format mxfp4 " + (dir / "trunc.f32").string() + " " + out, dir).status == 1);
  const auto help = run_lpx("quantize --help", dir);
  CHECK(help.status == 0);
  CHECK(help.out.find("Examples") != std::string::npos);
}

namespace {
// A .npy v1 file by the book (NEP 1), independent of lpx's writer.
std::string npy_file(const std::string& descr, const std::string& shape, const std::string& payload) {
  std::string dict = "{'descr': '" + descr + "', 'fortran_order': False, 'shape': " + shape + ", }";
  while ((10 + dict.size() + 1) % 64 != 0) dict += ' ';
  dict += '\n';
  std::string s = "\x93NUMPY";
  s += '\x01';
  s += '\x00';
  s += static_cast<char>(dict.size() & 0xff);
  s += static_cast<char>(dict.size() >> 8);
  return s + dict + payload;
}
void put(const std::filesystem::path& p, const std::string& bytes) {
  std::ofstream f(p, std::ios::binary);
  f << bytes;
}
std::string slurp(const std::filesystem::path& p) { return lpx_test::slurp(p); }
// Temporaries or kept old files left in the directory.
int leftovers(const TempDir& dir) {
  int n = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir.path())) {
    const std::string name = e.path().filename().string();
    n += name.find(".tmp.") != std::string::npos || name.find(".old.") != std::string::npos;
  }
  return n;
}
}  // namespace

TEST_CASE("lpx quantize: a block longer than its axis is one ragged block, as the library has it") {
  // Before: the command refused it ("block of 128 is larger than axis 1") although the
  // README and the library take the last block along an axis to be shorter.
  TempDir dir;
  const auto x = sample(8 * 64);
  write_file(dir / "x.f32", x);
  const std::string in = (dir / "x.f32").string();
  for (const char* emit : {"values", "packed"}) {
    for (const std::string& ext : {std::string(".safetensors"), std::string(".npy")}) {
      INFO(emit << ext);
      const auto run = [&](const std::string& opts, const std::string& name) {
        const auto r = run_lpx(std::string("quantize --emit ") + emit + " --shape 8x64 " + opts +
                                   " " + in + " " + (dir / (name + ext)).string(), dir);
        INFO(r.err);
        REQUIRE(r.status == 0);
        // The data: every tensor's bytes (a packed .safetensors' metadata names the spec),
        // and a packed .npy's scales file beside its codes.
        const std::string path = (dir / (name + ext)).string();
        std::string data;
        for (const auto& t : lpx::io::read_tensor_file(path).tensors)
          data.append(reinterpret_cast<const char*>(t.bytes.data()), t.bytes.size());
        if (std::string(emit) == "packed" && ext == ".npy")
          for (const auto& t : lpx::io::read_tensor_file((dir / (name + ".scales.npy")).string()).tensors)
            data.append(reinterpret_cast<const char*>(t.bytes.data()), t.bytes.size());
        return data;
      };
      // One block per row, whatever the length beyond 64, on either path of the command
      // (streamed pieces along the last axis; blocks along axis 0).
      const std::string whole = run("--format mxfp4 --block 64", "w");
      CHECK(run("--format mxfp4 --block 128", "a") == whole);
      CHECK(run("--format mxfp4 --block 9223372036854775807", "b") == whole);
      const std::string col = run("--format e4m3:channel:fp32 --axis 0", "c");
      CHECK(run("--format e4m3:b8:fp32 --axis 0", "d") == col);
      CHECK(run("--format e4m3:b1000:fp32 --axis 0", "e") == col);
    }
  }
  // And the library's result for it.
  const auto r = run_lpx("quantize --format mxfp4 --block 100 --shape 8x64 " + in + " " +
                             (dir / "v.f32").string(), dir);
  REQUIRE(r.status == 0);
  lpx::BlockFormat f = lpx::parse_block_format("mxfp4");
  f.block.length = 100;
  std::vector<float> want(x.size());
  const std::vector<int64_t> shape = {8, 64};
  lpx::fake_quantize({x, shape}, want, f);
  CHECK(same_bytes(read_file<float>(dir / "v.f32"), want));
}

TEST_CASE("lpx quantize --emit packed .npy: the codes and scales files are replaced together or not at all") {
  // Before: OUT.scales.npy was renamed into place first, then the codes were written; when
  // that failed, the new scales were deleted, which left the old codes without scales
  // (or, had they stayed, beside new scales): a mismatched pair, exit 1 notwithstanding.
  TempDir dir;
  const auto x = sample(64 * 1024);
  write_file(dir / "x.f32", x);
  std::vector<float> y(x.size());  // other data: other codes and scales
  for (size_t i = 0; i < y.size(); ++i) y[i] = 3.0f * x[(i + 12345) % x.size()];
  write_file(dir / "y.f32", y);
  const std::string out = (dir / "q.npy").string();
  const std::string scales = (dir / "q.scales.npy").string(), ts = (dir / "q.tensor_scale.npy").string();
  // nvfp4 takes the streamed path, a channel format along axis 0 the one-call path.
  for (const std::string& format : {std::string("nvfp4"), std::string("e4m3:channel:fp32 --axis 0")}) {
    INFO(format);
    const std::string q = "quantize --emit packed --shape 64x1024 --format " + format + " ";
    std::filesystem::remove_all(out);
    REQUIRE(run_lpx(q + (dir / "x.f32").string() + " " + out, dir).status == 0);
    const std::string old_codes = slurp(out), old_scales = slurp(scales);
    const bool two_level = std::filesystem::exists(ts);
    const std::string old_ts = two_level ? slurp(ts) : "";

    // 1. A directory in the way of the codes file: its rename fails after the siblings'
    //    renames; they are rolled back to the old files.
    std::filesystem::rename(out, dir / "codes.keep");
    std::filesystem::create_directory(out);
    auto r = run_lpx(q + (dir / "y.f32").string() + " " + out, dir);
    CHECK(r.status == 1);
    CHECK(r.err_lines() == 1);
    CHECK_THAT(r.err, Catch::Contains("nothing was replaced"));
    CHECK(slurp(scales) == old_scales);
    if (two_level) CHECK(slurp(ts) == old_ts);
    CHECK(std::filesystem::is_directory(out));
    CHECK(leftovers(dir) == 0);
    std::filesystem::remove(out);
    std::filesystem::rename(dir / "codes.keep", out);

    // 2. A file-size limit that the scales fit under and the codes do not: the write of
    //    the codes fails before anything is renamed.
    const std::string limited = "ulimit -f 12; " + std::string(LPX_BINARY) + " " + q +
                                (dir / "y.f32").string() + " " + out + " 2>" + (dir / "err.txt").string();
    const int raw = std::system(("sh -c '" + limited + "'").c_str());
    CHECK(WIFEXITED(raw));
    CHECK(WEXITSTATUS(raw) == 1);
    CHECK_THAT(slurp(dir / "err.txt"), Catch::Contains("File too large"));
    CHECK(slurp(out) == old_codes);
    CHECK(slurp(scales) == old_scales);
    if (two_level) CHECK(slurp(ts) == old_ts);
    CHECK(leftovers(dir) == 0);

    // 3. Success replaces all of them, and they dequantize to --emit values.
    REQUIRE(run_lpx(q + (dir / "y.f32").string() + " " + out, dir).status == 0);
    CHECK(slurp(out) != old_codes);
    CHECK(slurp(scales) != old_scales);
    CHECK(leftovers(dir) == 0);
  }
}

TEST_CASE("lpx quantize refuses inputs with no elements, as cast does; other input mistakes") {
  // Before: a (0,) .npy was quantized by some formats into packed files that `lpx
  // dequantize` then refused, by others refused as "block of 32 is larger than axis 0",
  // and nvfp4_2d failed with "dequantize: ... needs its tensor scale" (exit 2).
  TempDir dir;
  put(dir / "empty.npy", npy_file("<f4", "(0,)", ""));
  put(dir / "huge0.npy", npy_file("<f4", "(0, 9223372036854775807)", ""));
  put(dir / "codes.npy", npy_file("|u1", "(4,)", std::string(4, '\0')));
  put(dir / "x.npy", npy_file("<f4", "(2, 2)", std::string(16, '\0')));
  const std::string out = (dir / "o.npy").string();
  struct Bad {
    std::string args;
    int status;
    std::string says;
  };
  const std::vector<Bad> cases = {
      {"quantize --format mxfp4 " + (dir / "empty.npy").string() + " " + out, 1, "empty input"},
      {"quantize --format nvfp4_2d " + (dir / "empty.npy").string() + " " + out, 1, "empty input"},
      {"quantize --format fp8_tensor --emit packed " + (dir / "empty.npy").string() + " " + out, 1, "empty input"},
      {"quantize --format nvfp4 --emit packed " + (dir / "huge0.npy").string() + " " + out, 1, "empty input"},
      {"quantize --format mxfp4 " + (dir / "codes.npy").string() + " " + out, 1, "uint8 codes"},
      {"quantize --format mxfp4 --tensor w " + (dir / "x.npy").string() + " " + out, 2, "--tensor"},
      {"quantize --format mxfp4 --shape 2x2 " + (dir / "x.npy").string() + " " + out, 2, "--shape"},
  };
  for (const Bad& c : cases) {
    INFO(c.args);
    const auto r = run_lpx(c.args, dir);
    INFO(r.err);
    CHECK(r.status == c.status);
    CHECK(r.err_lines() == 1);
    CHECK_THAT(r.err, Catch::Contains(c.says));
    CHECK_FALSE(std::filesystem::exists(out));
    CHECK_FALSE(std::filesystem::exists(dir / "o.scales.npy"));
  }
}

TEST_CASE("lpx quantize: a 0-D tensor is one element, in one block of any format") {
  // Before: 1xN formats refused it ("--axis -1 is out of range ... (rank 0)") although
  // --axis was not given and the library takes a 0-D tensor as one element.
  TempDir dir;
  const float v = 3.7f;
  std::string payload(4, '\0');
  std::memcpy(payload.data(), &v, 4);
  put(dir / "s.npy", npy_file("<f4", "()", payload));
  for (const char* spec : {"mxfp4", "nvfp4", "fp8_tensor", "e4m3:channel:fp32"}) {
    INFO(spec);
    auto r = run_lpx(std::string("quantize --format ") + spec + " " + (dir / "s.npy").string() + " " +
                         (dir / "v.f32").string(), dir);
    INFO(r.err);
    REQUIRE(r.status == 0);
    std::vector<float> want(1);
    lpx::fake_quantize({std::vector<float>{v}, std::vector<int64_t>{}}, want, lpx::parse_block_format(spec));
    CHECK(same_bytes(read_file<float>(dir / "v.f32"), want));
    r = run_lpx(std::string("quantize --emit packed --format ") + spec + " " + (dir / "s.npy").string() + " " +
                    (dir / "p.safetensors").string(), dir);
    REQUIRE(r.status == 0);
    r = run_lpx("dequantize " + (dir / "p.safetensors").string() + " " + (dir / "d.npy").string(), dir);
    REQUIRE(r.status == 0);
    const auto back = lpx::io::read_tensor_file((dir / "d.npy").string());
    CHECK(back.tensors.at(0).shape.empty());
    CHECK(same_bytes(lpx::io::to_float32(back.tensors[0]), want));
  }
}

TEST_CASE("lpx quantize reads .npy and .safetensors from stdin by their first bytes") {
  TempDir dir;
  const auto x = sample(4 * 32);
  std::string payload(x.size() * 4, '\0');
  std::memcpy(payload.data(), x.data(), payload.size());
  put(dir / "x.npy", npy_file("<f4", "(4, 32)", payload));
  write_file(dir / "x.f32", x);
  std::string json = "{\"w\":{\"dtype\":\"F32\",\"shape\":[4,32],\"data_offsets\":[0,512]}}";
  json.append((8 - json.size() % 8) % 8, ' ');
  std::string len(8, '\0');
  for (size_t i = 0; i < 8; ++i) len[i] = static_cast<char>((json.size() >> (8 * i)) & 0xFF);
  put(dir / "x.safetensors", len + json + payload);
  REQUIRE(run_lpx("quantize --format mxfp4 --shape 4x32 " + (dir / "x.f32").string() + " " +
                      (dir / "want.f32").string(), dir).status == 0);
  for (const char* in : {"x.npy", "x.safetensors"}) {
    INFO(in);
    const auto r = run_lpx("quantize --format mxfp4 - " + (dir / "got.f32").string(), dir, (dir / in).string());
    INFO(r.err);
    REQUIRE(r.status == 0);
    CHECK(slurp(dir / "got.f32") == slurp(dir / "want.f32"));
  }
}
