#include "transports/wait.h"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <thread>

namespace loom::transport {
namespace {

// The words live in memory shared between processes: no FUTEX_PRIVATE_FLAG anywhere.
long futexWake(std::atomic<uint32_t>* word) {
  return syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAKE, INT_MAX, nullptr,
                 nullptr, 0);
}

long futexWait(std::atomic<uint32_t>* word, uint32_t value, std::chrono::microseconds limit) {
  timespec rel{static_cast<time_t>(limit.count() / 1000000),
               static_cast<long>(limit.count() % 1000000) * 1000};
  return syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAIT, value, &rel, nullptr, 0);
}

// futex_waitv (Linux 5.16) sleeps on several words at once; remembered once it says ENOSYS.
std::atomic<bool> haveWaitv{true};

long futexWaitv(futex_waitv* waiters, int n, std::chrono::microseconds limit) {
  timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);  // futex_waitv takes an absolute timeout
  long ns = now.tv_nsec + static_cast<long>(limit.count() % 1000000) * 1000;
  timespec until{now.tv_sec + static_cast<time_t>(limit.count() / 1000000) + ns / 1000000000,
                 ns % 1000000000};
  return syscall(SYS_futex_waitv, waiters, n, 0, &until, CLOCK_MONOTONIC);
}

}  // namespace

void wakeDoorbell(Doorbell& bell) {
  bell.word.fetch_add(1, std::memory_order_relaxed);
  futexWake(&bell.word);
}

void WaitSet::arm(Doorbell& bell) {
  if (nfutex_ == kMaxFutexes) {
    overflow_ = true;
    return;
  }
  bell.asleep.store(1, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_seq_cst);  // flag before the re-check (wait.h)
  futexes_[nfutex_++] = {&bell, bell.word.load(std::memory_order_relaxed)};
}

void WaitSet::addFd(int fd, short events) {
  if (nfd_ == kMaxFds) {
    overflow_ = true;
    return;
  }
  fds_[nfd_++] = {fd, events, 0};
}

void WaitSet::lower() {
  for (int i = 0; i < nfutex_; ++i) futexes_[i].bell->asleep.store(0, std::memory_order_relaxed);
}

void WaitSet::sleep(std::chrono::microseconds limit) {
  using std::chrono::microseconds;
  if (overflow_ || (nfutex_ > 0 && nfd_ > 0)) {
    // Too many to watch, or both kinds: watch the descriptors (if any) for a short while and
    // let the caller's loop look at everything again.
    limit = std::min(limit, microseconds(50));
    if (nfd_ > 0) {
      timespec rel{0, static_cast<long>(limit.count()) * 1000};
      ppoll(fds_, static_cast<nfds_t>(nfd_), &rel, nullptr);
    } else {
      std::this_thread::sleep_for(limit);
    }
    return;
  }
  if (nfd_ > 0) {
    timespec rel{static_cast<time_t>(limit.count() / 1000000),
                 static_cast<long>(limit.count() % 1000000) * 1000};
    ppoll(fds_, static_cast<nfds_t>(nfd_), &rel, nullptr);
    return;
  }
  if (nfutex_ == 0) {
    std::this_thread::sleep_for(std::min(limit, microseconds(50)));
    return;
  }
  if (nfutex_ == 1) {
    futexWait(&futexes_[0].bell->word, futexes_[0].value, limit);
    return;
  }
  if (haveWaitv.load(std::memory_order_relaxed)) {
    futex_waitv waiters[kMaxFutexes];
    for (int i = 0; i < nfutex_; ++i) {
      waiters[i] = {};
      waiters[i].val = futexes_[i].value;
      waiters[i].uaddr = reinterpret_cast<uintptr_t>(&futexes_[i].bell->word);
      waiters[i].flags = FUTEX_32;
    }
    if (futexWaitv(waiters, nfutex_, limit) >= 0 || errno != ENOSYS) return;
    haveWaitv.store(false, std::memory_order_relaxed);
  }
  // An old kernel: sleep on the first word only, briefly, and look at everything again.
  futexWait(&futexes_[0].bell->word, futexes_[0].value, std::min(limit, microseconds(50)));
}

}  // namespace loom::transport
