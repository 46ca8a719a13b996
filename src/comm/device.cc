#include "src/comm/device.h"

#include <array>
#include <cstring>
#include <mutex>
#include <unordered_set>

#include "loom/loom.h"
#include "src/base/env.h"
#include "src/base/error.h"
#include "src/base/logging.h"
#include "src/cuda/runtime.h"

namespace loom {
namespace {

// The seam is asked only when a CUDA communicator exists or is being made. A build without
// CUDA has one too (it reports no device), so LOOM_CUDA_SIM=1 works in every build.
bool cudaAvailableInBuild() { return LOOM_HAVE_CUDA || envString(EnvVar::LOOM_CUDA_SIM) == "1"; }

std::mutex liveMutex;
std::array<int, 64> liveCudaComms{};  // live CUDA communicators per device ordinal
std::unordered_set<void*> commDeviceMemory;

}  // namespace

int cudaDeviceCount() {
  if (!cudaAvailableInBuild()) return 0;
  return cuda::deviceRuntime().deviceCount();
}

void validateDevice(int device) {
  if (device == LOOM_DEVICE_CPU) return;
  LOOM_ENFORCE(device >= 0, InvalidArgument, "device ", device,
               " is invalid: use LOOM_DEVICE_CPU (-1) or a CUDA device ordinal (>= 0)");
  LOOM_ENFORCE(cudaAvailableInBuild(), InvalidUsage, "CUDA device ", device,
               " requested, but this loom was built without CUDA (LOOM_WITH_CUDA=OFF); use "
               "LOOM_DEVICE_CPU or rebuild with CUDA");
  const int count = cudaDeviceCount();
  LOOM_ENFORCE(count > 0, InvalidArgument, "CUDA device ", device,
               " requested, but no CUDA driver or device was found (the CUDA runtime reports "
               "no device to this process); use LOOM_DEVICE_CPU, or check the driver and "
               "CUDA_VISIBLE_DEVICES");
  LOOM_ENFORCE(device < count, InvalidArgument, "CUDA device ", device, " requested, but only ",
               count, " CUDA device(s) are visible to this process (ordinals 0 to ", count - 1,
               "); check CUDA_VISIBLE_DEVICES");
  LOOM_ENFORCE(device < static_cast<int>(liveCudaComms.size()), InvalidArgument, "CUDA device ",
               device, " is beyond the ", liveCudaComms.size(), " devices loom supports");
}

void describeDevice(int device, RankInfo& info) {
  if (device == LOOM_DEVICE_CPU) return;
  const cuda::DeviceIdentity id = cuda::deviceRuntime().identity(device);
  std::memcpy(info.gpuUuid, id.uuid.data(), sizeof(info.gpuUuid));
  std::memcpy(info.gpuBusId, id.busId, sizeof(info.gpuBusId));
  info.gpuBusId[sizeof(info.gpuBusId) - 1] = '\0';
  info.gpuCaps = id.caps;
}

void checkGpuSharing(const std::vector<RankInfo>& infos, int rank) {
  const RankInfo& me = infos[static_cast<size_t>(rank)];
  if (me.device == LOOM_DEVICE_CPU || (me.gpuCaps & cuda::kCapMps) != 0) return;
  for (const RankInfo& other : infos) {
    if (other.device == LOOM_DEVICE_CPU || other.hostHash != me.hostHash || other.pid == me.pid ||
        std::memcmp(other.gpuUuid, me.gpuUuid, sizeof(me.gpuUuid)) != 0)
      continue;
    static std::once_flag warned;
    std::call_once(warned, [&] {
      std::array<uint8_t, 16> uuid;
      std::memcpy(uuid.data(), me.gpuUuid, uuid.size());
      LOOM_WARN(kLogInit, "rank ", rank, " (pid ", me.pid, ") shares GPU ", cuda::uuidString(uuid),
                " (", me.gpuBusId, ") with rank ", other.rank, " (pid ", other.pid,
                ") of another process, and MPS is not running: their kernels time-slice the GPU "
                "instead of running at once. This works, but is slower; start the MPS control "
                "daemon (nvidia-cuda-mps-control -d) or use one process per GPU");
    });
    return;
  }
}

void checkCudaBuffer(int device, const void* ptr, size_t bytes, const char* call,
                     const char* what) {
  if (bytes == 0 || ptr == nullptr) return;
  cuda::DeviceRuntime& rt = cuda::deviceRuntime();
  const auto last = static_cast<const char*>(ptr) + (bytes - 1);
  for (const void* p : {ptr, static_cast<const void*>(last)}) {
    const cuda::PointerInfo info = rt.pointerInfo(p);
    switch (info.kind) {
      case cuda::PointerKind::kHostPinned:
      case cuda::PointerKind::kManaged:
        continue;
      case cuda::PointerKind::kDevice:
        LOOM_ENFORCE(info.device == device, InvalidArgument, call, ": ", what, " ", ptr,
                     " is device memory of CUDA device ", info.device,
                     ", but the communicator is on CUDA device ", device,
                     "; pass memory of its device (or pinned host memory)");
        continue;
      case cuda::PointerKind::kUnregistered:
        throw InvalidArgument(strCat(
            call, ": ", what, " ", ptr, p == ptr ? " is " : " ends in ",
            cuda::pointerKindName(info.kind), ", which a CUDA communicator (device ", device,
            ") cannot use; pass device memory of its device (cudaMalloc, loomMemAlloc), pinned "
            "host memory (cudaMallocHost, cudaHostRegister) or managed memory"));
    }
  }
}

DeviceUse::DeviceUse(int device) : device_(device) {
  if (device_ < 0 || device_ >= static_cast<int>(liveCudaComms.size())) return;
  std::lock_guard<std::mutex> lock(liveMutex);
  ++liveCudaComms[static_cast<size_t>(device_)];
}

DeviceUse::~DeviceUse() {
  if (device_ < 0 || device_ >= static_cast<int>(liveCudaComms.size())) return;
  std::lock_guard<std::mutex> lock(liveMutex);
  --liveCudaComms[static_cast<size_t>(device_)];
}

void* allocCommDeviceMemory(size_t size) {
  if (!cuda::deviceRuntimeLoaded() || size == 0) return nullptr;
  cuda::DeviceRuntime& rt = cuda::deviceRuntime();
  if (rt.deviceCount() == 0) return nullptr;
  const int device = rt.currentDevice();
  {
    std::lock_guard<std::mutex> lock(liveMutex);
    if (device < 0 || device >= static_cast<int>(liveCudaComms.size()) ||
        liveCudaComms[static_cast<size_t>(device)] == 0)
      return nullptr;
  }
  void* p = rt.malloc(size);
  try {
    rt.memsetAsync(p, 0, size, nullptr);
    rt.streamSynchronize(nullptr);
  } catch (...) {
    rt.free(p);
    throw;
  }
  std::lock_guard<std::mutex> lock(liveMutex);
  commDeviceMemory.insert(p);
  return p;
}

bool freeCommDeviceMemory(void* ptr) {
  if (!cuda::deviceRuntimeLoaded()) return false;
  {
    std::lock_guard<std::mutex> lock(liveMutex);
    if (commDeviceMemory.erase(ptr) == 0) return false;
  }
  cuda::deviceRuntime().free(ptr);
  return true;
}

}  // namespace loom
