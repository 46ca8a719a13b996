#include "src/cuda/sim_runtime.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <unordered_map>
#include <unordered_set>

#include "src/base/error.h"
#include "src/cuda/sim_stream.h"
#include "src/mem/memfd.h"

namespace loom::cuda {
namespace {

thread_local int threadDevice = 0;

// The handle's bytes: enough for another process to find the memfd and check it is the one.
struct SimIpcHandle {
  uint64_t magic;
  int32_t pid;
  int32_t fd;
  uint64_t size;
  int32_t device;
};
constexpr uint64_t kIpcMagic = 0x6c6f6f6d53494d31ull;  // "loomSIM1"
static_assert(sizeof(SimIpcHandle) <= sizeof(IpcMemHandle::bytes));

enum class Origin : uint8_t { kMalloc, kManaged, kHostAlloc, kRegistered, kIpcOpened };

struct Allocation {
  size_t size = 0;
  size_t mapped = 0;  // the mapping's length (whole pages) for memfd-backed memory
  Origin origin = Origin::kMalloc;
  PointerKind kind = PointerKind::kDevice;
  int device = -1;
  bool hostMapped = false;
  int fd = -1;  // the memfd of device memory this process owns
};

size_t roundToPages(size_t bytes) {
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  return (bytes + page - 1) / page * page;
}

[[noreturn]] void fail(const char* call, const char* code, const std::string& why) {
  throw CudaError(strCat(call, " failed: ", code, " (", why, ") [simulated runtime]"));
}

// Another process's fd: through /proc first (same user suffices), else pidfd_getfd (which
// needs ptrace permission).
int importFd(int pid, int fd) {
  const std::string path = strCat("/proc/", pid, "/fd/", fd);
  int out = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (out >= 0) return out;
#if defined(SYS_pidfd_open) && defined(SYS_pidfd_getfd)
  const int pidfd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
  if (pidfd >= 0) {
    out = static_cast<int>(::syscall(SYS_pidfd_getfd, pidfd, fd, 0));
    ::close(pidfd);
  }
#endif
  return out;
}

class SimRuntime final : public DeviceRuntime {
 public:
  explicit SimRuntime(int devices) : devices_(devices) {}

  const char* name() const override { return "sim"; }
  int deviceCount() override { return devices_; }
  void setDevice(int device) override {
    checkDevice(device, "cudaSetDevice");
    threadDevice = device;
  }
  int currentDevice() override { return threadDevice; }
  DeviceIdentity identity(int device) override {
    checkDevice(device, "cudaGetDeviceProperties");
    DeviceIdentity id;
    const char prefix[] = "loomsim-gpu";
    std::memcpy(id.uuid.data(), prefix, sizeof(prefix) - 1);
    id.uuid[14] = static_cast<uint8_t>(device >> 8);
    id.uuid[15] = static_cast<uint8_t>(device);
    std::snprintf(id.busId, sizeof(id.busId), "0000:%02x:00.0", (0x10 + device) & 0xff);
    id.caps = kCapIpcLegacy | kCapHostRegister | kCapSimulated;
    id.smCount = 4;
    return id;
  }
  void synchronizeDevice() override {
    const int device = threadDevice;
    std::vector<std::shared_ptr<SimStream>> streams;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      for (auto& [handle, s] : streams_)
        if (s->device() == device) streams.push_back(s);
    }
    defaultStream().synchronize();
    for (auto& s : streams) s->synchronize();
  }

