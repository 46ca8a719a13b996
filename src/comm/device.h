// The device a communicator lives on: the CPU or one CUDA device. loom builds without CUDA,
// and a CUDA build runs on machines without a GPU; both are normal cases, reported clearly.
// Everything CUDA here goes through the device-runtime seam (src/cuda/runtime.h), and only for
// CUDA communicators: a process whose communicators are all on the CPU never loads it.
#pragma once

#include <cstddef>
#include <vector>

#include "transports/peers.h"

namespace loom {

// Number of CUDA devices visible to this process; 0 without CUDA support, driver or GPU.
int cudaDeviceCount();

// Throws InvalidArgument / InvalidUsage when `device` is neither LOOM_DEVICE_CPU nor a
// visible CUDA device; with no driver or device the message says so.
void validateDevice(int device);

// Fills the GPU part of a rank's info (UUID, PCI bus id, IPC capabilities) for its device;
// nothing for a CPU rank.
void describeDevice(int device, RankInfo& info);

// After the rank infos are exchanged: warns once per process when ranks in different
// processes of this host share a GPU that does not run MPS (they time-slice it, and their
// kernels cannot run at once). Sharing itself is supported, between threads and processes.
void checkGpuSharing(const std::vector<RankInfo>& infos, int rank);

// Throws InvalidArgument, naming the kind of memory found, unless [ptr, ptr + bytes) is memory
// a CUDA communicator on `device` may use: device memory of that device, pinned host memory
// or managed memory. `call` and `what` ("AllReduce", "sendbuff") start the message.
void checkCudaBuffer(int device, const void* ptr, size_t bytes, const char* call, const char* what);

// Marks a live CUDA communicator on its device for as long as it lives (nothing for the CPU).
class DeviceUse {
 public:
  explicit DeviceUse(int device);
  ~DeviceUse();
  DeviceUse(const DeviceUse&) = delete;
  DeviceUse& operator=(const DeviceUse&) = delete;

 private:
  int device_;
};

// loomMemAlloc's device half. When a live CUDA communicator of this process is on the calling
// thread's current CUDA device, allocates `size` zero-filled bytes of that device's memory and
// returns them; otherwise returns nullptr (the caller gives host memory), without touching
// CUDA in a process that has no CUDA communicator.
void* allocCommDeviceMemory(size_t size);
// Frees memory from allocCommDeviceMemory and returns true; false for any other pointer.
bool freeCommDeviceMemory(void* ptr);

}  // namespace loom
