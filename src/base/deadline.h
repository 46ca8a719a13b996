// A point in time after which a wait gives up, plus the abort flag it must also watch. Every
// blocking call in loom takes one, so nothing waits forever unless LOOM_TIMEOUT=0 asks for it.
#pragma once

#include <chrono>

#include "src/base/interrupt.h"

namespace loom {

class Deadline {
 public:
  using Clock = std::chrono::steady_clock;

  static Deadline never() { return Deadline(Clock::time_point::max()); }
  static Deadline after(std::chrono::milliseconds d) {
    return d.count() <= 0 ? never() : Deadline(Clock::now() + d);
  }
  bool isNever() const { return at_ == Clock::time_point::max(); }
  bool expired() const { return !isNever() && Clock::now() >= at_; }
  // Milliseconds to pass to poll(): the time left, but at most `cap` so the caller can look at
  // its abort flag regularly.
  int pollMs(int cap) const {
    if (isNever()) return cap;
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(at_ - Clock::now()).count();
    if (left <= 0) return 0;
    return left < cap ? static_cast<int>(left) : cap;
  }
  // The earlier of two deadlines.
  Deadline min(const Deadline& other) const { return at_ <= other.at_ ? *this : other; }

 private:
  explicit Deadline(Clock::time_point at) : at_(at) {}
  Clock::time_point at_;
};

}  // namespace loom