  void* malloc(size_t bytes) override {
    if (bytes == 0) return nullptr;
    const size_t mapped = roundToPages(bytes);
    const int fd = createSealedMemfd("loom-sim-device", mapped, "simulated device memory");
    void* p = ::mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
      ::close(fd);
      fail("cudaMalloc", "cudaErrorMemoryAllocation", std::strerror(errno));
    }
    add(p, {bytes, mapped, Origin::kMalloc, PointerKind::kDevice, threadDevice, false, fd});
    return p;
  }
  void* mallocManaged(size_t bytes) override {
    void* p = alignedAlloc(bytes, "cudaMallocManaged");
    add(p, {bytes, 0, Origin::kManaged, PointerKind::kManaged, threadDevice, true, -1});
    return p;
  }
  void free(void* ptr) override {
    if (ptr == nullptr) return;
    Allocation a = take(ptr, "cudaFree", Origin::kMalloc, Origin::kManaged);
    if (a.origin == Origin::kMalloc) {
      ::munmap(ptr, a.mapped);
      ::close(a.fd);
    } else {
      std::free(ptr);
    }
  }
  void* hostAlloc(size_t bytes, unsigned flags) override {
    void* p = alignedAlloc(bytes, "cudaHostAlloc");
    add(p, {bytes, 0, Origin::kHostAlloc, PointerKind::kHostPinned, threadDevice,
            (flags & kHostMapped) != 0, -1});
    return p;
  }
  void freeHost(void* ptr) override {
    if (ptr == nullptr) return;
    take(ptr, "cudaFreeHost", Origin::kHostAlloc, Origin::kHostAlloc);
    std::free(ptr);
  }
  void hostRegister(void* ptr, size_t bytes, unsigned flags) override {
    if (ptr == nullptr || bytes == 0)
      fail("cudaHostRegister", "cudaErrorInvalidValue", "NULL or 0 bytes");
    std::lock_guard<std::mutex> lock(mutex_);
    const uintptr_t begin = reinterpret_cast<uintptr_t>(ptr);
    auto next = allocs_.lower_bound(begin + bytes);
    if (next != allocs_.begin()) {
      auto prev = std::prev(next);
      if (prev->first + prev->second.size > begin)
        fail("cudaHostRegister", "cudaErrorHostMemoryAlreadyRegistered",
             "the range overlaps memory the runtime knows already");
    }
    allocs_[begin] = {bytes,
                      0,
                      Origin::kRegistered,
                      PointerKind::kHostPinned,
                      threadDevice,
                      (flags & kHostMapped) != 0,
                      -1};
  }
  void hostUnregister(void* ptr) override {
    take(ptr, "cudaHostUnregister", Origin::kRegistered, Origin::kRegistered);
  }
  void* hostDevicePointer(void* hostPtr) override {
    const PointerInfo info = pointerInfo(hostPtr);
    if (info.kind != PointerKind::kHostPinned || info.devicePointer == nullptr)
      fail("cudaHostGetDevicePointer", "cudaErrorInvalidValue",
           "not pinned host memory mapped into the device");
    return info.devicePointer;
  }
  PointerInfo pointerInfo(const void* ptr) override {
    std::lock_guard<std::mutex> lock(mutex_);
    const uintptr_t p = reinterpret_cast<uintptr_t>(ptr);
    auto it = allocs_.upper_bound(p);
    if (it == allocs_.begin()) return {};
    --it;
    const Allocation& a = it->second;
    if (p >= it->first + std::max<size_t>(a.size, 1)) return {};
    PointerInfo info;
    info.kind = a.kind;
    info.device = a.device;
    void* same = const_cast<void*>(ptr);
    const bool deviceReach = a.kind != PointerKind::kHostPinned || a.hostMapped;
    const bool hostReach = a.kind != PointerKind::kDevice;
    info.devicePointer = deviceReach ? same : nullptr;
    info.hostPointer = hostReach ? same : nullptr;
    return info;
  }

  void memcpyAsync(void* dst, const void* src, size_t bytes, Stream s) override {
    if (bytes == 0) return;
    stream(s).enqueue([=] { std::memcpy(dst, src, bytes); });
  }
  void memsetAsync(void* dst, int value, size_t bytes, Stream s) override {
    if (bytes == 0) return;
    stream(s).enqueue([=] { std::memset(dst, value, bytes); });
  }
  void memcpy(void* dst, const void* src, size_t bytes) override {
    memcpyAsync(dst, src, bytes, nullptr);
    defaultStream().synchronize();
  }

