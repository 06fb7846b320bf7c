#include "json_file.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "sweep_spec.hpp"  // printable

namespace lpx::cli {

std::string read_text_file(const std::string& path, size_t max_bytes) {
  const std::string name = printable(path);
  const int fd = path == "-" ? STDIN_FILENO : ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw io::JsonError(fmt::format("{}: cannot read: {}", name, std::strerror(errno)));
  std::string text;
  char buf[1 << 16];
  int err = 0;
  while (text.size() <= max_bytes) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) err = errno;
    if (n <= 0) break;
    text.append(buf, static_cast<size_t>(n));
  }
  if (fd != STDIN_FILENO) ::close(fd);
  if (err) throw io::JsonError(fmt::format("{}: cannot read: {}", name, std::strerror(err)));
  if (text.size() > max_bytes)
    throw io::JsonError(fmt::format("{}: more than {} bytes (the limit for this input)", name, max_bytes));
  return text;
}

nlohmann::ordered_json read_json_file(const std::string& path, const io::JsonLimits& limits) {
  return io::parse_json<nlohmann::ordered_json>(read_text_file(path, limits.max_bytes), printable(path), limits);
}

}  // namespace lpx::cli
