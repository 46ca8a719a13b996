// The CUDA runtime behind the seam (cudart_runtime.cc); only in builds with LOOM_WITH_CUDA.
// deviceRuntime() makes it; tests make their own to check it where LOOM_CUDA_SIM=1 is set.
#pragma once

#include <memory>

#include "src/cuda/runtime.h"

namespace loom::cuda {

std::unique_ptr<DeviceRuntime> makeCudartRuntime();

}  // namespace loom::cuda
