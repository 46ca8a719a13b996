// The CUDA runtime behind the seam: cudart_static, and the driver's functions fetched by
// version. libcuda is never linked: cudart_static loads it itself on the first call, and
// without a driver every call fails with an error code (cudaErrorInsufficientDriver,
// cudaErrorNoDevice) instead of the process failing to load.
#include "src/cuda/cudart_runtime.h"

#include <cuda_runtime_api.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cstring>
#include <memory>
#include <mutex>

#include "src/base/error.h"

namespace loom::cuda {
namespace {

// Throws CudaError naming the call; clears the runtime's last error so a later call does not
// report this one again.
void check(cudaError_t err, const char* call) {
  if (err == cudaSuccess) return;
  (void)cudaGetLastError();
  throw CudaError(
      strCat(call, " failed: ", cudaGetErrorName(err), " (", cudaGetErrorString(err), ")"));
}

// cuMemGetHandleForAddressRange at ABI 11070, as cudaTypedefs.h's PFN_ type has it (CUresult
// and CUmemRangeHandleType are int-sized enums). cuda.h is not included: its macros rename
// driver functions that DriverEntryPoints names as members.
using MemGetHandleForAddressRange = int (*)(void* handle, unsigned long long dptr, size_t size,
                                            int handleType, unsigned long long flags);
constexpr int kRangeHandleDmaBufFd = 1;  // CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD

cudaStream_t asStream(Stream s) { return static_cast<cudaStream_t>(s); }
cudaEvent_t asEvent(Event e) { return static_cast<cudaEvent_t>(e); }
dim3 asDim3(Dim3 d) { return dim3(d.x, d.y, d.z); }

class CudartRuntime final : public DeviceRuntime {
 public:
  const char* name() const override { return "cudart"; }

  int deviceCount() override {
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess) {
      (void)cudaGetLastError();  // the sticky "no driver" error would fail later calls
      return 0;
    }
    return count;
  }
  void setDevice(int device) override { check(cudaSetDevice(device), "cudaSetDevice"); }
  int currentDevice() override {
    int device = -1;
    check(cudaGetDevice(&device), "cudaGetDevice");
    return device;
  }
  DeviceIdentity identity(int device) override {
    DeviceIdentity id;
    cudaDeviceProp prop;
    check(cudaGetDeviceProperties(&prop, device), "cudaGetDeviceProperties");
    std::memcpy(id.uuid.data(), prop.uuid.bytes, id.uuid.size());
    check(cudaDeviceGetPCIBusId(id.busId, sizeof(id.busId), device), "cudaDeviceGetPCIBusId");
    id.smCount = prop.multiProcessorCount;
    if (attribute(cudaDevAttrUnifiedAddressing, device)) id.caps |= kCapIpcLegacy;
    if (attribute(cudaDevAttrHostRegisterSupported, device)) id.caps |= kCapHostRegister;
    if (attribute(cudaDevAttrMpsEnabled, device)) id.caps |= kCapMps;
    if (attribute(cudaDevAttrMemoryPoolSupportedHandleTypes, device) &
        cudaMemHandleTypePosixFileDescriptor)
      id.caps |= kCapIpcPosixFd;
    return id;
  }
  void synchronizeDevice() override { check(cudaDeviceSynchronize(), "cudaDeviceSynchronize"); }

