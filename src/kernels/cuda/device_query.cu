// CUDA-side helpers of src/comm/device.h. Compiled by nvcc when LOOM_WITH_CUDA=ON; they must
// behave on machines with the toolkit but no driver or GPU (cudaGetDeviceCount fails there).
#include <cuda_runtime.h>

#include "src/comm/device.h"

namespace loom {

int cudaDeviceCount() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    (void)cudaGetLastError();  // clear the sticky "no driver" error for later calls
    return 0;
  }
  return count;
}

}  // namespace loom
