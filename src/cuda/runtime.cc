// The choice of the process's device runtime, and the runtime of a build without CUDA.
#include "src/cuda/runtime.h"

#include <atomic>
#include <cstdio>
#include <memory>
#include <mutex>

#include "src/base/env.h"
#include "src/base/error.h"
#include "src/base/logging.h"
#include "src/cuda/sim_runtime.h"
#if LOOM_HAVE_CUDA
#include "src/cuda/cudart_runtime.h"
#endif

namespace loom::cuda {

namespace {

// A build without CUDA: no device, and every other call says why.
class NoCudaRuntime final : public DeviceRuntime {
 public:
  const char* name() const override { return "none"; }
  int deviceCount() override { return 0; }
  void setDevice(int) override { refuse(); }
  int currentDevice() override { refuse(); }
  DeviceIdentity identity(int) override { refuse(); }
  void synchronizeDevice() override { refuse(); }
  void* malloc(size_t) override { refuse(); }
  void* mallocManaged(size_t) override { refuse(); }
  void free(void*) override { refuse(); }
  void* hostAlloc(size_t, unsigned) override { refuse(); }
  void freeHost(void*) override { refuse(); }
  void hostRegister(void*, size_t, unsigned) override { refuse(); }
  void hostUnregister(void*) override { refuse(); }
  void* hostDevicePointer(void*) override { refuse(); }
  // Without CUDA every pointer is host memory CUDA does not know.
  PointerInfo pointerInfo(const void*) override { return {}; }
  void memcpyAsync(void*, const void*, size_t, Stream) override { refuse(); }
  void memsetAsync(void*, int, size_t, Stream) override { refuse(); }
  void memcpy(void*, const void*, size_t) override { refuse(); }
  Stream streamCreate() override { refuse(); }
  void streamDestroy(Stream) override { refuse(); }
  void streamSynchronize(Stream) override { refuse(); }
  bool streamQuery(Stream) override { refuse(); }
  Event eventCreate(bool) override { refuse(); }
  void eventDestroy(Event) override { refuse(); }
  void eventRecord(Event, Stream) override { refuse(); }
  bool eventQuery(Event) override { refuse(); }
  void eventSynchronize(Event) override { refuse(); }
  float eventElapsedMs(Event, Event) override { refuse(); }
  void streamWaitEvent(Stream, Event) override { refuse(); }
  bool streamIsCapturing(Stream) override { refuse(); }
  void streamBeginCapture(Stream) override { refuse(); }
  void streamEndCapture(Stream) override { refuse(); }
  void launchKernel(const void*, Dim3, Dim3, void**, size_t, Stream) override { refuse(); }
  void launchHostFunc(Stream, HostFn, void*) override { refuse(); }
  void registerHostKernel(const void*, HostKernel) override {}
  bool canAccessPeer(int, int) override { refuse(); }
  void enablePeerAccess(int) override { refuse(); }
  IpcMemHandle ipcGetMemHandle(void*) override { refuse(); }
  void* ipcOpenMemHandle(const IpcMemHandle&) override { refuse(); }
  void ipcCloseMemHandle(void*) override { refuse(); }
  int exportDmabuf(void*, size_t, uint64_t*) override { refuse(); }
  void flushRdmaWrites(int) override { refuse(); }
  const DriverEntryPoints& driver() override { return none_; }

 private:
  [[noreturn]] static void refuse() {
    throw CudaError(
        "this loom was built without CUDA (LOOM_WITH_CUDA=OFF); rebuild with CUDA, or set "
        "LOOM_CUDA_SIM=1 to simulate a device in tests");
  }
  DriverEntryPoints none_;
};

std::once_flag runtimeOnce;
// Made once and never destroyed: streams and their threads may outlive main.
std::atomic<DeviceRuntime*> runtime{nullptr};

DeviceRuntime* makeRuntime() {
  const std::string sim = envString(EnvVar::LOOM_CUDA_SIM);
  if (sim == "1") {
    int64_t devices = envInt(EnvVar::LOOM_CUDA_SIM_DEVICES);
    LOOM_ENFORCE(devices >= 1 && devices <= 64, InvalidArgument, "LOOM_CUDA_SIM_DEVICES=", devices,
                 " is out of range; use 1 to 64");
    LOOM_WARN(kLogInit, "LOOM_CUDA_SIM=1: CUDA is simulated on the CPU with ", devices,
              " device(s); this is a test facility");
    return makeSimRuntime(static_cast<int>(devices)).release();
  }
  LOOM_ENFORCE(sim == "0" || sim.empty(), InvalidArgument, "LOOM_CUDA_SIM=", sim, " is not 0 or 1");
#if LOOM_HAVE_CUDA
  return makeCudartRuntime().release();
#else
  return new NoCudaRuntime();
#endif
}

}  // namespace

DeviceRuntime& deviceRuntime() {
  std::call_once(runtimeOnce, [] { runtime = makeRuntime(); });
  return *runtime.load(std::memory_order_acquire);
}

bool deviceRuntimeLoaded() { return runtime.load(std::memory_order_acquire) != nullptr; }

const char* pointerKindName(PointerKind kind) {
  switch (kind) {
    case PointerKind::kUnregistered:
      return "pageable host memory";
    case PointerKind::kHostPinned:
      return "pinned host memory";
    case PointerKind::kDevice:
      return "device memory";
    case PointerKind::kManaged:
      return "managed memory";
  }
  return "unknown memory";
}

CurrentDeviceScope::CurrentDeviceScope(int device)
    : rt_(deviceRuntime()), previous_(rt_.currentDevice()) {
  if (previous_ != device) rt_.setDevice(device);
}

CurrentDeviceScope::~CurrentDeviceScope() {
  try {
    if (rt_.currentDevice() != previous_) rt_.setDevice(previous_);
  } catch (const std::exception& e) {
    LOOM_WARN(kLogInit, "could not make device ", previous_, " current again: ", e.what());
  }
}

std::string uuidString(const std::array<uint8_t, 16>& u) {
  char out[48];
  std::snprintf(out, sizeof(out),
                "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", u[0],
                u[1], u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13],
                u[14], u[15]);
  return out;
}

}  // namespace loom::cuda

loom::cuda::DeviceRuntime* loomInternalDeviceRuntime() { return &loom::cuda::deviceRuntime(); }