  void* malloc(size_t bytes) override {
    void* p = nullptr;
    check(cudaMalloc(&p, bytes), "cudaMalloc");
    return p;
  }
  void* mallocManaged(size_t bytes) override {
    void* p = nullptr;
    check(cudaMallocManaged(&p, bytes, cudaMemAttachGlobal), "cudaMallocManaged");
    return p;
  }
  void free(void* ptr) override { check(cudaFree(ptr), "cudaFree"); }
  void* hostAlloc(size_t bytes, unsigned flags) override {
    void* p = nullptr;
    check(cudaHostAlloc(&p, bytes, cudaFlags(flags)), "cudaHostAlloc");
    return p;
  }
  void freeHost(void* ptr) override { check(cudaFreeHost(ptr), "cudaFreeHost"); }
  void hostRegister(void* ptr, size_t bytes, unsigned flags) override {
    check(cudaHostRegister(ptr, bytes, cudaFlags(flags)), "cudaHostRegister");
  }
  void hostUnregister(void* ptr) override { check(cudaHostUnregister(ptr), "cudaHostUnregister"); }
  void* hostDevicePointer(void* hostPtr) override {
    void* p = nullptr;
    check(cudaHostGetDevicePointer(&p, hostPtr, 0), "cudaHostGetDevicePointer");
    return p;
  }
  PointerInfo pointerInfo(const void* ptr) override {
    cudaPointerAttributes attr;
    if (cudaPointerGetAttributes(&attr, ptr) != cudaSuccess) {
      (void)cudaGetLastError();  // no driver, or a pointer CUDA cannot judge: plain host memory
      return {};
    }
    PointerInfo info;
    switch (attr.type) {
      case cudaMemoryTypeHost:
        info.kind = PointerKind::kHostPinned;
        break;
      case cudaMemoryTypeDevice:
        info.kind = PointerKind::kDevice;
        break;
      case cudaMemoryTypeManaged:
        info.kind = PointerKind::kManaged;
        break;
      default:
        return {};
    }
    info.device = attr.device;
    info.devicePointer = attr.devicePointer;
    info.hostPointer = attr.hostPointer;
    return info;
  }

