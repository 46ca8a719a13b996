#include "src/exec/cuda/sim_launch.h"

#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include "src/base/cpu_arch.h"
#include "src/base/error.h"
#include "src/comm/comm.h"
#include "src/exec/cuda/device_program.h"
#include "src/kernels/reduce_ops.h"

namespace loom {
namespace {

// The device program's context on a host thread: a group of one.
class HostGroup {
 public:
  explicit HostGroup(AbortFlag abort) : abort_(abort) {}

  int thread() const { return 0; }
  int threads() const { return 1; }
  void sync() {}
  uint64_t load(const uint64_t* p) const { return __atomic_load_n(p, __ATOMIC_ACQUIRE); }
  void store(uint64_t* p, uint64_t v) const { __atomic_store_n(p, v, __ATOMIC_RELEASE); }
  bool claim(uint32_t* word) const {
    uint32_t expected = 0;
    return __atomic_compare_exchange_n(word, &expected, ~0u, false, __ATOMIC_ACQ_REL,
                                       __ATOMIC_ACQUIRE);
  }
  uint64_t nowNs() const {
    return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                     std::chrono::steady_clock::now().time_since_epoch())
                                     .count());
  }
  bool aborted() const { return abort_ != nullptr && abort_->raised(); }
  // Spins briefly, then yields, then naps: the simulated ranks' threads share few cores.
  void pause() {
    if (++idle_ < 64) {
      cpuPause();
    } else if (idle_ < 4096) {
      std::this_thread::yield();
    } else {
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }
  DeviceStepShared& shared() {
    idle_ = 0;  // a new step: progress was made
    return shared_;
  }
  void copy(void* dst, const void* src, size_t bytes) const { std::memcpy(dst, src, bytes); }

 private:
  AbortFlag abort_;
  unsigned idle_ = 0;
  DeviceStepShared shared_{};
};

template <typename T, typename Op>
void runTask(const DeviceLaunch& launch, int t, AbortFlag abort) {
  HostGroup group(abort);
  runDeviceTask<T, Op>(launch, t, group);
}

using TaskRunner = void (*)(const DeviceLaunch&, int, AbortFlag);

template <typename T>
TaskRunner runnerFor(ReduceOpKind op) {
  switch (op) {
#define LOOM_REDUCE_OP(kind, Func, name) \
  case ReduceOpKind::kind:               \
    return &runTask<T, Func<T>>;
#include "src/kernels/reduce_op_table.def"
    default:
      return nullptr;
  }
}

TaskRunner runnerFor(loomDataType_t type, ReduceOpKind op) {
  switch (type) {
#define LOOM_DATATYPE(e, Type, name) \
  case e:                            \
    return runnerFor<Type>(op);
#include "src/kernels/datatype_table.def"
    default:
      return nullptr;
  }
}

}  // namespace

void runLaunchOnHost(HostLaunch& launch) {
  const DeviceLaunch view = launch.view();
  std::vector<std::thread> threads;
  threads.reserve(launch.tasks.size());
  for (int t = 0; t < view.ntasks; ++t) {
    const CollOp& op = *launch.ops[static_cast<size_t>(launch.tasks[t].call)];
    const TaskRunner run = runnerFor(op.type, op.reduce);
    LOOM_ENFORCE(run != nullptr, InternalError, "no device program for ", describeCall(op));
    threads.emplace_back(run, view, t, op.comm->abortFlag());
  }
  for (std::thread& thread : threads) thread.join();
}

}  // namespace loom
