#include "transports/shm/device_mapping.h"

#include "src/base/error.h"
#include "src/base/logging.h"
#include "src/cuda/runtime.h"
#include "transports/shm/shm_segment.h"

namespace loom::transport::shm {

DeviceMapping::DeviceMapping(void* base, size_t bytes, int device) : bytes_(bytes) {
  cuda::DeviceRuntime& rt = cuda::deviceRuntime();
  cuda::CurrentDeviceScope scope(device);
  rt.hostRegister(base, bytes, cuda::kHostMapped | cuda::kHostPortable);
  try {
    device_ = static_cast<unsigned char*>(rt.hostDevicePointer(base));
  } catch (...) {
    rt.hostUnregister(base);
    throw;
  }
  host_ = static_cast<unsigned char*>(base);
}

DeviceMapping::DeviceMapping(DeviceMapping&& o) noexcept
    : host_(o.host_), device_(o.device_), bytes_(o.bytes_) {
  o.host_ = nullptr;
}

DeviceMapping::~DeviceMapping() {
  if (host_ == nullptr) return;
  try {
    cuda::deviceRuntime().hostUnregister(host_);
  } catch (const std::exception& e) {
    LOOM_WARN(kLogShm, "unregistering a shared ring from the device failed: ", e.what());
  }
}

template <typename T>
T* DeviceMapping::onDevice(T* host) const {
  if (host == nullptr) return nullptr;
  const auto* p = reinterpret_cast<const unsigned char*>(host);
  LOOM_ENFORCE(p >= host_ && p < host_ + bytes_, InternalError,
               "a ring pointer outside the ring's device mapping");
  return reinterpret_cast<T*>(device_ + (p - host_));
}

ConnectionView DeviceMapping::deviceView(ConnectionView v) const {
  if (host_ == nullptr) return v;
  v.memory = MemoryKind::kHostMapped;
  if (v.protocol == Protocol::kLL) {
    v.ll.slots = onDevice(v.ll.slots);
    v.ll.head = onDevice(v.ll.head);
    v.ll.step = onDevice(v.ll.step);
    return v;
  }
  v.simple.slots = onDevice(v.simple.slots);
  v.simple.tail = onDevice(v.simple.tail);
  v.simple.head = onDevice(v.simple.head);
  v.simple.words = onDevice(v.simple.words);
  v.simple.direct = onDevice(v.simple.direct);
  v.simple.region = onDevice(v.simple.region);
  return v;
}

DeviceMapping deviceMappingFor(const ShmSegment& segment, int device) {
  if (device < 0) return DeviceMapping();
  return DeviceMapping(segment.data(), segment.size(), device);
}

}  // namespace loom::transport::shm
