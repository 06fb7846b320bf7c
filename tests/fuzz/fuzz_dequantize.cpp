// libFuzzer target: `lpx dequantize IN.safetensors OUT.f32`, run in-process through the lpx
// app (tools/lpx/app.cpp: build_app) on the input as IN: the .safetensors file that
// `lpx quantize --emit packed` writes, whose __metadata__ (format, shape, axis, packing,
// headroom_3_4) says how to read its codes, scales and tensor scale (tools/lpx/cmd_quantize.cpp).
// The parser itself is fuzz_safetensors' business; this target is about what the command
// believes of the metadata: the seeds are real packed files, so mutations land in it.
// IN and OUT are scratch files (scratch.hpp, one pair per process).
//
// io::DataError (bad data: exit 1, one line) is the expected answer; anything else
// escaping is a finding: a usage error (exit 2) for a bad file breaks the exit-code
// contract, and another exception is a message lpx did not write.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "command.hpp"
#include "lpx/io/tensor_file.hpp"
#include "scratch.hpp"

namespace {

std::string in, out;  // scratch files (scratch.hpp)

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  in = lpx::fuzz::scratch_file("dequantize", ".safetensors");
  out = lpx::fuzz::scratch_file("dequantize", ".f32");
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  lpx::fuzz::write_input(in, data, size);
  std::vector<std::string> args{"lpx", "dequantize", "--threads", "1", in, out};
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  CLI::App app{"lpx (fuzz)"};
  lpx::cli::build_app(app);
  try {
    app.parse(static_cast<int>(args.size()), argv.data());
  } catch (const lpx::io::DataError&) {
  }
  return 0;
}
