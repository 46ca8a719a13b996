#include "src/exec/cpu/task_loop.h"

#include <algorithm>
#include <chrono>
#include <string>
#include <vector>

#include "src/base/error.h"
#include "src/comm/comm.h"
#include "src/exec/cpu/backoff.h"
#include "src/exec/cpu/executor.h"
#include "src/plan/planner_state.h"

namespace loom {

std::chrono::milliseconds callTimeout(std::span<Comm* const> comms) {
  std::chrono::milliseconds timeout = comms.front()->options().timeout;
  for (Comm* c : comms) timeout = std::min(timeout, c->options().timeout);
  if (timeout.count() == 0)
    for (Comm* c : comms) timeout = std::max(timeout, c->options().timeout);
  return timeout;
}

void throwStalled(std::chrono::milliseconds timeout, const std::string& waiting) {
  throw TimeoutError(strCat("no progress for ", timeout.count() / 1000.0,
                            " s; still waiting for:", waiting,
                            "\nDid every rank call the same operations in the same order?"));
}

namespace {

// One communicator of the call, as this thread sees it. Kept per thread and reused: once
// warm, a call allocates nothing here.
struct Lane {
  ProgressEngine* engine = nullptr;
  Comm* comm = nullptr;
  Run* mine = nullptr;
  bool driving = false;
  uint64_t version = 0;
  std::vector<Run*> view;                         // the engine's active runs while driving
  std::vector<transport::SendConnection*> sends;  // every connection of the view, once
  std::vector<transport::RecvConnection*> recvs;
};

bool mayStep(const Run& run, size_t i) {
  if (run.before.empty()) return true;
  for (const PrimTask* b : run.before[i])
    if (b != nullptr && !b->done()) return false;
  return true;
}

template <typename T, typename Member>
void gather(const std::vector<Run*>& view, std::vector<T*>& out, Member member) {
  out.clear();
  for (const Run* r : view) out.insert(out.end(), (r->*member).begin(), (r->*member).end());
  if (view.size() > 1) {
    std::sort(out.begin(), out.end());
    out.erase(std::unique(out.begin(), out.end()), out.end());
  }
}

void viewChanged(Lane& lane) {
  gather(lane.view, lane.sends, &Run::sends);
  gather(lane.view, lane.recvs, &Run::recvs);
}

// One round over a lane this thread drives: pump its connections, step what may step, retire
// the first run found finished (the view is stale after that: the next round refreshes it).
bool stepLane(Lane& lane) {
  bool any = false;
  for (auto* s : lane.sends) any |= s->progress();
  for (auto* r : lane.recvs) any |= r->progress();
  for (Run* run : lane.view) {
    if (!run->tasksDone) {
      bool allDone = true;
      for (size_t i = 0; i < run->tasks.size(); ++i) {
        PrimTask& t = *run->tasks[i];
        if (t.done()) continue;
        if (mayStep(*run, i)) any |= t.progress();
        allDone &= t.done();
      }
      if (!allDone) continue;
      run->tasksDone = true;
    }
    // Posted slots must reach the kernel before the run's owner returns: a rank that goes on
    // to finalize stops pumping its connections, and its peers would wait for data still in
    // our slot ring (socket). shm slots are in the peer's view already, so they drain at once.
    bool drained = true;
    for (auto* s : run->sends) drained &= s->drained();
    if (!drained) continue;
    lane.engine->retire(*run, run == lane.mine);
    return true;
  }
  return any;
}

std::string describeWaits(const std::vector<Lane>& lanes, size_t n) {
  std::string waiting;
  for (size_t l = 0; l < n; ++l) {
    if (!lanes[l].driving) continue;
    for (const Run* run : lanes[l].view)
      for (const PrimTask* t : run->tasks)
        if (!t->done()) waiting += "\n  " + t->waitingFor();
  }
  return waiting;
}

bool anyTaskLeft(const std::vector<Lane>& lanes, size_t n) {
  for (size_t l = 0; l < n; ++l)
    if (lanes[l].driving)
      for (const Run* run : lanes[l].view)
        if (!run->tasksDone) return true;
  return false;
}

void checkPeers(const std::vector<Lane>& lanes, size_t n) {
  for (size_t l = 0; l < n; ++l) {
    if (!lanes[l].driving) continue;
    for (const Run* run : lanes[l].view) {
      for (const PrimTask* t : run->tasks)
        if (!t->done()) t->checkPeer();
      if (run->tasksDone)
        for (auto* s : run->sends)
          if (!s->drained()) s->checkPeer();
    }
  }
}

transport::WaitArm armLane(const Lane& lane, transport::WaitSet& set) {
  if (lane.driving) {
    for (const Run* run : lane.view) {
      if (!run->tasksDone) {
        for (size_t i = 0; i < run->tasks.size(); ++i) {
          const PrimTask& t = *run->tasks[i];
          if (t.done() || !mayStep(*run, i)) continue;
          const transport::WaitArm state = t.armWait(set);
          if (state != transport::WaitArm::kArmed) return state;
        }
        continue;
      }
      for (auto* s : run->sends) {
        if (s->drained()) continue;
        const transport::WaitArm state = s->armWait(set, /*drain=*/true);
        if (state != transport::WaitArm::kArmed) return state;
      }
    }
    // A driver hears of new runs through the doorbell only where several runs have met: a
    // doorbell beside a socket's descriptor makes the sleep a short poll (wait.h).
    if (!lane.engine->shared()) return transport::WaitArm::kArmed;
  }
  set.arm(lane.engine->bell());
  return transport::WaitArm::kArmed;
}

// A thread that drives none of its communicators: spin and yield a little (a small run is
// often finished within microseconds), then sleep on the engines' doorbells, which ring when
// a run finishes for another thread and when the driver leaves. Every ring bumps the word, so
// a ring between arming and sleeping only makes the sleep return at once.
void waitAsOwner(const std::vector<Lane>& lanes, size_t n, unsigned round) {
  if (round < 64) {
    __builtin_ia32_pause();
    return;
  }
  if (round < 128) {
    sched_yield();
    return;
  }
  transport::WaitSet set;
  set.clear();
  bool ready = false;
  for (size_t i = 0; i < n; ++i) {
    if (lanes[i].mine->finished.load(std::memory_order_acquire)) continue;
    set.arm(lanes[i].engine->bell());
    ready |= !lanes[i].engine->driven();
  }
  if (!ready) set.sleep(std::chrono::duration_cast<std::chrono::microseconds>(Backoff::kMaxSleep));
  set.lower();
}

}  // namespace

void driveRuns(std::span<Comm* const> comms, std::span<Run* const> runs, RegisterHook hook) {
  thread_local std::vector<Lane> tlsLanes;
  std::vector<Lane>& lanes = tlsLanes;
  const size_t n = comms.size();
  if (lanes.size() < n) lanes.resize(n);
  bool oversubscribed = false;
  for (size_t i = 0; i < n; ++i) {
    Lane& lane = lanes[i];
    lane.comm = comms[i];
    lane.engine = &engineOf(*comms[i]);
    lane.mine = runs[i];
    lane.mine->reset();
    lane.driving = lane.engine->enter(
        *lane.mine,
        [&](bool alone) {
          if (hook.call != nullptr) hook.call(hook.context, i, alone);
        },
        lane.view, lane.version);
    if (lane.driving) viewChanged(lane);
    oversubscribed |= plannerState(*comms[i]).oversubscribed();
  }
  const std::chrono::milliseconds timeout = callTimeout(comms);
  Backoff backoff;
  backoff.yieldAtOnce(oversubscribed);
  std::exception_ptr failure;  // this thread's own failure while driving
  unsigned ownerRounds = 0;    // idle rounds without driving anything
  for (;;) {
    bool any = false, allMine = true, anyDriving = false;
    try {
      for (size_t i = 0; i < n; ++i) {
        Lane& lane = lanes[i];
        if (!lane.driving && !lane.mine->finished.load(std::memory_order_acquire) &&
            lane.engine->tryDrive(lane.view, lane.version)) {
          lane.driving = true;
          viewChanged(lane);
          any = true;
        }
        if (lane.driving && failure != nullptr) {
          // A failed run's owner returns as soon as it is failed, and may free its buffers at
          // once: no connection may read a step it posted by address after that.
          for (auto* s : lane.sends) s->dropPostedSteps();
          lane.engine->failAll(failure);  // fails this thread's run there too
          lane.engine->leave();
          lane.driving = false;
          lane.view.clear();
          any = true;
        } else if (lane.driving) {
          if (lane.engine->refresh(lane.view, lane.version)) {
            viewChanged(lane);
            any = true;
          }
          any |= stepLane(lane);
        }
        allMine &= lane.mine->finished.load(std::memory_order_acquire);
        anyDriving |= lane.driving;
      }
      if (allMine) break;
      if (any) {
        backoff.reset();
        ownerRounds = 0;
        continue;
      }
      if (!anyDriving) {
        waitAsOwner(lanes, n, ownerRounds++);
        continue;
      }
      if (failure == nullptr) {
        for (size_t i = 0; i < n; ++i)
          if (lanes[i].driving) throwIfAborted(lanes[i].comm->abortFlag(), "a collective");
        if (timeout.count() > 0 && backoff.waited() > timeout && anyTaskLeft(lanes, n))
          throwStalled(timeout, describeWaits(lanes, n));
        if (backoff.peerCheckDue()) checkPeers(lanes, n);
      }
    } catch (...) {
      // Every run the failure touches fails with it (their communicators are failed); runs of
      // this call elsewhere fail once this thread drives there, or finish under their driver.
      failure = std::current_exception();
      continue;
    }
    backoff.idle([&](transport::WaitSet& set) {
      for (size_t i = 0; i < n; ++i) {
        if (lanes[i].mine->finished.load(std::memory_order_acquire) && !lanes[i].driving) continue;
        const transport::WaitArm state = armLane(lanes[i], set);
        if (state != transport::WaitArm::kArmed) return state;
      }
      return transport::WaitArm::kArmed;
    });
  }
  for (size_t i = 0; i < n; ++i) {
    if (lanes[i].driving) lanes[i].engine->leave();
    lanes[i].driving = false;
    lanes[i].view.clear();
  }
  for (size_t i = 0; i < n; ++i)
    if (runs[i]->error != nullptr) std::rethrow_exception(runs[i]->error);
}

}  // namespace loom
