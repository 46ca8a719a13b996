// Why a communicator's waits must stop before their deadline: loomCommAbort on this rank, or a
// failure of the job that reached this rank (a peer died or left, or a rank reported an error on
// the control channel, src/bootstrap/control_channel.h). Every blocking wait in loom watches
// one, so a failure anywhere ends the waits of every rank instead of leaving them to time out.
#pragma once

#include <atomic>
#include <cstddef>
#include <string>

#include "loom/loom.h"

namespace loom {

class Interrupt {
 public:
  // Any reason set: waits must stop.
  bool raised() const { return state_.load(std::memory_order_acquire) != 0; }
  bool aborted() const { return (state_.load(std::memory_order_acquire) & kAborted) != 0; }
  // A failure was recorded (its code, rank and message are readable).
  bool failed() const { return (state_.load(std::memory_order_acquire) & kFailed) != 0; }

  // loomCommAbort on this rank (any thread).
  void abortLocally() { state_.fetch_or(kAborted, std::memory_order_acq_rel); }
  // Records the job's failure; the first one wins. `rank` is the rank the failure is about (the
  // dead or failing rank; -1 when unknown). Returns false when a failure was already recorded.
  bool fail(loomResult_t code, int rank, const std::string& message);

  // Valid once failed().
  loomResult_t code() const { return code_; }
  int rank() const { return rank_; }
  const char* message() const { return message_; }

  // Throws if raised: InvalidUsage for a local abort, else an Error with the failure's code and
  // message. `what` names the interrupted wait.
  void throwIfRaised(const char* what) const;

 private:
  static constexpr int kAborted = 1;
  static constexpr int kFailed = 2;
  std::atomic<int> state_{0};
  std::atomic<bool> claimed_{false};  // a failure is being written
  loomResult_t code_ = loomSuccess;
  int rank_ = -1;
  char message_[768] = {};
};

// What a wait watches besides its deadline.
using AbortFlag = const Interrupt*;

// How often (ms) a blocked wait wakes to look at its interrupt.
inline constexpr int kAbortPollMs = 20;

// Throws if `abort` is set (see Interrupt::throwIfRaised); nullptr watches nothing.
inline void throwIfAborted(AbortFlag abort, const char* what) {
  if (abort != nullptr && abort->raised()) abort->throwIfRaised(what);
}

}  // namespace loom