  void memcpyAsync(void* dst, const void* src, size_t bytes, Stream s) override {
    check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, asStream(s)), "cudaMemcpyAsync");
  }
  void memsetAsync(void* dst, int value, size_t bytes, Stream s) override {
    check(cudaMemsetAsync(dst, value, bytes, asStream(s)), "cudaMemsetAsync");
  }
  void memcpy(void* dst, const void* src, size_t bytes) override {
    check(cudaMemcpy(dst, src, bytes, cudaMemcpyDefault), "cudaMemcpy");
  }

  Stream streamCreate() override {
    cudaStream_t s = nullptr;
    check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
    return s;
  }
  void streamDestroy(Stream s) override {
    check(cudaStreamDestroy(asStream(s)), "cudaStreamDestroy");
  }
  void streamSynchronize(Stream s) override {
    check(cudaStreamSynchronize(asStream(s)), "cudaStreamSynchronize");
  }
  bool streamQuery(Stream s) override {
    return ready(cudaStreamQuery(asStream(s)), "cudaStreamQuery");
  }
  Event eventCreate(bool timing) override {
    cudaEvent_t e = nullptr;
    check(cudaEventCreateWithFlags(&e, timing ? cudaEventDefault : cudaEventDisableTiming),
          "cudaEventCreateWithFlags");
    return e;
  }
  void eventDestroy(Event e) override { check(cudaEventDestroy(asEvent(e)), "cudaEventDestroy"); }
  void eventRecord(Event e, Stream s) override {
    check(cudaEventRecord(asEvent(e), asStream(s)), "cudaEventRecord");
  }
  bool eventQuery(Event e) override { return ready(cudaEventQuery(asEvent(e)), "cudaEventQuery"); }
  void eventSynchronize(Event e) override {
    check(cudaEventSynchronize(asEvent(e)), "cudaEventSynchronize");
  }
  float eventElapsedMs(Event start, Event end) override {
    float ms = 0;
    check(cudaEventElapsedTime(&ms, asEvent(start), asEvent(end)), "cudaEventElapsedTime");
    return ms;
  }
  void streamWaitEvent(Stream s, Event e) override {
    check(cudaStreamWaitEvent(asStream(s), asEvent(e), 0), "cudaStreamWaitEvent");
  }
  bool streamIsCapturing(Stream s) override {
    cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
    const cudaError_t err = cudaStreamIsCapturing(asStream(s), &status);
    if (err == cudaErrorStreamCaptureImplicit) {  // the legacy stream, during a global capture
      (void)cudaGetLastError();
      return true;
    }
    check(err, "cudaStreamIsCapturing");
    return status != cudaStreamCaptureStatusNone;  // active, or invalidated but not yet ended
  }
  void streamBeginCapture(Stream s) override {
    check(cudaStreamBeginCapture(asStream(s), cudaStreamCaptureModeThreadLocal),
          "cudaStreamBeginCapture");
  }
  void streamEndCapture(Stream s) override {
    cudaGraph_t graph = nullptr;
    check(cudaStreamEndCapture(asStream(s), &graph), "cudaStreamEndCapture");
    if (graph != nullptr) check(cudaGraphDestroy(graph), "cudaGraphDestroy");
  }

  void launchKernel(const void* func, Dim3 grid, Dim3 block, void** args, size_t sharedBytes,
                    Stream s) override {
    check(cudaLaunchKernel(func, asDim3(grid), asDim3(block), args, sharedBytes, asStream(s)),
          "cudaLaunchKernel");
  }
  void launchHostFunc(Stream s, HostFn fn, void* userData) override {
    check(cudaLaunchHostFunc(asStream(s), fn, userData), "cudaLaunchHostFunc");
  }
  void registerHostKernel(const void*, HostKernel) override {}

  bool canAccessPeer(int device, int peer) override {
    if (device == peer) return true;
    int can = 0;
    check(cudaDeviceCanAccessPeer(&can, device, peer), "cudaDeviceCanAccessPeer");
    return can != 0;
  }
  void enablePeerAccess(int peer) override {
    if (peer == currentDevice()) return;
    const cudaError_t e = cudaDeviceEnablePeerAccess(peer, 0);
    if (e == cudaErrorPeerAccessAlreadyEnabled) {
      (void)cudaGetLastError();  // the sticky copy of it, so later checks do not see it
      return;
    }
    check(e, "cudaDeviceEnablePeerAccess");
  }

  IpcMemHandle ipcGetMemHandle(void* devPtr) override {
    cudaIpcMemHandle_t h;
    check(cudaIpcGetMemHandle(&h, devPtr), "cudaIpcGetMemHandle");
    IpcMemHandle out;
    static_assert(sizeof(h) == sizeof(out.bytes), "cudaIpcMemHandle_t is 64 bytes");
    std::memcpy(out.bytes.data(), &h, sizeof(h));
    return out;
  }
  void* ipcOpenMemHandle(const IpcMemHandle& handle) override {
    cudaIpcMemHandle_t h;
    std::memcpy(&h, handle.bytes.data(), sizeof(h));
    void* p = nullptr;
    check(cudaIpcOpenMemHandle(&p, h, cudaIpcMemLazyEnablePeerAccess), "cudaIpcOpenMemHandle");
    return p;
  }
  void ipcCloseMemHandle(void* devPtr) override {
    check(cudaIpcCloseMemHandle(devPtr), "cudaIpcCloseMemHandle");
  }

  int exportDmabuf(void* devPtr, size_t bytes, uint64_t* offset) override {
    auto fn = reinterpret_cast<MemGetHandleForAddressRange>(driver().cuMemGetHandleForAddressRange);
    if (fn == nullptr)
      throw CudaError("cuMemGetHandleForAddressRange is missing: the driver is older than 11.7");
    // The range must be whole host pages.
    const auto page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
    const auto start = reinterpret_cast<uintptr_t>(devPtr);
    const uintptr_t first = start / page * page;
    const uintptr_t end = (start + bytes + page - 1) / page * page;
    int fd = -1;
    const int rc = fn(&fd, first, end - first, kRangeHandleDmaBufFd, 0);
    if (rc != 0)  // CUDA_SUCCESS
      throw CudaError(strCat("cuMemGetHandleForAddressRange (dma-buf) failed with CUresult ", rc,
                             " (the kernel or driver may lack dma-buf support)"));
    *offset = start - first;
    return fd;
  }
  // Only where the device does not order the NIC's writes for its own kernels
  // (cudaDevAttrGPUDirectRDMAWritesOrdering below owner); the answer is kept per device. Proxy
  // threads of several communicators may ask at once.
  void flushRdmaWrites(int device) override {
    if (device < 0 || device >= static_cast<int>(flushNeeded_.size())) return;
    int needed = flushNeeded_[device].load(std::memory_order_relaxed);
    if (needed == 0) {
      needed = attribute(cudaDevAttrGPUDirectRDMAWritesOrdering, device) <
                           cudaGPUDirectRDMAWritesOrderingOwner &&
                       (attribute(cudaDevAttrGPUDirectRDMAFlushWritesOptions, device) &
                        cudaFlushGPUDirectRDMAWritesOptionHost)
                   ? 2
                   : 1;
      flushNeeded_[device].store(needed, std::memory_order_relaxed);
    }
    if (needed == 1) return;
    int previous = -1;
    check(cudaGetDevice(&previous), "cudaGetDevice");
    if (previous != device) check(cudaSetDevice(device), "cudaSetDevice");
    const cudaError_t err = cudaDeviceFlushGPUDirectRDMAWrites(
        cudaFlushGPUDirectRDMAWritesTargetCurrentDevice, cudaFlushGPUDirectRDMAWritesToOwner);
    if (previous != device) check(cudaSetDevice(previous), "cudaSetDevice");
    check(err, "cudaDeviceFlushGPUDirectRDMAWrites");
  }

  const DriverEntryPoints& driver() override {
    std::call_once(driverOnce_, [this] { fetchDriver(); });
    return driver_;
  }

 private:
  // Per device: 0 not asked yet, 1 no flush needed (or none possible), 2 flush.
  std::array<std::atomic<int>, 64> flushNeeded_{};
  static unsigned cudaFlags(unsigned flags) {
    unsigned out = 0;
    if (flags & kHostPortable) out |= cudaHostAllocPortable;  // == cudaHostRegisterPortable
    if (flags & kHostMapped) out |= cudaHostAllocMapped;      // == cudaHostRegisterMapped
    return out;
  }
  static int attribute(cudaDeviceAttr attr, int device) {
    int v = 0;
    if (cudaDeviceGetAttribute(&v, attr, device) != cudaSuccess) {
      (void)cudaGetLastError();  // an attribute this driver does not know: not supported
      return 0;
    }
    return v;
  }
  // cudaErrorNotReady is an answer, not an error.
  static bool ready(cudaError_t err, const char* call) {
    if (err == cudaErrorNotReady) {
      (void)cudaGetLastError();
      return false;
    }
    check(err, call);
    return true;
  }
  // Each entry point at the ABI version whose PFN_ typedef its callers use; one the driver
  // lacks stays nullptr and its callers take another way.
  void fetchDriver() {
    auto fetch = [](const char* symbol, unsigned version) -> void* {
      void* fn = nullptr;
      cudaDriverEntryPointQueryResult status = cudaDriverEntryPointSymbolNotFound;
      if (cudaGetDriverEntryPointByVersion(symbol, &fn, version, cudaEnableDefault, &status) !=
              cudaSuccess ||
          status != cudaDriverEntryPointSuccess) {
        (void)cudaGetLastError();
        return nullptr;
      }
      return fn;
    };
    driver_.cuMemCreate = fetch("cuMemCreate", 10020);
    driver_.cuMemRelease = fetch("cuMemRelease", 10020);
    driver_.cuMemAddressReserve = fetch("cuMemAddressReserve", 10020);
    driver_.cuMemAddressFree = fetch("cuMemAddressFree", 10020);
    driver_.cuMemMap = fetch("cuMemMap", 10020);
    driver_.cuMemUnmap = fetch("cuMemUnmap", 10020);
    driver_.cuMemSetAccess = fetch("cuMemSetAccess", 10020);
    driver_.cuMemExportToShareableHandle = fetch("cuMemExportToShareableHandle", 10020);
    driver_.cuMemImportFromShareableHandle = fetch("cuMemImportFromShareableHandle", 10020);
    driver_.cuMemGetAllocationGranularity = fetch("cuMemGetAllocationGranularity", 10020);
    driver_.cuStreamWaitValue32 = fetch("cuStreamWaitValue32", 11070);
    driver_.cuMemGetHandleForAddressRange = fetch("cuMemGetHandleForAddressRange", 11070);
  }

  std::once_flag driverOnce_;
  DriverEntryPoints driver_;
};

}  // namespace

std::unique_ptr<DeviceRuntime> makeCudartRuntime() { return std::make_unique<CudartRuntime>(); }

}  // namespace loom::cuda
