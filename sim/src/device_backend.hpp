// sim-internal: the executors of a device: the OperandBackend of the recipe quantizers
// (recipes/operand.hpp) and the GemmBackend of the layers' GEMMs (sim/gemm.hpp), one object
// behind both; null for the CPU.
#pragma once

#include <memory>

#include "lpx/recipes/operand.hpp"
#include "lpx/sim/device.hpp"
#include "lpx/sim/gemm.hpp"

namespace lpx::sim {
struct DeviceBackends {
  std::shared_ptr<OperandBackend> quantizers;
  std::shared_ptr<GemmBackend> gemms;
};
// Throws like require_device. The backend keeps one grow-only device workspace behind a
// mutex (device.cpp); layers may share it.
DeviceBackends make_device_backends(Device d);
}  // namespace lpx::sim
