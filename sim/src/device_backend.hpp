// sim-internal: the OperandBackend (recipes/operand.hpp) for a device; null for the CPU.
#pragma once

#include <memory>

#include "lpx/recipes/operand.hpp"
#include "lpx/sim/device.hpp"

namespace lpx::sim {
// Throws like require_device. The backend keeps one grow-only device workspace behind a
// mutex (device.cpp); layers may share it.
std::shared_ptr<OperandBackend> make_operand_backend(Device d);
}  // namespace lpx::sim
