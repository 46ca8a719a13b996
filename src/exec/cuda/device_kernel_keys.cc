// deviceProgramKernelFor (device_kernels.h) in a build without CUDA: there are no kernels, but
// the simulated runtime still launches the device program through the seam by the same keys,
// with the host twins of sim_launch.h. One distinct address per type x op.
#include "src/exec/cuda/device_kernels.h"

namespace loom {
namespace {

constexpr int kKeyTypes = loomNumTypes;
const char kKeys[kKeyTypes][kNumReduceOps] = {};

}  // namespace

const void* deviceProgramKernelFor(loomDataType_t type, ReduceOpKind op) {
  const int t = static_cast<int>(type), o = static_cast<int>(op);
  if (t < 0 || t >= kKeyTypes || o < 0 || o >= kNumReduceOps) return nullptr;
  return &kKeys[t][o];
}

}  // namespace loom
