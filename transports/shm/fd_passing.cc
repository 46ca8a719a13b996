// The pidfd way (fd_passing.h): PeerProcess, its identity probe and the table that shares
// one PeerProcess per peer process. The SCM_RIGHTS way is in fd_server.cc.
#include "transports/shm/fd_passing.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <map>
#include <mutex>

#include "src/base/error.h"

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

// Every process this one takes fds from, by token, and those it may not (with the reason).
struct ProcessTable {
  std::mutex mutex;
  std::map<uint64_t, std::weak_ptr<PeerProcess>> byToken;
  std::map<uint64_t, std::string> refused;  // never probed again
};

ProcessTable& processTable() {
  static ProcessTable* t = new ProcessTable;  // never destroyed: users may outlive statics
  return *t;
}

std::atomic<bool> refuseAll{false};
constexpr size_t kMaxRefused = 1024;

// Opens a pidfd for `owner` and proves through it that we may take its fds and that the pid
// names the process with its token. Returns why not, or "" with the pidfd in *pidfd.
std::string probe(const ProcessIdentity& owner, int* pidfd) {
  if (owner.identityFd < 0) return "it has no identity memfd";
  FdCloser process{pidfdOpen(owner.pid)};
  if (process.fd < 0) return strCat("pidfd_open: ", std::strerror(errno));
  FdCloser identity{pidfdGetfd(process.fd, owner.identityFd)};
  if (identity.fd < 0) return strCat("pidfd_getfd: ", std::strerror(errno));
  uint64_t seen = 0;
  if (pread(identity.fd, &seen, sizeof(seen), 0) != sizeof(seen) || seen != owner.token)
    return "the pid names another process here (a different pid namespace?)";
  *pidfd = process.fd;
  process.fd = -1;
  return "";
}

}  // namespace

int createIdentityFd(uint64_t token) {
  const int fd = memfd_create("loom-identity", MFD_CLOEXEC);
  if (fd < 0) return -1;
  if (pwrite(fd, &token, sizeof(token), 0) != sizeof(token)) {
    close(fd);
    return -1;
  }
  return fd;
}

std::shared_ptr<PeerProcess> PeerProcess::open(const ProcessIdentity& owner, std::string* why) {
  if (refuseAll.load(std::memory_order_relaxed)) {
    *why = "refused by a test";  // not remembered: the test may allow it again
    return nullptr;
  }
  ProcessTable& t = processTable();
  std::lock_guard<std::mutex> lock(t.mutex);
  auto it = t.byToken.find(owner.token);
  if (it != t.byToken.end())
    if (std::shared_ptr<PeerProcess> known = it->second.lock()) return known;
  if (auto no = t.refused.find(owner.token); no != t.refused.end()) {
    *why = no->second;
    return nullptr;
  }
  int pidfd = -1;
  *why = probe(owner, &pidfd);
  if (!why->empty()) {
    // Bounded: a peer that sends garbage identities must not grow the table without end.
    if (t.refused.size() < kMaxRefused) t.refused[owner.token] = *why;
    return nullptr;
  }
  std::shared_ptr<PeerProcess> process(new PeerProcess(pidfd, owner));
  t.byToken[owner.token] = process;
  return process;
}

PeerProcess::~PeerProcess() {
  close(pidfd_);
  ProcessTable& t = processTable();
  std::lock_guard<std::mutex> lock(t.mutex);
  auto it = t.byToken.find(owner_.token);
  if (it != t.byToken.end() && it->second.expired()) t.byToken.erase(it);
}

int PeerProcess::takeFd(int32_t number) const { return pidfdGetfd(pidfd_, number); }

namespace testing {
void refusePidfd(bool refuse) { refuseAll.store(refuse, std::memory_order_relaxed); }
}  // namespace testing

}  // namespace loom::transport::shm
