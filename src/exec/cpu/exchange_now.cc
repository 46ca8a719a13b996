#include "src/exec/cpu/exchange_now.h"

#include <span>
#include <utility>

#include "src/base/error.h"
#include "src/comm/comm.h"
#include "src/exec/cpu/backoff.h"
#include "src/exec/cpu/bind_plan.h"
#include "src/exec/cpu/executor.h"
#include "src/exec/cpu/progress_engine.h"
#include "src/exec/cpu/task_loop.h"
#include "src/plan/plan.h"
#include "src/plan/planner.h"
#include "src/plan/planner_state.h"

namespace loom {
namespace {

thread_local uint64_t tlsFastCalls = 0;

// Plans and binds `op`'s tasks into `plan`; false (plan left invalid) when a connection is
// not made yet (the general path connects).
bool makePlan(const CollOp& op, ExchangeNowPlan& plan) {
  plan.invalidate();
  for (int ch = 0; ch < exchangeChannelCount(op); ++ch) {
    PlanLinks out, in;
    size_t chunk = 0;
    if (!exchangeLinks(op, ch, out, in, chunk)) return false;
  }
  plan.op = op;
  thread_local Plan planned;
  buildPlan(plan.op, 0, planned);
  bindPlan(plan.op, planned, plan.tasks);
  plan.op.comm.reset();  // see ExchangeNowPlan::op
  plan.count = op.count;
  plan.type = op.type;
  plan.reduce = op.reduce;
  plan.protocol = op.protocol;
  plan.inPlace = op.sendbuff == op.recvbuff;
  plan.valid = true;
  return true;
}

// Drives the plan's tasks to the end of the call on this thread: steps every task that can
// step, pumps the connections (TCP moves data only then), and waits with the executor's
// Backoff while nothing moves; then waits until every send has left.
class CachedRun {
 public:
  CachedRun(Comm& comm, ExchangeNowPlan& plan)
      : comm_(&comm), tasks_(plan.tasks), timeout_(callTimeout(std::span(&comm_, 1))) {
    backoff_.yieldAtOnce(plannerState(comm).oversubscribed());
  }

  void run() {
    drive([&] {
      bool moved = false, all = true;
      for (auto& t : tasks_) {
        if (t->done()) continue;
        moved |= t->progress();
        all &= t->done();
      }
      return all ? Progress::kDone : moved ? Progress::kMoved : Progress::kStill;
    });
    drive([&] {
      for (auto& t : tasks_) {
        const TaskLinks& l = t->links();
        for (int k = 0; k < l.nsend; ++k)
          if (!l.send[k]->drained()) return Progress::kStill;
      }
      return Progress::kDone;
    });
  }

 private:
  enum class Progress { kDone, kMoved, kStill };

  template <typename Step>
  void drive(Step&& step) {
    backoff_.reset();
    for (;;) {
      const Progress p = step();
      if (p == Progress::kDone) return;
      if (p == Progress::kMoved || pumpConnections()) {
        backoff_.reset();
        continue;
      }
      throwIfAborted(comm_->abortFlag(), "a collective");
      const PrimTask* waiting = firstUnfinished();
      if (timeout_.count() > 0 && backoff_.waited() > timeout_)
        throwStalled(timeout_, "\n  " + (waiting ? waiting->waitingFor() : drainingWhat()));
      if (backoff_.peerCheckDue())
        for (auto& t : tasks_) t->checkPeer();
      backoff_.idle([&](transport::WaitSet& set) {
        return waiting ? waiting->armWait(set) : transport::WaitArm::kUnsupported;
      });
    }
  }

  bool pumpConnections() {
    bool moved = false;
    for (auto& t : tasks_) {
      const TaskLinks& l = t->links();
      for (int k = 0; k < l.nsend; ++k) moved |= l.send[k]->progress();
      for (int k = 0; k < l.nrecv; ++k) moved |= l.recv[k]->progress();
    }
    return moved;
  }

  const PrimTask* firstUnfinished() const {
    for (auto& t : tasks_)
      if (!t->done()) return t.get();
    return nullptr;
  }

  std::string drainingWhat() const {
    for (auto& t : tasks_) {
      const TaskLinks& l = t->links();
      for (int k = 0; k < l.nsend; ++k)
        if (!l.send[k]->drained()) return strCat("draining toward rank ", l.sendPeer[k]);
    }
    return "nothing";
  }

  Comm* comm_;
  std::vector<std::unique_ptr<PrimTask>>& tasks_;
  std::chrono::milliseconds timeout_;
  Backoff backoff_;
};

}  // namespace

bool runExchangeNow(CollOp& op) {
  Comm& c = *op.comm;
  if (op.algorithm != Algorithm::kExchange || op.count == 0 || c.nranks() == 1) return false;
  // Only alone: beside other runs the general path keeps the order on shared connections.
  ProgressEngine& engine = engineOf(c);
  if (!engine.tryExclusive()) return false;
  struct EndExclusive {
    ProgressEngine& engine;
    ~EndExclusive() { engine.endExclusive(); }
  } endExclusive{engine};
  ExchangeNowPlan& plan = cpuExecutorOf(c).exchangeNowPlan();
  if (!plan.matches(op)) {
    std::unique_lock<std::mutex> connections = c.lockConnections();
    if (!makePlan(op, plan)) return false;
  }
  // The tasks read plan.op: lend them this call's op, and take it back however the call ends.
  std::swap(plan.op, op);
  struct GiveBack {
    CollOp& a;
    CollOp& b;
    ~GiveBack() { std::swap(a, b); }
  } giveBack{plan.op, op};
  const uint64_t number = c.nextOpNumber();
  for (auto& t : plan.tasks) t->restart(number);
  ++tlsFastCalls;
  try {
    CachedRun(c, plan).run();
  } catch (const Error& e) {
    c.setLastError(e.what());
    c.markFailed(e.code());
    throw;
  }
  return true;
}

namespace testing {
uint64_t exchangeNowCallsOnThisThread() { return tlsFastCalls; }
}  // namespace testing

}  // namespace loom
