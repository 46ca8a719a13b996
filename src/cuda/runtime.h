// The device-runtime seam: every CUDA call loom makes goes through DeviceRuntime, one
// interface with two implementations.
//   - The CUDA runtime (cudart_runtime.cc): cudart_static, with the driver's own functions
//     (cuMem*, cuStreamWaitValue32, cuMemGetHandleForAddressRange) fetched by version through
//     cudaGetDriverEntryPointByVersion. libcuda is never linked, so libloom loads, and its CPU
//     communicators run, on machines without a driver.
//   - The simulated runtime (sim_runtime.h), chosen by LOOM_CUDA_SIM=1, a test facility:
//     "device" memory is host memory in memfds (so IPC handles cross processes), streams are
//     host threads that run their work in order, events are counters, and kernels are host
//     functions registered as the twins of device ones.
// The seam is made on first use (deviceRuntime()), so nothing of CUDA runs in a process whose
// communicators all live on the CPU.
//
// The interface names no CUDA type: streams, events and driver entry points are opaque
// pointers, so code that never includes cuda_runtime.h (the sim, the communicator) uses it.
// Every call throws CudaError (loomUnhandledCudaError) with the failing call and the
// runtime's message, except deviceCount(), which reports 0 when there is no driver or device.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

namespace loom::cuda {

using Stream = void*;  // cudaStream_t; nullptr is the legacy default stream
using Event = void*;   // cudaEvent_t

// What a pointer is, as cudaPointerGetAttributes says (its memory type).
enum class PointerKind : uint8_t {
  kUnregistered = 0,  // pageable host memory CUDA does not know
  kHostPinned = 1,    // cudaMallocHost / cudaHostAlloc / cudaHostRegister
  kDevice = 2,        // cudaMalloc, or a peer's memory opened with cudaIpcOpenMemHandle
  kManaged = 3,       // cudaMallocManaged
};
const char* pointerKindName(PointerKind kind);

struct PointerInfo {
  PointerKind kind = PointerKind::kUnregistered;
  int device = -1;                // the owning device (kDevice, kManaged, mapped host), else -1
  void* devicePointer = nullptr;  // where device code reaches it (mapped host memory too)
  void* hostPointer = nullptr;    // where host code reaches it, or nullptr
};

// What a rank tells its peers about its GPU (rank info): identity and what it can share.
struct DeviceIdentity {
  std::array<uint8_t, 16> uuid{};
  char busId[16] = {};  // "0000:3b:00.0", as cudaDeviceGetPCIBusId writes it
  uint32_t caps = 0;    // DeviceCap bits
  int32_t smCount = 0;
};
enum DeviceCap : uint32_t {
  kCapIpcLegacy = 1u << 0,     // cudaIpcGetMemHandle / cudaIpcOpenMemHandle
  kCapIpcPosixFd = 1u << 1,    // cuMem allocations exportable as POSIX fds
  kCapHostRegister = 1u << 2,  // cudaHostRegister of host memory
  kCapMps = 1u << 3,           // contexts on this device are shared through MPS
  kCapSimulated = 1u << 4,     // the simulated runtime's device
};

// A handle to device memory another process opens (cudaIpcMemHandle_t's 64 bytes).
struct IpcMemHandle {
  std::array<char, 64> bytes{};
};

// cudaHostAlloc flags, by meaning.
enum HostAllocFlags : unsigned {
  kHostDefault = 0,
  kHostPortable = 1u << 0,  // pinned for every device, not only the current one
  kHostMapped = 1u << 1,    // also mapped into the device's address space
};

// A kernel launch's shape (dim3 without CUDA's header).
struct Dim3 {
  unsigned x = 1, y = 1, z = 1;
};

// The driver's entry points, fetched by version (nullptr where the driver lacks one, and
// always under the simulated runtime). Callers cast each to the PFN_ type of cudaTypedefs.h
// for the version named here.
struct DriverEntryPoints {
  void* cuMemCreate = nullptr;                     // 10020
  void* cuMemRelease = nullptr;                    // 10020
  void* cuMemAddressReserve = nullptr;             // 10020
  void* cuMemAddressFree = nullptr;                // 10020
  void* cuMemMap = nullptr;                        // 10020
  void* cuMemUnmap = nullptr;                      // 10020
  void* cuMemSetAccess = nullptr;                  // 10020
  void* cuMemExportToShareableHandle = nullptr;    // 10020
  void* cuMemImportFromShareableHandle = nullptr;  // 10020
  void* cuMemGetAllocationGranularity = nullptr;   // 10020
  void* cuStreamWaitValue32 = nullptr;             // 11070 (the _v2 flags)
  void* cuMemGetHandleForAddressRange = nullptr;   // 11070
};

// Under the simulated runtime a kernel is a host function registered as the twin of the
// device function that launchKernel() is given. It is called at launch, when the arguments
// behind `args` are still there (cudaLaunchKernel reads them then too), copies what it needs
// and returns the work that the stream runs in its turn.
using HostKernel = std::function<void()> (*)(Dim3 grid, Dim3 block, void** args);
// Host work enqueued on a stream (cudaLaunchHostFunc): runs after all earlier work.
using HostFn = void (*)(void* userData);

class DeviceRuntime {
 public:
  virtual ~DeviceRuntime() = default;
  // "cudart" or "sim": for messages.
  virtual const char* name() const = 0;

