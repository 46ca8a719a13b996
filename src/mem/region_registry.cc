#include "src/mem/region_registry.h"

#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <map>
#include <mutex>

#include "src/base/error.h"
#include "src/mem/memfd.h"

namespace loom {
namespace {

struct Registry {
  std::mutex mutex;
  std::map<uintptr_t, MemRegion> byBase;  // ordered: the region holding an address is found by
                                          // the last base at or below it
  uint64_t nextId = 1;
  // How many regions live: lets every step of a process without any skip the lock.
  std::atomic<size_t> live{0};
};

Registry& registry() {
  static Registry* r = new Registry;  // never destroyed: frees may run in static destructors
  return *r;
}

size_t pageBytes() {
  static const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  return page;
}

}  // namespace

MemRegion allocRegion(size_t size) {
  LOOM_ENFORCE(size > 0, InvalidArgument, "size is 0; ask for at least one byte");
  const size_t page = pageBytes();
  LOOM_ENFORCE(size <= SIZE_MAX - page, InvalidArgument, "size ", size, " is too large to map");
  const size_t mapped = (size + page - 1) / page * page;
  // Sealed at its size: a peer mapping it can rely on every page staying there (no SIGBUS).
  const int fd = createSealedMemfd("loom-mem", mapped, "a loomMemAlloc region");
  void* p = mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) {
    const int err = errno;
    close(fd);
    throwSystemError(strCat("mapping a loomMemAlloc region of ", mapped, " bytes"), err);
  }
  // Huge pages where the kernel gives them to shared memory (shmem_enabled advise or always):
  // fewer TLB misses on every copy, and peers map the same huge pages. A hint; errors ignored.
  (void)madvise(p, mapped, MADV_HUGEPAGE);
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  MemRegion region{r.nextId++, reinterpret_cast<uintptr_t>(p), mapped, fd, MemoryKind::kHost, -1};
  r.byBase[region.base] = region;
  r.live.store(r.byBase.size(), std::memory_order_relaxed);
  return region;
}

void freeRegion(void* base) {
  LOOM_ENFORCE(base != nullptr, InvalidArgument, "ptr is NULL");
  MemRegion region;
  {
    Registry& r = registry();
    std::lock_guard<std::mutex> lock(r.mutex);
    auto it = r.byBase.find(reinterpret_cast<uintptr_t>(base));
    LOOM_ENFORCE(it != r.byBase.end(), InvalidArgument, "ptr ", base,
                 " was not returned by loomMemAlloc (or was freed already); pass the pointer "
                 "loomMemAlloc gave, once");
    region = it->second;
    r.byBase.erase(it);
    r.live.store(r.byBase.size(), std::memory_order_relaxed);
  }
  munmap(reinterpret_cast<void*>(region.base), region.size);
  close(region.fd);
}

std::optional<MemRegion> findRegion(const void* data, size_t bytes) {
  const auto address = reinterpret_cast<uintptr_t>(data);
  Registry& r = registry();
  if (r.live.load(std::memory_order_relaxed) == 0) return std::nullopt;
  std::lock_guard<std::mutex> lock(r.mutex);
  auto it = r.byBase.upper_bound(address);
  if (it == r.byBase.begin()) return std::nullopt;
  --it;
  const MemRegion& region = it->second;
  if (address - region.base > region.size || bytes > region.size - (address - region.base))
    return std::nullopt;
  return region;
}

}  // namespace loom
