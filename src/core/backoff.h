// How the executor waits when nothing moved (transports/wait.h says why): spin a few
// microseconds (a peer on another core usually answers within that), then yield (a peer
// waiting for this core gets it), then sleep until a connection the blocked work waits on can
// move. Every sleep is bounded so aborts and deadlines are still checked. Used by the general
// progress loop (task_loop.cc) and the fast path for one small call (exchange_now.cc).
#pragma once

#include <sched.h>

#include <chrono>
#include <thread>

#include "transports/wait.h"

namespace loom {

class Backoff {
 public:
  using Clock = std::chrono::steady_clock;
  static constexpr auto kSpin = std::chrono::microseconds(4);
  static constexpr auto kYield = std::chrono::microseconds(60);
  static constexpr auto kMaxSleep = std::chrono::milliseconds(10);

  // `arm` adds what to sleep on to the set and says whether sleeping is safe.
  template <typename Arm>
  void idle(Arm&& arm) {
    ++idle_;
    if (yieldAtOnce_) {
      sched_yield();
    } else {
      // One pause per round at first: a pause takes ~66 cycles on this machine's EPYC, and with
      // 16 per round a small call's data waited 0.4 us on average to be seen (2 processes, 8 B
      // AllReduce: 0.50 -> 0.33 us). A long wait (a large step) polls less, so the peer
      // filling the slot is not slowed by the polled cache line.
      const int pauses = idle_ < 64 ? 1 : 16;
      for (int i = 0; i < pauses; ++i) __builtin_ia32_pause();
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
    if (waited < kSpin && !yieldAtOnce_) return;
    if (waited < kYield) {
      sched_yield();
      return;
    }
    set_.clear();
    const transport::WaitArm state = arm(set_);
    if (state == transport::WaitArm::kArmed) {
      set_.sleep(std::chrono::duration_cast<std::chrono::microseconds>(kMaxSleep));
    } else if (state == transport::WaitArm::kUnsupported) {
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
    set_.lower();
  }
  void reset() {
    idle_ = 0;
    waited_ = Clock::duration::zero();
  }
  // How long nothing has moved, as of the last time idle() read the clock (a busy call reads
  // it never; an idle one every few rounds).
  Clock::duration waited() const { return waited_; }
  // More ranks than CPUs on this host (PlannerState::oversubscribed()): the peer this rank
  // waits for is likely waiting for a CPU, so spinning only delays it - yield at once (Open
  // MPI does the same when oversubscribed). 4 processes on 2 cores, 8 B AllReduce: 20 -> 11 us.
  void yieldAtOnce(bool on) { yieldAtOnce_ = on; }

 private:
  bool yieldAtOnce_ = false;
  unsigned idle_ = 0;
  Clock::time_point since_;
  Clock::duration waited_{};
  transport::WaitSet set_;
};

}  // namespace loom
