// Briefly busy-waiting before blocking, for hand-offs between threads of one process (a host
// stream's worker and the thread that waits for it): waking a thread blocked on a condition
// variable costs ~5-10 us, more than a small collective. Spin a few microseconds (the other
// thread is usually running on another core), then yield (it may need this core), then give up
// and let the caller block.
#pragma once

#include <sched.h>

#include <chrono>

#include "src/base/cpu_arch.h"

namespace loom {

// Returns true as soon as `ready()` holds, false once `budget` has passed without it.
template <typename Ready>
bool spinUntil(Ready&& ready, std::chrono::microseconds budget = std::chrono::microseconds(50)) {
  using Clock = std::chrono::steady_clock;
  constexpr auto kSpin = std::chrono::microseconds(4);
  const auto start = Clock::now();
  for (unsigned round = 0;; ++round) {
    if (ready()) return true;
    if ((round & 15) != 15) {
      for (int i = 0; i < 16; ++i) cpuPause();
      continue;
    }
    const auto waited = Clock::now() - start;
    if (waited >= budget) return false;
    if (waited >= kSpin) sched_yield();
  }
}

}  // namespace loom