  // Devices visible to this process; 0 without a driver or a GPU (never throws).
  virtual int deviceCount() = 0;
  // The calling thread's current device, as cudaSetDevice / cudaGetDevice.
  virtual void setDevice(int device) = 0;
  virtual int currentDevice() = 0;
  virtual DeviceIdentity identity(int device) = 0;
  // Waits for all work on the current device.
  virtual void synchronizeDevice() = 0;

  // Memory of the current device, pinned host memory, registered host memory.
  virtual void* malloc(size_t bytes) = 0;
  virtual void* mallocManaged(size_t bytes) = 0;
  virtual void free(void* ptr) = 0;
  virtual void* hostAlloc(size_t bytes, unsigned flags) = 0;
  virtual void freeHost(void* ptr) = 0;
  virtual void hostRegister(void* ptr, size_t bytes, unsigned flags) = 0;
  virtual void hostUnregister(void* ptr) = 0;
  // The device's address of mapped host memory (cudaHostGetDevicePointer).
  virtual void* hostDevicePointer(void* hostPtr) = 0;
  virtual PointerInfo pointerInfo(const void* ptr) = 0;

  // Copies and fills, in order with the stream's other work; `memcpy` and `memset` wait.
  virtual void memcpyAsync(void* dst, const void* src, size_t bytes, Stream stream) = 0;
  virtual void memsetAsync(void* dst, int value, size_t bytes, Stream stream) = 0;
  virtual void memcpy(void* dst, const void* src, size_t bytes) = 0;

  // Streams and events (non-blocking streams; events without timing unless asked).
  virtual Stream streamCreate() = 0;
  virtual void streamDestroy(Stream stream) = 0;
  virtual void streamSynchronize(Stream stream) = 0;
  // True when all work enqueued so far has finished.
  virtual bool streamQuery(Stream stream) = 0;
  virtual Event eventCreate(bool timing) = 0;
  virtual void eventDestroy(Event event) = 0;
  virtual void eventRecord(Event event, Stream stream) = 0;
  virtual bool eventQuery(Event event) = 0;
  virtual void eventSynchronize(Event event) = 0;
  // Milliseconds between two completed events created with timing.
  virtual float eventElapsedMs(Event start, Event end) = 0;
  // Later work on `stream` waits for the event's latest record.
  virtual void streamWaitEvent(Stream stream, Event event) = 0;

