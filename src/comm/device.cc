#include "src/comm/device.h"

#include "loom/loom.h"
#include "src/base/error.h"

namespace loom {

#if !LOOM_HAVE_CUDA
int cudaDeviceCount() { return 0; }
#endif

void validateDevice(int device) {
  if (device == LOOM_DEVICE_CPU) return;
  LOOM_ENFORCE(device >= 0, InvalidArgument, "device ", device,
               " is invalid: use LOOM_DEVICE_CPU (-1) or a CUDA device ordinal (>= 0)");
  LOOM_ENFORCE(LOOM_HAVE_CUDA, InvalidUsage, "CUDA device ", device,
               " requested, but this loom was built without CUDA (LOOM_WITH_CUDA=OFF); use "
               "LOOM_DEVICE_CPU or rebuild with CUDA");
  int count = cudaDeviceCount();
  LOOM_ENFORCE(device < count, InvalidArgument, "CUDA device ", device, " requested, but ", count,
               " CUDA device(s) are visible to this process",
               count == 0 ? " (no GPU or driver here; use LOOM_DEVICE_CPU)" : "");
}

}  // namespace loom
