// The device program (device_program.h) as CUDA kernels: one block per task of a launch, its
// threads the group, for every type x op of the tables (datatype_table.def,
// reduce_op_table.def). The CUDA executor (cuda_executor.h) launches them; CI proves they
// compile for the GPU (sm_80, sm_90) without spills or local memory.
#include <cuda_runtime.h>

#include "src/exec/cuda/device_kernels.h"
#include "src/exec/cuda/device_program.h"
#include "src/kernels/reduce_ops.h"

namespace loom {
inline namespace LOOM_ISA_NAMESPACE {
namespace {

// The device program's context on a GPU: the block is the group, counters are read and
// written at system scope (peers may be other GPUs or other processes' kernels, through
// host-mapped or IPC memory), the clock is %globaltimer.
class BlockGroup {
 public:
  __device__ BlockGroup(DeviceStepShared* shared, const volatile uint32_t* abort)
      : shared_(shared), abort_(abort) {}

  __device__ int thread() const { return static_cast<int>(threadIdx.x); }
  __device__ int threads() const { return static_cast<int>(blockDim.x); }
  __device__ void sync() const { __syncthreads(); }
  __device__ uint64_t load(const uint64_t* p) const {
    const uint64_t v = *reinterpret_cast<const volatile uint64_t*>(p);
    __threadfence_system();  // later reads see what was written before the value
    return v;
  }
  __device__ void store(uint64_t* p, uint64_t v) const {
    __threadfence_system();  // what the block wrote before (ordered by sync()) comes first
    *reinterpret_cast<volatile uint64_t*>(p) = v;
  }
  __device__ bool claim(uint32_t* word) const { return atomicCAS_system(word, 0u, ~0u) == 0u; }
  __device__ uint64_t nowNs() const {
    uint64_t t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
  }
  __device__ bool aborted() const { return abort_ != nullptr && *abort_ != 0; }
  __device__ void pause() const { __nanosleep(128); }
  __device__ DeviceStepShared& shared() const { return *shared_; }
  // The block copies `bytes`: 16-byte words where both ends allow, then the tail.
  __device__ void copy(void* dst, const void* src, size_t bytes) const {
    auto* d = static_cast<unsigned char*>(dst);
    const auto* s = static_cast<const unsigned char*>(src);
    size_t done = 0;
    if (((reinterpret_cast<uintptr_t>(d) | reinterpret_cast<uintptr_t>(s)) & 15u) == 0) {
      const size_t words = bytes / 16;
      for (size_t i = threadIdx.x; i < words; i += blockDim.x)
        reinterpret_cast<uint4*>(d)[i] = reinterpret_cast<const uint4*>(s)[i];
      done = words * 16;
    }
    for (size_t i = done + threadIdx.x; i < bytes; i += blockDim.x) d[i] = s[i];
  }

 private:
  DeviceStepShared* shared_;
  const volatile uint32_t* abort_;
};

// At least one block per SM: without the hint ptxas aims at more blocks per SM, holds the
// kernel to 48 registers and spills around the float division's slow-path call.
template <typename T, typename Op>
__global__ void __launch_bounds__(kDeviceProgramThreads, 1)
    deviceProgramKernel(DeviceLaunch launch, const volatile uint32_t* abort) {
  // Shared memory takes no constructors: raw storage, used as the step's scratch.
  __shared__ alignas(16) unsigned char scratch[sizeof(DeviceStepShared)];
  BlockGroup group(reinterpret_cast<DeviceStepShared*>(scratch), abort);
  runDeviceTask<T, Op>(launch, static_cast<int>(blockIdx.x), group);
}

template <typename T>
struct DeviceProgramKernels {
  static const void* const kFns[kNumReduceOps];
};

template <typename T>
const void* const DeviceProgramKernels<T>::kFns[kNumReduceOps] = {
#define LOOM_REDUCE_OP(kind, Func, name) \
  reinterpret_cast<const void*>(&deviceProgramKernel<T, Func<T>>),
#include "src/kernels/reduce_op_table.def"
};

#define LOOM_DATATYPE(e, Type, name) template struct DeviceProgramKernels<Type>;
#include "src/kernels/datatype_table.def"

}  // namespace
}  // namespace LOOM_ISA_NAMESPACE

const void* deviceProgramKernelFor(loomDataType_t type, ReduceOpKind op) {
  switch (type) {
#define LOOM_DATATYPE(e, Type, name) \
  case e:                            \
    return DeviceProgramKernels<Type>::kFns[static_cast<int>(op)];
#include "src/kernels/datatype_table.def"
    default:
      return nullptr;
  }
}

}  // namespace loom