  // Stream capture into CUDA graphs. streamIsCapturing is true while `stream` records into a
  // graph, and for the legacy default stream while another stream captures in global mode
  // (CUDA forbids using it then). Begin captures in thread-local mode; end discards the graph.
  virtual bool streamIsCapturing(Stream stream) = 0;
  virtual void streamBeginCapture(Stream stream) = 0;
  virtual void streamEndCapture(Stream stream) = 0;

  // Launches the __global__ function `func` (cudaLaunchKernel); `args` point at its arguments.
  virtual void launchKernel(const void* func, Dim3 grid, Dim3 block, void** args,
                            size_t sharedBytes, Stream stream) = 0;
  virtual void launchHostFunc(Stream stream, HostFn fn, void* userData) = 0;
  // Makes `twin` what launchKernel(func, ...) runs under the simulated runtime; the CUDA
  // runtime ignores it.
  virtual void registerHostKernel(const void* func, HostKernel twin) = 0;

  // Device memory shared with other processes (cudaIpc*). open maps a peer's allocation into
  // this process; close unmaps it.
  // Whether `device` may map `peer`'s memory (cudaDeviceCanAccessPeer; true for one device),
  // and enabling that for the current device (cudaDeviceEnablePeerAccess; enabling it again
  // is not an error).
  virtual bool canAccessPeer(int device, int peer) = 0;
  virtual void enablePeerAccess(int peer) = 0;
  virtual IpcMemHandle ipcGetMemHandle(void* devPtr) = 0;
  virtual void* ipcOpenMemHandle(const IpcMemHandle& handle) = 0;
  virtual void ipcCloseMemHandle(void* devPtr) = 0;

  // GPUDirect RDMA. exportDmabuf gives a dma-buf fd for the device memory at [devPtr, devPtr +
  // bytes) (cuMemGetHandleForAddressRange), which ibv_reg_dmabuf_mr registers with a NIC; the
  // range is widened to whole host pages and *offset is where devPtr lies in it. The caller
  // closes the fd. flushRdmaWrites makes every NIC write that has landed in `device`'s memory
  // visible to its kernels (cudaDeviceFlushGPUDirectRDMAWrites), so the proxy may tell a kernel
  // that a step arrived only after it.
  virtual int exportDmabuf(void* devPtr, size_t bytes, uint64_t* offset) = 0;
  virtual void flushRdmaWrites(int device) = 0;

  virtual const DriverEntryPoints& driver() = 0;
};

// The process's runtime, made on first call: the simulated one when LOOM_CUDA_SIM=1, the CUDA
// one in a CUDA build, else one that reports no device. Thread-safe.
DeviceRuntime& deviceRuntime();
// Whether deviceRuntime() has been made: CPU-only processes never make it.
bool deviceRuntimeLoaded();

// Makes `device` the calling thread's current device for its scope, and the previous one
// current again after it (connections are set up on whichever thread connects them, and the
// caller's current device must survive that).
class CurrentDeviceScope {
 public:
  explicit CurrentDeviceScope(int device);
  ~CurrentDeviceScope();
  CurrentDeviceScope(const CurrentDeviceScope&) = delete;
  CurrentDeviceScope& operator=(const CurrentDeviceScope&) = delete;

 private:
  DeviceRuntime& rt_;
  int previous_;
};

// "GPU-<uuid>" in nvidia-smi's form, for messages.
std::string uuidString(const std::array<uint8_t, 16>& uuid);

}  // namespace loom::cuda

// deviceRuntime() for programs linked to the shared libloom, where every other internal symbol
// is hidden: loom's benchmarks (perf/) allocate, fill and check device buffers through the
// runtime that the library's communicators use (the same simulated devices under
// LOOM_CUDA_SIM=1). Not part of loom's API: the class has no stable layout, so only code built
// from the same tree may call it. Errors are CudaError (a std::runtime_error).
extern "C" __attribute__((visibility("default"))) loom::cuda::DeviceRuntime*
loomInternalDeviceRuntime();
