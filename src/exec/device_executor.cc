#include "src/exec/device_executor.h"

#include "loom/loom.h"
#include "src/base/error.h"
#include "src/exec/cpu/executor.h"
#include "src/exec/cuda/cuda_executor.h"

namespace loom {

std::unique_ptr<Executor> makeExecutor(const Comm& comm) {
  if (comm.device() == LOOM_DEVICE_CPU) return std::make_unique<CpuExecutor>(comm);
  return std::make_unique<CudaExecutor>(comm);
}

Executor& executorOf(const Comm& comm) {
  CommLayerState* state = comm.layer(CommLayer::kExec);
  LOOM_ENFORCE(state != nullptr, InvalidUsage,
               "the communicator's executor is used before init made it");
  return static_cast<Executor&>(*state);
}

}  // namespace loom
