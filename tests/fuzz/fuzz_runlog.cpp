// libFuzzer target: the run-log reader (runlog/include/lpx/runlog/run_log.hpp) on a file
// of fuzzed bytes: read_run(path), which `lpx report`, the detectors and `lpx sweep`
// use, and RunLog::open(path, read-only) + read_checkpoint(), which `lpx train --resume`
// uses. A LogError (one line naming the file) is the expected answer to a damaged or
// foreign file; anything else escaping (another exception, std::bad_alloc from a size
// read from the file, an ASan/UBSan report, a timeout) is a finding.
//
// read_run takes a path, so each input is written to one scratch file per process
// (scratch.hpp) and read back from it; the target writes nothing else. HDF5 itself is
// not instrumented: coverage guides only through lpx's reading code.
#include <cstddef>
#include <cstdint>
#include <string>

#include "scratch.hpp"

namespace {
std::string path;
}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  path = lpx::fuzz::scratch_file("runlog", ".h5");
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  lpx::fuzz::write_input(path, data, size);
  lpx::fuzz::read_log(path);
  return 0;
}
