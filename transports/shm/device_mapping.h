// A CUDA rank's shm ring, mapped into its GPU's address space: the fallback for GPU pairs that
// CUDA IPC does not take (transports/cuda_ipc), where the device program writes and reads the
// ring in host memory across PCIe. Each side registers its own mapping of the segment with the
// device runtime (cudaHostRegister, mapped and portable) and hands out a view whose pointers
// are the device's addresses of the same bytes (cudaHostGetDevicePointer); the host keeps its
// own addresses. A CPU rank's ring is never registered: CPU communicators never touch CUDA.
#pragma once

#include <cstddef>

#include "src/kernels/connection_view.h"

namespace loom::transport::shm {

class DeviceMapping {
 public:
  DeviceMapping() = default;  // none: a CPU rank's ring
  // Registers [base, base + bytes) for `device`; throws CudaError when the runtime refuses.
  DeviceMapping(void* base, size_t bytes, int device);
  ~DeviceMapping();
  DeviceMapping(DeviceMapping&& o) noexcept;
  DeviceMapping& operator=(DeviceMapping&&) = delete;
  DeviceMapping(const DeviceMapping&) = delete;

  // `view` (of this mapping's ring, in host addresses) as the device reaches it; unchanged
  // when nothing is mapped.
  ConnectionView deviceView(ConnectionView view) const;

 private:
  template <typename T>
  T* onDevice(T* host) const;

  unsigned char* host_ = nullptr;
  unsigned char* device_ = nullptr;
  size_t bytes_ = 0;
};

// The mapping of a ring for a rank on `device` (LOOM_DEVICE_CPU: none).
class ShmSegment;
DeviceMapping deviceMappingFor(const ShmSegment& segment, int device);

}  // namespace loom::transport::shm
