// Runs a device launch (device_launch.h) on host threads, for the simulated CUDA runtime: one
// thread per task, each a group of one thread running the device program (device_program.h)
// with host atomics, the communicator's abort flag and the steady clock. It proves on the CPU
// what the device program does with the plans, the rings and the reduction; it says nothing
// about a GPU's speed.
#pragma once

#include "src/base/interrupt.h"
#include "src/exec/cuda/device_launch.h"

namespace loom {

// Returns once every task is done or the launch failed (launch.error says how).
void runLaunchOnHost(HostLaunch& launch);

}  // namespace loom
