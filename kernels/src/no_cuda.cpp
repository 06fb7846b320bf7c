// The host API when lpx is built without CUDA: nothing runs on a device.
#include <stdexcept>

#include "lpx/kernels/device.hpp"

namespace lpx::kernels {

bool cuda_available() { return false; }
std::string device_description() { return "lpx was built without CUDA (nvcc not found)"; }
std::vector<uint32_t> device_codec_roundtrip(const ElementFormat&) {
  throw std::runtime_error("no CUDA device: lpx was built without CUDA");
}

}  // namespace lpx::kernels
