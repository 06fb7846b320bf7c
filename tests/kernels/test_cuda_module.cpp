// The CUDA module loader (kernels/src/loader.cpp, docs/kernels.md): the lpx binary links
// no CUDA library and does not load the module unless a command needs the GPU; a missing
// or foreign module is reported in one line; without a device every entry point throws
// std::runtime_error("no CUDA device: ...").
#include <catch2/catch.hpp>

#include <elf.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "../tools/cli_runner.hpp"
#include "lpx/formats/quantize.hpp"
#include "lpx/kernels/cast.hpp"
#include "lpx/kernels/device.hpp"
#include "lpx/kernels/hadamard.hpp"
#include "lpx/kernels/memory.hpp"
#include "lpx/kernels/quantize.hpp"

using namespace lpx;

namespace {

// The DT_NEEDED entries of a 64-bit ELF file (what `readelf -d` lists as NEEDED), read
// from its section headers: the .dynamic section and the string table it links to.
std::vector<std::string> needed_libraries(const std::string& path) {
  const std::string bytes = lpx_test::slurp(path);
  REQUIRE(bytes.size() > sizeof(Elf64_Ehdr));
  Elf64_Ehdr eh;
  std::memcpy(&eh, bytes.data(), sizeof eh);
  REQUIRE(std::memcmp(eh.e_ident, ELFMAG, SELFMAG) == 0);
  REQUIRE(eh.e_ident[EI_CLASS] == ELFCLASS64);
  auto section = [&](size_t i) {
    Elf64_Shdr sh;
    REQUIRE(eh.e_shoff + (i + 1) * sizeof(Elf64_Shdr) <= bytes.size());
    std::memcpy(&sh, bytes.data() + eh.e_shoff + i * sizeof(Elf64_Shdr), sizeof sh);
    return sh;
  };
  std::vector<std::string> out;
  for (size_t i = 0; i < eh.e_shnum; ++i) {
    const Elf64_Shdr dyn = section(i);
    if (dyn.sh_type != SHT_DYNAMIC) continue;
    const Elf64_Shdr str = section(dyn.sh_link);
    for (size_t off = 0; off + sizeof(Elf64_Dyn) <= dyn.sh_size; off += sizeof(Elf64_Dyn)) {
      Elf64_Dyn d;
      std::memcpy(&d, bytes.data() + dyn.sh_offset + off, sizeof d);
      if (d.d_tag == DT_NULL) break;
      if (d.d_tag == DT_NEEDED) out.emplace_back(bytes.data() + str.sh_offset + d.d_un.d_val);
    }
  }
  return out;
}

bool one_line(const std::string& s) { return !s.empty() && s.find('\n') == std::string::npos; }

}  // namespace

TEST_CASE("the lpx binary links no CUDA library") {
  const std::vector<std::string> needed = needed_libraries(LPX_BINARY);
  REQUIRE(!needed.empty());  // libc at least: the reader works
  for (const std::string& lib : needed) {
    INFO(lib);
    CHECK(lib.find("cublas") == std::string::npos);
    CHECK(lib.find("cudart") == std::string::npos);
    CHECK(lib.find("libcuda") == std::string::npos);
    CHECK(lib.find("lpx_cuda") == std::string::npos);
  }
}

TEST_CASE("lpx --version loads no CUDA module") {
  lpx_test::TempDir dir;
  // The dynamic loader lists every object it opens (dlopen included) under LD_DEBUG=files.
  const auto r = lpx_test::run_lpx("--version", dir);
  REQUIRE(r.status == 0);
  const std::string cmd = "LD_DEBUG=files " + std::string(LPX_BINARY) + " --version >/dev/null 2>" +
                          (dir / "ld.txt").string();
  REQUIRE(std::system(cmd.c_str()) == 0);
  const std::string log = lpx_test::slurp(dir / "ld.txt");
  CHECK(log.find("libc.so") != std::string::npos);  // LD_DEBUG worked
  CHECK(log.find("lpx_cuda") == std::string::npos);
  CHECK(log.find("cublas") == std::string::npos);
  CHECK(log.find("libcuda") == std::string::npos);
}

