// sim-internal: the OperandBackend (recipes/operand.hpp) for a device; null for the CPU.
#pragma once

#include <memory>

#include "lpx/sim/device.hpp"

#ifdef LPX_SIM_HAVE_RECIPES
#include "lpx/recipes/operand.hpp"

namespace lpx::sim {
// Throws like require_device. The backend is stateless; layers may share it.
std::shared_ptr<OperandBackend> make_operand_backend(Device d);
}  // namespace lpx::sim
#endif
