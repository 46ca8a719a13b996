#include "src/core/executor.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <map>
#include <set>
#include <thread>

#include "src/core/comm.h"
#include "src/core/error.h"
#include "src/core/exchange_now.h"
#include "src/core/logging.h"
#include "src/core/planner.h"
#include "src/core/planner_state.h"
#include "src/core/pull_policy.h"
#include "src/core/task_loop.h"
#include "src/kernels/datatype_traits.h"

namespace loom {
namespace {

using algo::Prim;

struct Overlap {
  size_t send;  // indices into ops
  size_t recv;
};

// What one call needs besides its tasks, kept per thread and reused: once warm, a call
// allocates nothing here (clear() keeps capacity).
struct Scratch {
  std::vector<Comm*> comms;
  std::vector<std::unique_lock<std::mutex>> locks;
  std::vector<LinkRequest> wanted;
  std::vector<std::unique_ptr<PrimTask>> tasks;
  // (connection, task index) for every link of every task, sorted: neighbours are the order in
  // which tasks use a connection.
  std::vector<std::pair<const void*, size_t>> uses;
  std::vector<TasksBefore> before;
  std::vector<PrimTask*> taskPtrs;  // tasks, as runTaskLoop takes them
  std::vector<transport::SendConnection*> sends;
  std::vector<transport::RecvConnection*> recvs;
  struct Interval {
    uintptr_t begin, end;  // [begin, end) of a Recv buffer
    size_t op;
    bool operator<(const Interval& o) const { return begin < o.begin; }
  };
  std::vector<Interval> received;
  std::vector<Overlap> overlaps;
  std::vector<size_t> firstTask;  // per op: its first task's index
};
using Interval = Scratch::Interval;

// nccl-tests' in-place send/recv: a Send whose buffer a Recv of the same group overwrites.
// Such a Send is marked (its peer must get a copy, never read that memory in place) and the
// Recv's task is gated on the Send's (step i of the receive overwrites only what step i of the
// send has copied out). Both must then start at the same address: other overlaps have no
// order that works, so they are refused.
void findOverwrittenInputs(std::vector<CollOp>& ops, Scratch& scratch) {
  auto& received = scratch.received;
  received.clear();
  scratch.overlaps.clear();
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
    for (const Interval& r : received) {
      if (r.begin >= end) break;  // sorted: no later one overlaps
      if (r.end <= begin) continue;
      LOOM_ENFORCE(r.begin == begin, InvalidUsage, "rank ", op.comm->rank(),
                   ": a loomSend buffer and a loomRecv buffer of one group overlap at "
                   "different offsets; use the very same buffer (in place) or separate ones");
      op.inputOverwritten = true;
      scratch.overlaps.push_back({s, r.op});
    }
  }
}
void runLocked(std::vector<CollOp>& ops, Scratch& scratch);

}  // namespace

void runOps(std::vector<CollOp>& ops) {
  if (ops.empty()) return;
  if (ops.size() == 1 && runExchangeNow(ops.front())) return;
  thread_local Scratch scratch;
  // One executor per communicator at a time; lock in a fixed order so groups spanning several
  // communicators cannot deadlock against each other.
  std::vector<Comm*>& comms = scratch.comms;
  comms.clear();
  for (const CollOp& op : ops) comms.push_back(op.comm.get());
  std::sort(comms.begin(), comms.end());
  comms.erase(std::unique(comms.begin(), comms.end()), comms.end());
  // Every communicator of the group reports the error (a group's own calls have none).
  try {
    // Before anything is locked or connected: a refused group leaves the communicators usable.
    findOverwrittenInputs(ops, scratch);
  } catch (const Error& e) {
    for (Comm* c : comms) c->setLastError(e.what());
    throw;
  }
  scratch.locks.clear();
  for (Comm* c : comms) scratch.locks.emplace_back(c->executionMutex());
  try {
    runLocked(ops, scratch);
  } catch (const Error& e) {
    for (Comm* c : comms) {
      c->setLastError(e.what());
      c->markFailed(e.code());
    }
    scratch.locks.clear();
    throw;
  }
  scratch.locks.clear();
}