TEST_CASE("a missing or foreign CUDA module is reported in one line") {
  const std::string missing = "/nonexistent-lpx-dir/liblpx_cuda.so";
  const std::string why = kernels::probe_cuda_module(missing);
  CHECK(one_line(why));
  CHECK(why.find(missing) != std::string::npos);

  lpx_test::TempDir dir;
  const std::string junk = (dir / "liblpx_cuda.so").string();
  std::ofstream(junk) << "not a shared object\n";
  const std::string bad = kernels::probe_cuda_module(junk);
  CHECK(one_line(bad));
  CHECK(bad.find(junk) != std::string::npos);

  // A real shared library that is not an lpx module.
  const std::string foreign = kernels::probe_cuda_module("libz.so.1");
  CHECK(one_line(foreign));
  CHECK(foreign.find("lpx_cuda_backend") != std::string::npos);

  // This build's module, where there is one, passes the check.
  const std::string loaded = kernels::cuda_module_path();
  if (!loaded.empty()) CHECK(kernels::probe_cuda_module(loaded).empty());
}

TEST_CASE("LPX_CUDA_MODULE names the module; its failure is the CLI's one error line") {
  lpx_test::TempDir dir;
  const std::string missing = (dir / "no-such-module.so").string();
  REQUIRE(setenv("LPX_CUDA_MODULE", missing.c_str(), 1) == 0);
  const auto strict = lpx_test::run_lpx("validate --require-gpu", dir);
  const auto plain = lpx_test::run_lpx("validate", dir);
  const auto version = lpx_test::run_lpx("--version", dir);
  unsetenv("LPX_CUDA_MODULE");
  CHECK(strict.status == 1);
  CHECK(strict.err_lines() == 1);
  CHECK(strict.err.find("no CUDA device: ") != std::string::npos);
  CHECK(strict.err.find(missing) != std::string::npos);
  CHECK(plain.status == 0);
  CHECK(plain.out.find("validated nothing") != std::string::npos);
  CHECK(version.status == 0);  // nothing that needs no GPU looks for the module
}

TEST_CASE("without a device every entry point says so in one line") {
  if (kernels::cuda_available()) {
    CHECK(!kernels::cuda_module_path().empty());
    return;
  }
  const std::string why = kernels::device_description();
  CHECK(one_line(why));
  const std::vector<float> x(64, 1.0f);
  std::vector<float> y(64);
  const std::vector<int64_t> shape{2, 32};
  const BlockFormat mx = parse_block_format("mxfp8_e4m3");
  const auto starts = Catch::StartsWith("no CUDA device: ");
  CHECK_THROWS_WITH(kernels::fake_cast_host(x, y, fmt16::bf16, {}), starts);
  CHECK_THROWS_WITH(kernels::quantize_host(x, shape, mx, {}), starts);
  CHECK_THROWS_WITH(kernels::fake_quantize_host(x, shape, y, mx, {}), starts);
  CHECK_THROWS_WITH(kernels::hadamard_host(x, y, 32, {}, 0, 0), starts);
  CHECK_THROWS_WITH(kernels::device_codec_roundtrip(fmt4::e2m1), starts);
  CHECK_THROWS_WITH(kernels::DeviceBuffer(16), starts);
  CHECK_THROWS_WITH(kernels::copy_to_device(y.data(), x.data(), 16), starts);
  CHECK_THROWS_WITH(kernels::synchronize(), starts);
  try {
    kernels::fake_cast_host(x, y, fmt16::bf16, {});
  } catch (const std::runtime_error& e) {
    CHECK(one_line(e.what()));
    CHECK(std::string(e.what()) == "no CUDA device: " + why);
  }
}
