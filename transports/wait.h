// Sleeping instead of spinning: how an idle executor waits for any of its connections.
//
// Why. Ranks often outnumber cores (4 ranks on 2 cores, or ranks beside a training job's own
// threads). A rank that spins while the peer it waits for cannot run only delays that peer,
// and every exchange then costs a scheduler time slice. So the executor spins briefly, then
// sleeps until one of the connections its blocked tasks wait on can move, and the peer wakes
// it when it posts or releases a slot.
//
// How. Shared-memory rings carry two Doorbells in their control page (shm/ring_control.h): one the
// receiver sleeps on until data arrives, one the sender sleeps on until a slot frees. A
// doorbell is a futex word plus a "someone is asleep" flag. The waiter raises the flag, reads
// the word, re-checks its condition and only then sleeps on the word's value; the notifier
// publishes (tail or head), then reads the flag and, only if it is raised, bumps the word and
// wakes. Both sides put a full fence between their store and their load (Dekker), so either
// the waiter sees the new data or the notifier sees the flag: no wakeup is lost, and the fast
// path costs the notifier one fence and one load of a line that nobody writes while both spin.
// Socket connections wait on their file descriptors instead (poll). Every sleep is bounded
// (the executor re-checks aborts and deadlines between sleeps), so even a lost wakeup could
// only cost one bounded sleep, never a hang.
#pragma once

#include <poll.h>

#include <atomic>
#include <chrono>
#include <cstdint>

namespace loom::transport {

// Lives in shared memory (it must stay lock-free: see shm::RingControl).
struct Doorbell {
  std::atomic<uint32_t> word{0};    // the futex: bumped by each wakeup
  std::atomic<uint32_t> asleep{0};  // 1 while the waiting side may be asleep
};
static_assert(std::atomic<uint32_t>::is_always_lock_free);

// Bumps the word and wakes whoever sleeps on it (the slow half of ringDoorbell).
void wakeDoorbell(Doorbell& bell);

// Notifier side: call after publishing (the release store of tail or head).
inline void ringDoorbell(Doorbell& bell) {
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (bell.asleep.load(std::memory_order_relaxed) != 0) [[unlikely]]
    wakeDoorbell(bell);
}

// What the executor sleeps on: futex words and file descriptors of the connections it waits
// for. Fixed capacity, no allocation; a set that overflows just sleeps for a short while.
class WaitSet {
 public:
  static constexpr int kMaxFutexes = 64;
  static constexpr int kMaxFds = 64;

  void clear() {
    nfutex_ = 0;
    nfd_ = 0;
    overflow_ = false;
  }
  // Raises the doorbell's flag and remembers the word's value to sleep on; the caller must
  // re-check its condition afterwards (and then call lower() if it does not sleep after all).
  void arm(Doorbell& bell);
  void addFd(int fd, short events);
  bool empty() const { return nfutex_ == 0 && nfd_ == 0 && !overflow_; }
  // Lowers every flag raised by arm() (after a sleep, or when a re-check found work).
  void lower();
  // Sleeps until a doorbell rings, a descriptor is ready, or `limit` passes.
  void sleep(std::chrono::microseconds limit);

 private:
  struct Futex {
    Doorbell* bell;
    uint32_t value;
  };
  Futex futexes_[kMaxFutexes];
  pollfd fds_[kMaxFds];
  int nfutex_ = 0;
  int nfd_ = 0;
  bool overflow_ = false;
};

// Result of a connection's armWait(): kReady means do not sleep, there is work now.
enum class WaitArm : uint8_t { kArmed, kReady, kUnsupported };

}  // namespace loom::transport
