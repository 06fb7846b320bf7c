// The CUDA module loader (docs/kernels.md). lpx_kernels links no CUDA library: the
// launchers live in liblpx_cuda.so, which is dlopen()ed on the first call that needs a
// device (cuda_available(), any kernel, any device memory) and never before, so a process
// that never touches the GPU (`lpx --version`, a CPU training run) never maps the CUDA
// runtime or cuBLASLt.
//
// Where the module is looked for, in order:
//   1. $LPX_CUDA_MODULE, when set: that file and nothing else (its failure is reported);
//   2. liblpx_cuda.so next to the running executable (/proc/self/exe);
//   3. ../lib/liblpx_cuda.so relative to the executable's folder (an installed tree);
//   4. the build tree's module (LPX_CUDA_MODULE_BUILD_PATH, compiled in by CMake).
// The first file of 2-4 that exists is loaded. A build without nvcc looks only at 1.
// The module's entry point must accept this build's kAbiVersion and its table layout
// must equal ours (backend.hpp); then cudaGetDeviceCount decides. Every failure is kept
// as one line and thrown as std::runtime_error("no CUDA device: <line>") by every entry
// point that needs a device.
#include <dlfcn.h>

#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

#include "backend.hpp"
#include "lpx/kernels/device.hpp"
#include "lpx/kernels/memory.hpp"

namespace lpx::kernels {

namespace backend {
namespace {

namespace fs = std::filesystem;

struct State {
  const Table* table = nullptr;  // the loaded module's table (null: none)
  std::string path;              // the file it came from
  int devices = 0;
  std::string name;  // the device, when there is one
  std::string why;   // why there is no usable device
};

// Newlines (dlerror can have them) would break the one-line error contract.
std::string one_line(std::string s) {
  for (char& c : s)
    if (c == '\n' || c == '\r') c = ' ';
  return s;
}

// dlopen + entry point + ABI check. Null and `why` set on failure.
const Table* open_module(const std::string& path, std::string& why) {
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* e = dlerror();
    why = one_line("cannot load the CUDA module " + path + ": " + (e ? e : "dlopen failed"));
    return nullptr;
  }
  using Entry = const Table* (*)(uint32_t);
  auto entry = reinterpret_cast<Entry>(dlsym(handle, kEntryPoint));
  if (entry == nullptr) {
    why = "the CUDA module " + path + " has no " + kEntryPoint + " (not an lpx CUDA module)";
    dlclose(handle);
    return nullptr;
  }
  const Table* t = entry(kAbiVersion);
  if (t == nullptr || !(t->layout == layout())) {
    why = "the CUDA module " + path + " was built for another lpx (interface version " +
          (t ? std::to_string(t->layout.abi_version) : std::string("other")) + ", expected " +
          std::to_string(kAbiVersion) + " with the same struct layout); rebuild it";
    return nullptr;  // left loaded: unloading a CUDA runtime is not worth the risk
  }
  return t;
}

[[maybe_unused]] std::string executable_dir() {  // unused without a CUDA build path
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  return ec ? std::string() : exe.parent_path().string();
}

State load() {
  State s;
  std::string path;
  if (const char* env = std::getenv("LPX_CUDA_MODULE"); env != nullptr && *env != '\0') {
    path = env;
  } else {
#ifndef LPX_CUDA_MODULE_BUILD_PATH
    s.why = "lpx was built without CUDA (nvcc not found)";
    return s;
#else
    std::vector<std::string> candidates;
    if (const std::string dir = executable_dir(); !dir.empty()) {
      candidates.push_back((fs::path(dir) / kModuleFile).string());
      candidates.push_back((fs::path(dir) / ".." / "lib" / kModuleFile).lexically_normal().string());
    }
    candidates.push_back(LPX_CUDA_MODULE_BUILD_PATH);
    for (const std::string& c : candidates) {
      std::error_code ec;
      if (fs::exists(c, ec)) {
        path = c;
        break;
      }
    }
    if (path.empty()) {
      std::string looked;
      for (const std::string& c : candidates) looked += (looked.empty() ? "" : ", ") + c;
      s.why = std::string("the CUDA module ") + kModuleFile + " was not found (looked at " + looked +
              "; set LPX_CUDA_MODULE to its path)";
      return s;
    }
#endif
  }
  s.table = open_module(path, s.why);
  if (s.table == nullptr) return s;
  s.path = path;
  char why[512] = {};
  s.devices = s.table->device_count(why, sizeof(why));
  if (s.devices <= 0) {
    s.why = one_line(why[0] ? why : "no CUDA device found");
    return s;
  }
  char name[256] = {};
  s.table->device_name(name, sizeof(name));
  s.name = name;
  return s;
}

const State& state() {
  static State s;
  static std::once_flag once;
  std::call_once(once, [] { s = load(); });
  return s;
}

}  // namespace

const Table& require() {
  const State& s = state();
  if (s.table == nullptr || s.devices <= 0) throw std::runtime_error("no CUDA device: " + s.why);
  return *s.table;
}

}  // namespace backend

bool cuda_available() {
  const backend::State& s = backend::state();
  return s.table != nullptr && s.devices > 0;
}

std::string device_description() {
  const backend::State& s = backend::state();
  return s.table != nullptr && s.devices > 0 ? s.name : s.why;
}

std::string cuda_module_path() { return backend::state().path; }

std::string probe_cuda_module(const std::string& path) {
  std::string why;
  return backend::open_module(path, why) != nullptr ? std::string() : why;
}

std::vector<uint32_t> device_codec_roundtrip(const ElementFormat& f) {
  const backend::Table& t = backend::require();
  std::vector<uint32_t> out(size_t{f.code_mask} + 1);
  t.codec_roundtrip(f, out.data());
  return out;
}

// --- Device memory (memory.hpp)

void copy_to_device(void* device_dst, const void* host_src, size_t bytes) {
  if (bytes > 0) backend::require().copy(device_dst, host_src, bytes, backend::Copy::host_to_device, nullptr);
}
void copy_to_host(void* host_dst, const void* device_src, size_t bytes) {
  if (bytes > 0) backend::require().copy(host_dst, device_src, bytes, backend::Copy::device_to_host, nullptr);
}
void copy_on_device(void* device_dst, const void* device_src, size_t bytes, void* stream) {
  if (bytes > 0) backend::require().copy(device_dst, device_src, bytes, backend::Copy::device_to_device, stream);
}
void fill_device(void* device_dst, int byte, size_t bytes, void* stream) {
  if (bytes > 0) backend::require().fill(device_dst, byte, bytes, stream);
}
void synchronize(void* stream) { backend::require().synchronize(stream); }

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& o) noexcept {
  if (this != &o) {
    reset();
    ptr_ = o.ptr_;
    bytes_ = o.bytes_;
    o.ptr_ = nullptr;
    o.bytes_ = 0;
  }
  return *this;
}

void DeviceBuffer::reserve(size_t bytes) {
  if (bytes <= bytes_ && (ptr_ != nullptr || bytes == 0)) return;
  const backend::Table& t = backend::require();
  reset();
  ptr_ = t.allocate(bytes);
  bytes_ = bytes;
}

void DeviceBuffer::reset() noexcept {
  if (ptr_ != nullptr) backend::state().table->release(ptr_);
  ptr_ = nullptr;
  bytes_ = 0;
}

}  // namespace lpx::kernels
