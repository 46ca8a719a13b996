#include "transports/shm/registered_read.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <list>
#include <map>
#include <mutex>
#include <set>
#include <string>

#include "src/base/error.h"
#include "src/base/logging.h"
#include "src/mem/memfd.h"

namespace loom::transport::shm {
namespace {

struct FdCloser {
  int fd;
  ~FdCloser() {
    if (fd >= 0) close(fd);
  }
};

// Every sender process this process reads regions from, by token, and those it may not.
struct SenderTable {
  std::mutex mutex;
  std::map<uint64_t, std::weak_ptr<PeerRegions>> bySender;
  std::set<uint64_t> refused;  // logged once, never asked again
};

SenderTable& senderTable() {
  static SenderTable* t = new SenderTable;  // never destroyed: connections may outlive statics
  return *t;
}

std::atomic<uint64_t> registeredSteps{0};

}  // namespace

uint64_t registeredStepsReceived() { return registeredSteps.load(std::memory_order_relaxed); }
void countRegisteredStep() { registeredSteps.fetch_add(1, std::memory_order_relaxed); }

PeerMapping::~PeerMapping() {
  if (data != nullptr) munmap(const_cast<uint8_t*>(data), size);
}

struct PeerRegions::State {
  std::shared_ptr<PeerProcess> process;
  ProcessIdentity sender;
  int peer;
  std::mutex mutex;
  std::list<std::shared_ptr<PeerMapping>> cache;  // most recently used first

  // Drops the mappings of regions the sender freed: their fd is closed there, or is another
  // file now. Runs only when a new region is mapped, so steps never pay for it.
  void dropFreed() {
    for (auto it = cache.begin(); it != cache.end();) {
      FdCloser fd{process->takeFd((*it)->fd)};
      struct stat sb = {};
      const bool same = fd.fd >= 0 && fstat(fd.fd, &sb) == 0 && sb.st_dev == (*it)->device &&
                        sb.st_ino == (*it)->inode;
      it = same ? std::next(it) : cache.erase(it);
    }
  }

  std::shared_ptr<PeerMapping> mapNew(uint64_t id, int32_t fd) {
    FdCloser local{process->takeFd(fd)};
    LOOM_ENFORCE(local.fd >= 0, RemoteError, "rank ", peer,
                 " sent data in its loomMemAlloc region ", id, " but its fd ", fd,
                 " cannot be taken: ", std::strerror(errno),
                 "; was the buffer freed with loomMemFree while a collective used it? "
                 "(LOOM_SHM_REGISTERED=0 copies through the shared ring instead)");
    // Only a sealed memfd is safe to map: nobody can shrink it under our reads (SIGBUS).
    const std::optional<MemfdInfo> info = sealedMemfd(local.fd);
    LOOM_ENFORCE(info.has_value(), RemoteError, "rank ", peer, "'s fd ", fd, " for region ", id,
                 " is not a loomMemAlloc region; was the buffer freed with loomMemFree while a "
                 "collective used it?");
    auto m = std::make_shared<PeerMapping>();
    m->id = id;
    m->fd = fd;
    m->device = info->device;
    m->inode = info->inode;
    m->size = info->size;
    void* p = mmap(nullptr, m->size, PROT_READ, MAP_SHARED, local.fd, 0);
    if (p == MAP_FAILED)
      throwSystemError(strCat("mapping rank ", peer, "'s loomMemAlloc region of ", m->size,
                              " bytes (the address space or vm.max_map_count ran out?)"),
                       errno);
    m->data = static_cast<const uint8_t*>(p);
    LOOM_INFO(kLogShm, "maps rank ", peer, "'s registered region ", id, " (", m->size,
              " bytes) for single-copy reads");
    return m;
  }
};

PeerRegions::PeerRegions(std::shared_ptr<PeerProcess> sender, int peer)
    : state_(new State{sender, sender->owner(), peer, {}, {}}) {}

PeerRegions::~PeerRegions() {
  SenderTable& t = senderTable();
  std::lock_guard<std::mutex> lock(t.mutex);
  auto it = t.bySender.find(state_->sender.token);
  if (it != t.bySender.end() && it->second.expired()) t.bySender.erase(it);
}

std::shared_ptr<PeerRegions> PeerRegions::open(const ProcessIdentity& sender, int peer) {
  SenderTable& t = senderTable();
  std::lock_guard<std::mutex> lock(t.mutex);
  auto it = t.bySender.find(sender.token);
  if (it != t.bySender.end())
    if (std::shared_ptr<PeerRegions> known = it->second.lock()) return known;
  if (t.refused.count(sender.token) != 0) return nullptr;
  std::string why;
  std::shared_ptr<PeerProcess> process = PeerProcess::open(sender, &why);
  if (process == nullptr) {
    t.refused.insert(sender.token);
    LOOM_INFO(kLogShm, "rank ", peer, " (pid ", sender.pid,
              ") is another process whose loomMemAlloc buffers this process may not map (", why,
              "): steps from it go through the shared ring. Single-copy needs Linux >= 5.6 and "
              "ptrace permission between the ranks (same user; kernel.yama.ptrace_scope=0)");
    return nullptr;
  }
  std::shared_ptr<PeerRegions> regions(new PeerRegions(std::move(process), peer));
  t.bySender[sender.token] = regions;
  return regions;
}

std::shared_ptr<const PeerMapping> PeerRegions::map(uint64_t id, int32_t fd, uint64_t offset,
                                                    size_t bytes) {
  State& s = *state_;
  std::lock_guard<std::mutex> lock(s.mutex);
  auto it = s.cache.begin();
  while (it != s.cache.end() && (*it)->id != id) ++it;
  if (it != s.cache.end()) {
    s.cache.splice(s.cache.begin(), s.cache, it);
  } else {
    s.dropFreed();
    s.cache.push_front(s.mapNew(id, fd));
    if (s.cache.size() > kMaxMappings) s.cache.pop_back();
  }
  const PeerMapping& m = *s.cache.front();
  LOOM_ENFORCE(offset <= m.size && bytes <= m.size - offset, RemoteError, "rank ", s.peer,
               " posted ", bytes, " bytes at offset ", offset, " of its registered region ", id,
               " of ", m.size, " bytes (corrupt ring)");
  return s.cache.front();
}

}  // namespace loom::transport::shm
