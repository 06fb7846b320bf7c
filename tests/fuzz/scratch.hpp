// What the fuzz targets that hand their input to code taking a path share: scratch files
// (one set per process, under $TMPDIR or /tmp, removed at exit) and reading a run log the
// way lpx does, touching what came back so that AddressSanitizer checks it.
#pragma once

#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "lpx/runlog/run_log.hpp"

namespace lpx::fuzz {

// A path unique to this process, "<dir>/lpx-fuzz-<name>-<pid><suffix>", removed at exit.
// Call it from LLVMFuzzerInitialize and keep the result.
inline std::string scratch_file(const std::string& name, const std::string& suffix) {
  static std::vector<std::string> paths;
  if (paths.empty()) std::atexit([] {
      for (const std::string& p : paths) std::remove(p.c_str());
    });
  const char* dir = std::getenv("TMPDIR");
  paths.push_back(std::string(dir && *dir ? dir : "/tmp") + "/lpx-fuzz-" + name + "-" +
                  std::to_string(::getpid()) + suffix);
  return paths.back();
}

// Writes the input to `path`; a scratch folder that cannot be written stops the fuzzer.
inline void write_input(const std::string& path, const uint8_t* data, size_t size) {
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) __builtin_trap();
  if (size > 0 && std::fwrite(data, 1, size, f) != size) __builtin_trap();
  std::fclose(f);
}

template <class V>
void touch(const V& v) {
  volatile size_t sink = 0;
  for (const auto& x : v) sink = sink + sizeof(x);
}

// read_run (lpx report, the detectors, lpx sweep) and RunLog::open + read_checkpoint
// (lpx train --resume) on `path`. A LogError is the expected answer to a damaged or
// foreign file; anything else escapes to the fuzzer as a finding.
inline void read_log(const std::string& path) {
  try {
    const runlog::Run run = runlog::read_run(path);
    touch(run.metrics.step);
    touch(run.metrics.loss);
    touch(run.quant.layers);
    touch(run.quant.amax);
    touch(run.quant.applied);
    touch(run.missing);
  } catch (const runlog::LogError&) {
  }
  try {
    const std::unique_ptr<runlog::RunLog> log = runlog::RunLog::open(path, /*writable=*/false);
    (void)log->layers();
    const runlog::Checkpoint c = log->read_checkpoint();
    touch(c.params);
    touch(c.adam_m);
    touch(c.adam_v);
    touch(c.quantizer.values);
    touch(c.quantizer.count);
  } catch (const runlog::LogError&) {
  }
}

}  // namespace lpx::fuzz
