#include "transports/shm/direct_read.h"

#include <sys/uio.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <mutex>
#include <random>

#include "src/base/env.h"
#include "src/base/error.h"
#include "transports/shm/registered_read.h"

namespace loom::transport::shm {
namespace {

// volatile: the CMA probe reads it from another process, so it must really be in memory.
volatile uint64_t processToken = 0;
int identityFd = -1;
std::atomic<pid_t> tokenPid{0};
std::mutex tokenMutex;

}  // namespace

ProcessIdentity thisProcess() {
  // A child forked without exec inherits our memory, token included: a new pid means a new
  // process, so it draws its own token.
  const pid_t pid = getpid();
  if (tokenPid.load(std::memory_order_acquire) != pid) {
    std::lock_guard<std::mutex> lock(tokenMutex);
    if (tokenPid.load(std::memory_order_relaxed) != pid) {
      std::random_device device;
      const uint64_t token = (uint64_t{device()} << 32) ^ device();
      processToken = token != 0 ? token : 1;
      // A forked child's inherited identity memfd names its parent: drop our copy of it.
      if (identityFd >= 0) close(identityFd);
      identityFd = createIdentityFd(processToken);
      tokenPid.store(pid, std::memory_order_release);
    }
  }
  return ProcessIdentity{processToken, reinterpret_cast<uint64_t>(&processToken),
                         static_cast<int32_t>(pid), identityFd};
}

size_t cmaThreshold() {
  const int64_t v = envInt(EnvVar::LOOM_SHM_CMA_THRESHOLD);
  LOOM_ENFORCE(v >= 0, InvalidArgument, "LOOM_SHM_CMA_THRESHOLD=", v,
               " is negative; use a size in bytes, or 0 to turn CMA off");
  return static_cast<size_t>(v);
}

DirectMode chooseDirectMode(const ProcessIdentity& receiver) {
  const ProcessIdentity me = thisProcess();
  if (receiver.token == me.token && receiver.pid == me.pid)
    return envInt(EnvVar::LOOM_SHM_DIRECT) != 0 ? DirectMode::kSameProcess : DirectMode::kNone;
  DirectMode mode = DirectMode::kNone;
  if (envInt(EnvVar::LOOM_SHM_REGISTERED) != 0 && me.identityFd >= 0)
    mode = DirectMode::kRegistered;
  return cmaThreshold() > 0 ? mode | DirectMode::kCma : mode;
}

bool mayPullFrom(const ProcessIdentity& sender) {
  uint64_t seen = 0;
  iovec local{&seen, sizeof(seen)};
  iovec remote{reinterpret_cast<void*>(sender.tokenAddress), sizeof(seen)};
  const ssize_t n = process_vm_readv(sender.pid, &local, 1, &remote, 1, 0);
  return n == sizeof(seen) && seen == sender.token;
}

namespace {
std::atomic<uint64_t> gCmaReads{0};
}  // namespace

uint64_t testing::cmaReadsInThisProcess() { return gCmaReads.load(std::memory_order_relaxed); }

void cmaRead(int32_t pid, const void* remote, void* local, size_t bytes, int peer) {
  gCmaReads.fetch_add(1, std::memory_order_relaxed);
  auto* to = static_cast<uint8_t*>(local);
  auto from = reinterpret_cast<uintptr_t>(remote);
  while (bytes > 0) {
    iovec l{to, bytes};
    iovec r{reinterpret_cast<void*>(from), bytes};
    const ssize_t n = process_vm_readv(pid, &l, 1, &r, 1, 0);
    if (n <= 0) {
      const int err = n < 0 ? errno : EIO;
      throw SystemError(strCat("process_vm_readv from rank ", peer, " (pid ", pid,
                               ") failed: ", std::strerror(err),
                               "; set LOOM_SHM_CMA_THRESHOLD=0 to copy through shared memory "
                               "instead (or allow ptrace between the ranks' processes)"));
    }
    to += n;
    from += static_cast<uintptr_t>(n);
    bytes -= static_cast<size_t>(n);
  }
}

}  // namespace loom::transport::shm
