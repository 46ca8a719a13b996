#include "src/exec/cpu/exchange_now.h"

#include <algorithm>
#include <span>

#include "src/base/error.h"
#include "src/comm/comm.h"
#include "src/exec/cpu/backoff.h"
#include "src/exec/cpu/bind_plan.h"
#include "src/exec/cpu/executor.h"
#include "src/exec/cpu/progress_engine.h"
#include "src/exec/cpu/staging.h"
#include "src/exec/cpu/task_loop.h"
#include "src/kernels/datatype_traits.h"
#include "src/kernels/reduce_copy_dispatch.h"
#include "src/plan/plan.h"
#include "src/plan/planner.h"
#include "src/plan/planner_state.h"

namespace loom {
namespace {

thread_local uint64_t tlsFastCalls = 0;

template <typename T>
void addOnce(std::vector<T*>& list, T* item) {
  if (std::find(list.begin(), list.end(), item) == list.end()) list.push_back(item);
}

// The calls the fast path may take (exchange_now.h); the rest go down the general path.
bool fastShape(const CollOp& op) {
  if (op.count == 0 || op.comm->nranks() == 1 ||
      op.count > SIZE_MAX / dataTypeSize(op.type) / static_cast<size_t>(op.comm->nranks()))
    return false;
  switch (op.kind) {
    case CollKind::kAllReduce:
      return op.algorithm == Algorithm::kExchange;
    case CollKind::kAllGather:
    case CollKind::kReduceScatter:
    case CollKind::kBroadcast:
    case CollKind::kReduce:
      return (op.algorithm == Algorithm::kRing || op.algorithm == Algorithm::kChain ||
              op.algorithm == Algorithm::kExchange) &&
             largestBufferBytes(op) <= kFastMaxBytes;
    default:
      return false;
  }
}

// Every connection the planned tasks use is made (the planner sizes steps by them).
bool connected(Comm& c, const Plan& planned) {
  for (const TaskPlan& t : planned.tasks) {
    for (int k = 0; k < t.links.nsend; ++k)
      if (c.sendConnection(t.links.sendPeer[k], t.links.key) == nullptr) return false;
    for (int k = 0; k < t.links.nrecv; ++k)
      if (c.recvConnection(t.links.recvPeer[k], t.links.key) == nullptr) return false;
  }
  return true;
}

// Plans and binds `op`'s tasks into `plan`; false when the call goes down the general path:
// a connection is not made yet (the plan is left invalid: the general path connects), or an
// AllReduce shape has several steps a channel (kept as a valid plan that is not fast, so later
// calls of the shape need not plan again to learn it).
bool makePlan(const CollOp& op, ExchangeNowPlan& plan) {
  plan.invalidate();
  Comm* comm = op.comm.get();
  if (op.kind == CollKind::kAllReduce) {
    // The exchange's planner insists on its connections; ask first.
    for (int ch = 0; ch < exchangeChannelCount(op); ++ch) {
      PlanLinks out, in;
      size_t chunk = 0;
      if (!exchangeLinks(op, ch, out, in, chunk)) return false;
    }
  }
  thread_local Plan planned;
  buildPlan(op, 0, planned);
  if (!connected(*comm, planned)) return false;
  bindPlan(op, planned, plan.tasks);
  const ReduceCopyKernel kernel = reduceCopyKernel(op.type, op.reduce);
  plan.kind = op.kind;
  plan.algorithm = op.algorithm;
  plan.root = op.root;
  plan.count = op.count;
  plan.type = op.type;
  plan.reduce = op.reduce;
  plan.protocol = op.protocol;
  plan.inPlace = ExchangeNowPlan::isInPlace(op);
  plan.bytes = op.count * dataTypeSize(op.type);
  plan.largest = largestBufferBytes(op);
  plan.timeout = callTimeout(std::span(&comm, 1));
  plan.oversubscribed = plannerState(*comm).oversubscribed();
  plan.valid = true;
  for (size_t i = 0; i < plan.tasks.size(); ++i) {
    const size_t steps = algo::stepCount(planned.tasks[i].program);
    if (steps == 0) continue;
    // An exchange AllReduce of several steps a channel is large enough for the general
    // path's per-call choices (the CMA pull policy, streaming stores), which the cached tasks
    // leave out.
    if (steps > 1 && op.kind == CollKind::kAllReduce) {
      plan.live.clear();
      plan.sends.clear();
      plan.recvs.clear();
      plan.tasks.clear();
      return false;  // plan.fast stays false: this shape goes down the general path
    }
    PrimTask* t = plan.tasks[i].get();
    t->setKernel(kernel);
    t->setFlags(&plan.flags);
    plan.stages |= t->stagesSends();
    plan.live.push_back(t);
    const TaskLinks& l = t->links();
    for (int k = 0; k < l.nsend; ++k) addOnce(plan.sends, l.send[k]);
    for (int k = 0; k < l.nrecv; ++k) addOnce(plan.recvs, l.recv[k]);
  }
  CpuExecutor& executor = cpuExecutorOf(*comm);
  plan.flags.streamStores = executor.streamsStores(plan.largest);
  plan.fast = true;
  return true;
}

// The per-call part of the flags, as the general path's WayChoice decides it: calls too small
// for the way to matter take the fixed way without the engine's lock (an 8 B call's time is a
// few hundred nanoseconds); larger ones ask the policy, and report their time to it.
ShmWayPolicy::Ticket decideCall(ExchangeNowPlan& plan, CpuExecutor& executor) {
  ShmWayPolicy& policy = executor.shmWayPolicy();
  ShmWayPolicy::Ticket ticket;
  if (plan.bytes < ShmWayPolicy::kMeasuredMinBytes) {
    ticket.way = policy.fixedWay();
  } else {
    executor.engine().locked([&] { ticket = policy.decide(plan.kind, plan.bytes); });
  }
  executor.takeWay(ticket.way, plan.flags);
  // A single call stages in its thread's region (staging.h), so it is looked up per call.
  if (plan.stages) plan.flags.staging = threadStagingRegion(plan.bytes);
  return ticket;
}

// Drives the plan's tasks to the end of the call on this thread: steps every task that can
// step, pumps the connections (TCP moves data only then) when no task could, and waits with
// the executor's Backoff while nothing moves; then waits until every send has left.
class CachedRun {
 public:
  CachedRun(Comm& comm, const ExchangeNowPlan& plan) : comm_(&comm), plan_(plan) {
    backoff_.yieldAtOnce(plan.oversubscribed);
  }

