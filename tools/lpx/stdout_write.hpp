// Output a command must not lose without a word (docs/input-policy.md): a write to standard
// output that fails (a full disk, /dev/full, a file-size limit: main() ignores SIGXFSZ) is
// an error, one line and exit 1, never a silent exit 0. Unlike main()'s finish_stdout, the
// error comes at once, before the command goes on, and names the command.
#pragma once

#include <cstdio>
#include <cstring>
#include <cerrno>
#include <stdexcept>
#include <string>
#include <string_view>

#include <fmt/format.h>

namespace lpx::cli {

// Writes `text` to standard output and flushes it; a failure throws
// std::runtime_error("<who>: cannot write to standard output: <reason>").
inline void write_stdout(std::string_view text, const std::string& who) {
  errno = 0;
  if (std::fwrite(text.data(), 1, text.size(), stdout) != text.size() || std::fflush(stdout) != 0 ||
      std::ferror(stdout)) {
    const int e = errno;
    std::clearerr(stdout);
    throw std::runtime_error(
        fmt::format("{}: cannot write to standard output: {}", who, e ? std::strerror(e) : "write error"));
  }
}

}  // namespace lpx::cli
