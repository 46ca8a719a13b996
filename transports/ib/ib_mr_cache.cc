#include "transports/ib/ib_mr_cache.h"

#include <map>
#include <mutex>
#include <set>
#include <vector>

#include "src/base/error.h"
#include "src/base/logging.h"
#include "src/cuda/runtime.h"
#include "transports/ib/ib_devices.h"
#include "transports/ib/ib_gdr.h"
#include "transports/ib/ib_verbs.h"

namespace loom::transport::ib {
namespace {

// regionId of a loomMemAlloc allocation of device memory (not a MemRegion).
constexpr uint64_t kDeviceAllocation = ~uint64_t{0};

struct Entry {
  size_t size = 0;
  uint64_t regionId = 0;      // loomMemAlloc region, or 0 for an explicit registration
  bool device = false;        // CUDA device memory: registered by dma-buf or nvidia-peermem
  int explicitCount = 0;      // loomCommRegister calls not yet deregistered
  std::vector<ibv_mr*> mrs;   // per device, registered on first use there
  std::vector<bool> refused;  // per device: registration failed once, never retried
};

struct Cache {
  std::mutex mutex;
  std::map<uintptr_t, Entry> entries;  // by base address
  std::set<uintptr_t*> handles;
};
Cache& cache() {
  static Cache c;
  return c;
}

void release(Entry& e) {
  for (ibv_mr* mr : e.mrs)
    if (mr != nullptr) verbs().deregMr(mr);
  e.mrs.clear();
}

std::optional<uint32_t> lkeyOn(Entry& e, uintptr_t base, int device) {
  const IbDevices& devs = IbDevices::instance();
  if (device < 0 || device >= static_cast<int>(devs.devices().size())) return std::nullopt;
  if (e.mrs.size() < devs.devices().size()) {
    e.mrs.resize(devs.devices().size(), nullptr);
    e.refused.resize(devs.devices().size(), false);
  }
  if (e.mrs[device] == nullptr && !e.refused[device]) {
    const IbDevice& dev = devs.devices()[device];
    std::string why;
    if (e.device) {
      try {
        const char* how = "";
        e.mrs[device] = registerDeviceMemory(dev.pd, dev.name, reinterpret_cast<void*>(base),
                                             e.size, IBV_ACCESS_LOCAL_WRITE, &how);
      } catch (const Error& err) {
        why = strCat(": ", err.what());
      }
    } else {
      e.mrs[device] =
          verbs().regMr(dev.pd, reinterpret_cast<void*>(base), e.size, IBV_ACCESS_LOCAL_WRITE);
    }
    if (e.mrs[device] == nullptr) {
      e.refused[device] = true;
      LOOM_INFO(kLogNet, "ib: ", dev.name, " refuses to register ", e.size, " bytes at ",
                reinterpret_cast<void*>(base), why, "; steps from it go through the ring");
    }
  }
  if (e.mrs[device] == nullptr) return std::nullopt;
  return e.mrs[device]->lkey;
}

}  // namespace

std::optional<uint32_t> lkeyFor(int device, const void* data, size_t bytes,
                                const MemRegion* region) {
  Cache& c = cache();
  std::lock_guard<std::mutex> lock(c.mutex);
  const uintptr_t addr = reinterpret_cast<uintptr_t>(data);
  if (region != nullptr && region->kind == MemoryKind::kHost) {
    Entry& e = c.entries[region->base];
    if (e.regionId != region->id) {  // new, or a region that reused a freed one's address
      const int keep = e.explicitCount;
      release(e);
      e = Entry{};
      e.explicitCount = keep;
      e.size = region->size;
      e.regionId = region->id;
    }
    return lkeyOn(e, region->base, device);
  }
  auto it = c.entries.upper_bound(addr);
  if (it == c.entries.begin()) return std::nullopt;
  --it;
  if ((it->second.explicitCount == 0 && it->second.regionId == 0) ||
      addr + bytes > it->first + it->second.size)
    return std::nullopt;
  return lkeyOn(it->second, it->first, device);
}

void* registerBuffer(const void* data, size_t size) {
  Cache& c = cache();
  std::lock_guard<std::mutex> lock(c.mutex);
  const uintptr_t base = reinterpret_cast<uintptr_t>(data);
  Entry& e = c.entries[base];
  if (e.explicitCount == 0 && e.regionId == 0) {
    e.size = size;
    e.device = cuda::deviceRuntimeLoaded() &&
               cuda::deviceRuntime().pointerInfo(data).kind == cuda::PointerKind::kDevice;
  }
  if (size > e.size) {  // a larger buffer at the same address: register it anew
    release(e);
    e.size = size;
  }
  ++e.explicitCount;
  auto* handle = new uintptr_t(base);
  c.handles.insert(handle);
  return handle;
}

void deregisterBuffer(void* handle) {
  Cache& c = cache();
  std::lock_guard<std::mutex> lock(c.mutex);
  auto* h = static_cast<uintptr_t*>(handle);
  LOOM_ENFORCE(c.handles.erase(h) == 1, InvalidArgument, "handle ", handle,
               " is not a live registration; pass what loomCommRegister returned, once");
  auto it = c.entries.find(*h);
  delete h;
  if (it == c.entries.end()) return;
  if (--it->second.explicitCount == 0 && it->second.regionId == 0) {
    release(it->second);
    c.entries.erase(it);
  }
}

void rememberDeviceAllocation(const void* base, size_t size) {
  Cache& c = cache();
  std::lock_guard<std::mutex> lock(c.mutex);
  Entry& e = c.entries[reinterpret_cast<uintptr_t>(base)];
  const int keep = e.explicitCount;  // a stale explicit registration of a freed buffer's address
  release(e);
  e = Entry{};
  e.explicitCount = keep;
  e.size = size;
  e.regionId = kDeviceAllocation;
  e.device = true;
}

void forgetRegion(const void* base) {
  Cache& c = cache();
  std::lock_guard<std::mutex> lock(c.mutex);
  auto it = c.entries.find(reinterpret_cast<uintptr_t>(base));
  if (it == c.entries.end() || it->second.regionId == 0) return;
  if (it->second.explicitCount > 0) {
    // Registered explicitly too: the registration stays until loomCommDeregister.
    it->second.regionId = 0;
    return;
  }
  release(it->second);
  c.entries.erase(it);
}

size_t liveRegistrations() {
  Cache& c = cache();
  std::lock_guard<std::mutex> lock(c.mutex);
  size_t n = 0;
  for (const auto& [base, e] : c.entries)
    for (ibv_mr* mr : e.mrs) n += mr != nullptr ? 1 : 0;
  return n;
}

}  // namespace loom::transport::ib
