#include "transports/shm/registered_read.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
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

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif
#ifndef SYS_pidfd_getfd
#define SYS_pidfd_getfd 438
#endif

namespace loom::transport::shm {
namespace {

int pidfdOpen(pid_t pid) { return static_cast<int>(syscall(SYS_pidfd_open, pid, 0)); }
int pidfdGetfd(int pidfd, int fd) {
  return static_cast<int>(syscall(SYS_pidfd_getfd, pidfd, fd, 0));
}

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
  std::set<uint64_t> refused;  // logged once, never probed again
};

SenderTable& senderTable() {
  static SenderTable* t = new SenderTable;  // never destroyed: connections may outlive statics
  return *t;
}

// Opens a pidfd for `sender` and proves through it that we may take its fds and that the pid
// names the process with its token. Returns why not, or "" with the pidfd in *pidfd.
std::string probe(const ProcessIdentity& sender, int* pidfd) {
  if (sender.identityFd < 0) return "it has no identity memfd";
  FdCloser process{pidfdOpen(sender.pid)};
  if (process.fd < 0) return strCat("pidfd_open: ", std::strerror(errno));
  FdCloser identity{pidfdGetfd(process.fd, sender.identityFd)};
  if (identity.fd < 0) return strCat("pidfd_getfd: ", std::strerror(errno));
  uint64_t seen = 0;
  if (pread(identity.fd, &seen, sizeof(seen), 0) != sizeof(seen) || seen != sender.token)
    return "the pid names another process here (a different pid namespace?)";
  *pidfd = process.fd;
  process.fd = -1;
  return "";
}

std::atomic<uint64_t> registeredSteps{0};

}  // namespace

uint64_t registeredStepsReceived() { return registeredSteps.load(std::memory_order_relaxed); }
void countRegisteredStep() { registeredSteps.fetch_add(1, std::memory_order_relaxed); }

int createIdentityFd(uint64_t token) {
  const int fd = memfd_create("loom-identity", MFD_CLOEXEC);
  if (fd < 0) return -1;
  if (pwrite(fd, &token, sizeof(token), 0) != sizeof(token)) {
    close(fd);
    return -1;
  }
  return fd;
}

PeerMapping::~PeerMapping() {
  if (data != nullptr) munmap(const_cast<uint8_t*>(data), size);
}

struct PeerRegions::State {
  int pidfd;
  ProcessIdentity sender;
  int peer;
  std::mutex mutex;
  std::list<std::shared_ptr<PeerMapping>> cache;  // most recently used first

  // Drops the mappings of regions the sender freed: their fd is closed there, or is another
  // file now. Runs only when a new region is mapped, so steps never pay for it.
  void dropFreed() {
    for (auto it = cache.begin(); it != cache.end();) {
      FdCloser fd{pidfdGetfd(pidfd, (*it)->fd)};
      struct stat sb = {};
      const bool same = fd.fd >= 0 && fstat(fd.fd, &sb) == 0 && sb.st_dev == (*it)->device &&
                        sb.st_ino == (*it)->inode;
      it = same ? std::next(it) : cache.erase(it);
    }
  }

  std::shared_ptr<PeerMapping> mapNew(uint64_t id, int32_t fd) {
    FdCloser local{pidfdGetfd(pidfd, fd)};
    LOOM_ENFORCE(local.fd >= 0, RemoteError, "rank ", peer,
                 " sent data in its loomMemAlloc region ", id, " but its fd ", fd,
                 " cannot be taken: ", std::strerror(errno),
                 "; was the buffer freed with loomMemFree while a collective used it? "
                 "(LOOM_SHM_REGISTERED=0 copies through the shared ring instead)");
    struct stat sb = {};
    const int seals = fcntl(local.fd, F_GET_SEALS);
    // Only a sealed memfd is safe to map: nobody can shrink it under our reads (SIGBUS).
    LOOM_ENFORCE(fstat(local.fd, &sb) == 0 && seals >= 0 && (seals & F_SEAL_SHRINK) != 0,
                 RemoteError, "rank ", peer, "'s fd ", fd, " for region ", id,
                 " is not a loomMemAlloc region; was the buffer freed with loomMemFree while a "
                 "collective used it?");
    auto m = std::make_shared<PeerMapping>();
    m->id = id;
    m->fd = fd;
    m->device = sb.st_dev;
    m->inode = sb.st_ino;
    m->size = static_cast<size_t>(sb.st_size);
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

PeerRegions::PeerRegions(int pidfd, const ProcessIdentity& sender, int peer)
    : state_(new State{pidfd, sender, peer, {}, {}}) {}

PeerRegions::~PeerRegions() {
  close(state_->pidfd);
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
  int pidfd = -1;
  const std::string why = probe(sender, &pidfd);
  if (!why.empty()) {
    t.refused.insert(sender.token);
    LOOM_INFO(kLogShm, "rank ", peer, " (pid ", sender.pid,
              ") is another process whose loomMemAlloc buffers this process may not map (", why,
              "): steps from it go through the shared ring. Single-copy needs Linux >= 5.6 and "
              "ptrace permission between the ranks (same user; kernel.yama.ptrace_scope=0)");
    return nullptr;
  }
  std::shared_ptr<PeerRegions> regions(new PeerRegions(pidfd, sender, peer));
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
