#include "src/core/task_loop.h"

#include <algorithm>
#include <chrono>
#include <string>

#include "src/core/backoff.h"
#include "src/core/comm.h"
#include "src/core/error.h"
#include "src/core/planner_state.h"

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

void runTaskLoop(const TaskLoop& loop) {
  const auto& tasks = loop.tasks;
  auto mayStep = [&](size_t i) {
    if (loop.before.empty()) return true;
    for (const PrimTask* b : loop.before[i])
      if (b != nullptr && !b->done()) return false;
    return true;
  };
  const std::chrono::milliseconds timeout = callTimeout(loop.comms);
  Backoff backoff;
  bool oversubscribed = false;
  for (Comm* c : loop.comms) oversubscribed |= c->plannerState().oversubscribed();
  backoff.yieldAtOnce(oversubscribed);
  for (;;) {
    bool any = false, allDone = true;
    for (auto* s : loop.sends) any |= s->progress();
    for (auto* r : loop.recvs) any |= r->progress();
    for (size_t i = 0; i < tasks.size(); ++i) {
      PrimTask& t = *tasks[i];
      if (t.done()) continue;
      if (mayStep(i)) any |= t.progress();
      allDone &= t.done();
    }
    if (allDone) break;
    if (any) {
      backoff.reset();
      continue;
    }
    for (Comm* c : loop.comms) throwIfAborted(c->abortFlag(), "a collective");
    if (timeout.count() > 0 && backoff.waited() > timeout) {
      std::string waiting;
      for (auto& t : tasks)
        if (!t->done()) waiting += "\n  " + t->waitingFor();
      throwStalled(timeout, waiting);
    }
    if (backoff.peerCheckDue())
      for (auto& t : tasks)
        if (!t->done()) t->checkPeer();
    backoff.idle([&](transport::WaitSet& set) {
      for (size_t i = 0; i < tasks.size(); ++i) {
        if (tasks[i]->done() || !mayStep(i)) continue;
        const transport::WaitArm state = tasks[i]->armWait(set);
        if (state != transport::WaitArm::kArmed) return state;
      }
      return transport::WaitArm::kArmed;
    });
  }
  // Posted slots must reach the kernel before we return: a rank that goes on to finalize
  // stops pumping its connections, and its peers would wait for data still in our slot ring
  // (socket). shm slots are in the peer's view already, so they drain at once.
  for (;;) {
    bool drained = true;
    for (auto* s : loop.sends) {
      s->progress();
      drained &= s->drained();
    }
    if (drained) break;
    for (Comm* c : loop.comms) throwIfAborted(c->abortFlag(), "a collective");
    if (backoff.peerCheckDue())
      for (auto* s : loop.sends)
        if (!s->drained()) s->checkPeer();
    backoff.idle([&](transport::WaitSet& set) {
      for (auto* s : loop.sends) {
        const transport::WaitArm state =
            s->drained() ? transport::WaitArm::kArmed : s->armWait(set, /*drain=*/true);
        if (state != transport::WaitArm::kArmed) return state;
      }
      return transport::WaitArm::kArmed;
    });
  }
}

}  // namespace loom
