#include "src/exec/cpu/progress_engine.h"

#include <algorithm>
#include <thread>

namespace loom {

bool ProgressEngine::tryDrive(std::vector<Run*>& view, uint64_t& version) {
  if (!takeDriver()) return false;
  std::lock_guard<std::mutex> lock(mutex_);
  snapshot(view, version);
  return true;
}

void ProgressEngine::leave() {
  bool others;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    driving_.store(false);
    others = !active_.empty();
  }
  // Under mutex_ a registrant either found the role free or is in active_ now: it is woken.
  if (others) transport::wakeDoorbell(bell_);
}

void ProgressEngine::order(Run& run) {
  // Newest run first: the last task on a connection belongs to the latest run that uses it.
  for (const ConnectionUse& first : run.firstUses) {
    const PrimTask* last = nullptr;
    const Run* owner = nullptr;
    for (auto it = active_.rbegin(); it != active_.rend() && last == nullptr; ++it) {
      const Run& earlier = **it;
      auto found = std::lower_bound(earlier.lastUses.begin(), earlier.lastUses.end(),
                                    ConnectionUse{first.connection, 0});
      if (found != earlier.lastUses.end() && found->connection == first.connection) {
        last = earlier.tasks[found->task];
        owner = &earlier;
      }
    }
    if (last == nullptr) continue;  // done or not: only the driver may look
    // A task has a slot per link and at most one predecessor per link: the first use of a
    // connection in its run has none inside the run, so a slot is free.
    for (const PrimTask*& slot : run.before[first.task]) {
      if (slot == nullptr) {
        slot = last;
        run.crossBefore.push_back({owner, &slot});
        break;
      }
    }
  }
}

void ProgressEngine::retire(Run& run, bool mine) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    active_.erase(std::find(active_.begin(), active_.end(), &run));
    for (Run* later : active_) {
      for (const Run::CrossBefore& c : later->crossBefore)
        if (c.earlier == &run) *c.slot = nullptr;  // done, and soon freed
    }
    activeCount_.store(active_.size());
    version_.fetch_add(1, std::memory_order_release);
    run.finished.store(true, std::memory_order_release);
  }
  if (!mine) transport::wakeDoorbell(bell_);
}

void ProgressEngine::failAll(std::exception_ptr error) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (Run* r : active_) {
      r->error = error;
      r->finished.store(true, std::memory_order_release);
    }
    active_.clear();
    activeCount_.store(0);
    version_.fetch_add(1, std::memory_order_release);
  }
  transport::wakeDoorbell(bell_);
}

bool ProgressEngine::tryExclusive() {
  if (activeCount_.load() != 0 || !takeDriver()) return false;
  if (activeCount_.load() == 0) return true;
  endExclusive();  // a run came in between: it goes first
  return false;
}

void ProgressEngine::endExclusive() {
  driving_.store(false);
  // A run registered meanwhile found the role taken and waits for this wake-up.
  if (activeCount_.load() != 0) transport::wakeDoorbell(bell_);
}

void ProgressEngine::waitIdle() {
  while (!tryExclusive()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
}

}  // namespace loom
