// A communicator's progress engine: lets independent operations submitted on different streams
// (and threads) of one communicator progress together.
//
// How it works. Every runOps call turns its operations into PrimTasks and registers them on
// its communicator's engine as one Run. The engine keeps the active runs in registration order;
// one thread at a time is the engine's driver and steps the tasks of every active run (the
// loop in task_loop.h), whichever thread submitted them. A thread whose run is done returns; if
// it was the driver and other runs remain, it hands the role over: the owners of those runs
// wait (spin, then sleep on the engine's doorbell) and the first to wake becomes the driver.
// So two ranks that each post a receive on one stream and the matching send on another never
// deadlock: whichever thread drives moves both.
//
// Order. Tasks that share a connection run in registration order (every rank registers them in
// the same order, so the slots on the wire match): a run's first task on a connection waits
// for the last task of the earlier runs on it (cross-run entries in TasksBefore, cleared when
// that run retires, before its owner frees the tasks). Tasks on different connections never
// wait for each other. One stream submits its next operation only when the last is done, so a
// stream's operations stay in order.
//
// Cost when alone. One call on the NULL stream takes the engine's mutex twice (register,
// retire) and then finds itself the only run: no doorbell is rung, nothing allocated once the
// per-thread scratch is warm, and the driver's loop reads one atomic per round to notice new
// runs.
#pragma once

#include <atomic>
#include <cstddef>
#include <exception>
#include <mutex>
#include <span>
#include <vector>

#include "src/exec/cpu/prim_task.h"
#include "transports/wait.h"

namespace loom {

// Per task: the tasks just before it on each of its connections (nullptr: none). A task may
// step only once all of them are done.
using TasksBefore = std::array<const PrimTask*, 2 * kMaxTaskPeers>;

// One connection as used by one task of a run (the index into Run::tasks).
struct ConnectionUse {
  const void* connection;
  size_t task;
  bool operator<(const ConnectionUse& o) const {
    return connection != o.connection ? connection < o.connection : task < o.task;
  }
};

// The tasks of one runOps call on one communicator. Filled by its owner before registration;
// the engine state at the bottom is the driver's. The owner keeps it (and the tasks) alive
// until `finished`.
struct Run {
  std::span<PrimTask* const> tasks;
  std::span<TasksBefore> before;
  std::span<transport::SendConnection* const> sends;  // every connection the tasks use, once
  std::span<transport::RecvConnection* const> recvs;
  std::span<const ConnectionUse> firstUses;  // per connection its first task, sorted
  std::span<const ConnectionUse> lastUses;   // per connection its last task, sorted

  // Entries of `before` that point into an earlier run (set at registration).
  struct CrossBefore {
    const Run* earlier;
    const PrimTask** slot;
  };
  std::vector<CrossBefore> crossBefore;
  bool tasksDone = false;    // the driver saw every task done; its sends still drain
  std::exception_ptr error;  // set before `finished` when the run failed
  std::atomic<bool> finished{false};

  // Clears what the engine kept from a previous use (capacity stays).
  void reset() {
    crossBefore.clear();
    tasksDone = false;
    error = nullptr;
    finished.store(false, std::memory_order_relaxed);
  }
};

class ProgressEngine {
 public:
  // Registers `run` behind the active runs, calls `underLock(alone)` with the engine locked
  // (alone: no other run is active), and makes the caller the driver if nobody is; then
  // `view` lists the active runs and `version` their version. Returns whether it drives.
  template <typename UnderLock>
  bool enter(Run& run, UnderLock&& underLock, std::vector<Run*>& view, uint64_t& version) {
    std::lock_guard<std::mutex> lock(mutex_);
    underLock(active_.empty());
    if (!active_.empty()) shared_.store(true, std::memory_order_relaxed);
    order(run);
    active_.push_back(&run);
    activeCount_.store(active_.size());  // seq_cst: read by endExclusive (see there)
    version_.fetch_add(1, std::memory_order_release);
    if (!takeDriver()) {
      transport::wakeDoorbell(bell_);  // the driver may be asleep: it has a new run
      return false;
    }
    snapshot(view, version);
    return true;
  }
  // Becomes the driver if nobody is (and refreshes `view`); false otherwise.
  bool tryDrive(std::vector<Run*>& view, uint64_t& version);
  // The driver gives up the role; wakes the owners of runs still active.
  void leave();
  // Driver: refreshes `view` if runs came or went; true if it changed.
  bool refresh(std::vector<Run*>& view, uint64_t& version) {
    if (version_.load(std::memory_order_acquire) == version) return false;
    std::lock_guard<std::mutex> lock(mutex_);
    snapshot(view, version);
    return true;
  }
  // Driver: `run` is done (its tasks, and its sends drained): removes it, clears later runs'
  // references to its tasks and, unless `mine`, wakes its owner.
  void retire(Run& run, bool mine);
  // Driver: fails every active run with `error` and retires them all.
  void failAll(std::exception_ptr error);
  // Runs `f` under the engine's lock (ShmWayPolicy bookkeeping of a finished call).
  template <typename F>
  void locked(F&& f) {
    std::lock_guard<std::mutex> lock(mutex_);
    f();
  }
  transport::Doorbell& bell() { return bell_; }
  // Whether two runs ever were active at once: only then does the driver sleep on the bell.
  bool shared() const { return shared_.load(std::memory_order_relaxed); }
  // Whether a thread drives now (a waiting owner sleeps only while one does).
  bool driven() const { return driving_.load(std::memory_order_acquire); }

  // The fast path for one small call (exchange_now.cc) runs outside any Run: it drives alone,
  // only when no run is active; false (nothing taken) when busy.
  bool tryExclusive();
  void endExclusive();
  // Waits until no run is active and nobody drives, then keeps the driver role (released with
  // endExclusive): releasing a communicator's resources must not pull them from under a run.
  void waitIdle();

 private:
  bool takeDriver() {
    bool expected = false;
    return !driving_.load(std::memory_order_relaxed) &&
           driving_.compare_exchange_strong(expected, true);
  }
  void snapshot(std::vector<Run*>& view, uint64_t& version) {
    view.assign(active_.begin(), active_.end());
    version = version_.load(std::memory_order_relaxed);
  }
  // Links the first task of `run` on each connection to the last task on it of the active runs.
  void order(Run& run);

  std::mutex mutex_;          // active_ and every Run's crossBefore
  std::vector<Run*> active_;  // registration order
  std::atomic<uint64_t> version_{0};
  // active_.size() and whether a thread drives, both read outside mutex_. Every access is
  // seq_cst: a registrant stores the count and then tries the driver flag; endExclusive
  // clears the flag and then loads the count, so one of them sees the other (no lost wake-up).
  std::atomic<size_t> activeCount_{0};
  std::atomic<bool> driving_{false};
  std::atomic<bool> shared_{false};
  transport::Doorbell bell_;  // rung on a new run, a run finished for another thread, a hand-over
};

}  // namespace loom
