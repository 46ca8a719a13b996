#include "src/exec/device_executor.h"

#include <string_view>

#include "loom/loom.h"
#include "src/base/error.h"
#include "src/cuda/runtime.h"
#include "src/exec/cpu/executor.h"
#include "src/exec/cuda/sim_executor.h"

namespace loom {
namespace {

// Stands where the CUDA executor goes: a CUDA communicator exists (init, split, queries), but
// its calls are refused clearly rather than run on the wrong device.
class CudaExecutorStub final : public Executor {
 public:
  const char* device() const override { return "cuda"; }
  bool hostStreams() const override { return false; }
  void run(std::vector<CollOp>& ops) override {
    if (!ops.empty()) refuse(ops.front());
  }
  void runOne(CollOp&& op) override { refuse(op); }

 private:
  [[noreturn]] static void refuse(const CollOp& op) {
    throw InvalidUsage(strCat(
        collName(op.kind),
        " on a CUDA communicator: this build of loom has no CUDA data path yet, so CUDA "
        "communicators cannot run collectives or point-to-point calls. Create the communicator "
        "with config.device = LOOM_DEVICE_CPU and host buffers instead"));
  }
};

}  // namespace

std::unique_ptr<Executor> makeExecutor(const Comm& comm) {
  if (comm.device() == LOOM_DEVICE_CPU) return std::make_unique<CpuExecutor>(comm);
  // A CUDA communicator's init loaded the seam, so asking it touches nothing new.
  if (std::string_view(cuda::deviceRuntime().name()) == "sim")
    return std::make_unique<SimCudaExecutor>(comm);
  return std::make_unique<CudaExecutorStub>();
}

Executor& executorOf(const Comm& comm) {
  CommLayerState* state = comm.layer(CommLayer::kExec);
  LOOM_ENFORCE(state != nullptr, InvalidUsage,
               "the communicator's executor is used before init made it");
  return static_cast<Executor&>(*state);
}

}  // namespace loom
