#include "src/exec/cpu/executor.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <map>
#include <set>
#include <span>
#include <thread>

#include "src/base/error.h"
#include "src/base/logging.h"
#include "src/comm/comm.h"
#include "src/exec/cpu/bind_plan.h"
#include "src/exec/cpu/exchange_now.h"
#include "src/exec/cpu/progress_engine.h"
#include "src/exec/cpu/shm_way_policy.h"
#include "src/exec/cpu/staging.h"
#include "src/exec/cpu/task_loop.h"
#include "src/exec/host_stream.h"
#include "src/kernels/datatype_traits.h"
#include "src/plan/planner.h"
#include "src/plan/planner_state.h"

namespace loom {
namespace {

using algo::Prim;

// What one call needs besides its tasks, kept per thread and reused: once warm, a call
// allocates nothing here (clear() keeps capacity).
struct Scratch {
  std::vector<Comm*> comms;                         // sorted, distinct: one run each
  std::vector<std::unique_lock<std::mutex>> locks;  // their connection tables, while planning
  std::vector<LinkRequest> wanted;
  std::vector<std::unique_ptr<PrimTask>> tasks;
  std::vector<Comm*> taskComm;      // per task
  std::vector<PrimTask*> taskPtrs;  // tasks grouped by communicator, each in submission order
  std::vector<TasksBefore> before;  // per entry of taskPtrs
  std::vector<ConnectionUse> uses;  // of one run, sorted: neighbours are the order of use
  std::vector<ConnectionUse> firstUses, lastUses;
  std::vector<transport::SendConnection*> sends;
  std::vector<transport::RecvConnection*> recvs;
  // Per communicator c, [x[c], x[c + 1]) is its run's range of each array above.
  std::vector<size_t> taskBegin, useBegin, sendBegin, recvBegin;
  std::vector<std::unique_ptr<Run>> runs;  // grows only: a Run must not move
  std::vector<Run*> runPtrs;
  std::vector<RecvInterval> received;
  std::vector<SendRecvOverlap> overlaps;
  std::vector<size_t> firstTask;        // per op: its first task's index
  std::vector<CpuCallFlags> flags;      // per op: what its tasks read (PrimTask::setFlags)
  std::vector<CpuCallFlags> copyFlags;  // per copy to self
};

void findOverwrittenInputs(std::vector<CollOp>& ops, Scratch& scratch) {
  pairOverwrittenInputs(ops, scratch.received, scratch.overlaps);
}
void runPlanned(std::vector<CollOp>& ops, Scratch& scratch);

}  // namespace

void pairOverwrittenInputs(std::vector<CollOp>& ops, std::vector<RecvInterval>& received,
                           std::vector<SendRecvOverlap>& overlaps) {
  received.clear();
  overlaps.clear();
  for (size_t i = 0; i < ops.size(); ++i) {
    const CollOp& op = ops[i];
    if (op.kind != CollKind::kRecv || op.count == 0) continue;
    const auto begin = reinterpret_cast<uintptr_t>(op.recvbuff);
    received.push_back({begin, begin + op.count * dataTypeSize(op.type), i});
  }
  if (received.empty()) return;
  std::sort(received.begin(), received.end());
  for (size_t s = 0; s < ops.size(); ++s) {
    CollOp& op = ops[s];
    if (op.kind != CollKind::kSend || op.count == 0) continue;
    const auto begin = reinterpret_cast<uintptr_t>(op.sendbuff);
    const uintptr_t end = begin + op.count * dataTypeSize(op.type);
    for (const RecvInterval& r : received) {
      if (r.begin >= end) break;  // sorted: no later one overlaps
      if (r.end <= begin || ops[r.op].comm != op.comm) continue;
      LOOM_ENFORCE(r.begin == begin, InvalidUsage, "rank ", op.comm->rank(),
                   ": a loomSend buffer and a loomRecv buffer of one group overlap at "
                   "different offsets; use the very same buffer (in place) or separate ones");
      op.inputOverwritten = true;
      overlaps.push_back({s, r.op});
    }
  }
}

void connectComms(const std::map<Comm*, std::vector<LinkRequest>>& wanted) {
  if (wanted.size() == 1) {
    wanted.begin()->first->connect(wanted.begin()->second);
    return;
  }
  std::vector<std::thread> threads;
  std::vector<std::exception_ptr> errors(wanted.size());
  size_t i = 0;
  for (const auto& [comm, keys] : wanted) {
    threads.emplace_back([&, comm = comm, keys = &keys, i] {
      try {
        comm->connect(*keys);
      } catch (...) {
        errors[i] = std::current_exception();
      }
    });
    ++i;
  }
  for (auto& t : threads) t.join();
  for (auto& e : errors)
    if (e) std::rethrow_exception(e);
}

void planSelfCopies(const std::vector<CollOp>& ops, std::vector<CollOp>& selfCopies) {
  std::map<Comm*, std::vector<const CollOp*>> selfSends, selfRecvs;
  for (const CollOp& op : ops) {
    if (op.peer != op.comm->rank()) continue;
    if (op.kind == CollKind::kSend) selfSends[op.comm.get()].push_back(&op);
    if (op.kind == CollKind::kRecv) selfRecvs[op.comm.get()].push_back(&op);
  }
  for (auto& [comm, sendsToSelf] : selfSends) {
    std::vector<const CollOp*>& recvsFromSelf = selfRecvs[comm];
    LOOM_ENFORCE(sendsToSelf.size() == recvsFromSelf.size(), InvalidUsage, "rank ", comm->rank(),
                 " posted ", sendsToSelf.size(), " send(s) to itself and ", recvsFromSelf.size(),
                 " receive(s) from itself; post them in the same group, one receive per send");
    for (size_t i = 0; i < sendsToSelf.size(); ++i) {
      const CollOp& send = *sendsToSelf[i];
      const CollOp& recv = *recvsFromSelf[i];
      LOOM_ENFORCE(send.count * dataTypeSize(send.type) == recv.count * dataTypeSize(recv.type),
                   InvalidUsage, "rank ", comm->rank(), " sends ", send.count,
                   " elements to itself but receives ", recv.count);
      CollOp copy = recv;
      copy.sendbuff = send.sendbuff;
      copy.kind = CollKind::kRecv;
      selfCopies.push_back(copy);
    }
  }
  for (auto& [comm, recvsFromSelf] : selfRecvs) {
    LOOM_ENFORCE(selfSends.count(comm) > 0 || recvsFromSelf.empty(), InvalidUsage, "rank ",
                 comm->rank(), " posted a receive from itself without a send to itself");
  }
}

void runOps(std::vector<CollOp>& ops) {
  if (ops.empty()) return;
  if (ops.size() == 1 && runExchangeNow(ops.front())) return;
  thread_local Scratch scratch;
  std::vector<Comm*>& comms = scratch.comms;
  comms.clear();
  for (const CollOp& op : ops) comms.push_back(op.comm.get());
  std::sort(comms.begin(), comms.end());
  comms.erase(std::unique(comms.begin(), comms.end()), comms.end());
  // Every communicator of the group reports the error (a group's own calls have none).
  try {
    // Before anything is connected: a refused group leaves the communicators usable.
    findOverwrittenInputs(ops, scratch);
  } catch (const Error& e) {
    for (Comm* c : comms) c->setLastError(e.what());
    throw;
  }
  try {
    runPlanned(ops, scratch);
  } catch (const Error& e) {
    for (Comm* c : comms) {
      c->setLastError(e.what());
      c->markFailed(e.code());
    }
    throw;
  }
}

namespace {

// Connects what the operations need that is missing.
void connectAll(std::vector<CollOp>& ops, Scratch& scratch) {
  if (scratch.comms.size() == 1) {
    scratch.wanted.clear();
    for (const CollOp& op : ops) wantedConnections(op, scratch.wanted);
    scratch.comms.front()->connect(scratch.wanted);
    return;
  }
  std::map<Comm*, std::vector<LinkRequest>> wanted;
  for (const CollOp& op : ops) wantedConnections(op, wanted[op.comm.get()]);
  connectComms(wanted);
}

// Groups the tasks by communicator into one run each. Tasks sharing a connection run in
// submission order: a task may step only once the task before it on each of its connections is
// done (which implies all earlier ones are, since tasks without steps are left out of the chain).
// Connections belong to one communicator, so the order is worked out run by run; the engine links a
// run to the earlier ones (first and last uses).
void buildRuns(Scratch& s) {
  const size_t nc = s.comms.size();
  s.taskPtrs.clear();
  s.taskBegin.assign(nc + 1, 0);
  for (size_t c = 0; c < nc; ++c) {
    s.taskBegin[c] = s.taskPtrs.size();
    for (size_t i = 0; i < s.tasks.size(); ++i)
      if (nc == 1 || s.taskComm[i] == s.comms[c]) s.taskPtrs.push_back(s.tasks[i].get());
  }
  s.taskBegin[nc] = s.taskPtrs.size();
  s.before.assign(s.taskPtrs.size(), {});
  s.firstUses.clear();
  s.lastUses.clear();
  s.sends.clear();
  s.recvs.clear();
  s.useBegin.assign(nc + 1, 0);
  s.sendBegin.assign(nc + 1, 0);
  s.recvBegin.assign(nc + 1, 0);
  for (size_t c = 0; c < nc; ++c) {
    const size_t b = s.taskBegin[c], e = s.taskBegin[c + 1];
    auto& uses = s.uses;
    uses.clear();
    s.useBegin[c] = s.firstUses.size();
    s.sendBegin[c] = s.sends.size();
    s.recvBegin[c] = s.recvs.size();
    for (size_t i = b; i < e; ++i) {
      // A task without steps (a zero-count send or receive) is done from the start: as a link of
      // the chain it would let the next task on its connections overtake the one before it.
      if (s.taskPtrs[i]->done()) continue;
      const TaskLinks& l = s.taskPtrs[i]->links();
      for (int k = 0; k < l.nsend; ++k) {
        uses.push_back({l.send[k], i - b});
        s.sends.push_back(l.send[k]);
      }
      for (int k = 0; k < l.nrecv; ++k) {
        uses.push_back({l.recv[k], i - b});
        s.recvs.push_back(l.recv[k]);
      }
    }
    std::sort(uses.begin(), uses.end());
    for (size_t u = 0; u < uses.size(); ++u) {
      const bool first = u == 0 || uses[u].connection != uses[u - 1].connection;
      const bool last = u + 1 == uses.size() || uses[u + 1].connection != uses[u].connection;
      if (first) s.firstUses.push_back(uses[u]);
      if (last) s.lastUses.push_back(uses[u]);
      if (first) continue;
      for (auto& slot : s.before[b + uses[u].task]) {
        if (slot == nullptr) {
          slot = s.taskPtrs[b + uses[u - 1].task];
          break;
        }
      }
    }
    auto dedupe = [](auto& v, size_t from) {
      std::sort(v.begin() + from, v.end());
      v.erase(std::unique(v.begin() + from, v.end()), v.end());
    };
    dedupe(s.sends, s.sendBegin[c]);
    dedupe(s.recvs, s.recvBegin[c]);
  }
  s.useBegin[nc] = s.firstUses.size();
  s.sendBegin[nc] = s.sends.size();
  s.recvBegin[nc] = s.recvs.size();
  while (s.runs.size() < nc) s.runs.push_back(std::make_unique<Run>());
  s.runPtrs.clear();
  for (size_t c = 0; c < nc; ++c) {
    Run& r = *s.runs[c];
    auto range = [c](auto& v, const std::vector<size_t>& begin) {
      return std::span(v.data() + begin[c], begin[c + 1] - begin[c]);
    };
    r.tasks = range(s.taskPtrs, s.taskBegin);
    r.before = range(s.before, s.taskBegin);
    r.sends = range(s.sends, s.sendBegin);
    r.recvs = range(s.recvs, s.recvBegin);
    r.firstUses = range(s.firstUses, s.useBegin);
    r.lastUses = range(s.lastUses, s.useBegin);
    s.runPtrs.push_back(&r);
  }
}

// A single call, or a group of Sends and Recvs on one communicator, chooses how its steps
// between processes move (shm_way_policy.h: the ring, the ring with streamed stores, or CMA
// pulls) and reports how long it took when it runs alone; other groups, and a call beside
// others, pull only in "always" mode and go through the ring otherwise. Decided as the call
// registers, under the engine's lock.
struct WayChoice {
  std::span<CollOp> ops;          // the single call or the Send/Recv group; empty: neither
  std::span<CpuCallFlags> flags;  // their flags
  ShmWayPolicy::Ticket ticket;
  std::chrono::steady_clock::time_point start;

