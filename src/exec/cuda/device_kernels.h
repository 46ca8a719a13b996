// The device program's CUDA kernels (device_kernels.cu): one per type x op, launched with one
// block of kDeviceProgramThreads threads per task and arguments (DeviceLaunch, const volatile
// uint32_t* abort word). Only in CUDA builds.
#pragma once

#include "loom/loom.h"
#include "src/kernels/reduce_copy_args.h"

namespace loom {

inline constexpr int kDeviceProgramThreads = 256;

// The kernel for a launch whose calls reduce `type` with `op`; nullptr for an unknown pair.
const void* deviceProgramKernelFor(loomDataType_t type, ReduceOpKind op);

}  // namespace loom
