// What a hang report needs to know about one rank on one communicator: the number of the last
// call it issued and of the last one it completed, and what the last issued call was (kind,
// count, datatype, root or peer). The API records each call as it is issued and completed; the
// control thread reads a snapshot when a peer asks (bootstrap/control_channel.h), even while
// this rank is idle outside any loom call. Only the latest call is kept: the flight recorder
// keeps the history.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstring>
#include <mutex>

#include "src/bootstrap/control_channel.h"

namespace loom {

class CallProgress {
 public:
  using Clock = std::chrono::steady_clock;

  // `call` is the call's number on its communicator (CollOp::seq, from Comm::nextOpNumber): the
  // same numbers on every rank that issues the same calls, and the ones the flight recorder and
  // the executor's messages use.
  void issue(uint64_t call, const char* kind, uint64_t count, int datatype, int root) {
    std::lock_guard<std::mutex> lock(mutex_);
    last_.issued = call;
    last_.count = count;
    last_.datatype = datatype;
    last_.root = root;
    std::strncpy(last_.kind, kind, sizeof(last_.kind) - 1);
    issuedAt_ = Clock::now();
  }
  void complete(uint64_t call) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (call > last_.completed) last_.completed = call;
    completedAt_ = Clock::now();
  }
  RankProgress snapshot() const {
    std::lock_guard<std::mutex> lock(mutex_);
    RankProgress p = last_;
    const Clock::time_point now = Clock::now();
    p.msSinceIssued = last_.issued > 0 ? msSince(issuedAt_, now) : RankProgress::kNever;
    p.msSinceCompleted = last_.completed > 0 ? msSince(completedAt_, now) : RankProgress::kNever;
    p.answered = true;
    return p;
  }
  // The call in flight (issued, not completed) and how long ago it was issued; 0 when none.
  uint64_t inFlight(Clock::duration* age) const {
    std::lock_guard<std::mutex> lock(mutex_);
    if (last_.issued == last_.completed) return 0;
    if (age != nullptr) *age = Clock::now() - issuedAt_;
    return last_.issued;
  }

 private:
  static uint32_t msSince(Clock::time_point then, Clock::time_point now) {
    auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(now - then).count();
    return ms < 0 ? 0 : ms >= RankProgress::kNever ? RankProgress::kNever - 1 : uint32_t(ms);
  }
  mutable std::mutex mutex_;
  RankProgress last_;
  Clock::time_point issuedAt_{};
  Clock::time_point completedAt_{};
};

}  // namespace loom
