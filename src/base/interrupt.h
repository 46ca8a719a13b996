// Why a communicator's waits must stop before their deadline: loomCommAbort on this rank, or a
// failure of the job that reached this rank (a peer died or left, or a rank reported an error on
// the control channel, src/bootstrap/control_channel.h). Every blocking wait in loom watches
// one, so a failure anywhere ends the waits of every rank instead of leaving them to time out.
#pragma once

#include <atomic>
#include <cstddef>
#include <memory>
#include <string>

#include "loom/loom.h"

namespace loom {

class Interrupt {
 public:
  // Any reason set: waits must stop. A parent's failure counts (a split child stops when the
  // job of its parent fails); a parent's local abort does not, as in NCCL.
  bool raised() const {
    return state_.load(std::memory_order_acquire) != 0 || (parent_ && parent_->failure());
  }
  bool aborted() const { return (state_.load(std::memory_order_acquire) & kAborted) != 0; }
  // A failure was recorded here (its code, rank and message are readable).
  bool failed() const { return (state_.load(std::memory_order_acquire) & kFailed) != 0; }
  // The failure that stops this interrupt's waits: its own, else the nearest ancestor's;
  // nullptr when none.
  const Interrupt* failure() const {
    if (failed()) return this;
    return parent_ ? parent_->failure() : nullptr;
  }
  // Makes the failures of `parent` (a split's parent communicator) stop these waits too. Set
  // once, before any wait watches this interrupt; keeps the parent's interrupt alive.
  void inheritFrom(std::shared_ptr<const Interrupt> parent) { parent_ = std::move(parent); }
  bool hasParent() const { return parent_ != nullptr; }

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
  std::shared_ptr<const Interrupt> parent_;
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
