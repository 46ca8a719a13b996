#include "src/exec/cuda/launch_memory.h"

#include <cstring>
#include <new>

namespace loom {
namespace {

constexpr size_t kAlign = 16;  // device structs hold 8-byte words; LL stages take uint4s

size_t alignUp(size_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

// Offsets of the parts of a launch's image, in its order.
struct Layout {
  size_t tasks = 0, calls = 0, stepsDone = 0, done = 0, image = 0, llStage = 0, total = 0;

  explicit Layout(const HostLaunch& l) {
    size_t at = 0;
    auto place = [&](size_t& where, size_t bytes) {
      where = at;
      at = alignUp(at + bytes);
    };
    place(tasks, l.tasks.size() * sizeof(DeviceTask));
    place(calls, l.calls.size() * sizeof(DeviceCall));
    place(stepsDone, l.tasks.size() * sizeof(uint64_t));
    place(done, l.tasks.size() * sizeof(uint64_t));
    image = at;  // what is copied; the staging buffers need no initial value
    place(llStage, l.llStage.size());
    total = at;
  }
};

}  // namespace

LaunchMemory::~LaunchMemory() {
  // Runs only once no launch uses this memory (the executor waited for its kernels).
  try {
    if (device_ != nullptr) rt_.free(device_);
    if (image_ != nullptr) rt_.freeHost(image_);
    if (record_ != nullptr) rt_.freeHost(record_);
  } catch (const std::exception&) {
    // A destructor cannot report; a dead context has freed the memory anyway.
  }
}

void LaunchMemory::reserve(size_t imageBytes, size_t deviceBytes) {
  if (record_ == nullptr) {
    record_ = static_cast<LaunchRecord*>(
        rt_.hostAlloc(sizeof(LaunchRecord), cuda::kHostMapped | cuda::kHostPortable));
    recordOnDevice_ = static_cast<LaunchRecord*>(rt_.hostDevicePointer(record_));
  }
  if (deviceBytes > deviceBytes_) {
    if (device_ != nullptr) rt_.free(device_);
    device_ = nullptr;
    deviceBytes = deviceBytes * 2;  // amortises the growth of a communicator's launches
    device_ = rt_.malloc(deviceBytes);
    deviceBytes_ = deviceBytes;
  }
  if (imageBytes > imageBytes_) {
    if (image_ != nullptr) rt_.freeHost(image_);
    image_ = nullptr;
    imageBytes = imageBytes * 2;
    image_ = static_cast<unsigned char*>(rt_.hostAlloc(imageBytes, cuda::kHostDefault));
    imageBytes_ = imageBytes;
  }
}

DeviceLaunch LaunchMemory::upload(const HostLaunch& launch, cuda::Stream stream) {
  const Layout at(launch);
  reserve(at.image, at.total);
  auto* device = static_cast<unsigned char*>(device_);
  std::memset(image_, 0, at.image);  // the counters start at zero
  // Tasks carry pointers into the host's LL staging vector: moved to the device's.
  auto* tasks = reinterpret_cast<DeviceTask*>(image_ + at.tasks);
  std::memcpy(tasks, launch.tasks.data(), launch.tasks.size() * sizeof(DeviceTask));
  for (size_t t = 0; t < launch.tasks.size(); ++t) {
    if (tasks[t].llStage != nullptr)
      tasks[t].llStage = device + at.llStage + (tasks[t].llStage - launch.llStage.data());
  }
  std::memcpy(image_ + at.calls, launch.calls.data(), launch.calls.size() * sizeof(DeviceCall));
  new (record_) LaunchRecord{};
  if (at.image > 0) rt_.memcpyAsync(device, image_, at.image, stream);

  DeviceLaunch view;
  view.ntasks = static_cast<int>(launch.tasks.size());
  view.tasks = reinterpret_cast<const DeviceTask*>(device + at.tasks);
  view.calls = reinterpret_cast<const DeviceCall*>(device + at.calls);
  view.stepsDone = reinterpret_cast<uint64_t*>(device + at.stepsDone);
  view.done = reinterpret_cast<uint64_t*>(device + at.done);
  view.error = &recordOnDevice_->error;
  view.failed = &recordOnDevice_->failed;
  view.timeoutNs = launch.timeoutNs;
  return view;
}

}  // namespace loom