  void run() {
    backoff_.reset();
    for (;;) {
      bool moved = false, all = true;
      for (PrimTask* t : plan_.live) {
        if (t->done()) continue;
        moved |= t->progress();
        all &= t->done();
      }
      if (all) break;
      if (moved || pump()) {
        backoff_.reset();
        continue;
      }
      const PrimTask* waiting = nullptr;
      for (PrimTask* t : plan_.live)
        if (!t->done()) {
          waiting = t;
          break;
        }
      // A sleep must end when any task can move, as the general path's (task_loop.cc,
      // armLane): armed on one task only, a peer's post to another task of the call went
      // unheard for up to the sleep's bound (10 ms), with more ranks than CPUs many times a
      // call of several tasks and steps.
      idle([&] { return waiting->waitingFor(); },
           [&](transport::WaitSet& set) {
             for (const PrimTask* t : plan_.live) {
               if (t->done()) continue;
               const transport::WaitArm state = t->armWait(set);
               if (state != transport::WaitArm::kArmed) return state;
             }
             return transport::WaitArm::kArmed;
           });
    }
    backoff_.reset();
    for (;;) {
      transport::SendConnection* undrained = nullptr;
      for (transport::SendConnection* s : plan_.sends)
        if (!s->drained()) {
          undrained = s;
          break;
        }
      if (undrained == nullptr) break;
      if (pump()) {
        backoff_.reset();
        continue;
      }
      idle([&] { return std::string("draining a send"); },
           [&](transport::WaitSet& set) {
             for (transport::SendConnection* s : plan_.sends) {
               if (s->drained()) continue;
               const transport::WaitArm state = s->armWait(set, /*drain=*/true);
               if (state != transport::WaitArm::kArmed) return state;
             }
             return transport::WaitArm::kArmed;
           });
    }
  }

 private:
  bool pump() {
    bool moved = false;
    for (transport::SendConnection* s : plan_.sends) moved |= s->progress();
    for (transport::RecvConnection* r : plan_.recvs) moved |= r->progress();
    return moved;
  }

