// The device program's kernels under the simulated CUDA runtime (LOOM_CUDA_SIM=1): host twins
// of deviceProgramKernelFor(type, op) (device_kernels.h), so the CUDA executor launches them
// as it launches the real ones. A twin runs each block of the grid as one host thread, a
// group of one running the device program (device_program.h) with host atomics, the launch's
// abort word and the steady clock. It proves on the CPU what the device program does with the
// plans, the rings and the reduction; it says nothing about a GPU's speed.
#pragma once

#include "src/cuda/runtime.h"

namespace loom {

// Registers the twins of every type x op with `rt` (once per process; later calls do nothing).
void registerDeviceProgramTwins(cuda::DeviceRuntime& rt);

}  // namespace loom
