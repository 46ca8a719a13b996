#include "src/exec/cuda/sim_launch.h"

#include <chrono>
#include <cstring>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "src/base/cpu_arch.h"
#include "src/exec/cuda/device_kernels.h"
#include "src/exec/cuda/device_program.h"
#include "src/kernels/reduce_ops.h"

namespace loom {
namespace {

// The device program's context on a host thread: a group of one.
class HostGroup {
 public:
  explicit HostGroup(const volatile uint32_t* abort) : abort_(abort) {}

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
  bool aborted() const {
    return abort_ != nullptr &&
           __atomic_load_n(const_cast<const uint32_t*>(abort_), __ATOMIC_ACQUIRE) != 0;
  }
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
  const volatile uint32_t* abort_;
  unsigned idle_ = 0;
  DeviceStepShared shared_{};
};

// The twin of deviceProgramKernel<T, Op>: its arguments are (DeviceLaunch, abort word), read
// at launch as cudaLaunchKernel reads them; the stream then runs one thread per block.
template <typename T, typename Op>
std::function<void()> deviceProgramTwin(cuda::Dim3 grid, cuda::Dim3, void** args) {
  const DeviceLaunch launch = *static_cast<const DeviceLaunch*>(args[0]);
  const volatile uint32_t* abort = *static_cast<const volatile uint32_t* const*>(args[1]);
  const int blocks = static_cast<int>(grid.x);
  return [launch, abort, blocks] {
    std::vector<std::thread> threads;
    threads.reserve(static_cast<size_t>(blocks));
    for (int t = 0; t < blocks; ++t)
      threads.emplace_back([&launch, abort, t] {
        HostGroup group(abort);
        runDeviceTask<T, Op>(launch, t, group);
      });
    for (std::thread& thread : threads) thread.join();
  };
}

template <typename T>
void registerType(cuda::DeviceRuntime& rt, loomDataType_t type) {
#define LOOM_REDUCE_OP(kind, Func, name)                                  \
  rt.registerHostKernel(deviceProgramKernelFor(type, ReduceOpKind::kind), \
                        &deviceProgramTwin<T, Func<T>>);
#include "src/kernels/reduce_op_table.def"
}

}  // namespace

void registerDeviceProgramTwins(cuda::DeviceRuntime& rt) {
  static std::once_flag once;
  std::call_once(once, [&] {
#define LOOM_DATATYPE(e, Type, name) registerType<Type>(rt, e);
#include "src/kernels/datatype_table.def"
  });
}

}  // namespace loom