  template <typename What, typename Arm>
  void idle(What&& what, Arm&& arm) {
    throwIfAborted(comm_->abortFlag(), "a collective");
    if (plan_.timeout.count() > 0 && backoff_.waited() > plan_.timeout)
      throwStalled(plan_.timeout, "\n  " + what());
    if (backoff_.peerCheckDue()) {
      for (PrimTask* t : plan_.live) t->checkPeer();
      for (transport::SendConnection* s : plan_.sends)
        if (!s->drained()) s->checkPeer();
    }
    backoff_.idle(arm);
  }

  Comm* comm_;
  const ExchangeNowPlan& plan_;
  Backoff backoff_;
};

}  // namespace

bool ExchangeNowPlan::isInPlace(const CollOp& o) {
  // As integers: a rank that passes no buffer it does not use must not make an offset null
  // pointer.
  const auto in = reinterpret_cast<uintptr_t>(o.sendbuff);
  const auto out = reinterpret_cast<uintptr_t>(o.recvbuff);
  if (o.kind != CollKind::kAllGather && o.kind != CollKind::kReduceScatter) return in == out;
  // Only these two place one buffer at this rank's block of the other (an AllReduce's lookup,
  // the 8 B call's, stops above).
  const size_t block = o.count * dataTypeSize(o.type) * static_cast<size_t>(o.comm->rank());
  return o.kind == CollKind::kAllGather ? in == out + block : out == in + block;
}

bool runExchangeNow(CollOp& op) {
  Comm& c = *op.comm;
  if (!fastShape(op)) return false;
  // Only alone: beside other runs the general path keeps the order on shared connections.
  CpuExecutor& executor = cpuExecutorOf(c);
  ProgressEngine& engine = executor.engine();
  if (!engine.tryExclusive()) return false;
  struct EndExclusive {
    ProgressEngine& engine;
    ~EndExclusive() { engine.endExclusive(); }
  } endExclusive{engine};
  ExchangeNowCache& cache = executor.exchangeNowCache();
  ExchangeNowPlan* found = cache.find(op);
  if (found == nullptr) {
    found = &cache.replaceOldest();
    std::unique_lock<std::mutex> connections = c.lockConnections();
    if (!makePlan(op, *found)) return false;
  }
  ExchangeNowPlan& plan = *found;
  if (!plan.fast) return false;
  // The tasks reduce without reduceCopy's checks (ExchangeNowPlan::tasks): partly
  // overlapping buffers are the one thing they would catch that varies per call, and the
  // general path reports it. Buffers overlap only as the shape's in-place call has them.
  if (!plan.inPlace) {
    const auto in = reinterpret_cast<uintptr_t>(op.sendbuff);
    const auto out = reinterpret_cast<uintptr_t>(op.recvbuff);
    const size_t inBytes = op.kind == CollKind::kReduceScatter ? plan.largest : plan.bytes;
    const size_t outBytes = op.kind == CollKind::kAllGather ? plan.largest : plan.bytes;
    if (in < out + outBytes && out < in + inBytes) return false;
  }
  const uint64_t number = op.seq;
  const ShmWayPolicy::Ticket ticket = decideCall(plan, executor);
  const auto start = ticket.group >= 0 ? std::chrono::steady_clock::now()
                                       : std::chrono::steady_clock::time_point{};
  for (PrimTask* t : plan.live) t->restart(op, number);
  ++tlsFastCalls;
  try {
    CachedRun(c, plan).run();
  } catch (const Error& e) {
    // The caller may free its buffers once this returns (transport.h, dropPostedSteps).
    for (transport::SendConnection* s : plan.sends) s->dropPostedSteps();
    c.setLastError(e.what());
    c.markFailed(e.code());
    throw;
  }
  if (ticket.group >= 0) {
    const auto took = std::chrono::steady_clock::now() - start;
    engine.locked([&] {
      executor.shmWayPolicy().record(ticket,
                                     static_cast<uint64_t>(std::chrono::nanoseconds(took).count()));
    });
  }
  return true;
}

namespace testing {
uint64_t exchangeNowCallsOnThisThread() { return tlsFastCalls; }
}  // namespace testing

}  // namespace loom
