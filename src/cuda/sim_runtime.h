// The simulated device runtime (LOOM_CUDA_SIM=1), a test facility: CUDA communicators, their
// buffers checks and their data path run on a machine without a GPU.
//   - N devices (LOOM_CUDA_SIM_DEVICES), each with a fake UUID and PCI bus id that depend only
//     on its ordinal, so processes that share "device 0" see the same GPU, as they would.
//   - Device memory is host memory in a sealed memfd, mapped shared. Its IPC handle names the
//     owning process and fd; another process opens it through /proc/PID/fd (or pidfd_getfd)
//     and maps the same pages, as cudaIpcOpenMemHandle maps the same device memory.
//   - Pinned, mapped and registered host memory, and managed memory, are entries of the
//     runtime's own allocation table, from which pointerInfo() answers; a mapped host pointer
//     is its own device pointer (unified addressing).
//   - Streams are host threads (sim_stream.h); the legacy default stream is one more of them.
//     Events are counters. Kernels are host twins registered with registerHostKernel().
// It knows nothing of CUDA and compiles in every build.
#pragma once

#include <memory>

#include "src/cuda/runtime.h"

namespace loom::cuda {

std::unique_ptr<DeviceRuntime> makeSimRuntime(int devices);

// The simulated current device of the calling thread (a stream thread sets its stream's).
void simSetThreadDevice(int device);

}  // namespace loom::cuda