namespace {

// Connects what the operations need that is missing. With several communicators each connects
// on its own thread: one thread may drive all ranks of a job (loomCommInitAll + a group), and
// each rank's setup waits for its peers'.
void connectAll(std::vector<CollOp>& ops, Scratch& scratch) {
  if (scratch.comms.size() == 1) {
    scratch.wanted.clear();
    for (const CollOp& op : ops) wantedConnections(op, scratch.wanted);
    scratch.comms.front()->connect(scratch.wanted);
    return;
  }
  std::map<Comm*, std::vector<LinkRequest>> wanted;
  for (const CollOp& op : ops) wantedConnections(op, wanted[op.comm.get()]);
  std::vector<std::thread> threads;
  std::vector<std::exception_ptr> errors(wanted.size());
  size_t i = 0;
  for (auto& [comm, keys] : wanted) {
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

// A send to oneself is a local copy: pair it with the receive from oneself of the same
// communicator, in posting order, as NCCL does. Rare, so it may allocate.
void planSelfCopies(std::vector<CollOp>& ops, std::vector<CollOp>& selfCopies) {
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

// Tasks sharing a connection run in submission order: a task may step only once the task
// before it on each of its connections is done (which implies all earlier ones are).
void orderByConnection(Scratch& scratch) {
  auto& uses = scratch.uses;
  auto& tasks = scratch.tasks;
  uses.clear();
  for (size_t i = 0; i < tasks.size(); ++i) {
    const TaskLinks& l = tasks[i]->links();
    for (int k = 0; k < l.nsend; ++k) uses.push_back({l.send[k], i});
    for (int k = 0; k < l.nrecv; ++k) uses.push_back({l.recv[k], i});
  }
  std::sort(uses.begin(), uses.end());
  scratch.before.assign(tasks.size(), {});
  for (size_t u = 1; u < uses.size(); ++u) {
    if (uses[u].first != uses[u - 1].first) continue;
    auto& slots = scratch.before[uses[u].second];
    for (auto& slot : slots) {
      if (slot == nullptr) {
        slot = tasks[uses[u - 1].second].get();
        break;
      }
    }
  }
  scratch.sends.clear();
  scratch.recvs.clear();
  for (size_t i = 0; i < tasks.size(); ++i) {
    const TaskLinks& l = tasks[i]->links();
    for (int k = 0; k < l.nsend; ++k) scratch.sends.push_back(l.send[k]);
    for (int k = 0; k < l.nrecv; ++k) scratch.recvs.push_back(l.recv[k]);
  }
  std::sort(scratch.sends.begin(), scratch.sends.end());
  scratch.sends.erase(std::unique(scratch.sends.begin(), scratch.sends.end()), scratch.sends.end());
  std::sort(scratch.recvs.begin(), scratch.recvs.end());
  scratch.recvs.erase(std::unique(scratch.recvs.begin(), scratch.recvs.end()), scratch.recvs.end());
}

void runLocked(std::vector<CollOp>& ops, Scratch& scratch) {
  const std::vector<Comm*>& comms = scratch.comms;
  connectAll(ops, scratch);

  std::vector<std::unique_ptr<PrimTask>>& tasks = scratch.tasks;
  tasks.clear();
  std::vector<CollOp> selfCopies;  // outlives the tasks that refer to it (declared first)
  struct ClearTasks {
    std::vector<std::unique_ptr<PrimTask>>& tasks;
    ~ClearTasks() { tasks.clear(); }
  } clearTasks{tasks};
  // A single call chooses whether its steps between processes may be pulled with CMA and
  // reports how long it took (pull_policy.h); the ops of a group pull only in "always" mode.
  PullPolicy::Ticket pull;
  if (ops.size() == 1) {
    CollOp& op = ops.front();
    pull = op.comm->pullPolicy().decide(op.kind, op.count * dataTypeSize(op.type));
    op.mayPull = pull.pull;
  } else {
    for (CollOp& op : ops) op.mayPull = op.comm->pullPolicy().pullsAlways();
  }
  // Only measured calls read the clock (a small call's whole cost is well under a microsecond).
  const auto start =
      pull.group >= 0 ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point{};
  bool anySelf = false;
  scratch.firstTask.assign(ops.size(), 0);
  for (const CollOp& op : ops) {
    if ((op.kind == CollKind::kSend || op.kind == CollKind::kRecv) && op.peer == op.comm->rank()) {
      anySelf = true;
      continue;  // paired below
    }
    scratch.firstTask[&op - ops.data()] = tasks.size();
    planOp(op, op.comm->nextOpNumber(), tasks);
  }
  for (const auto& [send, recv] : scratch.overlaps) {
    // A Send or Recv to another rank is one task; to oneself it is a local copy (no gate needed:
    // the copy reads before it writes).
    if (ops[send].peer == ops[send].comm->rank() || ops[recv].peer == ops[recv].comm->rank())
      continue;
    tasks[scratch.firstTask[recv]]->setGate(tasks[scratch.firstTask[send]].get());
  }
  if (anySelf) {
    planSelfCopies(ops, selfCopies);
    for (const CollOp& copy : selfCopies) {
      tasks.push_back(std::make_unique<PrimTask>(
          copy, algo::pipeProgram(Prim::kCopy, 0, 0, copy.count, size_t{1} << 18, false),
          TaskLinks{}, TaskLabel{"copy to self"}));
    }
  }
  orderByConnection(scratch);
  std::vector<PrimTask*>& taskPtrs = scratch.taskPtrs;
  taskPtrs.clear();
  for (auto& t : tasks) taskPtrs.push_back(t.get());
  runTaskLoop(TaskLoop{taskPtrs, scratch.before, scratch.sends, scratch.recvs, comms});
  if (pull.group >= 0) {
    const auto took = std::chrono::steady_clock::now() - start;
    ops.front().comm->pullPolicy().record(
        pull, static_cast<uint64_t>(std::chrono::nanoseconds(took).count()));
  }
}

}  // namespace

}  // namespace loom
