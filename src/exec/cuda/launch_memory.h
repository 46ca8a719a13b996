// Where a device launch (device_plan.h) lives while a kernel runs it: what the host built
// (HostLaunch, device_launch.h) copied into device memory, and the launch's failure record in
// host-mapped memory, which the host reads without synchronizing the stream.
//
// One LaunchMemory serves one launch at a time and is reused by the next once that launch has
// finished (cuda_executor.h keeps a pool per communicator), so the steady state allocates
// nothing: cudaMalloc and cudaHostAlloc synchronize the device and cost milliseconds.
#pragma once

#include <cstddef>
#include <cstdint>

#include "src/cuda/runtime.h"
#include "src/exec/cuda/device_launch.h"
#include "src/exec/cuda/device_plan.h"

namespace loom {

// The words a launch shares with the host: its first failure and the word its tasks poll
// (written by the kernel), and the abort word (written by the host).
struct LaunchRecord {
  DeviceError error;
  uint64_t failed = 0;
  uint32_t abort = 0;
};

class LaunchMemory {
 public:
  explicit LaunchMemory(cuda::DeviceRuntime& rt) : rt_(rt) {}
  ~LaunchMemory();
  LaunchMemory(const LaunchMemory&) = delete;
  LaunchMemory& operator=(const LaunchMemory&) = delete;

  // Lays `launch` out in device memory (growing it when needed), enqueues the copy on
  // `stream` and returns the view a kernel takes, whose pointers are all device addresses.
  // The launch's record is cleared first. The previous launch of this memory must be done.
  DeviceLaunch upload(const HostLaunch& launch, cuda::Stream stream);
  // What the launch wrote; read once its kernel finished (or while it runs, for `failed`).
  const LaunchRecord& record() const { return *record_; }
  // The abort word as the kernel reads it, and its raising by the host.
  const volatile uint32_t* abortOnDevice() const { return &recordOnDevice_->abort; }
  void raiseAbort() { __atomic_store_n(&record_->abort, 1u, __ATOMIC_RELEASE); }

 private:
  void reserve(size_t imageBytes, size_t deviceBytes);

  cuda::DeviceRuntime& rt_;
  void* device_ = nullptr;  // the image, then the LL staging buffers
  size_t deviceBytes_ = 0;
  unsigned char* image_ = nullptr;  // pinned: the source of the copy
  size_t imageBytes_ = 0;
  LaunchRecord* record_ = nullptr;  // mapped into the device's address space
  LaunchRecord* recordOnDevice_ = nullptr;
};

}  // namespace loom