  Stream streamCreate() override {
    auto s = std::make_shared<SimStream>(threadDevice);
    std::lock_guard<std::mutex> lock(mutex_);
    streams_[s.get()] = s;
    return s.get();
  }
  void streamDestroy(Stream s) override {
    std::shared_ptr<SimStream> owned;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      auto it = streams_.find(s);
      if (it == streams_.end())
        fail("cudaStreamDestroy", "cudaErrorInvalidResourceHandle", "unknown stream");
      owned = std::move(it->second);
      streams_.erase(it);
      capturing_.erase(s);
    }
    // The destructor runs what is still enqueued, as CUDA finishes a destroyed stream's work.
  }
  void streamSynchronize(Stream s) override { stream(s).synchronize(); }
  bool streamQuery(Stream s) override { return stream(s).idle(); }
  Event eventCreate(bool timing) override {
    auto e = std::make_shared<SimEvent>(timing);
    std::lock_guard<std::mutex> lock(mutex_);
    events_[e.get()] = e;
    return e.get();
  }
  void eventDestroy(Event e) override {
    std::lock_guard<std::mutex> lock(mutex_);
    if (events_.erase(e) == 0)
      fail("cudaEventDestroy", "cudaErrorInvalidResourceHandle", "unknown event");
  }
  void eventRecord(Event e, Stream s) override { event(e)->record(stream(s)); }
  bool eventQuery(Event e) override { return event(e)->query(); }
  void eventSynchronize(Event e) override { event(e)->synchronize(); }
  float eventElapsedMs(Event start, Event end) override {
    auto a = event(start), b = event(end);
    if (!a->timing() || !b->timing())
      fail("cudaEventElapsedTime", "cudaErrorInvalidResourceHandle", "an event without timing");
    if (!a->query() || !b->query())
      fail("cudaEventElapsedTime", "cudaErrorNotReady", "not complete");
    return std::chrono::duration<float, std::milli>(b->completedAt() - a->completedAt()).count();
  }
  void streamWaitEvent(Stream s, Event e) override { stream(s).enqueue(event(e)->waiter()); }
  // Capture only records the state: the simulation captures no work into graphs, so any other
  // use of a capturing stream fails (stream()).
  bool streamIsCapturing(Stream s) override {
    known(s);
    std::lock_guard<std::mutex> lock(mutex_);
    return capturing_.count(s) != 0;
  }
  void streamBeginCapture(Stream s) override {
    if (s == nullptr)
      fail("cudaStreamBeginCapture", "cudaErrorStreamCaptureUnsupported",
           "the legacy default stream cannot be captured");
    known(s);
    std::lock_guard<std::mutex> lock(mutex_);
    if (!capturing_.insert(s).second)
      fail("cudaStreamBeginCapture", "cudaErrorIllegalState", "the stream is capturing already");
  }
  void streamEndCapture(Stream s) override {
    known(s);
    std::lock_guard<std::mutex> lock(mutex_);
    if (capturing_.erase(s) == 0)
      fail("cudaStreamEndCapture", "cudaErrorIllegalState", "the stream is not capturing");
  }

  void launchKernel(const void* func, Dim3 grid, Dim3 block, void** args, size_t,
                    Stream s) override {
    HostKernel twin = nullptr;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      auto it = twins_.find(func);
      if (it != twins_.end()) twin = it->second;
    }
    if (twin == nullptr)
      fail("cudaLaunchKernel", "cudaErrorInvalidDeviceFunction",
           "the kernel has no host twin; register one with registerHostKernel");
    stream(s).enqueue(twin(grid, block, args));
  }
  void launchHostFunc(Stream s, HostFn fn, void* userData) override {
    stream(s).enqueue([fn, userData] { fn(userData); });
  }
  void registerHostKernel(const void* func, HostKernel twin) override {
    std::lock_guard<std::mutex> lock(mutex_);
    twins_[func] = twin;
  }

  // Simulated devices share the host's memory: every pair may map each other's.
  bool canAccessPeer(int device, int peer) override {
    checkDevice(device, "cudaDeviceCanAccessPeer");
    checkDevice(peer, "cudaDeviceCanAccessPeer");
    return true;
  }
  void enablePeerAccess(int peer) override { checkDevice(peer, "cudaDeviceEnablePeerAccess"); }

  IpcMemHandle ipcGetMemHandle(void* devPtr) override {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = allocs_.find(reinterpret_cast<uintptr_t>(devPtr));
    if (it == allocs_.end() || it->second.origin != Origin::kMalloc)
      fail("cudaIpcGetMemHandle", "cudaErrorInvalidValue",
           "not the start of device memory from cudaMalloc in this process");
    const SimIpcHandle h{kIpcMagic, static_cast<int32_t>(getpid()), it->second.fd, it->second.size,
                         it->second.device};
    IpcMemHandle out;
    std::memcpy(out.bytes.data(), &h, sizeof(h));
    return out;
  }
  void* ipcOpenMemHandle(const IpcMemHandle& handle) override {
    SimIpcHandle h;
    std::memcpy(&h, handle.bytes.data(), sizeof(h));
    if (h.magic != kIpcMagic) fail("cudaIpcOpenMemHandle", "cudaErrorInvalidValue", "not a handle");
    if (h.pid == getpid())
      fail("cudaIpcOpenMemHandle", "cudaErrorDeviceUninitialized",
           "the handle comes from this process, which uses the pointer itself");
    const int fd = importFd(h.pid, h.fd);
    if (fd < 0)
      fail("cudaIpcOpenMemHandle", "cudaErrorMapBufferObjectFailed",
           strCat("cannot reach fd ", h.fd, " of process ", h.pid, ": ", std::strerror(errno)));
    const auto info = sealedMemfd(fd);
    const size_t mapped = roundToPages(h.size);
    if (!info || info->size != mapped) {
      ::close(fd);
      fail("cudaIpcOpenMemHandle", "cudaErrorInvalidValue",
           "the handle's memory is gone or is not a simulated allocation");
    }
    void* p = ::mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    ::close(fd);  // the mapping keeps the pages
    if (p == MAP_FAILED)
      fail("cudaIpcOpenMemHandle", "cudaErrorMapBufferObjectFailed", std::strerror(errno));
    add(p, {h.size, mapped, Origin::kIpcOpened, PointerKind::kDevice, h.device, false, -1});
    return p;
  }
  void ipcCloseMemHandle(void* devPtr) override {
    Allocation a = take(devPtr, "cudaIpcCloseMemHandle", Origin::kIpcOpened, Origin::kIpcOpened);
    ::munmap(devPtr, a.mapped);
  }

  // The allocation's own memfd stands for the dma-buf: a NIC given it (the software NIC of the
  // tests) reaches the memory at its device address, which is host memory here.
  int exportDmabuf(void* devPtr, size_t bytes, uint64_t* offset) override {
    std::lock_guard<std::mutex> lock(mutex_);
    const auto p = reinterpret_cast<uintptr_t>(devPtr);
    auto it = allocs_.upper_bound(p);
    if (it == allocs_.begin() || bytes == 0)
      fail("cuMemGetHandleForAddressRange", "CUDA_ERROR_INVALID_VALUE", "not device memory");
    --it;
    const Allocation& a = it->second;
    if (a.origin != Origin::kMalloc || p + bytes > it->first + a.size)
      fail("cuMemGetHandleForAddressRange", "CUDA_ERROR_INVALID_VALUE",
           "the range is not inside one cudaMalloc allocation");
    const int fd = ::fcntl(a.fd, F_DUPFD_CLOEXEC, 0);
    if (fd < 0)
      fail("cuMemGetHandleForAddressRange", "CUDA_ERROR_OUT_OF_MEMORY", std::strerror(errno));
    *offset = p - it->first;
    return fd;
  }
  // NIC writes land in host memory, which the simulated kernels read coherently.
  void flushRdmaWrites(int device) override {
    checkDevice(device, "cudaDeviceFlushGPUDirectRDMAWrites");
  }

  const DriverEntryPoints& driver() override { return driver_; }

 private:
  void checkDevice(int device, const char* call) const {
    if (device < 0 || device >= devices_)
      fail(call, "cudaErrorInvalidDevice",
           strCat("device ", device, " of ", devices_, " simulated (LOOM_CUDA_SIM_DEVICES)"));
  }
  static void* alignedAlloc(size_t bytes, const char* call) {
    const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    void* p = std::aligned_alloc(page, roundToPages(std::max<size_t>(bytes, 1)));
    if (p == nullptr) fail(call, "cudaErrorMemoryAllocation", "out of host memory");
    std::memset(p, 0, bytes);
    return p;
  }
  void add(void* p, Allocation a) {
    std::lock_guard<std::mutex> lock(mutex_);
    allocs_[reinterpret_cast<uintptr_t>(p)] = a;
  }
  // Removes the allocation that starts at `p` if it came from one of the two origins.
  Allocation take(void* p, const char* call, Origin o1, Origin o2) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = allocs_.find(reinterpret_cast<uintptr_t>(p));
    if (it == allocs_.end() || (it->second.origin != o1 && it->second.origin != o2))
      fail(call, "cudaErrorInvalidValue", "not the start of such an allocation, or freed already");
    Allocation a = it->second;
    allocs_.erase(it);
    return a;
  }
  SimStream& defaultStream() {
    std::lock_guard<std::mutex> lock(mutex_);
    const pid_t self = ::getpid();
    if (legacy_ && legacyPid_ != self) {
      // A fork's child inherits the stream but not its thread: it gets a stream of its own
      // (the parent's object is left alone; joining a thread of another process is undefined).
      (void)legacy_.release();
    }
    if (!legacy_) {
      legacy_ = std::make_unique<SimStream>(0);
      legacyPid_ = self;
    }
    return *legacy_;
  }
  // A stream work may be enqueued on, waited for or queried.
  SimStream& stream(Stream s) {
    SimStream& found = known(s);
    std::lock_guard<std::mutex> lock(mutex_);
    if (capturing_.count(s) != 0)
      fail("a stream call", "cudaErrorStreamCaptureUnsupported",
           "the stream is capturing, and the simulated runtime captures no work into graphs");
    return found;
  }
  SimStream& known(Stream s) {
    if (s == nullptr) return defaultStream();
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = streams_.find(s);
    if (it == streams_.end())
      fail("a stream call", "cudaErrorInvalidResourceHandle", "unknown stream");
    if (it->second->pid() != ::getpid())
      fail("a stream call", "cudaErrorInitializationError",
           "the stream was created before this process forked; as with CUDA, a forked child "
           "cannot use its parent's streams");
    return *it->second;
  }
  std::shared_ptr<SimEvent> event(Event e) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = events_.find(e);
    if (it == events_.end())
      fail("an event call", "cudaErrorInvalidResourceHandle", "unknown event");
    return it->second;
  }

  const int devices_;
  std::mutex mutex_;
  std::map<uintptr_t, Allocation> allocs_;
  std::unordered_map<Stream, std::shared_ptr<SimStream>> streams_;
  std::unique_ptr<SimStream> legacy_;
  pid_t legacyPid_ = 0;  // the process whose thread runs legacy_
  std::unordered_map<Event, std::shared_ptr<SimEvent>> events_;
  std::unordered_set<Stream> capturing_;
  std::unordered_map<const void*, HostKernel> twins_;
  DriverEntryPoints driver_;  // the simulation has no driver API
};

}  // namespace

std::unique_ptr<DeviceRuntime> makeSimRuntime(int devices) {
  return std::make_unique<SimRuntime>(devices);
}

void simSetThreadDevice(int device) { threadDevice = device; }

}  // namespace loom::cuda