  // A group that may choose: Sends and Recvs of one communicator, none of whose inputs a Recv
  // of the group overwrites (those are copied, never pulled: timing them would only time the
  // ring twice, in the group of the out-of-place calls of that size).
  static bool isChoosingP2pGroup(std::span<const CollOp> ops) {
    if (ops.size() < 2) return false;
    for (const CollOp& op : ops)
      if ((op.kind != CollKind::kSend && op.kind != CollKind::kRecv) || op.comm != ops[0].comm ||
          op.inputOverwritten)
        return false;
    return true;
  }
  static void decide(void* self, size_t, bool alone) {
    WayChoice& p = *static_cast<WayChoice*>(self);
    ShmWayPolicy& policy = cpuExecutorOf(*p.ops[0].comm).shmWayPolicy();
    if (p.ops.size() == 1) {
      p.ticket = policy.decide(p.ops[0].kind, p.ops[0].count * dataTypeSize(p.ops[0].type));
    } else {
      size_t largest = 0;
      for (const CollOp& op : p.ops) largest = std::max(largest, op.count * dataTypeSize(op.type));
      p.ticket = policy.decideP2pGroup(largest);
    }
    if (!alone) {
      p.ticket.way = policy.fixedWay();
      p.ticket.group = -1;  // its time would be the other runs' too
    }
    for (CpuCallFlags& f : p.flags) cpuExecutorOf(*p.ops[0].comm).takeWay(p.ticket.way, f);
    // Only measured calls read the clock (a small call's whole cost is well under a
    // microsecond).
    if (p.ticket.group >= 0) p.start = std::chrono::steady_clock::now();
  }
};

void runPlanned(std::vector<CollOp>& ops, Scratch& scratch) {
  connectAll(ops, scratch);

  std::vector<std::unique_ptr<PrimTask>>& tasks = scratch.tasks;
  tasks.clear();
  scratch.taskComm.clear();
  std::vector<CollOp> selfCopies;  // outlives the tasks that refer to it (declared first)
  struct ClearTasks {
    std::vector<std::unique_ptr<PrimTask>>& tasks;
    ~ClearTasks() { tasks.clear(); }
  } clearTasks{tasks};
  // Sized before any task points into it.
  std::vector<CpuCallFlags>& flags = scratch.flags;
  flags.assign(ops.size(), CpuCallFlags{});
  for (size_t i = 0; i < ops.size(); ++i) {
    CpuExecutor& executor = cpuExecutorOf(*ops[i].comm);
    flags[i].streamStores = executor.streamsStores(largestBufferBytes(ops[i]));
    // A group that does not choose (WayChoice) takes the fixed way; WayChoice sets the
    // others' when they register.
    if (ops.size() > 1) executor.takeWay(executor.shmWayPolicy().fixedWay(), flags[i]);
  }
  bool anySelf = false;
  scratch.firstTask.assign(ops.size(), 0);
  struct Unlock {
    std::vector<std::unique_lock<std::mutex>>& locks;
    ~Unlock() { locks.clear(); }
  } unlock{scratch.locks};
  scratch.locks.clear();
  for (Comm* c : scratch.comms) scratch.locks.push_back(c->lockConnections());
  for (const CollOp& op : ops) {
    if ((op.kind == CollKind::kSend || op.kind == CollKind::kRecv) && op.peer == op.comm->rank()) {
      anySelf = true;
      continue;  // paired below
    }
    const size_t index = static_cast<size_t>(&op - ops.data()), first = tasks.size();
    scratch.firstTask[index] = first;
    planOp(op, op.seq, tasks);
    for (size_t t = first; t < tasks.size(); ++t) {
      tasks[t]->setFlags(&flags[index]);
      // A single call stages in its thread's region (staging.h); a group's calls would need one
      // each, and fill slots instead.
      if (tasks[t]->stagesSends() && ops.size() == 1 && op.count > 0)
        flags[index].staging = threadStagingRegion(op.count * dataTypeSize(op.type));
    }
    scratch.taskComm.resize(tasks.size(), op.comm.get());
  }
  scratch.locks.clear();
  for (const auto& [send, recv] : scratch.overlaps) {
    // A Send or Recv to another rank is one task; to oneself it is a local copy (no gate needed:
    // the copy reads before it writes).
    if (ops[send].peer == ops[send].comm->rank() || ops[recv].peer == ops[recv].comm->rank())
      continue;
    tasks[scratch.firstTask[recv]]->setGate(tasks[scratch.firstTask[send]].get());
  }
  if (anySelf) {
    planSelfCopies(ops, selfCopies);
    scratch.copyFlags.assign(selfCopies.size(), CpuCallFlags{});
    for (size_t i = 0; i < selfCopies.size(); ++i) {
      const CollOp& copy = selfCopies[i];
      scratch.copyFlags[i].streamStores =
          cpuExecutorOf(*copy.comm).streamsStores(copy.count * dataTypeSize(copy.type));
      tasks.push_back(std::make_unique<PrimTask>(
          copy, algo::pipeProgram(Prim::kCopy, 0, 0, copy.count, size_t{1} << 18, false),
          TaskLinks{}, TaskLabel{"copy to self"}));
      tasks.back()->setFlags(&scratch.copyFlags[i]);
      scratch.taskComm.push_back(copy.comm.get());
    }
  }
  buildRuns(scratch);
  WayChoice way;
  RegisterHook hook;
  if (ops.size() == 1 || WayChoice::isChoosingP2pGroup(ops)) {
    way.ops = ops;
    way.flags = flags;
    hook = RegisterHook{&WayChoice::decide, &way};
  }
  driveRuns(scratch.comms, scratch.runPtrs, hook);
  if (way.ticket.group >= 0) {
    const auto took = std::chrono::steady_clock::now() - way.start;
    Comm& c = *way.ops[0].comm;
    engineOf(c).locked([&] {
      cpuExecutorOf(c).shmWayPolicy().record(
          way.ticket, static_cast<uint64_t>(std::chrono::nanoseconds(took).count()));
    });
  }
}

}  // namespace

CpuExecutor::CpuExecutor(const Comm& comm)
    : shmWayPolicy_(ShmWayPolicy::fromEnv(plannerState(comm).oversubscribed(),
                                          plannerState(comm).networkOnly(),
                                          plannerState(comm).slotBytes())),
      streamMinBytes_(plannerState(comm).streamStoreMinBytes()),
      crossCoreCopies_(!plannerState(comm).oversubscribed()) {}

void CpuExecutor::runOne(CollOp& op) {
  if (runExchangeNow(op)) return;
  // No allocation once warm (the per-thread list keeps its capacity).
  thread_local std::vector<CollOp> one;
  struct Clear {  // the op holds its communicator: never keep it past the call
    std::vector<CollOp>& ops;
    ~Clear() { ops.clear(); }
  } clear{one};
  one.push_back(op);
  runOps(one);
}

void CpuExecutor::quiesce() {
  engine_.waitIdle();
  exchangeNowCache_.invalidate();  // its plans point at the connections the communicator drops
}

void CpuExecutor::resume() { engine_.endExclusive(); }

void CpuExecutor::addStream(std::weak_ptr<HostStream> stream) {
  std::lock_guard<std::mutex> lock(streamsMutex_);
  streams_.push_back(std::move(stream));
}

void CpuExecutor::drain() {
  std::vector<std::shared_ptr<HostStream>> live;
  {
    std::lock_guard<std::mutex> lock(streamsMutex_);
    for (auto& w : streams_)
      if (auto s = w.lock()) live.push_back(std::move(s));
  }
  for (auto& s : live) s->wait(s->enqueued());
}

CpuExecutor& cpuExecutorOf(const Comm& comm) {
  Executor& e = executorOf(comm);
  CpuExecutor* cpu = e.hostExecutor();
  LOOM_ENFORCE(cpu != nullptr, InvalidUsage, "the CPU executor of a ", e.device(), " communicator");
  return *cpu;
}

}  // namespace loom
