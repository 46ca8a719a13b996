// How the executor waits when nothing moved (transports/wait.h says why): spin a few
// microseconds (a peer on another core usually answers within that), then yield (a peer
// waiting for this core gets it), then sleep until a connection the blocked work waits on can
// move. Every sleep is bounded so aborts and deadlines are still checked. Used by the general
// progress loop (task_loop.cc) and the fast path for one small call (exchange_now.cc).
#pragma once

#include <sched.h>

#include <chrono>
#include <thread>

#include "src/base/cpu_arch.h"
#include "transports/wait.h"

namespace loom {

// How this thread's recent waits ended (see Backoff::yieldFirst_).
struct WaitHistory {
  int spunInVain = 0;  // waits in a row that outlasted the spin phase
  bool yieldFirst = false;
  unsigned sinceProbe = 0;  // waits since the last one that tried spinning again
};
inline thread_local WaitHistory tlsWaitHistory;

class Backoff {
 public:
  using Clock = std::chrono::steady_clock;
  static constexpr auto kSpin = std::chrono::microseconds(4);
  // Yield until this long, then sleep. With more ranks than CPUs (yieldAtOnce) the sleep gives
  // the CPU to the peer this rank waits for, so it comes early. With a CPU per rank nobody
  // needs it, and a woken thread waits for the kernel to run it again, while a step of a large
  // call often waits about as long as 60 us: sleeping that early would add a wake-up to many
  // steps of a 1 MiB call. A wait for a late peer still sleeps after 1 ms, so it does not burn a
  // CPU for longer.
  static constexpr auto kYield = std::chrono::microseconds(60);
  static constexpr auto kYieldAlone = std::chrono::milliseconds(1);
  static constexpr auto kMaxSleep = std::chrono::milliseconds(10);

  // `arm` adds what to sleep on to the set and says whether sleeping is safe.
  template <typename Arm>
  void idle(Arm&& arm) {
    if (++idle_ == 1) startWait();
    if (yieldNow_) {
      sched_yield();
    } else {
      // One pause per round at first: a pause takes tens to a hundred-odd cycles on recent x86
      // cores, so 16 per round would leave a small call's data unseen for a good part of the
      // call's own time. A long wait (a large step) polls
      // less, so the peer filling the slot is not slowed by the polled cache line.
      const int pauses = idle_ < 64 ? 1 : 16;
      for (int i = 0; i < pauses; ++i) cpuPause();
    }
    // Look at the clock every few rounds only, the first time after a few: most waits of a
    // small call end within them, and a clock read costs as much as a round.
    if ((idle_ & 7) != 0) return;
    if (idle_ == 8) {
      since_ = Clock::now();
      return;
    }
    const auto waited = Clock::now() - since_;
    waited_ = waited;
    if (waited < kSpin && !yieldNow_) return;
    if (waited < (yieldAtOnce_ ? kYield : kYieldAlone)) {
      outlastedSpin_ = true;
      sched_yield();
      return;
    }
    outlastedSpin_ = true;
    set_.clear();
    const transport::WaitArm state = arm(set_);
    if (state == transport::WaitArm::kArmed) {
      set_.sleep(std::chrono::duration_cast<std::chrono::microseconds>(kMaxSleep));
    } else if (state == transport::WaitArm::kUnsupported) {
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
    set_.lower();
  }
  // Something moved: the wait (if any) is over.
  void reset() {
    if (idle_ > 0) endWait();
    idle_ = 0;
    waited_ = Clock::duration::zero();
    nextPeerCheck_ = kPeerCheckEvery;
  }
  ~Backoff() {
    if (idle_ > 0) endWait();
  }
  // How long nothing has moved, as of the last time idle() read the clock (a busy call reads
  // it never; an idle one every few rounds).
  Clock::duration waited() const { return waited_; }
  // True once per kPeerCheckEvery of one wait: time to ask the awaited connections whether
  // their peers still exist (checkPeer(), a system call each). A peer process killed mid-call
  // then fails the call within about that long instead of at the timeout.
  static constexpr auto kPeerCheckEvery = std::chrono::milliseconds(100);
  bool peerCheckDue() {
    if (waited_ < nextPeerCheck_) return false;
    nextPeerCheck_ = waited_ + kPeerCheckEvery;
    return true;
  }
  // More ranks than CPUs on this host (PlannerState::oversubscribed()): the peer this rank
  // waits for is likely waiting for a CPU, so spinning only delays it - yield at once (Open
  // MPI does the same when oversubscribed), and sleep from kYield, not kYieldAlone.
  void yieldAtOnce(bool on) { yieldAtOnce_ = on; }

 private:
  // Spinning pays only while the peer runs on another core. Two threads of different
  // processes that hand work back and forth can end up on the same core for a long while
  // (host streams on few cores, where a waiting thread and the stream's worker both run
  // collectives): then every wait spins its 4 us in vain before yielding to the peer, many
  // times a small call's own cost. After 4 waits in a row that outlasted the spin phase, this
  // thread yields at once, and every 32nd wait spins again to notice when the peer is back on
  // its own core.
  void startWait() {
    WaitHistory& h = history_;
    probing_ = h.yieldFirst && ++h.sinceProbe % 32 == 0;
    yieldNow_ = yieldAtOnce_ || (h.yieldFirst && !probing_);
    outlastedSpin_ = false;
  }
  void endWait() {
    WaitHistory& h = history_;
    if (yieldAtOnce_) return;  // oversubscribed: always yields, nothing to learn
    if (h.yieldFirst) {
      if (probing_ && !outlastedSpin_) h = WaitHistory{};  // spinning works again
      return;
    }
    h.spunInVain = outlastedSpin_ ? h.spunInVain + 1 : 0;
    h.yieldFirst = h.spunInVain >= 4;
  }

  WaitHistory& history_ = tlsWaitHistory;  // looked up once per Backoff, not per wait
  bool yieldAtOnce_ = false;
  bool yieldNow_ = false;       // this wait yields from its first round
  bool probing_ = false;        // this wait spins to test whether spinning works again
  bool outlastedSpin_ = false;  // this wait went on past the spin phase
  unsigned idle_ = 0;
  Clock::time_point since_;
  Clock::duration waited_{};
  Clock::duration nextPeerCheck_ = kPeerCheckEvery;
  transport::WaitSet set_;
};

}  // namespace loom
