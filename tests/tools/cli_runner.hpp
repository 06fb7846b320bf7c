// Runs the built `lpx` binary (LPX_BINARY) in a shell and captures its exit status,
// stdout and stderr, for the command-line tests. Each test works in its own temp dir.
#pragma once

#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <string_view>
#include <vector>

namespace lpx_test {

struct CliResult {
  int status = -1;
  std::string out, err;
  // Number of non-empty lines on stderr (the error contract says exactly one), leaving out
  // the "progress: " lines that lpx train and lpx sweep write there every --progress-every
  // seconds when stderr is no terminal: a slow machine (or a sanitized build) sees some.
  int err_lines() const {
    int n = 0;
    size_t start = 0;
    while (start < err.size()) {
      size_t end = err.find('\n', start);
      if (end == std::string::npos) end = err.size();
      const std::string_view line(err.data() + start, end - start);
      if (!line.empty() && line.rfind("progress: ", 0) != 0) ++n;
      start = end + 1;
    }
    return n;
  }
};

inline std::string slurp(const std::filesystem::path& p) {
  std::ifstream f(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

class TempDir {
 public:
  TempDir() {
    std::string templ = (std::filesystem::temp_directory_path() / "lpx-test-XXXXXX").string();
    path_ = mkdtemp(templ.data());
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  std::filesystem::path operator/(const std::string& name) const { return path_ / name; }
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

// `args` is appended to the binary path as shell words (quote paths yourself if needed).
inline CliResult run_lpx(const std::string& args, const TempDir& dir, const std::string& stdin_file = "") {
  const auto out = dir / "stdout.txt", err = dir / "stderr.txt";
  std::string cmd = std::string(LPX_BINARY) + " " + args + " >" + out.string() + " 2>" + err.string();
  if (!stdin_file.empty()) cmd += " <" + stdin_file;
  const int raw = std::system(cmd.c_str());
  CliResult r;
  r.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : 128 + WTERMSIG(raw);
  r.out = slurp(out);
  r.err = slurp(err);
  return r;
}

template <class T>
void write_file(const std::filesystem::path& p, const std::vector<T>& v) {
  std::ofstream f(p, std::ios::binary);
  f.write(reinterpret_cast<const char*>(v.data()), static_cast<std::streamsize>(v.size() * sizeof(T)));
}

template <class T>
std::vector<T> read_file(const std::filesystem::path& p) {
  const std::string s = slurp(p);
  std::vector<T> v(s.size() / sizeof(T));
  std::memcpy(v.data(), s.data(), v.size() * sizeof(T));
  return v;
}

}  // namespace lpx_test
