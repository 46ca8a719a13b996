#include "src/core/device_executor.h"

#include "loom/loom.h"
#include "src/core/error.h"
#include "src/core/exchange_now.h"
#include "src/core/executor.h"

namespace loom {
namespace {

class CpuExecutor final : public Executor {
 public:
  const char* device() const override { return "cpu"; }
  bool hostStreams() const override { return true; }
  void run(std::vector<CollOp>& ops) override { runOps(ops); }
  void runOne(CollOp&& op) override {
    if (runExchangeNow(op)) return;
    // No allocation once warm (the per-thread list keeps its capacity).
    thread_local std::vector<CollOp> one;
    struct Clear {  // the op holds its communicator: never keep it past the call
      std::vector<CollOp>& ops;
      ~Clear() { ops.clear(); }
    } clear{one};
    one.push_back(std::move(op));
    runOps(one);
  }
};

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

std::unique_ptr<Executor> makeExecutor(int device) {
  if (device == LOOM_DEVICE_CPU) return std::make_unique<CpuExecutor>();
  return std::make_unique<CudaExecutorStub>();
}

}  // namespace loom
